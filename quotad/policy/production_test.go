package policy_test

import (
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// The production quota table loads, and the borrow QOS the job_submit plugin lets quotad move
// jobs into when pools.yaml names none is the one quotad lends in when its table names none: a
// site that sets neither gets a quotad whose moves the plugin takes.
func TestProductionQuotaTableLoadsAndPoolsBorrowWhereQuotadLends(t *testing.T) {
	if _, err := policy.LoadConfig("../../slurm-conf/production/quotas.yaml"); err != nil {
		t.Fatal(err)
	}
	if pools.DefaultBorrowQOS != policy.DefaultBorrowQOS {
		t.Errorf("pools.yaml's default borrow QOS %q, quotad's %q", pools.DefaultBorrowQOS, policy.DefaultBorrowQOS)
	}
}
