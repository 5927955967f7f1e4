package view

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
)

// Handler serves the API under /api/v1/ and the cluster page at / and /cluster. auth authenticates requests for jobs; nil refuses
// them all.
func Handler(v *View, authn auth.Authenticator) http.Handler {
	mux := http.NewServeMux()
	p := "/api/" + APIVersion
	mux.HandleFunc("GET "+p+"/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, StatusResponse{Status: v.status(v.read())})
	})
	mux.HandleFunc("GET "+p+"/projects", func(w http.ResponseWriter, r *http.Request) {
		s, ok := v.withPlan(w)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, ProjectsResponse{Status: v.status(s), Projects: Projects(s.plan, s.cfg)})
	})
	mux.HandleFunc("GET "+p+"/projects/{account}", func(w http.ResponseWriter, r *http.Request) {
		s, ok := v.withPlan(w)
		if !ok {
			return
		}
		account := r.PathValue("account")
		for _, pr := range Projects(s.plan, s.cfg) {
			if pr.Account == account {
				writeJSON(w, http.StatusOK, ProjectResponse{Status: v.status(s), Project: pr})
				return
			}
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("account %s has no quota", account), ptr(v.status(s)))
	})
	mux.HandleFunc("GET "+p+"/types", func(w http.ResponseWriter, r *http.Request) {
		s, ok := v.withPlan(w)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, TypesResponse{Status: v.status(s), Types: Types(s.plan)})
	})
	mux.HandleFunc("GET "+p+"/jobs", func(w http.ResponseWriter, r *http.Request) {
		caller, s, ok := v.callerWithPlan(w, r, authn)
		if !ok {
			return
		}
		jobs := []Job{}
		for _, j := range Jobs(s.plan) {
			if caller.MayRead(j.User) {
				jobs = append(jobs, j)
			}
		}
		writeJSON(w, http.StatusOK, JobsResponse{Status: v.status(s), Jobs: jobs})
	})
	mux.HandleFunc("GET "+p+"/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("id")
		job, task, isTask, err := ParseJobName(name)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error(), nil)
			return
		}
		caller, s, ok := v.callerWithPlan(w, r, authn)
		if !ok {
			return
		}
		id, _ := PlanJobID(s.plan, job, task, isTask) // 0 when none: no job has id 0, not found below
		for _, j := range Jobs(s.plan) {
			if j.JobID != id {
				continue
			}
			if !caller.MayRead(j.User) {
				writeError(w, http.StatusForbidden, fmt.Sprintf("job %s is not %s's: an explanation is shown to the job's owner, root and Slurm operators only", name, caller.User), nil)
				return
			}
			writeJSON(w, http.StatusOK, JobResponse{Status: v.status(s), Job: j})
			return
		}
		writeError(w, http.StatusNotFound, fmt.Sprintf("job %s is not a GPU job slurmctld knew as pending or running when quotad last planned (%s): quotad has nothing to say about it",
			name, s.planAt.Format(time.RFC3339)), ptr(v.status(s)))
	})
	mux.HandleFunc("GET "+ClusterPath, func(w http.ResponseWriter, r *http.Request) {
		s, ok := v.withPlan(w)
		if !ok {
			return
		}
		writeJSON(w, http.StatusOK, v.clusterData(s))
	})
	page := v.pageHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /cluster", page)
	mux.HandleFunc("GET "+p+"/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API path: see docs/operations.md, \"quotad's read-only API\"", nil)
	})
	return mux
}

// withPlan returns the state when a plan has been built, else answers 503.
func (v *View) withPlan(w http.ResponseWriter) (state, bool) {
	s := v.read()
	if s.plan == nil {
		writeError(w, http.StatusServiceUnavailable, "quotad has not planned on a fresh snapshot yet: see status.last_cycle", ptr(v.status(s)))
		return s, false
	}
	return s, true
}

// callerWithPlan authenticates a request for jobs and returns its caller and the state, else
// answers as authenticate or withPlan does.
func (v *View) callerWithPlan(w http.ResponseWriter, r *http.Request, authn auth.Authenticator) (auth.Caller, state, bool) {
	caller, ok := authenticate(w, r, authn)
	if !ok {
		return auth.Caller{}, state{}, false
	}
	s, ok := v.withPlan(w)
	return caller, s, ok
}

func authenticate(w http.ResponseWriter, r *http.Request, authn auth.Authenticator) (auth.Caller, bool) {
	if authn == nil {
		writeError(w, http.StatusForbidden, "this quotad serves no job explanations (no authentication configured)", nil)
		return auth.Caller{}, false
	}
	c, err := authn.Caller(r)
	if err != nil {
		writeError(w, auth.ErrorStatus(w, err), err.Error(), nil)
		return auth.Caller{}, false
	}
	return c, true
}

// errorBody is the body of every 4xx and 5xx: what went wrong, and the status when the
// answer depends on the plan.
type errorBody = ErrorResponse

func writeError(w http.ResponseWriter, code int, msg string, st *Status) {
	writeJSON(w, code, errorBody{Error: msg, Status: st})
}

func ptr[T any](v T) *T { return &v }

func writeJSON(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(body)
}

// ParseJobName reads a job as squeue prints it: a job id (123), or an array task (123_7),
// which the plan resolves to the record that stands for it.
func ParseJobName(name string) (job, task uint32, isTask bool, err error) {
	a, t, isTask := strings.Cut(name, "_")
	j, errJ := strconv.ParseUint(a, 10, 32)
	k, errK := strconv.ParseUint(t, 10, 32)
	if errJ != nil || (isTask && errK != nil) {
		return 0, 0, false, fmt.Errorf("job id %q: want a number, or an array task as 123_7", name)
	}
	return uint32(j), uint32(k), isTask, nil
}
