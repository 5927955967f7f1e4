package slurmdbd

import (
	"database/sql"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Association rows as the testbed's slurmdbd wrote them after quotad's first sync.
var (
	// testQOSNames are the testbed's QOS by id, as qosNamesByID reads them.
	testQOSNames = map[string]string{"1": "normal", "3": "borrow", "4": "guar-proj-a"}
	testAssocs   = []AssocRow{
		{ID: 1, Account: "root", QOS: ",1,"},
		{ID: 2, User: "root", Account: "root"},
		{ID: 3, Account: "proj-a", ParentAcct: "root", QOS: ",3,4,", DefQOSID: defQOS(4)},
		{ID: 4, User: "alice", Account: "proj-a"},
		{ID: 5, Account: "proj-b", ParentAcct: "root"},
		{ID: 7, Account: "proj-c", ParentAcct: "root", QOS: ",+3,"},
		{ID: 8, Account: "team-a1", ParentAcct: "proj-a"},                      // inherits everything
		{ID: 9, Account: "team-a2", ParentAcct: "proj-a", DeltaQOS: ",+1,-3,"}, // sacctmgr qos+=normal,qos-=borrow
		{ID: 10, User: "carol", Account: "team-a1"},
	}
)

func defQOS(id int64) sql.NullInt64 { return sql.NullInt64{Int64: id, Valid: true} }

// associations resolves rows on cluster testbed, failing the test on an error.
func associations(t *testing.T, rows []AssocRow) []slurm.Association {
	t.Helper()
	assocs, err := AssociationsFromRows("testbed", rows, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	return assocs
}

// byName keys associations as account/user/partition, with their default QOS and QOS list.
func byName(assocs []slurm.Association) map[string]string {
	got := map[string]string{}
	for _, a := range assocs {
		got[a.Account+"/"+a.User+"/"+a.Partition] = a.DefaultQOS + "|" + strings.Join(a.QOS, ",")
	}
	return got
}

func TestAssocRowsQueryNeedsNoTreeColumns(t *testing.T) {
	// slurmdbd 25.05 and later have no lft/rgt in <cluster>_assoc_table; naming either is an
	// SQL error there.
	q := assocRowsQuery("`testbed_assoc_table`")
	for _, word := range strings.FieldsFunc(q, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' || r == '\n' }) {
		if word == "lft" || word == "rgt" {
			t.Fatalf("query names %s: %s", word, q)
		}
	}
	if !strings.HasSuffix(q, "ORDER BY id_assoc") {
		t.Fatalf("query does not order by id_assoc: %s", q)
	}
}

// Each row becomes the record sacctmgr prints, in the rows' order: ids, names, the parent of
// an account's association, QOS names sorted, the limits unread.
func TestAssociationsFromRowsIsSacctmgrsRecord(t *testing.T) {
	assocs := associations(t, testAssocs[:4])
	none := func(a slurm.Association) slurm.Association {
		a.Cluster, a.GrpJobs, a.GrpSubmitJobs, a.MaxJobs, a.MaxSubmitJobs = "testbed", slurm.NoLimit, slurm.NoLimit, slurm.NoLimit, slurm.NoLimit
		return a
	}
	want := []slurm.Association{
		none(slurm.Association{ID: 1, Account: "root", QOS: []string{"normal"}, OwnQOS: true}),
		none(slurm.Association{ID: 2, Account: "root", User: "root", QOS: []string{"normal"}}),
		none(slurm.Association{ID: 3, Account: "proj-a", ParentAccount: "root", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a",
			OwnQOS: true, OwnDefaultQOS: true}),
		none(slurm.Association{ID: 4, Account: "proj-a", User: "alice", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a"}),
	}
	if !reflect.DeepEqual(assocs, want) {
		t.Errorf("associations:\n got %+v\nwant %+v", assocs, want)
	}
}

func TestAssociationsFromRowsUsersOwnLists(t *testing.T) {
	assocs := associations(t, append(slices.Clone(testAssocs),
		AssocRow{ID: 11, User: "bob", Account: "proj-a", QOS: ",1,4,"},                    // sacctmgr modify user set qos=normal,guar-proj-a
		AssocRow{ID: 12, User: "dave", Account: "team-a1", DeltaQOS: ",-3,"},              // qos-=borrow over the inherited list
		AssocRow{ID: 13, User: "erin", Account: "proj-b", Partition: "a100", QOS: ",+4,"}, // an older row with the delta in qos
	))
	got, own := map[string]string{}, map[string]bool{}
	for _, a := range assocs {
		if a.User != "" {
			key := a.User + "@" + a.Account + "/" + a.Partition
			got[key], own[key] = strings.Join(a.QOS, ","), a.OwnQOS
		}
	}
	want := map[string]string{
		"root@root/":       "normal",
		"alice@proj-a/":    "borrow,guar-proj-a", // inherits proj-a's list
		"carol@team-a1/":   "borrow,guar-proj-a", // team-a1 inherits proj-a's
		"bob@proj-a/":      "guar-proj-a,normal",
		"dave@team-a1/":    "guar-proj-a",        // team-a1 inherits proj-a's borrow,guar-proj-a
		"erin@proj-b/a100": "guar-proj-a,normal", // proj-b inherits root's normal
	}
	if !maps.Equal(got, want) {
		t.Errorf("users = %v, want %v", got, want)
	}
	wantOwn := map[string]bool{"root@root/": false, "alice@proj-a/": false, "carol@team-a1/": false, "bob@proj-a/": true, "dave@team-a1/": true, "erin@proj-b/a100": true}
	if !maps.Equal(own, wantOwn) {
		t.Errorf("users' own lists = %v, want %v", own, wantOwn)
	}
}

func TestAssociationsFromRowsInherits(t *testing.T) {
	got := byName(associations(t, testAssocs))
	want := map[string]string{
		"root//":    "|normal",
		"proj-a//":  "guar-proj-a|borrow,guar-proj-a",
		"proj-b//":  "|normal",                        // empty list: the parent's
		"proj-c//":  "|borrow,normal",                 // "+id": added to the parent's
		"team-a1//": "guar-proj-a|borrow,guar-proj-a", // a sub-account inherits list and default
		"team-a2//": "guar-proj-a|guar-proj-a,normal", // delta_qos applied to the parent's list
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

// A user's association inherits its account's default QOS as an account inherits its
// parent's (sacctmgr's defaultqos), unless it sets its own; a def_qos_id of 0 sets none.
func TestAssociationsFromRowsInheritDefaults(t *testing.T) {
	got := byName(associations(t, append(slices.Clone(testAssocs),
		AssocRow{ID: 11, User: "bob", Account: "proj-a", DefQOSID: defQOS(1)},
		AssocRow{ID: 12, Account: "proj-d", ParentAcct: "proj-a", DefQOSID: defQOS(0)},
		AssocRow{ID: 13, User: "dave", Account: "proj-d", Partition: "a100"},
	)))
	for k, v := range map[string]string{
		"proj-a/alice/":    "guar-proj-a|borrow,guar-proj-a",
		"proj-a/bob/":      "normal|borrow,guar-proj-a",
		"proj-d//":         "guar-proj-a|borrow,guar-proj-a",
		"proj-d/dave/a100": "guar-proj-a|borrow,guar-proj-a",
		"root/root/":       "|normal",
	} {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
}

func TestAssociationsFromRowsKeepsTheTreeAndWhatIsOwn(t *testing.T) {
	got := map[string]slurm.Association{}
	for _, a := range associations(t, testAssocs) {
		if a.User == "" {
			got[a.Account] = a
		}
	}
	for name, want := range map[string]struct {
		parent        string
		ownQOS, ownDe bool
	}{
		"root":    {"", true, false},
		"proj-a":  {"root", true, true},
		"proj-b":  {"root", false, false},
		"proj-c":  {"root", true, false},
		"team-a1": {"proj-a", false, false},
		"team-a2": {"proj-a", true, false},
	} {
		a := got[name]
		if a.ParentAccount != want.parent || a.OwnQOS != want.ownQOS || a.OwnDefaultQOS != want.ownDe {
			t.Errorf("%s: parent %q own qos %v own default %v, want %q %v %v", name, a.ParentAccount, a.OwnQOS, a.OwnDefaultQOS, want.parent, want.ownQOS, want.ownDe)
		}
	}
	// A row whose parent_acct is itself is a tree's top, as root's.
	if a := associations(t, []AssocRow{{ID: 1, Account: "top", ParentAcct: "top", QOS: ",1,"}}); a[0].ParentAccount != "" || !slices.Equal(a[0].QOS, []string{"normal"}) {
		t.Errorf("self-parented account = %+v", a[0])
	}
}

func TestAssociationsFromRowsDoesNotDependOnRowOrder(t *testing.T) {
	// Ordered by id_assoc, an account re-parented under a newer one comes before its parent.
	want := byName(associations(t, testAssocs))
	reversed := slices.Clone(testAssocs)
	slices.Reverse(reversed)
	if got := byName(associations(t, reversed)); !maps.Equal(want, got) {
		t.Fatalf("reversed rows resolve to %v, want %v", got, want)
	}
}

// A tree as deep as a site's (a dozen levels, far below the depth guard) resolves from the top
// whichever end its rows start at; a sub-account's own list and default reach those below it.
func TestAssociationsFromRowsDeepTree(t *testing.T) {
	rows := []AssocRow{{ID: 1, Account: "root", QOS: ",1,"}}
	for i := 1; i <= 12; i++ {
		r := AssocRow{ID: uint32(i + 1), Account: fmt.Sprintf("l%d", i), ParentAcct: fmt.Sprintf("l%d", i-1)}
		switch i {
		case 1:
			r.ParentAcct = "root"
		case 4:
			r.DeltaQOS, r.DefQOSID = ",+3,", defQOS(3)
		case 9:
			r.QOS = ",-1,+4,"
		}
		rows = append(rows, r)
	}
	rows = append(rows, AssocRow{ID: 20, User: "zoe", Account: "l12"})
	for _, order := range []string{"top first", "bottom first"} {
		if order == "bottom first" {
			slices.Reverse(rows)
		}
		got := byName(associations(t, rows))
		for k, v := range map[string]string{
			"l3//":     "|normal",
			"l4//":     "borrow|borrow,normal",
			"l8//":     "borrow|borrow,normal",
			"l9//":     "borrow|borrow,guar-proj-a",
			"l12//":    "borrow|borrow,guar-proj-a",
			"l12/zoe/": "borrow|borrow,guar-proj-a",
			"root//":   "|normal",
			"l1//":     "|normal",
			"l11//":    "borrow|borrow,guar-proj-a",
			"l10//":    "borrow|borrow,guar-proj-a",
			"l5//":     "borrow|borrow,normal",
			"l2//":     "|normal",
			"l6//":     "borrow|borrow,normal",
			"l7//":     "borrow|borrow,normal",
		} {
			if got[k] != v {
				t.Errorf("%s: %s = %q, want %q", order, k, got[k], v)
			}
		}
	}
}

// slurmdbd lets no account become its own ancestor, but a row edited by hand could: the walk
// up parent_acct stops at maxAccountDepth instead of running forever, and no account is lost.
func TestAssociationsFromRowsEndsOnACycle(t *testing.T) {
	assocs := associations(t, []AssocRow{
		{ID: 1, Account: "loop-a", ParentAcct: "loop-b", QOS: ",+4,"},
		{ID: 2, Account: "loop-b", ParentAcct: "loop-a"},
		{ID: 3, User: "x", Account: "loop-b"},
	})
	if got, want := byName(assocs), map[string]string{"loop-a//": "|guar-proj-a", "loop-b//": "|guar-proj-a", "loop-b/x/": "|guar-proj-a"}; !maps.Equal(got, want) {
		t.Errorf("cycle resolves to %v, want %v", got, want)
	}
	// A chain longer than the guard, read bottom first, ends too.
	var rows []AssocRow
	for i := maxAccountDepth + 10; i > 0; i-- {
		rows = append(rows, AssocRow{ID: uint32(i), Account: fmt.Sprintf("l%d", i), ParentAcct: fmt.Sprintf("l%d", i-1)})
	}
	rows = append(rows, AssocRow{ID: 100, Account: "l0", QOS: ",1,"})
	if got := associations(t, rows); len(got) != len(rows) {
		t.Errorf("%d associations of %d rows", len(got), len(rows))
	}
}

// A QOS id that qos_table does not have fails the read, wherever it is: a list read without it
// would be wrong, and quotad acts on these lists.
func TestAssociationsFromRowsRefusesUnknownQOS(t *testing.T) {
	for name, row := range map[string]AssocRow{
		"account list":    {ID: 30, Account: "bad", ParentAcct: "root", QOS: ",99,"},
		"account delta":   {ID: 30, Account: "bad", ParentAcct: "root", DeltaQOS: ",+99,"},
		"account default": {ID: 30, Account: "bad", ParentAcct: "root", DefQOSID: defQOS(99)},
		"user list":       {ID: 30, User: "x", Account: "proj-a", QOS: ",99,"},
		"user delta":      {ID: 30, User: "y", Account: "proj-a", DeltaQOS: ",+99,"},
	} {
		_, err := AssociationsFromRows("testbed", append(slices.Clone(testAssocs), row), testQOSNames)
		if err == nil || !strings.Contains(err.Error(), " 99,") {
			t.Errorf("%s: QOS id 99 missing from qos_table: err %v, want one naming the id", name, err)
		}
	}
}

// A user's default QOS removed from qos_table (slurmdbd leaves def_qos_id behind) reads as
// none: quotad does not act on users' defaults, and its cycle must not stop over one.
func TestAssociationsFromRowsReadARemovedUserDefaultAsNone(t *testing.T) {
	got, err := AssociationsFromRows("testbed", append(slices.Clone(testAssocs), AssocRow{ID: 30, User: "z", Account: "proj-a", DefQOSID: defQOS(99)}), testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	if z := got[len(got)-1]; z.User != "z" || z.DefaultQOS != "" || !z.OwnDefaultQOS {
		t.Errorf("user z = %+v, want no default QOS, set on its own association", z)
	}
}

// applyList: an absolute list replaces the parent's, a delta list ("+id", "-id") changes it,
// an empty one is the parent's.
func TestApplyList(t *testing.T) {
	parent := []string{"1", "3"}
	for _, tt := range []struct {
		list []string
		want []string
	}{
		{nil, []string{"1", "3"}},
		{[]string{"4"}, []string{"4"}},
		{[]string{"4", "1"}, []string{"1", "4"}},
		{[]string{"+4"}, []string{"1", "3", "4"}},
		{[]string{"-3"}, []string{"1"}},
		{[]string{"+4", "-1", "-3"}, []string{"4"}},
		{[]string{"-1", "-3"}, []string{}},
	} {
		got := slices.Clone(applyList(parent, tt.list))
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("applyList(%v, %v) = %v, want %v", parent, tt.list, got, tt.want)
		}
	}
}
