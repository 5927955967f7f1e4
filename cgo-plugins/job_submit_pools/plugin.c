/*
 * job_submit/pools: slurmctld's entry points. They copy the job_desc fields routing reads into
 * a struct pools_request, answer from the decision cache when that very request was decided
 * before under the same config, and otherwise ask Go (pools.go), which asks bridge/pools where
 * the job goes; then they write the answer into job_desc.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "decision_cache.h"
#include "glue.h"
#include "job_record.h"
#include "_cgo_export.h"

/* Data symbols slurmctld's plugin loader resolves. They live in a .c file because cgo does not
 * allow definitions in the preamble of a file with //export. plugin_version must equal the
 * running slurmctld's SLURM_VERSION_NUMBER (major, minor and micro): build against the site's
 * own headers. */
const char plugin_name[] = "slurmbridge resource pools";
const char plugin_type[] = "job_submit/pools";
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

/* Exported by libslurmfull, which slurmctld has loaded; not in the public headers. The same
 * names and signatures from 22.05 to 26.05 (src/common/xmalloc.h, src/common/xstring.h). */
extern char *slurm_xstrdup(const char *str);
extern void slurm_xfree(void **item);
extern void slurm_info(const char *fmt, ...);
extern void slurm_error(const char *fmt, ...);
extern void slurm_verbose(const char *fmt, ...);
extern void slurm_debug(const char *fmt, ...);
/* The most verbose level any of slurmctld's logs writes (src/common/log.c, exported under this
 * name from 22.05 to 26.05): a plain read, no lock. */
extern int slurm_get_log_level(void);

/* slurmctld's own configuration: the global slurm_conf of libslurmfull (src/common/read_config.c,
 * exported under that name from 22.05 to 26.05; its type slurm_conf_t is public in slurm.h). It
 * is looked up at init rather than linked, so a release without it leaves the plugin loadable
 * and says so in the log. Only read, and only fields the headers of this very release lay out. */
static const slurm_conf_t *ctld_conf;

/* Where this release keeps the fields of a job record that job_modify reads; NULL when
 * job_record_layout.h has none for it. */
static const struct pools_job_layout *job_layout;

int pools_job_requeue(void)
{
	return ctld_conf ? (ctld_conf->job_requeue != 0) : -1;
}

long long pools_slurm_user_id(void)
{
	return ctld_conf ? (long long) ctld_conf->slurm_user_id : -1;
}

const char *pools_slurmctld_params(void)
{
	return ctld_conf ? ctld_conf->slurmctld_params : NULL;
}

/* Go cannot export a function named init. slurmctld setenv()s SLURM_CONF before it loads
 * plugins, which C's getenv sees and Go's os.Getenv (a copy taken at process start) does not. */
int init(void)
{
	ctld_conf = dlsym(RTLD_DEFAULT, "slurm_conf");
	if (!ctld_conf)
		slurm_error("job_submit/pools: slurm_conf not found in slurmctld: JobRequeue counts as 0 for jobs asking for the borrow QOS");
	job_layout = pools_job_layout_for(SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER),
					  SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
					  SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
	if (!job_layout)
		slurm_error("job_submit/pools: Slurm %d.%02d.%d is not in job_record_layout.h: each scontrol update of a job is judged by its own fields, not against the job as slurmctld holds it (docs/adding-a-release.md; slurmbridge-doctor says so too)",
			    (int) SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), (int) SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
			    (int) SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
	pools_cache_init();
	return pools_go_init(getenv("SLURMBRIDGE_POOLS_CONFIG"), getenv("SLURM_CONF"));
}

int fini(void)
{
	pools_go_fini();
	pools_cache_fini();
	return SLURM_SUCCESS;
}

/* What each submission costs slurmctld's RPC thread in this plugin, crossing into Go included,
 * as the thread sees it (waiting for a Go P, if any, counts). Every SUBMIT_WINDOW calls one log
 * line gives the window's mean and maximum and how many the decision cache answered: an admin
 * can see the plugin's share of a submission next to sdiag's RPC times, and
 * bench/plugin-overhead.sh reads it. */
#define SUBMIT_WINDOW 1000
static _Atomic uint64_t submit_calls, submit_window_ns, submit_window_max_ns, submit_window_hits;

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void account_submit(uint64_t ns, int cache_hit)
{
	uint64_t max = atomic_load(&submit_window_max_ns), n, total, hits;

	atomic_fetch_add(&submit_window_ns, ns);
	if (cache_hit)
		atomic_fetch_add(&submit_window_hits, 1);
	while (ns > max && !atomic_compare_exchange_weak(&submit_window_max_ns, &max, ns))
		;
	n = atomic_fetch_add(&submit_calls, 1) + 1;
	if (n % SUBMIT_WINDOW)
		return;
	/* Calls racing with this reset land in the next window: a figure, not a ledger. */
	total = atomic_exchange(&submit_window_ns, 0);
	max = atomic_exchange(&submit_window_max_ns, 0);
	hits = atomic_exchange(&submit_window_hits, 0);
	slurm_info("job_submit/pools: submissions %llu-%llu took %.1f us each in the plugin on average, at most %.1f us; %llu answered from the decision cache",
		   (unsigned long long) (n - SUBMIT_WINDOW + 1), (unsigned long long) n,
		   total / 1e3 / SUBMIT_WINDOW, max / 1e3, (unsigned long long) hits);
}

/* The settings of slurmctld that the Go side reads while deciding. */
static void read_settings(uint64_t n[POOLS_NUMBERS])
{
	n[POOLS_JOB_REQUEUE] = (uint64_t) pools_job_requeue();
	n[POOLS_SLURM_USER] = (uint64_t) pools_slurm_user_id();
	n[POOLS_LOG_LEVEL] = (uint64_t) slurm_get_log_level();
}

static void request_from(const job_desc_msg_t *d, uint32_t uid, struct pools_request *r)
{
	memset(r, 0, sizeof(*r));
	r->s[POOLS_PARTITION] = d->partition;
	r->s[POOLS_TRES_PER_JOB] = d->tres_per_job;
	r->s[POOLS_TRES_PER_NODE] = d->tres_per_node;
	r->s[POOLS_TRES_PER_SOCKET] = d->tres_per_socket;
	r->s[POOLS_TRES_PER_TASK] = d->tres_per_task;
	r->s[POOLS_COMMENT] = d->comment;
	r->s[POOLS_FEATURES] = d->features;
	r->s[POOLS_QOS] = d->qos;
	r->s[POOLS_ACCOUNT] = d->account;
	r->n[POOLS_MIN_CPUS] = d->min_cpus;
	r->n[POOLS_CPUS_PER_TASK] = d->cpus_per_task;
	r->n[POOLS_PN_MIN_CPUS] = d->pn_min_cpus;
	r->n[POOLS_PN_MIN_MEMORY] = d->pn_min_memory;
	r->n[POOLS_MIN_NODES] = d->min_nodes;
	r->n[POOLS_MAX_NODES] = d->max_nodes;
	r->n[POOLS_NUM_TASKS] = d->num_tasks;
	r->n[POOLS_NTASKS_PER_NODE] = d->ntasks_per_node;
	r->n[POOLS_SOCKETS_PER_NODE] = d->sockets_per_node;
	/* slurmctld makes a job a batch job exactly when its job_desc carries a script. */
	r->n[POOLS_BATCH] = d->script != NULL;
	r->n[POOLS_REQUEUE] = d->requeue;
	r->n[POOLS_UID] = uid;
	/* slurmctld sets het_job_offset to each component's index before job_submit, NO_VAL for a
	 * job of one component (proc_req.c, 22.05 to 26.05). On job_modify job_desc carries none:
	 * the record says (job_record.c). */
	r->n[POOLS_HET_JOB] = d->het_job_offset != NO_VAL;
	r->n[POOLS_OPEN_MODE] = d->open_mode;
	read_settings(r->n);
}

/* Writes Go's answer into job_desc; the strings stay the caller's. */
static int apply_outcome(job_desc_msg_t *desc, char **err_msg, const struct pools_outcome *out)
{
	if (out->partition)
		pools_set_partition(desc, out->partition);
	if (out->message)
		pools_set_err_msg(err_msg, out->message);
	if (out->append_output)
		desc->open_mode = OPEN_MODE_APPEND;
	return out->rc;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	uint64_t t0 = monotonic_ns(), settings[POOLS_NUMBERS];
	/* Read before Go loads its config: an answer decided under a config swapped out meanwhile
	 * is stored under the old generation and never served. */
	uint64_t generation = pools_cache_generation();
	struct pools_request req;
	struct pools_cache_key key;
	struct pools_outcome out = { 0 };
	int rc, keyed, hit = 0;

	request_from(job_desc, submit_uid, &req);
	keyed = pools_cache_key(&req, &key);
	if (keyed && pools_cache_apply(&key, job_desc, err_msg, &rc)) {
		hit = 1;
	} else {
		pools_go_submit(&req, &out);
		rc = apply_outcome(job_desc, err_msg, &out);
		/* The partition string req pointed to may have just been freed; the key holds a copy. */
		req.s[POOLS_PARTITION] = NULL;
		/* A debug level or JobRequeue that changed while Go decided: the key may not say what
		 * the answer was made under. */
		read_settings(settings);
		if (!keyed || memcmp(settings + POOLS_JOB_REQUEUE, req.n + POOLS_JOB_REQUEUE,
				     sizeof(uint64_t) * (POOLS_NUMBERS - POOLS_JOB_REQUEUE)))
			out.cacheable = 0;
		pools_cache_store(&key, generation, &out);
	}
	account_submit(monotonic_ns() - t0, hit);
	return rc;
}

/* The job id an update names by number; 25.11 moved it into job_desc's step_id. */
static uint32_t desc_job_id(const job_desc_msg_t *desc)
{
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(25, 11, 0)
	return desc->step_id.job_id;
#else
	return desc->job_id;
#endif
}

/* Set once a job record could not be read: the reason is logged at error level once, not
 * for each update. */
static atomic_int job_unreadable_logged;

/* An update is judged with the job it changes when its record can be read (job_record.h); when
 * it cannot, with the changed fields alone, as the plugin did before it read job records. The
 * decision cache is for submissions only: an update's answer depends on the job. */
static int modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid, char **err_msg)
{
	struct pools_request req;
	struct pools_job job;
	struct pools_outcome out = { 0 };
	const char *unreadable;
	int rc;

	request_from(job_desc, submit_uid, &req);
	unreadable = pools_job_read(job_layout, job_ptr, desc_job_id(job_desc), job_desc->job_id_str,
				    job_desc->user_id, &job);
	if (unreadable && !atomic_exchange(&job_unreadable_logged, 1))
		slurm_error("job_submit/pools: cannot read the record of a job being updated (%s); updates are checked on their changed fields alone",
			    unreadable);
	pools_go_modify(&req, job_desc->account, unreadable ? NULL : &job, &out);
	/* slurmctld applies no open mode an update carries (apply_outcome's is ignored here): a job
	 * lent by this update gets it in its record, which its every launch reads. */
	if (out.append_output && !out.rc && !unreadable && pools_job_append_output(job_layout, job_ptr))
		slurm_info("job_submit/pools: job %u: output files are appended to from now on, so a rerun after a requeue keeps the first run's output",
			   job.job_id);
	rc = apply_outcome(job_desc, err_msg, &out);
	free(out.partition);
	free(out.message);
	return rc;
}

/* job_ptr is a job_record_t *, slurmctld-internal: only job_record.c looks inside, through
 * job_record_layout.h. 23.02 added err_msg to job_modify (src/interfaces/job_submit.c); 22.05
 * has none, and a rejection's reason goes only to the log and the errno. The headers decide
 * here, at build time; Go asks slurm.Release.ModifyRefusalReachesUser for the same fact. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid, char **err_msg)
{
	return modify(job_desc, job_ptr, submit_uid, err_msg);
}
#else
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
{
	return modify(job_desc, job_ptr, submit_uid, NULL);
}
#endif

/* The old string came from Slurm's allocator (unpacked from the RPC or set by an earlier
 * plugin), so Slurm's xfree releases it. */
void pools_set_partition(job_desc_msg_t *desc, const char *partition)
{
	char *old = desc->partition;

	desc->partition = slurm_xstrdup(partition);
	if (old)
		slurm_xfree((void **) &old);
}

void pools_set_err_msg(char **err_msg, const char *msg)
{
	if (err_msg && !*err_msg)
		*err_msg = slurm_xstrdup(msg);
}

/* Slurm's LOG_LEVEL_* (src/common/log.h, the same values from 22.05 to 26.05) of each of ours. */
static int slurm_level(int level)
{
	switch (level) {
	case POOLS_LOG_ERROR:
		return 2;
	case POOLS_LOG_INFO:
		return 3;
	case POOLS_LOG_VERBOSE:
		return 4;
	default:
		return 5;
	}
}

/* Slurm's log functions take slurmctld's log lock even for a message they then drop, and every
 * RPC thread logs under that lock: a line nobody will read must not be built or sent. */
int pools_log_enabled(int level)
{
	return slurm_get_log_level() >= slurm_level(level);
}

void pools_log(int level, const char *msg)
{
	switch (level) {
	case POOLS_LOG_ERROR:
		slurm_error("job_submit/pools: %s", msg);
		break;
	case POOLS_LOG_INFO:
		slurm_info("job_submit/pools: %s", msg);
		break;
	case POOLS_LOG_VERBOSE:
		slurm_verbose("job_submit/pools: %s", msg);
		break;
	default:
		slurm_debug("job_submit/pools: %s", msg);
	}
}
