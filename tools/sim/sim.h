/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * sim.h - steer-sim, a discrete-event simulation of an LLM fleet behind one
 * or more routers, to measure the queueing wait (the TTFT proxy) that each
 * routing policy produces. docs/simulator.md describes the model.
 *
 * Deterministic: the same configuration and seed give byte-identical output.
 * The workload (arrival times, sizes, which router gets each request) comes
 * from its own random stream, so every policy sees the very same requests.
 *
 * The smg-steer policy is not re-implemented here: it links user/policy/policy.c
 * (steer_policy_score_all, steer_policy_credit) and runs steer_select() from
 * bpf/steer_common.h, the code the kernel runs.
 */
#ifndef STEER_SIM_H
#define STEER_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "steer_common.h"

#define SIM_MAX_WORKERS 32
#define SIM_MAX_ROUTERS 64

/* ---- Random numbers ---------------------------------------------------- */

/* xoshiro256**, seeded through splitmix64: fast, and the same on every host. */
struct sim_rng {
	uint64_t s[4];
};

/* A stream derived from (seed, stream id): streams are independent. */
void sim_rng_seed(struct sim_rng *r, uint64_t seed, uint64_t stream);
uint64_t sim_rng_next(struct sim_rng *r);
double sim_rng_uniform(struct sim_rng *r);	       /* [0, 1) */
uint32_t sim_rng_below(struct sim_rng *r, uint32_t n); /* [0, n), n >= 1 */
double sim_rng_exp(struct sim_rng *r, double mean);
double sim_rng_normal(struct sim_rng *r);

/* ---- Bounded LRU map (lru.c) --------------------------------------------- */

struct sim_lru_ent {
	uint64_t key, value, weight;
	int32_t prev, next; /* recency list, most recent first; next: free list too */
	int32_t hnext;	    /* hash chain */
};

/*
 * Key -> (value, weight), least recently put first to go: beyond
 * max_entries entries (0: no bound), and once the weights' sum is above
 * high (0: no bound) down to low, the last entry to go trimmed rather than
 * removed (a prefix cache loses the end of a context first).
 */
struct sim_lru {
	struct sim_lru_ent *e;
	int32_t *bucket;
	uint32_t nbucket, alloc, used; /* buckets; entries allocated, ever used */
	uint32_t n;		       /* entries in the map */
	int32_t head, tail, free;
	uint32_t max_entries;
	uint64_t high, low, weight;
	uint64_t evicted, trimmed; /* entries removed and trimmed by the bounds */
};

void sim_lru_init(struct sim_lru *l, uint32_t max_entries, uint64_t high, uint64_t low);
void sim_lru_free(struct sim_lru *l);
/* The entry of key, without making it more recent. */
bool sim_lru_peek(const struct sim_lru *l, uint64_t key, uint64_t *value, uint64_t *weight);
/* Insert or replace key's entry as the most recent, then apply the bounds
 * (never to this entry). 0, or -1 when out of memory. */
int sim_lru_put(struct sim_lru *l, uint64_t key, uint64_t value, uint64_t weight);
/* A well-mixed hash of a pair: rendezvous weights and ring points. */
uint64_t sim_hash2(uint64_t a, uint64_t b);

/* ---- Workload ------------------------------------------------------------ */

enum sim_dist {
	SIM_DIST_BIMODAL = 0,	/* 200 tokens (90 %) or 6000 tokens (10 %) */
	SIM_DIST_LOGNORMAL = 1, /* lognormal, sigma 1.5, mean 780, capped */
	SIM_DIST_UNIFORM = 2,	/* uniform integers 100..1460 */
	SIM_DIST_COUNT
};

#define SIM_PROMPT_CAP 24576u /* longest prompt, tokens (lognormal cap) */
#define SIM_KV_TOKENS 49152u  /* the FIFO engine's KV per worker (workload.c) */
#define SIM_OUTPUT_CAP 4096u  /* longest output, tokens */
/* smg's mock worker's KV (crates/mock_worker/src/engine.rs, EngineParams),
 * which holds its prefix cache: LRU eviction from 92 % down to 85 %. */
#define SIM_CACHE_TOKENS 524288u
#define SIM_AFF_KEYS 65536u /* a router's affinity table, keys */
#define SIM_TURNS_MAX 64u   /* turns of one conversation, at most */

const char *sim_dist_name(enum sim_dist d);
int sim_dist_parse(const char *s, enum sim_dist *out);
uint32_t sim_draw_prompt(struct sim_rng *r, enum sim_dist d);
/* Output tokens: exponential with the given mean, rounded up, in 1..SIM_OUTPUT_CAP. */
uint32_t sim_draw_output(struct sim_rng *r, double mean);
/* Exact mean prompt length of a distribution (caps included), tokens. */
double sim_dist_mean(enum sim_dist d);

/* ---- Configuration ------------------------------------------------------- */

enum sim_policy {
	SIM_POL_RR = 0,	      /* round robin, per router */
	SIM_POL_RANDOM = 1,   /* uniform random */
	SIM_POL_JSQ = 2,      /* fewest live connections of this router */
	SIM_POL_P2C = 3,      /* power of two choices on snapshot queue + own dispatches */
	SIM_POL_REQCOUNT = 4, /* smg before PR #1647: own in-flight requests + KV barrier */
	SIM_POL_STEER = 5,    /* smg-steer: policy.c scores + steer_select water-fill */
	SIM_POL_ORACLE = 6,   /* true remaining queued work / true rate, at the arrival instant */
	/* Cache affinity (docs/simulator.md, "Cache affinity"). */
	SIM_POL_CACHE_AWARE = 7,  /* smg's cache_aware-like: the key's last worker, spill on load */
	SIM_POL_CHBL = 8,	  /* consistent hashing with bounded loads */
	SIM_POL_ORACLE_CACHE = 9, /* least true wait + prefill of the uncached prompt there */
	SIM_POL_COUNT
};

const char *sim_policy_name(enum sim_policy p);
int sim_policy_parse(const char *s, enum sim_policy *out);

/*
 * Admission control at connect (docs/simulator.md, "Overload"). A refused
 * connection's request is dropped: it never reaches a worker, is never
 * retried, and the router's kernel counts nothing for it.
 */
enum sim_admission {
	SIM_ADMIT_ALL = 0,   /* every connection goes to the pick */
	SIM_ADMIT_BOUND = 1, /* refused when the pick's expected wait is over wait_bound_s */
	SIM_ADMIT_SHED = 2,  /* smg's overload protection: overloaded workers are excluded
			      * (sim_shed_overloaded), refused when every worker is */
	SIM_ADMIT_COUNT
};

/* What sim_router_pick returns for a refused connection. */
#define SIM_REFUSED UINT32_MAX

const char *sim_admission_name(enum sim_admission a);
int sim_admission_parse(const char *s, enum sim_admission *out);

/* The worker model (docs/simulator.md, "The model"). */
enum sim_engine {
	SIM_ENGINE_FIFO = 0,  /* one prefill at a time at a fixed rate; decode apart */
	SIM_ENGINE_BATCH = 1, /* continuous batching, smg's mock worker "realistic" engine */
	SIM_ENGINE_COUNT
};

/* When the first byte of a response reaches the client. */
enum sim_response {
	SIM_RESP_STREAM = 0, /* at the first token (SSE, gRPC streaming) */
	SIM_RESP_FULL = 1,   /* with the whole answer, at the last token (plain JSON) */
	SIM_RESP_COUNT
};

/*
 * What smg-steer adds to the snapshot between polls. Per backend,
 * per router: Q is the snapshot's queued tokens, P the tokens of this
 * router's requests sent and not yet answered (no response byte yet), P_poll
 * P when the snapshot was taken, C the real tokens this router sent since the
 * snapshot, F the flat credits of connections that have sent nothing yet,
 * E the work sent and not yet served by the backend's published throughput.
 */
enum sim_estimator {
	SIM_EST_FLAT = 0,    /* Q + flat credit per connection since the poll (no accounting) */
	SIM_EST_CREDIT = 1,  /* (a) wire-credit: Q + C x peers (drained at the poll) */
	SIM_EST_PENDING = 2, /* (b) wire-pending: max(0, Q - P_poll) + P + F */
	SIM_EST_SUM = 3,     /* plain sum: Q + P + F (double counts what is queued at the poll) */
	SIM_EST_PEND_PEERS =
		4, /* wire-pending + (peers - 1) x C: the other routers' sends guessed */
	/* E: sends drained at the backend's throughput, never above P (x peers):
	 * max(0, Q - E_poll) + E + F. In time, a "busy until" per backend. */
	SIM_EST_FLUID = 5,
	SIM_EST_COUNT
};

/*
 * Step cadence (docs/simulator.md, "The step cadence"): what
 * smg-steer adds to fluid's wait from the response packets its kernel sees.
 * Per backend, t_last is the last response packet of this router's own
 * requests (with streaming, a batching engine's step end) and L the step
 * length estimated from consecutive packets.
 */
enum sim_step_cadence {
	SIM_CAD_OFF = 0,      /* fluid alone */
	SIM_CAD_MAX = 1,      /* busy until max(busy_until, t_last + L): tree-compatible */
	SIM_CAD_SUM = 2,      /* wait + max(0, t_last + L - now) */
	SIM_CAD_PERIODIC = 3, /* wait + L - ((now - t_last) mod L): steps never missed */
	SIM_CAD_COUNT
};

const char *sim_engine_name(enum sim_engine e);
int sim_engine_parse(const char *s, enum sim_engine *out);
const char *sim_response_name(enum sim_response r);
int sim_response_parse(const char *s, enum sim_response *out);
const char *sim_estimator_name(enum sim_estimator e);
int sim_estimator_parse(const char *s, enum sim_estimator *out);
const char *sim_cadence_name(enum sim_step_cadence k);
int sim_cadence_parse(const char *s, enum sim_step_cadence *out);

/* The continuous-batching engine's parameters, smg's mock worker defaults
 * (crates/mock_worker, "Realistic engine"), for a 1x worker. */
struct sim_batch_params {
	double prefill_tps;	 /* prompt tokens per second of prefill */
	uint32_t prefill_chunk;	 /* prompt tokens prefilled per step, at most */
	double decode_base_s;	 /* fixed time of a decode step */
	double decode_per_req_s; /* added per decoding request */
	uint32_t max_running;	 /* continuous-batching width */
	uint32_t kv_tokens;	 /* KV capacity */
	uint32_t kv_block;	 /* KV block size, tokens */
	/* Prompt tokens/s a 1x worker sustains on the workload (prefill and
	 * decode share its steps): 0 = measure it (sim_batch_capacity). Load
	 * is a fraction of this capacity. */
	double capacity_tps;
};

/* What a worker reports as gen_throughput. */
enum sim_tput_report {
	SIM_TPUT_NOMINAL = 0,  /* its nominal token rate */
	SIM_TPUT_MEASURED = 1, /* prefill tokens served over the last poll interval / interval */
};

struct sim_config {
	/* Scenario. */
	uint32_t workers; /* 1..SIM_MAX_WORKERS */
	double load;	  /* offered prompt tokens / fleet prefill capacity, (0, 2] */
	double poll_s;	  /* snapshot interval, seconds, > 0 */
	bool stagger;	  /* false: every worker is polled at the same instant */
	uint32_t routers; /* 1..SIM_MAX_ROUTERS; arrivals are split among them at random */
	enum sim_dist dist;
	uint64_t requests; /* measured requests */
	uint64_t warmup;   /* requests before the measurement starts */
	uint64_t seed;
	bool drain;    /* after the last arrival, run until every measured request started */
	bool complete; /* after the last arrival, run until every request finished */

	/* Policy. */
	enum sim_policy policy;
	struct steer_policy knobs; /* smg-steer and reqcount: smg's knobs (peer_routers too) */
	enum sim_tput_report tput;
	/* Ablation: GetLoads also counts the unserved prompt tokens of the
	 * request in prefill (SGLang does not: it is running, not waiting). */
	bool report_running_prefill;
	/* Proposed fix, off by default: each router adds to every base wait a
	 * uniform random offset of up to one (peer-scaled) credit, redrawn at
	 * every rebuild, so that independent routers do not all fill the same
	 * backend first. */
	bool steer_jitter;
	/* smg-steer's in-flight estimator. */
	enum sim_estimator estimator;
	/* What fluid adds for the step under way, from response packets. */
	enum sim_step_cadence step_cadence;
	/* Ablation: the step length also from gaps between response packets
	 * that may span many steps (full responses), as a lower envelope. */
	bool step_sparse;
	/* The step length from one-step gaps: L += (gap - L) x step_ewma;
	 * 1 (the default) keeps the last gap. In (0, 1]. */
	double step_ewma;
	/* Ablation: the step cadence reads a coarse clock of this tick, s (the
	 * kernel's bpf_ktime_get_coarse_ns(): 4 ms at HZ=250); 0 = exact. */
	double clock_tick_s;
	/* Ablation (batching engine): every router keeps one streaming request
	 * of its own decoding on every worker, a probe that is never answered
	 * in full, so it sees a response packet at every step end even when its
	 * clients' responses are full ones. The probes cost the engine what a
	 * decoding request costs (decode_per_req_s a step each, and steps that
	 * never stop); their prompts and KV are not modelled. */
	bool step_probe;
	/* Ablation of a fleet-wide probe: one probe per worker in all (not one
	 * per router), its step ends reaching every router at once. */
	bool step_probe_one;
	/* With step_probe_one and share_wire: worker w's probe is router
	 * w % routers's, and its step ends reach the other routers as late as a
	 * shared send does (smg-steerd's --peer with --step-probe). Without it
	 * every router sees them at once. */
	bool share_steps;
	/* Ablation: the other routers date a shared step end when it happened
	 * (a clock the routers share), not when it arrives. */
	bool share_steps_backdated;
	/* Ablation: every router sees every router's sends and answers at once
	 * (wire counters shared without delay), so no peer scaling is needed. */
	bool share_wire;
	double share_delay_s; /* each shared event reaches the other routers this late */
	/* --share-delay-samples: instead, each shared event's delay is drawn from
	 * these (seconds; a measured distribution, e.g. the bench's). */
	const double *share_delays;
	uint32_t n_share_delays;
	/* Ablation: the random phase's range in tokens (-1: smg-steerd's, one
	 * credit of mean prefill x peers when peers > 1; 0: none). */
	int64_t phase_tokens;
	/* Ablation: each own send stands for the other routers' as
	 * (peers - 1) x mean prefill tokens, not (peers - 1) x its own size. */
	bool peer_guess_mean;
	/* Ablation: the other routers' sends since the poll are predicted, at
	 * (peers - 1) x this router's own token rate, water-filling the fleet
	 * on top of what this router sees; no x peers scaling. */
	bool peer_fill;

	/* Ablation (fluid): at every answer E is set to the pending work, not
	 * only capped by it (docs/simulator.md, "Overload"). */
	bool busy_resync;
	/* Ablation (smg-steer): a backend with this many live connections of
	 * the router is full, never chosen (0: off; docs/simulator.md,
	 * "Overload"). */
	uint32_t running_cap;

	/* Ablation: the oracle does not know where a batching worker is in
	 * its current step (it sees the prompt tokens ahead only). */
	bool oracle_blind_step;
	/* Ablation: the kernel's token count of a request is this many times
	 * its real prompt (a wrong bytes-per-token); 1 = exact. */
	double wire_scale;

	/* Admission control (docs/simulator.md, "Overload"). */
	enum sim_admission admission;
	double wait_bound_s;   /* SIM_ADMIT_BOUND: B, seconds, > 0 */
	double shed_kv;	       /* SIM_ADMIT_SHED: overloaded at KV usage >= this, (0, 1] */
	uint32_t shed_waiting; /* ... or at waiting requests >= this (0: KV alone) */

	/* Bursts: burst_load for burst_on_s, then load for burst_off_s, from a
	 * first phase at load; 0 (the default) keeps load constant. */
	double burst_load;
	double burst_on_s, burst_off_s;

	/* Clients and responses. */
	uint32_t keepalive; /* requests per connection before the client closes it, >= 1 */
	enum sim_response response;

	/* Conversations and cache affinity (docs/simulator.md, "Cache
	 * affinity"). turns 0: single requests, as ever. Otherwise
	 * conversations arrive (Poisson), each of geometric turns of mean
	 * turns: a turn's prompt is the context so far (the earlier prompts
	 * and answers) plus new user tokens drawn from dist; the next turn
	 * comes think_s (exponential mean) after the last token of the
	 * answer. One conversation is one key; keepalive must be 1. */
	double turns;
	double think_s;
	bool turn_router_any; /* each turn through a random router, not the conversation's */
	uint32_t keys;	      /* single requests: keys drawn from this many (0: one each) */
	/* Every worker's prefix cache, tokens (0: none); LRU eviction above
	 * cache_high x cache_tokens down to cache_low x cache_tokens. */
	uint32_t cache_tokens;
	double cache_high, cache_low;
	/* smg-steer's affinity: a key's next connection goes to the worker of
	 * its last while that one is admitted and its expected wait is at
	 * most the best plus slack_s (< 0: no affinity; INFINITY allowed).
	 * aff_hrw: a key not in the table starts at its rendezvous-hash worker
	 * under the same rule. aff_keys: the table's bound, keys. */
	double slack_s;
	bool aff_hrw;
	uint32_t aff_keys;
	/* Variant: the slack grows by the prefill a leave forfeits, the key's
	 * last connection's tokens (sent and answered, as the kernel counts
	 * them) at the best worker's published rate. */
	bool aff_ctx;
	/* Ablation: the kernel counts only the tokens the worker prefills,
	 * not the whole prompt it sends. */
	bool wire_uncached;

	/* Model, fixed from first principles (docs/simulator.md). */
	double base_rate;   /* prefill tokens/s of a 1x worker */
	double speed_min;   /* slowest worker, x base */
	double speed_max;   /* fastest worker, x base */
	double decode_rate; /* output tokens/s of one request on a 1x worker */
	double mean_output; /* mean output tokens */
	uint32_t kv_tokens; /* KV capacity of every worker, tokens (FIFO engine) */
	enum sim_engine engine;
	struct sim_batch_params batch; /* SIM_ENGINE_BATCH, x speed factor */
};

void sim_config_defaults(struct sim_config *c);
/* 0 when valid; otherwise -1 and a reason in why. */
int sim_config_check(const struct sim_config *c, char *why, size_t whylen);
/* Arrival rate, requests/s (conversations/s with turns), that offers c->load
 * of the fleet's prefill capacity in prompt tokens sent (batching engine: of
 * its sustainable capacity, measured). */
double sim_arrival_rate(const struct sim_config *c);
/* Batching engine: prompt tokens/s one 1x worker serves when it always has
 * work waiting (the configured capacity_tps, or measured by running one
 * overloaded worker on the same workload, conversations without their
 * cache; deterministic). */
double sim_batch_capacity(const struct sim_config *c);
/* Speed factor of worker i (a fixed permutation of an even spread, from the seed). */
void sim_worker_speeds(const struct sim_config *c, double *speeds);
/* Mean prompt tokens of one conversation, summed over its turns (drawn from
 * a fixed sample of conversations: the same for every seed). */
double sim_conversation_mean_tokens(const struct sim_config *c);

/* ---- Routers ------------------------------------------------------------- */

/* One worker's last GetLoads snapshot, as every router sees it. */
struct sim_snapshot {
	bool valid;		/* a snapshot has been taken */
	bool reports_uncached;	/* sticky: has ever reported queued uncached tokens */
	struct steer_load load; /* aggregated by steer_load_aggregate() */
};

/* smg's overload test of one snapshot: KV usage >= kv, or waiting requests
 * >= waiting (0: not tested). A worker with no snapshot yet is not
 * overloaded. */
bool sim_shed_overloaded(const struct sim_snapshot *s, double kv, uint32_t waiting);

/*
 * What a router may look at when it picks. Only the oracle reads true_wait_s
 * and rate; every real policy reads the snapshots and its own bookkeeping.
 */
struct sim_observation {
	const struct sim_snapshot *snap; /* [workers] */
	const double *true_wait_s;	 /* [workers]: queued work / rate, now; oracle only */
	const double *rate;		 /* [workers]: true token rate; oracle only */
	double now;			 /* seconds */
	/* Oracle admission only: the wait the arriving request would have at
	 * worker w, exactly (the batching engine's replayed), or any value
	 * above limit when it is above limit. NULL: true_wait_s. */
	double (*exact_wait)(void *ctx, uint32_t w, double limit);
	void *exact_ctx;
	/* Who connects: the key (a conversation, or a client's cgroup). The
	 * L7 policy (cache-aware) sees the prompt too, and how much of it
	 * repeats the key's earlier prompts and answers (a conversation's
	 * context; 0 for single requests); the cache oracle sees what each
	 * worker would prefill of it ([workers], or NULL). */
	uint64_t key;
	uint32_t prompt, prefix;
	const uint32_t *uncached;
};

/* smg-steer's affinity rule: a key stays at its worker, whose expected
 * wait is wait_ns, while it is at most best_ns + slack_ns (saturating). */
bool sim_affinity_stays(uint64_t wait_ns, uint64_t best_ns, uint64_t slack_ns);

struct sim_router_stats {
	uint64_t picks;
	uint64_t steer_selects; /* calls of steer_select() */
	uint64_t steer_scanned; /* entries it examined, summed */
	uint64_t rebuilds;	/* tables rebuilt from snapshots */
	uint64_t refused;	/* picks that refused the connection */
	/* Its own requests as its kernel counted them, tokens. */
	uint64_t sent_tokens;	  /* sent, keep-alive reuses included */
	uint64_t answered_tokens; /* answered (first response byte) */
	uint64_t pending_tokens;  /* pending now, summed over backends */
	/* Affinity: picks of a key in the table (or with a rendezvous
	 * worker), and of those the picks that went there. */
	uint64_t aff_known, aff_stayed;
};

struct sim_router;

/* Random stream ids of one seed, one per purpose, so that each draws the same
 * numbers whatever the others do. */
#define SIM_STREAM_SPEEDS 1
#define SIM_STREAM_POLL 2
#define SIM_STREAM_WORKLOAD 3
#define SIM_STREAM_SHARE 4
#define SIM_STREAM_KEYS 5	     /* single requests' keys (--keys) */
#define SIM_STREAM_CONV (1ull << 32) /* + conversation index: its turns */
#define SIM_STREAM_ROUTER 16	     /* + router index */

/* Router number index of c->routers: policy from c->policy, knobs from c->knobs,
 * randomness from stream SIM_STREAM_ROUTER + index of c->seed. */
struct sim_router *sim_router_new(const struct sim_config *c, uint32_t index);
void sim_router_free(struct sim_router *r);
/* Choose a worker for the next connection of this router, or SIM_REFUSED
 * (admission control: nothing is counted for a refused connection). */
uint32_t sim_router_pick(struct sim_router *r, const struct sim_observation *obs);
/*
 * The life of a connection and its requests, as this router's kernel sees
 * it: a new connection to w (after pick); a request of prompt tokens sent
 * on it (first: the connection's first); the first byte of its answer; the
 * request complete; the connection closed.
 */
void sim_router_connected(struct sim_router *r, uint32_t w);
void sim_router_sent(struct sim_router *r, uint32_t w, uint32_t tokens, bool first, double t);
void sim_router_answered(struct sim_router *r, uint32_t w, uint32_t tokens, double t);
void sim_router_finished(struct sim_router *r, uint32_t w);
/* One or more response packets of this router's own requests on w reached
 * it at t (a batching engine's step end with streaming; a first token or a
 * completion otherwise): what the kernel's ingress program sees. */
void sim_router_rx(struct sim_router *r, uint32_t w, double t);
/* Another router's probe saw a step end of w, gap_s after its previous one
 * (0: none known); it reaches this router at now (--share-steps), which takes
 * it as a step that ended at at and lasts gap_s. */
void sim_router_rx_step(struct sim_router *r, uint32_t w, double at, double now, double gap_s);
void sim_router_closed(struct sim_router *r, uint32_t w);
/* The connection of key completed its request, tokens sent and answered. */
void sim_router_key_done(struct sim_router *r, uint64_t key, uint32_t tokens);
/* Another router sent, or had answered, a request on w (--share-wire). */
void sim_router_peer_sent(struct sim_router *r, uint32_t w, uint32_t tokens, double t);
void sim_router_peer_answered(struct sim_router *r, uint32_t w, uint32_t tokens, double t);
/* A connection and one request of unknown size (0 tokens), for tests. */
void sim_router_dispatched(struct sim_router *r, uint32_t w);
/* A fresh snapshot of w was taken: the poll is instantaneous, so the credits
 * this router gave w before it are now in the snapshot. */
void sim_router_snapshot_taken(struct sim_router *r, uint32_t w, double t);
void sim_router_get_stats(const struct sim_router *r, struct sim_router_stats *out);
/* The smg-steer table as last built (NULL for other policies), for tests. */
const struct steer_table *sim_router_table(const struct sim_router *r);
uint64_t sim_router_inflight_tokens(const struct sim_router *r, uint32_t w);
/* The in-flight tokens steer_select() would read for w at time t. */
uint64_t sim_router_slot_tokens_at(struct sim_router *r, uint32_t w, double t);
/* Tokens of this router's requests on w sent and not yet answered. */
uint64_t sim_router_pending_tokens(const struct sim_router *r, uint32_t w);
/* The last response packet from w (s; -1 before the first) and the step
 * length estimated from the packets (s; 0 while unknown). */
double sim_router_last_rx(const struct sim_router *r, uint32_t w);
double sim_router_step_estimate(const struct sim_router *r, uint32_t w);

/* ---- Running ------------------------------------------------------------- */

struct sim_worker_result {
	double speed;		  /* x base */
	double rate;		  /* prefill tokens/s */
	double served_tokens;	  /* prefill work done (recompute included, partial head too) */
	double served_window;	  /* of which in the measurement window */
	double backlog_s;	  /* time-averaged queued work / rate over the window, s */
	uint64_t dispatched;	  /* requests routed to it (all, warm-up included) */
	uint64_t preemptions;	  /* in the window */
	double queued_tokens_end; /* waiting + the head's remainder at the end */
	uint32_t max_running;	  /* batching: most requests running at once */
	uint32_t max_kv_used;	  /* batching: most KV tokens held at an admission */
	double last_step_end;	  /* batching: end of its last step, s (-1: none) */
	uint64_t cache_max;	  /* conversations: most tokens its prefix cache held */
};

struct sim_result {
	uint64_t measured;			    /* requests whose wait is in the statistics */
	uint64_t refused;			    /* measured arrivals refused at connect */
	uint64_t refused_all;			    /* every arrival refused, warm-up included */
	double refused_tokens;			    /* prompt tokens of every refused arrival */
	double over_bound;			    /* fraction of the waits above wait_bound_s */
	double mean_s, p50_s, p99_s, p999_s, max_s; /* queueing wait (admitted requests) */
	double ttft_mean_s, ttft_p50_s, ttft_p99_s; /* time to first token */
	double tput_rps;			    /* requests finished per second, window */
	double prompt_tokens, cached_tokens;	    /* of the measured requests */
	double lost_tokens;	 /* of those, cached at some worker but prefilled where they went */
	uint64_t preemptions;	 /* in the window, all workers */
	double cov_backlog;	 /* CoV across workers of backlog_s */
	double window_s;	 /* from the first measured arrival to the last arrival */
	double end_s;		 /* simulated time at the end */
	double arrived_tokens;	 /* prompt tokens of every arrival */
	double recompute_tokens; /* prefill work re-queued by preemptions */
	double served_tokens;	 /* sum over workers */
	double queued_tokens_end;
	uint64_t arrived, started, finished;
	uint64_t answered;	/* requests whose first response byte arrived */
	uint64_t connections;	/* connections opened (routing decisions) */
	double sent_tokens;	/* prompt tokens of every request sent (not refused) */
	double answered_tokens; /* prompt tokens of the requests answered */
	/* Batching, at the end: (worker, router) pairs where the router has a
	 * request that got a token at the worker's last step end, and of
	 * those, how many routers' last response packet is that step end. */
	uint64_t rx_pairs, rx_at_step_end;
	struct sim_router_stats routers; /* summed over routers */
	uint32_t workers;
	struct sim_worker_result w[SIM_MAX_WORKERS];
};

/* Run one scenario with one policy. 0, or -1 on a bad config or no memory
 * (reason in why). */
int sim_run(const struct sim_config *c, struct sim_result *r, char *why, size_t whylen);

/* ---- Statistics and output ---------------------------------------------- */

/* Nearest-rank quantile of sorted values, q in [0, 1]. */
double sim_quantile(const double *sorted, size_t n, double q);
/* Coefficient of variation (population standard deviation / mean); 0 if mean is 0. */
double sim_cov(const double *v, size_t n);

const char *sim_csv_header(void);
/* One CSV row (no newline) for a scenario label, config and result. */
int sim_csv_row(char *buf, size_t len, const char *scenario, const char *label,
		const struct sim_config *c, const struct sim_result *r);

#endif /* STEER_SIM_H */
