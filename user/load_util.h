/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * load_util.h - what the load decoders (load_grpc.c, load_json.c,
 * load_prom.c) share: their bounds and the one way they report a failure.
 * Internal: the poller and the tests use load_decode.h.
 */
#ifndef STEER_LOAD_UTIL_H
#define STEER_LOAD_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "steer_common.h"

/* More DP ranks (or label sets of one metric) than any engine runs: a
 * report claiming more is broken. The poller has always refused > 1024. */
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

#endif /* STEER_LOAD_UTIL_H */
