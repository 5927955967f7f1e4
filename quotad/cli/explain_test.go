package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/policy/policytest"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// explainPlan: proj-b's guarantee is full, job 5 over it is lent, job 6 finds no idle GPUs.
func explainPlan(t *testing.T) (*policy.Plan, *policy.Config) {
	t.Helper()
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).Obj()
	snap := policytest.MakeSnapshot().Testbed(1, 0, 8).
		Jobs(policytest.MakeJob(1, "proj-b").GPU("a100", 4).Running(time.Hour).Obj()).
		Jobs(policytest.MakeJob(5, "proj-b").GPU("a100", 1).Obj(), policytest.MakeJob(6, "proj-b").GPU("a100", 1).Obj()).
		Synced(t, cfg).Obj()
	return policy.BuildPlan(cfg, snap, policytest.T0), cfg
}

// quotactl explain --json JOBID from a plan computed now: the API's job view, code included.
func TestExplainJSONOfAJob(t *testing.T) {
	plan, cfg := explainPlan(t)
	for id, want := range map[uint32]view.Job{
		5: {JobID: 5, Account: "proj-b", User: "u-proj-b", State: "PENDING", Code: string(policy.CodeLent), Move: &view.Move{Kind: "lend", FromQOS: "guar-proj-b", ToQOS: "borrow-proj-b"}},
		6: {JobID: 6, Account: "proj-b", User: "u-proj-b", State: "PENDING", Code: string(policy.CodeNoIdleGPUs)},
		1: {JobID: 1, Account: "proj-b", User: "u-proj-b", State: "RUNNING", Code: string(policy.CodeInQuota)},
	} {
		var b bytes.Buffer
		if err := ExplainJSON(&b, plan, cfg, fmt.Sprint(id)); err != nil {
			t.Fatalf("job %d: %v", id, err)
		}
		var got view.Job
		if err := json.Unmarshal(b.Bytes(), &got); err != nil {
			t.Fatalf("job %d: %v in %s", id, err, b.String())
		}
		text, _ := plan.Explain(id)
		if got.Explanation != text {
			t.Errorf("job %d explanation %q, want the plan's %q", id, got.Explanation, text)
		}
		got.Explanation = ""
		if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
			t.Errorf("job %d:\n got %s\nwant %s", id, gj, wj)
		}
	}
	var unknown *NoJobError
	if err := ExplainJSON(&bytes.Buffer{}, plan, cfg, "99"); !errors.As(err, &unknown) || unknown.Job != "99" {
		t.Errorf("job 99: %v", err)
	}
}

// quotactl explain --json ACCOUNT: the project and its jobs.
func TestExplainJSONOfAnAccount(t *testing.T) {
	plan, cfg := explainPlan(t)
	var b bytes.Buffer
	if err := ExplainJSON(&b, plan, cfg, "proj-b"); err != nil {
		t.Fatal(err)
	}
	var got AccountExplanation
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, j := range got.Jobs {
		codes = append(codes, j.Code)
	}
	if got.Project == nil || got.Project.Account != "proj-b" || strings.Join(codes, " ") != "in-quota lent no-idle-gpus" {
		t.Errorf("explain --json proj-b = %s", b.String())
	}
	if err := ExplainJSON(&bytes.Buffer{}, plan, cfg, "nobody"); err == nil {
		t.Error("an account without quota or jobs is explained")
	}
}

// quotactl explain --json JOBID via quotad prints the API's job as it came, and keeps stdout
// JSON alone (the stale warning goes to stderr).
func TestExplainJSONViaQuotad(t *testing.T) {
	plan, cfg := explainPlan(t)
	job, _ := view.PlanJob(plan, 6)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := view.Status{Plan: &view.PlanStatus{Stale: true}}
		switch r.URL.Path {
		case "/api/v1/jobs/6":
			_ = json.NewEncoder(w).Encode(view.JobResponse{Status: st, Job: job})
		case "/api/v1/projects/proj-b":
			_ = json.NewEncoder(w).Encode(view.ProjectResponse{Status: st, Project: view.Projects(plan, cfg)[1]})
		case "/api/v1/jobs":
			_ = json.NewEncoder(w).Encode(view.JobsResponse{Status: st, Jobs: view.Jobs(plan)})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	q := &view.Client{BaseURL: srv.URL, Credential: func(_ context.Context, payload string) (string, error) { return "cred", nil }}
	run := func(args ...string) (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		app := &ucli.App{Writer: &out, ErrWriter: &errOut, Commands: []*ucli.Command{{Name: "explain",
			Flags:  []ucli.Flag{&ucli.BoolFlag{Name: "json"}},
			Action: func(c *ucli.Context) error { return explainFromQuotad(c, q) }}}}
		if err := app.Run(append([]string{"quotactl", "explain"}, args...)); err != nil {
			t.Fatalf("explain %q: %v", args, err)
		}
		return out.String(), errOut.String()
	}

	out, errOut := run("--json", "6")
	var got view.Job
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not one JSON job: %v\n%s", err, out)
	}
	if got.JobID != 6 || got.Account != "proj-b" || got.State != "PENDING" || got.Code != string(policy.CodeNoIdleGPUs) || got.Explanation == "" {
		t.Errorf("explain --json 6 = %s", out)
	}
	if !strings.Contains(errOut, "stale") {
		t.Errorf("the stale warning is not on stderr: %q", errOut)
	}

	out, _ = run("--json", "proj-b")
	var account AccountExplanation
	if err := json.Unmarshal([]byte(out), &account); err != nil || account.Project == nil || account.Project.Account != "proj-b" || len(account.Jobs) != 3 {
		t.Errorf("explain --json proj-b = %s (%v)", out, err)
	}

	if out, _ := run("6"); !strings.HasSuffix(out, job.Explanation+"\n") || strings.Contains(out, "{") {
		t.Errorf("explain 6 without --json = %q", out)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// quotactl explain 20_3: an array task as squeue prints it, whether it has a record of its own
// (split off, lent, requeued) or still waits in its array's record.
func TestExplainAnArrayTask(t *testing.T) {
	cfg := policytest.MakeConfig().Project("proj-a", policytest.GPUs("a100", 4)).Project("proj-b", policytest.GPUs("a100", 4)).Obj()
	snap := policytest.MakeSnapshot().Testbed(1, 0, 8).
		Jobs(policytest.MakeJob(1, "proj-b").GPU("a100", 4).Running(time.Hour).Obj()).
		Jobs(policytest.MakeJob(21, "proj-b").GPU("a100", 1).TaskOf(20, 3).Obj(),
			policytest.MakeJob(20, "proj-b").GPU("a100", 1).Array(4, 5, 6).Obj()).
		Synced(t, cfg).Obj()
	plan := policy.BuildPlan(cfg, snap, policytest.T0)
	for arg, want := range map[string]uint32{"20_3": 21, "20_5": 20, "21": 21} {
		var b bytes.Buffer
		if err := Explain(&b, plan, arg); err != nil {
			t.Fatalf("explain %s: %v", arg, err)
		}
		if text, _ := plan.Explain(want); strings.TrimSpace(b.String()) != text {
			t.Errorf("explain %s = %q, want job %d's %q", arg, b.String(), want, text)
		}
		var j bytes.Buffer
		if err := ExplainJSON(&j, plan, cfg, arg); err != nil || !strings.Contains(j.String(), fmt.Sprintf(`"job_id": %d`, want)) {
			t.Errorf("explain --json %s = %s, %v; want job %d", arg, j.String(), err, want)
		}
	}
	for _, arg := range []string{"20_9", "22_0"} {
		var unknown *NoJobError
		if err := Explain(&bytes.Buffer{}, plan, arg); !errors.As(err, &unknown) || unknown.Job != arg {
			t.Errorf("explain %s: %v, want it unknown", arg, err)
		}
	}
}
