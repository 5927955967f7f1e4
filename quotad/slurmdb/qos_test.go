package slurmdb

import (
	"reflect"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/gpureq"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// quotad takes bridge's QOS record field by field (bridge/slurmdbd's tests read the rows into
// it); a QOS without GrpTRES gets an empty map, which the policy reads as no limit.
func TestPolicyQOSCopiesEveryField(t *testing.T) {
	got := policyQOS([]slurm.QOS{
		{Name: "guar-proj-a", GrpTRES: gpureq.TRES{"gres/gpu": 4, "gres/gpu:a100": 4}, Preempt: []string{"borrow-proj-b"},
			PreemptMode: "cluster", Priority: 100},
		{Name: "borrow-proj-a", PreemptMode: "requeue", GraceTime: 30 * time.Second, PreemptExemptTime: 20 * time.Second, Priority: 7},
	})
	want := []policy.QOS{
		{Name: "guar-proj-a", GrpTRES: map[string]int64{"gres/gpu": 4, "gres/gpu:a100": 4}, Preempt: []string{"borrow-proj-b"},
			PreemptMode: "cluster", Priority: 100},
		{Name: "borrow-proj-a", GrpTRES: map[string]int64{}, PreemptMode: "requeue", GraceTime: 30 * time.Second,
			PreemptExemptTime: 20 * time.Second, Priority: 7},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("policyQOS:\n got %+v\nwant %+v", got, want)
	}
	// Every field of the record is copied: one added to slurm.QOS fails here until it is.
	if n := reflect.TypeFor[slurm.QOS]().NumField(); n != 7 {
		t.Errorf("slurm.QOS has %d fields, policyQOS copies 7: copy the new one", n)
	}
}
