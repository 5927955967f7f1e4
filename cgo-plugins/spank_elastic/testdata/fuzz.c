/* Fuzz harness of the SPANK plugin: the plugin's own source (included, so that its static
 * parsers can be called) against the stubs of stubs.c. LLVMFuzzerTestOneInput runs under
 * libFuzzer (clang -fsanitize=fuzzer) or under driver.c (gcc, ASan and UBSan).
 *
 * An input is three flag bytes, then fields separated by 0x1e:
 *   --elastic, --elastic-pools, --elastic-value, --elastic-max-batch values, ELASTIC_ROLE,
 *   plugstack pools=, plugstack max_workers=, one more plugstack argument
 * flags[0]: bits 0-1 context (0, 3: slurmstepd; 1: srun; 2: sbatch), bit 2 the batch step,
 *   bit 3 run the job epilog too, bit 4 ELASTIC_ROLE set, bit 5 options in reverse order,
 *   bit 6 spank_get_item fails, bit 7 the extra plugstack argument
 * flags[1]: bits 0-3 which options are given, bits 4-6 what the job's directory holds before
 *   (see prepare_job_dir), bit 7 plugstack pools=
 * flags[2]: bits 0-3 which spank_setenv fails (0: none), bit 4 plugstack max_workers=,
 *   bits 5-7 the job id (1 to 8)
 *
 * What it asserts, besides the sanitizers and the stubs' printable log lines:
 *  - in slurmstepd (remote context) every callback returns 0, always;
 *  - the parsers accept only what they promise, and leave a declaration alone on error;
 *  - a job is recorded (declaration.json, printable JSON) exactly when its environment has the
 *    full contract, and a job that asked for --elastic and was not recorded has none of it;
 *  - no link in the job's directory is followed: what they point at keeps its mode.
 *
 * SPANK_FUZZ_DIR is the plugin's state directory (dir=). */
#define _GNU_SOURCE
#include <ftw.h>
#include <stdarg.h>

#include "../spank_elastic.c"
#include "stubs.h"

#define NFIELDS 8
/* What a requeued job's earlier run left in prepare_job_dir's case 5. */
#define STALE_DECLARATION "{\"earlier\":1}\n"

static const uint8_t *current;
static size_t current_size;

/* Defined by driver.c, which saves the input; libFuzzer saves it itself. */
void spank_fuzz_save_input(const uint8_t *data, size_t size) __attribute__((weak));

void stub_fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "spank fuzz: invariant broken: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	if (spank_fuzz_save_input)
		spank_fuzz_save_input(current, current_size);
	abort();
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *path)
{
	nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *fuzz_dir(void)
{
	const char *d = getenv("SPANK_FUZZ_DIR");

	if (!d || *d != '/')
		stub_fail("SPANK_FUZZ_DIR must be an absolute directory");
	return d;
}

/* The victims links may point at: a directory and a file whose modes must stay 0751, 0640. */
static void victims(char *vdir, char *vfile, size_t n)
{
	snprintf(vdir, n, "%s/victim", fuzz_dir());
	snprintf(vfile, n, "%s/victim/file", fuzz_dir());
	mkdir(vdir, 0751);
	chmod(vdir, 0751);
	close(open(vfile, O_WRONLY | O_CREAT, 0640));
	chmod(vfile, 0640);
}

static void check_victims(const char *vdir, const char *vfile)
{
	struct stat st;

	if (stat(vdir, &st) < 0 || (st.st_mode & 07777) != 0751)
		stub_fail("a link was followed: %s has mode %o", vdir, st.st_mode & 07777);
	if (stat(vfile, &st) < 0 || (st.st_mode & 07777) != 0640)
		stub_fail("a link was followed: %s has mode %o", vfile, st.st_mode & 07777);
}

/* prepare_job_dir leaves DIR/jobs/JOBID as a run finds it: 0 nothing; 1 reports is a link to a
 * directory elsewhere; 2 reports holds links (a requeued job's user put them there); 3 reports
 * is a file; 4 the job's directory is a link; 5 a requeued job's declaration and reports;
 * 6 reports belongs to another user (a job id used again), when the harness may chown; 7 the
 * temporary declaration is a link. */
static void prepare_job_dir(int how, uint32_t jobid, const char *vdir, const char *vfile)
{
	char jobs[2048], job[2100], p[2200];

	snprintf(jobs, sizeof(jobs), "%s/state/jobs", fuzz_dir());
	snprintf(job, sizeof(job), "%s/%u", jobs, jobid);
	remove_tree(job);
	if (how == 0)
		return;
	snprintf(p, sizeof(p), "%s/state", fuzz_dir());
	mkdir(p, 0755);
	mkdir(jobs, 0755);
	if (how == 4) {
		if (symlink(vdir, job) < 0)
			stub_fail("symlink %s: %s", job, strerror(errno));
		return;
	}
	mkdir(job, 0755);
	snprintf(p, sizeof(p), "%s/reports", job);
	switch (how) {
	case 1:
		symlink(vdir, p);
		break;
	case 2:
	case 5:
	case 6:
		mkdir(p, 0700);
		snprintf(p, sizeof(p), "%s/reports/1.jsonl", job);
		symlink(vfile, p);
		snprintf(p, sizeof(p), "%s/reports/dir", job);
		symlink(vdir, p);
		if (how == 5) {
			int fd;
			snprintf(p, sizeof(p), "%s/declaration.json", job);
			fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (fd < 0 || write(fd, STALE_DECLARATION, strlen(STALE_DECLARATION)) < 0)
				stub_fail("writing %s: %s", p, strerror(errno));
			close(fd);
		}
		if (how == 6 && getuid() == 0) {
			snprintf(p, sizeof(p), "%s/reports", job);
			if (chown(p, 65534, 65534) < 0)
				stub_fail("chown %s: %s", p, strerror(errno));
		}
		break;
	case 3:
		close(open(p, O_WRONLY | O_CREAT, 0600));
		break;
	case 7:
		snprintf(p, sizeof(p), "%s/.declaration.json.tmp", job);
		symlink(vfile, p);
		break;
	}
}

/* split cuts the input after the flags into NFIELDS NUL-terminated fields (missing ones NULL). */
static char *split(const uint8_t *data, size_t size, char *fields[NFIELDS])
{
	char *copy = malloc(size + 1);
	size_t i, n = 0;

	memcpy(copy, data, size);
	copy[size] = '\0';
	for (i = 0; i < NFIELDS; i++)
		fields[i] = NULL;
	fields[n++] = copy;
	for (i = 0; i < size && n < NFIELDS; i++) {
		if (copy[i] == 0x1e) {
			copy[i] = '\0';
			fields[n++] = copy + i + 1;
		}
	}
	return copy;
}

static void check_printable(const char *what, const char *s)
{
	const unsigned char *c;

	for (c = (const unsigned char *)s; *c; c++)
		if (*c < 0x20 || *c >= 0x7f)
			stub_fail("%s: byte 0x%02x in \"%s\"", what, *c, s);
}

/* check_parsers calls each parser on its field and checks what it promises. */
static void check_parsers(char *fields[NFIELDS])
{
	struct declaration d, before;
	char why[2300], esc[ESCAPED_LEN];
	double v;
	int i, j;

	for (i = 0; i < NFIELDS; i++) {
		if (!fields[i])
			continue;
		escaped(fields[i], esc);
		if (strlen(esc) >= ESCAPED_LEN)
			stub_fail("escaped overran");
		check_printable("escaped", esc);
		if (strchr(esc, '"'))
			stub_fail("escaped kept a quote: %s", esc);
	}
	memset(&d, 0, sizeof(d));
	d.gpus = 1;
	before = d;
	why[0] = '\0';
	if (fields[0] && parse_spec(fields[0], &d, why, sizeof(why)) == 0) {
		if (!d.set || d.min < 1 || d.max < d.min || d.max > max_workers_cap || d.gpus < 1 || d.gpus > 64)
			stub_fail("parse_spec accepted %u:%u:%u", d.min, d.max, d.gpus);
	} else {
		if (memcmp(&d, &before, sizeof(d)) != 0)
			stub_fail("parse_spec changed the declaration on error");
		check_printable("parse_spec's why", why);
	}
	why[0] = '\0';
	if (fields[2] && parse_value(fields[2], &v) == 0) {
		if (!(v > 0) || v > MAX_VALUE)
			stub_fail("parse_value accepted %g", v);
	}
	why[0] = '\0';
	if (fields[1] && parse_pools(fields[1], &d, why, sizeof(why)) == 0) {
		if (d.npools < 1 || d.npools > MAX_POOLS)
			stub_fail("parse_pools accepted %d pools", d.npools);
		for (i = 0; i < d.npools; i++) {
			if (!valid_name(d.pools[i], strlen(d.pools[i])) || (*allowed_pools && !in_list(allowed_pools, d.pools[i])))
				stub_fail("parse_pools accepted pool %s", d.pools[i]);
			for (j = 0; j < i; j++)
				if (strcmp(d.pools[i], d.pools[j]) == 0)
					stub_fail("parse_pools accepted %s twice", d.pools[i]);
		}
	} else {
		check_printable("parse_pools's why", why);
	}
	if (!d.set) {
		d.set = 1;
		d.min = 1;
		d.max = 4;
		d.gpus = 2;
	}
	why[0] = '\0';
	if (fields[3] && parse_batch(fields[3], &d, why, sizeof(why)) == 0) {
		unsigned em = effective_max(&d);
		if (d.max_batch < 1 || d.max_batch > MAX_BATCH || d.batch_per_gpu < 1 ||
		    (unsigned long long)d.min * d.gpus * d.batch_per_gpu > d.max_batch || em < d.min || em > d.max)
			stub_fail("parse_batch accepted %u:%u for %u:%u:%u (effective max %u)", d.max_batch, d.batch_per_gpu,
				  d.min, d.max, d.gpus, em);
	} else {
		check_printable("parse_batch's why", why);
	}
}

/* read_small reads a small file whole into buf; -1 when it is not there. */
static ssize_t read_small(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW);
	ssize_t got;

	if (fd < 0)
		return -1;
	got = read(fd, buf, n - 1);
	close(fd);
	if (got < 0)
		return -1;
	buf[got] = '\0';
	return got;
}

/* keep_declaration copies a recorded declaration into SPANK_FUZZ_DIR/recorded (the last 64),
 * where the Go test reads them as elasticd would. */
static void keep_declaration(const char *content)
{
	static unsigned kept;
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/recorded", fuzz_dir());
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/recorded/%02u.json", fuzz_dir(), kept++ % 64);
	if (!(f = fopen(path, "w")) || fprintf(f, "%s\n", content) < 0 || fclose(f) != 0)
		stub_fail("keeping %s: %s", path, strerror(errno));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *opt_names[4] = { "elastic", "elastic-pools", "elastic-value", "elastic-max-batch" };
	static const spank_context_t contexts[4] = { S_CTX_REMOTE, S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE };
	char *fields[NFIELDS], *copy, args[5][1200], *av[6], vdir[PATH_MAX], vfile[PATH_MAX], path[PATH_MAX + 64];
	char content[8192];
	uint8_t f0, f1, f2;
	int ac = 0, i, k, rc, remote, batch, asked, recorded, stale;
	ssize_t got;
	spank_t sp = (spank_t)&stub; /* opaque to the plugin; the stubs ignore it */

	if (size < 3)
		return 0;
	current = data;
	current_size = size;
	f0 = data[0];
	f1 = data[1];
	f2 = data[2];
	copy = split(data + 3, size - 3, fields);

	stub_reset();
	stub.ctx = contexts[f0 & 3];
	remote = stub.ctx == S_CTX_REMOTE;
	batch = (f0 >> 2) & 1;
	stub.stepid = batch ? BATCH_STEP : 0;
	stub.jobid = 1 + ((f2 >> 5) & 7);
	stub.uid = getuid();
	stub.gid = getgid();
	stub.get_item_fails = (f0 >> 6) & 1;
	stub.setenv_fail_at = f2 & 15;
	if ((f0 >> 4) & 1)
		stub_put_env("ELASTIC_ROLE", fields[4] ? fields[4] : "");
	/* A user's own contract variables, which a job not recorded must not keep. */
	stub_put_env("ELASTIC_MAX_BATCH", "999");

	victims(vdir, vfile, sizeof(vdir));
	prepare_job_dir((f1 >> 4) & 7, stub.jobid, vdir, vfile);

	snprintf(args[ac], sizeof(args[ac]), "dir=%s/state", fuzz_dir());
	av[ac] = args[ac];
	ac++;
	snprintf(args[ac], sizeof(args[ac]), "scancel=/bin/true");
	av[ac] = args[ac];
	ac++;
	if ((f1 >> 7) & 1) {
		snprintf(args[ac], sizeof(args[ac]), "pools=%s", fields[5] ? fields[5] : "a100,v100");
		av[ac] = args[ac];
		ac++;
	}
	if ((f2 >> 4) & 1) {
		snprintf(args[ac], sizeof(args[ac]), "max_workers=%s", fields[6] ? fields[6] : "16");
		av[ac] = args[ac];
		ac++;
	}
	if ((f0 >> 7) & 1) {
		snprintf(args[ac], sizeof(args[ac]), "%s", fields[7] ? fields[7] : "");
		av[ac] = args[ac];
		ac++;
	}

	rc = slurm_spank_init(sp, ac, av);
	if (remote && rc != 0)
		stub_fail("slurm_spank_init returned %d in slurmstepd", rc);
	check_parsers(fields);
	if (rc == 0) {
		/* The options the input gives, each to the callback registered under its name. */
		asked = (f1 & 15) != 0;
		for (k = 0; k < 4; k++) {
			int o = (f0 >> 5) & 1 ? 3 - k : k;
			if (!((f1 >> o) & 1))
				continue;
			for (i = 0; i < stub.nopts; i++) {
				if (strcmp(stub.opts[i]->name, opt_names[o]) != 0)
					continue;
				rc = stub.opts[i]->cb(stub.opts[i]->val, fields[o] ? fields[o] : "", remote);
				if (remote && rc != 0)
					stub_fail("--%s's callback returned %d in slurmstepd", opt_names[o], rc);
			}
		}
		snprintf(path, sizeof(path), "%s/state/jobs/%u/declaration.json", fuzz_dir(), stub.jobid);
		rc = slurm_spank_init_post_opt(sp, ac, av);
		if (remote && rc != 0)
			stub_fail("slurm_spank_init_post_opt returned %d in slurmstepd", rc);
		got = read_small(path, content, sizeof(content));
		stale = got >= 0 && strcmp(content, STALE_DECLARATION) == 0;
		recorded = got >= 0 && !stale;
		if (recorded && !(remote && batch))
			stub_fail("a declaration recorded outside the batch step");
		if (remote && batch && !stub.get_item_fails) {
			const char *role = stub_env("ELASTIC_ROLE");
			int worker = role && strcmp(role, "worker") == 0;
			if (recorded) {
				size_t n = strlen(content);
				if (n < 3 || content[n - 1] != '\n' || content[0] != '{' || content[n - 2] != '}')
					stub_fail("declaration.json is not one JSON object and a newline: %s", content);
				content[n - 1] = '\0';
				check_printable("declaration.json", content);
				if (!role || strcmp(role, "main") != 0 || !stub_env("ELASTIC_HOSTS_FILE") || !stub_env("ELASTIC_REPORT_DIR"))
					stub_fail("recorded without the environment contract");
				if (!decl.max_batch && stub_env("ELASTIC_MAX_BATCH"))
					stub_fail("the user's ELASTIC_MAX_BATCH stayed in a main job without --elastic-max-batch");
				keep_declaration(content);
			} else if (asked && !worker) {
				const char *const *v;
				for (v = contract_vars; *v; v++)
					if (stub_env(*v))
						stub_fail("not recorded, but %s=%s is in the job's environment", *v, stub_env(*v));
				if (stale && !config_invalid)
					stub_fail("not recorded, but the earlier run's declaration is left for elasticd");
			}
		}
	}
	if ((f0 >> 3) & 1) {
		/* The epilog's process is another one: it knows only the plugstack arguments. */
		stub.ctx = S_CTX_JOB_SCRIPT;
		rc = slurm_spank_job_epilog(sp, ac, av);
		if (rc != 0)
			stub_fail("slurm_spank_job_epilog returned %d", rc);
	}
	check_victims(vdir, vfile);
	free(copy);
	return 0;
}
