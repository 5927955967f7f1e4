package daemon

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/agent"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// BenchmarkAgentReportsPerInterval: one op is one interval in which every agent (the real
// HTTPPoster, in process) reports its node's job's 8 GPUs to the real handler, origin checks
// on. Each node runs one followed job. The first interval (sessions set up) runs before the
// timer; the metrics are of the intervals after it:
//
//	decodes/interval   MUNGE credentials elasticd decoded per interval
//	setup-decodes      decoded in the first interval
//	elasticd-ms/interval  time spent in elasticd's handler per interval
//
// With SLURMBRIDGE_MUNGE_SOCKET set (a testbed's env) credentials are made and decoded by the
// real munge and unmunge, so elasticd-ms includes the forks; else by a fake that counts.
//
//	go test -run '^$' -bench BenchmarkAgentReportsPerInterval -benchtime 5x ./elasticd/daemon/
func BenchmarkAgentReportsPerInterval(b *testing.B) {
	for _, agents := range []int{150, 1523} {
		for _, sessions := range []bool{false, true} {
			name := "munge-per-report"
			if sessions {
				name = "sessions"
			}
			b.Run(fmt.Sprintf("agents=%d/%s", agents, name), func(b *testing.B) { benchAgents(b, agents, sessions) })
		}
	}
}

func benchAgents(b *testing.B, agents int, sessions bool) {
	d := New(Config{Dir: registry.Dir(b.TempDir())}, nil, zerolog.Nop(), NewMetrics(prometheus.NewRegistry()))
	var nodes []slurm.Node
	var jobs []slurm.Job
	followed := map[uint32]bool{}
	reads := map[string][]api.JobGPUs{}
	for i := range agents {
		name := fmt.Sprintf("gpu-%04d", i)
		nodes = append(nodes, slurm.Node{Name: name, Address: fmt.Sprintf("10.%d.%d.%d", 1+i/62500, i/250%250, 1+i%250)})
		id := uint32(1000 + i)
		jobs = append(jobs, slurm.Job{ID: id, State: "RUNNING", NodeCount: 1, Nodes: name})
		followed[id] = true
		reads[name] = []api.JobGPUs{{JobID: id, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}}}
	}
	d.notePlacement(jobs, nodes)
	d.mu.Lock()
	d.followed, d.gpusToRead = followed, reads
	d.mu.Unlock()

	var decodes atomic.Int64
	m := &fakeMunge{used: map[string]bool{}}
	decode := m.decode
	encodeFor := func(host string) agent.Encode {
		return func(_ context.Context, payload string) (string, error) { return "cred:0:" + host + ":" + payload, nil }
	}
	if socket := os.Getenv("SLURMBRIDGE_MUNGE_SOCKET"); socket != "" {
		client := slurm.NewClient(slurm.ExecRunner{Timeout: 10 * time.Second})
		decode = func(ctx context.Context, cred string) (slurm.MungeIdentity, error) {
			return client.MungeDecode(ctx, socket, cred)
		}
		// The testbed's munged encodes on its own host: every node here is that host.
		cred, err := client.MungeEncode(context.Background(), socket, "probe")
		if err != nil {
			b.Fatal(err)
		}
		id, err := client.MungeDecode(context.Background(), socket, cred)
		if err != nil {
			b.Fatal(err)
		}
		for i := range nodes {
			nodes[i].Address = id.EncodeHost
		}
		d.notePlacement(jobs, nodes)
		encodeFor = func(string) agent.Encode {
			return func(ctx context.Context, payload string) (string, error) {
				return client.MungeEncode(ctx, socket, payload)
			}
		}
	}
	authn := auth.Munge{API: PersonAPI, Bounds: auth.NewBounds(4, 4, 2*time.Second, 5*time.Second),
		Decode: func(ctx context.Context, cred string) (slurm.MungeIdentity, error) {
			decodes.Add(1)
			return decode(ctx, cred)
		}}
	var handler http.Handler = d.Handler(Access{Agents: &AgentAuth{Identity: authn.Identity, CheckOrigin: true}})
	if !sessions {
		handler = withoutSessions(handler)
	}
	var inHandler atomic.Int64
	timed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		handler.ServeHTTP(w, r)
		inHandler.Add(int64(time.Since(start)))
	})
	client := &http.Client{Transport: handlerTransport{timed}}
	var posters []*agent.HTTPPoster
	for _, n := range nodes {
		posters = append(posters, &agent.HTTPPoster{Client: client, BaseURL: "http://elasticd", Encode: encodeFor(n.Address), Log: zerolog.Nop()})
	}
	interval := func() {
		for i, p := range posters {
			id := uint32(1000 + i)
			var samples []api.GPUSample
			for g := range 8 {
				samples = append(samples, sampleAt(g, time.Now()))
			}
			answer, err := p.Post(context.Background(), api.SignalReport{Node: nodes[i].Name, Jobs: []api.JobSignals{{JobID: id, Samples: samples}}})
			if err != nil || len(answer.Read) != 1 || answer.Read[0].JobID != id {
				b.Fatalf("agent %d: %+v, %v", i, answer, err)
			}
		}
	}
	interval()
	setup := decodes.Load()
	decodes.Store(0)
	inHandler.Store(0)
	b.ResetTimer()
	for range b.N {
		interval()
	}
	b.StopTimer()
	b.ReportMetric(float64(decodes.Load())/float64(b.N), "decodes/interval")
	b.ReportMetric(float64(setup), "setup-decodes")
	b.ReportMetric(float64(inHandler.Load())/float64(b.N)/1e6, "elasticd-ms/interval")
	if n := d.signalCount(); n != 8*agents {
		b.Fatalf("%d samples held, want %d", n, 8*agents)
	}
}
