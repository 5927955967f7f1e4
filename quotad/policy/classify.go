package policy

import "strings"

// classify counts what every GPU job holds or wants and sorts pending jobs into the lists the
// later steps work on.
func (e *engine) classify() {
	for i := range e.snap.Jobs {
		j := &e.snap.Jobs[i]
		if j.ArrayThrottle > 0 && (j.State.holdsGPUs() || (j.State == StatePending && e.lenderOf(strings.ToLower(j.QOS)) != nil)) {
			e.arrayStarted[j.ArrayJobID] += j.tasks()
		}
		need := j.need()
		e.needs[j] = need
		if len(need) == 0 {
			continue // quotas are about GPUs only
		}
		p := e.jobProject(j)
		qos := strings.ToLower(j.QOS)
		borrowing := e.lenderOf(qos) != nil
		switch {
		case j.State.holdsGPUs():
			held := j.held()
			switch {
			case borrowing:
				addAll(e.lent, held)
				if p != nil {
					p.borrow(held)
					if e.isElastic(j) {
						addAll(p.elastic, held)
					}
				}
				e.borrowRunning = append(e.borrowRunning, j)
			case p != nil && qos == p.guarQOS:
				for t, n := range held {
					p.inUse[t] += n
					p.inUseTotal += n
				}
				e.say(j, "runs within %s's guarantee in %s (%s): it is never reclaimed", p.cfg.Account, p.guarQOS, gpuList(held))
			case p == nil:
				e.say(j, "runs in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			default:
				e.say(j, "runs in QOS %s, not in %s's guaranteed QOS %s: quotad does not manage it, and the account's QOS list is being restricted to %s, %s and %s", j.QOS, p.cfg.Account, p.guarQOS, p.guarQOS, p.borrowQOS, p.elasticQOS)
			}
		case j.State == StatePending:
			switch {
			case borrowing:
				e.borrowPending = append(e.borrowPending, j)
			case p != nil && qos == p.guarQOS:
				if j.ArrayJobID != 0 {
					e.arrayRecords[j.ArrayJobID]++
				}
				addAll(p.pending, scaled(need, j.tasks()))
				if e.reasons[j.Reason] {
					p.candidates = append(p.candidates, j)
				} else {
					e.inQuotaPending = append(e.inQuotaPending, j)
				}
			case p == nil:
				e.say(j, "waits in account %s, which has no quota and is under no project: quotad does not manage it", j.Account)
			default:
				e.say(j, "waits in QOS %s, not in %s's guaranteed QOS %s: quotad does not move it", j.QOS, p.cfg.Account, p.guarQOS)
			}
		}
	}
	jobOrder(e.inQuotaPending)
	jobOrder(e.borrowPending)
	for _, p := range e.projects {
		jobOrder(p.candidates)
	}
}
