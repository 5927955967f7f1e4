package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

const testbedPools = "../slurm-conf/testbed/pools.yaml"

// testbedQOS is quotad's QOS on the testbed: each guaranteed QOS preempts the other projects'
// borrow and elastic QOS.
var testbedQOS = map[string][]string{
	"normal": nil, "borrow-proj-a": nil, "borrow-proj-b": nil, "elastic-proj-a": nil, "elastic-proj-b": nil,
	"guar-proj-a": {"borrow-proj-b", "elastic-proj-b"},
	"guar-proj-b": {"borrow-proj-a", "elastic-proj-a"},
}

// healthy are the facts of a healthy testbed: the captured config and nodes, a plugin built
// for its Slurm, the testbed's pools and QOS, both daemons answering, a 0600 password file.
func healthy(t *testing.T) Facts {
	t.Helper()
	conf := slurm.ParseConfig(slurmtest.Fixture(t, "scontrol-show-config-22.05-testbed.txt"))
	nodes, err := slurm.ParseNodes(slurmtest.Fixture(t, "sinfo-22.05-testbed-idle.json"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	return Facts{
		Now:    now,
		Config: conf,
		Plugin: PluginFacts{Dirs: []string{"/plugins"}, Path: "/plugins/" + PluginFile,
			Info: PluginInfo{Type: "job_submit/pools", Version: 0x160508, HasLayoutTable: true,
				LayoutReleases: []slurm.Version{slurm.VersionOfNumber(0x160508), slurm.VersionOfNumber(0x180b05)}}},
		SlurmctldOnDisk: "22.05.8",
		Pools:           readPools(t, testbedPools),
		Nodes:           nodes,
		QOS:             qosPreempting(testbedQOS),
		QuotadMetrics: Metrics{URL: "http://q/metrics", Samples: map[string]float64{
			"quotad_last_successful_cycle_timestamp_seconds": float64(now.Add(-10*time.Second).UnixNano()) / 1e9}},
		ElasticdMetrics: Metrics{URL: "http://e/metrics", Samples: map[string]float64{"elasticd_cycle_seconds_count": 42}},
		MaxCycleAge:     5 * time.Minute,
		Credentials:     PasswordFile{Path: "/etc/slurmbridge/db-password", Mode: 0o600, Owner: "uid 0"},
	}
}

func readPools(t *testing.T, path string, replace ...string) PoolsFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("%q not in %s", replace[i], path)
		}
		text = strings.Replace(text, replace[i], replace[i+1], 1)
	}
	return PoolsFile{Path: "pools.yaml", Data: []byte(text)}
}

// set is a copy of conf with key set to value.
func set(conf slurm.Config, kv ...string) slurm.Config {
	c := make(slurm.Config, len(conf))
	for k, v := range conf {
		c[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		c[kv[i]] = kv[i+1]
	}
	return c
}

// verdictLines are the verdicts as Print writes them.
func verdictLines(vs []Verdict) string {
	var b strings.Builder
	Print(&b, vs)
	return b.String()
}

func TestHealthyFactsHaveNoProblems(t *testing.T) {
	vs := Judge(healthy(t))
	got := verdictLines(vs)
	want := `ok       slurmctld   Slurm 22.05.8, cluster testbed
ok       plugin      /plugins/job_submit_pools.so built for Slurm 22.05.8, as slurmctld runs
ok       job record  /plugins/job_submit_pools.so reads slurmctld's job record of Slurm 22.05.8 (job_record_layout.h): updates are checked against the job as Slurm holds it
ok       pools       pools.yaml: OK, 4 pools match the cluster
ok       preemption  PreemptType=preempt/qos, PreemptMode=REQUEUE, JobRequeue=1
ok       accounting  slurmdbd, enforce associations,limits,qos,safe, TRES gres/gpu,gres/gpu:a100,gres/gpu:v100
skip     quotad-user systemd does not know quotad.service; --quotad-user names the account quotad runs as
ok       borrow-qos  borrow_qos borrow-{account} and elastic_qos elastic-{account} name every preemptable QOS (borrow-proj-a,borrow-proj-b,elastic-proj-a,elastic-proj-b)
ok       quotad      http://q/metrics: last successful cycle 10s ago
ok       elasticd    http://e/metrics: 42 cycles
ok       credentials /etc/slurmbridge/db-password: mode 0600, owner uid 0
`
	if got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if n := Problems(vs); n != 0 {
		t.Fatalf("%d problems", n)
	}
}

// Each case breaks the healthy facts in one way; want are the problems Judge finds, in order,
// each as "check: a piece of its text | a piece of its fix".
func TestJudge(t *testing.T) {
	notExist := &fs.PathError{Op: "open", Path: "/etc/slurmbridge/db-password", Err: fs.ErrNotExist}
	for _, tc := range []struct {
		name string
		edit func(f *Facts)
		want []string
	}{
		{"slurmctld does not answer: only the local checks run", func(f *Facts) {
			f.ConfigErr = &slurm.CommandError{Command: "scontrol show config", ExitCode: 1, Stderr: "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"}
			f.Credentials.Err = fmt.Errorf("database password file: %w", notExist)
		}, []string{
			"slurmctld: scontrol show config failed: scontrol show config: exit 1: slurm_load_ctl_conf error: Unable to contact slurm controller | start slurmctld",
			"credentials: database password file: open /etc/slurmbridge/db-password: file does not exist | write the slurmbridge DB user's password to /etc/slurmbridge/db-password",
		}},

		{"slurmctld does not answer this host's newer Slurm: the plugin against the installed slurmctld", func(f *Facts) {
			f.ConfigErr = &slurm.CommandError{Command: "scontrol show config", ExitCode: 1, Stderr: "slurm_load_ctl_conf error:Protocol authentication error\n"}
			f.SlurmctldOnDisk = "24.11.5"
		}, []string{
			"slurmctld: scontrol show config failed",
			"plugin: /plugins/job_submit_pools.so is built for Slurm 22.05.8, but the installed slurmctld is 24.11.5: slurmctld refuses the plugin when it starts | install the slurmbridge-controller package built for Slurm 24.11.5",
		}},
		{"slurmctld does not answer, the plugin suits the installed one", func(f *Facts) {
			f.ConfigErr = errors.New("scontrol show config: Unable to contact slurm controller")
		}, []string{"slurmctld: scontrol show config failed"}},
		{"slurmctld does not answer, the installed one is unknown", func(f *Facts) {
			f.ConfigErr = errors.New("scontrol show config: Unable to contact slurm controller")
			f.SlurmctldOnDisk = ""
		}, []string{"slurmctld: scontrol show config failed"}},
		{"a plugin built for the previous micro release", func(f *Facts) { f.Plugin.Info.Version = 0x160507 }, []string{
			"plugin: /plugins/job_submit_pools.so was built for Slurm 22.05.7 but slurmctld runs 22.05.8: slurmctld refuses to load it (the version must match to the micro release) | rebuild and reinstall it on this Slurm: make plugin && sudo make install-plugin",
		}},
		{"Slurm upgraded on disk, the plugin not: caught before slurmctld restarts", func(f *Facts) { f.SlurmctldOnDisk = "24.11.5" }, []string{
			"plugin: /plugins/job_submit_pools.so is built for Slurm 22.05.8, but the installed slurmctld is 24.11.5 (running 22.05.8): after its next restart slurmctld refuses the plugin and does not start | install the slurmbridge-controller package built for Slurm 24.11.5 before restarting slurmctld",
		}},
		{"Slurm and the plugin upgraded, slurmctld not restarted", func(f *Facts) {
			f.SlurmctldOnDisk, f.Plugin.Info.Version = "24.11.5", 0x180b05
		}, []string{
			"plugin: /plugins/job_submit_pools.so is built for Slurm 24.11.5, the installed slurmctld, while the running one is 22.05.8 | restart slurmctld",
		}},
		{"no slurmctld installed here: the running one decides", func(f *Facts) { f.SlurmctldOnDisk = "" }, nil},
		{"not enabled and in no PluginDir", func(f *Facts) {
			f.Config = set(f.Config, "JobSubmitPlugins", "(null)")
			f.Plugin = PluginFacts{Dirs: []string{"/a", "/b"}}
		}, []string{
			"plugin: JobSubmitPlugins = : jobs are not routed into pools | add pools to JobSubmitPlugins in slurm.conf and restart slurmctld",
			"plugin: job_submit_pools.so is in none of PluginDir /a:/b | install it: sudo make install-plugin",
		}},
		{"job_submit/pools enables it too", func(f *Facts) { f.Config = set(f.Config, "JobSubmitPlugins", "lua,job_submit/pools") }, nil},
		{"another plugin under its name", func(f *Facts) { f.Plugin.Info.Type = "job_submit/lua" }, []string{
			`plugin: /plugins/job_submit_pools.so is plugin "job_submit/lua", not job_submit/pools | remove the file`,
		}},
		{"a file that is no plugin", func(f *Facts) {
			f.Plugin.Err = errors.New("/plugins/job_submit_pools.so: no plugin_type or plugin_version symbol: not a Slurm plugin")
		}, []string{
			"plugin: /plugins/job_submit_pools.so: no plugin_type or plugin_version symbol | rebuild and reinstall",
		}},
		{"slurmctld's version unreadable", func(f *Facts) { f.Config = set(f.Config, "SLURM_VERSION", "22.05") }, []string{
			`plugin: SLURM_VERSION of slurmctld: Slurm version "22.05": want MAJOR.MINOR.MICRO | check that scontrol talks to this cluster's slurmctld`,
		}},

		{"a pools file with a problem", func(f *Facts) { f.Pools = readPools(t, testbedPools, "policy: cheapest", "policy: random") }, []string{
			`pools: pools.yaml:5: policy "random" is not one of default-first, cheapest, fastest` + "\n" + strings.Repeat(" ", 21) + "pools.yaml: 1 problem | correct the file",
		}},
		{"an unreadable pools file", func(f *Facts) {
			f.Pools = PoolsFile{Path: "pools.yaml", Err: errors.New("open pools.yaml: permission denied")}
		}, []string{
			"pools: open pools.yaml: permission denied | correct the file",
		}},
		{"nodes unreadable", func(f *Facts) { f.Nodes, f.NodesErr = nil, errors.New("sinfo --json reported errors") }, []string{
			"pools: cannot check pools.yaml against the cluster: sinfo --json reported errors",
		}},

		{"preemption and accounting all wrong", func(f *Facts) {
			f.Config = set(f.Config, "PreemptType", "preempt/partition_prio", "PreemptMode", "CANCEL", "JobRequeue", "0",
				"SchedulerParameters", "bf_interval=5,preempt_youngest_first", "AccountingStorageType", "accounting_storage/none",
				"AccountingStorageEnforce", "associations,safe", "AccountingStorageTRES", "cpu,mem,gres/gpu,gres/gpu:a100")
		}, []string{
			"preemption: PreemptType = preempt/partition_prio: quotad reclaims lent GPUs through QOS preemption | in slurm.conf: PreemptType=preempt/qos, then scontrol reconfigure (see slurm-conf/production/slurm.conf.slurmbridge); a PreemptType change needs a slurmctld restart",
			"preemption: PreemptMode = CANCEL: a reclaimed borrower must be requeued | in slurm.conf: PreemptMode=REQUEUE",
			"preemption: JobRequeue = 0: jobs default to no requeue | in slurm.conf: JobRequeue=1",
			"preemption: SchedulerParameters has preempt_youngest_first | SchedulerParameters without preempt_youngest_first",
			"accounting: AccountingStorageType = accounting_storage/none | needs slurmdbd and a slurmctld restart",
			"accounting: AccountingStorageEnforce = associations,safe lacks limits,qos | in slurm.conf: AccountingStorageEnforce=associations,limits,qos,safe",
			"accounting: AccountingStorageTRES lacks gres/gpu:v100: quotas are per GPU type | in slurm.conf: AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100",
		}},
		{"GANG,REQUEUE requeues too", func(f *Facts) { f.Config = set(f.Config, "PreemptMode", "GANG,REQUEUE") }, nil},
		{"the nodes' GPU types count even with a broken pools file", func(f *Facts) {
			f.Pools = readPools(t, testbedPools, "policy: cheapest", "policy: random")
			f.Config = set(f.Config, "AccountingStorageTRES", "gres/gpu,gres/gpu:a100")
		}, []string{"pools: ", "accounting: AccountingStorageTRES lacks gres/gpu:v100"}},

		{"quotad's account is no Slurm user", func(f *Facts) { f.Quotad = QuotadAccount{User: "slurmbridge"} }, []string{
			"quotad-user: quotad runs as slurmbridge (AdminLevel not a Slurm user): slurmdbd refuses it QOS changes, which need Administrator | sacctmgr -i add user slurmbridge account=root adminlevel=Administrator",
			"borrow-qos: quotad runs as slurmbridge, which pools.yaml's borrow_qos_admins does not list: the plugin refuses its moves into the borrow QOS | add slurmbridge to borrow_qos_admins in pools.yaml",
		}},
		{"quotad's account is an Operator", func(f *Facts) {
			f.Quotad = QuotadAccount{User: "slurmbridge", AdminLevel: "Operator"}
			f.Pools = readPools(t, testbedPools, "policy: cheapest", "policy: cheapest\nborrow_qos_admins: [slurmbridge]")
		}, []string{
			"quotad-user: quotad runs as slurmbridge (AdminLevel Operator): slurmdbd refuses it | sacctmgr -i modify user slurmbridge set adminlevel=Administrator",
		}},
		{"quotad's AdminLevel unreadable", func(f *Facts) {
			f.Quotad = QuotadAccount{User: "alice", AdminLevelErr: errors.New("sacctmgr: exit 1\nmore")}
		}, []string{"quotad-user: cannot read alice's AdminLevel: sacctmgr: exit 1 | check slurmdbd (sacctmgr show user alice)", "borrow-qos: quotad runs as alice"}},
		{"SlurmUser needs no AdminLevel nor borrow_qos_admins", func(f *Facts) { f.Quotad = QuotadAccount{User: "slurm"} }, nil},

		{"a preemptable QOS neither pattern names", func(f *Facts) {
			f.QOS = qosPreempting(map[string][]string{"normal": nil, "lend": nil, "guar-proj-a": {"lend"}, "guar-proj-b": {"lend", "normal"}})
		}, []string{
			"borrow-qos: QOS lend can be preempted (by guar-proj-a,guar-proj-b) but neither pools.yaml's borrow_qos borrow-{account} nor its elastic_qos elastic-{account} names it: the plugin lets salloc, srun and --no-requeue jobs into it, and a reclaim kills them | set borrow_qos and elastic_qos in pools.yaml",
			"borrow-qos: QOS normal can be preempted (by guar-proj-b)",
		}},
		{"QOS unreadable", func(f *Facts) { f.QOSErr = errors.New("sacctmgr: exit 1") }, []string{"borrow-qos: cannot read the QOS: sacctmgr: exit 1 | check slurmdbd (sacctmgr show qos)"}},

		{"quotad never completed a cycle, elasticd down", func(f *Facts) {
			f.QuotadMetrics.Samples["quotad_last_successful_cycle_timestamp_seconds"] = 0
			f.ElasticdMetrics = Metrics{URL: "http://e/metrics", Err: errors.New("http://e/metrics unreachable: connection refused")}
		}, []string{
			"quotad: http://q/metrics: quotad has not completed a cycle since it started | journalctl -u quotad says why its cycles fail",
			"elasticd: http://e/metrics unreachable: connection refused | systemctl status elasticd",
		}},
		{"quotad's last cycle an hour ago", func(f *Facts) {
			f.QuotadMetrics.Samples["quotad_last_successful_cycle_timestamp_seconds"] = float64(f.Now.Add(-time.Hour).Unix())
		}, []string{"quotad: http://q/metrics: quotad's last successful cycle was 1h0m0s ago"}},
		{"metrics of something else", func(f *Facts) {
			f.QuotadMetrics.Samples = map[string]float64{"up": 1}
			f.ElasticdMetrics.Samples = map[string]float64{"up": 1}
		}, []string{
			"quotad: http://q/metrics serves no quotad_last_successful_cycle_timestamp_seconds: not quotad | point --quotad-url",
			"elasticd: http://e/metrics serves no elasticd_cycle_seconds: not elasticd | point --elasticd-url",
		}},
		{"empty URLs and file skip their checks", func(f *Facts) {
			f.QuotadMetrics, f.ElasticdMetrics, f.Credentials = Metrics{}, Metrics{}, PasswordFile{}
		}, nil},

		{"a password file others can read", func(f *Facts) {
			f.Credentials.Err = errors.New("database password file /etc/slurmbridge/db-password has mode 0640: it must be readable by its owner only")
		}, []string{"credentials: database password file /etc/slurmbridge/db-password has mode 0640 | chown root:root /etc/slurmbridge/db-password && chmod 600 /etc/slurmbridge/db-password"}},
		{"a micro release the job-record table lacks", func(f *Facts) {
			f.Plugin.Info.LayoutReleases = []slurm.Version{slurm.VersionOfNumber(0x160507)}
		}, []string{"job record: built for Slurm 22.05.8, which job_record_layout.h lacks (it has 22.05.7) | docs/adding-a-release.md"}},
		{"a plugin without a job-record table", func(f *Facts) {
			f.Plugin.Info.LayoutReleases, f.Plugin.Info.HasLayoutTable = nil, false
		}, []string{"job record: exports no job-record table | install the slurmbridge-controller package"}},
		{"a password file doctor may not read", func(f *Facts) {
			f.Credentials.Err = fmt.Errorf("database password file: %w", &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrPermission})
		}, []string{"credentials: database password file: open /x: permission denied | run doctor as root"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := healthy(t)
			tc.edit(&f)
			var got []string
			for _, v := range Judge(f) {
				if v.Status == Problem {
					got = append(got, v.Check+": "+v.Text+" | "+v.Fix)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				check, rest, _ := strings.Cut(w, ": ")
				text, fix, _ := strings.Cut(rest, " | ")
				if !strings.HasPrefix(got[i], check+": ") || !strings.Contains(got[i], text) || !strings.Contains(got[i], fix) {
					t.Errorf("problem %d:\n%s\nwant %q", i, got[i], w)
				}
			}
		})
	}
}

func TestBorrowQOSVerdictsBeforeAndAfterQuotadSetsUpItsQOS(t *testing.T) {
	conf := slurm.ParseConfig(slurmtest.Fixture(t, "scontrol-show-config-22.05-testbed.txt"))
	lend := mustPools(t, "borrow_qos: lend", "elastic_qos: grow-{account}")
	for _, tc := range []struct {
		name     string
		cfg      *pools.Config
		preempts map[string][]string
		want     string
	}{
		{"one shared borrow QOS, no elastic QOS yet", mustPools(t, "borrow_qos: lend"), map[string][]string{"guar-proj-a": {"lend"}, "guar-proj-b": {"lend"}},
			"ok       borrow-qos  borrow_qos lend names every preemptable QOS (lend); no elastic QOS (elastic-{account}) is preemptable yet: quotad creates them (one per project), and until then elasticd runs workers beyond the guarantee in the borrow QOS, not reclaimed first\n"},
		{"elastic QOS named as elastic_qos", lend, map[string][]string{"guar-proj-b": {"lend", "grow-proj-a"}},
			"ok       borrow-qos  borrow_qos lend and elastic_qos grow-{account} name every preemptable QOS (grow-proj-a,lend)\n"},
		{"before quotad's first cycle", lend, map[string][]string{"normal": nil},
			"ok       borrow-qos  borrow_qos lend, elastic_qos grow-{account}; no QOS preempts another yet (quotad sets them up on its first cycle)\n"},
		{"an unusable pools file", nil, nil, "skip     borrow-qos  pools.yaml is not usable\n"},
	} {
		if got := verdictLines(borrowQOS(conf, tc.cfg, "", tc.preempts, nil)); got != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, got, tc.want)
		}
	}
}

// mustPools is the testbed's pools file with lines replacing its top-level keys of the same
// name.
func mustPools(t *testing.T, lines ...string) *pools.Config {
	t.Helper()
	p := readPools(t, testbedPools)
	kept := slices.Clone(lines)
	for _, l := range strings.Split(string(p.Data), "\n") {
		if !slices.ContainsFunc(lines, func(nl string) bool { key, _, _ := strings.Cut(nl, ":"); return strings.HasPrefix(l, key+":") }) {
			kept = append(kept, l)
		}
	}
	cfg, err := pools.Parse([]byte(strings.Join(kept, "\n")), p.Path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// slurmConfFile reads the Key=Value settings of a slurm.conf (the first word of each line),
// as doctor sees them in scontrol's output.
func slurmConfFile(t *testing.T, path string) slurm.Config {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	conf := slurm.Config{}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if k, v, ok := strings.Cut(fields[0], "="); ok {
			conf[k] = v
		}
	}
	return conf
}

// The production example and the testbed's slurm.conf (as its facts render it) are one set of
// settings: both must satisfy doctor, and the production pools example must be valid (the quota
// table is quotad's: quotad/policy's tests load it).
func TestProductionAndTestbedConfigsSatisfyDoctor(t *testing.T) {
	prodPools, err := pools.Load("../slurm-conf/production/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	testbedPoolsCfg, err := pools.Load(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	tf, err := facts.LoadRepo()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := tf.Render("../slurm-conf/testbed", "slurm.conf", facts.Site{Dir: "/tmp/tb", Host: "tbhost",
		JobSubmitLine: "JobSubmitPlugins=pools", PluginDir: "/tmp/tb/plugins", SlurmPluginDir: "/usr/lib/slurm"})
	if err != nil {
		t.Fatal(err)
	}
	testbedConf := filepath.Join(t.TempDir(), "slurm.conf")
	if err := os.WriteFile(testbedConf, rendered, 0o644); err != nil {
		t.Fatal(err)
	}
	for path, cfg := range map[string]*pools.Config{
		"../slurm-conf/production/slurm.conf.slurmbridge": prodPools,
		testbedConf: testbedPoolsCfg,
	} {
		conf := slurmConfFile(t, path)
		if _, ok := conf["AccountingStorageType"]; !ok {
			// The production lines are merged into a slurm.conf that already has accounting.
			conf["AccountingStorageType"] = "accounting_storage/slurmdbd"
		}
		vs := append(preemption(conf), accounting(conf, gpuTypes(nil, cfg))...)
		if Problems(vs) != 0 {
			t.Errorf("%s:\n%s", path, verdictLines(vs))
		}
	}
	// quotad.service runs quotad as slurmbridge: the plugin must let it lend, in the borrow QOS
	// quotad lends in by default (quotad/policy's tests hold pools' default to quotad's).
	if !slices.Contains(prodPools.BorrowQOSAdmins, "slurmbridge") || prodPools.BorrowQOSPattern() != pools.DefaultBorrowQOS {
		t.Errorf("production pools.yaml: borrow_qos %s, admins %v", prodPools.BorrowQOSPattern(), prodPools.BorrowQOSAdmins)
	}
	if v := slurmConfFile(t, "../slurm-conf/production/slurm.conf.slurmbridge").Get("JobSubmitPlugins"); v != "pools" {
		t.Errorf("production JobSubmitPlugins=%q", v)
	}
}

// Mid-upgrade, with the new commands unable to reach the old slurmctld, doctor still says the
// installed slurmctld will take the plugin.
func TestPluginSuitsTheInstalledSlurmctldWhenNoneAnswers(t *testing.T) {
	f := healthy(t)
	f.ConfigErr = errors.New("scontrol show config: Protocol authentication error")
	var plugin []Verdict
	for _, v := range Judge(f) {
		if v.Check == "plugin" {
			plugin = append(plugin, v)
		}
	}
	// The verdict names the plugin and the installed release it suits.
	if len(plugin) != 1 || plugin[0].Status != OK || !strings.HasPrefix(plugin[0].Text, "/plugins/job_submit_pools.so ") ||
		releaseIn(plugin[0].Text) != "22.05.8" {
		t.Errorf("plugin verdicts: %+v", plugin)
	}
}

// qosPreempting is a QOS list in which each QOS preempts those preempts names for it.
func qosPreempting(preempts map[string][]string) []slurm.QOS {
	var qos []slurm.QOS
	for _, name := range slices.Sorted(maps.Keys(preempts)) {
		qos = append(qos, slurm.QOS{Name: name, Preempt: preempts[name]})
	}
	return qos
}

// slurmReleaseIn finds the release a verdict names.
var slurmReleaseIn = regexp.MustCompile(`Slurm (\d+\.\d+\.\d+)`)

// releaseIn is the release a verdict's text names, "" when it names none.
func releaseIn(text string) string {
	if m := slurmReleaseIn.FindStringSubmatch(text); m != nil {
		return m[1]
	}
	return ""
}
