#!/usr/bin/python3
# SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
"""Print a serialized GetLoadsResponse as hex, made by Python's protobuf
runtime from the vendored protos (build/.../py/*_pb2.py): an encoder that
shares nothing with the C decoders under test (tests/unit/test_decode.c).

    pb_loads.py PY_DIR ENGINE 'JSON list of rank dicts'

ENGINE is sglang, vllm or tokenspeed; each dict holds SchedulerLoad fields
by name (only the fields the engine's message has).
"""
import json
import sys

sys.path.insert(0, sys.argv[1])
engine, ranks = sys.argv[2], json.loads(sys.argv[3])
if engine == "sglang":
    import sglang_scheduler_pb2 as pb
elif engine == "vllm":
    import vllm_engine_pb2 as pb
elif engine == "tokenspeed":
    import tokenspeed_scheduler_pb2 as pb
else:
    sys.exit("unknown engine " + engine)

resp = pb.GetLoadsResponse(timestamp="2025-01-01T00:00:00Z", version="test",
                           dp_rank_count=len(ranks))
for r in ranks:
    resp.loads.append(pb.SchedulerLoad(**r))
print(resp.SerializeToString().hex())
