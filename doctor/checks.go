package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/pools/validation"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Status is a verdict's kind.
type Status string

// The verdicts' kinds, as printed.
const (
	OK      Status = "ok"
	Problem Status = "PROBLEM"
	Skipped Status = "skip"
)

// Verdict is one check's result; a problem carries its fix.
type Verdict struct {
	Status Status
	Check  string
	Text   string
	Fix    string
}

func ok(check, format string, args ...any) Verdict {
	return Verdict{Status: OK, Check: check, Text: fmt.Sprintf(format, args...)}
}

func problem(check, fix, format string, args ...any) Verdict {
	return Verdict{Status: Problem, Check: check, Text: fmt.Sprintf(format, args...), Fix: fix}
}

func skipped(check, format string, args ...any) Verdict {
	return Verdict{Status: Skipped, Check: check, Text: fmt.Sprintf(format, args...)}
}

// Problems counts the verdicts that are problems.
func Problems(vs []Verdict) int {
	n := 0
	for _, v := range vs {
		if v.Status == Problem {
			n++
		}
	}
	return n
}

// Judge is every check's verdict on the facts, in the order doctor prints them. Without
// slurmctld's config only the password file is judged beside it (Gather read nothing else).
func Judge(f Facts) []Verdict {
	if f.ConfigErr != nil {
		return slices.Concat(slurmctld(f), pluginForInstalled(f.Plugin, f.SlurmctldOnDisk), credentials(f.Credentials))
	}
	// The other checks need the pools file only when it is usable, as the plugin would load it.
	var cfg *pools.Config
	if f.Pools.Err == nil {
		cfg, _ = pools.Parse(f.Pools.Data, f.Pools.Path)
	}
	var vs []Verdict
	vs = append(vs, slurmctld(f)...)
	vs = append(vs, plugin(f.Config, f.Plugin, f.SlurmctldOnDisk)...)
	vs = append(vs, poolsFile(f))
	vs = append(vs, preemption(f.Config)...)
	vs = append(vs, accounting(f.Config, gpuTypes(f.Nodes, cfg))...)
	vs = append(vs, quotadUser(f.Config, f.Quotad))
	vs = append(vs, borrowQOS(f.Config, cfg, f.Quotad.User, slurm.PreemptsByQOS(f.QOS), f.QOSErr)...)
	vs = append(vs, quotad(f.QuotadMetrics, f.Now, f.MaxCycleAge))
	vs = append(vs, elasticd(f.ElasticdMetrics))
	vs = append(vs, credentials(f.Credentials)...)
	return vs
}

func slurmctld(f Facts) []Verdict {
	if f.ConfigErr != nil {
		return []Verdict{problem("slurmctld", "start slurmctld (systemctl start slurmctld) or point SLURM_CONF at the cluster's slurm.conf",
			"scontrol show config failed: %v", firstLine(f.ConfigErr.Error()))}
	}
	return []Verdict{ok("slurmctld", "Slurm %s, cluster %s", f.Config.Get("SLURM_VERSION"), f.Config.Get("ClusterName"))}
}

// pluginForInstalled: with no slurmctld to ask, the plugin found where it would look must at
// least suit the installed slurmctld; nothing is said when either is unknown.
func pluginForInstalled(p PluginFacts, onDisk string) []Verdict {
	next, err := slurm.ParseMicroVersion(onDisk)
	if err != nil || p.Path == "" || p.Err != nil {
		return nil
	}
	if p.Info.BuiltFor() == next {
		return []Verdict{ok("plugin", "%s built for Slurm %s, as the installed slurmctld", p.Path, onDisk), jobRecordLayout(p)}
	}
	return []Verdict{problem("plugin", "install the slurmbridge-controller package built for Slurm "+onDisk+" (docs/operations.md, Upgrade Slurm)",
		"%s is built for Slurm %s, but the installed slurmctld is %s: slurmctld refuses the plugin when it starts",
		p.Path, p.Info.BuiltFor(), onDisk)}
}

// plugin: slurmctld would load our plugin: listed in JobSubmitPlugins, found first in
// PluginDir, and built for the running Slurm's exact version and for the installed one, which
// loads it at slurmctld's next start (onDisk; "" when unknown).
func plugin(conf slurm.Config, p PluginFacts, onDisk string) []Verdict {
	const rebuild = "rebuild and reinstall it on this Slurm: make plugin && sudo make install-plugin (or install the slurmbridge-controller package built against it), then restart slurmctld"
	var vs []Verdict
	if enabled := conf.List("JobSubmitPlugins"); !slices.Contains(enabled, "pools") && !slices.Contains(enabled, "job_submit/pools") {
		vs = append(vs, problem("plugin", "add pools to JobSubmitPlugins in slurm.conf and restart slurmctld (leave it out only to roll back)",
			"JobSubmitPlugins = %s: jobs are not routed into pools", conf.Get("JobSubmitPlugins")))
	}
	if p.Path == "" {
		return append(vs, problem("plugin", "install it: sudo make install-plugin, or apt install ./slurmbridge-controller_*.deb",
			"%s is in none of PluginDir %s", PluginFile, strings.Join(p.Dirs, ":")))
	}
	if p.Err != nil {
		return append(vs, problem("plugin", rebuild, "%v", p.Err))
	}
	if p.Info.Type != "job_submit/pools" {
		return append(vs, problem("plugin", "remove the file or install slurmbridge's plugin over it", "%s is plugin %q, not job_submit/pools", p.Path, p.Info.Type))
	}
	running := conf.Get("SLURM_VERSION")
	want, err := slurm.ParseMicroVersion(running)
	if err != nil {
		return append(vs, problem("plugin", "check that scontrol talks to this cluster's slurmctld", "SLURM_VERSION of slurmctld: %v", err))
	}
	// Between a Slurm package upgrade and slurmctld's restart the two versions differ: the
	// plugin must suit the installed one, or slurmctld will not start again.
	if next, err := slurm.ParseMicroVersion(onDisk); err == nil && next != want {
		if p.Info.BuiltFor() == next {
			return append(vs, problem("plugin", "restart slurmctld (systemctl restart slurmctld) to run the installed Slurm with this plugin",
				"%s is built for Slurm %s, the installed slurmctld, while the running one is %s", p.Path, onDisk, running))
		}
		return append(vs, problem("plugin", "install the slurmbridge-controller package built for Slurm "+onDisk+" before restarting slurmctld (docs/operations.md, Upgrade Slurm)",
			"%s is built for Slurm %s, but the installed slurmctld is %s (running %s): after its next restart slurmctld refuses the plugin and does not start",
			p.Path, p.Info.BuiltFor(), onDisk, running))
	}
	if p.Info.BuiltFor() != want {
		return append(vs, problem("plugin", rebuild,
			"%s was built for Slurm %s but slurmctld runs %s: slurmctld refuses to load it (the version must match to the micro release)",
			p.Path, p.Info.BuiltFor(), running))
	}
	return append(vs, ok("plugin", "%s built for Slurm %s, as slurmctld runs", p.Path, running), jobRecordLayout(p))
}

// jobRecordLayout: job_modify judges an update of a job against the job as slurmctld holds it
// (its account, QOS, GPUs, hetjob) by reading slurmctld's job record, whose layout the plugin
// knows per micro release (job_record_layout.h). For a release the table lacks it can judge an
// update only by the update's own fields, the weaker check, and refuses what only the record
// makes safe (GPUs by update, every lend), so nothing is lent: the site learns it here, before
// slurmctld loads the plugin, and in slurmctld's log when it does.
func jobRecordLayout(p PluginFacts) Verdict {
	v := p.Info.BuiltFor()
	switch {
	case !p.Info.HasLayoutTable:
		return problem("job record", "install the slurmbridge-controller package of this slurmbridge release, or rebuild the plugin from it (make plugin && sudo make install-plugin)",
			"%s exports no job-record table (pools_job_layout_releases): it is an older build, and doctor cannot tell whether its update checks read the job record of Slurm %s", p.Path, v)
	case p.Info.ReadsJobRecordOf(v):
		return ok("job record", "%s reads slurmctld's job record of Slurm %s (job_record_layout.h): updates are checked against the job as Slurm holds it", p.Path, v)
	}
	return problem("job record", "add Slurm "+v.String()+" to job_record_layout.h (docs/adding-a-release.md: one command derives its entry from the release's source), rebuild and reinstall the plugin",
		"%s is built for Slurm %s, which job_record_layout.h lacks (it has %s): job_modify cannot read the job record, judges each scontrol update by the update's own fields, the weaker check, and refuses GPUs given by update and every move into a borrow or elastic QOS (job-record-unreadable), so quotad and elasticd lend nothing", p.Path, v, versionList(p.Info.LayoutReleases))
}

func versionList(vs []slurm.Version) string {
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.String()
	}
	return strings.Join(names, ", ")
}

// poolsFile is poolctl validate's verdict on the pools file, so doctor and validate never
// disagree.
func poolsFile(f Facts) Verdict {
	var lines []string
	failure := ""
	if f.Pools.Err != nil {
		failure = f.Pools.Err.Error()
	} else {
		report := validation.Check(f.Pools.Path, f.Pools.Data, &validation.Cluster{Nodes: f.Nodes, Err: f.NodesErr})
		lines, failure = report.Lines, report.Failure
	}
	if failure == "" {
		return ok("pools", "%s", strings.Join(lines, "\n"))
	}
	return problem("pools", "correct the file (poolctl validate shows each problem by line); the plugin keeps its last good config until then",
		"%s", strings.Join(append(lines, failure), "\n"+strings.Repeat(" ", 21)))
}

// preemption: reclaiming lent GPUs is Slurm's QOS preemption with requeue.
func preemption(conf slurm.Config) []Verdict {
	const fix = "in slurm.conf: %s, then scontrol reconfigure (see slurm-conf/production/slurm.conf.slurmbridge)"
	var vs []Verdict
	if v := conf.Get("PreemptType"); v != "preempt/qos" {
		vs = append(vs, problem("preemption", fmt.Sprintf(fix, "PreemptType=preempt/qos")+"; a PreemptType change needs a slurmctld restart",
			"PreemptType = %s: quotad reclaims lent GPUs through QOS preemption (preempt/qos)", v))
	}
	if modes := conf.List("PreemptMode"); !slices.ContainsFunc(modes, equalFold("REQUEUE")) {
		vs = append(vs, problem("preemption", fmt.Sprintf(fix, "PreemptMode=REQUEUE"),
			"PreemptMode = %s: a reclaimed borrower must be requeued, not cancelled or suspended", conf.Get("PreemptMode")))
	}
	if v := conf.Get("JobRequeue"); v != "1" {
		vs = append(vs, problem("preemption", fmt.Sprintf(fix, "JobRequeue=1"),
			"JobRequeue = %s: jobs default to no requeue, and quotad never lends a job that cannot be requeued", v))
	}
	if params := conf.List("SchedulerParameters"); slices.ContainsFunc(params, equalFold("preempt_youngest_first")) {
		vs = append(vs, problem("preemption", fmt.Sprintf(fix, "SchedulerParameters without preempt_youngest_first"),
			"SchedulerParameters has preempt_youngest_first: Slurm would reclaim the youngest borrowers first, not those of the project furthest over its guarantee (quotad orders them by borrow QOS priority)"))
	}
	if len(vs) == 0 {
		vs = append(vs, ok("preemption", "PreemptType=preempt/qos, PreemptMode=%s, JobRequeue=1", conf.Get("PreemptMode")))
	}
	return vs
}

// accounting: quotas are QOS GrpTRES limits per GPU type, enforced by slurmctld; gpuTypes are
// the typed GPUs the cluster has.
func accounting(conf slurm.Config, gpuTypes []string) []Verdict {
	const fix = "in slurm.conf: %s, then scontrol reconfigure"
	var vs []Verdict
	if v := conf.Get("AccountingStorageType"); v != "accounting_storage/slurmdbd" {
		vs = append(vs, problem("accounting", fmt.Sprintf(fix, "AccountingStorageType=accounting_storage/slurmdbd")+" (needs slurmdbd and a slurmctld restart)",
			"AccountingStorageType = %s: QOS and quotas live in slurmdbd", v))
	}
	enforce := conf.List("AccountingStorageEnforce")
	var missing []string
	for _, need := range []string{"limits", "qos"} {
		if !slices.Contains(enforce, need) {
			missing = append(missing, need)
		}
	}
	if len(missing) > 0 {
		vs = append(vs, problem("accounting", fmt.Sprintf(fix, "AccountingStorageEnforce=associations,limits,qos,safe"),
			"AccountingStorageEnforce = %s lacks %s: guaranteed QOS limits (GrpTRES) would not hold jobs back", conf.Get("AccountingStorageEnforce"), strings.Join(missing, ",")))
	}
	tres := conf.List("AccountingStorageTRES")
	want := []string{"gres/gpu"}
	for _, t := range gpuTypes {
		want = append(want, "gres/gpu:"+t)
	}
	var absent []string
	for _, t := range want {
		if !slices.Contains(tres, t) {
			absent = append(absent, t)
		}
	}
	if len(absent) > 0 {
		vs = append(vs, problem("accounting", fmt.Sprintf(fix, "AccountingStorageTRES="+strings.Join(want, ",")),
			"AccountingStorageTRES lacks %s: quotas are per GPU type", strings.Join(absent, ",")))
	}
	if len(vs) == 0 {
		vs = append(vs, ok("accounting", "slurmdbd, enforce %s, TRES %s", conf.Get("AccountingStorageEnforce"), strings.Join(want, ",")))
	}
	return vs
}

// gpuTypes are the typed GPUs of the nodes and of the pools file (cfg nil: unusable), sorted:
// the nodes' count even when the pools file is broken.
func gpuTypes(nodes []slurm.Node, cfg *pools.Config) []string {
	var types []string
	for _, n := range nodes {
		for _, g := range n.Gres {
			if g.IsGPU() && g.Type != "" {
				types = append(types, g.Type)
			}
		}
	}
	if cfg != nil {
		for _, p := range cfg.Pools {
			if p.GPUType != "" {
				types = append(types, p.GPUType)
			}
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// quotadUser: quotad adds and changes QOS with sacctmgr, which slurmdbd allows only to root,
// SlurmUser and AdminLevel Administrator (Operator may move jobs between QOS but is refused
// QOS changes: measured on 22.05), and pending jobs' QOS with scontrol.
func quotadUser(conf slurm.Config, a QuotadAccount) Verdict {
	const check = "quotad-user"
	switch {
	case a.User == "":
		return skipped(check, "systemd does not know quotad.service; --quotad-user names the account quotad runs as")
	case slurmAlwaysAllows(conf, a.User):
		return ok(check, "quotad runs as %s, which Slurm always allows", a.User)
	case a.AdminLevelErr != nil:
		return problem(check, "check slurmdbd (sacctmgr show user "+a.User+")", "cannot read %s's AdminLevel: %v", a.User, firstLine(a.AdminLevelErr.Error()))
	case a.AdminLevel == "":
		return problem(check, "sacctmgr -i add user "+a.User+" account=root adminlevel=Administrator",
			"quotad runs as %s (AdminLevel not a Slurm user): slurmdbd refuses it QOS changes, which need Administrator", a.User)
	case a.AdminLevel != "Administrator":
		return problem(check, "sacctmgr -i modify user "+a.User+" set adminlevel=Administrator",
			"quotad runs as %s (AdminLevel %s): slurmdbd refuses it QOS changes, which need Administrator", a.User, a.AdminLevel)
	}
	return ok(check, "quotad runs as %s, AdminLevel %s", a.User, a.AdminLevel)
}

// slurmAlwaysAllows: root and SlurmUser need no AdminLevel, and the plugin lets them move jobs.
func slurmAlwaysAllows(conf slurm.Config, user string) bool {
	slurmUser, _, _ := strings.Cut(conf.Get("SlurmUser"), "(")
	return user == "root" || user == slurmUser
}

// borrowQOS: the plugin keeps jobs Slurm cannot requeue out of pools.yaml's borrow_qos and
// elastic_qos, so together they must name every QOS that another QOS preempts (quotad's borrow
// and elastic QOS), and the plugin must let quotad (running as quotadUser, "" when unknown)
// move jobs there. elasticd runs workers beyond the guarantee in the elastic QOS, reclaimed
// first; where no preemptable QOS matches elastic_qos while borrow QOS exist, quotad has not
// created them yet (it runs a version from before them) and workers borrow in the borrow QOS
// until it does.
func borrowQOS(conf slurm.Config, cfg *pools.Config, quotadUser string, preempts map[string][]string, qosErr error) []Verdict {
	const check = "borrow-qos"
	if cfg == nil {
		return []Verdict{skipped(check, "pools.yaml is not usable")}
	}
	pattern, elastic := cfg.BorrowQOSPattern(), cfg.ElasticQOSPattern()
	const fix = "set borrow_qos and elastic_qos in pools.yaml to the QOS patterns quotad lends in (quotad takes them from there; a quota table's settings.borrowQOS and settings.elasticQOS may only repeat them)"
	if qosErr != nil {
		return []Verdict{problem(check, "check slurmdbd (sacctmgr show qos)", "cannot read the QOS: %v", firstLine(qosErr.Error()))}
	}
	by := map[string][]string{} // preemptable QOS → the QOS that preempt it
	for q, names := range preempts {
		for _, n := range names {
			by[n] = append(by[n], q)
		}
	}
	var vs []Verdict
	var preemptable []string
	borrows, elastics := 0, 0
	for _, q := range slices.Sorted(maps.Keys(by)) {
		preemptable = append(preemptable, q)
		switch {
		case pools.MatchQOS(pattern, q):
			borrows++
		case pools.MatchQOS(elastic, q):
			elastics++
		default:
			preemptors := slices.Sorted(slices.Values(by[q]))
			vs = append(vs, problem(check, fix,
				"QOS %s can be preempted (by %s) but neither pools.yaml's borrow_qos %s nor its elastic_qos %s names it: the plugin lets salloc, srun and --no-requeue jobs into it, and a reclaim kills them",
				q, strings.Join(preemptors, ","), pattern, elastic))
		}
	}
	if u := quotadUser; u != "" && !slurmAlwaysAllows(conf, u) && !slices.Contains(cfg.BorrowQOSAdmins, u) {
		vs = append(vs, problem(check, "add "+u+" to borrow_qos_admins in pools.yaml",
			"quotad runs as %s, which pools.yaml's borrow_qos_admins does not list: the plugin refuses its moves into the borrow QOS", u))
	}
	switch {
	case len(vs) > 0:
		return vs
	case len(preemptable) == 0:
		return []Verdict{ok(check, "borrow_qos %s, elastic_qos %s; no QOS preempts another yet (quotad sets them up on its first cycle)", pattern, elastic)}
	case borrows > 0 && elastics == 0:
		return []Verdict{ok(check, "borrow_qos %s names every preemptable QOS (%s); no elastic QOS (%s) is preemptable yet: quotad creates them (one per project), and until then elasticd runs workers beyond the guarantee in the borrow QOS, not reclaimed first",
			pattern, strings.Join(preemptable, ","), elastic)}
	}
	return []Verdict{ok(check, "borrow_qos %s and elastic_qos %s name every preemptable QOS (%s)", pattern, elastic, strings.Join(preemptable, ","))}
}

// quotad answers and its last successful cycle is newer than maxAge.
func quotad(m Metrics, now time.Time, maxAge time.Duration) Verdict {
	const check = "quotad"
	if m.URL == "" {
		return skipped(check, "--quotad-url is empty")
	}
	if m.Err != nil {
		return problem(check, "systemctl status quotad; journalctl -u quotad (or --quotad-url where it listens)", "%v", m.Err)
	}
	last, found := m.Samples["quotad_last_successful_cycle_timestamp_seconds"]
	age := time.Duration((float64(now.UnixNano())/1e9 - last) * float64(time.Second))
	switch {
	case !found:
		return problem(check, "point --quotad-url at quotad's --listen address", "%s serves no quotad_last_successful_cycle_timestamp_seconds: not quotad", m.URL)
	case last == 0:
		return problem(check, "journalctl -u quotad says why its cycles fail", "%s: quotad has not completed a cycle since it started", m.URL)
	case age > maxAge:
		return problem(check, "journalctl -u quotad says why its cycles fail", "%s: quotad's last successful cycle was %s ago", m.URL, age.Round(time.Second))
	}
	return ok(check, "%s: last successful cycle %s ago", m.URL, age.Round(time.Second))
}

// elasticd answers with its own metrics.
func elasticd(m Metrics) Verdict {
	const check = "elasticd"
	if m.URL == "" {
		return skipped(check, "--elasticd-url is empty")
	}
	if m.Err != nil {
		return problem(check, "systemctl status elasticd; journalctl -u elasticd (or --elasticd-url where it listens)", "%v", m.Err)
	}
	cycles, found := m.Samples["elasticd_cycle_seconds_count"]
	if !found {
		return problem(check, "point --elasticd-url at elasticd run's --listen address", "%s serves no elasticd_cycle_seconds: not elasticd", m.URL)
	}
	return ok(check, "%s: %.0f cycles", m.URL, cycles)
}

// credentials: the password file passes quotad's own check (slurmdbd.ReadPassword).
func credentials(p PasswordFile) []Verdict {
	const check = "credentials"
	switch {
	case p.Path == "":
		return []Verdict{skipped(check, "--db-password-file is empty")}
	case p.Err != nil:
		fix := "chown root:root " + p.Path + " && chmod 600 " + p.Path
		switch {
		case errors.Is(p.Err, fs.ErrNotExist):
			fix = "write the slurmbridge DB user's password to " + p.Path + " (install -m 600 /dev/stdin " + p.Path + ")"
		case errors.Is(p.Err, fs.ErrPermission):
			fix = "run doctor as root (the file is readable by its owner only, as it must be)"
		}
		return []Verdict{problem(check, fix, "%v", p.Err)}
	case p.StatErr != nil:
		return []Verdict{problem(check, "check "+p.Path, "%v", p.StatErr)}
	}
	return []Verdict{ok(check, "%s: mode %04o, owner %s", p.Path, p.Mode, p.Owner)}
}

func equalFold(want string) func(string) bool {
	return func(s string) bool { return strings.EqualFold(s, want) }
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
