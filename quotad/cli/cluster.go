package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// quotactl cluster: the cluster page for a terminal, from the JSON the page itself is drawn
// from (quotad's read-only API: every user may run it, no secret).
func clusterFromQuotad(c *ucli.Context, q *view.Client) error {
	resp, err := view.ReadCluster(c.Context, q)
	if err != nil {
		return err
	}
	if c.Bool("json") {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		return enc.Encode(resp)
	}
	return WriteCluster(c.App.Writer, resp, q.BaseURL+"/")
}

// barWidth is the most characters a pool's bar takes: one per GPU up to it, scaled beyond.
const barWidth = 32

// WriteCluster prints the cluster page's data as text: how current it is, each pool with a bar
// of its GPUs (# running, . free, x on nodes that are down) and its pending GPUs, the projects'
// quota positions and limits, and quotad's recent lends, returns and reclaims.
func WriteCluster(w io.Writer, r view.ClusterResponse, pageURL string) error {
	st := r.Status
	fmt.Fprintf(w, "Cluster %s  (page: %s)\n", st.Cluster, pageURL)
	switch {
	case st.Plan == nil:
		fmt.Fprintln(w, "quotad has not planned on a fresh snapshot yet: the numbers fill in after its first successful cycle.")
	case st.Plan.Stale:
		fmt.Fprintf(w, "STALE: no fresh cycle since %s; these numbers are history, not the cluster now.\n", textTime(st.LastSuccessfulCycleAt))
	default:
		fmt.Fprintf(w, "Last successful cycle %s, snapshot %.0f s old (current).\n", textTime(st.LastSuccessfulCycleAt), st.Plan.SnapshotAgeSeconds)
	}
	if st.DryRun {
		fmt.Fprintln(w, "quotad runs in dry-run mode: it changes nothing.")
	}

	fmt.Fprintln(w, "\nPOOLS  (bar: # running, . free, x on nodes down; pending: GPUs waiting jobs ask for)")
	if r.PoolsError != "" {
		fmt.Fprintln(w, "  "+r.PoolsError)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Pool\tGPUType\tPrice\tCapacity\tNodes up/down\tGPUs\tRunning\tPending\tFree\tJobs run/pend\tBar")
	for _, p := range r.Pools {
		capacity := "on-demand"
		if p.Spot {
			capacity = "spot"
		}
		jobs := fmt.Sprintf("%d/%d", p.Jobs.Running, p.Jobs.Pending)
		nodes := fmt.Sprintf("%d/%d", p.Nodes.Up, p.Nodes.Down)
		if p.GPUType == "" {
			fmt.Fprintf(tw, "%s\t-\t%.2f/CPU-h\t%s\t%s\t-\t-\t-\t-\t%s\t\n", p.Name, p.PricePerCPUHour, capacity, nodes, jobs)
			continue
		}
		g := p.GPUs
		fmt.Fprintf(tw, "%s\t%s\t%.2f/GPU-h\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", p.Name, p.GPUType, p.PricePerGPUHour, capacity, nodes,
			g.Total, g.Running, g.Pending, g.Free, jobs, poolBar(g))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nPROJECTS  (in use: in the guarantee; borrowed: over it; lent: unused guarantee borrowers hold)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "Project\tGPUType\tGuarantee\tInUse\tBorrowed\tLent\tPending\tBorrowLimit\tLendsAtMost\tGPULimit\tWeight\tBackingOff\tReclaimPriority")
	for _, p := range r.Projects {
		limit := "none"
		if p.Limits.TotalGPUs != nil {
			limit = strconv.Itoa(*p.Limits.TotalGPUs)
		}
		threshold := "none"
		if t := p.Limits.ReclaimPriorityThreshold; t != nil {
			threshold = strconv.FormatInt(*t, 10)
		}
		for _, g := range p.GPUs {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\n", p.Account, g.GPUType, g.Guaranteed, g.InUse, g.Borrowed, g.Lent, g.Pending,
				view.BorrowLimit(p.Limits, g.GPUType), view.LendLimit(g), limit, strconv.FormatFloat(p.Weight, 'g', -1, 64), p.BackingOff, threshold)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w, "\nRECENT ACTIONS  (newest first)")
	if r.ActionsError != "" {
		fmt.Fprintln(w, "  may be incomplete: "+r.ActionsError)
	}
	if len(r.RecentActions) == 0 {
		fmt.Fprintln(w, "  no lend, return or reclaim yet")
		return nil
	}
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range r.RecentActions {
		qos := ""
		if a.FromQOS != "" {
			qos = a.FromQOS + " -> " + a.ToQOS
		}
		fmt.Fprintf(tw, "  %s\t%s\tjob %s\t%s\t%s\n", textTime(&a.At), a.Kind, a.Job, a.Account, qos)
	}
	return tw.Flush()
}

// poolBar draws a pool's GPUs, one character each up to barWidth, to scale beyond; a kind
// present (running, free, down) never rounds away.
func poolBar(g view.PoolGPUs) string {
	if g.Total <= 0 {
		return "[]"
	}
	n := []int{g.Running, g.Free, max(g.Total-g.Running-g.Free, 0)}
	if g.Total > barWidth {
		sum := 0
		for i, v := range n {
			n[i] = max((v*barWidth+g.Total/2)/g.Total, min(v, 1))
			sum += n[i]
		}
		for ; sum > barWidth; sum-- { // rounding up overshot: take from the largest
			big := 0
			for i := range n {
				if n[i] > n[big] {
					big = i
				}
			}
			n[big]--
		}
		for ; sum < barWidth; sum++ {
			big := 0
			for i := range n {
				if n[i] > n[big] {
					big = i
				}
			}
			n[big]++
		}
	}
	return "[" + strings.Repeat("#", n[0]) + strings.Repeat(".", n[1]) + strings.Repeat("x", n[2]) + "]"
}

func textTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}
