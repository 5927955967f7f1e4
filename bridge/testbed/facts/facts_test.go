package facts

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

func TestFactsOfTheTestbed(t *testing.T) {
	f, _ := repoFacts(t)
	if got := f.NodeNames(); !slices.Equal(got, []string{"cpu-1", "cpu-2", "a100-1", "a100-2", "v100-1", "v100-2", "a100-spot-1"}) {
		t.Errorf("NodeNames = %v", got)
	}
	if got := f.GPUNodeNames(); !slices.Equal(got, []string{"a100-1", "a100-2", "v100-1", "v100-2", "a100-spot-1"}) {
		t.Errorf("GPUNodeNames = %v", got)
	}
	if got := f.Users(); !maps.Equal(got, map[string]string{"alice": "proj-a", "bob": "proj-b", "carol": "proj-c"}) {
		t.Errorf("Users = %v", got)
	}
	if got := f.GPUPools(); !slices.Equal(got, []string{"a100", "a100-spot", "v100"}) {
		t.Errorf("GPUPools = %v", got)
	}
	if got := f.gpuSummary(); got != "12 a100 (8 in partition a100, 4 in a100-spot) and 8 v100" {
		t.Errorf("gpuSummary = %q", got)
	}
}

func TestLoadRefusesUnknownAndMissingFacts(t *testing.T) {
	good, err := os.ReadFile(filepath.Join("..", "..", "..", File))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"unknown key":         string(good) + "\nnodez: 3\n",
		"no cluster":          strings.Replace(string(good), "cluster: testbed", "cluster: \"\"", 1),
		"pool without nodes":  strings.Replace(string(good), "nodes: 1\n", "nodes: 0\n", 1),
		"a user with a colon": strings.Replace(string(good), "user: alice", "user: al:ice", 1),
		"a user twice":        strings.Replace(string(good), "user: bob", "user: alice", 1),
		"an account twice":    strings.Replace(string(good), "account: proj-b", "account: proj-a", 1),
		"no ctld port":        strings.Replace(string(good), "ctld: 16817", "ctld: 0", 1),
		"a time without unit": strings.Replace(string(good), "preemptExemptTime: 20s", "preemptExemptTime: 20", 1),
	} {
		path := filepath.Join(t.TempDir(), "facts.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// The testbed's pools.yaml describes its pools for the plugin and poolctl, with prices and
// speeds the facts do not hold; the nodes it counts must be the ones the facts make.
func TestPoolsFileAgreesWithFacts(t *testing.T) {
	f, dir := repoFacts(t)
	cfg, err := pools.Load(filepath.Join(dir, "pools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range cfg.Pools {
		names = append(names, p.Name)
	}
	var factNames []string
	for _, p := range f.Pools {
		factNames = append(factNames, p.Name)
		i := slices.IndexFunc(cfg.Pools, func(q pools.Pool) bool { return q.Name == p.Name })
		if i < 0 {
			continue
		}
		q := cfg.Pools[i]
		gpus := 0
		if p.GPU != "" {
			gpus = f.GPUsPerNode
		}
		if q.NodeCount != p.Nodes || q.GPUType != p.GPU || q.Node.GPUs != gpus ||
			q.Node.CPUs != f.Node.Sockets*f.Node.CoresPerSocket || q.Node.MemoryMB != uint64(f.Node.MemoryMB) {
			t.Errorf("pools.yaml pool %s: %d nodes of %+v (%s); the facts: %d nodes of %d GPUs (%s), %d CPUs, %d MB",
				q.Name, q.NodeCount, q.Node, q.GPUType, p.Nodes, gpus, p.GPU, f.Node.Sockets*f.Node.CoresPerSocket, f.Node.MemoryMB)
		}
		if p.Default && cfg.DefaultCPUPool != p.Name {
			t.Errorf("pools.yaml default_cpu_pool %q, the facts' default partition %q", cfg.DefaultCPUPool, p.Name)
		}
	}
	slices.Sort(names)
	slices.Sort(factNames)
	if !slices.Equal(names, factNames) {
		t.Errorf("pools.yaml has pools %v, the facts %v", names, factNames)
	}
}

func TestWriteShellGivesTheScriptsTheirVariables(t *testing.T) {
	f, _ := repoFacts(t)
	var out strings.Builder
	if err := f.WriteShell(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"CLUSTER=testbed",
		"NODES=(cpu-1 cpu-2 a100-1 a100-2 v100-1 v100-2 a100-spot-1)",
		"GPU_NODES=(a100-1 a100-2 v100-1 v100-2 a100-spot-1)",
		"POOLS=(cpu a100 v100 a100-spot)",
		"GPU_POOLS=(a100 a100-spot v100)",
		"PROJECTS=(proj-a:alice proj-b:bob proj-c:carol)",
		"GPUS_PER_NODE=4",
		"FACT_LOCAL_DB_PORT=13306 FACT_LOCAL_CTLD_PORT=16817 FACT_LOCAL_DBD_PORT=16819 FACT_LOCAL_SLURMD_PORT_BASE=17001 FACT_LOCAL_RDZV_PORT_BASE=29400",
		"FACT_LOCAL_QUOTAD_PORT=19817 FACT_LOCAL_ELASTICD_PORT=19464",
		"FACT_CONTAINER_DB_PORT=3306 FACT_CONTAINER_CTLD_PORT=6817 FACT_CONTAINER_DBD_PORT=6819 FACT_CONTAINER_SLURMD_PORT=6818",
		"FACT_CONTAINER_QUOTAD_PORT=19817 FACT_CONTAINER_ELASTICD_PORT=9464",
		"FACT_CONTAINER_DB_HOST=mariadb",
		"FACT_CONTAINER_FIRST_UID=2001",
		"FACT_QUOTA_PREEMPT_EXEMPT_SECONDS=20",
		"declare -gA QOS_GUARANTEED=([proj-a]=guar-proj-a [proj-b]=guar-proj-b [proj-c]=guar-proj-c) " +
			"QOS_BORROW=([proj-a]=borrow-proj-a [proj-b]=borrow-proj-b [proj-c]=borrow-proj-c)",
	} {
		if !slices.Contains(strings.Split(out.String(), "\n"), line) {
			t.Errorf("no line %q in:\n%s", line, out.String())
		}
	}
}

// The container testbed runs one compose service per node, named as slurm.conf names the node:
// a node added to the facts needs its service too.
func TestComposeRunsTheFactsNodes(t *testing.T) {
	f, _ := repoFacts(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "docker", "slurm-testbed", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Hostname string `yaml:"hostname"`
			Command  any    `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	var nodes []string
	for name, svc := range compose.Services {
		if svc.Command != "slurmd" {
			continue // mariadb, slurmdbd, slurmctld, quotad, elasticd
		}
		if svc.Hostname != name {
			t.Errorf("service %s has hostname %s: slurm.conf reaches a node by its name", name, svc.Hostname)
		}
		nodes = append(nodes, name)
	}
	slices.Sort(nodes)
	want := slices.Sorted(slices.Values(f.NodeNames()))
	if !slices.Equal(nodes, want) {
		t.Errorf("docker-compose.yml runs nodes %v; the facts have %v", nodes, want)
	}
}
