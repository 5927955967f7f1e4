package slurm

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// shareArgs is what DecayedGPUUsage asks sshare for: one association a line.
var shareArgs = []string{"-P", "-n", "-o", "Account,User,GrpTRESRaw"}

// DecayedGPUUsage is each account's GPU usage as slurmctld's fair share keeps it, in
// GPU-seconds: sshare's GrpTRESRaw for gres/gpu, TRES-minutes that priority/multifactor decays
// with the site's PriorityDecayHalfLife. An account's usage includes its sub-accounts'. Every
// supported release prints the same columns.
func (f Client) DecayedGPUUsage(ctx context.Context) (map[string]float64, error) {
	out, err := f.Runner.Run(ctx, "sshare", shareArgs...)
	if err != nil {
		return nil, err
	}
	return ParseShareGPUUsage(out)
}

// ParseShareGPUUsage reads `sshare -P -n -o Account,User,GrpTRESRaw`: the account lines (no
// user), their names indented by depth.
func ParseShareGPUUsage(out []byte) (map[string]float64, error) {
	usage := map[string]float64{}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) != 3 {
			return nil, fmt.Errorf("sshare: %q: want Account|User|GrpTRESRaw", line)
		}
		account, user := strings.TrimSpace(cols[0]), strings.TrimSpace(cols[1])
		if user != "" || account == "" {
			continue
		}
		minutes, found := 0.0, false
		for kv := range strings.SplitSeq(cols[2], ",") {
			k, v, _ := strings.Cut(kv, "=")
			if k != "gres/gpu" {
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n < 0 {
				return nil, fmt.Errorf("sshare: account %s: gres/gpu usage %q is not a number of TRES-minutes", account, v)
			}
			minutes, found = n, true
		}
		if !found {
			return nil, fmt.Errorf("sshare: account %s has no gres/gpu usage: add gres/gpu to AccountingStorageTRES (and limits to AccountingStorageEnforce, which keeps GrpTRESRaw)", account)
		}
		usage[account] = minutes * 60
	}
	return usage, nil
}
