// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_decode.c - the gRPC and /v1/loads decoders (user/loads/decode_grpc.c,
 * user/loads/decode_json.c) on bytes made independently of them:
 *  - protobuf wire bytes written by hand here, field by field, from the
 *    upstream field numbers (not from our generated code);
 *  - bytes serialized by Python's protobuf runtime from the vendored protos
 *    (tests/lib/pb_loads.py);
 *  - JSON bodies in the shape of upstream's mock worker (crates/mock_worker).
 * The Prometheus parser has its own program, test_decode_prom.c.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loads/loads.h"
#include "tap.h"

static char top[2048], pydir[2200];

static bool near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want));
}

/* ---- a hand-written protobuf encoder --------------------------------------- */

struct pb {
	uint8_t *b;
	size_t n, cap;
};

static void pb_byte(struct pb *w, uint8_t c)
{
	if (w->n == w->cap) {
		w->cap = w->cap ? 2 * w->cap : 256;
		w->b = realloc(w->b, w->cap);
		if (!w->b)
			abort();
	}
	w->b[w->n++] = c;
}

static void pb_varint(struct pb *w, uint64_t v)
{
	while (v >= 0x80) {
		pb_byte(w, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	pb_byte(w, (uint8_t)v);
}

enum {
	WT_VARINT = 0,
	WT_64BIT = 1,
	WT_LEN = 2
};

static void pb_tag(struct pb *w, uint32_t field, int wire_type)
{
	pb_varint(w, ((uint64_t)field << 3) | (uint32_t)wire_type);
}

/* int32: a varint, negative values sign-extended to 10 bytes. */
static void pb_int32(struct pb *w, uint32_t field, int32_t v)
{
	pb_tag(w, field, WT_VARINT);
	pb_varint(w, (uint64_t)(int64_t)v);
}

/* double: 8 bytes little-endian. */
static void pb_double(struct pb *w, uint32_t field, double v)
{
	uint64_t bits;
	int i;

	memcpy(&bits, &v, sizeof(bits));
	pb_tag(w, field, WT_64BIT);
	for (i = 0; i < 8; i++)
		pb_byte(w, (uint8_t)(bits >> (8 * i)));
}

static void pb_bytes(struct pb *w, uint32_t field, const void *data, size_t n)
{
	pb_tag(w, field, WT_LEN);
	pb_varint(w, n);
	while (n--)
		pb_byte(w, *(const uint8_t *)data), data = (const uint8_t *)data + 1;
}

/* Upstream's SchedulerLoad field numbers (0: the engine has no such field). */
struct fields {
	uint32_t token_usage, gen_throughput, uncached, cache_hit_rate;
};

static const struct fields SGLANG = { 7, 8, 17, 9 };
static const struct fields VLLM = { 7, 8, 0, 9 };
static const struct fields TOKENSPEED = { 8, 9, 14, 10 };

struct rank {
	int32_t dp_rank, running, waiting, uncached;
	double usage, tput, hit;
};

/* One SchedulerLoad; proto3 leaves zeros out, and so does this. */
static void pb_rank(struct pb *w, const struct fields *f, const struct rank *r)
{
	struct pb m = { 0 };

	if (r->dp_rank)
		pb_int32(&m, 1, r->dp_rank);
	if (r->running)
		pb_int32(&m, 2, r->running);
	if (r->waiting)
		pb_int32(&m, 3, r->waiting);
	pb_int32(&m, 4, r->running + r->waiting); /* num_total_reqs, not read */
	if (r->usage != 0)
		pb_double(&m, f->token_usage, r->usage);
	if (r->tput != 0)
		pb_double(&m, f->gen_throughput, r->tput);
	if (r->hit != 0)
		pb_double(&m, f->cache_hit_rate, r->hit);
	if (r->uncached && f->uncached)
		pb_int32(&m, f->uncached, r->uncached);
	pb_bytes(w, 4, m.b, m.n); /* GetLoadsResponse.loads */
	free(m.b);
}

/* A GetLoadsResponse: timestamp, version, dp_rank_count, the ranks. */
static struct pb pb_response(const struct fields *f, const struct rank *r, size_t n)
{
	struct pb w = { 0 };
	size_t i;

	pb_bytes(&w, 1, "2025-01-01T00:00:00Z", 20);
	pb_bytes(&w, 2, "0.5.4", 5);
	pb_int32(&w, 3, (int32_t)n);
	for (i = 0; i < n; i++)
		pb_rank(&w, f, &r[i]);
	return w;
}

static enum steer_poll_kind decode_pb(enum steer_engine e, const struct pb *w, struct steer_load *l,
				      char *why, size_t whylen)
{
	memset(l, 0, sizeof(*l));
	return steer_decode_grpc(e, w->b, w->n, l, why, whylen);
}

/* ---- gRPC ------------------------------------------------------------------- */

static const struct rank two_ranks[2] = {
	{ .dp_rank = 0, .running = 8, .waiting = 3, .uncached = 4000, .usage = 0.4, .tput = 1800 },
	{ .dp_rank = 1, .running = 2, .waiting = 1, .uncached = 1000, .usage = 0.2, .tput = 1200 },
};

static void test_grpc_sglang_field_17(void)
{
	struct pb w = pb_response(&SGLANG, two_ranks, 2);
	struct steer_load l;
	char why[200] = "x";

	CHECK(decode_pb(STEER_ENGINE_SGLANG, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	free(w.b);
	CHECK(why[0] == 0, "detail on OK: %s", why);
	CHECK(l.ranks == 2 && l.queued_uncached_tokens == 5000, "ranks %u uncached %g", l.ranks,
	      l.queued_uncached_tokens);
	CHECK(l.throughput == 3000 && near(l.kv_usage, 0.3), "tp %g kv %g", l.throughput,
	      l.kv_usage);
	CHECK(l.waiting_reqs == 4 && l.running_reqs == 10, "waiting %g running %g", l.waiting_reqs,
	      l.running_reqs);
}

static void test_grpc_vllm_has_no_queued_tokens(void)
{
	struct rank r[2] = { two_ranks[0], two_ranks[1] };
	struct pb w;
	struct steer_load l;
	char why[200];

	r[0].tput = r[1].tput = 0; /* vLLM: usually 0 */
	w = pb_response(&VLLM, r, 2);
	pb_int32(&w, 17, 12345); /* unknown to vLLM's response: skipped */
	CHECK(decode_pb(STEER_ENGINE_VLLM, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	free(w.b);
	CHECK(l.queued_uncached_tokens == 0, "uncached %g", l.queued_uncached_tokens);
	CHECK(l.throughput == 0 && near(l.kv_usage, 0.3), "tp %g kv %g", l.throughput, l.kv_usage);
	CHECK(l.waiting_reqs == 4 && l.running_reqs == 10 && l.ranks == 2,
	      "waiting %g running %g ranks %u", l.waiting_reqs, l.running_reqs, l.ranks);
}

static void test_grpc_tokenspeed_field_numbers(void)
{
	struct pb w = pb_response(&TOKENSPEED, two_ranks, 2);
	struct steer_load l;
	char why[200];

	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(l.queued_uncached_tokens == 5000 && l.throughput == 3000 && near(l.kv_usage, 0.3),
	      "uncached %g tp %g kv %g", l.queued_uncached_tokens, l.throughput, l.kv_usage);
	/* TokenSpeed's 8 (token_usage) is SGLang's gen_throughput, its 9 SGLang's
	 * cache_hit_rate, its 14 unknown to SGLang: read as SGLang, the same
	 * bytes mean something else. */
	CHECK(decode_pb(STEER_ENGINE_SGLANG, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	free(w.b);
	CHECK(l.queued_uncached_tokens == 0 && l.kv_usage == 0 && near(l.throughput, 0.6),
	      "as SGLang: uncached %g kv %g tp %g", l.queued_uncached_tokens, l.kv_usage,
	      l.throughput);
}

static void test_grpc_sglang_bytes_as_tokenspeed(void)
{
	/* token_usage 0 (left out): SGLang's 8 and 9 land on TokenSpeed's
	 * token_usage and gen_throughput, and 17 is unknown to TokenSpeed. */
	struct rank r = { .waiting = 2, .uncached = 4000, .tput = 0.25, .hit = 300 };
	struct pb w = pb_response(&SGLANG, &r, 1);
	struct steer_load sg, ts;
	char why[200];

	CHECK(decode_pb(STEER_ENGINE_SGLANG, &w, &sg, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &ts, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	free(w.b);
	CHECK(sg.queued_uncached_tokens == 4000 && sg.kv_usage == 0 && sg.throughput == 0.25,
	      "SGLang: uncached %g kv %g tp %g", sg.queued_uncached_tokens, sg.kv_usage,
	      sg.throughput);
	CHECK(ts.queued_uncached_tokens == 0 && ts.kv_usage == 0.25 && ts.throughput == 300,
	      "TokenSpeed: uncached %g kv %g tp %g", ts.queued_uncached_tokens, ts.kv_usage,
	      ts.throughput);

	/* A nonzero SGLang token_usage (7, a double) is TokenSpeed's
	 * max_running_requests (an int32): the wire types differ, the message
	 * does not decode. */
	w = pb_response(&SGLANG, two_ranks, 2);
	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &ts, why, sizeof(why)) == STEER_POLL_INVALID,
	      "wire-type mismatch accepted");
	free(w.b);
	CHECK(strstr(why, "TokenSpeed") != NULL, "detail '%s'", why);
}

static void test_grpc_invalid_answers(void)
{
	static const enum steer_engine engines[] = { STEER_ENGINE_SGLANG, STEER_ENGINE_VLLM,
						     STEER_ENGINE_TOKENSPEED };
	static const char http[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{}";
	struct steer_load l;
	char why[200];
	size_t i, cut;

	for (i = 0; i < 3; i++) {
		enum steer_engine e = engines[i];
		const struct fields *f = e == STEER_ENGINE_SGLANG ? &SGLANG
					 : e == STEER_ENGINE_VLLM ? &VLLM
								  : &TOKENSPEED;
		struct rank bad = two_ranks[0];
		struct pb w = pb_response(f, two_ranks, 2), empty = pb_response(f, NULL, 0);

		/* Every cut inside the last rank leaves a broken message. */
		for (cut = w.n - 1; cut > w.n - 20; cut--)
			CHECK(steer_decode_grpc(e, w.b, cut, &l, why, sizeof(why)) ==
				      STEER_POLL_INVALID,
			      "%s: cut at %zu of %zu accepted", steer_engine_name(e), cut, w.n);
		free(w.b);
		CHECK(decode_pb(e, &empty, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
			      strstr(why, "no load entries"),
		      "%s: no ranks: '%s'", steer_engine_name(e), why);
		free(empty.b);
		CHECK(steer_decode_grpc(e, (const uint8_t *)http, sizeof(http) - 1, &l, why,
					sizeof(why)) == STEER_POLL_INVALID,
		      "%s: an HTTP answer decoded", steer_engine_name(e));
		bad.usage = NAN;
		w = pb_response(f, &bad, 1);
		CHECK(decode_pb(e, &w, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
			      strstr(why, "token_usage"),
		      "%s: NaN: '%s'", steer_engine_name(e), why);
		free(w.b);
		bad.usage = 5.0;
		w = pb_response(f, &bad, 1);
		CHECK(decode_pb(e, &w, &l, why, sizeof(why)) == STEER_POLL_INVALID,
		      "%s: token_usage 5 accepted", steer_engine_name(e));
		free(w.b);
		bad = two_ranks[0];
		bad.waiting = -1;
		w = pb_response(f, &bad, 1);
		CHECK(decode_pb(e, &w, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
			      strstr(why, "num_waiting_reqs"),
		      "%s: negative: '%s'", steer_engine_name(e), why);
		free(w.b);
	}
	CHECK(steer_decode_grpc(STEER_ENGINE_AUTO, (const uint8_t *)"", 0, &l, why, sizeof(why)) ==
		      STEER_POLL_INVALID,
	      "engine auto decoded");
	CHECK(steer_decode_grpc(STEER_ENGINE_SGLANG, NULL, 0, &l, why, sizeof(why)) ==
		      STEER_POLL_INVALID,
	      "NULL decoded");
}

static void test_grpc_rank_bound(void)
{
	static struct rank r[1025];
	struct steer_load l;
	char why[200];
	struct pb w;
	size_t i;

	for (i = 0; i < 1025; i++)
		r[i] = (struct rank){ .dp_rank = (int32_t)i, .waiting = 1, .usage = 0.5 };
	w = pb_response(&TOKENSPEED, r, 1024);
	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &l, why, sizeof(why)) == STEER_POLL_OK &&
		      l.ranks == 1024 && l.waiting_reqs == 1024,
	      "1024 ranks: %s", why);
	free(w.b);
	w = pb_response(&TOKENSPEED, r, 1025);
	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
		      strstr(why, "1025"),
	      "1025 ranks: '%s'", why);
	free(w.b);
}

/* The answers that took protobuf-c to 150-300 MB: ~2 M empty repeated
 * entries (field 4, length 0) and ~1.3 M unknown varint fields (field 99),
 * each about 4 MB. The unpack's memory budget refuses them. */
static void test_grpc_hostile_refused(void)
{
	static const struct {
		uint8_t item[3];
		size_t item_len, n;
	} cases[] = {
		{ { 0x22, 0x00 }, 2, 1990000 },
		{ { 0x98, 0x06, 0x00 }, 3, 1300000 },
	};
	static const enum steer_engine engines[] = { STEER_ENGINE_SGLANG, STEER_ENGINE_VLLM,
						     STEER_ENGINE_TOKENSPEED };
	struct steer_load l;
	size_t c, e, i;

	for (c = 0; c < 2; c++) {
		struct pb w = { .n = cases[c].item_len * cases[c].n };

		w.b = malloc(w.n);
		CHECK(w.b, "malloc");
		for (i = 0; i < cases[c].n; i++)
			memcpy(w.b + i * cases[c].item_len, cases[c].item, cases[c].item_len);
		for (e = 0; e < 3; e++) {
			char why[200] = "";

			CHECK(decode_pb(engines[e], &w, &l, why, sizeof(why)) ==
					      STEER_POLL_INVALID &&
				      strstr(why, "to decode: refused"),
			      "case %zu engine %zu (%zu bytes): '%s'", c, e, w.n, why);
		}
		free(w.b);
	}
}

/* Bytes from Python's protobuf runtime (tests/lib/pb_loads.py), hex on stdout. */
static int python_bytes(const char *engine, const char *ranks_json, struct pb *w)
{
	char cmd[16384], hex[8192];
	size_t i, n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/lib/pb_loads.py %s %s '%s'", top,
		 pydir, engine, ranks_json);
	p = popen(cmd, "r");
	CHECK_RC(p != NULL, "popen");
	n = fread(hex, 1, sizeof(hex) - 1, p);
	CHECK_RC(pclose(p) == 0, "pb_loads.py %s failed", engine);
	hex[n] = 0;
	memset(w, 0, sizeof(*w));
	for (i = 0; i + 1 < n && hex[i] != '\n'; i += 2) {
		unsigned int byte;

		CHECK_RC(sscanf(hex + i, "%2x", &byte) == 1, "bad hex at %zu", i);
		pb_byte(w, (uint8_t)byte);
	}
	return 0;
}

static void test_grpc_python_serialized(void)
{
	static const char sglang[] =
		"[{\"dp_rank\": 0, \"num_running_reqs\": 8, \"num_waiting_reqs\": 3, "
		"\"token_usage\": 0.4, \"gen_throughput\": 1800.0, \"cache_hit_rate\": 0.9, "
		"\"max_total_num_tokens\": 500000, \"num_waiting_uncached_tokens\": 4000}, "
		"{\"dp_rank\": 1, \"num_running_reqs\": 2, \"num_waiting_reqs\": 1, "
		"\"token_usage\": 0.2, \"gen_throughput\": 1200.0, "
		"\"num_waiting_uncached_tokens\": 1000}]";
	static const char vllm[] =
		"[{\"dp_rank\": 0, \"num_running_reqs\": 5, \"num_waiting_reqs\": 7, "
		"\"token_usage\": 0.65, \"max_running_requests\": 256}]";
	static const char tokenspeed[] =
		"[{\"dp_rank\": 0, \"num_running_reqs\": 4, \"num_waiting_reqs\": 2, "
		"\"max_running_requests\": 128, \"token_usage\": 0.5, \"gen_throughput\": 900.0, "
		"\"cache_hit_rate\": 0.3, \"num_waiting_uncached_tokens\": 2500}]";
	struct steer_load l;
	char why[200];
	struct pb w;

	CHECK(python_bytes("sglang", sglang, &w) == 0, "sglang bytes");
	CHECK(decode_pb(STEER_ENGINE_SGLANG, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	free(w.b);
	CHECK(l.queued_uncached_tokens == 5000 && l.throughput == 3000 && near(l.kv_usage, 0.3) &&
		      l.waiting_reqs == 4 && l.running_reqs == 10 && l.ranks == 2,
	      "sglang: uncached %g tp %g kv %g", l.queued_uncached_tokens, l.throughput,
	      l.kv_usage);

	CHECK(python_bytes("vllm", vllm, &w) == 0, "vllm bytes");
	CHECK(decode_pb(STEER_ENGINE_VLLM, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	free(w.b);
	CHECK(l.queued_uncached_tokens == 0 && l.throughput == 0 && l.kv_usage == 0.65 &&
		      l.waiting_reqs == 7 && l.running_reqs == 5,
	      "vllm: uncached %g tp %g kv %g", l.queued_uncached_tokens, l.throughput, l.kv_usage);

	CHECK(python_bytes("tokenspeed", tokenspeed, &w) == 0, "tokenspeed bytes");
	CHECK(decode_pb(STEER_ENGINE_TOKENSPEED, &w, &l, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(l.queued_uncached_tokens == 2500 && l.throughput == 900 && l.kv_usage == 0.5 &&
		      l.waiting_reqs == 2 && l.running_reqs == 4,
	      "tokenspeed: uncached %g tp %g kv %g", l.queued_uncached_tokens, l.throughput,
	      l.kv_usage);
	/* The same bytes as SGLang: max_running_requests (7, varint) is where
	 * SGLang has token_usage (a double): refused, not misread. */
	CHECK(decode_pb(STEER_ENGINE_SGLANG, &w, &l, why, sizeof(why)) == STEER_POLL_INVALID,
	      "TokenSpeed bytes decoded as SGLang");
	free(w.b);
}

static void test_names(void)
{
	static const char *const sources[] = {
		"none",	      "grpc-sglang",	   "grpc-vllm",		  "grpc-tokenspeed",
		"http-loads", "http-metrics-vllm", "http-metrics-sglang", "tcp"
	};
	static const char *const engines[] = { "auto", "sglang", "vllm", "tokenspeed" };
	enum steer_engine e;
	int i;

	CHECK(STEER_SOURCES == 8, "sources %d", STEER_SOURCES);
	for (i = 0; i < STEER_SOURCES; i++)
		CHECK(strcmp(steer_source_name((enum steer_source)i), sources[i]) == 0,
		      "source %d: %s", i, steer_source_name((enum steer_source)i));
	CHECK(strcmp(steer_source_name((enum steer_source)99), "unknown") == 0, "99");
	for (i = 0; i < 4; i++) {
		CHECK(steer_engine_parse(engines[i], &e) == 0 && (int)e == i, "parse %s",
		      engines[i]);
		CHECK(strcmp(steer_engine_name(e), engines[i]) == 0, "name %d", i);
	}
	CHECK(steer_engine_parse("SGLang", &e) == -1 && steer_engine_parse("", &e) == -1 &&
		      steer_engine_parse("vllm ", &e) == -1 && steer_engine_parse(NULL, &e) == -1,
	      "bad engine names parsed");
	CHECK(strcmp(steer_grpc_method(STEER_ENGINE_SGLANG),
		     "/sglang.grpc.scheduler.SglangScheduler/GetLoads") == 0 &&
		      strcmp(steer_grpc_method(STEER_ENGINE_VLLM),
			     "/vllm.grpc.engine.VllmEngine/GetLoads") == 0 &&
		      strcmp(steer_grpc_method(STEER_ENGINE_TOKENSPEED),
			     "/tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads") == 0 &&
		      steer_grpc_method(STEER_ENGINE_AUTO) == NULL,
	      "methods");
}

/* ---- /v1/loads JSON ----------------------------------------------------------- */

/* Upstream's mock worker (crates/mock_worker/src/http.rs), two ranks. */
static const char loads_json[] =
	"{\"timestamp\": \"\", \"dp_rank_count\": 2, \"loads\": ["
	"{\"dp_rank\": 0, \"num_running_reqs\": 8, \"num_waiting_reqs\": 3, "
	"\"num_waiting_uncached_tokens\": 4000, \"num_total_reqs\": 11, \"num_used_tokens\": 2000, "
	"\"max_total_num_tokens\": 5000, \"token_usage\": 0.4, \"gen_throughput\": 1800.0, "
	"\"cache_hit_rate\": 0.5, \"utilization\": 0.4, \"max_running_requests\": 64}, "
	"{\"dp_rank\": 1, \"num_running_reqs\": 2, \"num_waiting_reqs\": 1, "
	"\"num_waiting_uncached_tokens\": 1000, \"num_total_reqs\": 3, \"num_used_tokens\": 1000, "
	"\"max_total_num_tokens\": 5000, \"token_usage\": 0.2, \"gen_throughput\": 1200, "
	"\"cache_hit_rate\": 0.0, \"utilization\": 0.2, \"max_running_requests\": 64, "
	"\"disagg_mode\": null, \"kv_transfer_latency_ms\": null}]}\n";

static enum steer_poll_kind json(const char *s, struct steer_load *l, char *why, size_t whylen)
{
	memset(l, 0, sizeof(*l));
	return steer_decode_loads_json(s, strlen(s), l, why, whylen);
}

static void test_json_two_ranks(void)
{
	struct steer_load l;
	char why[200] = "x";

	CHECK(json(loads_json, &l, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	CHECK(why[0] == 0, "detail on OK: %s", why);
	CHECK(l.ranks == 2 && l.queued_uncached_tokens == 5000 && l.throughput == 3000 &&
		      near(l.kv_usage, 0.3) && l.waiting_reqs == 4 && l.running_reqs == 10,
	      "ranks %u uncached %g tp %g kv %g waiting %g running %g", l.ranks,
	      l.queued_uncached_tokens, l.throughput, l.kv_usage, l.waiting_reqs, l.running_reqs);
}

static void test_json_missing_fields_are_zero(void)
{
	struct steer_load l;
	char why[200];

	CHECK(json("{\"loads\": [{\"token_usage\": 0.5, \"num_waiting_reqs\": 2}, "
		   "{\"num_running_reqs\": 0}]}",
		   &l, why, sizeof(why)) == STEER_POLL_OK,
	      "%s", why);
	CHECK(l.ranks == 2 && l.kv_usage == 0.25 && l.waiting_reqs == 2 &&
		      l.queued_uncached_tokens == 0 && l.throughput == 0 && l.running_reqs == 0,
	      "kv %g waiting %g", l.kv_usage, l.waiting_reqs);
	/* An integer is a valid double. */
	CHECK(json("{\"loads\": [{\"token_usage\": 1, \"gen_throughput\": 7}]}", &l, why,
		   sizeof(why)) == STEER_POLL_OK &&
		      l.kv_usage == 1 && l.throughput == 7,
	      "%s", why);
}

struct bad_json {
	const char *body, *why; /* why: a substring the detail must hold */
};

static void test_json_refused(void)
{
	static const struct bad_json cases[] = {
		{ "", "empty" },
		{ "[]", "not a JSON object" },
		{ "null", "not a JSON object" },
		{ "{}", "no \"loads\"" },
		{ "{\"loads\": []}", "empty" },
		{ "{\"loads\": {}}", "not an array" },
		{ "{\"loads\": [3]}", "loads[0] is not an object" },
		{ "{\"loads\": [{\"num_waiting_reqs\": \"3\"}]}", "num_waiting_reqs" },
		{ "{\"loads\": [{\"num_waiting_reqs\": null}]}", "num_waiting_reqs" },
		{ "{\"loads\": [{\"num_waiting_reqs\": 3.5}]}", "num_waiting_reqs" },
		{ "{\"loads\": [{\"num_running_reqs\": true}]}", "num_running_reqs" },
		{ "{\"loads\": [{\"token_usage\": 0.1}, {\"num_waiting_uncached_tokens\": "
		  "2147483648}]}",
		  "loads[1].num_waiting_uncached_tokens is out of range" },
		{ "{\"loads\": [{\"dp_rank\": -2147483649}]}", "dp_rank" },
		{ "{\"loads\": [{\"token_usage\": \"0.4\"}]}", "token_usage is not a number" },
		{ "{\"loads\": [{\"gen_throughput\": [1]}]}", "gen_throughput is not a number" },
		{ "{\"loads\": [{\"token_usage\": NaN}]}", "token_usage" },
		{ "{\"loads\": [{\"gen_throughput\": Infinity}]}", "" },
		{ "{\"loads\": [{\"gen_throughput\": -Infinity}]}", "" },
		{ "{\"loads\": [{\"token_usage\": 1e400}]}", "" },
		{ "{\"loads\": [{\"token_usage\": 5.0}]}", "token_usage" },
		{ "{\"loads\": [{\"num_waiting_reqs\": -1}]}", "num_waiting_reqs" },
		{ "{\"dp_rank_count\": \"2\", \"loads\": [{}]}", "dp_rank_count" },
		{ "{\"loads\": [{}]} x", "" },
		{ "{\"loads\": [{}]}{}", "" },
		{ "{\"loads\": [{},]}", "" },
		{ "{\"loads\": [{\"dp_rank\": 0}] /* c */}", "" },
		{ "{\"loads\": [{\"x\": \"\xff\xfe\"}]}", "" },
		{ "<html><body>404 Not Found</body></html>", "invalid JSON" },
		{ "{\"loads\": [{\"dp_rank\": 0, \"token_usage\": 0.4", "truncated" },
		/* A rank that says nothing of its load is not an idle one. */
		{ "{\"loads\": [{}]}", "loads[0] has none of the load fields" },
		{ "{\"loads\": [{\"token_usage\": 0.1}, {\"dp_rank\": 1}]}",
		  "loads[1] has none of the load fields" },
		/* json-c keeps the last of two equal keys: 50000 would read as 0. */
		{ "{\"loads\": [{\"num_waiting_uncached_tokens\": 50000, "
		  "\"num_waiting_uncached_tokens\": 0}]}",
		  "loads[0] has a key twice" },
		{ "{\"loads\": [{\"token_usage\": 0.9}], \"loads\": [{\"token_usage\": 0.1}]}",
		  "the body's object has a key twice" },
		{ "{\"lo\\u0061ds\": [{\"token_usage\": 0.1}]}", "not written plainly" },
	};
	struct steer_load l;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char why[200] = "";

		CHECK(json(cases[i].body, &l, why, sizeof(why)) == STEER_POLL_INVALID,
		      "case %zu accepted: %s", i, cases[i].body);
		CHECK(why[0] && strstr(why, cases[i].why), "case %zu: detail '%s' lacks '%s'", i,
		      why, cases[i].why);
	}
}

static void test_json_every_truncation_refused(void)
{
	size_t len = strlen(loads_json) - 1; /* without the final newline */
	struct steer_load l;
	char why[200];
	size_t cut;

	for (cut = 0; cut < len; cut++)
		CHECK(steer_decode_loads_json(loads_json, cut, &l, why, sizeof(why)) ==
			      STEER_POLL_INVALID,
		      "cut at %zu of %zu accepted", cut, len);
	CHECK(steer_decode_loads_json(loads_json, len, &l, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
}

/* A body of n copies of item inside {"loads": [...]} (items separated by
 * commas); the caller frees it. */
static char *repeated(const char *head, const char *item, size_t n, const char *tail)
{
	size_t il = strlen(item), cap = strlen(head) + n * (il + 1) + strlen(tail) + 1, at, i;
	char *b = malloc(cap);

	if (!b)
		return NULL;
	at = (size_t)sprintf(b, "%s", head);
	for (i = 0; i < n; i++) {
		if (i)
			b[at++] = ',';
		memcpy(b + at, item, il);
		at += il;
	}
	sprintf(b + at, "%s", tail);
	return b;
}

static void test_json_bounds(void)
{
	char *body, why[300];
	struct steer_load l;

	body = repeated("{\"loads\": [", "{\"token_usage\": 0}", 1025, "]}");
	CHECK(body && json(body, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
		      strstr(why, "refused before parsing: more ranks"),
	      "1025 entries: '%s'", why);
	free(body);
	body = repeated("{\"loads\": [", "{\"token_usage\": 0}", 1024, "]}");
	CHECK(body && json(body, &l, why, sizeof(why)) == STEER_POLL_OK && l.ranks == 1024,
	      "1024 entries: %s", why);
	free(body);
	/* Deeper than any load report. */
	CHECK(json("{\"loads\": [{\"x\": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}]}", &l, why,
		   sizeof(why)) == STEER_POLL_INVALID,
	      "deep nesting accepted");
	CHECK(steer_decode_loads_json("{\"loads\":[{}]}\0", 15, &l, why, sizeof(why)) ==
		      STEER_POLL_INVALID,
	      "NUL accepted");
}

/* The hostile answers that took json-c to hundreds of MB are refused by the
 * scan, before json-c builds a value of them. */
static void test_json_hostile_refused_before_parsing(void)
{
	static const struct {
		const char *head, *item, *tail, *why;
		size_t n;
	} cases[] = {
		/* 3.9 MB of empty ranks (626 MB of json-c objects) */
		{ "{\"loads\": [", "{}", "]}", "more ranks", 1300000 },
		/* 2.09 M integers in one rank (187 MB) */
		{ "{\"loads\": [{\"token_usage\": 0, \"x\": [", "1", "]}]}", "more values",
		  2090000 },
		/* objects nested in one rank */
		{ "{\"loads\": [{\"token_usage\": 0, \"x\": [", "{}", "]}]}", "more objects",
		  500000 },
		/* keys in one rank */
		{ "{\"loads\": [{\"token_usage\": 0", ", \"k\": 1", "}]}", "more values", 400000 },
	};
	struct steer_load l;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *body = repeated(cases[i].head, cases[i].item, cases[i].n, cases[i].tail),
		     why[300];

		CHECK(body, "malloc");
		if (i == 3) /* repeated() puts commas between items: drop them */
			for (char *p = strstr(body, "0,,"); p; p = strstr(p, ",,"))
				memmove(p + 1, p + 2, strlen(p + 2) + 1);
		CHECK(json(body, &l, why, sizeof(why)) == STEER_POLL_INVALID &&
			      strstr(why, "refused before parsing") && strstr(why, cases[i].why),
		      "case %zu (%zu bytes): '%s'", i, strlen(body), why);
		free(body);
	}
}

int main(void)
{
	const char *env = getenv("STEER_TOP");

	snprintf(top, sizeof(top), "%s", env ? env : ".");
	env = getenv("STEER_BUILD");
	if (env)
		snprintf(pydir, sizeof(pydir), "%s/py", env);
	else
		snprintf(pydir, sizeof(pydir), "%s/build/san/py", top);
	TAP_RUN(test_grpc_sglang_field_17);
	TAP_RUN(test_grpc_vllm_has_no_queued_tokens);
	TAP_RUN(test_grpc_tokenspeed_field_numbers);
	TAP_RUN(test_grpc_sglang_bytes_as_tokenspeed);
	TAP_RUN(test_grpc_invalid_answers);
	TAP_RUN(test_grpc_rank_bound);
	TAP_RUN(test_grpc_hostile_refused);
	TAP_RUN(test_grpc_python_serialized);
	TAP_RUN(test_names);
	TAP_RUN(test_json_two_ranks);
	TAP_RUN(test_json_missing_fields_are_zero);
	TAP_RUN(test_json_refused);
	TAP_RUN(test_json_every_truncation_refused);
	TAP_RUN(test_json_bounds);
	TAP_RUN(test_json_hostile_refused_before_parsing);
	return tap_done();
}
