//go:build ignore

/* The line above keeps Go's tools from taking this C file for part of the Go package of its
 * tests (doc.go): the Makefile builds it with the C compiler, and the tests build it into
 * their fuzz harness. */

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
 *  - On a node (slurmstepd, slurmd, the job epilog) no callback ever returns an error: with
 *    `required` in plugstack.conf an error there fails the launch and drains the node, and the
 *    user controls every option value and the job's environment. Whatever is wrong is logged
 *    (escaped: the log is root's) and the job runs as a plain, non-elastic one.
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

/* The declaration the options make. Reset by slurm_spank_init: slurmd maps the plugin once and
 * runs its callbacks for many jobs. */
static struct declaration decl = { .gpus = 1 };
static int pools_given, value_given, batch_given;
static char batch_arg[64];
static char pools_arg[MAX_POOLS * MAX_NAME];
/* Set on a node when an option's value is unusable: the job runs, but is not recorded. */
static int remote_invalid;
/* Set on a node when plugstack.conf's arguments are unusable: no job is recorded there. */
static int config_invalid;

/* The plugstack.conf arguments (read_args). state_dir is short enough that every path built
 * from it fits in PATH_MAX. */
#define DEFAULT_STATE_DIR "/var/spool/slurmbridge/elastic"
#define DEFAULT_SCANCEL "/usr/bin/scancel"
static char state_dir[1024] = DEFAULT_STATE_DIR;
static char allowed_pools[MAX_POOLS * MAX_NAME]; /* "" = any well-formed name */
static unsigned max_workers_cap = 64;
static unsigned rdzv_port_base = 29400;
static char scancel_path[1024] = DEFAULT_SCANCEL;
#define MAX_BATCH (1U << 30) /* elasticd's registry.MaxBatchLimit */

/* ESCAPED_LEN holds escaped's longest result: 40 bytes of 4 characters each, "..." and NUL. */
#define ESCAPED_LEN (40 * 4 + 4)

/* escaped copies at most 40 bytes of s into out (of ESCAPED_LEN) for a log line or a message:
 * printable ASCII as it is, anything else (control bytes, newlines, quotes, bytes of other
 * encodings) as \xNN, and "..." when cut. The user chose s; root's log must show what it was
 * without letting it forge lines. */
static const char *escaped(const char *s, char *out)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, i;

	if (!s)
		s = "";
	for (i = 0; s[i] && i < 40; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			out[o++] = (char)c;
		} else {
			out[o++] = '\\';
			out[o++] = 'x';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	if (s[i]) {
		memcpy(out + o, "...", 3);
		o += 3;
	}
	out[o] = '\0';
	return out;
}

/* escaped_n is escaped for the first n bytes of s. */
static const char *escaped_n(const char *s, size_t n, char *out)
{
	char buf[42];

	if (n > 41)
		n = 41; /* one past escaped's limit, so that it still says "..." */
	memcpy(buf, s, n);
	buf[n] = '\0';
	return escaped(buf, out);
}

/* on_node reports whether the plugin runs on a compute node (slurmstepd, slurmd, the job
 * prolog/epilog), where a failed callback fails the job's launch, rather than in the user's
 * own sbatch/srun/salloc, where it fails the user's command with a message. A context that
 * cannot be told counts as a node's. */
static int on_node(void)
{
	spank_context_t ctx = spank_context();

	return ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR;
}

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

/* parse_spec reads MIN:MAX[:GPUS] into d; d is left as it was on error, and why says what is
 * wrong. */
static int parse_spec(const char *spec, struct declaration *d, char *why, size_t whylen)
{
	char buf[64], *fields[4], esc[ESCAPED_LEN];
	struct declaration parsed = *d;
	int n = 0;
	char *p;

	if (!spec || strlen(spec) >= sizeof(buf)) {
		snprintf(why, whylen, "\"%s\": want MIN:MAX[:GPUS_PER_WORKER], e.g. --elastic=2:8:1", escaped(spec, esc));
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
		snprintf(why, whylen, "\"%s\": want MIN:MAX[:GPUS_PER_WORKER], e.g. --elastic=2:8:1", escaped(spec, esc));
		return -1;
	}
	if (parse_uint(fields[0], 1, max_workers_cap, &parsed.min)) {
		snprintf(why, whylen, "MIN \"%s\" must be a whole number from 1 to %u", escaped(fields[0], esc), max_workers_cap);
		return -1;
	}
	if (parse_uint(fields[1], 1, max_workers_cap, &parsed.max)) {
		snprintf(why, whylen, "MAX \"%s\" must be a whole number from 1 to %u", escaped(fields[1], esc), max_workers_cap);
		return -1;
	}
	if (parsed.max < parsed.min) {
		snprintf(why, whylen, "MAX %u is below MIN %u", parsed.max, parsed.min);
		return -1;
	}
	parsed.gpus = 1;
	if (n == 3 && parse_uint(fields[2], 1, 64, &parsed.gpus)) {
		snprintf(why, whylen, "GPUS_PER_WORKER \"%s\" must be a whole number from 1 to 64", escaped(fields[2], esc));
		return -1;
	}
	parsed.set = 1;
	*d = parsed;
	return 0;
}

/* parse_pools reads a comma-separated pool list. */
static int parse_pools(const char *list, struct declaration *d, char *why, size_t whylen)
{
	const char *p = list;
	char esc[ESCAPED_LEN];

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
			d->npools = 0;
			snprintf(why, whylen, "pool \"%s\" is not a pool name", escaped_n(p, len, esc));
			return -1;
		}
		if (d->npools == MAX_POOLS) {
			d->npools = 0;
			snprintf(why, whylen, "at most %d pools", MAX_POOLS);
			return -1;
		}
		memcpy(d->pools[d->npools], p, len);
		d->pools[d->npools][len] = '\0';
		for (i = 0; i < d->npools; i++) {
			if (strcmp(d->pools[i], d->pools[d->npools]) == 0) {
				snprintf(why, whylen, "pool %s is listed twice", d->pools[i]);
				d->npools = 0;
				return -1;
			}
		}
		if (*allowed_pools && !in_list(allowed_pools, d->pools[d->npools])) {
			snprintf(why, whylen, "unknown pool %s; elastic workers may use: %s", d->pools[d->npools], allowed_pools);
			d->npools = 0;
			return -1;
		}
		d->npools++;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* refuse says why an option's value is unusable. In the user's own command (remote is 0 and
 * the plugin is not on a node) that fails the command; on a node the value came through the
 * job's environment, and failing there would fail the job's launch: the job runs as a plain
 * job instead. */
static int refuse(int remote, const char *what, const char *why)
{
	if (remote || on_node()) {
		slurm_error("elastic: invalid %s: %s; the job runs as a plain job, not an elastic one", what, why);
		remote_invalid = 1;
		return 0;
	}
	slurm_error("elastic: invalid %s: %s", what, why);
	return -1;
}

static int opt_elastic(int val, const char *optarg, int remote)
{
	char why[512];

	(void)val;
	if (parse_spec(optarg, &decl, why, sizeof(why)) < 0)
		return refuse(remote, "--elastic", why);
	return 0;
}

static int opt_pools(int val, const char *optarg, int remote)
{
	char why[512], esc[ESCAPED_LEN];

	(void)val;
	if (!optarg || strlen(optarg) >= sizeof(pools_arg)) {
		snprintf(why, sizeof(why), "\"%s\": the list is longer than %zu characters", escaped(optarg, esc),
			 sizeof(pools_arg) - 1);
		return refuse(remote, "--elastic-pools", why);
	}
	/* Checked in init_post_opt, once the plugstack's allowed pools are known for sure. */
	strcpy(pools_arg, optarg);
	pools_given = 1;
	return 0;
}

static int opt_value(int val, const char *optarg, int remote)
{
	char why[512], esc[ESCAPED_LEN];
	double v;

	(void)val;
	if (parse_value(optarg, &v) < 0) {
		snprintf(why, sizeof(why), "\"%s\": want what a million samples are worth in the pools' price unit, "
			 "a number above 0 and at most 1000000000, e.g. --elastic-value=2.5", escaped(optarg, esc));
		return refuse(remote, "--elastic-value", why);
	}
	decl.value = v;
	value_given = 1;
	return 0;
}

static int opt_batch(int val, const char *optarg, int remote)
{
	char why[512], esc[ESCAPED_LEN];

	(void)val;
	if (!optarg || strlen(optarg) >= sizeof(batch_arg)) {
		snprintf(why, sizeof(why), "\"%s\": want GLOBAL[:PER_GPU], e.g. --elastic-max-batch=1024:32", escaped(optarg, esc));
		return refuse(remote, "--elastic-max-batch", why);
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
	char buf[64], *colon, esc[ESCAPED_LEN];
	unsigned devices_max = d->max * d->gpus, devices_min = d->min * d->gpus;

	if (strlen(arg) >= sizeof(buf)) {
		snprintf(why, whylen, "\"%s\": want GLOBAL[:PER_GPU], e.g. --elastic-max-batch=1024:32", escaped(arg, esc));
		return -1;
	}
	strcpy(buf, arg);
	colon = strchr(buf, ':');
	if (colon)
		*colon++ = '\0';
	if (parse_uint(buf, 1, MAX_BATCH, &d->max_batch)) {
		snprintf(why, whylen, "GLOBAL \"%s\" must be a whole number from 1 to %u: the largest global batch "
			 "(samples per step over every GPU), e.g. --elastic-max-batch=1024:32", escaped(buf, esc), MAX_BATCH);
		return -1;
	}
	if (colon) {
		if (parse_uint(colon, 1, d->max_batch, &d->batch_per_gpu)) {
			snprintf(why, whylen, "PER_GPU \"%s\" must be a whole number from 1 to GLOBAL %u", escaped(colon, esc), d->max_batch);
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

/* printable_path reports whether v is an absolute path of printable ASCII shorter than n. */
static int printable_path(const char *v, size_t n)
{
	const char *c;

	if (*v != '/' || strlen(v) >= n)
		return 0;
	for (c = v; *c; c++)
		if (*c < 0x20 || *c >= 0x7f || *c == '"' || *c == '\\')
			return 0;
	return 1;
}

/* valid_pool_list reports whether v is a comma-separated list of pool names that fits. */
static int valid_pool_list(const char *v)
{
	const char *p = v;

	if (strlen(v) >= sizeof(allowed_pools))
		return 0;
	while (1) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		if (!valid_name(p, len))
			return 0;
		if (!comma)
			return 1;
		p = comma + 1;
	}
}

/* read_args applies the plugstack.conf arguments over the defaults. */
static int read_args(int ac, char **av)
{
	char esc[ESCAPED_LEN];
	int i;

	strcpy(state_dir, DEFAULT_STATE_DIR);
	strcpy(scancel_path, DEFAULT_SCANCEL);
	allowed_pools[0] = '\0';
	max_workers_cap = 64;
	rdzv_port_base = 29400;
	for (i = 0; i < ac; i++) {
		const char *v;
		if (!av[i] || (v = strchr(av[i], '=')) == NULL) {
			slurm_error("elastic: plugstack argument \"%s\" is not NAME=VALUE", escaped(av[i], esc));
			return -1;
		}
		v++;
		if (strncmp(av[i], "dir=", 4) == 0 && printable_path(v, sizeof(state_dir))) {
			strcpy(state_dir, v);
		} else if (strncmp(av[i], "pools=", 6) == 0 && valid_pool_list(v)) {
			strcpy(allowed_pools, v);
		} else if (strncmp(av[i], "max_workers=", 12) == 0 && parse_uint(v, 1, 100000, &max_workers_cap) == 0) {
		} else if (strncmp(av[i], "rdzv_port_base=", 15) == 0 && parse_uint(v, 1024, 55535, &rdzv_port_base) == 0) {
		} else if (strncmp(av[i], "scancel=", 8) == 0 && printable_path(v, sizeof(scancel_path))) {
			strcpy(scancel_path, v);
		} else {
			slurm_error("elastic: bad plugstack argument \"%s\"", escaped(av[i], esc));
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	struct spank_option *o;

	memset(&decl, 0, sizeof(decl));
	decl.gpus = 1;
	pools_given = value_given = batch_given = 0;
	remote_invalid = config_invalid = 0;
	if (read_args(ac, av) < 0) {
		if (!on_node())
			return -1;
		/* The options are still registered, so that their values are read and dropped. */
		slurm_error("elastic: plugstack.conf's arguments are unusable: no elastic job is recorded on this node");
		config_invalid = 1;
	}
	for (o = elastic_options; o->name; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("elastic: cannot register --%s", o->name);
			if (!on_node())
				return -1;
			config_invalid = 1;
		}
	}
	return 0;
}

/* The environment contract of a main job: every name remote_batch may set. */
static const char *const contract_vars[] = {
	"ELASTIC_ROLE", "ELASTIC_JOB_ID", "ELASTIC_MIN", "ELASTIC_MAX", "ELASTIC_NNODES",
	"ELASTIC_MAX_BATCH", "ELASTIC_BATCH_PER_DEVICE", "ELASTIC_GPUS_PER_WORKER",
	"ELASTIC_RDZV_ENDPOINT", "ELASTIC_REPORT_DIR", "ELASTIC_HOSTS_FILE", NULL
};

/* clear_contract removes the contract from the job's environment: a job that is not recorded
 * must not look elastic to its own script, half set or set by the user. */
static void clear_contract(spank_t sp)
{
	const char *const *v;

	for (v = contract_vars; *v; v++)
		spank_unsetenv(sp, *v);
}

static int set_env(spank_t sp, const char *name, const char *value)
{
	spank_err_t err = spank_setenv(sp, name, value, 1);

	if (err != ESPANK_SUCCESS) {
		slurm_error("elastic: cannot set %s in the job's environment: %s", name, spank_strerror(err));
		return -1;
	}
	return 0;
}

/* open_dir opens path, which must be a directory and not a link, without following one. */
static int open_dir(const char *path)
{
	return open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* mkdir_owned creates path (or accepts it as a directory that is not a link) and sets its
 * owner and mode through a descriptor, so no link put in its place is followed. */
static int mkdir_owned(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	int fd;

	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		slurm_error("elastic: mkdir %s: %m", path);
		return -1;
	}
	if ((fd = open_dir(path)) < 0) {
		slurm_error("elastic: %s is not a directory: %m", path);
		return -1;
	}
	if (fchown(fd, uid, gid) < 0 || fchmod(fd, mode) < 0) {
		slurm_error("elastic: chown/chmod %s: %m", path);
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* make_reports creates DIR/jobs/JOBID/reports for the job's user. A requeued job finds its own
 * reports there and keeps them: whatever the user left inside is the user's, and nothing here
 * reads or follows it. One that belongs to another user (a job id used again after slurmctld
 * lost its state) is moved aside, not given to this job's user. */
static int make_reports(const char *job_dir, uid_t uid, gid_t gid)
{
	char path[PATH_MAX], aside[PATH_MAX];
	struct stat st;

	snprintf(path, sizeof(path), "%s/reports", job_dir);
	if (lstat(path, &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != uid)) {
		snprintf(aside, sizeof(aside), "%s/.stale-reports-%lld-%d", job_dir, (long long)time(NULL), (int)getpid());
		if (rename(path, aside) < 0) {
			slurm_error("elastic: moving aside %s, not this job's: %m", path);
			return -1;
		}
		slurm_info("elastic: %s was not this job's user's directory: moved to %s", path, aside);
	}
	return mkdir_owned(path, uid, gid, 0700);
}

/* json_safe reports whether s can go between a JSON string's quotes as it is. */
static int json_safe(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s >= 0x7f || *s == '"' || *s == '\\')
			return 0;
	return 1;
}

/* record writes the declaration for elasticd: a temporary file renamed into place, so elasticd
 * never reads half of one. Its strings (pools, endpoint) were validated as names; json_safe
 * checks it again, as the last thing before root writes them. */
static int record(uint32_t jobid, uid_t uid, gid_t gid, const char *endpoint)
{
	char dir[1200], path[PATH_MAX], tmp[PATH_MAX], body[4096];
	int fd, i, n;
	size_t len;
	ssize_t w;
	/* In millionths, printed without %f, whose decimal point follows the locale. */
	unsigned long long micros = (unsigned long long)(decl.value * 1e6 + 0.5);

	if (!json_safe(endpoint)) {
		slurm_error("elastic: rendezvous endpoint not recordable");
		return -1;
	}
	for (i = 0; i < decl.npools; i++) {
		if (!json_safe(decl.pools[i])) {
			slurm_error("elastic: pool %d not recordable", i);
			return -1;
		}
	}
	n = snprintf(body, sizeof(body), "{\"version\":1,\"job_id\":%u,\"uid\":%u,\"gid\":%u,\"min_workers\":%u,"
		     "\"max_workers\":%u,\"gpus_per_worker\":%u,\"value_per_million_samples\":%llu.%06llu,"
		     "\"max_batch\":%u,\"batch_per_device\":%u,\"rdzv_endpoint\":\"%s\",\"pools\":[",
		     jobid, (unsigned)uid, (unsigned)gid, decl.min, decl.max, decl.gpus, micros / 1000000, micros % 1000000,
		     decl.max_batch, decl.batch_per_gpu, endpoint);
	for (i = 0; i < decl.npools && n > 0 && (size_t)n < sizeof(body); i++)
		n += snprintf(body + n, sizeof(body) - n, "%s\"%s\"", i ? "," : "", decl.pools[i]);
	if (n > 0 && (size_t)n < sizeof(body))
		n += snprintf(body + n, sizeof(body) - n, "],\"recorded\":%lld}\n", (long long)time(NULL));
	if (n <= 0 || (size_t)n >= sizeof(body)) {
		slurm_error("elastic: declaration of job %u does not fit %zu bytes", jobid, sizeof(body));
		return -1;
	}
	len = (size_t)n;

	snprintf(dir, sizeof(dir), "%s/jobs", state_dir);
	if (mkdir_owned(state_dir, 0, 0, 0755) < 0 || mkdir_owned(dir, 0, 0, 0755) < 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s/jobs/%u", state_dir, jobid);
	if (mkdir_owned(dir, 0, 0, 0755) < 0 || make_reports(dir, uid, gid) < 0)
		return -1;

	snprintf(tmp, sizeof(tmp), "%s/.declaration.json.tmp", dir);
	snprintf(path, sizeof(path), "%s/declaration.json", dir);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0) {
		slurm_error("elastic: writing %s: %m", tmp);
		return -1;
	}
	w = write(fd, body, len);
	if (w != (ssize_t)len || close(fd) != 0 || rename(tmp, path) < 0) {
		slurm_error("elastic: writing %s: %s", path, w == (ssize_t)len ? strerror(errno) : "short write");
		if (w != (ssize_t)len)
			close(fd);
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* give_contract sets the main job's environment contract (see elasticd/README.md). */
static int give_contract(spank_t sp, uint32_t jobid, const char *endpoint)
{
	char buf[PATH_MAX];

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
	} else {
		/* Not declared: none the user set may stand in for one. */
		spank_unsetenv(sp, "ELASTIC_MAX_BATCH");
		spank_unsetenv(sp, "ELASTIC_BATCH_PER_DEVICE");
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

/* remote_batch records the declaration of a main job and gives it the environment contract;
 * on failure it leaves neither (the job runs as a plain one). */
static int remote_batch(spank_t sp)
{
	uint32_t jobid;
	uid_t uid;
	gid_t gid;
	char host[256], endpoint[300];

	if (spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
		slurm_error("elastic: cannot read the job's id and owner");
		return -1;
	}
	if (gethostname(host, sizeof(host)) < 0 || !valid_name(host, strnlen(host, sizeof(host)))) {
		slurm_error("elastic: this host's name is not usable as a rendezvous endpoint");
		return -1;
	}
	snprintf(endpoint, sizeof(endpoint), "%s:%u", host, rdzv_port_base + jobid % 10000);
	/* The environment first: a declaration elasticd acts on belongs to a job that has its
	 * contract. */
	if (give_contract(sp, jobid, endpoint) < 0 || record(jobid, uid, gid, endpoint) < 0) {
		clear_contract(sp);
		return -1;
	}
	return 0;
}

/* not_recorded makes a batch step that asked for --elastic a plain job: no contract in its
 * environment, and no declaration left from an earlier run of it (a requeued job), which
 * elasticd would act on. */
static void not_recorded(spank_t sp)
{
	char path[PATH_MAX];
	uint32_t jobid;
	int fd;

	clear_contract(sp);
	if (config_invalid || spank_get_item(sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS)
		return;
	snprintf(path, sizeof(path), "%s/jobs/%u", state_dir, jobid);
	if ((fd = open_dir(path)) < 0)
		return;
	if (unlinkat(fd, "declaration.json", 0) == 0)
		slurm_info("elastic: job %u: removed the declaration of its earlier run", jobid);
	close(fd);
}

/* is_worker reports whether elasticd submitted this job as a worker, with its contract set. */
static int is_worker(spank_t sp)
{
	char role[16] = "";

	return spank_getenv(sp, "ELASTIC_ROLE", role, sizeof(role)) == ESPANK_SUCCESS && strcmp(role, "worker") == 0;
}

/* needs_elastic checks that an option that refines --elastic came with it. */
static int needs_elastic(int given, const char *what)
{
	if (!given || decl.set)
		return 0;
	if (on_node()) {
		slurm_error("elastic: %s without --elastic=MIN:MAX[:GPUS_PER_WORKER]; the job runs as a plain job", what);
		remote_invalid = 1;
		return 0;
	}
	slurm_error("elastic: %s needs --elastic=MIN:MAX[:GPUS_PER_WORKER]", what);
	return -1;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char why[2300];
	uint32_t step;
	int node = on_node() || spank_remote(sp);

	(void)ac;
	(void)av;
	if (needs_elastic(pools_given, "--elastic-pools") || needs_elastic(value_given, "--elastic-value") ||
	    needs_elastic(batch_given, "--elastic-max-batch"))
		return -1;
	if (decl.set && pools_given && parse_pools(pools_arg, &decl, why, sizeof(why)) < 0) {
		if (refuse(node, "--elastic-pools", why) < 0)
			return -1;
	} else if (decl.set && batch_given && parse_batch(batch_arg, &decl, why, sizeof(why)) < 0) {
		if (refuse(node, "--elastic-max-batch", why) < 0)
			return -1;
	}
	if (!decl.set && !remote_invalid)
		return 0; /* not an elastic job */
	if (spank_remote(sp) != 1)
		return 0;
	if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step != BATCH_STEP)
		return 0; /* steps inherit the batch step's environment */
	if (is_worker(sp)) {
		slurm_info("elastic: the job has ELASTIC_ROLE=worker: an elastic worker, not recorded as a main job");
		return 0;
	}
	if (config_invalid || remote_invalid) {
		/* What was wrong is logged above, where it was found. */
		not_recorded(sp);
		return 0;
	}
	/* A failure here must not fail the job's launch (slurmd would count it against the
	 * node): the job runs, but not as an elastic one. */
	if (remote_batch(sp) < 0) {
		slurm_error("elastic: job not recorded; it runs as a plain job, without elasticd");
		not_recorded(sp);
	}
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
	char *envp[] = { "PATH=/usr/bin:/bin", NULL, NULL };
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
	for (i = 0; i < 3000; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				slurm_error("elastic: job %u ended; %s %s %s failed (status 0x%x)", jobid, scancel_path, name, user, status);
			else
				slurm_info("elastic: job %u ended; its worker jobs are cancelled", jobid);
			return;
		}
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	slurm_error("elastic: job %u ended; %s did not finish in 30 s", jobid, scancel_path);
}

/* The job epilog runs as root on each node of a job that ended or is requeued, whether elasticd
 * runs or not: a main job's workers end with it. It never fails: an epilog error drains the
 * node. */
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
