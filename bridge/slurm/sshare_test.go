package slurm

import (
	"os"
	"strings"
	"testing"
)

func TestParseShareGPUUsage(t *testing.T) {
	// Captured on the 22.05 testbed after the quotad scenario tests: `sshare -P -n -o
	// Account,User,GrpTRESRaw`.
	out, err := os.ReadFile("testdata/sshare-22.05-testbed.txt")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseShareGPUUsage(out)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"root": 48 * 60, "proj-a": 2 * 60, "proj-b": 43 * 60, "proj-c": 2 * 60}
	if len(got) != len(want) {
		t.Fatalf("usage = %v, want %v", got, want)
	}
	for a, n := range want {
		if got[a] != n {
			t.Errorf("usage of %s = %v, want %v", a, got[a], n)
		}
	}
	// 24.11 and 26.05 on a fresh testbed: more GPU TRES (gpumem, gpuutil), the same columns.
	for _, release := range []string{"24.11", "26.05"} {
		out, err := os.ReadFile("testdata/sshare-" + release + "-testbed-idle.txt")
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseShareGPUUsage(out)
		if err != nil || len(got) != 4 || got["proj-b"] != 0 {
			t.Errorf("%s: usage %v, %v; want root and the three projects, none used", release, got, err)
		}
	}
	for _, bad := range []string{
		"proj-a||cpu=2,mem=2424\n",     // no gres/gpu tracked
		"proj-a||gres/gpu=lots\n",      // not a number
		"proj-a|cpu=2,gres/gpu=2\n",    // a column short
		" proj-a||gres/gpu=-1,cpu=1\n", // negative
	} {
		if _, err := ParseShareGPUUsage([]byte(bad)); err == nil {
			t.Errorf("%q accepted", strings.TrimSpace(bad))
		}
	}
}
