package poolctl

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

const testbedConfigFixture = "../bridge/slurm/testdata/scontrol-show-config-testbed.txt" // the adapter's, which parses it

// fakeRunner answers doctor's commands: sinfo from bridge/slurm's capture, scontrol from
// ours, the rest from outputs; a command not in it fails the test.
type fakeRunner struct {
	t       *testing.T
	config  string            // `scontrol show config` output
	outputs map[string]string // "name arg..." -> stdout
	fails   map[string]error
}

func (r *fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	if err, ok := r.fails[line]; ok {
		return nil, err
	}
	switch line {
	case "sinfo --version": // the release of bridge/slurm's capture
		return []byte("slurm 22.05.8\n"), nil
	case "sinfo --json":
		return readFixture(r.t, "sinfo-testbed-idle.json"), nil
	case "scontrol show config":
		return []byte(r.config), nil
	}
	if out, ok := r.outputs[line]; ok {
		return []byte(out), nil
	}
	r.t.Fatalf("unexpected command %q", line)
	return nil, nil
}

// cluster is a healthy testbed-like cluster: the captured config with PluginDir pointing at a
// plugin built for its Slurm, both daemons serving metrics, a 0600 password file.
type cluster struct {
	t            *testing.T
	runner       *fakeRunner
	pluginDir    string
	passwordFile string
	quotad       *httptest.Server
	elasticd     *httptest.Server
	lastCycle    time.Time
	pools        string // the pools.yaml doctor reads
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	cl := &cluster{t: t, pluginDir: t.TempDir(), lastCycle: time.Now().Add(-10 * time.Second), pools: testbedPools}
	data, err := os.ReadFile(testbedConfigFixture)
	if err != nil {
		t.Fatal(err)
	}
	conf := setConfig(t, string(data), "PluginDir", cl.pluginDir+":/nonexistent/slurm-wlm")
	cl.runner = &fakeRunner{t: t, config: conf, outputs: map[string]string{
		// quotad's QOS on the testbed: each guaranteed QOS preempts the other projects' borrow QOS.
		"sacctmgr -n -P show qos format=name,preempt": "normal|\nborrow-proj-a|\nborrow-proj-b|\nelastic-proj-a|\nelastic-proj-b|\nguar-proj-a|borrow-proj-b,elastic-proj-b\nguar-proj-b|borrow-proj-a,elastic-proj-a\n",
	}, fails: map[string]error{
		"systemctl show --property=LoadState,User quotad.service": fmt.Errorf("System has not been booted with systemd"),
	}}
	buildPlugin(t, filepath.Join(cl.pluginDir, PluginFile), "job_submit/pools", 0x160508)
	cl.passwordFile = filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(cl.passwordFile, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cl.quotad = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "# HELP quotad_last_successful_cycle_timestamp_seconds ...\n# TYPE quotad_last_successful_cycle_timestamp_seconds gauge\n")
		last := float64(0)
		if !cl.lastCycle.IsZero() {
			last = float64(cl.lastCycle.UnixNano()) / 1e9
		}
		fmt.Fprintf(w, "quotad_last_successful_cycle_timestamp_seconds %g\nquotad_lease_held 1\n", last)
	}))
	t.Cleanup(cl.quotad.Close)
	cl.elasticd = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "elasticd_cycle_seconds_bucket{le=\"+Inf\"} 42\nelasticd_cycle_seconds_sum 1.5\nelasticd_cycle_seconds_count 42\n")
	}))
	t.Cleanup(cl.elasticd.Close)
	return cl
}

// setConfig replaces one `Key = value` line of scontrol's output.
func setConfig(t *testing.T, conf, key, value string) string {
	t.Helper()
	var out strings.Builder
	found := false
	sc := bufio.NewScanner(strings.NewReader(conf))
	for sc.Scan() {
		line := sc.Text()
		if k, _, ok := strings.Cut(line, " = "); ok && strings.TrimSpace(k) == key && !found {
			line = fmt.Sprintf("%-23s = %s", key, value)
			found = true
		}
		out.WriteString(line + "\n")
	}
	if !found {
		t.Fatalf("no %s in the config", key)
	}
	return out.String()
}

// buildPlugin compiles a stand-in Slurm plugin with the given data symbols.
func buildPlugin(t *testing.T, path, typ string, version uint32) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "plugin.c")
	code := fmt.Sprintf("#include <stdint.h>\nconst char plugin_name[] = \"test\";\nconst char plugin_type[] = %q;\nconst uint32_t plugin_version = %#x;\nint init(void) { return 0; }\n", typ, version)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", path, src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s (a C compiler is needed, as for the plugin itself)", cc, err, out)
	}
}

// patchPluginVersion writes a copy of the plugin at src to dst with plugin_version replaced:
// the same plugin "built for another Slurm".
func patchPluginVersion(t *testing.T, src, dst string, version uint32) {
	t.Helper()
	info, err := ReadPluginInfo(src)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	info.ByteOrder.PutUint32(data[info.VersionOffset:], version)
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

func (cl *cluster) doctor(extra ...string) result {
	cl.t.Helper()
	var out, errOut bytes.Buffer
	args := append([]string{"poolctl", "--config", cl.pools, "doctor",
		"--quotad-url", cl.quotad.URL + "/metrics", "--elasticd-url", cl.elasticd.URL + "/metrics",
		"--db-password-file", cl.passwordFile}, extra...)
	code := Run(context.Background(), args, Env{Fetcher: slurm.Client{Runner: cl.runner}, Out: &out, Err: &errOut})
	return result{code, out.String(), errOut.String()}
}

// problemLines are the PROBLEM lines with their fix lines.
func problemLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, string(problem)) || strings.Contains(l, " fix: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestDoctorCleanCluster(t *testing.T) {
	cl := newCluster(t)
	r := cl.doctor()
	if r.code != 0 || !strings.HasSuffix(r.out, "doctor: no problems\n") || len(problemLines(r.out)) != 0 {
		t.Fatalf("exit %d, err %q, out:\n%s", r.code, r.errOut, r.out)
	}
	mustContain(t, "doctor output", r.out,
		"ok       slurmctld   Slurm 22.05.8, cluster testbed",
		"ok       plugin      "+filepath.Join(cl.pluginDir, PluginFile)+" built for Slurm 22.05.8, as slurmctld runs",
		"ok       pools       "+testbedPools+": OK, 4 pools match the cluster",
		"ok       preemption  PreemptType=preempt/qos, PreemptMode=REQUEUE, JobRequeue=1",
		"ok       accounting  slurmdbd, enforce associations,limits,qos,safe, TRES gres/gpu,gres/gpu:a100,gres/gpu:v100",
		"skip     quotad-user systemd does not know quotad.service",
		"ok       borrow-qos  borrow_qos borrow-{account} and elastic_qos elastic-{account} name every preemptable QOS (borrow-proj-a,borrow-proj-b,elastic-proj-a,elastic-proj-b)",
		"ok       quotad      "+cl.quotad.URL+"/metrics: last successful cycle 10s ago",
		"ok       elasticd    "+cl.elasticd.URL+"/metrics: 42 cycles",
		"ok       credentials "+cl.passwordFile+": mode 0600",
	)
}

func TestDoctorNamesPluginFromAnotherSlurm(t *testing.T) {
	cl := newCluster(t)
	path := filepath.Join(cl.pluginDir, PluginFile)
	// The same plugin, its 4 bytes of plugin_version rewritten to 22.05.7.
	patchPluginVersion(t, path, path+".new", 0x160507)
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	r := cl.doctor()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	want := []string{
		"PROBLEM  plugin      " + path + " was built for Slurm 22.05.7 but slurmctld runs 22.05.8: slurmctld refuses to load it (the version must match to the micro release)",
		"                     fix: rebuild and reinstall it on this Slurm: make plugin && sudo make install-plugin (or install the slurmbridge-controller package built against it), then restart slurmctld",
	}
	if got := problemLines(r.out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	mustContain(t, "stderr", r.errOut, "doctor: 1 problem")
}

func TestDoctorLooksWhereSlurmctldLooks(t *testing.T) {
	cl := newCluster(t)
	// slurmctld takes the first PluginDir entry that has the file: a stale copy first hides
	// a good one after it.
	first, second := t.TempDir(), cl.pluginDir
	buildPlugin(t, filepath.Join(first, PluginFile), "job_submit/pools", 0x170200)
	cl.runner.config = setConfig(t, cl.runner.config, "PluginDir", first+":"+second)
	r := cl.doctor()
	mustContain(t, "doctor output", r.out, filepath.Join(first, PluginFile)+" was built for Slurm 23.02.0 but slurmctld runs 22.05.8")

	// Not enabled, and nowhere to be found: two problems, each with its fix.
	cl.runner.config = setConfig(t, setConfig(t, cl.runner.config, "PluginDir", t.TempDir()), "JobSubmitPlugins", "(null)")
	r = cl.doctor()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	mustContain(t, "doctor output", r.out,
		"PROBLEM  plugin      JobSubmitPlugins = : jobs are not routed into pools",
		"fix: add pools to JobSubmitPlugins in slurm.conf and restart slurmctld",
		PluginFile+" is in none of PluginDir",
		"fix: install it: sudo make install-plugin",
	)

	// A file of that name that is another plugin.
	cl.runner.config = setConfig(t, cl.runner.config, "PluginDir", first)
	buildPlugin(t, filepath.Join(first, PluginFile), "job_submit/lua", 0x160508)
	mustContain(t, "doctor output", cl.doctor().out, `is plugin "job_submit/lua", not job_submit/pools`)
}

func TestDoctorNamesMissingPreemptionAndAccountingSettings(t *testing.T) {
	cl := newCluster(t)
	orig := cl.runner.config
	conf := orig
	for _, kv := range [][2]string{
		{"PreemptType", "preempt/partition_prio"},
		{"PreemptMode", "CANCEL"},
		{"JobRequeue", "0"},
		{"AccountingStorageEnforce", "associations,safe"},
		{"AccountingStorageTRES", "cpu,mem,energy,node,billing,fs/disk,vmem,pages,gres/gpu,gres/gpu:a100"},
	} {
		conf = setConfig(t, conf, kv[0], kv[1])
	}
	cl.runner.config = conf
	r := cl.doctor()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	got := problemLines(r.out)
	if len(got) != 10 {
		t.Errorf("want 5 problems with fixes, got:\n%s", strings.Join(got, "\n"))
	}
	mustContain(t, "doctor output", r.out,
		"PreemptType = preempt/partition_prio: quotad reclaims lent GPUs through QOS preemption",
		"fix: in slurm.conf: PreemptType=preempt/qos, then scontrol reconfigure",
		"PreemptMode = CANCEL: a reclaimed borrower must be requeued",
		"fix: in slurm.conf: PreemptMode=REQUEUE",
		"JobRequeue = 0: jobs default to no requeue",
		"fix: in slurm.conf: JobRequeue=1",
		"AccountingStorageEnforce = associations,safe lacks limits,qos",
		"fix: in slurm.conf: AccountingStorageEnforce=associations,limits,qos,safe",
		"AccountingStorageTRES lacks gres/gpu:v100: quotas are per GPU type",
		"fix: in slurm.conf: AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:v100",
	)
	mustContain(t, "stderr", r.errOut, "doctor: 5 problems")

	// preempt_youngest_first replaces the reclaim order quotad sets.
	cl.runner.config = setConfig(t, orig, "SchedulerParameters", "bf_interval=5,preempt_youngest_first")
	if r := cl.doctor(); r.code != 1 || !strings.Contains(r.out, "SchedulerParameters has preempt_youngest_first") {
		t.Fatalf("preempt_youngest_first: exit %d:\n%s", r.code, r.out)
	}

	// GANG,REQUEUE requeues too.
	cl.runner.config = setConfig(t, orig, "PreemptMode", "GANG,REQUEUE")
	if r := cl.doctor(); r.code != 0 {
		t.Fatalf("PreemptMode=GANG,REQUEUE: exit %d:\n%s", r.code, r.out)
	}
}

func TestDoctorNamesDaemonAndCredentialProblems(t *testing.T) {
	cl := newCluster(t)
	cl.lastCycle = time.Time{}
	deadURL := cl.elasticd.URL + "/metrics"
	cl.elasticd.Close()
	if err := os.Chmod(cl.passwordFile, 0o640); err != nil {
		t.Fatal(err)
	}
	r := cl.doctor("--elasticd-url", deadURL)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	mustContain(t, "doctor output", r.out,
		"PROBLEM  quotad      "+cl.quotad.URL+"/metrics: quotad has not completed a cycle since it started",
		"fix: journalctl -u quotad says why its cycles fail",
		"PROBLEM  elasticd    "+deadURL+" unreachable",
		"fix: systemctl status elasticd",
		"PROBLEM  credentials database password file "+cl.passwordFile+" has mode 0640",
		"fix: chown root:root "+cl.passwordFile+" && chmod 600 "+cl.passwordFile,
	)

	cl.lastCycle = time.Now().Add(-time.Hour)
	if err := os.Remove(cl.passwordFile); err != nil {
		t.Fatal(err)
	}
	r = cl.doctor("--elasticd-url", "")
	mustContain(t, "doctor output", r.out,
		"quotad's last successful cycle was 1h0m0s ago",
		"skip     elasticd    --elasticd-url is empty",
		"fix: write the slurmbridge DB user's password to "+cl.passwordFile,
	)
	// Metrics of something else are not quotad.
	r = cl.doctor("--quotad-url", cl.quotad.URL+"/metrics", "--elasticd-url", cl.quotad.URL+"/metrics")
	mustContain(t, "doctor output", r.out, "serves no elasticd_cycle_seconds: not elasticd")
}

func TestDoctorChecksQuotadsSlurmRights(t *testing.T) {
	cl := newCluster(t)
	// Not in slurmdbd at all, then only an Operator: both refused QOS changes.
	cl.runner.outputs["sacctmgr -n -P show user slurmbridge format=adminlevel"] = ""
	r := cl.doctor("--quotad-user", "slurmbridge")
	mustContain(t, "doctor output", r.out,
		"PROBLEM  quotad-user quotad runs as slurmbridge (AdminLevel not a Slurm user): slurmdbd refuses it QOS changes, which need Administrator",
		"fix: sacctmgr -i add user slurmbridge account=root adminlevel=Administrator",
	)
	cl.runner.outputs["sacctmgr -n -P show user slurmbridge format=adminlevel"] = "Operator\n"
	mustContain(t, "doctor output", cl.doctor("--quotad-user", "slurmbridge").out,
		"quotad runs as slurmbridge (AdminLevel Operator): slurmdbd refuses it",
		"fix: sacctmgr -i modify user slurmbridge set adminlevel=Administrator",
	)
	// The user of quotad.service, as systemd reports it.
	delete(cl.runner.fails, "systemctl show --property=LoadState,User quotad.service")
	cl.runner.outputs["systemctl show --property=LoadState,User quotad.service"] = "User=\nLoadState=not-found\n"
	mustContain(t, "doctor output", cl.doctor().out, "skip     quotad-user systemd does not know quotad.service")
	cl.runner.outputs["systemctl show --property=LoadState,User quotad.service"] = "User=slurmbridge\nLoadState=loaded\n"
	cl.runner.outputs["sacctmgr -n -P show user slurmbridge format=adminlevel"] = "Administrator\n"
	// The plugin must let quotad's account move jobs into the borrow QOS.
	mustContain(t, "doctor output", cl.doctor().out,
		"PROBLEM  borrow-qos  quotad runs as slurmbridge, which pools.yaml's borrow_qos_admins does not list: the plugin refuses its moves into the borrow QOS",
		"fix: add slurmbridge to borrow_qos_admins in pools.yaml")
	cl.pools = withLines(t, testbedPools, "borrow_qos_admins: [slurmbridge]")
	r = cl.doctor()
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	mustContain(t, "doctor output", r.out, "ok       quotad-user quotad runs as slurmbridge, AdminLevel Administrator")
	// SlurmUser needs no AdminLevel.
	mustContain(t, "doctor output", cl.doctor("--quotad-user", "slurm").out, "quotad runs as slurm, which Slurm always allows")
}

// The plugin keeps jobs Slurm cannot requeue out of borrow_qos only: a preemptable QOS it does
// not name (quotad's settings.borrowQOS set otherwise) is a problem.
func TestDoctorChecksBorrowQOSAgainstPreemptableQOS(t *testing.T) {
	cl := newCluster(t)
	cl.runner.outputs["sacctmgr -n -P show qos format=name,preempt"] = "normal|\nlend|\nguar-proj-a|lend\nguar-proj-b|lend,normal\n"
	mustContain(t, "doctor output", cl.doctor().out,
		"PROBLEM  borrow-qos  QOS lend can be preempted (by guar-proj-a,guar-proj-b) but neither pools.yaml's borrow_qos borrow-{account} nor its elastic_qos elastic-{account} names it: the plugin lets salloc, srun and --no-requeue jobs into it, and a reclaim kills them",
		"PROBLEM  borrow-qos  QOS normal can be preempted (by guar-proj-b)",
		"fix: set borrow_qos and elastic_qos in pools.yaml to the quota table's settings.borrowQOS and settings.elasticQOS")

	// One shared borrow QOS, named as such.
	cl.runner.outputs["sacctmgr -n -P show qos format=name,preempt"] = "normal|\nlend|\nguar-proj-a|lend\nguar-proj-b|lend\n"
	cl.pools = withLines(t, testbedPools, "borrow_qos: lend")
	if r := cl.doctor(); r.code != 0 || !strings.Contains(r.out, "ok       borrow-qos  borrow_qos lend names every preemptable QOS (lend); no elastic QOS (elastic-{account}) is preemptable yet") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	// quotad's elastic QOS named otherwise than elastic_qos: the plugin would not guard it.
	cl.runner.outputs["sacctmgr -n -P show qos format=name,preempt"] = "normal|\nlend|\ngrow-proj-a|\nguar-proj-b|lend,grow-proj-a\n"
	mustContain(t, "doctor output", cl.doctor().out,
		"PROBLEM  borrow-qos  QOS grow-proj-a can be preempted (by guar-proj-b) but neither pools.yaml's borrow_qos lend nor its elastic_qos elastic-{account} names it")
	cl.pools = withLines(t, testbedPools, "borrow_qos: lend", "elastic_qos: grow-{account}")
	if r := cl.doctor(); r.code != 0 || !strings.Contains(r.out, "ok       borrow-qos  borrow_qos lend and elastic_qos grow-{account} name every preemptable QOS (grow-proj-a,lend)") {
		t.Fatalf("exit %d:\n%s", r.code, r.out)
	}
	// Before quotad's first cycle nothing is preemptable yet.
	cl.runner.outputs["sacctmgr -n -P show qos format=name,preempt"] = "normal|\n"
	mustContain(t, "doctor output", cl.doctor().out, "ok       borrow-qos  borrow_qos lend, elastic_qos grow-{account}; no QOS preempts another yet")
}

// withLines is a copy of a pools file with lines replacing its keys of the same name.
func withLines(t *testing.T, path string, lines ...string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		keep := true
		for _, nl := range lines {
			key, _, _ := strings.Cut(nl, ":")
			if strings.HasPrefix(l, key+":") {
				keep = false
			}
		}
		if keep {
			out = append(out, l)
		}
	}
	dst := filepath.Join(t.TempDir(), "pools.yaml")
	if err := os.WriteFile(dst, []byte(strings.Join(lines, "\n")+"\n"+strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestDoctorWithoutSlurmctld(t *testing.T) {
	cl := newCluster(t)
	cl.runner.fails["scontrol show config"] = &slurm.CommandError{Command: "scontrol show config", ExitCode: 1,
		Stderr: "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"}
	r := cl.doctor()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", r.code, r.out)
	}
	mustContain(t, "doctor output", r.out,
		"PROBLEM  slurmctld   scontrol show config failed: scontrol show config: exit 1: slurm_load_ctl_conf error: Unable to contact slurm controller",
		"ok       credentials",
	)
	if strings.Contains(r.out, "plugin") {
		t.Errorf("checks that need slurmctld ran anyway:\n%s", r.out)
	}
}

func TestPluginInfoOfTheBuiltPlugin(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "p.so")
	buildPlugin(t, path, "job_submit/pools", 0x160508)
	info, err := ReadPluginInfo(path)
	if err != nil || info.Type != "job_submit/pools" || info.Version != 0x160508 {
		t.Fatalf("%+v, %v", info, err)
	}
	patchPluginVersion(t, path, filepath.Join(dir, "q.so"), 0x170b01)
	if info, err := ReadPluginInfo(filepath.Join(dir, "q.so")); err != nil || info.Version != 0x170b01 || SlurmVersionString(info.Version) != "23.11.1" {
		t.Fatalf("patched: %+v, %v", info, err)
	}
	if _, err := ReadPluginInfo(testbedConfigFixture); err == nil {
		t.Fatal("a text file read as a plugin")
	}
	exe, err := os.Executable() // an ELF file without the symbols
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPluginInfo(exe); err == nil || !strings.Contains(err.Error(), "not a Slurm plugin") {
		t.Fatalf("test binary: %v", err)
	}
}

func TestSlurmVersionNumber(t *testing.T) {
	for v, want := range map[string]uint32{"22.05.8": 0x160508, "23.11.10": 0x170b0a, "22.05.0-0rc1": 0x160500, " 21.08.8 ": 0x150808} {
		if got, err := SlurmVersionNumber(v); err != nil || got != want {
			t.Errorf("%q: %#x, %v; want %#x", v, got, err, want)
		}
	}
	for _, v := range []string{"", "22.05", "22.x.1", "300.1.1"} {
		if _, err := SlurmVersionNumber(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
	if s := SlurmVersionString(0x160508); s != "22.05.8" {
		t.Errorf("%s", s)
	}
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

// The production example and the testbed template are one set of settings: both must satisfy
// doctor, and the production pools and quota examples must be valid.
func TestProductionAndTestbedConfigsSatisfyDoctor(t *testing.T) {
	prodPools, err := pools.Load("../slurm-conf/production/pools.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.LoadConfig("../slurm-conf/production/quotas.yaml"); err != nil {
		t.Fatal(err)
	}
	testbedPoolsCfg, err := pools.Load(testbedPools)
	if err != nil {
		t.Fatal(err)
	}
	for path, cfg := range map[string]*pools.Config{
		"../slurm-conf/production/slurm.conf.slurmbridge": prodPools,
		"../slurm-conf/testbed/slurm.conf.in":             testbedPoolsCfg,
	} {
		conf := slurmConfFile(t, path)
		if _, ok := conf["AccountingStorageType"]; !ok {
			// The production lines are merged into a slurm.conf that already has accounting.
			conf["AccountingStorageType"] = "accounting_storage/slurmdbd"
		}
		var out bytes.Buffer
		d := &doctor{env: Env{Out: &out}, conf: conf, cfg: cfg}
		d.preemption()
		d.accounting()
		if d.problems() != 0 {
			t.Errorf("%s:\n%s", path, out.String())
		}
	}
	// quotad.service runs quotad as slurmbridge: the plugin must let it lend.
	if !slices.Contains(prodPools.BorrowQOSAdmins, "slurmbridge") || prodPools.BorrowQOSPattern() != policy.DefaultBorrowQOS {
		t.Errorf("production pools.yaml: borrow_qos %s, admins %v", prodPools.BorrowQOSPattern(), prodPools.BorrowQOSAdmins)
	}
	if v := slurmConfFile(t, "../slurm-conf/production/slurm.conf.slurmbridge").Get("JobSubmitPlugins"); v != "pools" {
		t.Errorf("production JobSubmitPlugins=%q", v)
	}
}
