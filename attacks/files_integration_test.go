//go:build integration

package attacks

import (
	"path/filepath"
	"testing"
	"time"
)

// alice can neither read the testbed's secrets (the database password quotad and quotactl
// use, slurmdbd.conf, the MUNGE key) nor write where root's scripts and the daemons read
// from: the env file the daemons' scripts source, the kept facts, the pid files that say which
// process to stop, the plugins slurmctld loads, pools.yaml, the daemons' logs, elasticd's
// state directory. quotad keeps its state in the database, not in files. The modes are the
// testbed's (testbed/testbed.sh make_layout, write_configs); the packages' are packaging/'s.
func TestAttackStateAndSecretFiles(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	held, running := a.victims(ctx, t)
	d := a.c.Dir
	secrets := []string{
		a.c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"],
		filepath.Join(d, "etc", "slurmdbd.conf"),
		filepath.Join(d, "state", "munge", "munge.key"),
	}
	// Files that exist and must stay as they are.
	kept := []string{
		filepath.Join(d, "env"),
		filepath.Join(d, "etc", "facts.sh"),
		filepath.Join(d, "etc", "slurm.conf"),
		filepath.Join(d, "etc", "pools.yaml"),
		filepath.Join(d, "etc", "plugstack.conf"),
		filepath.Join(d, "run", "quotad.pid"),
		filepath.Join(d, "run", "elasticd.pid"),
		filepath.Join(d, "run", "slurmctld.pid"),
		filepath.Join(d, "plugins", "job_submit_pools.so"),
		filepath.Join(d, "plugins", "spank_elastic.so"),
		filepath.Join(d, "log", "quotad.log"),
		filepath.Join(d, "log", "elasticd.log"),
	}
	// Files that do not exist and must not come to.
	made := []string{
		filepath.Join(d, "run", "forged.pid"),
		filepath.Join(d, "plugins", "job_submit_forged.so"),
		filepath.Join(d, "etc", "forged.conf"),
		filepath.Join(d, "elastic", "jobs", "999998"),
		filepath.Join(d, "state", "slurmctld", "forged"),
		filepath.Join(d, "secrets", "forged"),
	}
	files := append(append(append([]string{}, secrets...), kept...), made...)
	w := a.c.CaptureWorld(ctx, t, []string{held, running}, files)

	denied := []string{"permission denied"}
	for _, f := range secrets {
		a.refused(ctx, t, "alice", denied, "cat", f)
	}
	for _, f := range kept {
		// tee -a opens for appending and, with nothing on stdin, writes nothing were it let in.
		a.refused(ctx, t, "alice", denied, "tee", "-a", f)
		a.refused(ctx, t, "alice", denied, "rm", "-f", f)
	}
	for _, f := range made {
		a.refused(ctx, t, "alice", denied, "touch", f)
	}
	// A link put in place would replace the file read next.
	a.refused(ctx, t, "alice", denied, "ln", "-sf", "/etc/passwd", filepath.Join(d, "etc", "pools.yaml"))
	w.AssertUnchanged(ctx, t, a.c)
}
