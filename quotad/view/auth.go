package view

import (
	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
)

// Project and GPU type positions are open to anyone who reaches the address, as sshare and
// `sacctmgr show qos` are; a job's explanation is its owner's, root's and Slurm's operators'
// only, and a request for one carries a MUNGE credential (bridge/auth).

// API is quotad's API as its credentials see it: quotad's payload, and the 401's words.
var API = auth.API{
	Payload: quotaapi.CredentialPayload,
	Private: "job explanations are private to their owners",
	Client:  "quotactl does",
}
