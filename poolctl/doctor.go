package poolctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
)

// PluginFile is the job_submit plugin's file name in PluginDir.
const PluginFile = "job_submit_pools.so"

// DefaultDBPasswordFile is where the packages expect the database password (see
// packaging/systemd/quotad.service).
const DefaultDBPasswordFile = "/etc/slurmbridge/db-password"

func doctorCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check a live cluster for what slurmbridge needs: plugin version, pools, preemption, daemons, credentials",
		Description: "Prints one line per check and, for each problem, the fix in one line; exits 1 when " +
			"there is any problem. Run it on the controller, as root, after every Slurm upgrade. " +
			"An empty URL, user or file skips that check.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "plugin-dir", Usage: "where to look for " + PluginFile + " (default: slurmctld's PluginDir)"},
			&cli.StringFlag{Name: "quotad-url", Value: "http://127.0.0.1:9817/metrics", EnvVars: []string{"SLURMBRIDGE_QUOTAD_METRICS_URL"}, Usage: "quotad's metrics"},
			&cli.StringFlag{Name: "elasticd-url", Value: "http://127.0.0.1:9464/metrics", EnvVars: []string{"SLURMBRIDGE_ELASTICD_METRICS_URL"}, Usage: "elasticd's metrics"},
			&cli.DurationFlag{Name: "max-cycle-age", Value: 5 * time.Minute, Usage: "quotad's last successful cycle must be newer"},
			&cli.StringFlag{Name: "db-password-file", Value: DefaultDBPasswordFile, EnvVars: []string{"SLURMBRIDGE_DB_PASSWORD_FILE"}, Usage: "the file quotad and quotactl read"},
			&cli.StringFlag{Name: "quotad-user", Usage: "the account quotad runs as (default: User= of quotad.service, when systemd knows it)"},
		},
		OnUsageError: usageError,
		Action: func(c *cli.Context) error {
			if err := noArgs(c); err != nil {
				return err
			}
			client, ok := clientOf(env.Fetcher)
			if !ok {
				return cli.Exit("doctor needs Slurm's commands (no command runner behind the fetcher)", exitProblems)
			}
			d := &doctor{c: c, env: env, slurm: client, runner: client.Runner, http: &http.Client{Timeout: 5 * time.Second}, now: time.Now}
			d.run()
			if n := d.problems(); n > 0 {
				return cli.Exit(fmt.Sprintf("doctor: %d %s", n, plural(n, "problem")), exitProblems)
			}
			fmt.Fprintln(env.Out, "doctor: no problems")
			return nil
		},
	}
}

// clientOf is the Slurm adapter behind the fetcher: doctor asks it for scontrol and sacctmgr,
// and runs systemctl with its Runner, the way sinfo is run, so tests replay them all from
// fixtures.
func clientOf(f slurm.Fetcher) (slurm.Client, bool) {
	switch f := f.(type) {
	case slurm.Client:
		return f, f.Runner != nil
	case *slurm.Client:
		return *f, f.Runner != nil
	}
	return slurm.Client{}, false
}

type status string

const (
	ok      status = "ok"
	problem status = "PROBLEM"
	skipped status = "skip"
)

// Finding is one check's result; a problem carries its fix.
type Finding struct {
	Status status
	Check  string
	Text   string
	Fix    string
}

type doctor struct {
	c        *cli.Context
	env      Env
	slurm    slurm.Client
	runner   slurm.Runner // for systemctl
	http     *http.Client
	now      func() time.Time
	findings []Finding
	conf     slurm.Config
	cfg      *pools.Config // nil when pools.yaml is unreadable
	nodes    []slurm.Node
	// quotadUser is the account quotad runs as, when quotadRights found it.
	quotadUser string
}

func (d *doctor) report(s status, check, fix, format string, args ...any) {
	f := Finding{Status: s, Check: check, Text: fmt.Sprintf(format, args...), Fix: fix}
	d.findings = append(d.findings, f)
	fmt.Fprintf(d.env.Out, "%-8s %-11s %s\n", f.Status, f.Check, f.Text)
	if f.Status == problem {
		fmt.Fprintf(d.env.Out, "%-8s %-11s fix: %s\n", "", "", f.Fix)
	}
}

func (d *doctor) problems() int {
	n := 0
	for _, f := range d.findings {
		if f.Status == problem {
			n++
		}
	}
	return n
}

func (d *doctor) ctx() context.Context { return d.c.Context }

func (d *doctor) run() {
	if !d.slurmctld() {
		// Every other Slurm check reads the config; the local ones still run.
		d.credentials()
		return
	}
	d.plugin()
	d.pools()
	d.preemption()
	d.accounting()
	d.quotadRights()
	d.borrowQOS()
	d.daemons()
	d.credentials()
}

func (d *doctor) slurmctld() bool {
	conf, err := d.slurm.ShowConfig(d.ctx())
	if err != nil {
		d.report(problem, "slurmctld", "start slurmctld (systemctl start slurmctld) or point SLURM_CONF at the cluster's slurm.conf",
			"scontrol show config failed: %v", firstLine(err.Error()))
		return false
	}
	d.conf = conf
	d.report(ok, "slurmctld", "", "Slurm %s, cluster %s", d.conf.Get("SLURM_VERSION"), d.conf.Get("ClusterName"))
	return true
}

// plugin checks that slurmctld would load our plugin: listed in JobSubmitPlugins, found first
// in PluginDir, and built for the running Slurm's exact version.
func (d *doctor) plugin() {
	const rebuild = "rebuild and reinstall it on this Slurm: make plugin && sudo make install-plugin (or install the slurmbridge-controller package built against it), then restart slurmctld"
	if !slices.Contains(d.conf.List("JobSubmitPlugins"), "pools") && !slices.Contains(d.conf.List("JobSubmitPlugins"), "job_submit/pools") {
		d.report(problem, "plugin", "add pools to JobSubmitPlugins in slurm.conf and restart slurmctld (leave it out only to roll back)",
			"JobSubmitPlugins = %s: jobs are not routed into pools", d.conf.Get("JobSubmitPlugins"))
	}
	dirs := strings.Split(d.c.String("plugin-dir"), ":")
	if dirs[0] == "" {
		dirs = strings.Split(d.conf.Get("PluginDir"), ":")
	}
	path := ""
	for _, dir := range dirs {
		// slurmctld takes the first directory of PluginDir that has the file.
		if st, err := os.Stat(filepath.Join(dir, PluginFile)); err == nil && st.Mode().IsRegular() {
			path = filepath.Join(dir, PluginFile)
			break
		}
	}
	if path == "" {
		d.report(problem, "plugin", "install it: sudo make install-plugin, or apt install ./slurmbridge-controller_*.deb",
			"%s is in none of PluginDir %s", PluginFile, strings.Join(dirs, ":"))
		return
	}
	info, err := ReadPluginInfo(path)
	if err != nil {
		d.report(problem, "plugin", rebuild, "%v", err)
		return
	}
	if info.Type != "job_submit/pools" {
		d.report(problem, "plugin", "remove the file or install slurmbridge's plugin over it", "%s is plugin %q, not job_submit/pools", path, info.Type)
		return
	}
	running := d.conf.Get("SLURM_VERSION")
	want, err := SlurmVersionNumber(running)
	if err != nil {
		d.report(problem, "plugin", "check that scontrol talks to this cluster's slurmctld", "SLURM_VERSION of slurmctld: %v", err)
		return
	}
	if info.Version != want {
		d.report(problem, "plugin", rebuild,
			"%s was built for Slurm %s but slurmctld runs %s: slurmctld refuses to load it (the version must match to the micro release)",
			path, SlurmVersionString(info.Version), running)
		return
	}
	d.report(ok, "plugin", "", "%s built for Slurm %s, as slurmctld runs", path, running)
}

// pools runs poolctl validate itself, output captured, so doctor and validate never disagree.
func (d *doctor) pools() {
	path := configPath(d.c)
	var out bytes.Buffer
	err := validate(d.c, Env{Fetcher: d.env.Fetcher, Out: &out, Err: io.Discard}, path, true)
	text := strings.TrimSpace(out.String())
	if err != nil {
		lines := strings.Split(text, "\n")
		if text == "" {
			lines = nil
		}
		lines = append(lines, err.Error())
		d.report(problem, "pools", "correct the file (poolctl validate shows each problem by line); the plugin keeps its last good config until then",
			"%s", strings.Join(lines, "\n"+strings.Repeat(" ", 21)))
	} else {
		d.report(ok, "pools", "", "%s", text)
	}
	if cfg, perr := pools.Load(path); perr == nil {
		d.cfg = cfg
	}
	// The GPU types for the TRES check come from the nodes even when pools.yaml is broken.
	d.nodes, _ = d.env.Fetcher.Nodes(d.ctx())
}

// preemption: reclaiming lent GPUs is Slurm's QOS preemption with requeue.
func (d *doctor) preemption() {
	const fix = "in slurm.conf: %s, then scontrol reconfigure (see slurm-conf/production/slurm.conf.slurmbridge)"
	good := true
	if v := d.conf.Get("PreemptType"); v != "preempt/qos" {
		d.report(problem, "preemption", fmt.Sprintf(fix, "PreemptType=preempt/qos")+"; a PreemptType change needs a slurmctld restart",
			"PreemptType = %s: quotad reclaims lent GPUs through QOS preemption (preempt/qos)", v)
		good = false
	}
	if modes := d.conf.List("PreemptMode"); !slices.ContainsFunc(modes, equalFold("REQUEUE")) {
		d.report(problem, "preemption", fmt.Sprintf(fix, "PreemptMode=REQUEUE"),
			"PreemptMode = %s: a reclaimed borrower must be requeued, not cancelled or suspended", d.conf.Get("PreemptMode"))
		good = false
	}
	if v := d.conf.Get("JobRequeue"); v != "1" {
		d.report(problem, "preemption", fmt.Sprintf(fix, "JobRequeue=1"),
			"JobRequeue = %s: jobs default to no requeue, and quotad never lends a job that cannot be requeued", v)
		good = false
	}
	if params := d.conf.List("SchedulerParameters"); slices.ContainsFunc(params, equalFold("preempt_youngest_first")) {
		d.report(problem, "preemption", fmt.Sprintf(fix, "SchedulerParameters without preempt_youngest_first"),
			"SchedulerParameters has preempt_youngest_first: Slurm would reclaim the youngest borrowers first, not those of the project furthest over its guarantee (quotad orders them by borrow QOS priority)")
		good = false
	}
	if good {
		d.report(ok, "preemption", "", "PreemptType=preempt/qos, PreemptMode=%s, JobRequeue=1", d.conf.Get("PreemptMode"))
	}
}

// accounting: quotas are QOS GrpTRES limits per GPU type, enforced by slurmctld.
func (d *doctor) accounting() {
	const fix = "in slurm.conf: %s, then scontrol reconfigure"
	good := true
	if v := d.conf.Get("AccountingStorageType"); v != "accounting_storage/slurmdbd" {
		d.report(problem, "accounting", fmt.Sprintf(fix, "AccountingStorageType=accounting_storage/slurmdbd")+" (needs slurmdbd and a slurmctld restart)",
			"AccountingStorageType = %s: QOS and quotas live in slurmdbd", v)
		good = false
	}
	enforce := d.conf.List("AccountingStorageEnforce")
	var missing []string
	for _, need := range []string{"limits", "qos"} {
		if !slices.Contains(enforce, need) {
			missing = append(missing, need)
		}
	}
	if len(missing) > 0 {
		d.report(problem, "accounting", fmt.Sprintf(fix, "AccountingStorageEnforce=associations,limits,qos,safe"),
			"AccountingStorageEnforce = %s lacks %s: guaranteed QOS limits (GrpTRES) would not hold jobs back", d.conf.Get("AccountingStorageEnforce"), strings.Join(missing, ","))
		good = false
	}
	tres := d.conf.List("AccountingStorageTRES")
	want := []string{"gres/gpu"}
	for _, t := range d.gpuTypes() {
		want = append(want, "gres/gpu:"+t)
	}
	var absent []string
	for _, t := range want {
		if !slices.Contains(tres, t) {
			absent = append(absent, t)
		}
	}
	if len(absent) > 0 {
		d.report(problem, "accounting", fmt.Sprintf(fix, "AccountingStorageTRES="+strings.Join(want, ",")),
			"AccountingStorageTRES lacks %s: quotas are per GPU type", strings.Join(absent, ","))
		good = false
	}
	if good {
		d.report(ok, "accounting", "", "slurmdbd, enforce %s, TRES %s", d.conf.Get("AccountingStorageEnforce"), strings.Join(want, ","))
	}
}

// gpuTypes are the typed GPUs of the nodes and of pools.yaml.
func (d *doctor) gpuTypes() []string {
	var types []string
	for _, n := range d.nodes {
		for _, g := range n.Gres {
			if g.IsGPU() && g.Type != "" {
				types = append(types, g.Type)
			}
		}
	}
	if d.cfg != nil {
		for _, p := range d.cfg.Pools {
			if p.GPUType != "" {
				types = append(types, p.GPUType)
			}
		}
	}
	slices.Sort(types)
	return slices.Compact(types)
}

// quotadRights: quotad adds and changes QOS with sacctmgr, which slurmdbd allows only to root,
// SlurmUser and AdminLevel Administrator (Operator may move jobs between QOS but is refused
// QOS changes: measured on 22.05), and pending jobs' QOS with scontrol.
func (d *doctor) quotadRights() {
	user := d.c.String("quotad-user")
	if user == "" {
		// systemctl show answers for units it does not have too: LoadState says.
		out, err := d.runner.Run(d.ctx(), "systemctl", "show", "--property=LoadState,User", "quotad.service")
		props := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, found := strings.Cut(line, "="); found {
				props[k] = strings.TrimSpace(v)
			}
		}
		if err != nil || props["LoadState"] != "loaded" {
			d.report(skipped, "quotad-user", "", "systemd does not know quotad.service; --quotad-user names the account quotad runs as")
			return
		}
		if user = props["User"]; user == "" {
			user = "root" // a unit without User= runs as root
		}
	}
	d.quotadUser = user
	if d.slurmAlwaysAllows(user) {
		d.report(ok, "quotad-user", "", "quotad runs as %s, which Slurm always allows", user)
		return
	}
	level, err := d.slurm.UserAdminLevel(d.ctx(), user)
	if err != nil {
		d.report(problem, "quotad-user", "check slurmdbd (sacctmgr show user "+user+")", "cannot read %s's AdminLevel: %v", user, firstLine(err.Error()))
		return
	}
	if level != "Administrator" {
		fix := "sacctmgr -i modify user " + user + " set adminlevel=Administrator"
		if level == "" {
			level = "not a Slurm user"
			fix = "sacctmgr -i add user " + user + " account=root adminlevel=Administrator"
		}
		d.report(problem, "quotad-user", fix, "quotad runs as %s (AdminLevel %s): slurmdbd refuses it QOS changes, which need Administrator", user, level)
		return
	}
	d.report(ok, "quotad-user", "", "quotad runs as %s, AdminLevel %s", user, level)
}

// slurmAlwaysAllows: root and SlurmUser need no AdminLevel, and the plugin lets them move jobs.
func (d *doctor) slurmAlwaysAllows(user string) bool {
	slurmUser, _, _ := strings.Cut(d.conf.Get("SlurmUser"), "(")
	return user == "root" || user == slurmUser
}

// borrowQOS: the plugin keeps jobs Slurm cannot requeue out of pools.yaml's borrow_qos and
// elastic_qos, so together they must name every QOS that another QOS preempts (quotad's borrow
// and elastic QOS), and the plugin must let quotad move jobs there. elasticd runs workers beyond
// the guarantee in the elastic QOS, reclaimed first; where no preemptable QOS matches elastic_qos
// while borrow QOS exist, quotad has not created them yet (it runs a version from before them)
// and workers borrow in the borrow QOS until it does.
func (d *doctor) borrowQOS() {
	if d.cfg == nil {
		d.report(skipped, "borrow-qos", "", "pools.yaml is not usable")
		return
	}
	pattern, elastic := d.cfg.BorrowQOSPattern(), d.cfg.ElasticQOSPattern()
	const fix = "set borrow_qos and elastic_qos in pools.yaml to the quota table's settings.borrowQOS and settings.elasticQOS (quotactl export shows them)"
	preempts, err := d.slurm.QOSPreempts(d.ctx())
	if err != nil {
		d.report(problem, "borrow-qos", "check slurmdbd (sacctmgr show qos)", "cannot read the QOS: %v", firstLine(err.Error()))
		return
	}
	by := map[string][]string{} // preemptable QOS → the QOS that preempt it
	for q, names := range preempts {
		for _, n := range names {
			by[n] = append(by[n], q)
		}
	}
	good := true
	var preemptable []string
	borrows, elastics := 0, 0
	for _, q := range slices.Sorted(maps.Keys(by)) {
		preemptable = append(preemptable, q)
		switch {
		case pools.MatchBorrowQOS(pattern, q):
			borrows++
		case pools.MatchBorrowQOS(elastic, q):
			elastics++
		default:
			slices.Sort(by[q])
			d.report(problem, "borrow-qos", fix,
				"QOS %s can be preempted (by %s) but neither pools.yaml's borrow_qos %s nor its elastic_qos %s names it: the plugin lets salloc, srun and --no-requeue jobs into it, and a reclaim kills them",
				q, strings.Join(by[q], ","), pattern, elastic)
			good = false
		}
	}
	if u := d.quotadUser; u != "" && !d.slurmAlwaysAllows(u) && !slices.Contains(d.cfg.BorrowQOSAdmins, u) {
		d.report(problem, "borrow-qos", "add "+u+" to borrow_qos_admins in pools.yaml",
			"quotad runs as %s, which pools.yaml's borrow_qos_admins does not list: the plugin refuses its moves into the borrow QOS", u)
		good = false
	}
	switch {
	case !good:
	case len(preemptable) == 0:
		d.report(ok, "borrow-qos", "", "borrow_qos %s, elastic_qos %s; no QOS preempts another yet (quotad sets them up on its first cycle)", pattern, elastic)
	case borrows > 0 && elastics == 0:
		d.report(ok, "borrow-qos", "", "borrow_qos %s names every preemptable QOS (%s); no elastic QOS (%s) is preemptable yet: quotad creates them (one per project), and until then elasticd runs workers beyond the guarantee in the borrow QOS, not reclaimed first",
			pattern, strings.Join(preemptable, ","), elastic)
	default:
		d.report(ok, "borrow-qos", "", "borrow_qos %s and elastic_qos %s name every preemptable QOS (%s)", pattern, elastic, strings.Join(preemptable, ","))
	}
}

func (d *doctor) daemons() {
	if url := d.c.String("quotad-url"); url == "" {
		d.report(skipped, "quotad", "", "--quotad-url is empty")
	} else if m, err := d.metrics(url); err != nil {
		d.report(problem, "quotad", "systemctl status quotad; journalctl -u quotad (or --quotad-url where it listens)", "%v", err)
	} else {
		last, found := m["quotad_last_successful_cycle_timestamp_seconds"]
		age := time.Duration((float64(d.now().UnixNano())/1e9 - last) * float64(time.Second))
		switch {
		case !found:
			d.report(problem, "quotad", "point --quotad-url at quotad's --listen address", "%s serves no quotad_last_successful_cycle_timestamp_seconds: not quotad", url)
		case last == 0:
			d.report(problem, "quotad", "journalctl -u quotad says why its cycles fail", "%s: quotad has not completed a cycle since it started", url)
		case age > d.c.Duration("max-cycle-age"):
			d.report(problem, "quotad", "journalctl -u quotad says why its cycles fail", "%s: quotad's last successful cycle was %s ago", url, age.Round(time.Second))
		default:
			d.report(ok, "quotad", "", "%s: last successful cycle %s ago", url, age.Round(time.Second))
		}
	}
	if url := d.c.String("elasticd-url"); url == "" {
		d.report(skipped, "elasticd", "", "--elasticd-url is empty")
	} else if m, err := d.metrics(url); err != nil {
		d.report(problem, "elasticd", "systemctl status elasticd; journalctl -u elasticd (or --elasticd-url where it listens)", "%v", err)
	} else if _, found := m["elasticd_cycle_seconds_count"]; !found {
		d.report(problem, "elasticd", "point --elasticd-url at elasticd run's --listen address", "%s serves no elasticd_cycle_seconds: not elasticd", url)
	} else {
		d.report(ok, "elasticd", "", "%s: %.0f cycles", url, m["elasticd_cycle_seconds_count"])
	}
}

// metrics reads a Prometheus text page: unlabelled samples by name.
func (d *doctor) metrics(url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(d.ctx(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s unreachable: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, found := strings.Cut(sc.Text(), " ")
		if !found || strings.HasPrefix(name, "#") || strings.Contains(name, "{") {
			continue
		}
		fields := strings.Fields(value) // value, then an optional timestamp
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			m[name] = v
		}
	}
	return m, sc.Err()
}

// credentials applies quotad's own check of the password file (slurmdbd.ReadPassword).
func (d *doctor) credentials() {
	path := d.c.String("db-password-file")
	if path == "" {
		d.report(skipped, "credentials", "", "--db-password-file is empty")
		return
	}
	if _, err := slurmdbd.ReadPassword(path); err != nil {
		fix := "chown root:root " + path + " && chmod 600 " + path
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fix = "write the slurmbridge DB user's password to " + path + " (install -m 600 /dev/stdin " + path + ")"
		case errors.Is(err, fs.ErrPermission):
			fix = "run doctor as root (the file is readable by its owner only, as it must be)"
		}
		d.report(problem, "credentials", fix, "%v", err)
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		d.report(problem, "credentials", "check "+path, "%v", err)
		return
	}
	owner := "uid ?"
	if sys, isUnix := st.Sys().(*syscall.Stat_t); isUnix {
		owner = "uid " + strconv.FormatUint(uint64(sys.Uid), 10)
	}
	d.report(ok, "credentials", "", "%s: mode %04o, owner %s", path, st.Mode().Perm(), owner)
}

func equalFold(want string) func(string) bool {
	return func(s string) bool { return strings.EqualFold(s, want) }
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
