package daemon

import (
	"fmt"
	"io"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
)

// WritePlan prints a plan for people: notes, then each action with its reason.
func WritePlan(w io.Writer, plan *policy.Plan) {
	if !plan.Acting {
		fmt.Fprintln(w, "plan does not act:")
	}
	for _, n := range plan.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	if plan.Acting && !plan.HasActions() {
		fmt.Fprintln(w, "nothing to do: QOS, accounts and jobs match the quota table")
	}
	for _, c := range plan.QOS {
		fmt.Fprintln(w, c.String())
	}
	for _, c := range plan.Accounts {
		fmt.Fprintln(w, c.String())
	}
	for _, c := range plan.Users {
		fmt.Fprintln(w, c.String())
	}
	for _, m := range plan.Moves {
		fmt.Fprintf(w, "%s\n    because %s\n", m, m.Reason)
	}
}
