package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseReport(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{`{"time": 1795341352.5, "worker": "12", "samples_per_sec": 95.5}`, true},
		{`{"time": "2026-11-22T10:00:00Z", "worker": "12", "samples_per_sec": 0}`, true},
		{`{"time": 1795341352, "worker": "12"}`, false},                           // no rate
		{`{"time": 1795341352, "worker": "12", "samples_per_sec": -1}`, false},    // negative
		{`{"time": "yesterday", "worker": "12", "samples_per_sec": 1}`, false},    // bad time
		{`{"time": 1795341352, "worker": "12", "samples_per_sec": 1e999}`, false}, // overflow
		{`not json`, false},
		{`{"time": 1, "worker": "12", "samples_per_sec": 95, "compute_s": 0.125, "step_s": 0.4, "world_size": 3}`, true},
		{`{"time": 1, "worker": "12", "samples_per_sec": 95, "compute_s": -0.1}`, false},
		{`{"time": 1, "worker": "12", "samples_per_sec": 95, "compute_s": "fast"}`, false},
		{`{"time": 1, "worker": "12", "samples_per_sec": 1, "pad": "` + strings.Repeat("x", 2000) + `"}`, false},
	} {
		rep, err := ParseReport([]byte(tc.line))
		if (err == nil) != tc.ok {
			t.Errorf("ParseReport(%.60s): err %v, want ok=%v", tc.line, err, tc.ok)
		}
		if want := 0.0; strings.Contains(tc.line, `"compute_s": 0.125`) && rep.ComputeSecondsPerStep != 0.125 || !strings.Contains(tc.line, "compute_s") && rep.ComputeSecondsPerStep != want {
			t.Errorf("ParseReport(%.60s): compute %v", tc.line, rep.ComputeSecondsPerStep)
		}
	}
}

func TestLatestReportSkipsPartialForeignAndBrokenLines(t *testing.T) {
	dir := Dir(t.TempDir())
	if err := os.MkdirAll(dir.ReportDir(7), 0o755); err != nil {
		t.Fatal(err)
	}
	content := `{"time": 100, "worker": "12", "samples_per_sec": 1}
{"time": 200, "worker": "12", "samples_per_sec": 2}
{"time": 300, "worker": "99", "samples_per_sec": 3}
garbage
{"time": 400, "worker": "12", "samples_per`
	if err := os.WriteFile(filepath.Join(dir.ReportDir(7), "12.jsonl"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	uid := uint32(os.Getuid())
	rep, ok, err := dir.LatestReport(7, "12", uid)
	if err != nil || !ok || rep.SamplesPerSec != 2 || !rep.Time.Equal(time.Unix(200, 0)) {
		t.Fatalf("got %+v ok=%v err=%v; want the rate 2 reported at 200", rep, ok, err)
	}
	if _, ok, err := dir.LatestReport(7, "13", uid); ok || err != nil {
		t.Fatalf("a worker without a file: ok=%v err=%v", ok, err)
	}
	if _, _, err := dir.LatestReport(7, "12", uid+1); err == nil {
		t.Fatal("a file owned by someone else must be refused")
	}
	if _, _, err := dir.LatestReport(7, "../x", uid); err == nil {
		t.Fatal("a worker id that is not a job id must be refused")
	}
}

func TestReadDeclaration(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("declarations must be owned by root; run as root")
	}
	dir := Dir(t.TempDir())
	write := func(s string) {
		t.Helper()
		if err := os.MkdirAll(dir.JobDir(5), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir.JobDir(5), "declaration.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// As the plugin wrote it on the testbed.
	write(`{"version":1,"job_id":5,"uid":1001,"gid":1001,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:29405","pools":["a100","v100"],"recorded":1795341352}`)
	d, err := dir.ReadDeclaration(5)
	if err != nil || d.MaxWorkers != 3 || d.Pools[1] != "v100" || d.UID != 1001 {
		t.Fatalf("got %+v, %v", d, err)
	}
	if d.ValuePerMillionSamples != 0 {
		t.Fatalf("a declaration without --elastic-value has value %v", d.ValuePerMillionSamples)
	}
	write(`{"version":1,"job_id":5,"uid":1001,"gid":1001,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:29405","pools":["a100"],"value_per_million_samples":2.500000,"recorded":1795341352}`)
	if d, err = dir.ReadDeclaration(5); err != nil || d.ValuePerMillionSamples != 2.5 {
		t.Fatalf("with --elastic-value=2.5: got %+v, %v", d, err)
	}
	write(`{"version":1,"job_id":5,"uid":1001,"gid":1001,"min_workers":1,"max_workers":8,"gpus_per_worker":2,"rdzv_endpoint":"vm:29405","pools":["a100"],"max_batch":256,"batch_per_device":32,"recorded":1795341352}`)
	if d, err = dir.ReadDeclaration(5); err != nil || d.MaxBatch != 256 || d.BatchPerDevice != 32 {
		t.Fatalf("with --elastic-max-batch=256:32: got %+v, %v", d, err)
	}
	for _, bad := range []string{
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"max_batch":256}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"max_batch":16,"batch_per_device":32}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":3,"max_workers":4,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"max_batch":64,"batch_per_device":32}`,
		`{"version":1,"job_id":6,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[]}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":4,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[]}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm;rm:1","pools":[]}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":["a","a"]}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"extra":1}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"value_per_million_samples":-1}`,
		`{"version":1,"job_id":5,"uid":1,"gid":1,"min_workers":1,"max_workers":3,"gpus_per_worker":1,"rdzv_endpoint":"vm:1","pools":[],"value_per_million_samples":1e10}`,
	} {
		write(bad)
		if _, err := dir.ReadDeclaration(5); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestWriteHosts(t *testing.T) {
	dir := Dir(t.TempDir())
	if err := os.MkdirAll(dir.JobDir(3), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := dir.WriteHosts(3, []Host{{"a100-1", 4}, {"v100-2", 4}}); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dir.HostsFile(3))
	if string(got) != "a100-1:4\nv100-2:4\n" {
		t.Fatalf("hosts file %q", got)
	}
}

func TestEffectiveMax(t *testing.T) {
	for _, tc := range []struct {
		max, gpus, batch, perDevice, want int
		why                               string
	}{
		{8, 1, 0, 0, 8, ""},
		{8, 1, 256, 32, 8, ""},
		{8, 1, 128, 32, 4, " (max global batch 128 at 32 per GPU)"},
		{8, 4, 256, 32, 2, " (max global batch 256 at 32 per GPU)"},
		{8, 4, 300, 32, 2, " (max global batch 300 at 32 per GPU)"},
	} {
		d := Declaration{MinWorkers: 1, MaxWorkers: tc.max, GPUsPerWorker: tc.gpus, MaxBatch: tc.batch, BatchPerDevice: tc.perDevice}
		if n, why := d.EffectiveMax(); n != tc.want || why != tc.why {
			t.Errorf("%+v: got %d %q, want %d %q", d, n, why, tc.want, tc.why)
		}
	}
}

// The shipped torchrun example (elasticd/examples/train.py, NCCL on CUDA) as it reported from
// an NVIDIA H200: every line is one elasticd reads, and the latest is the file's last.
func TestReportsOfTheExampleOnAGPU(t *testing.T) {
	data, err := os.ReadFile("testdata/h200-torchrun-4242.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) < 10 {
		t.Fatalf("%d report lines, want the run's 10 or more", len(lines))
	}
	var last Report
	for i, line := range lines {
		rep, err := ParseReport([]byte(line))
		if err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		if rep.Worker != "4242" || rep.SamplesPerSec <= 0 || rep.ComputeSecondsPerStep <= 0 {
			t.Errorf("line %d: %+v, want worker 4242 with samples/s and compute time", i+1, rep)
		}
		if !rep.Time.After(last.Time) {
			t.Errorf("line %d: time %v not after %v", i+1, rep.Time, last.Time)
		}
		last = rep
	}

	dir := Dir(t.TempDir())
	if err := os.MkdirAll(dir.ReportDir(4242), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir.ReportDir(4242), "4242.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	got, ok, err := dir.LatestReport(4242, "4242", uint32(os.Getuid()))
	if err != nil || !ok || got != last {
		t.Errorf("LatestReport = %+v, %v, %v; want %+v", got, ok, err, last)
	}
}
