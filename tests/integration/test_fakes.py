#!/usr/bin/python3
"""Self-test of the fake engines (tests/lib/fake_engines.py) against independent
clients: grpcio stubs with the generated classes, `protoc --decode_raw` for
the field numbers on the wire, urllib, json and prometheus_client's parser.
A broken fake is caught here before it misjudges smg-steerd
(tests/integration/test_sources.py). Runs in a private network namespace."""
import http.client
import json
import math
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import e2e_lib as L
import engines_lib as E
from taplib import Tap

L.enter_private_netns()

import grpc  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

sys.path.insert(0, os.path.join(L.BUILD, "py"))
import sglang_scheduler_pb2  # noqa: E402
import tokenspeed_scheduler_pb2  # noqa: E402
import vllm_engine_pb2  # noqa: E402

PB2 = {"sglang": sglang_scheduler_pb2, "vllm": vllm_engine_pb2,
       "tokenspeed": tokenspeed_scheduler_pb2}
METHOD = {"sglang": "/sglang.grpc.scheduler.SglangScheduler/GetLoads",
          "vllm": "/vllm.grpc.engine.VllmEngine/GetLoads",
          "tokenspeed": "/tokenspeed.grpc.scheduler.TokenSpeedScheduler/GetLoads"}
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

t = Tap()
env = L.Env("fakes")

RANKS = [E.rank(0, uncached=1500, waiting=2, kv=0.25, tp=1000.0),
         E.rank(1, uncached=2500, waiting=3, kv=0.5, tp=1500.0, running=6)]
VLLM_RANKS = [dict(r, gen_throughput=0.0) for r in RANKS]
ST = {"mode": "ok", "loads": RANKS}
engines = {
    "sg": E.Engine(env, "sg", "sglang-grpc", "127.0.0.11:8000", ST, grpc="127.0.0.11:30000"),
    "vl": E.Engine(env, "vl", "vllm-grpc", "127.0.0.12:8000", {"mode": "ok", "loads": VLLM_RANKS}),
    "ts": E.Engine(env, "ts", "tokenspeed-grpc", "127.0.0.13:8000", ST),
    "hl": E.Engine(env, "hl", "http-loads", "127.0.0.14:8000", ST),
    "v1": E.Engine(env, "v1", "vllm-metrics", "127.0.0.15:8000", ST),
    "v0": E.Engine(env, "v0", "vllm-metrics", "127.0.0.16:8000", ST, variant="v0"),
    "sc": E.Engine(env, "sc", "sglang-metrics", "127.0.0.17:8000", ST, variant="sglang:"),
    "su": E.Engine(env, "su", "sglang-metrics", "127.0.0.18:8000", ST, variant="sglang_"),
    "sh": E.Engine(env, "sh", "sglang-http", "127.0.0.19:8000", ST),
    "pl": E.Engine(env, "pl", "plain", "127.0.0.20:8000", ST),
    "six": E.Engine(env, "six", "http-loads", "[::1]:8001", ST),
}


def call(addr, engine, metadata=None, timeout=3, raw=False):
    """GetLoads over a fresh channel: the decoded response, or raw bytes."""
    with grpc.insecure_channel(addr) as ch:
        pb2 = PB2[engine]
        f = ch.unary_unary(METHOD[engine], request_serializer=pb2.GetLoadsRequest.SerializeToString,
                           response_deserializer=None if raw else pb2.GetLoadsResponse.FromString)
        return f(pb2.GetLoadsRequest(include=["core"]), timeout=timeout, metadata=metadata)


def grpc_code(addr, engine, **kw):
    try:
        call(addr, engine, **kw)
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def get(addr, path, headers=None, timeout=3):
    """(status, body) of GET http://addr/path."""
    req = urllib.request.Request(f"http://{addr}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def decode_raw(data):
    """protoc's schema-less decoding: field numbers as on the wire."""
    p = subprocess.run(["protoc", "--decode_raw"], input=data, capture_output=True, timeout=10)
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode()


def raw_rank_fields(text):
    """{field number: [values]} of the first `4 { ... }` (the first rank)."""
    block = text.split("4 {", 1)[1].split("}", 1)[0]
    out = {}
    for line in block.strip().splitlines():
        k, v = line.strip().split(": ", 1)
        out.setdefault(int(k), []).append(v)
    return out


def fixed64_double(v):
    import struct
    return struct.unpack("<d", struct.pack("<Q", int(v, 16)))[0]


def samples(text):
    """{name: {frozenset(labels): value}} parsed by prometheus_client."""
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    return out


def wait_stats(e, timeout=10, **want):
    """Wait until the engine's counters (flushed every 100 ms) reach `want`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = e.stats()
        if all(st.get(k, 0) == v for k, v in want.items()):
            return True
        time.sleep(0.05)
    return False


def by_rank(series, label):
    return {dict(k)[label]: v for k, v in series.items()}


E.start_all(engines.values())

with t.case("every kind answers GET /whoami with its name on its traffic port"):
    for n, e in engines.items():
        got = E.whoami(e.traffic)
        t.check(got == n, f"{n}: {got}")
    t.check(wait_stats(engines["sg"], whoami=1), f"whoami not counted: {engines['sg'].stats()}")

with t.case("SGLang gRPC: values as stated, queued tokens on field 17, KV 7, throughput 8"):
    for addr in ("127.0.0.11:8000", "127.0.0.11:30000"):
        resp = call(addr, "sglang")
        t.check(resp.dp_rank_count == 2 and len(resp.loads) == 2, f"{addr}: {resp}")
        for got, want in zip(resp.loads, RANKS):
            t.check(got.num_waiting_uncached_tokens == want["num_waiting_uncached_tokens"]
                    and got.num_waiting_reqs == want["num_waiting_reqs"]
                    and got.token_usage == want["token_usage"]
                    and got.gen_throughput == want["gen_throughput"], f"{got} vs {want}")
    f = raw_rank_fields(decode_raw(call("127.0.0.11:8000", "sglang", raw=True)))
    t.check(f[17] == ["1500"], f"field 17: {f}")
    t.check(fixed64_double(f[7][0]) == 0.25 and fixed64_double(f[8][0]) == 1000.0, str(f))
    t.check(grpc_code("127.0.0.11:8000", "vllm") == grpc.StatusCode.UNIMPLEMENTED,
            "another engine's method must be UNIMPLEMENTED")

with t.case("vLLM gRPC: fields 1-11 only, no queued tokens, throughput 0"):
    raw = call("127.0.0.12:8000", "vllm", raw=True)
    f = raw_rank_fields(decode_raw(raw))
    t.check(max(f) <= 11, f"a field above 11: {sorted(f)}")
    t.check(fixed64_double(f[7][0]) == 0.25 and 8 not in f, f"KV 7, throughput 0: {f}")
    t.check(f[3] == ["2"], f"waiting on field 3: {f}")
    t.check("5 {" not in decode_raw(raw), "vLLM has no AggregateMetrics")
    t.check(grpc_code("127.0.0.12:8000", "sglang") == grpc.StatusCode.UNIMPLEMENTED, "sglang")

with t.case("TokenSpeed gRPC: KV on 8, throughput on 9, queued tokens on 14"):
    f = raw_rank_fields(decode_raw(call("127.0.0.13:8000", "tokenspeed", raw=True)))
    t.check(f[14] == ["1500"], f"field 14: {f}")
    t.check(fixed64_double(f[8][0]) == 0.25 and fixed64_double(f[9][0]) == 1000.0, str(f))
    t.check(17 not in f and 7 in f, f"7 is max_running_requests here: {f}")
    resp = call("127.0.0.13:8000", "tokenspeed")
    t.check(resp.loads[1].num_waiting_uncached_tokens == 2500, str(resp))

with t.case("native HTTP /v1/loads: real JSON with the proto's names, two ranks"):
    for addr in ("127.0.0.14:8000", "127.0.0.19:8000", "[::1]:8001"):
        status, body = get(addr, "/v1/loads?include=core")
        t.check(status == 200, f"{addr}: {status}")
        j = json.loads(body)
        t.check(j["dp_rank_count"] == 2 and len(j["loads"]) == 2, body)
        for got, want in zip(j["loads"], RANKS):
            for k in ("dp_rank", "num_waiting_uncached_tokens", "num_waiting_reqs",
                      "num_running_reqs", "token_usage", "gen_throughput"):
                t.check(got[k] == want[k], f"{addr} {k}: {got[k]} != {want[k]}")
    t.check(get("127.0.0.14:8000", "/metrics")[0] == 404, "http-loads serves no /metrics")

with t.case("vLLM /metrics: v1 kv_cache_usage_perc, v0 gpu_cache_usage_perc, per engine"):
    for n, kv_name, other in (("v1", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
                              ("v0", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc")):
        status, text = get(engines[n].traffic, "/metrics")
        t.check(status == 200, f"{n}: {status}")
        m = samples(text)
        t.check(by_rank(m[kv_name], "engine") == {"0": 0.25, "1": 0.5}, f"{n}: {m[kv_name]}")
        t.check(other not in m, f"{n} has {other}")
        t.check(by_rank(m["vllm:num_requests_waiting"], "engine") == {"0": 2.0, "1": 3.0}, n)
        t.check(by_rank(m["vllm:num_requests_running"], "engine") == {"0": 4.0, "1": 6.0}, n)
        t.check("vllm:time_to_first_token_seconds_bucket" in m and
                "python_gc_objects_collected_total" in m, f"{n}: unrelated families missing")
        t.check(get(engines[n].traffic, "/v1/loads")[0] == 404, f"{n} serves /v1/loads")

with t.case("SGLang /metrics: 'sglang:' (<= 0.5.3) and 'sglang_' (>= 0.5.4), per DP rank"):
    for n, pre in (("sc", "sglang:"), ("su", "sglang_"), ("sh", "sglang:")):
        status, text = get(engines[n].traffic, "/metrics")
        t.check(status == 200, f"{n}: {status}")
        m = samples(text)
        want = {"token_usage": {"0": 0.25, "1": 0.5}, "num_queue_reqs": {"0": 2.0, "1": 3.0},
                "num_running_reqs": {"0": 4.0, "1": 6.0},
                "gen_throughput": {"0": 1000.0, "1": 1500.0},
                "cache_hit_rate": {"0": 0.25, "1": 0.25}}
        for k, v in want.items():
            t.check(by_rank(m[pre + k], "dp_rank") == v, f"{n} {pre}{k}: {m.get(pre + k)}")
        wrong = "sglang_" if pre == "sglang:" else "sglang:"
        t.check(not any(k.startswith(wrong) for k in m), f"{n}: both prefixes")
    t.check(get("127.0.0.17:8000", "/v1/loads")[0] == 404, "sglang-metrics serves /v1/loads")

with t.case("plain HTTP worker: 404 on /v1/loads and /metrics, 400 to an HTTP/2 preface"):
    t.check(get("127.0.0.20:8000", "/v1/loads?include=core")[0] == 404, "/v1/loads")
    t.check(get("127.0.0.20:8000", "/metrics")[0] == 404, "/metrics")
    t.check(grpc_code("127.0.0.20:8000", "sglang") != grpc.StatusCode.OK, "gRPC answered")
    with socket.create_connection(("127.0.0.20", 8000), timeout=3) as s:
        s.sendall(PREFACE)
        t.check(s.recv(64).startswith(b"HTTP/1.1 400 Bad Request"), "preface not refused")
    t.check(E.whoami("127.0.0.20:8000") == "pl", "traffic")

with t.case("a gRPC port answers no HTTP/1 load request (connection closed)"):
    conn = http.client.HTTPConnection("127.0.0.11", 8000, timeout=3)
    try:
        conn.request("GET", "/v1/loads")
        conn.getresponse()
        t.check(False, "an HTTP/1 answer on a gRPC port")
    except (http.client.RemoteDisconnected, ConnectionResetError, http.client.BadStatusLine):
        pass
    finally:
        conn.close()

with t.case("loads change at runtime through the state file"):
    new = [E.rank(0, uncached=7, waiting=1, kv=0.75, tp=321.0)]
    for n in ("sg", "hl", "v1", "su"):
        engines[n].set_state({"mode": "ok", "loads": new})
    t.check(call("127.0.0.11:8000", "sglang").loads[0].num_waiting_uncached_tokens == 7, "sg")
    j = json.loads(get("127.0.0.14:8000", "/v1/loads")[1])
    t.check(j["dp_rank_count"] == 1 and j["loads"][0]["token_usage"] == 0.75, "hl")
    m = samples(get("127.0.0.15:8000", "/metrics")[1])
    t.check(list(m["vllm:kv_cache_usage_perc"].values()) == [0.75], "v1")
    m = samples(get("127.0.0.18:8000", "/metrics")[1])
    t.check(list(m["sglang_gen_throughput"].values()) == [321.0], "su")
    for n in ("sg", "hl", "v1", "su"):
        engines[n].set_state(ST)

with t.case("bad answers: truncated JSON, NaN KV, 500, 401, no KV gauge, empty, garbage"):
    hl, v1, su = engines["hl"], engines["v1"], engines["su"]
    hl.update(mode="truncated")
    status, body = get(hl.traffic, "/v1/loads?include=core")
    t.check(status == 200 and body.startswith("{"), f"{status} {body[:40]}")
    try:
        json.loads(body)
        t.check(False, "truncated JSON parsed")
    except ValueError:
        pass
    good = get(v1.traffic, "/metrics")[1]
    v1.update(mode="truncated")
    cut = get(v1.traffic, "/metrics")[1]
    t.check(good.startswith(cut) and len(cut) == len(good) // 2, "truncated exposition")
    v1.update(mode="nan_kv")
    kv = by_rank(samples(get(v1.traffic, "/metrics")[1])["vllm:kv_cache_usage_perc"], "engine")
    t.check(math.isnan(kv["0"]) and kv["1"] == 0.5, f"NaN KV: {kv}")
    hl.update(mode="nan_kv")
    j = json.loads(get(hl.traffic, "/v1/loads")[1])  # Python reads the bare NaN token
    t.check(math.isnan(j["loads"][0]["token_usage"]), "NaN in JSON")
    for mode, code in (("http_500", 500), ("http_401", 401)):
        for e in (hl, v1):
            e.update(mode=mode)
            status = get(e.traffic, "/v1/loads" if e is hl else "/metrics")[0]
            t.check(status == code, f"{e.name} {mode}: {status}")
    su.update(mode="no_kv")
    m = samples(get(su.traffic, "/metrics")[1])
    t.check("sglang_token_usage" not in m and "sglang_num_queue_reqs" in m, "no_kv")
    su.update(mode="empty")
    m = samples(get(su.traffic, "/metrics")[1])
    t.check(not any(k.startswith("sglang") for k in m) and m, "empty exposition")
    hl.update(mode="empty")
    t.check(json.loads(get(hl.traffic, "/v1/loads")[1])["loads"] == [], "empty JSON")
    engines["sg"].update(mode="garbage")
    t.check(call("127.0.0.11:8000", "sglang", raw=True) == b"\xff\xff\xff\xff\x00\x1f\x8b\x08",
            "garbage")
    engines["sg"].update(mode="truncated")
    try:
        call("127.0.0.11:8000", "sglang")
        t.check(False, "a truncated protobuf decoded")
    except grpc.RpcError as e:
        t.check(e.code() == grpc.StatusCode.INTERNAL, f"{e.code()}")  # deserialization failed
    engines["vl"].update(mode="nan_kv")
    t.check(math.isnan(call("127.0.0.12:8000", "vllm").loads[0].token_usage), "gRPC NaN")
    for n in ("hl", "v1", "su", "sg", "vl"):
        engines[n].update(mode="ok")

with t.case("slow body: headers at once, the body dribbles over hang_seconds"):
    hl = engines["hl"]
    hl.update(mode="slow_body", hang_seconds=1.5)
    t0 = time.monotonic()
    status, body = get(hl.traffic, "/v1/loads", timeout=5)
    took = time.monotonic() - t0
    t.check(status == 200 and json.loads(body)["dp_rank_count"] == 2, "body incomplete")
    t.check(took >= 1.2, f"the body came in {took:.2f} s, not dribbled over 1.5 s")
    hl.update(mode="hang", hang_seconds=5)
    try:
        get(hl.traffic, "/v1/loads", timeout=0.5)
        t.check(False, "hang answered before the client's deadline")
    except (TimeoutError, socket.timeout, urllib.error.URLError):
        pass
    hl.update(mode="ok")

with t.case("an HTTP answer on a gRPC port, and a gRPC server on an HTTP port"):
    sg, hl = engines["sg"], engines["hl"]
    with grpc.insecure_channel(sg.traffic) as ch:
        pb2 = PB2["sglang"]
        f = ch.unary_unary(METHOD["sglang"],
                           request_serializer=pb2.GetLoadsRequest.SerializeToString,
                           response_deserializer=pb2.GetLoadsResponse.FromString)
        t.check(len(f(pb2.GetLoadsRequest(), timeout=3).loads) == 2, "before the switch")
        sg.update(mode="http_on_grpc")
        # The switch closes the open connection: the same channel fails.
        deadline, code = time.monotonic() + 10, None
        while time.monotonic() < deadline:
            try:
                f(pb2.GetLoadsRequest(), timeout=3)
            except grpc.RpcError as e:
                code = e.code()
                break
            time.sleep(0.05)
        t.check(code == grpc.StatusCode.UNAVAILABLE, f"open channel after the switch: {code}")
    with socket.create_connection(("127.0.0.11", 8000), timeout=3) as s:
        s.sendall(PREFACE)
        t.check(s.recv(64).startswith(b"HTTP/1.1 200 OK"), "no HTTP/1.1 answer to a preface")
    t.check(E.whoami(sg.traffic) == "sg", "traffic must still be answered")
    sg.update(mode="ok")
    t.check(len(call(sg.traffic, "sglang").loads) == 2, "back to gRPC")
    hl.update(mode="grpc_on_http")
    try:
        get(hl.traffic, "/v1/loads", timeout=3)
        t.check(False, "an HTTP answer from the gRPC server")
    except (http.client.HTTPException, ConnectionError, urllib.error.URLError):
        pass
    t.check(len(call(hl.traffic, "sglang").loads) == 2, "no gRPC server on the HTTP port")
    t.check(E.whoami(hl.traffic) == "hl", "traffic must still be answered")
    hl.update(mode="ok")
    t.check(get(hl.traffic, "/v1/loads")[0] == 200, "back to HTTP")

with t.case("a bearer token: HTTP header and gRPC metadata, counted"):
    hl, sg = engines["hl"], engines["sg"]
    for e in (hl, sg):
        e.update(token="s3cret-t0ken")
    t.check(get(hl.traffic, "/v1/loads")[0] == 401, "no header")
    t.check(get(hl.traffic, "/v1/loads", {"Authorization": "Bearer nope"})[0] == 401, "wrong")
    t.check(get(hl.traffic, "/v1/loads", {"Authorization": "Bearer s3cret-t0ken"})[0] == 200,
            "right token refused")
    t.check(grpc_code(sg.traffic, "sglang") == grpc.StatusCode.UNAUTHENTICATED, "no metadata")
    t.check(grpc_code(sg.traffic, "sglang", metadata=[("authorization", "Bearer x")]) ==
            grpc.StatusCode.UNAUTHENTICATED, "wrong metadata")
    t.check(grpc_code(sg.traffic, "sglang",
                      metadata=[("authorization", "Bearer s3cret-t0ken")]) == grpc.StatusCode.OK,
            "right metadata refused")
    t.check(E.whoami(hl.traffic) == "hl", "traffic needs no token")
    for e in (hl, sg):
        t.check(wait_stats(e, auth_ok=1, auth_bad=2), f"{e.name}: {e.stats()}")
    for e in (hl, sg):
        e.update(token=None)

with t.case("a connection closed without a byte counts as silent (a TCP liveness probe)"):
    pl = engines["pl"]
    before = pl.stat("silent")
    socket.create_connection(("127.0.0.20", 8000), timeout=3).close()
    t.check(wait_stats(pl, silent=before + 1), str(pl.stats()))

with t.case("a killed engine refuses connections"):
    engines["pl"].kill()
    t.check(E.whoami("127.0.0.20:8000") == "ECONNREFUSED", "still answering")

env.cleanup()
t.done()
