/* The Slurm side of the SPANK plugin's fuzz harness: what spank_* and slurm_* answer, set by
 * the harness before each run, and what the plugin did through them. */
#ifndef SPANK_FUZZ_STUBS_H
#define SPANK_FUZZ_STUBS_H

#include <stdint.h>
#include <sys/types.h>

#include <slurm/spank.h>

#define STUB_MAX_ENV 64
#define STUB_MAX_OPTIONS 8

struct stub_state {
	spank_context_t ctx;
	uint32_t jobid, stepid;
	uid_t uid;
	gid_t gid;
	int get_item_fails;
	int setenv_fail_at; /* the Nth spank_setenv fails (1-based); 0: none */
	int setenv_calls;
	int nenv;
	char *env_name[STUB_MAX_ENV], *env_value[STUB_MAX_ENV];
	int nopts;
	struct spank_option *opts[STUB_MAX_OPTIONS];
};

extern struct stub_state stub;

/* stub_reset forgets the previous run: environment, options, counters. */
void stub_reset(void);
/* stub_env is the job environment's value of name, or NULL. */
const char *stub_env(const char *name);
/* stub_put_env sets name in the job's environment as the user would have. */
void stub_put_env(const char *name, const char *value);
/* stub_fail reports a broken invariant with the input that broke it, and aborts. */
void stub_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
