#!/usr/bin/python3
"""Control-plane benchmark: the real smg-steerd against fake workers at scale.

Called by tools/bench/run.sh inside its private network namespace:

    ctlplane.py --build build --tmp DIR --cgroup CG --pin-prefix /sys/fs/bpf/X \\
        --scales 100,1000,5000 --rounds 2 --warmup 3 --cycles 6 \\
        --samples-csv ctl_cycles.csv --runs-csv ctl_runs.csv [--grpcmem-csv ctl_grpc.csv]

One fake worker process serves GetLoads on 127.1.0.1, 127.1.0.2, ... port
30000 for the largest scale: bench/fastworker (gRPC core in C, --worker fast,
the default) or tests/lib/fake_worker.py --many (--worker python, the reference
implementation, which is too slow to answer thousands of calls per second
and then sets the cycle length itself). A run at scale N
configures the first N of them as backends (traffic address port 8000 on the
same IP; nothing connects to it), in services of at most 250 backends
(1,000 backends: 4 services, 5,000: 20), polled every second. Scales are
interleaved round by round (100, 1000, 5000, 100, 1000, 5000, ...), each run
with a fresh daemon: after the warm-up, every completed cycle's
smg_steer_cycle_seconds and smg_steer_publish_seconds are read from /metrics
(a cycle is seen by smg_steer_table_publishes_total advancing), then VmRSS and
VmHWM from /proc/PID/status, and the CPU time the daemon and the fake worker
used over a window of cycles without scrapes (/proc/PID/stat). With
--grpcmem-csv, bench/grpcmem first measures what the same number of bare
gRPC channels cost (one GetLoads call each): the memory anchor. Each daemon removes its pins on
SIGTERM; the caller removes the pin prefix, cgroup and temp dir anyway.
"""
import argparse
import ipaddress
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = "/usr/bin/python3"
MAX_PER_SERVICE = 250
LOADS_BASE = ipaddress.IPv4Address("127.1.0.1")
LOADS_PORT = 30000
TRAFFIC_PORT = 8000
METRICS_PORT = 9470
CLK_TCK = os.sysconf("SC_CLK_TCK")

procs = []


def spawn(argv, **kw):
    p = subprocess.Popen(argv, **kw)
    procs.append(p)
    return p


def stop(p, timeout=10):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in procs:
        procs.remove(p)
    return p.returncode


def stop_all(*_):
    for p in list(procs):
        stop(p, 5)
    sys.exit(1)


def cpu_seconds(pid):
    """(user, system) CPU time of a process and all its threads, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def write_config(path, n, metrics_port):
    """YAML: ceil(n / 250) services, backends spread evenly over them."""
    n_svcs = (n + MAX_PER_SERVICE - 1) // MAX_PER_SERVICE
    lines = ["load-check-interval: 1s", "log-level: warn",
             f"metrics-listen: 127.0.0.1:{metrics_port}", "services:"]
    for s in range(n_svcs):
        lines.append(f"  - vip: 127.0.9.{s + 1}:{TRAFFIC_PORT}")
        lines.append("    backends:")
        for i in range(s, n, n_svcs):
            ip = LOADS_BASE + i
            lines.append(f"      - address: {ip}:{TRAFFIC_PORT}")
            lines.append(f"        loads: {ip}:{LOADS_PORT}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return n_svcs


def scrape(port):
    url = f"http://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = s.name
            if s.name == "smg_steer_polls_total":
                key = f"{s.name}:{s.labels.get('result', '')}"
            out[key] = out.get(key, 0.0) + s.value
    return out


def try_scrape(port):
    try:
        return scrape(port)
    except (urllib.error.URLError, OSError, ConnectionError, ValueError):
        return None


def wait_publishes(port, daemon, count, timeout):
    """Wait until the summed publish counter reaches count; returns the scrape."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise RuntimeError(f"smg-steerd exited with {daemon.returncode}")
        m = try_scrape(port)
        if m and m.get("smg_steer_table_publishes_total", 0) >= count:
            return m
        time.sleep(0.05)
    raise RuntimeError(f"no {count} publishes within {timeout} s")


def poll_counts(m):
    ok = m.get("smg_steer_polls_total:ok", 0)
    total = sum(v for k, v in m.items() if k.startswith("smg_steer_polls_total:"))
    return ok, total - ok


def quiet_window(args, port, daemon, worker, n_svcs):
    """CPU time of the daemon and the worker over whole cycles, with no scrapes in
    between (rendering /metrics for thousands of backends costs the daemon CPU)."""
    m0 = wait_publishes(port, daemon, 0, 10)
    d0, w0, t0 = cpu_seconds(daemon.pid), sum(cpu_seconds(worker.pid)), time.monotonic()
    time.sleep(args.cycles)
    m1 = wait_publishes(port, daemon, 0, 10)
    d1, w1, t1 = cpu_seconds(daemon.pid), sum(cpu_seconds(worker.pid)), time.monotonic()
    cycles = int((m1.get("smg_steer_table_publishes_total", 0)
                  - m0.get("smg_steer_table_publishes_total", 0)) // n_svcs)
    cpu = {"m0": m0, "daemon": (d1[0] - d0[0], d1[1] - d0[1]), "worker": w1 - w0}
    return cpu, m1, cycles, t1 - t0


def sample_gauges(args, port, n_svcs, m):
    """The cycle and publish gauges of each of the next cycles (scraped every 0.2 s)."""
    last_pub = m.get("smg_steer_table_publishes_total", 0)
    samples, scrape_ms = [], []
    deadline = time.monotonic() + args.cycles * 3 + 10
    while len(samples) < args.cycles and time.monotonic() < deadline:
        time.sleep(0.2)
        t = time.monotonic()
        got = try_scrape(port)
        if not got:
            continue
        scrape_ms.append((time.monotonic() - t) * 1000)
        m = got
        pub = m.get("smg_steer_table_publishes_total", 0)
        if pub >= last_pub + n_svcs:
            last_pub = pub
            samples.append((m.get("smg_steer_cycle_seconds", float("nan")),
                            m.get("smg_steer_publish_seconds", float("nan"))))
    return samples, scrape_ms, m


def run_one(args, rnd, n, worker, samples_out, runs_out):
    tag = f"{args.worker}-r{rnd}-{n}"
    cfg = os.path.join(args.tmp, f"ctl-{tag}.yaml")
    port = METRICS_PORT
    n_svcs = write_config(cfg, n, port)
    pin = f"{args.pin_prefix}-ctl-{tag}"
    log_path = os.path.join(args.tmp, f"steerd-{tag}.log")
    with open(log_path, "w") as log:
        daemon = spawn([os.path.join(args.build, "smg-steerd"), "--config", cfg,
                        "--pin-path", pin, "--cgroup", args.cgroup],
                       stdout=log, stderr=subprocess.STDOUT)
    try:
        # Each cycle publishes every service once.
        wait_publishes(port, daemon, n_svcs, 30)
        time.sleep(args.warmup)
        cpu, m_end, quiet_cycles, quiet_wall = quiet_window(args, port, daemon, worker, n_svcs)
        samples, scrape_ms, m_end = sample_gauges(args, port, n_svcs, m_end)
        m0 = cpu["m0"]
        ok0, bad0 = poll_counts(m0)
        ok1, bad1 = poll_counts(m_end)
        healthy = m_end.get("smg_steer_backend_healthy", 0)
        dur_n = m_end.get("smg_steer_poll_duration_seconds_count", 0) - \
            m0.get("smg_steer_poll_duration_seconds_count", 0)
        dur_s = m_end.get("smg_steer_poll_duration_seconds_sum", 0) - \
            m0.get("smg_steer_poll_duration_seconds_sum", 0)
        poll_ms = dur_s / dur_n * 1000 if dur_n > 0 else float("nan")
        rss, hwm = status_kib(daemon.pid, "VmRSS"), status_kib(daemon.pid, "VmHWM")
        anon, threads = status_kib(daemon.pid, "RssAnon"), status_kib(daemon.pid, "Threads")
    finally:
        rc = stop(daemon)
    for i, (cyc, pubs) in enumerate(samples):
        samples_out.write(f"{rnd},{n},{n_svcs},{i + 1},{cyc:.6f},{pubs:.6f}\n")
    qc = max(quiet_cycles, 1)
    runs_out.write(f"{rnd},{n},{n_svcs},{len(samples)},{quiet_cycles},{rss},{hwm},{anon},"
                   f"{threads},{cpu['daemon'][0] / qc * 1000:.2f},"
                   f"{cpu['daemon'][1] / qc * 1000:.2f},"
                   f"{sum(cpu['daemon']) / quiet_wall * 100:.1f},"
                   f"{cpu['worker'] / quiet_wall * 100:.1f},{poll_ms:.2f},"
                   f"{statistics.median(scrape_ms) if scrape_ms else float('nan'):.2f},"
                   f"{int(healthy)},{int(ok1 - ok0)},{int(bad1 - bad0)},{rc}\n")
    samples_out.flush()
    runs_out.flush()
    print(f"  control plane, {args.worker} worker, {n:5d} backends, round {rnd}: "
          f"{len(samples)} cycles, "
          f"RSS {rss / 1024:.1f} MiB, exit {rc}", flush=True)


def start_worker(args, n):
    state = os.path.join(args.tmp, "fake-many.json")
    ready = os.path.join(args.tmp, f"fake-many-{args.worker}.out")
    out = open(ready, "w")
    if args.worker == "python":
        argv = [PY, os.path.join(TOP, "tests", "lib", "fake_worker.py"), "--many", str(n),
                "--base", str(LOADS_BASE), "--port", str(LOADS_PORT), "--state", state,
                "--threads", str(args.worker_threads),
                "--pb2-dir", os.path.join(args.build, "py")]
    else:
        argv = [os.path.join(args.build, "bench", "fastworker"), "--many", str(n),
                "--base", str(LOADS_BASE), "--port", str(LOADS_PORT)]
    w = spawn(argv, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if w.poll() is not None:
            break
        with open(ready) as f:
            if "READY" in f.read():
                return w
        time.sleep(0.2)
    with open(ready) as f:
        raise RuntimeError(f"{args.worker} worker --many {n} did not start:\n"
                           f"{f.read()[-2000:]}")


def grpc_anchor(args, scales):
    """RSS of N bare gRPC channels with one GetLoads call each, per scale."""
    with open(args.grpcmem_csv, "w") as f:
        f.write("backends,ok_calls,rss_before_kib,rss_after_kib,kib_per_channel\n")
        for n in scales:
            p = subprocess.run([os.path.join(args.build, "bench", "grpcmem"), "--base",
                                str(LOADS_BASE), "--port", str(LOADS_PORT), "--count", str(n)],
                               capture_output=True, text=True, timeout=120)
            if p.returncode != 0:
                raise RuntimeError(f"grpcmem failed: {p.stderr[-2000:]}")
            f.write(p.stdout)
            print(f"  bare gRPC channels: {n}: {p.stdout.strip()}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--cgroup", required=True)
    ap.add_argument("--pin-prefix", required=True)
    ap.add_argument("--scales", default="100,1000,5000")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--worker", choices=("fast", "python"), default="fast",
                    help="bench/fastworker (C) or tests/lib/fake_worker.py --many")
    ap.add_argument("--worker-threads", type=int, default=16, help="python worker's threads")
    ap.add_argument("--samples-csv", required=True)
    ap.add_argument("--runs-csv", required=True)
    ap.add_argument("--grpcmem-csv", help="also measure bare gRPC channels (bench/grpcmem)")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, stop_all)
    signal.signal(signal.SIGINT, stop_all)
    scales = [int(s) for s in args.scales.split(",")]
    t0 = time.monotonic()
    worker = start_worker(args, max(scales))
    print(f"  {args.worker} worker serving {max(scales)} addresses after "
          f"{time.monotonic() - t0:.1f} s", flush=True)
    if args.grpcmem_csv:
        grpc_anchor(args, scales)
    with open(args.samples_csv, "w") as so, open(args.runs_csv, "w") as ro:
        so.write("round,backends,services,cycle,cycle_s,publish_s\n")
        ro.write("round,backends,services,sampled_cycles,quiet_cycles,vmrss_kib,vmhwm_kib,"
                 "rss_anon_kib,threads,daemon_user_ms_per_cycle,daemon_sys_ms_per_cycle,"
                 "daemon_cpu_pct,worker_cpu_pct,poll_mean_ms,scrape_ms,healthy,polls_ok,"
                 "polls_failed,exit\n")
        try:
            for rnd in range(1, args.rounds + 1):
                for n in scales:
                    run_one(args, rnd, n, worker, so, ro)
        finally:
            stop(worker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
