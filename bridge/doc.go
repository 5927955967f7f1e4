// Package bridge is slurmbridge's ground floor: the Slurm vocabulary (gpureq, jobreason), pool
// selection (pools), the adapters that talk to Slurm (slurm, slurmdbd), what the daemons' HTTP
// servers share (auth: who sends a request, by its MUNGE credential; serve: listening with
// bounds), command-line helpers (cliargs), quotad's read-only API as its readers see it
// (quotaapi), small summaries (stats) and the testbed harness (testbed). The components above
// it (the job_submit plugin, quotad, elasticd, poolctl, doctor, bench) import it; it imports
// none of them, so any of them can be read, tested and changed without the others.
package bridge
