//go:build site

package sitetest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// TestUpgradeSlurmbridge upgrades a site running the previous release's packages to this tree's
// under load, by docs/operations.md's "Upgrade slurmbridge", then rolls it back by "Roll back":
// after each, no job lost or killed, the borrowed and guaranteed jobs still running in the QOS
// they ran in, the elastic job still running with the same workers, one quotad acting, doctor
// clean. make site-upgrade-test brings the site up with the previous packages and runs it.
func TestUpgradeSlurmbridge(t *testing.T) {
	from, to := os.Getenv("SITE_UPGRADE_FROM"), os.Getenv("SITE_UPGRADE_TO")
	if from == "" || to == "" {
		t.Fatal("SITE_UPGRADE_FROM and SITE_UPGRADE_TO name the directories of the old and new packages: run make site-upgrade-test")
	}
	s := Require(t)
	fromVersion, toVersion := debVersion(t, from), debVersion(t, to)
	// An upgrade, not a reinstall or a downgrade: the versions sort by the commits' dates.
	if _, err := Local("dpkg", "--compare-versions", toVersion, "gt", fromVersion); err != nil {
		t.Fatalf("this tree's packages (%s) are not newer than the previous release's (%s)", toVersion, fromVersion)
	}
	for _, h := range s.hosts() {
		if got := s.installedVersion(t, h); got != fromVersion {
			t.Fatalf("%s runs slurmbridge %s, not the previous release %s: bring the site up with SITE_DEBS=%s", h, got, fromVersion, from)
		}
	}
	l := startLoad(t, s)
	// The reclaim left bob's borrowers pending: alice gives one GPU back, so a borrowed job
	// runs through the upgrade.
	back := l.alice[1]
	s.Must(t, s.Facts.Site.Login, "scancel", back)
	l.alice = l.alice[:1]
	l.userJobs = slices.DeleteFunc(l.userJobs, func(id string) bool { return id == back })
	WaitFor(t, "one of bob's jobs running borrowed again", 2*time.Minute, func() bool {
		q, _ := s.Queue()
		for _, id := range l.bob {
			if q[id].State == "RUNNING" && pools.MatchQOS(pools.DefaultBorrowQOS, q[id].QOS) {
				return true
			}
		}
		return false
	})
	before := s.loadState(t, l)
	t.Logf("load before the upgrade: %s", before)

	for _, step := range []struct {
		name, dir, version string
	}{
		{"upgrade", to, toVersion},
		{"roll back", from, fromVersion},
	} {
		t0 := time.Now()
		s.installPackages(t, step.name, step.dir)
		for _, h := range s.hosts() {
			if got := s.installedVersion(t, h); got != step.version {
				t.Errorf("%s: %s left slurmbridge %s, want %s", step.name, h, got, step.version)
			}
			// quotactl moved to slurmbridge-client: some package must still own a working one.
			if out, err := s.Exec(h, "sh", "-c", "dpkg -S /usr/bin/quotactl && quotactl --help >/dev/null"); err != nil {
				t.Errorf("%s: %s has no packaged quotactl that runs: %v: %s", step.name, h, err, out)
			}
		}
		took := time.Since(t0)
		whole := WaitFor(t, "the cluster whole after the "+step.name, 2*time.Minute, func() bool { return s.whole(l) == "" })
		lost, killed := s.check(t, l)
		if after := s.loadState(t, l); after != before {
			t.Errorf("%s changed the running load:\nbefore %s\nafter  %s", step.name, before, after)
		}
		for _, c := range s.Facts.Site.Controllers {
			s.Must(t, c, "bash", "/srv/site/install-slurmbridge.sh", "doctor")
		}
		t.Logf("%s to %s: %s on every host, whole %s later, lost %d, killed %d", step.name, step.version,
			took.Round(time.Second), whole.Round(time.Second), lost, killed)
	}
	doubleActions(t, s.Audit(t, s.Facts.Site.Controllers[0]))
}

// installPackages runs docs/operations.md's package steps on every host: the standby controller
// first, then the active one (each restarts its quotad and slurmctld), then the login and
// compute hosts (the package restarts elasticd and the agent where they run).
func (s *Site) installPackages(t *testing.T, label, dir string) {
	t.Helper()
	ctl := slices.Clone(s.Facts.Site.Controllers)
	if held := s.LeaseHolders(); len(held) == 1 && held[0] == ctl[0] {
		ctl[0], ctl[1] = ctl[1], ctl[0]
	}
	dest := "/srv/site/" + strings.ReplaceAll(label, " ", "-")
	for _, h := range s.hosts() {
		s.copyDebs(t, h, dir, dest)
	}
	for _, h := range ctl {
		s.Must(t, h, "bash", "/srv/site/install-slurmbridge.sh", "upgrade", "controller", dest)
	}
	for _, h := range s.hosts() {
		if !slices.Contains(ctl, h) {
			s.Must(t, h, "bash", "/srv/site/install-slurmbridge.sh", "upgrade", "node", dest)
		}
	}
}

// loadState is what must survive an upgrade: each user job's state, a running job's QOS (a
// pending one's is quotad's to change), and the elastic job's running workers.
func (s *Site) loadState(t *testing.T, l *load) string {
	t.Helper()
	q, ok := s.Queue()
	if !ok {
		t.Fatal("squeue failed")
	}
	var parts []string
	for _, id := range l.userJobs {
		if q[id].State == "RUNNING" {
			parts = append(parts, fmt.Sprintf("%s:RUNNING/%s", id, q[id].QOS))
		} else {
			parts = append(parts, id+":"+stateOf(q, id))
		}
	}
	var w []string
	for _, j := range workers(q, l.elastic, "RUNNING") {
		w = append(w, j.PrintedID)
	}
	sort.Strings(w)
	return strings.Join(parts, " ") + " workers:" + strings.Join(w, ",")
}

// hosts are the hosts with a slurmbridge package: controllers, login and compute hosts.
func (s *Site) hosts() []string {
	return slices.Concat(s.Facts.Site.Controllers, []string{s.Facts.Site.Login}, s.Facts.NodeNames())
}

func (s *Site) installedVersion(t *testing.T, host string) string {
	t.Helper()
	pkg := "slurmbridge-node"
	if slices.Contains(s.Facts.Site.Controllers, host) {
		pkg = "slurmbridge-controller"
	}
	return s.Must(t, host, "dpkg-query", "-W", "-f", "${Version}", pkg)
}

// copyDebs copies dir's packages to dest on host and returns their paths there by role
// ("controller", "node", and "client" from the release that split quotactl out).
func (s *Site) copyDebs(t *testing.T, host, dir, dest string) map[string]string {
	t.Helper()
	s.Must(t, host, "install", "-d", "-m", "0700", dest)
	there := map[string]string{}
	for _, deb := range debs(t, dir) {
		if out, err := Docker("cp", deb, s.Container(host)+":"+dest+"/"); err != nil {
			t.Fatalf("docker cp %s to %s: %v: %s", deb, host, err, out)
		}
		role := strings.TrimPrefix(strings.Split(filepath.Base(deb), "_")[0], "slurmbridge-")
		there[role] = dest + "/" + filepath.Base(deb)
	}
	return there
}

func debs(t *testing.T, dir string) []string {
	t.Helper()
	paths, _ := filepath.Glob(filepath.Join(dir, "slurmbridge-*.deb"))
	if len(paths) < 2 || len(paths) > 3 {
		t.Fatalf("%s holds %d slurmbridge packages, want the controller's and the node's (and the client's)", dir, len(paths))
	}
	return paths
}

// debVersion is the version in a directory's package names (slurmbridge-node_VERSION_amd64.deb).
func debVersion(t *testing.T, dir string) string {
	t.Helper()
	for _, p := range debs(t, dir) {
		if name := filepath.Base(p); strings.HasPrefix(name, "slurmbridge-node_") {
			return strings.Split(name, "_")[1]
		}
	}
	t.Fatalf("no slurmbridge-node package in %s", dir)
	return ""
}
