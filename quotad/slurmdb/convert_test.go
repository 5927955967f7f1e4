package slurmdb

import (
	"database/sql"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// Rows as the testbed's slurmdbd wrote them after quotad's first sync.
var (
	// testQOSNames are the testbed's QOS by id, as QOSNamesByID reads them.
	testQOSNames = map[string]string{"1": "normal", "3": "borrow", "4": "guar-proj-a"}
	testAssocs   = []slurmdbd.AssocRow{
		{ID: 1, Account: "root", QOS: ",1,"},
		{ID: 2, User: "root", Account: "root"},
		{ID: 3, Account: "proj-a", ParentAcct: "root", QOS: ",3,4,", DefQOSID: sql.NullInt64{Int64: 4, Valid: true}},
		{ID: 4, User: "alice", Account: "proj-a"},
		{ID: 5, Account: "proj-b", ParentAcct: "root"},
		{ID: 7, Account: "proj-c", ParentAcct: "root", QOS: ",+3,"},
		{ID: 8, Account: "team-a1", ParentAcct: "proj-a"},                      // inherits everything
		{ID: 9, Account: "team-a2", ParentAcct: "proj-a", DeltaQOS: ",+1,-3,"}, // sacctmgr qos+=normal,qos-=borrow
		{ID: 10, User: "carol", Account: "team-a1"},
	}
)

func TestConvertUsersOwnLists(t *testing.T) {
	assocs := append(slices.Clone(testAssocs),
		slurmdbd.AssocRow{ID: 11, User: "bob", Account: "proj-a", QOS: ",1,4,"},                    // sacctmgr modify user set qos=normal,guar-proj-a
		slurmdbd.AssocRow{ID: 12, User: "dave", Account: "team-a1", DeltaQOS: ",-3,"},              // qos-=borrow over the inherited list
		slurmdbd.AssocRow{ID: 13, User: "erin", Account: "proj-b", Partition: "a100", QOS: ",+4,"}, // an older row with the delta in qos
	)
	users, err := ConvertUsers(assocs, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range users {
		q := slices.Clone(u.QOS)
		slices.Sort(q)
		got[u.User+"@"+u.Account+"/"+u.Partition] = join(q)
	}
	want := map[string]string{
		"bob@proj-a/":      "guar-proj-a,normal",
		"dave@team-a1/":    "guar-proj-a",        // team-a1 inherits proj-a's borrow,guar-proj-a
		"erin@proj-b/a100": "guar-proj-a,normal", // proj-b inherits root's normal
	}
	if !maps.Equal(got, want) {
		t.Errorf("users = %v, want %v (users that inherit their account's list are left out)", got, want)
	}
	if _, err := ConvertUsers(append(slices.Clone(testAssocs), slurmdbd.AssocRow{ID: 14, User: "x", Account: "proj-a", QOS: ",99,"}), testQOSNames); err == nil {
		t.Error("a user's QOS id missing from qos_table is accepted")
	}
}

func TestConvertAccountsInherits(t *testing.T) {
	accts, err := ConvertAccounts(testAssocs, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range accts {
		q := slices.Clone(a.QOS)
		slices.Sort(q)
		got[a.Name] = a.DefaultQOS + "|" + join(q)
	}
	want := map[string]string{
		"proj-a":  "guar-proj-a|borrow,guar-proj-a",
		"proj-b":  "|normal",                        // empty list: the parent's
		"proj-c":  "|borrow,normal",                 // "+id": added to the parent's
		"team-a1": "guar-proj-a|borrow,guar-proj-a", // a sub-account inherits list and default
		"team-a2": "guar-proj-a|guar-proj-a,normal", // delta_qos applied to the parent's list
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if _, ok := got["root"]; ok {
		t.Error("root is listed as a project account")
	}
}

func TestConvertAccountsKeepsTheTreeAndWhatIsOwn(t *testing.T) {
	accts, err := ConvertAccounts(testAssocs, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]policy.Account{}
	for _, a := range accts {
		got[a.Name] = a
	}
	for name, want := range map[string]struct {
		parent        string
		ownQOS, ownDe bool
	}{
		"proj-a":  {"root", true, true},
		"proj-b":  {"root", false, false},
		"proj-c":  {"root", true, false},
		"team-a1": {"proj-a", false, false},
		"team-a2": {"proj-a", true, false},
	} {
		a := got[name]
		if a.Parent != want.parent || a.OwnQOS != want.ownQOS || a.OwnDefaultQOS != want.ownDe {
			t.Errorf("%s: parent %q own qos %v own default %v, want %q %v %v", name, a.Parent, a.OwnQOS, a.OwnDefaultQOS, want.parent, want.ownQOS, want.ownDe)
		}
	}
}

func join(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func TestSumUsageClipsToWindow(t *testing.T) {
	since, now := time.Unix(1000, 0), time.Unix(2000, 0)
	rows := []slurmdbd.UsageRow{
		{Account: "proj-a", TRESAlloc: "1=1,1001=2,1002=2", Start: 500, End: 1500}, // 500 s in window × 2
		{Account: "proj-a", TRESAlloc: "1=1,1001=1", Start: 1900, End: 0},          // running: 100 s
		{Account: "proj-b", TRESAlloc: "1=4", Start: 1000, End: 2000},              // no GPU
		{Account: "proj-b", TRESAlloc: "1=1,11001=3", Start: 1000, End: 2000},      // another id that merely contains 1001
	}
	u, err := SumUsage(rows, 1001, since, now)
	if err != nil {
		t.Fatal(err)
	}
	if u["proj-a"] != 1100 || u["proj-b"] != 0 {
		t.Errorf("usage = %v, want proj-a 1100, proj-b 0", u)
	}
}

func TestConvertAccountsDoesNotDependOnRowOrder(t *testing.T) {
	// Ordered by id_assoc, an account re-parented under a newer one comes before its parent.
	want, err := ConvertAccounts(testAssocs, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(testAssocs)
	slices.Reverse(reversed)
	got, err := ConvertAccounts(reversed, testQOSNames)
	if err != nil {
		t.Fatal(err)
	}
	key := func(accts []policy.Account) map[string]string {
		m := map[string]string{}
		for _, a := range accts {
			q := slices.Clone(a.QOS)
			slices.Sort(q)
			m[a.Name] = a.DefaultQOS + "|" + join(q)
		}
		return m
	}
	if w, g := key(want), key(got); !maps.Equal(w, g) {
		t.Fatalf("reversed rows resolve to %v, want %v", g, w)
	}
}

// The rollup's hours are slurmdbd's local ones: in a zone of +5:30 they start at :30 UTC, and
// the window's first whole hour is counted back from the rollup's end, not cut at a UTC hour.
func TestFirstRolledHourFollowsSlurmdbdsHours(t *testing.T) {
	rolled := time.Date(2026, 12, 4, 12, 30, 0, 0, time.UTC) // 18:00 in +5:30
	for since, want := range map[time.Time]time.Time{
		time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC): time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 6, 10, 0, 0, time.UTC): time.Date(2026, 12, 4, 6, 30, 0, 0, time.UTC),
		time.Date(2026, 12, 4, 6, 50, 0, 0, time.UTC): time.Date(2026, 12, 4, 7, 30, 0, 0, time.UTC),
	} {
		if got := FirstRolledHour(since, rolled); !got.Equal(want) {
			t.Errorf("window from %s: first rolled hour %s, want %s", since.Format("15:04"), got.Format("15:04"), want.Format("15:04"))
		}
	}
}
