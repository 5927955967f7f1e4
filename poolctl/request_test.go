package poolctl

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// parseExplainFlags runs args through explain's real flag parsing and returns the Request.
func parseExplainFlags(t *testing.T, args []string) (pools.Request, error) {
	t.Helper()
	var req pools.Request
	var reqErr error
	app := &cli.App{
		Flags:          explainFlags,
		ExitErrHandler: func(*cli.Context, error) {},
		Action: func(c *cli.Context) error {
			req, reqErr = requestFromFlags(c.String)
			return nil
		},
	}
	if err := app.Run(append([]string{"explain"}, args...)); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return req, reqErr
}

// TestRequestMatchesCapturedJobDescs compares explain's Request with what slurmctld 22.05.8
// passed to job_submit for the same sbatch options (bridge/testdata/job_desc-22.05.8.txt).
func TestRequestMatchesCapturedJobDescs(t *testing.T) {
	f, err := os.Open("../bridge/testdata/job_desc-22.05.8.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var commands, descs []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "# sbatch "), strings.HasPrefix(line, "# srun "), strings.HasPrefix(line, "# scontrol "):
			commands = append(commands, strings.TrimPrefix(line, "# "))
		case strings.HasPrefix(line, "JOBDESC "):
			descs = append(descs, line)
		}
	}
	if len(commands) != len(descs) || len(commands) == 0 {
		t.Fatalf("%d commands, %d job_descs", len(commands), len(descs))
	}
	compared := 0
	for i, command := range commands {
		args, ok := explainArgs(command)
		if !ok {
			continue
		}
		got, err := parseExplainFlags(t, args)
		if err != nil {
			t.Errorf("%s: %v", command, err)
			continue
		}
		want := capturedRequest(t, descs[i])
		if strings.Contains(command, "--sockets-per-node=") {
			want.SocketsPerNode = got.SocketsPerNode // not in the capture
		}
		if got != want {
			t.Errorf("%s:\n got %+v\nwant %+v", command, got, want)
		}
		compared++
	}
	if compared < 10 {
		t.Fatalf("only %d captured commands compared", compared)
	}
}

// explainArgs turns a captured sbatch command into explain's arguments; false for commands
// with options explain does not take (they do not affect routing or are not submissions).
func explainArgs(command string) ([]string, bool) {
	fields := strings.Fields(strings.ReplaceAll(command, "'", ""))
	if fields[0] != "sbatch" {
		return nil, false
	}
	var args []string
	for i := 1; i < len(fields); i++ {
		switch f := fields[i]; {
		case f == "--wrap":
			i++ // the script, not an option
		case strings.HasPrefix(f, "--constraint"), strings.HasPrefix(f, "--mem-per-gpu"), f == "--no-requeue":
			return nil, false
		default:
			args = append(args, f)
		}
	}
	return args, true
}

// capturedRequest reads one JOBDESC line as the cgo layer would copy it.
func capturedRequest(t *testing.T, line string) pools.Request {
	t.Helper()
	_, rest, _ := strings.Cut(strings.TrimPrefix(line, "JOBDESC "), " ")
	f := map[string]string{}
	for kv := range strings.SplitSeq(rest, " | ") {
		k, v, _ := strings.Cut(kv, "=")
		if v == "nil" {
			v = ""
		}
		f[k] = v
	}
	num := func(key string) uint64 {
		n, err := strconv.ParseUint(f[key], 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, f[key], err)
		}
		return n
	}
	r := pools.Request{
		Partition: f["partition"], TRESPerJob: f["tres_per_job"], TRESPerNode: f["tres_per_node"],
		TRESPerSocket: f["tres_per_socket"], TRESPerTask: f["tres_per_task"],
		MinCPUs: uint32(num("min_cpus")), CPUsPerTask: uint16(num("cpus_per_task")), PnMinCPUs: uint16(num("pn_min_cpus")),
		MinNodes: uint32(num("min_nodes")), MaxNodes: uint32(num("max_nodes")), NumTasks: uint32(num("num_tasks")),
		NTasksPerNode: uint16(num("ntasks_per_node")), SocketsPerNode: pools.NoVal16,
		Comment: f["comment"],
	}
	// Lua printed pn_min_memory as a double, losing the sentinels' low bits.
	switch mem := f["pn_min_memory"]; mem {
	case "1.844674407371e+19":
		r.PnMinMemory = pools.NoVal64
	case "9.2233720368548e+18":
		r.PnMinMemory = pools.MemPerCPU | num("min_mem_per_cpu")
	default:
		r.PnMinMemory = num("pn_min_memory")
	}
	return r
}
