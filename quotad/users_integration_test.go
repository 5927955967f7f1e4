//go:build integration

// Ordinary users read quota positions through quotad's read-only API, without any secret, and
// see explanations of their own jobs only.
package quotad_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/policy"
	"github.com/slurmbridge/slurmbridge/quotad/store"
)

// apiAddr waits until the quotad of logPath serves its API and returns its address.
func apiAddr(t *testing.T, logPath string) string {
	t.Helper()
	re := regexp.MustCompile(`"addr":"([^"]+)".*read-only API`)
	var addr string
	waitFor(t, "quotad serving its API", 30*time.Second, func() bool {
		data, _ := os.ReadFile(logPath)
		if m := re.FindSubmatch(data); m != nil {
			addr = string(m[1])
		}
		return addr != ""
	})
	return "http://" + addr
}

// quotactlAs runs bin/quotactl as a testbed user with the testbed's environment.
func quotactlAs(c *testbed.Cluster, user string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, stderr, err := c.RunAsWithStderr(ctx, user, filepath.Join(binDir, "quotactl"), args...)
	return string(out), stderr, err
}

func TestOrdinaryUsersListAndExplainWithoutASecret(t *testing.T) {
	c := testbed.Require(t)
	importTestbedQuotas(t, c)
	// Users reach the testbed's quotad at the env file's SLURMBRIDGE_QUOTAD_URL, as a site's
	// users reach theirs; when the testbed runs none, the test starts one and names it.
	api := c.QuotadURL()
	var where []string
	if resp, err := http.Get(api + "/api/v1/status"); err == nil && resp.StatusCode == http.StatusOK {
		resp.Body.Close()
		t.Logf("users read the testbed's quotad at %s (SLURMBRIDGE_QUOTAD_URL)", api)
	} else {
		log, _ := activeQuotad(t, c)
		api = apiAddr(t, log)
		where = []string{"--quotad", api}
		t.Logf("the testbed runs no quotad (%v); users read the test's at %s", err, api)
	}
	as := func(user string, args ...string) (string, string, error) {
		return quotactlAs(c, user, append(append([]string{}, where...), args...)...)
	}

	// alice holds no secret: the database password file is not hers to read.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.RunAs(ctx, "alice", "cat", c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"]); err == nil {
		t.Fatal("alice can read the database password: this test would prove nothing")
	}
	if out, stderr, err := as("alice", "list", "--via", "database"); err == nil || !strings.Contains(stderr, "password file") {
		t.Fatalf("alice asked for the database path: err %v\n%s%s", err, out, stderr)
	}

	// bob runs 4 in quota and borrows 2; alice runs 1 in quota.
	bob := submitN(t, c, "bob", 6)
	alice := submitN(t, c, "alice", 1)
	waitQueue(t, c, slices.Concat(bob, alice), "bob 4 in quota + 2 borrowed and alice 1 running", 30*time.Second,
		exactly(4, bob, runningIn("guar-proj-b")), exactly(2, bob, runningIn("borrow-proj-b")), exactly(1, alice, running))

	// The numbers alice reads are those the queue shows, and those root computes from the
	// database now. A cycle or two may pass before quotad's plan has them.
	want := map[string]string{
		"proj-a": "proj-a|a100|4|1|0|2|0", // 1 in use; 2 of its 3 unused a100 are what bob borrows
		"proj-b": "proj-b|a100|4|4|2|0|0",
	}
	var list, stderr string
	waitFor(t, "alice's quotactl list showing the queue's numbers", 20*time.Second, func() bool {
		var err error
		list, stderr, err = as("alice", "list", "-P")
		if err != nil {
			t.Logf("alice: quotactl list: %v: %s", err, stderr)
			return false
		}
		return strings.Contains(list, want["proj-a"]+"\n") && strings.Contains(list, want["proj-b"]+"\n")
	})
	if strings.Contains(stderr, "stale") {
		t.Errorf("a fresh plan is reported stale: %s", stderr)
	}
	root := quotactl(t, c, "list", "-P", "--via", "database")
	for _, row := range want {
		if !strings.Contains(root, row+"\n") {
			t.Errorf("root's database path lacks %q that alice saw:\n%s", row, root)
		}
	}
	t.Logf("alice's quotactl list -P via quotad:\n%s", list)

	// explain: her own job yes, bob's no; bob his own; root any, through the same API.
	out, stderr, err := as("alice", "explain", alice[0])
	if err != nil || !strings.Contains(out, "job "+alice[0]+" ") {
		t.Errorf("alice explains her job %s: %v\n%s%s", alice[0], err, out, stderr)
	}
	borrowed := ""
	for id, r := range queue(t, c, bob) {
		if r.qos == "borrow-proj-b" {
			borrowed = id
		}
	}
	out, stderr, err = as("alice", "explain", borrowed)
	if err == nil || !strings.Contains(stderr, "403") || !strings.Contains(stderr, "job "+borrowed+" ") || !strings.Contains(stderr, " alice's") || strings.Contains(out, "job "+borrowed+" ") {
		t.Errorf("alice explains bob's job %s: err %v\nstdout %s\nstderr %s", borrowed, err, out, stderr)
	}
	out, stderr, err = as("bob", "explain", "--json", borrowed)
	if err != nil {
		t.Errorf("bob explains his borrowed job %s: %v\n%s%s", borrowed, err, out, stderr)
	} else if j := parseExplained(t, borrowed, out); !slices.Contains(append(runsBorrowed, policy.CodePromised, policy.CodeLentWaitsForGPUs), policy.Code(j.Code)) {
		t.Errorf("bob's borrowed job %s explained as %s: %s", borrowed, j.Code, j.Explanation)
	}
	viaAPI := quotactl(t, c, append(append([]string{}, where...), "explain", "--via", "quotad", "--json", borrowed)...)
	if j := parseExplained(t, borrowed, viaAPI); j.Code == "" {
		t.Errorf("root explains bob's job through the API without a code: %+v", j)
	}
	out, stderr, err = as("alice", "explain", "proj-a")
	if err != nil || !strings.Contains(out, "proj-a (QOS guar-proj-a") || !strings.Contains(out, "job "+alice[0]+" ") {
		t.Errorf("alice explains proj-a: %v\n%s%s", err, out, stderr)
	}
	// A credential is what the API asks for jobs; a plain request is refused.
	resp, err := http.Get(api + "/api/v1/jobs/" + alice[0])
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/jobs/%s without a credential: HTTP %d, want 401", alice[0], resp.StatusCode)
	}
}

// A read command neither creates nor changes quotad's schema: on a database without it, list
// and export fail and say who migrates, and the database stays empty.
func TestReadCommandsNeverMigrate(t *testing.T) {
	c := testbed.Require(t)
	const empty = "slurmbridge_readonly_check"
	socket := filepath.Join(c.Dir, "run", "mysqld", "mysqld.sock")
	sql := func(stmt string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := c.Run(ctx, "mariadb", "--no-defaults", "--socket="+socket, "-uroot", "-N", "-B", "-e", stmt)
		if err != nil {
			t.Fatalf("mariadb -e %q: %v", stmt, err)
		}
		return strings.TrimSpace(string(out))
	}
	sql(fmt.Sprintf("CREATE DATABASE IF NOT EXISTS %s", empty))
	t.Cleanup(func() { sql(fmt.Sprintf("DROP DATABASE IF EXISTS %s", empty)) })
	sql(fmt.Sprintf("GRANT ALL ON %s.* TO '%s'@'127.0.0.1'", empty, c.Vars["SLURMBRIDGE_DB_USER"]))

	for _, args := range [][]string{{"--quota-db", empty, "export"}, {"--quota-db", empty, "list", "--via", "database"}, {"--quota-db", empty, "history"}} {
		out, err := quotactlErr(c, args...)
		if err == nil || !strings.Contains(out, store.ErrSchemaBehind.Error()) || !strings.Contains(out, "start quotad") {
			t.Errorf("quotactl %s on an unmigrated database: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if tables := sql(fmt.Sprintf("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = '%s'", empty)); tables != "0" {
		t.Errorf("read commands created %s tables in %s", tables, empty)
	}
	// A write command migrates.
	quotactl(t, c, "--quota-db", empty, "import", filepath.Join(repoRoot(t), "slurm-conf/testbed/quotas.yaml"))
	if out := quotactl(t, c, "--quota-db", empty, "export"); !strings.Contains(out, "proj-a") {
		t.Errorf("export after import:\n%s", out)
	}
}
