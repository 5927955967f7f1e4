package view

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

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

// Authenticator says who sent a request.
type Authenticator interface {
	Caller(r *http.Request) (Caller, error)
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
}

func (a MungeAuth) payload(method, path string) string {
	if a.Payload != nil {
		return a.Payload(method, path)
	}
	return CredentialPayload(method, path)
}

// Caller implements Authenticator.
func (a MungeAuth) Caller(r *http.Request) (Caller, error) {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || scheme != AuthScheme || strings.TrimSpace(cred) == "" {
		return Caller{}, fmt.Errorf("%w: job explanations are private to their owners; send \"Authorization: %s <credential>\" with a credential from `munge --string '%s'` (quotactl does)",
			ErrUnauthenticated, AuthScheme, a.payload(r.Method, r.URL.EscapedPath()))
	}
	id, err := a.Decode(r.Context(), strings.TrimSpace(cred))
	if err != nil {
		return Caller{}, fmt.Errorf("%w: the MUNGE credential does not decode (expired, replayed, or from another MUNGE key): %v", ErrUnauthenticated, err)
	}
	if want := a.payload(r.Method, r.URL.EscapedPath()); id.Payload != want {
		return Caller{}, fmt.Errorf("%w: the MUNGE credential was made for %q, not for %q", ErrUnauthenticated, id.Payload, want)
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
		op, err := a.IsOperator(r.Context(), name)
		if err != nil {
			return Caller{}, fmt.Errorf("reading %s's AdminLevel: %w", name, err)
		}
		c.SeesAll = op
	}
	return c, nil
}
