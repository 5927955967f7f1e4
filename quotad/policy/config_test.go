package policy_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
)

func TestLoadConfigExample(t *testing.T) {
	cfg, err := policy.LoadConfig("testdata/quotas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Config{
		Settings: policy.Settings{
			BorrowQOS: "borrow-{account}", GuaranteedQOS: "guar-{account}",
			GraceTime: 10 * time.Second, PreemptExemptTime: 30 * time.Second, MaxSnapshotAge: 15 * time.Second,
		},
		LendLimits: map[string]int{"a100": 8, "v100": 6},
		Projects: []policy.Project{
			{Account: "proj-a", GPUs: policytest.GPUs("a100", 4), BorrowLimit: policytest.IntP(4), Weight: policytest.FloatP(1)},
			{Account: "proj-b", GPUs: policytest.GPUs("a100", 4), BorrowLimit: policytest.IntP(4), Weight: policytest.FloatP(1)},
			{Account: "proj-c", GPUs: policytest.GPUs("v100", 2), BorrowLimitByType: policytest.GPUs("a100", 2), Weight: policytest.FloatP(1)},
		},
	}
	cfg.ForgetLines()
	if !reflect.DeepEqual(*cfg, want) {
		t.Fatalf("got %+v\nwant %+v", *cfg, want)
	}
	if got := cfg.Settings.GuaranteedQOSName("proj-c"); got != "guar-proj-c" {
		t.Errorf("guaranteed QOS name %q", got)
	}
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := policy.ParseConfig([]byte("projects:\n  - account: p\n    gpus: {a100: 3, v100: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, p := cfg.Settings, cfg.Projects[0]
	if s.BorrowQOSName("p") != "borrow-p" || s.ElasticQOSName("p") != "elastic-p" || s.GuaranteedQOSName("p") != "guar-p" || s.SnapshotMaxAge() != policy.DefaultMaxSnapshotAge ||
		!reflect.DeepEqual(s.Reasons(), []string{"QOSGrpGRES"}) || !reflect.DeepEqual(s.BorrowSizeTiers, []int{1, 2, 4, 8}) {
		t.Errorf("settings defaults: %+v", s)
	}
	// Projects team and team-g2: the default tiers would make team's tier 2 team-g2's borrow
	// QOS, so such a table keeps one borrow QOS per project rather than stop working.
	clash, err := policy.ParseConfig([]byte("projects:\n  - account: team\n    gpus: {a100: 1}\n  - account: team-g2\n    gpus: {a100: 1}\n"))
	if err != nil || clash.Settings.BorrowSizeTiers != nil {
		t.Errorf("projects team and team-g2 with no tiers named: tiers %v, %v; want none and a valid table", clash.Settings.BorrowSizeTiers, err)
	}
	// An empty list asks for one borrow QOS per project, and survives a round trip.
	none, err := policy.ParseConfig([]byte("settings: {borrowSizeTiers: []}\nprojects:\n  - account: p\n    gpus: {a100: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := none.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := policy.ParseConfig(out)
	if err != nil || none.Settings.BorrowSizeTiers != nil || back.Settings.BorrowSizeTiers != nil {
		t.Errorf("borrowSizeTiers: [] read as %v, after a round trip %v (%v):\n%s", none.Settings.BorrowSizeTiers, back.Settings.BorrowSizeTiers, err, out)
	}
	if p.Total() != 4 || p.ShareWeight() != 1 {
		t.Errorf("project defaults: total %d weight %g", p.Total(), p.ShareWeight())
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error, in any order
	}{
		{
			name: "unknown key names its line",
			yaml: "projects:\n  - account: p\n    gpu: {a100: 1}\n",
			want: []string{"line 3", "field gpu not found"},
		},
		{
			name: "unknown settings key",
			yaml: "settings:\n  borowQOS: b\nprojects:\n  - account: p\n",
			want: []string{"line 2", "field borowQOS not found"},
		},
		{
			name: "duration must be a string with a unit",
			yaml: "settings:\n  graceTime: 30\nprojects:\n  - account: p\n",
			want: []string{"line 2", "time.Duration"},
		},
		{
			name: "duplicate GPU type key",
			yaml: "projects:\n  - account: p\n    gpus: {a100: 1, a100: 2}\n",
			want: []string{"line 3", "already defined"},
		},
		{
			name: "negative numbers",
			yaml: "lendLimits:\n  a100: -1\nprojects:\n  - account: p\n    gpus:\n      a100: -2\n    totalGPUs: -3\n    borrowLimit: -4\n    borrowLimitByType: {v100: -5}\n",
			want: []string{
				"line 2: lendLimits.a100: lend limit of a100 must not be negative, got -1",
				"line 6: projects.0.gpus.a100: project p: guaranteed a100 must not be negative, got -2",
				"line 7: projects.0.totalGPUs: project p: totalGPUs must not be negative, got -3",
				"line 8: projects.0.borrowLimit: project p: borrowLimit must not be negative, got -4",
				"line 9: projects.0.borrowLimitByType.v100: project p: borrow limit of v100 must not be negative, got -5",
			},
		},
		{
			name: "a lending limit is of the project's own guarantee",
			yaml: "projects:\n  - account: p\n    gpus: {a100: 4}\n    lendLimitByType: {a100: 5, v100: 1, h100: -1}\n",
			want: []string{
				"line 4: projects.0.lendLimitByType.a100: project p: lend limit of a100 is 5, more than its 4 guaranteed a100: a project lends only its own guarantee",
				"projects.0.lendLimitByType.h100: project p: lend limit of h100 must not be negative, got -1",
				"projects.0.lendLimitByType.v100: project p: lend limit of v100 is 1, more than its 0 guaranteed v100",
			},
		},
		{
			name: "duplicate project names both lines",
			yaml: "projects:\n  - account: p\n  - account: q\n  - account: p\n",
			want: []string{"line 4: projects.2.account: project p is listed twice (first at line 2)"},
		},
		{
			name: "weights must be positive",
			yaml: "projects:\n  - account: p\n    weight: 0\n  - account: q\n    weight: -1.5\n",
			want: []string{"line 3: projects.0.weight: project p: weight must be a finite number > 0, got 0", "line 5: projects.1.weight: project q: weight must be a finite number > 0, got -1.5"},
		},
		{
			name: "total below typed guarantees",
			yaml: "projects:\n  - account: p\n    gpus: {a100: 2, v100: 2}\n    totalGPUs: 3\n",
			want: []string{"line 4: projects.0.totalGPUs: project p: totalGPUs 3 is less than the sum of its typed guarantees 4"},
		},
		{
			name: "missing account is reported at the project",
			yaml: "projects:\n  - gpus: {a100: 1}\n",
			want: []string{"line 2: projects.0.account: project #1 has no account"},
		},
		{
			name: "names that would break sacctmgr arguments",
			yaml: "projects:\n  - account: \"p,q\"\n    gpus: {\"A100\": 1}\n",
			want: []string{`account "p,q" is not a valid Slurm account name`, `GPU type "A100" is not a valid name`},
		},
		{
			name: "an account as Slurm stores it, lower case",
			yaml: "projects:\n  - account: Proj-A\n",
			want: []string{`line 2: projects.0.account: account "Proj-A" is not a valid Slurm account name: sacctmgr stores accounts in lower case, and jobs report this one as proj-a`},
		},
		{
			name: "QOS names slurmdbd cannot store",
			yaml: "projects:\n  - account: " + strings.Repeat("p", 250) + "\n",
			want: []string{`borrow QOS name "borrow-ppp`, `is 257 bytes long, more than the 255 slurmdbd stores`},
		},
		{
			name: "a QOS pattern that builds no QOS name",
			yaml: "settings:\n  borrowQOS: \"lend me {account}\"\nprojects:\n  - account: p\n",
			want: []string{`line 2: settings.borrowQOS: "lend me {account}" is not a QOS name`},
		},
		{
			name: "patterns compared as Slurm compares QOS names",
			yaml: "settings:\n  borrowQOS: \"Guar-{account}\"\nprojects:\n  - account: p\n",
			want: []string{`line 2: settings.borrowQOS: "Guar-{account}" is also the guaranteed QOS pattern`},
		},
		{
			name: "guaranteed QOS pattern needs the account",
			yaml: "settings:\n  guaranteedQOS: guar\nprojects:\n  - account: p\n",
			want: []string{"line 2: settings.guaranteedQOS", "must contain {account} exactly once"},
		},
		{
			name: "elastic QOS pattern needs the account",
			yaml: "settings:\n  elasticQOS: elastic\nprojects:\n  - account: p\n",
			want: []string{"line 2: settings.elasticQOS", "must contain {account} exactly once"},
		},
		{
			name: "elastic QOS pattern must differ from the borrow one",
			yaml: "settings:\n  elasticQOS: borrow-{account}\nprojects:\n  - account: p\n",
			want: []string{"line 2: settings.elasticQOS: \"borrow-{account}\" is also the guaranteed or borrow QOS pattern"},
		},
		{
			name: "elastic QOS of one project clashing with another's guaranteed QOS",
			yaml: "settings:\n  elasticQOS: g-{account}\n  guaranteedQOS: \"{account}\"\nprojects:\n  - account: g-p\n  - account: p\n",
			want: []string{`elastic QOS "g-p" of p is also the guaranteed QOS of g-p`},
		},
		{
			name: "borrow QOS pattern needs the account",
			yaml: "settings:\n  borrowQOS: borrow\nprojects:\n  - account: p\n",
			want: []string{"line 2: settings.borrowQOS", `"borrow" must contain {account} exactly once: each project borrows in its own QOS`},
		},
		{
			name: "borrow and guaranteed QOS patterns must differ",
			yaml: "settings:\n  borrowQOS: \"q-{account}\"\n  guaranteedQOS: \"q-{account}\"\nprojects:\n  - account: p\n",
			want: []string{`line 2: settings.borrowQOS: "q-{account}" is also the guaranteed QOS pattern`},
		},
		{
			name: "one project's guaranteed QOS must not be another's borrow QOS",
			yaml: "settings:\n  borrowQOS: \"{account}-b\"\n  guaranteedQOS: \"{account}\"\nprojects:\n  - account: p\n  - account: p-b\n",
			want: []string{`line 6: projects.1.account: guaranteed QOS "p-b" of p-b is also the borrow QOS of p`},
		},
		{
			name: "negative durations",
			yaml: "settings:\n  preemptExemptTime: -1m\nprojects:\n  - account: p\n",
			want: []string{"line 2: settings.preemptExemptTime: must not be negative, got -1m0s"},
		},
		{
			// 2 projects, the default 4 tiers: a band of 6, at most 65535-(2+1+12) = 65520.
			name: "a borrow priority that leaves the reclaim order no room below 65535",
			yaml: "settings:\n  borrowPriority: 65530\nprojects:\n  - account: p\n  - account: q\n",
			want: []string{"line 2: settings.borrowPriority: 65530 leaves no room for 2 projects' reclaim order below 65535 (preempt/qos compares 16 bits of a QOS's Priority): at most 65520"},
		},
		{
			name: "no projects",
			yaml: "settings: {}\n",
			want: []string{"projects: no projects"},
		},
		{name: "empty", yaml: "", want: []string{"quota table is empty"}},
		{name: "two documents", yaml: "projects:\n  - account: p\n---\nprojects: []\n", want: []string{"single YAML document"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := policy.ParseConfig([]byte(tt.yaml))
			if err == nil {
				t.Fatalf("no error; parsed %+v", cfg)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidateWithoutYAMLHasNoLines(t *testing.T) {
	cfg := policytest.MakeConfig().Project("p", policytest.GPUs("a100", 1), policytest.Weight(0)).Obj()
	err := cfg.Validate()
	var ce *policy.ConfigError
	if !errors.As(err, &ce) || ce.Path != "projects.0.weight" || ce.Line != 0 || err.Error() != ce.Path+": "+ce.Msg {
		t.Fatalf("got %v, want one error at projects.0.weight with no line", err)
	}
}

// quotactl set rewrites the table with Marshal; what it writes must read back the same.
func TestConfigMarshalRoundTrip(t *testing.T) {
	cfg, err := policy.LoadConfig("testdata/quotas.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Projects[1].GPUs["v100"] = 1
	cfg.Projects[2].TotalGPUs = policytest.IntP(3)
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := policy.ParseConfig(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	cfg.ForgetLines()
	back.ForgetLines()
	if !reflect.DeepEqual(cfg, back) {
		t.Fatalf("round trip changed the table:\n%s\ngot %+v\nwant %+v", out, back, cfg)
	}
}
