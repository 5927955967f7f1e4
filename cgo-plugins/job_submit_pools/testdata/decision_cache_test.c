/*
 * Tests of the decision cache (decision_cache.c) on its own, built and run by
 * decision_cache_test.go under AddressSanitizer and under ThreadSanitizer. Slurm's allocator and
 * job_desc setters are stood in for here; the rest is the plugin's own code.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../decision_cache.h"

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

/* The plugin's setters, as plugin.c has them, with malloc for Slurm's allocator. */
void pools_set_partition(job_desc_msg_t *desc, const char *partition)
{
	free(desc->partition);
	desc->partition = strdup(partition);
}

void pools_set_err_msg(char **err_msg, const char *msg)
{
	if (err_msg && !*err_msg)
		*err_msg = strdup(msg);
}

static struct pools_request request(const char *partition, const char *tres_per_node, uint64_t uid)
{
	struct pools_request r;

	memset(&r, 0, sizeof(r));
	r.s[POOLS_PARTITION] = partition;
	r.s[POOLS_TRES_PER_NODE] = tres_per_node;
	r.n[POOLS_UID] = uid;
	r.n[POOLS_MIN_NODES] = 0xfffffffe;
	return r;
}

static struct pools_outcome outcome(int rc, const char *partition, const char *message, int cacheable)
{
	struct pools_outcome o = { rc, partition ? strdup(partition) : NULL, message ? strdup(message) : NULL, cacheable, 0 };
	return o;
}

/* Looks req up; returns whether it hit, with what it wrote. */
static int lookup(const struct pools_request *req, char **partition, char **message, int *rc)
{
	struct pools_cache_key key;
	job_desc_msg_t desc;
	int hit;

	memset(&desc, 0, sizeof(desc));
	*message = NULL;
	*rc = -1;
	if (!pools_cache_key(req, &key))
		return 0;
	hit = pools_cache_apply(&key, &desc, message, rc);
	*partition = desc.partition;
	return hit;
}

static void store(const struct pools_request *req, uint64_t generation, struct pools_outcome out)
{
	struct pools_cache_key key;

	if (pools_cache_key(req, &key))
		pools_cache_store(&key, generation, &out);
	else
		pools_cache_store(&key, generation, &(struct pools_outcome){ 0, out.partition, out.message, 0, 0 });
}

static void test_answers_exactly_the_request_it_stored(void)
{
	struct pools_request a100 = request(NULL, "gres/gpu:a100=1", 1001);
	struct pools_request other_user = request(NULL, "gres/gpu:a100=1", 1002);
	struct pools_request empty_partition = request("", "gres/gpu:a100=1", 1001);
	struct pools_request longer = request(NULL, "gres/gpu:a100=10", 1001);
	char *part, *msg;
	int rc;

	CHECK(!lookup(&a100, &part, &msg, &rc), "hit before any store");
	store(&a100, pools_cache_generation(), outcome(0, "a100-spot,a100", "slurmbridge: job sent to pools a100-spot,a100", 1));
	CHECK(lookup(&a100, &part, &msg, &rc), "miss after the store");
	CHECK(rc == 0 && part && !strcmp(part, "a100-spot,a100") && msg && strstr(msg, "job sent"),
	      "hit wrote rc %d partition %s message %s", rc, part, msg);
	free(part);
	free(msg);
	CHECK(!lookup(&other_user, &part, &msg, &rc), "another user's request hit");
	CHECK(!lookup(&empty_partition, &part, &msg, &rc), "partition \"\" hit the entry of no partition");
	CHECK(!lookup(&longer, &part, &msg, &rc), "a100=10 hit the entry of a100=1");
}

/* A GPU batch job's answer sets open_mode to append (a rerun after a requeue keeps what the
 * first run wrote); a hit sets it again, and an answer without it leaves open_mode alone. */
static void test_the_append_mode_is_cached_with_the_answer(void)
{
	struct pools_request batch = request(NULL, "gres/gpu:v100=1", 1001);
	struct pools_request chose = request(NULL, "gres/gpu:v100=1", 1001);
	struct pools_cache_key key;
	struct pools_outcome out;
	job_desc_msg_t desc;
	int rc;

	batch.n[POOLS_BATCH] = 1;
	chose.n[POOLS_BATCH] = 1;
	chose.n[POOLS_OPEN_MODE] = OPEN_MODE_TRUNCATE;
	out = outcome(0, "v100", NULL, 1);
	out.append_output = 1;
	store(&batch, pools_cache_generation(), out);
	store(&chose, pools_cache_generation(), outcome(0, "v100", NULL, 1));

	memset(&desc, 0, sizeof(desc));
	CHECK(pools_cache_key(&batch, &key) && pools_cache_apply(&key, &desc, NULL, &rc), "miss after the store");
	CHECK(desc.open_mode == OPEN_MODE_APPEND, "open_mode %d after a hit, want OPEN_MODE_APPEND", desc.open_mode);
	free(desc.partition);

	memset(&desc, 0, sizeof(desc));
	desc.open_mode = OPEN_MODE_TRUNCATE;
	CHECK(pools_cache_key(&chose, &key) && pools_cache_apply(&key, &desc, NULL, &rc), "miss of --open-mode=truncate");
	CHECK(desc.open_mode == OPEN_MODE_TRUNCATE, "the user's --open-mode=truncate became %d", desc.open_mode);
	free(desc.partition);
}

static void test_uncacheable_answers_are_freed_not_kept(void)
{
	struct pools_request refused = request("cpu", "gres/gpu:a100=1", 1001);
	char *part, *msg;
	int rc;

	store(&refused, pools_cache_generation(), outcome(2072, NULL, "slurmbridge: pool cpu has no GPUs", 0));
	CHECK(!lookup(&refused, &part, &msg, &rc), "an answer that wrote a log line was cached");
}

static void test_a_new_generation_drops_every_answer(void)
{
	struct pools_request r = request(NULL, "gres/gpu=2", 1001);
	uint64_t before = pools_cache_generation();
	char *part, *msg;
	int rc;

	store(&r, before, outcome(0, "a100-spot,a100,v100", NULL, 1));
	CHECK(lookup(&r, &part, &msg, &rc), "miss right after the store");
	free(part);
	pools_cache_invalidate();
	CHECK(!lookup(&r, &part, &msg, &rc), "an answer of the old config was served after the swap");
	/* Decided under the old config while the swap happened: stored late, never served. */
	store(&r, before, outcome(0, "a100-spot,a100,v100", NULL, 1));
	CHECK(!lookup(&r, &part, &msg, &rc), "an answer decided before the swap was served after it");
}

static void test_requests_too_long_to_key_are_never_cached(void)
{
	char *comment = malloc(POOLS_CACHE_KEY_MAX + 10);
	struct pools_request r = request(NULL, "gres/gpu=1", 1001);
	struct pools_cache_key key;

	memset(comment, 'x', POOLS_CACHE_KEY_MAX + 9);
	comment[POOLS_CACHE_KEY_MAX + 9] = 0;
	r.s[POOLS_COMMENT] = comment;
	CHECK(!pools_cache_key(&r, &key), "a request longer than a key was keyed");
	free(comment);
}

/* Many threads store and look up overlapping requests while the generation moves: every hit
 * must carry the partition its own request was stored with. */
#define THREADS 8
#define ROUNDS 20000
static void *hammer(void *arg)
{
	long t = (long) arg;
	char tres[64], want[64];

	for (int i = 0; i < ROUNDS; i++) {
		int shape = (i * 7 + (int) t) % 700; /* more shapes than slots: collisions */
		struct pools_request r;
		char *part, *msg;
		int rc;

		snprintf(tres, sizeof(tres), "gres/gpu=%d", shape);
		snprintf(want, sizeof(want), "pool-%d", shape);
		r = request(NULL, tres, 1001);
		if (lookup(&r, &part, &msg, &rc)) {
			CHECK(part && !strcmp(part, want), "request %s answered %s", tres, part);
			free(part);
			free(msg);
		} else {
			store(&r, pools_cache_generation(), outcome(0, want, NULL, 1));
		}
		if (t == 0 && i % 5000 == 0)
			pools_cache_invalidate();
	}
	return NULL;
}

static void test_concurrent_use(void)
{
	pthread_t th[THREADS];

	for (long t = 0; t < THREADS; t++)
		pthread_create(&th[t], NULL, hammer, (void *) t);
	for (int t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
}

int main(void)
{
	pools_cache_init();
	test_answers_exactly_the_request_it_stored();
	test_the_append_mode_is_cached_with_the_answer();
	test_uncacheable_answers_are_freed_not_kept();
	test_a_new_generation_drops_every_answer();
	test_requests_too_long_to_key_are_never_cached();
	test_concurrent_use();
	pools_cache_fini();
	pools_cache_init(); /* a reload in the same process */
	test_answers_exactly_the_request_it_stored();
	pools_cache_fini();
	if (failures) {
		fprintf(stderr, "%d failures\n", failures);
		return 1;
	}
	printf("decision cache: all tests passed\n");
	return 0;
}
