/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * internal.h - what the simulator's event loop (engine.c) shares with its two
 * worker models: fifo.c (one prefill at a time) and batch.c (continuous
 * batching, smg's mock worker). Not part of the simulator's interface.
 */
#ifndef STEER_SIM_INTERNAL_H
#define STEER_SIM_INTERNAL_H

#include "sim.h"

enum ev_type {
	EV_ARRIVAL = 0,
	EV_PREFILL_DONE = 1, /* FIFO: a: worker */
	EV_DECODE_DONE = 2,  /* FIFO: a: request, b: its epoch */
	EV_POLL = 3,	     /* a: worker, or every worker when not staggered */
	EV_STEP_DONE = 4,    /* batching: a: worker */
	EV_PEER_SENT = 5,    /* --share-wire: a: worker | origin router << 16, b: tokens */
	EV_PEER_ANSWERED = 6,
	EV_PEER_STEP = 7, /* --share-steps: a: worker | owner router << 16 */
	EV_TURN = 8,	  /* a conversation's next turn: a: the conversation */
};

#define ALL_WORKERS 0xffffffffu
#define NONE (-1)

struct event {
	double t;
	double t0;    /* EV_PEER_STEP: when the step ended (t is when it arrives) */
	uint64_t seq; /* insertion order: equal times run first-in first-out */
	uint32_t type, a, b;
};

struct heap {
	struct event *v;
	size_t n, cap;
};

struct req {
	double arrival, decode_start;
	int64_t measured_idx; /* index among measured requests, or -1 */
	uint32_t prompt, output;
	uint32_t uncached; /* prompt tokens the worker's prefix cache lacks (its first prefill) */
	uint32_t work;	   /* FIFO: prefill work of the pending pass (+ generated on recompute) */
	uint64_t key;	   /* who connects: its conversation, or its client */
	int32_t conv;	   /* its conversation, or NONE */
	uint32_t out_left; /* output tokens still to generate */
	uint32_t kv_held;
	uint32_t epoch; /* bumped by preemption and by freeing: cancels its decode event */
	uint32_t worker, router;
	int32_t conn;	       /* the connection it was sent on */
	int32_t prev, next;    /* links in a worker's queue or decode list, or the free list */
	uint32_t prefill_left; /* batching: prompt tokens not prefilled yet */
	uint32_t generated;    /* batching: output tokens generated */
	bool started;
	bool answered;	  /* the first byte of its response has reached the client */
	bool first_token; /* its first output token has been generated */
};

/* A client connection: steered once, at connect, then reused (keep-alive). */
struct conn {
	uint32_t worker, router;
	uint32_t requests; /* sent on it so far */
	int32_t next;	   /* in its router's idle stack, or the free list */
};

struct worker {
	double speed, rate, decode_rate;
	uint32_t kv_cap, kv_used;
	/* Waiting queue: FIFO of requests not in prefill (FIFO) or not admitted (batching). */
	int32_t q_head, q_tail;
	uint32_t waiting;
	double queued_tokens;
	/* FIFO: the request in prefill, or NONE. */
	int32_t cur;
	double cur_end;
	/* Decoding (FIFO) or running (batching) requests, oldest first. */
	int32_t run_head, run_tail;
	uint32_t running;
	/* Batching: first running request with prompt left to prefill (they
	 * are a suffix of the running list: prefill is served in order). */
	int32_t pf;
	double prefill_left; /* sum of the running requests' prefill_left */
	bool stepping;	     /* a step is under way */
	double step_end;
	double last_step_end; /* -1 before the first */
	uint32_t decoding;    /* running requests whose prefill is done */
	uint32_t probes;      /* --step-probe: the routers' probes, always decoding */
	uint32_t max_running, max_kv_used;
	/* Accounting. */
	double acc_t, backlog_area; /* integral of (queued work / rate) dt */
	double served_done;	    /* prefill work of finished passes (batching: all) */
	double snap_t, served_at_snap;
	uint64_t preemptions, dispatched;
	double area_win_start, served_win_start, served_win;
	uint64_t preempt_win_start, preempt_win;
	double backlog_win;
	/* Conversations: its prefix cache, conversation key -> the tokens
	 * of its context cached (from its start). */
	struct sim_lru cache;
	uint64_t cache_max; /* the most tokens it held after an insert */
};

/* A conversation between its turns and during one (session.c). */
struct conv {
	struct sim_rng rng; /* its own stream: the same turns whatever the policy */
	uint64_t key;
	uint32_t context;    /* tokens so far: the last turn's prompt and answer */
	uint32_t turns_left; /* after the turn under way */
	uint32_t router;     /* its first turn's */
	double think_s;	     /* before the next turn, drawn with the turn under way */
	int32_t next;	     /* free list */
};

/* batch.c's replay of a worker: one running or admitted request. */
struct replay_req {
	uint32_t prompt, output, prefill_left, generated, kv_held;
	bool mine; /* the arriving request whose wait is replayed */
};

struct sim {
	const struct sim_config *c;
	uint32_t n;
	struct worker w[SIM_MAX_WORKERS];
	struct sim_snapshot snap[SIM_MAX_WORKERS];
	struct sim_router *routers[SIM_MAX_ROUTERS];
	int32_t idle[SIM_MAX_ROUTERS]; /* each router's idle connections, most recent first */
	struct heap heap;
	uint64_t seq;
	struct req *reqs;
	size_t nreqs, capreqs;
	int32_t free_head;
	struct conn *conns;
	size_t nconns, capconns;
	int32_t conn_free;
	struct sim_rng workload;
	struct sim_rng share; /* --share-delay-samples draws */
	double lambda, now;
	/* Bursts: the phase under way and when it ends. */
	bool in_burst;
	double phase_end;
	uint64_t total, arrived, finished, started, answered, connections;
	uint64_t refused, refused_measured; /* arrivals refused at connect */
	double refused_tokens;
	double *waits, *ttfts;
	struct replay_req *replay; /* batch_exact_wait's scratch, max_running + 1 entries */
	uint64_t nwaits, nttfts;
	double win_start, win_end;
	double arrived_tokens, recompute_tokens, answered_tokens;
	/* Conversations (session.c) and single requests' keys. */
	struct conv *convs;
	size_t nconvs, capconvs;
	int32_t conv_free;
	uint64_t conv_started;
	struct sim_rng keys;
	double prompt_measured, cached_measured, lost_measured;
	uint64_t finished_open, finished_close; /* s->finished at the window's ends */
};

/* engine.c: events, lists, and what a worker model reports back. */
int sim_push(struct sim *s, double t, uint32_t type, uint32_t a, uint32_t b);
void sim_list_push_back(struct sim *s, int32_t *head, int32_t *tail, int32_t i);
void sim_list_push_front(struct sim *s, int32_t *head, int32_t *tail, int32_t i);
void sim_list_unlink(struct sim *s, int32_t *head, int32_t *tail, int32_t i);
/* Request i's first prefill starts at t: its wait ends. */
void sim_req_started(struct sim *s, int32_t i, double t);
/* Its first output token at t: a streaming response's first byte. */
void sim_req_first_token(struct sim *s, int32_t i, double t);
/* --share-steps: the router whose probe runs on worker w (UINT32_MAX: every
 * router sees the probe's tokens at once); and its step end at t, gap_s after
 * the previous one, sent on to the others as late as a shared send. */
uint32_t sim_probe_owner(const struct sim *s, uint32_t w);
void sim_probe_step_shared(struct sim *s, uint32_t w, double gap_s, double t);
/* Its last output token at t: the request is complete and freed. */
void sim_req_done(struct sim *s, int32_t i, double t);

/* engine.c: a request of prompt tokens arrives at t (arrival order: the
 * measurement window's) from router for key, of conversation conv or NONE.
 * 0 when dispatched, 1 when refused, -1 when out of memory. */
int sim_arrive(struct sim *s, double t, uint32_t prompt, uint32_t output, uint32_t router,
	       uint64_t key, int32_t conv);

/* session.c: conversations and the workers' prefix caches. */
bool conversations(const struct sim *s);
int conv_start(struct sim *s, double t);
int conv_next_turn(struct sim *s, int32_t ci, double t);
/* The request of a conversation is complete at t: its answer is cached
 * where it ran, and its next turn is due after the think time. */
int conv_turn_done(struct sim *s, const struct req *r, double t);
void conv_free_all(struct sim *s);
/* What worker wi would prefill of request r's prompt (all of it without a
 * conversation); and the lookup at r's dispatch, which caches its prompt. */
uint32_t cache_uncached(const struct sim *s, uint32_t wi, const struct req *r);
int cache_dispatch(struct sim *s, struct req *r);

/* fifo.c: one prefill at a time at a fixed rate, decode apart. */
double fifo_head_remaining(const struct worker *w, double t);
double fifo_true_wait(const struct worker *w, double t);
double fifo_served_at(const struct sim *s, const struct worker *w, double t);
void fifo_advance(struct worker *w, double t);
int fifo_enqueue(struct sim *s, uint32_t wi, int32_t i, double t);
int fifo_on_prefill_done(struct sim *s, uint32_t wi, double t);
int fifo_on_decode_done(struct sim *s, int32_t i, uint32_t epoch, double t);

/* batch.c: continuous batching (smg's mock worker). */
void batch_init_worker(const struct sim_config *c, struct worker *w);
double batch_true_wait(const struct worker *w, double t);
void batch_advance(struct worker *w, double t);
int batch_enqueue(struct sim *s, uint32_t wi, int32_t i, double t);
int batch_on_step_done(struct sim *s, uint32_t wi, double t);
/* The wait a request of prompt tokens arriving at t would have at worker wi,
 * replayed step by step; any value above limit once it is above limit. */
double batch_exact_wait(struct sim *s, uint32_t wi, uint32_t prompt, double t, double limit);
/* --step-probe: the probes keep every worker stepping from t on. */
int batch_start_probes(struct sim *s, double t);

#endif /* STEER_SIM_INTERNAL_H */
