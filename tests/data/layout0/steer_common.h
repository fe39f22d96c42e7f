/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * steer_common.h - the one contract between the kernel programs and user space.
 *
 * TEST FIXTURE: layout 0 as of commit 1795703 (bpf/steer_common.h there), kept
 * so that tests/test_upgrade.c can pin what an older smg-steerd pinned. With
 * -DSTEER_LAYOUT0_NO_SOURCE it is the layout of commit 9a19716, whose
 * steer_bk_info had no source field (80 instead of 88 bytes). Not used by the
 * product.
 *
 * Every struct, constant and map layout shared by bpf/steer.bpf.c and user/
 * lives here, and so does the selection math: the BPF program, the user-space
 * unit tests and the simulator compile these same inline functions, so the
 * code under test is the code that runs in the kernel.
 *
 * Byte order: addresses and ports are stored in network byte order, exactly as
 * struct bpf_sock_addr presents them. Every other field is host byte order.
 * IPv4 addresses are stored v4-mapped (::ffff:a.b.c.d) so that one key serves
 * connect4 and a dual-stack connect6 alike.
 */
#ifndef STEER_COMMON_H
#define STEER_COMMON_H

#ifndef __bpf__
#include <linux/types.h>
#endif

/* ---- Capacity -------------------------------------------------------- */

#define STEER_MAX_SERVICES 64					  /* virtual addresses */
#define STEER_MAX_BACKENDS 256					  /* backends per service table */
#define STEER_MAX_SLOTS (STEER_MAX_SERVICES * STEER_MAX_BACKENDS) /* backends in all */
/*
 * Id spaces: twice the limits above. A publish registers the new services
 * and backends before the swap and releases the removed ones only after it
 * (a connect may still be reading the old tables until then), so for a moment
 * both are registered: at full capacity, replacing everything still fits.
 */
#define STEER_SVC_IDS (2 * STEER_MAX_SERVICES)
#define STEER_SLOT_IDS (2 * STEER_MAX_SLOTS)
#define STEER_MAX_DRAINED 4096 /* persisted drained backend addresses */

/* ---- Defaults (the same names and values as smg's least_load) --------- */

#define STEER_DEFAULT_CREDIT_TOKENS 1024 /* tokens credited per new connection */
#define STEER_DEFAULT_PIN_DIR "/sys/fs/bpf/smg-steer"

/* ---- Pinned object names: prefixed "steer_", at most 15 characters ---- */

#define STEER_MAP_GEN "steer_gen"	/* ARRAY_OF_MAPS[1] -> current table generation */
#define STEER_MAP_TABLES "steer_tables" /* pin of the current generation, for bpftool */
#define STEER_MAP_SLOTS "steer_slots"	/* ARRAY[slot] of struct steer_slot, mmapable */
#define STEER_MAP_SVCST "steer_svcst"	/* ARRAY[svc_id] of struct steer_svc_stats, mmapable */
#define STEER_MAP_SK "steer_sk"		/* SK_STORAGE of struct steer_sk */
#define STEER_MAP_SVCID "steer_svcid"	/* HASH vip -> svc_id, the user-space registry */
#define STEER_MAP_BKSLOT "steer_bkslot" /* HASH (vip, backend) -> slot, the registry */
#define STEER_MAP_DRAIN "steer_drain"	/* HASH backend address -> drain flag, persisted */
#define STEER_MAP_BKINFO "steer_bkinfo" /* ARRAY[slot] of struct steer_bk_info, mmapable */
#define STEER_MAP_PORTS "steer_ports"	/* ARRAY[1] of struct steer_ports, mmapable */
#define STEER_LINK_CONNECT4 "steer_lnk_c4"
#define STEER_LINK_CONNECT6 "steer_lnk_c6"
#define STEER_LINK_PEER4 "steer_lnk_gp4"
#define STEER_LINK_PEER6 "steer_lnk_gp6"
#define STEER_LINK_SOCKOPS "steer_lnk_ops"

/* ---- Keys ------------------------------------------------------------ */

#define STEER_IPPROTO_TCP 6

/*
 * A transport address: the key of a virtual service, and the identity of a
 * backend. 20 bytes, no padding, so it hashes the same from C and BPF.
 */
struct steer_addr {
	__u32 ip6[4]; /* network byte order; IPv4 as ::ffff:a.b.c.d */
	__u16 port;   /* network byte order */
	__u16 proto;  /* host order; STEER_IPPROTO_TCP */
};

/* Key of steer_bkslot: which slot a configured backend of a service owns. */
struct steer_bk_key {
	struct steer_addr vip;
	struct steer_addr backend;
};

/*
 * Ports that some virtual address listens on, one bit per port (host byte
 * order: bit p is word p / 64, bit p % 64). A connect to any other port
 * leaves after one load, without the table lookups. User space sets a bit
 * before the table that needs it is published and clears it after the last
 * table using it is gone.
 */
struct steer_ports {
	__u64 bits[65536 / 64];
};

static __always_inline int steer_port_is_virtual(const struct steer_ports *p, __u16 port_host)
{
	return (p->bits[(port_host >> 6) & 1023] >> (port_host & 63)) & 1;
}

/* ---- The published table (value of the inner generation map) ---------- */

/* One backend in a service table. 40 bytes. */
struct steer_entry {
	__u64 base_wait_ns; /* ns; queued-work time plus the KV barrier; the sort key */
	__u64 ns_per_token; /* ns per token; 1e9 / throughput */
	__u32 ip6[4];	    /* traffic address, network byte order, IPv4 v4-mapped */
	__u16 port;	    /* traffic port, network byte order */
	__u16 reserved;	    /* zero */
	__u32 slot;	    /* index into steer_slots */
};

/*
 * A whole service table. User space builds a fresh generation map holding
 * every service and swaps it into steer_gen in one update, so a connect sees
 * either the old table or the new one, never a mix.
 */
struct steer_table {
	__u64 expires_ns;    /* CLOCK_MONOTONIC ns, read coarse in BPF; after it: round robin */
	__u64 published_ns;  /* CLOCK_MONOTONIC ns of the publish, for observability */
	__u64 generation;    /* publish sequence number, for observability */
	__u32 svc_id;	     /* index into steer_svcst */
	__u32 n;	     /* entries in use, <= STEER_MAX_BACKENDS; 0 refuses connects */
	__u32 credit_tokens; /* tokens added to the chosen backend's in-flight counter */
	__u32 flags;	     /* STEER_TBL_* */
	struct steer_entry e[STEER_MAX_BACKENDS]; /* sorted by base_wait_ns ascending */
};

#define STEER_TBL_FAIL_OPEN 0x1 /* every backend was ejected; published for spreading */

/* ---- Per-backend counters (steer_slots) --------------------------------- */

/*
 * One backend's kernel-side counters, one cache line each so that
 * concurrent connects to different backends do not share a line.
 * User space reads and drains these through an mmap of the map.
 */
struct steer_slot {
	__u64 inflight_tokens; /* tokens; credited by connect, drained (subtracted) by the daemon */
	__u64 steered;	       /* connections placed by score */
	__u64 fallbacks;       /* connections placed round-robin because the table expired */
	__s64 live;	       /* connections established and not yet closed */
	__u32 gen;   /* bumped when the slot changes owner; older sockets' closes are ignored */
	__u32 flags; /* STEER_SLOT_* */
	__u64 reserved[3];
};

#define STEER_SLOT_DRAINED 0x1 /* operator drain: never chosen for new connections */

/* Per-service counters (steer_svcst), one cache line each. */
struct steer_svc_stats {
	__u64 steered;	 /* connections placed by score */
	__u64 fallbacks; /* connections placed round-robin after expiry */
	__u64 refused;	 /* connects failed because no backend was eligible */
	__u64 rr_cursor; /* round-robin position for the expiry fallback */
	__u64 reserved[4];
};

/* How the daemon scored a backend (steer_bk_info.mode). */
enum steer_mode {
	STEER_MODE_NONE = 0,	 /* not scored (not in the table) */
	STEER_MODE_SNAPSHOT = 1, /* fresh GetLoads snapshot */
	STEER_MODE_ESTIMATE = 2, /* no fresh snapshot, peers report: live x prefill / nominal */
	STEER_MODE_DARK = 3,	 /* whole fleet dark: fewest live connections */
};

/* The daemon's view of a backend's health (steer_bk_info.health). */
enum steer_health {
	STEER_HEALTH_UNKNOWN = 0,
	STEER_HEALTH_HEALTHY = 1,
	STEER_HEALTH_EJECTED = 2, /* consecutive failed polls; out of the table */
};

/* Outcome of the last GetLoads poll (steer_bk_info.last_poll). */
enum steer_poll_kind {
	STEER_POLL_NONE = 0,
	STEER_POLL_OK = 1,
	STEER_POLL_UNIMPLEMENTED = 2, /* healthy, reports no loads */
	STEER_POLL_UNAVAILABLE = 3,
	STEER_POLL_DEADLINE = 4,
	STEER_POLL_INVALID = 5, /* undecodable, empty, or non-finite/negative numbers */
	STEER_POLL_ERROR = 6,	/* any other gRPC status */
	STEER_POLL_KINDS = 7,
};

/*
 * Where the daemon reads a backend's load from (steer_bk_info.source).
 * Chosen by --backend's loads=/engine= keys, or probed (engine=auto).
 */
enum steer_source {
	STEER_SOURCE_NONE = 0,	      /* not known yet: probing, or never answered */
	STEER_SOURCE_GRPC_SGLANG = 1, /* /sglang.grpc.scheduler.SglangScheduler/GetLoads */
	STEER_SOURCE_GRPC_VLLM = 2,   /* /vllm.grpc.engine.VllmEngine/GetLoads */
	STEER_SOURCE_GRPC_TOKENSPEED =
		3,		     /* /tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads */
	STEER_SOURCE_HTTP_LOADS = 4, /* HTTP GET /v1/loads?include=core (JSON) */
	STEER_SOURCE_HTTP_METRICS_VLLM = 5,   /* HTTP GET /metrics, vllm: names */
	STEER_SOURCE_HTTP_METRICS_SGLANG = 6, /* HTTP GET /metrics, sglang: or sglang_ names */
	STEER_SOURCE_TCP = 7, /* no load endpoint: liveness by TCP connect to the traffic port */
	STEER_SOURCES = 8,
};

/*
 * What the daemon knew about a backend when it last published, one per slot
 * (steer_bkinfo). Written by smg-steerd only, read by smg-steerctl, which
 * thereby explains scores even while the daemon is down. Not read by BPF.
 */
struct steer_bk_info {
	__u64 queued_tokens;	/* tokens, as scored (reported, or waiting requests x prefill) */
	__u64 throughput_mtps;	/* milli-tokens per second, as scored */
	__u64 work_ns;		/* ns; queued_tokens / throughput */
	__u64 barrier_ns;	/* ns; kv_pressure_weight * k / (1 - k) */
	__u64 phase_ns;		/* ns; random anti-herding offset (--peer-routers > 1), else 0 */
	__u64 snapshot_ns;	/* CLOCK_MONOTONIC of the last good snapshot; 0: never */
	__u64 updated_ns;	/* CLOCK_MONOTONIC of this record */
	__u32 kv_ppm;		/* KV usage k, parts per million, as scored (clamped) */
	__u32 live_at_score;	/* live connections the estimate used */
	__u8 mode;		/* enum steer_mode */
	__u8 health;		/* enum steer_health */
	__u8 queued_estimated;	/* 1: queue estimated from waiting requests */
	__u8 last_poll;		/* enum steer_poll_kind */
	__u32 dp_ranks;		/* DP ranks in the last snapshot */
#ifndef STEER_LAYOUT0_NO_SOURCE /* test fixture: commit 9a19716 had none of these */
	__u8 source;		/* enum steer_source: where the load was read */
	__u8 reserved8[3];	/* zero */
	__u32 reserved32;	/* zero */
#endif
};

/* Socket-local storage of a steered socket (steer_sk). */
struct steer_sk {
	__u32 vip_ip6[4]; /* the virtual address the application asked for, network order */
	__u16 vip_port;	  /* network order */
	__u16 flags;	  /* STEER_SK_* */
	__u32 slot;	  /* backend slot the socket was steered to */
	__u32 slot_gen;	  /* steer_slot.gen at connect time */
};

#define STEER_SK_STEERED 0x1 /* getpeername reports the virtual address */
#define STEER_SK_LIVE 0x2    /* counted in steer_slot.live; decrement once on close */

/* ---- Selection math, shared verbatim by the kernel and user space -------- */

#define STEER_U64_MAX (~(__u64)0)
#define STEER_NO_PICK 0xffffffffu

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

static __always_inline __u64 steer_sat_add(__u64 a, __u64 b)
{
	__u64 s = a + b;

	return s < a ? STEER_U64_MAX : s;
}

static __always_inline __u64 steer_sat_mul(__u64 a, __u64 b)
{
	__u64 a_hi = a >> 32, b_hi = b >> 32, small, big_hi, cross;

	/* Fast path: two 32-bit operands cannot overflow 64 bits. */
	if ((a_hi | b_hi) == 0)
		return a * b;
	if (a_hi && b_hi)
		return STEER_U64_MAX; /* both >= 2^32 */
	/* Exactly one operand has high bits: (hi*2^32 + lo) * small, with
	 * small < 2^32. Written without division or 128-bit products, which
	 * the BPF target does not have. */
	if (a_hi) {
		small = b;
		big_hi = a_hi;
		cross = (a & 0xffffffffULL) * small;
	} else {
		small = a;
		big_hi = b_hi;
		cross = (b & 0xffffffffULL) * small;
	}
	big_hi *= small; /* < 2^64: both factors < 2^32 */
	if (big_hi >> 32)
		return STEER_U64_MAX;
	return steer_sat_add(big_hi << 32, cross);
}

/* Expected wait of one backend for the next connection, ns, saturating. */
static __always_inline __u64 steer_score(__u64 base_wait_ns, __u64 inflight_tokens,
					 __u64 ns_per_token)
{
	return steer_sat_add(base_wait_ns, steer_sat_mul(inflight_tokens, ns_per_token));
}

/* The outcome of one selection. */
struct steer_pick {
	__u64 score;   /* ns; the chosen backend's score */
	__u32 found;   /* 1 when a backend was chosen */
	__u32 pos;     /* its table position (not read by the kernel, see below) */
	__u32 slot;    /* its slot */
	__u32 ip6[4];  /* its traffic address, network order */
	__u16 port;    /* its traffic port, network order */
	__u16 scanned; /* entries examined before the early exit */
};

/*
 * Resolves a slot number to its counters, or NULL when out of range. The
 * kernel passes a function that looks into steer_slots; user space passes one
 * that indexes an array. Always inlined, so BPF sees a direct access.
 */
typedef struct steer_slot *(*steer_slot_fn)(void *ctx, __u32 slot);

/*
 * Least expected wait over a table sorted by base_wait_ns ascending:
 * score_b = base_wait_ns_b + inflight_tokens_b * ns_per_token_b, argmin,
 * ties to the earlier position. In-flight work only adds to base_wait_ns, so
 * once the next entry's base_wait_ns reaches the best score no later entry can
 * win, not even a tie: the scan stops there and the answer is exact.
 * Drained backends are skipped. With early_exit false the whole table is
 * scanned (tests compare the two). The result is left in *best.
 *
 * Why *best is caller memory and the winner's fields are copied out as it
 * improves: in the kernel, best points into a per-CPU map value, which the
 * verifier does not track by value. Kept in registers or on the stack, a best
 * score that is a known constant on some paths (initial, saturated) and a
 * position that differs on every path would stop the verifier from pruning
 * states, and its work would grow exponentially with the table size.
 */
static __always_inline void steer_select(const struct steer_table *t, steer_slot_fn slot_at,
					 void *ctx, int early_exit, struct steer_pick *best)
{
	__u32 n = t->n;
	__u32 i;

	best->score = STEER_U64_MAX;
	best->found = 0;
	best->pos = STEER_NO_PICK;
	best->slot = 0;
	best->ip6[0] = best->ip6[1] = best->ip6[2] = best->ip6[3] = 0;
	best->port = 0;
	best->scanned = 0;
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		const struct steer_entry *e;
		struct steer_slot *s;
		__u64 score;

		if (i >= n)
			break;
		e = &t->e[i];
		if (early_exit && best->found && e->base_wait_ns >= best->score)
			break;
		best->scanned = (__u16)(i + 1);
		s = slot_at(ctx, e->slot);
		if (!s || (s->flags & STEER_SLOT_DRAINED))
			continue;
		score = steer_score(e->base_wait_ns, s->inflight_tokens, e->ns_per_token);
		if (!best->found || score < best->score) {
			best->found = 1;
			best->score = score;
			best->pos = i;
			best->slot = e->slot;
			best->ip6[0] = e->ip6[0];
			best->ip6[1] = e->ip6[1];
			best->ip6[2] = e->ip6[2];
			best->ip6[3] = e->ip6[3];
			best->port = e->port;
		}
	}
}

/*
 * Stale-table fallback: the next backend round-robin from cursor, skipping
 * drained ones. Returns the table position or STEER_NO_PICK.
 */
static __always_inline __u32 steer_round_robin(const struct steer_table *t, steer_slot_fn slot_at,
					       void *ctx, __u64 cursor)
{
	__u32 n = t->n;
	__u32 start, i;

	if (n == 0 || n > STEER_MAX_BACKENDS)
		return STEER_NO_PICK;
	start = (__u32)(cursor % n);
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		__u32 pos;
		struct steer_slot *s;

		if (i >= n)
			break;
		pos = start + i;
		if (pos >= n)
			pos -= n;
		if (pos >= STEER_MAX_BACKENDS)
			break;
		s = slot_at(ctx, t->e[pos].slot);
		if (s && !(s->flags & STEER_SLOT_DRAINED))
			return pos;
	}
	return STEER_NO_PICK;
}

#endif /* STEER_COMMON_H */
