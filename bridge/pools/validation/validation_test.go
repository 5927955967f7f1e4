package validation

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

const testbedPools = "../../../slurm-conf/testbed/pools.yaml"

func TestCheck(t *testing.T) {
	good, err := os.ReadFile(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := slurm.ParseNodes(slurmtest.Fixture(t, "sinfo-22.05-testbed-idle.json"))
	if err != nil {
		t.Fatal(err)
	}
	badPolicy := []byte(strings.Replace(string(good), "policy: cheapest", "policy: random", 1))
	for _, tc := range []struct {
		name        string
		data        []byte
		cluster     *Cluster
		wantLines   []string // substrings, one per line
		wantFailure string   // substring; "" wants a good file
	}{
		{"the testbed's file matches its cluster", good, &Cluster{Nodes: nodes}, []string{"p.yaml: OK, 4 pools match the cluster"}, ""},
		{"without the cluster", good, nil, []string{"p.yaml: OK, 4 pools (not checked against the cluster)"}, ""},
		{"a problem of the file alone", badPolicy, nil, []string{`policy "random" is not one of`}, "p.yaml: 1 problem"},
		{"an unreadable cluster keeps the file's own problems", badPolicy, &Cluster{Err: errors.New("sinfo failed")},
			[]string{`policy "random"`}, "cannot check p.yaml against the cluster: sinfo failed"},
		{"an unreadable cluster is a failure of a good file too", good, &Cluster{Err: errors.New("sinfo failed")}, nil, "cannot check p.yaml"},
		{"YAML that does not decode never needs the cluster", []byte("pools: [\n"), &Cluster{Err: errors.New("sinfo failed")},
			[]string{"p.yaml"}, "p.yaml: 1 problem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check("p.yaml", tc.data, tc.cluster)
			if len(r.Lines) != len(tc.wantLines) {
				t.Fatalf("lines %q, want %d like %q", r.Lines, len(tc.wantLines), tc.wantLines)
			}
			for i, w := range tc.wantLines {
				if !strings.Contains(r.Lines[i], w) {
					t.Errorf("line %d %q lacks %q", i, r.Lines[i], w)
				}
			}
			if tc.wantFailure == "" && !r.OK() || tc.wantFailure != "" && !strings.Contains(r.Failure, tc.wantFailure) {
				t.Errorf("failure %q, want %q", r.Failure, tc.wantFailure)
			}
		})
	}
}
