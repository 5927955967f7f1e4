package slurm

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Fuzz targets for every reader of Slurm's text in this package (FuzzParseQueue is in
// jobs_test.go). Each is seeded from the captured fixtures of every release and checks
// properties beyond "no panic": never both a value and an error, the same answer twice, and
// bounds on what a value may hold. `make fuzz` runs each for FUZZTIME.

// addFixtures seeds f with every testdata file matching pattern.
func addFixtures(f *testing.F, pattern string) {
	f.Helper()
	names, err := filepath.Glob(filepath.Join("testdata", pattern))
	if err != nil || len(names) == 0 {
		f.Fatalf("no fixtures %s: %v", pattern, err)
	}
	for _, n := range names {
		f.Add(fixture(f, filepath.Base(n)))
	}
}

func FuzzParseJSON(f *testing.F) {
	addFixtures(f, "squeue-*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseQueue(data, AllFields)
		if err != nil {
			if jobs != nil {
				t.Fatalf("jobs and an error: %v", err)
			}
			return
		}
		again, _ := ParseQueue(data, AllFields)
		if !reflect.DeepEqual(jobs, again) {
			t.Fatal("two reads differ")
		}
		for _, j := range jobs {
			if j.ID == 0 || (j.State == "" && len(j.StateFlags) == 0) || j.Unreadable != "" {
				t.Fatalf("bad job %+v", j)
			}
			if !slices.IsSorted(j.ArrayTasks) || len(j.ArrayTasks) > maxArrayTasks {
				t.Fatalf("job %d: array tasks %d, unsorted or too many", j.ID, len(j.ArrayTasks))
			}
			if j.Pending() && j.Running() {
				t.Fatalf("job %d both pending and running (%s)", j.ID, j.StateName())
			}
		}
	})
}

func FuzzParseNodes(f *testing.F) {
	addFixtures(f, "sinfo-*.json")
	addFixtures(f, "scontrol-nodes-*.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		nodes, err := ParseNodes(data)
		if err != nil {
			if nodes != nil {
				t.Fatalf("nodes and an error: %v", err)
			}
			return
		}
		for _, n := range nodes {
			if n.Name == "" {
				t.Fatalf("a node without a name: %+v", n)
			}
			for _, g := range slices.Concat(n.Gres, n.GresUsed) {
				if g.Name == "" || strings.ContainsAny(g.Name+g.Type, ",:()") {
					t.Fatalf("node %s: gres %+v", n.Name, g)
				}
			}
		}
	})
}

// FuzzParseNodesText: names picks a release that names a node's reservation (24.11) or one
// that does not (22.05).
func FuzzParseNodesText(f *testing.F) {
	names, err := filepath.Glob(filepath.Join("testdata", "scontrol-nodes-*.txt"))
	if err != nil || len(names) == 0 {
		f.Fatalf("no node captures: %v", err)
	}
	for _, n := range names {
		f.Add(fixture(f, filepath.Base(n)), true)
		f.Add(fixture(f, filepath.Base(n)), false)
	}
	f.Add([]byte("NodeName=n1 CPUAlloc=0 CPUTot=8 Gres=(null) RealMemory=1 AllocMem=0 State=IDLE+RESERVED CfgTRES= AllocTRES= "+
		"Comment=a\nNodeName=n2 x ReservationName=r\n"), true)
	f.Fuzz(func(t *testing.T, data []byte, names bool) {
		rel := Release{22, 5}
		if names {
			rel = Release{24, 11}
		}
		nodes, err := ParseNodesText(data, rel)
		if err != nil {
			if nodes != nil {
				t.Fatalf("nodes and an error: %v", err)
			}
			return
		}
		again, _ := ParseNodesText(data, rel)
		if !reflect.DeepEqual(nodes, again) {
			t.Fatal("two reads differ")
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			words := slices.Concat([]string{n.Name, n.State, n.Reservation, n.Address, n.Hostname}, n.Partitions, n.StateFlags)
			if n.Name == "" || seen[n.Name] || slices.ContainsFunc(words, func(w string) bool { return strings.ContainsAny(w, " \n") }) {
				t.Fatalf("bad node %+v", n)
			}
			seen[n.Name] = true
			if !slices.Contains(nodeBaseStates, strings.ToUpper(n.State)) || n.State != strings.ToLower(n.State) || n.CPUs < 0 || n.AllocCPUs < 0 {
				t.Fatalf("node %s: state %q cpus %d/%d", n.Name, n.State, n.AllocCPUs, n.CPUs)
			}
			if n.Reservation != "" && (!names || !slices.Contains(n.StateFlags, "RESERVED")) {
				t.Fatalf("node %s: reservation %q without RESERVED or on 22.05", n.Name, n.Reservation)
			}
			for _, p := range n.Partitions {
				if p == "" || strings.Contains(p, ",") {
					t.Fatalf("node %s: partitions %q", n.Name, n.Partitions)
				}
			}
			for _, g := range slices.Concat(n.Gres, n.GresUsed) {
				if g.Name == "" || strings.ContainsAny(g.Name+g.Type, ",:()") {
					t.Fatalf("node %s: gres %+v", n.Name, g)
				}
			}
		}
	})
}

func FuzzParseTaskIDs(f *testing.F) {
	for _, s := range []string{"2-3%2", "0-9:3,12", "[1,3,5-7]", "4", "1-4000000", "0-4294967295:1000", "3-1", "1,1", "..."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids, err := ParseTaskIDs(s)
		if err != nil {
			if ids != nil {
				t.Fatalf("ids and an error: %v", err)
			}
			return
		}
		if len(ids) > maxArrayTasks {
			t.Fatalf("%d tasks", len(ids))
		}
		for i := 1; i < len(ids); i++ {
			if ids[i] <= ids[i-1] {
				t.Fatalf("%q: task %d after %d", s, ids[i], ids[i-1])
			}
		}
	})
}

func FuzzParseArrayThrottles(f *testing.F) {
	f.Add([]byte("12\x1f0-9%2\n13\x1f4\n"))
	f.Add([]byte("12\x1f[0-9%2]\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseQueue(out, ThrottleFields)
		if err != nil {
			if jobs != nil {
				t.Fatalf("throttles and an error: %v", err)
			}
			return
		}
		for _, j := range jobs {
			if j.ArrayJobID == 0 || j.ArrayThrottle < 0 {
				t.Fatalf("array %d throttle %d", j.ArrayJobID, j.ArrayThrottle)
			}
		}
		for _, id := range []uint32{1, 12} {
			if n, err := ParseArrayTaskThrottle(out, id); err == nil && n < 0 {
				t.Fatalf("array %d: throttle %d", id, n)
			}
		}
	})
}

func FuzzParseQueueSummary(f *testing.F) {
	f.Add([]byte("12\x1f12_3\x1falice\x1fproj-a\x1fnormal\x1fa100\x1fPENDING\x1fResources\x1f(null)\x1ftrain\x1fx\n" +
		"13\x1f13+0\x1fbob\x1fproj-b\x1fguar\x1fa100\x1fRUNNING\x1fNone\x1fa100-1\x1fn\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseQueue(out, SummaryFields)
		if err != nil {
			if jobs != nil {
				t.Fatalf("jobs and an error: %v", err)
			}
			return
		}
		for _, j := range jobs {
			if strings.Contains(j.PrintedID+j.User+j.Account+j.QOS+j.StateName()+j.StateReason+j.Partition+j.Nodes, queueSep) || strings.Contains(j.Name, "\n") {
				t.Fatalf("a field holds a separator: %+v", j)
			}
			if j.ID == 0 || j.PrintedID == "" {
				t.Fatalf("a job without its ids: %+v", j)
			}
		}
	})
}

func FuzzParseJobNames(f *testing.F) {
	f.Add([]byte("12\x1felastic-worker-of-7\n13\x1fx\x1fy\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseQueue(out, NameFields)
		if err != nil {
			t.Fatalf("the names read skips what it cannot read, yet: %v", err)
		}
		for _, j := range jobs {
			if j.ID == 0 || strings.Contains(j.Name, "\n") {
				t.Fatalf("job %d named %q", j.ID, j.Name)
			}
		}
	})
}

// FuzzParseJSONExtraFields seeds squeue --json with the fields only the JSON read has.
func FuzzParseJSONExtraFields(f *testing.F) {
	// The small capture only: seeded with the 80 KB ones too, the fuzzer stalled after a few
	// executions (10 s at 0/s, seen on Go's engine, not in the parse, which reads each seed in
	// well under a millisecond).
	addFixtures(f, "squeue-22.05-testbed-mixed.json")
	f.Add([]byte(`{"jobs":[{"job_id":7,"user_id":1001,"time_limit":{"set":true,"infinite":false,"number":60},"gres_detail":["gpu:a100:2(IDX:0,2-3)"],"tasks":2,"restart_cnt":1}],"errors":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := ParseQueue(data, AllFields)
		if err != nil && jobs != nil {
			t.Fatalf("jobs and an error: %v", err)
		}
	})
}

func FuzzParseUnmunge(f *testing.F) {
	for _, s := range []string{"UID:             1001\n\nquotad-api GET /api/v1/jobs/7", "UID: 0\n\n", "UID: 5\n\na\n\nb", "GID: 5\n\nx", "UID: -1\n\n", "UID: 4294967296\n\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		id, err := ParseUnmunge(out)
		if err != nil {
			if id != (MungeIdentity{}) {
				t.Fatalf("identity %+v and an error: %v", id, err)
			}
			return
		}
		// The payload is what follows the first blank line, untouched.
		if _, payload, _ := strings.Cut(out, "\n\n"); id.Payload != payload {
			t.Fatalf("payload %q, want %q", id.Payload, payload)
		}
	})
}

func FuzzParseSacct(f *testing.F) {
	f.Add([]byte("20|CANCELLED by 1001|gres/gpu=1,node=1|a|b\n21|PREEMPTED||w\n"), uint8(4))
	f.Add([]byte("20|COMPLETED\n"), uint8(4))
	f.Fuzz(func(t *testing.T, out []byte, n uint8) {
		fields := []string{"JobID", "State", "AllocTRES", "Comment"}[:1+int(n)%4]
		recs, err := ParseSacct(out, fields)
		if err != nil {
			if recs != nil {
				t.Fatalf("records and an error: %v", err)
			}
			return
		}
		for _, r := range recs {
			if len(r) != len(fields) {
				t.Fatalf("record %v, want fields %v", r, fields)
			}
		}
	})
}

func FuzzParseAssociations(f *testing.F) {
	addFixtures(f, "sacctmgr-assoc-limits-*.txt")
	f.Fuzz(func(t *testing.T, out []byte) {
		assocs, err := ParseAssociations(out, capturedAssociationFields)
		if err != nil {
			if assocs != nil {
				t.Fatalf("associations and an error: %v", err)
			}
			return
		}
		for _, a := range assocs {
			for _, n := range []int{a.GrpJobs, a.GrpSubmitJobs, a.MaxJobs, a.MaxSubmitJobs} {
				if n < 0 && n != NoLimit {
					t.Fatalf("limit %d in %+v", n, a)
				}
			}
		}
	})
}

func FuzzParseConfig(f *testing.F) {
	addFixtures(f, "scontrol-show-config-22.05-testbed.txt")
	f.Fuzz(func(t *testing.T, out []byte) {
		if !reflect.DeepEqual(ParseConfig(out), ParseConfig(out)) {
			t.Fatal("two reads differ")
		}
	})
}

func FuzzParseVersion(f *testing.F) {
	addFixtures(f, "version-*.txt")
	f.Add([]byte("slurm-wlm 24.11.5\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := ParseVersion(string(out))
		if err != nil {
			if r != (Release{}) {
				t.Fatalf("release %v and an error: %v", r, err)
			}
			return
		}
		if back, err := ParseVersion("slurm " + r.String() + ".0"); err != nil || back != r {
			t.Fatalf("%v printed as %q reads back as %v, %v", r, r.String(), back, err)
		}
	})
}

func FuzzParseSubmitted(f *testing.F) {
	f.Add([]byte("Submitted batch job 42\n"))
	f.Add([]byte("sbatch: warning: x\nSubmitted batch job 7;cluster\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		if id, err := ParseSubmitted(out); (err == nil) == (id == 0) {
			t.Fatalf("id %d, err %v: want an id or an error", id, err)
		}
	})
}
