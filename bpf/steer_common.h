/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * steer_common.h - the one contract between the kernel programs and user space.
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
#include <linux/bpf.h> /* struct bpf_spin_lock */
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
/*
 * Steered sockets tracked at once per node (steer_socks), a power of two.
 * A connect that finds no free record within STEER_SOCK_PROBES positions is
 * still steered and credited, but not tracked: getpeername then reports the
 * backend and the socket is not in the live count (steer_svc_stats.untracked).
 */
#define STEER_SOCK_RECORDS (1u << 17)
#define STEER_SOCK_PROBES 8

/*
 * Layout of the pinned maps. Bumped whenever a pinned map changes type, key,
 * value or meaning; smg-steerd migrates older pins (user/dataplane_layout.c).
 * 0 is the layout before steer_layout existed (connect-time scan, sockops).
 */
#define STEER_LAYOUT_VERSION 1

/* ---- Defaults (the same names and values as smg's least_load) --------- */

#define STEER_DEFAULT_CREDIT_TOKENS 1024 /* tokens credited per new connection */
#define STEER_DEFAULT_BYTES_PER_TOKEN 4	 /* request bytes per token (--bytes-per-token) */
#define STEER_MAX_BYTES_PER_TOKEN 65535	 /* steer_table.bytes_per_token is 16 bits */
#define STEER_DEFAULT_PIN_DIR "/sys/fs/bpf/smg-steer"

/* ---- Pinned object names: prefixed "steer_", at most 15 characters ---- */

#define STEER_MAP_GEN "steer_gen"	/* ARRAY_OF_MAPS[1] -> current table generation */
#define STEER_MAP_TABLES "steer_tables" /* pin of the current generation, for bpftool */
#define STEER_MAP_SLOTS "steer_slots"	/* ARRAY[1] of struct steer_slot_array, mmapable */
#define STEER_MAP_SVCST "steer_svcst"	/* ARRAY[svc_id] of struct steer_svc_stats, mmapable */
#define STEER_MAP_TREE "steer_tree"	/* ARRAY[svc_id] of struct steer_svc_tree (lock) */
#define STEER_MAP_SOCKS "steer_socks"	/* ARRAY[record] of struct steer_sock, mmapable */
#define STEER_MAP_SK "steer_sk"		/* SK_STORAGE of struct steer_sk: layout 0 sockets */
#define STEER_MAP_LAYOUT "steer_layout" /* ARRAY[1] of struct steer_layout, mmapable */
#define STEER_MAP_SVCID "steer_svcid"	/* HASH vip -> svc_id, the user-space registry */
#define STEER_MAP_BKSLOT "steer_bkslot" /* HASH (vip, backend) -> slot, the registry */
#define STEER_MAP_DRAIN "steer_drain"	/* HASH backend address -> drain flag, persisted */
#define STEER_MAP_BKINFO "steer_bkinfo" /* ARRAY[slot] of struct steer_bk_info, mmapable */
#define STEER_MAP_PORTS "steer_ports"	/* ARRAY[1] of struct steer_ports, mmapable */
#define STEER_MAP_WIRE "steer_wire"	/* ARRAY[1] of struct steer_wire_array, mmapable */
#define STEER_LINK_CONNECT4 "steer_lnk_c4"
#define STEER_LINK_CONNECT6 "steer_lnk_c6"
#define STEER_LINK_PEER4 "steer_lnk_gp4"
#define STEER_LINK_PEER6 "steer_lnk_gp6"
#define STEER_LINK_RELEASE "steer_lnk_rel"
#define STEER_LINK_WIRE_OUT "steer_lnk_wout" /* cgroup_skb egress: request bytes */
#define STEER_LINK_WIRE_IN "steer_lnk_win"   /* cgroup_skb ingress: first response byte */
#define STEER_LINK_SOCKOPS "steer_lnk_ops"   /* layout 0 only: removed by the migration */

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
	__u16 peers;	    /* routers sharing the backend (--peer-routers): a request's tokens
			     * keep it busy peers x ns_per_token each (busy_until); 0: 1 */
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
	/* (flags and bytes_per_token were one __u32 flags before the wire
	 * accounting: same size and offsets, so the pinned generation map's
	 * layout did not change; the kernel reads neither flag.) */
	__u16 flags;	       /* STEER_TBL_* */
	__u16 bytes_per_token; /* request bytes per token of pending work; 0: the default (4) */
	struct steer_entry e[STEER_MAX_BACKENDS]; /* sorted by base_wait_ns ascending */
};

#define STEER_TBL_FAIL_OPEN 0x1 /* every backend was ejected; published for spreading */
/* Ablation (issue 11): score a backend's unanswered requests by their pending
 * tokens (until the first response byte) instead of by its busy-until time
 * (the default, "fluid"). The kernel reads it when it builds the tree. */
#define STEER_TBL_PENDING 0x2

/* ---- Per-backend counters (steer_slots) --------------------------------- */

/*
 * One backend's kernel-side counters. The kernel writes them under its
 * service's lock (steer_svc_tree.lock), so a connect pays one atomic, on the
 * lock; release adds to closed atomically, without the lock. User space reads
 * them through an mmap of the map and never writes a field the kernel writes:
 * it drains by adding to drained_tokens, and counts stay cumulative, so
 *
 *     tokens in flight     = inflight_tokens - drained_tokens  (steer_slot_inflight)
 *     live connections     = live - closed                     (steer_slot_live)
 *
 * (both differences modulo 2^64). steer_dp_view() hands out copies with the
 * differences already taken: inflight_tokens and live as named, drained_tokens
 * and closed 0.
 */
struct steer_slot {
	__u64 inflight_tokens; /* tokens credited by connects, cumulative (kernel) */
	__u64 drained_tokens;  /* tokens drained by the daemon, cumulative (user space) */
	__u64 steered;	       /* connections placed by score (kernel) */
	__u64 fallbacks;       /* placed round-robin, the table had expired (kernel) */
	__s64 live;	       /* tracked connects, cumulative (kernel) */
	__u64 closed;	       /* tracked sockets released or steered again (kernel, atomic) */
	__u32 gen;	       /* bumped when the slot changes owner (user space) */
	__u32 flags;	       /* STEER_SLOT_* (user space) */
	__u32 svc_id;	       /* the service this slot belongs to (user space) */
	__u32 fails;	       /* connects in a row never established (kernel, atomic) */
};

#define STEER_SLOT_DRAINED 0x1 /* operator drain: never chosen for new connections */

/*
 * Fast ejection: a backend whose last STEER_FAIL_EJECT steered connects in a
 * row were released without ever being established (refused, timed out,
 * given up) is not chosen until a publish puts it back, or one of its
 * connects still in flight gets through. Up to three failures never eject.
 */
#define STEER_FAIL_EJECT 4

/* May the slot be chosen for a new connection? */
#define steer_slot_eligible(s) (!((s)->flags & STEER_SLOT_DRAINED) && (s)->fails < STEER_FAIL_EJECT)

/* Every slot in one map value, so that the kernel reaches any of them under a
 * service lock, where no map lookup is allowed. 2 MiB. */
struct steer_slot_array {
	struct steer_slot s[STEER_SLOT_IDS];
};

static __always_inline __u64 steer_slot_inflight(const struct steer_slot *s)
{
	return s->inflight_tokens - s->drained_tokens;
}

static __always_inline __s64 steer_slot_live(const struct steer_slot *s)
{
	return (__s64)((__u64)s->live - s->closed);
}

/* ---- Request accounting on steered sockets (steer_wire) ------------------- */

/*
 * One backend's request accounting, one per slot, beside its steer_slot (a
 * map of its own, so that no pinned map changed). Every byte a steered socket
 * sends is request work for its backend until the first byte of an answer
 * comes back; the kernel counts both at the socket (bpf/steer_wire.bpf.c) and
 * writes them under the service's lock. All cumulative, modulo 2^64, so that
 * user space never writes what the kernel writes:
 *
 *     pending bytes  = sent_bytes - answered_bytes          (steer_wire_pending)
 *     pending tokens = pending bytes / bytes_per_token      (of the service's table)
 *
 * A request is pending work from its first byte sent to the first byte of its
 * answer; then its real size (bytes / bytes_per_token) is credited in flight,
 * like a connect's credit, until the daemon drains it. A socket's first send
 * takes its connect's flat credit back (withdrawn_tokens): a connection that
 * never sends keeps it.
 *
 * Fields are host byte order. "kernel": written by the programs under the
 * service's lock (steer_svc_tree.lock); "user": written by user space only.
 */
struct steer_wire {
	__u64 sent_bytes;	/* bytes, request bytes sent on steered sockets (kernel) */
	__u64 answered_bytes;	/* bytes of those answered (first response byte after them)
				 * or abandoned (the socket closed or connected again) (kernel) */
	__u64 requests;		/* request boundaries: a socket's first send, and its first
				 * send after a response byte (kernel) */
	__u64 withdrawn_tokens; /* tokens; connect credits taken back at a socket's first send,
				 * added to steer_slot.drained_tokens too (kernel, statistic) */
	__u64 drain_seq;	/* bumped at every drain of the slot's in-flight tokens (user,
				 * atomic); a socket connected before a bump keeps its credit */
	/* Where the slot's leaf is in its service's tree, written when the tree is
	 * built (steer_tree_build_wire), so that a message re-scores the leaf
	 * without reading the table. Valid while cache_tgen == steer_svc_tree.tgen. */
	__u64 cache_tgen;      /* steer_table.generation of the copy; 0: none (kernel) */
	__u64 cache_base_ns;   /* ns; that entry's base_wait_ns (kernel) */
	__u64 cache_npt;       /* ns per token; that entry's ns_per_token (kernel) */
	__u16 cache_pos;       /* the entry's table position (kernel) */
	__u16 cache_bpt;       /* bytes per token of that table, resolved (kernel) */
	__u32 cache_credit;    /* credit_tokens of that table (kernel) */
	__u64 answered_tokens; /* tokens; answered requests' real sizes, credited to
				* steer_slot.inflight_tokens at their first response byte
				* (kernel, statistic) */
	/* The fluid estimate (issue 11, docs/algorithm.md 6.6): until when the
	 * backend is busy with this router's unanswered requests, served FIFO at
	 * peers x ns_per_token per token and never longer than the pending tokens
	 * take (steer_busy_sent, steer_busy_cap). CLOCK_MONOTONIC, read coarse
	 * (bpf_ktime_get_coarse_ns = CLOCK_MONOTONIC_COARSE). */
	__u64 busy_until_ns; /* ns, CLOCK_MONOTONIC coarse (kernel) */
	__u32 cache_peers;   /* that entry's peers, resolved >= 1 (kernel) */
	__u32 cache_flags;   /* that table's flags (STEER_TBL_PENDING) (kernel) */
};

/* Every slot's accounting in one map value, reachable under a service lock. 2.5 MiB. */
struct steer_wire_array {
	struct steer_wire w[STEER_SLOT_IDS];
};

static __always_inline __u64 steer_wire_pending(const struct steer_wire *w)
{
	return w->sent_bytes - w->answered_bytes;
}

static __always_inline __u32 steer_bytes_per_token(__u16 table_value)
{
	return table_value ? table_value : STEER_DEFAULT_BYTES_PER_TOKEN;
}

/* Per-service counters (steer_svcst), one cache line each. */
struct steer_svc_stats {
	__u64 steered;	 /* connections placed by score */
	__u64 fallbacks; /* connections placed round-robin after expiry */
	__u64 refused;	 /* connects failed because no backend was eligible */
	__u64 rr_cursor; /* round-robin position for the expiry fallback */
	/*
	 * Bumped by user space after it changes anything the kernel's selection
	 * tree caches (a drain flag, drained_tokens, a slot's owner); the next
	 * connect then rebuilds the tree. The kernel only reads it.
	 */
	__u64 epoch;
	__u64 untracked; /* steered connects that found no free socket record */
	/* ns, CLOCK_MONOTONIC coarse: the latest time the service's tree keys
	 * were computed at (kernel, under the tree's lock). Each writer keys at
	 * max(its clock read, this), so the times under the lock never go back
	 * (a clock read before the lock may be older than a later holder's). */
	__u64 key_clock_ns;
	__u64 reserved[1];
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
	__u64 queued_tokens;   /* tokens, as scored (reported, or waiting requests x prefill) */
	__u64 throughput_mtps; /* milli-tokens per second, as scored */
	__u64 work_ns;	       /* ns; queued_tokens / throughput */
	__u64 barrier_ns;      /* ns; kv_pressure_weight * k / (1 - k) */
	__u64 phase_ns;	       /* ns; random anti-herding offset (--peer-routers > 1), else 0 */
	__u64 snapshot_ns;     /* CLOCK_MONOTONIC of the last good snapshot; 0: never */
	__u64 updated_ns;      /* CLOCK_MONOTONIC of this record */
	__u32 kv_ppm;	       /* KV usage k, parts per million, as scored (clamped) */
	__u32 live_at_score;   /* live connections the estimate used */
	__u8 mode;	       /* enum steer_mode */
	__u8 health;	       /* enum steer_health */
	__u8 queued_estimated; /* 1: queue estimated from waiting requests */
	__u8 last_poll;	       /* enum steer_poll_kind */
	__u32 dp_ranks;	       /* DP ranks in the last snapshot */
	__u8 source;	       /* enum steer_source: where the load was read */
	__u8 reserved8[3];     /* zero */
	/* tokens taken off the reported queue: this router's requests pending
	 * (sent, not answered) when the poll was sent, issue 11; saturated */
	__u32 queued_pending;
};

/*
 * One steered socket (steer_socks): what getpeername reports and what its
 * release gives back. Found by socket cookie: the record at cookie % RECORDS,
 * or one of the STEER_SOCK_PROBES after it. 64 bytes, one cache line.
 */
struct steer_sock {
	__u64 cookie;	  /* socket cookie; 0: free. Claimed with a compare-and-swap */
	__u32 vip_ip6[4]; /* the address the application asked for, network order */
	__u32 be_ip6[4];  /* the backend it was steered to, network order */
	__u16 vip_port;	  /* network order */
	__u16 be_port;	  /* network order */
	__u32 slot;	  /* backend slot */
	__u32 slot_gen;	  /* steer_slot.gen at connect */
	__u16 flags;	  /* STEER_SOCK_* */
	__u16 svc_id;	  /* service id at connect */
	/* Request accounting (steer_wire), written under the service's lock: */
	__u32 unanswered; /* bytes sent since the last response byte; saturates at 2^32 - 1
			   * (bytes beyond are not counted as sent either) */
	__u32 drain_seq;  /* low 32 bits of steer_wire.drain_seq at connect */
};

#define STEER_SOCK_LIVE 0x1	/* counted in steer_slot.live; release adds 1 to closed */
#define STEER_SOCK_CREDITED 0x2 /* connect credited the flat credit (table not expired) */
#define STEER_SOCK_SENT 0x4	/* has sent request bytes; its credit was settled then */

/*
 * A service's selection state (steer_tree), under its lock: a tournament tree
 * over the positions of the table it was built from. Leaf p holds position p
 * when that entry is eligible; each inner node holds the better of its two
 * children (lower score, ties to the lower position), so the root is exactly
 * steer_select()'s pick. A connect credits the root and re-plays the eight
 * matches on its path: O(log 256) whatever the shape of the table. The tree is
 * rebuilt when the table's generation or steer_svc_stats.epoch changes.
 */
#define STEER_TREE_LEAF0 (STEER_MAX_BACKENDS - 1) /* node index of leaf 0 */
#define STEER_TREE_DEPTH 8			  /* log2(STEER_MAX_BACKENDS) */
#define STEER_TREE_NONE 0xffff

struct steer_svc_tree {
	struct bpf_spin_lock lock;
	__u32 n;			   /* leaves built (the table's n) */
	__u64 tgen;			   /* steer_table.generation built from; 0: none */
	__u64 epoch;			   /* steer_svc_stats.epoch built with */
	__u64 score[STEER_MAX_BACKENDS];   /* ns, by table position */
	__u16 win[2 * STEER_MAX_BACKENDS]; /* node k: children 2k+1, 2k+2; the last is unused */
};

/* The pinned layout version and what the kernel must still do for sockets of
 * an older layout (steer_layout). */
struct steer_layout {
	__u32 version;	   /* STEER_LAYOUT_VERSION */
	__u32 flags;	   /* STEER_LAYOUT_* */
	__u64 legacy_live; /* layout-0 sockets still counted live; release takes them off */
	__u64 reserved[6];
};

#define STEER_LAYOUT_LEGACY_SK 0x1 /* sockets steered by layout 0 may still be open */

/* Socket-local storage of a socket steered by layout 0 (steer_sk). */
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

/* Tokens of work a backend has beyond its base: the connect credits in flight
 * plus the request bytes sent and not yet answered, in tokens. */
static __always_inline __u64 steer_work_tokens(__u64 inflight_tokens, __u64 pending_bytes,
					       __u32 bytes_per_token)
{
	return steer_sat_add(inflight_tokens, pending_bytes / bytes_per_token);
}

/* Resolves a slot number to its request accounting, or NULL (no pending work). */
typedef struct steer_wire *(*steer_wire_fn)(void *wctx, __u32 slot);

/* A slot's work in tokens: its in-flight credits, plus its pending request
 * bytes when wire_at is given. */
static __always_inline __u64 steer_slot_work(const struct steer_slot *s, steer_wire_fn wire_at,
					     void *wctx, __u32 slot, __u32 bytes_per_token)
{
	const struct steer_wire *w = wire_at ? wire_at(wctx, slot) : 0;

	return steer_work_tokens(steer_slot_inflight(s), w ? steer_wire_pending(w) : 0,
				 bytes_per_token);
}

/* The outcome of one selection. */
struct steer_pick {
	__u64 score;   /* ns; the chosen backend's score (its expected wait) */
	__u64 key;     /* its sort key (steer_key): the score, plus now in the fluid mode */
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
 * score_b = base_wait_ns_b + work_b * ns_per_token_b, argmin, where work_b is
 * the slot's in-flight credits plus, when wire_at is given, its pending
 * request bytes / the table's bytes_per_token (steer_slot_work),
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
static __always_inline void steer_select_wire(const struct steer_table *t, steer_slot_fn slot_at,
					      void *ctx, steer_wire_fn wire_at, void *wctx,
					      int early_exit, struct steer_pick *best)
{
	__u32 n = t->n, bpt = steer_bytes_per_token(t->bytes_per_token);
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
		if (!s || !steer_slot_eligible(s))
			continue;
		score = steer_score(e->base_wait_ns,
				    steer_slot_work(s, wire_at, wctx, e->slot, bpt),
				    e->ns_per_token);
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

/* The same without pending request bytes (credits only). */
static __always_inline void steer_select(const struct steer_table *t, steer_slot_fn slot_at,
					 void *ctx, int early_exit, struct steer_pick *best)
{
	steer_select_wire(t, slot_at, ctx, 0, 0, early_exit, best);
}

/* ---- The fluid estimate: busy-until (issue 11, docs/algorithm.md 6.6) --- */

static __always_inline __u64 steer_max_u64(__u64 a, __u64 b)
{
	return a > b ? a : b;
}

/* Busy time one pending token adds at a slot: ns_per_token x peers, from the
 * slot's cache of its table entry (steer_tree_build_at). */
static __always_inline __u64 steer_busy_unit(const struct steer_wire *w)
{
	return steer_sat_mul(w->cache_npt, w->cache_peers ? w->cache_peers : 1);
}

/*
 * A request's bytes were sent at now: the slot's pending bytes went from
 * before to after. Its new tokens (the change in pending tokens, so that
 * segments of any size add up to the request's tokens) queue behind what the
 * backend is busy with, and the backend is never busy longer than all its
 * pending tokens take:
 *     busy_until = min(max(busy_until, now) + T x unit, now + P x unit)
 */
static __always_inline void steer_busy_sent(struct steer_wire *w, __u64 now, __u64 before,
					    __u64 after)
{
	__u32 bpt = steer_bytes_per_token(w->cache_bpt);
	__u64 unit = steer_busy_unit(w), p = after / bpt, tokens = p - before / bpt;
	__u64 grown =
		steer_sat_add(steer_max_u64(w->busy_until_ns, now), steer_sat_mul(tokens, unit));
	__u64 cap = steer_sat_add(now, steer_sat_mul(p, unit));

	w->busy_until_ns = grown < cap ? grown : cap;
}

/* Pending work dropped at now (a first response byte, an abandoned request):
 * busy_until = min(busy_until, now + P x unit), P the pending tokens left. */
static __always_inline void steer_busy_cap(struct steer_wire *w, __u64 now)
{
	__u64 p = steer_wire_pending(w) / steer_bytes_per_token(w->cache_bpt);
	__u64 cap = steer_sat_add(now, steer_sat_mul(p, steer_busy_unit(w)));

	if (w->busy_until_ns > cap)
		w->busy_until_ns = cap;
}

/*
 * The sort key of a backend at time now (ns, CLOCK_MONOTONIC coarse):
 *   fluid (default):  base + inflight x npt + max(busy_until, now)
 *                     = its expected wait + now
 *   STEER_TBL_PENDING: base + (inflight + pending tokens) x npt  (no time)
 * All saturating. A fluid key only grows with now, so a key computed at an
 * earlier time is a lower bound of the key now (docs/algorithm.md 4.2).
 */
static __always_inline __u64 steer_key(__u64 base_wait_ns, __u64 ns_per_token, __u64 inflight,
				       const struct steer_wire *w, __u32 bytes_per_token,
				       __u32 flags, __u64 now)
{
	if (flags & STEER_TBL_PENDING)
		return steer_score(
			base_wait_ns,
			steer_work_tokens(inflight, w ? steer_wire_pending(w) : 0, bytes_per_token),
			ns_per_token);
	return steer_sat_add(steer_score(base_wait_ns, inflight, ns_per_token),
			     steer_max_u64(w ? w->busy_until_ns : 0, now));
}

/* The expected wait a key stands for at now. */
static __always_inline __u64 steer_key_wait(__u64 key, __u32 flags, __u64 now)
{
	if ((flags & STEER_TBL_PENDING) || key == STEER_U64_MAX || key < now)
		return key;
	return key - now;
}

/* The backend's remaining busy time at now, ns (0 when idle or no accounting). */
static __always_inline __u64 steer_busy_left(const struct steer_wire *w, __u64 now)
{
	return w && w->busy_until_ns > now ? w->busy_until_ns - now : 0;
}

/* Entry e's key at now, with its slot s (eligible) and accounting w (or NULL). */
static __always_inline __u64 steer_entry_key(const struct steer_table *t,
					     const struct steer_entry *e,
					     const struct steer_slot *s, const struct steer_wire *w,
					     __u64 now)
{
	return steer_key(e->base_wait_ns, e->ns_per_token, steer_slot_inflight(s), w,
			 steer_bytes_per_token(t->bytes_per_token), t->flags, now);
}

/*
 * The exact reference of the kernel's pick at time now: argmin of steer_key
 * over the eligible entries, ties to the earlier position. Every key is at
 * least base_wait_ns (+ now in the fluid mode), so once that reaches the best
 * key no later entry can win, not even a tie: the early exit is exact.
 * best->score is the winner's expected wait, best->key its key.
 */
static __always_inline void steer_select_at(const struct steer_table *t, steer_slot_fn slot_at,
					    void *ctx, steer_wire_fn wire_at, void *wctx, __u64 now,
					    int early_exit, struct steer_pick *best)
{
	__u32 n = t->n, i;
	__u64 floor_add = (t->flags & STEER_TBL_PENDING) ? 0 : now;

	best->score = STEER_U64_MAX;
	best->key = STEER_U64_MAX;
	best->found = 0;
	best->pos = STEER_NO_PICK;
	best->slot = 0;
	best->ip6[0] = best->ip6[1] = best->ip6[2] = best->ip6[3] = 0;
	best->port = 0;
	best->scanned = 0;
	for (i = 0; i < STEER_MAX_BACKENDS && i < n; i++) {
		const struct steer_entry *e = &t->e[i];
		struct steer_slot *s;
		__u64 key;

		if (early_exit && best->found &&
		    steer_sat_add(e->base_wait_ns, floor_add) >= best->key)
			break;
		best->scanned = (__u16)(i + 1);
		s = slot_at(ctx, e->slot);
		if (!s || !steer_slot_eligible(s))
			continue;
		key = steer_entry_key(t, e, s, wire_at ? wire_at(wctx, e->slot) : 0, now);
		if (!best->found || key < best->key) {
			best->found = 1;
			best->key = key;
			best->score = steer_key_wait(key, t->flags, now);
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
		if (s && steer_slot_eligible(s))
			return pos;
	}
	return STEER_NO_PICK;
}

/* ---- The selection tree (steer_svc_tree), shared verbatim too ------------ */

/* The better of two tree nodes' winners: a is from the left (lower positions),
 * so a tie keeps a, as steer_select's strict < keeps the earlier position. */
static __always_inline __u16 steer_tree_better(const struct steer_svc_tree *tr, __u16 a, __u16 b)
{
	if (b == STEER_TREE_NONE)
		return a;
	if (a == STEER_TREE_NONE)
		return b;
	return tr->score[b & (STEER_MAX_BACKENDS - 1)] < tr->score[a & (STEER_MAX_BACKENDS - 1)]
		       ? b
		       : a;
}

/* Re-play the matches above leaf pos, after its score changed. */
static __always_inline void steer_tree_fix(struct steer_svc_tree *tr, __u32 pos)
{
	__u32 node = STEER_TREE_LEAF0 + (pos & (STEER_MAX_BACKENDS - 1)), i;

	for (i = 0; i < STEER_TREE_DEPTH; i++) {
		node = (node - 1) >> 1;
		tr->win[node & (2 * STEER_MAX_BACKENDS - 1)] = steer_tree_better(
			tr, tr->win[(2 * node + 1) & (2 * STEER_MAX_BACKENDS - 1)],
			tr->win[(2 * node + 2) & (2 * STEER_MAX_BACKENDS - 1)]);
	}
}

/*
 * Build the tree from table t and the live counters at time now: leaf p is
 * entry p when its slot resolves and is eligible, keyed steer_entry_key() at
 * now. With wire_at, each slot's accounting also learns where its leaf is and
 * what its entry says (cache_*), so that a message can re-key it later. Sets
 * tgen and epoch. (now = 0 gives lower bounds of the keys at any time.)
 */
static __always_inline void steer_tree_build_at(struct steer_svc_tree *tr,
						const struct steer_table *t, steer_slot_fn slot_at,
						void *ctx, steer_wire_fn wire_at, void *wctx,
						__u64 epoch, __u64 now)
{
	__u32 n = t->n, i, bpt = steer_bytes_per_token(t->bytes_per_token);

	/* Three plain loops rather than one with an "i < n" test inside: the
	 * verifier then walks each once, instead of once per value of n. */
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		tr->win[STEER_TREE_LEAF0 + i] = STEER_TREE_NONE;
	for (i = 0; i < n && i < STEER_MAX_BACKENDS; i++) {
		const struct steer_entry *e = &t->e[i];
		struct steer_slot *s = slot_at(ctx, e->slot);
		struct steer_wire *w = wire_at ? wire_at(wctx, e->slot) : 0;

		if (w) {
			w->cache_tgen = t->generation;
			w->cache_base_ns = e->base_wait_ns;
			w->cache_npt = e->ns_per_token;
			w->cache_pos = (__u16)i;
			w->cache_bpt = (__u16)bpt;
			w->cache_credit = t->credit_tokens;
			w->cache_peers = e->peers ? e->peers : 1;
			w->cache_flags = t->flags;
		}
		if (!s || !steer_slot_eligible(s))
			continue;
		tr->score[i] = steer_entry_key(t, e, s, w, now);
		tr->win[STEER_TREE_LEAF0 + i] = (__u16)i;
	}
	for (i = 0; i < STEER_TREE_LEAF0; i++) {
		__u32 node = STEER_TREE_LEAF0 - 1 - i;

		tr->win[node] = steer_tree_better(tr, tr->win[2 * node + 1], tr->win[2 * node + 2]);
	}
	tr->n = n;
	tr->tgen = t->generation;
	tr->epoch = epoch;
}

static __always_inline void steer_tree_build_wire(struct steer_svc_tree *tr,
						  const struct steer_table *t,
						  steer_slot_fn slot_at, void *ctx,
						  steer_wire_fn wire_at, void *wctx, __u64 epoch)
{
	steer_tree_build_at(tr, t, slot_at, ctx, wire_at, wctx, epoch, 0);
}

static __always_inline void steer_tree_build(struct steer_svc_tree *tr, const struct steer_table *t,
					     steer_slot_fn slot_at, void *ctx, __u64 epoch)
{
	steer_tree_build_wire(tr, t, slot_at, ctx, 0, 0, epoch);
}

/* The table position the tree picks, or STEER_NO_PICK. */
static __always_inline __u32 steer_tree_pick(const struct steer_svc_tree *tr)
{
	__u16 w = tr->win[0];

	return w == STEER_TREE_NONE ? STEER_NO_PICK : w;
}

/* Record that position pos's slot now has work tokens of work
 * (steer_slot_work: credits in flight, plus pending request bytes). */
static __always_inline void
steer_tree_credit(struct steer_svc_tree *tr, const struct steer_table *t, __u32 pos, __u64 inflight)
{
	const struct steer_entry *e = &t->e[pos & (STEER_MAX_BACKENDS - 1)];

	tr->score[pos & (STEER_MAX_BACKENDS - 1)] =
		steer_score(e->base_wait_ns, inflight, e->ns_per_token);
	steer_tree_fix(tr, pos);
}

/*
 * Re-score the leaf of a slot whose work changed between connects (a request
 * sent or answered): w's cache says where the leaf is, valid while the tree
 * is built from the table the cache is from. A slot not in that tree (not in
 * its table, or not eligible) has no leaf to fix: the next build scores it.
 */
static __always_inline void steer_tree_rescore(struct steer_svc_tree *tr,
					       const struct steer_wire *w, __u64 work)
{
	__u32 pos = w->cache_pos & (STEER_MAX_BACKENDS - 1);

	if (w->cache_tgen != tr->tgen || !tr->tgen || tr->win[STEER_TREE_LEAF0 + pos] != pos)
		return;
	tr->score[pos] = steer_score(w->cache_base_ns, work, w->cache_npt);
	steer_tree_fix(tr, pos);
}

/* Leaf pos now holds key: re-play its matches. */
static __always_inline void steer_tree_set(struct steer_svc_tree *tr, __u32 pos, __u64 key)
{
	tr->score[pos & (STEER_MAX_BACKENDS - 1)] = key;
	steer_tree_fix(tr, pos);
}

/* Re-key the leaf of a slot whose work changed between connects (a request
 * sent, answered or abandoned), at now, from its cache (see
 * steer_tree_rescore for when there is a leaf). */
static __always_inline void steer_tree_rekey(struct steer_svc_tree *tr, const struct steer_slot *s,
					     const struct steer_wire *w, __u64 now)
{
	__u32 pos = w->cache_pos & (STEER_MAX_BACKENDS - 1);

	if (w->cache_tgen != tr->tgen || !tr->tgen || tr->win[STEER_TREE_LEAF0 + pos] != pos)
		return;
	steer_tree_set(tr, pos,
		       steer_key(w->cache_base_ns, w->cache_npt, steer_slot_inflight(s), w,
				 steer_bytes_per_token(w->cache_bpt), w->cache_flags, now));
}

/* Leaves re-keyed at most per connect before the tree is rebuilt instead. */
#define STEER_TREE_REFRESH 16

/*
 * The tree's pick at time now, exactly steer_select_at()'s at now. Every
 * cached key is a lower bound of its key now (a fluid key only grows with
 * time; everything that lowers a key re-keys its leaf or bumps the epoch), so
 * the root is the answer once its own key is current: re-key the root at now
 * and re-play its path until it is (docs/algorithm.md 4.2). After
 * STEER_TREE_REFRESH leaves, or when the table, the epoch or the root's
 * eligibility changed, rebuild at now instead.
 */
static __always_inline __u32 steer_tree_pick_at(struct steer_svc_tree *tr,
						const struct steer_table *t, steer_slot_fn slot_at,
						void *ctx, steer_wire_fn wire_at, void *wctx,
						__u64 epoch, __u64 now)
{
	int built = tr->tgen == t->generation && tr->epoch == epoch;
	__u32 pos = steer_tree_pick(tr), i;

	for (i = 0; built && i < STEER_TREE_REFRESH; i++) {
		const struct steer_entry *e;
		struct steer_slot *s;
		__u64 key;

		if (pos >= STEER_MAX_BACKENDS)
			return STEER_NO_PICK;
		e = &t->e[pos & (STEER_MAX_BACKENDS - 1)];
		s = slot_at(ctx, e->slot);
		if (!s || !steer_slot_eligible(s))
			break; /* a drain or an ejection ahead of its epoch bump */
		key = steer_entry_key(t, e, s, wire_at ? wire_at(wctx, e->slot) : 0, now);
		if (key == tr->score[pos & (STEER_MAX_BACKENDS - 1)])
			return pos;
		steer_tree_set(tr, pos, key);
		pos = steer_tree_pick(tr);
	}
	steer_tree_build_at(tr, t, slot_at, ctx, wire_at, wctx, epoch, now);
	return steer_tree_pick(tr);
}

#endif /* STEER_COMMON_H */
