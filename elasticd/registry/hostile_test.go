package registry

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What a hostile user can put in their job's reports directory (theirs to write): each is
// refused or bounded, quickly, and never blocks.
func TestLatestReportRefusesOrBoundsHostileFiles(t *testing.T) {
	dir := Dir(t.TempDir())
	reports := dir.ReportDir(7)
	if err := os.MkdirAll(reports, 0o755); err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Getuid())
	good := `{"time": 200, "worker": "%s", "samples_per_sec": 2}` + "\n"
	path := func(w string) string { return filepath.Join(reports, w+".jsonl") }
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte(fmt.Sprintf(good, "10")), 0o600); err != nil {
		t.Fatal(err)
	}
	// 10: a symbolic link to another file is not followed.
	if err := os.Symlink(secret, path("10")); err != nil {
		t.Fatal(err)
	}
	// 11: a FIFO, which a plain open would block on until a writer came.
	if err := syscall.Mkfifo(path("11"), 0o644); err != nil {
		t.Fatal(err)
	}
	// 12: a 10 GB sparse file whose last line is good: only its tail is read.
	f, err := os.Create(path("12"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(10 << 30); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("\n"+fmt.Sprintf(good, "12")), 10<<30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// 13: one endless line (1 MB, no newline); 14: non-UTF-8 and NaN, Inf, negative, huge rates.
	if err := os.WriteFile(path("13"), bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := "\xff\xfe{\"time\": 1, \"worker\": \"14\", \"samples_per_sec\": 1}\n" +
		`{"time": 1, "worker": "14", "samples_per_sec": NaN}` + "\n" +
		`{"time": 1, "worker": "14", "samples_per_sec": -5}` + "\n" +
		`{"time": 1, "worker": "14", "samples_per_sec": 1e308}` + "\n" +
		`{"time": 1, "worker": "1\xff4", "samples_per_sec": 1}` + "\n"
	if err := os.WriteFile(path("14"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	// 15: thousands of other files beside a good one change nothing.
	for i := range 3000 {
		if err := os.WriteFile(filepath.Join(reports, fmt.Sprintf("junk-%d.jsonl", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path("15"), []byte(fmt.Sprintf(good, "15")), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		worker, wantErr string
		wantOK          bool
	}{
		{"10", "too many levels of symbolic links", false},
		{"11", "not a regular file", false},
		{"12", "", true},
		{"13", "", false},
		{"14", "", false},
		{"15", "", true},
	} {
		start := time.Now()
		rep, ok, err := dir.LatestReport(7, tc.worker, uid)
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("worker %s: took %s", tc.worker, took)
		}
		if ok != tc.wantOK || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("worker %s: ok %v err %v, want ok %v and error %q", tc.worker, ok, err, tc.wantOK, tc.wantErr)
		}
		if ok && (rep.SamplesPerSec != 2 || rep.Worker != tc.worker) {
			t.Errorf("worker %s: report %+v", tc.worker, rep)
		}
	}
}
