#!/usr/bin/python3
"""Load-source benchmark: smg-steerd's CPU per poll for each source it reads.

Called by tools/bench/run.sh inside its private network namespace:

    sources.py --build build --tmp DIR --cgroup CG --pin-prefix /sys/fs/bpf/X \\
        --backends 256 --rounds 3 --warmup 3 --cycles 8 --csv sources.csv

The peers answer as cheaply as they can, so that the daemon's side is what is
measured: bench/fastworker (gRPC core in C) serves SGLang's, vLLM's and
TokenSpeed's GetLoads on 127.1.0.1 ... port 30001, 30002, 30003; nginx serves
the same bytes on every address for the HTTP sources: /v1/loads JSON with two
DP ranks on port 8001, a vLLM /metrics page (two engines, with the histograms a
real vLLM exposes) on 8002, an SGLang /metrics page on 8003, and nothing but
404 on 8004 (the backend then reports no load and is polled by TCP connect).

Each run configures N backends of one source (explicit loads= and engine=,
except "tcp", which is probed: no loads=), polled every second, in services
of at most 128 backends. Sources are interleaved round by round, each run
with a fresh daemon. After the warm-up, the daemon's CPU time (user + system,
/proc/PID/stat) over a window of whole cycles without scrapes, divided by the
polls in the window, is its CPU per poll. Every poll of the window must
succeed (the run is reported failed otherwise).
"""
import argparse
import ipaddress
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctlplane  # noqa: E402  (spawn, stop, cpu_seconds, wait_publishes, poll_counts)

BASE = "127.1.0"
PER_SERVICE = 128
METRICS_PORT = 9471
SOURCES = ["grpc-sglang", "grpc-vllm", "grpc-tokenspeed", "http-loads",
           "http-metrics-vllm", "http-metrics-sglang", "tcp"]
GRPC_PORT = {"grpc-sglang": 30001, "grpc-vllm": 30002, "grpc-tokenspeed": 30003}
HTTP_PORT = {"http-loads": 8001, "http-metrics-vllm": 8002, "http-metrics-sglang": 8003,
             "tcp": 8004}


def addr(i):
    """The i-th consecutive address from 127.1.0.1, as bench/fastworker binds them."""
    return str(ipaddress.IPv4Address("127.1.0.1") + i)


def loads_json():
    ranks = [{"dp_rank": r, "num_running_reqs": 0, "num_waiting_reqs": 0,
              "num_total_reqs": 0, "num_used_tokens": 0, "max_total_num_tokens": 500000,
              "token_usage": 0.0, "gen_throughput": 0.0, "cache_hit_rate": 0.0,
              "utilization": 0.0, "max_running_requests": 256,
              "num_waiting_uncached_tokens": 0} for r in range(2)]
    return json.dumps({"timestamp": "1970-01-01T00:00:00Z", "version": "bench",
                       "dp_rank_count": 2, "loads": ranks})


def histogram(name, labels, bounds):
    out = [f"# HELP {name} Histogram of {name}.", f"# TYPE {name} histogram"]
    for b in bounds:
        out.append(f'{name}_bucket{{{labels},le="{b}"}} 0.0')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} 0.0')
    out.append(f"{name}_count{{{labels}}} 0.0")
    out.append(f"{name}_sum{{{labels}}} 0.0")
    return out


def vllm_metrics():
    """What a vLLM v1 server with two engines exposes, in shape and size."""
    lines = []
    secs = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
            7.5, 10.0, 20.0, 40.0, 80.0]
    toks = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
    for e in range(2):
        lab = f'engine="{e}",model_name="meta-llama/Llama-3.1-8B-Instruct"'
        for g, v in (("num_requests_running", 0), ("num_requests_waiting", 0),
                     ("kv_cache_usage_perc", 0.0)):
            lines += [f"# HELP vllm:{g} {g}.", f"# TYPE vllm:{g} gauge", f"vllm:{g}{{{lab}}} {v}"]
        for c in ("prompt_tokens_total", "generation_tokens_total", "num_preemptions_total",
                  "prefix_cache_queries_total", "prefix_cache_hits_total"):
            lines += [f"# HELP vllm:{c} {c}.", f"# TYPE vllm:{c} counter",
                      f"vllm:{c}{{{lab}}} 0.0"]
        for h in ("time_to_first_token_seconds", "time_per_output_token_seconds",
                  "e2e_request_latency_seconds", "request_queue_time_seconds",
                  "request_inference_time_seconds", "request_prefill_time_seconds",
                  "request_decode_time_seconds"):
            lines += histogram(f"vllm:{h}", lab, secs)
        for h in ("request_prompt_tokens", "request_generation_tokens",
                  "iteration_tokens_total", "request_max_num_generation_tokens"):
            lines += histogram(f"vllm:{h}", lab, toks)
    for p in ("python_gc_objects_collected_total", "process_virtual_memory_bytes",
              "process_resident_memory_bytes", "process_cpu_seconds_total"):
        lines += [f"# HELP {p} {p}.", f"# TYPE {p} gauge", f"{p} 0.0"]
    return "\n".join(lines) + "\n"


def sglang_metrics():
    lines = []
    for r in range(2):
        lab = f'dp_rank="{r}",model_name="Qwen/Qwen3-8B"'
        for g in ("token_usage", "num_queue_reqs", "num_running_reqs", "gen_throughput",
                  "cache_hit_rate", "num_used_tokens", "spec_accept_length"):
            lines += [f"# HELP sglang:{g} {g}.", f"# TYPE sglang:{g} gauge",
                      f"sglang:{g}{{{lab}}} 0.0"]
        lines += histogram("sglang:time_to_first_token_seconds", lab,
                           [0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0])
    return "\n".join(lines) + "\n"


def start_nginx(args):
    root = os.path.join(args.tmp, "www")
    for d in ("loads", "vllm", "sglang"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    with open(os.path.join(root, "loads", "loads.json"), "w") as f:
        f.write(loads_json())
    bodies = {"vllm": vllm_metrics(), "sglang": sglang_metrics()}
    for d, body in bodies.items():
        with open(os.path.join(root, d, "metrics"), "w") as f:
            f.write(body)
    conf = os.path.join(args.tmp, "nginx-sources.conf")
    with open(conf, "w") as f:
        f.write(f"""daemon off;
user root;  # the bodies live in the run's private (0700) temp directory
worker_processes 1;
pid {args.tmp}/nginx-sources.pid;
error_log {args.tmp}/nginx-sources.err warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    client_body_temp_path {args.tmp}/nginx-body;
    server {{ listen {HTTP_PORT['http-loads']} reuseport;
        location = /v1/loads {{ default_type application/json; alias {root}/loads/loads.json; }}
        location / {{ return 404; }} }}
    server {{ listen {HTTP_PORT['http-metrics-vllm']} reuseport;
        location = /metrics {{ default_type "text/plain; version=0.0.4"; alias {root}/vllm/metrics; }}
        location / {{ return 404; }} }}
    server {{ listen {HTTP_PORT['http-metrics-sglang']} reuseport;
        location = /metrics {{ default_type "text/plain; version=0.0.4"; alias {root}/sglang/metrics; }}
        location / {{ return 404; }} }}
    server {{ listen {HTTP_PORT['tcp']} reuseport; location / {{ return 404; }} }}
}}
""")
    out = open(os.path.join(args.tmp, "nginx-sources.out"), "w")
    p = ctlplane.spawn(["nginx", "-c", conf, "-p", args.tmp], stdout=out, stderr=subprocess.STDOUT)
    return p, {k: len(v) for k, v in bodies.items()}


def start_fastworkers(args, n):
    ws = []
    for src, port in GRPC_PORT.items():
        ready = os.path.join(args.tmp, f"fw-{src}.out")
        out = open(ready, "w")
        w = ctlplane.spawn([os.path.join(args.build, "bench", "fastworker"), "--many", str(n),
                            "--base", addr(0), "--port", str(port),
                            "--engine", src.split("-")[1]], stdout=out, stderr=subprocess.STDOUT)
        ws.append((w, ready))
    deadline = time.monotonic() + 120
    for w, ready in ws:
        while time.monotonic() < deadline:
            if w.poll() is not None:
                raise RuntimeError(f"fastworker exited: {open(ready).read()[-1000:]}")
            if "READY" in open(ready).read():
                break
            time.sleep(0.1)
    return [w for w, _ in ws]


def backend_line(src, i):
    a = addr(i)
    if src in GRPC_PORT:
        return (f"      - {{address: '{a}:8000', loads: 'grpc://{a}:{GRPC_PORT[src]}', "
                f"engine: {src.split('-')[1]}}}")
    if src == "http-loads":
        return (f"      - {{address: '{a}:8000', "
                f"loads: 'http://{a}:{HTTP_PORT[src]}/v1/loads?include=core'}}")
    if src.startswith("http-metrics"):
        return (f"      - {{address: '{a}:8000', loads: 'http://{a}:{HTTP_PORT[src]}/metrics', "
                f"engine: {src.split('-')[2]}}}")
    return f"      - '{a}:{HTTP_PORT['tcp']}'"  # no loads=: probed, ends as tcp


def write_config(path, src, n):
    n_svcs = (n + PER_SERVICE - 1) // PER_SERVICE
    lines = ["load-check-interval: 1s", "log-level: warn",
             f"metrics-listen: 127.0.0.1:{METRICS_PORT}", "services:"]
    for s in range(n_svcs):
        lines += [f"  - vip: 127.0.9.{s + 1}:8000", "    backends:"]
        lines += [backend_line(src, i) for i in range(s, n, n_svcs)]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return n_svcs


def run_one(args, rnd, src, out):
    cfg = os.path.join(args.tmp, f"src-{src}-{rnd}.yaml")
    n_svcs = write_config(cfg, src, args.backends)
    log_path = os.path.join(args.tmp, f"steerd-src-{src}-{rnd}.log")
    with open(log_path, "w") as log:
        daemon = ctlplane.spawn([os.path.join(args.build, "smg-steerd"), "--config", cfg,
                                 "--pin-path", f"{args.pin_prefix}-src-{rnd}",
                                 "--cgroup", args.cgroup], stdout=log, stderr=subprocess.STDOUT)
    try:
        ctlplane.wait_publishes(METRICS_PORT, daemon, n_svcs, 60)
        time.sleep(args.warmup)
        m0 = ctlplane.wait_publishes(METRICS_PORT, daemon, 0, 10)
        c0, t0 = ctlplane.cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(args.cycles)
        m1 = ctlplane.wait_publishes(METRICS_PORT, daemon, 0, 10)
        c1, t1 = ctlplane.cpu_seconds(daemon.pid), time.monotonic()
    finally:
        rc = ctlplane.stop(daemon)
    ok0, bad0 = ctlplane.poll_counts(m0)
    ok1, bad1 = ctlplane.poll_counts(m1)
    # "tcp" answers are counted as unimplemented (alive, no load).
    unimpl = (m1.get("smg_steer_polls_total:unimplemented", 0)
              - m0.get("smg_steer_polls_total:unimplemented", 0))
    good = ok1 - ok0 + (unimpl if src == "tcp" else 0)
    failed = bad1 - bad0 - (unimpl if src == "tcp" else 0)
    cpu = (c1[0] - c0[0]) + (c1[1] - c0[1])
    polls = good + failed
    us = cpu / polls * 1e6 if polls else float("nan")
    out.write(f"{rnd},{src},{args.backends},{int(good)},{int(failed)},{cpu:.3f},"
              f"{t1 - t0:.2f},{us:.2f},{rc}\n")
    out.flush()
    print(f"  load source {src:20s} round {rnd}: {int(polls)} polls ({int(failed)} failed), "
          f"{us:.1f} us CPU per poll, exit {rc}", flush=True)
    return us if failed == 0 and polls > 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--cgroup", required=True)
    ap.add_argument("--pin-prefix", required=True)
    ap.add_argument("--backends", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--cycles", type=int, default=8)
    ap.add_argument("--sources", default=",".join(SOURCES))
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, ctlplane.stop_all)
    signal.signal(signal.SIGINT, ctlplane.stop_all)
    sources = args.sources.split(",")
    nginx, sizes = start_nginx(args)
    print(f"  /metrics bodies: vLLM {sizes['vllm']} bytes, SGLang {sizes['sglang']} bytes",
          flush=True)
    workers = start_fastworkers(args, args.backends)
    per = {s: [] for s in sources}
    try:
        with open(args.csv, "w") as out:
            out.write("round,source,backends,polls_ok,polls_failed,daemon_cpu_s,window_s,"
                      "cpu_us_per_poll,exit\n")
            for rnd in range(1, args.rounds + 1):
                for src in sources:
                    us = run_one(args, rnd, src, out)
                    if us is not None:
                        per[src].append(us)
    finally:
        for w in workers:
            ctlplane.stop(w)
        ctlplane.stop(nginx)
    base = statistics.median(per["grpc-sglang"]) if per.get("grpc-sglang") else None
    print("  median CPU per poll (and ratio to gRPC SGLang GetLoads):")
    for s in sources:
        if not per[s]:
            print(f"    {s:20s} no complete run")
            continue
        med = statistics.median(per[s])
        ratio = f"{med / base:.2f}x" if base else "n/a"
        print(f"    {s:20s} {med:7.1f} us   {ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
