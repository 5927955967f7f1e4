package replay

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Watched are the processes a replay samples throughout each mode: slurmbridge's daemons and
// slurmctld, by their pid files in the testbed's run directory.
var Watched = []string{"quotad", "elasticd", "slurmctld"}

// cycleMetrics are the daemons' cycle-duration histograms on their /metrics pages.
var cycleMetrics = map[string]string{"quotad": "quotad_cycle_duration_seconds", "elasticd": "elasticd_cycle_seconds"}

// DaemonSample is the watched processes at one moment of a mode: resident memory, and the mean
// length of the cycles the daemons finished since the sample before (absent: none finished,
// or the daemon is not running).
type DaemonSample struct {
	T      float64 // seconds since the mode's first submission
	RSSMB  map[string]float64
	CycleS map[string]float64
}

// daemonWatch samples the watched processes every interval until stopped.
type daemonWatch struct {
	runDir  string
	metrics map[string]string // daemon → its /metrics URL
	// last histogram sum and count per daemon, to take the cycles between two samples
	lastSum, lastCount map[string]float64
	samples            []DaemonSample
}

func newDaemonWatch(runDir string, metrics map[string]string) *daemonWatch {
	return &daemonWatch{runDir: runDir, metrics: metrics, lastSum: map[string]float64{}, lastCount: map[string]float64{}}
}

// run samples until ctx ends, then returns the samples.
func (w *daemonWatch) run(ctx context.Context, start time.Time, every time.Duration) []DaemonSample {
	tick := time.NewTicker(every)
	defer tick.Stop()
	w.sample(ctx, start) // the histograms' starting point
	w.samples = w.samples[:0]
	for {
		select {
		case <-ctx.Done():
			return w.samples
		case <-tick.C:
			w.sample(ctx, start)
		}
	}
}

func (w *daemonWatch) sample(ctx context.Context, start time.Time) {
	s := DaemonSample{T: time.Since(start).Seconds(), RSSMB: map[string]float64{}, CycleS: map[string]float64{}}
	for _, name := range Watched {
		if mb, ok := rssMB(filepath.Join(w.runDir, name+".pid")); ok {
			s.RSSMB[name] = mb
		}
	}
	for name, url := range w.metrics {
		metric := cycleMetrics[name]
		sum, count, err := scrapeHistogram(ctx, url, metric)
		if err != nil {
			delete(w.lastCount, name) // not running: the next start's counters begin again
			continue
		}
		if prev, ok := w.lastCount[name]; ok && count > prev && sum >= w.lastSum[name] {
			s.CycleS[name] = (sum - w.lastSum[name]) / (count - prev)
		}
		w.lastSum[name], w.lastCount[name] = sum, count
	}
	w.samples = append(w.samples, s)
}

// rssMB reads VmRSS of the process in pidFile; false when it does not run.
func rssMB(pidFile string) (float64, bool) {
	data, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return 0, false
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if kb, err := strconv.ParseFloat(fields[0], 64); err == nil && len(fields) == 2 && fields[1] == "kB" {
				return kb / 1024, true
			}
		}
	}
	return 0, false
}

// scrapeHistogram reads NAME_sum and NAME_count of a histogram on a /metrics page.
func scrapeHistogram(ctx context.Context, url, name string) (sum, count float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("%s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, 0, err
	}
	return ParseHistogram(body, name)
}

// ParseHistogram reads an unlabelled histogram's _sum and _count from a /metrics page.
func ParseHistogram(page []byte, name string) (sum, count float64, err error) {
	found := 0
	for line := range strings.SplitSeq(string(page), "\n") {
		var v *float64
		rest, ok := strings.CutPrefix(line, name+"_sum ")
		if ok {
			v = &sum
		} else if rest, ok = strings.CutPrefix(line, name+"_count "); ok {
			v = &count
		} else {
			continue
		}
		if *v, err = strconv.ParseFloat(strings.TrimSpace(rest), 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %q: %w", name, line, err)
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("no histogram %s on the page", name)
	}
	return sum, count, nil
}

// DaemonSummary is one watched process over a mode: its cycles' median and worst, its most
// resident memory.
type DaemonSummary struct {
	Name                  string
	Cycles                int // samples with finished cycles
	CycleP50, CycleMax    float64
	RSSMaxMB, RSSFirstMB  float64
	Samples, SamplesAlive int
}

// SummarizeDaemons sums up the samples per watched process.
func SummarizeDaemons(samples []DaemonSample) []DaemonSummary {
	var out []DaemonSummary
	for _, name := range Watched {
		s := DaemonSummary{Name: name, Samples: len(samples), CycleP50: math.NaN(), CycleMax: math.NaN()}
		var cycles []float64
		for _, p := range samples {
			if mb, ok := p.RSSMB[name]; ok {
				if s.SamplesAlive == 0 {
					s.RSSFirstMB = mb
				}
				s.SamplesAlive++
				s.RSSMaxMB = max(s.RSSMaxMB, mb)
			}
			if c, ok := p.CycleS[name]; ok {
				cycles = append(cycles, c)
			}
		}
		if len(cycles) > 0 {
			slices.Sort(cycles)
			s.Cycles, s.CycleP50, s.CycleMax = len(cycles), Percentile(cycles, 50), cycles[len(cycles)-1]
		}
		out = append(out, s)
	}
	return out
}

// writeDaemons writes the samples as daemons-LABEL.csv: one column per process and measure,
// empty where there was none.
func writeDaemons(dir, label string, samples []DaemonSample) error {
	var b strings.Builder
	b.WriteString("t_s")
	for _, name := range Watched {
		fmt.Fprintf(&b, ",%s_rss_mb", name)
		if cycleMetrics[name] != "" {
			fmt.Fprintf(&b, ",%s_cycle_s", name)
		}
	}
	b.WriteString("\n")
	cell := func(m map[string]float64, k string) string {
		if v, ok := m[k]; ok {
			return strconv.FormatFloat(v, 'f', 4, 64)
		}
		return ""
	}
	for _, s := range samples {
		fmt.Fprintf(&b, "%.0f", s.T)
		for _, name := range Watched {
			b.WriteString("," + cell(s.RSSMB, name))
			if cycleMetrics[name] != "" {
				b.WriteString("," + cell(s.CycleS, name))
			}
		}
		b.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(dir, "daemons-"+label+".csv"), []byte(b.String()), 0o644)
}
