// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* fuzz_grpc_vllm.c - steer_decode_grpc(STEER_ENGINE_VLLM, ...) on any bytes. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct steer_load load;
	char detail[200];
	enum steer_poll_kind kind;

	memset(&load, 0, sizeof(load));
	kind = steer_decode_grpc(STEER_ENGINE_VLLM, data, size, &load, detail, sizeof(detail));
	fuzz_check_result(kind, &load, detail, sizeof(detail));
	return 0;
}
