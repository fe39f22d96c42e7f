"""The offcost part of summary.md: what the programs cost with the statistics off.

offcost.csv has one row per block of operations (phase off or on, round,
workload, cgroup: ship, nowire, empty, none): the median of the block's
per-operation wall times, and with the statistics on the BPF run time per
operation. Each comparison is the per-round difference of two blocks' medians
(paired: the same round, adjacent blocks), summarised by its median over the
rounds, the quartiles of the differences and a 95 % confidence interval of
that median (order statistics).

brief() prints the part's short table and returns its rows of the targets'
table; section() prints every table.
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
           "sock_release, sockops while it connects and cgroup_skb on each packet",
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


def brief(res):
    rows = read(os.path.join(res, "offcost.csv"))
    if not rows:
        return []
    present = {r["workload"] for r in rows}
    n_rounds = len({r["round"] for r in rows if r["phase"] == "off"})
    print(f"Wall ns per operation, statistics off, {n_rounds} rounds: the operation in a "
          f"cgroup with no program (none), and what each arm adds to it (median of the "
          f"paired per-round differences, 95 % interval): ship = the data plane as "
          f"smg-steerd attaches it; nowire = the same with `--wire-estimator off`; empty = "
          f"an empty program of each hook type ship attaches. bpf_stats = the programs' "
          f"own run time per operation with the statistics on, ship (empty).\n")
    print("| workload | none | ship - none | nowire - none | empty - none | bpf_stats ns |")
    print("|---|---:|---:|---:|---:|---:|")
    for w in (w for w in WORKLOADS if w in present):
        level = med(by_round(rows, "off", w, "none", "median_ns"))
        cells = []
        for arm in ("ship", "nowire", "empty"):
            m, lo, hi = median_ci(paired(rows, "off", w, arm, w, "none"))
            cells.append("-" if m != m else f"{m:.0f} ({lo:.0f} to {hi:.0f})")
        sb = med(by_round(rows, "on", w, "ship", "bpf_ns_per_op"))
        eb = med(by_round(rows, "on", w, "empty", "bpf_ns_per_op"))
        print(f"| {w} | {level:.0f} | " + " | ".join(cells) + f" | {sb:.0f} ({eb:.0f}) |")
    print()
    for w in (w for w in WORKLOADS if w in present):
        print(f"- {w}: {WHAT[w]}")
    st = paired(rows, "off", "steered", "ship", "tcp", "ship")
    if st:
        m, lo, hi = median_ci(st)
        print(f"- a steered connection (to a virtual address, one backend) costs {m:.0f} ns "
              f"({lo:.0f} to {hi:.0f}) more than the same connection made directly, both in "
              f"ship")
    print()
    targets = []
    for w, cg, what in (("udp", "ship", "connect4 + sock_release (UDP connect, close)"),
                        ("tcp", "ship", "a whole TCP connection, request accounting on"),
                        ("tcp", "nowire", "a whole TCP connection, `--wire-estimator off`")):
        xs = paired(rows, "off", w, cg, w, "none")
        if xs:
            m, lo, hi, v = verdict(xs)
            targets.append({"target": "Unsteered connection <= 150 ns",
                            "measured": f"offcost, wall, statistics off: {what}",
                            "figure": f"{m:.0f} ({lo:.0f} to {hi:.0f})",
                            "anchor": "no program (cgroup none)", "part": "off",
                            "verdict": v.split(" ")[0].replace("MISSED", "**missed**")})
    xs = paired(rows, "off", "pkt", "ship", "pkt", "empty")
    if xs:
        m, lo, hi = median_ci(xs)
        targets.append({"target": "An unsteered socket pays nothing beyond one early return "
                                  "per packet",
                        "measured": "offcost, wall, statistics off: a UDP packet each way",
                        "figure": f"{m:.0f} ({lo:.0f} to {hi:.0f}) ns beyond empty programs",
                        "anchor": "empty programs of the same hooks", "part": "off",
                        "verdict": "report"})
    return targets


def section(res):
    rows = read(os.path.join(res, "offcost.csv"))
    if not rows:
        return
    hooks = read(os.path.join(res, "offcost_hooks.csv"))
    print("### off: the programs' cost with the statistics off (offcost)\n")
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
        print("| hook | attach type | program type | ship | nowire | empty | none |")
        print("|---|---|---|---:|---:|---:|---:|")
        for h in hooks:
            print(f"| {h['hook']} | {h['attach_type']} | {h['prog_type']} | "
                  f"{h['ship_effective']} | {h.get('nowire_effective', '-')} | "
                  f"{h['empty_effective']} | {h['none_effective']} |")
        print()
    n_off, runs = off_check(rows)
    rounds_off = len({r["round"] for r in rows if r["phase"] == "off"})
    rounds_on = len({r["round"] for r in rows if r["phase"] == "on"})
    print(f"Statistics off: {rounds_off} rounds; program runs counted in the {n_off} off "
          f"blocks with programs: **{runs:.0f}** (0: no statistics were on). "
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
    xs = paired(rows, "off", "pkt", "ship", "pkt", "empty")
    if xs:
        m, lo, hi = median_ci(xs)
        print(f"| unsteered packet pair: ship beyond empty programs (the early returns) | "
              f"{m:.0f} ({lo:.0f} to {hi:.0f}) | report |")
    print()
