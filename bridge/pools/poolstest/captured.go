// Package poolstest holds what tests of several packages build pools' inputs from: the
// job_desc fields slurmctld passed to job_submit for real commands, and the testbed's cluster
// as sinfo showed it. Only tests import it.
package poolstest

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

// JobDesc is one submission of the capture: the command as typed and the request the cgo
// layer builds from the job_desc slurmctld passed.
type JobDesc struct {
	Command string // "sbatch --gpus=3"
	Request pools.Request
}

// JobDescs reads bridge/testdata/job_desc-22.05.8.txt (slurmtest.JobDescs): what slurmctld
// 22.05.8 passed to a logging job_submit.lua for each command written above its JOBDESC line.
func JobDescs(t testing.TB) []JobDesc {
	t.Helper()
	captured := slurmtest.JobDescs(t)
	descs := make([]JobDesc, len(captured))
	for i, c := range captured {
		descs[i] = JobDesc{Command: c.Command, Request: capturedRequest(t, c)}
	}
	return descs
}

// capturedRequest turns one captured job_desc into the Request the cgo layer builds.
func capturedRequest(t testing.TB, c slurmtest.JobDesc) pools.Request {
	t.Helper()
	f := c.Fields
	num := func(key string) uint64 {
		n, err := strconv.ParseUint(f[key], 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, f[key], err)
		}
		return n
	}
	// Every field the capture has is read from it; sockets_per_node and the script (Batch) are
	// not in it and keep UnsetRequest's values.
	r := pools.UnsetRequest()
	r.Partition, r.Comment, r.Features = f["partition"], f["comment"], f["features"]
	r.TRESPerJob, r.TRESPerNode, r.TRESPerSocket, r.TRESPerTask = f["tres_per_job"], f["tres_per_node"], f["tres_per_socket"], f["tres_per_task"]
	r.MinCPUs, r.CPUsPerTask, r.PnMinCPUs = uint32(num("min_cpus")), uint16(num("cpus_per_task")), uint16(num("pn_min_cpus"))
	r.MinNodes, r.MaxNodes = uint32(num("min_nodes")), uint32(num("max_nodes"))
	r.NumTasks, r.NTasksPerNode = uint32(num("num_tasks")), uint16(num("ntasks_per_node"))
	r.Requeue = uint16(num("requeue"))
	if c.Op == "modify" {
		r.Op = pools.Modify
	}
	// Lua printed pn_min_memory as a double, losing the low bits of the sentinels: rebuild it
	// from the exact fields the capture has beside it.
	switch mem := f["pn_min_memory"]; {
	case mem == "1.844674407371e+19":
		r.PnMinMemory = pools.NoVal64
	case mem == "9.2233720368548e+18":
		r.PnMinMemory = pools.MemPerCPU | num("min_mem_per_cpu")
	default:
		r.PnMinMemory = num("pn_min_memory")
	}
	return r
}

// TestbedCluster is the testbed's cluster as sinfo --json showed it idle.
func TestbedCluster(t testing.TB) pools.Cluster {
	t.Helper()
	var sinfo struct {
		Nodes []struct {
			Name       string   `json:"name"`
			Partitions []string `json:"partitions"`
			Gres       string   `json:"gres"`
			CPUs       int      `json:"cpus"`
			RealMemory uint64   `json:"real_memory"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(slurmtest.Fixture(t, "sinfo-22.05-testbed-idle.json"), &sinfo); err != nil {
		t.Fatal(err)
	}
	cl := pools.Cluster{Partitions: map[string][]pools.ClusterNode{}}
	for _, n := range sinfo.Nodes {
		gres, err := gpureq.ParseNodeGres(n.Gres)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range n.Partitions {
			cl.Partitions[p] = append(cl.Partitions[p], pools.ClusterNode{Name: n.Name, Gres: gres, CPUs: n.CPUs, MemoryMB: n.RealMemory})
		}
	}
	return cl
}
