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
 * Layout of the pinned maps, stamped in steer_layout. Bumped when a pinned map
 * keeps its shape and changes its meaning: smg-steerd and smg-steerctl refuse
 * pins of another layout. A pinned map of another shape is replaced by the
 * owner with a warning (user/dataplane/pins.c).
 */
#define STEER_LAYOUT_VERSION 1

/* ---- Defaults (the same names and values as smg's least_load) --------- */

#define STEER_DEFAULT_CREDIT_TOKENS 1024 /* tokens credited per new connection */
#define STEER_DEFAULT_BYTES_PER_TOKEN 4	 /* request bytes per token (--bytes-per-token) */
/* --bytes-per-token's bound, checked by the configuration, the policy and
 * the publish alike: more is a unit mistake (JSON text is about 4 bytes a
 * token), and it fits steer_table.bytes_per_token's 16 bits. */
#define STEER_MAX_BYTES_PER_TOKEN 1024
#define STEER_DEFAULT_PIN_DIR "/sys/fs/bpf/smg-steer"

/* ---- Pinned object names: prefixed "steer_", at most 15 characters ---- */

#define STEER_MAP_GEN "steer_gen"	/* ARRAY_OF_MAPS[1] -> current table generation */
#define STEER_MAP_TABLES "steer_tables" /* pin of the current generation, for bpftool */
#define STEER_MAP_SLOTS "steer_slots"	/* ARRAY[1] of struct steer_slot_array, mmapable */
#define STEER_MAP_SVCST "steer_svcst"	/* ARRAY[svc_id] of struct steer_svc_stats, mmapable */
#define STEER_MAP_TREE "steer_tree"	/* ARRAY[svc_id] of struct steer_svc_tree (lock) */
#define STEER_MAP_SOCKS "steer_socks"	/* ARRAY[record] of struct steer_sock, mmapable */
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
#define STEER_LINK_SOCKOPS "steer_lnk_sops"  /* cgroup sockops: resets soon after the handshake */
#define STEER_LINK_SETSOCKOPT \
	"steer_lnk_sso" /* cgroup setsockopt: the application's affinity key */

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
	__u16 flags;	     /* STEER_TBL_* */
	/* Request bytes per token of pending work; 0: the default
	 * (steer_bytes_per_token). */
	__u16 bytes_per_token;
	/* ns (--worker-overload-wait): with STEER_TBL_OVERLOAD, a connect whose
	 * least expected wait (in-flight work included) is over it finds every
	 * backend overloaded; 0: no bound. */
	__u64 wait_bound_ns;
	/* Cache affinity (--affinity, steer_affinity_judge): a client's next
	 * connect stays on the backend of its last while that backend's wait
	 * is at most the least wait plus affinity_slack_ns. */
	__u64 affinity_slack_ns; /* ns; 0 with affinity on: stay only on a tie */
	__u64 affinity_idle_ns;	 /* ns (--affinity-timeout): a key idle this long is forgotten */
	__u32 affinity;		 /* enum steer_affinity: what identifies a client; 0: off */
	__u32 reserved32;	 /* zero */
	struct steer_entry e[STEER_MAX_BACKENDS]; /* sorted by base_wait_ns ascending */
};

#define STEER_TBL_FAIL_OPEN 0x1 /* every backend was ejected; published for spreading */
/* For observability only (the kernel does not read it): the daemon runs with
 * --wire-estimator off, so no request bytes are counted and every connection
 * keeps the flat connect credit. */
#define STEER_TBL_WIRE_OFF 0x4
/* The step cadence (--wire-estimator fluid-step, docs/algorithm.md, "The step cadence"): a
 * backend is also busy until the end of the engine step under way, as the
 * gaps between one streamed response's packets predict it (step_until in
 * steer_wire). The kernel reads it from the slot's cache (cache_flags). */
#define STEER_TBL_STEP 0x8
/* --peer-push (docs/algorithm.md, "Several routers"): a request sent or answered on one of
 * the service's sockets wakes smg-steerd's peer thread at once (steer_kick and
 * steer_kick_ring in steer_wire.bpf.c), which reports it to the other routers
 * then instead of at its next --peer-interval. The kernel reads it from the
 * slot's cache (cache_flags). */
#define STEER_TBL_PEER_PUSH 0x10
/* Overload protection (docs/operations.md, "Overload"): overloaded backends
 * (STEER_SLOT_OVERLOADED, a capacity pushback on the wire, live connections
 * at steer_wire.max_live, a wait over wait_bound_ns) take no new connection
 * while another backend can; when
 * none can, the connect is refused (ECONNREFUSED), or with
 * STEER_TBL_OVERLOAD_LEAST goes to the least bad. Answers' HTTP status is
 * read (steer_wire.bpf.c): 429 and 503 are pushback, other 5xx failed
 * connects for fast ejection. The kernel reads it from the table at a
 * connect, and from the slot's cache (cache_flags) on the wire. */
#define STEER_TBL_OVERLOAD 0x20
#define STEER_TBL_OVERLOAD_LEAST 0x40

/* ---- Cache affinity (--affinity) ---------------------------------------- */

/*
 * A client's connections return to the backend that served its last one,
 * which holds its prefix (KV) cache, while that backend is admitted and its
 * expected wait is at most the least wait plus the service's slack
 * (steer_affinity_judge). What identifies a client is the service's choice
 * (steer_table.affinity); the XDP ingress always keys by source address.
 */
enum steer_affinity {
	STEER_AFF_OFF = 0,
	STEER_AFF_CGROUP = 1,  /* the connecting task's cgroup v2 id: a container */
	STEER_AFF_NETNS = 2,   /* its network namespace cookie: a pod */
	STEER_AFF_SOCKOPT = 3, /* the key the application set on the socket */
	STEER_AFF_SOURCE = 4,  /* XDP ingress: the client's source address */
};

/*
 * The application's key, with no privilege: before connect(),
 *     __u64 key = ...;  setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, 8)
 * A cgroup/setsockopt program takes the call, keeps the key with the socket
 * (steer_affkey) and hides it from the kernel, which would answer
 * ENOPROTOOPT: on a host without smg-steer the call fails with that, which
 * the application may ignore. Key 0 clears it; any length but 8 is EINVAL.
 * include/smg_steer_affinity.h is the applications' copy of these numbers.
 */
#define STEER_SOL_AFFINITY 0x534d47 /* "SMG": a level no protocol of the kernel has */
#define STEER_SO_AFFINITY_KEY 1

#define STEER_MAP_AFFKEY "steer_affkey" /* SK_STORAGE: a socket's key (__u64), set by setsockopt */
#define STEER_MAP_AFFIN "steer_affin"	/* ARRAY of struct steer_aff_set, by set number */

/*
 * Where each client's last connect went: a set-associative table, all
 * services together. A 64-bit hash of a client's key (steer_aff_hash) names
 * its set and, in the set, its tag; the set's 4 ways hold the last clients
 * that landed in it, and a new one takes the way least recently connected
 * (steer_aff_way_to_write): an LRU in each set, as a CPU's cache keeps its
 * lines. A set is one cache line, a plain array element: a connect reads one
 * line, allocates nothing and takes no lock. Two CPUs writing one way at once
 * may leave it mixed, and two clients of one set and tag (one in 2^31) share
 * a way: whatever a connect reads, it checks against the table (slot,
 * generation, position) before it stays.
 *
 * 262,144 sets of 4 ways, 16 MiB: up to 1,048,576 clients a node.
 */
#define STEER_AFFINITY_WAYS 4
#define STEER_AFFINITY_SETS (1u << 18)
#define STEER_AFFINITY_KEYS (STEER_AFFINITY_SETS * STEER_AFFINITY_WAYS)

/* A client of one service: 16 bytes, no padding. */
struct steer_aff_key {
	__u64 client; /* cgroup id, netns cookie, the application's key, or the
		       * source address folded (IPv4 as is, IPv6 words xored) */
	__u32 svc_id; /* the service's id (steer_table.svc_id) */
	__u32 kind;   /* enum steer_affinity: part of the client (a cgroup id and an
		       * application's key of the same number are two clients) */
};

/* The client of an XDP flow (STEER_AFF_SOURCE): its source address as
 * struct steer_xflow_key holds it (network order; IPv4 in src[3], the rest
 * 0), folded to 64 bits. */
static __always_inline __u64 steer_aff_source_client(const __u32 src[4])
{
	return ((__u64)(src[0] ^ src[2]) << 32) ^ src[1] ^ src[3];
}

/* One way: a client and where its last connect went. 16 bytes. */
struct steer_aff {
	__u32 tag;	/* the client's steer_aff_tag; 0: an empty way */
	__u16 slot;	/* backend slot (< STEER_SLOT_IDS) */
	__u16 slot_gen; /* steer_slot.gen then, its low 16 bits: another owner is
			 * another backend */
	__u64 last_ns;	/* ns, CLOCK_MONOTONIC coarse: the client's last connect */
};

_Static_assert(STEER_SLOT_IDS <= 65536, "struct steer_aff keeps a slot in 16 bits");
_Static_assert(sizeof(struct steer_aff) == 16, "a way is 16 bytes");

/* One set: one cache line (steer_affin's values are page-aligned). */
struct steer_aff_set {
	struct steer_aff way[STEER_AFFINITY_WAYS];
};

_Static_assert(sizeof(struct steer_aff_set) == 64, "a set is one cache line");

/* splitmix64's finaliser: a bijection of 64 bits whose every output bit
 * depends on every input bit. */
static __always_inline __u64 steer_aff_mix(__u64 x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The key's hash: the client mixed, then the service and kind mixed in, so
 * that the cgroup ids and netns cookies a node hands out in sequence, and the
 * addresses of one subnet, spread over every set, and no client of one
 * service or kind shares a hash with a client of another by construction. */
static __always_inline __u64 steer_aff_hash(const struct steer_aff_key *k)
{
	return steer_aff_mix(steer_aff_mix(k->client) ^ (k->svc_id | (__u64)k->kind << 32));
}

/* The client's set: the hash's low bits. */
static __always_inline __u32 steer_aff_set_of(__u64 hash)
{
	return (__u32)hash & (STEER_AFFINITY_SETS - 1);
}

/* Its tag in the set: the hash's high 32 bits, never 0. */
static __always_inline __u32 steer_aff_tag(__u64 hash)
{
	return (__u32)(hash >> 32) | 1;
}

/* The way of set that holds tag, or STEER_AFFINITY_WAYS. */
static __always_inline __u32 steer_aff_way_of(const struct steer_aff_set *set, __u32 tag)
{
	__u32 i;

	for (i = 0; i < STEER_AFFINITY_WAYS; i++)
		if (set->way[i].tag == tag)
			return i;
	return STEER_AFFINITY_WAYS;
}

/* The way a connect of tag is remembered in: its own, else the least
 * recently connected (an empty way's last_ns is 0; ties: the first). */
static __always_inline __u32 steer_aff_way_to_write(const struct steer_aff_set *set, __u32 tag)
{
	__u32 i, way = steer_aff_way_of(set, tag);

	if (way < STEER_AFFINITY_WAYS)
		return way;
	way = 0;
	for (i = 1; i < STEER_AFFINITY_WAYS; i++)
		if (set->way[i].last_ns < set->way[way].last_ns)
			way = i;
	return way;
}

/* Remember in set that the client of tag went to slot (of generation
 * slot_gen) at clock: in its way, or the least recently connected. The tag
 * last: a probe on another CPU that finds it then reads this client's slot,
 * but in a race of two writers (the probe's checks hold either way). */
static __always_inline void steer_aff_record(struct steer_aff_set *set, __u32 tag, __u32 slot,
					     __u32 slot_gen, __u64 clock)
{
	struct steer_aff *av =
		&set->way[steer_aff_way_to_write(set, tag) & (STEER_AFFINITY_WAYS - 1)];

	*(volatile __u16 *)&av->slot = (__u16)slot;
	*(volatile __u16 *)&av->slot_gen = (__u16)slot_gen;
	*(volatile __u64 *)&av->last_ns = clock;
	*(volatile __u32 *)&av->tag = tag;
}

/* A connect's client (steer_choose.bpf.h, struct aff_probe): it has a key;
 * its backend is remembered and it was not idle past the timeout. */
#define STEER_AFF_HAS_KEY 0x1
#define STEER_AFF_KNOWN 0x2
#define STEER_AFF_STAYED 0x4 /* the connect stayed: the probe renewed its entry */

/* What a connect of a client with a key did (steer_svc_stats.affinity). */
enum steer_aff_verdict {
	STEER_AFF_NEW = 0,	     /* no backend remembered (first, forgotten, idle too long):
				    * placed by least wait */
	STEER_AFF_STAY = 1,	     /* stayed on its backend: within the slack */
	STEER_AFF_LEFT_SLACK = 2,    /* moved: its backend's wait over the least plus the slack */
	STEER_AFF_LEFT_GONE = 3,     /* moved: its backend drained, ejected, or out of the table */
	STEER_AFF_LEFT_OVERLOAD = 4, /* moved: its backend overloaded (STEER_TBL_OVERLOAD) */
	STEER_AFF_VERDICTS = 5,
};

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
	__u32 flags;	       /* STEER_SLOT_* (user space; PUSHBACK set by the kernel; atomic) */
	__u32 svc_id;	       /* the service this slot belongs to (user space) */
	__u32 fails;	       /* connects in a row that failed: never established, or reset
				* early (STEER_RESET_FAIL_NS) (kernel, atomic) */
};

#define STEER_SLOT_DRAINED 0x1 /* operator drain: never chosen for new connections */
/* Overloaded by its last poll (KV usage or waiting requests at their bound,
 * --worker-overload-*): chosen only when every backend is (STEER_TBL_OVERLOAD). */
#define STEER_SLOT_OVERLOADED 0x2
/* Pushing back: answered 429 or 503 (steer_wire.pushback_*). Set by the
 * kernel, cleared by smg-steerd when the pushback ends; each with an epoch
 * bump. Chosen only when every backend is overloaded too. */
#define STEER_SLOT_PUSHBACK 0x4

/*
 * Fast ejection: a backend whose last STEER_FAIL_EJECT steered connects in a
 * row failed is not chosen until a publish puts it back, or one of its
 * connects still in flight gets through. Up to three failures never eject.
 *
 * A connect failed when its socket was released without ever being
 * established (refused, timed out, given up; steer_release), or when the
 * backend reset it within STEER_RESET_FAIL_NS of the handshake before one
 * byte of answer came back (a worker that accepts and resets at once, or
 * whose proxy has nothing behind it; steer_sockops). It got through when it
 * was established and the backend answered, or it was still open at its
 * release. An established connection that ended otherwise (reset later, or
 * timed out, with nothing received) neither counts nor resets the count.
 */
#define STEER_FAIL_EJECT 4
/* ns: how soon after its handshake a reset with nothing received is a
 * failed connect. Later, a reset may end a request the backend was working
 * on; within a second (the initial retransmission timeout), it was not. */
#define STEER_RESET_FAIL_NS 1000000000ULL
/* ns: the longest a capacity pushback lasts without a good poll to end it
 * (its Retry-After, when shorter, ends it first). */
#define STEER_PUSHBACK_MAX_NS (60 * 1000000000ULL)

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
	__u16 bytes_per_token; /* that table's, resolved (kernel) */
	__u32 cache_credit;    /* credit_tokens of that table (kernel) */
	__u64 answered_tokens; /* tokens; answered requests' real sizes, credited to
				* steer_slot.inflight_tokens at their first response byte
				* (kernel, statistic) */
	/* The fluid estimate (docs/algorithm.md, busy-until): until when the
	 * backend is busy with this router's unanswered requests, served FIFO at
	 * peers x ns_per_token per token and never longer than the pending tokens
	 * take (steer_busy_sent, steer_busy_cap). CLOCK_MONOTONIC, read coarse
	 * (bpf_ktime_get_coarse_ns = CLOCK_MONOTONIC_COARSE). */
	__u64 busy_until_ns; /* ns, CLOCK_MONOTONIC coarse (kernel) */
	__u32 cache_peers;   /* that entry's peers, resolved >= 1 (kernel) */
	__u32 cache_flags;   /* that table's flags (STEER_TBL_STEP, _PEER_PUSH) (kernel) */
	/* The step cadence (STEER_TBL_STEP; steer_step_next): every streamed
	 * response packet after a response's first is one engine step after the
	 * socket's previous packet. CLOCK_MONOTONIC, read coarse. */
	__u64 last_rx_ns;    /* ns: the slot's last response packet (kernel) */
	__u64 step_ns;	     /* ns: the last one-step gap, 0: none seen (kernel) */
	__u64 step_until_ns; /* ns: last_rx_ns + step_ns; raised lazily, lowered under
			      * the service's lock with the leaf re-keyed (kernel) */
	/* Other routers' work (--peer, docs/algorithm.md, "Several routers"): tokens their
	 * sockets sent to this backend and have not seen answered, as their
	 * daemons last reported; written under the service's lock by
	 * steer_peer_apply, which smg-steerd runs (kernel program, user data).
	 * Counts in the fluid estimate like this router's pending tokens. */
	__u64 peer_pending_tokens; /* tokens */
	/* Capacity pushback (STEER_TBL_OVERLOAD): the backend answered a request
	 * with HTTP status 429 or 503, and the kernel set STEER_SLOT_PUSHBACK.
	 * smg-steerd clears it at pushback_until_ns, or at a good poll sent after
	 * pushback_at_ns, whichever is first. */
	__u64 pushback_at_ns;	 /* ns, CLOCK_MONOTONIC coarse: the last such answer (kernel) */
	__u64 pushback_until_ns; /* ns, CLOCK_MONOTONIC coarse: its Retry-After, or
				  * STEER_PUSHBACK_MAX_NS after it (kernel) */
	__u64 pushbacks;	 /* answers 429 or 503, cumulative (kernel, statistic) */
	__u64 server_errors;	 /* answers 5xx but 503, cumulative: each a failed connect
				  * for fast ejection (kernel, statistic) */
	/* --worker-overload-connections: the backend is overloaded while this
	 * node has at least this many live steered connections to it
	 * (steer_slot_live); 0: no bound. Written at each publish (user). */
	__u32 max_live;
	/* Where the slot is in its service's table (cache affinity): the
	 * position, with the low 16 bits of that table's generation above it:
	 * (generation & 0xffff) << 16 | position. Written at each publish,
	 * before the swap (user). */
	__u32 table_pos;
};

/* Every slot's accounting in one map value, reachable under a service lock:
 * 168 B a slot, 5.25 MiB. */
struct steer_wire_array {
	struct steer_wire w[STEER_SLOT_IDS];
};

static __always_inline __u64 steer_wire_pending(const struct steer_wire *w)
{
	return w->sent_bytes - w->answered_bytes;
}

/* The bytes per token in effect for a value as stored (a table's, a
 * policy's, a view's): 0 is the default. The one place that says so. */
static __always_inline __u32 steer_bytes_per_token(__u32 bytes_per_token)
{
	return bytes_per_token ? bytes_per_token : STEER_DEFAULT_BYTES_PER_TOKEN;
}

/* The slot's pending work in tokens: this router's pending bytes in tokens,
 * plus the other routers' pending tokens (--peer). */
static __always_inline __u64 steer_wire_pending_tokens(const struct steer_wire *w,
						       __u32 bytes_per_token)
{
	return steer_wire_pending(w) / bytes_per_token + w->peer_pending_tokens;
}

/* ---- Other routers' work (--peer; steer_peer_apply) ---------------------- */

/* Slots one run of steer_peer_apply changes. */
#define STEER_PEER_BATCH 32

/* What one peer's report changes at one slot since the last run: tokens it
 * sent, tokens of those it saw answered (or that are forgotten: the peer went
 * silent or restarted). */
struct steer_peer_delta {
	__u32 slot;	       /* index into steer_slots / steer_wire */
	__u32 slot_gen;	       /* steer_slot.gen the daemon mapped the backend at */
	__u64 sent_tokens;     /* tokens, added to peer_pending_tokens */
	__u64 answered_tokens; /* tokens, taken off it (never below 0) */
	__u64 ns_per_token;    /* ns per token, as the daemon last published the backend:
				* the busy time's rate until a connect here builds the
				* tree and caches the table's (cache_npt); 0: unknown */
};

/* steer_peer_apply's argument (the value of its map steer_peer_in): up to
 * STEER_PEER_BATCH slots of one service. The program writes applied: the
 * deltas whose slot still had the gen and service given. */
struct steer_peer_batch {
	__u32 svc_id;
	__u32 n;
	__u32 applied; /* out */
	__u32 pad;
	__u64 clock_ns; /* ns, CLOCK_MONOTONIC_COARSE when written: the clock of the
			  * sends' and answers' keys, which the program cannot read */
	struct steer_peer_delta d[STEER_PEER_BATCH];
};

/*
 * The step probe (--step-probe, docs/algorithm.md, "The step probe"): smg-steerd keeps one
 * streaming request of its own running on each backend, so that it sees every
 * step end of the engine even when the clients' responses are not streamed.
 * Each packet of a probe's stream is one step end: steer_probe_apply applies
 * it to the slot's step cadence as the ingress program does a streamed
 * response's (steer_step_next), under the service's lock, re-keying the leaf.
 */
#define STEER_PROBE_BATCH 32

struct steer_probe_step {
	__u32 slot;	/* index into steer_slots / steer_wire */
	__u32 slot_gen; /* steer_slot.gen the daemon mapped the backend at */
	__u64 last_ns;	/* ns, CLOCK_MONOTONIC coarse: the probe's previous packet;
			 * 0: this is its first (no gap, no step) */
	__u64 at_ns;	/* ns, CLOCK_MONOTONIC coarse: this packet */
};

/* steer_probe_apply's argument (the value of its map steer_probe_in): up to
 * STEER_PROBE_BATCH packets of one service, oldest first. */
struct steer_probe_batch {
	__u32 svc_id;
	__u32 n;
	__u32 applied; /* out: the packets whose slot still had the gen and service */
	__u32 pad;
	struct steer_probe_step p[STEER_PROBE_BATCH];
};

/*
 * The reference time of a service's tree (busy-until, docs/algorithm.md, "busy-until"):
 * every leaf is keyed at ref_ns, the time of the tree's last full build, not
 * at the time of the write, so that idle backends keep their order as time
 * passes; busy_min is at most the key of every leaf keyed busy (busy_until >
 * ref_ns), so that a connect knows when a busy backend may have come to the
 * front. Both written under the tree's lock.
 */
struct steer_tree_clock {
	__u64 ref_ns;	/* ns, CLOCK_MONOTONIC coarse; 0: never built */
	__u64 busy_min; /* a key; STEER_U64_MAX (all ones): no leaf keyed busy */
};

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
	/* The time the service's tree keys are computed at (docs/algorithm.md,
	 * selection; kernel, under the tree's lock). */
	struct steer_tree_clock tree_clock;
	/* Overload protection (STEER_TBL_OVERLOAD), connects: */
	__u64 overload_refused;	 /* refused: every backend overloaded (a poll, a pushback,
				  * its live connections) */
	__u64 wait_refused;	 /* refused: the least expected wait was over the bound */
	__u64 overload_admitted; /* given to the least bad all the same (STEER_TBL_OVERLOAD_LEAST) */
	/* Cache affinity (steer_table.affinity), connects of a client with a
	 * key, by enum steer_aff_verdict: placed new, stayed, or moved and why. */
	__u64 affinity[STEER_AFF_VERDICTS];
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
	STEER_HEALTH_EJECTED = 2, /* consecutive failed polls, or fast ejection; out of the table */
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
	__u8 overload;	       /* over a bound by its last poll: user/policy's enum
				* steer_overload_reason (0 none, 1 KV usage, 2 waiting) */
	__u8 reserved8[2];     /* zero */
	/* tokens taken off the reported queue: this router's requests pending
	 * (sent, not answered) when the poll was sent; saturated */
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

/* The step cadence's per-socket clock (steer_sockrx, the wire object's, not
 * pinned; indexed like steer_socks): when the socket's last response packet
 * since its last send came. Written by the ingress program only. */
struct steer_sock_rx {
	__u64 cookie;  /* the socket whose answer started the gap; another: none */
	__u64 last_ns; /* ns, CLOCK_MONOTONIC coarse */
};

/* When a steered socket's handshake completed (steer_sockest, steer.bpf.c's,
 * not pinned; indexed like steer_socks), for fast ejection's resets. Written
 * by the sockops program only. */
struct steer_sock_est {
	__u64 cookie; /* the socket it is about; another: none */
	__u64 at_ns;  /* ns, CLOCK_MONOTONIC coarse (bpf_ktime_get_coarse_ns) */
};

#define STEER_SOCK_LIVE 0x1	/* counted in steer_slot.live; release adds 1 to closed */
#define STEER_SOCK_CREDITED 0x2 /* connect credited the flat credit (table not expired) */
#define STEER_SOCK_SENT 0x4	/* has sent request bytes; its credit was settled then */
#define STEER_SOCK_STATUS 0x8	/* its answers' HTTP status is read (STEER_TBL_OVERLOAD) */
#define STEER_SOCK_FAILED 0x10	/* answered 5xx but 503: counted a failed connect already */

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
	__u32 n;     /* leaves built (the table's n) */
	__u64 tgen;  /* steer_table.generation built from; 0: none */
	__u64 epoch; /* steer_svc_stats.epoch built with */
	/* ns: the expected wait of the last pick at its time (steer_tree_pick_at),
	 * overload marks included. Kept here, not returned: read back from the
	 * map it is one value to the verifier, whichever path the pick took. */
	__u64 pick_wait_ns;
	__u64 score[STEER_MAX_BACKENDS];   /* ns, by table position */
	__u16 win[2 * STEER_MAX_BACKENDS]; /* node k: children 2k+1, 2k+2; the last is unused */
};

/* The pinned layout's version (steer_layout), written and read by user space
 * only. */
struct steer_layout {
	__u32 version; /* STEER_LAYOUT_VERSION; 0 until the first owner stamps it */
	__u32 reserved0;
	__u64 reserved[7];
};

/* ---- Selection math, shared verbatim by the kernel and user space -------- */

#define STEER_U64_MAX (~(__u64)0)
#define STEER_NO_PICK 0xffffffffu

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* ---- XDP ingress (bpf/steer_xdp.bpf.c) and backend decap (steer_decap.bpf.c) ----
 *
 * The XDP program shares every map above (same pin root) and chooses new
 * flows with the connect hooks' choose(); what only it needs is below.
 */

#define STEER_MAP_XFLOWS "steer_xflows"	       /* LRU_HASH steer_xflow_key -> steer_xflow */
#define STEER_MAP_XVIPST "steer_xvipst"	       /* PERCPU_ARRAY[svc_id] of steer_xdp_ctr */
#define STEER_MAP_XBKST "steer_xbkst"	       /* PERCPU_ARRAY[slot] of steer_xdp_ctr */
#define STEER_MAP_XCFG "steer_xcfg"	       /* ARRAY[1] of struct steer_xdp_cfg */
#define STEER_LINK_XDP_PREFIX "steer_lnk_xdp_" /* + interface name: one pinned link each */
#define STEER_DECAP_CTR "steer_dcp_ctr"	       /* the decap's PERCPU_ARRAY[1] of steer_decap_ctr */
#define STEER_DECAP_PROG "steer_dcp_prog"      /* pin of the decap program (--pin-dir only) */

/*
 * Flows tracked at once by the XDP program. One table shared by every CPU
 * (unlike Katran's per-CPU tables, which rely on consistent hashing to pick
 * the same backend again when a flow moves CPU; a least-wait pick would not),
 * with per-CPU LRU lists (BPF_F_NO_COMMON_LRU). ~120 bytes each in the kernel.
 */
#define STEER_XDP_FLOWS (1u << 18)

/* A TCP flow as the client sends it: 40 bytes, no padding. */
struct steer_xflow_key {
	__u32 src[4]; /* client address, network order; IPv4 in src[3], rest 0 */
	__u32 dst[4]; /* virtual address, network order; IPv4 in dst[3], rest 0 */
	__u16 sport;  /* network order */
	__u16 dport;  /* network order */
	__u32 family; /* 4 or 6 */
};

/* Where a flow goes, fixed at its SYN: a republish, drain or score change
 * never moves it. 48 bytes. */
struct steer_xflow {
	__u32 be_ip6[4]; /* backend = outer destination, network order (IPv4 in [3]) */
	__u32 slot;	 /* backend slot (counters) */
	__u32 slot_gen;	 /* steer_slot.gen at the SYN */
	__u32 flags;	 /* STEER_XFLOW_* */
	__u32 ifindex;	 /* egress interface from the FIB (valid with STEER_XFLOW_L2) */
	__u8 dmac[6];	 /* next hop's MAC (valid with STEER_XFLOW_L2) */
	__u8 smac[6];	 /* egress interface's MAC */
	__u16 svc_id;
	__u16 reserved;
};

#define STEER_XFLOW_LIVE 0x1  /* counted in steer_slot.live; the client's FIN/RST ends it */
#define STEER_XFLOW_ACKED 0x2 /* a non-SYN packet was seen: a later SYN is a new connection */
#define STEER_XFLOW_L2 0x4    /* ifindex, dmac, smac resolved */

/* Counters of one VIP (by svc_id) or one backend (by slot), per CPU. */
struct steer_xdp_ctr {
	__u64 packets;	 /* packets forwarded (encapsulated) */
	__u64 bytes;	 /* their bytes before encapsulation, from the Ethernet header */
	__u64 new_flows; /* SYNs that created a flow (and credited, like a connect) */
	__u64 lru_miss;	 /* non-SYN packets of no known flow: dropped (VIP only) */
	__u64 ended;	 /* flows whose client sent FIN or RST (taken off live) */
	__u64 no_route;	 /* dropped: no FIB route or neighbour, or a backend of another family */
	__u64 refused;	 /* SYNs dropped: no eligible backend */
	__u64 icmp; /* ICMP frag-needed / packet-too-big of a flow, sent to its backend (VIP) */
};

/* Outer source addresses: prefix | (flow hash & host mask), so that the
 * backends' RSS spreads flows over queues (Katran). All network order. */
struct steer_xdp_cfg {
	__u32 src4;	    /* IPv4 prefix */
	__u32 src4_host;    /* host bits taken from the flow hash */
	__u32 src6[4];	    /* IPv6 prefix */
	__u32 src6_host[4]; /* host bits taken from the flow hash */
};

/* The decap's counters, per CPU. */
struct steer_decap_ctr {
	__u64 ipip;   /* IPv4-in-IPv4 packets decapsulated */
	__u64 ip6ip6; /* IPv6-in-IPv6 packets decapsulated */
	__u64 failed; /* a tunnel packet the kernel would not shrink: passed as is */
	__u64 reserved;
};

/* The selection math (saturating scores, the reference argmins, the busy-until
 * estimate and the kernel's tree), in its own file for size; part of this
 * contract all the same. */
#include "steer_select.h"

#endif /* STEER_COMMON_H */
