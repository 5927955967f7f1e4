//go:build site

package sitetest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// The Slurm upgrade: a site of Slurm 24.11 (Debian trixie) to 26.05, whose Debian packages are in
// sid: each host gets sid as a repository pinned below its own, as a site adds the new release's
// repository, so nothing moves until a step names the new version.
const (
	upgradeFromRelease = "24.11"
	upgradeSuite       = "sid"
)

// TestUpgradeSlurm upgrades the site's Slurm under load in Slurm's order (slurmdbd, then the
// controllers, then the nodes) by docs/operations.md's "Upgrade Slurm". On the first controller
// it first does what the document warns against, Slurm alone, to show that apt refuses it and
// that doctor catches a forced one before slurmctld restarts, then rolls that back. After the upgrade: no job lost or
// killed, the running jobs as they were, doctor clean. make site-slurm-upgrade-test runs it.
func TestUpgradeSlurm(t *testing.T) {
	newDebs := os.Getenv("SITE_SLURM_UPGRADE_DEBS")
	if newDebs == "" {
		t.Fatal("SITE_SLURM_UPGRADE_DEBS names the directory of slurmbridge's packages built for the new Slurm: run make site-slurm-upgrade-test")
	}
	s := Require(t)
	if s.Release != upgradeFromRelease {
		t.Fatalf("the Slurm upgrade starts from a site of Slurm %s, not %s", upgradeFromRelease, s.Release)
	}
	newVersion := debSlurmVersion(t, newDebs)
	oldVersion := s.Must(t, s.Facts.Site.Controllers[0], "dpkg-query", "-W", "-f", "${Version}", "slurmctld")
	ctl := s.Facts.Site.Controllers
	db := s.Facts.Site.DB
	all := append([]string{db}, s.hosts()...)
	// Debian's Slurm packages restart their daemon when upgraded. The site holds those restarts
	// (policy-rc.d, which deb-systemd-invoke obeys) to take them in Slurm's order, and to run
	// doctor before slurmctld loads the plugin.
	for _, h := range all {
		s.Must(t, h, "sh", "-c", `printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 0755 /usr/sbin/policy-rc.d`)
		s.Must(t, h, "sh", "-c", `echo "deb http://deb.debian.org/debian `+upgradeSuite+` main" >/etc/apt/sources.list.d/next-slurm.list &&
printf 'Package: *\nPin: release n=`+upgradeSuite+`\nPin-Priority: 100\n' >/etc/apt/preferences.d/next-slurm &&
apt-get -o Acquire::Check-Valid-Until=false update -qq`)
	}
	l := startLoad(t, s)
	before := s.loadState(t, l)
	t.Logf("load: %s", before)
	apt := func(host string, args ...string) string {
		return s.Must(t, host, append([]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-y", "-q", "--no-install-recommends",
			"-t", upgradeSuite, "-o", "Dpkg::Options::=--force-confold"}, args...)...)
	}
	// slurmPackages are the host's installed Slurm packages that exist at version, pinned to it:
	// an upgrade or a roll back takes all of them (Debian's slurm-wlm depends on each at one
	// version).
	slurmPackages := func(host, version string) []string {
		out := s.Must(t, host, "sh", "-c", `for p in $(dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' |
	awk '$1 == "ii" && $2 ~ /^(slurm|libslurm|libpmi|sview)/ && $2 !~ /^slurmbridge/ {print $2}'); do
	if apt-cache madison "$p" | awk -v v="$1" '$3 == v {found=1} END {exit !found}'; then echo "$p=$1"; fi; done`, "sh", version)
		return strings.Fields(out)
	}

	// 1. slurmdbd first: it converts the database, and a 24.11 slurmctld talks to a 26.05 slurmdbd.
	t0 := time.Now()
	s.Must(t, db, "sh", "-c", "mysqldump --single-transaction slurm_acct_db >/root/slurm_acct_db-"+upgradeFromRelease+".sql")
	apt(db, append([]string{"install"}, slurmPackages(db, newVersion)...)...)
	s.Must(t, db, "systemctl", "restart", "slurmdbd")
	WaitFor(t, "slurmdbd "+newVersion+" answering", 2*time.Minute, func() bool {
		_, err := s.Exec(s.Facts.Site.Login, "sacctmgr", "-n", "show", "cluster")
		return err == nil
	})
	t.Logf("slurmdbd upgraded in %s", time.Since(t0).Round(time.Second))

	// 2a. What the document warns against, on the first controller: Slurm alone.
	out, err := s.Exec(ctl[0], "apt-get", "-s", "-t", upgradeSuite, "install", "slurmctld="+newVersion)
	if !strings.Contains(out, "slurmbridge-controller") || (err == nil && !strings.Contains(out, "Remv slurmbridge-controller")) {
		t.Errorf("apt would upgrade slurmctld alone without minding slurmbridge-controller's plugin (%v):\n%s", err, out)
	}
	// An admin who forces it: the packages, without their dependencies' consent. slurmctld
	// keeps running the old release until it restarts.
	// What apt would install if it could remove slurmbridge-controller, installed without it.
	s.Must(t, ctl[0], append([]string{"sh", "-c", `rm -rf /root/next-slurm && mkdir -p /root/next-slurm/partial &&
apt-get -y -q -t ` + upgradeSuite + ` --download-only -o Dir::Cache::archives=/root/next-slurm install "$@" >/dev/null`, "sh"}, slurmPackages(ctl[0], newVersion)...)...)
	// "slurm 24.11.5", or "slurm-wlm 26.05.5" from Debian's builds.
	if v := s.Must(t, ctl[0], "sh", "-c", "dpkg -i --force-depends /root/next-slurm/*.deb >/dev/null 2>&1; slurmctld -V"); len(strings.Fields(v)) != 2 || !strings.HasPrefix(newVersion, strings.Fields(v)[1]) {
		t.Fatalf("after the forced install slurmctld -V says %q, not %s", v, newVersion)
	}
	doctor, err := s.Exec(ctl[0], "bash", "/srv/site/install-slurmbridge.sh", "doctor")
	if err == nil || !strings.Contains(doctor, "slurmctld refuses the plugin") {
		t.Errorf("doctor on a controller with Slurm %s installed and the plugin of %s did not say the restart would fail:\n%s", newVersion, upgradeFromRelease, doctor)
	}
	t.Logf("doctor before the restart, Slurm upgraded alone:\n%s", grepLines(doctor, "plugin"))
	// Its roll back, before any restart: the old Slurm packages again, and doctor is clean.
	apt(ctl[0], append([]string{"install", "--allow-downgrades"}, slurmPackages(ctl[0], oldVersion)...)...)
	if out, err := s.Exec(ctl[0], "bash", "/srv/site/install-slurmbridge.sh", "doctor"); err != nil {
		t.Errorf("doctor after rolling Slurm back to %s on %s: %v:\n%s", oldVersion, ctl[0], err, out)
	}

	// 2b. The document's step: Slurm and slurmbridge in one transaction on each controller, then
	// the restart (the backup stopped meanwhile, so the two never run different releases).
	t0 = time.Now()
	for _, h := range ctl {
		debs := s.copyDebs(t, h, newDebs, "/srv/site/next-slurm")
		apt(h, append([]string{"install", debs["controller"], debs["client"]}, slurmPackages(h, newVersion)...)...)
		// The running slurmctld does not answer the new commands until its restart: doctor
		// checks the plugin against the installed slurmctld.
		doctor, _ := s.Exec(h, "bash", "/srv/site/install-slurmbridge.sh", "doctor")
		if !strings.Contains(doctor, "as the installed slurmctld") && !strings.Contains(doctor, "restart slurmctld") {
			t.Errorf("%s: doctor between the upgrade and the restart did not find the plugin ready for the installed Slurm:\n%s", h, doctor)
		}
		t.Logf("%s: doctor between the upgrade and the restart:\n%s", h, grepLines(doctor, "PROBLEM"))
	}
	s.Must(t, ctl[1], "systemctl", "stop", "slurmctld")
	s.Must(t, ctl[0], "systemctl", "restart", "slurmctld")
	s.Must(t, ctl[1], "systemctl", "start", "slurmctld")
	for _, h := range ctl {
		s.Must(t, h, "bash", "/srv/site/install-slurmbridge.sh", "doctor")
	}
	t.Logf("controllers upgraded in %s", time.Since(t0).Round(time.Second))

	// 3. The login and compute hosts: Slurm's client and slurmd with slurmbridge-node, then
	// slurmd's restart (running jobs' slurmstepd stay).
	t0 = time.Now()
	for _, h := range s.hosts() {
		if slices.Contains(ctl, h) {
			continue
		}
		debs := s.copyDebs(t, h, newDebs, "/srv/site/next-slurm")
		apt(h, append([]string{"install", debs["node"], debs["client"]}, slurmPackages(h, newVersion)...)...)
		if h != s.Facts.Site.Login {
			s.Must(t, h, "systemctl", "restart", "slurmd")
		}
	}
	t.Logf("login and compute hosts upgraded in %s", time.Since(t0).Round(time.Second))

	for _, h := range all {
		s.Must(t, h, "rm", "-f", "/usr/sbin/policy-rc.d")
	}
	whole := WaitFor(t, "the cluster whole on Slurm "+newVersion, 3*time.Minute, func() bool { return s.whole(l) == "" })
	lost, killed := s.check(t, l)
	if after := s.loadState(t, l); after != before {
		t.Errorf("the Slurm upgrade changed the running load:\nbefore %s\nafter  %s", before, after)
	}
	for _, h := range all {
		if v := s.Must(t, h, "sh", "-c", "dpkg-query -W -f '${Version}' slurm-client"); v != newVersion {
			t.Errorf("%s has slurm-client %s, want %s", h, v, newVersion)
		}
	}
	doubleActions(t, s.Audit(t, ctl[0]))
	t.Logf("Slurm %s -> %s: whole %s after the last host, lost %d, killed %d", upgradeFromRelease, newVersion, whole.Round(time.Second), lost, killed)
}

// debSlurmVersion is the Slurm package version slurmbridge-controller in dir was built for (its
// exact Depends on slurmctld).
func debSlurmVersion(t *testing.T, dir string) string {
	t.Helper()
	for _, p := range debs(t, dir) {
		if strings.HasPrefix(filepath.Base(p), "slurmbridge-controller_") {
			out, err := Local("dpkg-deb", "-f", p, "Depends")
			if err != nil {
				t.Fatalf("dpkg-deb -f %s: %v", p, err)
			}
			for _, dep := range strings.Split(out, ",") {
				if name, version, ok := strings.Cut(strings.TrimSpace(dep), " (= "); ok && name == "slurmctld" {
					return strings.TrimSuffix(version, ")")
				}
			}
		}
	}
	t.Fatalf("no slurmbridge-controller in %s with an exact slurmctld dependency", dir)
	return ""
}

func grepLines(text, word string) string {
	var keep []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, word) {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}
