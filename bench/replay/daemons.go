package replay

import (
	"bytes"
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

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// Watched are the processes a replay samples throughout each mode: slurmbridge's daemons and
// slurmctld, by their pid files in the testbed's run directory.
var Watched = []string{"quotad", "elasticd", "slurmctld"}

// cycleMetrics are the daemons' cycle-duration histograms on their /metrics pages.
var cycleMetrics = map[string]string{"quotad": "quotad_cycle_duration_seconds", "elasticd": "elasticd_cycle_seconds"}

// DaemonSample is the watched processes at one moment of a mode: resident memory, and the mean
// length of the cycles the daemons finished since the sample before (absent: none finished,
// or the daemon is not running). A single slow cycle is averaged with the others of its
// interval: the summary's figures are of these means.
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
	w.sample(ctx, start) // memory at the start, and the histograms' starting point
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
		if mb, ok := rssMB(w.runDir, name); ok {
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

// rssMB is the resident memory of the watched process in runDir's pid file; false when that
// names no live process of that name (a stale pid file after a crash names another).
func rssMB(runDir, name string) (float64, bool) {
	d := testbed.ReadDaemon(filepath.Join(runDir, name+".pid"), name)
	if d.PID == 0 {
		return 0, false
	}
	return float64(d.RSSBytes) / (1 << 20), true
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

// ParseHistogram reads an unlabelled histogram's sum and count from a /metrics page.
func ParseHistogram(page []byte, name string) (sum, count float64, err error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(page))
	if err != nil {
		return 0, 0, fmt.Errorf("not a Prometheus text page: %w", err)
	}
	for _, m := range families[name].GetMetric() {
		if h := m.GetHistogram(); h != nil && len(m.GetLabel()) == 0 {
			return h.GetSampleSum(), float64(h.GetSampleCount()), nil
		}
	}
	return 0, 0, fmt.Errorf("no histogram %s on the page", name)
}

// DaemonSummary is one watched process over a mode: the median and the worst of its samples'
// mean cycle lengths, its resident memory first and at most.
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

// sampleSpacing is the seconds between the first two samples (5 when fewer).
func sampleSpacing(samples []DaemonSample) float64 {
	if len(samples) < 2 || samples[1].T <= samples[0].T {
		return 5
	}
	return math.Round(samples[1].T - samples[0].T)
}
