//go:build integration

package attacks

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// quotadJob submits bob's one-GPU job, waits until quotad explains it to root, and returns its
// id and the URL of its explanation.
func (a *attack) quotadJob(ctx context.Context, t *testing.T) (id, jobURL, path string) {
	t.Helper()
	id = a.submit(ctx, t, "bob", "-p", "a100", "--gres=gpu:a100:1", "-t", "30", "--job-name=victim-gpu", "--wrap", "sleep 600")
	if _, err := a.c.WaitState(ctx, id, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	path = "/api/" + view.APIVersion + "/jobs/" + id
	jobURL = a.c.QuotadURL() + path
	for {
		got := call(ctx, t, http.MethodGet, jobURL, auth.Scheme+" "+a.credential(ctx, t, "root", quotaapi.CredentialPayload(http.MethodGet, path)))
		if got.Code == http.StatusOK {
			return id, jobURL, path
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quotad never explained bob's running job %s to root: last %s", id, got)
		case <-time.After(time.Second):
		}
	}
}

// Job explanations are private: alice cannot read bob's, with no credential, a forged one, one
// made for another path, another daemon or another method, or one already used; and her own
// list of jobs leaves bob's out. bob reads his own (the refusals are not of everyone).
func TestAttackQuotadJobExplanations(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 3*time.Minute)
	held, running := a.victims(ctx, t)
	bobGPU, jobURL, path := a.quotadJob(ctx, t)
	w := a.c.CaptureWorld(ctx, t, []string{held, running, bobGPU}, nil)
	cred := func(user, payload string) string {
		return auth.Scheme + " " + a.credential(ctx, t, user, payload)
	}
	mine := quotaapi.CredentialPayload(http.MethodGet, path)

	expect(t, "no credential", call(ctx, t, http.MethodGet, jobURL, ""), http.StatusUnauthorized, "private to their owners")
	expect(t, "another scheme", call(ctx, t, http.MethodGet, jobURL, "Bearer "+a.credential(ctx, t, "alice", mine)), http.StatusUnauthorized, "private to their owners")
	expect(t, "a forged credential", call(ctx, t, http.MethodGet, jobURL, auth.Scheme+" MUNGE:AAAAforgedAAAA:"), http.StatusUnauthorized, "does not decode")
	expect(t, "alice's own credential", call(ctx, t, http.MethodGet, jobURL, cred("alice", mine)), http.StatusForbidden, "is not alice's")
	expect(t, "a credential for another job", call(ctx, t, http.MethodGet, jobURL, cred("alice", quotaapi.CredentialPayload(http.MethodGet, "/api/v1/jobs/1"))), http.StatusUnauthorized, "was made for")
	expect(t, "a credential for the job list", call(ctx, t, http.MethodGet, jobURL, cred("alice", quotaapi.CredentialPayload(http.MethodGet, "/api/v1/jobs"))), http.StatusUnauthorized, "was made for")
	expect(t, "a credential for another method", call(ctx, t, http.MethodGet, jobURL, cred("alice", quotaapi.CredentialPayload(http.MethodPut, path))), http.StatusUnauthorized, "was made for")
	expect(t, "a credential made for elasticd", call(ctx, t, http.MethodGet, jobURL, cred("alice", api.RequestPayload(http.MethodGet, path))), http.StatusUnauthorized, "was made for")
	expect(t, "a credential naming root in its payload", call(ctx, t, http.MethodGet, jobURL, cred("alice", mine+" uid=0")), http.StatusUnauthorized, "was made for")

	// bob's own credential works once; the same credential a second time (a replay by whoever
	// saw it) does not.
	bobs := cred("bob", mine)
	expect(t, "bob's own job", call(ctx, t, http.MethodGet, jobURL, bobs), http.StatusOK, fmt.Sprintf(`"job_id": %s`, bobGPU))
	expect(t, "bob's credential replayed", call(ctx, t, http.MethodGet, jobURL, bobs), http.StatusUnauthorized, "does not decode")

	listPath := "/api/" + view.APIVersion + "/jobs"
	list := call(ctx, t, http.MethodGet, a.c.QuotadURL()+listPath, cred("alice", quotaapi.CredentialPayload(http.MethodGet, listPath)))
	var jobs view.JobsResponse
	if err := json.Unmarshal([]byte(list.Body), &jobs); list.Code != http.StatusOK || err != nil {
		t.Fatalf("alice's job list: %s (%v)", list, err)
	}
	for _, j := range jobs.Jobs {
		if j.User != "alice" {
			t.Errorf("alice's job list holds job %d of %s", j.JobID, j.User)
		}
	}
	w.AssertUnchanged(ctx, t, a.c)
}

// rawRequest writes request, as it stands, to quotad's socket and returns the status line and
// whether the body held marker: paths a client library would clean reach the server as given.
func rawRequest(t *testing.T, addr, request, marker string) (status, location string, leaked bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("no HTTP answer to %.80q: %v", request, err)
	}
	defer resp.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
	return resp.Status, resp.Header.Get("Location"), strings.Contains(body.String(), marker)
}

// Hostile paths and headers get a clear 4xx and never a file or a job: paths that climb out
// of /api/v1/jobs, ids past uint32, NUL bytes, a 10 kB header and a 2 MB one.
func TestAttackQuotadHostileRequests(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	held, running := a.victims(ctx, t)
	w := a.c.CaptureWorld(ctx, t, []string{held, running}, nil)
	u, err := url.Parse(a.c.QuotadURL())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		codes []int
	}{
		// ServeMux answers a path with .. by a redirect to its clean form, which is refused in
		// turn (followed below).
		{"/api/v1/jobs/../../../../etc/passwd", []int{301, 307, 308, 400, 404}},
		{"/api/v1/jobs/..%2f..%2f..%2fetc%2fpasswd", []int{301, 307, 308, 400, 404}},
		{"/api/v1/jobs/%2e%2e/%2e%2e/etc/passwd", []int{301, 307, 308, 400, 404}},
		{"/api/v1/jobs/99999999999999999999999999", []int{400}},
		{"/api/v1/jobs/4294967296", []int{400}},
		{"/api/v1/jobs/-1", []int{400}},
		{"/api/v1/jobs/1%00", []int{400}},
		{"/api/v1/jobs/0x10", []int{400}},
		{"/api/v1/projects/..%2f..%2fetc%2fpasswd", []int{301, 307, 308, 400, 404}},
		{"/api/v1/" + strings.Repeat("a/", 2000), []int{404}},
	} {
		get := func(path string) (int, string, string, bool) {
			status, location, leaked := rawRequest(t, u.Host, "GET "+path+" HTTP/1.1\r\nHost: "+u.Host+"\r\nConnection: close\r\n\r\n", "root:x:0:0")
			code := 0
			fmt.Sscanf(status, "%d", &code)
			return code, status, location, leaked
		}
		code, status, location, leaked := get(tc.path)
		if leaked || !containsCode(tc.codes, code) {
			t.Errorf("GET %.60s: %s (leaked /etc/passwd: %t), want one of %v", tc.path, status, leaked, tc.codes)
		}
		if code/100 == 3 {
			if next, nstatus, _, nleaked := get(location); nleaked || (next != 400 && next != 404) {
				t.Errorf("GET %.60s redirects to %s, which answers %s (leaked /etc/passwd: %t), want 400 or 404", tc.path, location, nstatus, nleaked)
			}
		}
	}
	// A 10 kB header is served as any request; an Authorization of 10 kB is no credential.
	status, _, _ := rawRequest(t, u.Host, "GET /api/v1/status HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Pad: "+strings.Repeat("x", 10<<10)+"\r\nConnection: close\r\n\r\n", "")
	if !strings.HasPrefix(status, "200") {
		t.Errorf("status with a 10 kB header: %s", status)
	}
	status, _, _ = rawRequest(t, u.Host, "GET /api/v1/jobs HTTP/1.1\r\nHost: "+u.Host+"\r\nAuthorization: MUNGE "+strings.Repeat("A", 10<<10)+"\r\nConnection: close\r\n\r\n", "")
	if !strings.HasPrefix(status, "401") {
		t.Errorf("jobs with a 10 kB credential: %s, want 401", status)
	}
	// Past Go's 1 MB header limit the server refuses the request before any handler sees it.
	status, _, _ = rawRequest(t, u.Host, "GET /api/v1/status HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Pad: "+strings.Repeat("x", 2<<20)+"\r\nConnection: close\r\n\r\n", "")
	if !strings.HasPrefix(status, "431") {
		t.Errorf("status with a 2 MB header: %s, want 431", status)
	}
	w.AssertUnchanged(ctx, t, a.c)
}

func containsCode(codes []int, code int) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// Many connections at once on loopback, bounded: 200 held open idle and 32 clients asking 20
// times each; quotad answers every request, and a new one within 2 s while the idle ones stay.
func TestAttackQuotadManyConnections(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	w := a.c.CaptureWorld(ctx, t, nil, nil)
	u, err := url.Parse(a.c.QuotadURL())
	if err != nil {
		t.Fatal(err)
	}
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 200 {
		c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(idle)+1, err)
		}
		// Half a request line: the server waits for the rest.
		_, _ = c.Write([]byte("GET /api/v1/status HTTP/1.1\r\n"))
		idle = append(idle, c)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures, served := 0, 0
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.c.QuotadURL()+"/api/v1/projects", nil)
				resp, err := client.Do(req)
				mu.Lock()
				if err != nil || resp.StatusCode != http.StatusOK {
					failures++
				} else {
					served++
				}
				mu.Unlock()
				if err == nil {
					resp.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("640 requests beside 200 idle connections: %d served, %d failed in %.1f s", served, failures, time.Since(start).Seconds())
	if failures > 0 {
		t.Errorf("%d of 640 requests failed", failures)
	}
	one := time.Now()
	got := call(ctx, t, http.MethodGet, a.c.QuotadURL()+"/api/v1/status", "")
	if got.Code != http.StatusOK || time.Since(one) > 2*time.Second {
		t.Errorf("a fresh request beside 200 idle connections: %d in %v", got.Code, time.Since(one))
	}
	w.AssertUnchanged(ctx, t, a.c)
}

// quotactl set as alice is refused: setting quotas needs the database password, which only root
// reads; with a password of her own guessing the database refuses her. The quota table is
// the same after.
func TestAttackQuotactlSetAsUser(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, 2*time.Minute)
	quotactl := userCopy(t, filepath.Join(repoRoot(), "bin", "quotactl"))
	before := a.c.MustRun(ctx, t, quotactl, "export")
	w := a.c.CaptureWorld(ctx, t, nil, []string{a.c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"]})

	a.refused(ctx, t, "alice", []string{"permission denied"}, quotactl, "set", "proj-a", "--gpus", "a100=8")
	a.refused(ctx, t, "alice", []string{"permission denied"}, quotactl, "import", "/dev/null")
	guess := filepath.Join(sharedDir(t), "guess")
	if err := os.WriteFile(guess, []byte("slurm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chownTo(t, guess, "alice")
	a.refused(ctx, t, "alice", []string{"access denied"}, quotactl, "--db-password-file", guess, "set", "proj-a", "--gpus", "a100=8")
	if after := a.c.MustRun(ctx, t, quotactl, "export"); after != before {
		t.Errorf("the quota table changed:\n%s\nwas\n%s", after, before)
	}
	w.AssertUnchanged(ctx, t, a.c)
}

// The accounting database takes no one without the password: not slurm with none or a
// guessed one, not root over TCP, not an anonymous user (MariaDB's install can leave one).
func TestAttackDatabaseWithoutPassword(t *testing.T) {
	a := begin(t)
	ctx := ctxFor(t, time.Minute)
	w := a.c.CaptureWorld(ctx, t, nil, nil)
	for _, who := range []struct{ user, password string }{{"slurm", ""}, {"slurm", "slurm"}, {"root", ""}, {"", ""}, {"alice", ""}} {
		cfg := mysql.NewConfig()
		cfg.Net, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName = "tcp", a.c.Vars["SLURMBRIDGE_DB_ADDR"], who.user, who.password, a.c.Vars["SLURMBRIDGE_DB_NAME"]
		cfg.Timeout = 5 * time.Second
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, err := conn.Connect(ctx)
		if err == nil {
			c.Close()
			t.Errorf("MariaDB let %q in with password %q", who.user, who.password)
			continue
		}
		if !strings.Contains(err.Error(), "Access denied") {
			t.Errorf("MariaDB refused %q with %v, want Access denied", who.user, err)
		}
	}
	w.AssertUnchanged(ctx, t, a.c)
}
