//go:build integration

package testbed

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// A CPU job and a GPU job run to COMPLETED as alice and are accounted to her project with the
// right GPU TRES.
func TestJobsRunAsUserAndAreAccounted(t *testing.T) {
	c := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cpuJob, err := c.Submit(ctx, "alice", "--job-name=foundation-cpu", "--wrap", "test \"$(id -un)\" = alice")
	if err != nil {
		t.Fatalf("submit CPU job: %v", err)
	}
	gpuJob, err := c.Submit(ctx, "alice", "--job-name=foundation-gpu", "-p", "a100", "--gres=gpu:a100:1",
		"--wrap", "test \"$SLURM_GPUS_ON_NODE\" = 1")
	if err != nil {
		t.Fatalf("submit GPU job: %v", err)
	}
	for _, id := range []string{cpuJob, gpuJob} {
		if state, err := c.WaitState(ctx, id, "COMPLETED"); err != nil {
			t.Fatalf("job %s: %v (state %s)", id, err, state)
		}
	}

	cpu, err := c.Accounting(ctx, cpuJob)
	if err != nil {
		t.Fatal(err)
	}
	if cpu.User != "alice" || cpu.Account != "proj-a" || cpu.Partition != "cpu" || cpu.State != "COMPLETED" || cpu.ExitCode != "0:0" {
		t.Errorf("CPU job accounted as %+v, want alice/proj-a/cpu COMPLETED 0:0", cpu)
	}
	if g := cpu.TRES("gres/gpu"); g != "" {
		t.Errorf("CPU job allocated gres/gpu=%s", g)
	}

	gpu, err := c.Accounting(ctx, gpuJob)
	if err != nil {
		t.Fatal(err)
	}
	if gpu.User != "alice" || gpu.Account != "proj-a" || gpu.Partition != "a100" || gpu.State != "COMPLETED" || gpu.ExitCode != "0:0" {
		t.Errorf("GPU job accounted as %+v, want alice/proj-a/a100 COMPLETED 0:0", gpu)
	}
	if gpu.TRES("gres/gpu") != "1" || gpu.TRES("gres/gpu:a100") != "1" {
		t.Errorf("GPU job AllocTRES = %q, want gres/gpu=1 and gres/gpu:a100=1", gpu.AllocTRES)
	}
}

// Slurm's own permission checks apply to jobs submitted through the harness: bob is not in
// proj-a.
func TestUserCannotChargeAnotherProject(t *testing.T) {
	c := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := c.Submit(ctx, "bob", "--account=proj-a", "--wrap", "true")
	if err == nil {
		t.Fatalf("bob submitted job %s to proj-a; want a rejection", id)
	}
	if !strings.Contains(err.Error(), "Invalid account") {
		t.Fatalf("rejection = %v, want Slurm's invalid account error", err)
	}
}

// The cluster has the pools, GPUs and projects the rest of the project's tests rely on.
func TestClusterShape(t *testing.T) {
	c := Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	out, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N|%P|%G")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(got)
	// Every node of the facts in its pool ("*": the default one), with its GPUs:
	// e.g. "a100-1|a100|gpu:a100:4", "cpu-1|cpu*|(null)".
	tf, err := facts.LoadRepo()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range tf.Pools {
		part, gres := p.Name, "(null)"
		if p.Default {
			part += "*"
		}
		if p.GPU != "" {
			gres = fmt.Sprintf("gpu:%s:%d", p.GPU, tf.GPUsPerNode)
		}
		for _, n := range p.NodeNames() {
			want = append(want, n+"|"+part+"|"+gres)
		}
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("sinfo nodes:\n got %q\nwant %q", got, want)
	}

	assocs, err := c.Slurm().Associations(ctx, slurm.AssociationFilter{Cluster: tf.Cluster})
	if err != nil {
		t.Fatal(err)
	}
	for user, acct := range tf.Users() {
		if !slices.ContainsFunc(assocs, func(a slurm.Association) bool { return a.Account == acct && a.User == user }) {
			t.Errorf("no association %s|%s in %+v", acct, user, assocs)
		}
	}

	conf, err := c.Slurm().ShowConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"PreemptType": "preempt/qos", "PreemptMode": "REQUEUE", "JobRequeue": "1", "SelectType": "select/cons_tres", "PriorityType": "priority/multifactor"} {
		if got := conf.Get(key); got != want {
			t.Errorf("scontrol show config: %s = %q, want %q", key, got, want)
		}
	}
	if tres := conf.Get("AccountingStorageTRES"); !strings.Contains(tres, "gres/gpu:a100") || !strings.Contains(tres, "gres/gpu:v100") {
		t.Errorf("AccountingStorageTRES %q lacks typed GPUs", tres)
	}
}
