package daemon

import (
	"context"
	"fmt"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// readAssociations is the cluster's associations with their limits. The cluster's name is
// read once: the associations of another cluster of the same slurmdbd are not this one's.
func (d *Daemon) readAssociations(ctx context.Context) ([]slurm.Association, error) {
	if d.cluster == "" {
		name, err := d.slurm.ClusterName(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading the cluster's name: %w", err)
		}
		d.cluster = name
	}
	return d.slurm.Associations(ctx, d.cluster)
}
