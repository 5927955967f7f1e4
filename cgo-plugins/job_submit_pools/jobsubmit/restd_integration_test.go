//go:build integration

package jobsubmit_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/testbed"
)

// restd is a slurmrestd run by a testbed user on a Unix socket (rest_auth/local: whoever
// connects acts as that user, as a site's per-user slurmrestd or a portal's), and the newest
// OpenAPI version this release serves.
type restd struct {
	client  *http.Client
	version string // e.g. v0.0.38 on 22.05, v0.0.42 on 24.11
}

// restdVersions are the slurmctld OpenAPI versions the supported releases serve, newest first:
// 22.05 serves v0.0.36 to v0.0.38, 24.11 v0.0.40 to v0.0.42, 26.05 v0.0.42 on.
var restdVersions = []string{"v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40", "v0.0.39", "v0.0.38"}

func startRestd(t *testing.T, c *testbed.Cluster, username string) *restd {
	t.Helper()
	dir := testbed.SharedDir(t, "restd-it-", 0o777)
	sock := filepath.Join(dir, "restd.sock")
	cmd, err := c.UserCommand(username, "slurmrestd", "-a", "rest_auth/local", "unix:"+sock)
	if err != nil {
		t.Fatalf("slurmrestd as %s (testbed.sh packages installs it): %v", username, err)
	}
	var out bytes.Buffer
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	r := &restd{client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}}
	deadline := time.Now().Add(testbed.Patience(20 * time.Second))
	for r.version == "" {
		for _, v := range restdVersions {
			if resp, err := r.client.Get("http://restd/slurm/" + v + "/ping"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					r.version = v
					break
				}
			}
		}
		if r.version == "" {
			if time.Now().After(deadline) {
				t.Fatalf("slurmrestd answered no ping of %v; it said:\n%s", restdVersions, out.String())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("slurmrestd as %s serves %s", username, r.version)
	return r
}

// restdJob is a batch job as users write it for slurmrestd; submit spells it in the body of
// the OpenAPI version served.
type restdJob struct {
	name, script, dir, output, gres, qos string
}

// submit posts the job and returns the job id (0 when refused) and the response's body.
func (r *restd) submit(t *testing.T, j restdJob) (uint32, string) {
	t.Helper()
	desc := map[string]any{"name": j.name, "current_working_directory": j.dir, "standard_output": j.output, "requeue": true}
	if j.qos != "" {
		desc["qos"] = j.qos
	}
	var body map[string]any
	if r.version <= "v0.0.38" {
		// 22.05: sbatch's option names, the script beside the job, the environment an object.
		desc["gres"] = j.gres
		desc["environment"] = map[string]string{"PATH": "/usr/bin:/bin"}
		body = map[string]any{"script": j.script, "job": desc}
	} else {
		desc["tres_per_node"] = "gres/" + j.gres
		desc["environment"] = []string{"PATH=/usr/bin:/bin"}
		desc["script"] = j.script
		body = map[string]any{"job": desc}
	}
	data, _ := json.Marshal(body)
	resp, err := r.client.Post("http://restd/slurm/"+r.version+"/job/submit", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var got struct {
		JobID json.Number `json:"job_id"`
	}
	_ = json.Unmarshal(raw, &got)
	id, _ := strconv.ParseUint(got.JobID.String(), 10, 32)
	return uint32(id), string(raw)
}

// Submissions through slurmrestd reach the same plugin as sbatch's, and keep the same promises:
// bob's GPU job with no partition is routed to a GPU pool and counts in his guarantee, and it
// appends to its output, so a requeue (his own here, a reclaim alike) keeps its first run's
// log; straight into a borrow QOS it is refused with the plugin's code, and a QOS name
// carrying a forged log line is logged on one escaped line; slurmctld serves on.
func TestSlurmrestdSubmissionsKeepThePromises(t *testing.T) {
	c, ctx := setup(t)
	r := startRestd(t, c, "bob")
	work := testbed.SharedDir(t, "restd-work-", 0o777)
	script := "#!/bin/bash\necho \"run ${SLURM_RESTART_COUNT:-0} of $SLURM_JOB_ID\"\nsleep 300\n"

	out := filepath.Join(work, "train.out")
	id, body := r.submit(t, restdJob{name: "restd-train", script: script, dir: work, output: out, gres: "gpu:1"})
	if id == 0 {
		t.Fatalf("slurmrestd refused bob's GPU job: %s", body)
	}
	job := strconv.FormatUint(uint64(id), 10)
	t.Cleanup(func() { c.Cancel(job) })
	if state, err := c.WaitState(ctx, job, "RUNNING"); err != nil {
		t.Fatalf("bob's slurmrestd job %s: %s %v", job, state, err)
	}
	info := showJob(t, c, ctx, job)
	if !strings.HasPrefix(info["QOS"], "guar-") || !slices.Contains([]string{"a100", "a100-spot", "v100"}, info["Partition"]) {
		t.Errorf("bob's slurmrestd GPU job runs in partition %q, QOS %q; want a GPU pool and his guaranteed QOS", info["Partition"], info["QOS"])
	}
	waitForFile(t, out, "run 0 of "+job)
	if _, stderr, err := c.RunAsWithStderr(ctx, "bob", "scontrol", "requeue", job); err != nil {
		t.Fatalf("bob's scontrol requeue %s: %v %s", job, err, stderr)
	}
	waitForFile(t, out, "run 1 of "+job)
	if data, _ := os.ReadFile(out); !strings.HasPrefix(string(data), "run 0 of "+job+"\n") {
		t.Errorf("the rerun of slurmrestd job %s truncated its output: %q", job, data)
	}

	// Straight into a borrow QOS: refused, whatever route.
	logStart := c.CtldLogSize(t)
	if id, body := r.submit(t, restdJob{name: "restd-borrow", script: script, dir: work, output: "/dev/null", gres: "gpu:1", qos: "borrow-proj-b"}); id != 0 {
		c.Cancel(strconv.FormatUint(uint64(id), 10))
		t.Errorf("slurmrestd took bob's job straight into borrow-proj-b: %s", body)
	} else {
		t.Logf("straight into borrow-proj-b, slurmrestd answered: %s", compact(body))
	}
	if log := c.CtldLogSince(t, logStart); !loggedRefusal(log, pools.RefusedBorrowQuotadOnly) {
		t.Errorf("slurmctld.log lacks the refusal code=%s:\n%s", pools.RefusedBorrowQuotadOnly, log)
	}

	// A forged log line in the QOS name stays on the plugin's one line.
	logStart = c.CtldLogSize(t)
	forged := "job_submit/pools: submit by uid 0: partition a100 forged"
	if id, _ := r.submit(t, restdJob{name: "restd-forge", script: script, dir: work, output: "/dev/null", gres: "gpu:1", qos: "borrow-proj-b\n" + forged + "\r"}); id != 0 {
		c.Cancel(strconv.FormatUint(uint64(id), 10))
	}
	log := c.CtldLogSince(t, logStart)
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), forged) {
			t.Errorf("a QOS name forged a line of slurmctld.log: %q", line)
		}
	}
	if !strings.Contains(log, `\n`+forged) {
		t.Errorf("slurmctld.log lacks the plugin's escaped line for the forged QOS:\n%s", log)
	}
	if _, err := c.Slurm().ShowConfig(ctx); err != nil {
		t.Fatalf("slurmctld stopped answering after the slurmrestd submissions: %v", err)
	}
}

func compact(body string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(body)) != nil {
		return body
	}
	return b.String()
}

// waitForFile waits until the file holds a line.
func waitForFile(t *testing.T, path, line string) {
	t.Helper()
	deadline := time.Now().Add(testbed.Patience(60 * time.Second))
	for {
		data, _ := os.ReadFile(path)
		for _, l := range strings.Split(string(data), "\n") {
			if l == line {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never held %q; it holds %q", path, line, data)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
