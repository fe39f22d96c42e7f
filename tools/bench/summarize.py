#!/usr/bin/python3
"""Turn the raw CSVs of tools/bench/run.sh into summary.md (markdown on stdout).

    summarize.py RESULTS_DIR > RESULTS_DIR/summary.md

Every figure is a median over the interleaved rounds; every comparison is a
ratio against an anchor measured in the same run. Paired ratios (same round)
are shown as min-max next to the ratio of medians, to show the spread.
"""
import csv
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ingress_summary  # noqa: E402
import offcost_summary  # noqa: E402
import peer_summary  # noqa: E402

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
}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def med(rows, key):
    vals = [float(r[key]) for r in rows if r.get(key) not in (None, "", "nan")]
    return statistics.median(vals) if vals else float("nan")


def verdict(value, limit):
    if value != value:  # NaN
        return "not measured"
    return f"met (<= {limit:g})" if value <= limit else f"MISSED (> {limit:g})"


def paired_ratios(rows, key, num, den):
    """num/den of key per round (rows of the same round paired)."""
    by = {}
    for r in rows:
        by.setdefault(r["round"], {})[r["path"]] = float(r[key])
    return [v[num] / v[den] for v in by.values() if num in v and den in v and v[den] > 0]


def paired(rows, key, num, den):
    """'median (min-max)' of the per-round ratios num/den."""
    ratios = paired_ratios(rows, key, num, den)
    if not ratios:
        return "-"
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def add_cpu_per(rows, count_key, out_key):
    """CPU time of the client's and the servers' cgroups per connection or request."""
    for r in rows:
        n = float(r.get(count_key) or 0)
        if "client_cpu_us" in r and n > 0:
            r[out_key] = (float(r["client_cpu_us"]) + float(r["server_cpu_us"])) / n
        else:
            r[out_key] = "nan"


def conn_section(res):
    rows = read(os.path.join(res, "conn.csv"))
    if not rows:
        return
    add_cpu_per(rows, "attempts", "cpu_us_per_conn")
    print("## 1a. Short connections, connbench (connect, read 1 byte, close)\n")
    print("Paths: **direct** = one backend, no BPF; **direct64** = the client itself "
          "round-robins over the same 64 backends, no BPF (an extra anchor that separates "
          "the fan-out from the steering); **vip** = virtual address steered by the "
          "real BPF programs over 64 backends, client in the attached cgroup; **haproxy** = "
          "HAProxy mode tcp, balance leastconn, 64 servers; **nginx** = nginx stream, "
          "least_conn, 64 servers. Latency = connect() to first byte. CPU per connection = "
          "CPU time (cgroup cpu.stat) of the client plus every backend and proxy process, "
          "divided by the connections made: less sensitive to the neighbours on a shared "
          "machine than wall time.\n")
    for conc in sorted({r["concurrency"] for r in rows}, key=int):
        sub = [r for r in rows if r["concurrency"] == conc]
        paths = list(dict.fromkeys(r["path"] for r in sub))
        n_rounds = len({r["round"] for r in sub})
        print(f"### Concurrency {conc} ({'sequential' if conc == '1' else conc + ' threads'}), "
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
    print("### Sequential, side by side in one thread (connbench --pair-addr)\n")
    print("Blocks of connections alternate between the two paths (ABBA order), the client "
          "moving between their cgroups; each connection is timed from socket() to close(). "
          "Ratio = median over block pairs of the blocks' median (or mean) times, with the "
          "quartiles of the per-pair ratios.\n")
    print("vip = steered as shipped (request accounting on); vipnw = the same data plane with "
          "`--wire-estimator off`; free = placed by the scheduler; onecpu = the client and the "
          "backends pinned to one CPU, so that no connection waits for a vCPU to wake from "
          "idle or for another CPU.\n")
    print("| pair/condition | blocks of | pairs | p50 us, vip | p50 us, other | ratio of block medians "
          "(q1-q3) | ratio of block means (q1-q3) | errors | target |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        judged = r["label_a"].startswith("vip/") and r["label_b"] == "direct"
        key = "vip/direct per-connection time" if judged else None
        tgt = verdict(float(r["ratio_mean"]), TARGETS[key]) if key else "-"
        print(f"| {r['label_a'].split('/')[0]}/{r['label_b']}/{r['label_a'].split('/')[-1]} | {r['block']} | {r['pairs']} | "
              f"{float(r['p50_a_us']):.2f} | {float(r['p50_b_us']):.2f} | "
              f"{float(r['ratio_p50']):.4f} ({float(r['ratio_p50_q1']):.3f}-"
              f"{float(r['ratio_p50_q3']):.3f}) | {float(r['ratio_mean']):.4f} "
              f"({float(r['ratio_mean_q1']):.3f}-{float(r['ratio_mean_q3']):.3f}) | "
              f"{r['errors']} | {tgt} |")
    print()


def wrk_section(res):
    rows = read(os.path.join(res, "wrk.csv"))
    if not rows:
        return
    add_cpu_per(rows, "requests", "cpu_us_per_req")
    print("## 1b. HTTP requests over short connections, wrk (Connection: close)\n")
    print("wrk -t2 -c16 against 64 nginx HTTP backends (`return 200 \"ok\"`): direct = one "
          "backend; vip, haproxy, nginx stream as above.\n")
    print("| path | requests/s | p50 ms | p99 ms | CPU us per request | errors | time per request "
          "vs direct |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    m = {}
    paths = list(dict.fromkeys(r["path"] for r in rows))
    for p in paths:
        pr = [r for r in rows if r["path"] == p]
        m[p] = med(pr, "requests_per_s")
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


def dec_section(res):
    rows = read(os.path.join(res, "decision.csv"))
    if not rows:
        return
    print("## 2. BPF time per connection, every program summed (run_time_ns / run_cnt)\n")
    print("Every program a connection meets, from bpf_stats: connect4 and sock_release once "
          "per connection (and getpeername4 when the application calls it, reported per "
          "call). **total** = raw sum; **net** = total minus the floor of each program type, "
          "an empty program (`r0 = 1; exit`) of that type attached alongside, measured in the "
          "same rounds. Shapes: **unsteered** = a connect from the cgroup to a backend "
          "address directly (no table matches: what every other connection in the cgroup "
          "pays); **spread** = base waits 100 ms apart; **equal** = all base waits equal, "
          "every backend credited (a scan would read the whole table); both drained every "
          "1000 connects, as the daemon drains once per poll; **rebuild** = drained before "
          "every connect, so each one rebuilds the selection tree (what the first connect "
          "after a publish or a drain pays). Medians over rounds.\n")
    sizes = sorted({int(r["backends"]) for r in rows})
    shapes = [s for s in ("passthrough", "spread", "equal", "rebuild")
              if any(r["shape"] == s for r in rows)]
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
    if has_wire:
        print("Request accounting (issue 11, on by default) runs once per packet of every "
              "socket in the cgroup: the handshake, the byte and the teardown of each "
              "connection here. **all programs** adds it to connect4 and release.\n")
    if (256, "spread") in cost and (256, "equal") in cost:
        sp, eq = cost[(256, "spread")], cost[(256, "equal")]
        un = cost.get((256, "passthrough"), (float("nan"), float("nan")))
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


def norel_section(res):
    """Issue 10's ablation: the data plane without the release hook (norelbench)."""
    rows = read(os.path.join(res, "norel_bpf.csv"))
    walk = read(os.path.join(res, "norel_walk.csv"))
    wall = read(os.path.join(res, "norel_wall.csv"))
    if not rows and not walk:
        return
    print("## 5. Issue 10 ablation: no release hook (norelbench)\n")
    print("**today** = the shipped programs (connect4, getpeername4, sock_release); **norel** = "
          "the same without sock_release: a walk of the TCP sockets per poll settles closed "
          "sockets, tp_btf/tcp_receive_reset counts refused connects (bpf/steer_norel.bpf.c); "
          "**lean** = today with the release program cut to its cookie test (no layout-0 "
          "branch). Each attached to its own sibling cgroup, interleaved round by round; 256 "
          "backends, spread "
          "shape. total = every program per connection (getpeername per call, apart); net = "
          "total minus the floors of the cgroup hooks that ran. Medians over rounds.\n")
    if rows:
        print("| variant | shape | connect4 ns | release ns | reset signal ns | total ns | "
              "net ns | getpeername ns per call | errors |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for v in ("today", "norel", "lean"):
            for sh in ("unsteered", "steered", "refused"):
                sub = [r for r in rows if r["variant"] == v and r["shape"] == sh]
                if not sub:
                    continue
                print(f"| {v} | {sh} | {med(sub, 'connect4_ns'):.0f} | "
                      f"{med(sub, 'release_ns'):.0f} | {med(sub, 'reset_ns'):.1f} | "
                      f"{med(sub, 'total_ns'):.0f} | {med(sub, 'net_ns'):.0f} | "
                      + ("-" if sh != "steered" else f"{med(sub, 'getpeername_ns'):.0f}")
                      + f" | {sum(int(r['errors']) for r in sub)} |")
        print()
        for sh in ("unsteered", "steered", "refused"):
            by = {}
            for r in rows:
                if r["shape"] == sh:
                    by.setdefault(r["round"], {})[r["variant"]] = float(r["total_ns"])
            for v in ("norel", "lean"):
                rat = [d[v] / d["today"] for d in by.values()
                       if v in d and "today" in d and d["today"] > 0]
                if rat:
                    print(f"- {sh}: {v} / today total, per round: "
                          f"{statistics.median(rat):.3f} ({min(rat):.3f}-{max(rat):.3f})")
        for v in ("today", "norel", "lean"):
            un = [r for r in rows if r["variant"] == v and r["shape"] == "unsteered"]
            if un:
                tot = [float(r["total_ns"]) for r in un]
                print(f"- unsteered, {v}, in total: {med(un, 'total_ns'):.0f} ns "
                      f"({min(tot):.0f}-{max(tot):.0f}): "
                      f"{verdict(med(un, 'total_ns'), TARGETS['unsteered ns'])}; "
                      f"rounds <= 150: {sum(t <= 150 for t in tot)} of {len(tot)}")
        print()
        print("Floors (an empty program of each type, time per run; runs per connection over "
              "every connection measured; tracing hooks are host-wide):\n")
        print("| hook | ns per run | runs per connection |")
        print("|---|---:|---:|")
        for name, k, runs in (("cgroup/connect4", "floor_connect4_ns", None),
                              ("cgroup/sock_release", "floor_release_ns", None),
                              ("cgroup/getpeername4", "floor_getpeername_ns", "per call"),
                              ("sockops (cgroup)", "floor_sockops_ns", "sockops_runs"),
                              ("tp_btf/tcp_receive_reset", "floor_tp_reset_ns", "tp_reset_runs"),
                              ("tp_btf/inet_sock_set_state", "floor_tp_set_state_ns",
                               "tp_set_state_runs"),
                              ("fentry/tcp_done", "floor_fentry_tcp_done_ns",
                               "fentry_tcp_done_runs")):
            sub = [r for r in rows if r["shape"] != "refused"]  # ordinary connections
            v = med(sub, k)
            r = ("1" if runs is None else runs if runs == "per call"
                 else f"{med(sub, runs):.2f}")
            if v < 0:
                print(f"| {name} | not loadable on this kernel | - |")
            elif v == 0:
                rr = [x for x in rows if x["shape"] == "refused"]
                print(f"| {name} | {med(rr, k):.0f} (measured on refused connects) | {r} "
                      f"({med(rr, runs):.2f} per refused connect) |")
            else:
                print(f"| {name} | {v:.0f} | {r} |")
        print()
    walk_tw = read(os.path.join(res, "norel_walk_tw.csv"))
    if walk or walk_tw:
        print("The walk that replaces the hook, per poll (N/2 steered sockets held open or "
              "orphaned, their N/2 peers in the listeners' backlogs; the kernel walks the "
              "host's whole TCP hash table, visited counts this namespace's sockets):\n")
        print("| sockets | visited | with a record | walk ms | walk ns per socket | BPF ns per "
              "socket | record scan ms | polls until live = 0 after close |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for tw, src in (("", walk), (" + TIME_WAIT of the bpf part", walk_tw)):
            for n in sorted({int(r["sockets"]) for r in src}):
                sub = [r for r in src if r["kind"] == "walk" and int(r["sockets"]) == n]
                lag = [r for r in src if r["kind"] == "lag" and int(r["sockets"]) == n]
                if not sub:
                    continue
                print(f"| {n}{tw} | {med(sub, 'visited'):.0f} | {med(sub, 'matched'):.0f} | "
                      f"{med(sub, 'walk_ns') / 1e6:.1f} | {med(sub, 'walk_ns_per_socket'):.0f} | "
                      f"{med(sub, 'walk_bpf_ns_per_socket'):.0f} | "
                      f"{med(sub, 'scan_ns') / 1e6:.2f} | "
                      + (lag[0]["poll"] if lag else "-") + " |")
        print()
    for r in walk:
        if r["kind"] == "netns":  # columns: kind, ok, live before, live after, peer ok
            vals = list(r.values())
            print(f"A steered socket held open in another network namespace of the same "
                  f"cgroup (steered and reporting the virtual address: "
                  f"{'yes' if vals[1] == '1' else 'NO'}): live {vals[2]} before two polls, "
                  f"{vals[3]} after; getpeername after them reports the virtual address: "
                  f"{'yes' if vals[4] == '1' else 'no'}. The walk sees its own namespace "
                  f"only.\n")
    if wall:
        by = {}
        for r in wall:
            by.setdefault(r["round"], {})[r["variant"]] = float(r["ns_per_socket_close"])
        full = [d for d in by.values() if len(d) == 4]
        if full:
            parts = []
            for v in ("today", "norel", "lean"):
                d = [x[v] - x["none"] for x in full]
                parts.append(f"{v} - none {statistics.median(d):.0f} "
                             f"({min(d):.0f} to {max(d):.0f})")
            print(f"socket()+close() without statistics, ns per pair, median of {len(full)} "
                  f"rounds: none {statistics.median(x['none'] for x in full):.0f}; per round, "
                  + ", ".join(parts) + ".\n")


def ctl_table(cycles, runs):
    """One row per scale; returns {backends: (median cycle ms, median RSS MiB)}."""
    print("| backends | services | cycle ms median (max) | publish ms median (max) | VmRSS MiB | "
          "VmHWM MiB | daemon CPU ms/cycle (user+sys) | fake worker CPU % | mean poll ms | "
          "failed polls | scrape ms | healthy at end |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    res_by = {}
    for n in sorted({int(r["backends"]) for r in runs}):
        rr = [r for r in runs if int(r["backends"]) == n]
        cc = [r for r in cycles if int(r["backends"]) == n]
        cyc = [float(r["cycle_s"]) * 1000 for r in cc]
        pub = [float(r["publish_s"]) * 1000 for r in cc]
        ok = sum(int(r["polls_ok"]) for r in rr)
        bad = sum(int(r["polls_failed"]) for r in rr)
        rss = med(rr, "vmrss_kib") / 1024
        cpu_u, cpu_s = med(rr, "daemon_user_ms_per_cycle"), med(rr, "daemon_sys_ms_per_cycle")
        res_by[n] = (statistics.median(cyc) if cyc else float("nan"), rss)
        print(f"| {n} | {rr[0]['services']} | "
              f"{statistics.median(cyc) if cyc else float('nan'):.1f} "
              f"({max(cyc) if cyc else float('nan'):.1f}) | "
              f"{statistics.median(pub) if pub else float('nan'):.1f} "
              f"({max(pub) if pub else float('nan'):.1f}) | {rss:.1f} | "
              f"{med(rr, 'vmhwm_kib') / 1024:.1f} | {cpu_u + cpu_s:.0f} ({cpu_u:.0f}+{cpu_s:.0f}) | "
              f"{med(rr, 'worker_cpu_pct'):.0f} | {med(rr, 'poll_mean_ms'):.1f} | "
              f"{bad} of {ok + bad} ({100 * bad / max(ok + bad, 1):.1f}%) | "
              f"{med(rr, 'scrape_ms'):.1f} | {int(med(rr, 'healthy'))} |")
    print()
    return res_by


def ctl_section(res):
    cycles = read(os.path.join(res, "ctl_cycles.csv"))
    runs = read(os.path.join(res, "ctl_runs.csv"))
    if not runs:
        return
    print("## 3. Control plane: smg-steerd (release) against fake workers, interval 1 s\n")
    print("Services of at most 250 backends; one fake worker process answers every GetLoads "
          "on N loopback addresses. cycle = GetLoads sent to "
          "new tables in effect (smg_steer_cycle_seconds); publish = scoring and publishing "
          "(smg_steer_publish_seconds), the daemon's own part of it. Daemon CPU is user + "
          "system time of all its threads per cycle, over a window of cycles with no "
          "/metrics scrapes (rendering /metrics costs the daemon CPU too: its time per scrape "
          "is the last column but one).\n")
    print("### With bench/fastworker (gRPC core in C, one thread)\n")
    res_by = ctl_table(cycles, runs)
    py_runs = read(os.path.join(res, "ctl_py_runs.csv"))
    if py_runs:
        print("### With tests/lib/fake_worker.py --many (Python, the reference worker)\n")
        ctl_table(read(os.path.join(res, "ctl_py_cycles.csv")), py_runs)
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
            g_mib = int(g["rss_after_kib"]) / 1024
            d_mib = res_by.get(n, (0, float("nan")))[1]
            print(f"| {n} | {d_mib:.1f} | {g_mib:.1f} | {float(g['kib_per_channel']):.1f} | "
                  f"{d_mib / g_mib:.2f} |")
        print()
    if 1000 in res_by and 100 in res_by:
        cyc, rss = res_by[1000]
        print("| at 1,000 backends | value | target |")
        print("|---|---:|---|")
        print(f"| cycle ms (median) | {cyc:.1f} | {verdict(cyc, TARGETS['cycle ms at 1000 backends'])} |")
        print(f"| VmRSS MiB | {rss:.1f} | {verdict(rss, TARGETS['RSS MiB at 1000 backends'])} |")
        print(f"\nRSS growth per backend, (RSS(1000) - RSS(100)) / 900: "
              f"**{(rss - res_by[100][1]) * 1024 / 900:.1f} KiB**.\n")


def src_section(res):
    rows = read(os.path.join(res, "sources.csv"))
    if not rows:
        return
    print("## 4. Load sources: smg-steerd CPU per poll\n")
    print("The daemon (release build) polls N backends of one source each second; its user + "
          "system CPU time over a window of whole cycles without scrapes, divided by the polls "
          "in the window. gRPC against bench/fastworker (one idle rank), HTTP against nginx "
          "serving fixed bodies (keep-alive), tcp = a backend with no load endpoint, polled by "
          "a TCP connect to its traffic port. Sources interleaved round by round; ratio = "
          "median / median of gRPC SGLang GetLoads, and per-round ratios (min-max).\n")
    print("| source | backends | CPU us per poll (median) | ratio to gRPC SGLang | per-round "
          "ratios | failed polls |")
    print("|---|---:|---:|---:|---|---:|")
    base = [r for r in rows if r["source"] == "grpc-sglang"]
    mb = med(base, "cpu_us_per_poll")
    ratio_metrics = float("nan")
    for src in dict.fromkeys(r["source"] for r in rows):
        rr = [r for r in rows if r["source"] == src]
        m = med(rr, "cpu_us_per_poll")
        by_round = {r["round"]: float(r["cpu_us_per_poll"]) for r in base}
        pr = [float(r["cpu_us_per_poll"]) / by_round[r["round"]] for r in rr
              if by_round.get(r["round"])]
        spread = f"{min(pr):.2f}-{max(pr):.2f}" if pr else "-"
        failed = sum(int(r["polls_failed"]) for r in rr)
        if src == "http-metrics-vllm":
            ratio_metrics = m / mb
        print(f"| {src} | {rr[0]['backends']} | {m:.1f} | {m / mb:.2f} | {spread} | {failed} |")
    print()
    key = "HTTP /metrics poll CPU / gRPC GetLoads poll CPU"
    print(f"| target | value | verdict |\n|---|---:|---|\n"
          f"| vLLM /metrics poll / SGLang GetLoads poll | {ratio_metrics:.2f} | "
          f"{verdict(ratio_metrics, TARGETS[key])} |\n")


def wire_med(rows, variant, phase, metric):
    vals = [float(r["value"]) for r in rows
            if r["variant"] == variant and r["phase"] == phase and r["metric"] == metric]
    return statistics.median(vals) if vals else float("nan")


def wire_section(res):
    rows = read(os.path.join(res, "wire.csv"))
    if not rows:
        return
    print("## 6. Request accounting on steered sockets (issue 11)\n")
    print("wirecost: one backend, one steered keep-alive connection doing 512-byte requests "
          "and 256-byte responses (rr), the same unsteered (direct: the backend's address, "
          "same cgroup), and 64 KiB-write uploads (bulk, bulkdirect). Variants interleaved "
          "round by round: off = no accounting program, skb = the shipped cgroup_skb "
          "egress/ingress programs, msg = the card's sockops + SOCKHASH + sk_msg + sk_skb "
          "verdict, trace = the tracepoint ablation (tp_btf sock_send_length + tcp_probe, "
          "host-wide: they also run for the server's unsteered socket, outside the cgroup). "
          "BPF ns = run_time_ns / run_cnt (per run) or / messages (per message: "
          "requests written for egress and sk_msg, responses read for ingress and sk_skb, "
          "64 KiB writes in bulk); floor = an empty program of the same cgroup type attached "
          "next to them. Medians over the rounds.\n")
    progs = {"skb": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
             "msg": [("sockops", "floor_sockops"), ("sk_msg", None), ("sk_skb", None)],
             "trace": [("tp_send_length", "floor_tp_send"), ("tp_tcp_probe", "floor_tp_probe")],
             "find": [("cost_find", "floor_egress")], "lock": [("cost_lock", "floor_egress")],
             "cad": [("cad_egress", "floor_egress"), ("cad_ingress", "floor_ingress")],
             "lazy": [("lazy_egress", "floor_egress"), ("lazy_ingress", "floor_ingress")],
             "step": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
             "prev": [("prev_ingress", "floor_ingress")],
             "push": [("skb_egress", "floor_egress"), ("skb_ingress", "floor_ingress")],
             "fast": [("fast_egress", "floor_egress"), ("fast_ingress", "floor_ingress")],
             "min": [("min_egress", "floor_egress"), ("min_ingress", "floor_ingress")]}
    print("| variant | phase | program | runs per message | ns per run | floor ns per run | "
          "ns per message | net ns per message (minus floor) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    net_rr = {}
    for v, plist in progs.items():
        for ph in ("rr", "direct", "bulk", "bulkdirect", "stream"):
            msgs = wire_med(rows, v, ph, "messages")
            for prog, floor in plist:
                runs = wire_med(rows, v, ph, f"{prog}_runs")
                if runs != runs:
                    continue
                per_run = wire_med(rows, v, ph, f"{prog}_ns_per_run")
                per_msg = wire_med(rows, v, ph, f"{prog}_ns_per_msg")
                fl = wire_med(rows, v, ph, f"{floor}_ns_per_run") if floor else float("nan")
                net = per_msg - fl * runs / msgs if fl == fl else float("nan")
                if v == "skb" and ph == "rr":
                    net_rr[prog] = (per_msg, net)
                print(f"| {v} | {ph} | {prog} | {runs / msgs:.2f} | {per_run:.0f} | "
                      f"{fl:.0f} | {per_msg:.0f} | {net:.0f} |")
    print()
    print("| variant | rr p50 us | rr p99 us | rr mean us | direct p50 us | bulk MiB/s | "
          "bulkdirect MiB/s | bulk / bulkdirect |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for v in ("off", "skb", "step", "push", "msg", "trace"):
        if wire_med(rows, v, "rr", "messages") != wire_med(rows, v, "rr", "messages"):
            continue
        b, bd = wire_med(rows, v, "bulk", "mib_per_s"), wire_med(rows, v, "bulkdirect",
                                                                  "mib_per_s")
        print(f"| {v} | {wire_med(rows, v, 'rr', 'p50_us'):.1f} | "
              f"{wire_med(rows, v, 'rr', 'p99_us'):.1f} | {wire_med(rows, v, 'rr', 'mean_us'):.1f} | "
              f"{wire_med(rows, v, 'direct', 'p50_us'):.1f} | {b:.0f} | {bd:.0f} | "
              f"{b / bd:.2f} |")
    print()
    worst = max((t for t, _ in net_rr.values()), default=float("nan"))
    worst_net = max((n for _, n in net_rr.values()), default=float("nan"))
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
    trace_rows(rows)
    cost_rows(rows)
    cad_rows(rows)
    step_rows(rows)
    push_rows(rows)
    lazy_rows(rows)
    fast_rows(rows)
    print()
    placement_rows(res, rows)


def added_per_later_packet(rows, variant, prog):
    """BPF ns a variant's ingress program adds to the shipped one (skb) per streamed
    response packet after the first, and packets per response; (nan, nan) without it."""
    skb_in = wire_med(rows, "skb", "stream", "skb_ingress_ns_per_msg")
    v_in = wire_med(rows, variant, "stream", f"{prog}_ns_per_msg")
    if v_in != v_in or skb_in != skb_in:
        return float("nan"), float("nan")
    runs = wire_med(rows, variant, "stream", f"{prog}_runs") / \
        wire_med(rows, variant, "stream", "messages")
    return ((v_in - skb_in) / (runs - 1) if runs > 1 else float("nan")), runs


def step_rows(rows):
    """The step cadence as shipped (variant step: the shipped pair, the table published with
    STEER_TBL_STEP) against the same pair without it (skb): streamed answers (the cadence's
    work on every packet after an answer's first) and single-packet answers (rr)."""
    later, runs = added_per_later_packet(rows, "step", "skb_ingress")
    if runs != runs:
        return
    rr = wire_med(rows, "step", "rr", "skb_ingress_ns_per_msg") - \
        wire_med(rows, "skb", "rr", "skb_ingress_ns_per_msg")
    total = wire_med(rows, "step", "stream", "skb_ingress_ns_per_run")
    floor = wire_med(rows, "step", "stream", "floor_ingress_ns_per_run")
    print(f"| step cadence (shipped, --wire-estimator fluid-step): BPF ns added per response "
          f"packet after the first ({runs:.1f} packets per response; such a packet "
          f"{total:.0f} in all, {total - floor:.0f} net of the floor) | {later:.0f} | "
          f"{verdict(later, TARGETS['wire ns per message'])} |")
    print(f"| step cadence (shipped): BPF ns added per single-packet response (rr: the answer "
          f"also moves the step's end) | {rr:.0f} | report |")
    prev = wire_med(rows, "prev", "rr", "prev_ingress_ns_per_msg")
    skb = wire_med(rows, "skb", "rr", "skb_ingress_ns_per_msg")
    if prev == prev:
        print(f"| step cadence off (the default): BPF ns per response, shipped ingress {skb:.0f} "
              f"/ as before the cadence {prev:.0f} (rr) | {skb - prev:.0f} | report |")
        ps = wire_med(rows, "prev", "stream", "prev_ingress_ns_per_msg")
        ss = wire_med(rows, "skb", "stream", "skb_ingress_ns_per_msg")
        print(f"| step cadence off: BPF ns per streamed response of 8 packets, shipped {ss:.0f} / "
              f"before {ps:.0f} | {ss - ps:.0f} | report |")


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


def lazy_rows(rows):
    """Answers that re-key only a key that fell (variant lazy) against the shipped pair:
    BPF ns per response received (rr), and the share of answers left to the next connect."""
    skb = wire_med(rows, "skb", "rr", "skb_ingress_ns_per_msg")
    lazy = wire_med(rows, "lazy", "rr", "lazy_ingress_ns_per_msg")
    if lazy != lazy or skb != skb:
        return
    floor = wire_med(rows, "lazy", "rr", "floor_ingress_ns_per_run")
    left = wire_med(rows, "lazy", "rr", "lazy_left")
    rekeyed = wire_med(rows, "lazy", "rr", "lazy_rekeyed")
    print(f"| lazy answers (ablation): BPF ns per response, shipped {skb:.0f} / lazy {lazy:.0f} "
          f"(floor {floor:.0f}; {left / max(left + rekeyed, 1) * 100:.0f} % of answers left the "
          f"leaf to the next connect) | {lazy - floor:.0f} net | "
          f"{verdict(lazy - floor, TARGETS['wire ns per message'])} |")


def wire_net(rows, variant, prog, floor):
    """A variant's BPF ns per rr message net of its floor: (ns per message, net)."""
    msgs = wire_med(rows, variant, "rr", "messages")
    per_msg = wire_med(rows, variant, "rr", f"{prog}_ns_per_msg")
    runs = wire_med(rows, variant, "rr", f"{prog}_runs")
    fl = wire_med(rows, variant, "rr", f"{floor}_ns_per_run")
    return per_msg, per_msg - fl * runs / msgs


def fast_rows(rows):
    """The accounting without the service's lock (variant fast: atomics on a send, an answer
    settled with atomics and its leaf left for the next connect's fold) against the shipped
    pair, side by side: BPF ns per request sent and per response received (rr)."""
    if wire_med(rows, "fast", "rr", "messages") != wire_med(rows, "fast", "rr", "messages"):
        return
    for what, prog, floor in (("request sent", "egress", "floor_egress"),
                              ("response received", "ingress", "floor_ingress")):
        skb, skb_net = wire_net(rows, "skb", f"skb_{prog}", floor)
        fast, fast_net = wire_net(rows, "fast", f"fast_{prog}", floor)
        print(f"| without the lock (ablation): BPF ns per {what}, shipped {skb:.0f} ({skb_net:.0f} "
              f"net) / fast {fast:.0f} | {fast_net:.0f} net | "
              f"{verdict(fast_net, TARGETS['wire ns per message'])} |")
    sent = wire_med(rows, "fast", "rr", "fast_sent")
    locked = wire_med(rows, "fast", "rr", "fast_sent_locked")
    print(f"| without the lock (ablation): sends that took no lock | "
          f"{sent / max(sent + locked, 1) * 100:.1f} % | report |")


def placement_rows(res, rows):
    """The shipped accounting and the lock-free ablation per placement of the client and
    the server (wirecost --cpus): BPF ns per message net of the floor, rr."""
    runs = [("any", rows)] + [(c, read(os.path.join(res, f"wire_{c}.csv")))
                             for c in ("same", "split", "rps")]
    runs = [(c, r) for c, r in runs if r]
    if len(runs) < 2:
        return
    print("Placement of the client and the server (`--cpus`: any = the scheduler's choice, "
          "same = both on CPU 0, split = client on CPU 0 and server on CPU 1, rps = split with "
          "the loopback's received packets handed to CPU 0 by RPS), BPF ns per rr "
          "message net of the floor, medians of the rounds:\n")
    print("| cpus | shipped, request sent | shipped, response | without the lock, request sent "
          "| without the lock, response | the least (record only), request sent | the least, "
          "response | a request to its record (find) | rr p50 µs off / shipped |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cpus, r in runs:
        cells = []
        for v in ("skb", "fast", "min"):
            for prog, floor in (("egress", "floor_egress"), ("ingress", "floor_ingress")):
                cells.append(f"{wire_net(r, v, f'{v}_{prog}', floor)[1]:.0f}")
        cells.append(f"{wire_net(r, 'find', 'cost_find', 'floor_egress')[1]:.0f}")
        print(f"| {cpus} | {' | '.join(cells)} | {wire_med(r, 'off', 'rr', 'p50_us'):.1f} / "
              f"{wire_med(r, 'skb', 'rr', 'p50_us'):.1f} |")
    print()
    print("| target, per placement | value | verdict |\n|---|---:|---|")
    for cpus, r in runs:
        worst = max(wire_net(r, "skb", f"skb_{prog}", f"floor_{prog}")[1]
                    for prog in ("egress", "ingress"))
        print(f"| shipped accounting, BPF ns per message sent or received net of the floor, "
              f"cpus {cpus} | {worst:.0f} | {verdict(worst, TARGETS['wire ns per message'])} |")
    print()


def cad_rows(rows):
    """The step cadence's work (variant cad) against the shipped pair (skb), both on
    streamed answers (stream: each response in several packets; the cadence runs on all
    but the first of each)."""
    later, runs = added_per_later_packet(rows, "cad", "cad_ingress")
    if runs != runs:
        return
    out = wire_med(rows, "cad", "stream", "cad_egress_ns_per_msg") - \
        wire_med(rows, "skb", "stream", "skb_egress_ns_per_msg")
    raised = wire_med(rows, "cad", "stream", "cad_raised")
    lowered = wire_med(rows, "cad", "stream", "cad_lowered")
    print(f"| step cadence (ablation): BPF ns added per response packet after the first "
          f"({runs:.1f} packets per response; {lowered / max(raised + lowered, 1) * 100:.1f} % "
          f"took the lock) | {later:.0f} | {verdict(later, TARGETS['wire ns per message'])} |")
    print(f"| step cadence (ablation): BPF ns added per request sent (clearing the socket's "
          f"time) | {out:.0f} | report |")


def cost_rows(rows):
    """Where a steered request's BPF time goes: the shipped egress program against the same
    cut short after the record's lookup (find) and after the service's lock (lock)."""
    find = wire_med(rows, "find", "rr", "cost_find_ns_per_msg")
    if find != find:
        return
    lock = wire_med(rows, "lock", "rr", "cost_lock_ns_per_msg")
    full = wire_med(rows, "skb", "rr", "skb_egress_ns_per_msg")
    floor = wire_med(rows, "skb", "rr", "floor_egress_ns_per_run")
    print(f"| a request sent, BPF ns: to the record {find:.0f}, + slot, counters, tree and the "
          f"lock {lock - find:.0f}, + counting {full - lock:.0f} (= {full:.0f}; floor "
          f"{floor:.0f}) | {find - floor:.0f} net to the record | report |")


def trace_rows(rows):
    """The tracepoint ablation's steered event: each tracepoint runs once per message for
    the steered client and once for the unsteered server (both on this host), so the
    steered run is rr's ns per message less direct's (all unsteered) plus one unsteered
    run."""
    if wire_med(rows, "trace", "rr", "messages") != wire_med(rows, "trace", "rr", "messages"):
        return
    for prog, floor, what in (("tp_send_length", "floor_tp_send", "send"),
                              ("tp_tcp_probe", "floor_tp_probe", "receive")):
        rr = wire_med(rows, "trace", "rr", f"{prog}_ns_per_msg")
        direct = wire_med(rows, "trace", "direct", f"{prog}_ns_per_msg")
        unsteered = wire_med(rows, "trace", "direct", f"{prog}_ns_per_run")
        fl = wire_med(rows, "trace", "direct", f"{floor}_ns_per_run")
        steered = rr - direct + unsteered
        print(f"| tracepoint ablation, {what}: BPF ns per steered message (net of the floor "
              f"{fl:.0f}) | {steered:.0f} ({steered - fl:.0f}) | "
              f"{verdict(steered - fl, TARGETS['wire ns per message'])} |")
        print(f"| tracepoint ablation, {what}: unsteered run, any socket of the host "
              f"(one early return) | {unsteered:.0f} | report |")


def ccprobe_section(res):
    """The congestion-control probe (ccprobe): key=value lines."""
    path = os.path.join(res, "ccprobe.txt")
    if not os.path.exists(path):
        return
    kv = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            kv[k] = v
    print("### Request accounting from a per-socket congestion control (probe)\n")
    print("ccprobe: connect4 sets a wrapper of BBR (struct_ops, BBR's own kfuncs) on each "
          "connect of one cgroup; its cwnd_event (TX_START) and in_ack_event count request "
          "bytes from write_seq and look for answer bytes (bytes_received). 'floor' is the "
          "same wrapper without the probes. Keep-alive requests of 100 B to 300 kB; the late "
          "server answers after 60 ms, after its delayed ACK. BPF ns = run_time_ns / "
          "run_cnt, medians of interleaved rounds.\n")
    print("| measurement | quick server | late server |\n|---|---:|---:|")
    for key, what in (("requests", "requests sent"), ("tx_starts", "TX_START events"),
                      ("bytes_written", "request bytes written"),
                      ("bytes_counted", "request bytes counted"),
                      ("answered_at_ack", "answers seen when they arrived (at an ACK event)"),
                      ("answered_next_request", "answers seen only at the next request")):
        print(f"| {what} | {kv.get('signals.quick.' + key, '-')} | "
              f"{kv.get('signals.late.' + key, '-')} |")
    print()
    print("| measurement | value |\n|---|---:|")
    rows = (("unsteered.ca", "algorithm of an unsteered connection"),
            ("unsteered.callback_events", "callbacks run for it (50 requests)"),
            ("bpf.connect4_none_ns", "connect4 without the setsockopt, BPF ns"),
            ("bpf.connect4_set_ns", "connect4 with setsockopt(TCP_CONGESTION), BPF ns"),
            ("bpf.connect4_set_floor_ns", "the same, to the floor's wrapper, BPF ns"),
            ("bpf.probe_cwnd_event_ns", "cwnd_event with the probe, ns per call"),
            ("bpf.floor_cwnd_event_ns", "cwnd_event, floor, ns per call"),
            ("bpf.probe_in_ack_event_ns", "in_ack_event (the probe's alone), ns per call"),
            ("bpf.floor_main_ns", "cong_control (BBR's main through BPF), ns per call"),
            ("bpf.probe_per_exchange_ns", "every callback, wrapper, BPF ns per 512 B exchange"),
            ("bpf.floor_per_exchange_ns", "every callback, floor, BPF ns per exchange"),
            ("wall.probe_ratio", "wall time per exchange, wrapper / host's algorithm"),
            ("wall.floor_ratio", "wall time per exchange, floor / host's algorithm"))
    for key, what in rows:
        print(f"| {what} | {kv.get(key, '-')} |")
    print()


def probe_section(res):
    """10. The step probe: probecpu.py writes its table whole."""
    path = os.path.join(res, "probe_cpu.md")
    if not os.path.exists(path):
        return
    print("## 10. The step probe (--step-probe): its thread and its kernel half, live\n")
    print("The same program's cost per run and per packet, measured in isolation next to an "
          "empty program's floor, is in section 9's table (probe1, probe32).\n")
    with open(path) as f:
        print(f.read())


def main():
    res = sys.argv[1]
    print("# smg-steer benchmark summary\n")
    machine = os.path.join(res, "machine.md")
    if os.path.exists(machine):
        with open(machine) as f:
            print(f.read().replace("# Machine", "## Machine").replace("# Commands",
                                                                      "## Commands"))
    load = os.path.join(res, "load.txt")
    if os.path.exists(load):
        print("## Load on the machine during the run\n")
        print("The machine is shared; these are /proc/loadavg readings (2 cores):\n")
        with open(load) as f:
            for line in f:
                print(f"- {line.strip()}")
        print()
    conn_section(res)
    conn_pairs_section(res)
    wrk_section(res)
    dec_section(res)
    ctl_section(res)
    src_section(res)
    norel_section(res)
    wire_section(res)
    ccprobe_section(res)
    ingress_summary.section(res)
    offcost_summary.section(res)
    peer_summary.section(res)
    probe_section(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
