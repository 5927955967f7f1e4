package pools

import (
	"slices"
	"testing"
)

func TestBorrowQOSSettings(t *testing.T) {
	const pools = "pools:\n  - name: cpu\n    node: {cpus: 8, memory_mb: 1000}\n"
	c, err := Parse([]byte("borrow_qos: borrow\nborrow_qos_admins: [slurmbridge, quotad]\n"+pools), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.BorrowQOSPattern() != "borrow" || !c.IsBorrowQOS("borrow") || c.IsBorrowQOS("borrow-proj-a") ||
		!slices.Equal(c.BorrowQOSAdmins, []string{"slurmbridge", "quotad"}) {
		t.Errorf("read as %q %v", c.BorrowQOS, c.BorrowQOSAdmins)
	}
	// Left out: quotad's default.
	c, err = Parse([]byte(pools), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.BorrowQOSPattern() != DefaultBorrowQOS || !c.IsBorrowQOS("borrow-proj-b") || c.IsBorrowQOS("borrow") {
		t.Errorf("default borrow QOS %q", c.BorrowQOSPattern())
	}
	var none *Config // no usable pools.yaml
	if !none.IsBorrowQOS("borrow-proj-b") {
		t.Error("without a config the default borrow QOS is not recognised")
	}

	for _, tt := range []struct {
		yaml string
		want []problemAt
	}{
		{"borrow_qos: borrow-{account}-{account}\n", []problemAt{{1, `borrow_qos "borrow-{account}-{account}" holds {account} more than once`}}},
		{"borrow_qos: 'lend me'\n", []problemAt{{1, `borrow_qos "lend me" is not a QOS name`}}},
		{"borrow_qos: '-{account}'\n", []problemAt{{1, `borrow_qos "-{account}" is not a QOS name`}}},
		{"borrow_qos: [a]\n", []problemAt{{1, "borrow_qos: want a string, got a list"}}},
		{"borrow_qos_admins: slurmbridge\n", []problemAt{{1, "borrow_qos_admins: want a list of user names"}}},
		{"borrow_qos_admins:\n  - ok\n  - 'not me'\n", []problemAt{{3, `borrow_qos_admins: "not me" is not a user name`}}},
		{"elastic_qos: 'grow me'\n", []problemAt{{1, `elastic_qos "grow me" is not a QOS name`}}},
		{"elastic_qos: borrow-{account}\n", []problemAt{{1, `elastic_qos "borrow-{account}" is also borrow_qos`}}},
		{"borrow_qos: lend-{account}\nelastic_qos: LEND-{account}\n", []problemAt{{2, `elastic_qos "LEND-{account}" is also borrow_qos`}}},
	} {
		_, err := Parse([]byte(tt.yaml+pools), "pools.yaml")
		problems, _ := err.(Problems)
		checkProblems(t, problems, tt.want)
	}
}

func TestBorrowQOSFor(t *testing.T) {
	var none *Config
	for _, tc := range []struct {
		cfg     *Config
		account string
		want    string
	}{
		{none, "proj-a", "borrow-proj-a"},
		{&Config{BorrowQOS: "Lend-{account}-x"}, "Proj-B", "lend-proj-b-x"},
		{&Config{BorrowQOS: "shared"}, "proj-a", "shared"},
	} {
		if got := tc.cfg.BorrowQOSFor(tc.account); got != tc.want {
			t.Errorf("%q for %s: %q, want %q", tc.cfg.BorrowQOSPattern(), tc.account, got, tc.want)
		}
	}
}

func TestElasticQOS(t *testing.T) {
	var none *Config // no usable pools.yaml: quotad's defaults
	if !none.IsElasticQOS("elastic-proj-a") || !none.IsLendingQOS("Elastic-Proj-A") || !none.IsLendingQOS("borrow-proj-a") ||
		none.IsLendingQOS("guar-proj-a") || none.IsBorrowQOS("elastic-proj-a") {
		t.Error("default elastic QOS not told apart")
	}
	if got := none.ElasticQOSFor("Proj-A"); got != "elastic-proj-a" {
		t.Errorf("ElasticQOSFor: %q", got)
	}
	c := &Config{ElasticQOS: "grow-{account}"}
	if !c.IsElasticQOS("grow-proj-b") || c.IsElasticQOS("elastic-proj-b") || c.ElasticQOSFor("proj-b") != "grow-proj-b" {
		t.Errorf("named elastic QOS %q", c.ElasticQOSPattern())
	}
}
