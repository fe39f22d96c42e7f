// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * affmap.bpf.c - the cache affinity map on its own, side by side with a
 * set-associative table (tools/bench/affmap.c runs these by
 * BPF_PROG_TEST_RUN, one operation per run):
 *
 *   affm_lru    a BPF_MAP_TYPE_LRU_HASH declared as steer_affin is
 *               (bpf/steer_maps.bpf.h: STEER_AFFINITY_KEYS entries, one LRU
 *               list for every CPU, struct steer_aff_key -> struct steer_aff),
 *               not pinned: each round creates it empty;
 *   affm_set    a 4-way set-associative table in a plain array: 65,536
 *               buckets of 4 ways (the same 262,144 entries), a bucket per
 *               element (128 bytes, two cache lines). The bucket is a
 *               multiply-xorshift of the key; a lookup scans the 4 ways; an
 *               insert overwrites the key's way or else the way least recently
 *               used (smallest last_ns), without a lock: two CPUs writing one
 *               way at once misplace one client.
 *
 * The key of each run is the mix of a seed and a counter (its design's
 * affm_g.ins for inserts: a new client at every run; a window of the last
 * inserted for hits; another seed for misses). last_ns is the insert counter, so that
 * neither design pays a clock read. A lookup that finds its key renews
 * last_ns in place, as affinity_probe does.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "steer_common.h"

#define AFFM_WAYS 4
#define AFFM_SETS (STEER_AFFINITY_KEYS / AFFM_WAYS)

struct affm_way {
	__u64 client;
	__u32 svc_kind; /* svc_id ^ kind << 24: never 0 for a used way */
	__u32 slot;
	__u32 slot_gen;
	__u32 pad;
	__u64 last_ns;
};

struct affm_set {
	struct affm_way w[AFFM_WAYS];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, STEER_AFFINITY_KEYS);
	__type(key, struct steer_aff_key);
	__type(value, struct steer_aff);
} affm_lru SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, AFFM_SETS);
	__type(key, __u32);
	__type(value, struct affm_set);
} affm_set SEC(".maps");

/* Read and written by affmap.c between runs (the .bss map, mmapped): one
 * set per design (AFFM_LRU, AFFM_SET) and one for the key alone. */
struct affm_globals {
	__u64 seed;   /* clients inserted are mix(seed + i) */
	__u64 ins;    /* clients inserted so far: the next i */
	__u64 look;   /* lookups so far */
	__u64 window; /* hits look up one of the last window inserted (a power of 2) */
	__u64 hits;   /* lookups that found their key */
	__u64 sink;   /* the key-only program's output */
};

#define AFFM_LRU 0
#define AFFM_SET 1
#define AFFM_KEY 2

struct affm_globals affm_g[3];

static __always_inline __u64 affm_mix(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static __always_inline void affm_key(struct steer_aff_key *k, __u64 seed, __u64 i)
{
	k->client = affm_mix(seed + i);
	k->svc_id = 7;
	k->kind = 1;
}

/* The next new client. */
static __always_inline __u64 affm_new(struct affm_globals *g, struct steer_aff_key *k)
{
	__u64 i = g->ins++;

	affm_key(k, g->seed, i);
	return i;
}

/* One of the last window clients inserted. */
static __always_inline void affm_present(struct affm_globals *g, struct steer_aff_key *k)
{
	__u64 n = g->look++ & (g->window - 1);

	affm_key(k, g->seed, g->ins - 1 - n);
}

/* A client never inserted. */
static __always_inline void affm_absent(struct affm_globals *g, struct steer_aff_key *k)
{
	affm_key(k, g->seed ^ 0x5bd1e9955bd1e995ULL, g->look++);
}

/* The set-associative table's bucket: a multiply-xorshift of the key. */
static __always_inline __u32 affm_bucket(__u64 client, __u32 svc_kind)
{
	__u64 h = (client ^ ((__u64)svc_kind << 32)) * 0x9e3779b97f4a7c15ULL;

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	return (__u32)(h >> 40) & (AFFM_SETS - 1);
}

static __always_inline __u32 affm_svc_kind(const struct steer_aff_key *k)
{
	return k->svc_id ^ (k->kind << 24);
}

/* ---- the floor, and the key alone ---------------------------------------- */

SEC("xdp")
int affm_empty(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("xdp")
int affm_keyonly(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_new(&affm_g[AFFM_KEY], &k);
	affm_g[AFFM_KEY].sink += k.client ^ k.svc_id;
	return XDP_PASS;
}

/* ---- the LRU hash ---------------------------------------------------------- */

static __always_inline void affm_lru_put(const struct steer_aff_key *k, __u64 now)
{
	struct steer_aff a = { .slot = 3, .slot_gen = 1, .last_ns = now };

	bpf_map_update_elem(&affm_lru, k, &a, BPF_ANY);
}

SEC("xdp")
int affm_lru_insert(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_LRU], &k);

	affm_lru_put(&k, now);
	return XDP_PASS;
}

static __always_inline int affm_lru_lookup(const struct steer_aff_key *k)
{
	struct steer_aff *av = bpf_map_lookup_elem(&affm_lru, k);

	if (av) {
		av->last_ns = affm_g[AFFM_LRU].ins;
		affm_g[AFFM_LRU].hits++;
	}
	return XDP_PASS;
}

SEC("xdp")
int affm_lru_hit(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_present(&affm_g[AFFM_LRU], &k);
	return affm_lru_lookup(&k);
}

SEC("xdp")
int affm_lru_miss(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_absent(&affm_g[AFFM_LRU], &k);
	return affm_lru_lookup(&k);
}

/* A new client as a connect meets it: the probe's lookup misses, then the
 * insert (affinity_probe, then affinity_remember). */
SEC("xdp")
int affm_lru_new(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_LRU], &k);

	affm_lru_lookup(&k);
	affm_lru_put(&k, now);
	return XDP_PASS;
}

/* ---- the set-associative table -------------------------------------------- */

static __always_inline void affm_set_put(const struct steer_aff_key *k, __u64 now)
{
	__u32 sk = affm_svc_kind(k), b = affm_bucket(k->client, sk), i, victim = 0;
	struct affm_set *s = bpf_map_lookup_elem(&affm_set, &b);
	struct affm_way *w;
	__u64 oldest = ~0ULL;

	if (!s)
		return;
#pragma unroll
	for (i = 0; i < AFFM_WAYS; i++) {
		if (s->w[i].client == k->client && s->w[i].svc_kind == sk) {
			victim = i;
			break;
		}
		if (s->w[i].last_ns < oldest) {
			oldest = s->w[i].last_ns;
			victim = i;
		}
	}
	w = &s->w[victim & (AFFM_WAYS - 1)];
	w->client = k->client;
	w->svc_kind = sk;
	w->slot = 3;
	w->slot_gen = 1;
	w->last_ns = now + 1; /* 0: an empty way */
}

SEC("xdp")
int affm_set_insert(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_SET], &k);

	affm_set_put(&k, now);
	return XDP_PASS;
}

static __always_inline int affm_set_lookup(const struct steer_aff_key *k)
{
	__u32 sk = affm_svc_kind(k), b = affm_bucket(k->client, sk), i;
	struct affm_set *s = bpf_map_lookup_elem(&affm_set, &b);

	if (!s)
		return XDP_PASS;
#pragma unroll
	for (i = 0; i < AFFM_WAYS; i++) {
		if (s->w[i].client == k->client && s->w[i].svc_kind == sk) {
			s->w[i].last_ns = affm_g[AFFM_SET].ins + 1;
			affm_g[AFFM_SET].hits++;
			break;
		}
	}
	return XDP_PASS;
}

SEC("xdp")
int affm_set_hit(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_present(&affm_g[AFFM_SET], &k);
	return affm_set_lookup(&k);
}

SEC("xdp")
int affm_set_miss(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_absent(&affm_g[AFFM_SET], &k);
	return affm_set_lookup(&k);
}

/* The least any table of this size pays for a client out of the cache: one
 * read of a random bucket's first line. */
SEC("xdp")
int affm_set_touch(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u32 b;
	struct affm_set *s;

	affm_absent(&affm_g[AFFM_KEY], &k);
	b = affm_bucket(k.client, affm_svc_kind(&k));
	s = bpf_map_lookup_elem(&affm_set, &b);
	if (s)
		affm_g[AFFM_KEY].sink += s->w[0].last_ns;
	return XDP_PASS;
}

/* A new client: the lookup misses, then the insert (the set's two lines are
 * then in the cache). */
SEC("xdp")
int affm_set_new(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_SET], &k);

	affm_set_lookup(&k);
	affm_set_put(&k, now);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
