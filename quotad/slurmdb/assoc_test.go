package slurmdb

import (
	"database/sql"
	"reflect"
	"slices"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

func defQOS(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: true} }

// Rows of every kind quotad meets: absolute lists, deltas in qos and in delta_qos, NULL and 0
// def_qos_id, a deep tree, users with and without their own list, a partition's, an account
// without a parent row, one parented to itself, a cycle.
var (
	resolvedQOSNames = map[string]string{"1": "normal", "3": "borrow", "4": "guar-proj-a", "5": "guar-proj-b", "6": "scavenger"}
	resolvedRows     = []slurmdbd.AssocRow{
		{ID: 1, Account: "root", QOS: ",1,", DefQOSID: defQOS(1)},
		{ID: 2, User: "root", Account: "root"},
		{ID: 3, Account: "proj-a", ParentAcct: "root", QOS: ",3,4,", DefQOSID: defQOS(4)},
		{ID: 4, User: "alice", Account: "proj-a"},
		{ID: 5, Account: "proj-b", ParentAcct: "root"},
		{ID: 6, User: "bob", Account: "proj-b", QOS: ",1,5,", DefQOSID: defQOS(5)},
		{ID: 7, Account: "proj-c", ParentAcct: "root", QOS: ",+3,"},
		{ID: 8, Account: "team-a1", ParentAcct: "proj-a"},
		{ID: 9, Account: "team-a2", ParentAcct: "proj-a", DeltaQOS: ",+1,-3,"},
		{ID: 10, User: "carol", Account: "team-a1"},
		{ID: 11, User: "dave", Account: "team-a1", DeltaQOS: ",-3,"},
		{ID: 12, User: "erin", Account: "proj-b", Partition: "a100", QOS: ",+4,"},
		{ID: 13, Account: "deep1", ParentAcct: "team-a2", DefQOSID: defQOS(0)},
		{ID: 14, Account: "deep2", ParentAcct: "deep1", DeltaQOS: ",+6,", DefQOSID: defQOS(6)},
		{ID: 15, Account: "deep3", ParentAcct: "deep2"},
		{ID: 16, Account: "deep4", ParentAcct: "deep3", QOS: ",-6,-4,"},
		{ID: 17, User: "frank", Account: "deep4", QOS: ",+3,"},
		{ID: 18, Account: "loop-a", ParentAcct: "loop-b", QOS: ",+5,"},
		{ID: 19, Account: "loop-b", ParentAcct: "loop-a"},
		{ID: 20, Account: "orphan", ParentAcct: "gone", DeltaQOS: ",+1,"},
		{ID: 21, Account: "proj-d", ParentAcct: "proj-d", QOS: ",6,"},
		{ID: 22, User: "gina", Account: "proj-a", Partition: "v100", QOS: ",6,", DefQOSID: defQOS(6)},
		{ID: 23, Account: "proj-e", ParentAcct: "root", QOS: ",-1,"},
	}
)

// The accounts and users quotad takes from resolvedRows are what it took before bridge read
// associations as slurm.Association (quotad resolved the rows itself then): the literals below
// are that code's output, QOS sorted (it listed them in no fixed order).
func TestAssociationsResolveAsBefore(t *testing.T) {
	assocs, err := slurmdbd.AssociationsFromRows("testbed", resolvedRows, resolvedQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	accounts, users := policyAssociations(assocs)
	wantAccounts := []policy.Account{
		{Name: "proj-a", Parent: "root", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a", OwnQOS: true, OwnDefaultQOS: true},
		{Name: "proj-b", Parent: "root", QOS: []string{"normal"}, DefaultQOS: "normal"},
		{Name: "proj-c", Parent: "root", QOS: []string{"borrow", "normal"}, DefaultQOS: "normal", OwnQOS: true},
		{Name: "team-a1", Parent: "proj-a", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a"},
		{Name: "team-a2", Parent: "proj-a", QOS: []string{"guar-proj-a", "normal"}, DefaultQOS: "guar-proj-a", OwnQOS: true},
		{Name: "deep1", Parent: "team-a2", QOS: []string{"guar-proj-a", "normal"}, DefaultQOS: "guar-proj-a"},
		{Name: "deep2", Parent: "deep1", QOS: []string{"guar-proj-a", "normal", "scavenger"}, DefaultQOS: "scavenger", OwnQOS: true, OwnDefaultQOS: true},
		{Name: "deep3", Parent: "deep2", QOS: []string{"guar-proj-a", "normal", "scavenger"}, DefaultQOS: "scavenger"},
		{Name: "deep4", Parent: "deep3", QOS: []string{"normal"}, DefaultQOS: "scavenger", OwnQOS: true},
		{Name: "loop-a", Parent: "loop-b", QOS: []string{"guar-proj-b"}, OwnQOS: true},
		{Name: "loop-b", Parent: "loop-a", QOS: []string{"guar-proj-b"}},
		{Name: "orphan", Parent: "gone", QOS: []string{"normal"}, OwnQOS: true},
		{Name: "proj-d", QOS: []string{"scavenger"}, OwnQOS: true},
		{Name: "proj-e", Parent: "root", DefaultQOS: "normal", OwnQOS: true},
	}
	wantUsers := []policy.UserAssociation{
		{User: "bob", Account: "proj-b", QOS: []string{"guar-proj-b", "normal"}},
		{User: "dave", Account: "team-a1", QOS: []string{"guar-proj-a"}},
		{User: "erin", Account: "proj-b", Partition: "a100", QOS: []string{"guar-proj-a", "normal"}},
		{User: "frank", Account: "deep4", QOS: []string{"borrow", "normal"}},
		{User: "gina", Account: "proj-a", Partition: "v100", QOS: []string{"scavenger"}},
	}
	if !reflect.DeepEqual(accounts, wantAccounts) {
		t.Errorf("accounts:\n got %+v\nwant %+v", accounts, wantAccounts)
	}
	if !reflect.DeepEqual(users, wantUsers) {
		t.Errorf("users:\n got %+v\nwant %+v", users, wantUsers)
	}
	// A QOS id missing from qos_table failed the read then and does now.
	for _, bad := range []slurmdbd.AssocRow{
		{ID: 30, Account: "bad1", ParentAcct: "root", QOS: ",99,"},
		{ID: 31, Account: "bad2", ParentAcct: "root", DefQOSID: defQOS(98)},
		{ID: 32, User: "x", Account: "proj-a", QOS: ",97,"},
		{ID: 33, User: "y", Account: "proj-a", DeltaQOS: ",+96,"},
	} {
		if _, err := slurmdbd.AssociationsFromRows("testbed", append(slices.Clone(resolvedRows), bad), resolvedQOSNames); err == nil {
			t.Errorf("row %d: a QOS id missing from qos_table is accepted", bad.ID)
		}
	}
}

// quotad takes bridge's association record field by field: an account's own association
// (not root's) as a policy.Account, a user's that sets its own list as a UserAssociation.
func TestPolicyAssociationsCopiesEveryField(t *testing.T) {
	accounts, users := policyAssociations([]slurm.Association{
		{Cluster: "testbed", ID: 1, Account: "root", QOS: []string{"normal"}, OwnQOS: true},
		{Cluster: "testbed", ID: 2, Account: "proj-a", ParentAccount: "root", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a",
			OwnQOS: true, OwnDefaultQOS: true, GrpJobs: 3},
		{Cluster: "testbed", ID: 3, Account: "proj-a", User: "alice", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a"},
		{Cluster: "testbed", ID: 4, Account: "proj-a", User: "bob", Partition: "a100", QOS: []string{"normal"}, DefaultQOS: "normal",
			OwnQOS: true, OwnDefaultQOS: true},
	})
	wantAccounts := []policy.Account{{Name: "proj-a", Parent: "root", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a",
		OwnQOS: true, OwnDefaultQOS: true}}
	wantUsers := []policy.UserAssociation{{User: "bob", Account: "proj-a", Partition: "a100", QOS: []string{"normal"}}}
	if !reflect.DeepEqual(accounts, wantAccounts) || !reflect.DeepEqual(users, wantUsers) {
		t.Errorf("policyAssociations:\n got %+v %+v\nwant %+v %+v", accounts, users, wantAccounts, wantUsers)
	}
	// Every field of the record is copied or left out for a reason: one added to
	// slurm.Association fails here until it is one or the other.
	copied := map[string]bool{"Account": true, "User": true, "Partition": true, "ParentAccount": true, "QOS": true,
		"DefaultQOS": true, "OwnQOS": true, "OwnDefaultQOS": true}
	notNeeded := map[string]string{
		"Cluster": "the reader reads one cluster's tables", "ID": "the policy names associations by account, user and partition",
		"GrpTRES": "quotad limits through QOS", "MaxTRESPerJob": "quotad limits through QOS",
		"GrpJobs": "quotad limits through QOS", "GrpSubmitJobs": "quotad limits through QOS",
		"MaxJobs": "quotad limits through QOS", "MaxSubmitJobs": "quotad limits through QOS",
	}
	for f := range reflect.TypeFor[slurm.Association]().Fields() {
		if _, skip := notNeeded[f.Name]; !copied[f.Name] && !skip {
			t.Errorf("slurm.Association.%s is neither copied by policyAssociations nor listed as not needed", f.Name)
		}
	}
}
