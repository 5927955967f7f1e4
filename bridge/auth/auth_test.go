package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// testAPI is a daemon's API as the tests' credentials see it.
var testAPI = API{
	Payload: func(method, path string) string { return "slurmbridge-test-api " + method + " " + path },
	Private: "the test's jobs are private to their owners",
	Client:  "the test's client does",
}

// fakeMunge decodes "cred:UID:PAYLOAD" as munged would a credential of uid UID holding PAYLOAD.
func fakeMunge(_ context.Context, cred string) (slurm.MungeIdentity, error) {
	rest, ok := strings.CutPrefix(cred, "cred:")
	if !ok {
		return slurm.MungeIdentity{}, errors.New("unmunge: exit 6: Invalid credential format")
	}
	uid, payload, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(uid, 10, 32)
	if err != nil {
		return slurm.MungeIdentity{}, err
	}
	return slurm.MungeIdentity{UID: uint32(n), Payload: payload}, nil
}

var users = map[uint32]string{1001: "alice", 1002: "bob", 1003: "carol"}

func testAuth(operators ...string) Munge {
	return Munge{
		API:    testAPI,
		Decode: fakeMunge,
		LookupUser: func(uid uint32) (string, error) {
			if u, ok := users[uid]; ok {
				return u, nil
			}
			return "", fmt.Errorf("unknown uid %d", uid)
		},
		IsOperator: func(_ context.Context, user string) (bool, error) {
			for _, o := range operators {
				if o == user {
					return true, nil
				}
			}
			return false, nil
		},
		// Its own: the process's cache would carry one test's operators into the next.
		Bounds: NewBounds(4, 4, time.Second, 5*time.Second),
	}
}

// cred is the Authorization header of uid's credential for GET path.
func cred(uid uint32, path string) string {
	return fmt.Sprintf("MUNGE cred:%d:%s", uid, testAPI.Payload(http.MethodGet, path))
}

// callerHandler answers 200 with the caller's name, or an Authenticator's error as a daemon
// does (ErrorStatus).
func callerHandler(a Authenticator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := a.Caller(r)
		if err != nil {
			http.Error(w, err.Error(), ErrorStatus(w, err))
			return
		}
		fmt.Fprint(w, c.User)
	})
}

// A flood of credentials runs at most the bound's unmunge at once; a request that finds no
// slot within the wait is refused with ErrBusy (503, retry) instead of queueing.
func TestCredentialChecksAreBoundedAndTheRestAreBusy(t *testing.T) {
	var running, most atomic.Int32
	gate := make(chan struct{})
	a := testAuth()
	a.Bounds = NewBounds(2, 2, 100*time.Millisecond, time.Minute)
	a.Decode = func(ctx context.Context, cred string) (slurm.MungeIdentity, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-gate
		return fakeMunge(ctx, cred)
	}
	h := callerHandler(a)
	var wg sync.WaitGroup
	codes := make(chan int, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil)
			req.Header.Set("Authorization", cred(1001, "/api/v1/jobs"))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			switch body := rec.Body.String(); {
			case rec.Code == http.StatusServiceUnavailable && strings.Contains(body, "busy, retry"):
				if rec.Header().Get("Retry-After") == "" {
					t.Errorf("busy without Retry-After: %v", rec.Header())
				}
				codes <- 1
			case rec.Code == http.StatusOK && body == "alice":
				codes <- 0
			default:
				t.Errorf("answer %d %s", rec.Code, body)
			}
		}()
	}
	time.Sleep(400 * time.Millisecond) // past the wait: all but the two running are refused
	close(gate)
	wg.Wait()
	close(codes)
	busy := 0
	for c := range codes {
		busy += c
	}
	if most.Load() != 2 || busy != 8 {
		t.Errorf("%d unmunge ran at once and %d of 10 were busy, want 2 and 8", most.Load(), busy)
	}
}

func TestBusyIsReportedAsBusy(t *testing.T) {
	a := testAuth()
	a.Bounds = NewBounds(1, 1, 50*time.Millisecond, time.Minute)
	release, err := a.Bounds.acquire(context.Background(), a.Bounds.decodes, "checks")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil)
	req.Header.Set("Authorization", cred(1001, "/api/v1/jobs"))
	start := time.Now()
	_, err = a.Caller(req)
	if !errors.Is(err, ErrBusy) || time.Since(start) > time.Second {
		t.Fatalf("Caller with every slot taken: %v after %s, want ErrBusy after the 50ms wait", err, time.Since(start))
	}
	rec := httptest.NewRecorder()
	if code := ErrorStatus(rec, err); code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d headers %v", code, rec.Header())
	}
}

// A user's AdminLevel is read once per TTL, however many requests they send; an error is
// never cached.
func TestOperatorLookupIsCachedBriefly(t *testing.T) {
	var lookups atomic.Int32
	fail := true
	a := testAuth()
	a.Bounds = NewBounds(4, 4, time.Second, 5*time.Second)
	now := time.Unix(1000, 0)
	a.Bounds.now = func() time.Time { return now }
	a.IsOperator = func(context.Context, string) (bool, error) {
		lookups.Add(1)
		if fail {
			return false, errors.New("slurmdbd down")
		}
		return true, nil
	}
	ask := func() (Caller, error) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil)
		req.Header.Set("Authorization", cred(1003, "/api/v1/jobs"))
		return a.Caller(req)
	}
	if _, err := ask(); err == nil || !strings.Contains(err.Error(), "slurmdbd down") {
		t.Fatalf("lookup failure: %v", err)
	}
	fail = false
	for range 20 {
		if c, err := ask(); err != nil || !c.SeesAll {
			t.Fatalf("caller %+v, %v", c, err)
		}
	}
	if n := lookups.Load(); n != 2 {
		t.Fatalf("%d lookups for one failure and 20 requests within the TTL, want 2", n)
	}
	now = now.Add(6 * time.Second)
	if _, err := ask(); err != nil || lookups.Load() != 3 {
		t.Fatalf("after the TTL: %v, %d lookups, want a fresh one", err, lookups.Load())
	}
}

// A header no munge would make is refused before any process runs.
func TestOversizedCredentialIsRefusedWithoutADecode(t *testing.T) {
	a := testAuth()
	a.Decode = func(context.Context, string) (slurm.MungeIdentity, error) {
		t.Fatal("decoded")
		return slurm.MungeIdentity{}, nil
	}
	req := httptest.NewRequest(http.MethodGet, "/api/v1/jobs", nil)
	req.Header.Set("Authorization", "MUNGE MUNGE:"+strings.Repeat("A", 5000))
	if _, err := a.Caller(req); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("oversized credential: %v", err)
	}
}

func TestLocalUserNameReadsTheUserDatabase(t *testing.T) {
	if name, err := LocalUserName(0); err != nil || name != "root" {
		t.Errorf("uid 0: %q, %v; want root", name, err)
	}
	if _, err := LocalUserName(4294967000); err == nil {
		t.Error("a uid no user has: no error")
	}
}

// A request without a credential is told, in its daemon's words, what to send: 401 with
// WWW-Authenticate, the payload its credential must hold and the command that makes one.
func TestMissingCredentialIsA401InTheDaemonsWords(t *testing.T) {
	for _, header := range []string{"", "Bearer x", "MUNGE ", "MUNGE"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
		if header != "" {
			req.Header.Set("Authorization", header)
		}
		rec := httptest.NewRecorder()
		callerHandler(testAuth()).ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") != Scheme {
			t.Errorf("Authorization %q: %d, WWW-Authenticate %q; want 401 and %q", header, rec.Code, rec.Header().Get("WWW-Authenticate"), Scheme)
		}
		for _, want := range []string{testAPI.Private, testAPI.Client, "munge --string 'slurmbridge-test-api GET /v1/jobs'", "Authorization: MUNGE <credential>"} {
			if !strings.Contains(body, want) {
				t.Errorf("Authorization %q: the 401 %q does not say %q", header, body, want)
			}
		}
	}
}

// A credential holds its daemon's payload of one method and path: one made for another daemon,
// path or method is refused, uid 0 is root, and an operator sees every job.
func TestCallerNeedsACredentialForExactlyThisRequest(t *testing.T) {
	otherDaemon := "MUNGE cred:1001:slurmbridge-other-api GET /v1/jobs"
	for _, tc := range []struct {
		name, header string
		want         Caller
		err          string
	}{
		{"alice for this request", cred(1001, "/v1/jobs"), Caller{User: "alice"}, ""},
		{"root", cred(0, "/v1/jobs"), Caller{User: "root", SeesAll: true}, ""},
		{"an operator", cred(1003, "/v1/jobs"), Caller{User: "carol", SeesAll: true}, ""},
		{"made for another daemon", otherDaemon, Caller{}, "was made for"},
		{"made for another path", cred(1001, "/v1/jobs/5"), Caller{}, "was made for"},
		{"an unknown uid", cred(4242, "/v1/jobs"), Caller{}, "uid 4242 has no user name"},
		{"one munged rejects", "MUNGE MUNGE:forged", Caller{}, "does not decode"},
	} {
		req := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
		req.Header.Set("Authorization", tc.header)
		c, err := testAuth("carol").Caller(req)
		if tc.err == "" && (err != nil || c != tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, c, err, tc.want)
		}
		if tc.err != "" && (!errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %+v, %v; want ErrUnauthenticated saying %q", tc.name, c, err, tc.err)
		}
	}
}

// A Munge whose daemon named no API takes no credential, not even one for some other daemon's
// payload: the mistake is the daemon's (500), and nothing is decoded.
func TestMungeWithoutItsDaemonsAPIRefusesEveryRequest(t *testing.T) {
	a := testAuth()
	a.API = API{}
	a.Decode = func(context.Context, string) (slurm.MungeIdentity, error) {
		t.Fatal("decoded")
		return slurm.MungeIdentity{}, nil
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	req.Header.Set("Authorization", cred(0, "/v1/jobs"))
	rec := httptest.NewRecorder()
	callerHandler(a).ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError || rec.Body.String() != errNoAPI.Error()+"\n" {
		t.Fatalf("%d %s, want 500 saying the daemon must name its API", rec.Code, rec.Body.String())
	}
	if _, err := a.Caller(req); !errors.Is(err, errNoAPI) {
		t.Fatalf("Caller: %v, want errNoAPI", err)
	}
}

// unmungeRunner answers unmunge as munged would for a credential of uid 1002 holding payload.
type unmungeRunner struct {
	payload string
	argv    []string
	stdin   string
}

func (r *unmungeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.argv = append([]string{name}, args...)
	return []byte("UID: 1002\nENCODE_HOST: 192.0.2.7\n\n" + r.payload), nil
}

func (r *unmungeRunner) RunInput(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	r.stdin = string(stdin)
	return r.Run(ctx, name, args...)
}

// NewMunge, the daemons' one wiring: the credential goes to unmunge on the daemon's socket, the
// daemon's API payload is checked, and the daemon's operator lookup is asked.
func TestNewMungeDecodesWithTheDaemonsSocketAndAPI(t *testing.T) {
	r := &unmungeRunner{payload: testAPI.Payload(http.MethodGet, "/v1/jobs")}
	var asked []string
	a := NewMunge(slurm.Client{Runner: r}, "/run/munge/other.socket", func(_ context.Context, user string) (bool, error) {
		asked = append(asked, user)
		return true, nil
	}, testAPI)
	a.LookupUser = func(uid uint32) (string, error) { return users[uid], nil } // the test host has no bob
	a.Bounds = NewBounds(1, 1, time.Second, time.Second)
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
	req.Header.Set("Authorization", "MUNGE MUNGE:abc:")
	c, err := a.Caller(req)
	if err != nil || c != (Caller{User: "bob", SeesAll: true}) {
		t.Fatalf("caller %+v, %v; want bob, an operator", c, err)
	}
	if got := strings.Join(r.argv, " "); got != "unmunge --socket /run/munge/other.socket --numeric --keys UID,ENCODE_HOST" || r.stdin != "MUNGE:abc:\n" {
		t.Errorf("unmunge argv %q stdin %q: want the daemon's socket and the credential on stdin", got, r.stdin)
	}
	if len(asked) != 1 || asked[0] != "bob" {
		t.Errorf("operator lookups %v, want bob's", asked)
	}
	if name, err := NewMunge(slurm.Client{Runner: r}, "", nil, testAPI).LookupUser(0); err != nil || name != "root" {
		t.Errorf("NewMunge's LookupUser(0) = %q, %v; want this host's user database", name, err)
	}
}
