/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * metrics.h - Prometheus text exposition on /metrics and liveness on /healthz,
 * served by libmicrohttpd from its own thread.
 *
 * The daemon hands over a complete snapshot after each publish
 * (steer_metrics_update copies it under a mutex); a scrape renders the latest
 * snapshot. Rendering is a pure function, tested without a socket.
 */
#ifndef STEER_METRICS_H
#define STEER_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "steer_common.h"

/* Upper bounds (seconds) of smg_steer_poll_duration_seconds; +Inf implied. */
#define STEER_POLL_BUCKETS 12
extern const double steer_poll_bucket_bounds[STEER_POLL_BUCKETS];

struct steer_metrics_backend {
	char vip[64];		/* label vip, e.g. "127.0.0.100:8000" */
	char backend[64];	/* label backend, the traffic address */
	double score_s;		/* expected wait for the next connection, seconds */
	double queued_tokens;	/* as scored: reported, less queued_pending_tokens */
	double throughput;	/* tokens/s as scored */
	double kv_usage;	/* ratio 0..1 as scored */
	double inflight_tokens; /* current in-flight counter */
	int64_t live_connections;
	bool healthy;
	uint64_t steered_total;			/* connections placed by score + fallbacks */
	uint64_t polls_total[STEER_POLL_KINDS]; /* by enum steer_poll_kind; NONE unused */
	int source;				/* enum steer_source: where the load is read */
	/* XDP ingress (snapshot.xdp): the backend's counters, summed over CPUs. */
	uint64_t xdp_packets_total, xdp_bytes_total, xdp_new_flows_total, xdp_ended_total;
	/* Request bytes on this node's steered connections, as read
	 * from the kernel's counters at the last publish. */
	uint64_t pending_bytes;	      /* sent and not answered yet */
	uint64_t pending_tokens;      /* pending_bytes / the service's bytes per token */
	uint64_t sent_bytes_total;    /* sent, cumulative */
	uint64_t requests_total;      /* requests seen, cumulative */
	double queued_pending_tokens; /* taken off the reported queue: own work at the poll */
	double busy_left_s;	      /* remaining busy-until time at the last publish, s */
	double step_s;		      /* the step cadence's last engine step, s (0: none) */
	double step_left_s;	      /* until the step under way ends, as predicted, s */
	uint64_t peer_pending_tokens; /* the other routers' pending tokens (--peer) */
	/* The step probe (--step-probe; snapshot.probes_on). */
	bool probe_streaming;	       /* its stream is delivering now */
	uint64_t probe_requests_total; /* probe requests started */
	uint64_t probe_failures_total; /* that failed */
	uint64_t probe_steps_total;    /* stream packets seen: step ends */
	/* Overload protection: over a bound by its poll, or pushing back. */
	bool overloaded;
	uint64_t pushbacks_total;     /* answers 429 or 503 on steered connections */
	uint64_t server_errors_total; /* answers 5xx but 503 */
};

/* Another router (--peer): reports it sent here, and reports sent to it. */
/* Upper bounds of smg_steer_peer_rtt_seconds's buckets, seconds. */
#define STEER_PEER_RTT_BUCKETS 10
extern const double steer_peer_rtt_bounds[STEER_PEER_RTT_BUCKETS];

#define STEER_PEER_REFUSAL_REASONS 3 /* peer.h's enum steer_peer_refusal */

struct steer_metrics_peer {
	char peer[64]; /* label peer: its address */
	bool up;       /* its last report came within --peer-timeout */
	double age_s;  /* since its last report; -1: never */
	uint64_t received_total, lost_total, sent_total, send_errors_total, forgotten_total;
	uint64_t rtt_buckets[STEER_PEER_RTT_BUCKETS]; /* cumulative counts per bound */
	uint64_t rtt_count;
	double rtt_sum_s;
};

struct steer_metrics_service {
	char vip[64];
	uint64_t table_publishes_total;
	uint64_t fallback_connections_total;
	uint64_t refused_connections_total;
	/* Overload protection's connects: refused with every backend
	 * overloaded, refused over the wait bound, given to the least bad. */
	uint64_t overload_refused_total, wait_refused_total, overload_admitted_total;
	/* Cache affinity's connects of a client with a key, by enum
	 * steer_aff_verdict (steer_svc_stats.affinity). */
	uint64_t affinity_connections_total[STEER_AFF_VERDICTS];
	uint64_t bytes_per_token; /* request bytes per token, as published (a gauge) */
	uint64_t poll_buckets[STEER_POLL_BUCKETS]; /* cumulative counts per bound */
	uint64_t poll_count;
	double poll_sum_s;
	/* XDP ingress (snapshot.xdp): the VIP's counters, summed over CPUs. */
	uint64_t xdp_packets_total, xdp_bytes_total, xdp_new_flows_total, xdp_lru_miss_total;
};

/* DNS discovery (discovery.h): one per name looked up. */
enum steer_dns_result {
	STEER_DNS_OK = 0,     /* answered with at least one address */
	STEER_DNS_EMPTY = 1,  /* answered, without an A or AAAA record */
	STEER_DNS_FAILED = 2, /* no answer: timeout, refused, NXDOMAIN, ... */
	STEER_DNS_RESULTS = 3,
};

struct steer_metrics_dns_name {
	char name[256];				       /* label name, as configured */
	uint64_t resolutions_total[STEER_DNS_RESULTS]; /* by enum steer_dns_result */
	uint32_t addresses;			       /* in the last known set */
	bool stale; /* the last look-up failed or was empty: the last known set is in use */
};

/* One backend-dns entry of a service. */
struct steer_metrics_dns_entry {
	char vip[64];
	char name[256];
	uint16_t port;	   /* traffic port */
	uint32_t backends; /* backends it gives the service now */
};

struct steer_metrics_snapshot {
	struct steer_metrics_service *services;
	size_t n_services;
	struct steer_metrics_backend *backends;
	size_t n_backends;
	uint64_t last_publish_ns;   /* CLOCK_MONOTONIC of the last successful publish; 0 none */
	double last_cycle_s;	    /* last control-plane cycle: polls sent to publish done */
	double last_publish_s;	    /* of which scoring, publishing and draining */
	uint64_t healthy_within_ns; /* /healthz is 200 while now - last_publish_ns <= this */
	struct steer_metrics_dns_name *dns_names;
	size_t n_dns_names;
	struct steer_metrics_dns_entry *dns_entries;
	size_t n_dns_entries;
	bool xdp; /* XDP ingress runs: its families are rendered */
	/* --peer: rendered only when on. */
	bool peers_on;
	struct steer_metrics_peer *peers;
	size_t n_peers;
	uint64_t peer_rejected_total, peer_unknown_backends_total, peer_applied_total,
		peer_apply_errors_total, peer_own_reports_total, peer_push_wakeups_total;
	/* --peer-key: on, and the reports it dropped by reason (enum
	 * steer_peer_refusal: auth, stale, replay). */
	bool peer_keyed;
	uint64_t peer_key_refused_total[STEER_PEER_REFUSAL_REASONS];
	/* --step-probe: its families are rendered only when on. */
	bool probes_on;
	uint64_t probe_applied_total, probe_apply_errors_total;
};

struct steer_metrics;

/*
 * The server under abuse (see guard.h): at most MAX_CONNECTIONS are
 * open at once; past that, the one waiting longest for its request (or idle
 * between requests) is dropped, so a scrape or a probe always gets in. A
 * connection that sends nothing for TIMEOUT_S seconds is closed, and so may
 * be an answer that takes longer than that (a client that does not read).
 */
#define STEER_METRICS_MAX_CONNECTIONS 64
#define STEER_METRICS_MAX_TRACKED 128 /* open + dropped, not yet closed */
#define STEER_METRICS_TIMEOUT_S 5

/*
 * Two steps, so that the daemon can bind (and fail on a busy port) before it
 * touches the data plane, and start the server's thread only after it has
 * dropped its privileges: threads keep the capabilities they were started
 * with.
 * listen: "127.0.0.1:9464" or "[::1]:9464". Returns 0 or a negative errno with err.
 */
int steer_metrics_open(const char *listen, struct steer_metrics **out, char *err, size_t errlen);
int steer_metrics_serve(struct steer_metrics *m, char *err, size_t errlen);
/* Both at once. */
int steer_metrics_start(const char *listen, struct steer_metrics **out, char *err, size_t errlen);
/* Deep-copies snap. Safe against concurrent scrapes. */
int steer_metrics_update(struct steer_metrics *m, const struct steer_metrics_snapshot *snap);
/* Stops serving (or closes the bound socket) and frees m. */
void steer_metrics_stop(struct steer_metrics *m);

/* The --peer families (peers.c), when snap->peers_on. */
void steer_metrics_write_peers(FILE *f, const struct steer_metrics_snapshot *snap);
/* metrics.c's writers, for families rendered in other files: "# HELP" and
 * "# TYPE" lines, and a value (without a newline). */
void steer_metrics_family_header(FILE *f, const char *name, const char *type, const char *help);
void steer_metrics_double(FILE *f, double v);

/* Render the Prometheus text format into a malloc'd, NUL-terminated string. */
char *steer_metrics_render(const struct steer_metrics_snapshot *snap);

/* Label value for a DNS result: "ok", "empty", "failed". */
const char *steer_dns_result_name(enum steer_dns_result r);

/* Label value for a poll kind: "ok", "unimplemented", "unavailable",
 * "deadline_exceeded", "invalid", "error". */
const char *steer_poll_kind_name(enum steer_poll_kind k);

#endif /* STEER_METRICS_H */
