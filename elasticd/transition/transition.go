// Package transition measures how long an elastic job stops training when its membership
// changes: the idle time from the last step of one world (the set of processes that trained
// together) to the first step of the next, as Or, Zhang and Freedman measure it (~3-7 s in
// place, ~72-81 s by checkpoint-restart). Its input is the trace that
// elasticd/examples/train.py writes with --trace-dir: one record per process incarnation.
package transition

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// Record is one process of train.py in one world (Unix seconds). In place, a process has a
// record for each world it trains in; under torchrun each world has new processes.
type Record struct {
	Job       string  `json:"job"`
	PID       int     `json:"pid"`
	Mode      string  `json:"mode"` // "in-place" or "restart", as slurmbridge_elastic.torch ran
	Rank      int     `json:"rank"`
	WorldSize int     `json:"world_size"`
	Started   float64 `json:"started"` // the job's script started its launcher (0: unknown)
	Formed    float64 `json:"formed"`  // the process group formed
	FirstStep float64 `json:"first_step"`
	LastStep  float64 `json:"last_step"`
	Steps     int     `json:"steps"`
	ResumedAt int64   `json:"resumed_at"` // samples trained when this world began (in place: the state's; restart: the checkpoint's)
}

// World is the processes that trained together.
type World struct {
	Size                int
	Jobs                []string // Slurm jobs taking part, sorted
	Formed              float64  // the earliest process group formation
	FirstStep, LastStep float64  // the world's first and latest completed step
	ResumedAt           int64    // samples the checkpoint held when the world began
}

// Transition is one membership change.
type Transition struct {
	From, To World
	// Idle is the time no step completed: the last step of From to the first step of To.
	Idle time.Duration
	// Join is, for a grow, the new job's agent start to the first step of To: what a worker
	// added by elasticd costs from the moment it runs (0 when unknown or not a grow).
	Join time.Duration
}

// Kind says "grow" or "shrink" (or "same" when a world re-formed at its size).
func (t Transition) Kind() string {
	switch {
	case t.To.Size > t.From.Size:
		return "grow"
	case t.To.Size < t.From.Size:
		return "shrink"
	}
	return "same"
}

// ReadDir reads every *.json record in dir; half-written records (a process stopped during its
// pwrite) are skipped, not guessed at.
func ReadDir(dir string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []Record
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Record
		if json.Unmarshal([]byte(strings.TrimSpace(string(data))), &r) != nil || r.Steps == 0 {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// Worlds groups records into worlds. Worlds follow one another: a process that formed after
// every process of the current world had stopped stepping belongs to the next.
func Worlds(records []Record) []World {
	rs := slices.Clone(records)
	sort.Slice(rs, func(i, j int) bool { return rs[i].Formed < rs[j].Formed })
	var worlds []World
	var cur *World
	for _, r := range rs {
		if cur == nil || r.Formed > cur.LastStep || r.WorldSize != cur.Size {
			worlds = append(worlds, World{Size: r.WorldSize, Formed: r.Formed, FirstStep: r.FirstStep, LastStep: r.LastStep})
			cur = &worlds[len(worlds)-1]
		}
		cur.FirstStep = min(cur.FirstStep, r.FirstStep)
		cur.LastStep = max(cur.LastStep, r.LastStep)
		cur.ResumedAt = max(cur.ResumedAt, r.ResumedAt)
		if !slices.Contains(cur.Jobs, r.Job) {
			cur.Jobs = append(cur.Jobs, r.Job)
			slices.Sort(cur.Jobs)
		}
	}
	return worlds
}

// Transitions lists the changes between consecutive worlds, with the records that say when a
// joining job's agent started.
func Transitions(records []Record) []Transition {
	ws := Worlds(records)
	started := map[string]float64{}
	for _, r := range records {
		if r.Started > 0 && (started[r.Job] == 0 || r.Started < started[r.Job]) {
			started[r.Job] = r.Started
		}
	}
	var out []Transition
	for i := 1; i < len(ws); i++ {
		t := Transition{From: ws[i-1], To: ws[i], Idle: seconds(ws[i].FirstStep - ws[i-1].LastStep)}
		if t.Kind() == "grow" {
			for _, j := range ws[i].Jobs {
				if !slices.Contains(ws[i-1].Jobs, j) && started[j] > 0 {
					t.Join = max(t.Join, seconds(ws[i].FirstStep-started[j]))
				}
			}
		}
		out = append(out, t)
	}
	return out
}

func (t Transition) String() string {
	s := fmt.Sprintf("%-6s %d -> %d  idle %5.1fs", t.Kind(), t.From.Size, t.To.Size, t.Idle.Seconds())
	if t.Join > 0 {
		s += fmt.Sprintf("  (new worker's start to training: %.1fs)", t.Join.Seconds())
	}
	return s
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
