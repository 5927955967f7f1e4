/*
 * The decision cache (decision_cache.h). A fixed table of slots, each with its own lock: job
 * submissions run concurrently from Slurm 23.11, and a slot is held only to compare one key and
 * copy one answer out. An entry is valid only under the generation it was stored with; the Go
 * side bumps the generation after it swaps in a new pools config, so an answer decided under
 * the old config is never served after the swap. A request is told apart by every field the
 * Go side can read (struct pools_request), compared byte for byte, never by hash alone.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <slurm/slurm.h>

#include "decision_cache.h"

/* A power of two; a site's distinct request shapes in the last config's lifetime, roughly. */
#define CACHE_SLOTS 512

struct cache_entry {
	pthread_mutex_t lock;
	uint64_t generation; /* 0: empty */
	uint64_t hash;
	size_t key_len;
	unsigned char *key;
	int rc;
	char *partition;
	char *message;
	int append_output;
};

static struct cache_entry cache[CACHE_SLOTS];
/* Starts at 1 so that an empty entry (generation 0) never matches. */
static _Atomic uint64_t generation = 1;

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void init_locks(void)
{
	for (int i = 0; i < CACHE_SLOTS; i++)
		pthread_mutex_init(&cache[i].lock, NULL);
}

/* Once per process: an init after a fini (a plugin reload in the same slurmctld) finds the
 * locks ready and the entries cleared; any entry left is of an older generation. */
void pools_cache_init(void)
{
	pthread_once(&cache_once, init_locks);
}

static void clear_entry(struct cache_entry *e)
{
	free(e->key);
	free(e->partition);
	free(e->message);
	e->key = NULL;
	e->partition = e->message = NULL;
	e->key_len = 0;
	e->generation = 0;
}

void pools_cache_fini(void)
{
	for (int i = 0; i < CACHE_SLOTS; i++) {
		pthread_mutex_lock(&cache[i].lock);
		clear_entry(&cache[i]);
		pthread_mutex_unlock(&cache[i].lock);
	}
	atomic_fetch_add(&generation, 1);
}

uint64_t pools_cache_generation(void)
{
	return atomic_load(&generation);
}

void pools_cache_invalidate(void)
{
	atomic_fetch_add(&generation, 1);
}

static int put(struct pools_cache_key *key, const void *data, size_t len)
{
	if (len > POOLS_CACHE_KEY_MAX - key->len)
		return 0;
	memcpy(key->bytes + key->len, data, len);
	key->len += len;
	return 1;
}

/* Numbers first, then each string as a presence byte, its length and its bytes: NULL and ""
 * stay apart, and no two requests serialize alike. */
int pools_cache_key(const struct pools_request *req, struct pools_cache_key *key)
{
	uint64_t h = 14695981039346656037ull; /* FNV-1a */

	key->len = 0;
	key->hash = 0;
	if (!put(key, req->n, sizeof(req->n)))
		return 0;
	for (int i = 0; i < POOLS_STRINGS; i++) {
		const char *s = req->s[i];
		unsigned char present = s != NULL;
		uint32_t len = s ? (uint32_t) strnlen(s, POOLS_CACHE_KEY_MAX) : 0;

		if (len >= POOLS_CACHE_KEY_MAX || !put(key, &present, 1) || !put(key, &len, sizeof(len)) ||
		    !put(key, s ? s : "", len))
			return 0;
	}
	for (size_t i = 0; i < key->len; i++)
		h = (h ^ key->bytes[i]) * 1099511628211ull;
	key->hash = h;
	return 1;
}

static struct cache_entry *slot(uint64_t hash)
{
	return &cache[(hash ^ (hash >> 32)) & (CACHE_SLOTS - 1)];
}

int pools_cache_apply(const struct pools_cache_key *key, job_desc_msg_t *desc, char **err_msg, int *rc)
{
	struct cache_entry *e = slot(key->hash);
	int hit;

	pthread_mutex_lock(&e->lock);
	hit = e->generation == atomic_load(&generation) && e->hash == key->hash && e->key_len == key->len &&
	      memcmp(e->key, key->bytes, key->len) == 0;
	if (hit) {
		/* Copied while the slot is held: a store may free these strings once it is released. */
		if (e->partition)
			pools_set_partition(desc, e->partition);
		if (e->message)
			pools_set_err_msg(err_msg, e->message);
		if (e->append_output)
			desc->open_mode = OPEN_MODE_APPEND;
		*rc = e->rc;
	}
	pthread_mutex_unlock(&e->lock);
	return hit;
}

void pools_cache_store(const struct pools_cache_key *key, uint64_t gen, struct pools_outcome *out)
{
	struct cache_entry *e;
	unsigned char *copy = NULL;

	if (out->cacheable && (copy = malloc(key->len))) {
		e = slot(key->hash);
		memcpy(copy, key->bytes, key->len);
		pthread_mutex_lock(&e->lock);
		clear_entry(e);
		e->key = copy;
		e->key_len = key->len;
		e->hash = key->hash;
		e->rc = out->rc;
		e->partition = out->partition;
		e->message = out->message;
		e->append_output = out->append_output;
		e->generation = gen;
		pthread_mutex_unlock(&e->lock);
		out->partition = out->message = NULL;
		return;
	}
	free(out->partition);
	free(out->message);
	out->partition = out->message = NULL;
}
