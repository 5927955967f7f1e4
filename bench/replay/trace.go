// Package replay drives the slurmbridge testbed with the Alibaba GPU cluster trace v2023
// (alibaba/clusterdata, cluster-trace-gpu-v2023; Weng et al., "Beware of Fragmentation:
// Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC 2023).
//
// Map turns trace tasks into sbatch jobs by stated, seeded rules (Plan.Describe prints every
// choice); Runner submits them on the trace's compressed schedule as the testbed's users under
// one quota mode and waits until they are done; Analyze computes the report from sacct.
package replay

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Task is one row of the trace's openb_pod_list_*.csv files. Times are seconds from the
// trace's start; -1 when the field is empty.
type Task struct {
	Name      string
	CPUMilli  int64
	MemoryMiB int64
	NumGPU    int
	GPUMilli  int      // share of one GPU, in thousandths, for GPU-sharing tasks
	GPUSpec   []string // allowed GPU models; empty: any
	QoS       string   // LS, Guaranteed, Burstable or BE
	Phase     string
	Creation  int64
	Deletion  int64
	Scheduled int64
}

// traceColumns are the columns ReadTasks needs, by header name.
var traceColumns = []string{"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec",
	"qos", "pod_phase", "creation_time", "deletion_time", "scheduled_time"}

// ReadTasks reads a pod list CSV with its header line. Errors name the line.
func ReadTasks(r io.Reader) ([]Task, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("trace header: %w", err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	for _, c := range traceColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("trace header has no %q column (want %s)", c, strings.Join(traceColumns, ","))
		}
	}
	var tasks []Task
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return tasks, nil
		}
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		t, err := parseTask(rec, col)
		if err != nil {
			return nil, fmt.Errorf("trace line %d: %w", line, err)
		}
		tasks = append(tasks, t)
	}
}

func parseTask(rec []string, col map[string]int) (Task, error) {
	field := func(name string) string { return strings.TrimSpace(rec[col[name]]) }
	var err error
	num := func(name string, empty int64) int64 {
		s := field(name)
		if s == "" || err != nil {
			return empty
		}
		v, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || v < 0 {
			err = fmt.Errorf("%s %q is not a count of seconds or units", name, s)
		}
		return v
	}
	t := Task{
		Name:      field("name"),
		CPUMilli:  num("cpu_milli", 0),
		MemoryMiB: num("memory_mib", 0),
		NumGPU:    int(num("num_gpu", 0)),
		GPUMilli:  int(num("gpu_milli", 0)),
		QoS:       field("qos"),
		Phase:     field("pod_phase"),
		Creation:  num("creation_time", -1),
		Deletion:  num("deletion_time", -1),
		Scheduled: num("scheduled_time", -1),
	}
	if err != nil {
		return t, err
	}
	if t.Name == "" {
		return t, errors.New("task has no name")
	}
	if t.Creation < 0 {
		return t, fmt.Errorf("task %s has no creation_time", t.Name)
	}
	if spec := field("gpu_spec"); spec != "" {
		t.GPUSpec = strings.Split(spec, "|")
	}
	return t, nil
}
