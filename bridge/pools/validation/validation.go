// Package validation judges a pools file as `poolctl validate` and doctor report it: on its
// own, then against the cluster's nodes. It reads nothing: callers bring the file's bytes and
// the nodes, so poolctl validate and doctor say the same thing about the same file. It lives
// under bridge so that doctor need not import poolctl for it.
package validation

import (
	"fmt"
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Cluster is what a pools file is checked against: the cluster's nodes, or why they could not
// be read.
type Cluster struct {
	Nodes []slurm.Node
	Err   error
}

// Report is the verdict on one pools file, as poolctl validate prints it.
type Report struct {
	// Lines are each problem once, by line, or the one line saying the file is good.
	Lines []string
	// Failure is the exit message when the file has problems or could not be checked; "" when
	// it is good.
	Failure string
}

// OK says the file is good.
func (r Report) OK() bool { return r.Failure == "" }

// Check judges the pools file path holds (data) on its own and, unless cluster is nil, against
// the cluster. Decode's problems (an unknown key, a wrong type) leave the rest readable, so the
// other checks still run: one run shows every problem.
func Check(path string, data []byte, cluster *Cluster) Report {
	cfg, problems := pools.Decode(data, path)
	if cfg != nil {
		problems = append(problems, cfg.Validate()...)
		if cluster != nil {
			if cluster.Err != nil {
				return Report{Lines: problemLines(problems),
					Failure: fmt.Sprintf("cannot check %s against the cluster: %v (--no-cluster skips this check)", path, cluster.Err)}
			}
			problems = append(problems, pools.CheckCluster(cfg, slurm.Cluster(cluster.Nodes))...)
		}
	}
	if len(problems) > 0 {
		lines := problemLines(problems)
		return Report{Lines: lines, Failure: fmt.Sprintf("%s: %d %s", path, len(lines), Plural(len(lines), "problem"))}
	}
	n := len(cfg.Pools)
	if cluster != nil {
		return Report{Lines: []string{fmt.Sprintf("%s: OK, %d %s match the cluster", path, n, Plural(n, "pool"))}}
	}
	return Report{Lines: []string{fmt.Sprintf("%s: OK, %d %s (not checked against the cluster)", path, n, Plural(n, "pool"))}}
}

// problemLines are the problems by line, each printed once.
func problemLines(problems pools.Problems) []string {
	slices.SortStableFunc(problems, func(a, b pools.Problem) int { return a.Line - b.Line })
	var lines []string
	for _, p := range problems {
		if s := p.String(); len(lines) == 0 || s != lines[len(lines)-1] {
			lines = append(lines, s)
		}
	}
	return lines
}

// Plural is word for one, else words.
func Plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
