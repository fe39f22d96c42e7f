#!/bin/sh
# Print the tables of tools/sim/affinity.sh's affinity.csv as markdown, with
# the targets checked (docs/simulator.md, "Cache affinity"): on conversations
# affinity cuts smg-steer's mean and p99 TTFT by at least 20 %, on single
# requests it adds at most 5 % to either, on both engines.
# Usage: tools/sim/affinity-table.sh affinity.csv
set -eu
export LC_ALL=C
[ $# -eq 1 ] || { echo "usage: $0 affinity.csv" >&2; exit 2; }

# Columns: 1 scenario, 2 policy, 12 seed, 16 p99 wait, 23 engine, 27 TTFT
# mean, 28 TTFT p99, 39 TTFT p50, 40 throughput, 41 cached share, 49 stays
# of the keys known, 50 tokens cached elsewhere but prefilled.
awk -F, '
NR > 1 {
	k = $1 "|" $23 "|" $12 "|" $2
	tm[k] = $27; t99[k] = $28; t50[k] = $39; w99[k] = $16
	tput[k] = $40; hit[k] = $41; stay[k] = $49; lost[k] = $50
	seen[$12] = 1
	if (!(($1 "|" $2) in ord)) { ord[$1 "|" $2] = ++nord[$1]; pol[$1, nord[$1]] = $2 }
}
function has(sc, e, s, p) { return (sc "|" e "|" s "|" p) in tm }
# The change of a metric against smg-steer without affinity, in %.
function chg(v, sc, e, s, p,   k, b) {
	k = sc "|" e "|" s "|" p; b = sc "|" e "|" s "|steer"
	if (!(k in tm) || !(b in tm)) return ""
	return 100 * (v[k] / v[b] - 1)
}
# A change, or beyond +1000 % the factor (queues that grew with the run).
function one(x) { return x >= 1000 ? sprintf("x%.0f", 1 + x / 100) : sprintf("%+.1f", x) }
function pct(x) { return x == "" ? "-" : x >= 1000 ? one(x) : one(x) " %" }
# The same change at every seed in the CSV, "a/b/c %", and whether each
# passes: ok = 1 when all are <= lim (lim < 0: a cut of at least -lim).
function seeds(v, sc, e, p, lim,   s, x, out, big) {
	out = ""; big = 0
	for (s = 1; s <= 3; s++) {
		if (!(s in seen) || !has(sc, e, s, p)) continue
		x = chg(v, sc, e, s, p)
		if (x > lim) ok = 0
		if (x >= 1000) big = 1
		out = out (out == "" ? "" : "/") one(x)
	}
	if (out == "") { ok = 0; return "-" }
	return big ? out : out " %"
}
function num(x) { return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.3f", x) }
function conv_table(e,   i, p, k) {
	printf("Conversations, %s engine, seed 1: TTFT (s), against steer, p99 wait (s), prompt tokens cached, keys that stayed, throughput (requests/s)\n\n", e == "fifo" ? "FIFO" : "batching")
	print "| policy | TTFT mean | p50 | p99 | mean | p99 | wait p99 | cached | stayed | req/s |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= nord["aff-mt"]; i++) {
		p = pol["aff-mt", i]; k = "aff-mt|" e "|1|" p
		if (!(k in tm)) continue
		printf("| %s | %s | %s | %s | %s | %s | %s | %.1f %% | %s | %.2f |\n", p, num(tm[k]),
		       num(t50[k]), num(t99[k]), pct(chg(tm, "aff-mt", e, 1, p)),
		       pct(chg(t99, "aff-mt", e, 1, p)), num(w99[k]), 100 * hit[k],
		       p ~ /@/ ? sprintf("%.1f %%", 100 * stay[k]) : "-", tput[k])
	}
	print ""
}
function single_cell(sc, e, p,   k) {
	k = sc "|" e "|1|" p
	if (!(k in tm)) return "- | -"
	return num(tm[k]) " / " num(t99[k]) " | " pct(chg(tm, sc, e, 1, p)) " / " pct(chg(t99, sc, e, 1, p))
}
function single_table(e,   i, p, k) {
	printf("Single requests, %s engine, seed 1: TTFT mean / p99 (s), against steer; a key per request, and " keys " clients sharing keys\n\n", e == "fifo" ? "FIFO" : "batching")
	print "| policy | key per request | against steer | " keys " clients | against steer | req/s |"
	print "|---|---|---|---|---|---|"
	for (i = 1; i <= nord["aff-st"]; i++) {
		p = pol["aff-st", i]; k = "aff-st|" e "|1|" p
		if (!(k in tm)) continue
		printf("| %s | %s | %s | %.2f |\n", p, single_cell("aff-st", e, p),
		       single_cell("aff-st-keys", e, p), tput[k])
	}
	print ""
}
# The targets of one policy: conversations cut >= 20 %, single requests
# cost <= 5 %, mean and p99, both engines.
function target_row(p,   e, j, cells, c, okc, oks, okk, m) {
	cells = ""; okc = oks = okk = 1
	for (j = 1; j <= 2; j++) {
		e = j == 1 ? "fifo" : "batch"
		ok = 1
		c = seeds(tm, "aff-mt", e, p, -20) " | " seeds(t99, "aff-mt", e, p, -20)
		okc = okc && ok; cells = cells " | " c
	}
	for (j = 1; j <= 2; j++) {
		e = j == 1 ? "fifo" : "batch"
		ok = 1
		c = seeds(tm, "aff-st", e, p, 5) " | " seeds(t99, "aff-st", e, p, 5)
		oks = oks && ok; cells = cells " | " c
		ok = 1
		c = seeds(tm, "aff-st-keys", e, p, 5) " | " seeds(t99, "aff-st-keys", e, p, 5)
		okk = okk && ok; cells = cells " | " c
	}
	m = (okc ? "met" : "**missed**") " / " (oks ? "met" : "**missed**") " / " (okk ? "met" : "**missed**")
	return "| " p cells " | " m " |"
}
function keys_table(   e, j, i, p, n, line, ks) {
	split("16 " keys " 256", ks, " ")
	print "Single requests from clients sharing keys, seed 1: TTFT mean / p99 against steer, by the number of keys"
	print ""
	print "| policy | FIFO, 16 | FIFO, " keys " | FIFO, 256 | batching, 16 | batching, " keys " | batching, 256 |"
	print "|---|---|---|---|---|---|---|"
	n = split("steer@0.05 steer@0.1 steer@0.25 steer@ctx0", ps, " ")
	for (i = 1; i <= n; i++) {
		p = ps[i]; line = "| " p
		for (j = 1; j <= 6; j++) {
			e = j <= 3 ? "fifo" : "batch"
			line = line " | " keyed(e, ks[(j - 1) % 3 + 1], p)
		}
		print line " |"
	}
	print ""
}
# Runs with --keys K are told apart by that column, kept in kc.
function keyed(e, kk, p,   k, b) {
	k = e "|" kk "|" p; b = e "|" kk "|steer"
	if (!(k in kc) || !(b in kc)) return "-"
	return sprintf("%+.1f / %+.1f %%", 100 * (kcm[k] / kcm[b] - 1), 100 * (kc[k] / kc[b] - 1))
}
function place_table(   i, n, a, b, pairs, cell, line) {
	print "First placement, seed 1: TTFT mean / p99 against steer, by least wait (lw) or by rendezvous hash (hrw)"
	print ""
	print "| slack | first | conversations, FIFO | conversations, batching | key per request, FIFO | key per request, batching | 16 routers, any router per turn, FIFO |"
	print "|---|---|---|---|---|---|---|"
	n = split("0.1 0.5 inf ctx0", pairs, " ")
	for (i = 1; i <= n; i++)
		for (a = 0; a <= 1; a++) {
			b = "steer@" (a ? "hrw" : "") pairs[i]
			line = "| " (pairs[i] == "ctx0" ? "context" : pairs[i]) " | " (a ? "hrw" : "lw")
			line = line " | " place_cell("aff-mt", "fifo", b) " | " place_cell("aff-mt", "batch", b)
			line = line " | " place_cell("aff-st", "fifo", b) " | " place_cell("aff-st", "batch", b)
			print line " | " place_cell("aff-mt-r16", "fifo", b) " |"
		}
	print ""
}
function place_cell(sc, e, p,   a, b) {
	if (!has(sc, e, 1, p)) return "-"
	a = chg(tm, sc, e, 1, p); b = chg(t99, sc, e, 1, p)
	return one(a) " / " one(b) (a >= 1000 || b >= 1000 ? "" : " %")
}
# Conversations by load: TTFT mean / p99 (s) and the requests finished per
# second; a policy that does not keep up finishes fewer than arrive.
function load_table(   e, j, i, n, p, ps, ls, line, k, l) {
	split("0.8 1.0 1.2 1.5", ls, " ")
	print "Conversations by load (prompt tokens sent / the fleet'"'"'s prefill capacity), seed 1: TTFT mean / p99 (s), requests finished per second"
	print ""
	print "| policy | FIFO 0.8 | FIFO 1.0 | FIFO 1.2 | FIFO 1.5 | batching 0.8 | batching 1.0 | batching 1.2 | batching 1.5 |"
	print "|---|---|---|---|---|---|---|---|---|"
	n = split("steer steer@0.5 steer@ctx0 cache-aware oracle-cache", ps, " ")
	for (i = 1; i <= n; i++) {
		p = ps[i]; line = "| " p
		for (j = 1; j <= 8; j++) {
			e = j <= 4 ? "fifo" : "batch"; l = ls[(j - 1) % 4 + 1]
			k = (l == "0.8" ? "aff-mt" : "aff-load") "|" e "|1|" p
			if (l != "0.8") k = k "|" l
			line = line " | " (k in lt ? num(lt[k]) " / " num(l99[k]) ", " sprintf("%.2f", lr[k]) : l == "0.8" && has("aff-mt", e, 1, p) ? num(tm["aff-mt|" e "|1|" p]) " / " num(t99["aff-mt|" e "|1|" p]) ", " sprintf("%.2f", tput["aff-mt|" e "|1|" p]) : "-")
		}
		print line " |"
	}
	print ""
}
NR > 1 && $1 == "aff-load" && $12 == 1 {
	k = "aff-load|" $23 "|1|" $2 "|" sprintf("%.1f", $7)
	lt[k] = $27; l99[k] = $28; lr[k] = $40
}
function why_table(   i, n, p, ps, sc, scs, line, j) {
	print "Why, conversations, FIFO engine, seed 1: TTFT mean / p99 against steer in the same setting; prompt tokens cached elsewhere but prefilled again"
	print ""
	print "| policy | as it is | lost | kernel counts the uncached tokens only | prefix cache of 49,152 tokens | lost |"
	print "|---|---|---|---|---|---|"
	n = split("steer@0.1 steer@0.25 steer@0.5 steer@inf steer@ctx0 oracle-cache", ps, " ")
	split("aff-mt aff-why-wireuncached aff-why-cache49152", scs, " ")
	for (i = 1; i <= n; i++) {
		p = ps[i]; line = "| " p
		for (j = 1; j <= 3; j++) {
			sc = scs[j]
			line = line " | " place_cell(sc, "fifo", p)
			if (j != 2)
				line = line " | " (has(sc, "fifo", 1, p) ? sprintf("%.1f %%", 100 * lost[sc "|fifo|1|" p]) : "-")
		}
		print line " |"
	}
	print ""
}
NR > 1 && $1 ~ /^aff-st-keys/ && $12 == 1 {
	kc[$23 "|" $44 "|" $2] = $28; kcm[$23 "|" $44 "|" $2] = $27
}
NR == 1 { keys = 64 }
NR > 1 && $1 == "aff-st-keys" && $12 == 1 && $2 == "steer@inf" { keys = $44 }
END {
	conv_table("fifo"); conv_table("batch")
	single_table("fifo"); single_table("batch")
	print "Targets (seeds " (3 in seen ? "1/2/3" : "1") "): conversations cut the TTFT mean and p99 by >= 20 %; single requests cost <= 5 %, with a key per request and with " keys " clients; against steer without affinity"
	print ""
	print "| policy | conv. FIFO mean | conv. FIFO p99 | conv. batching mean | conv. batching p99 | key per req. FIFO mean | p99 | " keys " clients FIFO mean | p99 | key per req. batching mean | p99 | " keys " clients batching mean | p99 | conv. / key per req. / " keys " clients |"
	print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= nord["aff-mt"]; i++)
		if (pol["aff-mt", i] ~ /^steer@/)
			print target_row(pol["aff-mt", i])
	print ""
	keys_table()
	place_table()
	load_table()
	why_table()
}' "$1"
