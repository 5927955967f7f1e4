/*
 * pools_job_read: the fields of slurmctld's job_record_t that job_modify's checks need, read
 * through job_record_layout.h. See job_record.h.
 */
#include <string.h>
#include <slurm/slurm.h>
#include <slurm/slurmdb.h>

#include "job_record.h"

#define NO_VAL_32 0xfffffffeu

/* The table's releases, exported for slurmbridge-doctor, which reads them from this file
 * without loading it: a micro release the table lacks is said before slurmctld loads us. */
__attribute__((visibility("default"), used))
const uint32_t pools_job_layout_releases[] = { POOLS_JOB_LAYOUT_RELEASES };
_Static_assert(sizeof(pools_job_layout_releases) / sizeof(pools_job_layout_releases[0]) ==
		       sizeof(pools_job_layouts) / sizeof(pools_job_layouts[0]),
	       "POOLS_JOB_LAYOUT_RELEASES must list every entry of pools_job_layouts");

const struct pools_job_layout *pools_job_layout_for(int major, int minor, int micro)
{
#if defined(__x86_64__)
	for (size_t i = 0; i < sizeof(pools_job_layouts) / sizeof(pools_job_layouts[0]); i++)
		if (pools_job_layouts[i].major == major && pools_job_layouts[i].minor == minor &&
		    pools_job_layouts[i].micro == micro)
			return &pools_job_layouts[i];
#else
	(void) major;
	(void) minor;
	(void) micro;
#endif
	return NULL;
}

/* An unsigned integer field of 1, 2, 4 or 8 bytes; *ok is cleared for any other size. */
static uint64_t read_uint(const void *base, struct pools_field f, int *ok)
{
	const unsigned char *p = (const unsigned char *) base + f.offset;
	uint8_t u8;
	uint16_t u16;
	uint32_t u32;
	uint64_t u64;

	switch (f.size) {
	case 1:
		memcpy(&u8, p, 1);
		return u8;
	case 2:
		memcpy(&u16, p, 2);
		return u16;
	case 4:
		memcpy(&u32, p, 4);
		return u32;
	case 8:
		memcpy(&u64, p, 8);
		return u64;
	}
	*ok = 0;
	return 0;
}

static const void *read_ptr(const void *base, struct pools_field f, int *ok)
{
	const void *v = NULL;

	if (f.size != sizeof(v)) {
		*ok = 0;
		return NULL;
	}
	memcpy(&v, (const unsigned char *) base + f.offset, sizeof(v));
	return v;
}

/* The job id an update names: job_desc's number, else the leading number of its string ("12",
 * "12_3" for a task of array 12, "12+1" for a component of heterogeneous job 12); 0 for none
 * (from 25.11 a job may be named by its SLUID, "s..."). */
static uint32_t named_job_id(uint32_t desc_job_id, const char *desc_job_id_str)
{
	uint64_t id = 0;

	if (desc_job_id != 0 && desc_job_id != NO_VAL_32)
		return desc_job_id;
	if (!desc_job_id_str)
		return 0;
	for (const char *c = desc_job_id_str; *c >= '0' && *c <= '9'; c++) {
		id = id * 10 + (uint64_t) (*c - '0');
		if (id > UINT32_MAX)
			return 0;
	}
	return (uint32_t) id;
}

const char *pools_job_read(const struct pools_job_layout *layout, const void *job_ptr, uint32_t desc_job_id,
			   const char *desc_job_id_str, uint32_t desc_user_id, struct pools_job *job)
{
	uint32_t named, user_id;
	const struct pools_field *jf, *df;
	const void *details, *mc, *qos;
	uint32_t job_id, array_job_id, het_job_id;
	int ok = 1;

	memset(job, 0, sizeof(*job));
	if (!layout)
		return "this Slurm release is not in job_record_layout.h";
	if (!job_ptr)
		return "slurmctld passed no job record";
	jf = layout->job;
	df = layout->details;
	if (read_uint(job_ptr, jf[POOLS_JOB_MAGIC], &ok) != layout->job_magic || !ok)
		return "the job record's magic cookie is not JOB_MAGIC: its layout differs from job_record_layout.h";
	job_id = read_uint(job_ptr, jf[POOLS_JOB_JOB_ID], &ok);
	array_job_id = read_uint(job_ptr, jf[POOLS_JOB_ARRAY_JOB_ID], &ok);
	het_job_id = read_uint(job_ptr, jf[POOLS_JOB_HET_JOB_ID], &ok);
	user_id = read_uint(job_ptr, jf[POOLS_JOB_USER_ID], &ok);
	if (!ok)
		return "job_record_layout.h gives a job id field an impossible size";
	/* Before any pointer in the record is followed: a field read at the wrong offset could hold
	 * a number, not an address. */
	named = named_job_id(desc_job_id, desc_job_id_str);
	if (named && named != job_id && named != array_job_id && named != het_job_id)
		return "the job record's id is not the updated job's: its layout differs from job_record_layout.h";
	/* Named otherwise (a SLUID), the job is known by its owner: slurmctld sets job_desc's user_id
	 * to the job's before it calls job_modify, unless the update names a user itself. */
	if (!named && (desc_user_id == NO_VAL_32 || desc_user_id != user_id))
		return "the update names no job id, and the job record's user is not job_desc's";
	details = read_ptr(job_ptr, jf[POOLS_JOB_DETAILS], &ok);
	if (!ok)
		return "job_record_layout.h gives job_record.details an impossible size";
	if (!details)
		return "the job record has no details";
	if (read_uint(details, df[POOLS_DETAILS_MAGIC], &ok) != layout->details_magic || !ok)
		return "the job's details' magic cookie is not DETAILS_MAGIC: its layout differs from job_record_layout.h";

	job->job_id = job_id;
	job->req.n[POOLS_HET_JOB] = het_job_id != 0;
	job->req.s[POOLS_PARTITION] = read_ptr(job_ptr, jf[POOLS_JOB_PARTITION], &ok);
	job->req.s[POOLS_TRES_PER_JOB] = read_ptr(job_ptr, jf[POOLS_JOB_TRES_PER_JOB], &ok);
	job->req.s[POOLS_TRES_PER_NODE] = read_ptr(job_ptr, jf[POOLS_JOB_TRES_PER_NODE], &ok);
	job->req.s[POOLS_TRES_PER_SOCKET] = read_ptr(job_ptr, jf[POOLS_JOB_TRES_PER_SOCKET], &ok);
	job->req.s[POOLS_TRES_PER_TASK] = read_ptr(job_ptr, jf[POOLS_JOB_TRES_PER_TASK], &ok);
	job->req.s[POOLS_COMMENT] = read_ptr(job_ptr, jf[POOLS_JOB_COMMENT], &ok);
	job->account = read_ptr(job_ptr, jf[POOLS_JOB_ACCOUNT], &ok);
	/* slurmdb_qos_rec_t is public (slurmdb.h): its name is read through this release's header. */
	qos = read_ptr(job_ptr, jf[POOLS_JOB_QOS_PTR], &ok);
	if (qos)
		job->req.s[POOLS_QOS] = ((const slurmdb_qos_rec_t *) qos)->name;
	job->req.n[POOLS_BATCH] = read_uint(job_ptr, jf[POOLS_JOB_BATCH_FLAG], &ok) != 0;

	job->req.n[POOLS_REQUEUE] = read_uint(details, df[POOLS_DETAILS_REQUEUE], &ok);
	job->req.n[POOLS_MIN_CPUS] = read_uint(details, df[POOLS_DETAILS_MIN_CPUS], &ok);
	job->req.n[POOLS_CPUS_PER_TASK] = read_uint(details, df[POOLS_DETAILS_CPUS_PER_TASK], &ok);
	job->req.n[POOLS_PN_MIN_CPUS] = read_uint(details, df[POOLS_DETAILS_PN_MIN_CPUS], &ok);
	job->req.n[POOLS_PN_MIN_MEMORY] = read_uint(details, df[POOLS_DETAILS_PN_MIN_MEMORY], &ok);
	job->req.n[POOLS_MIN_NODES] = read_uint(details, df[POOLS_DETAILS_MIN_NODES], &ok);
	job->req.n[POOLS_MAX_NODES] = read_uint(details, df[POOLS_DETAILS_MAX_NODES], &ok);
	job->req.n[POOLS_NUM_TASKS] = read_uint(details, df[POOLS_DETAILS_NUM_TASKS], &ok);
	job->req.n[POOLS_NTASKS_PER_NODE] = read_uint(details, df[POOLS_DETAILS_NTASKS_PER_NODE], &ok);
	job->req.n[POOLS_OPEN_MODE] = read_uint(details, df[POOLS_DETAILS_OPEN_MODE], &ok);
	mc = read_ptr(details, df[POOLS_DETAILS_MC_PTR], &ok);
	job->req.n[POOLS_SOCKETS_PER_NODE] = mc ? read_uint(mc, layout->mc_sockets_per_node, &ok) : 0xfffe;
	if (!ok) {
		memset(job, 0, sizeof(*job));
		return "job_record_layout.h gives a field an impossible size";
	}
	return NULL;
}

int pools_job_append_output(const struct pools_job_layout *layout, void *job_ptr)
{
	struct pools_field f;
	unsigned char *details = NULL;
	int ok = 1;

	if (!layout || !job_ptr)
		return 0;
	details = (unsigned char *) read_ptr(job_ptr, layout->job[POOLS_JOB_DETAILS], &ok);
	f = layout->details[POOLS_DETAILS_OPEN_MODE];
	/* job_details_t's open_mode is a uint8_t on every release in the table: a byte, written
	 * only where it still says "the cluster's default". */
	if (!ok || !details || f.size != 1 || details[f.offset] != 0)
		return 0;
	details[f.offset] = OPEN_MODE_APPEND;
	return 1;
}
