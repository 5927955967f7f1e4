package daemon

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are elasticd's Prometheus series.
type Metrics struct {
	cycleSeconds prometheus.Histogram
	cycleErrors  prometheus.Counter
	decisions    *prometheus.CounterVec
	actions      *prometheus.CounterVec
	actionErrors *prometheus.CounterVec
	jobs         prometheus.Gauge
	workers      *prometheus.GaugeVec
	throughput   *prometheus.GaugeVec
	// The node agents' authentication: MUNGE decodes asked for (kind session: a session's
	// set-up; report: a report's own credential), reports taken by how they were authenticated
	// (session, munge), sessions held.
	agentDecodes  *prometheus.CounterVec
	agentReports  *prometheus.CounterVec
	agentSessions prometheus.Gauge
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "elasticd_cycle_seconds", Help: "Duration of one control cycle.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		cycleErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "elasticd_cycle_errors_total", Help: "Cycles skipped because Slurm or the state directory could not be read."}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "elasticd_decisions_total", Help: "Decisions per action (one per job per cycle)."},
			[]string{"action"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "elasticd_actions_total", Help: "Slurm actions taken: grow (sbatch), terminate (TERM), cancel."},
			[]string{"action"}),
		actionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "elasticd_action_errors_total", Help: "Slurm actions that failed."},
			[]string{"action"}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "elasticd_jobs", Help: "Elastic jobs followed."}),
		workers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "elasticd_workers", Help: "Running workers per job and GPU type, main job included."},
			[]string{"job", "type"}),
		throughput: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "elasticd_samples_per_second", Help: "Job throughput of the latest complete measurement."},
			[]string{"job"}),
		agentDecodes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "elasticd_agent_credential_decodes_total",
			Help: "MUNGE credentials of node agents sent to unmunge: kind session (a session's set-up) or report (a report's own credential, agents before sessions)."},
			[]string{"kind"}),
		agentReports: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "elasticd_agent_reports_total",
			Help: "Node agent reports whose sender was proven, by how: session (its session's MAC) or munge (its own credential)."},
			[]string{"auth"}),
		agentSessions: prometheus.NewGauge(prometheus.GaugeOpts{Name: "elasticd_agent_sessions", Help: "Node agent signals sessions held, as of the last set-up."}),
	}
	reg.MustRegister(m.cycleSeconds, m.cycleErrors, m.decisions, m.actions, m.actionErrors, m.jobs, m.workers, m.throughput,
		m.agentDecodes, m.agentReports, m.agentSessions)
	return m
}

// observeJobs refreshes the per-job gauges; jobs that left are dropped. Called with d.mu held.
func (m *Metrics) observeJobs(jobs map[uint32]*job) {
	m.jobs.Set(float64(len(jobs)))
	m.workers.Reset()
	m.throughput.Reset()
	for id, j := range jobs {
		label := strconv.FormatUint(uint64(id), 10)
		for t, n := range j.size {
			m.workers.WithLabelValues(label, string(t)).Set(float64(n))
		}
		if n := len(j.history); n > 0 {
			m.throughput.WithLabelValues(label).Set(total(j.history[n-1]))
		}
	}
}
