/*
 * Reading the job an update changes. On job_modify, job_desc holds only the fields being
 * changed; the job's own request is in slurmctld's job_record_t, whose layout no public header
 * declares. job_record_layout.h (generated from each release's source) says where the few
 * fields routing needs lie; pools_job_read checks the record's magic cookies and id before it
 * reads anything through a pointer, so a release whose layout is not in the table, or one that
 * differs from it, is refused instead of read wrongly.
 */
#ifndef SLURMBRIDGE_JOB_SUBMIT_POOLS_JOB_RECORD_H
#define SLURMBRIDGE_JOB_SUBMIT_POOLS_JOB_RECORD_H

#include <stdint.h>

#include "glue.h"
#include "job_record_layout.h"

/* The job as slurmctld keeps it, in job_desc's terms. The strings point into slurmctld's job
 * record: valid while it holds the job lock, that is during the job_modify call. */
struct pools_job {
	/* Partition, the TRES strings, comment, QOS (the name of job_ptr->qos_ptr), the shape
	 * numbers, POOLS_BATCH (batch_flag != 0) and POOLS_REQUEUE (0 or 1, as resolved at
	 * submission). POOLS_UID and slurmctld's settings are left 0. */
	struct pools_request req;
	const char *account;
	uint32_t job_id;
};

/* The layout of release major.minor.micro, NULL when the table has none (or on another
 * architecture than the one it was computed for): Slurm changes job_record_t between micro
 * releases, so no other release's table is tried. */
const struct pools_job_layout *pools_job_layout_for(int major, int minor, int micro);

/* Reads job_ptr (a job_record_t *) into *job. desc_job_id, desc_job_id_str and desc_user_id
 * are job_desc's (scontrol names the job by string, with job_id NO_VAL): the record must be the
 * job they name, a task of that array or a component of that heterogeneous job; where they name
 * no number (a SLUID), the record's user must be desc_user_id. Otherwise nothing is read.
 * Returns NULL on success, or a constant string saying why the record was not read (*job is
 * then zeroed). */
const char *pools_job_read(const struct pools_job_layout *layout, const void *job_ptr, uint32_t desc_job_id,
			   const char *desc_job_id_str, uint32_t desc_user_id, struct pools_job *job);

/* Sets the job's open mode to OPEN_MODE_APPEND in its record, where it is 0 (the cluster's
 * default, which truncates): slurmctld gives the record's open mode to every launch of the job,
 * its rerun after a requeue included, and saves it with the job's state. Only for a job_ptr that
 * pools_job_read has just read without error, while slurmctld holds the job write lock (during
 * job_modify). Returns 1 when it changed the record. */
int pools_job_append_output(const struct pools_job_layout *layout, void *job_ptr);

#endif
