/*
 * job_submit/pools: slurmctld's entry points. They only forward to Go (pools.go), which copies
 * the job_desc fields it needs and asks bridge/pools where the job goes.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "glue.h"
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

/* slurmctld's own configuration: the global slurm_conf of libslurmfull (src/common/read_config.c,
 * exported under that name from 22.05 to 26.05; its type slurm_conf_t is public in slurm.h). It
 * is looked up at init rather than linked, so a release without it leaves the plugin loadable
 * and says so in the log. Only read, and only fields the headers of this very release lay out. */
static const slurm_conf_t *ctld_conf;

int pools_job_requeue(void)
{
	return ctld_conf ? (ctld_conf->job_requeue != 0) : -1;
}

long long pools_slurm_user_id(void)
{
	return ctld_conf ? (long long) ctld_conf->slurm_user_id : -1;
}

/* Go cannot export a function named init. slurmctld setenv()s SLURM_CONF before it loads
 * plugins, which C's getenv sees and Go's os.Getenv (a copy taken at process start) does not. */
int init(void)
{
	ctld_conf = dlsym(RTLD_DEFAULT, "slurm_conf");
	if (!ctld_conf)
		slurm_error("job_submit/pools: slurm_conf not found in slurmctld: JobRequeue counts as 0 for jobs asking for the borrow QOS");
	return pools_go_init(getenv("SLURMBRIDGE_POOLS_CONFIG"), getenv("SLURM_CONF"));
}

int fini(void)
{
	pools_go_fini();
	return SLURM_SUCCESS;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	return pools_go_submit(job_desc, submit_uid, err_msg);
}

/* job_record_t is slurmctld-internal (not in slurm.h): job_ptr is never looked inside.
 * 23.02 added err_msg to job_modify (src/interfaces/job_submit.c); 22.05 has none, and a
 * rejection's reason goes only to the log and the errno. */
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid, char **err_msg)
{
	(void) job_ptr;
	return pools_go_modify(job_desc, submit_uid, err_msg);
}
#else
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
{
	(void) job_ptr;
	return pools_go_modify(job_desc, submit_uid, NULL);
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
