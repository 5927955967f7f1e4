// Package attacks is the attacker's suite across slurmbridge's components: integration tests
// (build tag integration, names TestAttack...) in which alice, bob or carol, the testbed's
// unprivileged users, try what no user may do to another's jobs, quotas, daemons and files,
// through Slurm's commands, quotad's and elasticd's APIs and the file system. Each asserts a
// clear refusal and, with the testbed harness's World, that nothing else changed: no node
// drained or down, the other users' jobs, the daemons' processes and the guarded files as they
// were. TestAttackSubmitAndUpdateStorm throws a seeded random mix of submissions and updates
// at the job_submit plugin while quotad lends and reclaims.
//
// The package holds tests only; run them against a testbed (make testbed-up):
//
//	go test -count=1 -tags integration ./attacks/
package attacks
