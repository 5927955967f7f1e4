// Package pools is slurmbridge's resource pools: their configuration and the choice of pool
// for a job. Its Route is what the job_submit plugin runs for every submission, what poolctl
// explain prints and what elasticd uses to place workers; it is pure (config and request in,
// decision out), so all three agree.
//
// # Configuration
//
// A YAML file, decoded strictly: an unknown or repeated key is an error, and every problem is
// reported with its line (Decode, Validate, CheckCluster).
//
//	default_cpu_pool: cpu        # CPU jobs without -p go here; omitted: Slurm's default partition
//	default_gpu_pool: a100       # first under policy default-first; optional
//	policy: cheapest             # default-first (default) | cheapest | fastest
//	borrow_qos: borrow-{account} # quotad's borrow QOS, one per project; this is the default
//	elastic_qos: elastic-{account}  # quotad's elastic QOS (elasticd's workers beyond the guarantee); the default
//	borrow_qos_admins: [slurmbridge]  # besides root and SlurmUser, may move jobs into them
//	pools:
//	  - name: a100-spot          # required; letters, digits, '_', '-', '.'
//	    description: Preemptible A100s
//	    partition: a100-spot     # the Slurm partition; defaults to name
//	    gpu_type: a100           # the nodes' GRES type; omitted for CPU pools
//	    price_per_gpu_hour: 1.2  # GPU pools; 0 if omitted
//	    price_per_cpu_hour: 0.0  # used to rank CPU pools
//	    spot: true
//	    fallback: [a100]         # pools of the same kind listed after this one
//	    speed: {default: 2.0, resnet: 1.5}  # per workload class; "default" for the rest; else 1
//	    node_count: 1            # nodes in the partition; 0 or omitted: unknown
//	    node: {gpus: 4, cpus: 8, memory_mb: 32000}  # what every node holds; required
//
// Validate checks names and partitions are unique, the defaults exist and are of their kind,
// fallbacks exist, are of the same kind and form no cycle, prices are not negative and speeds
// are above 0. CheckCluster compares partitions and node shapes with the live cluster.
//
// # Routing
//
// Route runs three small steps: feasibility (which pools' nodes can ever hold the job: GPU
// type, GPUs, CPUs and memory per node, node count), ranking (the policy, then fallbacks) and
// selection (the partition list and a message for the user).
//
//   - No partition, GPU job: every GPU pool that fits, comma-separated, ordered by the policy:
//     default-first puts the default GPU pool first and keeps config order; cheapest orders by
//     price per GPU-hour divided by the pool's speed for the job's workload class; fastest by
//     that speed. Then every pool is moved before the pools it falls back to (a spot pool
//     before its on-demand fallback). Slurm starts the job in the first listed partition with
//     room, which makes the choice availability-aware.
//   - No partition, CPU job: the default CPU pool; if the job can never fit there, the CPU
//     pools that fit, ranked the same way with prices per CPU-hour.
//   - Partitions named (-p, possibly a list): pools that can run the job are kept, pools that
//     can never run it are dropped (the message says why), partitions that are not pools are
//     kept untouched. When nothing is left the job is rejected, naming the pools that would
//     run it. A CPU-only job may name a GPU pool: it is the user's explicit choice and fits,
//     so it is accepted (Slurm's own partition limits still apply); it is only never chosen
//     automatically.
//   - No pool fits: the job is rejected with each pool's reason.
//   - job_modify (Op Modify): only the fields being changed are known, so a named partition
//     is checked as above and an update that names none is left alone. The job_submit plugin
//     routes the job as the update would leave it instead (its own request with the update's
//     fields over it, Op Submit) whenever it can read the job's record.
//   - A request that cannot be read (malformed GPU string) is not routed (Action Keep, with
//     Err set for the log): Slurm validates its own syntax, so routing never rejects a job
//     that Slurm would accept.
//   - Jobs whose only GRES are not GPUs (mps, shard) are left to Slurm: pools do not describe
//     those.
//
// # Borrow QOS
//
// Slurm requeues a preempted job only when it is a batch job (job_desc->script set) with
// Requeue=1 (--requeue, or neither flag where slurm.conf has JobRequeue=1), and kills any other.
// Each project's borrow QOS is preemptable, so the plugin refuses a submission that names one
// (anywhere in a comma-separated --qos list) when Slurm could not requeue the job: salloc and
// srun allocations, --no-requeue, and no --requeue under JobRequeue=0. It reads JobRequeue from
// slurmctld's memory. On job_modify it refuses an update into a borrow QOS unless it comes from
// root, SlurmUser or borrow_qos_admins (quotad, which lends only jobs Slurm can requeue), and,
// where it can read the job's record, a user's Requeue=0 or account change of a job already in
// a borrow or elastic QOS. The elastic QOS (elastic_qos), where elasticd runs the workers it
// grows a job by on borrowed GPUs, is preemptable too and guarded the same way. borrow_qos and
// elastic_qos must match quotad's settings.borrowQOS and settings.elasticQOS; slurmbridge-doctor
// checks them against the QOS that the others preempt.
//
// QOS names follow one rule (qosname.go), for the plugin, quotad, elasticd and doctor alike:
// "{account}" in a pattern stands for the project's account, names are built in lower case and
// compared without case, as Slurm does. A pattern without "{account}" names one shared QOS: the
// borrow QOS of a quotad from before per-project QOS, which the plugin guards until that quotad
// is upgraded; quotad itself accepts only per-project patterns.
//
// # Workload class
//
// A job's workload class is the first "class=NAME" word of its comment
// (sbatch --comment=class=resnet; words are separated by spaces, commas or semicolons). The
// job name is not used: names are free text and often generated. Jobs without a class use
// each pool's "default" speed.
//
// # Not interpreted
//
// --constraint (features) and --mem-per-gpu (mem_per_tres) are left to Slurm: pools do not
// describe node features, and memory per GPU is not among the fields the plugin copies.
//
// # Cost
//
// Route allocates the Candidates slice, the GPU request and the strings it returns; it holds
// no lock and iterates no map. BenchmarkRoute measures it.
package pools
