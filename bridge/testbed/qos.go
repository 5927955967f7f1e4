package testbed

import (
	"context"
	"slices"
)

// Preempts is the list of QOS that qos may preempt (sacctmgr's Preempt), sorted, and whether
// qos exists at all. The quotad and elasticd tests check with it whom quotad let claims reclaim.
func (c *Cluster) Preempts(ctx context.Context, qos string) (preempts []string, exists bool, err error) {
	all, err := c.Slurm().QOSPreempts(ctx)
	if err != nil {
		return nil, false, err
	}
	preempts, exists = all[qos]
	return slices.Sorted(slices.Values(preempts)), exists, nil
}
