// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * lru.c - a bounded least-recently-used map from 64-bit keys to a value and
 * a weight. Two users: every router's affinity table (key -> the worker of
 * its last connection, bounded in entries as the kernel's table is)
 * and every worker's prefix cache (conversation -> tokens of its context
 * cached, bounded in tokens like smg's mock worker's KV).
 *
 * Chained hashing over an entry array, indices instead of pointers so that
 * the array can grow; the recency list is doubly linked through the same
 * entries. Nothing depends on addresses, so runs stay deterministic.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t sim_hash2(uint64_t a, uint64_t b)
{
	return mix64(mix64(a + 0x9e3779b97f4a7c15ULL) ^ (b * 0xd1342543de82ef95ULL + 1));
}

void sim_lru_init(struct sim_lru *l, uint32_t max_entries, uint64_t high, uint64_t low)
{
	memset(l, 0, sizeof(*l));
	l->head = l->tail = l->free = -1;
	l->max_entries = max_entries;
	l->high = high;
	l->low = low < high ? low : high;
}

void sim_lru_free(struct sim_lru *l)
{
	free(l->e);
	free(l->bucket);
	l->e = NULL;
	l->bucket = NULL;
}

static uint32_t bucket_of(const struct sim_lru *l, uint64_t key)
{
	return (uint32_t)(mix64(key) & (l->nbucket - 1));
}

static int32_t find(const struct sim_lru *l, uint64_t key)
{
	int32_t i;

	if (!l->nbucket)
		return -1;
	for (i = l->bucket[bucket_of(l, key)]; i >= 0; i = l->e[i].hnext)
		if (l->e[i].key == key)
			return i;
	return -1;
}

/* Twice as many buckets as entries allocated: chains stay short. Every
 * entry in use is on the recency list. */
static int rehash(struct sim_lru *l, uint32_t nbucket)
{
	int32_t *b = malloc(nbucket * sizeof(*b)), i;
	uint32_t k;

	if (!b)
		return -1;
	free(l->bucket);
	l->bucket = b;
	l->nbucket = nbucket;
	for (k = 0; k < nbucket; k++)
		b[k] = -1;
	for (i = l->head; i >= 0; i = l->e[i].next) {
		uint32_t h = bucket_of(l, l->e[i].key);

		l->e[i].hnext = b[h];
		b[h] = i;
	}
	return 0;
}

/* A free entry, the array grown when there is none. */
static int32_t entry_alloc(struct sim_lru *l)
{
	int32_t i;

	if (l->free >= 0) {
		i = l->free;
		l->free = l->e[i].next;
		return i;
	}
	if (l->used == l->alloc) {
		uint32_t cap = l->alloc ? l->alloc * 2 : 64;
		struct sim_lru_ent *e;

		if (cap > INT32_MAX / 2)
			return -1;
		e = realloc(l->e, cap * sizeof(*e));
		if (!e)
			return -1;
		l->e = e;
		l->alloc = cap;
		if (rehash(l, cap * 2))
			return -1;
	}
	return (int32_t)l->used++;
}

static void list_unlink(struct sim_lru *l, int32_t i)
{
	struct sim_lru_ent *x = &l->e[i];

	if (x->prev >= 0)
		l->e[x->prev].next = x->next;
	else
		l->head = x->next;
	if (x->next >= 0)
		l->e[x->next].prev = x->prev;
	else
		l->tail = x->prev;
}

static void list_push_front(struct sim_lru *l, int32_t i)
{
	l->e[i].prev = -1;
	l->e[i].next = l->head;
	if (l->head >= 0)
		l->e[l->head].prev = i;
	else
		l->tail = i;
	l->head = i;
}

static void entry_remove(struct sim_lru *l, int32_t i)
{
	int32_t *p = &l->bucket[bucket_of(l, l->e[i].key)];

	while (*p != i)
		p = &l->e[*p].hnext;
	*p = l->e[i].hnext;
	list_unlink(l, i);
	l->weight -= l->e[i].weight;
	l->n--;
	l->evicted++;
	l->e[i].next = l->free;
	l->free = i;
}

/*
 * Over its bounds: the least recent entries go, never keep (the one just
 * put). Above the high weight mark, the weight comes down to the low one,
 * and the last entry to go is only trimmed: in a prefix cache the least
 * recent conversation loses the end of its context first.
 */
static void evict(struct sim_lru *l, int32_t keep)
{
	while (l->max_entries && l->n > l->max_entries && l->tail != keep)
		entry_remove(l, l->tail);
	if (!l->high || l->weight <= l->high)
		return;
	while (l->weight > l->low && l->tail >= 0 && l->tail != keep) {
		struct sim_lru_ent *t = &l->e[l->tail];
		uint64_t excess = l->weight - l->low;

		if (t->weight > excess) {
			t->weight -= excess;
			l->weight -= excess;
			l->trimmed++;
			break;
		}
		entry_remove(l, l->tail);
	}
}

bool sim_lru_peek(const struct sim_lru *l, uint64_t key, uint64_t *value, uint64_t *weight)
{
	int32_t i = find(l, key);

	if (i < 0)
		return false;
	if (value)
		*value = l->e[i].value;
	if (weight)
		*weight = l->e[i].weight;
	return true;
}

int sim_lru_put(struct sim_lru *l, uint64_t key, uint64_t value, uint64_t weight)
{
	int32_t i = find(l, key);

	if (i >= 0) {
		list_unlink(l, i);
		l->weight -= l->e[i].weight;
	} else {
		uint32_t h;

		i = entry_alloc(l);
		if (i < 0)
			return -1;
		h = bucket_of(l, key);
		l->e[i].key = key;
		l->e[i].hnext = l->bucket[h];
		l->bucket[h] = i;
		l->n++;
	}
	l->e[i].value = value;
	l->e[i].weight = weight;
	l->weight += weight;
	list_push_front(l, i);
	evict(l, i);
	return 0;
}
