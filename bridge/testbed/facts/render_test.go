package facts

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func repoFacts(t *testing.T) (*Facts, string) {
	t.Helper()
	f, err := LoadRepo()
	if err != nil {
		t.Fatal(err)
	}
	return f, filepath.Join("..", "..", "..", filepath.Dir(File))
}

// The golden files are what the shell scripts rendered before this renderer replaced them
// (testdata/capture.sh ran their sed lists on these same inputs), so each testbed's
// configuration stays what it was.
var goldenSites = map[string]Site{
	// testbed/testbed.sh on a host, or in a release container (testbed/container.sh): the same
	// script, another host name.
	"host": {Dir: "/tmp/slurmbridge-testbed", Host: "tbhost", CommParams: "NoCtldInAddrAny,NoInAddrAny",
		JobSubmitLine: "JobSubmitPlugins=pools", PluginDir: "/tmp/slurmbridge-testbed/plugins",
		SlurmPluginDir: "/usr/lib/x86_64-linux-gnu/slurm-wlm", SpankElasticSO: "/tmp/slurmbridge-testbed/plugins/spank_elastic.so",
		DBPassword: "0123456789abcdef"},
	// A second local testbed on ports of its own, without the plugin, on a host name that
	// does not resolve to loopback.
	"host-ports": {Dir: "/var/tmp/tb2", Host: "tbhost", CommParams: "NoCtldInAddrAny",
		JobSubmitLine: "#JobSubmitPlugins=pools (bin/job_submit_pools.so was not built)", PluginDir: "/var/tmp/tb2/plugins",
		SlurmPluginDir: "/usr/lib/x86_64-linux-gnu/slurm-wlm", SpankElasticSO: "/var/tmp/tb2/plugins/spank_elastic.so",
		Ports:      LocalPorts{DB: 23306, Ctld: 26817, Dbd: 26819, SlurmdBase: 27001, RdzvBase: 39400},
		DBPassword: "0123456789abcdef"},
	// docker/slurm-testbed's image, with and without the job_submit plugin.
	"container": {Container: true, Dir: "/srv/slurmbridge", JobSubmitLine: "JobSubmitPlugins=pools",
		PluginDir: "/srv/slurmbridge/plugins", SlurmPluginDir: "/usr/lib/x86_64-linux-gnu/slurm-wlm",
		SpankElasticSO: "/srv/slurmbridge/plugins/spank_elastic.so", DBPassword: "0123456789abcdef"},
	"container-unbuilt": {Container: true, Dir: "/srv/slurmbridge", JobSubmitLine: "#JobSubmitPlugins=pools (job_submit_pools.so was not built)",
		PluginDir: "/srv/slurmbridge/plugins", SlurmPluginDir: "/usr/lib/x86_64-linux-gnu/slurm-wlm",
		SpankElasticSO: "/srv/slurmbridge/plugins/spank_elastic.so", DBPassword: "0123456789abcdef"},
}

func TestRenderMatchesWhatTheScriptsRendered(t *testing.T) {
	f, templates := repoFacts(t)
	for name, site := range goldenSites {
		for _, file := range []string{"slurm.conf", "gres.conf", "plugstack.conf", "slurmdbd.conf"} {
			want, err := os.ReadFile(filepath.Join("testdata", name, file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Render(templates, file, site)
			if err != nil {
				t.Fatalf("%s/%s: %v", name, file, err)
			}
			if file == "slurm.conf" {
				// Its opening comment was about the old placeholders; the rest is byte for byte.
				got, want = afterLeadingComment(got), afterLeadingComment(want)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s differs from what the script rendered:\n%s", name, file, firstDifference(got, want))
			}
		}
	}
}

// The committed quotas.yaml is read by quotad.sh, the container testbed and many tests by its
// path: it must say what the facts say.
func TestQuotasFileIsRenderedFromFacts(t *testing.T) {
	f, templates := repoFacts(t)
	got, err := f.Render(templates, "quotas.yaml", Site{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(templates, "quotas.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("slurm-conf/testbed/quotas.yaml is not what facts.yaml says; render it again "+
			"(make testbed-render):\n%s", firstDifference(got, want))
	}
}

func TestRenderRefusesWhatItCannotFill(t *testing.T) {
	f, templates := repoFacts(t)
	site := goldenSites["host"]
	site.DBPassword = ""
	if _, err := f.Render(templates, "slurmdbd.conf", site); err == nil {
		t.Error("slurmdbd.conf rendered without a database password")
	}
	if _, err := f.Render(templates, "cgroup.conf", goldenSites["host"]); err == nil {
		t.Error("rendered a file that has no template")
	}
	site = goldenSites["host"]
	site.Host = ""
	if _, err := f.Render(templates, "slurm.conf", site); err == nil {
		t.Error("local slurm.conf rendered without a host name")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gres.conf.in"), []byte("{{.NoSuchFact}}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Render(dir, "gres.conf", goldenSites["host"]); err == nil {
		t.Error("a template naming an unknown fact rendered")
	}
}

func afterLeadingComment(b []byte) []byte {
	for len(b) > 0 && b[0] == '#' {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return b
}

func firstDifference(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d:\n got  %q\n want %q", i+1, gl, wl)
		}
	}
	return ""
}

// db-setup.sh's output, from the same password and hosts; only its SQL comments are gone (the
// template's notes are a template comment now).
func TestDBSetupMatchesWhatTheScriptRendered(t *testing.T) {
	_, templates := repoFacts(t)
	for golden, clients := range map[string][]string{"host": {"127.0.0.1", "localhost"}, "container": {"%"}} {
		want, err := os.ReadFile(filepath.Join("testdata", golden, "db-setup.sql"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DBSetup(templates, "0123456789abcdef", clients)
		if err != nil {
			t.Fatal(err)
		}
		if want := withoutSQLComments(want); !bytes.Equal(got, want) {
			t.Errorf("%s: differs from db-setup.sh's:\n%s", golden, firstDifference(got, want))
		}
	}
	for _, bad := range [][2]string{{"pass'word", "%"}, {"", "%"}, {"0123", "host'--"}, {"0123", ""}} {
		if _, err := DBSetup(templates, bad[0], []string{bad[1]}); err == nil {
			t.Errorf("db-setup rendered with password %q for client %q", bad[0], bad[1])
		}
	}
}

func withoutSQLComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("--")) {
			out = append(out, line...)
		}
	}
	return out
}

// A pool with its own node shape and GPU count (a preset of a real cluster) gets them on its
// node line, its nodes' gres.conf lines name that many GPU files, and the shell knows each
// node's count; the other pools keep the facts' shape.
func TestPoolsOfTheirOwnShape(t *testing.T) {
	f, templates := repoFacts(t)
	f.Pools = append(f.Pools,
		Pool{Name: "t4x2", Nodes: 3, GPU: "t4", GPUsPerNode: 2, Node: &Shape{Sockets: 1, CoresPerSocket: 104, MemoryMB: 524288}},
		Pool{Name: "a10x1", Nodes: 1, GPU: "a10", GPUsPerNode: 1})
	if err := f.validate(); err != nil {
		t.Fatal(err)
	}
	conf, err := f.Render(templates, "slurm.conf", goldenSites["host"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NodeName=t4x2-[1-3] NodeHostname=tbhost NodeAddr=127.0.0.1 Port=17008-17010 Sockets=1 CoresPerSocket=104 RealMemory=524288 Gres=gpu:t4:2\n",
		"NodeName=a10x1-1 NodeHostname=tbhost NodeAddr=127.0.0.1 Port=17011 Gres=gpu:a10:1\n",
		"NodeName=a100-[1-2] NodeHostname=tbhost NodeAddr=127.0.0.1 Port=17003-17004 Gres=gpu:a100:4 Feature=a100\n",
	} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("slurm.conf has no line\n%swhere it says:\n%s", want, conf)
		}
	}
	gres, err := f.Render(templates, "gres.conf", goldenSites["host"])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"t4x2-3 Name=gpu Type=t4 File=/tmp/slurmbridge-testbed/gpus/t4x2-3/nvidia[0-1]\n", "a10x1-1 Name=gpu Type=a10 File=/tmp/slurmbridge-testbed/gpus/a10x1-1/nvidia0\n"} {
		if !strings.Contains(string(gres), want) {
			t.Errorf("gres.conf has no line ending\n%swhere it says:\n%s", want, gres)
		}
	}
	var sh strings.Builder
	if err := f.WriteShell(&sh); err != nil {
		t.Fatal(err)
	}
	if want := "GPU_NODE_GPUS=(4 4 4 4 4 2 2 2 1)\n"; !strings.Contains(sh.String(), want) {
		t.Errorf("the shell facts have no %q:\n%s", want, sh.String())
	}
	if got, want := f.GPUs(), 20+3*2+1; got != want {
		t.Errorf("GPUs() = %d, want %d", got, want)
	}
}

func TestPoolsOfTheirOwnShapeAreChecked(t *testing.T) {
	for _, tc := range []struct {
		pool Pool
		want string
	}{
		{Pool{Name: "x", Nodes: 1, GPUsPerNode: 2}, `pool "x": gpusPerNode 2 needs a gpu type`},
		{Pool{Name: "x", Nodes: 1, GPU: "t4", GPUsPerNode: -1}, `pool "x": gpusPerNode -1`},
		{Pool{Name: "x", Nodes: 1, Node: &Shape{Sockets: 1, CoresPerSocket: 0, MemoryMB: 1}}, `pool "x": node: sockets`},
		// 17001 onwards: 15,767 nodes reach 32767, one more the ephemeral ports; from 12,400
		// they meet the rendezvous ports 29400-39399.
		{Pool{Name: "x", Nodes: 15768 - 7}, "into the ephemeral range"},
		{Pool{Name: "x", Nodes: 12400 - 7}, "meet the rendezvous ports 29400-39399"},
		// Past 19464, elasticd's port.
		{Pool{Name: "x", Nodes: 2500}, "local.ports.elasticd 19464 is among"},
	} {
		f, _ := repoFacts(t)
		f.Pools = append(f.Pools, tc.pool)
		if err := f.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error saying %q", tc.pool, err, tc.want)
		}
	}
}
