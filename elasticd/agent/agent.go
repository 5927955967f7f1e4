// Package agent is elasticd's node agent: every interval it reads through NVML
// (elasticd/probe) the GPUs elasticd named in its last answer, those of the elastic jobs and
// workers running on its nodes, and posts the samples to elasticd with a MUNGE credential over
// the report's body, which elasticd checks before it takes a sample; elasticd answers with
// what to read next. The agent asks Slurm nothing: one queue read per node and interval would
// load slurmctld with nodes × jobs. With nothing to read it still reports, empty, every
// IdleEvery cycles, to learn of new jobs. Where NVML is missing it says so once and posts
// nothing: elasticd then works from throughput alone.
package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// Reader is the part of probe.Reader the agent uses.
type Reader interface {
	Available() bool
	Read(indices []int) ([]api.GPUSample, error)
}

// DefaultIdleEvery: with nothing to read, an agent reports every sixth cycle (a minute at the
// default 10 s interval), so a new elastic job's GPUs are read within a minute of its start.
const DefaultIdleEvery = 6

// Bounds on an answer, whoever sent it: a node has fewer than maxGPUIndex GPUs, so no more
// jobs hold them.
const maxGPUIndex = 64

// Agent reads and reports one host's GPUs.
type Agent struct {
	// Nodes are the Slurm node names this host runs (one, or several with multiple slurmd).
	Nodes  []string
	Reader Reader
	// Post sends a report and returns elasticd's answer; PostHTTP is the real one.
	Post func(ctx context.Context, r api.SignalReport) (api.SignalAnswer, error)
	// IdleEvery: with nothing to read, report every IdleEvery cycles (0: DefaultIdleEvery).
	IdleEvery int
	Log       zerolog.Logger

	toRead   []api.JobGPUs // the last answer
	answered bool          // an answer came since the agent started
	idle     int           // cycles without a report since the last one
}

// Cycle reads and reports once. Without NVML it does nothing: Open already said why, once.
func (a *Agent) Cycle(ctx context.Context) error {
	if !a.Reader.Available() {
		return nil
	}
	every := a.IdleEvery
	if every <= 0 {
		every = DefaultIdleEvery
	}
	if len(a.toRead) == 0 && a.answered {
		if a.idle++; a.idle < every {
			return nil
		}
	}
	a.idle = 0
	rep := api.SignalReport{Node: strings.Join(a.Nodes, ","), Jobs: []api.JobSignals{}}
	for _, j := range a.toRead {
		samples, err := a.Reader.Read(j.GPUs)
		if err != nil {
			a.Log.Warn().Err(err).Uint32("job", j.JobID).Msg("some GPU metrics could not be read")
		}
		if len(samples) > 0 {
			rep.Jobs = append(rep.Jobs, api.JobSignals{JobID: j.JobID, Samples: samples})
		}
	}
	answer, err := a.Post(ctx, rep)
	if err != nil {
		return err
	}
	a.toRead, a.answered = bounded(answer.Read), true
	return nil
}

// bounded keeps what an answer may sensibly name: GPU indices in [0, maxGPUIndex), each
// GPU once, at most maxGPUIndex jobs.
func bounded(read []api.JobGPUs) []api.JobGPUs {
	var out []api.JobGPUs
	seen := map[int]bool{}
	for _, j := range read {
		var gpus []int
		for _, i := range j.GPUs {
			if i >= 0 && i < maxGPUIndex && !seen[i] {
				seen[i] = true
				gpus = append(gpus, i)
			}
		}
		if len(gpus) > 0 && len(out) < maxGPUIndex {
			out = append(out, api.JobGPUs{JobID: j.JobID, GPUs: slices.Clip(gpus)})
		}
	}
	return out
}

// Encode makes a MUNGE credential for payload (slurm.Client's MungeEncode with the socket).
type Encode func(ctx context.Context, payload string) (string, error)

// PostHTTP posts reports to elasticd's api.SignalsPath, each with a credential from encode
// for exactly its body (api.SignalsPayload), and reads the answer. An elasticd from before
// answers were given (204, no body) names nothing to read.
func PostHTTP(client *http.Client, baseURL string, encode Encode) func(ctx context.Context, r api.SignalReport) (api.SignalAnswer, error) {
	return func(ctx context.Context, r api.SignalReport) (api.SignalAnswer, error) {
		var answer api.SignalAnswer
		body, err := json.Marshal(r)
		if err != nil {
			return answer, err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cred, err := encode(ctx, api.SignalsPayload(body))
		if err != nil {
			return answer, fmt.Errorf("making the report's MUNGE credential: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+api.SignalsPath, bytes.NewReader(body))
		if err != nil {
			return answer, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "MUNGE "+cred)
		resp, err := client.Do(req)
		if err != nil {
			return answer, err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			return answer, fmt.Errorf("elasticd answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
		}
		if resp.StatusCode == http.StatusNoContent {
			return answer, nil
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
			return answer, fmt.Errorf("elasticd's answer unreadable: %w", err)
		}
		return answer, nil
	}
}
