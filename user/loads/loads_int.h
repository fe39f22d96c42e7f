/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * loads_int.h - what the parts of user/loads share; private to the folder
 * (and to the tests of its parts). The interface is loads.h.
 *
 *   loads.c        which source each backend has, probing, one poll at a time
 *   poll_grpc.c    GetLoads over gRPC (the gRPC core C API), many backends
 *                  concurrently from one completion queue, driven by the
 *                  caller's thread: nothing there sleeps; progress, reconnects
 *                  included, happens in steer_poller_next()
 *   poll_http.c    HTTP GETs and TCP connect probes with libcurl's multi
 *                  interface, driven by the caller's thread likewise
 *   decode_*.c     the answers: gRPC GetLoadsResponse, /v1/loads, /metrics
 *   names.c        the names of engines, sources and poll outcomes
 */
#ifndef STEER_LOADS_INT_H
#define STEER_LOADS_INT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "loads/loads.h"

/* ---- The decoders ------------------------------------------------------------ */

/* More DP ranks (or label sets of one metric) than any engine runs: a
 * report claiming more is broken. */
#define STEER_DECODE_MAX_RANKS 1024
/* A load report is a few hundred bytes (gRPC, JSON) or a few hundred lines
 * (/metrics): anything above this is not one. */
#define STEER_DECODE_MAX_BYTES (4u << 20)

static inline void steer_decode_clear(char *detail, size_t detail_len)
{
	if (detail && detail_len)
		detail[0] = 0;
}

/* Writes the reason (may be truncated) and returns STEER_POLL_INVALID. */
static inline enum steer_poll_kind steer_decode_invalid(char *detail, size_t detail_len,
							const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline enum steer_poll_kind steer_decode_invalid(char *detail, size_t detail_len,
							const char *fmt, ...)
{
	va_list ap;

	if (detail && detail_len) {
		va_start(ap, fmt);
		vsnprintf(detail, detail_len, fmt, ap);
		va_end(ap);
	}
	return STEER_POLL_INVALID;
}

/* ---- poll_grpc.c ------------------------------------------------------------ */

struct steer_poller;

struct steer_poll_result {
	void *tag;		   /* as given to steer_poller_add */
	enum steer_poll_kind kind; /* OK, UNIMPLEMENTED, UNAVAILABLE, DEADLINE, INVALID, ERROR */
	int grpc_status;	   /* grpc_status_code as received (0 for INVALID) */
	char detail[200];	   /* status message or validation failure; "" for OK */
	struct steer_load load;	   /* OK only: validated and aggregated across DP ranks */
	uint64_t started_ns;	   /* CLOCK_MONOTONIC when the call was started */
	uint64_t duration_ns;	   /* until the result */
};

/* grpc_init() is called by the first poller, grpc_shutdown() by the last free. */
struct steer_poller *steer_poller_new(void);
void steer_poller_free(struct steer_poller *p); /* cancels calls in flight and drains */

/*
 * Register a backend's GetLoads endpoint ("127.0.0.1:30000", "[::1]:30000").
 * Returns a handle >= 0 or a negative errno. The channel is created with
 * short reconnect backoff so a restarted backend is reachable again within
 * an interval; max_backoff_ms bounds it (use the load check interval).
 */
int steer_poller_add(struct steer_poller *p, const char *target, void *tag,
		     uint32_t max_backoff_ms);
/* Unregister; a call in flight is cancelled and its result is never reported. */
void steer_poller_remove(struct steer_poller *p, int handle);

/* Start a GetLoads call with the given deadline. -EBUSY if one is in flight.
 * steer_poller_start asks SGLang's service; _engine any enum steer_engine but
 * AUTO (loads.h), whose method it calls and whose decoder it uses. */
int steer_poller_start(struct steer_poller *p, int handle, uint64_t timeout_ns);
int steer_poller_start_engine(struct steer_poller *p, int handle, uint64_t timeout_ns, int engine);
/* Send "authorization: Bearer <token>" with every call (NULL: nothing). The
 * handle keeps its own copy, wiped when replaced or removed. */
int steer_poller_set_auth(struct steer_poller *p, int handle, const char *token);
/* True while a call for handle is in flight. */
int steer_poller_busy(const struct steer_poller *p, int handle);

/*
 * Wait for the next finished call until deadline_ns (CLOCK_MONOTONIC).
 * Returns 1 with *out filled, 0 when the deadline passed first.
 */
int steer_poller_next(struct steer_poller *p, uint64_t deadline_ns, struct steer_poll_result *out);

/* Decode and validate a serialized SGLang GetLoadsResponse (exposed for tests).
 * Returns STEER_POLL_OK with *load filled, or STEER_POLL_INVALID with detail. */
enum steer_poll_kind steer_poller_decode(const uint8_t *buf, size_t len, struct steer_load *load,
					 char *detail, size_t detail_len);

/* ---- poll_http.c ------------------------------------------------------------ */

struct steer_http;

/* Largest body accepted: a bigger one fails the transfer (a /metrics page of
 * a busy vLLM is tens of KiB). */
#define STEER_HTTP_BODY_MAX (4u << 20)

enum steer_http_outcome {
	STEER_HTTP_DONE = 0,	  /* a complete response; see status */
	STEER_HTTP_CONNECTED = 1, /* connect probe: the TCP handshake completed */
	STEER_HTTP_REFUSED = 2,	  /* could not connect (refused, unreachable) */
	STEER_HTTP_TIMEOUT = 3,	  /* the deadline passed */
	STEER_HTTP_NOT_HTTP = 4,  /* the peer does not speak HTTP/1.1 (or the body broke off) */
	STEER_HTTP_TOO_LARGE = 5, /* body over STEER_HTTP_BODY_MAX */
	STEER_HTTP_FAILED = 6,	  /* any other libcurl error; see detail */
};

struct steer_http_result {
	void *tag; /* as given to steer_http_add */
	enum steer_http_outcome outcome;
	long status; /* HTTP status for DONE, else 0 */
	char *body;  /* DONE: NUL-terminated, owned by the poller until the next call */
	size_t body_len;
	char detail[160];    /* libcurl's error text, "" for DONE and CONNECTED */
	uint64_t started_ns; /* CLOCK_MONOTONIC */
	uint64_t duration_ns;
};

struct steer_http *steer_http_new(void);
void steer_http_free(struct steer_http *h);

/* Register a backend: "ADDR:PORT" as the daemon formats it ("[::1]:80" for
 * IPv6). Returns a handle >= 0 or a negative errno. */
int steer_http_add(struct steer_http *h, const char *addr, void *tag);
void steer_http_remove(struct steer_http *h, int handle); /* cancels a transfer */
/* "Authorization: Bearer <token>" on every request (NULL: none); copied, and
 * wiped when replaced or removed. */
int steer_http_set_auth(struct steer_http *h, int handle, const char *token);

/* GET path ("/metrics", "/v1/loads?include=core") with a deadline. */
int steer_http_start_get(struct steer_http *h, int handle, const char *path, uint64_t timeout_ns);
/* Open (and close) a fresh TCP connection: the liveness probe. */
int steer_http_start_connect(struct steer_http *h, int handle, uint64_t timeout_ns);
/* Transfers started and not yet collected. */
size_t steer_http_outstanding(const struct steer_http *h);

/* Wait for socket activity for at most timeout_ms, and make progress. */
void steer_http_wait(struct steer_http *h, int timeout_ms);
/* Collect one finished transfer: 1 with *out filled, 0 when none is ready. */
int steer_http_next(struct steer_http *h, struct steer_http_result *out);

#endif /* STEER_LOADS_INT_H */
