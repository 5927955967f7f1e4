package facts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/template"
)

// Files are the files Render knows, each from the template NAME.in beside the facts file.
var Files = []string{"slurm.conf", "gres.conf", "plugstack.conf", "slurmdbd.conf", "quotas.yaml"}

// Site is what a run of a testbed adds to the facts: where it lives and what this machine has.
type Site struct {
	// Container: the container testbed (one container per daemon and node, the facts'
	// container ports and hosts); otherwise the local testbed on Host's loopback.
	Container bool
	// SiteCluster: the site cluster (site/): the facts' site hosts, two slurmctld, Slurm's
	// default ports and paths; templates from slurm-conf/site where it has its own.
	SiteCluster bool
	Dir         string // TESTBED_DIR
	// Host is the local testbed's host name (hostname -s); CommParams its
	// CommunicationParameters (testbed.sh knows whether the host name resolves to loopback).
	Host, CommParams string
	// JobSubmitLine is slurm.conf's JobSubmitPlugins line, commented out with the reason when
	// the plugin is not there.
	JobSubmitLine string
	// PluginDir is the testbed's own plugin directory, searched before SlurmPluginDir; the SPANK
	// plugin plugstack.conf names is SpankElasticSO.
	PluginDir, SlurmPluginDir, SpankElasticSO string
	// Ports are the local testbed's ports; a zero one is the facts'.
	Ports LocalPorts
	// DBPassword is slurmdbd.conf's StoragePass (slurmdbd.conf alone needs it).
	DBPassword string
}

// Render fills the template of file (one of Files) in templateDir from the facts and the site.
func (f *Facts) Render(templateDir, file string, site Site) ([]byte, error) {
	if !slices.Contains(Files, file) {
		return nil, fmt.Errorf("no template for %q (known: %s)", file, strings.Join(Files, ", "))
	}
	// quotas.yaml is the same for every site; the others need to know where they run.
	if file != "quotas.yaml" {
		if site.Dir == "" {
			return nil, fmt.Errorf("%s: no testbed directory", file)
		}
		if !site.Container && !site.SiteCluster && site.Host == "" {
			return nil, fmt.Errorf("%s: no host name", file)
		}
	}
	if file == "slurmdbd.conf" && site.DBPassword == "" {
		return nil, errors.New("slurmdbd.conf: no database password")
	}
	d := f.data(site)
	path := filepath.Join(templateDir, file+".in")
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t, err := template.New(filepath.Base(path)).Option("missingkey=error").
		Funcs(template.FuncMap{"join": strings.Join, "flow": flowMap}).Parse(string(text))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, d); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// data is what the templates see.
type data struct {
	*Facts
	Dir                                  string
	CtldHost, CtldAddr, DbdHost, DbdAddr string
	// BackupCtldHost is the site cluster's second slurmctld ("" elsewhere).
	BackupCtldHost                          string
	DBHost                                  string
	CtldPort, DbdPort, DBPort, RdzvPortBase int
	CommParams, JobSubmitLine, PluginDirs   string
	SpankElasticSO, DBPassword              string
	// NodeLines are slurm.conf's node lines, one per pool.
	NodeLines []nodeLine
	// GPUNodes are gres.conf's lines, one per GPU node.
	GPUNodes []gpuNode
	// AccountingTRES are the GPU TRES slurmdbd records: gres/gpu and each type.
	AccountingTRES string
	// GPUSummary counts the GPUs of each type for quotas.yaml's header.
	GPUSummary string
}

type nodeLine struct {
	Pool
	Hosts, Hostname, Addr, Port string
	// Shape is the pool's own node shape (nil: the facts' node, slurm.conf's NodeName=DEFAULT);
	// GPUs its nodes' GPU count.
	Shape *Shape
	GPUs  int
}

// gpuNode is a GPU node of gres.conf: its fake GPU files as File= names them, nvidia[0-3].
type gpuNode struct {
	Name, Type, Files string
}

func (f *Facts) nodeLine(p Pool, hostname, addr, port string) nodeLine {
	return nodeLine{Pool: p, Hosts: p.HostList(), Hostname: hostname, Addr: addr, Port: port, Shape: p.Node, GPUs: f.GPUsOf(p)}
}

func (f *Facts) data(site Site) data {
	d := data{Facts: f, Dir: site.Dir, JobSubmitLine: site.JobSubmitLine,
		PluginDirs: site.PluginDir + ":" + site.SlurmPluginDir, SpankElasticSO: site.SpankElasticSO,
		DBPassword: site.DBPassword}
	if site.Container || site.SiteCluster {
		// Both are networks of hosts on Slurm's default ports; they differ in the hosts' names.
		c := f.Container
		d.CtldHost, d.CtldAddr, d.DbdHost, d.DbdAddr, d.DBHost = c.Hosts.Ctld, c.Hosts.Ctld, c.Hosts.Dbd, c.Hosts.Dbd, c.Hosts.DB
		if site.SiteCluster {
			h := f.Site
			d.CtldHost, d.CtldAddr, d.BackupCtldHost = h.Controllers[0], h.Controllers[0], h.Controllers[1]
			d.DbdHost, d.DbdAddr, d.DBHost = h.DB, h.DB, h.DB
		}
		d.CtldPort, d.DbdPort, d.DBPort, d.RdzvPortBase = c.Ports.Ctld, c.Ports.Dbd, c.Ports.DB, c.Ports.RdzvBase
		d.CommParams = c.CommParams
		// One container per node, named after it: its host name and address are its name.
		for _, p := range f.Pools {
			d.NodeLines = append(d.NodeLines, f.nodeLine(p, p.HostList(), p.HostList(), strconv.Itoa(c.Ports.Slurmd)))
		}
	} else {
		ports := site.Ports.or(f.Local.Ports)
		d.CtldHost, d.CtldAddr, d.DbdHost, d.DbdAddr, d.DBHost = site.Host, "127.0.0.1", site.Host, "127.0.0.1", "127.0.0.1"
		d.CtldPort, d.DbdPort, d.DBPort, d.RdzvPortBase = ports.Ctld, ports.Dbd, ports.DB, ports.RdzvBase
		d.CommParams = site.CommParams
		// One slurmd per node on this host, each on its own port.
		first := ports.SlurmdBase
		for _, p := range f.Pools {
			port := strconv.Itoa(first)
			if p.Nodes > 1 {
				port += "-" + strconv.Itoa(first+p.Nodes-1)
			}
			d.NodeLines = append(d.NodeLines, f.nodeLine(p, site.Host, "127.0.0.1", port))
			first += p.Nodes
		}
	}
	for _, p := range f.Pools {
		if n := f.GPUsOf(p); n > 0 {
			files := "nvidia0"
			if n > 1 {
				files = fmt.Sprintf("nvidia[0-%d]", n-1)
			}
			for _, node := range p.NodeNames() {
				d.GPUNodes = append(d.GPUNodes, gpuNode{Name: node, Type: p.GPU, Files: files})
			}
		}
	}
	tres := []string{"gres/gpu"}
	for _, t := range f.GPUTypes() {
		tres = append(tres, "gres/gpu:"+t)
	}
	d.AccountingTRES = strings.Join(tres, ",")
	d.GPUSummary = f.gpuSummary()
	return d
}

// or is p with each zero port taken from def.
func (p LocalPorts) or(def LocalPorts) LocalPorts {
	pick := func(v, d int) int {
		if v == 0 {
			return d
		}
		return v
	}
	return LocalPorts{DB: pick(p.DB, def.DB), Ctld: pick(p.Ctld, def.Ctld), Dbd: pick(p.Dbd, def.Dbd),
		SlurmdBase: pick(p.SlurmdBase, def.SlurmdBase), RdzvBase: pick(p.RdzvBase, def.RdzvBase)}
}

// gpuSummary says e.g. "12 a100 (8 in partition a100, 4 in a100-spot) and 8 v100".
func (f *Facts) gpuSummary() string {
	var parts []string
	for _, t := range f.GPUTypes() {
		total := 0
		var in []string
		for _, p := range f.Pools {
			if p.GPU == t {
				n := p.Nodes * f.GPUsOf(p)
				total += n
				in = append(in, fmt.Sprintf("%d in %s", n, p.Name))
			}
		}
		s := fmt.Sprintf("%d %s", total, t)
		if len(in) > 1 {
			s += " (" + strings.Replace(strings.Join(in, ", "), " in ", " in partition ", 1) + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

// flowMap writes a GPU count map as a YAML flow mapping, keys sorted: {a100: 4}.
func flowMap(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kv := make([]string, len(keys))
	for i, k := range keys {
		kv[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return "{" + strings.Join(kv, ", ") + "}"
}
