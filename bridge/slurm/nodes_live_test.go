package slurm

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

// Against the live cluster of SLURM_CONF, and only where SLURMBRIDGE_LIVE_NODES is set (to a
// number of rounds, default 30): the text read of nodes gives what the JSON read gives, and
// costs less. Read-only: it runs scontrol or sinfo and nothing else.
//
//	SLURMBRIDGE_LIVE_NODES=50 go test -run TestLiveNodeRead -v ./bridge/slurm/
func TestLiveNodeRead(t *testing.T) {
	env := os.Getenv("SLURMBRIDGE_LIVE_NODES")
	if env == "" {
		t.Skip("SLURMBRIDGE_LIVE_NODES is not set")
	}
	rounds, err := strconv.Atoi(env)
	if err != nil || rounds < 1 {
		rounds = 30
	}
	ctx := context.Background()
	c := NewClient(ExecRunner{})
	rel, err := c.SlurmRelease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jsonArgs := []string{"sinfo", "--json"}
	if rel.NodesInScontrol() {
		jsonArgs = []string{"scontrol", "show", "nodes", "--json"}
	}
	oldRead := func() ([]Node, error) {
		out, err := c.Runner.Run(ctx, jsonArgs[0], jsonArgs[1:]...)
		if err != nil {
			return nil, err
		}
		return ParseNodes(out)
	}
	newRead := func() ([]Node, error) { return c.Nodes(ctx) }

	// The same moment, as near as two commands get: read again while they differ (jobs
	// start and end on a live cluster).
	var diff string
	for range 5 {
		want, err := oldRead()
		if err != nil {
			t.Fatal(err)
		}
		got, err := newRead()
		if err != nil {
			t.Fatal(err)
		}
		if diff = nodesDiff(got, want); diff == "" {
			t.Logf("Slurm %s: %d nodes, the text read equals the JSON read", rel, len(got))
			break
		}
	}
	if diff != "" {
		t.Errorf("text read differs from the JSON read: %s", diff)
	}

	var oldTimes, newTimes []time.Duration
	for i := range 2 * rounds {
		read, times := oldRead, &oldTimes
		if i%2 == 1 {
			read, times = newRead, &newTimes
		}
		start := time.Now()
		if _, err := read(); err != nil {
			t.Fatal(err)
		}
		*times = append(*times, time.Since(start))
	}
	t.Logf("Slurm %s, %d alternating rounds, command and parse: %s + ParseNodes median %v; scontrol %v + ParseNodesText median %v",
		rel, rounds, jsonArgs, median(oldTimes), NodesArgs, median(newTimes))
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// nodesDiff says how two node lists differ, "" when they hold the same nodes with the same
// values. Order does not count (of the nodes, or of a node's state flags), nor an empty list
// against none.
func nodesDiff(got, want []Node) string {
	norm := func(nodes []Node) map[string]Node {
		m := map[string]Node{}
		for _, n := range nodes {
			n.StateFlags = slices.Sorted(slices.Values(n.StateFlags))
			for _, l := range []*[]string{&n.Partitions, &n.StateFlags} {
				if len(*l) == 0 {
					*l = nil
				}
			}
			if len(n.Gres) == 0 {
				n.Gres = nil
			}
			if len(n.GresUsed) == 0 {
				n.GresUsed = nil
			}
			if len(n.TRES) == 0 {
				n.TRES = nil
			}
			if len(n.TRESUsed) == 0 {
				n.TRESUsed = nil
			}
			m[n.Name] = n
		}
		return m
	}
	g, w := norm(got), norm(want)
	if len(got) != len(g) {
		return fmt.Sprintf("a node listed twice among %d", len(got))
	}
	for name, wn := range w {
		gn, ok := g[name]
		if !ok {
			return fmt.Sprintf("node %s missing", name)
		}
		if s1, s2 := fmt.Sprintf("%#v", gn), fmt.Sprintf("%#v", wn); s1 != s2 {
			return fmt.Sprintf("node %s:\n got  %s\n want %s", name, s1, s2)
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			return fmt.Sprintf("node %s not in the JSON read", name)
		}
	}
	return ""
}
