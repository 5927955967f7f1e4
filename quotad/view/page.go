package view

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The cluster page: server-rendered HTML of ClusterResponse, with its style and a small
// refresh script inline (the cluster may be air-gapped: the page loads nothing else). Its
// Content-Security-Policy allows exactly that style and script, by hash.

var (
	//go:embed page/cluster.html
	pageHTML string
	//go:embed page/cluster.css
	pageCSS string
	//go:embed page/cluster.js
	pageJS string

	pageTemplate = template.Must(template.New("cluster").Funcs(template.FuncMap{
		"fmtTime":     fmtTime,
		"fmtTimePtr":  fmtTimePtr,
		"intPtr":      intPtr,
		"borrowLimit": BorrowLimit,
		"lendLimit":   LendLimit,
	}).Parse(pageHTML))

	pageCSP = fmt.Sprintf("default-src 'none'; style-src '%s'; script-src '%s'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
		cspHash(pageCSS), cspHash(pageJS))
)

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256-" + base64.StdEncoding.EncodeToString(sum[:])
}

// JobLookup is the page's answer to its job search box.
type JobLookup struct {
	ID      string
	Found   bool   // the job is in the served plan; its explanation is its owner's to read
	Message string // why there is nothing to show, when not Found
}

// Page is what the template draws: the cluster data plus what only the page needs.
type Page struct {
	ClusterResponse
	Title          string
	JSONPath       string // relative, so that a reverse proxy's path prefix carries over
	RefreshSeconds int
	Stale          bool
	Pools          []PagePool
	JobQuery       string
	Job            *JobLookup
	CSS            template.CSS
	Script         template.JS
}

// PagePool is a pool with its bar's geometry (in percent of the pool's GPUs) and its words.
type PagePool struct {
	Pool
	GPU                              bool
	RunW, FreeW, DownX, DownW, PendW string
	Label, PendLabel, Price          string
}

// BuildPage turns the cluster data and a job search into the page's model. It is pure: the
// page shows exactly the numbers of the JSON it was built from.
func BuildPage(c ClusterResponse, job *JobLookup) Page {
	p := Page{ClusterResponse: c, Title: "slurmbridge cluster", JSONPath: strings.TrimPrefix(ClusterPath, "/"),
		RefreshSeconds: 30, Job: job, CSS: template.CSS(pageCSS), Script: template.JS(pageJS)}
	if c.Status.Cluster != "" {
		p.Title = "slurmbridge cluster " + c.Status.Cluster
	}
	if c.Status.IntervalSeconds > 0 {
		p.RefreshSeconds = max(5, int(c.Status.IntervalSeconds))
	}
	p.Stale = c.Status.Plan != nil && c.Status.Plan.Stale
	if job != nil {
		p.JobQuery = job.ID
	}
	for _, pool := range c.Pools {
		pp := PagePool{Pool: pool, GPU: pool.GPUType != ""}
		if pp.GPU {
			pp.Price = fmt.Sprintf("%.2f per GPU-hour", pool.PricePerGPUHour)
		} else {
			pp.Price = fmt.Sprintf("%.2f per CPU-hour", pool.PricePerCPUHour)
		}
		g := pool.GPUs
		total := float64(max(g.Total, 1))
		down := max(g.Total-g.Running-g.Free, 0)
		pct := func(n int) float64 { return min(100, 100*float64(n)/total) }
		pp.RunW, pp.FreeW = pctString(pct(g.Running)), pctString(pct(g.Free))
		pp.DownX, pp.DownW = pctString(pct(g.Running)+pct(g.Free)), pctString(pct(down))
		pp.PendW = pctString(pct(g.Pending))
		pp.Label = fmt.Sprintf("%s: %d of %d GPUs running, %d free, %d on nodes that are down", pool.Name, g.Running, g.Total, g.Free, down)
		pp.PendLabel = fmt.Sprintf("%s: %d GPUs pending, asked for by waiting jobs", pool.Name, g.Pending)
		p.Pools = append(p.Pools, pp)
	}
	return p
}

func pctString(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) }

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return fmtTime(*t)
}

func intPtr(n *int) string {
	if n == nil {
		return "none"
	}
	return strconv.Itoa(*n)
}

// BorrowLimit is the project's borrowing limit for one GPU type: its per-type limit, else its
// overall one.
func BorrowLimit(l ProjectLimits, gpuType string) string {
	if n, ok := l.BorrowLimitByType[gpuType]; ok {
		return strconv.Itoa(n) + " " + gpuType
	}
	if l.BorrowLimit != nil {
		return strconv.Itoa(*l.BorrowLimit) + " (all types)"
	}
	return "none"
}

// LendLimit is how much of a project's guarantee of one GPU type others may borrow, with the
// idle GPUs the limit keeps for the project now, e.g. "2 (3 kept idle)".
func LendLimit(g ProjectGPUs) string {
	if g.LendLimit == nil {
		return "none"
	}
	return fmt.Sprintf("%d (%d kept idle)", *g.LendLimit, g.KeptIdle)
}

// lookupJob answers the search box from the served plan. It never shows an explanation: the
// page has no login, and explanations are private to the job's owner (quotactl explain reads
// them through the API with a MUNGE credential).
func (v *View) lookupJob(s state, q string) *JobLookup {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil
	}
	l := &JobLookup{ID: q}
	id, err := strconv.ParseUint(q, 10, 32)
	if err != nil {
		l.Message = fmt.Sprintf("%q is not a job id: type the number squeue shows.", q)
		return l
	}
	if s.plan == nil {
		l.Message = "quotad has not planned yet: try again after its first cycle."
		return l
	}
	for i := range s.plan.Jobs {
		if s.plan.Jobs[i].JobID == uint32(id) {
			l.Found = true
			return l
		}
	}
	l.Message = fmt.Sprintf("Job %d is not a GPU job slurmctld knew as pending or running when quotad last planned (%s): quotad has nothing to say about it.",
		id, fmtTime(s.planAt))
	return l
}

func (v *View) pageHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := v.read()
		page := BuildPage(v.clusterData(s), v.lookupJob(s, r.URL.Query().Get("job")))
		var buf bytes.Buffer
		if err := pageTemplate.Execute(&buf, page); err != nil {
			http.Error(w, "rendering the cluster page: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", pageCSP)
		w.Header().Set("X-Content-Type-Options", "nosniff")
		code := http.StatusOK
		if s.plan == nil {
			code = http.StatusServiceUnavailable
		}
		w.WriteHeader(code)
		_, _ = w.Write(buf.Bytes())
	})
}
