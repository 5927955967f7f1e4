package slurm

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// scriptRunner records each command line and answers with out; it also takes stdin.
type scriptRunner struct {
	mu    sync.Mutex // some clients run commands side by side
	calls []string
	stdin []byte
	out   string
	err   error
}

func (r *scriptRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, strings.Join(append([]string{name}, args...), " "))
	return []byte(r.out), r.err
}

func (r *scriptRunner) RunInput(ctx context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	r.stdin = stdin
	return r.Run(ctx, name, args...)
}

// Each method runs the command line it documents: the callers' behaviour rests on them.
func TestClientCommandLines(t *testing.T) {
	ptr := func(s string) *string { return &s }
	grace, exempt, prio := 2*time.Second, 26*time.Hour+90*time.Second, 10
	since := time.Date(2025, 3, 4, 5, 6, 7, 0, time.Local)
	tests := []struct {
		name string
		out  string
		call func(Client) error
		want []string
	}{
		{"ping", "", func(c Client) error { return c.Ping(context.Background()) }, []string{"scontrol ping"}},
		{"decayed gpu usage", "proj-a||gres/gpu=2\n", func(c Client) error { _, err := c.DecayedGPUUsage(context.Background()); return err },
			[]string{"sshare -P -n -o Account,User,GrpTRESRaw"}},
		{"reconfigure", "", func(c Client) error { return c.Reconfigure(context.Background()) }, []string{"scontrol reconfigure"}},
		{"batch script", "#!/bin/sh\n", func(c Client) error { _, err := c.BatchScript(context.Background(), 12); return err },
			[]string{"scontrol write batch_script 12 -"}},
		{"job qos", "", func(c Client) error {
			_, err := c.UpdateJobsQOS(context.Background(), []string{"41", "42_7"}, "borrow")
			return err
		}, []string{"scontrol update jobid=41,42_7 qos=borrow"}},
		{"update job", "", func(c Client) error {
			return c.UpdateJob(context.Background(), 7, JobUpdate{Partition: "v100", Gres: "gpu:v100:2"})
		}, []string{"scontrol update jobid=7 partition=v100 gres=gpu:v100:2"}},
		{"add qos", "", func(c Client) error { return c.AddQOS(context.Background(), "borrow") }, []string{"sacctmgr -i add qos borrow"}},
		{"modify qos", "", func(c Client) error {
			return c.ModifyQOS(context.Background(), []string{"guar-proj-a"}, QOSSettings{
				GrpTRES: []TRESLimit{{"gres/gpu", 4}, {"gres/gpu:v100", ClearTRES}}, Preempt: &[]string{},
				PreemptMode: ptr("requeue"), GraceTime: &grace, PreemptExemptTime: &exempt, Priority: &prio})
		}, []string{"sacctmgr -i modify qos where name=guar-proj-a set grptres=gres/gpu=4,gres/gpu:v100=-1 preempt= preemptmode=requeue gracetime=2 preemptexempttime=1-02:01:30 priority=10"}},
		{"modify qos, nothing to set", "", func(c Client) error { return c.ModifyQOS(context.Background(), []string{"borrow"}, QOSSettings{}) }, nil},
		{"modify several qos alike", "", func(c Client) error {
			return c.ModifyQOS(context.Background(), []string{"guar-proj-a", "guar-proj-b"}, QOSSettings{Preempt: &[]string{"borrow-proj-c"}})
		}, []string{"sacctmgr -i modify qos where name=guar-proj-a,guar-proj-b set preempt=borrow-proj-c"}},
		{"add several qos", "", func(c Client) error { return c.AddQOS(context.Background(), "borrow-proj-a", "elastic-proj-a") },
			[]string{"sacctmgr -i add qos borrow-proj-a,elastic-proj-a"}},
		{"modify account", "", func(c Client) error {
			return c.ModifyAccount(context.Background(), "proj-a", "testbed", AccountSettings{QOS: &[]string{"borrow", "guar-proj-a"}, DefaultQOS: ptr("guar-proj-a")})
		}, []string{"sacctmgr -i modify account where name=proj-a cluster=testbed set qos=borrow,guar-proj-a defaultqos=guar-proj-a"}},
		{"add user qos", "", func(c Client) error {
			return c.AddUserQOS(context.Background(), "bob", "proj-b", "", "testbed", []string{"borrow-proj-b", "guar-proj-b"})
		}, []string{"sacctmgr -i modify user where name=bob account=proj-b cluster=testbed set qos+=borrow-proj-b,guar-proj-b"}},
		{"add user qos, one partition", "", func(c Client) error {
			return c.AddUserQOS(context.Background(), "bob", "proj-b", "a100", "", []string{"borrow-proj-b"})
		}, []string{"sacctmgr -i modify user where name=bob account=proj-b partition=a100 set qos+=borrow-proj-b"}},
		{"add user qos, nothing to add", "", func(c Client) error { return c.AddUserQOS(context.Background(), "bob", "proj-b", "", "", nil) }, nil},
		{"admin level", "Administrator\n", func(c Client) error { _, err := c.UserAdminLevel(context.Background(), "quotad"); return err },
			[]string{"sacctmgr -n -P show user quotad format=adminlevel"}},
		{"qos", "normal||||||0\n", func(c Client) error { _, err := c.QOS(context.Background()); return err },
			[]string{"sacctmgr -n -P show qos format=name,grptres,preempt,preemptmode,gracetime,preemptexempttime,priority"}},
		{"associations", "", func(c Client) error {
			_, err := c.Associations(context.Background(), AssociationFilter{Accounts: []string{"proj-a", "proj-b"}, Cluster: "testbed"})
			return err
		}, []string{"sacctmgr -n -P show assoc where account=proj-a,proj-b cluster=testbed format=cluster,id,account,user,partition,parentname,qos,defaultqos,grptres,maxtres,grpjobs,grpsubmitjobs,maxjobs,maxsubmitjobs"}},
		{"sacct", "", func(c Client) error {
			_, err := c.SacctJobs(context.Background(), SacctFilter{JobIDs: []string{"1", "2"}, Duplicates: true}, "JobID", "State")
			return err
		}, []string{"sacct -D -X -n -P -j 1,2 -o JobID,State"}},
		{"sacct by name since", "", func(c Client) error {
			_, err := c.SacctJobs(context.Background(), SacctFilter{AllUsers: true, Duplicates: true, Since: since, Names: []string{"a", "b"}}, "JobIDRaw", "JobName")
			return err
		}, []string{"sacct -a -D -X -n -P -S 2025-03-04T05:06:07 --name a,b -o JobIDRaw,JobName"}},
		{"queue summary", "", func(c Client) error {
			_, err := c.Queue(context.Background(), QueueRead{Fields: SummaryFields, JobIDs: []string{"5"}, Names: []string{"w"}, Users: []string{"alice", "bob"}, AllStates: true})
			return err
		}, []string{"squeue --noheader --states=all --jobs=5 --name=w --user=alice,bob --Format=JobId:0\x1f,JobArrayID:0\x1f,UserName:0\x1f,Account:0\x1f,QOS:0\x1f,Partition:0\x1f,State:0\x1f,Reason:0\x1f,NodeList:0\x1f,Name:0"}},
		{"queue throttles", "", func(c Client) error {
			_, err := c.Queue(context.Background(), QueueRead{Fields: ThrottleFields, QOS: []string{"guar-proj-a"}})
			return err
		}, []string{"squeue --all --noheader --states=PENDING --qos=guar-proj-a --Format=ArrayJobId:0\x1f,ArrayTaskId:0"}},
		{"queue throttles of no QOS", "", func(c Client) error {
			_, err := c.Queue(context.Background(), QueueRead{Fields: ThrottleFields})
			return err
		}, nil},
		{"queue names of no QOS", "", func(c Client) error {
			_, err := c.Queue(context.Background(), QueueRead{Fields: NameFields})
			return err
		}, nil},
		{"queue as JSON", "{\"jobs\": []}", func(c Client) error {
			_, err := c.Queue(context.Background(), QueueRead{Fields: AllFields})
			return err
		}, []string{"squeue --json"}},
		{"cancel", "", func(c Client) error { return c.Cancel(context.Background(), 5, 6) }, []string{"scancel 5 6"}},
		{"cancel nothing", "", func(c Client) error { return c.Cancel(context.Background()) }, nil},
		{"cancel by name", "", func(c Client) error { return c.CancelNamed(context.Background(), "a", "b") }, []string{"scancel --name=a,b"}},
		{"signal", "", func(c Client) error { return c.Signal(context.Background(), 9, "TERM") }, []string{"scancel --full --signal=TERM 9"}},
		{"create partition", "", func(c Client) error {
			return c.CreatePartition(context.Background(), PartitionSpec{Name: "bench", Nodes: "cpu-[1-2]", ForceOverSubscribe: 4, Hidden: true})
		}, []string{"scontrol create PartitionName=bench Nodes=cpu-[1-2] OverSubscribe=FORCE:4 Hidden=YES State=UP MaxTime=INFINITE"}},
		{"create plain partition", "", func(c Client) error {
			return c.CreatePartition(context.Background(), PartitionSpec{Name: "bench", Nodes: "cpu-1"})
		}, []string{"scontrol create PartitionName=bench Nodes=cpu-1 State=UP MaxTime=INFINITE"}},
		{"delete partition", "", func(c Client) error { return c.DeletePartition(context.Background(), "bench") },
			[]string{"scontrol delete PartitionName=bench"}},
		{"allocate without a shell", "", func(c Client) error {
			return c.AllocateNoShell(context.Background(), SubmitOptions{JobName: "b", Partition: "bench", Tasks: 1, MemMB: 1, TimeMinutes: 60, Output: "/dev/null"})
		}, []string{"salloc --no-shell --job-name=b --partition=bench --ntasks=1 --mem=1M --time=60"}},
		{"queue output", "", func(c Client) error { _, err := c.QueueOutput(context.Background(), QueueVariant{}); return err },
			[]string{"squeue " + strings.Join(QueueArgs(QueueRead{}), " ")}},
		{"queue output per record", "", func(c Client) error {
			_, err := c.QueueOutput(context.Background(), QueueVariant{PerRecord: true, LocalTime: true})
			return err
		}, []string{"squeue --all --noheader --Format=" + textFormats[SchedulingFields].spec()}},
		{"submit", "77\n", func(c Client) error {
			_, err := c.SubmitBatch(context.Background(), SubmitOptions{Output: "/dev/null", Args: []string{"-p", "cpu", "job.sh"}}, nil)
			return err
		}, []string{"sbatch --parsable --output=/dev/null -p cpu job.sh"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &scriptRunner{out: tt.out}
			if err := tt.call(Client{Runner: r, Release: Release{24, 11}}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(r.calls, tt.want) {
				t.Errorf("ran %q, want %q", r.calls, tt.want)
			}
		})
	}
}

// elasticd's workers: every option in its place, the script on stdin.
func TestSubmitBatchOptionsAndStdin(t *testing.T) {
	r := &scriptRunner{out: "sbatch: pools: routed to a100\n123;testbed\n"}
	opts := SubmitOptions{JobName: "elastic-worker-100", Account: "proj-a", Partition: "a100", Nodes: 1, Tasks: 1,
		CPUsPerTask: 8, QOS: "borrow-proj-a", GPUsPerNode: "a100:4", MemMB: 16000, Constraint: "a100&spot", Requeue: true,
		WorkDir: "/tmp", Output: "/tmp/out/%x-%j.out", TimeMinutes: 30}
	id, err := Client{Runner: r}.SubmitBatch(context.Background(), opts, []byte("#!/bin/sh\n"))
	if err != nil || id != 123 {
		t.Fatalf("id %d, err %v", id, err)
	}
	want := "sbatch --parsable --job-name=elastic-worker-100 --account=proj-a --partition=a100 --nodes=1 --ntasks=1 --cpus-per-task=8 --qos=borrow-proj-a --gpus-per-node=a100:4 --mem=16000M --constraint=a100&spot --requeue --chdir=/tmp --output=/tmp/out/%x-%j.out --time=30"
	if len(r.calls) != 1 || r.calls[0] != want || string(r.stdin) != "#!/bin/sh\n" {
		t.Errorf("ran %q with stdin %q, want %q", r.calls, r.stdin, want)
	}
	// A runner without stdin cannot submit a script.
	if _, err := (Client{Runner: runOnly{r}}).SubmitBatch(context.Background(), opts, []byte("x")); err == nil {
		t.Error("submitted a script through a runner without stdin")
	}
}

// A worker runs the main job's script with its request on the command line only: the
// script's #SBATCH lines (which sbatch would merge with that request) become comments, up to
// the first command, as sbatch reads them.
func TestWithoutDirectives(t *testing.T) {
	in := "#!/bin/bash\n# a comment\n#SBATCH --gpus-per-node=4\n\n  #SBATCH indented is a comment to sbatch\n#SLURM --gres=gpu:1\n" +
		"set -e\n#SBATCH --after-a-command stays\n"
	want := "#!/bin/bash\n# a comment\n#(option given on the command line) SBATCH --gpus-per-node=4\n\n  #SBATCH indented is a comment to sbatch\n" +
		"#(option given on the command line) SLURM --gres=gpu:1\nset -e\n#SBATCH --after-a-command stays\n"
	if got := string(WithoutDirectives([]byte(in))); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if got := string(WithoutDirectives([]byte("#SBATCH -N1"))); got != "#(option given on the command line) SBATCH -N1" {
		t.Errorf("a script of one directive without a newline: %q", got)
	}
}

type runOnly struct{ r Runner }

func (o runOnly) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return o.r.Run(ctx, name, args...)
}

func TestParseSubmitted(t *testing.T) {
	for out, want := range map[string]uint32{"12\n": 12, "12;testbed\n": 12, "warning\n13\n": 13, "": 0, "0\n": 0, "x\n": 0} {
		got, err := ParseSubmitted([]byte(out))
		if got != want || (err != nil) != (want == 0) {
			t.Errorf("ParseSubmitted(%q) = %d, %v; want %d", out, got, err, want)
		}
	}
}

func TestBatchScriptEmptyIsAnError(t *testing.T) {
	if _, err := (Client{Runner: &scriptRunner{}}).BatchScript(context.Background(), 3); err == nil {
		t.Error("an empty batch script is no error")
	}
}

func TestCommandErrorsPassThrough(t *testing.T) {
	fail := &CommandError{Command: "sacctmgr", ExitCode: 1, Stderr: "Problem talking to the database"}
	c := Client{Runner: &scriptRunner{err: fail}}
	if _, err := c.ShowConfig(context.Background()); !errors.Is(err, fail) {
		t.Errorf("ShowConfig: %v", err)
	}
	if err := c.AddQOS(context.Background(), "borrow"); !errors.Is(err, fail) {
		t.Errorf("AddQOS: %v", err)
	}
	if _, err := c.SacctJobs(context.Background(), SacctFilter{}, "JobID"); !errors.Is(err, fail) {
		t.Errorf("SacctJobs: %v", err)
	}
}

// testdata/scontrol-show-config-22.05-testbed.txt is `scontrol show config` of the testbed's 22.05.8.
func TestParseConfig(t *testing.T) {
	conf := ParseConfig(fixture(t, "scontrol-show-config-22.05-testbed.txt"))
	for key, want := range map[string]string{"ClusterName": "testbed", "JobRequeue": "1", "PreemptMode": "REQUEUE",
		"SLURM_VERSION": "22.05.8", "SlurmUser": "slurm(64030)", "AuthAltTypes": ""} {
		if got := conf.Get(key); got != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if got := conf.List("JobSubmitPlugins"); !slices.Equal(got, []string{"pools"}) {
		t.Errorf("JobSubmitPlugins = %q", got)
	}
	// A later section repeating a name does not override the first; lines that are no setting
	// are skipped.
	conf = ParseConfig([]byte("Configuration data as of 2025\nMaxNodes = 5\n\nCgroup Support Configuration:\nMaxNodes = 7\nPlugins = a, b ,,c\n"))
	if conf.Get("MaxNodes") != "5" || len(conf) != 2 || !slices.Equal(conf.List("Plugins"), []string{"a", "b", "c"}) {
		t.Errorf("config = %q", conf)
	}
}

func TestParseQueueSummary(t *testing.T) {
	line := func(f ...string) string { return strings.Join(f, queueSep) + "\n" }
	out := line("12", "12", "alice", "proj-a", "guar-proj-a", "a100", "RUNNING", "None", "a100-1", "train") +
		line("15", "13_2", "bob", "proj-b", "borrow", "a100,v100", "PENDING", "Priority", "", "name"+queueSep+"with|pipes") + "\n"
	jobs, err := ParseQueue([]byte(out), SummaryFields)
	if err != nil {
		t.Fatal(err)
	}
	want := []Job{
		{ID: 12, PrintedID: "12", User: "alice", Account: "proj-a", QOS: "guar-proj-a", Partition: "a100", State: "RUNNING", StateReason: "None", Nodes: "a100-1", Name: "train"},
		{ID: 15, PrintedID: "13_2", User: "bob", Account: "proj-b", QOS: "borrow", Partition: "a100,v100", State: "PENDING", StateReason: "Priority", Nodes: "", Name: "name" + queueSep + "with|pipes"},
	}
	if !reflect.DeepEqual(jobs, want) {
		t.Errorf("jobs = %+v", jobs)
	}
	if _, err := ParseQueue([]byte(line("12", "12", "alice")), SummaryFields); err == nil {
		t.Error("a short line is no error")
	}
}

func TestParseSacct(t *testing.T) {
	fields := []string{"JobIDRaw", "State", "AllocTRES", "JobName"}
	recs, err := ParseSacct([]byte("20|CANCELLED by 1001|gres/gpu=1,node=1|a|b\n21|PREEMPTED||w\n"), fields)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0]["State"] != "CANCELLED by 1001" || recs[0]["JobName"] != "a|b" || recs[1]["AllocTRES"] != "" || recs[1]["JobIDRaw"] != "21" {
		t.Errorf("records = %v", recs)
	}
	if _, err := ParseSacct([]byte("20|COMPLETED\n"), fields); err == nil {
		t.Error("a line with fewer fields than asked is no error")
	}
}

// Operators and administrators see every job; any other level, or none, does not.
func TestUserIsOperator(t *testing.T) {
	for out, want := range map[string]bool{"Administrator\n": true, "Operator\n": true, "operator\n": true, "None\n": false, "": false} {
		got, err := NewClient(&scriptRunner{out: out}).UserIsOperator(context.Background(), "alice")
		if err != nil || got != want {
			t.Errorf("AdminLevel %q: operator %v, %v; want %v", out, got, err, want)
		}
	}
	fail := &CommandError{Command: "sacctmgr", ExitCode: 1, Stderr: "Problem talking to the database"}
	if ok, err := NewClient(&scriptRunner{err: fail}).UserIsOperator(context.Background(), "alice"); ok || err == nil {
		t.Errorf("a failed read: operator %v, %v; want false and the error", ok, err)
	}
}
