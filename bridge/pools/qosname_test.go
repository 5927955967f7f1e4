package pools

import (
	"strings"
	"testing"
)

func TestQOSNameIsSlurmsLowerCaseName(t *testing.T) {
	for _, tc := range []struct{ pattern, account, want string }{
		{DefaultBorrowQOS, "proj-a", "borrow-proj-a"},
		{DefaultElasticQOS, "ProjA", "elastic-proja"}, // Slurm stores QOS names lower case
		{DefaultGuaranteedQOS, "proj-a", "guar-proj-a"},
		{"Lend-{account}-GPU", "Team", "lend-team-gpu"},
		{" lend ", "proj-a", "lend"}, // a pattern without {account}: one shared name
	} {
		got := QOSName(tc.pattern, tc.account)
		if got != tc.want {
			t.Errorf("QOSName(%q, %q) = %q, want %q", tc.pattern, tc.account, got, tc.want)
		}
		if tc.pattern != " lend " && !MatchQOS(tc.pattern, got) {
			t.Errorf("MatchQOS(%q, %q) = false: a name built by the rule must match it", tc.pattern, got)
		}
	}
}

func TestMatchQOS(t *testing.T) {
	tests := []struct {
		pattern, qos string
		want         bool
	}{
		{"borrow", "borrow", true},
		{"borrow", "Borrow", true}, // Slurm compares QOS names without case
		{"borrow", "borrower", false},
		{"borrow", "guar-proj-b", false},
		{"borrow", "", false},
		{"borrow-{account}", "borrow-proj-b", true},
		{"borrow-{account}", "borrow-", false}, // no account
		{"borrow-{account}", "borrow", false},
		{"borrow-{account}", "guar-proj-b", false},
		{"{account}-borrow", "proj-a-borrow", true},
		{"{account}-borrow", "proj-a-borrowed", false},
		{"lend.{account}.gpu", "lend.proj-c.gpu", true},
		{"lend.{account}.gpu", "lend.proj-c.cpu", false},
	}
	for _, tt := range tests {
		if got := MatchQOS(tt.pattern, tt.qos); got != tt.want {
			t.Errorf("MatchQOS(%q, %q) = %v, want %v", tt.pattern, tt.qos, got, tt.want)
		}
	}
}

func TestQOSKey(t *testing.T) {
	for in, want := range map[string]string{"borrow-proj-b": "borrow-proj-b", " Borrow-Proj-B\n": "borrow-proj-b", "": ""} {
		if got := QOSKey(in); got != want {
			t.Errorf("QOSKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckAccount(t *testing.T) {
	long := strings.Repeat("a", MaxQOSName+1)
	for _, tc := range []struct {
		account, problem string // problem: a part of the error; "" for none
	}{
		{"proj-a", ""},
		{"proj_a.2", ""},
		{"9lives", ""},
		{strings.Repeat("a", MaxQOSName), ""},
		{"Proj-A", "sacctmgr stores accounts in lower case, and jobs report this one as proj-a"},
		{"PROJ", "as proj"},
		{"", "not a valid Slurm account name (lowercase"},
		{"p,q", "not a valid Slurm account name (lowercase"},
		{"a=b", "not a valid Slurm account name (lowercase"},
		{"proj a", "not a valid Slurm account name (lowercase"},
		{" proj-a", "not a valid Slurm account name (lowercase"},
		{"-proj", "not a valid Slurm account name (lowercase"},
		{"Proj,A", "not a valid Slurm account name (lowercase"}, // not only its case is wrong
		{"{account}", "not a valid Slurm account name (lowercase"},
		{long, "is 256 bytes long, more than the 255 slurmdbd stores"},
	} {
		checkErr(t, "CheckAccount", tc.account, CheckAccount(tc.account), tc.problem)
	}
}

func TestCheckQOSName(t *testing.T) {
	for _, tc := range []struct{ name, problem string }{
		{"borrow-proj-a", ""},
		{"lend", ""},
		{strings.Repeat("q", MaxQOSName), ""},
		{"Borrow-proj-a", "not a valid QOS name"}, // built names are lower case: QOSName
		{"", "not a valid QOS name"},
		{"-borrow", "not a valid QOS name"},
		{"borrow,proj", "not a valid QOS name"},
		{"borrow-" + strings.Repeat("p", MaxQOSName), "is 262 bytes long, more than the 255 slurmdbd stores"},
	} {
		checkErr(t, "CheckQOSName", tc.name, CheckQOSName(tc.name), tc.problem)
	}
}

func TestQOSPatterns(t *testing.T) {
	for _, tc := range []struct {
		pattern    string
		perProject bool
		problem    string
	}{
		{DefaultGuaranteedQOS, true, ""},
		{DefaultBorrowQOS, true, ""},
		{DefaultElasticQOS, true, ""},
		{"{account}-lend", true, ""},
		{"Lend-{account}-GPU", true, ""}, // built in lower case
		{"borrow", false, ""},            // one shared QOS: pools.yaml may name it, quotad may not
		{"borrow-{account}-{account}", false, "holds {account} more than once"},
		{"{account}", true, ""}, // each project's QOS named as its account
		{"-{account}", true, "is not a QOS name"},
		{"", false, "is not a QOS name"},
		{"lend me-{account}", true, "is not a QOS name"},
		{"lend,{account}", true, "is not a QOS name"},
	} {
		if got := PerProject(tc.pattern); got != tc.perProject {
			t.Errorf("PerProject(%q) = %v, want %v", tc.pattern, got, tc.perProject)
		}
		checkErr(t, "CheckQOSPattern", tc.pattern, CheckQOSPattern(tc.pattern), tc.problem)
	}
}

func checkErr(t *testing.T, fn, arg string, err error, problem string) {
	t.Helper()
	switch {
	case problem == "" && err != nil:
		t.Errorf("%s(%q): %v, want no problem", fn, arg, err)
	case problem != "" && (err == nil || !strings.Contains(err.Error(), problem)):
		t.Errorf("%s(%q): %v, want %q", fn, arg, err, problem)
	}
}

// quotad's size tiers and protected borrow QOS are named by the borrow pattern and read back
// from it; a fixed pattern (one shared QOS) has neither.
func TestBorrowSubQOSNames(t *testing.T) {
	for _, tt := range []struct {
		pattern, qos string
		tierAcct     string
		tierGPUs     int
		protected    string
	}{
		{"borrow-{account}", "borrow-proj-b-g4", "proj-b", 4, ""},
		{"borrow-{account}", "Borrow-Proj-B-G4", "proj-b", 4, ""},
		{"borrow-{account}", "borrow-proj-b-hipri", "", 0, "proj-b"},
		{"{account}-lent", "proj-b-g2-lent", "proj-b", 2, ""},
		{"{account}-lent", "proj-b-hipri-lent", "", 0, "proj-b"},
		{"borrow-{account}", "borrow-proj-b", "", 0, ""},
		{"borrow-{account}", "borrow-hipri", "", 0, ""},
		{"borrow-{account}", "borrow--hipri", "", 0, ""},
		{"borrow-{account}", "borrow-proj-b-g0", "", 0, ""},
		{"borrow-{account}", "borrow-proj-b-g02", "", 0, ""},
		{"borrow-{account}", "guar-proj-b-hipri", "", 0, ""},
		{"borrow", "borrow-hipri", "", 0, ""},
	} {
		acct, n, ok := BorrowTierOf(tt.pattern, tt.qos)
		if acct != tt.tierAcct || n != tt.tierGPUs || ok != (tt.tierAcct != "") {
			t.Errorf("BorrowTierOf(%q, %q) = %q, %d, %v; want %q, %d", tt.pattern, tt.qos, acct, n, ok, tt.tierAcct, tt.tierGPUs)
		}
		if ok && QOSKey(BorrowTierName(tt.pattern, acct, n)) != QOSKey(tt.qos) {
			t.Errorf("BorrowTierName(%q, %q, %d) = %q, want %q", tt.pattern, acct, n, BorrowTierName(tt.pattern, acct, n), tt.qos)
		}
		acct, ok = ProtectedBorrowOf(tt.pattern, tt.qos)
		if acct != tt.protected || ok != (tt.protected != "") {
			t.Errorf("ProtectedBorrowOf(%q, %q) = %q, %v; want %q", tt.pattern, tt.qos, acct, ok, tt.protected)
		}
		if ok && QOSKey(ProtectedBorrowName(tt.pattern, acct)) != QOSKey(tt.qos) {
			t.Errorf("ProtectedBorrowName(%q, %q) = %q, want %q", tt.pattern, acct, ProtectedBorrowName(tt.pattern, acct), tt.qos)
		}
	}
}
