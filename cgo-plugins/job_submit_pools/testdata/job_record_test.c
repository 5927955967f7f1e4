/*
 * Tests of the job record reader (job_record.c) on its own, built and run by job_record_test.go
 * under AddressSanitizer and UndefinedBehaviorSanitizer. For each release in
 * job_record_layout.h, fake job records are laid out in buffers per that release's table, and
 * what pools_job_read returns is checked, refusals included: a record with another magic, one
 * of another job, one without details, a release without a table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurmdb.h>

#include "../job_record.h"

static int failures;
#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

/* Big enough for every release's records; the reader must stay inside the fields it is given,
 * which AddressSanitizer checks: the buffers are exactly this size on the heap. */
#define RECORD_BYTES 4096
#define NO_VAL_32 0xfffffffeu

static void put(unsigned char *base, struct pools_field f, uint64_t v)
{
	uint8_t u8 = v;
	uint16_t u16 = v;
	uint32_t u32 = v;

	switch (f.size) {
	case 1:
		memcpy(base + f.offset, &u8, 1);
		break;
	case 2:
		memcpy(base + f.offset, &u16, 2);
		break;
	case 4:
		memcpy(base + f.offset, &u32, 4);
		break;
	case 8:
		memcpy(base + f.offset, &v, 8);
		break;
	default:
		CHECK(0, "field of size %u", f.size);
	}
}

static void put_ptr(unsigned char *base, struct pools_field f, const void *p)
{
	CHECK(f.size == sizeof(p), "pointer field of size %u", f.size);
	memcpy(base + f.offset, &p, sizeof(p));
}

struct fake {
	unsigned char *job, *details, *mc;
	slurmdb_qos_rec_t qos;
};

/* A pending GPU batch job 4242 in partition a100, as slurmctld keeps it. */
static void fake_job(struct fake *f, const struct pools_job_layout *l)
{
	f->job = calloc(1, RECORD_BYTES);
	f->details = calloc(1, RECORD_BYTES);
	f->mc = calloc(1, RECORD_BYTES);
	memset(&f->qos, 0, sizeof(f->qos));
	f->qos.name = "borrow-proj-a";

	put(f->job, l->job[POOLS_JOB_MAGIC], l->job_magic);
	put(f->job, l->job[POOLS_JOB_JOB_ID], 4242);
	put(f->job, l->job[POOLS_JOB_ARRAY_JOB_ID], 4240);
	put(f->job, l->job[POOLS_JOB_HET_JOB_ID], 0);
	put(f->job, l->job[POOLS_JOB_USER_ID], 1001);
	put(f->job, l->job[POOLS_JOB_BATCH_FLAG], 2);
	put_ptr(f->job, l->job[POOLS_JOB_PARTITION], "a100,a100-spot");
	put_ptr(f->job, l->job[POOLS_JOB_ACCOUNT], "proj-a");
	put_ptr(f->job, l->job[POOLS_JOB_QOS_PTR], &f->qos);
	put_ptr(f->job, l->job[POOLS_JOB_COMMENT], "class=resnet");
	put_ptr(f->job, l->job[POOLS_JOB_TRES_PER_JOB], NULL);
	put_ptr(f->job, l->job[POOLS_JOB_TRES_PER_NODE], "gres/gpu:a100=2");
	put_ptr(f->job, l->job[POOLS_JOB_TRES_PER_SOCKET], NULL);
	put_ptr(f->job, l->job[POOLS_JOB_TRES_PER_TASK], "cpu=4");
	put_ptr(f->job, l->job[POOLS_JOB_DETAILS], f->details);

	put(f->details, l->details[POOLS_DETAILS_MAGIC], l->details_magic);
	put(f->details, l->details[POOLS_DETAILS_REQUEUE], 1);
	put(f->details, l->details[POOLS_DETAILS_MIN_CPUS], 8);
	put(f->details, l->details[POOLS_DETAILS_CPUS_PER_TASK], 4);
	put(f->details, l->details[POOLS_DETAILS_PN_MIN_CPUS], 4);
	put(f->details, l->details[POOLS_DETAILS_PN_MIN_MEMORY], 16000);
	put(f->details, l->details[POOLS_DETAILS_MIN_NODES], 1);
	put(f->details, l->details[POOLS_DETAILS_MAX_NODES], 2);
	put(f->details, l->details[POOLS_DETAILS_NUM_TASKS], 2);
	put(f->details, l->details[POOLS_DETAILS_NTASKS_PER_NODE], 0xfffe);
	put_ptr(f->details, l->details[POOLS_DETAILS_MC_PTR], f->mc);
	put(f->mc, l->mc_sockets_per_node, 2);
}

static void free_fake(struct fake *f)
{
	free(f->job);
	free(f->details);
	free(f->mc);
}

static int streq(const char *a, const char *b)
{
	return (a == NULL && b == NULL) || (a && b && !strcmp(a, b));
}

static void test_release(const struct pools_job_layout *l)
{
	struct fake f;
	struct pools_job job;
	const char *why;

	fprintf(stderr, "release %d.%02d.%d\n", l->major, l->minor, l->micro);
	/* The table is static in its header: the reader's copy is compared by content. */
	const struct pools_job_layout *found = pools_job_layout_for(l->major, l->minor, l->micro);
	CHECK(found && !memcmp(found, l, sizeof(*l)), "layout of %d.%d.%d not found", l->major, l->minor, l->micro);

	fake_job(&f, l);
	why = pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job);
	CHECK(why == NULL, "read refused: %s", why);
	CHECK(job.job_id == 4242, "job_id %u", job.job_id);
	CHECK(streq(job.req.s[POOLS_PARTITION], "a100,a100-spot"), "partition %s", job.req.s[POOLS_PARTITION]);
	CHECK(streq(job.account, "proj-a"), "account %s", job.account);
	CHECK(streq(job.req.s[POOLS_QOS], "borrow-proj-a"), "qos %s", job.req.s[POOLS_QOS]);
	CHECK(streq(job.req.s[POOLS_COMMENT], "class=resnet"), "comment %s", job.req.s[POOLS_COMMENT]);
	CHECK(job.req.s[POOLS_TRES_PER_JOB] == NULL, "tres_per_job %s", job.req.s[POOLS_TRES_PER_JOB]);
	CHECK(streq(job.req.s[POOLS_TRES_PER_NODE], "gres/gpu:a100=2"), "tres_per_node %s", job.req.s[POOLS_TRES_PER_NODE]);
	CHECK(job.req.s[POOLS_TRES_PER_SOCKET] == NULL, "tres_per_socket %s", job.req.s[POOLS_TRES_PER_SOCKET]);
	CHECK(streq(job.req.s[POOLS_TRES_PER_TASK], "cpu=4"), "tres_per_task %s", job.req.s[POOLS_TRES_PER_TASK]);
	CHECK(job.req.n[POOLS_BATCH] == 1, "batch %llu", (unsigned long long) job.req.n[POOLS_BATCH]);
	CHECK(job.req.n[POOLS_REQUEUE] == 1, "requeue %llu", (unsigned long long) job.req.n[POOLS_REQUEUE]);
	CHECK(job.req.n[POOLS_MIN_CPUS] == 8, "min_cpus %llu", (unsigned long long) job.req.n[POOLS_MIN_CPUS]);
	CHECK(job.req.n[POOLS_CPUS_PER_TASK] == 4, "cpus_per_task");
	CHECK(job.req.n[POOLS_PN_MIN_CPUS] == 4, "pn_min_cpus");
	CHECK(job.req.n[POOLS_PN_MIN_MEMORY] == 16000, "pn_min_memory");
	CHECK(job.req.n[POOLS_MIN_NODES] == 1, "min_nodes");
	CHECK(job.req.n[POOLS_MAX_NODES] == 2, "max_nodes");
	CHECK(job.req.n[POOLS_NUM_TASKS] == 2, "num_tasks");
	CHECK(job.req.n[POOLS_NTASKS_PER_NODE] == 0xfffe, "ntasks_per_node");
	CHECK(job.req.n[POOLS_SOCKETS_PER_NODE] == 2, "sockets_per_node");
	CHECK(job.req.n[POOLS_HET_JOB] == 0, "a job of one component read as a hetjob's");
	/* The open mode: 0, the cluster's default, is set to append; a job's own choice is kept. */
	CHECK(job.req.n[POOLS_OPEN_MODE] == 0, "open_mode %llu", (unsigned long long) job.req.n[POOLS_OPEN_MODE]);
	CHECK(pools_job_append_output(l, f.job) == 1, "open mode 0 not set to append");
	CHECK(pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job) == NULL, "read after append refused");
	CHECK(job.req.n[POOLS_OPEN_MODE] == 1, "open_mode after append %llu", (unsigned long long) job.req.n[POOLS_OPEN_MODE]);
	CHECK(job.req.n[POOLS_NTASKS_PER_NODE] == 0xfffe && job.req.n[POOLS_REQUEUE] == 1 && job.req.n[POOLS_NUM_TASKS] == 2,
	      "setting the open mode changed its neighbours");
	put(f.details, l->details[POOLS_DETAILS_OPEN_MODE], 2);
	CHECK(pools_job_append_output(l, f.job) == 0, "--open-mode=truncate overwritten");
	CHECK(pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job) == NULL && job.req.n[POOLS_OPEN_MODE] == 2,
	      "--open-mode=truncate not kept");
	put(f.details, l->details[POOLS_DETAILS_OPEN_MODE], 0);
	CHECK(pools_job_append_output(NULL, f.job) == 0, "append without a table");
	/* Component 1 of heterogeneous job 4241: its record holds the leader's id. */
	put(f.job, l->job[POOLS_JOB_HET_JOB_ID], 4241);
	CHECK(pools_job_read(l, f.job, NO_VAL_32, "4241+1", NO_VAL_32, &job) == NULL, "het component 4241+1 refused");
	CHECK(job.req.n[POOLS_HET_JOB] == 1, "a hetjob's component not read as one");
	put(f.job, l->job[POOLS_JOB_HET_JOB_ID], 0);

	/* scontrol names the job by string, job_id NO_VAL: the string's leading number is checked. */
	CHECK(pools_job_read(l, f.job, NO_VAL_32, "4242", NO_VAL_32, &job) == NULL, "read by string id refused");
	CHECK(job.job_id == 4242, "read by string id: job_id %u", job.job_id);
	CHECK(pools_job_read(l, f.job, 0, "4240_3", NO_VAL_32, &job) == NULL, "task 3 of array 4240 by string refused");
	CHECK(pools_job_read(l, f.job, NO_VAL_32, "4242+0", NO_VAL_32, &job) == NULL, "het component by string refused");
	why = pools_job_read(l, f.job, NO_VAL_32, "4243", NO_VAL_32, &job);
	CHECK(why && strstr(why, "id"), "another job's string id read: %s", why);
	why = pools_job_read(l, f.job, NO_VAL_32, "99999999999", NO_VAL_32, &job);
	CHECK(why && strstr(why, "no job id"), "overflowing string id read: %s", why);
	/* Named by SLUID (25.11 on): the record's user must be job_desc's, which slurmctld set. */
	CHECK(pools_job_read(l, f.job, NO_VAL_32, "s0ABC123", 1001, &job) == NULL, "read by SLUID refused");
	why = pools_job_read(l, f.job, NO_VAL_32, "s0ABC123", 1002, &job);
	CHECK(why && strstr(why, "user"), "another user's record read by SLUID: %s", why);
	/* Nothing to check the record against: nothing is read. */
	why = pools_job_read(l, f.job, NO_VAL_32, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "no job id"), "read without an id: %s", why);
	why = pools_job_read(l, f.job, 0, "", NO_VAL_32, &job);
	CHECK(why && strstr(why, "no job id"), "read with an empty id: %s", why);
	/* An update of the whole array reaches each task with the array's id. */
	CHECK(pools_job_read(l, f.job, 4240, NULL, NO_VAL_32, &job) == NULL, "task of array 4240 refused");

	/* Another job's id: the table does not describe this record. */
	why = pools_job_read(l, f.job, 4243, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "id"), "mismatched id read: %s", why);
	CHECK(job.req.s[POOLS_PARTITION] == NULL && job.job_id == 0, "refused read left fields behind");

	/* Without mc_ptr, sockets per node are unset. */
	put_ptr(f.details, l->details[POOLS_DETAILS_MC_PTR], NULL);
	put_ptr(f.job, l->job[POOLS_JOB_QOS_PTR], NULL);
	CHECK(pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job) == NULL, "read without mc_ptr refused");
	CHECK(job.req.n[POOLS_SOCKETS_PER_NODE] == 0xfffe, "sockets_per_node without mc_ptr: %llu",
	      (unsigned long long) job.req.n[POOLS_SOCKETS_PER_NODE]);
	CHECK(job.req.s[POOLS_QOS] == NULL, "qos without qos_ptr: %s", job.req.s[POOLS_QOS]);

	/* A details record with another magic: nothing is read. */
	put(f.details, l->details[POOLS_DETAILS_MAGIC], l->details_magic + 1);
	why = pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "DETAILS_MAGIC"), "bad details magic read: %s", why);
	CHECK(job.req.s[POOLS_PARTITION] == NULL, "refused read left the partition");
	put(f.details, l->details[POOLS_DETAILS_MAGIC], l->details_magic);

	/* No details: refused before any pointer is followed. */
	put_ptr(f.job, l->job[POOLS_JOB_DETAILS], NULL);
	why = pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "no details"), "record without details read: %s", why);
	put_ptr(f.job, l->job[POOLS_JOB_DETAILS], f.details);

	/* A job record with another magic (another release's layout, or not a job at all). */
	put(f.job, l->job[POOLS_JOB_MAGIC], 0x12345678);
	why = pools_job_read(l, f.job, 4242, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "JOB_MAGIC"), "bad job magic read: %s", why);
	free_fake(&f);
}

int main(void)
{
	size_t n = sizeof(pools_job_layouts) / sizeof(pools_job_layouts[0]);
	struct pools_job job;
	const char *why;

	CHECK(n >= 3, "only %zu releases in the table", n);
	for (size_t i = 0; i < n; i++)
		test_release(&pools_job_layouts[i]);

	/* Each release's record read with another release's table is refused, not misread: the
	 * magic or the id lands elsewhere. */
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < n; k++) {
			struct fake f;

			if (i == k)
				continue;
			fake_job(&f, &pools_job_layouts[i]);
			why = pools_job_read(&pools_job_layouts[k], f.job, 4242, NULL, NO_VAL_32, &job);
			if (!why)
				/* Where the fields of both releases happen to lie alike, the read is right. */
				CHECK(streq(job.req.s[POOLS_PARTITION], "a100,a100-spot") && job.job_id == 4242,
				      "%d.%d record read with %d.%d's table misread", pools_job_layouts[i].major,
				      pools_job_layouts[i].minor, pools_job_layouts[k].major, pools_job_layouts[k].minor);
			free_fake(&f);
		}
	}

	/* A release without a table, and no record at all. */
	CHECK(pools_job_layout_for(21, 8, 8) == NULL, "21.08 has a table");
	/* Another micro release of a known one: Slurm changes job_record_t between them. */
	CHECK(pools_job_layout_for(26, 5, 4) == NULL, "26.05.4 has a table");
	why = pools_job_read(NULL, "x", 1, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "not in job_record_layout.h"), "read without a table: %s", why);
	why = pools_job_read(&pools_job_layouts[0], NULL, 1, NULL, NO_VAL_32, &job);
	CHECK(why && strstr(why, "no job record"), "read of NULL: %s", why);

	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("job record reader: %zu releases ok\n", n);
	return 0;
}
