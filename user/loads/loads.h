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
 * calls (poll_grpc.c) and HTTP transfers (poll_http.c) all progress on the
 * caller's thread, inside steer_loads_next().
 *
 * The decoders (decode_grpc.c, decode_json.c, decode_prom.c) are pure
 * functions, no I/O: the pollers hand them the bytes they received, the tests
 * and the fuzz targets hand them anything at all. Each returns STEER_POLL_OK
 * with *load filled, or STEER_POLL_INVALID with a one-line reason in detail;
 * an answer that is garbage, partial, non-finite or out of range is INVALID (a
 * failed poll), never a zero load. Missing fields stay missing (0 in struct
 * steer_load), so the policy's degradation applies: no queued tokens ->
 * waiting requests x mean prefill, no throughput -> the default. Aggregation
 * over DP ranks (and label sets) is upstream's: counts and tokens and
 * throughput summed, KV usage averaged.
 */
#ifndef STEER_LOADS_H
#define STEER_LOADS_H

#include <stddef.h>
#include <stdint.h>

#include "policy/policy.h"
#include "steer_common.h"

/* How a backend's load is read (--backend ...,loads=SCHEME://ADDR:PORT[/path]). */
enum steer_scheme {
	STEER_SCHEME_AUTO = 0, /* no loads=: probe gRPC, then HTTP, on the traffic port */
	STEER_SCHEME_GRPC = 1, /* loads=grpc://A:P, or loads=A:P */
	STEER_SCHEME_HTTP = 2, /* loads=http://A:P[/path] */
};

/* Which engine's wire format or metric names to expect. */
enum steer_engine {
	STEER_ENGINE_AUTO = 0,
	STEER_ENGINE_SGLANG = 1,
	STEER_ENGINE_VLLM = 2,
	STEER_ENGINE_TOKENSPEED = 3,
};

/* "auto", "sglang", "vllm", "tokenspeed" -> 0 and *out; -1 otherwise. */
int steer_engine_parse(const char *s, enum steer_engine *out);
const char *steer_engine_name(enum steer_engine e);
/* Short stable name of a source: "grpc-sglang", "http-loads", "tcp", "none", ... */
const char *steer_source_name(enum steer_source s);

/* gRPC method path of an engine's GetLoads (SGLANG, VLLM or TOKENSPEED). */
const char *steer_grpc_method(enum steer_engine e);

/* A serialized GetLoadsResponse of engine e (SGLANG, VLLM or TOKENSPEED). */
enum steer_poll_kind steer_decode_grpc(enum steer_engine e, const uint8_t *buf, size_t len,
				       struct steer_load *load, char *detail, size_t detail_len);

/* The body of GET /v1/loads?include=core: {"dp_rank_count": N, "loads": [{...}]}. */
enum steer_poll_kind steer_decode_loads_json(const char *buf, size_t len, struct steer_load *load,
					     char *detail, size_t detail_len);

/*
 * A Prometheus text exposition (GET /metrics). engine AUTO accepts vLLM's
 * (vllm:) or SGLang's (sglang: or sglang_) names, whichever the text has;
 * *found (may be NULL) tells which: STEER_SOURCE_HTTP_METRICS_VLLM or
 * STEER_SOURCE_HTTP_METRICS_SGLANG. A text with none of the names is INVALID.
 */
enum steer_poll_kind steer_decode_prometheus(const char *buf, size_t len, enum steer_engine engine,
					     struct steer_load *load, enum steer_source *found,
					     char *detail, size_t detail_len);

/* Short stable name of a poll's outcome: "ok", "deadline_exceeded", ... */
const char *steer_poll_kind_name(enum steer_poll_kind k);

/* libcurl's global state, once for the process (every user of libcurl calls
 * this first). 0, or -EIO. */
int steer_curl_global_init(void);

/* ---- Polling ----------------------------------------------------------------- */

#define STEER_LOADS_PATH_MAX 128 /* bytes of an HTTP load path, with its NUL */

struct steer_loads;

struct steer_loads_spec {
	int scheme;		  /* enum steer_scheme: AUTO, GRPC, HTTP */
	int engine;		  /* enum steer_engine */
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
