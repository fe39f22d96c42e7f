"""The ingress part of summary.md (tools/bench/summarize.py): ingress.csv and
ingress_bpf.csv of tools/bench/ingress.py, medians over interleaved rounds,
ratios paired round by round."""
import csv
import os
import statistics

# Connection-rate targets (issue 12, P5): XDP / anchor, at least.
RATE_TARGETS = {"nft": 1.0, "haproxy": 2.0, "direct": 0.9}
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
        print(f"### Concurrency {conc} ({'sequential' if conc == '1' else conc + ' threads'}), "
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


def bpf_tables(rows):
    """ns per packet: the program, its floor, the decap; SYN and non-SYN split."""
    def ns_per(r):
        c = int(r["run_cnt"])
        return int(r["run_time_ns"]) / c if c else float("nan")

    flows = [r for r in rows if r["phase"] == "flows"]
    nonsyn = med([ns_per(r) for r in flows if r["prog"] == "xdp"])
    print("| phase | XDP program ns/packet | packets per connection | empty XDP program "
          "(floor) ns/packet | decap ns/packet (3 backends) |")
    print("|---|---:|---:|---:|---:|")
    for ph in sorted({r["phase"] for r in rows}):
        sub = [r for r in rows if r["phase"] == ph]
        x = [r for r in sub if r["prog"] == "xdp"]
        ppc = med([int(r["run_cnt"]) / int(r["syns"]) for r in x if int(r["syns"])])
        print(f"| {ph} | {med([ns_per(r) for r in x]):.0f} | "
              + (f"{ppc:.1f}" if "conn" in ph else "-") + " | "
              f"{med([ns_per(r) for r in sub if r['prog'] == 'floor']):.0f} | "
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
    print("## 7. Ingress: clients off the node, through a load balancer (tools/bench/ingress.py)\n")
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
        print("### XDP program, floor and decap: bpf_stats, ns per packet\n")
        bpf_tables(bpf)
