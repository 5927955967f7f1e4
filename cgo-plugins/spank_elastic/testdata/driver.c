/* A deterministic stand-in for libFuzzer where clang is not installed: runs fuzz.c's
 * LLVMFuzzerTestOneInput on every seed given (files or directories of them), then on inputs
 * mutated from them, for SPANK_FUZZ_SECONDS seconds (default 10), from SPANK_FUZZ_SEED (default
 * 1). Built with gcc under AddressSanitizer and UndefinedBehaviorSanitizer: any report, or a
 * broken invariant, aborts after the input is saved to SPANK_FUZZ_CRASH (default
 * ./spank-fuzz-crash). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <sanitizer/common_interface_defs.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_INPUT 70000
#define MAX_SEEDS 512

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS];
static int nseeds;
static uint8_t input[FUZZ_MAX_INPUT];
static size_t input_len;
static uint64_t rng;

void spank_fuzz_save_input(const uint8_t *data, size_t size)
{
	const char *path = getenv("SPANK_FUZZ_CRASH");
	FILE *f = fopen(path ? path : "spank-fuzz-crash", "wb");

	if (f) {
		fwrite(data, 1, size, f);
		fclose(f);
	}
	fprintf(stderr, "spank fuzz: the input (%zu bytes) is saved in %s\n", size, path ? path : "spank-fuzz-crash");
}

/* A sanitizer's report ends here before it aborts. */
static void on_death(void)
{
	spank_fuzz_save_input(input, input_len);
}

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void add_seed(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf;
	size_t n;

	if (!f || nseeds == MAX_SEEDS) {
		fprintf(stderr, "spank fuzz: cannot read seed %s\n", path);
		exit(2);
	}
	buf = malloc(FUZZ_MAX_INPUT);
	n = fread(buf, 1, FUZZ_MAX_INPUT, f);
	fclose(f);
	seeds[nseeds] = buf;
	seed_len[nseeds++] = n;
}

static void add_seeds(const char *path)
{
	struct stat st;
	struct dirent **names;
	char child[4096];
	int i, n;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "spank fuzz: no seed %s\n", path);
		exit(2);
	}
	if (!S_ISDIR(st.st_mode)) {
		add_seed(path);
		return;
	}
	n = scandir(path, &names, NULL, alphasort);
	for (i = 0; i < n; i++) {
		if (names[i]->d_name[0] != '.') {
			snprintf(child, sizeof(child), "%s/%s", path, names[i]->d_name);
			add_seed(child);
		}
		free(names[i]);
	}
	free(names);
}

/* Pieces the parsers care about, and the hostile ones the brief of the plugin names. */
static const char *const tokens[] = {
	":", ",", ".", "0", "1", "9", "64", "65", "16", "17", "100000", "4294967295", "4294967296",
	"18446744073709551616", "1073741824", "1000000000", "1000000000.000001", "0.000001", "-1",
	"+1", " 1", "1e9", "0x10", "a100", "v100", "h100", "a100,v100", "a100,a100", "\n", "\r",
	"\"", "\\", "\t", "\x1e", "\x7f", "\x80", "\xc3\xa9", "\xff", "\xef\xbb\xbf", "%s%n%x",
	"1:4:1", "2:8:4", "1:2", "1024:32", "64:64", "worker", "main", "=", "dir=/x", "pools=",
	"max_workers=", "scancel=", "nonsense",
};

static void mutate(void)
{
	int rounds = 1 + next() % 6, r;

	for (r = 0; r < rounds; r++) {
		size_t pos = input_len ? next() % (input_len + 1) : 0;
		switch (next() % 9) {
		case 0: /* flip a bit */
			if (input_len)
				input[next() % input_len] ^= 1 << (next() % 8);
			break;
		case 1: /* any byte */
			if (input_len)
				input[next() % input_len] = next();
			break;
		case 2: /* a flag byte */
			if (input_len >= 3)
				input[next() % 3] = next();
			break;
		case 3: { /* insert a token */
			const char *t = tokens[next() % (sizeof(tokens) / sizeof(tokens[0]))];
			size_t n = strlen(t);
			if (input_len + n <= FUZZ_MAX_INPUT) {
				memmove(input + pos + n, input + pos, input_len - pos);
				memcpy(input + pos, t, n);
				input_len += n;
			}
			break;
		}
		case 4: { /* delete a run */
			size_t n = input_len - pos ? 1 + next() % (input_len - pos) : 0;
			if (n > 16 && next() % 2)
				n = 1 + n % 16;
			memmove(input + pos, input + pos + n, input_len - pos - n);
			input_len -= n;
			break;
		}
		case 5: { /* repeat a byte many times: over-long and huge values */
			size_t n = next() % 4 == 0 ? 1 + next() % 60000 : 1 + next() % 200;
			uint8_t c = input_len ? input[next() % input_len] : '1';
			if (input_len + n <= FUZZ_MAX_INPUT) {
				memmove(input + pos + n, input + pos, input_len - pos);
				memset(input + pos, c, n);
				input_len += n;
			}
			break;
		}
		case 6: { /* a piece of another seed */
			int s = next() % nseeds;
			size_t from, n;
			if (!seed_len[s])
				break;
			from = next() % seed_len[s];
			n = 1 + next() % (seed_len[s] - from);
			if (input_len + n <= FUZZ_MAX_INPUT) {
				memmove(input + pos + n, input + pos, input_len - pos);
				memcpy(input + pos, seeds[s] + from, n);
				input_len += n;
			}
			break;
		}
		case 7: /* a field separator */
			if (input_len + 1 <= FUZZ_MAX_INPUT) {
				memmove(input + pos + 1, input + pos, input_len - pos);
				input[pos] = 0x1e;
				input_len++;
			}
			break;
		case 8: /* a digit */
			if (input_len)
				input[next() % input_len] = '0' + next() % 10;
			break;
		}
	}
}

int main(int argc, char **argv)
{
	const char *secs = getenv("SPANK_FUZZ_SECONDS"), *seed = getenv("SPANK_FUZZ_SEED");
	double limit = secs ? atof(secs) : 10;
	struct timespec start, now;
	unsigned long runs = 0;
	int i;

	rng = seed ? strtoull(seed, NULL, 10) : 1;
	if (!rng)
		rng = 1;
	__sanitizer_set_death_callback(on_death);
	for (i = 1; i < argc; i++)
		add_seeds(argv[i]);
	if (!nseeds) {
		fprintf(stderr, "usage: %s SEED_FILE_OR_DIR...\n", argv[0]);
		return 2;
	}
	for (i = 0; i < nseeds; i++) {
		memcpy(input, seeds[i], seed_len[i]);
		input_len = seed_len[i];
		LLVMFuzzerTestOneInput(input, input_len);
		runs++;
	}
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((double)(now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 >= limit)
			break;
		i = next() % nseeds;
		memcpy(input, seeds[i], seed_len[i]);
		input_len = seed_len[i];
		mutate();
		LLVMFuzzerTestOneInput(input, input_len);
		runs++;
	}
	printf("spank fuzz: %lu runs (%d seeds) in %.0f s, seed %s, no crash and no broken invariant\n", runs, nseeds,
	       limit, seed ? seed : "1");
	for (i = 0; i < nseeds; i++)
		free(seeds[i]);
	return 0;
}
