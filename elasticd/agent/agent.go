// Package agent is elasticd's node agent: every interval it finds the GPUs Slurm allocated to
// the running jobs on its nodes (squeue --json's gres_detail, indices as slurmd assigned them;
// only its own nodes' running jobs are asked for), reads them through NVML (elasticd/probe) and
// posts the samples to elasticd with a MUNGE credential over the report's body, which elasticd
// checks before it takes a sample. Where NVML is missing it says so once and posts nothing:
// elasticd then works from throughput alone.
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

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// Reader is the part of probe.Reader the agent uses.
type Reader interface {
	Available() bool
	Read(indices []int) ([]api.GPUSample, error)
}

// Queue is the part of Slurm the agent reads: the jobs running on its nodes and their extra
// fields, one `squeue --json --nodelist --states=RUNNING` (slurm.Client has it).
type Queue interface {
	RunningOn(ctx context.Context, nodes []string) ([]slurm.Job, map[uint32]slurm.JobExtra, error)
}

// Agent reads and reports one host's GPUs.
type Agent struct {
	// Nodes are the Slurm node names this host runs (one, or several with multiple slurmd).
	Nodes  []string
	Slurm  Queue
	Reader Reader
	// Post sends a report; PostHTTP is the real one.
	Post func(ctx context.Context, r api.SignalReport) error
	Log  zerolog.Logger
}

// Cycle reads and reports once. Without NVML it does nothing: Open already said why, once.
func (a *Agent) Cycle(ctx context.Context) error {
	if !a.Reader.Available() {
		return nil
	}
	jobs, extras, err := a.Slurm.RunningOn(ctx, a.Nodes)
	if err != nil {
		return fmt.Errorf("reading the queue: %w", err)
	}
	rep := api.SignalReport{Node: strings.Join(a.Nodes, ",")}
	for _, j := range jobs {
		if !j.Running() {
			continue
		}
		indices := a.localGPUs(j, extras[j.ID])
		if len(indices) == 0 {
			continue
		}
		samples, err := a.Reader.Read(indices)
		if err != nil {
			a.Log.Warn().Err(err).Uint32("job", j.ID).Msg("some GPU metrics could not be read")
		}
		if len(samples) > 0 {
			rep.Jobs = append(rep.Jobs, api.JobSignals{JobID: j.ID, Samples: samples})
		}
	}
	if len(rep.Jobs) == 0 {
		return nil
	}
	return a.Post(ctx, rep)
}

// localGPUs are the GPU indices the job holds on this host's nodes. gres_detail has one entry
// per allocated node; only one-node jobs (every elastic worker) can be matched to a node
// without expanding a hostlist, which is all elasticd needs.
func (a *Agent) localGPUs(j slurm.Job, extra slurm.JobExtra) []int {
	if j.NodeCount != 1 || len(extra.GresDetail) != 1 || !slices.Contains(a.Nodes, j.Nodes) {
		return nil
	}
	idx, err := slurm.GPUIndices(extra.GresDetail[0])
	if err != nil {
		a.Log.Warn().Err(err).Uint32("job", j.ID).Msg("gres_detail unreadable")
	}
	return idx
}

// Encode makes a MUNGE credential for payload (slurm.Client's MungeEncode with the socket).
type Encode func(ctx context.Context, payload string) (string, error)

// PostHTTP posts reports to elasticd's api.SignalsPath, each with a credential from encode
// for exactly its body (api.SignalsPayload).
func PostHTTP(client *http.Client, baseURL string, encode Encode) func(ctx context.Context, r api.SignalReport) error {
	return func(ctx context.Context, r api.SignalReport) error {
		body, err := json.Marshal(r)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		cred, err := encode(ctx, api.SignalsPayload(body))
		if err != nil {
			return fmt.Errorf("making the report's MUNGE credential: %w", err)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(baseURL, "/")+api.SignalsPath, bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "MUNGE "+cred)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
			return fmt.Errorf("elasticd answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
		}
		return nil
	}
}
