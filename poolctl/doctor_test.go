package poolctl

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/doctor"
)

// slurmctldOnly answers `scontrol show config` and the release, and fails every other command:
// enough for doctor to reach the pools file.
type slurmctldOnly struct{ t *testing.T }

func (r slurmctldOnly) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	switch line := strings.Join(append([]string{name}, args...), " "); line {
	case "scontrol show config":
		return slurmtest.Fixture(r.t, "scontrol-show-config-22.05-testbed.txt"), nil
	case "sinfo --version":
		return []byte("slurm 22.05.8\n"), nil
	default:
		return nil, errors.New(line + ": not on this test's cluster")
	}
}

// `poolctl doctor` stays an alias of slurmbridge-doctor: same checks, and poolctl's global
// --config names the pools file.
func TestPoolctlDoctorIsSlurmbridgeDoctor(t *testing.T) {
	run := func(env Env, args ...string) result {
		var out, errOut strings.Builder
		env.Out, env.Err = &out, &errOut
		code := Run(context.Background(), append([]string{"poolctl"}, args...), env)
		return result{code, out.String(), errOut.String()}
	}
	r := run(Env{Fetcher: slurm.Client{Runner: slurmctldOnly{t}}}, "--config", testbedPools, "doctor",
		"--quotad-url", "", "--elasticd-url", "", "--db-password-file", "")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	testbed.MustContain(t, "doctor output", r.out,
		"ok       slurmctld   Slurm 22.05.8, cluster testbed",
		"PROBLEM  pools       cannot check "+testbedPools+" against the cluster",
		"skip     credentials --db-password-file is empty",
	)
	testbed.MustContain(t, "stderr", r.errOut, "poolctl: doctor: ")

	// A fetcher that is not the Slurm adapter cannot run doctor's commands.
	r = run(Env{Fetcher: &fakeFetcher{t: t}}, "doctor")
	if r.code != 1 || !strings.Contains(r.errOut, doctor.ErrNoRunner.Error()) {
		t.Fatalf("exit %d, err %q", r.code, r.errOut)
	}
	if r := run(Env{Fetcher: &fakeFetcher{t: t}}, "doctor", "now"); r.code != 2 || !strings.Contains(r.errOut, `"now"`) {
		t.Fatalf("an argument: exit %d, err %q", r.code, r.errOut)
	}
}
