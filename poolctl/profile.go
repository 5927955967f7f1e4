package poolctl

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"
	"gopkg.in/yaml.v3"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
	"github.com/slurmbridge/slurmbridge/bridge/stats"
)

// JobRun is one completed job as profile learn reads it from slurmdbd's job table. Its Comment
// is the job's --comment as slurmdbd stored it (derived_es, with AccountingStoreFlags=job_comment);
// often empty.
type JobRun slurmdbd.CompletedJob

// Class is the run's workload class: the class=NAME word of its comment, read from the stored
// comment, else from the --comment option of its sbatch command line; "" when it has none.
func (r *JobRun) Class() string {
	if c := pools.WorkloadClass(r.Comment); c != "" {
		return c
	}
	return pools.WorkloadClass(commentFromSubmitLine(r.SubmitLine))
}

// commentFromSubmitLine finds --comment=X or --comment X in a submit line, which slurmdbd
// stores as the words of the command joined by spaces (quoting is lost, so only the first word
// of a comment with spaces is seen).
func commentFromSubmitLine(line string) string {
	words := strings.Fields(line)
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, "--comment="); ok {
			return v
		}
		if w == "--comment" && i+1 < len(words) {
			return words[i+1]
		}
	}
	return ""
}

// Profile is the learned median run time per pool and class.
type Profile struct {
	// Median[pool][class] is the median elapsed time; class "default" holds jobs without one.
	Median map[string]map[string]time.Duration
	Count  map[string]map[string]int
	// Skipped counts runs in partitions that are no pool.
	Skipped int
}

// Learn groups completed runs by pool and workload class; groups with fewer than minJobs runs
// are left out, as a median of one or two noisy jobs would reorder pools on chance.
func Learn(cfg *pools.Config, runs []JobRun, minJobs int) *Profile {
	byPartition := map[string]string{}
	for _, p := range cfg.Pools {
		byPartition[p.Partition] = p.Name
	}
	elapsed := map[string]map[string][]time.Duration{}
	prof := &Profile{Median: map[string]map[string]time.Duration{}, Count: map[string]map[string]int{}}
	for i := range runs {
		r := &runs[i]
		pool, ok := byPartition[r.Partition]
		if !ok || r.End <= r.Start {
			prof.Skipped++
			continue
		}
		class := r.Class()
		if class == "" {
			class = pools.DefaultSpeedClass
		}
		if elapsed[pool] == nil {
			elapsed[pool] = map[string][]time.Duration{}
		}
		elapsed[pool][class] = append(elapsed[pool][class], time.Duration(r.End-r.Start)*time.Second)
	}
	for pool, classes := range elapsed {
		for class, ds := range classes {
			if len(ds) < minJobs {
				continue
			}
			if prof.Median[pool] == nil {
				prof.Median[pool], prof.Count[pool] = map[string]time.Duration{}, map[string]int{}
			}
			prof.Median[pool][class] = stats.Median(ds)
			prof.Count[pool][class] = len(ds)
		}
	}
	return prof
}

// Speeds turns medians into the pools config's speed table: for each class, a pool's speed is
// the slowest measured pool's median divided by its own, so the slowest pool is 1 and a pool
// twice as fast is 2. Speeds are compared only between pools for the same class (cheapest
// ranks by price / speed), so each class has its own scale; with that, the cheapest policy
// orders pools by price × expected run time, the expected cost of the job.
func (p *Profile) Speeds() map[string]map[string]float64 {
	slowest := map[string]time.Duration{}
	for _, classes := range p.Median {
		for class, d := range classes {
			slowest[class] = max(slowest[class], d)
		}
	}
	out := map[string]map[string]float64{}
	for pool, classes := range p.Median {
		out[pool] = map[string]float64{}
		for class, d := range classes {
			out[pool][class] = roundTo(float64(slowest[class])/float64(d), 100)
		}
	}
	return out
}

func roundTo(v, scale float64) float64 {
	return float64(int64(v*scale+0.5)) / scale
}

// ApplySpeeds writes learned speeds into the pools file's YAML: each learned pool gets its
// learned classes set in `speed:`, other classes and pools are kept, and so are comments.
func ApplySpeeds(src []byte, speeds map[string]map[string]float64) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("the pools file is not a YAML mapping")
	}
	list := mappingValue(doc.Content[0], "pools")
	if list == nil || list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("the pools file has no pools list")
	}
	done := map[string]bool{}
	for _, pool := range list.Content {
		name := mappingValue(pool, "name")
		if name == nil || speeds[name.Value] == nil {
			continue
		}
		done[name.Value] = true
		speed := mappingValue(pool, "speed")
		if speed == nil {
			speed = &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
			pool.Content = append(pool.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "speed"}, speed)
		}
		for _, class := range slices.Sorted(maps.Keys(speeds[name.Value])) {
			value := floatLiteral(speeds[name.Value][class])
			if v := mappingValue(speed, class); v != nil {
				v.Value, v.Tag, v.Style = value, "", 0
				continue
			}
			speed.Content = append(speed.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: class},
				&yaml.Node{Kind: yaml.ScalarNode, Value: value})
		}
	}
	for pool := range speeds {
		if !done[pool] {
			return nil, fmt.Errorf("pool %s is not in the pools file", pool)
		}
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// floatLiteral spells v so YAML reads it back as a float: "2.0", not "2".
func floatLiteral(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func profileCommand(env Env) *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "learn pools' speeds per workload class from job history",
		Subcommands: []*cli.Command{{
			Name:  "learn",
			Usage: "median run time of completed jobs per pool and workload class, written as the speed table",
			UsageText: "poolctl [--config pools.yaml] profile learn [--since 720h] [--min-jobs 3] [--write]\n" +
				"e.g. . $TESTBED_DIR/env; poolctl --config slurm-conf/testbed/pools.yaml profile learn --since 1h",
			Description: "Reads slurmdbd's job table (MariaDB) for jobs that ended COMPLETED. The workload class is the " +
				"class=NAME word of the job's comment (sbatch --comment=class=NAME): read from the stored comment when " +
				"slurm.conf has AccountingStoreFlags=job_comment, else from the --comment option of the sbatch command " +
				"line slurmdbd keeps; jobs without one count for the class \"default\". For each class the slowest pool " +
				"gets speed 1 and the others the ratio of medians, so `cheapest` ranks by price × expected run time. " +
				"Prints the table and a speed: snippet per pool; --write updates the pools file in place (comments kept).",
			Flags: append(slurmdbd.Flags(),
				&cli.DurationFlag{Name: "since", Value: 30 * 24 * time.Hour, Usage: "jobs that ended within this long"},
				&cli.IntFlag{Name: "min-jobs", Value: 3, Usage: "fewest completed jobs for a pool and class to count"},
				&cli.BoolFlag{Name: "write", Usage: "update the pools file's speed tables in place"},
			),
			OnUsageError: usageError,
			Action: func(c *cli.Context) error {
				cfg, path, err := loadConfig(c)
				if err != nil {
					return err
				}
				runs, err := readRuns(c, time.Now().Add(-c.Duration("since")))
				if err != nil {
					return cli.Exit(err.Error(), exitProblems)
				}
				prof := Learn(cfg, runs, c.Int("min-jobs"))
				if len(prof.Median) == 0 {
					return cli.Exit(fmt.Sprintf("no pool and class has %d completed jobs in the last %s (%d jobs read)", c.Int("min-jobs"), c.Duration("since"), len(runs)), exitProblems)
				}
				speeds := prof.Speeds()
				printProfile(env.Out, cfg, prof, speeds)
				if !c.Bool("write") {
					return nil
				}
				src, err := os.ReadFile(path)
				if err != nil {
					return cli.Exit(err.Error(), exitProblems)
				}
				updated, err := ApplySpeeds(src, speeds)
				if err != nil {
					return cli.Exit(fmt.Sprintf("%s: %v", path, err), exitProblems)
				}
				if _, err := pools.Parse(updated, path); err != nil {
					return cli.Exit(fmt.Sprintf("the updated pools file would not load: %v", err), exitProblems)
				}
				tmp := path + ".poolctl-new"
				if err := os.WriteFile(tmp, updated, 0o644); err != nil {
					return cli.Exit(err.Error(), exitProblems)
				}
				// Renamed into place: the job_submit plugin may stat and read it at any moment.
				if err := os.Rename(tmp, path); err != nil {
					return cli.Exit(err.Error(), exitProblems)
				}
				fmt.Fprintf(env.Out, "wrote the speeds into %s\n", path)
				return nil
			},
		}},
	}
}

func printProfile(w io.Writer, cfg *pools.Config, prof *Profile, speeds map[string]map[string]float64) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POOL\tCLASS\tJOBS\tMEDIAN\tSPEED\tPRICE/H\tEXPECTED COST")
	for _, p := range cfg.Pools {
		classes := prof.Median[p.Name]
		for _, class := range slices.Sorted(maps.Keys(classes)) {
			price := p.PricePerGPUHour
			if p.GPUType == "" {
				price = p.PricePerCPUHour
			}
			d := classes[class]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%.2f\t%.2f\t%.4f\n", p.Name, class, prof.Count[p.Name][class], d, speeds[p.Name][class], price, price*d.Hours())
		}
	}
	tw.Flush()
	if prof.Skipped > 0 {
		fmt.Fprintf(w, "(%d completed jobs ran in partitions that are no pool)\n", prof.Skipped)
	}
	fmt.Fprintln(w, "\n# speed tables for pools.yaml (EXPECTED COST is per GPU, or per CPU for CPU pools)")
	for _, p := range cfg.Pools {
		s := speeds[p.Name]
		if len(s) == 0 {
			continue
		}
		var parts []string
		for _, class := range slices.Sorted(maps.Keys(s)) {
			parts = append(parts, fmt.Sprintf("%s: %v", class, s[class]))
		}
		fmt.Fprintf(w, "%s:\n  speed: {%s}\n", p.Name, strings.Join(parts, ", "))
	}
}

// readRuns reads completed jobs that ended since then.
func readRuns(c *cli.Context, since time.Time) ([]JobRun, error) {
	acct, err := slurmdbd.OpenAccounting(c)
	if err != nil {
		return nil, err
	}
	defer acct.DB.Close()
	jobs, err := acct.CompletedJobs(c.Context, since)
	if err != nil {
		return nil, err
	}
	runs := make([]JobRun, len(jobs))
	for i, j := range jobs {
		runs[i] = JobRun(j)
	}
	return runs, nil
}
