/*
 * job_submit/pools: slurmctld's entry points. They only forward to Go (pools.go), which copies
 * the job_desc fields it needs and asks bridge/pools where the job goes.
 */
#include <stdint.h>
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

/* Exported by libslurmfull, which slurmctld has loaded; not in the public headers. */
extern char *slurm_xstrdup(const char *str);
extern void slurm_info(const char *fmt, ...);
extern void slurm_error(const char *fmt, ...);
extern void slurm_verbose(const char *fmt, ...);
extern void slurm_debug(const char *fmt, ...);

/* Go cannot export a function named init. */
int init(void)
{
	return pools_go_init();
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

/* 22.05 passes no err_msg to job_modify: a rejection's reason goes to the log and the errno. */
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
{
	(void) job_ptr; /* job_record_t is slurmctld-internal; we never look inside */
	return pools_go_modify(job_desc, submit_uid);
}

void pools_set_partition(job_desc_msg_t *desc, const char *partition)
{
	desc->partition = slurm_xstrdup(partition);
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
