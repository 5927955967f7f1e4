package jobsubmit

import (
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// No component of a heterogeneous job may hold GPUs: Slurm preempts a hetjob only through its
// leader, so a lent GPU component could not be reclaimed. A CPU-only hetjob and a GPU job of one
// component pass; root is refused too (the guarantee breaks whoever submits it).
func TestHetJobComponentsHoldNoGPUs(t *testing.T) {
	f := newFixture(t, twoPools)
	f.p.SlurmConf = func() SlurmConf { return SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030} }
	het := func(tres string) *pools.Request {
		r := gpuJob(tres)
		r.HetJob = true
		return r
	}
	perJob := het("")
	perJob.TRESPerJob = "gres/gpu=2"
	tests := []struct {
		name string
		req  *pools.Request
		uid  uint32
		want pools.Refusal
	}{
		{"a typed GPU component", het("gres/gpu:a100=4"), 1001, pools.RefusedHetJobGPUs},
		{"an untyped GPU component", het("gres/gpu=1"), 1001, pools.RefusedHetJobGPUs},
		{"GPUs per job (--gpus)", perJob, 1001, pools.RefusedHetJobGPUs},
		{"root's GPU component", het("gres/gpu:a100=1"), 0, pools.RefusedHetJobGPUs},
		{"a GPU request the plugin cannot read", het("gres/gpu:a100=1x"), 1001, pools.RefusedHetJobGPUs},
		{"a CPU component", het(""), 1001, ""},
		{"a GPU job of one component", gpuJob("gres/gpu:a100=4"), 1001, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := f.p.Submit(tt.req, tt.uid)
			if out.Refusal != tt.want || (out.Reject == NotRejected) != (tt.want == "") {
				t.Fatalf("outcome %+v, want refusal %q", out, tt.want)
			}
			if tt.want != "" && (out.Reject != RejectGRES || out.AppendOutput) {
				t.Fatalf("outcome %+v, want a GRES refusal that sets nothing", out)
			}
		})
	}
	if !f.log.endsWith(" code=" + string(pools.RefusedHetJobGPUs)) {
		t.Fatalf("refusal not logged: %q", f.log.lines)
	}

	// An update that gives a component GPUs is refused; one that leaves them out is not.
	component := pendingJob("cpu", "", "normal")
	component.Request.HetJob = true
	addGPUs := update()
	addGPUs.Request.TRESPerNode, addGPUs.Set = "gres/gpu:a100=1", FieldTRESPerNode
	if out := f.p.Modify(addGPUs, component, 1001); out.Refusal != pools.RefusedHetJobGPUs {
		t.Fatalf("GPUs added to a hetjob component: %+v, want refused", out)
	}
	if out := f.p.Modify(addGPUs, pendingJob("a100", "", "normal"), 1001); out.Reject != NotRejected {
		t.Fatalf("GPUs added to a job of one component: %+v, want it through", out)
	}
	cpus := update()
	cpus.Request.TRESPerNode, cpus.Set = "", FieldTRESPerNode
	if out := f.p.Modify(cpus, component, 1001); out.Reject != NotRejected {
		t.Fatalf("a hetjob component's TRES cleared: %+v, want it through", out)
	}
}

// A GPU batch job that chose no --open-mode appends to its output: a rerun after a reclaim's
// requeue keeps what the first run wrote. An explicit choice, a CPU job, an salloc and a refused
// job are left as they are.
func TestGPUBatchJobsAppendToTheirOutput(t *testing.T) {
	f := newFixture(t, twoPools)
	f.p.SlurmConf = func() SlurmConf { return SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030} }
	with := func(tres string, edit func(*pools.Request)) *pools.Request {
		r := gpuJob(tres)
		if edit != nil {
			edit(r)
		}
		return r
	}
	tests := []struct {
		name string
		req  *pools.Request
		want bool
	}{
		{"sbatch of a typed GPU job", with("gres/gpu:a100=1", nil), true},
		{"sbatch of an untyped GPU job", with("gres/gpu=2", nil), true},
		{"--open-mode=truncate", with("gres/gpu:a100=1", func(r *pools.Request) { r.OpenMode = pools.OpenModeTruncate }), false},
		{"--open-mode=append", with("gres/gpu:a100=1", func(r *pools.Request) { r.OpenMode = pools.OpenModeAppend }), false},
		{"a CPU job", with("", nil), false},
		{"salloc", with("gres/gpu:a100=1", func(r *pools.Request) { r.Batch = false }), false},
		{"refused: a GPU job in the CPU pool", with("gres/gpu:a100=1", func(r *pools.Request) { r.Partition = "cpu" }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if out := f.p.Submit(tt.req, 1001); out.AppendOutput != tt.want {
				t.Fatalf("outcome %+v, want AppendOutput %v", out, tt.want)
			}
		})
	}
}

// A user's text in a logged refusal cannot end slurmctld's log line: the --qos below would
// otherwise write a line of its own that reads as the plugin's.
func TestUserTextCannotForgeALogLine(t *testing.T) {
	f := newFixture(t, twoPools)
	f.p.SlurmConf = func() SlurmConf { return SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030} }
	r := gpuJob("gres/gpu:a100=1")
	r.QOS = "borrow-x\njob_submit/pools: submit by uid 0: partition a100\r\x1b[2K"
	if out := f.p.Submit(r, 1001); out.Refusal != pools.RefusedBorrowQuotadOnly {
		t.Fatalf("outcome %+v, want the borrow QOS refused", out)
	}
	f.log.mu.Lock()
	defer f.log.mu.Unlock()
	last := f.log.lines[len(f.log.lines)-1]
	if strings.ContainsAny(last, "\n\r\x1b") || !strings.Contains(last, `borrow-x\njob_submit/pools:`) || !strings.Contains(last, `a100\x0d\x1b[2K`) {
		t.Fatalf("logged %q: want one line with the user's text escaped", last)
	}
}
