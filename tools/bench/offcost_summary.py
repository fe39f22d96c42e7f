"""The offcost part of summary.md: what the programs cost with the statistics off.

offcost.csv has one row per block of operations (phase off or on, round,
workload, cgroup: ship, nowire, empty, none, and trace with --tr-obj): the
median of the block's per-operation wall times, and with the statistics on the
BPF run time per operation. Each comparison is the
per-round difference of two blocks' medians (paired: the same round, adjacent
blocks), summarised by its median over the rounds, the quartiles of the
differences and a 95 % confidence interval of that median (order statistics).
"""
import csv
import math
import os
import statistics

LIMIT_NS = 150.0
WORKLOADS = ("udp", "tcp", "pkt")
WHAT = {
    "udp": "UDP socket + connect + close (connect4 + sock_release, no packet)",
    "tcp": "whole unsteered TCP connection (connect, 1 byte, close): connect4, "
           "sock_release and cgroup_skb on each packet",
    "pkt": "one UDP packet out and one in on an unsteered socket (cgroup_skb egress + ingress)",
}


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


def by_round(rows, phase, workload, cgroup, key):
    return {r["round"]: num(r[key]) for r in rows
            if r["phase"] == phase and r["workload"] == workload and r["cgroup"] == cgroup}


def diffs(a, b):
    return sorted(a[k] - b[k] for k in a if k in b and a[k] == a[k] and b[k] == b[k])


def median_ci(xs):
    """The median of xs with a distribution-free 95 % interval (order statistics)."""
    n = len(xs)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    half = 0.98 * math.sqrt(n)
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return statistics.median(xs), xs[lo], xs[hi]


def quartiles(xs):
    if len(xs) < 4:
        return float("nan"), float("nan")
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def paired(rows, phase, wa, ca, wb, cb, key="median_ns"):
    """Per-round differences (wa in ca) - (wb in cb), sorted."""
    return diffs(by_round(rows, phase, wa, ca, key), by_round(rows, phase, wb, cb, key))


def fmt_pair(xs):
    if not xs:
        return "-", "-", "-"
    m, lo, hi = median_ci(xs)
    q1, q3 = quartiles(xs)
    return f"{m:.0f}", f"{lo:.0f} to {hi:.0f}", f"{q1:.0f} to {q3:.0f}"


def hook_cols(rows):
    if not rows:
        return []
    return [k[:-len("_ns_per_op")] for k in rows[0] if k.endswith("_ns_per_op")
            and k != "bpf_ns_per_op"]


def off_check(rows):
    """With the statistics off the kernel counts no run: any count means they were on."""
    off = [r for r in rows if r["phase"] == "off" and r["cgroup"] != "none"]
    runs = sum(num(r["bpf_runs_per_op"]) * num(r["ops"]) for r in off)
    return len(off), runs


def state_table(rows):
    """The same differences split by the VM's state in the round.

    On a shared VM the same operation runs about 1.5 times slower for tens of
    milliseconds at a time (the host's other tenants); every cost scales with
    it. A round is 'fast' when its none block is under the midpoint between the
    5th and 95th percentiles of all none blocks of that workload.
    """
    lines = []
    for w in WORKLOADS:
        level = by_round(rows, "off", w, "none", "median_ns")
        vals = sorted(level.values())
        if len(vals) < 20:
            continue
        p5, p95 = vals[len(vals) // 20], vals[len(vals) * 19 // 20]
        if p95 < 1.2 * p5:
            lines.append(f"| {w} | one state ({p5:.0f}-{p95:.0f} ns) | {len(vals)} | - | - |")
            continue
        mid = (p5 + p95) / 2
        for name, keep in (("fast", lambda v: v < mid), ("slow", lambda v: v >= mid)):
            rounds = {k for k, v in level.items() if keep(v)}
            sub = [r for r in rows if r["round"] in rounds and r["phase"] == "off"]
            lv = statistics.median([level[k] for k in rounds]) if rounds else float("nan")
            sn = fmt_pair(paired(sub, "off", w, "ship", w, "none"))
            en = fmt_pair(paired(sub, "off", w, "empty", w, "none"))
            lines.append(f"| {w} | {name}: none {lv:.0f} ns per op | {len(rounds)} | "
                         f"{sn[0]} ({sn[1]}) | {en[0]} ({en[1]}) |")
    if not lines:
        return
    print("The same, statistics off, by the VM's state in the round (a shared VM runs "
          "everything about 1.5 times slower for tens of milliseconds at a time):\n")
    print("| workload | state | rounds | ship - none (95 % CI) | empty - none (95 % CI) |")
    print("|---|---|---:|---|---|")
    for line in lines:
        print(line)
    print()


def hook_table(rows, cols, workloads):
    print("Runs and bpf_stats ns per operation by hook (statistics on, medians over rounds; "
          "ship / empty; the hooks that ran):\n")
    print("| workload | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for w in workloads:
        cells = []
        for h in cols:
            s_runs = by_round(rows, "on", w, "ship", f"{h}_runs_per_op")
            s_ns = by_round(rows, "on", w, "ship", f"{h}_ns_per_op")
            e_ns = by_round(rows, "on", w, "empty", f"{h}_ns_per_op")
            vals = [v for v in s_runs.values() if v == v]
            if not vals:
                cells.append("-")
                continue
            floor = f"{statistics.median(e_ns.values()):.0f}" if e_ns else "-"
            cells.append(f"{statistics.median(vals):.2f} runs, "
                         f"{statistics.median(s_ns.values()):.0f} / {floor} ns")
        print(f"| {w} | " + " | ".join(cells) + " |")
    print()


def verdict(xs):
    m, lo, hi = median_ci(xs)
    v = ("met" if hi <= LIMIT_NS else "MISSED" if lo > LIMIT_NS else "undecided") + \
        f" (<= {LIMIT_NS:g})"
    return m, lo, hi, v


def med(d):
    vals = [v for v in d.values() if v == v]
    return statistics.median(vals) if vals else float("nan")


TP_HOOKS = ("tp_send_length", "tp_tcp_probe")


def trace_tables(rows, present):
    """The tracepoint ablation (arm trace) next to the shipped cgroup_skb design."""
    print("Request accounting from two BTF tracepoints (ablation, arm **trace**: nowire's "
          "cgroup and data plane, plus steer_wire_tr.bpf.o's tp_btf/sock_send_length and "
          "tp_btf/tcp_probe programs on nowire's maps, attached host-wide around trace's "
          "blocks only, outside the timed operations; an attach or detach patches the "
          "kernel's text and slows the next milliseconds, so every block of every arm "
          "follows a few milliseconds of its workload, untimed: `--tr-settle-ms`). Wall ns "
          "per operation, statistics off, paired per round:\n")
    print("| workload | **trace - nowire**: the tracepoints' own cost (95 % CI; quartiles) | "
          "ship - nowire: cgroup_skb's own cost (95 % CI) | **trace - none**: whole design "
          "(95 % CI; quartiles) | ship - none (95 % CI) | trace - ship (95 % CI) |")
    print("|---|---|---|---|---|---|")
    for w in (w for w in WORKLOADS if w in present):
        tn = fmt_pair(paired(rows, "off", w, "trace", w, "nowire"))
        sn = fmt_pair(paired(rows, "off", w, "ship", w, "nowire"))
        tw = fmt_pair(paired(rows, "off", w, "trace", w, "none"))
        sw = fmt_pair(paired(rows, "off", w, "ship", w, "none"))
        ts = fmt_pair(paired(rows, "off", w, "trace", w, "ship"))
        print(f"| {w} | **{tn[0]}** ({tn[1]}; {tn[2]}) | {sn[0]} ({sn[1]}) | **{tw[0]}** "
              f"({tw[1]}; {tw[2]}) | {sw[0]} ({sw[1]}) | {ts[0]} ({ts[1]}) |")
    print()
    st = paired(rows, "off", "steered", "trace", "steered", "ship")
    if st:
        a = fmt_pair(st)
        b = fmt_pair(paired(rows, "off", "steered", "trace", "steered", "nowire"))
        c = fmt_pair(paired(rows, "off", "steered", "ship", "steered", "nowire"))
        d = fmt_pair(paired(rows, "off", "steered", "trace", "tcp", "none"))
        e = fmt_pair(paired(rows, "off", "steered", "ship", "tcp", "none"))
        print("A steered connection's whole wall cost by accounting design (statistics off, "
              "paired per round; steered blocks run right after their arm's tcp block):\n")
        print("| **steered trace - steered ship** (95 % CI; quartiles) | steered trace - "
              "steered nowire | steered ship - steered nowire | steered trace - unsteered "
              "none | steered ship - unsteered none |")
        print("|---|---|---|---|---|")
        print(f"| **{a[0]}** ({a[1]}; {a[2]}) | {b[0]} ({b[1]}) | {c[0]} ({c[1]}) | "
              f"{d[0]} ({d[1]}) | {e[0]} ({e[1]}) |")
        print()
    on = [w for w in WORKLOADS + ("steered",) if w in present]
    if not any(r["phase"] == "on" and r["cgroup"] == "trace" for r in rows):
        return
    print("The tracepoint programs with the statistics on (medians over rounds of runs and "
          "bpf_stats ns per operation). A tracepoint runs for every socket of the host: the "
          "runs count the listener's and the sink's sockets (cgroup none, never steered: "
          "one early return each) and any other process's sockets while the block ran, so "
          "runs per operation above the measured socket's own show them:\n")
    print("| workload | tp_send_length | tp_tcp_probe | tracepoints, ns per op | trace, all "
          "programs, ns per op | ship, all programs, ns per op |")
    print("|---|---|---|---:|---:|---:|")
    for w in on:
        cells = []
        tp_ns = {}
        for h in TP_HOOKS:
            runs = by_round(rows, "on", w, "trace", f"{h}_runs_per_op")
            ns = by_round(rows, "on", w, "trace", f"{h}_ns_per_op")
            for k, v in ns.items():
                tp_ns[k] = tp_ns.get(k, 0.0) + v
            cells.append(f"{med(runs):.2f} runs, {med(ns):.0f} ns")
        print(f"| {w} | {cells[0]} | {cells[1]} | {med(tp_ns):.0f} | "
              f"{med(by_round(rows, 'on', w, 'trace', 'bpf_ns_per_op')):.0f} | "
              f"{med(by_round(rows, 'on', w, 'ship', 'bpf_ns_per_op')):.0f} |")
    print()


def section(res):
    rows = read(os.path.join(res, "offcost.csv"))
    if not rows:
        return
    hooks = read(os.path.join(res, "offcost_hooks.csv"))
    print("## 8. The programs' cost with the statistics off (offcost)\n")
    print("Sibling cgroups in the bench's namespace: **ship** = the data plane as "
          "smg-steerd attaches it (wire accounting on, 64 virtual addresses published), "
          "**empty** = an empty program (`r0 = 1`) of each hook type ship attaches, "
          "**nowire** = the data plane with request accounting off (`--wire-estimator off`: "
          "no cgroup_skb program), "
          "**none** = no program. Blocks of operations, each operation timed by itself "
          "(CLOCK_MONOTONIC); a block's median per operation; per round, the blocks of a "
          "workload run back to back in each cgroup (the first rotates). Figures are "
          "medians over rounds of the paired per-round differences, with a 95 % interval of "
          "that median and the quartiles of the differences.\n")
    if hooks:
        print("Hooks ship attaches (empty mirrors each; programs in effect at each cgroup, "
              "ancestors included):\n")
        print("| hook | attach type | program type | ship | nowire | empty | none | trace |")
        print("|---|---|---|---:|---:|---:|---:|---:|")
        for h in hooks:
            print(f"| {h['hook']} | {h['attach_type']} | {h['prog_type']} | "
                  f"{h['ship_effective']} | {h.get('nowire_effective', '-')} | "
                  f"{h['empty_effective']} | {h['none_effective']} | "
                  f"{h.get('trace_effective') or '-'} |")
        print()
    n_off, runs = off_check(rows)
    n_tr, runs_tr = off_check([r for r in rows if r["cgroup"] == "trace"])
    rounds_off = len({r["round"] for r in rows if r["phase"] == "off"})
    rounds_on = len({r["round"] for r in rows if r["phase"] == "on"})
    tr = (f" (of them in the {n_tr} trace blocks, tracepoint programs included: "
          f"**{runs_tr:.0f}**)") if n_tr else ""
    print(f"Statistics off: {rounds_off} rounds; program runs counted in the {n_off} off "
          f"blocks with programs: **{runs:.0f}**{tr} (0: no statistics were on). "
          f"Statistics on (BPF_ENABLE_STATS): {rounds_on} rounds.\n")

    print("| workload | none, ns per op | bpf_stats ship | bpf_stats floor (empty) | "
          "bpf_stats net | **wall, stats off: ship - none** (95 % CI; quartiles) | "
          "empty - none | ship - empty | nowire - none | wall, stats on: ship - none |")
    print("|---|---:|---:|---:|---:|---|---|---|---|---:|")
    present = {r["workload"] for r in rows}
    for w in (w for w in WORKLOADS if w in present):
        level = statistics.median(by_round(rows, "off", w, "none", "median_ns").values() or
                                  [float("nan")])
        ship_bpf = by_round(rows, "on", w, "ship", "bpf_ns_per_op")
        empty_bpf = by_round(rows, "on", w, "empty", "bpf_ns_per_op")
        net = diffs(ship_bpf, empty_bpf)
        sn = fmt_pair(paired(rows, "off", w, "ship", w, "none"))
        en = fmt_pair(paired(rows, "off", w, "empty", w, "none"))
        se = fmt_pair(paired(rows, "off", w, "ship", w, "empty"))
        nw = fmt_pair(paired(rows, "off", w, "nowire", w, "none"))
        on = fmt_pair(paired(rows, "on", w, "ship", w, "none"))
        sb = statistics.median(ship_bpf.values()) if ship_bpf else float("nan")
        eb = statistics.median(empty_bpf.values()) if empty_bpf else float("nan")
        nb = statistics.median(net) if net else float("nan")
        print(f"| {w} | {level:.0f} | {sb:.0f} | {eb:.0f} | {nb:.0f} | **{sn[0]}** "
              f"({sn[1]}; {sn[2]}) | {en[0]} ({en[1]}; {en[2]}) | {se[0]} ({se[1]}; "
              f"{se[2]}) | {nw[0]} ({nw[1]}) | {on[0]} ({on[1]}) |")
    print()
    for w in WORKLOADS:
        print(f"- {w}: {WHAT[w]}")
    print("- pkt per packet: half the pkt figures (one egress and one ingress run per "
          "operation)\n")
    state_table(rows)
    if "trace" in {r["cgroup"] for r in rows}:
        trace_tables(rows, present)

    ran = [r for r in rows if r["phase"] == "on" and r["cgroup"] == "ship"]
    cols = [h for h in hook_cols(rows) if any(num(r[f"{h}_runs_per_op"]) > 0.5 for r in ran)]
    if cols:
        hook_table(rows, cols, [w for w in WORKLOADS + ("steered",) if w in present])

    st = paired(rows, "off", "steered", "ship", "tcp", "ship")
    if st:
        sn = paired(rows, "off", "steered", "ship", "tcp", "none")
        on = paired(rows, "on", "steered", "ship", "tcp", "ship")
        bpf = by_round(rows, "on", "steered", "ship", "bpf_ns_per_op")
        a, b = fmt_pair(st), fmt_pair(sn)
        print("Steered (a TCP connection to a virtual address, steered over its one backend, "
              "against the same connection made directly; wall ns per connection, statistics "
              "off):\n")
        print("| steered - unsteered (both in ship) | steered in ship - unsteered in none | "
              "stats on: steered - unsteered | bpf_stats, steered connection, all programs |")
        print("|---|---|---:|---:|")
        bmed = statistics.median(bpf.values()) if bpf else float("nan")
        print(f"| {a[0]} ({a[1]}; {a[2]}) | {b[0]} ({b[1]}; {b[2]}) | {fmt_pair(on)[0]} | "
              f"{bmed:.0f} |")
        print()

    print("| target | wall, statistics off | verdict |")
    print("|---|---:|---|")
    for w, what in (("udp", "unsteered connection, per-connection programs (connect4 + "
                            "release)"),
                    ("tcp", "unsteered TCP connection, every program that runs for it")):
        xs = paired(rows, "off", w, "ship", w, "none")
        if xs:
            m, lo, hi, v = verdict(xs)
            print(f"| {what} | {m:.0f} ({lo:.0f} to {hi:.0f}) | {v} |")
    xs = paired(rows, "off", "tcp", "nowire", "tcp", "none")
    if xs:
        m, lo, hi, v = verdict(xs)
        print(f"| the same with request accounting off (`--wire-estimator off`) | "
              f"{m:.0f} ({lo:.0f} to {hi:.0f}) | {v} |")
    xs = paired(rows, "off", "tcp", "trace", "tcp", "none")
    if xs:
        m, lo, hi, v = verdict(xs)
        print(f"| the same with request accounting from the tracepoints (ablation: trace - "
              f"none) | {m:.0f} ({lo:.0f} to {hi:.0f}) | {v} |")
    xs = paired(rows, "off", "pkt", "ship", "pkt", "empty")
    if xs:
        m, lo, hi = median_ci(xs)
        print(f"| unsteered packet pair: ship beyond empty programs (the early returns) | "
              f"{m:.0f} ({lo:.0f} to {hi:.0f}) | report |")
    print()
