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
/* slurm.conf's SlurmctldParameters as slurmctld read it (NULL when unset or unknown). */
const char *pools_slurmctld_params(void);

#endif
