//go:build site

// The fault suite: each fault injected into the site cluster while borrowed, reclaimed and
// elastic jobs run, then the cluster must be whole again within a stated time, with no job lost
// or killed and no two quotad acting at once. Run by `make site-test SLURM_RELEASE=...` against
// `make site-up`; each figure is logged and written to $SITE_REPORT when set.
package sitetest

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
)

// load is the work running through every fault.
type load struct {
	bob      []string // 6 one-GPU a100 jobs: 4 in bob's guarantee, 2 borrowed
	alice    []string // 2 one-GPU a100 jobs submitted later: they reclaim
	elastic  string   // alice's synthetic elastic job (elasticd grows it by worker jobs)
	userJobs []string // all of the above
}

// killedStates end a job for good: none may appear for a user's job. A job requeued by
// preemption shows PREEMPTED or REQUEUED records, one whose node died NODE_FAIL, each followed
// by a new run: those are counted, not failed, while the job is still in the queue.
var killedStates = []string{"FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}

func startLoad(t *testing.T, s *Site) *load {
	t.Helper()
	l := &load{}
	login := s.Facts.Site.Login
	// From an empty queue: an earlier run's jobs would hold the GPUs this load counts on.
	for _, p := range s.Facts.Projects {
		s.Must(t, login, "scancel", "--user="+p.User)
	}
	WaitFor(t, "an empty queue", time.Minute, func() bool {
		q, ok := s.Queue()
		return ok && len(q) == 0
	})
	for i := 0; i < 6; i++ {
		l.bob = append(l.bob, s.Submit(t, "bob", "-p", "a100", "--gres=gpu:a100:1", "--requeue", "-J", "bob-load", "--wrap", "sleep 7200"))
	}
	WaitFor(t, "bob's 6 jobs running, 4 in his guarantee and 2 borrowed", 90*time.Second, func() bool {
		q, _ := s.Queue()
		guar, borrowed := 0, 0
		for _, id := range l.bob {
			j := q[id]
			if j.State != "RUNNING" {
				continue
			}
			switch {
			case pools.MatchQOS(pools.DefaultGuaranteedQOS, j.QOS):
				guar++
			case pools.MatchQOS(pools.DefaultBorrowQOS, j.QOS):
				borrowed++
			}
		}
		return guar == 4 && borrowed == 2
	})
	// The shipped example as the package installs it, reached from a directory laid out as the
	// script expects (elasticd/examples under the submit directory); the helper module it
	// imports is found beside the examples' real place (the package's python/).
	if out, err := s.As("alice", login, "bash", "-c", "rm -rf ~/elastic && mkdir -p ~/elastic/elasticd && ln -s /usr/share/doc/slurmbridge-node/examples ~/elastic/elasticd/examples"); err != nil {
		t.Fatalf("copying the examples: %v: %s", err, out)
	}
	out, err := s.As("alice", login, "bash", "-c", "cd ~/elastic && sbatch --parsable -p a100 --gres=gpu:a100:1 --output=$HOME/elastic-%j.out elasticd/examples/synthetic.sbatch")
	if err != nil {
		t.Fatalf("submitting the elastic example: %v: %s", err, out)
	}
	l.elastic = strings.TrimSpace(strings.Split(out, ";")[0])
	WaitFor(t, "alice's elastic job running and grown by a worker", 120*time.Second, func() bool {
		q, _ := s.Queue()
		return q[l.elastic].State == "RUNNING" && len(workers(q, l.elastic, "RUNNING")) > 0
	})
	// Past the borrowers' PreemptExemptTime, alice claims two of her guaranteed GPUs: the pool
	// is full, so Slurm requeues borrowed work for them.
	exempt, err := time.ParseDuration(s.Facts.Quotas.PreemptExemptTime)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(exempt)
	for i := 0; i < 2; i++ {
		l.alice = append(l.alice, s.Submit(t, "alice", "-p", "a100", "--gres=gpu:a100:1", "--requeue", "-J", "alice-load", "--wrap", "sleep 7200"))
	}
	l.userJobs = slices.Concat(l.bob, l.alice, []string{l.elastic})
	WaitFor(t, "alice's 2 claims running (a borrower reclaimed)", 120*time.Second, func() bool {
		q, _ := s.Queue()
		return q[l.alice[0]].State == "RUNNING" && q[l.alice[1]].State == "RUNNING"
	})
	t.Logf("load: bob %v, alice %v, elastic %s", l.bob, l.alice, l.elastic)
	return l
}

// workers are the worker jobs elasticd runs for elastic job id, in state (any when "").
func workers(q map[string]slurm.Job, id, state string) []slurm.Job {
	main, err := strconv.ParseUint(id, 10, 32)
	if err != nil {
		return nil
	}
	name := daemon.WorkerName(uint32(main))
	var w []slurm.Job
	for _, j := range q {
		if j.Name == name && (state == "" || j.State == state) {
			w = append(w, j)
		}
	}
	return w
}

// stateOf is job id's state as squeue prints it, one name (a flag such as COMPLETING in place
// of the base state); "" for a job not in q.
func stateOf(q map[string]slurm.Job, id string) string {
	j := q[id]
	return j.StateName()
}

// whole says what is not yet as it must be, "" when the cluster is whole: one slurmctld in
// control, one quotad holding the lease, every node up (but those in down), the guaranteed
// work running (bob's 4 in-quota jobs, alice's 2 claims and her elastic job).
func (s *Site) whole(l *load, down ...string) string {
	if s.InControl() == "" {
		return "no slurmctld answers"
	}
	h := s.LeaseHolders()
	if len(h) != 1 {
		return fmt.Sprintf("quotad lease held by %v", h)
	}
	// Holding the lease is not acting: the active quotad must also have finished a cycle lately
	// (read Slurm and MariaDB, applied), or it holds the lease while every cycle fails.
	last, ok := s.Metric(h[0], "quotad_last_successful_cycle_timestamp_seconds")
	if age := time.Since(time.Unix(int64(last), 0)); !ok || age > 3*s.QuotadInterval() {
		return fmt.Sprintf("the active quotad on %s has not finished a cycle for %s", h[0], age.Round(time.Second))
	}
	out, err := s.Exec(s.Facts.Site.Login, "sinfo", "-h", "-N", "-o", "%N %T")
	if err != nil {
		return "sinfo: " + out
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && !slices.Contains(down, f[0]) && !slices.Contains([]string{"idle", "mixed", "allocated"}, strings.TrimRight(f[1], "*~#!%$@^-")) {
			return "node " + line
		}
	}
	q, ok := s.Queue()
	if !ok {
		return "squeue failed"
	}
	guar := 0
	for _, id := range l.bob {
		if q[id].State == "RUNNING" && pools.MatchQOS(pools.DefaultGuaranteedQOS, q[id].QOS) {
			guar++
		}
	}
	if guar != 4 {
		return fmt.Sprintf("%d of bob's guaranteed jobs running", guar)
	}
	for _, id := range append(slices.Clone(l.alice), l.elastic) {
		if q[id].State != "RUNNING" {
			return fmt.Sprintf("alice's job %s is %s", id, stateOf(q, id))
		}
	}
	return ""
}

// outcome is one fault's row in the report.
type outcome struct {
	fault        string
	whole        time.Duration
	detail       string
	lost, killed int
}

// check counts what the fault cost: user jobs no longer known to Slurm (lost), user jobs ended
// for good (killed), quotad actions by a quotad that had lost the lease (twice).
func (s *Site) check(t *testing.T, l *load) (lost, killed int) {
	t.Helper()
	q, _ := s.Queue()
	ended := s.Ended(t, l.userJobs)
	for _, id := range l.userJobs {
		if _, ok := q[id]; !ok {
			lost++
			t.Errorf("job %s is no longer in the queue (accounting: %v)", id, ended[id])
		}
		for _, st := range ended[id] {
			if slices.Contains(killedStates, st) {
				killed++
				t.Errorf("job %s ended %s (accounting: %v)", id, st, ended[id])
				break
			}
		}
	}
	return lost, killed
}

// doubleActions counts audit entries written by a quotad after another quotad had acted since
// its own last entry: each quotad process (actor quotad@host[pid]) must act in one unbroken
// stretch, or two were acting at once.
func doubleActions(t *testing.T, entries []AuditEntry) int {
	t.Helper()
	seen, n := map[string]bool{}, 0
	last := ""
	for _, e := range entries {
		if !strings.HasPrefix(e.Actor, "quotad@") {
			continue
		}
		if e.Actor != last {
			if seen[e.Actor] {
				n++
				t.Errorf("%s acted again at %s after another quotad had acted (%s %s)", e.Actor, e.At.Format(time.RFC3339), e.Kind, e.Subject)
			}
			seen[e.Actor] = true
			last = e.Actor
		}
	}
	return n
}

func TestFaults(t *testing.T) {
	s := Require(t)
	l := startLoad(t, s)
	var rows []outcome
	ctl := s.Facts.Site.Controllers
	// measure injects a fault, then waits until the cluster is whole again (down: hosts the
	// fault leaves down on purpose), and records the row.
	measure := func(name string, limit time.Duration, inject func() string, down ...string) {
		t.Helper()
		detail := inject()
		t0 := time.Now()
		var why string
		for {
			if why = s.whole(l, down...); why == "" {
				break
			}
			if time.Since(t0) > limit {
				t.Errorf("%s: not whole within %s: %s", name, limit, why)
				break
			}
			time.Sleep(time.Second)
		}
		o := outcome{fault: name, whole: time.Since(t0).Round(time.Second), detail: detail}
		o.lost, o.killed = s.check(t, l)
		t.Logf("%s: whole after %s (%s), lost %d, killed %d", name, o.whole, detail, o.lost, o.killed)
		rows = append(rows, o)
	}
	holder := func() string {
		var h []string
		WaitFor(t, "one quotad holding the lease", 90*time.Second, func() bool {
			h = s.LeaseHolders()
			return len(h) == 1
		})
		return h[0]
	}
	other := func(h string) string {
		if h == ctl[0] {
			return ctl[1]
		}
		return ctl[0]
	}

	measure("kill the active controller host", 3*time.Minute, func() string {
		settled := s.settle(t, l, stateSaveWindow)
		active := holder()
		inControl := s.InControl()
		s.Kill(t, inControl)
		if active != inControl {
			s.Kill(t, active)
		}
		ctld := WaitFor(t, "the backup slurmctld in control", 2*time.Minute, func() bool { return s.InControl() == other(inControl) })
		lease := WaitFor(t, "the standby quotad holding the lease", 2*time.Minute, func() bool {
			return slices.Equal(s.LeaseHolders(), []string{other(active)})
		})
		return fmt.Sprintf("queue settled for %s after %s; backup slurmctld in control after %s, standby quotad active %s later (%.1f cycles)",
			stateSaveWindow, settled.Round(time.Second), ctld.Round(time.Second), lease.Round(time.Second), lease.Seconds()/s.QuotadInterval().Seconds())
	})
	measure("the killed controller boots again", 3*time.Minute, func() string {
		for _, h := range ctl {
			if !s.running(h) {
				s.Boot(t, h)
			}
		}
		return "ctl hosts booted"
	})

	measure("partition the active quotad from MariaDB", 3*time.Minute, func() string {
		active := holder()
		db := s.Must(t, active, "getent", "ahostsv4", s.Facts.Site.DB)
		dbIP := strings.Fields(db)[0]
		s.Must(t, active, "iptables", "-I", "OUTPUT", "-p", "tcp", "-d", dbIP, "--dport", "3306", "-j", "DROP")
		s.Must(t, active, "iptables", "-I", "INPUT", "-p", "tcp", "-s", dbIP, "--sport", "3306", "-j", "DROP")
		stopped := WaitFor(t, "the cut-off quotad to stop holding the lease", time.Minute, func() bool {
			v, ok := s.Metric(active, "quotad_lease_held")
			return ok && v == 0
		})
		took := WaitFor(t, "the standby quotad to take the lease", 2*time.Minute, func() bool {
			return slices.Equal(s.LeaseHolders(), []string{other(active)})
		})
		s.Must(t, active, "iptables", "-D", "OUTPUT", "-p", "tcp", "-d", dbIP, "--dport", "3306", "-j", "DROP")
		s.Must(t, active, "iptables", "-D", "INPUT", "-p", "tcp", "-s", dbIP, "--sport", "3306", "-j", "DROP")
		return fmt.Sprintf("cut-off quotad passive after %s, standby active %s later", stopped.Round(time.Second), took.Round(time.Second))
	})

	for _, r := range []struct{ name, host, unit string }{
		{"restart slurmdbd", s.Facts.Site.DB, "slurmdbd"},
		{"restart MariaDB", s.Facts.Site.DB, "mariadb"},
		{"restart the slurmctld in control", "", "slurmctld"},
	} {
		measure(r.name, 3*time.Minute, func() string {
			host := r.host
			if host == "" {
				host = s.InControl()
			}
			s.Must(t, host, "systemctl", "restart", r.unit)
			return "systemctl restart " + r.unit + " on " + host
		})
	}

	measure("kill a node agent", 2*time.Minute, func() string {
		node := s.Facts.GPUNodeNames()[0]
		s.Must(t, node, "systemctl", "kill", "-s", "KILL", "elasticd-agent")
		back := WaitFor(t, "systemd to restart the agent", time.Minute, func() bool {
			out, _ := s.Exec(node, "systemctl", "show", "-p", "NRestarts", "--value", "elasticd-agent")
			active, _ := s.Exec(node, "systemctl", "is-active", "elasticd-agent")
			return out != "0" && active == "active"
		})
		return fmt.Sprintf("elasticd-agent on %s active again after %s", node, back.Round(time.Second))
	})

	measure("fill the disks of quotad's log and state", 3*time.Minute, func() string {
		active, db := holder(), s.Facts.Site.DB
		// quotad writes no file of its own: its log is the journal, its state (lease, audit,
		// quotas) MariaDB's tables. Each is a small filesystem of its own on the site.
		fill := func(host, dir string) string {
			return s.Must(t, host, "sh", "-c", "dd if=/dev/zero of="+dir+"/site-fill bs=1M 2>/dev/null; df -h --output=avail "+dir+" | tail -n1")
		}
		free := func() {
			_, _ = s.Exec(active, "rm", "-f", "/var/log/journal/site-fill")
			_, _ = s.Exec(db, "rm", "-f", "/var/lib/mysql/site-fill")
		}
		defer free()
		left := fill(active, "/var/log/journal") + " left in the journal, " + fill(db, "/var/lib/mysql") + " in MariaDB's"
		before, _ := s.Metric(active, "quotad_last_successful_cycle_timestamp_seconds")
		full := 4 * s.QuotadInterval()
		time.Sleep(full)
		after, _ := s.Metric(active, "quotad_last_successful_cycle_timestamp_seconds")
		held := s.LeaseHolders()
		// quotad must go on: a full log or database may cost it writes, never its cycles or
		// its lease.
		if gap := time.Duration(after-before) * time.Second; gap < full-2*s.QuotadInterval() || !slices.Equal(held, []string{active}) {
			t.Errorf("with full disks quotad on %s finished cycles over %s of %s, lease held by %v", active, gap, full, held)
		}
		return fmt.Sprintf("%s; for %s full: %.0f s of cycles finished on %s, lease held by %v", left, full, after-before, active, held)
	})

	var deadNode string
	measure("kill a compute host running an elastic worker", 5*time.Minute, func() string {
		q, _ := s.Queue()
		w := workers(q, l.elastic, "RUNNING")
		if len(w) == 0 {
			t.Fatalf("no running worker of elastic job %s to kill the host of", l.elastic)
		}
		deadNode = w[0].Nodes
		if deadNode == q[l.elastic].Nodes {
			t.Logf("the worker shares %s with its main job: both lose their host", deadNode)
		}
		s.Kill(t, deadNode)
		down := WaitFor(t, "slurmctld to mark "+deadNode+" down", 3*time.Minute, func() bool {
			out, _ := s.Exec(s.Facts.Site.Login, "sinfo", "-h", "-n", deadNode, "-o", "%T")
			return strings.HasPrefix(out, "down")
		})
		s.Boot(t, deadNode)
		return fmt.Sprintf("%s down after %s, booted again", deadNode, down.Round(time.Second))
	})

	twice := doubleActions(t, s.Audit(t, holder()))
	var b strings.Builder
	fmt.Fprintf(&b, "| fault (Slurm %s) | whole again after | lost | killed | what happened |\n|---|---|---|---|---|\n", s.Release)
	for _, o := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s |\n", o.fault, o.whole, o.lost, o.killed, o.detail)
	}
	fmt.Fprintf(&b, "\nquotad actions by a quotad that had lost the lease (whole run): %d\n", twice)
	t.Log("\n" + b.String())
	report(b.String())
}

// stateSaveWindow is how long the queue must stand still before a controller is killed.
// slurmctld writes its job state at most once every 5 s, and only after replying: a job
// submitted or started in the seconds before a power cut is unknown, or pending, in the state
// the backup loads, which then kills it on its node as an orphan (site/README.md). No slurm.conf
// setting changes that; the suite measures fail-over from a queue the primary has saved.
const stateSaveWindow = 15 * time.Second

// settle waits until no user job has changed state for quiet and slurmctld has saved its job
// state since the last change (a job the backfill scheduler starts is saved only with the next
// save something asks for, or by the 5-minute checkpoint), and returns how long it took.
func (s *Site) settle(t *testing.T, l *load, quiet time.Duration) time.Duration {
	t.Helper()
	t0, since, last := time.Now(), time.Now(), ""
	WaitFor(t, "a queue that stands still for "+quiet.String()+", saved since", 6*time.Minute, func() bool {
		q, _ := s.Queue()
		var b strings.Builder
		for _, id := range slices.Sorted(maps.Keys(q)) {
			fmt.Fprintf(&b, "%s:%s ", id, stateOf(q, id))
		}
		if b.String() != last {
			last, since = b.String(), time.Now()
		}
		if time.Since(since) < quiet {
			return false
		}
		saved, err := s.Exec(s.InControl(), "stat", "-c", "%Y", "/var/spool/slurmctld/job_state")
		at, perr := strconv.ParseInt(saved, 10, 64)
		// Whole seconds: saved in the second of the last change may be before it.
		return err == nil && perr == nil && time.Unix(at, 0).After(since)
	})
	return time.Since(t0)
}

// running says whether host's container runs.
func (s *Site) running(host string) bool {
	out, err := Docker("inspect", "-f", "{{.State.Running}}", s.Container(host))
	return err == nil && out == "true"
}
