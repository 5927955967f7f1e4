package view

import (
	"slices"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// ClusterPath is the cluster page's data as JSON: pools, projects, GPU types and recent
// actions in one answer, open to anyone who reaches the address (no job of anyone is in it).
const ClusterPath = "/api/" + APIVersion + "/cluster"

// Pool is one resource pool of pools.yaml with its live counts.
type Pool struct {
	Name            string    `json:"name"`
	Partition       string    `json:"partition"`
	GPUType         string    `json:"gpu_type"` // "" for a CPU pool
	Spot            bool      `json:"spot"`
	PricePerGPUHour float64   `json:"price_per_gpu_hour"`
	PricePerCPUHour float64   `json:"price_per_cpu_hour"`
	Nodes           PoolNodes `json:"nodes"`
	GPUs            PoolGPUs  `json:"gpus"`
	Jobs            PoolJobs  `json:"jobs"`
}

// PoolNodes counts a pool's nodes by whether Slurm may start jobs on them.
type PoolNodes struct {
	Up   int `json:"up"`
	Down int `json:"down"`
}

// PoolGPUs: Total is every GPU of the pool's nodes; Running those allocated to jobs; Free
// those unallocated on nodes that are up; Pending what pending jobs that list the pool's
// partition ask for (each array task counted, a job listing several pools counted in each).
type PoolGPUs struct {
	Total   int `json:"total"`
	Running int `json:"running"`
	Pending int `json:"pending"`
	Free    int `json:"free"`
}

// PoolJobs counts jobs: running ones in the pool's partition, pending ones listing it (array
// tasks each).
type PoolJobs struct {
	Running int `json:"running"`
	Pending int `json:"pending"`
}

// Action is one lend or return quotad made (from its audit trail), or one reclaim: a
// borrower Slurm preempted and requeued.
type Action struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // lend, return or reclaim
	Job     string    `json:"job"`  // "123", or "123_4" for an array task
	Account string    `json:"account"`
	FromQOS string    `json:"from_qos"`
	ToQOS   string    `json:"to_qos"`
	Detail  string    `json:"detail"`
}

// ClusterResponse is the body of ClusterPath and what the page draws.
type ClusterResponse struct {
	Status Status `json:"status"`
	Pools  []Pool `json:"pools"`
	// PoolsError says why pools is empty when pools.yaml could not be read.
	PoolsError    string    `json:"pools_error"`
	Projects      []Project `json:"projects"`
	Types         []GPUType `json:"gpu_types"`
	RecentActions []Action  `json:"recent_actions"` // newest first
	// ActionsError says why recent_actions may be incomplete.
	ActionsError string `json:"actions_error"`
}

// PoolCounts counts nodes, GPUs and jobs for each pool of cfg, in config order. A node in
// several pools' partitions counts in each of them, as sinfo shows it in each.
func PoolCounts(cfg *pools.Config, nodes []slurm.Node, jobs []policy.Job) []Pool {
	if cfg == nil {
		return []Pool{}
	}
	out := make([]Pool, len(cfg.Pools))
	byPartition := make(map[string][]int, len(cfg.Pools))
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		part := p.Partition
		if part == "" {
			part = p.Name
		}
		out[i] = Pool{Name: p.Name, Partition: part, GPUType: p.GPUType, Spot: p.Spot,
			PricePerGPUHour: p.PricePerGPUHour, PricePerCPUHour: p.PricePerCPUHour}
		byPartition[part] = append(byPartition[part], i)
	}
	for i := range nodes {
		n := &nodes[i]
		gpus, alloc := int(n.GPUs()), int(n.AllocGPUs())
		alloc = min(alloc, gpus)
		for _, pi := range poolsOf(n.Partitions, byPartition) {
			ps := &out[pi]
			ps.GPUs.Total += gpus
			ps.GPUs.Running += alloc
			if n.Up() {
				ps.Nodes.Up++
				ps.GPUs.Free += gpus - alloc
			} else {
				ps.Nodes.Down++
			}
		}
	}
	for i := range jobs {
		j := &jobs[i]
		tasks := max(1, len(j.ArrayTasks))
		switch j.State {
		case policy.StatePending:
			gpus := 0
			for _, n := range j.RequestedGPUs() {
				gpus += n
			}
			for _, pi := range poolsOf(j.Partitions, byPartition) {
				out[pi].Jobs.Pending += tasks
				out[pi].GPUs.Pending += gpus
			}
		case policy.StateRunning, policy.StateConfiguring, policy.StateCompleting, policy.StateSuspended:
			// A started job is in one partition, the first it lists.
			if len(j.Partitions) > 0 {
				for _, pi := range byPartition[j.Partitions[0]] {
					out[pi].Jobs.Running++
				}
			}
		}
	}
	return out
}

// poolsOf lists the pools (indexes into PoolCounts' result) of partitions, each once however
// many of the partitions it has.
func poolsOf(partitions []string, byPartition map[string][]int) []int {
	var out []int
	for _, part := range partitions {
		for _, pi := range byPartition[part] {
			if !slices.Contains(out, pi) {
				out = append(out, pi)
			}
		}
	}
	return out
}

// Cluster is the whole page's data from one consistent state. It is a pure function of the
// state and the clock, so the page and the JSON always agree.
func (v *View) clusterData(s state) ClusterResponse {
	r := ClusterResponse{Status: v.status(s), Pools: s.pools, PoolsError: s.poolsErr, Projects: []Project{}, Types: []GPUType{},
		RecentActions: s.actions, ActionsError: s.actionsErr}
	if r.Pools == nil {
		r.Pools = []Pool{}
	}
	if r.RecentActions == nil {
		r.RecentActions = []Action{}
	}
	if s.plan != nil {
		r.Projects, r.Types = Projects(s.plan, s.cfg), Types(s.plan)
	}
	return r
}
