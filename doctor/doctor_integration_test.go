//go:build integration

package doctor

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// liveDoctor runs slurmbridge-doctor against the testbed, pointed at the daemons testbed/quotad.sh and
// testbed/elasticd.sh start, where the testbed's env file says they listen.
func liveDoctor(t *testing.T, c *testbed.Cluster, extra ...string) result {
	t.Helper()
	args := append([]string{"slurmbridge-doctor", "--config", filepath.Join(c.Dir, "etc", "pools.yaml"),
		"--quotad-url", c.QuotadURL() + "/metrics",
		"--elasticd-url", c.ElasticdURL() + "/metrics",
		"--db-password-file", c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"],
		// The testbed runs quotad as root.
		"--quotad-user", "root"}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code := Main(ctx, args, Env{Slurm: slurm.Client{Runner: c.Runner()}, Out: &out, Err: &errOut})
	return result{code, out.String(), errOut.String()}
}

func TestLiveDoctorIsCleanOnTheTestbed(t *testing.T) {
	c := testbed.Require(t)
	r := liveDoctor(t, c)
	if r.code != 0 || !strings.HasSuffix(r.out, NoProblems+"\n") {
		t.Fatalf("exit %d, err %q, out:\n%s", r.code, r.errOut, r.out)
	}
	testbed.MustContain(t, "doctor output", r.out,
		"ok       plugin      "+filepath.Join(c.Dir, "plugins", PluginFile)+" built for Slurm ",
		"ok       pools       ", "ok       preemption", "ok       accounting", "ok       quotad", "ok       elasticd", "ok       credentials")
}

// The testbed's installed plugin is replaced, by rename as an install does, with a copy whose
// plugin_version says the previous micro release; the running slurmctld keeps the one it has
// mapped. The original is renamed back after.
func TestLiveDoctorNamesPluginFromAnotherSlurm(t *testing.T) {
	c := testbed.Require(t)
	installed := filepath.Join(c.Dir, "plugins", PluginFile)
	info, err := ReadPluginInfo(installed)
	if err != nil {
		t.Fatal(err)
	}
	saved := filepath.Join(c.Dir, "plugins", ".job_submit_pools.so.doctor-test")
	older := info.Version - 1 // 22.05.8 -> 22.05.7
	patchPluginVersion(t, installed, installed+".patched", older)
	if err := os.Link(installed, saved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Rename(saved, installed); err != nil {
			t.Errorf("restoring %s: %v", installed, err)
		}
		if got, err := ReadPluginInfo(installed); err != nil || got.Version != info.Version {
			t.Errorf("after restore %s says %s (%v)", installed, SlurmVersionString(got.Version), err)
		}
	})
	if err := os.Rename(installed+".patched", installed); err != nil {
		t.Fatal(err)
	}

	r := liveDoctor(t, c)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	want := "PROBLEM  plugin      " + installed + " was built for Slurm " + SlurmVersionString(older) +
		" but slurmctld runs " + SlurmVersionString(info.Version) + ": slurmctld refuses to load it"
	testbed.MustContain(t, "doctor output", r.out, want, "fix: rebuild and reinstall it on this Slurm")
	if got := problemLines(r.out); len(got) != 2 {
		t.Errorf("want the plugin problem alone, got:\n%s", strings.Join(got, "\n"))
	}
}

// slurm.conf loses qos from AccountingStorageEnforce and gets JobRequeue=0, applied with
// scontrol reconfigure; the generated slurm.conf is written back and reconfigured after.
func TestLiveDoctorNamesMissingQOSEnforcement(t *testing.T) {
	c := testbed.Require(t)
	conf := c.Vars["SLURM_CONF"]
	orig, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	broken := string(orig)
	for old, repl := range map[string]string{
		"\nAccountingStorageEnforce=associations,limits,qos,safe\n": "\nAccountingStorageEnforce=associations,limits,safe\n",
		"\nJobRequeue=1\n": "\nJobRequeue=0\n",
	} {
		if !strings.Contains(broken, old) {
			t.Fatalf("%q not in %s", strings.TrimSpace(old), conf)
		}
		broken = strings.Replace(broken, old, repl, 1)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := writeByRename(conf, orig); err != nil {
			t.Errorf("restoring %s: %v", conf, err)
			return
		}
		if err := c.Slurm().Reconfigure(ctx); err != nil {
			t.Errorf("scontrol reconfigure after restoring %s: %v", conf, err)
		}
		if cfg, err := c.Slurm().ShowConfig(ctx); err != nil || !strings.Contains(cfg.Get("AccountingStorageEnforce"), "qos") || cfg.Get("JobRequeue") != "1" {
			t.Errorf("after restore: AccountingStorageEnforce=%q JobRequeue=%q (%v)", cfg.Get("AccountingStorageEnforce"), cfg.Get("JobRequeue"), err)
		}
	})
	if err := writeByRename(conf, []byte(broken)); err != nil {
		t.Fatal(err)
	}
	if err := c.Slurm().Reconfigure(ctx); err != nil {
		t.Fatal(err)
	}

	r := liveDoctor(t, c)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	testbed.MustContain(t, "doctor output", r.out,
		"PROBLEM  accounting  AccountingStorageEnforce = associations,limits,safe lacks qos: guaranteed QOS limits (GrpTRES) would not hold jobs back",
		"fix: in slurm.conf: AccountingStorageEnforce=associations,limits,qos,safe, then scontrol reconfigure",
		"PROBLEM  preemption  JobRequeue = 0: jobs default to no requeue",
		"fix: in slurm.conf: JobRequeue=1, then scontrol reconfigure",
	)
	testbed.MustContain(t, "stderr", r.errOut, "doctor: 2 problems")
}

func TestLiveDoctorNamesQuotadUserWithoutSlurmRights(t *testing.T) {
	c := testbed.Require(t)
	r := liveDoctor(t, c, "--quotad-user", "alice")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	testbed.MustContain(t, "doctor output", r.out,
		"PROBLEM  quotad-user quotad runs as alice (AdminLevel None): slurmdbd refuses it QOS changes, which need Administrator",
		"fix: sacctmgr -i modify user alice set adminlevel=Administrator")
}

// writeByRename replaces a file the daemons may be reading at that moment.
func writeByRename(path string, data []byte) error {
	tmp := path + ".doctor-test"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// With no slurmctld to ask, doctor looks for plugins where the installed slurmctld's built-in
// PluginDir is: its RUNPATH, the directory that holds Slurm's own plugins.
func TestInstalledSlurmctldsRunPathHoldsSlurmsPlugins(t *testing.T) {
	c := testbed.Require(t)
	conf, err := c.Slurm().ShowConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	path, err := slurm.SlurmctldBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := RunPath(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "select_cons_tres.so")); err != nil {
		t.Errorf("%s's RUNPATH %s holds no Slurm plugin: %v", path, dir, err)
	}
	if !slices.Contains(strings.Split(conf.Get("PluginDir"), ":"), dir) {
		t.Errorf("%s's RUNPATH %s is not in the testbed's PluginDir %s", path, dir, conf.Get("PluginDir"))
	}
	onDisk, err := c.Slurm().SlurmctldOnDisk(context.Background())
	if err != nil || onDisk != conf.Get("SLURM_VERSION") {
		t.Errorf("installed slurmctld %q (%v), running %s", onDisk, err, conf.Get("SLURM_VERSION"))
	}
}
