package jobsubmit

import (
	"errors"
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// The reports this guards against: `salloc ... --qos=borrow-<account>` and `sbatch --qos=borrow
// --no-requeue` were accepted, ran borrowed, and were killed when an owner reclaimed the GPUs.
func TestSubmitIntoBorrowQOSOnlyWhenSlurmCanRequeue(t *testing.T) {
	jr1 := SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030}
	jr0 := SlurmConf{Known: true, JobRequeue: false, SlurmUserID: 64030}
	sbatch := func(qos string, requeue uint16) *pools.Request {
		r := gpuJob("gres/gpu:a100:4")
		r.QOS, r.Requeue = qos, requeue
		return r
	}
	salloc := func(qos string, requeue uint16) *pools.Request {
		r := sbatch(qos, requeue)
		r.Batch = false
		return r
	}
	tests := []struct {
		name    string
		pattern string // borrow_qos in pools.yaml, "" for none
		req     *pools.Request
		conf    SlurmConf
		want    string // a substring of the refusal; "" to accept
	}{
		{"sbatch --requeue", "", sbatch("borrow-proj-b", 1), jr1, ""},
		{"sbatch without either flag under JobRequeue=1", "", sbatch("borrow-proj-b", pools.NoVal16), jr1, ""},
		{"sbatch --no-requeue", "", sbatch("borrow-proj-b", 0), jr1, "this job was submitted with --no-requeue, so it would be killed when its GPUs are reclaimed"},
		{"salloc", "", salloc("borrow-proj-b", pools.NoVal16), jr1, "this is an salloc or srun allocation, not a batch job"},
		{"salloc --requeue: still no batch job", "", salloc("borrow-proj-b", 1), jr1, "salloc or srun allocation"},
		{"sbatch without either flag under JobRequeue=0", "", sbatch("borrow-proj-b", pools.NoVal16), jr0, "without --requeue and this cluster's JobRequeue is 0"},
		{"sbatch --requeue under JobRequeue=0", "", sbatch("borrow-proj-b", 1), jr0, ""},
		{"JobRequeue unreadable: only --requeue counts", "", sbatch("borrow-proj-b", pools.NoVal16), SlurmConf{}, "cannot read this cluster's JobRequeue"},
		{"JobRequeue unreadable, --requeue", "", sbatch("borrow-proj-b", 1), SlurmConf{}, ""},
		{"QOS in upper case", "", salloc("BORROW-PROJ-B", pools.NoVal16), jr1, "QOS BORROW-PROJ-B is preemptable"},
		{"borrow in a QOS list (24.11 on)", "", salloc("guar-proj-b,borrow-proj-b", pools.NoVal16), jr1, "QOS borrow-proj-b is preemptable"},
		{"salloc in its guaranteed QOS", "", salloc("guar-proj-b", pools.NoVal16), jr1, ""},
		{"salloc without --qos", "", salloc("", pools.NoVal16), jr1, ""},
		{"a named borrow QOS", "lend", salloc("lend", 0), jr1, "QOS lend is preemptable"},
		{"a named borrow QOS makes the default ordinary", "lend", salloc("borrow-proj-b", 0), jr1, ""},
		{"per-project pattern (the default) named", "borrow-{account}", salloc("borrow-proj-b", pools.NoVal16), jr1, "QOS borrow-proj-b is preemptable"},
		{"per-project pattern, batch --requeue", "borrow-{account}", sbatch("borrow-proj-b", 1), jr1, ""},
		// quotad's borrow size tiers are named by the same pattern, and guarded alike.
		{"salloc into a borrow size tier", "", salloc("borrow-proj-b-g1", pools.NoVal16), jr1, "QOS borrow-proj-b-g1 is preemptable"},
		{"sbatch --no-requeue into a tier of a suffixed pattern", `"{account}-lent"`, sbatch("proj-b-g4-lent", 0), jr1, "QOS proj-b-g4-lent is preemptable"},
		// The elastic QOS is preemptable too (elasticd's workers beyond the guarantee, reclaimed first).
		{"salloc into the elastic QOS", "", salloc("elastic-proj-b", pools.NoVal16), jr1, "QOS elastic-proj-b is preemptable"},
		{"sbatch --no-requeue into the elastic QOS", "", sbatch("elastic-proj-a", 0), jr1, "this job was submitted with --no-requeue, so it would be killed"},
		{"sbatch without --requeue into the elastic QOS under JobRequeue=0", "", sbatch("elastic-proj-a", pools.NoVal16), jr0, "QOS elastic-proj-a is preemptable"},
		{"elasticd's worker: sbatch --requeue into the elastic QOS", "", sbatch("elastic-proj-a", 1), jr1, ""},
		{"elastic in a QOS list (24.11 on)", "", salloc("guar-proj-a,Elastic-Proj-A", pools.NoVal16), jr1, "QOS Elastic-Proj-A is preemptable"},
		{"a named borrow QOS keeps the default elastic QOS guarded", "lend", salloc("elastic-proj-b", 0), jr1, "QOS elastic-proj-b is preemptable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configWithBorrow(t, tt.pattern)
			got := submitBorrowRefusal(cfg, tt.req, tt.conf)
			if tt.want == "" && got != "" {
				t.Fatalf("refused: %q", got)
			}
			if tt.want != "" && !strings.Contains(got, tt.want) {
				t.Fatalf("refusal %q, want it to say %q", got, tt.want)
			}
			if got != "" && !strings.HasSuffix(got, " "+submitWithoutQOS) {
				t.Fatalf("refusal %q does not say what to do", got)
			}
		})
	}
}

func TestModifyIntoBorrowQOSOnlyByQuotad(t *testing.T) {
	conf := SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030}
	admins := map[uint32]bool{998: true} // the account quotad runs as
	update := func(qos string) *pools.Request {
		r := pools.Request{Op: pools.Modify, QOS: qos, Requeue: pools.NoVal16}
		return &r
	}
	tests := []struct {
		name string
		qos  string
		uid  uint32
		conf SlurmConf
		want bool // refused
	}{
		{"a user into borrow", "borrow-proj-b", 1001, conf, true},
		{"a user into borrow, upper case", "Borrow-Proj-B", 1001, conf, true},
		{"a user back to the guarantee", "guar-proj-b", 1001, conf, false},
		{"root (quotad on the testbed)", "borrow-proj-b", 0, conf, false},
		{"SlurmUser", "borrow-proj-b", 64030, conf, false},
		{"SlurmUser's uid unknown", "borrow-proj-b", 64030, SlurmConf{}, true},
		{"a borrow_qos_admins user (quotad as slurmbridge)", "borrow-proj-b", 998, conf, false},
		{"an update that does not touch the QOS", "", 1001, conf, false},
		{"a user into a borrow size tier", "borrow-proj-b-g2", 1001, conf, true},
		{"root into a borrow size tier", "borrow-proj-b-g2", 0, conf, false},
		{"a user into the elastic QOS", "elastic-proj-b", 1001, conf, true},
		{"root into the elastic QOS", "elastic-proj-b", 0, conf, false},
		{"a borrow_qos_admins user into the elastic QOS", "elastic-proj-b", 998, conf, false},
	}
	cfg := configWithBorrow(t, "")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			refusal, got := modifyBorrowRefusal(cfg, update(tt.qos), tt.uid, tt.conf, admins)
			if (got != "") != tt.want || (refusal != "") != tt.want {
				t.Fatalf("refusal %s %q, want refused %v", refusal, got, tt.want)
			}
			if got != "" && (refusal != pools.RefusedBorrowQuotadOnly || !strings.Contains(got, " QOS "+tt.qos+": ")) {
				t.Fatalf("refusal %s %q, want %s naming QOS %s", refusal, got, pools.RefusedBorrowQuotadOnly, tt.qos)
			}
		})
	}
}

// Only quotad moves jobs into a QOS of the borrow pattern: a user's job submitted straight into
// the borrow QOS ran on GPUs a project's lending limit keeps for its owner (each QOS' GrpTRES
// holds only its own jobs), and into each size tier it held the borrow cap once per tier. The
// refusal's code tells the borrow QOS from a tier or the protected QOS; an account that itself
// ends in -gN or -hipri is told apart by its --account.
func TestSubmitIntoBorrowQOSOnlyByQuotad(t *testing.T) {
	conf := SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030}
	admins := map[uint32]bool{998: true}
	sbatch := func(qos, account string) *pools.Request {
		r := gpuJob("gres/gpu:a100:1")
		r.QOS, r.Account, r.Requeue = qos, account, 1
		return r
	}
	const borrow, tier = pools.RefusedBorrowQuotadOnly, pools.RefusedBorrowTierQuotadOnly
	tests := []struct {
		name    string
		pattern string
		req     *pools.Request
		uid     uint32
		conf    SlurmConf
		want    pools.Refusal // "" to accept
		holds   string        // what the refusal says the QOS holds
	}{
		{"a user into the borrow QOS with --requeue", "", sbatch("borrow-proj-b", ""), 1001, conf, borrow, "borrowed GPUs"},
		{"a user into the borrow QOS of another project", "", sbatch("borrow-proj-a", "proj-b"), 1001, conf, borrow, "borrowed GPUs"},
		{"upper case", "", sbatch("BORROW-PROJ-B", "proj-b"), 1001, conf, borrow, "QOS BORROW-PROJ-B holds"},
		{"borrow second in a QOS list (24.11 on)", "", sbatch("guar-proj-b, borrow-proj-b", ""), 1001, conf, borrow, "QOS borrow-proj-b holds"},
		{"a named shared borrow QOS", "lend", sbatch("lend", ""), 1001, conf, borrow, "QOS lend holds"},
		{"a named borrow QOS makes the default ordinary", "lend", sbatch("borrow-proj-b", ""), 1001, conf, "", ""},
		{"a user into tier 1", "", sbatch("borrow-proj-b-g1", ""), 1001, conf, tier, "proj-b's borrowed jobs of at most 1 GPU(s)"},
		{"a tier second in a QOS list (24.11 on)", "", sbatch("guar-proj-b, borrow-proj-b-g2", ""), 1001, conf, tier, "QOS borrow-proj-b-g2 holds"},
		{"a tier of a suffixed pattern", `"{account}-lent"`, sbatch("proj-b-g8-lent", ""), 1001, conf, tier, "proj-b's borrowed jobs of at most 8 GPU(s)"},
		{"account team-g2 in its own borrow QOS", "", sbatch("borrow-team-g2", "team-g2"), 1001, conf, borrow, "QOS borrow-team-g2 holds borrowed GPUs"},
		{"account Team-G2 (as typed) in its own borrow QOS", "", sbatch("borrow-team-g2", "Team-G2"), 1001, conf, borrow, "holds borrowed GPUs"},
		{"account team in tier 2", "", sbatch("borrow-team-g2", "team"), 1001, conf, tier, "QOS borrow-team-g2 holds team's"},
		{"a user into the protected borrow QOS", "", sbatch("borrow-proj-b-hipri", "proj-b"), 1001, conf, tier, "proj-b's borrowed jobs above its reclaim priority threshold"},
		{"account team-hipri in its own borrow QOS", "", sbatch("borrow-team-hipri", "team-hipri"), 1001, conf, borrow, "holds borrowed GPUs"},
		{"a guaranteed QOS", "", sbatch("guar-proj-b-g2", ""), 1001, conf, "", ""},
		{"the elastic QOS (elasticd submits its workers to begin later and lends them)", "", sbatch("elastic-proj-b", ""), 1001, conf, pools.RefusedElasticElasticdOnly, "holds elasticd's workers"},
		{"the elastic QOS second in a list, upper case", "", sbatch("guar-proj-b,Elastic-Proj-B", ""), 1001, conf, pools.RefusedElasticElasticdOnly, "QOS Elastic-Proj-B holds"},
		{"root into the elastic QOS", "", sbatch("elastic-proj-b", ""), 0, conf, "", ""},
		{"no --qos", "", sbatch("", ""), 1001, conf, "", ""},
		{"root into the borrow QOS", "", sbatch("borrow-proj-b", ""), 0, conf, "", ""},
		{"root into the protected borrow QOS", "", sbatch("borrow-proj-b-hipri", ""), 0, conf, "", ""},
		{"root", "", sbatch("borrow-proj-b-g1", ""), 0, conf, "", ""},
		{"SlurmUser", "", sbatch("borrow-proj-b-g1", ""), 64030, conf, "", ""},
		{"SlurmUser's uid unknown", "", sbatch("borrow-proj-b-g1", ""), 64030, SlurmConf{}, tier, "holds proj-b's"},
		{"a borrow_qos_admins user", "", sbatch("borrow-proj-b", ""), 998, conf, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := configWithBorrow(t, tt.pattern)
			refusal, msg := submitLendingRefusal(cfg, tt.req, tt.uid, tt.conf, admins)
			if refusal != tt.want || (msg == "") != (tt.want == "") {
				t.Fatalf("refusal %q (%q), want %q", refusal, msg, tt.want)
			}
			if tt.want != "" && (!strings.Contains(msg, tt.holds) || !strings.Contains(msg, "Submit without --qos")) {
				t.Fatalf("refusal %q, want it to say the QOS holds %q and what to do", msg, tt.holds)
			}
		})
	}
	// Without a usable pools.yaml the default pattern guards the borrow QOS and its tiers,
	// through the plugin, with their codes.
	missing := newFixture(t, "")
	missing.p.SlurmConf = func() SlurmConf { return conf }
	for qos, want := range map[string]pools.Refusal{"borrow-proj-b-g1": tier, "borrow-proj-b": borrow} {
		if out := missing.p.Submit(sbatch(qos, ""), 1001); out.Reject != RejectQOS || out.Refusal != want {
			t.Fatalf("without pools.yaml, --qos=%s: %+v, want refused with %s", qos, out, want)
		}
		if !missing.log.endsWith(" code=" + string(want)) {
			t.Fatalf("refusal not logged: %q", missing.log.lines)
		}
	}
}

// Through the plugin: no usable pools.yaml still refuses an salloc into quotad's default
// borrow QOS; the refusal is QOS-kind (ESLURM_INVALID_QOS) and logged; admins resolve at load.
func TestPluginRefusesBorrowSubmissionsAndResolvesAdmins(t *testing.T) {
	conf := func() SlurmConf { return SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030} }
	req := gpuJob("gres/gpu:a100:1")
	req.QOS, req.Batch = "borrow-proj-b", false

	missing := newFixture(t, "")
	missing.p.SlurmConf = conf
	// The message gives why Slurm could not requeue it, which no code tells apart: not a batch job.
	if out := missing.p.Submit(req, 1001); out.Reject != RejectQOS || out.Refusal != pools.RefusedBorrowNotRequeueable || !strings.Contains(out.UserMessage, "; "+notBatchJob+",") {
		t.Fatalf("without pools.yaml: %+v, want the salloc refused", out)
	}
	if !missing.log.contains("submit by uid 1001 refused: slurmbridge: ") || !missing.log.endsWith(" code="+string(pools.RefusedBorrowNotRequeueable)) {
		t.Fatalf("refusal not logged: %q", missing.log.lines)
	}

	f := &fixture{t: t, log: &recorder{}}
	f.path = t.TempDir() + "/pools.yaml"
	f.write("borrow_qos_admins: [slurmbridge, nobody-here]\n" + twoPools)
	f.p = New(f.path, f.log.log)
	f.p.SlurmConf = conf
	f.p.lookupUID = func(name string) (uint32, error) {
		if name == "slurmbridge" {
			return 998, nil
		}
		return 0, errors.New("unknown user")
	}
	f.p.Init()
	t.Cleanup(f.p.Fini)
	if !f.log.contains("borrow_qos_admins: user nobody-here: unknown user") || !f.log.contains("borrow QOS borrow-{account}") {
		t.Fatalf("log %q", f.log.lines)
	}
	mod := Update{Request: pools.Request{Op: pools.Modify, QOS: "borrow-proj-b", Requeue: pools.NoVal16}, Set: FieldQOS}
	if out := f.p.Modify(&mod, pendingJob("a100", "gres/gpu:a100=1", "normal"), 998); out.Reject != NotRejected || !out.AppendOutput {
		t.Fatalf("quotad's update: %+v, want the job lent, appending its output", out)
	}
	if out := f.p.Modify(&mod, nil, 1001); out.Reject != RejectQOS {
		t.Fatalf("a user's update into borrow: %+v, want refused", out)
	}
	lent := gpuJob("gres/gpu:a100:1")
	lent.QOS, lent.Requeue = "borrow-proj-b", 1
	if out := f.p.Submit(lent, 1001); out.Reject != RejectQOS || out.Refusal != pools.RefusedBorrowQuotadOnly {
		t.Fatalf("a user's sbatch --requeue --qos=borrow: %+v, want it refused", out)
	}
	if out := f.p.Submit(lent, 998); out.Reject != NotRejected || out.SetPartition != "a100" {
		t.Fatalf("a borrow_qos_admins user's sbatch --requeue --qos=borrow: %+v, want it routed", out)
	}
}

// elastic_qos names the elastic QOS; the default elastic-{account} is then an ordinary QOS.
func TestNamedElasticQOSIsGuarded(t *testing.T) {
	cfg, err := pools.Parse([]byte("elastic_qos: grow-{account}\n"+twoPools), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	jr1 := SlurmConf{Known: true, JobRequeue: true, SlurmUserID: 64030}
	req := gpuJob("gres/gpu:a100:1")
	req.QOS, req.Batch = "grow-proj-a", false
	if got := submitBorrowRefusal(cfg, req, jr1); !strings.Contains(got, "QOS grow-proj-a is preemptable") {
		t.Fatalf("salloc into the named elastic QOS: %q, want refused", got)
	}
	req.QOS = "elastic-proj-a"
	if got := submitBorrowRefusal(cfg, req, jr1); got != "" {
		t.Fatalf("salloc into an ordinary QOS refused: %q", got)
	}
}

func configWithBorrow(t *testing.T, pattern string) *pools.Config {
	t.Helper()
	head := ""
	if pattern != "" {
		head = "borrow_qos: " + pattern + "\n"
	}
	cfg, err := pools.Parse([]byte(head+twoPools), "pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
