/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * probe.h - the step probe (--step-probe; design and measurements in
 * docs/algorithm.md, "The step probe").
 *
 * On a continuous-batching engine a new request waits mostly for the end of
 * the step under way. With streaming responses the kernel learns each
 * backend's step cadence from the clients' own packets (fluid-step); with
 * full responses it sees only completions, too sparse to show the phase, and
 * the simulator's p99 wait stays at 3.25x the oracle. A probe is one
 * streaming request of the daemon's own, kept running on every backend: each
 * packet of its stream is a step end, and the kernel program
 * steer_probe_apply feeds it to the slot's step cadence exactly as the
 * ingress program feeds a client's. The simulator puts that at 1.28-1.30x.
 * It costs each engine one running request (0.35 ms a decode step in smg's
 * mock worker's model).
 *
 * One thread ("smg-probe") owns a libcurl multi handle with one streaming
 * POST per backend, restarted when it ends (at its max_tokens) and retried
 * after a back-off when it fails; the main thread hands it the backends after
 * each publish and reads its statistics for /metrics.
 */
#ifndef STEER_PROBE_H
#define STEER_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dataplane/dataplane.h"

/* One backend of one service, as this router's kernel knows it. */
struct steer_probe_target {
	struct steer_addr addr; /* where its clients' traffic goes: the probe's too */
	uint32_t svc_id;	/* the service's id (steer_dp_service_id) */
	uint32_t slot;		/* its slot */
	uint32_t slot_gen;	/* steer_slot.gen when mapped */
	/* Its backend's auth=bearer token, or NULL: sent as "Authorization:
	 * Bearer TOKEN", as the load polls send it. A secret: copied by
	 * steer_probe_set_targets, never logged, wiped before it is freed. */
	const char *token;
};

/* What the thread counts, per backend address it probes (one stream for
 * every service that steers to it). */
struct steer_probe_stat {
	struct steer_addr addr;
	bool streaming;	   /* a probe's stream is delivering now */
	uint64_t starts;   /* probe requests started */
	uint64_t failures; /* that failed (connect, HTTP status other than 2xx, reset) */
	uint64_t packets;  /* stream packets seen (each a step end) */
	uint64_t step_ns;  /* ns: the last gap between two of them, 0: none yet */
	char error[128];   /* why the last transfer failed; cleared when one starts */
};

#define STEER_PROBE_STATS_MAX 256 /* backends reported in the statistics */

struct steer_probe_stats {
	size_t n;
	struct steer_probe_stat p[STEER_PROBE_STATS_MAX];
	uint64_t applied;      /* packets the kernel applied to their slot */
	uint64_t apply_errors; /* runs of steer_probe_apply that failed */
};

struct steer_probe;

/* Start the thread, probing nobody until steer_probe_set_targets. path is
 * the HTTP path, body the JSON the probe POSTs (both copied). 0, or -errno
 * with err set. */
int steer_probe_start(struct steer_dp *dp, const char *path, const char *body,
		      struct steer_probe **out, char *err, size_t errlen);
/* The backends now (copied, tokens too); the thread takes them at once. One
 * stream per address, whose packets go to every slot of it; an address that
 * stays keeps its stream, one that leaves has it closed. The token is the
 * first target's of the address (a different one in a later target is
 * warned about once, never quoted); a new token is sent from the address's
 * next request on: a stream under way goes on with the one it started with. */
int steer_probe_set_targets(struct steer_probe *p, const struct steer_probe_target *t, size_t n);
/* A reload: a new path or body (copied); running probes restart with it. */
int steer_probe_set_request(struct steer_probe *p, const char *path, const char *body);
void steer_probe_stats(struct steer_probe *p, struct steer_probe_stats *out);
/* Stop the thread and free p. NULL is fine. */
void steer_probe_stop(struct steer_probe *p);

#endif /* STEER_PROBE_H */
