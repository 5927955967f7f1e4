package gpureq

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

// TestParseCapturedJobDescs reads every job_desc that slurmctld really passed to a job_submit
// plugin, on every release captured, and checks the GPU request we read from it.
func TestParseCapturedJobDescs(t *testing.T) {
	want := map[string][]Count{
		"sbatch --wrap true":                                       nil,
		"sbatch -p a100 --gres=gpu:a100:1":                         {{PerNode, "a100", 1}},
		"sbatch --gres=gpu:2":                                      {{PerNode, "", 2}},
		"sbatch --gpus=3":                                          {{PerJob, "", 3}},
		"sbatch --gpus=v100:2":                                     {{PerJob, "v100", 2}},
		"sbatch --gpus-per-node=a100:2 -N 2":                       {{PerNode, "a100", 2}},
		"sbatch --gpus-per-task=1 -n 4":                            {{PerTask, "", 1}},
		"sbatch --gpus-per-socket=1 --sockets-per-node=1":          {{PerSocket, "", 1}},
		"sbatch --gres=gpu:a100:1,gpu:v100:1":                      {{PerNode, "a100", 1}, {PerNode, "v100", 1}},
		"sbatch --mem=8G -c 4 --gres=gpu:1":                        {{PerNode, "", 1}},
		"sbatch --mem-per-cpu=2G -n 2":                             nil,
		"sbatch --mem-per-gpu=10G --gpus=1":                        {{PerJob, "", 1}},
		"sbatch -p a100,v100 --gpus=1":                             {{PerJob, "", 1}},
		"sbatch --constraint=a100 --gpus=1 --no-requeue":           {{PerJob, "", 1}},
		"sbatch -J train-resnet --comment 'class=resnet' --gpus=1": {{PerJob, "", 1}},
		"srun -p cpu true":                                         nil,
		"scontrol update jobid=J partition=v100 gres=gpu:v100:1":   {{PerNode, "v100", 1}},
		"scontrol update jobid=J numnodes=2":                       nil,
	}
	for _, capture := range slurmtest.JobDescCaptures(t) {
		t.Run(slurmtest.CaptureVersion(capture), func(t *testing.T) {
			descs := slurmtest.JobDescs(t, capture)
			if len(descs) != len(want) {
				t.Errorf("capture has %d job_descs, the test expects %d", len(descs), len(want))
			}
			for _, d := range descs {
				t.Run(d.Command, func(t *testing.T) {
					wantGPUs, ok := want[d.Command]
					if !ok {
						t.Fatalf("no expectation for %q", d.Command)
					}
					r, err := Parse(Fields{
						PerJob:    d.Fields["tres_per_job"],
						PerNode:   d.Fields["tres_per_node"],
						PerSocket: d.Fields["tres_per_socket"],
						PerTask:   d.Fields["tres_per_task"],
					})
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(r.GPUs, wantGPUs) {
						t.Errorf("GPUs = %+v, want %+v", r.GPUs, wantGPUs)
					}
					if r.IsGPU() != (wantGPUs != nil) {
						t.Errorf("IsGPU = %v", r.IsGPU())
					}
					if len(r.Other) != 0 {
						t.Errorf("Other = %+v, want none", r.Other)
					}
				})
			}
		})
	}
}

// req builds a Request from its GPU counts.
func req(counts ...Count) Request { return Request{GPUs: counts} }

func TestParseKeepsOtherGresApart(t *testing.T) {
	r, err := Parse(Fields{PerNode: "gres:gpu:a100:1,gres:mps:100", PerTask: "gres:shard:2"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Count{{PerNode, "a100", 1}}; !reflect.DeepEqual(r.GPUs, want) {
		t.Errorf("GPUs = %+v, want %+v", r.GPUs, want)
	}
	if want := []Gres{{Name: "mps", Count: 100}, {Name: "shard", Count: 2}}; !reflect.DeepEqual(r.Other, want) {
		t.Errorf("Other = %+v, want %+v", r.Other, want)
	}
	r, err = Parse(Fields{PerNode: "gres:mps:100"})
	if err != nil || r.IsGPU() {
		t.Errorf("an mps-only request: IsGPU = %v, err %v; want false, nil", r.IsGPU(), err)
	}
}

func TestParseNamesTheField(t *testing.T) {
	_, err := Parse(Fields{PerNode: "gres:gpu:1", PerTask: "gres:gpu:a100:lots"})
	if err == nil || !strings.HasPrefix(err.Error(), `tres_per_task: bad token "gres:gpu:a100:lots"`) {
		t.Errorf("error = %v, want one naming tres_per_task and the token", err)
	}
}

func TestNamedTypes(t *testing.T) {
	tests := []struct {
		name          string
		r             Request
		first, second string
	}{
		{"none", req(), "", ""},
		{"any type", req(Count{PerNode, "", 2}), "", ""},
		{"one type", req(Count{PerJob, "", 1}, Count{PerNode, "a100", 1}), "a100", ""},
		{"same type twice", req(Count{PerNode, "a100", 1}, Count{PerTask, "a100", 1}), "a100", ""},
		{"two types", req(Count{PerNode, "a100", 1}, Count{PerNode, "v100", 1}), "a100", "v100"},
		{"zero count names nothing", req(Count{PerNode, "v100", 0}, Count{PerNode, "a100", 1}), "a100", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, second := tt.r.NamedTypes()
			if first != tt.first || second != tt.second {
				t.Errorf("NamedTypes() = %q, %q; want %q, %q", first, second, tt.first, tt.second)
			}
		})
	}
}

func TestGPUsPerNodeAndTotal(t *testing.T) {
	const unbounded = math.MaxUint64
	tests := []struct {
		name                         string
		r                            Request
		nodes, tasksPerNode, sockets uint64
		perNode                      uint64
		tasks                        uint64
		total                        uint64
	}{
		{name: "no GPUs", r: req(), nodes: 1, perNode: 0, total: 0},
		{name: "per node", r: req(Count{PerNode, "a100", 2}), nodes: 2, perNode: 2, total: 4},
		{name: "per job over 2 nodes rounds up", r: req(Count{PerJob, "", 5}), nodes: 2, perNode: 3, total: 5},
		{name: "per job, nodes unbounded", r: req(Count{PerJob, "", 8}), nodes: unbounded, perNode: 1, total: 8},
		{name: "per job, zero nodes counts as one", r: req(Count{PerJob, "", 8}), nodes: 0, perNode: 8, total: 8},
		{name: "per task", r: req(Count{PerTask, "", 1}), nodes: 2, tasksPerNode: 2, tasks: 4, perNode: 2, total: 4},
		{name: "per socket", r: req(Count{PerSocket, "", 1}), nodes: 1, sockets: 2, perNode: 2, total: 2},
		{name: "per socket, sockets unknown", r: req(Count{PerSocket, "", 3}), nodes: 1, perNode: 3, total: 3},
		{name: "types add up within a scope", r: req(Count{PerNode, "a100", 1}, Count{PerNode, "", 1}), nodes: 1, perNode: 2, total: 2},
		{
			name:  "largest scope wins",
			r:     req(Count{PerJob, "", 8}, Count{PerNode, "", 3}),
			nodes: 2, perNode: 4, total: 8,
		},
		{name: "huge counts saturate", r: req(Count{PerTask, "", math.MaxUint64 / 2}), nodes: 1, tasksPerNode: 4, tasks: 4, perNode: math.MaxUint64, total: math.MaxUint64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.GPUsPerNode(tt.nodes, tt.tasksPerNode, tt.sockets); got != tt.perNode {
				t.Errorf("GPUsPerNode(%d, %d, %d) = %d, want %d", tt.nodes, tt.tasksPerNode, tt.sockets, got, tt.perNode)
			}
			nodes := tt.nodes
			if nodes == unbounded {
				nodes = 1
			}
			if got := tt.r.TotalGPUs(nodes, tt.tasks, tt.sockets); got != tt.total {
				t.Errorf("TotalGPUs(%d, %d, %d) = %d, want %d", nodes, tt.tasks, tt.sockets, got, tt.total)
			}
		})
	}
}

func TestRequestString(t *testing.T) {
	tests := []struct {
		r    Request
		want string
	}{
		{req(), "no GPUs"},
		{req(Count{PerNode, "a100", 2}), "2 a100 GPUs per node"},
		{req(Count{PerJob, "", 1}, Count{PerTask, "v100", 1}), "1 GPU per job + 1 v100 GPU per task"},
		{req(Count{PerSocket, "", 0}), "no GPUs"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.r.GPUs, got, tt.want)
		}
	}
}

// A job's request as each release fills job_desc: CPU entries never make a GPU job.
func TestParseAcrossReleases(t *testing.T) {
	tests := []struct {
		name    string
		fields  Fields
		wantGPU bool
		wantStr string
	}{
		{"22.05 --gres=gpu:a100:2", Fields{PerNode: "gres:gpu:a100:2"}, true, "2 a100 GPUs per node"},
		{"23.11 -c 4", Fields{PerTask: "cpu:4"}, false, "no GPUs"},
		{"23.11 -c 4 --gpus-per-task=1", Fields{PerTask: "cpu:4,gres/gpu:1"}, true, "1 GPU per task"},
		{"24.11 -c 4", Fields{PerTask: "cpu=4"}, false, "no GPUs"},
		{"24.11 -c 4 --gpus-per-task=a100:1", Fields{PerTask: "cpu=4,gres/gpu:a100=1"}, true, "1 a100 GPU per task"},
		{"24.11 --gpus=2 -c 4", Fields{PerJob: "gres/gpu:2", PerTask: "cpu=4"}, true, "2 GPUs per job"},
		{"26.05 --tres-per-task=cpu=4,license/foo=1", Fields{PerTask: "cpu=4,license/foo=1"}, false, "no GPUs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.fields)
			if err != nil {
				t.Fatal(err)
			}
			if r.IsGPU() != tt.wantGPU || r.String() != tt.wantStr || len(r.Other) != 0 {
				t.Errorf("Parse(%+v) = %+v (%s), want GPU %v, %q and no other GRES", tt.fields, r, r.String(), tt.wantGPU, tt.wantStr)
			}
		})
	}
}

// CeilDiv and MulSat size every request, GPU and CPU alike: huge user counts must saturate at
// MaxUint64 (read as "unbounded") rather than wrap around to a small number that would fit.
func TestCeilDivAndMulSat(t *testing.T) {
	const maxU = math.MaxUint64
	divs := []struct{ n, d, want uint64 }{
		{0, 1, 0}, {0, maxU, 0}, {1, 1, 1}, {5, 2, 3}, {4, 2, 2},
		{1, maxU, 1}, {maxU, maxU, 1}, {maxU, 1, maxU}, {maxU, 2, maxU/2 + 1},
	}
	for _, tt := range divs {
		if got := CeilDiv(tt.n, tt.d); got != tt.want {
			t.Errorf("CeilDiv(%d, %d) = %d, want %d", tt.n, tt.d, got, tt.want)
		}
	}
	muls := []struct{ a, b, want uint64 }{
		{0, maxU, 0}, {maxU, 0, 0}, {3, 4, 12}, {1, maxU, maxU},
		{maxU / 2, 2, maxU - 1}, // the largest product that still fits
		{maxU/2 + 1, 2, maxU},   // one past it saturates
		{1 << 32, 1 << 32, maxU}, {maxU, maxU, maxU},
	}
	for _, tt := range muls {
		if got := MulSat(tt.a, tt.b); got != tt.want {
			t.Errorf("MulSat(%d, %d) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
