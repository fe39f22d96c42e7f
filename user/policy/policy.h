/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * policy.h - the expected-wait score, smg's least_load policy (PR #1647),
 * as a pure module: no I/O, no clocks, no globals. The daemon, the unit tests
 * and the simulator all link this one implementation.
 *
 *   score = (queued_tokens + inflight_tokens) / throughput + w * k / (1 - k)
 *
 * The daemon publishes the in-flight-free part (base wait) and the cost of
 * one token (ns per token); the kernel adds in-flight work per connection
 * with the integer math of bpf/steer_common.h.
 */
#ifndef STEER_POLICY_H
#define STEER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "steer_common.h"

/* Knobs, with smg's names and defaults. */
#define STEER_DEFAULT_KV_PRESSURE_WEIGHT 0.15 /* seconds */
#define STEER_DEFAULT_THROUGHPUT 2000.0	      /* tokens per second */
#define STEER_DEFAULT_MEAN_PREFILL_TOKENS 1024u
#define STEER_KV_CLAMP_MAX 0.999
/* Request bytes on the wire per token, about 4 for text in JSON, 3 for gRPC
 * carrying token ids: STEER_DEFAULT_BYTES_PER_TOKEN, at most
 * STEER_MAX_BYTES_PER_TOKEN, 0 resolved by steer_bytes_per_token
 * (bpf/steer_common.h). */

struct steer_policy {
	double kv_pressure_weight;    /* s; finite, >= 0 */
	double default_throughput;    /* tokens/s; finite, > 0 */
	uint32_t mean_prefill_tokens; /* >= 1 */
	uint32_t peer_routers;	      /* >= 1: routers sharing the fleet */
	/* --peer: the other routers report their work (user/peer/peer.c), so this
	 * router scales nothing by peer_routers (1), but still adds the random
	 * phase (steer_policy_add_phase) that keeps routers picking at the same
	 * moment from all choosing the same backend. */
	bool peers_report;
	uint32_t bytes_per_token; /* request bytes per token; 0: the default */
	/* --wire-estimator fluid-step: the kernel also keys a backend busy until
	 * its engine step under way ends (STEER_TBL_STEP); nothing here changes,
	 * the step is not queued work and is not in any snapshot. */
	bool wire_step;
	/* Overload protection (docs/operations.md, "Overload"), with smg's
	 * names; every bound off by default. A backend over a bound its last
	 * poll showed is overloaded (steer_policy_overloaded); the kernel adds
	 * the wait bound and the answers' pushback. */
	bool overload_protection;    /* --worker-overload-protection: KV usage bound 0.9 */
	double overload_token_usage; /* KV usage bound in (0, 1]; 0: none of its own */
	uint32_t overload_waiting;   /* waiting requests bound; 0: none */
	uint64_t overload_wait_ns;   /* ns, expected wait bound (--worker-overload-wait); 0: none */
	uint32_t overload_connections; /* this node's live connections bound; 0: none */
	bool overload_least;	       /* --when-all-overloaded least; false: refuse */
	/* Cache affinity (--affinity): a client's next connect stays on the
	 * backend of its last while that backend's expected wait is at most
	 * the least plus the slack (steer_affinity_judge, the kernel's). */
	uint32_t affinity;	    /* enum steer_affinity, OFF to SOCKOPT; 0: off */
	uint64_t affinity_slack_ns; /* ns (--affinity-slack); 0: stay only on a tie */
	uint64_t affinity_idle_ns;  /* ns (--affinity-timeout): an idle client is forgotten */
};

/* --affinity-slack's and --affinity-timeout's defaults. */
#define STEER_AFFINITY_DEFAULT_SLACK_NS 500000000ULL   /* 500 ms */
#define STEER_AFFINITY_DEFAULT_IDLE_NS 600000000000ULL /* 10 min */

/* --worker-overload-protection's KV usage bound, smg's. */
#define STEER_OVERLOAD_DEFAULT_TOKEN_USAGE 0.9

/* Why a backend is overloaded (steer_bk_info.overload). */
enum steer_overload_reason {
	STEER_OVERLOAD_NONE = 0,
	STEER_OVERLOAD_KV = 1,	     /* KV usage at or over its bound */
	STEER_OVERLOAD_WAITING = 2,  /* waiting requests at or over their bound */
	STEER_OVERLOAD_PUSHBACK = 3, /* answered 429 or 503 (the kernel's, STEER_SLOT_PUSHBACK) */
	STEER_OVERLOAD_REASONS = 4,
};

#define STEER_POLICY_DEFAULTS                                                                \
	{                                                                                    \
		.kv_pressure_weight = STEER_DEFAULT_KV_PRESSURE_WEIGHT,                      \
		.default_throughput = STEER_DEFAULT_THROUGHPUT,                              \
		.mean_prefill_tokens = STEER_DEFAULT_MEAN_PREFILL_TOKENS, .peer_routers = 1, \
		.bytes_per_token = STEER_DEFAULT_BYTES_PER_TOKEN,                            \
		.affinity_slack_ns = STEER_AFFINITY_DEFAULT_SLACK_NS,                        \
		.affinity_idle_ns = STEER_AFFINITY_DEFAULT_IDLE_NS,                          \
	}

/* 0 when the knobs are in range; otherwise -1 and the offending knob's name
 * and range in why (e.g. "least-load-default-throughput must be finite and > 0"). */
int steer_policy_check(const struct steer_policy *p, char *why, size_t whylen);

/* One DP rank of a GetLoads response, as received. */
struct steer_rank_load {
	int32_t dp_rank;
	int32_t num_running_reqs;
	int32_t num_waiting_reqs;
	int32_t num_waiting_uncached_tokens;
	double token_usage;    /* KV usage, 0..1 */
	double gen_throughput; /* tokens/s */
};

/* A backend's load, aggregated across DP ranks as upstream does. */
struct steer_load {
	double queued_uncached_tokens; /* sum over ranks */
	double waiting_reqs;	       /* sum */
	double running_reqs;	       /* sum */
	double throughput;	       /* sum of gen_throughput, tokens/s */
	double kv_usage;	       /* mean of token_usage */
	uint32_t ranks;
};

/* More than any engine generates per rank (tokens/s): a report above is broken. */
#define STEER_MAX_RANK_THROUGHPUT 1e9

/*
 * Validate and aggregate. A response with no ranks, any negative or
 * non-finite number, a token_usage outside [0, 1], a gen_throughput above
 * STEER_MAX_RANK_THROUGHPUT or a sum that is not finite is rejected (-1,
 * reason in why naming the rank and field) and must count as a failed poll:
 * it never reaches the score.
 */
int steer_load_aggregate(const struct steer_rank_load *ranks, size_t n, struct steer_load *out,
			 char *why, size_t whylen);

/* What the policy knows of one candidate backend. */
struct steer_policy_input {
	bool has_snapshot;	/* a fresh (not stale), valid snapshot */
	struct steer_load load; /* valid when has_snapshot */
	/* Sticky: the backend has ever reported nonzero queued uncached tokens.
	 * Until it does, a snapshot with waiting requests but zero uncached
	 * tokens is read as an older engine that lacks the field. */
	bool reports_uncached;
	uint64_t live_conns; /* established connections, from the kernel's counters */
	/* This router's own unserved request tokens when the poll that gave the
	 * snapshot was sent: its busy-until estimate then,
	 * E = max(0, busy_until - t_send) / ns_per_token (steer_dp_busy_left_tokens).
	 * Those requests are in the snapshot's queue, and the kernel counts what
	 * is left of them in real time: the queue loses them
	 * (steer_policy_wire_queue). Only used with a snapshot. */
	uint64_t busy_at_poll;
};

/* The score of one backend, every term kept for explanation. */
struct steer_policy_score {
	enum steer_mode mode;
	double queued_tokens;	 /* tokens in the work term (in-flight excluded) */
	bool queued_estimated;	 /* waiting requests x mean prefill */
	double queued_reported;	 /* the queue before the wire-pending part was taken off */
	double wire_subtracted;	 /* tokens taken off: this router's own work at the poll */
	double throughput;	 /* tokens/s used to convert work to time */
	double kv;		 /* k as used, clamped to [0, 0.999] */
	double work_s;		 /* queued_tokens / throughput */
	double barrier_s;	 /* kv_pressure_weight * k / (1 - k) */
	double phase_s;		 /* anti-herding offset with several routers, see below */
	double base_wait_s;	 /* work_s + barrier_s + phase_s: what the daemon publishes */
	double ns_per_token;	 /* 1e9 / throughput */
	uint64_t base_wait_ns;	 /* published, saturated */
	uint64_t ns_per_token_u; /* published, saturated */
};

/* Mean of the positive finite throughputs of backends with a snapshot, or
 * the default when none has one. */
double steer_policy_nominal_throughput(const struct steer_policy *p,
				       const struct steer_policy_input *in, size_t n);
/* True when at least one backend has a fresh snapshot. */
bool steer_policy_fleet_has_loads(const struct steer_policy_input *in, size_t n);

/*
 * Score every candidate. Modes, exactly:
 *  - snapshot: queued = reported uncached tokens (or waiting x prefill, see
 *    reports_uncached); throughput = live value if finite and > 0, else the
 *    default; k non-finite -> 0, clamped to [0, 0.999];
 *  - no snapshot while peers report: base = live x prefill x peer_routers /
 *    nominal, at the nominal throughput;
 *  - whole fleet dark: base = live x prefill x peer_routers / default at the
 *    default throughput, so the order is fewest live connections, and each
 *    new connection's credit (prefill x peer_routers) counts as one more.
 */
void steer_policy_score_all(const struct steer_policy *p, const struct steer_policy_input *in,
			    size_t n, struct steer_policy_score *out);

/*
 * With several routers (peer_routers > 1) each adds its own random offset of
 * up to one credit's worth of time (credit x ns per token) to every base
 * wait. The routers' tables then differ a little, so that right after a poll
 * their first connections do not all land on the same best worker, which
 * scaling the credit alone cannot prevent: every router starts from the same
 * snapshot. u01 is uniform in [0, 1), from the caller's random source. With
 * one router nothing changes.
 */
void steer_policy_add_phase(const struct steer_policy *p, struct steer_policy_score *s, double u01);

/* Request bytes as tokens, as the kernel counts them: bytes / bytes per token,
 * rounded down. */
uint64_t steer_policy_wire_tokens(const struct steer_policy *p, uint64_t bytes);

/*
 * The combination rule (docs/algorithm.md, "Combining this router's work with a snapshot"): the queue a snapshot
 * reports holds this router's requests that were pending when the poll was
 * sent; the kernel counts the ones still pending in real time. The base takes
 * them off: max(0, queued - pending_at_poll). *subtracted (may be NULL) gets
 * what was taken off.
 */
double steer_policy_wire_queue(double queued, uint64_t pending_at_poll, double *subtracted);

/* Is any overload bound set (STEER_TBL_OVERLOAD)? */
bool steer_policy_overload_on(const struct steer_policy *p);
/* The KV usage bound in effect; 0: none. */
double steer_policy_kv_bound(const struct steer_policy *p);
/* Is the backend over a bound its snapshot shows (judged once per poll, as
 * smg does)? Without a fresh snapshot: no. */
enum steer_overload_reason steer_policy_overloaded(const struct steer_policy *p,
						   const struct steer_policy_input *in);
/* "kv", "waiting", "pushback"; "" for none. */
const char *steer_overload_reason_name(enum steer_overload_reason r);

/* "off", "cgroup", "netns", "sockopt", "source"; "" for another value. */
const char *steer_affinity_name(uint32_t affinity);
/* enum steer_aff_verdict's label: "new", "stay", "left_slack", "left_gone",
 * "left_overload"; "" for another value. */
const char *steer_aff_verdict_name(uint32_t verdict);

/* Tokens the kernel credits per new connection: mean prefill x peer routers. */
uint32_t steer_policy_credit(const struct steer_policy *p);

/* The whole score in seconds for a given in-flight amount (for explanation;
 * the kernel does the same in integers). */
double steer_policy_total_s(const struct steer_policy_score *s, double inflight_tokens);

/* Saturating conversion of a non-negative finite double to u64 (NaN -> 0). */
uint64_t steer_policy_u64_sat(double x);

#endif /* STEER_POLICY_H */
