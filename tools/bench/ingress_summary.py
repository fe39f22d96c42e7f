"""The ingress part of summary.md (tools/bench/summarize.py): ingress.csv and
ingress_bpf.csv of tools/bench/ingress.py, medians over interleaved rounds,
ratios paired round by round. brief() prints the part's short tables and
returns its rows of the targets' table; section() prints every table."""
import csv
import os
import statistics

# Connection-rate targets: the XDP path's connections per second / the anchor's, at least.
RATE_TARGETS = {"nft": 1.0, "haproxy": 2.0, "direct": 0.9}
RATE_ANCHORS = {"nft": "nftables DNAT", "haproxy": "HAProxy", "direct": "direct to one backend"}
SYN_NS_TARGET = 1500.0
NONSYN_NS_TARGET = 300.0
ARM_NAMES = {
    "xdp": "xdp: smg-steer XDP, native mode, IPIP + XDP_TX, BPF decap, DSR",
    "xdpg": "xdpg: the same in generic mode (`--xdp-mode generic`), its own LB namespace",
    "nft": "nft: nftables DNAT, numgen random mod 3 vmap, masquerade",
    "haproxy": "haproxy: HAProxy 2.6 mode tcp, leastconn",
    "ecmp": "ecmp: a router namespace, one ECMP route over the 3 backends (5-tuple hash), the "
            "address on the backends' lo: the XDP path's packet path, kernel forwarding instead "
            "of XDP + IPIP",
    "direct": "direct: one backend, no LB",
}


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def med(vals):
    vals = [v for v in vals if v == v]
    return statistics.median(vals) if vals else float("nan")


def per_round_ratios(rows, key, num, den):
    by = {}
    for r in rows:
        by.setdefault(r["round"], {})[r["arm"]] = float(r[key])
    return [v[num] / v[den] for v in by.values() if num in v and den in v and v[den] > 0]


def fmt_ratios(ratios):
    if not ratios:
        return "-"
    return f"{med(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def conn_tables(rows):
    for conc in sorted({r["concurrency"] for r in rows}, key=int):
        sub = [r for r in rows if r["concurrency"] == conc]
        arms = [a for a in ARM_NAMES if any(r["arm"] == a for r in sub)]
        n_rounds = len({r["round"] for r in sub})
        print(f"#### Concurrency {conc} ({'sequential' if conc == '1' else conc + ' threads'}), "
              f"median of {n_rounds} rounds\n")
        print("| path | conns/s | p50 us | p99 us | per-connection us | backends reached | errors |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for a in arms:
            ar = [r for r in sub if r["arm"] == a]
            print(f"| {a} | {med([float(r['conns_per_s']) for r in ar]):.0f} | "
                  f"{med([float(r['p50_us']) for r in ar]):.1f} | "
                  f"{med([float(r['p99_us']) for r in ar]):.1f} | "
                  f"{med([float(r['per_conn_us']) for r in ar]):.1f} | "
                  f"{int(med([float(r['backends_seen']) for r in ar]))} | "
                  f"{sum(int(r['errors']) for r in ar)} |")
        print()
        nums = [a for a in ("xdp", "xdpg") if a in arms]
        if not nums:
            continue
        print("| connection rate | per-round ratios: median (min-max) | p50 latency, per-round "
              "ratios | target | verdict |")
        print("|---|---:|---:|---:|---|")
        for num in nums:
            for den in ("nft", "haproxy", "ecmp", "direct") + (("xdp",) if num != "xdp" else ()):
                if den not in arms:
                    continue
                tgt = RATE_TARGETS.get(den)
                rr = per_round_ratios(sub, "conns_per_s", num, den)
                v = med(rr)
                verdict = "-" if tgt is None else (
                    "not measured" if v != v else ("met" if v >= tgt else "MISSED"))
                print(f"| {num}/{den} | {fmt_ratios(rr)} | "
                      f"{fmt_ratios(per_round_ratios(sub, 'p50_us', num, den))} | "
                      + (f">= {tgt:g}" if tgt else "(anchor)") + f" | {verdict} |")
        print()
    # The anchors against each other, for the record when the XDP arm is missing too.
    for conc in sorted({r["concurrency"] for r in rows}, key=int):
        sub = [r for r in rows if r["concurrency"] == conc]
        pairs = [("nft", "direct"), ("haproxy", "direct"), ("ecmp", "direct"), ("nft", "haproxy")]
        cells = [f"{n}/{d} {fmt_ratios(per_round_ratios(sub, 'conns_per_s', n, d))}"
                 for n, d in pairs if any(r["arm"] == n for r in sub) and any(r["arm"] == d for r in sub)]
        if cells:
            print(f"Anchors' connection-rate ratios at concurrency {conc}: " + "; ".join(cells) + ".\n")


def ns_per(r):
    c = int(r["run_cnt"])
    return int(r["run_time_ns"]) / c if c else float("nan")


def bpf_figures(rows):
    """ns per packet, medians over rounds: SYN (a burst of new flows), non-SYN
    (established flows), the same in generic mode, the floor and the decap."""
    def of(phase, prog):
        return med([ns_per(r) for r in rows if r["phase"] == phase and r["prog"] == prog])
    return {"syn": of("syns", "xdp"), "nonsyn": of("flows", "xdp"),
            "g_syn": of("g-syns", "xdp"), "g_nonsyn": of("g-flows", "xdp"),
            "floor": med([ns_per(r) for r in rows if r["prog"] == "floor"]),
            "decap": med([ns_per(r) for r in rows if r["prog"] == "decap"])}


def brief(res):
    rows = read(os.path.join(res, "ingress.csv"))
    if not rows:
        return []
    targets = []
    concs = sorted({r["concurrency"] for r in rows}, key=int)
    arms = [a for a in ARM_NAMES if any(r["arm"] == a for r in rows)]
    n_rounds = len({r["round"] for r in rows})
    print(f"Clients in a namespace off the node, connections through each path to the same "
          f"three backends (connect, one-byte request, one-byte answer, close), {n_rounds} "
          f"interleaved rounds; xdp / arm = median of the per-round ratios of connections "
          f"per second. " + "; ".join(ARM_NAMES[a] for a in arms) + ".\n")
    head = "| path |"
    for c in concs:
        head += f" conns/s, {c} client{'s' if c != '1' else ''} | xdp / path |"
    print(head)
    print("|---|" + "---:|---:|" * len(concs))
    for a in arms:
        cells = []
        for c in concs:
            sub = [r for r in rows if r["concurrency"] == c]
            ar = [float(r["conns_per_s"]) for r in sub if r["arm"] == a]
            ratio = med(per_round_ratios(sub, "conns_per_s", "xdp", a)) if a != "xdp" else \
                float("nan")
            cells += [f"{med(ar):,.0f}", "-" if ratio != ratio else f"{ratio:.2f}"]
        print(f"| {a} | " + " | ".join(cells) + " |")
    print()
    if "xdp" in arms:
        for den, tgt in RATE_TARGETS.items():
            if den not in arms:
                continue
            vals = [med(per_round_ratios([r for r in rows if r["concurrency"] == c],
                                         "conns_per_s", "xdp", den)) for c in concs]
            fig = "; ".join(f"{v:.2f} ({'sequential' if c == '1' else c + ' clients'})"
                            for v, c in zip(vals, concs))
            ok = [v == v and v >= tgt for v in vals]
            who = ["sequential" if c == "1" else f"{c} clients" for c in concs]
            verdict = "met" if all(ok) else "**missed**" if not any(ok) else \
                "met " + ", ".join(w for w, k in zip(who, ok) if k) + "; **missed** " + \
                ", ".join(w for w, k in zip(who, ok) if not k)
            targets.append({"target": f"XDP ingress connection rate >= {tgt:g} x "
                                      f"{RATE_ANCHORS[den]}",
                            "measured": "ingress.py, connections per second",
                            "figure": fig, "anchor": RATE_ANCHORS[den],
                            "part": "ingress", "verdict": verdict})
    bpf = read(os.path.join(res, "ingress_bpf.csv"))
    if bpf:
        f = bpf_figures(bpf)
        print("| XDP, ns per packet (bpf_stats) | native | generic |")
        print("|---|---:|---:|")
        print(f"| SYN of a new flow | {f['syn']:.0f} | {f['g_syn']:.0f} |")
        print(f"| packet of an established flow | {f['nonsyn']:.0f} | {f['g_nonsyn']:.0f} |")
        print(f"| empty XDP program (floor) | {f['floor']:.0f} | - |")
        print(f"| the backends' decap (tc) | {f['decap']:.0f} | - |")
        print()
        for what, v, tgt in (("per SYN", f["syn"], SYN_NS_TARGET),
                             ("per established packet", f["nonsyn"], NONSYN_NS_TARGET)):
            targets.append({"target": f"XDP program <= {tgt:,.0f} ns {what}",
                            "measured": "ingress.py, bpf_stats, native mode",
                            "figure": f"{v:.0f}",
                            "anchor": f"empty XDP program: {f['floor']:.0f} ns",
                            "part": "ingress",
                            "verdict": "not measured" if v != v else
                            ("met" if v <= tgt else "**missed**")})
    return targets


def bpf_tables(rows):
    """ns per packet: the program, its floor, the decap; SYN and non-SYN split."""
    flows = [r for r in rows if r["phase"] == "flows"]
    nonsyn = med([ns_per(r) for r in flows if r["prog"] == "xdp"])
    print("| phase | XDP program ns/packet | packets per connection | empty XDP program "
          "(floor) ns/packet | decap ns/packet (3 backends) |")
    print("|---|---:|---:|---:|---:|")
    for ph in sorted({r["phase"] for r in rows}):
        sub = [r for r in rows if r["phase"] == ph]
        x = [r for r in sub if r["prog"] == "xdp"]
        ppc = med([int(r["run_cnt"]) / int(r["syns"]) for r in x if int(r["syns"])])
        fl = med([ns_per(r) for r in sub if r["prog"] == "floor"])
        print(f"| {ph} | {med([ns_per(r) for r in x]):.0f} | "
              + (f"{ppc:.1f}" if "conn" in ph else "-") + " | "
              + ("-" if fl != fl else f"{fl:.0f}") + " | "
              f"{med([ns_per(r) for r in sub if r['prog'] == 'decap']):.0f} |")
    print()
    syn_alone = med([ns_per(r) for r in rows if r["phase"] == "syns" and r["prog"] == "xdp"])
    g_syn = med([ns_per(r) for r in rows if r["phase"] == "g-syns" and r["prog"] == "xdp"])
    g_nonsyn = med([ns_per(r) for r in rows if r["phase"] == "g-flows" and r["prog"] == "xdp"])
    syn_sub = []
    for r in rows:
        if r["prog"] != "xdp" or not r["phase"].startswith("conn") or nonsyn != nonsyn:
            continue
        syns, cnt = int(r["syns"]), int(r["run_cnt"])
        if syns and cnt > syns:
            syn_sub.append((int(r["run_time_ns"]) - nonsyn * (cnt - syns)) / syns)
    print("| XDP program | ns per packet | target | verdict |")
    print("|---|---:|---:|---|")
    for name, v, tgt in (("SYN of a new flow (selection, credit, flow insert, FIB look-up, "
                          "encapsulation): SYN bursts", syn_alone, SYN_NS_TARGET),
                         ("non-SYN of an established flow (flow look-up, encapsulation): "
                          "long-lived flows", nonsyn, NONSYN_NS_TARGET),
                         ("the same in generic mode: SYN", g_syn, None),
                         ("the same in generic mode: non-SYN", g_nonsyn, None)):
        if tgt is None:
            if v == v:
                print(f"| {name} | {v:.0f} | - | - |")
            continue
        verdict = "not measured" if v != v else ("met" if v <= tgt else "MISSED")
        print(f"| {name} | {v:.0f} | <= {tgt:g} | {verdict} |")
    print()
    print("Phases (g- = the generic-mode arm, which has no floor program): **conn1/conn4** = "
          "the connection rounds at concurrency 1/4 (every packet "
          "of short connections); **flows** = only long-lived flows send (one-byte writes, "
          "TCP_NODELAY): established packets; **syns** = a burst of raw SYNs of new flows from "
          "an address nobody has, to a VIP port nothing listens on: the new-flow path alone. "
          "The floor is bench/xdppass (`r0 = XDP_PASS; exit`) on the LB veth's bridge-side "
          "peer, which sees every packet the XDP program sends with XDP_TX. Medians over "
          "rounds.\n")
    print(f"Short connections pay per connection about what the connection rounds show: "
          f"(run time - flows' ns x non-SYN packets) / connections = **{med(syn_sub):.0f} ns** "
          f"for the SYN plus what the connection's other packets cost beyond an established "
          f"one (its first ACK marks the flow established, its FIN ends the live count).\n")


def section(res):
    rows = read(os.path.join(res, "ingress.csv"))
    if not rows:
        return
    print("### ingress: clients off the node, through a load balancer (ingress.py)\n")
    print("A client namespace, three load-balancer namespaces (one per path, identical veths) "
          "and three backend namespaces on one bridge; bench/connbench --request in the client "
          "(connect, write a one-byte request, read the one-byte answer of bench/onebyte "
          "--request, close), the same three backends behind every path. Latency = connect() "
          "to the answer; per-connection = a client thread's wall time per connection, "
          "close included:\n")
    for a, text in ARM_NAMES.items():
        print(f"- {text}")
    print()
    waiting = os.path.join(res, "ingress_waiting.txt")
    if os.path.exists(waiting):
        with open(waiting) as f:
            print(f"**XDP path not measured (waiting): {f.read().strip()}**\n")
    conn_tables(rows)
    bpf = read(os.path.join(res, "ingress_bpf.csv"))
    if bpf:
        print("#### XDP program, floor and decap: bpf_stats, ns per packet\n")
        bpf_tables(bpf)
