// Package sitetest drives the site cluster (site/site.sh): a host per container, systemd as
// PID 1, slurmbridge from its packages. Tests reach the hosts only the way an admin would, by
// running commands on them (docker exec), and inject faults the way they happen at a site: a
// host killed, a link cut, a daemon restarted, a disk filled.
package sitetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/bridge/testbed/facts"
)

// Site is one running site cluster.
type Site struct {
	Release string
	Facts   *facts.Facts
	prefix  string
	// interval is quotad's cycle as the site set it (QUOTAD_INTERVAL in quotad.env).
	interval time.Duration
}

// Require finds the site cluster of $SLURM_RELEASE that `make site-up` brought up. There is no
// skip: a site test run without a site cluster fails, saying how to start one.
func Require(t *testing.T) *Site {
	t.Helper()
	release := os.Getenv("SLURM_RELEASE")
	if release == "" {
		t.Fatal("SLURM_RELEASE is not set: run the site suite with make site-test SLURM_RELEASE=...")
	}
	f, err := facts.LoadRepo()
	if err != nil {
		t.Fatal(err)
	}
	s := &Site{Release: release, Facts: f, prefix: "sbsite-" + strings.ReplaceAll(release, ".", "")}
	if out, err := s.Exec(f.Site.Login, "systemctl", "is-system-running"); err != nil && !strings.Contains(out, "degraded") {
		t.Fatalf("no site cluster of Slurm %s answers (%v: %s): make site-up SLURM_RELEASE=%s", release, err, out, release)
	}
	env := s.Must(t, f.Site.Controllers[0], "sh", "-c", `. /etc/slurmbridge/quotad.env && echo "$QUOTAD_INTERVAL"`)
	if s.interval, err = time.ParseDuration(env); err != nil {
		t.Fatalf("QUOTAD_INTERVAL in %s's quotad.env: %v", f.Site.Controllers[0], err)
	}
	return s
}

// QuotadInterval is quotad's cycle on the site.
func (s *Site) QuotadInterval() time.Duration { return s.interval }

// Container is the Docker container of host.
func (s *Site) Container(host string) string { return s.prefix + "-" + host }

// Exec runs a command as root on host and returns its output (stdout and stderr).
func (s *Site) Exec(host string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", append([]string{"exec", s.Container(host)}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// As runs a command as user on host.
func (s *Site) As(user, host string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-u", user, "-w", "/home/" + user, s.Container(host)}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// WriteAs writes a file as user on host, as the user's editor would.
func (s *Site) WriteAs(t *testing.T, user, host, path, content string) {
	t.Helper()
	cmd := exec.Command("docker", "exec", "-i", "-u", user, s.Container(host), "sh", "-c", `cat >"$1"`, "sh", path)
	cmd.Stdin = strings.NewReader(content)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("writing %s as %s on %s: %v: %s", path, user, host, err, out)
	}
}

// Must is Exec that fails the test on an error.
func (s *Site) Must(t *testing.T, host string, args ...string) string {
	t.Helper()
	out, err := s.Exec(host, args...)
	if err != nil {
		t.Fatalf("%s: %s: %v: %s", host, strings.Join(args, " "), err, out)
	}
	return out
}

// Docker runs a docker command on this machine (kill, start, network).
func Docker(args ...string) (string, error) { return Local("docker", args...) }

// Local runs a command on this machine, where the site's packages were built.
func Local(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Kill stops host at once, as a power cut does: no unit shuts down.
func (s *Site) Kill(t *testing.T, host string) {
	t.Helper()
	if out, err := Docker("kill", s.Container(host)); err != nil {
		t.Fatalf("docker kill %s: %v: %s", host, err, out)
	}
}

// Boot starts a killed host again and waits for its systemd to finish booting.
func (s *Site) Boot(t *testing.T, host string) {
	t.Helper()
	if out, err := Docker("start", s.Container(host)); err != nil {
		t.Fatalf("docker start %s: %v: %s", host, err, out)
	}
	WaitFor(t, host+"'s systemd to finish booting", 90*time.Second, func() bool {
		out, _ := s.Exec(host, "systemctl", "is-system-running")
		return out == "running" || out == "degraded"
	})
}

// Submit submits a batch job as user on the login host and returns its id.
func (s *Site) Submit(t *testing.T, user string, args ...string) string {
	t.Helper()
	out, err := s.As(user, s.Facts.Site.Login, append([]string{"sbatch", "--parsable"}, args...)...)
	if err != nil {
		t.Fatalf("sbatch %s as %s: %v: %s", strings.Join(args, " "), user, err, out)
	}
	id := strings.TrimSpace(strings.Split(out, ";")[0])
	if _, err := strconv.Atoi(id); err != nil {
		t.Fatalf("sbatch as %s printed %q, no job id", user, out)
	}
	return id
}

// Queue is every job in the queue, by id as squeue prints it (slurm.Job.PrintedID: "12",
// "12_3"), read the way bridge/slurm reads it (SummaryFields) but in the login host's
// container; --all adds the jobs of hidden partitions, as an admin's `squeue -a` would. ok is
// false when slurmctld did not answer or squeue printed what the read does not parse.
func (s *Site) Queue() (map[string]slurm.Job, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"exec"}
	// The container's environment is its image's: the read's variables are added to it.
	for _, kv := range slurm.QueueEnv(nil) {
		args = append(args, "-e", kv)
	}
	read := slurm.QueueRead{Fields: slurm.SummaryFields}
	args = append(append(args, s.Container(s.Facts.Site.Login), "squeue", "--all"), slurm.QueueArgs(read)...)
	out, err := exec.CommandContext(ctx, "docker", args...).Output() // stdout alone: stderr is no job
	if err != nil {
		return nil, false
	}
	list, err := slurm.ParseQueue(out, read.Fields)
	if err != nil {
		return nil, false
	}
	jobs := map[string]slurm.Job{}
	for _, j := range list {
		jobs[j.PrintedID] = j
	}
	return jobs, true
}

// Ended is each job's states in accounting, every record of it (a requeued job has one per
// run): slurmdbd's view, which outlives the queue.
func (s *Site) Ended(t *testing.T, ids []string) map[string][]string {
	t.Helper()
	out := s.Must(t, s.Facts.Site.Login, "sacct", "-n", "-P", "-X", "-D", "-j", strings.Join(ids, ","), "-o", "JobID,State")
	states := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		id, state, ok := strings.Cut(line, "|")
		if !ok {
			continue
		}
		states[id] = append(states[id], strings.Fields(state)[0])
	}
	return states
}

// ctldUp finds an answering slurmctld in scontrol ping's "Slurmctld(primary) at ctl1 is UP" /
// "Slurmctld(backup) at ctl2 is UP"; the first UP one is the one commands reach.
var ctldUp = regexp.MustCompile(`at (\S+) is UP`)

// InControl answers which slurmctld is in control now, by scontrol ping from the login host.
func (s *Site) InControl() string {
	out, _ := s.Exec(s.Facts.Site.Login, "scontrol", "ping")
	if m := ctldUp.FindStringSubmatch(out); m != nil {
		return m[1]
	}
	return ""
}

// Metric reads one value of a metric from quotad's /metrics on host (loopback there).
func (s *Site) Metric(host, name string) (float64, bool) {
	out, err := s.Exec(host, "curl", "-fsS", "--max-time", "3", "http://127.0.0.1:9817/metrics")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, name+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, name)), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// LeaseHolders are the controllers whose quotad says it holds the lease.
func (s *Site) LeaseHolders() []string {
	var held []string
	for _, h := range s.Facts.Site.Controllers {
		if v, ok := s.Metric(h, "quotad_lease_held"); ok && v == 1 {
			held = append(held, h)
		}
	}
	return held
}

// AuditEntry is one action in quotad's audit (quotactl history --json).
type AuditEntry struct {
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Kind    string    `json:"kind"`
	Subject string    `json:"subject"`
	Old     string    `json:"old"`
	New     string    `json:"new"`
}

// Audit reads quotad's audit trail on host, oldest first.
func (s *Site) Audit(t *testing.T, host string) []AuditEntry {
	t.Helper()
	out := s.Must(t, host, "bash", "-c", "set -a; . /etc/slurmbridge/quotad.env; set +a; quotactl history --limit 100000 --json")
	var entries []AuditEntry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("quotactl history: %v: %.300s", err, out)
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].At.Before(entries[j].At) })
	return entries
}

// report adds a section to the file $SITE_REPORT names, if any: the suite's figures for the note
// and site/README.md.
func report(section string) {
	path := os.Getenv("SITE_REPORT")
	if path == "" {
		return
	}
	if f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
		fmt.Fprintln(f, section)
		f.Close()
	}
}

// WaitFor polls cond every second until it holds or limit passes (then the test fails), and
// returns how long it took.
func WaitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	t0 := time.Now()
	for {
		if cond() {
			return time.Since(t0)
		}
		if time.Since(t0) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(time.Second)
	}
}
