package registry

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"testing"
)

// FuzzParseReport feeds report lines (a job's user writes them): what is accepted has a
// bounded, finite rate and compute time, and reads the same twice.
func FuzzParseReport(f *testing.F) {
	data, err := os.ReadFile("testdata/h200-torchrun-4242.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	for _, line := range bytes.Split(data, []byte("\n")) {
		f.Add(line)
	}
	for _, s := range []string{`{"time": 1, "worker": "12", "samples_per_sec": 1e308}`, `{"time": "2026-11-22T10:00:00Z", "worker": "12", "samples_per_sec": 0, "compute_s": 1e-300}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		rep, err := ParseReport(line)
		if err != nil {
			if rep != (Report{}) {
				t.Fatalf("a report and an error: %v", err)
			}
			return
		}
		for _, v := range []float64{rep.SamplesPerSec, rep.ComputeSecondsPerStep} {
			if math.IsNaN(v) || v < 0 || v > MaxSamplesPerSec {
				t.Fatalf("%q gave %+v", line, rep)
			}
		}
		if again, _ := ParseReport(line); !reflect.DeepEqual(again, rep) {
			t.Fatal("two reads differ")
		}
	})
}

// FuzzLastReport feeds a report file's tail: the report found is the worker's, from a
// complete line.
func FuzzLastReport(f *testing.F) {
	f.Add([]byte("{\"time\": 100, \"worker\": \"12\", \"samples_per_sec\": 1}\n{\"time\": 200, \"worker\": \"12\", \"samples_per"), "12")
	f.Add([]byte("garbage\n\n\n"), "12")
	f.Fuzz(func(t *testing.T, buf []byte, worker string) {
		if len(buf) > tailBytes {
			buf = buf[len(buf)-tailBytes:]
		}
		rep, ok := lastReport(buf, worker)
		if ok && rep.Worker != worker {
			t.Fatalf("worker %q's report names %q", worker, rep.Worker)
		}
	})
}

// FuzzParseDeclaration feeds declaration.json texts: what is accepted validates, names the
// job, and survives a round trip through JSON.
func FuzzParseDeclaration(f *testing.F) {
	f.Add([]byte(`{"version":1,"job_id":7,"uid":1001,"gid":1001,"min_workers":1,"max_workers":4,"gpus_per_worker":1,"rdzv_endpoint":"a100-1:29500","pools":["a100"],"value_per_million_samples":2.5,"max_batch":256,"batch_per_device":32,"recorded":1795341352}`))
	f.Add([]byte(`{"version":1,"job_id":7,"min_workers":2,"max_workers":1,"gpus_per_worker":1,"rdzv_endpoint":"x:1"}`))
	f.Add([]byte(`{"version":1,"job_id":7,"min_workers":1,"max_workers":1,"gpus_per_worker":1,"rdzv_endpoint":"x:1","value_per_million_samples":NaN}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		decl, err := ParseDeclaration(data, 7)
		if err != nil {
			if decl != nil {
				t.Fatalf("a declaration and an error: %v", err)
			}
			return
		}
		if decl.JobID != 7 || decl.Validate() != nil {
			t.Fatalf("accepted %+v", decl)
		}
		if n, _ := decl.EffectiveMax(); n < decl.MinWorkers || n > decl.MaxWorkers {
			t.Fatalf("effective max %d outside %d..%d", n, decl.MinWorkers, decl.MaxWorkers)
		}
		text, err := json.Marshal(decl)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseDeclaration(text, 7)
		if err != nil || !reflect.DeepEqual(back, decl) {
			t.Fatalf("round trip %s: %+v, %v", text, back, err)
		}
	})
}
