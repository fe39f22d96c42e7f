// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * affmap.bpf.c - the cache affinity table on its own (tools/bench/affmap.c
 * runs these by BPF_PROG_TEST_RUN, one operation per run).
 *
 * affm_affin has the shape of steer_affin (bpf/steer_maps.bpf.h): a
 * BPF_MAP_TYPE_ARRAY of STEER_AFFINITY_SETS struct steer_aff_set, 4 ways of
 * 16 bytes in one 64-byte line each, 16 MiB. It is not pinned: each round
 * creates it empty. affm_probe and affm_remember are the table's part of the
 * kernel's affinity_probe and affinity_remember (bpf/steer_choose.bpf.h),
 * global functions as those are, by the functions of steer_common.h: the
 * key's hash (steer_aff_hash) names its set and its tag; a lookup reads the
 * set and looks for the tag (steer_aff_way_of), and renews the way's last_ns
 * in place when it finds it; an insert writes the key's way, or else the way
 * least recently connected (steer_aff_way_to_write). The probe's idle check
 * and what it reads of the remembered backend (slot, generation, table
 * position) are outside the table and are not here.
 *
 * The key of each run is struct steer_aff_key { mix of a seed and a counter,
 * svc_id 7, kind STEER_AFF_SOCKOPT }: for inserts the counter is affm_g's
 * ins, a new client at every run; hits look up one of the last window
 * clients inserted; misses, clients of another seed. The clock is the insert
 * counter + 1 (0 marks an empty way), so that no run reads a clock.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "steer_common.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE); /* as steer_affin: each set one cache line */
	__uint(max_entries, STEER_AFFINITY_SETS);
	__type(key, __u32);
	__type(value, struct steer_aff_set);
} affm_affin SEC(".maps");

/* Read and written by affmap.c between runs (the .bss map, mmapped): one
 * for the table (AFFM_TAB) and one for the key alone and the touch. */
struct affm_globals {
	__u64 seed;   /* clients inserted are steer_aff_mix(seed + i) */
	__u64 ins;    /* clients inserted so far: the next i */
	__u64 look;   /* lookups so far */
	__u64 window; /* hits look up one of the last window inserted (a power of 2) */
	__u64 hits;   /* lookups that found their key */
	__u64 sink;   /* the key-only and touch programs' output */
};

#define AFFM_TAB 0
#define AFFM_KEY 1

struct affm_globals affm_g[2];

static __always_inline void affm_key(struct steer_aff_key *k, __u64 seed, __u64 i)
{
	k->client = steer_aff_mix(seed + i); /* affmap.c finds the clients again by it */
	k->svc_id = 7;
	k->kind = STEER_AFF_SOCKOPT;
}

/* The next new client; returns the clock of its insert. */
static __always_inline __u64 affm_new(struct affm_globals *g, struct steer_aff_key *k)
{
	__u64 i = g->ins++;

	affm_key(k, g->seed, i);
	return i + 1;
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

/* ---- the table, as the kernel's connect uses it ------------------------------ */

/* affinity_probe's lookup: the key's way of its set, renewed at now when
 * found. Always 0. */
__noinline int affm_probe(const struct steer_aff_key *k, __u64 now)
{
	struct steer_aff_set *set;
	struct steer_aff *av;
	__u32 set_id, way;
	__u64 hash;

	if (!k || !k->kind)
		return 0;
	hash = steer_aff_hash(k);
	set_id = steer_aff_set_of(hash);
	set = bpf_map_lookup_elem(&affm_affin, &set_id);
	if (!set)
		return 0;
	way = steer_aff_way_of(set, steer_aff_tag(hash));
	if (way >= STEER_AFFINITY_WAYS)
		return 0;
	av = &set->way[way];
	av->last_ns = now;
	affm_g[AFFM_TAB].hits++;
	return 0;
}

/* affinity_remember: the key written, at now, by steer_aff_record. It hashes
 * the key itself (the kernel's takes the probe's set and tag): a new client
 * here pays the hash twice, 7 ns. Always 0. */
__noinline int affm_remember(const struct steer_aff_key *k, __u64 now)
{
	struct steer_aff_set *set;
	__u32 set_id, tag;
	__u64 hash;

	if (!k || !k->kind)
		return 0;
	hash = steer_aff_hash(k);
	set_id = steer_aff_set_of(hash);
	tag = steer_aff_tag(hash);
	set = bpf_map_lookup_elem(&affm_affin, &set_id);
	if (!set)
		return 0;
	steer_aff_record(set, tag, 3, 1, now);
	return 0;
}

/* ---- the floor, and the key alone ------------------------------------------ */

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
	affm_g[AFFM_KEY].sink += steer_aff_hash(&k);
	return XDP_PASS;
}

/* ---- the operations ---------------------------------------------------------- */

SEC("xdp")
int affm_insert(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_TAB], &k);

	affm_remember(&k, now);
	return XDP_PASS;
}

SEC("xdp")
int affm_hit(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_present(&affm_g[AFFM_TAB], &k);
	affm_probe(&k, affm_g[AFFM_TAB].ins + 1);
	return XDP_PASS;
}

SEC("xdp")
int affm_miss(struct xdp_md *ctx)
{
	struct steer_aff_key k;

	affm_absent(&affm_g[AFFM_TAB], &k);
	affm_probe(&k, affm_g[AFFM_TAB].ins + 1);
	return XDP_PASS;
}

/* A new client as a connect meets it: the probe misses, then the insert of
 * the same key at the same clock (affinity_probe, then affinity_remember). */
SEC("xdp")
int affm_new_client(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	__u64 now = affm_new(&affm_g[AFFM_TAB], &k);

	affm_probe(&k, now);
	affm_remember(&k, now);
	return XDP_PASS;
}

/* The least a lookup of a client out of the cache pays in a table this
 * large: the key, then one read of its set's line. */
SEC("xdp")
int affm_touch(struct xdp_md *ctx)
{
	struct steer_aff_key k;
	struct steer_aff_set *set;
	__u32 set_id;

	affm_absent(&affm_g[AFFM_KEY], &k);
	set_id = steer_aff_set_of(steer_aff_hash(&k));
	set = bpf_map_lookup_elem(&affm_affin, &set_id);
	if (set)
		affm_g[AFFM_KEY].sink += set->way[0].last_ns;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
