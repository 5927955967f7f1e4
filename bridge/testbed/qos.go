package testbed

import (
	"context"
	"slices"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Preempts is the list of QOS that qos may preempt (sacctmgr's Preempt), sorted, and whether
// qos exists at all. The quotad and elasticd tests check with it whom quotad let claims reclaim.
func (c *Cluster) Preempts(ctx context.Context, qos string) (preempts []string, exists bool, err error) {
	all, err := c.Slurm().QOS(ctx)
	if err != nil {
		return nil, false, err
	}
	q, exists := slurm.QOSByName(all, qos)
	return slices.Sorted(slices.Values(q.Preempt)), exists, nil
}
