package slurm

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
)

// sacctmgr prints a QOS's times as [days-]hh:mm:ss, empty when unset, and its Preempt list
// comma-separated; the reader keeps one record of them all.
func TestQOSReadsEveryField(t *testing.T) {
	tests := []struct {
		name, out string
		want      []QOS
	}{
		{"a QOS with Slurm's defaults", "normal||||00:00:00||0\n",
			[]QOS{{Name: "normal"}}},
		{"a guaranteed QOS preempting two borrow QOS", "guar-proj-a|gres/gpu=4|borrow-proj-b,borrow-proj-c|cluster|||10\n",
			[]QOS{{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu": 4}, Preempt: []string{"borrow-proj-b", "borrow-proj-c"}, PreemptMode: "cluster", Priority: 10}}},
		{"a borrow QOS with its grace and exempt times", "borrow-proj-b|cpu=16,mem=4G,gres/gpu:a100=2||requeue|00:02:00|1-00:05:00|3\n",
			[]QOS{{Name: "borrow-proj-b", GrpTRES: gpureq.TRES{"cpu": 16, "mem": 4096, "gres/gpu:a100": 2}, PreemptMode: "requeue",
				GraceTime: 2 * time.Minute, PreemptExemptTime: 24*time.Hour + 5*time.Minute, Priority: 3}}},
		{"no QOS", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptRunner{out: tt.out}
			got, err := Client{Runner: r}.QOS(context.Background())
			if err != nil || len(got) != len(tt.want) || len(got) > 0 && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("QOS = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	for _, bad := range []string{"x|gres/gpu=a||||| \n", "x||||1:2:3:4||\n", "x||||||high\n", "x|||\n"} {
		if _, err := ParseQOS([]byte(bad)); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}

func TestQOSByNameComparesAsSlurmDoes(t *testing.T) {
	qos := []QOS{{Name: "normal"}, {Name: "borrow-proj-a", Preempt: []string{"x"}}}
	if q, ok := QOSByName(qos, "Borrow-Proj-A"); !ok || q.Name != "borrow-proj-a" {
		t.Errorf("QOSByName = %+v, %v", q, ok)
	}
	if _, ok := QOSByName(qos, "guar-proj-a"); ok {
		t.Error("found a QOS that is not there")
	}
}

func TestClockRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, time.Second, 59 * time.Minute, 25*time.Hour + 61*time.Second} {
		if got, err := parseClock(clock(d)); err != nil || got != d {
			t.Errorf("parseClock(clock(%v)) = %v, %v", d, got, err)
		}
	}
	if got, err := parseClock("05:30"); err != nil || got != 5*time.Minute+30*time.Second {
		t.Errorf("mm:ss = %v, %v", got, err)
	}
}

// Over MaxQOSPerRun QOS take one more run each MaxQOSPerRun, all with the same settings.
func TestModifyQOSSplitsLongNameLists(t *testing.T) {
	names := make([]string, MaxQOSPerRun+2)
	for i := range names {
		names[i] = fmt.Sprintf("guar-team%04d", i)
	}
	r := &scriptRunner{}
	if err := (Client{Runner: r}).ModifyQOS(context.Background(), names, QOSSettings{Preempt: &[]string{}}); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("name=guar-team%04d,guar-team%04d set preempt=", MaxQOSPerRun, MaxQOSPerRun+1)
	if len(r.calls) != 2 || strings.Count(r.calls[0], ",") != MaxQOSPerRun-1 || !strings.HasSuffix(r.calls[1], last) {
		t.Errorf("%d runs, the last %.80q", len(r.calls), r.calls[len(r.calls)-1])
	}
}

// Long names are cut by the bytes of their list as well, so no run's argument reaches
// Linux's limit for one argument.
func TestQOSRunsKeepsEachListWithinOneArgument(t *testing.T) {
	long := strings.Repeat("x", 190)
	names := make([]string, 1200)
	for i := range names {
		names[i] = fmt.Sprintf("%s%04d", long, i)
	}
	var runs [][]string
	for run := range QOSRuns(names, itself) {
		runs = append(runs, run)
	}
	n := 0
	for _, run := range runs {
		if size := len(strings.Join(run, ",")); size > maxNamesArg || len(run) > MaxQOSPerRun {
			t.Errorf("a run of %d names, %d bytes", len(run), size)
		}
		n += len(run)
	}
	if n != len(names) || len(runs) != 3 || runs[0][0] != names[0] || runs[2][len(runs[2])-1] != names[len(names)-1] {
		t.Errorf("%d runs of %d names in all", len(runs), n)
	}
	for range QOSRuns([]string{}, itself) {
		t.Error("a run of no names")
	}
}

// testdata/sacctmgr-qos-REL.txt is each release's QOS with one that sets every field the reader
// reads and one that sets none (capture/qos.sh), beside Slurm's default and the testbed's own.
func TestQOSOfEachRelease(t *testing.T) {
	for _, r := range releases {
		t.Run(r.name, func(t *testing.T) {
			qos, err := ParseQOS(fixture(t, "sacctmgr-qos-"+r.name+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			all, okAll := QOSByName(qos, "capture-all")
			none, okNone := QOSByName(qos, "capture-none")
			if !okAll || !okNone {
				t.Fatalf("the capture lacks capture-all or capture-none: %+v", qos)
			}
			wantAll := QOS{Name: "capture-all", GrpTRES: gpureq.TRES{"cpu": 16, "mem": 64 << 10, "gres/gpu:a100": 4},
				Preempt: []string{"capture-none"}, PreemptMode: "requeue", GraceTime: 90 * time.Second,
				PreemptExemptTime: 26*time.Hour + 3*time.Minute + 4*time.Second, Priority: 42}
			if !reflect.DeepEqual(all, wantAll) {
				t.Errorf("capture-all = %+v, want %+v", all, wantAll)
			}
			if want := (QOS{Name: "capture-none", PreemptMode: "cluster"}); !reflect.DeepEqual(none, want) {
				t.Errorf("capture-none = %+v, want %+v", none, want)
			}
			// Slurm's own QOS, as every cluster has it.
			if normal, ok := QOSByName(qos, "normal"); !ok || normal.PreemptMode != "cluster" {
				t.Errorf("normal = %+v, %v; want Slurm's default QOS", normal, ok)
			}
		})
	}
}
