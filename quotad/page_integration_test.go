//go:build integration

// The cluster page in a real browser: headless Chromium loads quotad's page while bob borrows
// and has work pending, and the pools and projects it renders are the numbers squeue and sinfo
// give at that moment.
package quotad_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/testbed"
	"github.com/slurmbridge/slurmbridge/quotad/view"
)

// chromium runs Debian's headless Chromium on url with extra flags and returns its stdout. As
// root (the container testbed) it needs --no-sandbox; /dev/shm of a container is small.
func chromium(t *testing.T, url string, flags ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("no chromium: testbed/testbed.sh packages installs it (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + t.TempDir(), "--window-size=1280,1500", "--hide-scrollbars"}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(flags, " "), err, stderr.String())
	}
	return string(out)
}

// poolFigures are the numbers the page shows for a pool, and the ones squeue and sinfo give.
type poolFigures struct {
	NodesUp, NodesDown, GPUsTotal, GPUsRunning, GPUsPending, GPUsFree int
}

// projectFigures are one project's a100 numbers.
type projectFigures struct{ InUse, Borrowed, Pending int }

var (
	articleRE = regexp.MustCompile(`(?s)<article class="pool" id="pool-[^"]*" data-pool="([^"]+)".*?</article>`)
	fieldRE   = regexp.MustCompile(`data-field="([a-z_]+)">([^<]*)<`)
	rowRE     = regexp.MustCompile(`(?s)<tr data-project="([^"]+)" data-gpu-type="([^"]+)">(.*?)</tr>`)
)

func fields(t *testing.T, s string) map[string]int {
	out := map[string]int{}
	for _, m := range fieldRE.FindAllStringSubmatch(s, -1) {
		if n, err := strconv.Atoi(m[2]); err == nil {
			out[m[1]] = n
		}
	}
	return out
}

// domFigures reads the pools and projects from the DOM Chromium rendered.
func domFigures(t *testing.T, dom string) (map[string]poolFigures, map[string]projectFigures) {
	t.Helper()
	pools := map[string]poolFigures{}
	for _, m := range articleRE.FindAllStringSubmatch(dom, -1) {
		f := fields(t, m[0])
		pools[m[1]] = poolFigures{NodesUp: f["nodes_up"], NodesDown: f["nodes_down"], GPUsTotal: f["gpus_total"],
			GPUsRunning: f["gpus_running"], GPUsPending: f["gpus_pending"], GPUsFree: f["gpus_free"]}
	}
	projects := map[string]projectFigures{}
	for _, m := range rowRE.FindAllStringSubmatch(dom, -1) {
		if m[2] != "a100" {
			continue
		}
		f := fields(t, m[3])
		projects[m[1]] = projectFigures{InUse: f["in_use"], Borrowed: f["borrowed"], Pending: f["pending"]}
	}
	return pools, projects
}

var trailingCount = regexp.MustCompile(`(\d+)(\(|$)`)

// gpuCount is the GPU count at the end of squeue's %b (22.05: gres:gpu:a100:1, later
// gres/gpu:a100=1) or of sinfo's %G (gpu:a100:4(S:0)).
func gpuCount(s string) int {
	if !strings.Contains(s, "gpu") {
		return 0
	}
	m := trailingCount.FindStringSubmatch(s)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// slurmFigures counts the pools' and projects' numbers with squeue and sinfo themselves.
func slurmFigures(t *testing.T, c *testbed.Cluster) (map[string]poolFigures, map[string]projectFigures) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	nodes, err := c.Run(ctx, "sinfo", "-h", "-N", "-o", "%N|%P|%G|%t")
	if err != nil {
		t.Fatal(err)
	}
	pools := map[string]poolFigures{}
	for _, line := range strings.Split(strings.TrimSpace(string(nodes)), "\n") {
		f := strings.Split(line, "|")
		part, gpus, state := strings.TrimSuffix(f[1], "*"), gpuCount(f[2]), f[3]
		p := pools[part]
		p.GPUsTotal += gpus
		if regexp.MustCompile(`^(idle|mix|alloc)$`).MatchString(state) {
			p.NodesUp++
		} else {
			p.NodesDown++
		}
		pools[part] = p
	}
	jobs, err := c.Run(ctx, "squeue", "-h", "-t", "PD,R", "-o", "%i|%P|%T|%a|%q|%b")
	if err != nil {
		t.Fatal(err)
	}
	projects := map[string]projectFigures{}
	for _, line := range strings.Split(strings.TrimSpace(string(jobs)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "|")
		part, state, account, qos, gpus := f[1], f[2], f[3], f[4], gpuCount(f[5])
		pr := projects[account]
		switch state {
		case "RUNNING":
			p := pools[part]
			p.GPUsRunning += gpus
			pools[part] = p
			if strings.HasPrefix(qos, "borrow-") {
				pr.Borrowed += gpus
			} else {
				pr.InUse += gpus
			}
		case "PENDING":
			for _, one := range strings.Split(part, ",") {
				p := pools[one]
				p.GPUsPending += gpus
				pools[one] = p
			}
			if strings.HasPrefix(qos, "guar-") {
				pr.Pending += gpus
			}
		}
		projects[account] = pr
	}
	for name, p := range pools {
		p.GPUsFree = p.GPUsTotal - p.GPUsRunning // every testbed node is up
		pools[name] = p
	}
	return pools, projects
}

func TestClusterPageInChromiumShowsWhatSlurmSays(t *testing.T) {
	c := testbed.Require(t)
	// The quotad under test is this build's, cycling every 2 s, with the testbed's pools.yaml
	// beside its slurm.conf.
	pauseWithTestbedQuotas(t, c)
	log, _ := activeQuotad(t, c)
	waitSynced(t, c, log) // on a fresh testbed the paused quotad may not have synced yet
	api := apiAddr(t, log)

	// bob: 4 a100 in quota, 4 borrowed, 2 pending (the 8 a100 of the partition are busy).
	bob := submitN(t, c, "bob", 10)
	logTailIfFailed(t, log, 40)
	waitQueue(t, c, bob, "bob 4 in quota + 4 borrowed running, 2 pending", 60*time.Second,
		exactly(4, bob, runningIn("guar-proj-b")), exactly(4, bob, runningIn("borrow-proj-b")), exactly(2, bob, pending))
	settled := time.Now()
	// The page shows a snapshot: wait for one taken after the queue settled.
	waitFor(t, "a plan on a snapshot of the settled queue", 30*time.Second, func() bool {
		resp, err := http.Get(api + view.ClusterPath)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var cr view.ClusterResponse
		if json.NewDecoder(resp.Body).Decode(&cr) != nil || cr.Status.Plan == nil {
			return false
		}
		return cr.Status.Plan.SnapshotTakenAt.After(settled) && len(cr.Pools) > 0
	})

	before, beforeProjects := slurmFigures(t, c)
	start := time.Now()
	dom := chromium(t, api+"/cluster", "--dump-dom")
	took := time.Since(start)
	after, afterProjects := slurmFigures(t, c)
	if !maps.Equal(before, after) || !maps.Equal(beforeProjects, afterProjects) {
		t.Fatalf("the cluster changed while the page loaded:\n%v %v\n%v %v", before, beforeProjects, after, afterProjects)
	}
	t.Logf("chromium rendered the page in %s", took.Round(10*time.Millisecond))
	pools, projects := domFigures(t, dom)
	for _, name := range []string{"cpu", "a100", "a100-spot", "v100"} {
		got, ok := pools[name]
		want := after[name]
		if !ok {
			t.Errorf("pool %s is not on the page", name)
			continue
		}
		if name == "cpu" {
			// A CPU pool shows nodes only.
			want = poolFigures{NodesUp: want.NodesUp, NodesDown: want.NodesDown}
		}
		if got != want {
			t.Errorf("pool %s: page %+v, squeue and sinfo %+v", name, got, want)
		}
	}
	if a := pools["a100"]; a.GPUsRunning != 8 || a.GPUsPending != 2 || a.GPUsFree != 0 {
		t.Errorf("pool a100 %+v: want bob's 8 running and 2 pending", a)
	}
	for _, account := range []string{"proj-a", "proj-b"} {
		if got, want := projects[account], afterProjects[account]; got != want {
			t.Errorf("project %s a100: page %+v, squeue %+v", account, got, want)
		}
	}
	if b := projects["proj-b"]; b.InUse != 4 || b.Borrowed != 4 {
		t.Errorf("proj-b on the page %+v: want 4 in use and 4 borrowed", b)
	}
	if !strings.Contains(dom, `data-kind="lend"`) {
		t.Error("no lend under recent actions")
	}
	if strings.Contains(dom, "STALE") {
		t.Error("a current page is marked stale")
	}

	// The job search in the browser: the owner is told how to read the explanation.
	dom = chromium(t, fmt.Sprintf("%s/cluster?job=%s", api, bob[9]), "--dump-dom")
	if !strings.Contains(dom, "quotactl explain "+bob[9]) || strings.Contains(dom, "bob") {
		t.Errorf("job search for %s: %s", bob[9], dom[strings.Index(dom, "<main>"):min(len(dom), strings.Index(dom, "<main>")+1500)])
	}

	// The screenshot for the README.
	dir := os.Getenv("SLURMBRIDGE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	shot := filepath.Join(dir, "cluster-page.png")
	if rel := os.Getenv("SLURM_RELEASE"); rel != "" {
		shot = filepath.Join(dir, "cluster-page-"+rel+".png")
	}
	chromium(t, api+"/cluster", "--screenshot="+shot)
	if st, err := os.Stat(shot); err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot %s: %v", shot, err)
	}
	t.Logf("screenshot %s", shot)
}
