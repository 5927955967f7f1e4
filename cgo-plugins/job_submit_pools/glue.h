/*
 * C side of the job_submit/pools plugin, shared by plugin.c and the Go code.
 * Strings handed to slurmctld must come from Slurm's own allocator (slurm_xstrdup):
 * slurmctld xfree()s them, and a malloc'd pointer there crashes it. Strings taken from it go
 * back with slurm_xfree.
 */
#ifndef SLURMBRIDGE_JOB_SUBMIT_POOLS_GLUE_H
#define SLURMBRIDGE_JOB_SUBMIT_POOLS_GLUE_H

#include <stdint.h>
#include <slurm/slurm.h>

enum pools_log_level { POOLS_LOG_ERROR = 0, POOLS_LOG_INFO = 1, POOLS_LOG_VERBOSE = 2, POOLS_LOG_DEBUG = 3 };

/* The job_desc fields routing reads, copied by plugin.c; the Go side sees nothing else of the
 * job. A decision is a function of these, the loaded pools config and slurmctld's settings,
 * which is what lets plugin.c answer a repeated request from its decision cache without
 * entering Go. NULL strings stay NULL (Go reads them as ""); numbers keep Slurm's NO_VAL. */
enum pools_request_string {
	POOLS_PARTITION,
	POOLS_TRES_PER_JOB,
	POOLS_TRES_PER_NODE,
	POOLS_TRES_PER_SOCKET,
	POOLS_TRES_PER_TASK,
	POOLS_COMMENT,
	POOLS_FEATURES,
	POOLS_QOS,
	POOLS_ACCOUNT, /* --account; NULL for the user's default account */
	POOLS_STRINGS
};
enum pools_request_number {
	POOLS_MIN_CPUS,
	POOLS_CPUS_PER_TASK,
	POOLS_PN_MIN_CPUS,
	POOLS_PN_MIN_MEMORY,
	POOLS_MIN_NODES,
	POOLS_MAX_NODES,
	POOLS_NUM_TASKS,
	POOLS_NTASKS_PER_NODE,
	POOLS_SOCKETS_PER_NODE,
	POOLS_BATCH,   /* job_desc->script != NULL */
	POOLS_REQUEUE,
	POOLS_UID,     /* the submitting user: only in log lines today, kept in the key all the same */
	POOLS_HET_JOB, /* 1: a component of a heterogeneous job (het_job_offset set; het_job_id in a record) */
	POOLS_OPEN_MODE, /* --open-mode: OPEN_MODE_APPEND, OPEN_MODE_TRUNCATE, or 0 for the cluster's */
	/* slurmctld's state the Go side reads through the functions below: part of the cache key
	 * so that a reconfigure or a new debug level never meets an answer made under the old.
	 * They stay last: plugin.c compares them as one run. */
	POOLS_JOB_REQUEUE,
	POOLS_SLURM_USER,
	POOLS_LOG_LEVEL,
	POOLS_NUMBERS
};
struct pools_request {
	const char *s[POOLS_STRINGS];
	uint64_t n[POOLS_NUMBERS];
};

/* What Go decided for one request. The strings are malloc'd by Go (NULL for none) and belong
 * to plugin.c from then on. cacheable: the same request under the same config gets the same
 * answer and wrote no log line (a refusal is logged each time, so it is never cached). */
struct pools_outcome {
	int rc;
	char *partition;
	char *message;
	int cacheable;
	/* 1: set job_desc->open_mode to OPEN_MODE_APPEND, so that a rerun after a requeue adds to
	 * the job's output files instead of truncating them. */
	int append_output;
};

/* Replace job_desc->partition, freeing the old list (a named list the plugin narrowed). */
void pools_set_partition(job_desc_msg_t *desc, const char *partition);
/* Set *err_msg (shown to the user by sbatch/srun/salloc) unless another plugin already did. */
void pools_set_err_msg(char **err_msg, const char *msg);
/* Log through slurmctld's own log. */
void pools_log(int level, const char *msg);
/* Whether slurmctld writes a line of that level anywhere. */
int pools_log_enabled(int level);
/* slurm.conf's JobRequeue (0 or 1) and SlurmUser's uid from slurmctld's own slurm_conf, read in
 * memory; -1 when slurm_conf was not found in the process. */
int pools_job_requeue(void);
long long pools_slurm_user_id(void);
/* Drop every cached decision: called after the Go side swapped its pools config. */
void pools_cache_invalidate(void);
/* slurm.conf's SlurmctldParameters as slurmctld read it (NULL when unset or unknown). */
const char *pools_slurmctld_params(void);

#endif
