//go:build integration

package attacks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// attack is one test's handle on the testbed and the jobs it made, which it cancels at the end.
type attack struct {
	c    *testbed.Cluster
	jobs []string
}

// begin opens the testbed and fails the test unless quotad, elasticd and its agent run: an
// attack on a daemon that is not there proves nothing.
func begin(t *testing.T) *attack {
	t.Helper()
	c := testbed.Require(t)
	a := &attack{c: c}
	t.Cleanup(func() { a.cancelAll() })
	ctx := ctxFor(t, 2*time.Minute)
	w := c.CaptureWorld(ctx, t, nil, nil)
	// A node still completing an earlier test's job, or not answering, would hide what an
	// attack does to it.
	for len(w.UnwellNodes()) > 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("nodes not well before the attack: %v", w.UnwellNodes())
		case <-time.After(time.Second):
		}
		w = c.CaptureWorld(ctx, t, nil, nil)
	}
	for _, d := range []string{"quotad", "elasticd", "elastic-agent"} {
		if !w.Running(d) {
			t.Fatalf("the testbed's %s does not run (make build, then testbed/%s.sh start)", d, strings.TrimSuffix(d, "-agent"))
		}
	}
	waitQuotadPlanned(ctx, t, c)
	return a
}

func (a *attack) cancelAll() {
	if len(a.jobs) > 0 {
		a.c.Cancel(a.jobs...)
	}
}

// ctxFor is a context that ends after limit (scaled by the testbed's patience) or with the test.
func ctxFor(t *testing.T, limit time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testbed.Patience(limit))
	t.Cleanup(cancel)
	return ctx
}

// submit submits a job as user (sbatch ARGS) and cancels it when the test ends.
func (a *attack) submit(ctx context.Context, t *testing.T, user string, args ...string) string {
	t.Helper()
	id, msg, err := a.c.SubmitWithMessage(ctx, user, args...)
	if err != nil {
		t.Fatalf("%s: sbatch %s: %v (%s)", user, strings.Join(args, " "), err, msg)
	}
	a.jobs = append(a.jobs, id)
	return id
}

// victims are bob's jobs the attacks aim at: one held in the CPU pool (it never starts, and
// quotad lends nothing to it) and one running there.
func (a *attack) victims(ctx context.Context, t *testing.T) (held, running string) {
	t.Helper()
	held = a.submit(ctx, t, "bob", "-p", "cpu", "--hold", "--job-name=victim-held", "-t", "30", "--wrap", "sleep 600")
	running = a.submit(ctx, t, "bob", "-p", "cpu", "--job-name=victim-running", "-t", "30", "--wrap", "sleep 600")
	if _, err := a.c.WaitState(ctx, running, "RUNNING"); err != nil {
		t.Fatal(err)
	}
	return held, running
}

// refused runs name ARGS as user and fails the test unless it fails with a message holding one
// of wants (case-insensitive); it returns that message.
func (a *attack) refused(ctx context.Context, t *testing.T, user string, wants []string, name string, args ...string) string {
	t.Helper()
	out, stderr, err := a.c.RunAsWithStderr(ctx, user, name, args...)
	msg := strings.TrimSpace(stderr)
	if err == nil {
		t.Errorf("%s: %s %s was not refused; it printed %q %q", user, filepath.Base(name), strings.Join(args, " "), out, msg)
		return msg
	}
	if !containsAny(msg, wants) {
		t.Errorf("%s: %s %s failed (%v) without a clear refusal: %q, want one of %q", user, filepath.Base(name), strings.Join(args, " "), err, msg, wants)
	}
	return msg
}

func containsAny(s string, wants []string) bool {
	for _, w := range wants {
		if strings.Contains(strings.ToLower(s), strings.ToLower(w)) {
			return true
		}
	}
	return false
}

// repoRoot is the source tree under test (bin/ holds its built commands).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// mungeSocket is the testbed's munged, where every user makes credentials.
func (a *attack) mungeSocket() string { return a.c.Vars["SLURMBRIDGE_MUNGE_SOCKET"] }

// credential is a MUNGE credential user makes for payload with the testbed's munged.
func (a *attack) credential(ctx context.Context, t *testing.T, user, payload string) string {
	t.Helper()
	s, err := a.c.SlurmAs(user, nil)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := s.MungeEncode(ctx, a.mungeSocket(), payload)
	if err != nil {
		t.Fatalf("%s: munge: %v", user, err)
	}
	return cred
}

// answer is an HTTP answer: its status and (the first 64 kB of) its body.
type answer struct {
	Code int
	Body string
}

func (r answer) String() string { return fmt.Sprintf("%d %q", r.Code, r.Body) }

// httpClient never follows redirects: a redirect is an answer an attack must see.
var httpClient = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// call sends method url with the Authorization header auth ("" none).
func call(ctx context.Context, t *testing.T, method, url, auth string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return answer{Code: resp.StatusCode, Body: string(body)}
}

// expect fails the test unless got has status code and a body holding want.
func expect(t *testing.T, what string, got answer, code int, want string) {
	t.Helper()
	if got.Code != code || !strings.Contains(got.Body, want) {
		t.Errorf("%s: answered %s, want %d with %q", what, got, code, want)
	}
}

// waitQuotadPlanned waits until quotad answers /api/v1/projects (it has planned once).
func waitQuotadPlanned(ctx context.Context, t *testing.T, c *testbed.Cluster) {
	t.Helper()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.QuotadURL()+"/api/v1/projects", nil)
		resp, err := httpClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("quotad at %s has not planned: %v", c.QuotadURL(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sharedDir is a directory every test user may write (a job's output, a script to submit),
// removed when the test ends.
func sharedDir(t *testing.T) string {
	t.Helper()
	return testbed.SharedDir(t, "attack-", 0o1777)
}

// chownTo gives path to user, so that a job of that user may overwrite it.
func chownTo(t *testing.T, path, username string) {
	t.Helper()
	u, err := user.Lookup(username)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// userCopy is a copy of the binary at path that the test users can run: the checkout may sit
// in a directory they cannot enter (a 0700 home, /root).
func userCopy(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "attack-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}
