package view

import "github.com/slurmbridge/slurmbridge/bridge/auth"

// Project and GPU type positions are open to anyone who reaches the address, as sshare and
// `sacctmgr show qos` are; a job's explanation is its owner's, root's and Slurm's operators'
// only, and a request for one carries a MUNGE credential (bridge/auth).

// CredentialPayload is what the credential of a request to quotad's API must hold: quotad's
// own, so that a credential made for elasticd's API is never taken here.
func CredentialPayload(method, path string) string {
	return "slurmbridge-quotad-api " + method + " " + path
}

// API is quotad's API as its credentials see it: quotad's payload, and the 401's words.
var API = auth.API{
	Payload: CredentialPayload,
	Private: "job explanations are private to their owners",
	Client:  "quotactl does",
}
