package policy

import (
	"fmt"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
)

// A borrower that a claim takes back loses its work since its last checkpoint. Lent again at
// once, it may start on GPUs that the next claim takes back as soon as its PreemptExemptTime
// ends, again and again. With settings.reclaimBackoff set, a job Slurm preempted in a borrow
// QOS waits in its guaranteed QOS before it is lent again: reclaimBackoff after one reclaim,
// twice that after two in a row, and so on up to reclaimBackoffMax. A run of
// reclaimBackoffReset or longer before a reclaim means the job made its progress: the count
// starts over at that reclaim. The reclaims are slurmdbd's PREEMPTED records, so the backoff
// survives a restart or a fail-over of quotad.

// backoff is one job's reclaim backoff now.
type backoff struct {
	streak int       // reclaims in a row that count
	last   time.Time // when the latest ended
	wait   time.Duration
	until  time.Time     // not lent before
	reset  time.Duration // a run this long starts the count over
}

// reclaimBackoffs works out the backoff of each job a claim took back, from the snapshot's
// reclaims in borrow QOS (oldest first); only jobs still backing off at now are kept.
func reclaimBackoffs(s Settings, reclaims []Reclaim, now time.Time) map[uint32]backoff {
	if s.ReclaimBackoff <= 0 || len(reclaims) == 0 {
		return nil
	}
	runs := map[uint32][]Reclaim{}
	for _, r := range reclaims {
		if pools.MatchQOS(s.borrowPattern(), r.QOS) {
			runs[r.JobID] = append(runs[r.JobID], r)
		}
	}
	out := map[uint32]backoff{}
	for id, rs := range runs {
		b := backoffOf(s, rs)
		if now.Before(b.until) {
			out[id] = b
		}
	}
	return out
}

// backingOff says whether job j waits out a reclaim backoff now (c.backoffs holds only those).
func (c *cycle) backingOff(j *Job) bool {
	_, ok := c.backoffs[j.ID]
	return ok
}

// backoffOf is the backoff after a job's reclaims rs, oldest first.
func backoffOf(s Settings, rs []Reclaim) backoff {
	short := 0
	for i := len(rs) - 1; i >= 0 && rs[i].Ended.Sub(rs[i].Started) < s.BackoffReset(); i-- {
		short++
	}
	b := backoff{streak: max(1, short), last: rs[len(rs)-1].Ended, reset: s.BackoffReset()}
	b.wait = s.ReclaimBackoff
	for i := 1; i < b.streak && b.wait < s.BackoffMax(); i++ {
		b.wait *= 2
	}
	b.wait = min(b.wait, s.BackoffMax())
	b.until = b.last.Add(b.wait)
	return b
}

// text says why a job backing off is not lent, e.g. "a claim took it back 2 times in a row,
// the last at 12:00:05 UTC: it is lent again from 12:02:05 UTC (backoff 2m0s)".
func (b backoff) text() string {
	times := "once"
	if b.streak > 1 {
		times = fmt.Sprintf("%d times in a row, each after a run shorter than %s", b.streak, b.reset)
	}
	return fmt.Sprintf("claims took it back %s, the last at %s: it is lent again from %s (reclaim backoff %s)",
		times, b.last.UTC().Format("15:04:05 MST"), b.until.UTC().Format("15:04:05 MST"), b.wait)
}
