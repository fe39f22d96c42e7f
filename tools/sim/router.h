/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * router.h - a router's state, shared by router.c (the policies) and
 * affinity.c (the policies that read who connects). Not part of the
 * simulator's interface.
 */
#ifndef STEER_SIM_ROUTER_H
#define STEER_SIM_ROUTER_H

#include "sim.h"

struct chbl_ring;

struct sim_router {
	enum sim_policy policy;
	enum sim_admission admission;
	double bound_s;	   /* SIM_ADMIT_BOUND: B */
	uint64_t bound_ns; /* B in the kernel's units */
	double shed_kv;	   /* SIM_ADMIT_SHED: smg's overload test */
	uint32_t shed_waiting;
	uint32_t n;
	struct steer_policy knobs;
	bool jitter;
	enum sim_estimator est;
	bool share;	      /* sees the other routers' wire counters: no peer scaling */
	bool resync;	      /* --busy-resync: E set to the pending work at every answer */
	uint32_t running_cap; /* --running-cap: live connections that fill a backend */
	int64_t phase_tokens;
	bool guess_mean;
	/* --peer-fill: predicted tokens of the other routers' sends per
	 * backend, as of fill_t; this router's own first send and base waits. */
	bool peer_fill;
	double others[SIM_MAX_WORKERS], fill_t, first_sent;
	uint64_t base_ns[SIM_MAX_WORKERS];
	struct sim_rng rng;
	uint64_t rr_next;
	uint32_t live[SIM_MAX_WORKERS];	      /* own requests not yet finished */
	uint32_t conns[SIM_MAX_WORKERS];      /* own connections open (busy or idle) */
	uint32_t since_snap[SIM_MAX_WORKERS]; /* own requests sent since w's snapshot */
	/* smg-steer's per-backend counters, tokens (sim.h, enum sim_estimator). */
	uint64_t credited[SIM_MAX_WORKERS];	/* credits since the poll: flat or real x peers */
	uint64_t unsent[SIM_MAX_WORKERS];	/* flat credits of connections that sent nothing */
	uint64_t pending[SIM_MAX_WORKERS];	/* P: sent and not answered */
	uint64_t pending_poll[SIM_MAX_WORKERS]; /* P_poll: P when the snapshot was taken */
	uint64_t sent_poll[SIM_MAX_WORKERS];	/* C: real tokens sent since the snapshot */
	/* E, the fluid estimate: fluid[w] tokens at time fluid_t[w], served
	 * since at 1e9 / npt[w] tokens/s (the published throughput). */
	double fluid[SIM_MAX_WORKERS], fluid_t[SIM_MAX_WORKERS], fluid_poll[SIM_MAX_WORKERS];
	uint64_t npt[SIM_MAX_WORKERS];
	/* The step cadence, per backend, from this router's own response
	 * packets (the kernel's per-slot last_rx_ns and step estimate). */
	enum sim_step_cadence cadence;
	bool step_sparse;		   /* L also from gaps that may span many steps */
	double step_ewma;		   /* weight of a one-step gap in L (1: the last gap) */
	bool probe;			   /* --step-probe: a streaming request always decoding */
	double tick;			   /* the cadence's clock tick, s (0: exact) */
	double last_rx[SIM_MAX_WORKERS];   /* last response packet, s (-1: none yet) */
	double step_s[SIM_MAX_WORKERS];	   /* L: estimated step length, s (0: unknown) */
	uint32_t streams[SIM_MAX_WORKERS]; /* own requests answered and not complete */
	bool one_step[SIM_MAX_WORKERS];	   /* streams > 0 at the last packet: the
					     * next packet ends the very next step */
	double now;
	/* smg-steer: the table this router's daemon published and the
	 * kernel's per-backend counters, one slot per worker. */
	struct steer_table *table;
	struct steer_slot slots[SIM_MAX_WORKERS];
	bool table_stale; /* a snapshot changed since the table was built */
	struct sim_router_stats stats;
	/* Keys (affinity.c): smg-steer's affinity table (key -> the worker of
	 * its last connection), or cache-aware's record of where it sent each
	 * key (value) with how long that prompt was (weight); chbl's ring. */
	bool aff;	   /* smg-steer with affinity */
	bool aff_hrw;	   /* a new key starts at its rendezvous worker */
	bool aff_ctx;	   /* the slack grows by the key's last tokens' prefill */
	uint64_t slack_ns; /* STEER_U64_MAX: infinite */
	struct sim_lru keys;
	struct chbl_ring *ring;
};

/* router.c: the kernel's view of slot w (NULL when out of range, or full
 * under --running-cap), as steer_select() resolves it. */
struct steer_slot *sim_slot_at(void *ctx, __u32 slot);

/* affinity.c */
int router_keys_init(struct sim_router *r, const struct sim_config *c);
void router_keys_free(struct sim_router *r);
/* smg-steer's pick with affinity: best is steer_select()'s least wait; the
 * key's worker when it stays, else best's, which becomes the key's. */
uint32_t affinity_choose(struct sim_router *r, const struct sim_observation *obs,
			 const struct steer_pick *best);
uint32_t pick_cache_aware(struct sim_router *r, const struct sim_observation *obs);
uint32_t pick_chbl(struct sim_router *r, const struct sim_observation *obs);
uint32_t pick_oracle_cache(struct sim_router *r, const struct sim_observation *obs);

#endif /* STEER_SIM_ROUTER_H */
