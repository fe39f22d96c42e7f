"""The peer part of summary.md: routers sharing their request accounting (--peer).

peer_bpf.csv (peerbench --part bpf): per round and variant (floor: an empty
syscall program; apply1, apply32: steer_peer_apply with 1 and 32 deltas over a
service of 64 backends; probe1, probe32: steer_probe_apply with 1 and 32
packets), the BPF ns per run from bpf_stats and the wall time
of each BPF_PROG_TEST_RUN call (mean, p50, p99 within the round). Figures are
medians over the rounds; "net" is the per-round difference to the floor of
the same round.

peer_prop.csv (peerbench --part prop): one row per sample, R1 -> R2 in ms.
peer_cpu.csv: CPU time of R1 and R2 per phase (idle, samples, busy).
peer_prop_push.csv, peer_cpu_push.csv: the same with --peer-push on.
peer_prop_pushkey.csv, peer_cpu_pushkey.csv: push, and --peer-key.
peer_rtt.txt, peer_rtt_push.txt: R2's smg_steer_peer_rtt_seconds lines at the end.

brief() prints the part's short tables and returns its rows of the targets'
table; section() prints every table.

    peer_summary.py RESULTS_DIR   # prints the section alone
"""
import csv
import os
import re
import statistics
import sys


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def med(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def quantile(xs, q):
    """Nearest-rank quantile of xs (0 < q <= 1)."""
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    i = max(0, min(len(xs) - 1, int(q * len(xs) + 0.5) - 1))
    return xs[i]


def fmt(v, digits=0):
    return "-" if v != v else f"{v:,.{digits}f}"


def bpf_table(rows):
    by = {}
    for r in rows:
        by.setdefault(r["variant"], {})[r["round"]] = r
    floor = by.get("floor", {})
    rounds = len({r["round"] for r in rows})
    print(f"steer_peer_apply as smg-steerd runs it (`steer_dp_peer_apply`: the batch copied "
          f"into the mmapped `steer_peer_in`, one `BPF_PROG_TEST_RUN`), over a service of "
          f"{rows[0].get('backends', '64')} backends whose tree a connect had built, each run "
          f"adding 1,000 tokens per delta and the next taking them back; the floor is an "
          f"empty `SEC(\"syscall\")` program run the same way (no copy); probe1 and probe32 "
          f"are steer_probe_apply (--step-probe) with 1 and 32 packets, a 20 ms and a 1 ms "
          f"step in turn. {rounds} rounds of "
          f"{rows[0]['runs']} runs per variant, interleaved; medians over the rounds of the "
          f"per-round figures (net: minus the same round's floor).\n")
    print("| variant | deltas | BPF ns / run | net ns / run | net ns / delta | "
          "wall ns / call, mean | p50 | p99 | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for v in ("floor", "apply1", "apply32", "probe1", "probe32"):
        rr = by.get(v)
        if not rr:
            continue
        deltas = int(num(next(iter(rr.values()))["deltas"]))
        bpf = med([num(r["bpf_ns_per_run"]) for r in rr.values()])
        net = med([num(r["bpf_ns_per_run"]) - num(floor[k]["bpf_ns_per_run"])
                   for k, r in rr.items() if k in floor])
        per_delta = net / deltas if deltas else float("nan")
        wall_mean = med([num(r["wall_ns_mean"]) for r in rr.values()])
        wall_net = med([num(r["wall_ns_mean"]) - num(floor[k]["wall_ns_mean"])
                        for k, r in rr.items() if k in floor])
        p50 = med([num(r["wall_ns_p50"]) for r in rr.values()])
        p99 = med([num(r["wall_ns_p99"]) for r in rr.values()])
        errors = sum(int(num(r["errors"])) for r in rr.values())
        net_s = "-" if v == "floor" else fmt(net)
        pd_s = "-" if v == "floor" else fmt(per_delta, 1)
        wall_s = fmt(wall_mean) + ("" if v == "floor" else f" (+{fmt(wall_net)})")
        print(f"| {v} | {deltas} | {fmt(bpf)} | {net_s} | {pd_s} | {wall_s} | {fmt(p50)} | "
              f"{fmt(p99)} | {errors} |")
    print()


def interval(res, sfx=""):
    """R1's --peer-interval, as its log says it ("every 1 ms"), or "?"."""
    try:
        with open(os.path.join(res, f"peer_r1{sfx}.log")) as f:
            m = re.search(r"sharing request accounting .* every (\d+(?:\.\d+)? \w+)", f.read())
    except OSError:
        return "?"
    return m.group(1) if m else "?"


def prop_table(rows, every, push=False):
    ok = [r for r in rows if r.get("timeout") == "0"]
    timeouts = len(rows) - len(ok)
    wrong = sum(1 for r in ok if r["tokens_seen"] != r["tokens_sent"])
    up = [num(r["send_to_seen_us"]) / 1e3 for r in ok]
    down = [num(r["answer_to_seen_us"]) / 1e3 for r in ok]
    rel = [num(r["release_to_answer_us"]) / 1e3 for r in ok]
    tokens = ok[0]["tokens_sent"] if ok else "?"
    print(f"Two real smg-steerd, R1 and R2, `--peer` each other on 127.0.0.1 (reports "
          f"every {every}); a keep-alive connection made in R1's cgroup sends one request "
          f"of {tokens} tokens at a time, after a random 1-3 ms pause; a reader of R2's "
          f"pins (`steer_dp_open`, not the owner) watches `peer_pending_tokens` (summed "
          f"over the 2 backends) through the mmap of steer_wire ({reader_words(ok)}). "
          f"**send -> seen**: from just before `send()` until R2's value rises; "
          f"after another random 1-3 ms pause the backend is let answer; **answer -> "
          f"seen**: from the client's receipt of the answer until R2's value is back at 0. "
          + ("With `--peer-push on` R1 reports each request as its bytes leave (the "
             "kernel wakes its peer thread), and the answer with its next tick. "
             if push else
             "Both include the wait for R1's next report tick (uniform over the interval). ") +
          f"{len(rows)} samples, {timeouts} timed out (2 s), {wrong} with another token "
          f"count at R2 than sent.\n")
    print("| ms | p50 | p90 | p99 | max | mean |")
    print("|---|---:|---:|---:|---:|---:|")
    lines = [("send -> seen at R2", up), ("answer -> seen at R2", down),
             ("(release -> client has the answer)", rel)]
    gaps = sorted({r.get("reader_gap_us") or "0" for r in ok}, key=int)
    for gap in gaps if len(gaps) > 1 else []:  # one row per reader, when they took turns
        sub = [r for r in ok if (r.get("reader_gap_us") or "0") == gap]
        lines.append((f"send -> seen, {reader_name(gap)} ({len(sub)})",
                      [num(r["send_to_seen_us"]) / 1e3 for r in sub]))
    for name, xs in lines:
        mean = statistics.mean(xs) if xs else float("nan")
        print(f"| {name} | {fmt(quantile(xs, 0.5), 3)} | {fmt(quantile(xs, 0.9), 3)} | "
              f"{fmt(quantile(xs, 0.99), 3)} | {fmt(max(xs) if xs else float('nan'), 3)} | "
              f"{fmt(mean, 3)} |")
    print()


def reader_name(gap):
    return "tight reader" if gap == "0" else f"a read every {gap} us"


def reader_words(ok):
    """How the samples' reader watched R2 (--reader-gap-us), in words."""
    gaps = sorted({r.get("reader_gap_us") or "0" for r in ok}, key=int)
    if gaps == ["0"] or not gaps:
        return "a tight loop, yielding the CPU between reads"
    return ("the samples take turns between " + " and ".join(
        "a tight loop yielding the CPU" if g == "0" else f"a read every {g} us"
        for g in gaps) + ": a tight reader on these 2 vCPUs competes with the routers "
            "whose exchange it times")


def rtt_line(res, sfx):
    """R2's own measure of the exchange (smg_steer_peer_rtt_seconds), one line."""
    try:
        with open(os.path.join(res, f"peer_rtt{sfx}.txt")) as f:
            lines = f.read().split("\n")
    except OSError:
        return
    vals = {}
    for ln in lines:
        m = re.match(r'smg_steer_peer_rtt_seconds_(sum|count)\{peer="127\.0\.0\.1:9491"\} (\S+)', ln)
        if m:
            vals[m.group(1)] = float(m.group(2))
    if vals.get("count"):
        mean = vals["sum"] / vals["count"]
        print(f"R2's own measure (`smg_steer_peer_rtt_seconds`, from R1's echoes of its reports): "
              f"{vals['count']:.0f} round trips, mean {mean * 1e3:.3f} ms, half of it "
              f"{mean * 5e2:.3f} ms.\n")


def cpu_table(rows):
    print("CPU time of each daemon (utime + stime of the process, /proc/PID/stat; of its "
          "peer thread, the thread named smg-peer, "
          "its schedstat run time) per "
          "phase: **idle** (nothing sent; every full report still goes out every "
          "--peer-timeout/4), **samples** (the propagation samples above), **busy** (a "
          "keep-alive connection through each router sending the given requests per "
          "second, answered at once, so that both report at every tick). Reports and "
          "changes applied are the daemons' /metrics, refreshed once a second (about "
          "+-1 s of reports).\n")
    print("| phase | router | wall s | process CPU ms | peer thread CPU ms | "
          "peer thread % of a core | reports sent/s | received/s | applied/s | requests/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        wall = num(r["wall_s"])

        def rate(key):
            v = num(r.get(key))
            return fmt(v / wall) if wall > 0 else "-"
        print(f"| {r['phase']} | {r['router']} | {fmt(wall, 1)} | {fmt(num(r['proc_cpu_ms']))} | "
              f"{fmt(num(r['peer_sched_ms']), 1)} | {fmt(num(r['peer_cpu_pct']), 2)} | "
              f"{rate('reports_sent')} | {rate('reports_received')} | {rate('applied')} | "
              f"{rate('requests')} |")
    print()


MODES = (("", "tick", "reports every interval"), ("_push", "push", "--peer-push on"),
         ("_pushkey", "push-key", "--peer-push on, reports signed with --peer-key"))


def bpf_figures(rows):
    """{variant: (deltas, BPF ns per run, net of the floor, wall ns per call)}, medians of
    the per-round figures."""
    by = {}
    for r in rows:
        by.setdefault(r["variant"], {})[r["round"]] = r
    floor = by.get("floor", {})
    out = {}
    for v, rr in by.items():
        out[v] = (int(num(next(iter(rr.values()))["deltas"])),
                  med([num(r["bpf_ns_per_run"]) for r in rr.values()]),
                  med([num(r["bpf_ns_per_run"]) - num(floor[k]["bpf_ns_per_run"])
                       for k, r in rr.items() if k in floor]),
                  med([num(r["wall_ns_mean"]) for r in rr.values()]))
    return out


def peer_pct(rows, phase):
    """The peer thread's share of a core in a phase, the higher of the two routers."""
    vals = [num(r["peer_cpu_pct"]) for r in rows if r["phase"] == phase]
    vals = [v for v in vals if v == v]
    return max(vals) if vals else float("nan")


def brief(res):
    bpf = read(os.path.join(res, "peer_bpf.csv"))
    targets = []
    if bpf:
        f = bpf_figures(bpf)
        print("The kernel half, as smg-steerd runs it (one BPF_PROG_TEST_RUN per batch): "
              "steer_peer_apply with 1 and 32 deltas over a service of 64 backends, "
              "steer_probe_apply (--step-probe) with 1 and 32 packets; BPF ns per run, net "
              "of an empty syscall program run the same way (floor), and the wall time of "
              "the call.\n")
        print("| variant | per run | BPF ns per run | net | net per delta or packet | "
              "wall ns per call |")
        print("|---|---:|---:|---:|---:|---:|")
        for v in ("floor", "apply1", "apply32", "probe1", "probe32"):
            if v not in f:
                continue
            d, b, n, w = f[v]
            net = "-" if v == "floor" else fmt(n)
            per = "-" if v == "floor" or not d else fmt(n / d, 1)
            print(f"| {v} | {d} | {fmt(b)} | {net} | {per} | {fmt(w)} |")
        print()
        if "apply32" in f and "probe32" in f:
            targets.append({"target": "Sharing the accounting and the probe: kernel cost "
                                      "(no target)",
                            "measured": "peerbench --part bpf, batches of 32",
                            "figure": f"steer_peer_apply {fmt(f['apply32'][2] / 32, 1)} ns "
                                      f"per delta; steer_probe_apply "
                                      f"{fmt(f['probe32'][2] / 32, 1)} ns per packet",
                            "anchor": f"empty syscall program: {fmt(f['floor'][1])} ns",
                            "part": "peer", "verdict": "report"})
    lines = []
    for sfx, mode, what in MODES:
        prop = read(os.path.join(res, f"peer_prop{sfx}.csv"))
        cpu = read(os.path.join(res, f"peer_cpu{sfx}.csv"))
        if not prop:
            continue
        ok = [r for r in prop if r.get("timeout") == "0"]
        up = [num(r["send_to_seen_us"]) / 1e3 for r in ok]
        down = [num(r["answer_to_seen_us"]) / 1e3 for r in ok]
        lines.append((mode, what, up, down, len(prop) - len(ok), cpu))
    if lines:
        print(f"Two real smg-steerd, R1 and R2, `--peer` each other (reports every "
              f"{interval(res)}): ms from a request sent through R1 until R2's kernel has "
              f"it (send -> seen), and from its answer until R2 has dropped it (answer -> "
              f"seen); the peer thread's share of a core, the higher of the two routers, "
              f"idle and with traffic through both.\n")
        print("| mode | send -> seen p50 | p99 | answer -> seen p50 | p99 | timeouts | "
              "peer thread % idle | % busy |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for mode, what, up, down, timeouts, cpu in lines:
            print(f"| {mode}: {what} | {fmt(quantile(up, 0.5), 3)} | "
                  f"{fmt(quantile(up, 0.99), 3)} | {fmt(quantile(down, 0.5), 3)} | "
                  f"{fmt(quantile(down, 0.99), 3)} | {timeouts} | "
                  f"{fmt(peer_pct(cpu, 'idle'), 2)} | {fmt(peer_pct(cpu, 'busy'), 2)} |")
        print()
        targets.append({"target": "A request sent through one router reaches the other's "
                                  "kernel (no target here: the simulator takes these delays)",
                        "measured": "peerbench --part prop, send -> seen, p50 / p99 ms",
                        "figure": "; ".join(f"{mode} {fmt(quantile(up, 0.5), 2)} / "
                                            f"{fmt(quantile(up, 0.99), 2)}"
                                            for mode, _, up, _, _, _ in lines),
                        "anchor": f"the report interval, {interval(res)}", "part": "peer",
                        "verdict": "report"})
    return targets


def section(res):
    bpf = read(os.path.join(res, "peer_bpf.csv"))
    if not bpf and not read(os.path.join(res, "peer_prop.csv")) and \
            not read(os.path.join(res, "peer_prop_push.csv")):
        return
    print("### peer: routers sharing their request accounting (--peer, peerbench)\n")
    if bpf:
        print("#### The kernel half: steer_peer_apply and steer_probe_apply\n")
        bpf_table(bpf)
    for sfx, _, what in MODES:
        prop = read(os.path.join(res, f"peer_prop{sfx}.csv"))
        cpu = read(os.path.join(res, f"peer_cpu{sfx}.csv"))
        if prop:
            print(f"#### Propagation: R1's request seen at R2 ({what})\n")
            prop_table(prop, interval(res, sfx), push=bool(sfx))
            rtt_line(res, sfx)
        if cpu:
            print(f"#### What the peer thread costs ({what})\n")
            cpu_table(cpu)


if __name__ == "__main__":
    section(sys.argv[1])
