package capacity

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
)

// TestCapacityDoesNoIO fails when the package comes to import anything that reaches outside its
// arguments (files, processes, the network, elasticd's state directory) or the clock: a room
// follows from the snapshot and the job it is given. bridge/slurm and bridge/quotaapi are
// imported for their values (a job, a node, quotad's answer), never to ask Slurm or quotad.
func TestCapacityDoesNoIO(t *testing.T) {
	elastictest.CheckNoIO(t, "fmt", "maps", "slices", "strings",
		"github.com/slurmbridge/slurmbridge/bridge/gpureq", "github.com/slurmbridge/slurmbridge/bridge/noderoom",
		"github.com/slurmbridge/slurmbridge/bridge/pools", "github.com/slurmbridge/slurmbridge/bridge/quotaapi",
		"github.com/slurmbridge/slurmbridge/bridge/slurm", "github.com/slurmbridge/slurmbridge/elasticd/policy")
}
