package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
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
	msgs := Overcommit(cfg, []policy.Node{node("a100", 8), node("a100", 4), node("v100", 8)})
	if len(msgs) != 1 || !strings.Contains(msgs[0], "a100 is overcommitted: guarantees add up to 14 (proj-a 8, proj-b 6) but the pools hold 12") {
		t.Errorf("Overcommit = %q", msgs)
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
