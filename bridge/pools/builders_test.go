package pools

import "testing"

// Builders for tests, in the style of Kueue's flavorassigner tests: a pool or a job is its
// defaults plus the few options a case cares about.

type poolOption func(*Pool)

func cpuPool(name string, opts ...poolOption) Pool {
	p := Pool{Name: name, Partition: name, Node: NodeShape{CPUs: 8, MemoryMB: 32000}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func gpuPool(name, gpuType string, opts ...poolOption) Pool {
	p := Pool{Name: name, Partition: name, GPUType: gpuType, Node: NodeShape{GPUs: 4, CPUs: 8, MemoryMB: 32000}}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func gpuPrice(price float64) poolOption { return func(p *Pool) { p.PricePerGPUHour = price } }
func cpuPrice(price float64) poolOption { return func(p *Pool) { p.PricePerCPUHour = price } }
func nodeCount(n int) poolOption        { return func(p *Pool) { p.NodeCount = n } }
func describe(s string) poolOption      { return func(p *Pool) { p.Description = s } }

func spotWithFallback(fallback ...string) poolOption {
	return func(p *Pool) { p.Spot, p.Fallback = true, fallback }
}

func speeds(classSpeed ...any) poolOption {
	return func(p *Pool) {
		p.Speed = map[string]float64{}
		for i := 0; i+1 < len(classSpeed); i += 2 {
			p.Speed[classSpeed[i].(string)] = classSpeed[i+1].(float64)
		}
	}
}

// testbedConfig is testdata/pools.yaml built in code.
func testbedConfig() Config {
	a100Speeds := speeds("default", 2.0, "bert", 3.0, "resnet", 1.5)
	return Config{
		DefaultCPUPool: "cpu",
		DefaultGPUPool: "a100",
		Policy:         Cheapest,
		Pools: []Pool{
			cpuPool("cpu", describe("CPU-only nodes for preprocessing and small jobs"), cpuPrice(0.05), nodeCount(2)),
			gpuPool("a100", "a100", describe("On-demand A100 nodes"), gpuPrice(3.0), nodeCount(2), a100Speeds),
			gpuPool("a100-spot", "a100", describe("Preemptible A100 capacity; jobs fall back to on-demand a100"),
				gpuPrice(1.2), spotWithFallback("a100"), nodeCount(1), a100Speeds),
			gpuPool("v100", "v100", describe("On-demand V100 nodes"), gpuPrice(1.5), nodeCount(2)),
		},
	}
}

func withPolicy(c Config, p Policy) Config { c.Policy = p; return c }

func mustNew(t testing.TB, c Config) *Config {
	t.Helper()
	cfg, err := New(c)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cfg
}

type jobOption func(*Request)

// job is what sbatch --wrap sends with nothing else set (UnsetRequest), with opts applied.
func job(opts ...jobOption) Request {
	r := UnsetRequest()
	for _, o := range opts {
		o(&r)
	}
	return r
}

func partition(p string) jobOption       { return func(r *Request) { r.Partition = p } }
func gres(s string) jobOption            { return func(r *Request) { r.TRESPerNode = s } }
func gpusPerJob(s string) jobOption      { return func(r *Request) { r.TRESPerJob = s } }
func gpusPerTask(s string) jobOption     { return func(r *Request) { r.TRESPerTask = s } }
func comment(s string) jobOption         { return func(r *Request) { r.Comment = s } }
func modify() jobOption                  { return func(r *Request) { r.Op = Modify } }
func memPerNodeMB(mb uint64) jobOption   { return func(r *Request) { r.PnMinMemory = mb } }
func memPerCPUMB(mb uint64) jobOption    { return func(r *Request) { r.PnMinMemory = mb | MemPerCPU } }
func nodesRange(lo, hi uint32) jobOption { return func(r *Request) { r.MinNodes, r.MaxNodes = lo, hi } }
func tasks(n uint32) jobOption           { return func(r *Request) { r.NumTasks = n; r.MinCPUs = n } }
func tasksPerNode(n uint16) jobOption    { return func(r *Request) { r.NTasksPerNode = n } }
func cpusPerTask(n uint16) jobOption {
	return func(r *Request) { r.CPUsPerTask, r.PnMinCPUs = n, n; r.MinCPUs = uint32(n) }
}
