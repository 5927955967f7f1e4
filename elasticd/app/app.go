// Package app is elasticd's command line: `elasticd run` (the daemon), `elasticd agent` (the
// node agent) and `elasticd status` (per elastic job: size, throughput history, last decision
// and why).
package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-co-op/gocron/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/bridge/pools"
	"github.com/slurmbridge/slurmbridge/bridge/quotaapi"
	"github.com/slurmbridge/slurmbridge/bridge/serve"
	"github.com/slurmbridge/slurmbridge/bridge/slurm"
	"github.com/slurmbridge/slurmbridge/elasticd/agent"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
	"github.com/slurmbridge/slurmbridge/elasticd/daemon"
	"github.com/slurmbridge/slurmbridge/elasticd/policy"
	"github.com/slurmbridge/slurmbridge/elasticd/probe"
	"github.com/slurmbridge/slurmbridge/elasticd/registry"
)

// New builds the CLI.
func New() *cli.App {
	return &cli.App{
		Name:  "elasticd",
		Usage: "grow and shrink elastic training jobs on Slurm from their measured throughput",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"ELASTICD_LOG_LEVEL"}},
		},
		Commands: []*cli.Command{runCommand(), agentCommand(), statusCommand(), pinCommand(), unpinCommand()},
	}
}

func logger(c *cli.Context) (zerolog.Logger, error) {
	level, err := zerolog.ParseLevel(c.String("log-level"))
	if err != nil {
		return zerolog.Logger{}, err
	}
	return zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger(), nil
}

func elasticdURLFlag() cli.Flag {
	return &cli.StringFlag{Name: "elasticd", Value: "http://127.0.0.1:9464", EnvVars: []string{"SLURMBRIDGE_ELASTICD_URL"}}
}

// mungeAuth says who asks for a status or a pin: the user its MUNGE credential names (quotad's
// API does the same), with elasticd's own payload; Slurm's operators and administrators
// (AdminLevel, read with sacctmgr: elasticd has no database) see every job, as root does.
func mungeAuth(client slurm.Client, socket string) auth.Munge {
	return auth.NewMunge(client, socket, client.UserIsOperator, daemon.PersonAPI)
}

// agentUIDs are the uids, besides root, whose credentials may carry node agents' reports:
// --agent-user's (names or uids), or SlurmUser's as slurmctld's config names it.
func agentUIDs(ctx context.Context, client slurm.Client, names []string) ([]uint32, error) {
	if len(names) == 0 {
		conf, err := client.ShowConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading SlurmUser (or give --agent-user): %w", err)
		}
		uid, err := daemon.SlurmUserID(conf.Get("SlurmUser"))
		if err != nil {
			return nil, err
		}
		return []uint32{uid}, nil
	}
	var uids []uint32
	for _, name := range names {
		if n, err := strconv.ParseUint(name, 10, 32); err == nil {
			uids = append(uids, uint32(n))
			continue
		}
		u, err := user.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("--agent-user %s: %w", name, err)
		}
		n, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--agent-user %s: uid %q: %w", name, u.Uid, err)
		}
		uids = append(uids, uint32(n))
	}
	return uids, nil
}

var stateDirFlag = &cli.StringFlag{Name: "state-dir", Value: "/var/spool/slurmbridge/elastic", EnvVars: []string{"ELASTICD_STATE_DIR"},
	Usage: "the SPANK plugin's dir= (declarations, reports, hosts files)"}

func runCommand() *cli.Command {
	d := policy.DefaultSettings()
	return &cli.Command{
		Name:  "run",
		Usage: "run the daemon",
		Flags: []cli.Flag{
			stateDirFlag,
			&cli.StringFlag{Name: "pools", EnvVars: []string{"ELASTICD_POOLS"}, Usage: "pools config (bridge/pools YAML); unset: workers go to the main job's partition"},
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:9464", Usage: "address of /metrics, /v1/status and /v1/signals"},
			&cli.DurationFlag{Name: "interval", Value: 10 * time.Second},
			&cli.DurationFlag{Name: "grace", Value: 30 * time.Second, Usage: "between a worker's TERM and its cancellation"},
			&cli.DurationFlag{Name: "pending-timeout", Value: 5 * time.Minute},
			&cli.Float64Flag{Name: "threshold", Value: d.Threshold, Usage: "scaling efficiency a grow step must beat"},
			&cli.IntFlag{Name: "min-samples", Value: d.MinSamples},
			&cli.DurationFlag{Name: "settle", Value: d.SettleTime},
			&cli.DurationFlag{Name: "stale-after", Value: d.StaleAfter},
			&cli.DurationFlag{Name: "cooldown", Value: d.Cooldown},
			&cli.StringFlag{Name: "objective", Value: "throughput",
				Usage: "throughput: s on samples/s per worker; throughput-per-dollar: s on samples/s per pool price (every pool needs a price)"},
			auth.MungeSocketFlag(),
			&cli.StringSliceFlag{Name: "agent-user", EnvVars: []string{"ELASTICD_AGENT_USER"},
				Usage: "user (name or uid) the node agents run as, whose MUNGE credentials may carry GPU signal reports besides root's (repeat for several); unset: SlurmUser from scontrol show config"},
			&cli.BoolFlag{Name: "agent-origin-check", Value: true,
				Usage: "a report's credential must be encoded on the host of the nodes it names (unmunge's ENCODE_HOST against NodeAddr/NodeHostname); turn off only where munged's address is not the node's"},
			&cli.Float64Flag{Name: "value-per-million-samples",
				Usage: "default worth of a million samples in the pools' price unit: a step must bring samples worth more than its GPUs cost (0: no such test); a job's --elastic-value overrides it"},
			&cli.StringFlag{Name: "quotad", Value: quotaapi.DefaultAddr, EnvVars: []string{"ELASTICD_QUOTAD", "SLURMBRIDGE_QUOTAD_URL"},
				Usage: "quotad's read-only API (its --listen address, or http://HOST:PORT): before a worker borrows, elasticd leaves idle the GPUs other projects' lending limits keep there, and no worker borrows while it cannot read a fresh plan"},
		},
		Action: func(c *cli.Context) error {
			log, err := logger(c)
			if err != nil {
				return err
			}
			cfg := daemon.Config{Dir: registry.Dir(c.String("state-dir")), Grace: c.Duration("grace"), PendingTimeout: c.Duration("pending-timeout")}
			cfg.Settings = policy.Settings{Threshold: c.Float64("threshold"), MinSamples: c.Int("min-samples"),
				SettleTime: c.Duration("settle"), StaleAfter: c.Duration("stale-after"), Cooldown: c.Duration("cooldown"),
				ValuePerMillionSamples: c.Float64("value-per-million-samples")}
			if cfg.Settings.Objective, err = policy.ParseObjective(c.String("objective")); err != nil {
				return err
			}
			if err := registry.CheckValuePerMillionSamples(cfg.Settings.ValuePerMillionSamples); err != nil {
				return fmt.Errorf("--value-per-million-samples: %w", err)
			}
			if path := c.String("pools"); path != "" {
				if cfg.Pools, err = pools.Load(path); err != nil {
					return err
				}
			}
			if err := pricesFor(cfg); err != nil {
				return err
			}
			quotad, err := quotaapi.BaseURL(c.String("quotad"))
			if err != nil {
				return fmt.Errorf("--quotad: %w", err)
			}
			// Bounded below the cycle: a quotad that hangs costs a cycle its borrowed workers,
			// not the cycle.
			cfg.Quotad = &quotaapi.Client{BaseURL: quotad, HTTP: &http.Client{Timeout: 5 * time.Second}}
			log.Info().Str("quotad", quotad).Msg("lending limits read from quotad's plan")
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			runner := slurm.ExecRunner{}
			client := slurm.NewClient(runner)
			d := daemon.New(cfg, daemon.CommandSlurm{Client: client, Env: baseEnv()}, log, daemon.NewMetrics(reg))
			uids, err := agentUIDs(c.Context, client, c.StringSlice("agent-user"))
			if err != nil {
				return err
			}
			authn := mungeAuth(client, c.String("munge-socket"))
			log.Info().Uints32("agent_uids", uids).Bool("origin_check", c.Bool("agent-origin-check")).Msg("GPU signal reports taken from root and these uids")

			// /metrics stays open (Prometheus scrapes it): job ids, worker counts and samples/s,
			// no user, host or rendezvous endpoint.
			apiHandler := d.Handler(daemon.Access{Callers: authn,
				Agents: &daemon.AgentAuth{Identity: authn.Identity, UIDs: uids, CheckOrigin: c.Bool("agent-origin-check")}})
			return serveAndLoop(c.Context, log, c.String("listen"), reg, apiHandler, c.Duration("interval"), d.Cycle)
		},
	}
}

// pricesFor refuses to start where the chosen objective or a site value needs pool prices that
// are not there: every job would hold with the same reason otherwise.
func pricesFor(cfg daemon.Config) error {
	if cfg.Settings.Objective != policy.MaxThroughputPerDollar && cfg.Settings.ValuePerMillionSamples == 0 {
		return nil
	}
	if cfg.Pools == nil {
		return errors.New("--objective throughput-per-dollar and --value-per-million-samples need --pools with price_per_gpu_hour")
	}
	for _, p := range cfg.Pools.Pools {
		if p.IsGPU() && p.PricePerGPUHour <= 0 {
			return fmt.Errorf("pool %s has no price_per_gpu_hour: --objective throughput-per-dollar and --value-per-million-samples need one for every GPU pool", p.Name)
		}
	}
	return nil
}

// baseEnv is what sbatch gets when run as a job's owner: nothing of elasticd's own
// environment but the path and where Slurm's config is.
func baseEnv() []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	if conf := os.Getenv("SLURM_CONF"); conf != "" {
		env = append(env, "SLURM_CONF="+conf)
	}
	return env
}

// serveAndLoop serves metrics and api (on listen; "": nothing) and runs cycle every interval
// (never two at once) until SIGTERM or SIGINT.
func serveAndLoop(parent context.Context, log zerolog.Logger, listen string, metrics prometheus.Gatherer, api http.Handler, interval time.Duration,
	cycle func(context.Context) error) error {
	ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if listen != "" {
		addr, err := serve.MetricsAndAPI(ctx, listen, metrics, "/v1/", api, func(err error) { log.Error().Err(err).Msg("HTTP server stopped") })
		if err != nil {
			return err
		}
		log.Info().Str("listen", addr.String()).Msg("serving /metrics and /v1/")
	}
	s, err := gocron.NewScheduler()
	if err != nil {
		return err
	}
	_, err = s.NewJob(gocron.DurationJob(interval), gocron.NewTask(func() {
		cctx, cancel := context.WithTimeout(ctx, max(interval*3, time.Minute))
		defer cancel()
		if err := cycle(cctx); err != nil {
			log.Warn().Err(err).Msg("cycle skipped; nothing done")
		}
	}), gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithStartAt(gocron.WithStartImmediately()))
	if err != nil {
		return err
	}
	s.Start()
	<-ctx.Done()
	log.Info().Msg("stopping")
	return s.Shutdown() // the HTTP server stops with ctx
}

func agentCommand() *cli.Command {
	host, _ := os.Hostname()
	return &cli.Command{
		Name:  "agent",
		Usage: "run the node agent: NVML samples of the jobs' GPUs, posted to elasticd",
		Flags: []cli.Flag{
			&cli.StringSliceFlag{Name: "node", Value: cli.NewStringSlice(host), Usage: "Slurm node names this host runs (repeat for multiple slurmd)"},
			&cli.StringFlag{Name: "elasticd", Value: "http://127.0.0.1:9464"},
			&cli.DurationFlag{Name: "interval", Value: 10 * time.Second},
			auth.MungeSocketFlag(),
		},
		Action: func(c *cli.Context) error {
			log, err := logger(c)
			if err != nil {
				return err
			}
			reader, err := probe.Open(nvml.New())
			if errors.Is(err, probe.ErrUnavailable) {
				// Said once; elasticd decides from application throughput alone.
				log.Warn().Err(err).Msg("no GPU signals from this node")
			} else if err != nil {
				return err
			}
			defer reader.Close()
			munge := slurm.NewClient(slurm.ExecRunner{Timeout: 10 * time.Second})
			encode := func(ctx context.Context, payload string) (string, error) {
				return munge.MungeEncode(ctx, c.String("munge-socket"), payload)
			}
			poster := &agent.HTTPPoster{Client: &http.Client{Timeout: 15 * time.Second}, BaseURL: c.String("elasticd"), Encode: encode, Log: log}
			a := &agent.Agent{Nodes: c.StringSlice("node"), Reader: reader, Post: poster.Post, Log: log}
			return serveAndLoop(c.Context, log, "", nil, nil, c.Duration("interval"), a.Cycle)
		},
	}
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per elastic job: size, throughput history, last decision and why",
		Flags: []cli.Flag{
			elasticdURLFlag(),
			&cli.BoolFlag{Name: "json"},
			auth.MungeSocketFlag(),
		},
		Action: func(c *cli.Context) error {
			ctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
			defer cancel()
			req, err := credentialRequest(ctx, c, http.MethodGet, api.StatusPath)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("elasticd answered %s: %s", resp.Status, body)
			}
			if c.Bool("json") {
				_, err = c.App.Writer.Write(body)
				return err
			}
			var jobs []api.JobStatus
			if err := json.Unmarshal(body, &jobs); err != nil {
				return err
			}
			PrintStatus(c.App.Writer, jobs)
			return nil
		},
	}
}

func pinCommand() *cli.Command {
	return &cli.Command{
		Name:      "pin",
		Usage:     "hold an elastic job at N workers, whatever its throughput says (its owner or root)",
		ArgsUsage: "JOBID N",
		Flags:     []cli.Flag{elasticdURLFlag(), auth.MungeSocketFlag()},
		Action: func(c *cli.Context) error {
			id, err := jobIDArg(c, 2, "pin JOBID N")
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(c.Args().Get(1))
			if err != nil || n < 1 {
				return fmt.Errorf("size %q is not a number of workers (1 or more)", c.Args().Get(1))
			}
			if err := sendPin(c, http.MethodPut, api.PinPath(id, n)); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "job %d pinned at %d workers\n", id, n)
			return nil
		},
	}
}

// jobIDArg is the first of the command's n arguments, a job id; usage is the command's.
func jobIDArg(c *cli.Context, n int, usage string) (uint32, error) {
	if c.NArg() != n {
		return 0, fmt.Errorf("usage: elasticd %s", usage)
	}
	id, err := strconv.ParseUint(c.Args().Get(0), 10, 32)
	if err != nil || id == 0 {
		return 0, fmt.Errorf("job id %q is not a job id", c.Args().Get(0))
	}
	return uint32(id), nil
}

func unpinCommand() *cli.Command {
	return &cli.Command{
		Name:      "unpin",
		Usage:     "let elasticd size an elastic job from its throughput again",
		ArgsUsage: "JOBID",
		Flags:     []cli.Flag{elasticdURLFlag(), auth.MungeSocketFlag()},
		Action: func(c *cli.Context) error {
			id, err := jobIDArg(c, 1, "unpin JOBID")
			if err != nil {
				return err
			}
			if err := sendPin(c, http.MethodDelete, api.PinPath(id, 0)); err != nil {
				return err
			}
			fmt.Fprintf(c.App.Writer, "job %d unpinned\n", id)
			return nil
		},
	}
}

// credentialRequest is a request to elasticd with a MUNGE credential for exactly it: elasticd
// learns from the credential who asks.
func credentialRequest(ctx context.Context, c *cli.Context, method, path string) (*http.Request, error) {
	cred, err := slurm.NewClient(slurm.ExecRunner{Timeout: 10 * time.Second}).MungeEncode(ctx, c.String("munge-socket"), api.RequestPayload(method, path))
	if err != nil {
		return nil, fmt.Errorf("making a MUNGE credential: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.String("elasticd"), "/")+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", auth.Scheme+" "+cred)
	return req, nil
}

// sendPin makes a pin or unpin request.
func sendPin(c *cli.Context, method, path string) error {
	ctx, cancel := context.WithTimeout(c.Context, 15*time.Second)
	defer cancel()
	req, err := credentialRequest(ctx, c, method, path)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reaching elasticd: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("elasticd answered %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// PrintStatus writes the status for people.
func PrintStatus(w io.Writer, jobs []api.JobStatus) {
	if len(jobs) == 0 {
		fmt.Fprintln(w, "no elastic jobs")
		return
	}
	for _, j := range jobs {
		fmt.Fprintf(w, "job %d  user %s  account %s  workers %d..%d x %d GPU  pools %s\n",
			j.JobID, j.User, j.Account, j.MinWorkers, j.MaxWorkers, j.GPUsPerWorker, strings.Join(j.Pools, ","))
		if j.MaxBatch > 0 {
			fmt.Fprintf(w, "  batch     max global %d, %d per GPU (--elastic-max-batch): at most %d workers\n", j.MaxBatch, j.BatchPerDevice, j.MaxWorkers)
		}
		if j.Pin > 0 {
			fmt.Fprintf(w, "  pinned    at %d workers by %s (elasticd unpin %d)\n", j.Pin, j.PinnedBy, j.JobID)
		}
		if j.ValuePerMillionSamples > 0 {
			fmt.Fprintf(w, "  value     %g per million samples (--elastic-value)\n", j.ValuePerMillionSamples)
		}
		fmt.Fprintf(w, "  size      %s\n", sizeString(j.Size))
		var hist []string
		for _, p := range j.Throughput {
			hist = append(hist, fmt.Sprintf("%s:%.0f", sizeString(p.Size), p.SamplesPerSec))
		}
		fmt.Fprintf(w, "  samples/s %s\n", strings.Join(hist, " "))
		for _, wp := range j.Workers {
			compute := ""
			if wp.ComputeSecondsPerStep > 0 {
				compute = fmt.Sprintf(", %.0f ms compute/step", 1000*wp.ComputeSecondsPerStep)
			}
			fmt.Fprintf(w, "  worker    %s %s: %.0f samples/s%s\n", wp.Worker, wp.Type, wp.SamplesPerSec, compute)
		}
		fmt.Fprintf(w, "  decision  %s at %s: %s\n", j.Decision, j.DecidedAt.Format(time.TimeOnly), j.Reason)
		for _, r := range j.Replacements {
			fmt.Fprintf(w, "  replacing %s\n", r)
		}
		for _, l := range j.Leaving {
			fmt.Fprintf(w, "  leaving   %s\n", l)
		}
		for _, f := range j.Flags {
			fmt.Fprintf(w, "  flag      %s\n", f)
		}
	}
}

func sizeString(size map[string]int) string {
	var parts []string
	for t, n := range size {
		parts = append(parts, fmt.Sprintf("%s=%d", t, n))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}
