// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_maps.bpf.h - the data plane's maps and the accessors every program
 * needs, for each BPF object that steers: the cgroup hooks (steer.bpf.c) and
 * any other program that must share the same tables, counters and locks.
 * Every map is pinned by name, so a second object that includes this header
 * and is loaded with the same pin root reuses the very same maps.
 * Include after vmlinux.h, the libbpf headers and steer_common.h.
 */
#ifndef STEER_MAPS_BPF_H
#define STEER_MAPS_BPF_H

/*
 * One generation of tables: every service, keyed by its virtual address.
 * User space never edits a generation in place; it builds a new one and swaps
 * it into steer_gen, and the kernel frees the old one only after every
 * program that might still read it has finished (RCU).
 */
struct steer_gen_inner {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, STEER_MAX_SERVICES);
	__type(key, struct steer_addr);
	__type(value, struct steer_table);
};

/* Never created (user space turns autocreate off): it exists so that the
 * object's BTF carries struct steer_table in full, which user space needs to
 * create each generation with named fields for bpftool. */
struct steer_gen_inner steer_tmpl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
	__array(values, struct steer_gen_inner);
} steer_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_slot_array);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, __u32);
	__type(value, struct steer_svc_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_svcst SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, __u32);
	__type(value, struct steer_svc_tree);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_tree SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, struct steer_sock);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_layout);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_layout SEC(".maps");

/* The registries below are written and read by user space only; they live in
 * this object so that they are created, typed and pinned with the others. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_SVC_IDS);
	__type(key, struct steer_addr);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_svcid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, struct steer_bk_key);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_bkslot SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, STEER_MAX_DRAINED);
	__type(key, struct steer_addr);
	__type(value, __u32);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_drain SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_ports);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_SLOT_IDS);
	__type(key, __u32);
	__type(value, struct steer_bk_info);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_bkinfo SEC(".maps");

/* Request accounting per slot (steer_wire.bpf.c); one value, like steer_slots. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_wire_array);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_wire SEC(".maps");

/* Cache affinity: where each client's last connect went, a set-associative
 * table (steer_common.h, "Cache affinity"). Mmapable for the alignment: its
 * values then start on a page, so that each 64-byte set is one cache line
 * (a plain array's values start where struct bpf_array ends). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, STEER_AFFINITY_SETS);
	__type(key, __u32);
	__type(value, struct steer_aff_set);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} steer_affin SEC(".maps");

/* ---- helpers ----------------------------------------------------------------- */

/* The slot accessor of steer_common.h over the one value holding them all:
 * plain address arithmetic, so it may run under a service lock. */
static __always_inline struct steer_slot *slot_in(void *all, __u32 slot)
{
	return &((struct steer_slot_array *)all)->s[slot & (STEER_SLOT_IDS - 1)];
}

static __always_inline struct steer_slot_array *slots_all(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steer_slots, &zero);
}

static __always_inline struct steer_wire *wire_in(void *all, __u32 slot)
{
	return &((struct steer_wire_array *)all)->w[slot & (STEER_SLOT_IDS - 1)];
}

static __always_inline struct steer_wire_array *wire_all(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&steer_wire, &zero);
}

static __always_inline struct steer_sock *sock_at(__u64 cookie, __u32 probe)
{
	__u32 idx = (__u32)(cookie + probe) & (STEER_SOCK_RECORDS - 1);

	return bpf_map_lookup_elem(&steer_socks, &idx);
}

/* The record of the socket with this cookie, or NULL; *idx is its index in
 * steer_socks (the step cadence's per-socket clock is kept by it). */
static __always_inline struct steer_sock *sock_find_idx(__u64 cookie, __u32 *idx)
{
	__u32 p;

	for (p = 0; p < STEER_SOCK_PROBES; p++) {
		struct steer_sock *r = sock_at(cookie, p);

		if (r && r->cookie == cookie) {
			*idx = (__u32)(cookie + p) & (STEER_SOCK_RECORDS - 1);
			return r;
		}
	}
	return 0;
}

/* The record of the socket with this cookie, or NULL. */
static __always_inline struct steer_sock *sock_find(__u64 cookie)
{
	__u32 idx;

	return sock_find_idx(cookie, &idx);
}

/* Cheap first test: is any virtual address on this port (network order)? */
static __always_inline int port_may_be_virtual(__u32 user_port)
{
	__u32 zero = 0;
	struct steer_ports *p = bpf_map_lookup_elem(&steer_ports, &zero);

	return p && steer_port_is_virtual(p, bpf_ntohs((__u16)user_port));
}

static __always_inline struct steer_table *table_lookup(const struct steer_addr *vip)
{
	__u32 zero = 0;
	void *gen = bpf_map_lookup_elem(&steer_gen, &zero);

	if (!gen)
		return 0;
	return bpf_map_lookup_elem(gen, vip);
}

static __always_inline void svc_touch(__u16 svc_id)
{
	__u32 id = svc_id;
	struct steer_svc_stats *st = bpf_map_lookup_elem(&steer_svcst, &id);

	if (st)
		__sync_fetch_and_add(&st->epoch, 1);
}

/* Under the service's lock: the time now, never before the time the
 * service's tree was built at (a clock read before the lock may be older than
 * a later holder's). */
static __always_inline __u64 key_clock(struct steer_svc_stats *st, __u64 read_ns)
{
	return read_ns < st->tree_clock.ref_ns ? st->tree_clock.ref_ns : read_ns;
}

#endif /* STEER_MAPS_BPF_H */
