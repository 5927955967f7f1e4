package cli

import (
	"bytes"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/store"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

func TestParseGPUList(t *testing.T) {
	got, err := ParseGPUList("a100=4, v100=2")
	if err != nil || got["a100"] != 4 || got["v100"] != 2 || len(got) != 2 {
		t.Errorf("ParseGPUList = %v, %v", got, err)
	}
	for _, bad := range []string{"", "a100", "a100=-1", "a100=x", "a100=1,a100=2"} {
		if _, err := ParseGPUList(bad); err == nil {
			t.Errorf("ParseGPUList(%q) accepted", bad)
		}
	}
}

func TestOvercommitNamesTypeAndProjects(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("projects:\n  - account: proj-a\n    gpus: {a100: 8}\n  - account: proj-b\n    gpus: {a100: 6, v100: 2}\n"))
	if err != nil {
		t.Fatal(err)
	}
	node := func(t string, n int) policy.Node { return policy.Node{GPUs: map[string]int{t: n}} }
	over := Overcommits(cfg, []policy.Node{node("a100", 8), node("a100", 4), node("v100", 8)})
	if len(over) != 1 || over[0].GPUType != "a100" || over[0].Guaranteed != 14 || over[0].Held != 12 ||
		!maps.Equal(over[0].ByProject, map[string]int{"proj-a": 8, "proj-b": 6}) {
		t.Fatalf("Overcommits = %+v, want a100's 14 guaranteed (proj-a 8, proj-b 6) over the 12 held", over)
	}
	// The warning lists the projects in order, each with its figure.
	if msg := over[0].String(); !strings.Contains(msg, " 14 (proj-a 8, proj-b 6) ") || !strings.HasSuffix(msg, " 12") {
		t.Errorf("warning %q", msg)
	}
}

func TestWriteListParsable(t *testing.T) {
	rows := []ListRow{{Account: "proj-b", GPUType: "a100", Quota: 4, InUse: 4, Borrowed: 4, Pending: 0}, {Account: "proj-a", GPUType: "a100", Quota: 4, Lent: 4}}
	var b bytes.Buffer
	if err := WriteList(&b, rows, true, false); err != nil {
		t.Fatal(err)
	}
	want := "Account|GPUType|Quota|InUse|Borrowed|Lent|Pending\nproj-b|a100|4|4|4|0|0\nproj-a|a100|4|0|0|4|0\n"
	if b.String() != want {
		t.Errorf("-P output:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteList(&b, nil, false, true); err != nil || strings.TrimSpace(b.String()) != "[]" {
		t.Errorf("--json of nothing = %q, %v", b.String(), err)
	}
}

func TestChooseVia(t *testing.T) {
	for _, tc := range []struct {
		flag   string
		euid   int
		pwFile string
		want   string
	}{
		{"auto", 0, "/etc/slurmbridge/db-password", "database"},
		{"auto", 0, "", "quotad"}, // root on a login node without quotad.env
		{"auto", 1001, "/etc/slurmbridge/db-password", "quotad"},
		{"", 1001, "", "quotad"},
		{"database", 1001, "", "database"},
		{"quotad", 0, "/etc/slurmbridge/db-password", "quotad"},
	} {
		if got, err := ChooseVia(tc.flag, tc.euid, tc.pwFile); err != nil || got != tc.want {
			t.Errorf("ChooseVia(%q, %d, %q) = %q, %v; want %q", tc.flag, tc.euid, tc.pwFile, got, err, tc.want)
		}
	}
	if _, err := ChooseVia("slurmrestd", 0, ""); err == nil {
		t.Error("--via slurmrestd accepted")
	}
}

func TestListRowsFromAPIMatchTheDatabasePath(t *testing.T) {
	projects := []view.Project{
		{Account: "proj-a", GPUs: []view.ProjectGPUs{{GPUType: "a100", Guaranteed: 4, InUse: 1, Lent: 3}, {GPUType: "v100", Guaranteed: 2}}},
		{Account: "proj-b", GPUs: []view.ProjectGPUs{{GPUType: "a100", Guaranteed: 4, InUse: 4, Borrowed: 3, Pending: 1}}},
	}
	var b bytes.Buffer
	if err := WriteList(&b, ListRowsFromAPI(projects), true, false); err != nil {
		t.Fatal(err)
	}
	want := "Account|GPUType|Quota|InUse|Borrowed|Lent|Pending\nproj-a|a100|4|1|0|3|0\nproj-a|v100|2|0|0|0|0\nproj-b|a100|4|4|3|0|1\n"
	if b.String() != want {
		t.Errorf("-P output:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestProjectEditKeepsWhatItDoesNotName(t *testing.T) {
	base := func() *policy.Config {
		cfg, err := policy.ParseConfig([]byte("projects:\n  - account: proj-a\n    gpus: {a100: 4}\n    borrowLimit: 2\n  - account: proj-b\n    gpus: {a100: 4}\n    weight: 3\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	one, minus := 1, -1
	w := 2.5
	prio, noPrio := int64(5000), int64(-1)
	for _, tc := range []struct {
		name    string
		edit    ProjectEdit
		want    map[string]string // account -> store.ProjectText
		wantErr string
	}{
		{"weight only", ProjectEdit{Account: "proj-a", Weight: &w},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2 weight=2.5", "proj-b": "gpus=a100:4 weight=3"}, ""},
		{"gpus replace the list", ProjectEdit{Account: "proj-b", GPUs: map[string]int{"v100": 2}},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2", "proj-b": "gpus=v100:2 weight=3"}, ""},
		{"borrow limit removed", ProjectEdit{Account: "proj-a", BorrowLimit: &minus},
			map[string]string{"proj-a": "gpus=a100:4", "proj-b": "gpus=a100:4 weight=3"}, ""},
		{"a new project", ProjectEdit{Account: "proj-c", GPUs: map[string]int{"a100": 1}, BorrowLimit: &one},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2", "proj-b": "gpus=a100:4 weight=3", "proj-c": "gpus=a100:1 borrowLimit=1"}, ""},
		{"lending limits set", ProjectEdit{Account: "proj-b", LendLimits: map[string]int{"a100": 2}},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2", "proj-b": "gpus=a100:4 lendLimitByType=a100:2 weight=3"}, ""},
		{"lending limits removed", ProjectEdit{Account: "proj-b", LendLimits: map[string]int{}},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2", "proj-b": "gpus=a100:4 weight=3"}, ""},
		{"reclaim priority threshold set", ProjectEdit{Account: "proj-a", ReclaimPriorityThreshold: &prio},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2 reclaimPriorityThreshold=5000", "proj-b": "gpus=a100:4 weight=3"}, ""},
		{"reclaim priority threshold removed", ProjectEdit{Account: "proj-a", ReclaimPriorityThreshold: &noPrio},
			map[string]string{"proj-a": "gpus=a100:4 borrowLimit=2", "proj-b": "gpus=a100:4 weight=3"}, ""},
		{"a new project needs gpus", ProjectEdit{Account: "proj-c", Weight: &w}, nil, "proj-c has no quota yet: give --gpus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			err := tc.edit.Apply(cfg)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, p := range cfg.Projects {
				got[p.Account] = store.ProjectText(p)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("after the edit: %v\nwant %v", got, tc.want)
			}
		})
	}
}
