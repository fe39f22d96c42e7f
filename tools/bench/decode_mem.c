// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decode_mem.c - the peak memory of decoding one hostile load answer.
 *
 *   decode_mem ANSWER
 *
 * Builds the answer in memory, reads VmHWM from /proc/self/status, makes one
 * decode call (steer_decode_loads_json or steer_decode_grpc, loads_int.h),
 * reads VmHWM again and prints one line:
 *   answer=NAME bytes=N kind=ok|invalid detail="..." hwm_before_kib=A
 *   hwm_after_kib=B delta_mib=(B-A)/1024
 * (detail: its first 80 characters, a double quote written as a single one).
 * The body is built and touched before the first reading, so the delta is
 * what the decoder alone took at its peak. One answer a process:
 * tools/bench/decode_mem.sh runs every answer against an old and a new tree.
 *
 *   json-empty-ranks   {"loads":[{},{},...]}, 3.9 MB of empty ranks
 *   json-integers      {"loads":[{"token_usage":0,"x":[1,1,...]}]}, 2,090,000
 *                      integers in one rank's unread field
 *   pb-empty-loads     SGLang GetLoadsResponse: 0x22 0x00 (an empty loads
 *                      entry) 1,990,000 times
 *   pb-unknown-fields  SGLang GetLoadsResponse: 0x98 0x06 0x00 (field 99,
 *                      varint 0: unknown) 1,300,000 times
 *   json-real-1024     the control: a real answer of 1,024 ranks, every field
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loads/loads_int.h"

#define EMPTY_RANKS 1300000
#define INTEGERS 2090000
#define PB_EMPTY_LOADS 1990000
#define PB_UNKNOWN 1300000
#define REAL_RANKS 1024

enum format {
	FORMAT_JSON,
	FORMAT_GRPC
};

/* Every body is written into one buffer of this size, allocated once: no
 * realloc leaves a copy in the peak before the decode. Its untouched tail
 * is never resident. */
#define BODY_CAP (5u << 20)

struct body {
	char *buf;
	size_t len;
};

static void put(struct body *b, const void *p, size_t n)
{
	if (n > BODY_CAP - b->len) {
		fprintf(stderr, "decode_mem: the body is over %u bytes\n", BODY_CAP);
		exit(2);
	}
	memcpy(b->buf + b->len, p, n);
	b->len += n;
}

static void puts_(struct body *b, const char *s)
{
	put(b, s, strlen(s));
}

static void repeat(struct body *b, const void *unit, size_t n, size_t count)
{
	size_t i;

	for (i = 0; i < count; i++)
		put(b, unit, n);
}

/* 0 with *b filled and *fmt set, or -1 for an unknown name. */
static int build(const char *name, struct body *b, enum format *fmt)
{
	static const unsigned char empty_load[] = { 0x22, 0x00 };
	static const unsigned char unknown[] = { 0x98, 0x06, 0x00 };
	char rank[256];
	size_t i;

	*fmt = FORMAT_JSON;
	if (strcmp(name, "json-empty-ranks") == 0) {
		puts_(b, "{\"loads\":[{}");
		repeat(b, ",{}", 3, EMPTY_RANKS - 1);
		puts_(b, "]}");
	} else if (strcmp(name, "json-integers") == 0) {
		puts_(b, "{\"loads\":[{\"token_usage\":0,\"x\":[1");
		repeat(b, ",1", 2, INTEGERS - 1);
		puts_(b, "]}]}");
	} else if (strcmp(name, "pb-empty-loads") == 0) {
		*fmt = FORMAT_GRPC;
		repeat(b, empty_load, sizeof(empty_load), PB_EMPTY_LOADS);
	} else if (strcmp(name, "pb-unknown-fields") == 0) {
		*fmt = FORMAT_GRPC;
		repeat(b, unknown, sizeof(unknown), PB_UNKNOWN);
	} else if (strcmp(name, "json-real-1024") == 0) {
		snprintf(rank, sizeof(rank),
			 "{\"timestamp\":\"2025-01-01T00:00:00Z\","
			 "\"dp_rank_count\":%d,\"loads\":[",
			 REAL_RANKS);
		puts_(b, rank);
		for (i = 0; i < REAL_RANKS; i++) {
			snprintf(rank, sizeof(rank),
				 "%s{\"dp_rank\":%zu,\"num_running_reqs\":%zu,"
				 "\"num_waiting_reqs\":%zu,\"num_waiting_uncached_tokens\":%zu,"
				 "\"token_usage\":%.3f,\"gen_throughput\":%.1f}",
				 i ? "," : "", i, 3 + i % 17, i % 5, 800 + 37 * (i % 29),
				 (double)(i % 100) / 100.0, 1800.0 + (double)(i % 13));
			puts_(b, rank);
		}
		puts_(b, "]}");
	} else {
		return -1;
	}
	return 0;
}

static long vm_hwm_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "VmHWM:", 6) == 0)
			kib = atol(line + 6);
	fclose(f);
	return kib;
}

static const char *kind_name(enum steer_poll_kind kind)
{
	if (kind == STEER_POLL_OK)
		return "ok";
	if (kind == STEER_POLL_INVALID)
		return "invalid";
	return "other";
}

int main(int argc, char **argv)
{
	struct body b = { 0 };
	struct steer_load load;
	enum steer_poll_kind kind;
	enum format fmt;
	char detail[200];
	long before, after;
	size_t i;

	b.buf = malloc(BODY_CAP);
	if (!b.buf) {
		perror("malloc");
		return 2;
	}
	if (argc != 2 || build(argv[1], &b, &fmt) != 0) {
		fprintf(stderr, "usage: decode_mem json-empty-ranks|json-integers|pb-empty-loads|"
				"pb-unknown-fields|json-real-1024\n");
		return 2;
	}
	vm_hwm_kib(); /* the first stdio and malloc setup, outside the measure */
	before = vm_hwm_kib();
	if (fmt == FORMAT_JSON)
		kind = steer_decode_loads_json(b.buf, b.len, &load, detail, sizeof(detail));
	else
		kind = steer_decode_grpc(STEER_ENGINE_SGLANG, (const uint8_t *)b.buf, b.len, &load,
					 detail, sizeof(detail));
	after = vm_hwm_kib();
	detail[80] = 0;
	for (i = 0; detail[i]; i++)
		if (detail[i] == '"')
			detail[i] = '\'';
	printf("answer=%s bytes=%zu kind=%s detail=\"%s\" hwm_before_kib=%ld hwm_after_kib=%ld "
	       "delta_mib=%.1f\n",
	       argv[1], b.len, kind_name(kind), detail, before, after,
	       (double)(after - before) / 1024.0);
	free(b.buf);
	return kind == STEER_POLL_OK || kind == STEER_POLL_INVALID ? 0 : 1;
}
