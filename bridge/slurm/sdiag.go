package slurm

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RPCCount is one row of sdiag's RPC statistics: a message type or a user, how many RPCs
// slurmctld served for it and their total time.
type RPCCount struct {
	Name        string
	Count       uint64
	TotalMicros uint64
}

// Diag is what sdiag says of the RPCs slurmctld served since its counters were last reset
// (its start, or sdiag --reset), by message type and by user.
type Diag struct {
	ByType, ByUser map[string]RPCCount
}

// Diag runs sdiag. Every supported release prints the same two tables.
func (f Client) Diag(ctx context.Context) (Diag, error) {
	out, err := f.Runner.Run(ctx, "sdiag")
	if err != nil {
		return Diag{}, err
	}
	return ParseDiag(out)
}

// sdiagRow is a row of either table: "\tNAME (ID) count:N ave_time:N total_time:N", newer
// releases may add fields after it.
var sdiagRow = regexp.MustCompile(`^\s+(\S+)\s*\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)`)

// ParseDiag reads sdiag's "Remote Procedure Call statistics" tables; the rest is skipped.
func ParseDiag(out []byte) (Diag, error) {
	d := Diag{ByType: map[string]RPCCount{}, ByUser: map[string]RPCCount{}}
	var table map[string]RPCCount
	seen := 0
	for line := range strings.SplitSeq(string(out), "\n") {
		switch strings.TrimSpace(line) {
		case "Remote Procedure Call statistics by message type":
			table, seen = d.ByType, seen+1
			continue
		case "Remote Procedure Call statistics by user":
			table, seen = d.ByUser, seen+1
			continue
		}
		if line == "" || line[0] != '\t' && line[0] != ' ' {
			table = nil // a table ends at the next heading
			continue
		}
		m := sdiagRow.FindStringSubmatch(line)
		if table == nil || m == nil {
			continue
		}
		count, err1 := strconv.ParseUint(m[2], 10, 64)
		total, err2 := strconv.ParseUint(m[3], 10, 64)
		if err1 != nil || err2 != nil {
			return Diag{}, fmt.Errorf("sdiag: bad row %q", line)
		}
		// Added up: older releases print every uid they cannot name as "nobody".
		r := table[m[1]]
		table[m[1]] = RPCCount{Name: m[1], Count: r.Count + count, TotalMicros: r.TotalMicros + total}
	}
	if seen != 2 {
		return Diag{}, fmt.Errorf("sdiag: no RPC statistics tables in its output")
	}
	return d, nil
}

// Since is what was served between before and d. A row whose count went down was reset in
// between (slurmctld restarted): all of d's count is taken. A row reset and grown past its old
// count reads as the difference (sdiag's "Data since" cannot tell: it moves at midnight too).
func (d Diag) Since(before Diag) Diag {
	sub := func(after, prev map[string]RPCCount) map[string]RPCCount {
		out := map[string]RPCCount{}
		for name, a := range after {
			if b, ok := prev[name]; ok && b.Count <= a.Count && b.TotalMicros <= a.TotalMicros {
				a.Count -= b.Count
				a.TotalMicros -= b.TotalMicros
			}
			if a.Count > 0 {
				out[name] = a
			}
		}
		return out
	}
	return Diag{ByType: sub(d.ByType, before.ByType), ByUser: sub(d.ByUser, before.ByUser)}
}

// Top is the n rows of table with the most RPCs, most first (ties by name).
func Top(table map[string]RPCCount, n int) []RPCCount {
	rows := slices.Collect(maps.Values(table))
	slices.SortFunc(rows, func(a, b RPCCount) int {
		if a.Count != b.Count {
			if a.Count > b.Count {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return rows[:min(n, len(rows))]
}

// Total is the RPCs of a table.
func Total(table map[string]RPCCount) (count, micros uint64) {
	for _, r := range table {
		count += r.Count
		micros += r.TotalMicros
	}
	return count, micros
}
