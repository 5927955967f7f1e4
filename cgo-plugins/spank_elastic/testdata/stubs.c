/* Stand-ins for the spank_* and slurm_* functions slurmstepd, slurmd and sbatch give the
 * plugin, driven by the harness (fuzz.c). slurm_error and slurm_info also check that every log
 * line is printable ASCII: the user chooses the option values, and root's log must not carry
 * their raw bytes. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stubs.h"

struct stub_state stub;

void stub_reset(void)
{
	int i;

	for (i = 0; i < stub.nenv; i++) {
		free(stub.env_name[i]);
		free(stub.env_value[i]);
	}
	memset(&stub, 0, sizeof(stub));
}

static int env_index(const char *name)
{
	int i;

	for (i = 0; i < stub.nenv; i++)
		if (strcmp(stub.env_name[i], name) == 0)
			return i;
	return -1;
}

const char *stub_env(const char *name)
{
	int i = env_index(name);

	return i < 0 ? NULL : stub.env_value[i];
}

void stub_put_env(const char *name, const char *value)
{
	int i = env_index(name);

	if (i >= 0) {
		free(stub.env_value[i]);
		stub.env_value[i] = strdup(value);
		return;
	}
	if (stub.nenv == STUB_MAX_ENV)
		stub_fail("the job environment has more than %d variables", STUB_MAX_ENV);
	stub.env_name[stub.nenv] = strdup(name);
	stub.env_value[stub.nenv] = strdup(value);
	stub.nenv++;
}

static void check_log(const char *level, const char *fmt, va_list ap)
{
	char line[8192];
	const unsigned char *c;
	int n = vsnprintf(line, sizeof(line), fmt, ap);

	if (n < 0 || (size_t)n >= sizeof(line))
		stub_fail("%s: a log line of %d bytes", level, n);
	for (c = (const unsigned char *)line; *c; c++)
		if (*c < 0x20 || *c >= 0x7f)
			stub_fail("%s: byte 0x%02x in the log line %s", level, *c, line);
	if (getenv("SPANK_FUZZ_VERBOSE"))
		fprintf(stderr, "%s: %s\n", level, line);
}

void slurm_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	check_log("error", fmt, ap);
	va_end(ap);
}

void slurm_info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	check_log("info", fmt, ap);
	va_end(ap);
}

spank_context_t spank_context(void)
{
	return stub.ctx;
}

int spank_remote(spank_t sp)
{
	(void)sp;
	return stub.ctx == S_CTX_REMOTE;
}

const char *spank_strerror(spank_err_t err)
{
	return err == ESPANK_SUCCESS ? "success" : "a stub's error";
}

spank_err_t spank_option_register(spank_t sp, struct spank_option *opt)
{
	(void)sp;
	if (stub.nopts == STUB_MAX_OPTIONS)
		return ESPANK_ERROR;
	stub.opts[stub.nopts++] = opt;
	return ESPANK_SUCCESS;
}

spank_err_t spank_get_item(spank_t sp, spank_item_t item, ...)
{
	va_list ap;
	spank_err_t rc = ESPANK_SUCCESS;

	(void)sp;
	if (stub.get_item_fails)
		return ESPANK_BAD_ARG;
	va_start(ap, item);
	switch (item) {
	case S_JOB_ID:
		*va_arg(ap, uint32_t *) = stub.jobid;
		break;
	case S_JOB_STEPID:
		*va_arg(ap, uint32_t *) = stub.stepid;
		break;
	case S_JOB_UID:
		*va_arg(ap, uid_t *) = stub.uid;
		break;
	case S_JOB_GID:
		*va_arg(ap, gid_t *) = stub.gid;
		break;
	default:
		rc = ESPANK_BAD_ARG;
	}
	va_end(ap);
	return rc;
}

/* As slurmstepd's: strlcpy into buf, ESPANK_NOSPACE when cut. */
spank_err_t spank_getenv(spank_t sp, const char *var, char *buf, int len)
{
	const char *v = stub_env(var);
	size_t n;

	(void)sp;
	if (stub.ctx != S_CTX_REMOTE)
		return ESPANK_NOT_REMOTE;
	if (len < 0)
		return ESPANK_BAD_ARG;
	if (!v)
		return ESPANK_ENV_NOEXIST;
	n = strlen(v);
	if (len > 0) {
		size_t k = n < (size_t)len - 1 ? n : (size_t)len - 1;
		memcpy(buf, v, k);
		buf[k] = '\0';
	}
	return n >= (size_t)len ? ESPANK_NOSPACE : ESPANK_SUCCESS;
}

spank_err_t spank_setenv(spank_t sp, const char *var, const char *val, int overwrite)
{
	(void)sp;
	if (stub.ctx != S_CTX_REMOTE)
		return ESPANK_NOT_REMOTE;
	if (++stub.setenv_calls == stub.setenv_fail_at)
		return ESPANK_ERROR;
	if (!overwrite && stub_env(var))
		return ESPANK_ENV_EXISTS;
	stub_put_env(var, val);
	return ESPANK_SUCCESS;
}

spank_err_t spank_unsetenv(spank_t sp, const char *var)
{
	int i = env_index(var);

	(void)sp;
	if (stub.ctx != S_CTX_REMOTE)
		return ESPANK_NOT_REMOTE;
	if (i >= 0) {
		free(stub.env_name[i]);
		free(stub.env_value[i]);
		stub.nenv--;
		stub.env_name[i] = stub.env_name[stub.nenv];
		stub.env_value[i] = stub.env_value[stub.nenv];
	}
	return ESPANK_SUCCESS;
}
