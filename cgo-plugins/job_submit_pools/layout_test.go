package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The offsets in job_record_layout.h are generated from each release's source, never measured
// by hand: for every SchedMD tarball at hand (../shared/slurm-source, on every machine and in
// CI), gen-layout.sh computes the release's entry again from the tarball and it must be the
// header's, byte for byte.
func TestLayoutsAreThoseOfTheSourceAtHand(t *testing.T) {
	dir := os.Getenv("SLURM_SOURCE_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "slurm-source")
	}
	tarballs, _ := filepath.Glob(filepath.Join(dir, "slurm-*.tar.xz"))
	if len(tarballs) == 0 {
		t.Fatalf("no Slurm source tarball in %s (SLURM_SOURCE_DIR names another folder)", dir)
	}
	header, err := os.ReadFile("job_record_layout.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tarballs {
		version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(tb), "slurm-"), ".tar.xz")
		out, err := exec.Command("bash", "testdata/gen-layout.sh", "--entries", version+"=tarball:"+tb).CombinedOutput()
		if err != nil {
			t.Fatalf("gen-layout.sh --entries %s from %s: %v\n%s", version, tb, err, out)
		}
		got := layoutEntry(t, string(out), version)
		if want := layoutEntry(t, string(header), version); got != want {
			t.Errorf("Slurm %s: job_record_layout.h has\n%s\nbut its source %s gives\n%s", version, want, tb, got)
		}
	}
}

// layoutEntry is the entry of version in a layout table: its lines from "{ MAJOR, MINOR, MICRO,"
// to the closing "},".
func layoutEntry(t *testing.T, table, version string) string {
	t.Helper()
	var major, minor, micro int
	if _, err := fmt.Sscanf(version, "%d.%d.%d", &major, &minor, &micro); err != nil {
		t.Fatalf("release %q: %v", version, err)
	}
	start := regexp.MustCompile(fmt.Sprintf(`(?m)^\t\{ %d, %d, %d, .*$`, major, minor, micro))
	loc := start.FindStringIndex(table)
	if loc == nil {
		t.Fatalf("no layout entry for Slurm %s in:\n%s", version, table)
	}
	rest := table[loc[0]:]
	end := strings.Index(rest, "}, },")
	if end < 0 {
		t.Fatalf("the layout entry for Slurm %s does not end", version)
	}
	return rest[:end+len("}, },")]
}

// The releases the plugin exports for doctor (POOLS_JOB_LAYOUT_RELEASES) are the table's
// entries, in its order: doctor tells a site whose micro release the table lacks from them.
func TestExportedLayoutReleasesAreTheTables(t *testing.T) {
	header, err := os.ReadFile("job_record_layout.h")
	if err != nil {
		t.Fatal(err)
	}
	var entries []string
	for _, m := range regexp.MustCompile(`(?m)^\t\{ (\d+), (\d+), (\d+), 0x`).FindAllStringSubmatch(string(header), -1) {
		var v [3]int
		for i := range v {
			fmt.Sscan(m[i+1], &v[i])
		}
		entries = append(entries, fmt.Sprintf("0x%02x%02x%02x", v[0], v[1], v[2]))
	}
	def := regexp.MustCompile(`(?s)#define POOLS_JOB_LAYOUT_RELEASES((?:[^\n]*\\\n)*[^\n]*)`).FindStringSubmatch(string(header))
	if def == nil {
		t.Fatal("job_record_layout.h defines no POOLS_JOB_LAYOUT_RELEASES")
	}
	exported := regexp.MustCompile(`0x[0-9a-f]{6}`).FindAllString(def[1], -1)
	if len(entries) == 0 || strings.Join(exported, ",") != strings.Join(entries, ",") {
		t.Errorf("POOLS_JOB_LAYOUT_RELEASES lists %v, but the table's entries are %v", exported, entries)
	}
}
