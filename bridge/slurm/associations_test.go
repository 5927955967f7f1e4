package slurm

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// capturedAssociationFields is the format testdata/sacctmgr-assoc-limits-REL.txt were captured
// with (capture/assoc-limits.sh): Client.Associations's without defaultqos.
var capturedAssociationFields = []string{"cluster", "account", "user", "partition", "parentname",
	"grptres", "maxtres", "grpjobs", "grpsubmitjobs", "maxjobs", "maxsubmitjobs"}

// sacctmgr prints the QOS list with inheritance applied and cannot tell an association's own
// list from its parent's: OwnQOS and OwnDefaultQOS stay false (slurmdbd.Reader fills them).
func TestAssociationsReadsEveryField(t *testing.T) {
	r := &scriptRunner{out: "testbed|7|proj-a|||root|borrow,guar-proj-a|guar-proj-a|gres/gpu=4||2|||\n" +
		"testbed|9|proj-a|alice|a100|||guar-proj-a||gres/gpu=1|||3|\n"}
	assocs, err := Client{Runner: r}.Associations(context.Background(), AssociationFilter{})
	want := []Association{
		{Cluster: "testbed", ID: 7, Account: "proj-a", ParentAccount: "root", QOS: []string{"borrow", "guar-proj-a"}, DefaultQOS: "guar-proj-a",
			GrpTRES: "gres/gpu=4", GrpJobs: 2, GrpSubmitJobs: NoLimit, MaxJobs: NoLimit, MaxSubmitJobs: NoLimit},
		{Cluster: "testbed", ID: 9, Account: "proj-a", User: "alice", Partition: "a100", DefaultQOS: "guar-proj-a", MaxTRESPerJob: "gres/gpu=1",
			GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: 3, MaxSubmitJobs: NoLimit},
	}
	if err != nil || !reflect.DeepEqual(assocs, want) {
		t.Errorf("associations %+v, %v; want %+v", assocs, err, want)
	}
	if _, err := ParseAssociations(nil, []string{"account", "fairshare"}); err == nil {
		t.Error("a field the reader cannot read is no error")
	}
	if _, err := ParseAssociations([]byte("testbed|x|proj-a\n"), []string{"cluster", "id", "account"}); err == nil {
		t.Error("an id that is no number is no error")
	}
}

// testdata/sacctmgr-assoc-limits-REL.txt are the testbed's associations with limits set on
// alice's association in proj-a and on account proj-b (capture/assoc-limits.sh), on each
// release.
func TestAssociationsOfEachRelease(t *testing.T) {
	for _, r := range releases {
		rel := r.name
		t.Run(rel, func(t *testing.T) {
			assocs, err := ParseAssociations(fixture(t, "sacctmgr-assoc-limits-"+rel+".txt"), capturedAssociationFields)
			if err != nil {
				t.Fatal(err)
			}
			find := func(account, user string) Association {
				t.Helper()
				i := slices.IndexFunc(assocs, func(a Association) bool { return a.Account == account && a.User == user })
				if i < 0 {
					t.Fatalf("no association %s/%s in %+v", account, user, assocs)
				}
				return assocs[i]
			}
			tests := []struct {
				account, user string
				want          Association
			}{
				{"proj-a", "alice", Association{Cluster: "testbed", Account: "proj-a", User: "alice", GrpTRES: "gres/gpu=2", MaxTRESPerJob: "gres/gpu:a100=3",
					GrpJobs: 6, GrpSubmitJobs: 8, MaxJobs: 5, MaxSubmitJobs: 7}},
				// A user's association shows its account's Max limits as its own; Grp limits are
				// the account's alone.
				{"proj-b", "bob", Association{Cluster: "testbed", Account: "proj-b", User: "bob",
					GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: 9, MaxSubmitJobs: NoLimit}},
				{"proj-c", "carol", Association{Cluster: "testbed", Account: "proj-c", User: "carol",
					GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: NoLimit, MaxSubmitJobs: NoLimit}},
				{"root", "", Association{Cluster: "testbed", Account: "root",
					GrpJobs: NoLimit, GrpSubmitJobs: NoLimit, MaxJobs: NoLimit, MaxSubmitJobs: NoLimit}},
			}
			for _, tt := range tests {
				if got := find(tt.account, tt.user); !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s/%s = %+v, want %+v", tt.account, tt.user, got, tt.want)
				}
			}
			projB := find("proj-b", "")
			if projB.ParentAccount != "root" || projB.MaxJobs != 9 || projB.GrpJobs != NoLimit || projB.MaxSubmitJobs != NoLimit {
				t.Errorf("proj-b = %+v", projB)
			}
			if grp := strings.Split(projB.GrpTRES, ","); !slices.Contains(grp, "cpu=16") || !slices.Contains(grp, "gres/gpu:a100=4") || len(grp) != 2 {
				t.Errorf("proj-b GrpTRES = %q", projB.GrpTRES)
			}
		})
	}
	if _, err := ParseAssociations([]byte("testbed|proj-a|alice||||||x||\n"), capturedAssociationFields); err == nil {
		t.Error("a count that is no number is no error")
	}
	if _, err := ParseAssociations([]byte("testbed|proj-a|alice\n"), capturedAssociationFields); err == nil {
		t.Error("a short line is no error")
	}
}

// testdata/sacctmgr-assoc-REL.txt are the testbed's associations in Client.Associations's own
// format, id and qos included (capture/assoc.sh), on each release: the reader's fields are
// those every release's sacctmgr prints.
func TestAssociationsInTheReadersFormatOfEachRelease(t *testing.T) {
	for _, r := range releases {
		t.Run(r.name, func(t *testing.T) {
			assocs, err := ParseAssociations(fixture(t, "sacctmgr-assoc-"+r.name+".txt"), AssociationFields)
			if err != nil {
				t.Fatal(err)
			}
			none := func(a Association) Association {
				a.GrpJobs, a.GrpSubmitJobs, a.MaxJobs, a.MaxSubmitJobs = NoLimit, NoLimit, NoLimit, NoLimit
				return a
			}
			want := map[uint32]Association{
				1: none(Association{Cluster: "testbed", ID: 1, Account: "root", QOS: []string{"normal"}, DefaultQOS: ""}),
				3: none(Association{Cluster: "testbed", ID: 3, Account: "proj-a", ParentAccount: "root",
					QOS: []string{"borrow-proj-a", "elastic-proj-a", "guar-proj-a"}, DefaultQOS: "guar-proj-a"}),
				4: none(Association{Cluster: "testbed", ID: 4, Account: "proj-a", User: "alice",
					QOS: []string{"borrow-proj-a", "elastic-proj-a", "guar-proj-a"}, DefaultQOS: "guar-proj-a"}),
			}
			for _, a := range assocs {
				if w, ok := want[a.ID]; ok {
					if !reflect.DeepEqual(a, w) {
						t.Errorf("association %d = %+v, want %+v", a.ID, a, w)
					}
					delete(want, a.ID)
				}
			}
			if len(want) > 0 {
				t.Errorf("associations missing: %+v", want)
			}
		})
	}
}
