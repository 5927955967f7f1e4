// Command pageload measures how long quotad takes to serve its cluster page with a long queue,
// on the running testbed and its quotad (SLURMBRIDGE_QUOTAD_URL of the testbed's env file):
// --jobs one-a100 jobs of bob's are submitted and left pending (his quota is 4 a100; quotad
// lends the idle ones), then, once quotad has planned on a snapshot holding them all, the page
// (/cluster), its JSON (/api/v1/cluster) and the page's job search are each fetched --rounds
// times, whole bodies read, one at a time, while quotad keeps cycling over the queue. It prints
// each path's median and 90th percentile; the last line is
// "page_ms=... json_ms=... search_ms=... jobs=N" (medians). The page loads nothing else (no
// asset), so fetching it is loading it. The jobs are cancelled at the end. Run as root:
//
//	go run ./bench/cmd/pageload -jobs 5000 -rounds 50
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/slurmbridge/slurmbridge/bench/internal/fanout"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

func main() {
	jobs := flag.Int("jobs", 5000, "pending one-a100 jobs to submit (single jobs, not arrays)")
	rounds := flag.Int("rounds", 50, "fetches of each path")
	flag.Parse()
	if err := run(*jobs, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "pageload:", err)
		os.Exit(1)
	}
}

func run(n, rounds int) error {
	ctx := context.Background()
	c, err := testbed.Open(ctx)
	if err != nil {
		return err
	}
	base := c.QuotadURL()
	if base == "" {
		return fmt.Errorf("the testbed's env file names no SLURMBRIDGE_QUOTAD_URL")
	}
	name := fmt.Sprintf("pageload-%d", time.Now().UnixNano())
	defer func() { _ = c.Slurm().CancelNamed(context.Background(), name) }()
	start := time.Now()
	ids := make([]string, n)
	if err := fanout.Run(n, func(i int) error {
		id, err := c.Submit(ctx, "bob", "--job-name="+name, "-p", "a100", "--gres=gpu:a100:1", "-t", "60", "--wrap", "sleep 600")
		ids[i] = id
		return err
	}); err != nil {
		return err
	}
	filled := time.Now()
	fmt.Printf("submitted %d jobs in %s\n", n, filled.Sub(start).Round(100*time.Millisecond))

	// Wait for a plan on a snapshot taken after the last submission.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var cr view.ClusterResponse
		if err := getJSON(base+view.ClusterPath, &cr); err == nil && cr.Status.Plan != nil && cr.Status.Plan.SnapshotTakenAt.After(filled) {
			pending := 0
			for _, p := range cr.Pools {
				pending += p.Jobs.Pending
			}
			fmt.Printf("quotad planned on a snapshot with %d pending jobs (pools' sum) at %s\n", pending, cr.Status.Plan.SnapshotTakenAt.Format(time.RFC3339))
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("quotad did not plan on the full queue within 3 minutes")
		}
		time.Sleep(time.Second)
	}

	paths := []struct{ label, path string }{
		{"page", "/cluster"},
		{"json", view.ClusterPath},
		{"search", "/cluster?job=" + ids[n-1]},
	}
	medians := map[string]float64{}
	fmt.Println("path                                 median_ms  p90_ms  bytes")
	for _, p := range paths {
		var ms []float64
		size := 0
		for range rounds {
			t0 := time.Now()
			b, err := fetch(base + p.path)
			if err != nil {
				return err
			}
			ms = append(ms, float64(time.Since(t0).Microseconds())/1000)
			size = len(b)
		}
		slices.Sort(ms)
		medians[p.label] = ms[len(ms)/2]
		fmt.Printf("%-36s %9.2f  %6.2f  %d\n", p.path, ms[len(ms)/2], ms[len(ms)*9/10], size)
	}
	fmt.Printf("page_ms=%.2f json_ms=%.2f search_ms=%.2f jobs=%d rounds=%d\n", medians["page"], medians["json"], medians["search"], n, rounds)
	return nil
}

func fetch(url string) ([]byte, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", url, resp.Status)
	}
	return b, err
}

func getJSON(url string, v any) error {
	b, err := fetch(url)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
