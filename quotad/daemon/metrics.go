package daemon

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// Metrics are quotad's Prometheus series.
type Metrics struct {
	Registry *prometheus.Registry

	quota, inUse, borrowed, lent, pending *prometheus.GaugeVec // project, gpu_type
	typeTotal, typeIdle, typeLent         *prometheus.GaugeVec // gpu_type
	lends, returns, reclaims              *prometheus.CounterVec
	cycles                                *prometheus.CounterVec // result
	cycleSeconds                          prometheus.Histogram
	lastSuccess                           prometheus.Gauge
	active                                prometheus.Gauge
	fenced                                prometheus.Counter
	// unreadable alerts on queued jobs quotad could not read (counted at their worst);
	// unreadableLogged are those already logged, so each is logged once.
	unreadable       prometheus.Gauge
	unreadableLogged map[uint32]bool
}

// NewMetrics registers quotad's series on a registry of their own, with Go and process
// collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	pt := []string{"project", "gpu_type"}
	gv := func(name, help string, labels []string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "quotad", Name: name, Help: help}, labels)
		reg.MustRegister(g)
		return g
	}
	cv := func(name, help string, labels []string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "quotad", Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{
		Registry:  reg,
		quota:     gv("quota_gpus", "Guaranteed GPUs per project and type.", pt),
		inUse:     gv("in_use_gpus", "GPUs held by a project's jobs in its guaranteed QOS.", pt),
		borrowed:  gv("borrowed_gpus", "GPUs a project holds or was promised in its borrow and elastic QOS.", pt),
		lent:      gv("lent_gpus", "A project's unused guaranteed GPUs that borrowers hold now.", pt),
		pending:   gv("pending_gpus", "GPUs requested by a project's pending jobs in its guaranteed QOS.", pt),
		typeTotal: gv("gpus_total", "GPUs in the cluster per type.", []string{"gpu_type"}),
		typeIdle:  gv("gpus_idle", "Idle GPUs per type at the last snapshot.", []string{"gpu_type"}),
		typeLent:  gv("gpus_lent", "GPUs per type held or promised in the borrow and elastic QOS.", []string{"gpu_type"}),
		lends:     cv("lends_total", "Pending jobs moved to their project's borrow QOS.", []string{"project"}),
		returns:   cv("returns_total", "Pending borrowers moved back to their guaranteed QOS.", []string{"project"}),
		reclaims:  cv("reclaims_observed_total", "Borrowers seen preempted (requeued) by Slurm in slurmdbd.", []string{"project"}),
		cycles:    cv("cycles_total", "Cycles by result: acted, dry_run, passive, not_acting, fenced, error.", []string{"result"}),
		cycleSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "quotad", Name: "cycle_duration_seconds",
			Help: "Time of one cycle, snapshot to last action.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "quotad", Name: "last_successful_cycle_timestamp_seconds",
			Help: "Unix time of the last cycle that read a fresh snapshot and applied its plan (or was passive)."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "quotad", Name: "lease_held",
			Help: "1 when this quotad holds the single-active-instance lease."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "quotad", Name: "applies_fenced_total",
			Help: "Applies stopped midway because the lease was lost (its connection cut or the lock gone)."}),
		unreadable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "quotad", Name: "unreadable_jobs",
			Help: "Queued jobs at the last snapshot whose GPU request or TRES quotad could not read: each is counted at its worst, and its project is not lent to. Alert when above 0."}),
		unreadableLogged: map[uint32]bool{},
	}
	reg.MustRegister(m.cycleSeconds, m.lastSuccess, m.active, m.fenced, m.unreadable,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observePlan sets the per-project and per-type gauges from a plan.
func (m *Metrics) observePlan(plan *policy.Plan) {
	for _, g := range []*prometheus.GaugeVec{m.quota, m.inUse, m.borrowed, m.lent, m.pending, m.typeTotal, m.typeIdle, m.typeLent} {
		g.Reset() // projects and types removed from the table must not linger
	}
	for _, p := range plan.Projects {
		for _, row := range p.ByType {
			t := view.TypeLabel(row.Type)
			m.quota.WithLabelValues(p.Account, t).Set(float64(row.Guaranteed))
			m.inUse.WithLabelValues(p.Account, t).Set(float64(row.InUse))
			m.borrowed.WithLabelValues(p.Account, t).Set(float64(row.Borrowed))
			m.pending.WithLabelValues(p.Account, t).Set(float64(row.Pending))
			m.lent.WithLabelValues(p.Account, t).Set(float64(view.LentFrom(plan, row)))
		}
	}
	for _, t := range plan.Types {
		m.typeTotal.WithLabelValues(t.Type).Set(float64(t.Total))
		m.typeIdle.WithLabelValues(t.Type).Set(float64(t.Idle))
		m.typeLent.WithLabelValues(t.Type).Set(float64(t.Lent))
	}
}

// observeUnreadable sets the unreadable-jobs gauge and logs each such job once, with its id and
// the text that failed, while it stays in the queue.
func (m *Metrics) observeUnreadable(plan *policy.Plan, log zerolog.Logger) {
	m.unreadable.Set(float64(len(plan.Unreadable)))
	now := make(map[uint32]bool, len(plan.Unreadable))
	for _, u := range plan.Unreadable {
		now[u.ID] = true
		if !m.unreadableLogged[u.ID] {
			log.Warn().Uint32("job", u.ID).Str("account", u.Account).Str("qos", u.QOS).Str("state", string(u.State)).
				Str("problem", u.Problem).Msg("job cannot be read: counted at its worst, its project is not lent to")
		}
	}
	m.unreadableLogged = now
}
