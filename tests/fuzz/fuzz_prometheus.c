// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fuzz_prometheus.c - steer_decode_prometheus on any bytes (a /metrics
 * body). Besides the result's promises: what AUTO finds, the engine named
 * explicitly must decode to the very same load.
 */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct steer_load load, again;
	enum steer_source found, found_again;
	enum steer_engine engine;
	enum steer_poll_kind kind;
	char detail[200];

	memset(&load, 0, sizeof(load));
	kind = steer_decode_prometheus(text, size, STEER_ENGINE_AUTO, &load, &found, detail,
				       sizeof(detail));
	fuzz_check_result(kind, &load, detail, sizeof(detail));
	FUZZ_ASSERT(found == STEER_SOURCE_NONE || found == STEER_SOURCE_HTTP_METRICS_VLLM ||
		    found == STEER_SOURCE_HTTP_METRICS_SGLANG);
	if (kind != STEER_POLL_OK)
		return 0;
	FUZZ_ASSERT(found != STEER_SOURCE_NONE);
	engine = found == STEER_SOURCE_HTTP_METRICS_VLLM ? STEER_ENGINE_VLLM : STEER_ENGINE_SGLANG;
	memset(&again, 0, sizeof(again));
	kind = steer_decode_prometheus(text, size, engine, &again, &found_again, detail,
				       sizeof(detail));
	FUZZ_ASSERT(kind == STEER_POLL_OK && found_again == found);
	FUZZ_ASSERT(load.kv_usage == again.kv_usage && load.throughput == again.throughput &&
		    load.waiting_reqs == again.waiting_reqs &&
		    load.running_reqs == again.running_reqs &&
		    load.queued_uncached_tokens == again.queued_uncached_tokens &&
		    load.ranks == again.ranks);
	return 0;
}
