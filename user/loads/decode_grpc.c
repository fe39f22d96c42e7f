// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decode_grpc.c - GetLoadsResponse of the three gRPC engines smg reads
 * (loads.h).
 *
 * The messages are unpacked by protobuf-c code generated from the vendored
 * protos (proto/), which carry upstream's field numbers:
 *
 *   field                        SGLang   vLLM   TokenSpeed
 *   token_usage                     7       7        8
 *   gen_throughput                  8       8        9
 *   num_waiting_uncached_tokens    17       -       14
 *
 * vLLM has no queued-token field (it stays 0, so the policy estimates from
 * the waiting requests). Everything else upstream sends arrives as unknown
 * fields and is skipped. A field of the wrong wire type makes protobuf-c
 * refuse the whole message, which is a failed poll like any other garbage.
 */
#include "loads_int.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sglang_scheduler.pb-c.h"
#include "tokenspeed_scheduler.pb-c.h"
#include "vllm_engine.pb-c.h"

const char *steer_grpc_method(enum steer_engine e)
{
	switch (e) {
	case STEER_ENGINE_SGLANG:
		return "/sglang.grpc.scheduler.SglangScheduler/GetLoads";
	case STEER_ENGINE_VLLM:
		return "/vllm.grpc.engine.VllmEngine/GetLoads";
	case STEER_ENGINE_TOKENSPEED:
		return "/tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads";
	default:
		return NULL;
	}
}

/*
 * protobuf-c's memory while it unpacks one answer, bounded. A 4 MB answer of
 * ~2 M empty repeated entries or unknown fields made it allocate 150-300 MB
 * before the rank count could be checked; with the budget the unpack fails
 * at the first allocation past it, whatever the answer's shape. A real
 * answer of STEER_DECODE_MAX_RANKS ranks needs about 0.3 MB.
 */
#define UNPACK_BUDGET (2u << 20)

struct unpack_budget {
	ProtobufCAllocator a;
	size_t used;
	bool exceeded;
};

static void *budget_alloc(void *data, size_t size)
{
	struct unpack_budget *b = data;
	void *p;

	if (size > UNPACK_BUDGET - b->used) {
		b->exceeded = true;
		return NULL;
	}
	p = malloc(size);
	if (p)
		b->used += malloc_usable_size(p);
	return p;
}

static void budget_free(void *data, void *p)
{
	struct unpack_budget *b = data;

	if (!p)
		return;
	b->used -= malloc_usable_size(p);
	free(p);
}

static void budget_init(struct unpack_budget *b)
{
	*b = (struct unpack_budget){ .a = { .alloc = budget_alloc, .free = budget_free } };
	b->a.allocator_data = b;
}

/* The ranks of one response, before validation. */
struct rank_set {
	struct steer_rank_load *ranks;
	size_t n;
};

/* 0 with room for n ranks, or INVALID with detail. */
static enum steer_poll_kind rank_set_alloc(struct rank_set *set, size_t n, const char *engine,
					   char *detail, size_t detail_len)
{
	set->ranks = NULL;
	set->n = n;
	if (n == 0)
		return steer_decode_invalid(detail, detail_len,
					    "%s GetLoadsResponse has no load entries", engine);
	if (n > STEER_DECODE_MAX_RANKS)
		return steer_decode_invalid(detail, detail_len,
					    "%s GetLoadsResponse has %zu load entries, more than "
					    "any engine has (at most %d)",
					    engine, n, STEER_DECODE_MAX_RANKS);
	set->ranks = calloc(n, sizeof(*set->ranks));
	if (!set->ranks)
		return steer_decode_invalid(detail, detail_len, "out of memory for %zu ranks", n);
	return STEER_POLL_OK;
}

/* Validate and aggregate as every source does (policy.c), then release. */
static enum steer_poll_kind rank_set_finish(struct rank_set *set, struct steer_load *load,
					    char *detail, size_t detail_len)
{
	enum steer_poll_kind kind = STEER_POLL_OK;

	if (steer_load_aggregate(set->ranks, set->n, load, detail, detail_len) != 0)
		kind = STEER_POLL_INVALID;
	free(set->ranks);
	set->ranks = NULL;
	return kind;
}

static enum steer_poll_kind undecodable(const char *engine, size_t len,
					const struct unpack_budget *b, char *detail,
					size_t detail_len)
{
	if (b->exceeded)
		return steer_decode_invalid(detail, detail_len,
					    "%s GetLoadsResponse of %zu bytes needs more than %u "
					    "KiB to decode: refused",
					    engine, len, UNPACK_BUDGET >> 10);
	return steer_decode_invalid(detail, detail_len,
				    "undecodable %s GetLoadsResponse (%zu bytes)", engine, len);
}

static enum steer_poll_kind decode_sglang(const uint8_t *buf, size_t len, struct steer_load *load,
					  char *detail, size_t detail_len)
{
	Sglang__Grpc__Scheduler__GetLoadsResponse *r;
	struct unpack_budget b;
	enum steer_poll_kind kind;
	struct rank_set set;
	size_t i;

	budget_init(&b);
	r = sglang__grpc__scheduler__get_loads_response__unpack(&b.a, len, buf);
	if (!r)
		return undecodable("SGLang", len, &b, detail, detail_len);
	kind = rank_set_alloc(&set, r->n_loads, "SGLang", detail, detail_len);
	if (kind == STEER_POLL_OK) {
		for (i = 0; i < set.n; i++) {
			const Sglang__Grpc__Scheduler__SchedulerLoad *l = r->loads[i];

			set.ranks[i] = (struct steer_rank_load){
				.dp_rank = l->dp_rank,
				.num_running_reqs = l->num_running_reqs,
				.num_waiting_reqs = l->num_waiting_reqs,
				.num_waiting_uncached_tokens = l->num_waiting_uncached_tokens,
				.token_usage = l->token_usage,
				.gen_throughput = l->gen_throughput,
			};
		}
		kind = rank_set_finish(&set, load, detail, detail_len);
	}
	sglang__grpc__scheduler__get_loads_response__free_unpacked(r, &b.a);
	return kind;
}

static enum steer_poll_kind decode_vllm(const uint8_t *buf, size_t len, struct steer_load *load,
					char *detail, size_t detail_len)
{
	Vllm__Grpc__Engine__GetLoadsResponse *r;
	struct unpack_budget b;
	enum steer_poll_kind kind;
	struct rank_set set;
	size_t i;

	budget_init(&b);
	r = vllm__grpc__engine__get_loads_response__unpack(&b.a, len, buf);
	if (!r)
		return undecodable("vLLM", len, &b, detail, detail_len);
	kind = rank_set_alloc(&set, r->n_loads, "vLLM", detail, detail_len);
	if (kind == STEER_POLL_OK) {
		for (i = 0; i < set.n; i++) {
			const Vllm__Grpc__Engine__SchedulerLoad *l = r->loads[i];

			/* No queued-token field: 0, and the policy estimates. */
			set.ranks[i] = (struct steer_rank_load){
				.dp_rank = l->dp_rank,
				.num_running_reqs = l->num_running_reqs,
				.num_waiting_reqs = l->num_waiting_reqs,
				.token_usage = l->token_usage,
				.gen_throughput = l->gen_throughput,
			};
		}
		kind = rank_set_finish(&set, load, detail, detail_len);
	}
	vllm__grpc__engine__get_loads_response__free_unpacked(r, &b.a);
	return kind;
}

static enum steer_poll_kind decode_tokenspeed(const uint8_t *buf, size_t len,
					      struct steer_load *load, char *detail,
					      size_t detail_len)
{
	Tokenspeed__Grpc__Scheduler__GetLoadsResponse *r;
	struct unpack_budget b;
	enum steer_poll_kind kind;
	struct rank_set set;
	size_t i;

	budget_init(&b);
	r = tokenspeed__grpc__scheduler__get_loads_response__unpack(&b.a, len, buf);
	if (!r)
		return undecodable("TokenSpeed", len, &b, detail, detail_len);
	kind = rank_set_alloc(&set, r->n_loads, "TokenSpeed", detail, detail_len);
	if (kind == STEER_POLL_OK) {
		for (i = 0; i < set.n; i++) {
			const Tokenspeed__Grpc__Scheduler__SchedulerLoad *l = r->loads[i];

			set.ranks[i] = (struct steer_rank_load){
				.dp_rank = l->dp_rank,
				.num_running_reqs = l->num_running_reqs,
				.num_waiting_reqs = l->num_waiting_reqs,
				.num_waiting_uncached_tokens = l->num_waiting_uncached_tokens,
				.token_usage = l->token_usage,
				.gen_throughput = l->gen_throughput,
			};
		}
		kind = rank_set_finish(&set, load, detail, detail_len);
	}
	tokenspeed__grpc__scheduler__get_loads_response__free_unpacked(r, &b.a);
	return kind;
}

enum steer_poll_kind steer_decode_grpc(enum steer_engine e, const uint8_t *buf, size_t len,
				       struct steer_load *load, char *detail, size_t detail_len)
{
	steer_decode_clear(detail, detail_len);
	if (len > STEER_DECODE_MAX_BYTES)
		return steer_decode_invalid(detail, detail_len,
					    "GetLoadsResponse of %zu bytes, more than %u", len,
					    STEER_DECODE_MAX_BYTES);
	if (!buf) {
		static const uint8_t empty[1];

		if (len)
			return steer_decode_invalid(detail, detail_len, "no response bytes");
		buf = empty; /* an empty message is valid protobuf (and has no loads) */
	}
	switch (e) {
	case STEER_ENGINE_SGLANG:
		return decode_sglang(buf, len, load, detail, detail_len);
	case STEER_ENGINE_VLLM:
		return decode_vllm(buf, len, load, detail, detail_len);
	case STEER_ENGINE_TOKENSPEED:
		return decode_tokenspeed(buf, len, load, detail, detail_len);
	default:
		return steer_decode_invalid(detail, detail_len, "no GetLoads format for engine %s",
					    steer_engine_name(e));
	}
}
