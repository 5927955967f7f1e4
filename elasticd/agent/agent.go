// Package agent is elasticd's node agent: every interval it reads through NVML
// (elasticd/probe) the GPUs elasticd named in its last answer, those of the elastic jobs and
// workers running on its nodes, and posts the samples to elasticd, which checks who sent them
// before it takes a sample (a session set up with one MUNGE credential, then an HMAC per
// report: HTTPPoster); elasticd answers with what to read next. The agent asks Slurm nothing: one queue read per node and interval would
// load slurmctld with nodes × jobs. With nothing to read it still reports, empty, every
// IdleEvery cycles, to learn of new jobs. Where NVML is missing it says so once and posts
// nothing: elasticd then works from throughput alone.
package agent

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
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

// legacyRetry: after an elasticd without sessions answered the set-up 404, the agent signs
// each report with MUNGE and asks for a session again this long after (elasticd may have been
// upgraded meanwhile).
const legacyRetry = 15 * time.Minute

// exchangeTimeout bounds each request to elasticd.
const exchangeTimeout = 10 * time.Second

var (
	// errNoSessions: elasticd answered the set-up 404 or 405, a release before sessions.
	errNoSessions = errors.New("elasticd sets up no signals sessions")
	// errSessionGone: elasticd holds no such session (expired, evicted, restarted).
	errSessionGone = errors.New("elasticd no longer holds the signals session")
)

// HTTPPoster posts reports to elasticd. It proves who it is once per session, with one MUNGE
// credential over an ephemeral X25519 public key (api.SignalsSessionPath), and then signs each
// report with an HMAC under the key both sides derive (api.ReportMAC) and a sequence number
// that only grows: elasticd decodes a credential per agent and session, not per report. It
// renews a session before it expires, at a random point of its last quarter so that agents
// started together do not all renew at once, and sets up a new one at once when elasticd no
// longer holds it (then resends the report once).
type HTTPPoster struct {
	Client  *http.Client
	BaseURL string
	Encode  Encode
	Log     zerolog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	mu          sync.Mutex // one report at a time: sequence numbers go out in order
	sess        *clientSession
	legacyUntil time.Time // until then, a MUNGE credential per report (elasticd has no sessions)
}

type clientSession struct {
	id      string
	key     []byte
	seq     uint64 // the last one sent
	renewAt time.Time
}

// PostHTTP is an HTTPPoster's Post for baseURL, with credentials from encode.
func PostHTTP(client *http.Client, baseURL string, encode Encode) func(ctx context.Context, r api.SignalReport) (api.SignalAnswer, error) {
	p := &HTTPPoster{Client: client, BaseURL: baseURL, Encode: encode, Log: zerolog.Nop()}
	return p.Post
}

func (p *HTTPPoster) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// Post sends a report and reads elasticd's answer. An elasticd from before answers were given
// (204, no body) names nothing to read.
func (p *HTTPPoster) Post(ctx context.Context, r api.SignalReport) (api.SignalAnswer, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	body, err := json.Marshal(r)
	if err != nil {
		return api.SignalAnswer{}, err
	}
	now := p.now()
	if now.Before(p.legacyUntil) {
		return p.postMunge(ctx, body)
	}
	if p.sess == nil || !now.Before(p.sess.renewAt) {
		if err := p.setUp(ctx, r.Node); err != nil {
			return p.fallBack(ctx, body, err)
		}
	}
	answer, err := p.postSession(ctx, body)
	if errors.Is(err, errSessionGone) {
		if err := p.setUp(ctx, r.Node); err != nil {
			return p.fallBack(ctx, body, err)
		}
		answer, err = p.postSession(ctx, body)
	}
	return answer, err
}

// fallBack posts body with its own MUNGE credential where setting up a session failed because
// elasticd has no sessions, and returns the set-up's error otherwise.
func (p *HTTPPoster) fallBack(ctx context.Context, body []byte, err error) (api.SignalAnswer, error) {
	if !errors.Is(err, errNoSessions) {
		return api.SignalAnswer{}, err
	}
	p.Log.Info().Dur("retry_after", legacyRetry).Msg("elasticd sets up no signals sessions (an older release): each report carries its own MUNGE credential")
	p.legacyUntil = p.now().Add(legacyRetry)
	return p.postMunge(ctx, body)
}

// setUp makes a session: an ephemeral key pair, its public half posted under a MUNGE
// credential over the request, and the key derived from elasticd's answer.
func (p *HTTPPoster) setUp(ctx context.Context, node string) error {
	p.sess = nil
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	pub := priv.PublicKey().Bytes()
	body, err := json.Marshal(api.SessionRequest{Node: node, PublicKey: pub})
	if err != nil {
		return err
	}
	start := p.now()
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	cred, err := p.Encode(ctx, api.SessionPayload(body))
	if err != nil {
		return fmt.Errorf("making the session's MUNGE credential: %w", err)
	}
	resp, err := p.send(ctx, api.SignalsSessionPath, "MUNGE "+cred, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
		return errNoSessions
	}
	if resp.StatusCode != http.StatusOK {
		return refusal("a signals session", resp)
	}
	var a api.SessionAnswer
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&a); err != nil {
		return fmt.Errorf("elasticd's session answer unreadable: %w", err)
	}
	if _, _, _, ok := api.ParseSessionAuthorization(api.SessionAuthorization(a.ID, 1, make([]byte, sha256.Size))); !ok || a.ExpiresInSeconds <= 0 {
		return fmt.Errorf("elasticd's session answer unusable: id %q, expires in %d s", a.ID, a.ExpiresInSeconds)
	}
	peer, err := ecdh.X25519().NewPublicKey(a.PublicKey)
	if err != nil {
		return fmt.Errorf("elasticd's session key: %w", err)
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		return fmt.Errorf("elasticd's session key: %w", err)
	}
	key, err := api.SessionKey(shared, pub, a.PublicKey, a.ID)
	if err != nil {
		return err
	}
	// An answer's lifetime is taken within [1 s, 1 day]: a huge one would overflow.
	ttl := time.Duration(min(a.ExpiresInSeconds, 86400)) * time.Second
	renew := time.Duration(float64(ttl) * (0.75 + 0.15*mrand.Float64()))
	p.sess = &clientSession{id: a.ID, key: key, renewAt: start.Add(renew)}
	return nil
}

// postSession posts body in the session, with the next sequence number (taken whatever
// becomes of the request, so that none is sent twice).
func (p *HTTPPoster) postSession(ctx context.Context, body []byte) (api.SignalAnswer, error) {
	s := p.sess
	s.seq++
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	resp, err := p.send(ctx, api.SignalsPath, api.SessionAuthorization(s.id, s.seq, api.ReportMAC(s.key, s.id, s.seq, body)), body)
	if err != nil {
		return api.SignalAnswer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		p.sess = nil // whatever elasticd found wrong, the next report starts a new session
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		if strings.Contains(string(msg), api.SessionUnknown) {
			return api.SignalAnswer{}, errSessionGone
		}
		return api.SignalAnswer{}, fmt.Errorf("elasticd answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return readAnswer(resp)
}

// postMunge posts body with a credential from encode for exactly it (api.SignalsPayload): the
// way before sessions, for an elasticd that has none.
func (p *HTTPPoster) postMunge(ctx context.Context, body []byte) (api.SignalAnswer, error) {
	ctx, cancel := context.WithTimeout(ctx, exchangeTimeout)
	defer cancel()
	cred, err := p.Encode(ctx, api.SignalsPayload(body))
	if err != nil {
		return api.SignalAnswer{}, fmt.Errorf("making the report's MUNGE credential: %w", err)
	}
	resp, err := p.send(ctx, api.SignalsPath, "MUNGE "+cred, body)
	if err != nil {
		return api.SignalAnswer{}, err
	}
	defer resp.Body.Close()
	return readAnswer(resp)
}

func (p *HTTPPoster) send(ctx context.Context, path, authorization string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(p.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", authorization)
	return p.Client.Do(req)
}

// readAnswer is elasticd's answer to a report.
func readAnswer(resp *http.Response) (api.SignalAnswer, error) {
	var answer api.SignalAnswer
	if resp.StatusCode/100 != 2 {
		return answer, refusal("the report", resp)
	}
	if resp.StatusCode == http.StatusNoContent {
		return answer, nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return answer, fmt.Errorf("elasticd's answer unreadable: %w", err)
	}
	return answer, nil
}

func refusal(what string, resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return fmt.Errorf("elasticd answered %s to %s: %s", resp.Status, what, strings.TrimSpace(string(msg)))
}
