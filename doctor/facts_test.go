package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurm/slurmtest"
)

// replay answers Gather's commands from the adapter's captures and outputs; a command in
// neither fails the test, so each test says every command doctor may run.
type replay struct {
	t       *testing.T
	config  string            // `scontrol show config` output
	outputs map[string]string // "name arg..." -> stdout
	fails   map[string]error
	ran     []string
}

func (r *replay) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.ran = append(r.ran, line)
	if err, ok := r.fails[line]; ok {
		return nil, err
	}
	switch line {
	case "sinfo --version", "slurmctld -V": // the release of bridge/slurm's capture
		return []byte("slurm 22.05.8\n"), nil
	case "scontrol " + strings.Join(slurm.NodesArgs, " "):
		return slurmtest.Fixture(r.t, "scontrol-nodes-22.05-testbed-idle.txt"), nil
	case "scontrol show config":
		return []byte(r.config), nil
	}
	if out, ok := r.outputs[line]; ok {
		return []byte(out), nil
	}
	r.t.Fatalf("unexpected command %q", line)
	return nil, nil
}

const qosCommand = "sacctmgr -n -P show qos format=name,grptres,preempt,preemptmode,gracetime,preemptexempttime,priority"
const systemctlShow = "systemctl show --property=LoadState,User quotad.service"

// testbedReplay is a testbed-like cluster to gather from: the captured config with PluginDir
// pointing at dir, the testbed's QOS, no systemd.
func testbedReplay(t *testing.T, pluginDir string) *replay {
	t.Helper()
	return &replay{t: t,
		config: setConfig(t, string(slurmtest.Fixture(t, "scontrol-show-config-22.05-testbed.txt")), "PluginDir", pluginDir+":/nonexistent/slurm-wlm"),
		outputs: map[string]string{
			qosCommand: "normal||||||0\nborrow-proj-a||||||0\nborrow-proj-b||||||0\nelastic-proj-a||||||0\nelastic-proj-b||||||0\nguar-proj-a||borrow-proj-b,elastic-proj-b||||0\nguar-proj-b||borrow-proj-a,elastic-proj-a||||0\n",
		},
		fails: map[string]error{systemctlShow: fmt.Errorf("System has not been booted with systemd")},
	}
}

// setConfig replaces one `Key = value` line of scontrol's output.
func setConfig(t *testing.T, conf, key, value string) string {
	t.Helper()
	lines := strings.Split(conf, "\n")
	for i, line := range lines {
		if k, _, ok := strings.Cut(line, " = "); ok && strings.TrimSpace(k) == key {
			lines[i] = fmt.Sprintf("%-23s = %s", key, value)
			return strings.Join(lines, "\n")
		}
	}
	t.Fatalf("no %s in the config", key)
	return ""
}

func writePasswordFile(t *testing.T, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(path, []byte("secret\n"), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestGatherReadsEveryFact(t *testing.T) {
	dir := t.TempDir()
	// Not an ELF file: found where slurmctld looks, its symbols unreadable.
	if err := os.WriteFile(filepath.Join(dir, PluginFile), []byte("not a plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := testbedReplay(t, dir)
	delete(r.fails, systemctlShow)
	r.outputs[systemctlShow] = "User=slurmbridge\nLoadState=loaded\n"
	r.outputs["sacctmgr -n -P show user slurmbridge format=adminlevel"] = "Operator\n"
	quotad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP quotad_last_successful_cycle_timestamp_seconds ...\nquotad_last_successful_cycle_timestamp_seconds 1.7e9\nquotad_lease_held 1 1700000000000\nquotad_moves{qos=\"x\"} 3\n")
	}))
	defer quotad.Close()
	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	password := writePasswordFile(t, 0o600)

	f := Gather(context.Background(), Env{Slurm: slurm.Client{Runner: r}}, Options{
		PoolsPath: testbedPools, QuotadURL: quotad.URL, ElasticdURL: missing.URL, MaxCycleAge: time.Minute, DBPasswordFile: password,
	})
	if f.ConfigErr != nil || f.Config.Get("ClusterName") != "testbed" {
		t.Fatalf("config: %v", f.ConfigErr)
	}
	if f.Plugin.Path != filepath.Join(dir, PluginFile) || f.Plugin.Err == nil || len(f.Plugin.Dirs) != 2 {
		t.Errorf("plugin: %+v", f.Plugin)
	}
	if f.Pools.Path != testbedPools || f.Pools.Err != nil || !bytes.Contains(f.Pools.Data, []byte("pools:")) {
		t.Errorf("pools: %s %v", f.Pools.Path, f.Pools.Err)
	}
	if len(f.Nodes) == 0 || f.NodesErr != nil {
		t.Errorf("nodes: %d, %v", len(f.Nodes), f.NodesErr)
	}
	if f.Quotad != (QuotadAccount{User: "slurmbridge", AdminLevel: "Operator"}) {
		t.Errorf("quotad account: %+v", f.Quotad)
	}
	if q, _ := slurm.QOSByName(f.QOS, "guar-proj-a"); f.QOSErr != nil || len(q.Preempt) != 2 {
		t.Errorf("QOS: %v, %v", f.QOS, f.QOSErr)
	}
	if m := f.QuotadMetrics; m.Err != nil || len(m.Samples) != 2 || m.Samples["quotad_last_successful_cycle_timestamp_seconds"] != 1.7e9 || m.Samples["quotad_lease_held"] != 1 {
		t.Errorf("quotad's metrics: %+v", m)
	}
	if m := f.ElasticdMetrics; m.Err == nil || !strings.Contains(m.Err.Error(), "answered 404 Not Found") {
		t.Errorf("elasticd's metrics: %+v", m)
	}
	if c := f.Credentials; c.Err != nil || c.Mode != 0o600 || !strings.HasPrefix(c.Owner, "uid ") {
		t.Errorf("credentials: %+v", c)
	}
	if f.SlurmctldOnDisk != "22.05.8" {
		t.Errorf("installed slurmctld %q, want 22.05.8", f.SlurmctldOnDisk)
	}
	if f.MaxCycleAge != time.Minute || f.Now.IsZero() {
		t.Errorf("max cycle age %s, now %s", f.MaxCycleAge, f.Now)
	}
}

func TestGatherAsksNoAdminLevelOfAccountsSlurmAlwaysAllows(t *testing.T) {
	for _, tc := range []struct {
		systemd, flag string
		want          QuotadAccount
	}{
		{"User=\nLoadState=not-found\n", "", QuotadAccount{}},
		{"User=\nLoadState=loaded\n", "", QuotadAccount{User: "root"}}, // a unit without User= runs as root
		{"", "slurm", QuotadAccount{User: "slurm"}},                    // SlurmUser
	} {
		r := testbedReplay(t, t.TempDir())
		if tc.systemd != "" {
			delete(r.fails, systemctlShow)
			r.outputs[systemctlShow] = tc.systemd
		}
		f := Gather(context.Background(), Env{Slurm: slurm.Client{Runner: r}}, Options{PoolsPath: testbedPools, QuotadUser: tc.flag})
		if f.Quotad != tc.want {
			t.Errorf("systemd %q, --quotad-user %q: %+v, want %+v", tc.systemd, tc.flag, f.Quotad, tc.want)
		}
	}
}

func TestGatherWithoutSlurmctldReadsOnlyTheLocalFacts(t *testing.T) {
	r := &replay{t: t, fails: map[string]error{"scontrol show config": errors.New("Unable to contact slurm controller")}}
	password := writePasswordFile(t, 0o640)
	pluginDir := t.TempDir()
	f := Gather(context.Background(), Env{Slurm: slurm.Client{Runner: r}}, Options{
		PoolsPath: testbedPools, QuotadURL: "http://127.0.0.1:1/metrics", DBPasswordFile: password, PluginDir: pluginDir,
	})
	if f.ConfigErr == nil || !slices.Equal(r.ran, []string{"scontrol show config", "slurmctld -V"}) {
		t.Fatalf("config error %v; ran %q", f.ConfigErr, r.ran)
	}
	// The installed slurmctld and the plugin it would load are local facts too.
	if f.SlurmctldOnDisk != "22.05.8" || f.Plugin.Path != "" || !slices.Equal(f.Plugin.Dirs, []string{pluginDir}) {
		t.Errorf("installed slurmctld %q, plugin %+v", f.SlurmctldOnDisk, f.Plugin)
	}
	if f.QuotadMetrics.URL != "" || f.Pools.Path != "" {
		t.Errorf("facts that need slurmctld were read: %+v %+v", f.QuotadMetrics, f.Pools)
	}
	if c := f.Credentials; c.Path != password || c.Err == nil || !strings.Contains(c.Err.Error(), "has mode 0640") {
		t.Errorf("credentials: %+v", c)
	}
}

// The pages doctor reads are written by client_golang: a histogram's count and sum are read by
// the names they have on the page, labelled samples are left out, and a page that is not
// Prometheus text is an error, not an empty page.
func TestReadMetricsReadsWhatClientGolangWrites(t *testing.T) {
	reg := prometheus.NewRegistry()
	cycle := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "elasticd_cycle_seconds"})
	lease := prometheus.NewGauge(prometheus.GaugeOpts{Name: "quotad_lease_held"})
	moves := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "quotad_moves_total"}, []string{"qos"})
	reg.MustRegister(cycle, lease, moves)
	cycle.Observe(0.5)
	cycle.Observe(1.5)
	lease.Set(1)
	moves.WithLabelValues("borrow-a100").Add(3)
	page := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer page.Close()

	m := readMetrics(context.Background(), page.Client(), page.URL)
	want := map[string]float64{"elasticd_cycle_seconds_count": 2, "elasticd_cycle_seconds_sum": 2, "quotad_lease_held": 1}
	if m.Err != nil || len(m.Samples) != len(want) {
		t.Fatalf("samples %v, err %v; want %v", m.Samples, m.Err, want)
	}
	for name, v := range want {
		if m.Samples[name] != v {
			t.Errorf("%s = %v, want %v", name, m.Samples[name], v)
		}
	}

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<html>a login page</html>\n")
	}))
	defer garbage.Close()
	if m := readMetrics(context.Background(), garbage.Client(), garbage.URL); !errors.Is(m.Err, ErrNotMetricsPage) {
		t.Errorf("an HTML page read as %v, err %v", m.Samples, m.Err)
	}
}

func TestOfflinePluginDirReadsSlurmConf(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{"ClusterName=x\nPluginDir=/opt/slurm/plugins:/usr/lib/slurm # ours first\n", "/opt/slurm/plugins:/usr/lib/slurm"},
		{"pluginDIR = /opt/p\n", "/opt/p"},
		{"#PluginDir=/commented/out\nPluginDir=\nPluginDir= # nothing\nPluginDir=/last\n", "/last"},
	} {
		conf := filepath.Join(t.TempDir(), "slurm.conf")
		if err := os.WriteFile(conf, []byte(tc.conf), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Setenv("SLURM_CONF", conf)
		if got := offlinePluginDir(""); got != tc.want {
			t.Errorf("slurm.conf %q: PluginDir %q, want %q", tc.conf, got, tc.want)
		}
	}
	if got := offlinePluginDir("/given"); got != "/given" {
		t.Errorf("--plugin-dir /given: %q", got)
	}
}
