package testbed

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestReadEnvFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	content := "# comment\nexport TESTBED_DIR=/tmp/tb\nexport SLURM_CONF=/tmp/tb/etc/slurm.conf\n\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	vars, err := readEnvFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if vars["SLURM_CONF"] != "/tmp/tb/etc/slurm.conf" || vars["TESTBED_DIR"] != "/tmp/tb" || len(vars) != 2 {
		t.Fatalf("vars = %v", vars)
	}
}

func TestReadEnvFileRejectsFileWithoutSlurmConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(path, []byte("export TESTBED_DIR=/tmp/tb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readEnvFile(path); err == nil {
		t.Fatal("want an error for an env file without SLURM_CONF")
	}
}

func TestMergeEnvOverridesAndKeeps(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "SLURM_CONF=/etc/slurm/slurm.conf"}, map[string]string{"SLURM_CONF": "/tmp/x"})
	want := []string{"PATH=/bin", "SLURM_CONF=/tmp/x"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestAcctRecordTRES(t *testing.T) {
	r := AcctRecord{AllocTRES: "billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1"}
	if r.TRES("gres/gpu:a100") != "1" || r.TRES("gres/gpu") != "1" || r.TRES("mem") != "1000M" || r.TRES("gres/gpu:v100") != "" {
		t.Fatalf("TRES lookups wrong for %q", r.AllocTRES)
	}
}

func TestPatienceScalesOnlyWithinBounds(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{{"", 30 * time.Second}, {"2", 60 * time.Second}, {"1.5", 45 * time.Second}, {"0.1", 30 * time.Second}, {"100", 30 * time.Second}, {"x", 30 * time.Second}} {
		t.Setenv(PatienceEnv, tc.env)
		if got := Patience(30 * time.Second); got != tc.want {
			t.Errorf("%s=%q: Patience(30s) = %v, want %v", PatienceEnv, tc.env, got, tc.want)
		}
	}
}

func TestUsersAreTheFactsProjects(t *testing.T) {
	users, err := Users()
	if err != nil {
		t.Fatal(err)
	}
	if users["alice"] != "proj-a" || users["bob"] != "proj-b" || users["carol"] != "proj-c" || len(users) != 3 {
		t.Fatalf("Users() = %v", users)
	}
}

// A heavy test holds the shared lock from its start to its end: another suite's heavy test,
// which takes the same file's lock, cannot run beside it.
func TestOneHeavyAtATimeHoldsTheLockUntilTheTestEnds(t *testing.T) {
	lock := filepath.Join(t.TempDir(), "heavy.lock")
	t.Setenv(HeavyLockEnv, lock)
	othersTry := func() bool {
		f, err := os.OpenFile(lock, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil
	}
	t.Run("heavy", func(t *testing.T) {
		OneHeavyAtATime(t)
		if othersTry() {
			t.Error("another suite took the lock while a heavy test ran")
		}
	})
	if !othersTry() {
		t.Error("the lock is still held after the heavy test ended")
	}
}

func TestQuotaTableWith(t *testing.T) {
	got, err := QuotaTableWith([]byte("# a table\nsettings:\n  graceTime: 0s\nprojects: []\n"), "reclaimBackoff: 60s", "lendOrder: decayed-usage")
	want := "# a table\nsettings:\n  reclaimBackoff: 60s\n  lendOrder: decayed-usage\n  graceTime: 0s\nprojects: []\n"
	if err != nil || string(got) != want {
		t.Errorf("QuotaTableWith = %q, %v; want %q", got, err, want)
	}
	// A setting the table names is replaced; a name alone removes it.
	got, err = QuotaTableWith([]byte("settings:\n  # tiers\n  borrowSizeTiers: []\n  graceTime: 0s\nprojects: []\n"), "borrowSizeTiers: [1, 2]", "graceTime:")
	want = "settings:\n  borrowSizeTiers: [1, 2]\n  # tiers\nprojects: []\n"
	if err != nil || string(got) != want {
		t.Errorf("QuotaTableWith = %q, %v; want %q", got, err, want)
	}
	if _, err := QuotaTableWith([]byte("projects: []\n"), "reclaimBackoff: 60s"); err == nil {
		t.Error("a table without settings was accepted")
	}
}
