package slurm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// byCommandRunner answers each command by the first key its command line starts with.
type byCommandRunner struct {
	calls   []string
	answers map[string]string
	fails   map[string]error
}

func (r *byCommandRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.calls = append(r.calls, line)
	for prefix, err := range r.fails {
		if strings.HasPrefix(line, prefix) {
			return nil, err
		}
	}
	for prefix, out := range r.answers {
		if strings.HasPrefix(line, prefix) {
			return []byte(out), nil
		}
	}
	return nil, nil
}

func TestQOSMoveMayChangeTimeLimitOnTheReleasesThatDo(t *testing.T) {
	for v, want := range map[string]bool{
		"22.05.8": false, "24.11.5": false, "25.05.5": false, "25.05.6": true, "25.05.8": true, "25.05.9": true,
		"25.11.0": false, "25.11.1": true, "25.11.4": true, "25.11.5": true, "25.11.7": true, "26.05.0": true, "26.05.5": true,
		"26.11.0": true, "27.05.1": true,
	} {
		ver, err := ParseMicroVersion(v)
		if err != nil {
			t.Fatal(err)
		}
		if got := ver.QOSMoveMayChangeTimeLimit(); got != want {
			t.Errorf("%s: QOSMoveMayChangeTimeLimit %v, want %v", v, got, want)
		}
	}
}

func TestParseTimeLimitField(t *testing.T) {
	for in, want := range map[string]uint32{"0:00": 0, "5:00": 5, "1:00:00": 60, "12:34:00": 754, "2-00:01:00": 2881, "59:00": 59} {
		got, err := parseDuration(in)
		if err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "5", "1:60:00", "a:00", "1-2", "0:30", "1:2:3:4"} {
		if got, err := parseDuration(in); err == nil {
			t.Errorf("%q: %d, want an error", in, got)
		}
	}
}

// Where slurmctld may give a moved job its new QOS's MaxWall (25.05.6 on), each job's time
// limit is read just before the move and named in it, one scontrol run per limit; a job whose
// limit Slurm does not report is not moved. Elsewhere the move is one run naming none.
func TestQOSMovesNameTheTimeLimitWhereSlurmWouldResetIt(t *testing.T) {
	const sep = queueSep
	squeue := "41" + sep + "41" + sep + "30:00\n" +
		"42_7" + sep + "42" + sep + "UNLIMITED\n" +
		"43" + sep + "43" + sep + "30:00\n" +
		"44" + sep + "44" + sep + "NOT_SET\n" +
		"45" + sep + "45" + sep + "1-00:00:00\n"
	ids := []string{"41", "42_7", "43", "44", "45", "46"}
	r := &byCommandRunner{answers: map[string]string{"sinfo --version": "slurm 25.05.8\n", "squeue": squeue}}
	failed, err := NewClient(r).UpdateJobsQOS(context.Background(), ids, "borrow")
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 1 || !strings.HasSuffix(failed["44"], NoTimeLimitToKeep) {
		t.Errorf("failed %v, want job 44 alone, for its unknown limit", failed)
	}
	want := []string{
		"sinfo --version",
		"squeue --all --array --noheader --states=PENDING --jobs=41,42_7,43,44,45,46 --Format=JobArrayID:0" + sep + ",JobId:0" + sep + ",TimeLimit:0",
		"scontrol update jobid=41,43 qos=borrow timelimit=30",
		"scontrol update jobid=42_7 qos=borrow timelimit=UNLIMITED",
		"scontrol update jobid=45 qos=borrow timelimit=1440",
		"scontrol update jobid=46 qos=borrow", // not pending any more: scontrol says so
	}
	if !reflect.DeepEqual(r.calls, want) {
		t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(r.calls, "\n"), strings.Join(want, "\n"))
	}

	// A failed read moves nothing.
	r = &byCommandRunner{answers: map[string]string{"sinfo --version": "slurm 25.11.2\n"}, fails: map[string]error{"squeue": errors.New("slurmctld down")}}
	failed, _ = NewClient(r).UpdateJobsQOS(context.Background(), []string{"41", "42"}, "borrow")
	if len(failed) != 2 || !strings.Contains(failed["41"], "slurmctld down") || len(r.calls) != 2 {
		t.Errorf("failed read: failed %v after %v", failed, r.calls)
	}

	// 24.11 keeps every limit across a QOS move: one run, no read.
	r = &byCommandRunner{answers: map[string]string{"sinfo --version": "slurm 24.11.5\n"}}
	if failed, err := NewClient(r).UpdateJobsQOS(context.Background(), []string{"41", "42"}, "borrow"); err != nil || len(failed) != 0 {
		t.Fatal(failed, err)
	}
	if want := []string{"sinfo --version", "scontrol update jobid=41,42 qos=borrow"}; !reflect.DeepEqual(r.calls, want) {
		t.Errorf("24.11.5 runs %q, want %q", r.calls, want)
	}

	// 26.05 runs the accounting policy again after the move, which would give a limit that came
	// from the old QOS's MaxWall the new one's: the limit is named there too.
	r = &byCommandRunner{answers: map[string]string{"sinfo --version": "slurm 26.05.5\n", "squeue": "41" + sep + "41" + sep + "4:00:00\n"}}
	if failed, err := NewClient(r).UpdateJobsQOS(context.Background(), []string{"41"}, "borrow"); err != nil || len(failed) != 0 {
		t.Fatal(failed, err)
	}
	if got := r.calls[len(r.calls)-1]; got != "scontrol update jobid=41 qos=borrow timelimit=240" {
		t.Errorf("26.05.5 run %q, want the limit named", got)
	}

	// elasticd's lend of one worker keeps its limit too.
	r = &byCommandRunner{answers: map[string]string{"sinfo --version": "slurm 25.05.6\n", "squeue": "50" + sep + "50" + sep + "2:00:00\n"}}
	if err := NewClient(r).LendJob(context.Background(), 50, "elastic-proj-b"); err != nil {
		t.Fatal(err)
	}
	if got := r.calls[len(r.calls)-2:]; !reflect.DeepEqual(got, []string{"scontrol update jobid=50 qos=elastic-proj-b timelimit=120", "scontrol update jobid=50 starttime=now"}) {
		t.Errorf("LendJob runs %q", got)
	}
}
