package slurm

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Fetcher reads the live cluster: nodes from `sinfo --json`, jobs from `squeue --json`.
// poolctl and quotad take one, so their tests replay captured output instead of a cluster.
type Fetcher interface {
	Nodes(ctx context.Context) ([]Node, error)
	Jobs(ctx context.Context) ([]Job, error)
}

// CommandFetcher is the Fetcher over Slurm's commands, run through Runner.
type CommandFetcher struct {
	Runner Runner
}

// Nodes runs `sinfo --json`: every node once, with the partitions it is in.
func (f CommandFetcher) Nodes(ctx context.Context) ([]Node, error) {
	return fetch(ctx, f.Runner, ParseNodes, "sinfo", "--json")
}

// Jobs runs `squeue --json`. Slurm 22.05 ignores squeue's filters (-t, -p, -u) with --json and
// returns every job slurmctld still holds, finished ones included (for MinJobAge); callers
// filter by state.
func (f CommandFetcher) Jobs(ctx context.Context) ([]Job, error) {
	return fetch(ctx, f.Runner, ParseJobs, "squeue", "--json")
}

func fetch[T any](ctx context.Context, r Runner, parse func([]byte) ([]T, error), name string, args ...string) ([]T, error) {
	out, err := r.Run(ctx, name, args...)
	if err != nil {
		// A failing command may still have printed its JSON envelope, whose errors say more
		// than the exit status.
		var env envelope
		if json.Unmarshal(out, &env) == nil && len(env.Errors) > 0 {
			return nil, &ResponseError{Command: name, Errors: env.Errors, Err: err}
		}
		return nil, err
	}
	items, err := parse(out)
	var respErr *ResponseError
	if errors.As(err, &respErr) {
		respErr.Command = name
	}
	return items, err
}

// APIError is one entry of the "errors" array Slurm's JSON output carries (OpenAPI v0.0.38).
// 22.05 spells the number "errno" in sinfo and "error_number" in squeue.
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
	Command string // "sinfo", "squeue"; "" when parsed from bytes
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
		prefix = e.Command + " --json"
	}
	return fmt.Sprintf("%s reported errors: %s", prefix, strings.Join(msgs, "; "))
}

func (e *ResponseError) Unwrap() error { return e.Err }

// envelope is what every v0.0.38 answer has around its data.
type envelope struct {
	Meta struct {
		Plugin struct {
			Type string `json:"type"` // "openapi/v0.0.38"
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
