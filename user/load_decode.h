/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * load_decode.h - turn every load report smg reads into one struct steer_load.
 *
 * Pure functions, no I/O: the poller hands them the bytes it received, the
 * tests and the fuzz targets hand them anything at all. Each returns
 * STEER_POLL_OK with *load filled, or STEER_POLL_INVALID with a one-line
 * reason in detail; an answer that is garbage, partial, non-finite or out of
 * range is INVALID (a failed poll), never a zero load. Missing fields stay
 * missing (0 in struct steer_load), so the policy's degradation applies:
 * no queued tokens -> waiting requests x mean prefill, no throughput -> the
 * default. Aggregation over DP ranks (and label sets) is upstream's: counts
 * and tokens and throughput summed, KV usage averaged.
 *
 * One file per source: load_grpc.c (SGLang, vLLM, TokenSpeed GetLoads),
 * load_json.c (HTTP /v1/loads), load_prom.c (Prometheus /metrics).
 */
#ifndef STEER_LOAD_DECODE_H
#define STEER_LOAD_DECODE_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "steer_common.h"

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

#endif /* STEER_LOAD_DECODE_H */
