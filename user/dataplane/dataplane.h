/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * dataplane.h - user-space side of the kernel contract in bpf/steer_common.h.
 *
 * Opens (or adopts) the pinned BPF state, publishes service tables, drains
 * in-flight counters, reads statistics and detaches. The daemon, smg-steerctl
 * and the tests use it; nothing else touches the maps.
 *
 * Every function that can fail returns 0 or a negative errno and, on failure,
 * writes a one-line reason into err (which may be NULL). A failed publish
 * changes nothing in the kernel.
 */
#ifndef STEER_DATAPLANE_H
#define STEER_DATAPLANE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "steer_common.h"

struct steer_dp;

struct steer_dp_opts {
	const char *pin_dir; /* NULL: STEER_DEFAULT_PIN_DIR */
	const char *cgroup;  /* NULL: the cgroup2 root, found in /proc/mounts */
	/*
	 * true (the daemon): load the programs, adopt or create the pinned
	 * maps, attach to the cgroup (or adopt the pinned links, swapping in
	 * this build's programs without a gap) and hold the pin directory's
	 * lock, so that a second owner refuses to start.
	 * false (smg-steerctl, a second reader): open the pinned maps only.
	 */
	bool own;
	/*
	 * Owner only: do not count request bytes on steered sockets (the
	 * cgroup_skb programs of dataplane/wire.c are not attached, and links a
	 * previous owner pinned are removed). Every packet of every socket in
	 * the cgroup then runs no accounting program; scores use the flat
	 * connect credit alone.
	 */
	bool wire_off;
	/*
	 * Owner only: the cgroup2 directory the accounting programs attach to,
	 * equal to or below cgroup (NULL: cgroup). Steered sockets created
	 * outside it are not counted and keep their flat connect credit. Wire
	 * links a previous owner pinned on another cgroup are moved here.
	 */
	const char *wire_cgroup;
};

int steer_dp_open(const struct steer_dp_opts *opts, struct steer_dp **out, char *err,
		  size_t errlen);
/* Releases memory and descriptors; pinned state stays (programs keep running). */
void steer_dp_close(struct steer_dp *dp);
/* Detaches the programs and removes every pin and the pin directory. */
int steer_dp_detach(struct steer_dp *dp, char *err, size_t errlen);

/* True when steer_dp_open (own) took over links pinned by a previous owner. */
bool steer_dp_adopted(const struct steer_dp *dp);
const char *steer_dp_pin_dir(const struct steer_dp *dp);
const char *steer_dp_cgroup(const struct steer_dp *dp);
/* Where request bytes are counted (the owner's wire_cgroup, or its cgroup). */
const char *steer_dp_wire_cgroup(const struct steer_dp *dp);

/* ---- Publishing ---------------------------------------------------------- */

/* One backend of a published table. Costs are validated (finite, >= 0) and
 * converted to integer nanoseconds with saturation. */
struct steer_dp_cost {
	struct steer_addr addr;
	double base_wait_ns; /* ns */
	double ns_per_token; /* ns per token */
};

struct steer_dp_service {
	struct steer_addr vip;
	/* Every configured backend, in table or not: each keeps its slot (and
	 * so its live-connection count) while configured. */
	const struct steer_addr *configured;
	size_t n_configured;
	/* The backends to publish, in any order: they are sorted by
	 * base_wait_ns, ties kept in the given order. Each must be configured. */
	const struct steer_dp_cost *table;
	size_t n_table;
	uint32_t credit_tokens;	    /* 0: STEER_DEFAULT_CREDIT_TOKENS */
	uint32_t bytes_per_token;   /* request bytes per token, at most STEER_MAX_BYTES_PER_TOKEN;
				   * 0: the default (steer_bytes_per_token) */
	uint64_t ttl_ns;	    /* the table expires this long after publish */
	bool allow_empty;	    /* n_table == 0 is legal: the kernel refuses connects */
	uint32_t flags;		    /* STEER_TBL_* */
	uint32_t peers;		    /* routers sharing the backends (busy-until drain factor);
				   * 0: 1; at most 65535 */
	uint64_t wait_bound_ns;	    /* --worker-overload-wait (with STEER_TBL_OVERLOAD); 0: none */
	uint32_t affinity;	    /* enum steer_affinity (--affinity); 0: off */
	uint64_t affinity_slack_ns; /* ns, --affinity-slack */
	uint64_t affinity_idle_ns;  /* ns, --affinity-timeout */
};

/*
 * Replace the whole set of services in one atomic swap. Services and
 * backends absent from svcs lose their tables and slots.
 */
int steer_dp_publish(struct steer_dp *dp, const struct steer_dp_service *svcs, size_t n, char *err,
		     size_t errlen);
/* Replace (or add) one service, keeping every other published table. */
int steer_dp_publish_one(struct steer_dp *dp, const struct steer_dp_service *svc, char *err,
			 size_t errlen);
/*
 * Both publish calls return as soon as connects see the new tables. A connect
 * that started before may still be reading the old ones for an RCU grace
 * period (milliseconds); this waits until none can. Drains that must not race
 * with a credit from the old tables call it first. The next publish waits by
 * itself. (The wait runs on a thread of this process: settle before fork() if
 * the child is to use dp.)
 */
void steer_dp_settle(struct steer_dp *dp);

/* ---- Counters ------------------------------------------------------------ */

/* The slot of a configured backend of a service, or -ENOENT. */
int steer_dp_slot(const struct steer_dp *dp, const struct steer_addr *vip,
		  const struct steer_addr *backend, uint32_t *slot);
/* Direct view of a slot's counters (mmap of steer_slots), or NULL. */
const struct steer_slot *steer_dp_slot_counters(const struct steer_dp *dp, uint32_t slot);
/* The daemon's record of a slot (mmap of steer_bkinfo), or NULL. */
struct steer_bk_info *steer_dp_bk_info(const struct steer_dp *dp, uint32_t slot);
uint64_t steer_dp_inflight_read(const struct steer_dp *dp, uint32_t slot);
/* Atomically subtract tokens that were read before; concurrent credits stay.
 * Never goes below zero. */
void steer_dp_inflight_sub(struct steer_dp *dp, uint32_t slot, uint64_t tokens);
/* Atomically take the whole counter. */
uint64_t steer_dp_inflight_exchange(struct steer_dp *dp, uint32_t slot);
/* Connections steered to the slot (counted at connect) and not yet released. */
int64_t steer_dp_live(const struct steer_dp *dp, uint32_t slot);
/* Steered connects to the slot in a row that were never established (fast
 * ejection at STEER_FAIL_EJECT; every publish listing the backend resets it). */
uint32_t steer_dp_fails(const struct steer_dp *dp, uint32_t slot);
/* Put a fast-ejected backend back at once (a re-poll found it healthy). */
void steer_dp_readmit(struct steer_dp *dp, uint32_t slot);
/* Steered sockets that hold a record now (steer_socks), counted in one pass. */
int steer_dp_sockets_tracked(const struct steer_dp *dp, size_t *out);

/* ---- Request accounting (steer_wire, dataplane/wire.c) -------------------- */

/*
 * Per slot, cumulative (see struct steer_wire): request bytes sent on its
 * steered sockets, bytes of those answered (first response byte) or abandoned
 * (socket closed), request boundaries seen, connect credits withdrawn at a
 * socket's first send. 0 when the pins predate steer_wire.
 */
uint64_t steer_dp_sent_bytes(const struct steer_dp *dp, uint32_t slot);
uint64_t steer_dp_answered_bytes(const struct steer_dp *dp, uint32_t slot);
uint64_t steer_dp_requests(const struct steer_dp *dp, uint32_t slot);
uint64_t steer_dp_withdrawn_tokens(const struct steer_dp *dp, uint32_t slot);
/* Bytes sent and not yet answered: sent - answered. */
uint64_t steer_dp_pending_bytes(const struct steer_dp *dp, uint32_t slot);
/* The kernel's clock for busy-until: CLOCK_MONOTONIC_COARSE, ns (what
 * bpf_ktime_get_coarse_ns reads). */
uint64_t steer_dp_clock_ns(void);
/* The slot's remaining busy time at now_ns (steer_wire.busy_until_ns - now,
 * or 0): this router's unanswered requests still unserved at the backend's
 * published rate x peers (the fluid estimate). */
uint64_t steer_dp_busy_left_ns(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns);
/* The same in tokens of the backend's last tree-cached ns_per_token
 * (E = busy left / ns_per_token); 0 when none is cached. */
uint64_t steer_dp_busy_left_tokens(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns);
/* The step cadence (--wire-estimator fluid-step): the slot's last engine
 * step (steer_wire.step_ns), and the time left until the step under way ends
 * as predicted (step_until_ns - now, or 0). */
uint64_t steer_dp_step_ns(const struct steer_dp *dp, uint32_t slot);
uint64_t steer_dp_step_left_ns(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns);
/* The other routers' pending tokens at the slot (--peer): what their
 * daemons reported and steer_dp_peer_apply applied. */
uint64_t steer_dp_peer_pending_tokens(const struct steer_dp *dp, uint32_t slot);
/* Overload protection (STEER_TBL_OVERLOAD). The slot's capacity pushback:
 * flagged now (STEER_SLOT_PUSHBACK), when the last began and when it ends
 * (CLOCK_MONOTONIC_COARSE, steer_dp_clock_ns), and the answers counted
 * (429/503, other 5xx). */
struct steer_dp_pushback {
	bool on;
	uint64_t at_ns, until_ns;
	uint64_t pushbacks, server_errors;
};
void steer_dp_pushback(const struct steer_dp *dp, uint32_t slot, struct steer_dp_pushback *out);
/* End the pushback that began at at_ns (as read): the flag is cleared and the
 * service's tree rebuilt; one that began since stays. Owner only. */
void steer_dp_pushback_end(struct steer_dp *dp, uint32_t slot, uint64_t at_ns);
/* --worker-overload-connections for the slot (0: none), before the publish
 * of the table that has it. Owner only. */
void steer_dp_set_max_live(struct steer_dp *dp, uint32_t slot, uint32_t max_live);
/* The backend is over a bound its last poll showed (STEER_SLOT_OVERLOADED),
 * or no longer; the service's tree is rebuilt when it changes. Owner only. */
void steer_dp_set_overloaded(struct steer_dp *dp, uint32_t slot, bool overloaded);
/* The slot's owner generation (steer_slot.gen), for steer_peer_delta. */
uint32_t steer_dp_slot_gen(const struct steer_dp *dp, uint32_t slot);
/* Apply other routers' changes to one service's slots (the kernel program
 * steer_peer_apply, under the service's lock; b->applied is written back).
 * 0, or -errno with err set. Owner only. */
int steer_dp_peer_apply(struct steer_dp *dp, struct steer_peer_batch *b, char *err, size_t errlen);
/* --peer-push (docs/algorithm.md, "Several routers"): the ring the kernel writes to when a
 * request is sent and no wake-up is pending (-1 when the request accounting
 * is off), and re-arming it before the counters are read. Owner only. */
int steer_dp_kick_ring_fd(struct steer_dp *dp);
void steer_dp_kick_rearm(struct steer_dp *dp);
/* Apply the step probe's packets to one service's slots (the kernel program
 * steer_probe_apply, under the service's lock; b->applied is written back).
 * 0, or -errno with err set. Owner only. */
int steer_dp_probe_apply(struct steer_dp *dp, struct steer_probe_batch *b, char *err,
			 size_t errlen);
/* Direct view of a slot's accounting (mmap of steer_wire), or NULL. */
const struct steer_wire *steer_dp_wire_counters(const struct steer_dp *dp, uint32_t slot);
/*
 * Call right after reading in-flight tokens that a later drain subtracts (the
 * daemon's inflight_at_send): sockets connected before it keep their flat
 * credit at their first send, so that no credit is removed twice.
 * steer_dp_inflight_sub and steer_dp_inflight_exchange do the same.
 */
void steer_dp_inflight_mark(struct steer_dp *dp, uint32_t slot);
/* The accessor steer_select_wire() needs, over dp's mapping (ctx = dp). */
struct steer_wire *steer_dp_wire_at(void *dp, __u32 slot);

/* ---- Drain --------------------------------------------------------------- */

/* Persist (in steer_drain) and apply at once (in every slot of that backend). */
int steer_dp_set_drained(struct steer_dp *dp, const struct steer_addr *backend, bool drained,
			 char *err, size_t errlen);
bool steer_dp_is_drained(const struct steer_dp *dp, const struct steer_addr *backend);
/* The drained backend addresses, at most max (STEER_MAX_DRAINED holds them
 * all), in one pass over steer_drain: for callers that test many backends,
 * instead of one map lookup (a syscall) each. Returns how many. */
size_t steer_dp_drained_list(const struct steer_dp *dp, struct steer_addr *out, size_t max);

/* ---- Inspection ---------------------------------------------------------- */

struct steer_view_backend {
	struct steer_addr addr;
	uint32_t slot;
	int rank;		/* table position, -1 when not in the table */
	uint64_t base_wait_ns;	/* valid when rank >= 0 */
	uint64_t ns_per_token;	/* valid when rank >= 0 */
	struct steer_slot ctr;	/* counters as read */
	struct steer_wire wire; /* request accounting as read (zero: none) */
	uint64_t pending_bytes; /* wire.sent_bytes - wire.answered_bytes */
	bool drained;
};

struct steer_view_service {
	struct steer_addr vip;
	uint32_t svc_id;
	bool published;	       /* a table exists in the current generation */
	uint64_t expires_ns;   /* CLOCK_MONOTONIC */
	uint64_t published_ns; /* CLOCK_MONOTONIC */
	uint64_t generation;
	uint32_t credit_tokens;
	uint32_t bytes_per_token; /* as resolved (0 in the table: the default); 0: unpublished */
	uint32_t table_flags;
	uint64_t wait_bound_ns; /* --worker-overload-wait as published; 0: none */
	/* Cache affinity as published: enum steer_affinity (0: off), the slack
	 * and the idle timeout, ns; stats.affinity counts its verdicts. */
	uint32_t affinity;
	uint64_t affinity_slack_ns, affinity_idle_ns;
	uint32_t n_table;
	struct steer_svc_stats stats;
	size_t n_backends; /* configured (registered) backends; table order first */
	struct steer_view_backend *backends;
};

struct steer_view {
	uint64_t now_ns; /* CLOCK_MONOTONIC when read */
	size_t n_services;
	struct steer_view_service *services;
};

int steer_dp_view(const struct steer_dp *dp, struct steer_view *out, char *err, size_t errlen);
/* A registered service's kernel counters (cheap: no table is read), or -ENOENT. */
int steer_dp_service_stats(const struct steer_dp *dp, const struct steer_addr *vip,
			   struct steer_svc_stats *out);
void steer_view_free(struct steer_view *v);
/* A registered service's id (the index of its per-service counters), or -ENOENT. */
int steer_dp_service_id(const struct steer_dp *dp, const struct steer_addr *vip);

/* ---- Pinned maps of another shape (dataplane/pins.c) ------------------------ */

struct bpf_object;
/*
 * An owner, between opening an object with a pin root and loading it: every
 * pinned map of another shape than the object's is unpinned, with a warning
 * naming it, so that the load pins a new one instead of failing
 * (dataplane/pins.c). 0, or -errno with err set.
 */
int steer_pins_replace_misfits(struct bpf_object *obj, char *err, size_t errlen);
/* A reader, with obj opened the same way: -EPROTO naming the first pinned map
 * of another shape than the object's, else 0. */
int steer_pins_check_shapes(struct bpf_object *obj, char *err, size_t errlen);

#endif /* STEER_DATAPLANE_H */
