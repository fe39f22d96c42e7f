#!/usr/bin/python3
"""Turn the raw CSVs of tools/bench/run.sh into summary.md (markdown on stdout).

    summarize.py RESULTS_DIR > RESULTS_DIR/summary.md

summary.md has, in order: the targets (one table: each target, what measures
it, this run's figure, its anchor, the part of `make bench` that measures it
and the verdict), one short section per part, the machine and the commands,
and the details of every part (every table the raw results give).

Every figure is a median over the interleaved rounds; every comparison is
against an anchor measured in the same run. Paired ratios (same round) are
shown as their median and min-max next to the ratio of medians.
"""
import contextlib
import csv
import io
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ingress_summary  # noqa: E402
import offcost_summary  # noqa: E402
import peer_summary  # noqa: E402

NAN = float("nan")
TARGETS = {
    "vip/direct per-connection time": 1.02,
    "vip/haproxy per-connection time": 0.55,
    "steered ns at 256 backends": 1000.0,
    "equal/spread at 256 backends": 1.2,
    "unsteered ns": 150.0,
    "cycle ms at 1000 backends": 50.0,
    "RSS MiB at 1000 backends": 32.0,
    "HTTP /metrics poll CPU / gRPC GetLoads poll CPU": 1.5,
    "wire ns per message": 150.0,
    "overload ns": 30.0,
    "affinity ns": 100.0,
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
        return NAN


def med(rows, key):
    vals = [num(r[key]) for r in rows if r.get(key) not in (None, "")]
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else NAN


def mid(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else NAN


def f0(v, d=0):
    """A number for a table cell; "-" when not measured."""
    return "-" if v != v else f"{v:,.{d}f}"


def verdict(value, limit):
    if value != value:  # NaN
        return "not measured"
    return f"met (<= {limit:g})" if value <= limit else f"MISSED (> {limit:g})"


def short_verdict(value, limit, at_least=False):
    if value != value:
        return "not measured"
    ok = value >= limit if at_least else value <= limit
    return "met" if ok else "**missed**"


def paired_ratios(rows, key, num_path, den_path, col="path"):
    """num/den of key per round (rows of the same round paired)."""
    by = {}
    for r in rows:
        by.setdefault(r["round"], {})[r[col]] = num(r[key])
    return [v[num_path] / v[den_path] for v in by.values()
            if num_path in v and den_path in v and v[den_path] > 0]


def paired(rows, key, num_path, den_path):
    """'median (min-max)' of the per-round ratios num/den."""
    ratios = paired_ratios(rows, key, num_path, den_path)
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def add_cpu_per(rows, count_key, out_key):
    """CPU time of the client's and the servers' cgroups per connection or request."""
    for r in rows:
        n = num(r.get(count_key) or 0)
        if "client_cpu_us" in r and n > 0:
            r[out_key] = (num(r["client_cpu_us"]) + num(r["server_cpu_us"])) / n
        else:
            r[out_key] = "nan"


def row(target, measured, figure, anchor, part, verdict_text):
    return {"target": target, "measured": measured, "figure": figure, "anchor": anchor,
            "part": part, "verdict": verdict_text}


# ---- conn and wrk --------------------------------------------------------------------------

PATH_WORDS = {
    "direct": "direct: one backend, no BPF",
    "direct64": "direct64: the client round-robins over the 64 backends, no BPF",
    "vip": "vip: the virtual address, steered by the BPF programs over the 64 backends",
    "vipnw": "vipnw: the same with request accounting off (`--wire-estimator off`)",
    "haproxy": "haproxy: HAProxy mode tcp, balance leastconn, the 64 backends",
    "nginx": "nginx: nginx stream, least_conn, the 64 backends",
}


def conn_vs(rows, conc, den):
    sub = [r for r in rows if r["concurrency"] == conc]
    return mid(paired_ratios(sub, "per_conn_us", "vip", den))


def pair_rows(rows):
    """{(a, b, placement): row} of conn_pairs.csv."""
    out = {}
    for r in rows:
        a, _, cond = r["label_a"].partition("/")
        out[(a, r["label_b"], cond)] = r
    return out


def wrk_vs(rows, den):
    # time per request vip/den = requests/s den / requests/s vip, per round
    return mid(paired_ratios(rows, "requests_per_s", den, "vip"))


def conn_brief(res):
    rows = read(os.path.join(res, "conn.csv"))
    pairs = read(os.path.join(res, "conn_pairs.csv"))
    wrk = read(os.path.join(res, "wrk.csv"))
    direct_t, haproxy_t, nginx_t = [], [], []
    lim_d = TARGETS["vip/direct per-connection time"]
    lim_h = TARGETS["vip/haproxy per-connection time"]
    if pairs:
        pr = pair_rows(pairs)
        conds = list(dict.fromkeys(k[2] for k in pr))
        print("Side by side in one thread (`connbench --pair`): blocks of connections "
              "alternate between the two paths; ratio of the block means of time per "
              "connection, with the quartiles of the per-pair ratios. free = placed by the "
              "scheduler; onecpu = the client and the backends on one CPU; twocpu = the "
              "client on CPU 0, the backends on CPU 1.\n")
        print("| placement | vip / direct | vipnw / direct (accounting off) | vip / direct64 |")
        print("|---|---:|---:|---:|")
        for c in conds:
            cells = []
            for a, b in (("vip", "direct"), ("vipnw", "direct"), ("vip", "direct64")):
                r = pr.get((a, b, c))
                cells.append("-" if not r else f"{num(r['ratio_mean']):.3f} "
                             f"({num(r['ratio_mean_q1']):.3f}-{num(r['ratio_mean_q3']):.3f})")
            print(f"| {c} | " + " | ".join(cells) + " |")
        print()
        for c in conds:
            r, nw = pr.get(("vip", "direct", c)), pr.get(("vipnw", "direct", c))
            if not r:
                continue
            v = num(r["ratio_mean"])
            vn = num(nw["ratio_mean"]) if nw else NAN
            direct_t.append(row(
                "Steered short connection <= 1.02 x direct (time per connection)",
                f"connbench --pair, {c}", f"{f0(v, 3)} (accounting off: {f0(vn, 3)})",
                "direct", "conn",
                f"{short_verdict(v, lim_d)} (off: {short_verdict(vn, lim_d)})"))
    if rows:
        concs = sorted({r["concurrency"] for r in rows}, key=int)
        n_rounds = len({r["round"] for r in rows})
        print(f"Connections per second and time per connection (connect, read one byte, "
              f"close), medians of {n_rounds} interleaved rounds; vs direct = median of the "
              f"per-round ratios of time per connection.\n")
        head = "| path |"
        for c in concs:
            head += f" conns/s, {c} client{'s' if c != '1' else ''} | µs per conn | vs direct |"
        print(head)
        print("|---|" + "---:|---:|---:|" * len(concs))
        for p in dict.fromkeys(r["path"] for r in rows):
            cells = []
            for c in concs:
                sub = [r for r in rows if r["concurrency"] == c]
                pr = [r for r in sub if r["path"] == p]
                ratio = mid(paired_ratios(sub, "per_conn_us", p, "direct"))
                cells += [f0(med(pr, "conns_per_s")), f0(med(pr, "per_conn_us"), 2),
                          f0(ratio, 3)]
            print(f"| {p} | " + " | ".join(cells) + " |")
        print()
        for c in concs:
            who = "sequential" if c == "1" else f"{c} clients"
            v = conn_vs(rows, c, "direct")
            direct_t.append(row("Steered short connection <= 1.02 x direct (time per "
                                "connection)", f"connbench rounds, {who}", f0(v, 3), "direct",
                                "conn", short_verdict(v, lim_d)))
            v = conn_vs(rows, c, "haproxy")
            haproxy_t.append(row("Steered <= 0.55 x HAProxy leastconn (mode tcp)",
                                 f"connbench rounds, {who}", f0(v, 3), "HAProxy", "conn",
                                 short_verdict(v, lim_h)))
        cells = [f"{f0(conn_vs(rows, c, 'nginx'), 3)} ({'sequential' if c == '1' else c})"
                 for c in concs]
        if wrk:
            cells.append(f"{f0(wrk_vs(wrk, 'nginx'), 3)} (wrk)")
        nginx_t.append(row("Steered against nginx stream least_conn (no target)",
                           "connbench rounds, wrk", "; ".join(cells), "nginx stream",
                           "conn, wrk", "anchor"))
    if wrk:
        wrk_brief(wrk)
        v = wrk_vs(wrk, "direct")
        direct_t.append(row("Steered short connection <= 1.02 x direct (time per connection)",
                            "wrk, time per request", f0(v, 3), "direct", "wrk",
                            short_verdict(v, lim_d)))
        v = wrk_vs(wrk, "haproxy")
        haproxy_t.append(row("Steered <= 0.55 x HAProxy leastconn (mode tcp)", "wrk",
                             f0(v, 3), "HAProxy", "wrk", short_verdict(v, lim_h)))
    return direct_t + haproxy_t + nginx_t


def wrk_brief(wrk):
    n_rounds = len({r["round"] for r in wrk})
    print(f"HTTP over short connections (`wrk -t2 -c16`, Connection: close, 64 nginx "
          f"backends), medians of {n_rounds} rounds; vs direct = time per request (inverse "
          f"requests/s), median of the per-round ratios.\n")
    print("| path | requests/s | p50 ms | p99 ms | vs direct |")
    print("|---|---:|---:|---:|---:|")
    for p in dict.fromkeys(r["path"] for r in wrk):
        pr = [r for r in wrk if r["path"] == p]
        ratio = mid(paired_ratios(wrk, "requests_per_s", "direct", p))
        print(f"| {p} | {f0(med(pr, 'requests_per_s'))} | {f0(med(pr, 'p50_ms'), 3)} | "
              f"{f0(med(pr, 'p99_ms'), 3)} | {f0(ratio, 3)} |")
    print()


def conn_section(res):
    rows = read(os.path.join(res, "conn.csv"))
    if not rows:
        return
    add_cpu_per(rows, "attempts", "cpu_us_per_conn")
    print("### conn: rounds (connbench: connect, read 1 byte, close)\n")
    print("Paths: " + "; ".join(PATH_WORDS[p] for p in ("direct", "direct64", "vip", "haproxy",
                                                         "nginx")) +
          ". Latency = connect() to first byte. CPU per connection = CPU time (cgroup "
          "cpu.stat) of the client plus every backend and proxy process, divided by the "
          "connections made: less sensitive to the neighbours on a shared machine than wall "
          "time.\n")
    for conc in sorted({r["concurrency"] for r in rows}, key=int):
        sub = [r for r in rows if r["concurrency"] == conc]
        paths = list(dict.fromkeys(r["path"] for r in sub))
        n_rounds = len({r["round"] for r in sub})
        print(f"#### Concurrency {conc} ({'sequential' if conc == '1' else conc + ' threads'}), "
              f"median of {n_rounds} rounds\n")
        print("| path | conns/s | p50 us | p99 us | per-connection us | CPU us per connection | "
              "backends reached | errors | per-conn time vs direct |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = med([r for r in sub if r["path"] == "direct"], "per_conn_us")
        m = {}
        for p in paths:
            pr = [r for r in sub if r["path"] == p]
            m[p] = med(pr, "per_conn_us")
            print(f"| {p} | {med(pr, 'conns_per_s'):.0f} | {med(pr, 'p50_us'):.1f} | "
                  f"{med(pr, 'p99_us'):.1f} | {m[p]:.2f} | {med(pr, 'cpu_us_per_conn'):.1f} | "
                  f"{int(med(pr, 'backends_seen'))} | "
                  f"{sum(int(r['errors']) for r in pr)} | {m[p] / base:.3f} |")
        print()
        print("| ratio | per-connection time, ratio of medians | per-connection time, "
              "per-round ratios: median (min-max) | p50 latency, per-round ratios | CPU per "
              "connection, per-round ratios | target (judged on the per-round median of "
              "per-connection time) |")
        print("|---|---:|---:|---:|---:|---|")
        for den, key in (("direct", "vip/direct per-connection time"), ("direct64", None),
                         ("haproxy", "vip/haproxy per-connection time"), ("nginx", None)):
            if "vip" not in m or den not in m:
                continue
            pr = paired_ratios(sub, "per_conn_us", "vip", den)
            tgt = verdict(statistics.median(pr), TARGETS[key]) if key and pr else "-"
            print(f"| vip/{den} | {m['vip'] / m[den]:.3f} | "
                  f"{paired(sub, 'per_conn_us', 'vip', den)} | "
                  f"{paired(sub, 'p50_us', 'vip', den)} | "
                  f"{paired(sub, 'cpu_us_per_conn', 'vip', den)} | {tgt} |")
        print()


def conn_pairs_section(res):
    rows = read(os.path.join(res, "conn_pairs.csv"))
    if not rows:
        return
    print("### conn: sequential, side by side in one thread (connbench --pair-addr)\n")
    print("Blocks of connections alternate between the two paths (ABBA order), the client "
          "moving between their cgroups; each connection is timed from socket() to close(). "
          "Ratio = median over block pairs of the blocks' median (or mean) times, with the "
          "quartiles of the per-pair ratios.\n")
    print("vip = steered, request accounting on (the default); vipnw = the same data plane "
          "with `--wire-estimator off`; free = placed by the scheduler; onecpu = the client "
          "and the backends pinned to one CPU, so that no connection waits for a vCPU to wake "
          "from idle or for another CPU; twocpu = the client on CPU 0, the backends on "
          "CPU 1.\n")
    print("| pair/condition | blocks of | pairs | p50 us, vip | p50 us, other | ratio of block "
          "medians (q1-q3) | ratio of block means (q1-q3) | errors | target |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        judged = r["label_a"].startswith("vip") and r["label_b"] == "direct"
        key = "vip/direct per-connection time" if judged else None
        tgt = verdict(num(r["ratio_mean"]), TARGETS[key]) if key else "-"
        a, _, cond = r["label_a"].partition("/")
        print(f"| {a}/{r['label_b']}/{cond} | {r['block']} | {r['pairs']} | "
              f"{num(r['p50_a_us']):.2f} | {num(r['p50_b_us']):.2f} | "
              f"{num(r['ratio_p50']):.4f} ({num(r['ratio_p50_q1']):.3f}-"
              f"{num(r['ratio_p50_q3']):.3f}) | {num(r['ratio_mean']):.4f} "
              f"({num(r['ratio_mean_q1']):.3f}-{num(r['ratio_mean_q3']):.3f}) | "
              f"{r['errors']} | {tgt} |")
    print()


def wrk_section(res):
    rows = read(os.path.join(res, "wrk.csv"))
    if not rows:
        return
    add_cpu_per(rows, "requests", "cpu_us_per_req")
    print("### wrk: HTTP requests over short connections (Connection: close)\n")
    print("wrk -t2 -c16 against 64 nginx HTTP backends (`return 200 \"ok\"`): direct = one "
          "backend; vip, haproxy, nginx stream as in conn.\n")
    print("| path | requests/s | p50 ms | p99 ms | CPU us per request | errors | time per request "
          "vs direct |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    m = {}
    paths = list(dict.fromkeys(r["path"] for r in rows))
    for p in paths:
        m[p] = med([r for r in rows if r["path"] == p], "requests_per_s")
    for p in paths:
        pr = [r for r in rows if r["path"] == p]
        print(f"| {p} | {m[p]:.0f} | {med(pr, 'p50_ms'):.3f} | {med(pr, 'p99_ms'):.3f} | "
              f"{med(pr, 'cpu_us_per_req'):.1f} | {sum(int(r['errors']) for r in pr)} | "
              f"{m['direct'] / m[p]:.3f} |")
    print()
    print("| ratio (time per request = inverse requests/s) | of medians | per-round ratios: "
          "median (min-max) | CPU per request, per-round ratios |")
    print("|---|---:|---:|---:|")
    for den in ("direct", "haproxy", "nginx"):
        if "vip" in m and den in m:
            # time ratio vip/den = rps(den) / rps(vip); paired() takes num/den of the key
            print(f"| vip/{den} | {m[den] / m['vip']:.3f} | "
                  f"{paired(rows, 'requests_per_s', den, 'vip')} | "
                  f"{paired(rows, 'cpu_us_per_req', 'vip', den)} |")
    print()


# ---- dec --------------------------------------------------------------------------------------

SHAPES = ("passthrough", "spread", "equal", "bound", "affinity", "affinity-key", "affinity-new",
          "spread-key", "rebuild")
AFFINITY_SHAPES = ("affinity", "affinity-key", "affinity-new")
AFFINITY_SIZES = (8, 64, 256)


def dec_costs(rows):
    """{(backends, shape): (total, net)} with every program a connection meets (request
    accounting included when measured), medians over rounds."""
    out = {}
    has_wire = any(r.get("total_all_ns") for r in rows)
    for r in rows:
        key = (int(r["backends"]), r["shape"])
        if key in out:
            continue
        sub = [x for x in rows if (int(x["backends"]), x["shape"]) == key]
        if has_wire:
            out[key] = (med(sub, "total_all_ns"), med(sub, "net_all_ns"))
        else:
            out[key] = (med(sub, "total_ns"), med(sub, "net_ns"))
    return out


def added(rows, n, shape, key="connect4_ns", anchor="spread"):
    """What shape adds to its anchor at n backends (ns of key, connect4 by default): the
    median of the per-round differences shape - anchor (both run in the same rounds,
    on the same table)."""
    by = {(r["round"], r["shape"]): num(r[key]) for r in rows
          if int(r["backends"]) == n and r["shape"] in (anchor, shape) and r.get(key)}
    return mid([by[(rd, shape)] - by[(rd, anchor)] for rd, sh in by
                if sh == shape and (rd, anchor) in by])


def affinity_anchor(rows, shape):
    """The shape an affinity shape is paired with: the key shapes with spread-key (the
    same setsockopt before each connect, affinity off) when it ran, else spread."""
    if shape != "affinity" and any(r["shape"] == "spread-key" for r in rows):
        return "spread-key"
    return "spread"


def bound_added(rows, n):
    """connect4 ns that overload protection adds at n backends (bound - spread)."""
    return added(rows, n, "bound")


def affinity_figures(rows):
    """{(shape, n): connect4 ns added to spread, paired by round} for the affinity shapes,
    and the connect4 floor (the empty program's median over every round)."""
    out = {(sh, n): added(rows, n, sh, anchor=affinity_anchor(rows, sh))
           for sh in AFFINITY_SHAPES for n in AFFINITY_SIZES}
    return out, med(rows, "floor_connect4_ns")


def affinity_targets(rows):
    figs, floor = affinity_figures(rows)
    lim = TARGETS["affinity ns"]
    out = []
    for sh, who in (("affinity", "a client that stays (probe, stay, record in place)"),
                    ("affinity-new", "a new client at each connect (probe misses, a way "
                                     "written): the worst case")):
        vals = [figs[(sh, n)] for n in AFFINITY_SIZES]
        if all(v != v for v in vals):
            continue
        worst = max((v for v in vals if v == v), default=NAN)
        fig = " / ".join(f"{v:+,.0f}" if v == v else "-" for v in vals)
        out.append(row(f"Cache affinity adds <= 100 ns of BPF per steered connect: {who}",
                       f"deccost, connect4, {sh} - {affinity_anchor(rows, sh)}, paired by round",
                       f"{fig} ns at {' / '.join(str(n) for n in AFFINITY_SIZES)} backends "
                       f"(connect4 floor {f0(floor)} ns)",
                       f"the same table with affinity off ({affinity_anchor(rows, sh)})", "dec",
                       short_verdict(worst, lim)))
    return out


def dec_brief(res):
    rows = read(os.path.join(res, "decision.csv"))
    if not rows:
        return []
    cost = dec_costs(rows)
    sizes = sorted({k[0] for k in cost})
    shapes = [s for s in SHAPES if any(k[1] == s for k in cost)]
    print("BPF ns per connection, every program it meets summed (connect4, sock_release, "
          "request accounting on its packets), total and net of the empty programs' floors "
          "(in parentheses); bpf_stats, medians over rounds. unsteered = a connection from "
          "the cgroup to a backend directly; spread, equal = steered, base waits 100 ms "
          "apart or all equal; bound = spread with overload protection on (a wait bound "
          "no connect reaches); affinity = spread with cache affinity by cgroup, every "
          "connect stays on its backend; affinity-new = affinity by the application's key, "
          "a new key at each connect (the setsockopt program's time not included); "
          "spread-key = spread with the same setsockopt, affinity off; "
          "rebuild = each connect rebuilds the selection tree.\n")
    print("| backends | " + " | ".join("unsteered" if s == "passthrough" else s
                                       for s in shapes) + " |")
    print("|---:|" + "---:|" * len(shapes))
    for n in sizes:
        cells = []
        for s in shapes:
            t, nt = cost.get((n, s), (NAN, NAN))
            cells.append(f"{f0(t)} ({f0(nt)})")
        print(f"| {n} | " + " | ".join(cells) + " |")
    print()
    mism = sum(int(r["mismatches"]) for r in rows if r["shape"] != "passthrough")
    print(f"The kernel's pick equals the user-space reference (steer_select_at) at every "
          f"steered connect: {'yes' if mism == 0 else f'NO, {mism} mismatches'}.\n")
    lim = TARGETS["steered ns at 256 backends"]
    targets = []
    sp, eq = cost.get((256, "spread"), (NAN, NAN)), cost.get((256, "equal"), (NAN, NAN))
    for name, v in (("spread", sp), ("equal", eq)):
        targets.append(row("BPF time per steered connection, every program, <= 1,000 ns at "
                           "256 backends", f"deccost, {name}", f"{f0(v[0])} ({f0(v[1])} net)",
                           "empty programs of each hook type (net)", "dec",
                           f"total {short_verdict(v[0], lim)}; net {short_verdict(v[1], lim)}"))
    ratio = eq[0] / sp[0] if sp[0] == sp[0] and sp[0] > 0 else NAN
    targets.append(row("Equal / spread <= 1.2 at 256 backends", "deccost, totals",
                       f0(ratio, 2), "spread shape", "dec",
                       short_verdict(ratio, TARGETS["equal/spread at 256 backends"])))
    bound = bound_added(rows, 256)
    if bound == bound:
        targets.append(row("Overload protection adds <= 30 ns of BPF per steered connect at "
                           "256 backends", "deccost, connect4, bound - spread, paired by round",
                           f0(bound), "the same table without it (spread)", "dec",
                           short_verdict(bound, TARGETS["overload ns"])))
    targets += affinity_targets(rows)
    un = cost.get((256, "passthrough"), (NAN, NAN))
    targets.append(row("Unsteered connection <= 150 ns", "deccost, bpf_stats (statistics on), "
                       "every program", f"{f0(un[0])} ({f0(un[1])} net)",
                       "empty programs (net)", "dec",
                       f"total {short_verdict(un[0], TARGETS['unsteered ns'])}; net "
                       f"{short_verdict(un[1], TARGETS['unsteered ns'])}"))
    return targets


def dec_section(res):
    rows = read(os.path.join(res, "decision.csv"))
    if not rows:
        return
    print("### dec: BPF time per connection, every program summed (run_time_ns / run_cnt)\n")
    print("Every program a connection meets, from bpf_stats: connect4 and sock_release once "
          "per connection (and getpeername4 when the application calls it, reported per "
          "call). **total** = raw sum; **net** = total minus the floor of each program type, "
          "an empty program (`r0 = 1; exit`) of that type attached alongside, measured in the "
          "same rounds. Shapes: **unsteered** = a connect from the cgroup to a backend "
          "address directly (no table matches: what every other connection in the cgroup "
          "pays); **spread** = base waits 100 ms apart; **equal** = all base waits equal, "
          "every backend credited (a scan would read the whole table); both drained every "
          "1000 connects, as the daemon drains once per poll; **bound** = spread with "
          "overload protection on; **affinity** = spread with cache affinity by cgroup and a "
          "slack of an hour: every connect of the bench is one client, which stays on its "
          "backend; **affinity-new** = affinity by the application's key, a new random key "
          "set by setsockopt on each socket: every connect is a new client, a way written; "
          "**spread-key** = spread with affinity off and the same setsockopt on each socket "
          "(the anchor of the key shapes); **rebuild** = drained before "
          "every connect, so each one rebuilds the selection tree (what the first connect "
          "after a publish or a drain pays). Medians over rounds.\n")
    sizes = sorted({int(r["backends"]) for r in rows})
    shapes = [s for s in SHAPES if any(r["shape"] == s for r in rows)]
    has_wire = any(r.get("total_all_ns") for r in rows)
    print("| backends | shape | connect4 ns | release ns | total ns | net ns | getpeername ns "
          "per call (net) | kernel pick = user-space pick |"
          + (" request accounting ns (runs) | all programs: total ns | all: net ns |"
             if has_wire else ""))
    print("|---:|---|---:|---:|---:|---:|---:|---|" + ("---:|---:|---:|" if has_wire else ""))
    cost, cost_all = {}, {}
    for n in sizes:
        for sh in shapes:
            sub = [r for r in rows if int(r["backends"]) == n and r["shape"] == sh]
            if not sub:
                continue
            tot, net = med(sub, "total_ns"), med(sub, "net_ns")
            cost[(n, sh)] = (tot, net)
            gp = med(sub, "getpeername_ns")
            gp_net = gp - med(sub, "floor_getpeername_ns")
            mism = sum(int(r["mismatches"]) for r in sub)
            errs = sum(int(r["errors"]) for r in sub)
            name = "unsteered" if sh == "passthrough" else sh
            print(f"| {n} | {name} | {med(sub, 'connect4_ns'):.0f} | "
                  f"{med(sub, 'release_ns'):.0f} | {tot:.0f} | {net:.0f} | "
                  + ("-" if sh == "passthrough" else f"{gp:.0f} ({gp_net:.0f})") + " | "
                  + ("-" if sh == "passthrough" else
                     ("yes" if mism == 0 else f"NO: {mism} mismatches"))
                  + (f", {errs} errors" if errs else "") + " |"
                  + (f" {med(sub, 'wire_out_ns') + med(sub, 'wire_in_ns'):.0f} "
                     f"({med(sub, 'wire_runs'):.1f}) | {med(sub, 'total_all_ns'):.0f} | "
                     f"{med(sub, 'net_all_ns'):.0f} |" if has_wire else ""))
            cost_all[(n, sh)] = (med(sub, "total_all_ns"), med(sub, "net_all_ns"))
    print()
    floors = {k: med(rows, k) for k in ("floor_connect4_ns", "floor_release_ns",
                                         "floor_getpeername_ns")}
    print(f"Floors (empty program, median of every round): connect4 "
          f"{floors['floor_connect4_ns']:.0f} ns, sock_release {floors['floor_release_ns']:.0f} ns, "
          f"getpeername4 {floors['floor_getpeername_ns']:.0f} ns"
          + (f", cgroup_skb {med(rows, 'floor_wire_ns'):.0f} ns per packet" if has_wire else "")
          + ".\n")
    affinity_section(rows)
    if has_wire:
        print("Request accounting (on by default) runs once per packet of every socket in the "
              "cgroup: the handshake, the byte and the teardown of each connection here. "
              "**all programs** adds it to connect4 and release.\n")
    if (256, "spread") in cost and (256, "equal") in cost:
        sp, eq = cost[(256, "spread")], cost[(256, "equal")]
        un = cost.get((256, "passthrough"), (NAN, NAN))
        lim = TARGETS["steered ns at 256 backends"]
        print("| at 256 backends | total ns | net ns | target |")
        print("|---|---:|---:|---|")
        print(f"| steered, spread | {sp[0]:.0f} | {sp[1]:.0f} | {verdict(sp[0], lim)} (total) |")
        print(f"| steered, equal | {eq[0]:.0f} | {eq[1]:.0f} | {verdict(eq[0], lim)} (total) |")
        print(f"| equal / spread | {eq[0] / sp[0]:.2f} | {eq[1] / sp[1]:.2f} | "
              f"{verdict(eq[0] / sp[0], TARGETS['equal/spread at 256 backends'])} |")
        print(f"| unsteered | {un[0]:.0f} | {un[1]:.0f} | total: "
              f"{verdict(un[0], TARGETS['unsteered ns'])}; net: "
              f"{verdict(un[1], TARGETS['unsteered ns'])} |")
        if has_wire:
            for name, key in (("spread", (256, "spread")), ("equal", (256, "equal")),
                              ("unsteered", (256, "passthrough"))):
                if key not in cost_all:
                    continue
                t, nt = cost_all[key]
                lim = TARGETS["unsteered ns" if name == "unsteered" else
                              "steered ns at 256 backends"]
                print(f"| {name}, with request accounting | {t:.0f} | {nt:.0f} | total: "
                      f"{verdict(t, lim)}; net: {verdict(nt, lim)} |")
        print()


def affinity_section(rows):
    """What cache affinity adds to connect4, per shape and size, paired by round."""
    if not any(r["shape"] in AFFINITY_SHAPES for r in rows):
        return
    floor = med(rows, "floor_connect4_ns")
    key_anchor = affinity_anchor(rows, "affinity-key")
    print("Cache affinity, connect4 ns (bpf_stats run_time_ns / connects): the median over "
          "rounds of each shape, and the median of the per-round differences from its anchor, "
          f"measured in the same rounds on the same table: affinity against spread, the key "
          f"shapes against {key_anchor} (the same setsockopt on each socket, affinity off); "
          "the setsockopt program (one call per connect in the key shapes) per call, with its "
          "own floor; how many connects stayed, were new or left "
          "(steer_svc_stats.affinity, summed over rounds). affinity-key: the socket's key, "
          "one for every socket (it stays, as affinity does); affinity-new: a new key, and "
          "so a new client, at each connect.\n")
    print(f"| backends | spread | affinity | + (stays) | {key_anchor} | affinity-key | "
          "+ (stays, by key) | affinity-new | + (new client) | setsockopt per call (floor) | "
          "stayed / new / left: affinity; key; new | connect4 floor |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for n in AFFINITY_SIZES:
        sub = {sh: [r for r in rows if int(r["backends"]) == n and r["shape"] == sh]
               for sh in ("spread", "spread-key") + AFFINITY_SHAPES}
        if not sub["spread"]:
            continue
        counts = {sh: " / ".join(f"{sum(int(r.get(k) or 0) for r in sub[sh]):,}"
                                 for k in ("aff_stay", "aff_new", "aff_left"))
                  for sh in AFFINITY_SHAPES}
        sso = med(sub["affinity-new"], "setsockopt_ns")
        sso_floor = med(sub["affinity-new"], "floor_setsockopt_ns")
        print(f"| {n} | {f0(med(sub['spread'], 'connect4_ns'))} | "
              f"{f0(med(sub['affinity'], 'connect4_ns'))} | "
              f"{f0(added(rows, n, 'affinity'), 1)} | "
              f"{f0(med(sub[key_anchor], 'connect4_ns'))} | "
              f"{f0(med(sub['affinity-key'], 'connect4_ns'))} | "
              f"{f0(added(rows, n, 'affinity-key', anchor=key_anchor), 1)} | "
              f"{f0(med(sub['affinity-new'], 'connect4_ns'))} | "
              f"{f0(added(rows, n, 'affinity-new', anchor=key_anchor), 1)} | "
              f"{f0(sso)} ({f0(sso_floor)}) | "
              f"{counts['affinity']}; {counts['affinity-key']}; {counts['affinity-new']} | "
              f"{f0(med(sub['spread'], 'floor_connect4_ns'))} |")
    print()
    lim = TARGETS["affinity ns"]
    figs, _ = affinity_figures(rows)
    worst = {sh: max((figs[(sh, n)] for n in AFFINITY_SIZES if figs[(sh, n)] == figs[(sh, n)]),
                     default=NAN) for sh in ("affinity", "affinity-new")}
    print(f"Target: affinity adds <= {lim:g} ns per connect (connect4 floor {f0(floor)} ns): "
          f"a client that stays {verdict(worst['affinity'], lim)}, the worst at "
          f"{f0(worst['affinity'], 1)}; a new client at each connect "
          f"{verdict(worst['affinity-new'], lim)}, the worst at "
          f"{f0(worst['affinity-new'], 1)}.\n")


# ---- ctl ---------------------------------------------------------------------------------------

def ctl_figures(cycles, runs):
    """{backends: dict(cycle, publish, rss, cpu, failed, polls)} medians over rounds."""
    out = {}
    for n in sorted({int(r["backends"]) for r in runs}):
        rr = [r for r in runs if int(r["backends"]) == n]
        cc = [r for r in cycles if int(r["backends"]) == n]
        ok = sum(int(r["polls_ok"]) for r in rr)
        bad = sum(int(r["polls_failed"]) for r in rr)
        out[n] = {"services": rr[0]["services"],
                  "cycle": mid([num(r["cycle_s"]) * 1000 for r in cc]),
                  "cycle_max": max([num(r["cycle_s"]) * 1000 for r in cc], default=NAN),
                  "publish": mid([num(r["publish_s"]) * 1000 for r in cc]),
                  "publish_max": max([num(r["publish_s"]) * 1000 for r in cc], default=NAN),
                  "rss": med(rr, "vmrss_kib") / 1024, "hwm": med(rr, "vmhwm_kib") / 1024,
                  "cpu_u": med(rr, "daemon_user_ms_per_cycle"),
                  "cpu_s": med(rr, "daemon_sys_ms_per_cycle"),
                  "worker": med(rr, "worker_cpu_pct"), "poll": med(rr, "poll_mean_ms"),
                  "scrape": med(rr, "scrape_ms"), "healthy": med(rr, "healthy"),
                  "ok": ok, "bad": bad}
    return out


def ctl_brief(res):
    runs = read(os.path.join(res, "ctl_runs.csv"))
    if not runs:
        return []
    fig = ctl_figures(read(os.path.join(res, "ctl_cycles.csv")), runs)
    py = ctl_figures(read(os.path.join(res, "ctl_py_cycles.csv")),
                     read(os.path.join(res, "ctl_py_runs.csv")))
    grpc = {int(r["backends"]): num(r["rss_after_kib"]) / 1024
            for r in read(os.path.join(res, "ctl_grpc.csv"))}
    print("smg-steerd (release build) against one fake worker process answering GetLoads on "
          "N addresses, polled every second. cycle = GetLoads sent to new tables in effect; "
          "publish = scoring and publishing, the daemon's own part; CPU = the daemon's user + "
          "system time per cycle; bare gRPC = N gRPC channels with one call each, nothing "
          "else (bench/grpcmem).\n")
    print("| backends | worker | cycle ms | publish ms | daemon CPU ms per cycle | RSS MiB | "
          "bare gRPC RSS MiB | failed polls |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for worker, figs in (("bench/fastworker (C)", fig), ("fake_worker.py (Python)", py)):
        for n, f in figs.items():
            g = grpc.get(n, NAN) if figs is fig else NAN
            print(f"| {n} | {worker} | {f0(f['cycle'], 1)} | {f0(f['publish'], 1)} | "
                  f"{f0(f['cpu_u'] + f['cpu_s'])} | {f0(f['rss'], 1)} | {f0(g, 1)} | "
                  f"{f['bad']} of {f['ok'] + f['bad']} |")
    print()
    f = fig.get(1000)
    if not f:
        return []
    g = grpc.get(1000, NAN)
    return [row("Control-plane cycle <= 50 ms at 1,000 backends", "ctlplane.py, bench/fastworker",
                f"{f0(f['cycle'], 1)} ms (publish {f0(f['publish'], 1)})",
                "absolute (the publish part: the daemon's own)", "ctl",
                short_verdict(f["cycle"], TARGETS["cycle ms at 1000 backends"])),
            row("RSS <= 32 MiB at 1,000 backends", "ctlplane.py, VmRSS",
                f"{f0(f['rss'], 1)} MiB ({f0(f['rss'] / g, 2)} x bare gRPC)",
                "bare gRPC channels (bench/grpcmem)", "ctl",
                short_verdict(f["rss"], TARGETS["RSS MiB at 1000 backends"]))]


def ctl_table(figs):
    print("| backends | services | cycle ms median (max) | publish ms median (max) | VmRSS MiB | "
          "VmHWM MiB | daemon CPU ms/cycle (user+sys) | fake worker CPU % | mean poll ms | "
          "failed polls | scrape ms | healthy at end |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, f in figs.items():
        ok, bad = f["ok"], f["bad"]
        print(f"| {n} | {f['services']} | {f['cycle']:.1f} ({f['cycle_max']:.1f}) | "
              f"{f['publish']:.1f} ({f['publish_max']:.1f}) | {f['rss']:.1f} | "
              f"{f['hwm']:.1f} | {f['cpu_u'] + f['cpu_s']:.0f} ({f['cpu_u']:.0f}+"
              f"{f['cpu_s']:.0f}) | {f['worker']:.0f} | {f['poll']:.1f} | "
              f"{bad} of {ok + bad} ({100 * bad / max(ok + bad, 1):.1f}%) | "
              f"{f['scrape']:.1f} | {int(f['healthy']) if f['healthy'] == f['healthy'] else '-'} |")
    print()


def ctl_section(res):
    runs = read(os.path.join(res, "ctl_runs.csv"))
    if not runs:
        return
    print("### ctl: smg-steerd (release) against fake workers, interval 1 s\n")
    print("Services of at most 250 backends; one fake worker process answers every GetLoads "
          "on N loopback addresses. cycle = GetLoads sent to "
          "new tables in effect (smg_steer_cycle_seconds); publish = scoring and publishing "
          "(smg_steer_publish_seconds), the daemon's own part of it. Daemon CPU is user + "
          "system time of all its threads per cycle, over a window of cycles with no "
          "/metrics scrapes (rendering /metrics costs the daemon CPU too: its time per scrape "
          "is the last column but one).\n")
    print("#### With bench/fastworker (gRPC core in C, one thread)\n")
    figs = ctl_figures(read(os.path.join(res, "ctl_cycles.csv")), runs)
    ctl_table(figs)
    py_runs = read(os.path.join(res, "ctl_py_runs.csv"))
    if py_runs:
        print("#### With tests/lib/fake_worker.py --many (Python, the reference worker)\n")
        ctl_table(ctl_figures(read(os.path.join(res, "ctl_py_cycles.csv")), py_runs))
    grpc = {int(r["backends"]): r for r in read(os.path.join(res, "ctl_grpc.csv"))}
    if grpc:
        print("Memory anchor: **bare gRPC** = bench/grpcmem, N insecure gRPC channels with one "
              "GetLoads call each against the same fake workers, nothing else (RSS after the "
              "calls).\n")
        print("| backends | smg-steerd VmRSS MiB | bare gRPC channels RSS MiB | gRPC KiB per "
              "channel | smg-steerd / bare gRPC |")
        print("|---:|---:|---:|---:|---:|")
        for n in sorted(grpc):
            g = grpc[n]
            g_mib = num(g["rss_after_kib"]) / 1024
            d_mib = figs[n]["rss"] if n in figs else NAN
            print(f"| {n} | {d_mib:.1f} | {g_mib:.1f} | {num(g['kib_per_channel']):.1f} | "
                  f"{d_mib / g_mib:.2f} |")
        print()
    if 1000 in figs and 100 in figs:
        cyc, rss = figs[1000]["cycle"], figs[1000]["rss"]
        print("| at 1,000 backends | value | target |")
        print("|---|---:|---|")
        print(f"| cycle ms (median) | {cyc:.1f} | "
              f"{verdict(cyc, TARGETS['cycle ms at 1000 backends'])} |")
        print(f"| VmRSS MiB | {rss:.1f} | {verdict(rss, TARGETS['RSS MiB at 1000 backends'])} |")
        print(f"\nRSS growth per backend, (RSS(1000) - RSS(100)) / 900: "
              f"**{(rss - figs[100]['rss']) * 1024 / 900:.1f} KiB**.\n")


# ---- src ---------------------------------------------------------------------------------------

def src_figures(rows):
    """[(source, backends, median CPU us per poll, ratio to gRPC SGLang, per-round ratios,
    failed polls)]"""
    base = [r for r in rows if r["source"] == "grpc-sglang"]
    mb = med(base, "cpu_us_per_poll")
    by_round = {r["round"]: num(r["cpu_us_per_poll"]) for r in base}
    out = []
    for src in dict.fromkeys(r["source"] for r in rows):
        rr = [r for r in rows if r["source"] == src]
        m = med(rr, "cpu_us_per_poll")
        pr = [num(r["cpu_us_per_poll"]) / by_round[r["round"]] for r in rr
              if by_round.get(r["round"])]
        out.append((src, rr[0]["backends"], m, m / mb if mb else NAN, pr,
                    sum(int(r["polls_failed"]) for r in rr)))
    return out


def src_brief(res):
    rows = read(os.path.join(res, "sources.csv"))
    if not rows:
        return []
    figs = src_figures(rows)
    print(f"smg-steerd's CPU (user + system) per poll, {figs[0][1]} backends of one source, "
          f"sources interleaved round by round; vs gRPC SGLang = median of the per-round "
          f"ratios.\n")
    print("| source | CPU µs per poll | vs gRPC SGLang | failed polls |")
    print("|---|---:|---:|---:|")
    for src, _, m, _, pr, failed in figs:
        print(f"| {src} | {f0(m, 1)} | {f0(mid(pr), 2)} | {failed} |")
    print()
    by = {f[0]: f for f in figs}
    v = mid(by["http-metrics-vllm"][4]) if "http-metrics-vllm" in by else NAN
    s = mid(by["http-metrics-sglang"][4]) if "http-metrics-sglang" in by else NAN
    return [row("An HTTP /metrics poll <= 1.5 x a gRPC GetLoads poll (daemon CPU)",
                f"sources.py, {figs[0][1]} backends", f"vLLM {f0(v, 2)}; SGLang {f0(s, 2)}",
                "gRPC SGLang GetLoads", "src",
                short_verdict(max(v, s) if v == v and s == s else v,
                              TARGETS["HTTP /metrics poll CPU / gRPC GetLoads poll CPU"]))]


def src_section(res):
    rows = read(os.path.join(res, "sources.csv"))
    if not rows:
        return
    print("### src: smg-steerd CPU per poll, by load source\n")
    print("The daemon (release build) polls N backends of one source each second; its user + "
          "system CPU time over a window of whole cycles without scrapes, divided by the polls "
          "in the window. gRPC against bench/fastworker (one idle rank), HTTP against nginx "
          "serving fixed bodies (keep-alive), tcp = a backend with no load endpoint, polled by "
          "a TCP connect to its traffic port. Sources interleaved round by round; ratio = "
          "median / median of gRPC SGLang GetLoads, and per-round ratios (min-max).\n")
    print("| source | backends | CPU us per poll (median) | ratio to gRPC SGLang | per-round "
          "ratios | failed polls |")
    print("|---|---:|---:|---:|---|---:|")
    ratio_metrics = NAN
    for src, n, m, ratio, pr, failed in src_figures(rows):
        spread = f"{min(pr):.2f}-{max(pr):.2f}" if pr else "-"
        if src == "http-metrics-vllm":
            ratio_metrics = ratio
        print(f"| {src} | {n} | {m:.1f} | {ratio:.2f} | {spread} | {failed} |")
    print()
    key = "HTTP /metrics poll CPU / gRPC GetLoads poll CPU"
    print(f"| target | value | verdict |\n|---|---:|---|\n"
          f"| vLLM /metrics poll / SGLang GetLoads poll | {ratio_metrics:.2f} | "
          f"{verdict(ratio_metrics, TARGETS[key])} |\n")


# ---- wire --------------------------------------------------------------------------------------

# Each variant's programs: (program, its floor), as wirecost names them.
WIRE_PROGS = {"skb": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
              "step": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
              "push": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
              "find": [("cost_find", "floor_egress")],
              "lock": [("cost_lock", "floor_egress")],
              "min": [("min_egress", "floor_egress"), ("min_ingress", "floor_ingress")]}
WIRE_WORDS = {
    "off": "no accounting program",
    "skb": "the shipped cgroup_skb pair (`--wire-estimator fluid`, the default)",
    "step": "the same, `--wire-estimator fluid-step` (the step cadence)",
    "push": "the same, `--peer-push on` (a kick per request)",
    "find": "the shipped egress program cut short after the record's lookup",
    "lock": "the same, cut short after the service's lock",
    "min": "the least an exact per-socket count writes (a bound, not a design)",
}
PLACEMENTS = {"any": "the scheduler's choice", "same": "client and server on CPU 0",
              "split": "client on CPU 0, server on CPU 1",
              "rps": "split, the received packets handed to CPU 0 by RPS"}


def wire_med(rows, variant, phase, metric):
    vals = [num(r["value"]) for r in rows
            if r["variant"] == variant and r["phase"] == phase and r["metric"] == metric]
    return statistics.median(vals) if vals else NAN


def wire_net(rows, variant, prog, floor, phase="rr"):
    """A variant's BPF ns per message of a phase and the same net of its floor."""
    msgs = wire_med(rows, variant, phase, "messages")
    per_msg = wire_med(rows, variant, phase, f"{prog}_ns_per_msg")
    runs = wire_med(rows, variant, phase, f"{prog}_runs")
    fl = wire_med(rows, variant, phase, f"{floor}_ns_per_run")
    return per_msg, per_msg - fl * runs / msgs


def added_per_later_packet(rows, variant):
    """BPF ns a variant's ingress program adds to the shipped one (skb) per streamed
    response packet after the first, and packets per response; (nan, nan) without it."""
    skb_in = wire_med(rows, "skb", "stream", "skb_ingress_ns_per_msg")
    v_in = wire_med(rows, variant, "stream", "skb_ingress_ns_per_msg")
    if v_in != v_in or skb_in != skb_in:
        return NAN, NAN
    runs = wire_med(rows, variant, "stream", "skb_ingress_runs") / \
        wire_med(rows, variant, "stream", "messages")
    return ((v_in - skb_in) / (runs - 1) if runs > 1 else NAN), runs


def wire_runs(res):
    """[(placement, rows)] of the wire part's runs that exist."""
    runs = [("any", read(os.path.join(res, "wire.csv")))] + \
        [(c, read(os.path.join(res, f"wire_{c}.csv"))) for c in ("same", "split", "rps")]
    return [(c, r) for c, r in runs if r]


def wire_brief(res):
    runs = wire_runs(res)
    if not runs:
        return []
    targets = []
    lim = TARGETS["wire ns per message"]
    rows = dict(runs).get("any")
    if rows:
        print("One steered keep-alive connection, 512-byte requests and 256-byte responses "
              "(rr); BPF ns per request sent (egress) and per response received (ingress), "
              "in all and net of an empty program's floor; round-trip p50 steered (rr) and "
              "unsteered (direct); uploads in 64 KiB writes, steered / unsteered. Medians "
              "over interleaved rounds.\n")
        print("| variant | request sent, ns (net) | response, ns (net) | rr p50 µs | "
              "direct p50 µs | upload steered / unsteered |")
        print("|---|---:|---:|---:|---:|---:|")
        for v in ("off", "skb", "step", "push", "find", "lock"):
            if wire_med(rows, v, "rr", "messages") != wire_med(rows, v, "rr", "messages"):
                continue
            cells = []
            for prog, floor in (("egress", "floor_egress"), ("ingress", "floor_ingress")):
                p = {"find": "cost_find", "lock": "cost_lock"}.get(v, f"skb_{prog}")
                t, n = wire_net(rows, v, p, floor) if v != "off" and \
                    not (v in ("find", "lock") and prog == "ingress") else (NAN, NAN)
                cells.append(f"{f0(t)} ({f0(n)})" if t == t else "-")
            b = wire_med(rows, v, "bulk", "mib_per_s") / wire_med(rows, v, "bulkdirect",
                                                                   "mib_per_s")
            print(f"| {v} | {cells[0]} | {cells[1]} | {f0(wire_med(rows, v, 'rr', 'p50_us'), 1)}"
                  f" | {f0(wire_med(rows, v, 'direct', 'p50_us'), 1)} | {f0(b, 2)} |")
        print()
        print("Variants: " + "; ".join(f"**{v}** = {WIRE_WORDS[v]}" for v in
                                         ("off", "skb", "step", "push", "find", "lock")) + ".\n")
        later, per = added_per_later_packet(rows, "step")
        push_out = wire_med(rows, "push", "rr", "skb_egress_ns_per_msg") - \
            wire_med(rows, "skb", "rr", "skb_egress_ns_per_msg")
        find = wire_med(rows, "find", "rr", "cost_find_ns_per_msg")
        lock = wire_med(rows, "lock", "rr", "cost_lock_ns_per_msg")
        full = wire_med(rows, "skb", "rr", "skb_egress_ns_per_msg")
        print("| where the BPF time goes | ns |")
        print("|---|---:|")
        print(f"| a request sent: to the socket's record (find) | {f0(find)} |")
        print(f"| + slot, counters, tree and the service's lock (lock - find) | "
              f"{f0(lock - find)} |")
        print(f"| + counting (skb - lock) | {f0(full - lock)} |")
        print(f"| the step cadence: added per streamed response packet after the first "
              f"({f0(per, 1)} packets per response) | {f0(later)} |")
        print(f"| --peer-push: added per request sent (the kick) | {f0(push_out)} |")
        print()
        unst = max(wire_med(rows, "skb", "direct", "skb_egress_ns_per_run"),
                   wire_med(rows, "skb", "direct", "skb_ingress_ns_per_run"))
        fl = wire_med(rows, "skb", "direct", "floor_egress_ns_per_run")
        targets.append(row("An unsteered socket pays one early return per packet (no "
                           "target in ns)", "wirecost, direct phase, bpf_stats",
                           f"{f0(unst)} ns per packet", f"empty program: {f0(fl)} ns",
                           "wire", "report"))
        targets.append(row("Step cadence (`fluid-step`): BPF per streamed packet (no target)",
                           "wirecost, step - skb, stream phase", f"+{f0(later)} ns",
                           "the same programs, cadence off", "wire", "report"))
    if len(runs) > 1 or rows:
        print("By placement of the client and the server: BPF ns per rr message net of the "
              "floor; min = the least an exact per-socket count writes (a bound); find = a "
              "request to its record.\n")
        print("| cpus | shipped: request | shipped: response | min: request | min: response "
              "| find | rr p50 µs off / shipped |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for cpus, r in runs:
            cells = [f0(wire_net(r, v, f"{v if v == 'min' else 'skb'}_{p}", f"floor_{p}")[1])
                     for v in ("skb", "min") for p in ("egress", "ingress")]
            cells.append(f0(wire_net(r, "find", "cost_find", "floor_egress")[1]))
            print(f"| {cpus}: {PLACEMENTS[cpus]} | " + " | ".join(cells) +
                  f" | {f0(wire_med(r, 'off', 'rr', 'p50_us'), 1)} / "
                  f"{f0(wire_med(r, 'skb', 'rr', 'p50_us'), 1)} |")
        print()
        for cpus, r in runs:
            req = wire_net(r, "skb", "skb_egress", "floor_egress")[1]
            resp = wire_net(r, "skb", "skb_ingress", "floor_ingress")[1]
            mreq = wire_net(r, "min", "min_egress", "floor_egress")[1]
            mresp = wire_net(r, "min", "min_ingress", "floor_ingress")[1]
            bound = f"; min {f0(mreq)} / {f0(mresp)}" if mreq == mreq else ""
            targets.append(row("Request accounting <= 150 ns of BPF per message sent or "
                               "received (net)", f"wirecost, cpus {cpus} ({PLACEMENTS[cpus]})",
                               f"{f0(req)} / {f0(resp)} (request / response{bound})",
                               "empty cgroup_skb program (floor)", "wire",
                               short_verdict(max(req, resp), lim)))
    return targets


def wire_section(res):
    rows = read(os.path.join(res, "wire.csv"))
    if not rows:
        return
    print("### wire: request accounting on steered sockets (wirecost)\n")
    print("One backend, one steered keep-alive connection doing 512-byte requests and "
          "256-byte responses (rr), the same unsteered (direct: the backend's address, same "
          "cgroup), 64 KiB-write uploads (bulk, bulkdirect) and rr with each response in 8 "
          "writes (stream). Variants interleaved round by round: " +
          "; ".join(f"**{v}** = {WIRE_WORDS[v]}" for v in
                    ("off", "skb", "step", "push", "find", "lock")) +
          ". BPF ns = run_time_ns / run_cnt (per run) or / messages (per message: requests "
          "written for egress, responses read for ingress, 64 KiB writes in bulk); floor = "
          "an empty program of the same cgroup type attached next to them. Medians over the "
          "rounds.\n")
    print("| variant | phase | program | runs per message | ns per run | floor ns per run | "
          "ns per message | net ns per message (minus floor) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    net_rr = {}
    for v, plist in WIRE_PROGS.items():
        if v == "min":
            continue
        for ph in ("rr", "direct", "bulk", "bulkdirect", "stream"):
            msgs = wire_med(rows, v, ph, "messages")
            for prog, floor in plist:
                runs = wire_med(rows, v, ph, f"{prog}_runs")
                if runs != runs:
                    continue
                per_run = wire_med(rows, v, ph, f"{prog}_ns_per_run")
                per_msg = wire_med(rows, v, ph, f"{prog}_ns_per_msg")
                fl = wire_med(rows, v, ph, f"{floor}_ns_per_run")
                net = per_msg - fl * runs / msgs if fl == fl else NAN
                if v == "skb" and ph == "rr":
                    net_rr[prog] = (per_msg, net)
                print(f"| {v} | {ph} | {prog} | {runs / msgs:.2f} | {per_run:.0f} | "
                      f"{fl:.0f} | {per_msg:.0f} | {net:.0f} |")
    print()
    print("| variant | rr p50 us | rr p99 us | rr mean us | direct p50 us | bulk MiB/s | "
          "bulkdirect MiB/s | bulk / bulkdirect |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for v in ("off", "skb", "step", "push"):
        if wire_med(rows, v, "rr", "messages") != wire_med(rows, v, "rr", "messages"):
            continue
        b, bd = wire_med(rows, v, "bulk", "mib_per_s"), wire_med(rows, v, "bulkdirect",
                                                                  "mib_per_s")
        print(f"| {v} | {wire_med(rows, v, 'rr', 'p50_us'):.1f} | "
              f"{wire_med(rows, v, 'rr', 'p99_us'):.1f} | {wire_med(rows, v, 'rr', 'mean_us'):.1f} | "
              f"{wire_med(rows, v, 'direct', 'p50_us'):.1f} | {b:.0f} | {bd:.0f} | "
              f"{b / bd:.2f} |")
    print()
    worst = max((t for t, _ in net_rr.values()), default=NAN)
    worst_net = max((n for _, n in net_rr.values()), default=NAN)
    unst = max(wire_med(rows, "skb", "direct", "skb_egress_ns_per_run"),
               wire_med(rows, "skb", "direct", "skb_ingress_ns_per_run"))
    print("| target | value | verdict |\n|---|---:|---|")
    print(f"| shipped accounting, BPF ns added per message sent or received (rr, minus the "
          f"empty program's floor) | {worst_net:.0f} | "
          f"{verdict(worst_net, TARGETS['wire ns per message'])} |")
    print(f"| the same, total run time including the floor (dispatch and statistics) | "
          f"{worst:.0f} | {verdict(worst, TARGETS['wire ns per message'])} |")
    print(f"| unsteered socket, BPF ns per packet (one early return; floor alone "
          f"{wire_med(rows, 'skb', 'direct', 'floor_egress_ns_per_run'):.0f}) | {unst:.0f} | "
          f"report |")
    cost_rows(rows)
    step_rows(rows)
    push_rows(rows)
    print()
    placement_rows(res)


def cost_rows(rows):
    """Where a steered request's BPF time goes: the shipped egress program against the same
    cut short after the record's lookup (find) and after the service's lock (lock)."""
    find = wire_med(rows, "find", "rr", "cost_find_ns_per_msg")
    if find != find:
        return
    lock = wire_med(rows, "lock", "rr", "cost_lock_ns_per_msg")
    full = wire_med(rows, "skb", "rr", "skb_egress_ns_per_msg")
    floor = wire_med(rows, "find", "rr", "floor_egress_ns_per_run")
    find_net = wire_net(rows, "find", "cost_find", "floor_egress")[1]
    print(f"| a request sent, BPF ns: to the record {find:.0f}, + slot, counters, tree and the "
          f"lock {lock - find:.0f}, + counting {full - lock:.0f} (= {full:.0f}; floor "
          f"{floor:.0f}) | {find_net:.0f} net to the record | report |")


def step_rows(rows):
    """The step cadence (variant step: the shipped pair, the table published with
    STEER_TBL_STEP) against the same pair without it (skb): streamed answers (the cadence's
    work on every packet after an answer's first) and single-packet answers (rr)."""
    later, runs = added_per_later_packet(rows, "step")
    if runs != runs:
        return
    rr = wire_med(rows, "step", "rr", "skb_ingress_ns_per_msg") - \
        wire_med(rows, "skb", "rr", "skb_ingress_ns_per_msg")
    total = wire_med(rows, "step", "stream", "skb_ingress_ns_per_run")
    floor = wire_med(rows, "step", "stream", "floor_ingress_ns_per_run")
    print(f"| step cadence (--wire-estimator fluid-step): BPF ns added per response packet "
          f"after the first ({runs:.1f} packets per response; such a packet {total:.0f} in "
          f"all, {total - floor:.0f} net of the floor) | {later:.0f} | "
          f"{verdict(later, TARGETS['wire ns per message'])} |")
    print(f"| step cadence: BPF ns added per single-packet response (rr: the answer also "
          f"moves the step's end) | {rr:.0f} | report |")


def push_rows(rows):
    """--peer-push (variant push: the shipped pair, the table published with
    STEER_TBL_PEER_PUSH, the wake-up re-armed before each request) against the same pair
    without it (skb): BPF ns added per request sent (the kick) and per response."""
    out = wire_med(rows, "push", "rr", "skb_egress_ns_per_msg")
    if out != out:
        return
    sent = out - wire_med(rows, "skb", "rr", "skb_egress_ns_per_msg")
    answered = wire_med(rows, "push", "rr", "skb_ingress_ns_per_msg") - \
        wire_med(rows, "skb", "rr", "skb_ingress_ns_per_msg")
    floor = wire_med(rows, "push", "rr", "floor_egress_ns_per_run")
    print(f"| --peer-push: BPF ns added per request sent (the kick: the pending word exchanged "
          f"and a ring record; such a request {out:.0f} in all, {out - floor:.0f} net of the "
          f"floor) | {sent:.0f} | report |")
    print(f"| --peer-push: BPF ns added per response (the pending word read: a wake-up is on "
          f"its way) | {answered:.0f} | report |")


def placement_rows(res):
    """The shipped accounting and the least an exact count writes, per placement of the
    client and the server (wirecost --cpus): BPF ns per message net of the floor, rr."""
    runs = wire_runs(res)
    if len(runs) < 2:
        return
    print("Placement of the client and the server (`--cpus`: " +
          "; ".join(f"{c} = {w}" for c, w in PLACEMENTS.items()) +
          "), BPF ns per rr message net of the floor, medians of the rounds:\n")
    print("| cpus | shipped, request sent | shipped, response | the least (record only), "
          "request sent | the least, response | a request to its record (find) | rr p50 µs "
          "off / shipped |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for cpus, r in runs:
        cells = []
        for v in ("skb", "min"):
            for prog, floor in (("egress", "floor_egress"), ("ingress", "floor_ingress")):
                cells.append(f0(wire_net(r, v, f"{v}_{prog}", floor)[1]))
        cells.append(f0(wire_net(r, "find", "cost_find", "floor_egress")[1]))
        print(f"| {cpus} | {' | '.join(cells)} | {f0(wire_med(r, 'off', 'rr', 'p50_us'), 1)} / "
              f"{f0(wire_med(r, 'skb', 'rr', 'p50_us'), 1)} |")
    print()
    print("| target, per placement | value | verdict |\n|---|---:|---|")
    for cpus, r in runs:
        worst = max(wire_net(r, "skb", f"skb_{prog}", f"floor_{prog}")[1]
                    for prog in ("egress", "ingress"))
        print(f"| shipped accounting, BPF ns per message sent or received net of the floor, "
              f"cpus {cpus} | {worst:.0f} | {verdict(worst, TARGETS['wire ns per message'])} |")
    print()


# ---- probe -------------------------------------------------------------------------------------

def probe_table(res):
    """probecpu.py's Markdown: (its paragraph, its table lines, the figures of its row)."""
    path = os.path.join(res, "probe_cpu.md")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = [ln for ln in f.read().split("\n")]
    table = [ln for ln in lines if ln.startswith("|")]
    text = "\n".join(ln for ln in lines if ln and not ln.startswith("|"))
    figs = {}
    if len(table) >= 3:
        head = [c.strip() for c in table[0].strip("|").split("|")]
        vals = [c.strip().replace(",", "") for c in table[-1].strip("|").split("|")]
        figs = {h: num(v) for h, v in zip(head, vals)}
    return text, table, figs


def probe_brief(res):
    got = probe_table(res)
    if not got:
        return []
    _, table, figs = got
    print("smg-steerd `--wire-estimator fluid-step --step-probe` over backends that stream a "
          "completion event every step, no client traffic:\n")
    print("\n".join(table) + "\n")
    return [row("The step probe's cost (no target)", "probecpu.py, live",
                f"{f0(figs.get('BPF ns / packet', NAN))} ns BPF per packet; probe thread "
                f"{f0(figs.get('probe thread % of a core', NAN), 2)} % of a core",
                "steer_probe_apply alone, next to an empty program (peer: probe1, probe32)",
                "probe", "report")]


def probe_section(res):
    got = probe_table(res)
    if not got:
        return
    text, table, _ = got
    print("### probe: the step probe (--step-probe), live\n")
    print("Its kernel half per run and per packet, in isolation next to an empty program's "
          "floor, is in peer's table (probe1, probe32).\n")
    print(text + "\n")
    print("\n".join(table) + "\n")


# ---- the summary -------------------------------------------------------------------------------

PARTS = [
    ("conn", "conn and wrk: short connections and HTTP over them", conn_brief,
     [conn_section, conn_pairs_section, wrk_section]),
    ("dec", "dec: BPF time per connection", dec_brief, [dec_section]),
    ("ctl", "ctl: the control plane", ctl_brief, [ctl_section]),
    ("src", "src: the load sources", src_brief, [src_section]),
    ("wire", "wire: request accounting on steered sockets", wire_brief, [wire_section]),
    ("ingress", "ingress: clients off the node, through XDP", ingress_summary.brief,
     [ingress_summary.section]),
    ("off", "off: the programs' cost with the statistics off", offcost_summary.brief,
     [offcost_summary.section]),
    ("peer", "peer: routers sharing their request accounting", peer_summary.brief,
     [peer_summary.section]),
    ("probe", "probe: the step probe, live", probe_brief, [probe_section]),
]


def captured(fn, *args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = fn(*args)
    return buf.getvalue(), out


def cell(s):
    return str(s).replace("|", "\\|")


def main():
    res = sys.argv[1]
    targets, briefs, details, missing = [], [], [], []
    for name, title, brief, sections in PARTS:
        text, rows = captured(brief, res)
        detail = "".join(captured(s, res)[0] for s in sections)
        if not text.strip() and not detail.strip():
            missing.append(name)
            continue
        targets += rows or []
        briefs.append(f"### {title}\n\n{text}")
        details.append(detail)
    print("# smg-steer benchmark summary\n")
    machine = ""
    path = os.path.join(res, "machine.md")
    if os.path.exists(path):
        with open(path) as f:
            machine = f.read()
    m = re.search(r"^- date: (.*)$", machine, re.M)
    c = re.search(r"^- smg-steer: (.*)$", machine, re.M)
    if m or c:
        print(f"{c.group(1) if c else '?'}, {m.group(1) if m else '?'}; the machine and the "
              f"commands are at the end.\n")
    print("## Targets\n")
    print("Each target, what measures it and this run's figure, the anchor it is measured "
          "against in the same run, and the part of `make bench` (BENCH_PARTS) that "
          "measures it.\n")
    print("| Target | Measured by | This run | Anchor | Part | Verdict |")
    print("|---|---|---|---|---|---|")
    for t in targets:
        print(f"| {cell(t['target'])} | {cell(t['measured'])} | {cell(t['figure'])} | "
              f"{cell(t['anchor'])} | {t['part']} | {t['verdict']} |")
    print()
    if missing:
        print(f"Not run here: {', '.join(missing)}.\n")
    print("## The parts\n")
    for b in briefs:
        print(b)
    if machine:
        print(machine.replace("# Machine", "## Machine").replace("# Commands", "## Commands"))
    load = os.path.join(res, "load.txt")
    if os.path.exists(load):
        print("## Load on the machine during the run\n")
        print("The machine is shared; these are /proc/loadavg readings:\n")
        with open(load) as f:
            for line in f:
                print(f"- {line.strip()}")
        print()
    print("## Details\n")
    for d in details:
        print(d)
    return 0


if __name__ == "__main__":
    sys.exit(main())
