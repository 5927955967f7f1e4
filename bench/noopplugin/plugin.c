/*
 * job_submit/gonoop: a Go c-shared job_submit plugin that does nothing, for
 * bench/plugin-overhead.sh. Its cost over no plugin at all is what loading Go into slurmctld and
 * crossing from slurmctld's RPC threads into Go cost; job_submit/pools' cost over it is the
 * routing itself.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "_cgo_export.h"

const char plugin_name[] = "slurmbridge no-op (benchmark)";
/* NOOP_NAME lets the benchmark build variants side by side (CGO_CFLAGS=-DNOOP_NAME=...): Slurm
 * loads job_submit_NAME.so only if its plugin_type says job_submit/NAME. */
#ifndef NOOP_NAME
#define NOOP_NAME "gonoop"
#endif
const char plugin_type[] = "job_submit/" NOOP_NAME;
const uint32_t plugin_version = SLURM_VERSION_NUMBER;

int init(void)
{
	gonoop_init();
	return SLURM_SUCCESS;
}
int fini(void) { return SLURM_SUCCESS; }

extern void slurm_info(const char *fmt, ...);

/* Time spent crossing into Go and back, as the RPC thread sees it: that includes waiting for one
 * of Go's Ps when more slurmctld threads call in than GOMAXPROCS. Logged every 500 calls. */
static _Atomic uint64_t calls, total_ns, max_ns;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

int job_submit(job_desc_msg_t *job_desc, uint32_t submit_uid, char **err_msg)
{
	uint64_t t0 = now_ns(), dt, n, prev;
	int rc;

	(void) err_msg;
	rc = gonoop_submit(job_desc->partition != NULL, submit_uid);
	dt = now_ns() - t0;
	atomic_fetch_add(&total_ns, dt);
	prev = atomic_load(&max_ns);
	while (dt > prev && !atomic_compare_exchange_weak(&max_ns, &prev, dt))
		;
	n = atomic_fetch_add(&calls, 1) + 1;
	if (n % 500 == 0)
		slurm_info("job_submit/%s: %llu calls, mean %llu ns in Go, max %llu ns", NOOP_NAME,
			   (unsigned long long) n, (unsigned long long) (atomic_load(&total_ns) / n),
			   (unsigned long long) atomic_load(&max_ns));
	return rc;
}

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid, char **err_msg)
#else
int job_modify(job_desc_msg_t *job_desc, void *job_ptr, uint32_t submit_uid)
#endif
{
	(void) job_ptr;
	return gonoop_submit(job_desc->partition != NULL, submit_uid);
}
