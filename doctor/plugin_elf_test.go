package doctor

// The tests that need a C compiler: the ELF reader on a real shared object, and doctor end to
// end, whose plugin check reads one.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// buildPlugin compiles a stand-in Slurm plugin with the given data symbols: its job-record
// table lists layouts, or its own version when none are given.
func buildPlugin(t *testing.T, path, typ string, version uint32, layouts ...uint32) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "plugin.c")
	if len(layouts) == 0 {
		layouts = []uint32{version}
	}
	var table []string
	for _, l := range layouts {
		table = append(table, fmt.Sprintf("%#x", l))
	}
	code := fmt.Sprintf("#include <stdint.h>\nconst char plugin_name[] = \"test\";\nconst char plugin_type[] = %q;\nconst uint32_t plugin_version = %#x;\nconst uint32_t pools_job_layout_releases[] = { %s };\nint init(void) { return 0; }\n",
		typ, version, strings.Join(table, ", "))
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
	if _, err := ReadPluginInfo(testbedPools); err == nil || !strings.Contains(err.Error(), testbedPools) {
		t.Fatalf("a text file read as a plugin: %v", err)
	}
	exe, err := os.Executable() // an ELF file without the symbols
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPluginInfo(exe); !errors.Is(err, ErrNotPlugin) {
		t.Fatalf("test binary: %v", err)
	}
}

// TestGatherLooksWhereSlurmctldLooks: slurmctld takes the first PluginDir entry that has the
// file, so a stale copy first hides a good one after it.
func TestGatherLooksWhereSlurmctldLooks(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	buildPlugin(t, filepath.Join(first, PluginFile), "job_submit/pools", 0x170200)
	buildPlugin(t, filepath.Join(second, PluginFile), "job_submit/pools", 0x160508)
	r := testbedReplay(t, first)
	r.config = setConfig(t, r.config, "PluginDir", first+":"+second)
	f := Gather(context.Background(), Env{Slurm: slurm.Client{Runner: r}}, Options{PoolsPath: testbedPools})
	if f.Plugin.Path != filepath.Join(first, PluginFile) || f.Plugin.Info.Version != 0x170200 {
		t.Fatalf("%+v", f.Plugin)
	}
	// --plugin-dir wins over slurmctld's PluginDir.
	f = Gather(context.Background(), Env{Slurm: slurm.Client{Runner: r}}, Options{PoolsPath: testbedPools, PluginDir: second})
	if f.Plugin.Path != filepath.Join(second, PluginFile) || f.Plugin.Info.Version != 0x160508 {
		t.Fatalf("--plugin-dir: %+v", f.Plugin)
	}
}

type result struct {
	code        int
	out, errOut string
}

// problemLines are the PROBLEM lines with their fix lines.
func problemLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, string(Problem)) || strings.Contains(l, " fix: ") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestDoctorEndToEnd runs slurmbridge-doctor against a healthy testbed-like cluster (a plugin
// built for its Slurm, both daemons serving metrics, a 0600 password file), then with its
// plugin built for the previous micro release.
func TestDoctorEndToEnd(t *testing.T) {
	pluginDir := t.TempDir()
	plugin := filepath.Join(pluginDir, PluginFile)
	buildPlugin(t, plugin, "job_submit/pools", 0x160508)
	r := testbedReplay(t, pluginDir)
	quotad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "quotad_last_successful_cycle_timestamp_seconds %g\n", float64(time.Now().Add(-10*time.Second).UnixNano())/1e9)
	}))
	defer quotad.Close()
	elasticd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "elasticd_cycle_seconds_bucket{le=\"+Inf\"} 42\nelasticd_cycle_seconds_sum 1.5\nelasticd_cycle_seconds_count 42\n")
	}))
	defer elasticd.Close()
	password := writePasswordFile(t, 0o600)
	doctor := func() result {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), []string{"slurmbridge-doctor", "--config", testbedPools,
			"--quotad-url", quotad.URL + "/metrics", "--elasticd-url", elasticd.URL + "/metrics", "--db-password-file", password},
			Env{Slurm: slurm.Client{Runner: r}, Out: &out, Err: &errOut})
		return result{code, out.String(), errOut.String()}
	}

	res := doctor()
	if res.code != 0 || !strings.HasSuffix(res.out, NoProblems+"\n") || len(problemLines(res.out)) != 0 || res.errOut != "" {
		t.Fatalf("exit %d, err %q, out:\n%s", res.code, res.errOut, res.out)
	}
	testbed.MustContain(t, "doctor output", res.out,
		"ok       slurmctld   Slurm 22.05.8, cluster testbed\n",
		"ok       plugin      "+plugin+" built for Slurm 22.05.8, as slurmctld runs\n",
		"ok       pools       "+testbedPools+": OK, 4 pools match the cluster\n",
		"skip     quotad-user systemd does not know quotad.service",
		"ok       quotad      "+quotad.URL+"/metrics: last successful cycle 10s ago\n",
		"ok       elasticd    "+elasticd.URL+"/metrics: 42 cycles\n",
		"ok       credentials "+password+": mode 0600",
	)

	// The same plugin, its 4 bytes of plugin_version rewritten to 22.05.7.
	patchPluginVersion(t, plugin, plugin+".new", 0x160507)
	if err := os.Rename(plugin+".new", plugin); err != nil {
		t.Fatal(err)
	}
	res = doctor()
	want := []string{
		"PROBLEM  plugin      " + plugin + " was built for Slurm 22.05.7 but slurmctld runs 22.05.8: slurmctld refuses to load it (the version must match to the micro release)",
		"                     fix: rebuild and reinstall it on this Slurm: make plugin && sudo make install-plugin (or install the slurmbridge-controller package built against it), then restart slurmctld",
	}
	if got := problemLines(res.out); res.code != 1 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exit %d, problems:\n%s\nwant:\n%s", res.code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if res.errOut != "slurmbridge-doctor: doctor: 1 problem\n" {
		t.Errorf("stderr %q", res.errOut)
	}
}

func TestDoctorUsage(t *testing.T) {
	var out, errOut bytes.Buffer
	env := Env{Slurm: slurm.Client{Runner: &replay{t: t}}, Out: &out, Err: &errOut}
	if code := Main(context.Background(), []string{"slurmbridge-doctor", "extra"}, env); code != exitUsage || !strings.Contains(errOut.String(), `"extra"`) {
		t.Errorf("an argument: exit %d, %q", code, errOut.String())
	}
	if code := Main(context.Background(), []string{"slurmbridge-doctor", "--no-such-flag"}, env); code != 2 {
		t.Errorf("an unknown flag: exit %d", code)
	}
	if code := Main(context.Background(), []string{"slurmbridge-doctor", "--help"}, env); code != 0 || !strings.Contains(out.String(), "--quotad-url") || !strings.Contains(out.String(), "--config") {
		t.Errorf("--help: exit %d:\n%s", code, out.String())
	}
}

func TestRunPathOfThisTestBinary(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Go binaries carry no RUNPATH: the error names the file.
	if dir, err := RunPath(exe); err == nil || !strings.Contains(err.Error(), "no RUNPATH") {
		t.Errorf("RunPath(%s) = %q, %v; want no RUNPATH", exe, dir, err)
	}
}

// SlurmVersionString spells a plugin_version as Slurm does ("22.05.8"), for the tests' messages.
func SlurmVersionString(n uint32) string { return slurm.VersionOfNumber(n).String() }
