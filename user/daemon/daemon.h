/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * daemon.h - smg-steerd's own state, shared by its parts (private to the daemon):
 *
 *   smg-steerd.c  start, reload, DNS changes, shutdown, the main loop
 *   polls.c       load polls, health, fast ejection, waiting for results
 *   publish.c     scoring, publishing, draining, metrics
 *   peers.c       sharing the request accounting with other routers (--peer)
 *   probes.c      the step probe (--step-probe)
 *   backends.c    services and backends: building them, and rebuilding on reload
 *   ejects.c      fast ejection's way back: traffic port probes and back-off
 *   signals.c     the stop and reload flags the signals set
 *
 * Each calls only parts listed below it (and reload.c, the reload's parse,
 * which calls none): publishing starts no poll, nothing calls the main loop.
 */
#ifndef STEER_DAEMON_H
#define STEER_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "dataplane/dataplane.h"
#include "discovery/discovery.h"
#include "common/common.h"
#include "metrics/metrics.h"
#include "peer/peer.h"
#include "probe/probe.h"
#include "policy/policy.h"
#include "loads/loads.h"
#include "privs/privs.h"
#include "reload.h"

#define NO_SLOT UINT32_MAX
#define SLICE_NS (100ULL * 1000000ULL) /* longest wait before signals are looked at */
#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
/* Longest wait at start for the first DNS answers: c-ares tries a server twice,
 * 1 s then 2 s. */
#define DNS_FIRST_WAIT_NS (5000ULL * NS_PER_MS)
/* A cycle publishes without the polls still out once no answer has come for
 * this long, and for twice the slowest answer of the cycle: a hung load
 * endpoint must not hold back everyone else's fresh snapshots. */
#define STRAGGLER_QUIET_MIN_NS (50 * NS_PER_MS)

/* ---- signals.c ---- */

/* Set by SIGTERM or SIGINT, and by SIGHUP. */
extern volatile sig_atomic_t stop_requested, reload_requested;
void install_signals(void);

struct service;

/*
 * Fast ejection's state of one backend (ejects.c). The kernel stopped
 * choosing it (a skip); it stays out of the tables until a TCP connect of
 * the daemon's own to its traffic port succeeds (a probe), and no sooner
 * than its back-off after the skip. All times CLOCK_MONOTONIC ns.
 */
struct backend_eject {
	bool confirm;		   /* the poll started at the skip has not answered yet */
	bool logged;		   /* this skip's lines are logged (its first passed the limit) */
	bool passed;		   /* a probe got through; back once the back-off is over */
	int fd;			   /* the probe's socket; -1: none */
	int last_err;		   /* errno of this skip's last logged probe failure; 0: none */
	uint64_t since_ns;	   /* the skip */
	uint64_t wait_ns;	   /* this skip's back-off */
	uint64_t probe_at_ns;	   /* the next probe starts */
	uint64_t started_ns;	   /* the probe's connect started */
	uint64_t connected_ns;	   /* its handshake completed; 0: not yet */
	uint64_t back_ns;	   /* the last way back (a probe got through); 0: never */
	struct steer_log_limit rl; /* the skips' lines */
};

struct backend {
	struct steer_backend_cfg cfg;
	struct service *svc;
	/* While a reload builds the new service list: where this backend was
	 * taken from, so that a failed build can put it back. */
	struct backend **origin;
	int handle; /* steer_loads handle */
	uint32_t slot;

	enum steer_health health;
	uint32_t consec_fail, consec_ok;

	bool has_snap;
	struct steer_load snap;
	uint64_t snap_ns;
	bool reports_uncached; /* sticky: ever reported nonzero uncached tokens */

	bool call_pending;	   /* a GetLoads of this cycle is in flight */
	uint64_t inflight_at_send; /* tokens credited when the call was sent */
	/* This router's requests not yet served, in the busy-until estimate's
	 * tokens (steer_dp_busy_left_tokens): when the call in flight was sent,
	 * and when the call that gave the snapshot in use was. The snapshot's
	 * queue holds those requests; the score takes them off it
	 * (steer_policy_wire_queue). */
	uint64_t busy_at_send;	/* tokens */
	uint64_t busy_at_snap;	/* tokens */
	uint64_t pending_drain; /* to subtract at the next publish */
	uint64_t live_drain;	/* scored from live connections: credits read before them */

	enum steer_poll_kind last_kind, logged_kind;
	enum steer_source source; /* where the last answer came from */
	bool told_no_loads;	  /* the "reports no load" notice was logged */
	uint64_t polls[STEER_POLL_KINDS];

	/* As of the last publish, for metrics and steer_bkinfo. */
	struct steer_policy_score score;
	bool in_table;
	uint32_t live_at_score;
	/* The kernel stopped choosing it after STEER_FAIL_EJECT connects in a row
	 * failed; out of the table until a probe of its traffic port gets
	 * through (ej). */
	bool suspect;
	struct backend_eject ej;
	/* Overload protection: over a bound by the snapshot last scored, and
	 * when the last good poll was sent (a pushback answered before it
	 * ends; CLOCK_MONOTONIC, dated a little early: see polls.c). */
	enum steer_overload_reason overload;
	uint64_t poll_ok_sent_ns;
};

struct service {
	struct steer_addr vip;
	char vip_str[STEER_ADDR_STRLEN];
	struct steer_policy policy;
	struct backend **b;
	size_t n;
	bool fail_open;
	bool fail_open_alarm; /* ... because backends failed, not because none was polled yet */
	uint64_t publishes;
	uint64_t poll_buckets[STEER_POLL_BUCKETS];
	uint64_t poll_count;
	double poll_sum_s;
	/* Overload protection's refusals as last seen (steer_svc_stats), and
	 * whether the service was refusing then: its log lines. */
	uint64_t refused_seen;
	bool refusing;
	struct steer_log_limit refusing_rl;
};

struct daemon {
	struct steer_config cfg;
	struct steer_dp *dp;
	struct steer_xdp *xdp;		 /* XDP ingress (--xdp-dev), or NULL */
	struct steer_xdp_stats *xdp_ctr; /* its counters, for /metrics; NULL without */
	struct steer_loads *loads;
	struct steer_metrics *metrics;
	struct steer_reload *reload;	       /* SIGHUP's parse, on its own thread */
	struct steer_discovery *disc;	       /* --backend-dns names (discovery.c) */
	struct steer_peer *peer;	       /* --peer (peer.c), or NULL */
	struct steer_probe *probe;	       /* --step-probe (probe.c), or NULL */
	struct steer_probe_stats *probe_stats; /* as /metrics last read them */
	uint64_t peer_metrics_ns;	       /* when metrics_tick last refreshed /metrics */
	struct service *svcs;
	size_t n_svcs;
	size_t pending; /* load polls in flight */
	/* This cycle's answers so far: when the last came, the slowest's time. */
	size_t cycle_results;
	uint64_t last_result_ns, slowest_result_ns;
	uint64_t last_publish_ns;
	uint64_t cycle_start_ns;
	double last_cycle_s, last_publish_s;
	uint64_t rng; /* xorshift64 state for the anti-herding phase */
	bool started; /* start() completed: a failed start never detaches adopted state */
	/* Drained backends as read at the start of this publish: one pass over
	 * the map instead of a lookup syscall per backend. */
	struct steer_addr drained[STEER_MAX_DRAINED];
	size_t n_drained;
};

/* ---- backends.c ---- */

/* The service list of cfg, with each service's discovered backends (DNS)
 * added, keeping the state of every backend that is unchanged. */
int services_build_dns(struct daemon *d, const struct steer_config *cfg, struct service **out);
void services_free(struct daemon *d, struct service *svcs, size_t n);
/* The bearer token of a backend's auth= file in cfg, or NULL: borrowed from
 * cfg (a secret: never logged). */
const char *backend_token(const struct steer_config *cfg, const struct steer_backend_cfg *b);
/* A backend with a slot, as the peer and probe threads know it. */
struct slotted_backend {
	const struct service *s;
	const struct backend *b;
	uint32_t svc_id;   /* the service's id in the data plane */
	uint32_t slot_gen; /* steer_slot.gen of b->slot now */
};
struct slotted_backend *slotted_backends(struct daemon *d, size_t *n);

/* ---- polls.c ---- */

void start_polls(struct daemon *d);
/* Fast ejection: keep out of the tables, and poll at once, a backend whose
 * last STEER_FAIL_EJECT steered connects failed in a row; move the probes of
 * those out on. Every wait slice runs it, and the main loop before each
 * publish. */
void check_fast_ejections(struct daemon *d);
/* Handle results until deadline_ns (CLOCK_MONOTONIC): while collecting a
 * cycle's (until_all_done), until none is pending or only stragglers are;
 * idling, until a signal, a reload or a DNS change needs the loop. */
void wait_results(struct daemon *d, uint64_t deadline_ns, bool until_all_done);

/* ---- publish.c ---- */

void seed_random(struct daemon *d);
/* Score every service and publish its table; drains and steer_bkinfo follow.
 * It starts no poll: the caller has run check_fast_ejections. */
void publish(struct daemon *d);
/* Until its first real table, a service refuses connects (adopted tables stay). */
void publish_refusing_tables(struct daemon *d);
void update_metrics(struct daemon *d);
/* Between publishes, with --peer: /metrics again once a second, so that the
 * peers' figures (and the pending work they report) stay current. */
void metrics_tick(struct daemon *d, uint64_t now_ns);

/* ---- peers.c ---- */

/* Bind the peer socket (before the privileges drop); nothing without --peer. */
int peers_open(struct daemon *d, char *err, size_t errlen);
/* Start the peer thread with the backends as they are. */
int peers_start(struct daemon *d, char *err, size_t errlen);
/* After each publish: the backends the peer thread maps reports to. */
void peers_update_targets(struct daemon *d);
/* A reload's peer options: applied, or next reset to the running ones. */
void peers_reload(struct daemon *d, struct steer_config *next);
void peers_follow(struct daemon *d);
void peers_metrics(struct daemon *d, struct steer_metrics_snapshot *snap);
void peers_stop(struct daemon *d);

/* ---- probes.c ---- */

/* Start the step probe (--step-probe) with the backends as they are. */
int probes_start(struct daemon *d, char *err, size_t errlen);
/* After each publish: the backends the probe thread keeps a stream on. */
void probes_update_targets(struct daemon *d);
/* A reload's probe options: on, off, or a new path or body. */
void probes_reload(struct daemon *d, const struct steer_config *next);
/* /metrics: the node's probe counters; then each backend's row. */
void probes_metrics(struct daemon *d, struct steer_metrics_snapshot *snap);
void probes_fill_backend(struct daemon *d, const struct steer_addr *addr,
			 struct steer_metrics_backend *mb);
void probes_stop(struct daemon *d);

/* ---- ejects.c ---- */

/* A new backend's state: no probe, never skipped. */
void eject_init(struct backend *b);
/* A removed backend's probe is closed. */
void eject_free(struct backend *b);
/* The kernel stopped choosing b at now_ns: out (b->suspect) until a probe of
 * its traffic port gets through, after a back-off of 1 s, doubled at each
 * skip that comes soon after the last way back, at most --load-check-interval. */
void eject_skip(struct daemon *d, const struct service *s, struct backend *b, uint64_t now_ns);
/* A skipped backend's probe moves on; it is chosen again once it got through
 * and the back-off is over. Never waits. */
void eject_step(struct daemon *d, const struct service *s, struct backend *b, uint64_t now_ns);

#endif /* STEER_DAEMON_H */
