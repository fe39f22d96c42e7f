/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * loads.h - every backend's load, from whichever source it has: GetLoads of
 * SGLang, TokenSpeed or vLLM over gRPC, HTTP /v1/loads, Prometheus /metrics,
 * or, for a backend that reports none, a TCP connect that proves it is alive.
 *
 * One poll per steer_loads_start(), one result per poll from
 * steer_loads_next(). A backend configured with engine=auto (or no loads=)
 * is probed: its candidate sources are tried in order within the poll and the
 * first that answers with a valid load is kept for the next polls; it is
 * probed again only after reprobe_after consecutive failed polls. The gRPC
 * calls (poller.h) and HTTP transfers (http_poller.h) all progress on the
 * caller's thread, inside steer_loads_next().
 */
#ifndef STEER_LOADS_H
#define STEER_LOADS_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "steer_common.h"

struct steer_loads;

struct steer_loads_spec {
	int scheme;		  /* enum steer_scheme (config.h): AUTO, GRPC, HTTP */
	int engine;		  /* enum steer_engine (load_decode.h) */
	const char *loads_addr;	  /* "ADDR:PORT" of the load endpoint */
	const char *path;	  /* HTTP: "" to try /v1/loads then /metrics, or a path */
	const char *traffic_addr; /* "ADDR:PORT": the TCP liveness probe's target (AUTO) */
	const char *token;	  /* bearer token or NULL; copied */
	uint32_t reprobe_after;	  /* consecutive failed polls before probing again (>= 1) */
	uint32_t max_backoff_ms;  /* gRPC reconnect backoff bound (the poll interval) */
};

struct steer_loads_result {
	void *tag;
	/* OK: load is valid. UNIMPLEMENTED: the backend is alive but reports no
	 * load (source TCP, or a GetLoads that is not implemented). Any other:
	 * a failed poll. */
	enum steer_poll_kind kind;
	enum steer_source source; /* the source of this answer; NONE when nothing answered */
	int status;		  /* gRPC status, or HTTP status, as received; 0 when none */
	char detail[200];	  /* why it failed, "" for OK */
	struct steer_load load;	  /* OK only */
	uint64_t started_ns;	  /* CLOCK_MONOTONIC at steer_loads_start */
	uint64_t duration_ns;	  /* of the whole poll, probing included */
};

struct steer_loads *steer_loads_new(void);
void steer_loads_free(struct steer_loads *l);

/* Returns a handle >= 0 or a negative errno. */
int steer_loads_add(struct steer_loads *l, const struct steer_loads_spec *spec, void *tag);
void steer_loads_remove(struct steer_loads *l, int handle); /* a poll in flight is dropped */
/* Replace the bearer token (NULL: none); takes effect at the next poll. */
int steer_loads_set_auth(struct steer_loads *l, int handle, const char *token);

/* Start one poll; each call within it gets timeout_ns. -EBUSY while one runs. */
int steer_loads_start(struct steer_loads *l, int handle, uint64_t timeout_ns);
/* The source the handle is locked to (NONE while probing). */
enum steer_source steer_loads_source(const struct steer_loads *l, int handle);

/*
 * Make progress until a poll finishes (1, *out filled) or until deadline_ns
 * (CLOCK_MONOTONIC) passes (0). With nothing in flight it just waits, which
 * is where gRPC reconnects progress.
 */
int steer_loads_next(struct steer_loads *l, uint64_t deadline_ns, struct steer_loads_result *out);

#endif /* STEER_LOADS_H */
