// Package auth is how slurmbridge's daemons (quotad's API, elasticd's API) learn who sends a
// request: a MUNGE credential in its Authorization header, decoded by the daemon's munged, with
// at most a few decodes and AdminLevel lookups at once. The clients (quotactl, elasticd status
// and pin, elasticd's node agent) send their credentials under Scheme.
package auth

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

// Who may read a job's private data (quotad's explanation, elasticd's status): its owner,
// root, and Slurm's operators and administrators (AdminLevel in slurmdbd) — the users Slurm
// itself shows every job to when PrivateData=jobs is set.
//
// A TCP listener cannot see who connects, so such a request carries a MUNGE credential, Slurm's
// own cross-host authentication: the client's munged vouches for its uid, the daemon's munged
// decodes it once (a replayed credential fails), and its payload names the daemon, the method
// and the path, so a credential made for one request, or for the other daemon, cannot be used
// for another.

// Scheme is the Authorization header's scheme: "Authorization: MUNGE <credential>".
const Scheme = "MUNGE"

// API is a daemon's API as its credentials see it. Each daemon names its own: a payload of
// its own, so that a credential made for one daemon is never taken by another, and the words
// of its 401.
type API struct {
	// Payload is what a credential for a request must hold.
	Payload func(method, path string) string
	// Private says what a credential is needed for ("job explanations are private to their
	// owners"), Client which commands send one ("quotactl does").
	Private, Client string
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

// ErrUndecodable is a credential munged would not decode: expired, replayed, or made with
// another MUNGE key. It comes wrapped with ErrUnauthenticated.
var ErrUndecodable = errors.New("the MUNGE credential does not decode")

// ErrBusy is a request that found every credential check slot taken for longer than the wait
// (HTTP 503 with Retry-After): the client should retry in a moment.
var ErrBusy = errors.New("busy, retry")

// Authenticator says who sent a request.
type Authenticator interface {
	Caller(r *http.Request) (Caller, error)
}

// ErrorStatus is the HTTP status of an Authenticator's error, with the header it needs set on
// w: 401 with WWW-Authenticate for no valid credential, 503 with Retry-After when every
// credential check slot is taken, 500 for anything else (slurmdbd unreachable).
func ErrorStatus(w http.ResponseWriter, err error) int {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		w.Header().Set("WWW-Authenticate", Scheme)
		return http.StatusUnauthorized
	case errors.Is(err, ErrBusy):
		w.Header().Set("Retry-After", "1")
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// LocalUserName is the name of the user uid, from this host's user database: Munge.LookupUser
// for the daemons.
func LocalUserName(uid uint32) (string, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

// Munge authenticates requests to a daemon's API by their MUNGE credential.
type Munge struct {
	// API is the daemon's: what a credential must hold, and the 401's words. It has no
	// default: a Munge without API.Payload refuses every request.
	API        API
	Decode     func(ctx context.Context, cred string) (slurm.MungeIdentity, error)
	LookupUser func(uid uint32) (string, error)
	// IsOperator says whether a user has AdminLevel Operator or Administrator in slurmdbd.
	IsOperator func(ctx context.Context, user string) (bool, error)
	// Bounds limits the decodes and operator lookups at once and caches the lookups; nil:
	// the process's own (DefaultBounds), shared by every Munge without Bounds.
	Bounds *Bounds
}

// NewMunge is a daemon's authentication of api's requests: a credential decoded by the munged
// at socket ("": MUNGE's default) through client's unmunge, its uid named from this host's
// user database, an operator as isOperator says, within the process's DefaultBounds.
// isOperator is the daemon's because each reads AdminLevel where it can: quotad from slurmdbd's
// tables, elasticd, which has no database, with sacctmgr.
func NewMunge(client slurm.Client, socket string, isOperator func(ctx context.Context, user string) (bool, error), api API) Munge {
	return Munge{
		API: api,
		Decode: func(ctx context.Context, cred string) (slurm.MungeIdentity, error) {
			return client.MungeDecode(ctx, socket, cred)
		},
		LookupUser: LocalUserName,
		IsOperator: isOperator,
	}
}

// Every request with a credential costs an unmunge process (elasticd's as root) and, for a
// user, an AdminLevel lookup in slurmdbd. Anyone who reaches the port can send credentials,
// valid or not, as fast as the network allows: without a bound, that is as many processes
// and database queries at once. Bounds holds them to a few at a time; a request that
// finds no free slot within a short wait is answered 503 at once instead of queueing without
// end, and a user's AdminLevel is remembered for a few seconds, so a burst of requests from
// one user costs one lookup.

// Bounds bound a process's credential checks.
type Bounds struct {
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

// NewBounds allows decodes unmunge and lookups AdminLevel queries at once, each waiting at
// most wait for a slot, and keeps a user's AdminLevel for ttl.
func NewBounds(decodes, lookups int, wait, ttl time.Duration) *Bounds {
	return &Bounds{decodes: make(chan struct{}, max(decodes, 1)), lookups: make(chan struct{}, max(lookups, 1)),
		wait: wait, ttl: ttl, now: time.Now, operators: map[string]operatorEntry{}}
}

// DefaultBounds is the process's: 4 unmunge and 4 AdminLevel queries at once, a request
// waits 2 s for a slot, an AdminLevel holds for 5 s.
var DefaultBounds = NewBounds(4, 4, 2*time.Second, 5*time.Second)

func (a Munge) bounds() *Bounds {
	if a.Bounds != nil {
		return a.Bounds
	}
	return DefaultBounds
}

// acquire takes a slot of sem, waiting at most b.wait (and no longer than ctx); release gives
// it back.
func (b *Bounds) acquire(ctx context.Context, sem chan struct{}, what string) (release func(), err error) {
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
func (b *Bounds) isOperator(ctx context.Context, user string, lookup func(context.Context, string) (bool, error)) (bool, error) {
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

// errNoAPI is a Munge built without its daemon's API: a mistake in the daemon, answered 500
// rather than taking a credential made for some other daemon.
var errNoAPI = errors.New("MUNGE authentication has no API payload: the daemon must name its own")

// Identity decodes the request's credential, which must hold exactly payload, and returns who
// made it and where: at most a few decodes run at once (ErrBusy beyond them).
func (a Munge) Identity(r *http.Request, payload string) (slurm.MungeIdentity, error) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	if !ok || scheme != Scheme || cred == "" {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: %s; send \"Authorization: %s <credential>\" with a credential from `munge --string '%s'` (%s)",
			ErrUnauthenticated, a.API.Private, Scheme, payload, a.API.Client)
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
		return slurm.MungeIdentity{}, fmt.Errorf("%w: %w (expired, replayed, or from another MUNGE key): %v", ErrUnauthenticated, ErrUndecodable, err)
	}
	if id.Payload != payload {
		return slurm.MungeIdentity{}, fmt.Errorf("%w: the MUNGE credential was made for %q, not for %q", ErrUnauthenticated, id.Payload, payload)
	}
	return id, nil
}

// Caller implements Authenticator: the credential must hold the API's payload of the request's
// method and path.
func (a Munge) Caller(r *http.Request) (Caller, error) {
	if a.API.Payload == nil {
		return Caller{}, errNoAPI
	}
	id, err := a.Identity(r, a.API.Payload(r.Method, r.URL.EscapedPath()))
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
