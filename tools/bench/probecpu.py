#!/usr/bin/python3
"""What the step probe (--step-probe) costs a running smg-steerd: the CPU of
its probe thread and the kernel half's BPF time, while every backend streams
a step every --step seconds (tests/lib/probe_worker.py). Prints a Markdown table.

    probecpu.py --pid PID --pin DIR --metrics 127.0.0.1:9483 --backends 16 \
        --step 0.02 --warmup 3 --seconds 20

- thread: the thread of PID named smg-probe; its run time from
  /proc/PID/task/TID/schedstat (ns on a CPU), and the process's utime + stime;
- packets and applies: smg_steer_probe_steps_total (summed over backends)
  and smg_steer_probe_applied_total from /metrics (refreshed at each publish:
  within one load-check interval);
- BPF: steer_probe_apply's run_time_ns / run_cnt (kernel.bpf_stats_enabled
  set for the window, put back after), the program found by the steer_wire
  map pinned in --pin, so that another daemon's copy is never read.
"""
import argparse
import json
import os
import subprocess
import time
import urllib.request

HZ = os.sysconf("SC_CLK_TCK")


def thread_ns(pid, name):
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == name:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as g:
                    return int(g.read().split()[0])
    raise SystemExit(f"probecpu: no thread {name} in {pid}")


def process_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / HZ


def metrics(addr):
    text = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
    steps = applied = 0
    for line in text.splitlines():
        if line.startswith("smg_steer_probe_steps_total{"):
            steps += float(line.rsplit(" ", 1)[1])
        elif line.startswith("smg_steer_probe_applied_total "):
            applied = float(line.rsplit(" ", 1)[1])
    return steps, applied


def bpftool(*args):
    return json.loads(subprocess.run(["bpftool", "-j"] + list(args), check=True,
                                     capture_output=True, text=True).stdout)


def apply_prog(pin):
    wire = bpftool("map", "show", "pinned", os.path.join(pin, "steer_wire"))["id"]
    for p in bpftool("prog", "show"):
        if p.get("name") == "steer_probe_apply" and wire in p.get("map_ids", []):
            return p["id"]
    raise SystemExit("probecpu: no steer_probe_apply on this data plane")


def bpf_stats(prog):
    p = bpftool("prog", "show", "id", str(prog))
    return p.get("run_time_ns", 0), p.get("run_cnt", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--pin", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--backends", type=int, required=True)
    ap.add_argument("--step", type=float, required=True)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--seconds", type=float, default=20)
    a = ap.parse_args()
    prog = apply_prog(a.pin)
    deadline = time.monotonic() + 30
    while metrics(a.metrics)[1] == 0:  # the first applies published
        if time.monotonic() > deadline:
            raise SystemExit("probecpu: no probe packet applied within 30 s")
        time.sleep(0.2)
    time.sleep(a.warmup)
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        t0, th0, pr0 = time.monotonic(), thread_ns(a.pid, "smg-probe"), process_ms(a.pid)
        m0, b0 = metrics(a.metrics), bpf_stats(prog)
        time.sleep(a.seconds)
        t1, th1, pr1 = time.monotonic(), thread_ns(a.pid, "smg-probe"), process_ms(a.pid)
        m1, b1 = metrics(a.metrics), bpf_stats(prog)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)
    wall = t1 - t0
    steps, applied = (m1[0] - m0[0]) / wall, (m1[1] - m0[1]) / wall
    runs = (b1[1] - b0[1]) / wall
    ns_run = (b1[0] - b0[0]) / max(b1[1] - b0[1], 1)
    ns_pkt = (b1[0] - b0[0]) / max(m1[1] - m0[1], 1)
    th_ms = (th1 - th0) / 1e6
    print(f"smg-steerd with `--wire-estimator fluid-step --step-probe /v1/completions` over "
          f"{a.backends} backends (tests/lib/probe_worker.py, one completion event every "
          f"{a.step * 1000:g} ms per backend, streams that never end), no client traffic; "
          f"{wall:.1f} s after {a.warmup:g} s of warm-up. Packets and applies from /metrics "
          f"(refreshed once per load-check interval, 1 s), BPF time of steer_probe_apply from "
          f"bpf_stats over the same window.\n")
    print("| backends | step ms | packets/s | applied/s | program runs/s | BPF ns / run | "
          "BPF ns / packet | probe thread CPU ms | probe thread % of a core | process % |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(f"| {a.backends} | {a.step * 1000:g} | {steps:,.0f} | {applied:,.0f} | {runs:,.0f} | "
          f"{ns_run:,.0f} | {ns_pkt:,.0f} | {th_ms:,.0f} | {th_ms / wall / 10:.2f} | "
          f"{(pr1 - pr0) / wall / 10:.2f} |")


if __name__ == "__main__":
    main()
