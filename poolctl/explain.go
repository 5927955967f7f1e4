package poolctl

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// explainFlags are the sbatch options routing reads, spelled as sbatch spells them.
var explainFlags = []cli.Flag{
	&cli.StringFlag{Name: "partition", Aliases: []string{"p"}, Usage: "partition or comma-separated list"},
	&cli.StringFlag{Name: "gres", Usage: "e.g. gpu:a100:2 (per node)"},
	&cli.StringFlag{Name: "gpus", Aliases: []string{"G"}, Usage: "[type:]N per job"},
	&cli.StringFlag{Name: "gpus-per-node", Usage: "[type:]N"},
	&cli.StringFlag{Name: "gpus-per-task", Usage: "[type:]N"},
	&cli.StringFlag{Name: "gpus-per-socket", Usage: "[type:]N (needs --sockets-per-node)"},
	&cli.StringFlag{Name: "sockets-per-node", Usage: "N"},
	&cli.StringFlag{Name: "nodes", Aliases: []string{"N"}, Usage: "N or MIN-MAX"},
	&cli.StringFlag{Name: "ntasks", Aliases: []string{"n"}, Usage: "N"},
	&cli.StringFlag{Name: "ntasks-per-node", Usage: "N"},
	&cli.StringFlag{Name: "cpus-per-task", Aliases: []string{"c"}, Usage: "N"},
	&cli.StringFlag{Name: "mem", Usage: "memory per node, e.g. 8G (units K, M, G, T; M if none)"},
	&cli.StringFlag{Name: "mem-per-cpu", Usage: "memory per CPU, e.g. 2G"},
	&cli.StringFlag{Name: "comment", Usage: "class=NAME sets the workload class"},
	&cli.StringFlag{Name: "job-name", Aliases: []string{"J"}},
}

func explainCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "explain",
		Usage: "show where the job_submit plugin would send a job, and why each pool is or is not listed",
		UsageText: "poolctl explain [sbatch flags]\n" +
			"e.g. poolctl explain --gres=gpu:a100:1 -N 2 --comment class=bert -p a100",
		Description:  "Reads the pools file only: it shows the routing decision, not whether the pools have room now.",
		Flags:        explainFlags,
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			req, err := requestFromFlags(c.String)
			if err != nil {
				return cli.Exit(err.Error(), exitUsage)
			}
			cfg, _, err := loadConfig(c)
			if err != nil {
				return err
			}
			d := cfg.Route(&req)
			if d.Err != nil {
				return cli.Exit("cannot read the request: "+d.Err.Error(), exitUsage)
			}
			return printDecision(env.Out, cfg, &req, &d)
		},
	}
}

// requestFromFlags fills a pools.Request the way sbatch and slurmctld fill job_desc for the
// same options (bridge/testdata/job_desc-22.05.8.txt has the captured fields): unset numbers
// keep their NO_VAL sentinels, GPU options become "gres:gpu:..." entries of the tres_per_*
// field of their scope. flag returns an option's value, "" when not given.
func requestFromFlags(flag func(name string) string) (pools.Request, error) {
	r := pools.UnsetRequest()
	r.Partition, r.Comment = flag("partition"), flag("comment")
	if r.Partition != "" && strings.ContainsAny(r.Partition, " \t") {
		return r, fmt.Errorf("--partition %q: partition names have no spaces; list them with commas", r.Partition)
	}
	// On an error, r is returned as far as it was filled.
	for _, fill := range []func(*pools.Request, func(string) string) error{gpusFromFlags, countsFromFlags, memoryFromFlags} {
		if err := fill(&r, flag); err != nil {
			return r, err
		}
	}
	return r, nil
}

// gpusFromFlags fills the tres_per_* fields. --gres may name other GRES too; the --gpus*
// options count GPUs only.
func gpusFromFlags(r *pools.Request, flag func(string) string) error {
	gres, err := gresEntries("--gres", flag("gres"), "")
	if err != nil {
		return err
	}
	perNode, err := gresEntries("--gpus-per-node", flag("gpus-per-node"), gpureq.GPUName+":")
	if err != nil {
		return err
	}
	r.TRESPerNode = joinNonEmpty(gres, perNode)
	if r.TRESPerJob, err = gresEntries("--gpus", flag("gpus"), gpureq.GPUName+":"); err != nil {
		return err
	}
	if r.TRESPerTask, err = gresEntries("--gpus-per-task", flag("gpus-per-task"), gpureq.GPUName+":"); err != nil {
		return err
	}
	if r.TRESPerSocket, err = gresEntries("--gpus-per-socket", flag("gpus-per-socket"), gpureq.GPUName+":"); err != nil {
		return err
	}
	return nil
}

// countsFromFlags fills sockets, nodes, tasks and CPUs, deriving what sbatch derives: --ntasks
// from -N and --ntasks-per-node, min_cpus from the tasks and --cpus-per-task. It needs the GPU
// fields filled: --gpus-per-socket requires --sockets-per-node.
func countsFromFlags(r *pools.Request, flag func(string) string) error {
	sockets, err := count16("--sockets-per-node", flag("sockets-per-node"))
	if err != nil {
		return err
	}
	if r.TRESPerSocket != "" && sockets == 0 {
		return fmt.Errorf("--gpus-per-socket needs --sockets-per-node, as sbatch does")
	}
	minNodes, maxNodes, err := nodeRange(flag("nodes"))
	if err != nil {
		return err
	}
	tasks, err := count32("--ntasks", flag("ntasks"))
	if err != nil {
		return err
	}
	tasksPerNode, err := count16("--ntasks-per-node", flag("ntasks-per-node"))
	if err != nil {
		return err
	}
	cpusPerTask, err := count16("--cpus-per-task", flag("cpus-per-task"))
	if err != nil {
		return err
	}
	if sockets > 0 {
		r.SocketsPerNode = uint16(sockets)
	}
	if minNodes > 0 {
		r.MinNodes, r.MaxNodes = uint32(minNodes), uint32(maxNodes)
	}
	if tasksPerNode > 0 {
		r.NTasksPerNode = uint16(tasksPerNode)
		if tasks == 0 && minNodes > 0 {
			tasks = minNodes * tasksPerNode // sbatch derives --ntasks from -N and --ntasks-per-node
		}
	}
	if tasks >= uint64(pools.NoVal) {
		return fmt.Errorf("--nodes × --ntasks-per-node is %d tasks, more than Slurm can count", tasks)
	}
	if tasks > 0 {
		r.NumTasks = uint32(tasks)
	}
	if cpusPerTask > 0 {
		r.CPUsPerTask, r.PnMinCPUs = uint16(cpusPerTask), uint16(cpusPerTask)
	}
	// min_cpus is the job's CPU total: one per node at least, cpus-per-task for each task.
	cpus := max(minNodes, 1, max(tasks, 1)*max(cpusPerTask, 1))
	if cpus >= uint64(pools.NoVal) {
		return fmt.Errorf("--ntasks × --cpus-per-task is %d CPUs, more than Slurm can count", cpus)
	}
	r.MinCPUs = uint32(cpus)
	return nil
}

// memoryFromFlags fills pn_min_memory from --mem (per node) or --mem-per-cpu (flagged
// MemPerCPU); without either it keeps NO_VAL.
func memoryFromFlags(r *pools.Request, flag func(string) string) error {
	mem, perCPU := flag("mem"), flag("mem-per-cpu")
	switch {
	case mem != "" && perCPU != "":
		return fmt.Errorf("--mem and --mem-per-cpu exclude each other, as in sbatch")
	case mem != "":
		var err error
		if r.PnMinMemory, err = memoryMB("--mem", mem); err != nil {
			return err
		}
	case perCPU != "":
		mb, err := memoryMB("--mem-per-cpu", perCPU)
		if err != nil {
			return err
		}
		r.PnMinMemory = mb | pools.MemPerCPU
	}
	return nil
}

// gresEntries turns an option's comma-separated list into tres_per_* entries: "a100:2" for
// --gpus becomes "gres:gpu:a100:2" (prefix "gpu:"), "gpu:2" for --gres becomes "gres:gpu:2".
// Each entry is checked, so a typo is reported against the option the user wrote.
func gresEntries(option, value, prefix string) (string, error) {
	if value == "" {
		return "", nil
	}
	var out []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimPrefix(entry, "gres:")
		if entry == "" {
			return "", fmt.Errorf("%s %q: empty entry", option, value)
		}
		full := "gres:" + prefix + entry
		if _, err := gpureq.ParseGres(option, full); err != nil {
			return "", fmt.Errorf("%s %q: %v", option, value, err)
		}
		out = append(out, full)
	}
	return strings.Join(out, ","), nil
}

func joinNonEmpty(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, ",")
}

// count reads a positive whole number below Slurm's NO_VAL for the field; "" is 0 (not set).
func count(option, value string, limit uint64) (uint64, error) {
	if value == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(value, 10, 64)
	if err != nil || n == 0 || n >= limit {
		return 0, fmt.Errorf("%s %q: want a whole number from 1 to %d", option, value, limit-1)
	}
	return n, nil
}

func count16(option, value string) (uint64, error) {
	return count(option, value, uint64(pools.NoVal16))
}
func count32(option, value string) (uint64, error) { return count(option, value, uint64(pools.NoVal)) }

// nodeRange reads -N: "N" or "MIN-MAX"; 0, 0 when not given.
func nodeRange(value string) (lo, hi uint64, err error) {
	if value == "" {
		return 0, 0, nil
	}
	minText, maxText, isRange := strings.Cut(value, "-")
	if lo, err = count32("--nodes", minText); err != nil || lo == 0 {
		return 0, 0, fmt.Errorf("--nodes %q: want N or MIN-MAX, whole numbers of at least 1", value)
	}
	hi = lo
	if isRange {
		if hi, err = count32("--nodes", maxText); err != nil || hi < lo {
			return 0, 0, fmt.Errorf("--nodes %q: want N or MIN-MAX with MIN ≤ MAX", value)
		}
	}
	return lo, hi, nil
}

// memoryMB reads a memory size as sbatch does: a whole number with an optional unit K, M, G or
// T (binary), megabytes when none. 0 means "all of a node's memory".
func memoryMB(option, value string) (uint64, error) {
	digits, mul, div := value, uint64(1), uint64(1)
	if n := len(value); n > 0 {
		switch value[n-1] {
		case 'K', 'k':
			digits, div = value[:n-1], 1024
		case 'M', 'm':
			digits = value[:n-1]
		case 'G', 'g':
			digits, mul = value[:n-1], 1024
		case 'T', 't':
			digits, mul = value[:n-1], 1024*1024
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	// The top bit of pn_min_memory is the per-CPU flag, so sizes stay well below it.
	if err != nil || n > (pools.MemPerCPU-1)/mul {
		return 0, fmt.Errorf("%s %q: want a size such as 8000, 8G or 512M", option, value)
	}
	return (n*mul + div - 1) / div, nil // K rounds up, so a small size never becomes "whole node"
}

func printDecision(w io.Writer, cfg *pools.Config, r *pools.Request, d *pools.Decision) error {
	class := d.Class
	if class == "" {
		class = "none (speeds for \"default\")"
	}
	fmt.Fprintf(w, "Request:    %s; workload class %s\n", d.GPUs.String(), class)
	switch d.Action {
	case pools.SetPartition:
		fmt.Fprintf(w, "Decision:   route to %s\n", d.Partition)
	case pools.Reject:
		fmt.Fprintln(w, "Decision:   reject")
	default:
		if r.Partition != "" {
			fmt.Fprintf(w, "Decision:   keep partition %s\n", r.Partition)
		} else {
			fmt.Fprintln(w, "Decision:   keep (Slurm's default partition applies)")
		}
	}
	if d.Message != "" {
		fmt.Fprintf(w, "Message:    %s\n", d.Message)
	}
	fmt.Fprintf(w, "Candidates (policy %s; cost = price per hour / speed):\n", cfg.Policy)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RANK\tPOOL\tPARTITION\tGPU\tSPOT\tPRICE/H\tSPEED\tCOST\tREASON")
	for i := range d.Candidates {
		cand := &d.Candidates[i]
		p := cand.Pool
		rank, reason := "-", cand.Reason()
		if cand.Rank > 0 {
			rank = strconv.Itoa(cand.Rank)
		}
		if reason == "" {
			reason = "listed"
		}
		gpuType, price := "-", p.PricePerCPUHour
		if p.IsGPU() {
			gpuType, price = p.GPUType, p.PricePerGPUHour
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%.2f\t%s\n", rank, p.Name, p.Partition, gpuType, yesNo(p.Spot),
			price, cand.Speed, cand.Cost, reason)
	}
	return tw.Flush()
}
