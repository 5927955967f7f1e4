package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Fetcher reads the live cluster: its nodes and its jobs. poolctl and quotad take one, so their
// tests replay captured output instead of a cluster.
type Fetcher interface {
	Nodes(ctx context.Context) ([]Node, error)
	Queue(ctx context.Context, r QueueRead) ([]Job, error)
}

// Client is the Slurm adapter: every Slurm command slurmbridge runs (squeue, sinfo, scontrol,
// sacctmgr, sacct, sbatch, scancel) is one of its methods, which also parses what the command
// prints, so no caller builds a command line or reads Slurm's text. Commands go through Runner,
// so tests replay captured output. It is also the Fetcher: jobs come from
// squeue (Queue); nodes from `scontrol show nodes` (Nodes), whose reading needs the release:
// Release when set, else learned from `sinfo --version` (once per NewClient, on each call for
// a bare Client{Runner: r}).
type Client struct {
	Runner  Runner
	Release Release // zero: learn it
	learned *learnedRelease
}

// NewClient returns a Client that learns the release on first need and keeps it.
func NewClient(r Runner) Client {
	return Client{Runner: r, learned: &learnedRelease{}}
}

// learnedRelease keeps the release of the first successful `sinfo --version`; copies of one
// Client share it.
type learnedRelease struct {
	mu      sync.Mutex
	release Release
	version Version
}

// SlurmRelease is the release of the Slurm commands the fetcher runs.
func (f Client) SlurmRelease(ctx context.Context) (Release, error) {
	if f.Release != (Release{}) {
		return f.Release, nil
	}
	rel, _, err := f.learn(ctx, "release", func(l *learnedRelease) bool { return l.release != (Release{}) })
	return rel, err
}

// SlurmVersion is the version, to its micro release, of the Slurm commands the fetcher runs
// (`sinfo --version`, learned once like SlurmRelease). With Release set (tests) it is that
// release's micro 0.
func (f Client) SlurmVersion(ctx context.Context) (Version, error) {
	if f.Release != (Release{}) {
		return Version{Release: f.Release}, nil
	}
	_, v, err := f.learn(ctx, "version", func(l *learnedRelease) bool { return l.version != (Version{}) })
	if err == nil && v == (Version{}) {
		err = errors.New("learning the Slurm version from sinfo --version: no micro release in it")
	}
	return v, err
}

// learn returns what copies of the Client learned from `sinfo --version` when known says it is
// there, else runs it once (under the lock, so concurrent callers wait for one run) and keeps
// the release and, where it names one, the micro release. what names it in errors.
func (f Client) learn(ctx context.Context, what string, known func(*learnedRelease) bool) (Release, Version, error) {
	if f.learned != nil {
		f.learned.mu.Lock()
		defer f.learned.mu.Unlock()
		if known(f.learned) {
			return f.learned.release, f.learned.version, nil
		}
	}
	out, err := f.Runner.Run(ctx, "sinfo", "--version")
	if err != nil {
		return Release{}, Version{}, fmt.Errorf("learning the Slurm %s: %w", what, err)
	}
	rel, err := ParseVersion(string(out))
	if err != nil {
		return Release{}, Version{}, fmt.Errorf("learning the Slurm %s from sinfo --version: %w", what, err)
	}
	v, err := ParseMicroVersion(strings.Fields(string(out))[1])
	if err != nil {
		v = Version{} // the release alone is known
	}
	if f.learned != nil {
		f.learned.release, f.learned.version = rel, v
	}
	return rel, v, nil
}

// SlurmctldOnDisk is the version of the slurmctld binary on this host ("26.05.5", from
// slurmctld -V): the one its next start runs, newer than the running one between a Slurm
// package upgrade and the restart.
func (f Client) SlurmctldOnDisk(ctx context.Context) (string, error) {
	out, err := f.Runner.Run(ctx, "slurmctld", "-V")
	if err != nil {
		return "", err
	}
	if _, err := ParseVersion(string(out)); err != nil {
		return "", fmt.Errorf("slurmctld -V: %w", err)
	}
	return strings.Fields(string(out))[1], nil
}

// Nodes lists every node once, with the partitions it is in.
func (f Client) Nodes(ctx context.Context) ([]Node, error) {
	rel, err := f.SlurmRelease(ctx)
	if err != nil {
		return nil, err
	}
	out, err := withEnv(f.Runner, NodesEnv).Run(ctx, "scontrol", NodesArgs...)
	if err != nil {
		return nil, err
	}
	return ParseNodesText(out, rel)
}

// wholeTaskLists runs squeue with SLURM_BITSTR_LEN=0, where the runner can set it: libslurm
// otherwise cuts a pending array's task list at 64 characters ("0-4,6-9,...") and the tasks
// behind the cut could not be counted (ParseTaskIDs refuses such a list).
func wholeTaskLists(r Runner) Runner {
	return withEnv(r, func(env []string) []string {
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "SLURM_BITSTR_LEN=") })
		return append(env, "SLURM_BITSTR_LEN=0")
	})
}

// withEnv is r with every command's environment edited, where r can edit it (an EnvRunner);
// other runners (test replays) run commands as they are.
func withEnv(r Runner, edit func([]string) []string) Runner {
	if er, ok := r.(EnvRunner); ok {
		return envEdited{er, edit}
	}
	return r
}

// envEdited is a Runner whose every command runs with its environment edited.
type envEdited struct {
	EnvRunner
	edit func([]string) []string
}

func (r envEdited) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return r.RunEnv(ctx, r.edit, name, args...)
}

func fetch[T any](ctx context.Context, r Runner, parse func([]byte) ([]T, error), name string, args ...string) ([]T, error) {
	out, err := r.Run(ctx, name, args...)
	command := strings.Join(append([]string{name}, args...), " ")
	if err != nil {
		// A failing command may still have printed its JSON envelope, whose errors say more
		// than the exit status.
		var env envelope
		if json.Unmarshal(out, &env) == nil && len(env.Errors) > 0 {
			return nil, &ResponseError{Command: command, Errors: env.Errors, Err: err}
		}
		return nil, err
	}
	items, err := parse(out)
	var respErr *ResponseError
	if errors.As(err, &respErr) {
		respErr.Command = command
	}
	return items, err
}

// APIError is one entry of the "errors" array Slurm's JSON output carries. 22.05 spells the
// number "errno" in sinfo and "error_number" in squeue; later releases "error_number".
type APIError struct {
	Error       string `json:"error"`
	ErrorNumber int    `json:"error_number"`
	Errno       int    `json:"errno"`
	Source      string `json:"source"`
	Description string `json:"description"`
}

func (e APIError) String() string {
	msg := e.Error
	if e.Description != "" {
		msg = strings.TrimSpace(msg + " (" + e.Description + ")")
	}
	if e.Source != "" {
		msg = e.Source + ": " + msg
	}
	if n := cmp.Or(e.ErrorNumber, e.Errno); n != 0 {
		msg = fmt.Sprintf("%s [error %d]", msg, n)
	}
	return msg
}

// ResponseError is a Slurm JSON answer whose "errors" array is not empty. Its data is never
// used: a half-answered query would make quotas and pools look emptier than they are.
type ResponseError struct {
	Command string // "squeue --json"; "" when parsed from bytes
	Errors  []APIError
	Err     error // the command's own failure, when it also failed
}

func (e *ResponseError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, a := range e.Errors {
		msgs[i] = a.String()
	}
	prefix := "slurm"
	if e.Command != "" {
		prefix = e.Command
	}
	return fmt.Sprintf("%s reported errors: %s", prefix, strings.Join(msgs, "; "))
}

func (e *ResponseError) Unwrap() error { return e.Err }

// envelope is what every answer has around its data. Only the errors matter to decoding: the
// wire types accept every release's forms, so the format needs no switch.
type envelope struct {
	Meta struct {
		Plugin struct {
			Type       string `json:"type"`        // 22.05: "openapi/v0.0.38"
			DataParser string `json:"data_parser"` // 23.02 on: "data_parser/v0.0.42"
		} `json:"plugin"`
		Slurm struct {
			Release string `json:"release"`
		} `json:"Slurm"`
	} `json:"meta"`
	Errors []APIError `json:"errors"`
}

// decode reads an answer into v (which embeds envelope); errors in the answer win over its data.
func decode(data []byte, what string, v any, env *envelope) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("reading %s JSON: %w", what, err)
	}
	if len(env.Errors) > 0 {
		return &ResponseError{Errors: env.Errors}
	}
	return nil
}
