#!/usr/bin/python3
"""The poll load a DaemonSet puts on one worker, and what a GetLoads costs it.

Every node's smg-steerd polls every worker once per --load-check-interval over
its own gRPC channel, so one worker answers

    nodes / interval   GetLoads per second.

This emulates that: NODES client channels (one per node) each call GetLoads on
one fake worker (tests/lib/fake_worker.py: Python grpcio, the server stack of
SGLang's gRPC mode) once per INTERVAL, spread evenly, for a few seconds per
rate. It reports the calls answered per second and the CPU time the worker
process used per call (/proc/PID/stat) and in all (cores). Everything runs in
a private network namespace on 127.0.0.0/8; the run is bounded in time.

    /usr/bin/python3 tools/bench/pollload.py [--build build] [--nodes 50,200,500]
        [--interval 1.0] [--seconds 5]

Not part of make test or make bench; docs/deployment.md quotes one run.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "lib"))
import e2e_lib as L  # noqa: E402

import grpc  # noqa: E402

METHOD = "/sglang.grpc.scheduler.SglangScheduler/GetLoads"


def cpu_seconds(pid):
    """utime + stime of a process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_rate(target, nodes, interval, seconds, pid, request):
    """NODES channels, each calling once per INTERVAL with an even phase."""
    chans = [grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
             for _ in range(nodes)]
    calls = [c.unary_unary(METHOD, request_serializer=lambda b: b,
                           response_deserializer=lambda b: b) for c in chans]
    for call in calls:  # connect every channel before measuring
        call(request, timeout=10)
    done, failed = [0], [0]
    lock = threading.Lock()

    def finished(fut):
        with lock:
            if fut.exception() is None:
                done[0] += 1
            else:
                failed[0] += 1

    start = time.monotonic()
    cpu0 = cpu_seconds(pid)
    step = interval / nodes
    sent = 0
    while True:
        due = start + sent * step
        now = time.monotonic()
        if due - start >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        calls[sent % nodes].future(request, timeout=max(1.0, interval)).add_done_callback(
            finished)
        sent += 1
    deadline = time.monotonic() + 10
    while done[0] + failed[0] < sent and time.monotonic() < deadline:
        time.sleep(0.01)
    elapsed = time.monotonic() - start
    cpu = cpu_seconds(pid) - cpu0
    for c in chans:
        c.close()
    return {"nodes": nodes, "rate": nodes / interval, "sent": sent, "ok": done[0],
            "failed": failed[0], "answered_per_s": done[0] / elapsed,
            "cpu_us_per_call": cpu / max(done[0], 1) * 1e6, "cores": cpu / elapsed}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(L.TOP, "build"))
    ap.add_argument("--nodes", default="50,200,500")
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--ranks", type=int, default=1, help="DP ranks the worker reports")
    a = ap.parse_args()
    os.environ["STEER_BUILD"] = os.path.abspath(a.build)
    L.BUILD = os.environ["STEER_BUILD"]
    L.enter_private_netns()
    env = L.Env("pollload")
    try:
        w = L.Worker(env, "w1", "127.0.0.11:8000", "127.0.0.11:30000",
                     {"mode": "ok", "loads": [L.rank(4000, 0.4, 2000.0, waiting=3, r=r)
                                              for r in range(a.ranks)]}).start()
        print(f"# one fake worker (tests/lib/fake_worker.py, grpcio), {a.ranks} DP rank(s); "
              f"each node polls once per {a.interval:g} s on its own channel")
        print(f"{'nodes':>6} {'GetLoads/s':>10} {'answered/s':>10} {'failed':>6} "
              f"{'CPU us/call':>11} {'worker cores':>12}")
        for n in (int(x) for x in a.nodes.split(",")):
            r = run_rate("127.0.0.11:30000", n, a.interval, a.seconds, w.proc.pid, b"")
            print(f"{r['nodes']:6d} {r['rate']:10.0f} {r['answered_per_s']:10.1f} "
                  f"{r['failed']:6d} {r['cpu_us_per_call']:11.0f} {r['cores']:12.3f}")
            sys.stdout.flush()
    finally:
        env.cleanup()


if __name__ == "__main__":
    main()
