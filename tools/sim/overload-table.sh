#!/bin/sh
# Print the tables of tools/sim/overload.sh's overload.csv as markdown, with
# the targets checked: steer with the wait bound B keeps the admitted p99
# <= 1.1 x B and refuses at most 1.2 x what the oracle with the bound refuses
# (docs/simulator.md, "Overload").
# Usage: tools/sim/overload-table.sh overload.csv
set -eu
export LC_ALL=C
[ $# -eq 1 ] || { echo "usage: $0 overload.csv" >&2; exit 2; }

# Columns: 1 scenario, 2 policy, 7 load, 12 seed, 15 p50, 16 p99, 23 engine,
# 30 wait bound, 33 burst load, 37 refused fraction.
awk -F, '
function wl(load, burst) {
	return burst > 0 ? sprintf("b%g", burst) : sprintf("c%g", load)
}
function row(sc, pol) {
	if (sc == "overload-cap") return pol ", running cap"
	if (sc ~ /^overload-why-/) return pol ", " substr(sc, 14)
	return pol
}
NR > 1 {
	k = $23 "|" wl($7, $33) "|" $12 "|" row($1, $2)
	p50[k] = $15; p99[k] = $16; ref[k] = $37
	if ($1 == "overload") bound[$23] = $30
	seen[$12] = 1
}
function num(x) {
	return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.3f", x)
}
function cell(e, w, s, r,   k) {
	k = e "|" w "|" s "|" r
	if (!(k in p99)) return "-"
	return num(p50[k]) " / " num(p99[k]) ", " sprintf("%.2f %%", 100 * ref[k])
}
# The two targets of one policy row at one seed: qa = p99 / B, qb = refused /
# the oracle (-1: neither refused any; 1e9: only the policy did).
# Sets qa and qb; 0 when that run is not in the CSV.
function ratios(e, w, s, r,   k, o) {
	k = e "|" w "|" s "|" r
	if (!(k in p99)) return 0 # (reading p99[k] would add it)
	o = ref[e "|" w "|" s "|oracle+bound"]
	qa = p99[k] / bound[e]
	qb = o > 0 ? ref[k] / o : ref[k] > 0 ? 1e9 : -1
	return 1
}
# One row of the why table, or "" when that run is not in the CSV.
function why(e, w, r, name) {
	if (!ratios(e, w, 1, r)) return ""
	return sprintf("| %s, %s %s | %s | %s | %.2f | %s |\n", e,
		       substr(w, 1, 1) == "b" ? "bursts 0.6 /" : "constant", substr(w, 2), name,
		       cell(e, w, 1, r), qa, qb >= 1e9 ? "inf" : qb < 0 ? "-" : sprintf("%.2f", qb))
}
function targets(e, w, r,   s, a, b, ok) {
	a = b = ""; ok = 1
	for (s = 1; s <= 3; s++) {
		if (!(s in seen)) continue
		if (!ratios(e, w, s, r)) return "| " r " | - | - | |"
		a = a (a == "" ? "" : "/") sprintf("%.2f", qa)
		b = b (b == "" ? "" : "/") (qb >= 1e9 ? "inf" : qb < 0 ? "-" : sprintf("%.2f", qb))
		if (qa > 1.1 || qb > 1.2) ok = 0
	}
	return "| " r " | " a " | " b " | " (ok ? "met" : "**missed**") " |"
}
END {
	split("b1.2 b1.5 c1.2 c1.5", ws, " ")
	split("steer steer+bound steer+shed jsq+shed oracle+bound", rows, " ")
	rows[6] = "steer+bound, running cap"
	split("fifo batch", es, " ")
	for (i = 1; i <= 2; i++) {
		e = es[i]
		printf("%s engine, B = %g s, seed 1: admitted p50 / p99 wait (s), refused\n\n", e == "fifo" ? "FIFO" : "Batching", bound[e])
		print "| policy | bursts 0.6 / 1.2 | bursts 0.6 / 1.5 | constant 1.2 | constant 1.5 |"
		print "|---|---|---|---|---|"
		for (j = 1; j <= 6; j++) {
			line = "| " rows[j]
			n = 0
			for (m = 1; m <= 4; m++) {
				c = cell(e, ws[m], 1, rows[j])
				n += c != "-"
				line = line " | " c
			}
			if (n) print line " |"
		}
		print ""
	}
	print "Targets (seeds " (3 in seen ? "1/2/3" : "1") "): steer+bound p99 / B <= 1.1, refused / the oracle'"'"'s <= 1.2"
	print "(-: neither refused any request)"
	print ""
	print "| engine, load | policy | p99 / B | refused / oracle | |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= 2; i++)
		for (m = 1; m <= 4; m++)
			for (j = 2; j <= 6; j++) {
				if (j == 3 || j == 4 || j == 5) continue
				if (!((es[i] "|" ws[m] "|1|" rows[j]) in p99)) continue
				printf("| %s, %s %s", es[i], substr(ws[m], 1, 1) == "b" ? "bursts 0.6 /" : "constant", substr(ws[m], 2))
				print " " targets(es[i], ws[m], rows[j])
			}
	print ""
	print "Why, seed 1: steer+bound as above, and with one thing changed (p99 / B, refused / the oracle'"'"'s)"
	print ""
	print "| engine, load | steer+bound | p50 / p99 (s), refused | p99 / B | refused / oracle |"
	print "|---|---|---|---|---|"
	split("running kv64 b5 measured", vs, " ")
	split("running prefill reported;KV x 64;bound B / 5 (" 0.2 * bound["batch"] " s);measured rate", vn, ";")
	for (i = 1; i <= 2; i++)
		for (m = 1; m <= 4; m++) {
			line = ""
			for (j = 1; j <= 4; j++)
				line = line why(es[i], ws[m], "steer+bound, " vs[j], vn[j])
			if (line != "")
				printf("%s%s", why(es[i], ws[m], "steer+bound", "as it is"), line)
		}
}' "$1"
