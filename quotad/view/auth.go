package view

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// Who may read a job's explanation: its owner, root, and Slurm's operators and administrators
// (AdminLevel in slurmdbd) — the users Slurm itself shows every job to when PrivateData=jobs
// is set. Project and GPU type positions are open to anyone who reaches the address, as
// sshare and `sacctmgr show qos` are.
//
// A TCP listener cannot see who connects, so a request for jobs carries a MUNGE credential,
// Slurm's own cross-host authentication: the client's munged vouches for its uid, quotad's
// munged decodes it once (a replayed credential fails), and its payload names the method and
// path, so a credential made for one request cannot be used for another.

// AuthScheme is the Authorization header's scheme: "Authorization: MUNGE <credential>".
const AuthScheme = "MUNGE"

// CredentialPayload is what a credential for a request must hold.
func CredentialPayload(method, path string) string {
	return "slurmbridge-quotad-api " + method + " " + path
}

// Caller is who asks.
type Caller struct {
	User    string
	SeesAll bool // root, or a Slurm operator or administrator
}

// MayRead says whether the caller may read a job of user owner.
func (c Caller) MayRead(owner string) bool {
	return c.SeesAll || (c.User != "" && c.User == owner)
}

// ErrUnauthenticated is a request for private data without a valid credential (HTTP 401).
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrBusy is a request that found every credential check slot taken for longer than the wait
// (HTTP 503 with Retry-After): the client should retry in a moment.
var ErrBusy = errors.New("busy, retry")

// Authenticator says who sent a request.
type Authenticator interface {
	Caller(r *http.Request) (Caller, error)
}

// UserName is the name of the user uid, from this host's user database: MungeAuth.LookupUser
// for the daemons.
func UserName(uid uint32) (string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// MungeAuth authenticates requests by their MUNGE credential.
type MungeAuth struct {
	Decode     func(ctx context.Context, cred string) (slurm.MungeIdentity, error)
	LookupUser func(uid uint32) (string, error)
	// IsOperator says whether a user has AdminLevel Operator or Administrator in slurmdbd.
	IsOperator func(ctx context.Context, user string) (bool, error)
	// Payload is what a credential for a request must hold; nil: quotad's CredentialPayload.
	// Each daemon has its own, so a credential made for one is never taken by another.
	Payload func(method, path string) string
	// Private says what a credential is needed for and Client which commands send one, in the
	// 401's words; "": quotad's job explanations and "quotactl does".
	Private, Client string
	// Bounds limits the decodes and operator lookups at once and caches the lookups; nil:
	// the process's own (DefaultAuthBounds), shared by every MungeAuth without Bounds.
	Bounds *AuthBounds
}

// Every request with a credential costs an unmunge process (elasticd's as root) and, for a
// user, an AdminLevel lookup in slurmdbd. Anyone who reaches the port can send credentials,
// valid or not, as fast as the network allows: without a bound, that is as many processes
// and database queries at once. AuthBounds holds them to a few at a time; a request that
// finds no free slot within a short wait is answered 503 at once instead of queueing without
// end, and a user's AdminLevel is remembered for a few seconds, so a burst of requests from
// one user costs one lookup.

// AuthBounds bound a process's credential checks.
type AuthBounds struct {
	decodes, lookups chan struct{}
	// wait is how long a request waits for a slot before ErrBusy.
	wait time.Duration
	// ttl is how long a user's AdminLevel is taken as read.
	ttl time.Duration
	now func() time.Time

	mu        sync.Mutex
	operators map[string]operatorEntry
}

type operatorEntry struct {
	operator bool
	at       time.Time
}

// maxCachedOperators bounds the AdminLevel cache: entries are users with a valid credential,
// so a site's user count, but a bound costs nothing.
const maxCachedOperators = 4096

// maxCredentialLen refuses a header no munge ever makes (a credential of a request's payload
// is a few hundred bytes) before a process is started for it.
const maxCredentialLen = 4096

// NewAuthBounds allows decodes unmunge and lookups AdminLevel queries at once, each waiting at
// most wait for a slot, and keeps a user's AdminLevel for ttl.
func NewAuthBounds(decodes, lookups int, wait, ttl time.Duration) *AuthBounds {
	return &AuthBounds{decodes: make(chan struct{}, max(decodes, 1)), lookups: make(chan struct{}, max(lookups, 1)),
		wait: wait, ttl: ttl, now: time.Now, operators: map[string]operatorEntry{}}
}

// DefaultAuthBounds is the process's: 4 unmunge and 4 AdminLevel queries at once, a request
// waits 2 s for a slot, an AdminLevel holds for 5 s.
var DefaultAuthBounds = NewAuthBounds(4, 4, 2*time.Second, 5*time.Second)

func (a MungeAuth) bounds() *AuthBounds {
	if a.Bounds != nil {
		return a.Bounds
	}
	return DefaultAuthBounds
}

// acquire takes a slot of sem, waiting at most b.wait (and no longer than ctx); release gives
// it back.
func (b *AuthBounds) acquire(ctx context.Context, sem chan struct{}, what string) (release func(), err error) {
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	default:
	}
	t := time.NewTimer(b.wait)
	defer t.Stop()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: %d %s already running for %s", ErrBusy, cap(sem), what, b.wait)
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: gave up waiting to check the credential: %v", ErrBusy, ctx.Err())
	}
}

// isOperator is lookup's answer for user, from the cache while it is fresh.
func (b *AuthBounds) isOperator(ctx context.Context, user string, lookup func(context.Context, string) (bool, error)) (bool, error) {
	b.mu.Lock()
	e, ok := b.operators[user]
	b.mu.Unlock()
	if ok && b.now().Sub(e.at) < b.ttl {
		return e.operator, nil
	}
	release, err := b.acquire(ctx, b.lookups, "AdminLevel lookups")
	if err != nil {
		return false, err
	}
	op, err := lookup(ctx, user)
	release()
	if err != nil {
		return false, err // never cached: the next request asks again
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.operators) >= maxCachedOperators {
		for u, e := range b.operators {
			if now.Sub(e.at) >= b.ttl {
				delete(b.operators, u)
			}
		}
		if len(b.operators) >= maxCachedOperators {
			clear(b.operators)
		}
	}
	b.operators[user] = operatorEntry{operator: op, at: now}
	return op, nil
}

func (a MungeAuth) payload(method, path string) string {
	if a.Payload != nil {
		return a.Payload(method, path)
	}
	return CredentialPayload(method, path)
}

func (a MungeAuth) private() string {
	if a.Private != "" {
		return a.Private
	}
	return "job explanations are private to their owners"
}

func (a MungeAuth) client() string {
	if a.Client != "" {
		return a.Client
	}
	return "quotactl does"
}

// Identity decodes the request's credential, which must hold exactly payload, and returns who
// made it and where: at most a few decodes run at once (ErrBusy beyond them).
func (a MungeAuth) Identity(r *http.Request, payload string) (slurm.MungeIdentity, error) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	if !ok || scheme != AuthScheme || cred == "" {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: %s; send \"Authorization: %s <credential>\" with a credential from `munge --string '%s'` (%s)",
			ErrUnauthenticated, a.private(), AuthScheme, payload, a.client())
	}
	if len(cred) > maxCredentialLen {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: a credential of %d bytes is none munge makes", ErrUnauthenticated, len(cred))
	}
	release, err := a.bounds().acquire(r.Context(), a.bounds().decodes, "MUNGE credential checks")
	if err != nil {
		return slurm.MungeIdentity{}, err
	}
	id, err := a.Decode(r.Context(), cred)
	release()
	if err != nil {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: the MUNGE credential does not decode (expired, replayed, or from another MUNGE key): %v", ErrUnauthenticated, err)
	}
	if id.Payload != payload {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: the MUNGE credential was made for %q, not for %q", ErrUnauthenticated, id.Payload, payload)
	}
	return id, nil
}

// Caller implements Authenticator.
func (a MungeAuth) Caller(r *http.Request) (Caller, error) {
	id, err := a.Identity(r, a.payload(r.Method, r.URL.EscapedPath()))
	if err != nil {
		return Caller{}, err
	}
	if id.UID == 0 {
		return Caller{User: "root", SeesAll: true}, nil
	}
	name, err := a.LookupUser(id.UID)
	if err != nil {
		return Caller{}, fmt.Errorf("%w: uid %d has no user name here: %v", ErrUnauthenticated, id.UID, err)
	}
	c := Caller{User: name}
	if a.IsOperator != nil {
		op, err := a.bounds().isOperator(r.Context(), name, a.IsOperator)
		if err != nil {
			if errors.Is(err, ErrBusy) {
				return Caller{}, err
			}
			return Caller{}, fmt.Errorf("reading %s's AdminLevel: %w", name, err)
		}
		c.SeesAll = op
	}
	return c, nil
}
