// Package facts holds the testbed's facts (slurm-conf/testbed/facts.yaml: its projects and
// users, pools and nodes, GPUs and ports) and renders the testbed's configuration files from
// them: slurm.conf, gres.conf, plugstack.conf, slurmdbd.conf and quotas.yaml, for the local
// testbed (testbed/testbed.sh) and the container one (docker/slurm-testbed) alike.
//
// It reads files and fills templates; it starts nothing. testbed/cmd/testbed-render is its
// command for the shell scripts, and bridge/testbed reads the same facts.
package facts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// File is the facts file's path relative to the repository root.
const File = "slurm-conf/testbed/facts.yaml"

// Facts is what facts.yaml says.
type Facts struct {
	Cluster     string    `yaml:"cluster"`
	Projects    []Project `yaml:"projects"`
	Node        Shape     `yaml:"node"`
	GPUsPerNode int       `yaml:"gpusPerNode"`
	Pools       []Pool    `yaml:"pools"`
	Local       struct {
		Ports LocalPorts `yaml:"ports"`
		// JobAcctGather is slurm.conf's JobAcctGatherType on this host, jobacct_gather/NAME
		// (default linux). On one host every job's sampler reads every process in /proc, so
		// a preset of many nodes and jobs sets none.
		JobAcctGather string `yaml:"jobAcctGather,omitempty"`
	} `yaml:"local"`
	Container struct {
		Ports      ContainerPorts `yaml:"ports"`
		Hosts      Hosts          `yaml:"hosts"`
		CommParams string         `yaml:"commParams"`
		FirstUID   int            `yaml:"firstUID"`
	} `yaml:"container"`
	// Site is the site cluster's hosts (site/, make site-up): each a container with systemd,
	// Slurm's default ports, slurmbridge from its packages; a node's host is named after it.
	Site   SiteHosts     `yaml:"site"`
	Quotas QuotaSettings `yaml:"quotas"`
}

// SiteHosts are the site cluster's hosts other than the nodes: slurmctld's primary and backup
// (quotad runs on both), the database host (MariaDB and slurmdbd) and the login host where
// users submit and elasticd runs.
type SiteHosts struct {
	Controllers []string `yaml:"controllers"`
	DB          string   `yaml:"db"`
	Login       string   `yaml:"login"`
}

// Project is a Slurm account with its one user and its guaranteed GPUs by type.
type Project struct {
	Account string         `yaml:"account"`
	User    string         `yaml:"user"`
	GPUs    map[string]int `yaml:"gpus"`
}

// Shape is every node's CPUs and memory.
type Shape struct {
	Sockets        int `yaml:"sockets"`
	CoresPerSocket int `yaml:"coresPerSocket"`
	MemoryMB       int `yaml:"memoryMB"`
}

// Pool is a partition of Nodes nodes named Name-1 .. Name-Nodes; GPU is their GPU type ("" for
// a CPU pool).
type Pool struct {
	Name     string   `yaml:"name"`
	Nodes    int      `yaml:"nodes"`
	Default  bool     `yaml:"default,omitempty"`
	GPU      string   `yaml:"gpu,omitempty"`
	Features []string `yaml:"features,omitempty"`
	// GPUsPerNode and Node, when set, are this pool's own GPUs per node and node shape, as in
	// a preset of a real cluster with many node shapes; else the facts' gpusPerNode and node.
	GPUsPerNode int    `yaml:"gpusPerNode,omitempty"`
	Node        *Shape `yaml:"node,omitempty"`
}

// LocalPorts are the local testbed's ports; slurmd of the i-th node (from 0) listens on
// SlurmdBase+i. Quotad is quotad's metrics and API port, Elasticd elasticd's.
type LocalPorts struct {
	DB         int `yaml:"db"`
	Ctld       int `yaml:"ctld"`
	Dbd        int `yaml:"dbd"`
	SlurmdBase int `yaml:"slurmdBase"`
	RdzvBase   int `yaml:"rdzvBase"`
	Quotad     int `yaml:"quotad"`
	Elasticd   int `yaml:"elasticd"`
}

// ContainerPorts are the container testbed's ports, the same in every container.
type ContainerPorts struct {
	DB       int `yaml:"db"`
	Ctld     int `yaml:"ctld"`
	Dbd      int `yaml:"dbd"`
	Slurmd   int `yaml:"slurmd"`
	RdzvBase int `yaml:"rdzvBase"`
	Quotad   int `yaml:"quotad"`
	Elasticd int `yaml:"elasticd"`
}

// Hosts are the container testbed's service names of the database, slurmctld and slurmdbd.
type Hosts struct {
	DB   string `yaml:"db"`
	Ctld string `yaml:"ctld"`
	Dbd  string `yaml:"dbd"`
}

// QuotaSettings are quotas.yaml's times, as quotactl reads them.
type QuotaSettings struct {
	GraceTime         string `yaml:"graceTime"`
	PreemptExemptTime string `yaml:"preemptExemptTime"`
	MaxSnapshotAge    string `yaml:"maxSnapshotAge"`
}

// GuaranteedQOS and BorrowQOS are quotas.yaml's QOS patterns (settings.guaranteedQOS,
// borrowQOS): bridge/pools' defaults on every testbed. The scripts get each project's names
// (WriteShell), built by pools.QOSName.
func (QuotaSettings) GuaranteedQOS() string { return pools.DefaultGuaranteedQOS }

// BorrowQOS: see GuaranteedQOS.
func (QuotaSettings) BorrowQOS() string { return pools.DefaultBorrowQOS }

// Load reads a facts file; an unknown key or a missing fact is an error.
func Load(path string) (*Facts, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse reads facts from data; source names it in errors.
func Parse(data []byte, source string) (*Facts, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f Facts
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if err := f.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return &f, nil
}

// LoadRepo reads the facts file of the source tree this package was built from: the tests'
// way to the testbed's facts wherever they run.
func LoadRepo() (*Facts, error) {
	return Load(filepath.Join(RepoDir(), filepath.Base(File)))
}

// RepoDir is the facts file's folder (slurm-conf/testbed) in the source tree this package was
// built from, with the files beside it: quotas.yaml, pools.yaml.
func RepoDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", filepath.Dir(File))
}

func (f *Facts) validate() error {
	var errs []error
	if f.Cluster == "" {
		errs = append(errs, errors.New("no cluster"))
	}
	if len(f.Projects) == 0 {
		errs = append(errs, errors.New("no projects"))
	}
	accounts, users := map[string]bool{}, map[string]bool{}
	for _, p := range f.Projects {
		if p.Account == "" || p.User == "" {
			errs = append(errs, fmt.Errorf("project %q: account and user are both needed", p.Account))
		}
		// The scripts split "account:user" at the colon and use both as words.
		for _, name := range []string{p.Account, p.User} {
			if strings.ContainsAny(name, ": \t\n'\"$`\\") {
				errs = append(errs, fmt.Errorf("project %q: %q may not hold a colon, space or quote", p.Account, name))
			}
		}
		// Each project is one account and one user of its own; an account may share its
		// user's name, as Slurm's accounts and users are apart.
		if p.Account != "" && accounts[p.Account] {
			errs = append(errs, fmt.Errorf("project %q twice", p.Account))
		}
		if p.User != "" && users[p.User] {
			errs = append(errs, fmt.Errorf("project %q: user %q is another project's too", p.Account, p.User))
		}
		accounts[p.Account], users[p.User] = true, true
	}
	for _, p := range []struct {
		what string
		port int
	}{
		{"local.ports.db", f.Local.Ports.DB}, {"local.ports.ctld", f.Local.Ports.Ctld},
		{"local.ports.dbd", f.Local.Ports.Dbd}, {"local.ports.slurmdBase", f.Local.Ports.SlurmdBase},
		{"local.ports.rdzvBase", f.Local.Ports.RdzvBase}, {"container.ports.db", f.Container.Ports.DB},
		{"container.ports.ctld", f.Container.Ports.Ctld}, {"container.ports.dbd", f.Container.Ports.Dbd},
		{"container.ports.slurmd", f.Container.Ports.Slurmd}, {"container.ports.rdzvBase", f.Container.Ports.RdzvBase},
		{"local.ports.quotad", f.Local.Ports.Quotad}, {"local.ports.elasticd", f.Local.Ports.Elasticd},
		{"container.ports.quotad", f.Container.Ports.Quotad}, {"container.ports.elasticd", f.Container.Ports.Elasticd},
	} {
		if p.port < 1 || p.port > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d is no port", p.what, p.port))
		}
	}
	if g := f.Local.JobAcctGather; g != "" && g != "linux" && g != "none" {
		errs = append(errs, fmt.Errorf("local.jobAcctGather %q: want linux or none", g))
	}
	if f.Node.Sockets < 1 || f.Node.CoresPerSocket < 1 || f.Node.MemoryMB < 1 {
		errs = append(errs, errors.New("node: sockets, coresPerSocket and memoryMB must be positive"))
	}
	if f.GPUsPerNode < 1 {
		errs = append(errs, errors.New("gpusPerNode must be positive"))
	}
	if len(f.Pools) == 0 {
		errs = append(errs, errors.New("no pools"))
	}
	seen := map[string]bool{}
	for _, p := range f.Pools {
		if p.Name == "" || p.Nodes < 1 {
			errs = append(errs, fmt.Errorf("pool %q: a name and at least one node are needed", p.Name))
		}
		if seen[p.Name] {
			errs = append(errs, fmt.Errorf("pool %q twice", p.Name))
		}
		seen[p.Name] = true
		switch {
		case p.GPUsPerNode < 0, p.GPUsPerNode > 0 && p.GPU == "":
			errs = append(errs, fmt.Errorf("pool %q: gpusPerNode %d needs a gpu type and a positive count", p.Name, p.GPUsPerNode))
		case p.Node != nil && (p.Node.Sockets < 1 || p.Node.CoresPerSocket < 1 || p.Node.MemoryMB < 1):
			errs = append(errs, fmt.Errorf("pool %q: node: sockets, coresPerSocket and memoryMB must be positive", p.Name))
		}
	}
	// One slurmd per node on this host, on consecutive ports: they must stay clear of the
	// testbed's other ports and below the kernel's ephemeral range (32768 on Linux).
	if n, l := len(f.NodeNames()), f.Local.Ports; n > 0 && l.SlurmdBase > 0 {
		last := l.SlurmdBase + n - 1
		if last >= 32768 {
			errs = append(errs, fmt.Errorf("local.ports.slurmdBase: %d nodes need ports %d-%d, into the ephemeral range from 32768", n, l.SlurmdBase, last))
		}
		for what, port := range map[string]int{"db": l.DB, "ctld": l.Ctld, "dbd": l.Dbd, "quotad": l.Quotad, "elasticd": l.Elasticd} {
			if port >= l.SlurmdBase && port <= last {
				errs = append(errs, fmt.Errorf("local.ports.%s %d is among the %d nodes' slurmd ports %d-%d", what, port, n, l.SlurmdBase, last))
			}
		}
		// Elastic jobs' rendezvous take rdzvBase + job id modulo 10000.
		if l.RdzvBase > 0 && l.SlurmdBase <= l.RdzvBase+9999 && last >= l.RdzvBase {
			errs = append(errs, fmt.Errorf("local.ports: the %d nodes' slurmd ports %d-%d meet the rendezvous ports %d-%d", n, l.SlurmdBase, last, l.RdzvBase, l.RdzvBase+9999))
		}
	}
	if len(f.Site.Controllers) != 2 || f.Site.DB == "" || f.Site.Login == "" {
		errs = append(errs, errors.New("site: two controllers (primary and backup), a db host and a login host are needed"))
	}
	if f.Container.FirstUID < 1000 {
		errs = append(errs, errors.New("container: firstUID must be 1000 or more (a user's, not a system account's)"))
	}
	if f.Quotas.GraceTime == "" || f.Quotas.PreemptExemptTime == "" || f.Quotas.MaxSnapshotAge == "" {
		errs = append(errs, errors.New("quotas: graceTime, preemptExemptTime and maxSnapshotAge are needed"))
	}
	// quotad reads them as Go durations; the scripts get preemptExemptTime in seconds.
	for what, d := range map[string]string{"graceTime": f.Quotas.GraceTime, "preemptExemptTime": f.Quotas.PreemptExemptTime, "maxSnapshotAge": f.Quotas.MaxSnapshotAge} {
		if _, err := time.ParseDuration(d); d != "" && err != nil {
			errs = append(errs, fmt.Errorf("quotas.%s: %w", what, err))
		}
	}
	return errors.Join(errs...)
}

// Users maps each user to its project (Slurm account).
func (f *Facts) Users() map[string]string {
	m := make(map[string]string, len(f.Projects))
	for _, p := range f.Projects {
		m[p.User] = p.Account
	}
	return m
}

// ShapeOf is the shape of pool p's nodes: its own, else the facts' node.
func (f *Facts) ShapeOf(p Pool) Shape {
	if p.Node != nil {
		return *p.Node
	}
	return f.Node
}

// GPUsOf is the number of GPUs on each of pool p's nodes: 0 in a CPU pool, else its own
// gpusPerNode or the facts'.
func (f *Facts) GPUsOf(p Pool) int {
	switch {
	case p.GPU == "":
		return 0
	case p.GPUsPerNode > 0:
		return p.GPUsPerNode
	}
	return f.GPUsPerNode
}

// GPUs is the cluster's GPU count.
func (f *Facts) GPUs() int {
	n := 0
	for _, p := range f.Pools {
		n += p.Nodes * f.GPUsOf(p)
	}
	return n
}

// NodeNames are the pool's nodes.
func (p Pool) NodeNames() []string {
	names := make([]string, p.Nodes)
	for i := range names {
		names[i] = p.Name + "-" + strconv.Itoa(i+1)
	}
	return names
}

// HostList is the pool's nodes as Slurm writes them: cpu-[1-2], or a100-spot-1 alone.
func (p Pool) HostList() string {
	if p.Nodes == 1 {
		return p.Name + "-1"
	}
	return fmt.Sprintf("%s-[1-%d]", p.Name, p.Nodes)
}

// NodeNames are every node, in the pools' order.
func (f *Facts) NodeNames() []string {
	var names []string
	for _, p := range f.Pools {
		names = append(names, p.NodeNames()...)
	}
	return names
}

// GPUNodeNames are the nodes with GPUs, in the pools' order.
func (f *Facts) GPUNodeNames() []string {
	var names []string
	for _, p := range f.Pools {
		if p.GPU != "" {
			names = append(names, p.NodeNames()...)
		}
	}
	return names
}

// GPUNodeCounts are the GPUs of each node of GPUNodeNames, in the same order.
func (f *Facts) GPUNodeCounts() []int {
	var counts []int
	for _, p := range f.Pools {
		for range p.NodeNames() {
			if p.GPU != "" {
				counts = append(counts, f.GPUsOf(p))
			}
		}
	}
	return counts
}

// GPUTypes are the GPU types in the order the pools first name them.
func (f *Facts) GPUTypes() []string {
	var types []string
	for _, p := range f.Pools {
		if p.GPU != "" && !slices.Contains(types, p.GPU) {
			types = append(types, p.GPU)
		}
	}
	return types
}

// GPUPools are the names of the pools with GPUs, sorted: where elastic jobs may grow.
func (f *Facts) GPUPools() []string {
	var names []string
	for _, p := range f.Pools {
		if p.GPU != "" {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}
