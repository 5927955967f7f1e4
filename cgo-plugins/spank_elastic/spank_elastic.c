/*
 * spank_elastic: declares an elastic training job for elasticd.
 *
 *   sbatch --elastic=MIN:MAX[:GPUS_PER_WORKER] [--elastic-pools=a100,v100] [--elastic-value=2.5]
 *          [--elastic-max-batch=GLOBAL[:PER_GPU]] job.sh
 *
 * Plain C, not Go: SPANK plugins are loaded into sbatch, srun, salloc and slurmstepd, and a Go
 * runtime in a forking slurmstepd is a risk this small parser does not need.
 *
 * Where it runs and what it does:
 *  - sbatch/salloc/srun (allocator and local context): the option callbacks validate the
 *    declaration; a bad one fails the command before anything is submitted, with a message
 *    saying what is wrong.
 *  - slurmstepd of the batch step (remote context, as root): the options come back through the
 *    job's environment, which the user controls, so they are validated again. The declaration
 *    is then recorded in DIR/jobs/JOBID/declaration.json (root-owned, read by elasticd),
 *    DIR/jobs/JOBID/reports/ is created for the user's throughput reports, and the job gets the
 *    ELASTIC_* environment contract (see elasticd/README.md).
 *  - Worker jobs that elasticd submits carry ELASTIC_ROLE=worker: they are not declarations.
 *  - The job epilog (slurmd's spank epilog, as root) of a recorded main job cancels its workers
 *    (scancel --name=elastic-worker-JOBID --user=UID): whenever the main job ends or is
 *    requeued, its workers end with it, whether elasticd runs or not.
 *
 * plugstack.conf arguments (all optional except dir for the remote side):
 *   dir=PATH            elasticd's state directory (default /var/spool/slurmbridge/elastic)
 *   pools=a100,v100     pools a job may name in --elastic-pools; unset: any well-formed name
 *   max_workers=N       largest MAX a job may declare (default 64)
 *   rdzv_port_base=N    rendezvous port is N + JOBID % 10000 (default 29400)
 *   scancel=PATH        the scancel the job epilog runs (default /usr/bin/scancel)
 */
#include <signal.h>
#include <sys/wait.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(elastic, 1);

#define MAX_POOLS 16
#define MAX_NAME 64
#define BATCH_STEP 0xfffffffbU /* SLURM_BATCH_SCRIPT */

struct declaration {
	int set;
	unsigned min, max, gpus;
	double value; /* --elastic-value: worth of a million samples; 0 = not given */
	unsigned max_batch, batch_per_gpu; /* --elastic-max-batch; 0 = not given */
	int npools;
	char pools[MAX_POOLS][MAX_NAME];
};

static struct declaration decl = { .gpus = 1 };
static int pools_given, value_given, batch_given;
static char batch_arg[64];
static char pools_arg[MAX_POOLS * MAX_NAME];

/* Short enough that every path built from it fits in PATH_MAX. */
static char state_dir[1024] = "/var/spool/slurmbridge/elastic";
static char allowed_pools[MAX_POOLS * MAX_NAME]; /* "" = any well-formed name */
static unsigned max_workers_cap = 64;
static unsigned rdzv_port_base = 29400;
static char scancel_path[1024] = "/usr/bin/scancel";
#define MAX_BATCH (1U << 30) /* elasticd's registry.MaxBatchLimit */

/* parse_uint reads a whole decimal number in [lo, hi]. */
static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	if (!s || !*s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* A pool name as bridge/pools accepts it: letters, digits, '_', '-', '.'. */
static int valid_name(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n >= MAX_NAME)
		return 0;
	for (i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return 0;
	}
	return 1;
}

/* in_list reports whether name is one of the comma-separated words of list. */
static int in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (len == n && strncmp(p, name, n) == 0)
			return 1;
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

#define MAX_VALUE 1e9 /* elasticd's registry.MaxValuePerMillionSamples */

/* parse_value reads a positive decimal number (digits, at most one '.', at most 6 decimals)
 * without strtod, whose decimal point follows the locale. */
static int parse_value(const char *s, double *out)
{
	double v = 0, scale = 1;
	int digits = 0, decimals = -1;

	if (!s || !*s || strlen(s) > 20)
		return -1;
	for (; *s; s++) {
		if (*s == '.' && decimals < 0) {
			decimals = 0;
		} else if (*s >= '0' && *s <= '9') {
			if (decimals >= 0) {
				if (++decimals > 6)
					return -1;
				scale /= 10;
				v += (*s - '0') * scale;
			} else {
				v = v * 10 + (*s - '0');
			}
			digits++;
		} else {
			return -1;
		}
	}
	if (!digits || decimals == 0 || !(v > 0) || v > MAX_VALUE)
		return -1;
	*out = v;
	return 0;
}

/* parse_spec reads MIN:MAX[:GPUS]. On error it writes why into why. */
static int parse_spec(const char *spec, struct declaration *d, char *why, size_t whylen)
{
	char buf[64], *fields[4];
	int n = 0;
	char *p;

	if (!spec || strlen(spec) >= sizeof(buf)) {
		snprintf(why, whylen, "want MIN:MAX[:GPUS_PER_WORKER], e.g. --elastic=2:8:1");
		return -1;
	}
	strcpy(buf, spec);
	for (p = buf; n < 4; n++) {
		fields[n] = p;
		p = strchr(p, ':');
		if (!p) {
			n++;
			break;
		}
		*p++ = '\0';
	}
	if (p || n < 2 || n > 3) {
		snprintf(why, whylen, "\"%s\": want MIN:MAX[:GPUS_PER_WORKER], e.g. --elastic=2:8:1", spec);
		return -1;
	}
	if (parse_uint(fields[0], 1, max_workers_cap, &d->min)) {
		snprintf(why, whylen, "MIN \"%s\" must be a whole number from 1 to %u", fields[0], max_workers_cap);
		return -1;
	}
	if (parse_uint(fields[1], 1, max_workers_cap, &d->max)) {
		snprintf(why, whylen, "MAX \"%s\" must be a whole number from 1 to %u", fields[1], max_workers_cap);
		return -1;
	}
	if (d->max < d->min) {
		snprintf(why, whylen, "MAX %u is below MIN %u", d->max, d->min);
		return -1;
	}
	d->gpus = 1;
	if (n == 3 && parse_uint(fields[2], 1, 64, &d->gpus)) {
		snprintf(why, whylen, "GPUS_PER_WORKER \"%s\" must be a whole number from 1 to 64", fields[2]);
		return -1;
	}
	d->set = 1;
	return 0;
}

/* parse_pools reads a comma-separated pool list. */
static int parse_pools(const char *list, struct declaration *d, char *why, size_t whylen)
{
	const char *p = list;

	d->npools = 0;
	if (!list || !*list) {
		snprintf(why, whylen, "--elastic-pools needs at least one pool, e.g. --elastic-pools=a100,v100");
		return -1;
	}
	while (1) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int i;

		if (!valid_name(p, len)) {
			snprintf(why, whylen, "pool \"%.*s\" is not a pool name", (int)(len > 40 ? 40 : len), p);
			return -1;
		}
		if (d->npools == MAX_POOLS) {
			snprintf(why, whylen, "at most %d pools", MAX_POOLS);
			return -1;
		}
		memcpy(d->pools[d->npools], p, len);
		d->pools[d->npools][len] = '\0';
		for (i = 0; i < d->npools; i++) {
			if (strcmp(d->pools[i], d->pools[d->npools]) == 0) {
				snprintf(why, whylen, "pool %s is listed twice", d->pools[i]);
				return -1;
			}
		}
		if (*allowed_pools && !in_list(allowed_pools, d->pools[d->npools])) {
			snprintf(why, whylen, "unknown pool %s; elastic workers may use: %s", d->pools[d->npools], allowed_pools);
			return -1;
		}
		d->npools++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

static int opt_elastic(int val, const char *optarg, int remote)
{
	char why[256];

	(void)val;
	if (parse_spec(optarg, &decl, why, sizeof(why)) < 0) {
		slurm_error("elastic: invalid --elastic: %s", why);
		/* Remotely the value came through the job's environment: failing there would fail
		 * the job's launch; the job runs as a plain job instead. */
		return remote ? 0 : -1;
	}
	return 0;
}

static int opt_pools(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || strlen(optarg) >= sizeof(pools_arg)) {
		slurm_error("elastic: invalid --elastic-pools: list too long");
		return -1;
	}
	/* Checked in init_post_opt, once the plugstack's allowed pools are known for sure. */
	strcpy(pools_arg, optarg);
	pools_given = 1;
	return 0;
}

static int opt_value(int val, const char *optarg, int remote)
{
	(void)val;
	if (parse_value(optarg, &decl.value) < 0) {
		slurm_error("elastic: invalid --elastic-value \"%.30s\": want what a million samples are worth "
			    "in the pools' price unit, a number above 0 and at most 1000000000, e.g. --elastic-value=2.5",
			    optarg ? optarg : "");
		decl.value = 0;
		return remote ? 0 : -1;
	}
	value_given = 1;
	return 0;
}

static int opt_batch(int val, const char *optarg, int remote)
{
	(void)val;
	(void)remote;
	if (!optarg || strlen(optarg) >= sizeof(batch_arg)) {
		slurm_error("elastic: invalid --elastic-max-batch: want GLOBAL[:PER_GPU], e.g. --elastic-max-batch=1024:32");
		return -1;
	}
	/* Checked in init_post_opt against --elastic's MAX and GPUS, whatever the option order. */
	strcpy(batch_arg, optarg);
	batch_given = 1;
	return 0;
}

/* parse_batch reads GLOBAL[:PER_GPU] and checks it against the declared sizes: the global
 * batch (workers x GPUs per worker x per-GPU batch) must fit at MIN workers. Without PER_GPU,
 * each GPU gets GLOBAL / (MAX x GPUS), so that the largest job meets GLOBAL exactly. */
static int parse_batch(const char *arg, struct declaration *d, char *why, size_t whylen)
{
	char buf[64], *colon;
	unsigned devices_max = d->max * d->gpus, devices_min = d->min * d->gpus;

	strcpy(buf, arg);
	colon = strchr(buf, ':');
	if (colon)
		*colon++ = '\0';
	if (parse_uint(buf, 1, MAX_BATCH, &d->max_batch)) {
		snprintf(why, whylen, "GLOBAL \"%.20s\" must be a whole number from 1 to %u: the largest global batch "
			 "(samples per step over every GPU), e.g. --elastic-max-batch=1024:32", buf, MAX_BATCH);
		return -1;
	}
	if (colon) {
		if (parse_uint(colon, 1, d->max_batch, &d->batch_per_gpu)) {
			snprintf(why, whylen, "PER_GPU \"%.20s\" must be a whole number from 1 to GLOBAL %u", colon, d->max_batch);
			return -1;
		}
	} else {
		d->batch_per_gpu = d->max_batch / devices_max;
		if (d->batch_per_gpu == 0) {
			snprintf(why, whylen, "%u is below the %u GPUs of MAX %u workers: give a larger GLOBAL, or PER_GPU "
				 "(--elastic-max-batch=GLOBAL:PER_GPU) and elasticd stops growing where the batch is reached",
				 d->max_batch, devices_max, d->max);
			return -1;
		}
	}
	if ((unsigned long long)devices_min * d->batch_per_gpu > d->max_batch) {
		snprintf(why, whylen, "at MIN %u workers of %u GPUs, %u per GPU make a global batch of %llu, above %u",
			 d->min, d->gpus, d->batch_per_gpu, (unsigned long long)devices_min * d->batch_per_gpu, d->max_batch);
		return -1;
	}
	return 0;
}

/* effective_max is MAX lowered to what the max global batch allows. */
static unsigned effective_max(const struct declaration *d)
{
	unsigned by_batch;

	if (!d->max_batch || !d->batch_per_gpu)
		return d->max;
	by_batch = d->max_batch / (d->batch_per_gpu * d->gpus);
	return by_batch < d->max ? by_batch : d->max;
}

/* Registered from slurm_spank_init: sbatch and salloc (allocator context) ignore a static
 * spank_options table in 22.05; srun and slurmstepd honour both. */
static struct spank_option elastic_options[] = {
	{ "elastic", "MIN:MAX[:GPUS]",
	  "Elastic training job: elasticd adds and removes worker jobs between MIN and MAX "
	  "workers of GPUS GPUs each (default 1) from measured throughput",
	  1, 0, opt_elastic },
	{ "elastic-pools", "POOL[,POOL...]",
	  "Pools (GPU types) elastic workers may run in; default: the job's own partition",
	  1, 0, opt_pools },
	{ "elastic-value", "DOLLARS",
	  "What a million samples are worth, in the pools' price unit: elasticd adds a worker only "
	  "if the samples it adds are worth more than its GPUs cost (needs pool prices)",
	  1, 0, opt_value },
	{ "elastic-max-batch", "GLOBAL[:PER_GPU]",
	  "Largest global batch (samples per step over every GPU) the training tolerates, and each "
	  "GPU's batch (default GLOBAL / (MAX x GPUS)): elasticd never grows past it; workers get "
	  "ELASTIC_BATCH_PER_DEVICE",
	  1, 0, opt_batch },
	SPANK_OPTIONS_TABLE_END
};

/* read_args applies the plugstack.conf arguments. */
static int read_args(int ac, char **av)
{
	int i;

	for (i = 0; i < ac; i++) {
		const char *v;
		if ((v = strchr(av[i], '=')) == NULL) {
			slurm_error("elastic: plugstack argument \"%s\" is not NAME=VALUE", av[i]);
			return -1;
		}
		v++;
		if (strncmp(av[i], "dir=", 4) == 0 && *v == '/' && strlen(v) < sizeof(state_dir)) {
			strcpy(state_dir, v);
		} else if (strncmp(av[i], "pools=", 6) == 0 && strlen(v) < sizeof(allowed_pools)) {
			strcpy(allowed_pools, v);
		} else if (strncmp(av[i], "max_workers=", 12) == 0 && parse_uint(v, 1, 100000, &max_workers_cap) == 0) {
		} else if (strncmp(av[i], "rdzv_port_base=", 15) == 0 && parse_uint(v, 1024, 55535, &rdzv_port_base) == 0) {
		} else if (strncmp(av[i], "scancel=", 8) == 0 && *v == '/' && strlen(v) < sizeof(scancel_path)) {
			strcpy(scancel_path, v);
		} else {
			slurm_error("elastic: bad plugstack argument \"%s\"", av[i]);
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	struct spank_option *o;

	if (read_args(ac, av) < 0)
		return -1;
	for (o = elastic_options; o->name; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("elastic: cannot register --%s", o->name);
			return -1;
		}
	}
	return 0;
}

static int set_env(spank_t sp, const char *name, const char *value)
{
	if (spank_setenv(sp, name, value, 1) != ESPANK_SUCCESS) {
		slurm_error("elastic: cannot set %s in the job's environment", name);
		return -1;
	}
	return 0;
}

/* mkdir_owned creates path (or accepts it as a directory that is not a link) and sets its
 * owner and mode. */
static int mkdir_owned(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		slurm_error("elastic: mkdir %s: %m", path);
		return -1;
	}
	if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
		slurm_error("elastic: %s is not a directory", path);
		return -1;
	}
	if (chown(path, uid, gid) < 0 || chmod(path, mode) < 0) {
		slurm_error("elastic: chown/chmod %s: %m", path);
		return -1;
	}
	return 0;
}

/* record writes the declaration for elasticd: a temporary file renamed into place, so elasticd
 * never reads half of one. Every string in it was validated above, so none needs escaping. */
static int record(uint32_t jobid, uid_t uid, gid_t gid, const char *endpoint)
{
	char dir[1200], path[PATH_MAX], tmp[PATH_MAX];
	FILE *f;
	int fd, i;
	/* In millionths, printed without %f, whose decimal point follows the locale. */
	unsigned long long micros = (unsigned long long)(decl.value * 1e6 + 0.5);

	snprintf(dir, sizeof(dir), "%s/jobs", state_dir);
	if (mkdir_owned(state_dir, 0, 0, 0755) < 0 || mkdir_owned(dir, 0, 0, 0755) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/jobs/%u", state_dir, jobid);
	if (mkdir_owned(dir, 0, 0, 0755) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/reports", dir);
	if (mkdir_owned(path, uid, gid, 0700) < 0)
		return -1;

	snprintf(tmp, sizeof(tmp), "%s/.declaration.json.tmp", dir);
	snprintf(path, sizeof(path), "%s/declaration.json", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 || !(f = fdopen(fd, "w"))) {
		slurm_error("elastic: writing %s: %m", tmp);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fprintf(f, "{\"version\":1,\"job_id\":%u,\"uid\":%u,\"gid\":%u,\"min_workers\":%u,"
		   "\"max_workers\":%u,\"gpus_per_worker\":%u,\"value_per_million_samples\":%llu.%06llu,"
		   "\"max_batch\":%u,\"batch_per_device\":%u,\"rdzv_endpoint\":\"%s\",\"pools\":[",
		jobid, (unsigned)uid, (unsigned)gid, decl.min, decl.max, decl.gpus, micros / 1000000, micros % 1000000,
		decl.max_batch, decl.batch_per_gpu, endpoint);
	for (i = 0; i < decl.npools; i++)
		fprintf(f, "%s\"%s\"", i ? "," : "", decl.pools[i]);
	fprintf(f, "],\"recorded\":%lld}\n", (long long)time(NULL));
	if (fclose(f) != 0 || rename(tmp, path) < 0) {
		slurm_error("elastic: writing %s: %m", path);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* remote_batch records the declaration of a main job and gives it the environment contract. */
static int remote_batch(spank_t sp)
{
	uint32_t jobid;
	uid_t uid;
	gid_t gid;
	char role[16] = "", host[256], endpoint[300], buf[PATH_MAX];

	if (spank_getenv(sp, "ELASTIC_ROLE", role, sizeof(role)) == ESPANK_SUCCESS && strcmp(role, "worker") == 0)
		return 0; /* elasticd submitted this worker with its contract already set */
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
		slurm_error("elastic: cannot read the job's id and owner");
		return -1;
	}
	if (gethostname(host, sizeof(host)) < 0 || !valid_name(host, strlen(host))) {
		slurm_error("elastic: this host's name is not usable as a rendezvous endpoint");
		return -1;
	}
	snprintf(endpoint, sizeof(endpoint), "%s:%u", host, rdzv_port_base + jobid % 10000);
	if (record(jobid, uid, gid, endpoint) < 0)
		return -1;

	snprintf(buf, sizeof(buf), "%u", jobid);
	if (set_env(sp, "ELASTIC_ROLE", "main") || set_env(sp, "ELASTIC_JOB_ID", buf))
		return -1;
	snprintf(buf, sizeof(buf), "%u", decl.min);
	if (set_env(sp, "ELASTIC_MIN", buf))
		return -1;
	snprintf(buf, sizeof(buf), "%u", effective_max(&decl));
	if (set_env(sp, "ELASTIC_MAX", buf))
		return -1;
	snprintf(buf, sizeof(buf), "%u:%u", decl.min, effective_max(&decl));
	if (set_env(sp, "ELASTIC_NNODES", buf))
		return -1;
	if (decl.max_batch) {
		snprintf(buf, sizeof(buf), "%u", decl.max_batch);
		if (set_env(sp, "ELASTIC_MAX_BATCH", buf))
			return -1;
		snprintf(buf, sizeof(buf), "%u", decl.batch_per_gpu);
		if (set_env(sp, "ELASTIC_BATCH_PER_DEVICE", buf))
			return -1;
	}
	snprintf(buf, sizeof(buf), "%u", decl.gpus);
	if (set_env(sp, "ELASTIC_GPUS_PER_WORKER", buf) || set_env(sp, "ELASTIC_RDZV_ENDPOINT", endpoint))
		return -1;
	snprintf(buf, sizeof(buf), "%s/jobs/%u/reports", state_dir, jobid);
	if (set_env(sp, "ELASTIC_REPORT_DIR", buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s/jobs/%u/hosts", state_dir, jobid);
	return set_env(sp, "ELASTIC_HOSTS_FILE", buf);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char why[2300];
	uint32_t step;

	(void)ac;
	(void)av;
	if (pools_given && !decl.set) {
		slurm_error("elastic: --elastic-pools needs --elastic=MIN:MAX[:GPUS_PER_WORKER]");
		return -1;
	}
	if (value_given && !decl.set) {
		slurm_error("elastic: --elastic-value needs --elastic=MIN:MAX[:GPUS_PER_WORKER]");
		return -1;
	}
	if (batch_given && !decl.set) {
		slurm_error("elastic: --elastic-max-batch needs --elastic=MIN:MAX[:GPUS_PER_WORKER]");
		return -1;
	}
	if (!decl.set)
		return 0;
	if (pools_given && parse_pools(pools_arg, &decl, why, sizeof(why)) < 0) {
		slurm_error("elastic: invalid --elastic-pools: %s", why);
		return spank_remote(sp) ? 0 : -1;
	}
	if (batch_given && parse_batch(batch_arg, &decl, why, sizeof(why)) < 0) {
		slurm_error("elastic: invalid --elastic-max-batch: %s", why);
		return spank_remote(sp) ? 0 : -1;
	}
	if (!spank_remote(sp))
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step != BATCH_STEP)
		return 0; /* steps inherit the batch step's environment */
	/* A failure here must not fail the job's launch (slurmd would count it against the
	 * node): the job runs, but not as an elastic one. */
	if (remote_batch(sp) < 0)
		slurm_error("elastic: job not recorded; it runs without elasticd");
	return 0;
}

/* recorded_main reports whether DIR/jobs/JOBID/declaration.json is there and root's: the
 * plugin recorded this job as a main job. */
static int recorded_main(uint32_t jobid)
{
	char path[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/jobs/%u/declaration.json", state_dir, jobid);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0;
}

/* cancel_workers runs scancel (no shell) for the worker jobs of main job jobid, owned by uid,
 * and waits for it at most 30 s. */
static void cancel_workers(uint32_t jobid, uid_t uid)
{
	char name[64], user[64], conf[PATH_MAX + 16] = "";
	char *argv[] = { "scancel", name, user, NULL };
	char *envp[] = { "PATH=/usr/bin:/bin", conf[0] ? conf : NULL, NULL };
	const char *slurm_conf = getenv("SLURM_CONF");
	pid_t pid;
	int status, i;

	snprintf(name, sizeof(name), "--name=elastic-worker-%u", jobid);
	snprintf(user, sizeof(user), "--user=%u", (unsigned)uid);
	if (slurm_conf && strlen(slurm_conf) < PATH_MAX) {
		snprintf(conf, sizeof(conf), "SLURM_CONF=%s", slurm_conf);
		envp[1] = conf;
	}
	pid = fork();
	if (pid < 0) {
		slurm_error("elastic: job %u ended; cannot fork to cancel its workers: %m", jobid);
		return;
	}
	if (pid == 0) {
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
		}
		execve(scancel_path, argv, envp);
		_exit(127);
	}
	for (i = 0; i < 300; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				slurm_error("elastic: job %u ended; %s %s %s failed (status 0x%x)", jobid, scancel_path, name, user, status);
			else
				slurm_info("elastic: job %u ended; its worker jobs are cancelled", jobid);
			return;
		}
		usleep(100000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	slurm_error("elastic: job %u ended; %s did not finish in 30 s", jobid, scancel_path);
}

/* The job epilog runs as root on each node of a job that ended or is requeued, whether elasticd
 * runs or not: a main job's workers end with it. */
int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	uint32_t jobid;
	uid_t uid;

	/* slurm_spank_init is not called in the job script context: the plugstack arguments
	 * (dir=, scancel=) are read here. */
	if (read_args(ac, av) < 0)
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS || spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
		return 0;
	if (recorded_main(jobid))
		cancel_workers(jobid, uid);
	return 0;
}
