package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
)

// PluginFile is the job_submit plugin's file name in PluginDir.
const PluginFile = "job_submit_pools.so"

// DefaultDBPasswordFile is where the packages expect the database password (see
// packaging/systemd/quotad.service).
const DefaultDBPasswordFile = "/etc/slurmbridge/db-password"

// Options say where doctor looks; an empty URL, user or file skips what it is for.
type Options struct {
	PoolsPath      string        // the pools file the plugin reads
	PluginDir      string        // colon-separated; empty: slurmctld's PluginDir
	QuotadURL      string        // quotad's metrics
	ElasticdURL    string        // elasticd's metrics
	MaxCycleAge    time.Duration // quotad's last successful cycle must be newer
	DBPasswordFile string        // the file quotad and quotactl read
	QuotadUser     string        // empty: User= of quotad.service, when systemd knows it
}

// Facts are everything doctor's checks judge, read once by Gather. An error field says why
// the fact beside it could not be read.
type Facts struct {
	// Now is when the last fact was read: the daemons' ages are measured from it.
	Now time.Time
	// Config is slurmctld's running configuration. When ConfigErr is set, no other fact that
	// needs Slurm was read.
	Config    slurm.Config
	ConfigErr error

	Plugin PluginFacts
	// SlurmctldOnDisk is the installed slurmctld's version (slurmctld -V), the one that loads
	// the plugin at its next start; "" when no slurmctld is installed here.
	SlurmctldOnDisk string
	Pools           PoolsFile
	Nodes           []slurm.Node
	// NodesErr is why the nodes could not be read.
	NodesErr error
	Quotad   QuotadAccount
	// QOS is every QOS, read with sacctmgr (doctor reads who preempts whom).
	QOS    []slurm.QOS
	QOSErr error

	QuotadMetrics   Metrics
	ElasticdMetrics Metrics
	MaxCycleAge     time.Duration

	Credentials PasswordFile
}

// PluginFacts is where slurmctld would find the job_submit plugin and what the file says it is.
type PluginFacts struct {
	Dirs []string // the directories searched, in slurmctld's order
	Path string   // the first of them that has PluginFile; "" when none has
	Info PluginInfo
	Err  error // the file's symbols could not be read
}

// PoolsFile is the pools file as read.
type PoolsFile struct {
	Path string
	Data []byte
	Err  error // the file could not be read
}

// QuotadAccount is the account quotad runs as and its rights in slurmdbd.
type QuotadAccount struct {
	// User is "" when it is not known: systemd does not know quotad.service and
	// --quotad-user was not given.
	User string
	// AdminLevel is the user's AdminLevel in slurmdbd, "" when it is not a Slurm user. It is
	// read only for users Slurm does not always allow (root and SlurmUser).
	AdminLevel    string
	AdminLevelErr error
}

// Metrics is one daemon's Prometheus page: its unlabelled samples by name.
type Metrics struct {
	URL     string // "": not asked
	Samples map[string]float64
	Err     error // unreachable, or not a 200
}

// PasswordFile is the database password file as quotad would read it.
type PasswordFile struct {
	Path string // "": not checked
	// Err is slurmdbd.ReadPassword's verdict, quotad's own check of the file.
	Err     error
	Mode    os.FileMode
	Owner   string // "uid N"
	StatErr error
}

// Gather reads every fact doctor judges: slurmctld's config first and, only when it answers,
// the plugin, the pools file, what Slurm says of nodes, QOS and quotad's account, and the
// daemons' metrics; the password file in any case. Slurm's commands, and systemctl, run
// through env.Slurm's Runner.
func Gather(ctx context.Context, env Env, opts Options) Facts {
	f := Facts{MaxCycleAge: opts.MaxCycleAge}
	f.Config, f.ConfigErr = env.Slurm.ShowConfig(ctx)
	if f.ConfigErr != nil {
		// slurmctld does not answer, or not this host's Slurm commands (newer ones than the
		// running slurmctld, mid-upgrade): the installed slurmctld and the plugin it would load
		// are still here to compare.
		f.SlurmctldOnDisk, _ = env.Slurm.SlurmctldOnDisk(ctx)
		if dir := offlinePluginDir(opts.PluginDir); f.SlurmctldOnDisk != "" && dir != "" {
			f.Plugin = findPlugin(slurm.Config{}, dir)
		}
	}
	if f.ConfigErr == nil {
		f.Plugin = findPlugin(f.Config, opts.PluginDir)
		// On a host without slurmctld (doctor pointed at a remote one) there is nothing to load.
		f.SlurmctldOnDisk, _ = env.Slurm.SlurmctldOnDisk(ctx)
		f.Pools.Path = opts.PoolsPath
		f.Pools.Data, f.Pools.Err = os.ReadFile(opts.PoolsPath)
		f.Nodes, f.NodesErr = env.Slurm.Nodes(ctx)
		f.Quotad = quotadAccount(ctx, env.Slurm, f.Config, opts.QuotadUser)
		f.QOS, f.QOSErr = env.Slurm.QOS(ctx)
		httpClient := env.HTTP
		if httpClient == nil {
			httpClient = &http.Client{Timeout: 5 * time.Second}
		}
		f.QuotadMetrics = readMetrics(ctx, httpClient, opts.QuotadURL)
		f.ElasticdMetrics = readMetrics(ctx, httpClient, opts.ElasticdURL)
	}
	f.Credentials = readPasswordFile(opts.DBPasswordFile)
	// After the metrics: quotad's last cycle may end while Slurm's commands run, and must not
	// look as if it ended in the future.
	f.Now = time.Now()
	return f
}

// offlinePluginDir is where slurmctld would look for plugins, known without it: the given
// directories, else slurm.conf's PluginDir, else Slurm's built-in default, which is where the
// installed slurmctld finds libslurmfull (its RUNPATH: $libdir/slurm, Debian's slurm-wlm).
func offlinePluginDir(given string) string {
	if given != "" {
		return given
	}
	conf := os.Getenv("SLURM_CONF")
	if conf == "" {
		conf = "/etc/slurm/slurm.conf"
	}
	if data, err := os.ReadFile(conf); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			line, _, _ = strings.Cut(line, "#")
			key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
			if fields := strings.Fields(value); ok && len(fields) > 0 && strings.EqualFold(strings.TrimSpace(key), "PluginDir") {
				return fields[0]
			}
		}
	}
	if path, err := slurm.SlurmctldBinary(); err == nil {
		if dir, err := RunPath(path); err == nil {
			return dir
		}
	}
	return ""
}

// findPlugin looks for the plugin where slurmctld does: the first directory of PluginDir that
// has the file.
func findPlugin(conf slurm.Config, pluginDir string) PluginFacts {
	dirs := strings.Split(pluginDir, ":")
	if dirs[0] == "" {
		dirs = strings.Split(conf.Get("PluginDir"), ":")
	}
	p := PluginFacts{Dirs: dirs}
	for _, dir := range dirs {
		if st, err := os.Stat(filepath.Join(dir, PluginFile)); err == nil && st.Mode().IsRegular() {
			p.Path = filepath.Join(dir, PluginFile)
			p.Info, p.Err = ReadPluginInfo(p.Path)
			break
		}
	}
	return p
}

// ReadPluginInfo reads plugin_type and plugin_version from the Slurm plugin at path, without
// loading it.
func ReadPluginInfo(path string) (PluginInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return PluginInfo{}, err
	}
	defer f.Close()
	return PluginInfoOf(f, path)
}

// quotadAccount finds the account quotad runs as (user, else User= of quotad.service) and,
// unless Slurm always allows it, its AdminLevel.
func quotadAccount(ctx context.Context, client slurm.Client, conf slurm.Config, user string) QuotadAccount {
	if user == "" {
		// systemctl show answers for units it does not have too: LoadState says.
		out, err := client.Runner.Run(ctx, "systemctl", "show", "--property=LoadState,User", "quotad.service")
		props := map[string]string{}
		for _, line := range strings.Split(string(out), "\n") {
			if k, v, found := strings.Cut(line, "="); found {
				props[k] = strings.TrimSpace(v)
			}
		}
		if err != nil || props["LoadState"] != "loaded" {
			return QuotadAccount{}
		}
		if user = props["User"]; user == "" {
			user = "root" // a unit without User= runs as root
		}
	}
	a := QuotadAccount{User: user}
	if !slurmAlwaysAllows(conf, user) {
		a.AdminLevel, a.AdminLevelErr = client.UserAdminLevel(ctx, user)
	}
	return a
}

// ErrNotMetricsPage is a metrics URL that answered something else, such as a login page.
var ErrNotMetricsPage = errors.New("not a Prometheus text page")

// readMetrics reads a Prometheus text page: unlabelled samples by name.
func readMetrics(ctx context.Context, client *http.Client, url string) Metrics {
	m := Metrics{URL: url}
	if url == "" {
		return m
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		m.Err = err
		return m
	}
	resp, err := client.Do(req)
	if err != nil {
		m.Err = fmt.Errorf("%s unreachable: %w", url, err)
		return m
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.Err = fmt.Errorf("%s answered %s", url, resp.Status)
		return m
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		m.Err = fmt.Errorf("%s is %w: %w", url, ErrNotMetricsPage, err)
		return m
	}
	m.Samples = unlabelledSamples(families)
	return m
}

// unlabelledSamples keeps the samples without labels, by the name they have on the page: a
// histogram or summary gives NAME_count and NAME_sum.
func unlabelledSamples(families map[string]*dto.MetricFamily) map[string]float64 {
	samples := map[string]float64{}
	for name, family := range families {
		for _, metric := range family.GetMetric() {
			if len(metric.GetLabel()) > 0 {
				continue
			}
			switch {
			case metric.Gauge != nil:
				samples[name] = metric.GetGauge().GetValue()
			case metric.Counter != nil:
				samples[name] = metric.GetCounter().GetValue()
			case metric.Untyped != nil:
				samples[name] = metric.GetUntyped().GetValue()
			case metric.Histogram != nil:
				samples[name+"_count"] = float64(metric.GetHistogram().GetSampleCount())
				samples[name+"_sum"] = metric.GetHistogram().GetSampleSum()
			case metric.Summary != nil:
				samples[name+"_count"] = float64(metric.GetSummary().GetSampleCount())
				samples[name+"_sum"] = metric.GetSummary().GetSampleSum()
			}
		}
	}
	return samples
}

// readPasswordFile applies quotad's own check of the password file (slurmdbd.ReadPassword)
// and notes its mode and owner; the password itself is not kept.
func readPasswordFile(path string) PasswordFile {
	p := PasswordFile{Path: path}
	if path == "" {
		return p
	}
	if _, p.Err = slurmdbd.ReadPassword(path); p.Err != nil {
		return p
	}
	st, err := os.Stat(path)
	if err != nil {
		p.StatErr = err
		return p
	}
	p.Mode = st.Mode().Perm()
	p.Owner = "uid ?"
	if sys, isUnix := st.Sys().(*syscall.Stat_t); isUnix {
		p.Owner = "uid " + strconv.FormatUint(uint64(sys.Uid), 10)
	}
	return p
}
