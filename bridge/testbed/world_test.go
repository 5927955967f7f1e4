package testbed

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// world is a small world: two nodes, a pending and a running job, one file, three daemons.
func world() World {
	return World{
		Nodes: map[string]NodeFacts{"cpu-1": {State: "idle"}, "a100-1": {State: "mixed"}},
		Jobs: map[string]JobFacts{
			"10": {Known: true, State: "PENDING", Partition: "a100,a100-spot", QOS: "normal", Requeue: true, Priority: 20000},
			"11": {Known: true, State: "RUNNING", Partition: "cpu", QOS: "normal", Requeue: true, Priority: 9000},
		},
		Files:   map[string]string{"/etc/x": "aa", "/tmp/not-there": FileAbsent},
		Daemons: map[string]DaemonFacts{"quotad": {PID: 100, RSSBytes: 30 << 20}, "elasticd": {PID: 101, RSSBytes: 20 << 20}, "elastic-agent": {}},
	}
}

// clone copies w deeply enough for a test to change one part of it.
func clone(w World) World {
	out := World{Nodes: map[string]NodeFacts{}, Jobs: map[string]JobFacts{}, Files: map[string]string{}, Daemons: map[string]DaemonFacts{}}
	for k, v := range w.Nodes {
		out.Nodes[k] = v
	}
	for k, v := range w.Jobs {
		out.Jobs[k] = v
	}
	for k, v := range w.Files {
		out.Files[k] = v
	}
	for k, v := range w.Daemons {
		out.Daemons[k] = v
	}
	return out
}

func TestWorldChangesNoneWhenNothingChanged(t *testing.T) {
	w := world()
	if got := w.Changes(clone(w)); len(got) != 0 {
		t.Fatalf("changes in an identical world: %q", got)
	}
}

func TestWorldChangesNameEachChange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*World)
		opts   []WorldOption
		want   string // "" for no change
	}{
		{"node drained", func(w *World) { w.Nodes["cpu-1"] = NodeFacts{State: "drained", Reason: "spank: bad env"} }, nil, `node cpu-1 went from idle to drained (reason "spank: bad env")`},
		{"node draining while busy", func(w *World) { w.Nodes["a100-1"] = NodeFacts{State: "draining", Reason: "x"} }, nil, "node a100-1 went from mixed to draining"},
		{"node not responding", func(w *World) { w.Nodes["cpu-1"] = NodeFacts{State: "idle*"} }, nil, "node cpu-1 went from idle to idle*"},
		{"node down", func(w *World) { w.Nodes["cpu-1"] = NodeFacts{State: "down", Reason: "Not responding"} }, nil, "node cpu-1 went from idle to down"},
		{"node gone", func(w *World) { delete(w.Nodes, "cpu-1") }, nil, "node cpu-1 is gone from sinfo"},
		{"node given a reason", func(w *World) { w.Nodes["cpu-1"] = NodeFacts{State: "idle", Reason: "attacker"} }, nil, `node cpu-1 got the reason "attacker"`},
		{"node busy is fine", func(w *World) { w.Nodes["cpu-1"] = NodeFacts{State: "allocated"} }, nil, ""},
		{"job cancelled", func(w *World) { j := w.Jobs["11"]; j.State = "CANCELLED"; w.Jobs["11"] = j }, []WorldOption{AllowRunOn()}, "job 11 went from RUNNING to CANCELLED"},
		{"job started without the option", func(w *World) { j := w.Jobs["11"]; j.State = "COMPLETED"; w.Jobs["11"] = j }, nil, "job 11 went from RUNNING to COMPLETED"},
		{"job started in one of its pools", func(w *World) { j := w.Jobs["10"]; j.State = "RUNNING"; j.Partition = "a100"; w.Jobs["10"] = j }, []WorldOption{AllowRunOn()}, ""},
		{"job started in a pool it was not routed to", func(w *World) { j := w.Jobs["10"]; j.State = "RUNNING"; j.Partition = "v100"; w.Jobs["10"] = j }, []WorldOption{AllowRunOn()}, "job 10 moved from partition a100,a100-spot to v100"},
		{"finished job forgotten", func(w *World) { delete(w.Jobs, "11") }, []WorldOption{AllowRunOn()}, ""},
		{"pending job forgotten", func(w *World) { delete(w.Jobs, "10") }, []WorldOption{AllowRunOn()}, "job 10 (PENDING) is no longer known"},
		{"job moved", func(w *World) { j := w.Jobs["10"]; j.Partition = "cpu"; w.Jobs["10"] = j }, nil, "job 10 moved from partition a100,a100-spot to cpu"},
		{"job QOS", func(w *World) { j := w.Jobs["10"]; j.QOS = "borrow-proj-b"; w.Jobs["10"] = j }, nil, "job 10's QOS went from normal to borrow-proj-b"},
		{"job requeue", func(w *World) { j := w.Jobs["10"]; j.Requeue = false; w.Jobs["10"] = j }, nil, "job 10's requeue flag went from true to false"},
		{"job held", func(w *World) {
			j := w.Jobs["10"]
			j.Held, j.Priority, j.HoldReason = true, 0, "JobHeldUser"
			w.Jobs["10"] = j
		}, nil, "job 10's hold went from false to true (JobHeldUser)"},
		{"priority drifts", func(w *World) { j := w.Jobs["10"]; j.Priority += 40; w.Jobs["10"] = j }, nil, ""},
		{"priority set", func(w *World) { j := w.Jobs["10"]; j.Priority = 1; w.Jobs["10"] = j }, nil, "job 10's priority went from 20000 to 1"},
		{"priority within a wider tolerance", func(w *World) { j := w.Jobs["10"]; j.Priority -= 5000; w.Jobs["10"] = j }, []WorldOption{WithPriorityTolerance(10000)}, ""},
		{"file changed", func(w *World) { w.Files["/etc/x"] = "bb" }, nil, "file /etc/x changed"},
		{"file created", func(w *World) { w.Files["/tmp/not-there"] = "cc" }, nil, "file /tmp/not-there was created"},
		{"file removed", func(w *World) { w.Files["/etc/x"] = FileAbsent }, nil, "file /etc/x was removed"},
		{"daemon gone", func(w *World) { w.Daemons["quotad"] = DaemonFacts{} }, nil, "quotad (pid 100) no longer runs"},
		{"daemon restarted", func(w *World) { w.Daemons["quotad"] = DaemonFacts{PID: 200, RSSBytes: 30 << 20} }, nil, "quotad restarted: pid 200, was 100"},
		{"daemon grew", func(w *World) { w.Daemons["elasticd"] = DaemonFacts{PID: 101, RSSBytes: 100 << 20} }, nil, "elasticd's RSS grew by 80 MiB (20 -> 100 MiB), more than 64 MiB"},
		{"daemon grew within a wider bound", func(w *World) { w.Daemons["elasticd"] = DaemonFacts{PID: 101, RSSBytes: 100 << 20} }, []WorldOption{WithRSSBound(128 << 20)}, ""},
		{"daemon that never ran", func(w *World) { w.Daemons["elastic-agent"] = DaemonFacts{PID: 5} }, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := world()
			now := clone(w)
			tc.change(&now)
			got := w.Changes(now, tc.opts...)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("changes %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("changes %q, want one holding %q", got, tc.want)
			}
		})
	}
}

func TestParseNodeLinesKeepsEachNodeOnceAndDropsReasonNone(t *testing.T) {
	got := parseNodeLines("cpu-1|idle|none\na100-1|drained|spank: hostile env\na100-1|drained|spank: hostile env\n\n")
	if len(got) != 2 || got["cpu-1"] != (NodeFacts{State: "idle"}) || got["a100-1"] != (NodeFacts{State: "drained", Reason: "spank: hostile env"}) {
		t.Fatalf("parseNodeLines = %v", got)
	}
}

func TestParseVmRSS(t *testing.T) {
	if got := parseVmRSS("Name:\tquotad\nVmPeak:\t  9000 kB\nVmRSS:\t   2048 kB\n"); got != 2<<20 {
		t.Fatalf("VmRSS = %d, want %d", got, 2<<20)
	}
	if got := parseVmRSS("Name:\tzombie\nState:\tZ\n"); got != 0 {
		t.Fatalf("VmRSS of a zombie = %d", got)
	}
}

func TestDaemonFactsReadsOnlyTheNamedProgram(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "x.pid")
	// This test's own process: its command line holds the test binary's name, not "quotad".
	if err := os.WriteFile(pidfile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := ReadDaemon(pidfile, "testbed.test"); got.PID != os.Getpid() || got.RSSBytes <= 0 {
		t.Fatalf("own process: %+v", got)
	}
	if got := ReadDaemon(pidfile, "quotad"); got.PID != 0 {
		t.Fatalf("a pid file naming another program: %+v, want PID 0", got)
	}
	if got := ReadDaemon(filepath.Join(dir, "missing.pid"), "quotad"); got.PID != 0 {
		t.Fatalf("no pid file: %+v", got)
	}
}

func TestFileSumTellsAbsentFromEmpty(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := fileSum(empty)
	if err != nil || a == FileAbsent || len(a) != 64 {
		t.Fatalf("empty file: %q, %v", a, err)
	}
	if b, err := fileSum(filepath.Join(dir, "none")); err != nil || b != FileAbsent {
		t.Fatalf("absent file: %q, %v", b, err)
	}
}

func TestWorldUnwellNodes(t *testing.T) {
	w := World{Nodes: map[string]NodeFacts{"cpu-1": {State: "completing*"}, "cpu-2": {State: "idle"}, "a100-1": {State: "drained", Reason: "x"}, "a100-2": {State: "mixed"}}}
	got := w.UnwellNodes()
	if len(got) != 2 || got[0] != "a100-1 drained (x)" || got[1] != "cpu-1 completing* ()" {
		t.Fatalf("UnwellNodes = %q", got)
	}
}
