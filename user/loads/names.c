// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * names.c - the names of engines, load sources and poll outcomes, as the
 * configuration, the logs, /metrics and smg-steerctl spell them (loads.h).
 */
#include "loads_int.h"

#include <string.h>

static const char *const engine_names[] = {
	[STEER_ENGINE_AUTO] = "auto",
	[STEER_ENGINE_SGLANG] = "sglang",
	[STEER_ENGINE_VLLM] = "vllm",
	[STEER_ENGINE_TOKENSPEED] = "tokenspeed",
};

#define N_ENGINES (sizeof(engine_names) / sizeof(engine_names[0]))

static const char *const source_names[STEER_SOURCES] = {
	[STEER_SOURCE_NONE] = "none",
	[STEER_SOURCE_GRPC_SGLANG] = "grpc-sglang",
	[STEER_SOURCE_GRPC_VLLM] = "grpc-vllm",
	[STEER_SOURCE_GRPC_TOKENSPEED] = "grpc-tokenspeed",
	[STEER_SOURCE_HTTP_LOADS] = "http-loads",
	[STEER_SOURCE_HTTP_METRICS_VLLM] = "http-metrics-vllm",
	[STEER_SOURCE_HTTP_METRICS_SGLANG] = "http-metrics-sglang",
	[STEER_SOURCE_TCP] = "tcp",
};

int steer_engine_parse(const char *s, enum steer_engine *out)
{
	size_t i;

	if (!s)
		return -1;
	for (i = 0; i < N_ENGINES; i++)
		if (strcmp(s, engine_names[i]) == 0) {
			*out = (enum steer_engine)i;
			return 0;
		}
	return -1;
}

const char *steer_engine_name(enum steer_engine e)
{
	return (unsigned)e < N_ENGINES ? engine_names[e] : "unknown";
}

const char *steer_source_name(enum steer_source s)
{
	return (unsigned)s < STEER_SOURCES && source_names[s] ? source_names[s] : "unknown";
}

const char *steer_poll_kind_name(enum steer_poll_kind k)
{
	switch (k) {
	case STEER_POLL_NONE:
		return "none";
	case STEER_POLL_OK:
		return "ok";
	case STEER_POLL_UNIMPLEMENTED:
		return "unimplemented";
	case STEER_POLL_UNAVAILABLE:
		return "unavailable";
	case STEER_POLL_DEADLINE:
		return "deadline_exceeded";
	case STEER_POLL_INVALID:
		return "invalid";
	case STEER_POLL_ERROR:
		return "error";
	default:
		return "unknown";
	}
}
