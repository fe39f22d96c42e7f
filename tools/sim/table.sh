#!/bin/sh
# Print the headline scenario and the estimators' figures of a steer-sim
# results.csv as markdown, with the targets checked.
# Usage: tools/sim/table.sh results.csv   (run.sh's output: build/sim/results.csv)
set -eu
[ $# -eq 1 ] || { echo "usage: $0 results.csv" >&2; exit 2; }

awk -F, '
# Columns: 1 scenario, 2 policy, 3 variant, 4 peer_routers, 6 routers, 8 poll,
# 12 seed, 13 requests, 14 mean, 15 p50, 16 p99, 17 p99.9, 19 preemptions,
# 20 CoV, 23 engine, 24 response, 25 keepalive, 26 estimator, 28 TTFT p99.
function key(sc, pol, var, routers, seed, poll, eng, resp, ka, est) {
	return sc "|" pol "|" var "|" routers "|" seed "|" poll "|" eng "|" resp "|" ka "|" est
}
NR > 1 {
	k = key($1, $2, $3, $6, $12, $8, $23, $24, $25, $26)
	p99[k] = $16
	ttft[k] = $28
}
NR > 1 && $1 == "routers16" {
	r16[++nr] = $0
}
NR > 1 && $1 == "wire-scale" {
	x = $3; sub(/^wirex/, "", x)
	if (!((($24 "|" x) in seen))) { seen[$24 "|" x] = 1; wx[++nx] = $24 "|" x }
	wxp[$24 "|" x "|" $26] = $16
}
NR > 1 && $1 == "keepalive" {
	ka[$24 "|" $25 "|" $2 "|" $26] = $16
}
NR > 1 && $1 == "headline" {
	rows[++n] = sprintf("| %s | %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %s | %.3f |",
		$2, $26, $6, $4, $14, $15, $16, $17, $19, $20)
	req = $13
}
function get(sc, pol, var, routers, seed, poll, eng, resp, ka, est) {
	return p99[key(sc, pol, var, routers, seed, poll, eng, resp, ka, est)]
}
function has(sc, pol, var, routers, seed, poll, eng, resp, ka, est) {
	return key(sc, pol, var, routers, seed, poll, eng, resp, ka, est) in p99
}
function ratio(a, b) { return (b > 0) ? a / b : 0 }
function check(name, v, limit) {
	printf("| %s | %.2f | <= %.2f | %s |\n", name, v, limit, v <= limit ? "met" : "**missed**")
}
# p99 of an estimator scenario row.
function est(pol, eng, resp, routers, e) {
	return get("estimators", pol, "base", routers, 1, 1, eng, resp, 1, e)
}
function estt(pol, eng, resp, routers, e) {
	return ttft[key("estimators", pol, "base", routers, 1, 1, eng, resp, 1, e)]
}
END {
	if (n == 0) { print "no headline rows" > "/dev/stderr"; exit 1 }
	printf("Headline: bimodal prompts, 80 %% load, 1 s poll, 16 workers, FIFO engine, streaming, %s measured requests, seed 1.\n\n", req)
	print "| policy | estimator | routers | peer_routers | mean (s) | p50 (s) | p99 (s) | p99.9 (s) | preemptions | CoV of backlog |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) print rows[i]

	s1 = get("headline", "steer", "base", 1, 1, 1, "fifo", "stream", 1, "fluid")
	print ""
	print "| target (p99 ratio), FIFO engine, streaming | value | limit | |"
	print "|---|---|---|---|"
	check("P3a steer / oracle", ratio(s1, get("headline", "oracle", "base", 1, 1, 1, "fifo", "stream", 1, "-")), 1.5)
	check("P3b steer / jsq", ratio(s1, get("headline", "jsq", "base", 1, 1, 1, "fifo", "stream", 1, "-")), 0.3)
	check("steer-peers at 16 routers / steer at 1 router",
		ratio(get("headline", "steer-peers", "base", 16, 1, 1, "fifo", "stream", 1, "fluid"), s1), 1.3)
	check("flat credit alone: steer / oracle",
		ratio(get("headline", "steer", "base", 1, 1, 1, "fifo", "stream", 1, "flat"),
		      get("headline", "oracle", "base", 1, 1, 1, "fifo", "stream", 1, "-")), 1.5)
	for (s = 2; s <= 3; s++)
		if (has("headline-seed", "steer", "base", 1, s, 1, "fifo", "stream", 1, "fluid"))
			printf("\nSeed %d: steer / oracle %.2f, steer / jsq %.2f, steer-peers at 16 routers / steer %.2f.\n", s,
				ratio(get("headline-seed", "steer", "base", 1, s, 1, "fifo", "stream", 1, "fluid"),
				      get("headline-seed", "oracle", "base", 1, s, 1, "fifo", "stream", 1, "-")),
				ratio(get("headline-seed", "steer", "base", 1, s, 1, "fifo", "stream", 1, "fluid"),
				      get("headline-seed", "jsq", "base", 1, s, 1, "fifo", "stream", 1, "-")),
				ratio(get("headline-seed", "steer-peers", "base", 16, s, 1, "fifo", "stream", 1, "fluid"),
				      get("headline-seed", "steer", "base", 1, s, 1, "fifo", "stream", 1, "fluid")))

	if (!has("estimators", "oracle", "base", 1, 1, 1, "fifo", "stream", 1, "-"))
		exit 0
	ne = split("flat credit pending sum fluid", E, " ")
	print ""
	print "Estimators, 1 router: p99 wait (s), and p99 TTFT (s) in brackets."
	print ""
	print "| estimator | FIFO, stream | FIFO, full | batching, stream | batching, full |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= ne; i++) {
		line = "| " E[i]
		for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
			eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
			line = line sprintf(" | %.3f (%.3f)", est("steer", eng, resp, 1, E[i]), estt("steer", eng, resp, 1, E[i]))
		}
		print line " |"
	}
	split("oracle jsq p2c reqcount", B, " ")
	for (i = 1; i <= 4; i++) {
		line = "| " B[i]
		for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
			eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
			line = line sprintf(" | %.3f (%.3f)", est(B[i], eng, resp, 1, "-"), estt(B[i], eng, resp, 1, "-"))
		}
		print line " |"
	}
	ne = split("flat credit pending pending-peers sum fluid", E, " ")
	print ""
	print "Estimators, 16 routers with --peer-routers 16: p99 wait (s); the last row divides fluid by its 1-router p99."
	print ""
	print "| estimator | FIFO, stream | FIFO, full | batching, stream | batching, full |"
	print "|---|---|---|---|---|"
	for (i = 1; i <= ne; i++) {
		line = "| " E[i]
		for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
			eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
			line = line sprintf(" | %.3f", est("steer-peers", eng, resp, 16, E[i]))
		}
		print line " |"
	}
	line = "| jsq"
	for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
		eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
		line = line sprintf(" | %.3f", est("jsq", eng, resp, 16, "-"))
	}
	print line " |"
	line = "| fluid, 16 / 1 router"
	for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
		eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
		line = line sprintf(" | %.2f", ratio(est("steer-peers", eng, resp, 16, "fluid"), est("steer", eng, resp, 1, "fluid")))
	}
	print line " |"

	if (nr > 0) {
		print ""
		print "16 routers: what is missing, and what would reach the p99 of one router (smg-steer = fluid)."
		print ""
		print "| engine | response | policy | ablation | poll (s) | p99 (s) | / 1 router |"
		print "|---|---|---|---|---|---|---|"
		for (i = 1; i <= nr; i++) {
			split(r16[i], f, ",")
			printf("| %s | %s | %s | %s | %s | %.3f | %.2f |\n", f[23], f[24], f[2], f[3], f[8], f[16],
				ratio(f[16], est("steer", f[23], f[24], 1, "fluid")))
		}
	}
	if (("stream|1|oracle|-") in ka) {
		print ""
		print "Keep-alive (FIFO engine): p99 wait (s) by requests per connection."
		print ""
		print "| response | K | jsq | oracle | flat | credit | pending | fluid |"
		print "|---|---|---|---|---|---|---|---|"
		for (m = 1; m <= 2; m++) for (k = 1; k <= 8; k *= 2) {
			resp = m == 1 ? "stream" : "full"
			printf("| %s | %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f |\n", resp, k,
				ka[resp "|" k "|jsq|-"], ka[resp "|" k "|oracle|-"], ka[resp "|" k "|steer|flat"],
				ka[resp "|" k "|steer|credit"], ka[resp "|" k "|steer|pending"], ka[resp "|" k "|steer|fluid"])
		}
	}
	if (nx > 0) {
		print ""
		print "Wrong bytes-per-token (FIFO engine, 1 router): p99 wait (s) when the kernel counts x times the real tokens."
		print ""
		print "| response | x | pending | fluid |"
		print "|---|---|---|---|"
		for (i = 1; i <= nx; i++) {
			split(wx[i], f, "|")
			printf("| %s | %s | %.3f | %.3f |\n", f[1], f[2], wxp[f[1] "|" f[2] "|pending"], wxp[f[1] "|" f[2] "|fluid"])
		}
	}
	print ""
	print "Targets per engine and response mode (smg-steer = fluid; a target met under one engine only is not met):"
	print ""
	print "| engine, response | P3a steer / oracle (<= 1.5) | P3b steer / jsq (<= 0.3) | 16 routers / 1 (<= 1.3) |"
	print "|---|---|---|---|"
	for (e = 1; e <= 2; e++) for (m = 1; m <= 2; m++) {
		eng = e == 1 ? "fifo" : "batch"; resp = m == 1 ? "stream" : "full"
		a = ratio(est("steer", eng, resp, 1, "fluid"), est("oracle", eng, resp, 1, "-"))
		b = ratio(est("steer", eng, resp, 1, "fluid"), est("jsq", eng, resp, 1, "-"))
		c = ratio(est("steer-peers", eng, resp, 16, "fluid"), est("steer", eng, resp, 1, "fluid"))
		printf("| %s, %s | %.2f %s | %.3f %s | %.2f %s |\n", eng, resp,
			a, a <= 1.5 ? "met" : "**missed**", b, b <= 0.3 ? "met" : "**missed**",
			c, c <= 1.3 ? "met" : "**missed**")
	}
}' "$1"
