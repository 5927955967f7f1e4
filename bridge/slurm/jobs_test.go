package slurm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The fields only squeue --json has: owner ids, batch host, working directory, output.
func TestParseJSONReadsOwnerAndPlaceOfTheTestbedFixture(t *testing.T) {
	jobs, err := ParseQueue(fixture(t, "squeue-22.05-testbed-mixed.json"), AllFields)
	if err != nil {
		t.Fatal(err)
	}
	j := jobs[3]
	if j.UserID != 1003 || j.GroupID != 1003 || j.WorkDir != "/tmp" || j.StdOut != "/dev/null" || j.BatchHost != "a100-spot-1" || j.Name != "wrap" {
		t.Fatalf("job %d read as %+v", j.ID, j)
	}
	if _, err := ParseQueue(fixture(t, "squeue-22.05-slurmctld-unreachable.json"), AllFields); err == nil {
		t.Fatal("an answer with errors must not parse")
	}
}

func TestGPUIndices(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		bad  bool
	}{
		{"gpu:a100:1(IDX:0)", []int{0}, false},
		{"gpu:a100:3(IDX:0,2-3)", []int{0, 2, 3}, false},
		{"gpu:0(IDX:N/A)", nil, false},
		{"", nil, false},
		{"gpu:a100:1(IDX:x)", nil, true},
		{"gpu:a100:1(IDX:3-1)", nil, true},
		{"gpu:a100:1(IDX:0", nil, true},
	} {
		got, err := GPUIndices(tc.in)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("GPUIndices(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// The request parts a worker asks for again: tasks on every release (22.05's plain numbers,
// later releases' number objects).
func TestParseJSONReadsTasksOnEveryRelease(t *testing.T) {
	for _, release := range []string{"22.05", "24.11", "26.05"} {
		jobs, err := ParseQueue(fixture(t, "squeue-"+release+"-mixed.json"), AllFields)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(jobs, func(j Job) bool { return j.ID == 7 })
		if i < 0 {
			t.Fatalf("%s: no job 7", release)
		}
		if e := jobs[i]; e.Tasks != 2 || e.Features != "" || e.Restarts != 0 {
			t.Errorf("%s: job 7 read as %+v, want 2 tasks", release, e)
		}
	}
}

// The fast read's command line is the one capture.sh ran on every release.
func TestQueueArgsAreTheCapturedOnes(t *testing.T) {
	for _, rel := range releases {
		captured := strings.Split(strings.TrimSuffix(string(fixture(t, "squeue-"+rel.name+"-mixed.args")), "\n"), "\n")
		if !slices.Equal(captured, QueueArgs(QueueRead{})) {
			t.Errorf("%s: capture.sh ran squeue %q, QueueArgs is %q", rel.name, captured, QueueArgs(QueueRead{}))
		}
	}
}

// The text read of each release says what the JSON read of the same moment says.
func TestParseQueueAgreesWithJSON(t *testing.T) {
	for _, rel := range releases {
		t.Run(rel.name, func(t *testing.T) {
			text, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-mixed.txt"), SchedulingFields)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-mixed.json"), AllFields)
			if err != nil {
				t.Fatal(err)
			}
			byID := map[uint32]Job{}
			for _, j := range fromJSON {
				byID[j.ID] = j
			}
			if len(text) != len(fromJSON) {
				t.Errorf("%d records from text, %d from JSON", len(text), len(fromJSON))
			}
			for _, got := range text {
				want, ok := byID[got.ID]
				if !ok {
					t.Errorf("job %d is not in the JSON", got.ID)
					continue
				}
				// Fields the JSON reader does not fill, and the TRES the text prints as one.
				w := want
				w.ArrayJobID, w.ArrayTasks = got.ArrayJobID, got.ArrayTasks
				w.Name, w.UserID, w.GroupID, w.BatchHost, w.WorkDir, w.GresDetail = "", 0, 0, "", "", nil
				w.TimeLimit, w.StdOut, w.Tasks, w.Features, w.Restarts = 0, "", 0, "", 0
				if got.Pending() {
					w.TRESAlloc = got.TRESAlloc
				} else {
					w.TRESReq = got.TRESReq
				}
				if !reflect.DeepEqual(got, w) {
					t.Errorf("job %d:\ntext %+v\njson %+v", got.ID, got, w)
				}
				gr, err1 := got.GPURequest()
				wr, err2 := want.GPURequest()
				if err1 != nil || err2 != nil || !reflect.DeepEqual(gr, wr) {
					t.Errorf("job %d: GPU request %+v (%v) from text, %+v (%v) from JSON", got.ID, gr, err1, wr, err2)
				}
			}
			// Array 6 (tasks 0-3, two at a time): 0 and 1 run as records 8 and 9, 2 and 3 wait
			// in the array's record, which counts for two jobs.
			arr := map[uint32][]uint32{}
			for _, j := range text {
				if j.ArrayJobID != 0 {
					arr[j.ID] = j.ArrayTasks
				}
			}
			if want := map[uint32][]uint32{6: {2, 3}, 8: {0}, 9: {1}}; !reflect.DeepEqual(arr, want) {
				t.Errorf("array records %v, want %v", arr, want)
			}
		})
	}
}

// An array record keeps its pending tasks together; a task split off by an update is a record
// of its own, in the same array.
func TestParseQueueArrays(t *testing.T) {
	for _, rel := range releases {
		jobs, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-array-updated.txt"), SchedulingFields)
		if err != nil {
			t.Fatalf("%s: %v", rel.name, err)
		}
		got := map[uint32]string{}
		for _, j := range jobs {
			if j.ArrayJobID == 10 {
				got[j.ID] = fmt.Sprintf("%v %d %s", j.ArrayTasks, j.TaskCount(), j.StateReason)
			}
		}
		want := map[uint32]string{
			10: "[1 10 13 16 19 22 25 28 31 34 37 40 50 60 61 62] 16 JobHeldUser",
			11: "[4] 1 JobHeldUser",
			12: "[7] 1 JobHeldUser",
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: array 10 = %v, want %v", rel.name, got, want)
		}
	}
}

// Without --array squeue folds split pending tasks back into the array's record, whatever
// their QOS: that output is refused, with its line.
func TestParseQueueRefusesFoldedArrays(t *testing.T) {
	for _, rel := range releases {
		_, err := ParseQueue(fixture(t, "squeue-"+rel.name+"-array-folded.txt"), SchedulingFields)
		var qe *QueueError
		if !errors.As(err, &qe) || qe.Line != 4 || !strings.Contains(err.Error(), "without --array") {
			t.Errorf("%s: err = %v, want line 4 refused as a task range", rel.name, err)
		}
	}
}

func queueLine(fields ...string) string { return strings.Join(fields, queueSep) }

func goodLine(id, arrayJob, task string) []string {
	return []string{id, arrayJob, task, "bob", "proj-b", "guar-proj-b", "a100", "PENDING", "1", "1", "100",
		"1795473003", "N/A", "1", "", "gres/gpu:a100:1", "N/A", "N/A", "N/A", "cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1", "QOSGrpGRES"}
}

func TestParseQueueLines(t *testing.T) {
	with := func(i int, v string) string {
		f := goodLine("5", "5", "N/A")
		f[i] = v
		return queueLine(f...)
	}
	tests := []struct {
		name    string
		out     string
		wantErr string // "" for success
		line    int
	}{
		{"empty queue", "", "", 0},
		{"one job", queueLine(goodLine("5", "5", "N/A")...) + "\n", "", 0},
		{"no final newline", queueLine(goodLine("5", "5", "N/A")...), "", 0},
		{"a separator in the reason stays in it", queueLine(append(goodLine("5", "5", "N/A"), "more")...), "", 0},
		{"a field short", strings.TrimSuffix(queueLine(goodLine("5", "5", "N/A")...), queueSep+"QOSGrpGRES"), "20 fields, want 21", 1},
		{"a header line", strings.Join(textFormats[SchedulingFields].names(), queueSep), `"JobId" is not a job id`, 1},
		{"unknown state", with(7, "WAITING"), `unknown state "WAITING"`, 1},
		{"requeue not 0/1", with(9, "yes"), `Requeue "yes"`, 1},
		{"batch flag", with(8, ""), `BatchFlag ""`, 1},
		{"priority", with(10, "-1"), `PriorityLong "-1"`, 1},
		{"time format", with(11, "Mar 1 12:00"), "SLURM_TIME_FORMAT", 1},
		{"no user", with(3, ""), `UserName ""`, 1},
		{"no reason", with(20, ""), "no Reason", 1},
		{"array id without a task", with(1, "4"), "ArrayJobId 4 without an ArrayTaskId", 1},
		{"second line bad", queueLine(goodLine("5", "5", "N/A")...) + "\n" + with(13, "x"), `NumNodes "x"`, 2},
		{"same job twice", queueLine(goodLine("5", "5", "N/A")...) + "\n" + queueLine(goodLine("5", "5", "N/A")...), "listed twice", 2},
		{"record lines apart", queueLine(goodLine("5", "5", "1")...) + "\n" + queueLine(goodLine("6", "6", "N/A")...) + "\n" + queueLine(goodLine("5", "5", "2")...), "appears again", 3},
		{"tasks out of order", queueLine(goodLine("5", "5", "2")...) + "\n" + queueLine(goodLine("5", "5", "1")...), "task 1 after task 2", 2},
		{"record lines disagree", queueLine(goodLine("5", "5", "1")...) + "\n" + func() string {
			f := goodLine("5", "5", "2")
			f[5] = "borrow"
			return queueLine(f...)
		}(), "differs", 2},
		{"a running record with two tasks", func() string {
			a, b := goodLine("5", "5", "1"), goodLine("5", "5", "2")
			a[7], b[7] = "RUNNING", "RUNNING"
			return queueLine(a...) + "\n" + queueLine(b...)
		}(), "differs", 2},
		{"a task line that is not a task", queueLine(goodLine("5", "5", "1")...) + "\n" + queueLine(goodLine("5", "5", "2-3")...), "not a task id", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			jobs, err := ParseQueue([]byte(tt.out), SchedulingFields)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var qe *QueueError
			if !errors.As(err, &qe) || qe.Line != tt.line || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want line %d: %s", err, tt.line, tt.wantErr)
			}
			if jobs != nil {
				t.Error("jobs returned with an error")
			}
		})
	}
	// The lines of one record that differ in their task alone are folded by the quick path.
	var lines []string
	for _, task := range []string{"3", "4", "9"} {
		lines = append(lines, queueLine(goodLine("7", "7", task)...))
	}
	jobs, err := ParseQueue([]byte(strings.Join(lines, "\n")+"\n"+queueLine(goodLine("8", "8", "N/A")...)), SchedulingFields)
	if err != nil || len(jobs) != 2 || !reflect.DeepEqual(jobs[0].ArrayTasks, []uint32{3, 4, 9}) || jobs[0].TaskCount() != 3 || jobs[1].ID != 8 {
		t.Fatalf("array record folded to %+v, %v", jobs, err)
	}
	jobs, err = ParseQueue([]byte(queueLine(append(goodLine("5", "5", "N/A"), "more")...)), SchedulingFields)
	if err != nil || jobs[0].StateReason != "QOSGrpGRES"+queueSep+"more" {
		t.Errorf("reason = %q, %v", jobs[0].StateReason, err)
	}
	// A TRES string we cannot read is the job's problem, not the queue's: one user's job must
	// not blind quotad to every other job.
	jobs, err = ParseQueue([]byte(queueLine(goodLine("4", "4", "N/A")...)+"\n"+with(19, "gres/gpu,license/x y=1")+"\n"+queueLine(goodLine("6", "6", "N/A")...)), SchedulingFields)
	if err != nil || len(jobs) != 3 || jobs[0].Unreadable != "" || jobs[2].Unreadable != "" {
		t.Fatalf("a bad TRES: %+v, %v; want 3 jobs", jobs, err)
	}
	if bad := jobs[1]; bad.ID != 5 || bad.Account != "proj-b" || bad.QOS != "guar-proj-b" || !bad.Pending() || bad.TRESReq != nil ||
		!strings.Contains(bad.Unreadable, `tres-alloc: TRES: bad token "gres/gpu": want NAME=VALUE`) {
		t.Errorf("job with a bad TRES = %+v", bad)
	}
	jobs, err = ParseQueue([]byte(queueLine(append(goodLine("5", "5", "N/A"), "more")...)), SchedulingFields)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("a line with a field more: %+v, %v; want its job read", jobs, err)
	}
	j := jobs[0]
	if j.ID != 5 || j.User != "bob" || !j.Pending() || !j.Batch || !j.Requeue || j.Priority != 100 || j.Submit.Unix() != 1795473003 ||
		!j.Start.IsZero() || j.TRESReq.GPUs("a100") != 1 || j.TRESAlloc != nil || j.TaskCount() != 1 {
		t.Errorf("job = %+v", j)
	}
}

// envRunner records the environment the fast read runs with.
type envRunner struct {
	replayRunner
	env []string
}

func (r *envRunner) RunEnv(ctx context.Context, edit func([]string) []string, name string, args ...string) ([]byte, error) {
	r.env = edit([]string{"PATH=/usr/bin", "SQUEUE_USERS=alice", "SQUEUE_FORMAT=%i", "SLURM_TIME_FORMAT=relative", "TZ=Europe/Paris", "SLURM_CONF=/etc/x"})
	return r.Run(ctx, name, args...)
}

func TestSchedulingReadRunsWithoutSqueueFilters(t *testing.T) {
	r := &envRunner{replayRunner: replayRunner{t: t, outputs: map[string][]byte{
		"squeue " + strings.Join(QueueArgs(QueueRead{}), " "): fixture(t, "squeue-24.11-mixed.txt"),
	}}}
	jobs, err := Client{Runner: r}.Queue(context.Background(), QueueRead{})
	if err != nil || len(jobs) != 9 {
		t.Fatalf("%d jobs, %v", len(jobs), err)
	}
	want := []string{"PATH=/usr/bin", "SLURM_CONF=/etc/x", "SLURM_TIME_FORMAT=%s", "SLURM_BITSTR_LEN=0", "TZ=UTC"}
	if !slices.Equal(r.env, want) {
		t.Errorf("env %q, want %q", r.env, want)
	}
}

// The benchmark's variant without TZ runs with the fast read's environment less TZ alone.
func TestQueueOutputInLocalTime(t *testing.T) {
	out := []byte("1|x\n")
	r := &envRunner{replayRunner: replayRunner{t: t, outputs: map[string][]byte{"squeue " + strings.Join(QueueArgs(QueueRead{}), " "): out}}}
	got, err := Client{Runner: r}.QueueOutput(context.Background(), QueueVariant{LocalTime: true})
	if err != nil || string(got) != string(out) {
		t.Fatalf("output %q, %v", got, err)
	}
	want := []string{"PATH=/usr/bin", "SLURM_CONF=/etc/x", "SLURM_TIME_FORMAT=%s", "SLURM_BITSTR_LEN=0"}
	if !slices.Equal(r.env, want) {
		t.Errorf("env %q, want %q", r.env, want)
	}
}

func TestUpdateFailures(t *testing.T) {
	for _, rel := range releases {
		stderr := string(fixture(t, "scontrol-update-"+rel.name+".err"))
		err := &CommandError{Command: "scontrol update", ExitCode: 1, Stderr: stderr}
		got := UpdateFailures([]string{"10_7", "2", "999999"}, err)
		want := map[string]string{"2": "Job is no longer pending execution", "999999": "Invalid job id specified"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: failures %v, want %v", rel.name, got, want)
		}
	}
	if got := UpdateFailures([]string{"1"}, nil); len(got) != 0 {
		t.Errorf("a run that succeeded: %v", got)
	}
	// A run that failed without naming its ids: their outcome is unknown, so all failed.
	got := UpdateFailures([]string{"1", "2"}, &CommandError{ExitCode: 1, Stderr: "slurm_update error: Unable to contact slurm controller\n"})
	if len(got) != 2 || !strings.Contains(got["1"], "Unable to contact") {
		t.Errorf("unexplained failure: %v", got)
	}
	// An array task's own failure line names it.
	got = UpdateFailures([]string{"10_4", "10_5"}, &CommandError{ExitCode: 1, Stderr: "10_5: Job has already finished\n"})
	if !reflect.DeepEqual(got, map[string]string{"10_5": "Job has already finished"}) {
		t.Errorf("array task failure: %v", got)
	}
}

func TestFoldArrayTasks(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		want []string
	}{
		{nil, nil},
		{[]string{"5"}, []string{"5"}},
		{[]string{"10_3"}, []string{"10_3"}},
		{[]string{"10_3", "7", "10_1", "10_2", "10_9", "11_0", "10_2"}, []string{"10_[1-3,9]", "7", "11_0"}},
		{[]string{"10_0", "10_1", "10_2", "10_3"}, []string{"10_[0-3]"}},
		// Anything that is not a plain task id passes as it came.
		{[]string{"12+1", "10_x", "_4", "10_[1-2]", "10_["}, []string{"12+1", "10_x", "_4", "10_[1-2]", "10_["}},
	} {
		if got := FoldArrayTasks(c.ids); !slices.Equal(got, c.want) {
			t.Errorf("FoldArrayTasks(%q) = %q, want %q", c.ids, got, c.want)
		}
	}
}

// What scontrol says for a folded request some of whose tasks fail: the request's own failure
// names the set as sent; a task set's line names it as slurmctld wrote it, and 22.05 and 24.11
// print the set that succeeded as "No error".
func TestUpdateFailuresOfTaskSets(t *testing.T) {
	ids := []string{"10_1", "10_2", "10_3", "10_9", "7"}
	for _, c := range []struct {
		name, stderr string
		want         map[string]string
	}{
		{"22.05 and 24.11: sets, the succeeded one as No error",
			"10_1-2,9: No error\n10_3: Job is no longer pending execution\n",
			map[string]string{"10_3": "Job is no longer pending execution"}},
		{"25.05 on: bracketed sets, successes unprinted",
			"10_[3,9]: Job is no longer pending execution (the plugin said no)\n",
			map[string]string{"10_3": "Job is no longer pending execution (the plugin said no)", "10_9": "Job is no longer pending execution (the plugin said no)"}},
		{"the whole request refused",
			"Invalid job id specified for job 10_1-3,9\n",
			map[string]string{"10_1": "Invalid job id specified", "10_2": "Invalid job id specified", "10_3": "Invalid job id specified", "10_9": "Invalid job id specified"}},
	} {
		got := UpdateFailures(ids, &CommandError{Command: "scontrol update", ExitCode: 1, Stderr: c.stderr})
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: failures %v, want %v", c.name, got, c.want)
		}
	}
	// 22.05 cuts a long set at 32 bytes with "...": a cut success explains nothing else, a cut
	// failure leaves its array's unnamed tasks unknown, and no other job's.
	got := UpdateFailures(ids, &CommandError{ExitCode: 1, Stderr: "10_1-2,9...: No error\n10_3: Job is no longer pending execution\n"})
	if !reflect.DeepEqual(got, map[string]string{"10_3": "Job is no longer pending execution"}) {
		t.Errorf("a cut success: %v", got)
	}
	const noLongerPending = "Job is no longer pending execution" // Slurm's, passed on as the reason
	got = UpdateFailures(ids, &CommandError{ExitCode: 1, Stderr: "10_1,3,9...: " + noLongerPending + "\n10_2: No error\n"})
	if len(got) != 4 || got["7"] != "" || !strings.HasPrefix(got["10_2"], OutcomeUnknown) || !strings.HasSuffix(got["10_2"], SetListCut) ||
		!strings.HasSuffix(got["10_9"], SetListCut) || !strings.Contains(got["10_9"], "("+noLongerPending+")") {
		t.Errorf("a cut failure: %v", got)
	}
	// A set that names no id of the run is not taken as explained: every id's outcome is unknown.
	got = UpdateFailures(ids, &CommandError{ExitCode: 1, Stderr: "99_[1-3]: Job has already finished\n"})
	if len(got) != len(ids) || !strings.HasPrefix(got["7"], OutcomeUnknown) {
		t.Errorf("a set of another array: %v", got)
	}
}

// An array's tasks go as one id only where one update reaches every task it names (22.05).
func TestUpdateJobsQOSFoldsTasksOnlyWhereEveryTaskMoves(t *testing.T) {
	ids := []string{"10_1", "10_2", "10_3", "7"}
	for _, c := range []struct {
		rel  Release
		want string
	}{
		{Release{22, 5}, "scontrol update jobid=10_[1-3],7 qos=borrow"},
		{Release{24, 11}, "scontrol update jobid=10_1,10_2,10_3,7 qos=borrow"},
	} {
		r := &scriptRunner{}
		if _, err := (Client{Runner: r, Release: c.rel}).UpdateJobsQOS(context.Background(), ids, "borrow"); err != nil {
			t.Fatal(err)
		}
		if got := r.calls[len(r.calls)-1]; got != c.want {
			t.Errorf("%v: %q, want %q", c.rel, got, c.want)
		}
	}
}

// argsRunner answers each run by its arguments; safe for runs side by side.
type argsRunner struct {
	mu    sync.Mutex
	calls []string
	fn    func(args string) error
}

func (r *argsRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.mu.Lock()
	r.calls = append(r.calls, line)
	r.mu.Unlock()
	return nil, r.fn(line)
}

// The runs side by side each report their own failures, and every id comes back failed or
// moved: a run that names one failure, one that fails without naming any, two that succeed.
func TestUpdateJobsQOSRunsSideBySideKeepEachFailure(t *testing.T) {
	ids := make([]string, 400)
	for i := range ids {
		ids[i] = fmt.Sprint(1000 + i)
	}
	r := &argsRunner{fn: func(line string) error {
		switch {
		case strings.Contains(line, "jobid=1000,"):
			return &CommandError{ExitCode: 1, Stderr: "Job is no longer pending execution for job 1001\n"}
		case strings.Contains(line, "jobid=1100,"):
			return &CommandError{ExitCode: 1, Stderr: "slurm_update error: Socket timed out\n"}
		}
		return nil
	}}
	failed, err := Client{Runner: r, Release: Release{24, 11}}.UpdateJobsQOS(context.Background(), ids, "borrow")
	if err != nil || len(r.calls) != updateRunsAtOnce {
		t.Fatalf("%d runs, err %v", len(r.calls), err)
	}
	if len(failed) != 101 || failed["1001"] != "Job is no longer pending execution" {
		t.Fatalf("%d failed (want 101: 1001 and the 100 of the run that named none): 1001 %q", len(failed), failed["1001"])
	}
	for i := 1100; i < 1200; i++ {
		if !strings.HasPrefix(failed[fmt.Sprint(i)], OutcomeUnknown) {
			t.Fatalf("job %d: %q, want its outcome unknown", i, failed[fmt.Sprint(i)])
		}
	}
	// An ended context: every id is failed, none is taken as moved.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failed, err = Client{Runner: r, Release: Release{24, 11}}.UpdateJobsQOS(ctx, ids, "borrow")
	if err == nil || len(failed) != len(ids) {
		t.Errorf("ended context: %d of %d failed, err %v", len(failed), len(ids), err)
	}
}

func TestUpdateJobsQOSBatches(t *testing.T) {
	ids := make([]string, MaxIDsPerUpdate+3)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i)
	}
	// 22.05 folds an array's tasks: a run per MaxIDsPerUpdate ids, each one request.
	tasks := make([]string, MaxIDsPerUpdate+3)
	for i := range tasks {
		tasks[i] = fmt.Sprintf("5_%d", i)
	}
	r := &scriptRunner{}
	failed, err := Client{Runner: r, Release: Release{22, 5}}.UpdateJobsQOS(context.Background(), tasks, "borrow")
	if err != nil || len(failed) != 0 || len(r.calls) != 2 {
		t.Fatalf("%d runs, failed %v, err %v; want 2 runs", len(r.calls), failed, err)
	}
	if !strings.HasSuffix(r.calls[1], "jobid=5_[1000-1002] qos=borrow") {
		t.Errorf("second run %q", r.calls[1])
	}
	// Jobs (or, after 22.05, tasks) take a request each: the first MaxIDsPerUpdate go as
	// updateRunsAtOnce runs side by side, the 3 left in one; each id in exactly one run.
	r = &scriptRunner{}
	if failed, err := (Client{Runner: r, Release: Release{24, 11}}).UpdateJobsQOS(context.Background(), ids, "borrow"); err != nil || len(failed) != 0 || len(r.calls) != updateRunsAtOnce+1 {
		t.Fatalf("%d runs, failed %v, err %v; want %d", len(r.calls), failed, err, updateRunsAtOnce+1)
	}
	seen := map[string]int{}
	for _, call := range r.calls {
		list := strings.TrimSuffix(strings.TrimPrefix(call, "scontrol update jobid="), " qos=borrow")
		for id := range strings.SplitSeq(list, ",") {
			seen[id]++
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("id %s in %d runs", id, seen[id])
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	failed, err = Client{Runner: r, Release: Release{24, 11}}.UpdateJobsQOS(ctx, ids[:2], "borrow")
	if err == nil || len(failed) != 2 {
		t.Errorf("ended context: failed %v, err %v", failed, err)
	}
}

func FuzzParseQueue(f *testing.F) {
	for _, rel := range releases {
		for _, name := range []string{"mixed", "array", "array-updated", "array-folded"} {
			f.Add(fixture(f, "squeue-"+rel.name+"-"+name+".txt"))
		}
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := ParseQueue(out, SchedulingFields)
		if err != nil {
			var qe *QueueError
			if !errors.As(err, &qe) || qe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		// Every line is one job or one more task of the record before it.
		tasks, seen := 0, map[uint32]bool{}
		for _, j := range jobs {
			// A job whose TRES could not be read is kept, without any TRES.
			if j.Unreadable != "" && (j.TRESReq != nil || j.TRESAlloc != nil) {
				t.Fatalf("job %d unreadable (%s) with TRES %v %v", j.ID, j.Unreadable, j.TRESReq, j.TRESAlloc)
			}
			if j.ID == 0 || seen[j.ID] || (j.ArrayJobID == 0) != (len(j.ArrayTasks) == 0) {
				t.Fatalf("bad job %+v", j)
			}
			seen[j.ID] = true
			tasks += j.TaskCount()
		}
		lines := strings.Count(strings.TrimSuffix(string(out), "\n"), "\n") + 1
		if len(out) == 0 {
			lines = 0
		}
		if tasks != lines {
			t.Fatalf("%d lines gave %d tasks", lines, tasks)
		}
	})
}

// BenchmarkParseQueue parses 20,000 pending array task lines and 5,000 single jobs, the shape
// of bench/cmd/quotadcost -pending 20000 -running 5000 -array 1000.
func BenchmarkParseQueue(b *testing.B) {
	var sb strings.Builder
	for i := range 20_000 {
		arr := fmt.Sprint(1 + i/1000)
		sb.WriteString(queueLine(goodLine(arr, arr, fmt.Sprint(i%1000))...) + "\n")
	}
	for i := range 5_000 {
		id := fmt.Sprint(100_000 + i)
		sb.WriteString(queueLine(goodLine(id, id, "N/A")...) + "\n")
	}
	out := []byte(sb.String())
	b.SetBytes(int64(len(out)))
	for b.Loop() {
		if _, err := ParseQueue(out, SchedulingFields); err != nil {
			b.Fatal(err)
		}
	}
}

// throttlesOf reads the output of a ThrottleFields read into throttles by array.
func throttlesOf(out []byte) (map[uint32]int, error) {
	jobs, err := ParseQueue(out, ThrottleFields)
	if err != nil {
		return nil, err
	}
	throttles := map[uint32]int{}
	for _, j := range jobs {
		if j.ArrayThrottle > 0 {
			throttles[j.ArrayJobID] = j.ArrayThrottle
		}
	}
	return throttles, nil
}

// namesOf reads the output of a NameFields read into names by job id.
func namesOf(out []byte) map[uint32]string {
	jobs, err := ParseQueue(out, NameFields)
	if err != nil {
		panic(err) // the names read skips what it cannot read
	}
	names := map[uint32]string{}
	for _, j := range jobs {
		names[j.ID] = j.Name
	}
	return names
}

func TestParseArrayThrottles(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    map[uint32]int
		wantErr string
	}{
		{"nothing pending", "", map[uint32]int{}, ""},
		{"records without a throttle", "12\x1fN/A\n13\x1f0-9\n", map[uint32]int{}, ""},
		{"a throttle after a task list cut short", "13\x1f0-9\n20\x1f0,2,4,6,8,10,12,14,16,18,2...%4\n21\x1f3-7%2\n", map[uint32]int{20: 4, 21: 2}, ""},
		{"a one-field line", "20\n", nil, "1 fields, want 2: ArrayJobId ArrayTaskId"},
		{"a throttle that is no number", "20\x1f0-9%x\n", nil, `array throttle "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := throttlesOf([]byte(tt.out))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// The throttle read asks squeue for pending records of the given QOS only, one line a record.
func TestArrayThrottleArgs(t *testing.T) {
	args := QueueArgs(QueueRead{Fields: ThrottleFields, QOS: []string{"guar-proj-a", "guar-proj-b"}})
	if !slices.Contains(args, "--qos=guar-proj-a,guar-proj-b") || !slices.Contains(args, "--states=PENDING") || slices.Contains(args, "--array") {
		t.Errorf("args = %q", args)
	}
}

func TestParseArrayTaskThrottle(t *testing.T) {
	const meta = "JobId=500 ArrayJobId=500 ArrayTaskId=0-2,4-5%2 ArrayTaskThrottle=2 JobName=wrap UserId=bob(1001) Comment=x\n"
	const task = "JobId=504 ArrayJobId=500 ArrayTaskId=3 JobName=wrap UserId=bob(1001)\n"
	for _, tt := range []struct {
		name, out string
		want      int
		err       string
	}{
		{"throttled, split task first", task + meta, 2, ""},
		{"no throttle", "JobId=500 ArrayJobId=500 ArrayTaskId=0-5 JobName=wrap\n", 0, ""},
		{"a name that says a throttle is not read", "JobId=500 ArrayJobId=500 ArrayTaskId=0-5 JobName=x ArrayTaskThrottle=99 Comment=ArrayTaskThrottle=98\n", 0, ""},
		{"another job", "JobId=7 JobName=wrap\n", 0, "a record of array"},
		{"nothing", "\n", 0, "no record"},
		{"not a number", "JobId=500 ArrayJobId=500 ArrayTaskThrottle=two JobName=wrap\n", 0, "not a number"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseArrayTaskThrottle([]byte(tt.out), 500)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("= %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// Names come last, whole: a separator or a "|" stays in the name; a line broken by a newline
// in a name is skipped, not fatal (names only explain).
func TestParseJobNames(t *testing.T) {
	out := "12\x1felastic-worker-7\n13\x1fa\x1fb|c\n14\x1ftwo\nlines\n\n"
	want := map[uint32]string{12: "elastic-worker-7", 13: "a\x1fb|c", 14: "two"}
	if got := namesOf([]byte(out)); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if args := QueueArgs(QueueRead{Fields: NameFields, QOS: []string{"elastic-a", "elastic-b"}}); !slices.Contains(args, "--qos=elastic-a,elastic-b") || args[len(args)-1] != "--Format=JobId:0\x1f,Name:0" {
		t.Fatalf("args %q", args)
	}
}

func TestElasticWorkerName(t *testing.T) {
	if got := ElasticWorkerName(42); got != "elastic-worker-42" {
		t.Fatalf("name %q", got)
	}
	for name, want := range map[string]uint32{"elastic-worker-42": 42, "elastic-worker-042": 0, "elastic-worker-": 0, "elastic-worker-0": 0,
		"elastic-worker-4x": 0, "worker-42": 0, "elastic-worker-99999999999": 0} {
		if got, ok := ElasticWorkerOf(name); got != want || ok != (want != 0) {
			t.Errorf("%q: %d, %v; want %d", name, got, ok, want)
		}
	}
}

func TestParseTaskIDs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []uint32
		err  bool
	}{
		{"2-3%2", []uint32{2, 3}, false},
		{"0", []uint32{0}, false},
		{"[1,3,5-7]", []uint32{1, 3, 5, 6, 7}, false},
		{"0-9:3,12%4", []uint32{0, 3, 6, 9, 12}, false},
		{"0-4,6-10,...", nil, true}, // cut by SLURM_BITSTR_LEN
		{"5-3", nil, true},
		{"1,1", nil, true},
		{"0-9:0", nil, true},
		{"0-4000001", nil, true},
		{"", nil, true},
	} {
		got, err := ParseTaskIDs(tc.in)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("ParseTaskIDs(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}
