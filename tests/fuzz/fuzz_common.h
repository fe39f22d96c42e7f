/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fuzz_common.h - what every libFuzzer target of tests/fuzz/ shares: the
 * entry point's prototype, and the promises a decoded load must keep. A
 * broken promise aborts, which libFuzzer reports as a crash with its input:
 * the decoders are checked for what they return, not only for not crashing.
 */
#ifndef STEER_FUZZ_COMMON_H
#define STEER_FUZZ_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loads/loads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(cond)                                                                          \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: broken promise: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

/* What a poll result promises: OK has a finite, in-range load and no
 * detail; INVALID has a one-line reason; nothing else is returned. */
static inline void fuzz_check_result(enum steer_poll_kind kind, const struct steer_load *l,
				     const char *detail, size_t detail_len)
{
	FUZZ_ASSERT(kind == STEER_POLL_OK || kind == STEER_POLL_INVALID);
	FUZZ_ASSERT(memchr(detail, 0, detail_len) != NULL);
	if (kind == STEER_POLL_INVALID) {
		FUZZ_ASSERT(detail[0] != 0);
		return;
	}
	FUZZ_ASSERT(detail[0] == 0);
	FUZZ_ASSERT(l->ranks >= 1);
	FUZZ_ASSERT(isfinite(l->kv_usage) && l->kv_usage >= 0 && l->kv_usage <= 1);
	FUZZ_ASSERT(isfinite(l->throughput) && l->throughput >= 0);
	FUZZ_ASSERT(l->throughput <= 1e9 * 1024);
	FUZZ_ASSERT(isfinite(l->queued_uncached_tokens) && l->queued_uncached_tokens >= 0);
	FUZZ_ASSERT(isfinite(l->waiting_reqs) && l->waiting_reqs >= 0);
	FUZZ_ASSERT(isfinite(l->running_reqs) && l->running_reqs >= 0);
}

#endif /* STEER_FUZZ_COMMON_H */
