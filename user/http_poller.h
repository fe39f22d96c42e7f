/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * http_poller.h - HTTP GETs and TCP connect probes for many backends at once,
 * with libcurl's multi interface, driven by the caller's thread.
 *
 * The counterpart of poller.h for engines that report their load over HTTP
 * (/v1/loads, Prometheus /metrics), and for backends that report none, whose
 * liveness is a TCP connect to the traffic port. Like the gRPC poller nothing
 * here sleeps on its own: the caller starts transfers, then waits in
 * steer_http_wait() and collects finished ones with steer_http_next().
 */
#ifndef STEER_HTTP_POLLER_H
#define STEER_HTTP_POLLER_H

#include <stddef.h>
#include <stdint.h>

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

/* libcurl's global state, once for the process (every user of libcurl calls
 * this first). 0, or -EIO. */
int steer_curl_global_init(void);
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

#endif /* STEER_HTTP_POLLER_H */
