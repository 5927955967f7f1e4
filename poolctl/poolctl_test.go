package poolctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

const testbedPools = "../slurm-conf/testbed/pools.yaml"

// fakeFetcher answers with the real sinfo/squeue captures of bridge/slurm/testdata.
type fakeFetcher struct {
	t          *testing.T
	sinfo      string // fixture name; "" fails the test if nodes are read
	squeue     string
	err        error
	editNodes  func([]slurm.Node)
	nodesCalls int
}

func (f *fakeFetcher) Nodes(context.Context) ([]slurm.Node, error) {
	f.nodesCalls++
	if f.err != nil {
		return nil, f.err
	}
	if f.sinfo == "" {
		f.t.Fatal("sinfo read, but the test expects no Slurm access")
	}
	nodes, err := slurm.ParseNodes(slurmtest.Fixture(f.t, f.sinfo))
	if err == nil && f.editNodes != nil {
		f.editNodes(nodes)
	}
	return nodes, err
}

func (f *fakeFetcher) Queue(_ context.Context, r slurm.QueueRead) ([]slurm.Job, error) {
	if f.err != nil {
		return nil, f.err
	}
	if r.Fields != slurm.AllFields {
		f.t.Fatalf("poolctl read the queue's fields %d, want squeue --json's", r.Fields)
	}
	return slurm.ParseQueue(slurmtest.Fixture(f.t, f.squeue), slurm.AllFields)
}

type result struct {
	code        int
	out, errOut string
}

func run(t *testing.T, f *fakeFetcher, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"poolctl"}, args...), Env{Fetcher: f, Out: &out, Err: &errOut})
	return result{code, out.String(), errOut.String()}
}

// writeBroken writes the testbed's pools.yaml with each old text replaced by its new one.
func writeBroken(t *testing.T, edits ...[2]string) string {
	t.Helper()
	data, err := os.ReadFile(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, e := range edits {
		if !strings.Contains(text, e[0]) {
			t.Fatalf("%q not in %s", e[0], testbedPools)
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	path := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lineOf is the 1-based line of the first line of the file that contains text.
func lineOf(t *testing.T, path, text string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, text) {
			return strconv.Itoa(i + 1)
		}
	}
	t.Fatalf("%q not in %s", text, path)
	return ""
}

func TestValidateCleanConfig(t *testing.T) {
	r := run(t, &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-idle.json"}, "validate", testbedPools)
	if r.code != 0 || r.out != testbedPools+": OK, 4 pools match the cluster\n" {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
}

func TestValidateReportsEveryProblemWithItsLine(t *testing.T) {
	path := writeBroken(t,
		// v100's nodes have 4 GPUs, the file says 2.
		[2]string{"gpu_type: v100\n    price_per_gpu_hour: 1.5\n    node_count: 2\n    node: {gpus: 4,",
			"gpu_type: v100\n    price_per_gpu_hour: 1.5\n    node_count: 2\n    node: {gpus: 2, # v100\n     "},
		[2]string{"description: On-demand A100 nodes", "description: On-demand A100 nodes\n    partition: h100"},
		[2]string{"policy: cheapest", "policy: cheapest\nretries: 3"},
	)
	r := run(t, &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-idle.json"}, "validate", path)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1; out:\n%s", r.code, r.out)
	}
	testbed.MustContain(t, "validate output", r.out,
		path+":"+lineOf(t, path, "retries: 3")+`: unknown key "retries"`,
		path+":"+lineOf(t, path, "partition: h100")+": pool a100: partition h100 does not exist in the cluster (it has a100, a100-spot, cpu, v100)",
		path+":"+lineOf(t, path, "# v100")+": pool v100: nodes v100-1, v100-2 have 4 GPUs but node.gpus is 2",
	)
	testbed.MustContain(t, "stderr", r.errOut, path+": 3 problems")
	if got := strings.Count(r.out, "\n"); got != 3 {
		t.Errorf("%d lines printed, want one per problem:\n%s", got, r.out)
	}
}

func TestValidateWithoutCluster(t *testing.T) {
	f := &fakeFetcher{t: t} // no fixture: reading sinfo fails the test
	r := run(t, f, "validate", "--no-cluster", testbedPools)
	// The fetcher fails the test if read: the 4 pools are checked without the cluster.
	if m := okPools.FindStringSubmatch(r.out); r.code != 0 || m == nil || m[1] != "4" {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
}

func TestValidateFailsWhenSlurmCannotBeRead(t *testing.T) {
	path := writeBroken(t, [2]string{"policy: cheapest", "policy: random"})
	f := &fakeFetcher{t: t, err: errors.New("sinfo --json reported errors: Unspecified error")}
	r := run(t, f, "validate", path)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1", r.code)
	}
	testbed.MustContain(t, "stdout", r.out, `policy "random" is not one of default-first, cheapest, fastest`)
	testbed.MustContain(t, "stderr", r.errOut, "cannot check "+path+" against the cluster", "Unspecified error", "--no-cluster")
}

func TestValidateDefaultsToThePluginsConfig(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pools.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURMBRIDGE_POOLS_CONFIG", "")
	t.Setenv("SLURM_CONF", filepath.Join(dir, "slurm.conf"))
	r := run(t, &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-idle.json"}, "validate")
	if r.code != 0 || !strings.HasPrefix(r.out, filepath.Join(dir, "pools.yaml")+": OK") {
		t.Fatalf("exit %d, out %q, err %q", r.code, r.out, r.errOut)
	}
	r = run(t, &fakeFetcher{t: t}, "validate", filepath.Join(dir, "missing.yaml"))
	if r.code != 1 || !strings.Contains(r.errOut, syscall.ENOENT.Error()) {
		t.Fatalf("missing file: exit %d, err %q", r.code, r.errOut)
	}
}

func statusJSON(t *testing.T, f *fakeFetcher) map[string]PoolStatus {
	t.Helper()
	r := run(t, f, "--config", testbedPools, "status", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	var st Status
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("%v in %s", err, r.out)
	}
	byName := map[string]PoolStatus{}
	for _, p := range st.Pools {
		byName[p.Name] = p
	}
	if len(st.Pools) != 4 || len(byName) != 4 {
		t.Fatalf("got pools %+v", st.Pools)
	}
	return byName
}

func TestStatusCountsGPUsAndJobsPerPool(t *testing.T) {
	got := statusJSON(t, &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-busy.json", squeue: "squeue-22.05-testbed-mixed.json"})
	want := map[string]PoolStatus{
		// a100: job 2 runs with 2 GPUs (job 1 completed); job 5 waits for 8.
		"a100":      {GPUs: GPUCounts{8, 2, 6}, Nodes: NodeCounts{2, 0}, Jobs: JobCounts{1, 1, 0}},
		"a100-spot": {GPUs: GPUCounts{4, 3, 1}, Nodes: NodeCounts{1, 0}, Jobs: JobCounts{1, 0, 0}},
		"v100":      {GPUs: GPUCounts{8, 1, 7}, Nodes: NodeCounts{2, 0}, Jobs: JobCounts{1, 0, 0}},
		"cpu":       {GPUs: GPUCounts{0, 0, 0}, Nodes: NodeCounts{2, 0}, Jobs: JobCounts{0, 0, 0}},
	}
	for name, w := range want {
		g := got[name]
		if g.GPUs != w.GPUs || g.Nodes != w.Nodes || g.Jobs != w.Jobs || !g.Found {
			t.Errorf("%s: got gpus %+v nodes %+v jobs %+v, want %+v %+v %+v", name, g.GPUs, g.Nodes, g.Jobs, w.GPUs, w.Nodes, w.Jobs)
		}
	}
	if p := got["a100-spot"]; !p.Spot || p.GPUType != "a100" || p.PricePerGPUHour != 1.2 || p.Partition != "a100-spot" {
		t.Errorf("a100-spot config fields: %+v", p)
	}
}

func TestStatusDownNodesHaveNoFreeGPUs(t *testing.T) {
	f := &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-busy.json", squeue: "squeue-22.05-testbed-mixed.json",
		editNodes: func(nodes []slurm.Node) {
			for i := range nodes {
				if nodes[i].Name == "a100-1" { // 2 of 4 GPUs allocated, now draining
					nodes[i].StateFlags = []string{"DRAIN"}
				}
			}
		}}
	got := statusJSON(t, f)["a100"]
	if got.Nodes != (NodeCounts{Up: 1, Down: 1}) || got.GPUs != (GPUCounts{Total: 8, Allocated: 2, Free: 4}) {
		t.Fatalf("a100 with a draining node: nodes %+v gpus %+v", got.Nodes, got.GPUs)
	}
}

func TestStatusCountsMultiPoolPendingJobsInEachPool(t *testing.T) {
	f := &fakeFetcher{t: t, sinfo: "sinfo-22.05-testbed-idle.json", squeue: "squeue-22.05-testbed-held.json"}
	got := statusJSON(t, f)
	// Held job 1 lists v100,a100-spot; held job 2 is in v100 only.
	if j := got["v100"].Jobs; j != (JobCounts{Pending: 2, PendingShared: 1}) {
		t.Errorf("v100 jobs %+v", j)
	}
	if j := got["a100-spot"].Jobs; j != (JobCounts{Pending: 1, PendingShared: 1}) {
		t.Errorf("a100-spot jobs %+v", j)
	}
	if j := got["a100"].Jobs; j != (JobCounts{}) {
		t.Errorf("a100 jobs %+v", j)
	}

	r := run(t, f, "--config", testbedPools, "status")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	testbed.MustContain(t, "status table", r.out, "POOL", "PARTITION", "FREE", "* includes pending jobs that list several pools")
	for _, line := range strings.Split(r.out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 12 && fields[0] == "v100" {
			if fields[7] != "8" || fields[9] != "8" || fields[11] != "2*" {
				t.Errorf("v100 row %q: want 8 GPUs, 8 free, 2* pending", line)
			}
			return
		}
	}
	t.Errorf("no v100 row in:\n%s", r.out)
}

func TestStatusFailsOnSlurmErrors(t *testing.T) {
	f := &fakeFetcher{t: t, sinfo: "sinfo-22.05-slurmctld-unreachable.json", squeue: "squeue-22.05-slurmctld-unreachable.json"}
	r := run(t, f, "--config", testbedPools, "status")
	if r.code != 1 || r.out != "" || !strings.Contains(r.errOut, "Unspecified error") {
		t.Fatalf("exit %d, out %q, err %q; want exit 1, no table, Slurm's error", r.code, r.out, r.errOut)
	}
}

func TestExplainPrintsDecisionAndEveryCandidate(t *testing.T) {
	f := &fakeFetcher{t: t} // explain reads the config only
	r := run(t, f, "--config", testbedPools, "explain", "--gres=gpu:a100:1", "-N", "2", "--comment", "class=bert", "-p", "a100")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.errOut)
	}
	testbed.MustContain(t, "explain", r.out,
		"1 a100 GPU per node; workload class bert",
		"Decision:   keep partition a100",
		"it has 1 nodes; the job needs 2",           // a100-spot
		"it has v100 GPUs; the job asks for a100",   // v100
		"it has no GPUs; the job needs 1 on a node", // cpu
	)
	rank := map[string]string{}
	for _, line := range strings.Split(r.out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && (f[0] == "-" || f[0] >= "1" && f[0] <= "9") {
			rank[f[1]] = f[0]
		}
	}
	if rank["a100"] != "1" || rank["a100-spot"] != "-" || rank["v100"] != "-" || rank["cpu"] != "-" {
		t.Errorf("ranks %v", rank)
	}

	// Speed is per workload class: for resnet an a100 is only 1.5 times a v100, so at 3.00 per
	// GPU-hour it costs more per unit of work than a v100 at 1.50.
	r = run(t, f, "--config", testbedPools, "explain", "--gpus=1", "--comment=class=resnet")
	testbed.MustContain(t, "explain resnet", r.out, "Decision:   route to a100-spot,v100,a100", "workload class resnet")
	r = run(t, f, "--config", testbedPools, "explain", "--gpus=1", "--comment=class=bert")
	testbed.MustContain(t, "explain bert", r.out, "Decision:   route to a100-spot,a100,v100")

	r = run(t, f, "--config", testbedPools, "explain", "-p", "cpu", "--gpus-per-node=1")
	testbed.MustContain(t, "explain -p cpu", r.out, "Decision:   reject", "Pools that can run it")
}

func TestExplainRejectsBadInputClearly(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--gres=gpu:a100:x"}, `--gres "gpu:a100:x"`},
		{[]string{"--gpus=v100:-1"}, `--gpus "v100:-1"`},
		{[]string{"-N", "0"}, `--nodes "0"`},
		{[]string{"-N", "4-2"}, "MIN ≤ MAX"},
		{[]string{"-c", "70000"}, `--cpus-per-task "70000": want a whole number from 1 to 65533`},
		{[]string{"--mem=lots"}, `--mem "lots"`},
		{[]string{"--mem=1G", "--mem-per-cpu=1G"}, "exclude each other"},
		{[]string{"--gpus-per-socket=1"}, "needs --sockets-per-node"},
		{[]string{"--gres=gpu:1", "extra"}, "takes no arguments"},
		{[]string{"--constraint=a100"}, "flag provided but not defined"},
		{[]string{"-p", "a100 v100"}, "no spaces"},
	} {
		r := run(t, &fakeFetcher{t: t}, append([]string{"--config", testbedPools, "explain"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.errOut, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 and %q", tc.args, r.code, r.errOut, tc.want)
		}
	}
}

// okPools finds how many pools validate found valid.
var okPools = regexp.MustCompile(`: OK, (\d+) pools\b`)
