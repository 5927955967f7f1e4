/*
 * The decision cache: answers a request the Go side has already decided, under the same pools
 * config and slurmctld settings, without entering Go. Entering Go from a slurmctld RPC thread
 * is most of the plugin's cost (bench/plugin-overhead.sh: a Go plugin that does nothing costs
 * slurmctld nearly what routing does), and a cluster's submissions repeat a few shapes.
 */
#ifndef SLURMBRIDGE_JOB_SUBMIT_POOLS_DECISION_CACHE_H
#define SLURMBRIDGE_JOB_SUBMIT_POOLS_DECISION_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "glue.h"

/* Internal to the plugin: none of it is added to slurmctld's symbol namespace. */
#pragma GCC visibility push(hidden)

/* The longest key cached; a request with longer strings (a long comment) always asks Go. */
#define POOLS_CACHE_KEY_MAX 2048

struct pools_cache_key {
	size_t len;
	uint64_t hash;
	unsigned char bytes[POOLS_CACHE_KEY_MAX];
};

void pools_cache_init(void);
/* Frees every entry; only when no submission can be running (plugin fini). */
void pools_cache_fini(void);
/* The current generation: read it before asking Go, and store the answer under it. */
uint64_t pools_cache_generation(void);
/* Fills key from req; 0 when the request does not fit (then it is not cached). */
int pools_cache_key(const struct pools_request *req, struct pools_cache_key *key);
/* On a hit, applies the cached answer to desc and *err_msg, sets *rc and returns 1. */
int pools_cache_apply(const struct pools_cache_key *key, job_desc_msg_t *desc, char **err_msg, int *rc);
/* Keeps out under key, taking its strings, or frees them when out is not cacheable. */
void pools_cache_store(const struct pools_cache_key *key, uint64_t generation, struct pools_outcome *out);

#pragma GCC visibility pop

#endif
