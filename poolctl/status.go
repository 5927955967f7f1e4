package poolctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// PoolStatus is one pool's line of `poolctl status`, and its --json form.
type PoolStatus struct {
	Name            string  `json:"name"`
	Partition       string  `json:"partition"`
	GPUType         string  `json:"gpu_type"` // "" for CPU pools
	Spot            bool    `json:"spot"`
	PricePerGPUHour float64 `json:"price_per_gpu_hour"`
	PricePerCPUHour float64 `json:"price_per_cpu_hour"`
	// Found is false when no node of the cluster is in the pool's partition.
	Found bool       `json:"found"`
	Nodes NodeCounts `json:"nodes"`
	GPUs  GPUCounts  `json:"gpus"`
	Jobs  JobCounts  `json:"jobs"`
}

// NodeCounts counts a pool's nodes by whether Slurm may start jobs on them (slurm.Node.Up).
type NodeCounts struct {
	Up   int `json:"up"`
	Down int `json:"down"`
}

// GPUCounts: Total is every GPU of the pool's nodes, Allocated those held by jobs (on any
// node, a draining one included), Free those unallocated on nodes that are up.
type GPUCounts struct {
	Total     uint64 `json:"total"`
	Allocated uint64 `json:"allocated"`
	Free      uint64 `json:"free"`
}

// JobCounts counts jobs by state. A pending job that lists several partitions counts in each
// of them; PendingShared says how many of Pending do.
type JobCounts struct {
	Running       int `json:"running"`
	Pending       int `json:"pending"`
	PendingShared int `json:"pending_shared"`
}

// Status is the whole answer of `poolctl status --json`.
type Status struct {
	Config string       `json:"config"`
	Pools  []PoolStatus `json:"pools"`
}

func statusCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per pool: nodes up/down, GPUs total/allocated/free, jobs running/pending",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			cfg, path, err := loadConfig(c)
			if err != nil {
				return err
			}
			nodes, err := env.Fetcher.Nodes(c.Context)
			if err != nil {
				return cli.Exit(err.Error(), exitProblems)
			}
			jobs, err := env.Fetcher.Queue(c.Context, slurm.QueueRead{Fields: slurm.AllFields})
			if err != nil {
				return cli.Exit(err.Error(), exitProblems)
			}
			st := Status{Config: path, Pools: PoolStatuses(cfg, nodes, jobs)}
			if c.Bool("json") {
				enc := json.NewEncoder(env.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			return printStatus(env.Out, st)
		},
	}
}

// PoolStatuses counts nodes, GPUs and jobs for each pool of cfg, in config order.
func PoolStatuses(cfg *pools.Config, nodes []slurm.Node, jobs []slurm.Job) []PoolStatus {
	out := make([]PoolStatus, len(cfg.Pools))
	byPartition := make(map[string]*PoolStatus, len(cfg.Pools))
	for i := range cfg.Pools {
		p := &cfg.Pools[i]
		out[i] = PoolStatus{
			Name: p.Name, Partition: p.Partition, GPUType: p.GPUType, Spot: p.Spot,
			PricePerGPUHour: p.PricePerGPUHour, PricePerCPUHour: p.PricePerCPUHour,
		}
		byPartition[p.Partition] = &out[i]
	}
	for i := range nodes {
		n := &nodes[i]
		for _, part := range n.Partitions {
			ps := byPartition[part]
			if ps == nil {
				continue
			}
			ps.Found = true
			gpus, alloc := n.GPUs(), n.AllocGPUs()
			ps.GPUs.Total += gpus
			ps.GPUs.Allocated += alloc
			if n.Up() {
				ps.Nodes.Up++
				ps.GPUs.Free += gpus - min(alloc, gpus)
			} else {
				ps.Nodes.Down++
			}
		}
	}
	for i := range jobs {
		j := &jobs[i]
		switch {
		case j.Running():
			// A running job is in one partition, even if it listed several while pending.
			if ps := byPartition[j.Partition]; ps != nil {
				ps.Jobs.Running++
			}
		case j.Pending():
			parts := j.Partitions()
			for _, part := range parts {
				if ps := byPartition[part]; ps != nil {
					ps.Jobs.Pending++
					if len(parts) > 1 {
						ps.Jobs.PendingShared++
					}
				}
			}
		}
	}
	return out
}

func printStatus(w io.Writer, st Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tPARTITION\tGPU\tSPOT\tPRICE/H\tNODES UP\tDOWN\tGPUS\tALLOC\tFREE\tJOBS RUN\tPEND")
	shared, missing := false, []string{}
	for _, p := range st.Pools {
		gpuType, price, total, alloc, free := "-", fmt.Sprintf("%.2f/cpu", p.PricePerCPUHour), "-", "-", "-"
		if p.GPUType != "" {
			gpuType, price = p.GPUType, fmt.Sprintf("%.2f/gpu", p.PricePerGPUHour)
			total, alloc, free = u64(p.GPUs.Total), u64(p.GPUs.Allocated), u64(p.GPUs.Free)
		}
		pending := strconv.Itoa(p.Jobs.Pending)
		if p.Jobs.PendingShared > 0 {
			pending += "*"
			shared = true
		}
		if !p.Found {
			missing = append(missing, p.Name)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\n", p.Name, p.Partition, gpuType, yesNo(p.Spot), price,
			p.Nodes.Up, p.Nodes.Down, total, alloc, free, p.Jobs.Running, pending)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if shared {
		fmt.Fprintln(w, "* includes pending jobs that list several pools (-p a,b or routed by slurmbridge); each counts in every pool it lists.")
	}
	for _, name := range missing {
		fmt.Fprintf(w, "pool %s: no node of the cluster is in its partition (poolctl validate says more).\n", name)
	}
	return nil
}

func u64(n uint64) string { return strconv.FormatUint(n, 10) }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
