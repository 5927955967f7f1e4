package view

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/slurm"
)

// A flood of credentials runs at most the bound's unmunge at once; a request that finds no
// slot within the wait is refused with ErrBusy (503, retry) instead of queueing.
func TestCredentialChecksAreBoundedAndTheRestAreBusy(t *testing.T) {
	var running, most atomic.Int32
	gate := make(chan struct{})
	a := testAuth()
	a.Bounds = NewAuthBounds(2, 2, 100*time.Millisecond, time.Minute)
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
	h := Handler(&View{}, a)
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
			case strings.Contains(body, "has not planned"): // decoded: the view has no plan
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
	a.Bounds = NewAuthBounds(1, 1, 50*time.Millisecond, time.Minute)
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
	if code := AuthErrorStatus(rec, err); code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d headers %v", code, rec.Header())
	}
}

// A user's AdminLevel is read once per TTL, however many requests they send; an error is
// never cached.
func TestOperatorLookupIsCachedBriefly(t *testing.T) {
	var lookups atomic.Int32
	fail := true
	a := testAuth()
	a.Bounds = NewAuthBounds(4, 4, time.Second, 5*time.Second)
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

func TestUserNameReadsTheUserDatabase(t *testing.T) {
	if name, err := UserName(0); err != nil || name != "root" {
		t.Errorf("uid 0: %q, %v; want root", name, err)
	}
	if _, err := UserName(4294967000); err == nil {
		t.Error("a uid no user has: no error")
	}
}
