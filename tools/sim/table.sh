#!/bin/sh
# Print the headline scenario of a steer-sim results.csv as markdown, with the
# smg-steer targets checked. Usage: tools/sim/table.sh results.csv
set -eu
[ $# -eq 1 ] || { echo "usage: $0 results.csv" >&2; exit 2; }

awk -F, '
function key(scenario, policy, variant, routers, seed, poll) {
	return scenario "|" policy "|" variant "|" routers "|" seed "|" poll
}
# p99 by key(...); columns: 1 scenario, 2 policy, 3 variant, 6 routers, 8 poll, 12 seed.
NR > 1 { p99[key($1, $2, $3, $6, $12, $8)] = $16 }
NR > 1 && $1 == "headline" {
	rows[++n] = sprintf("| %s | %s | %s | %.3f | %.3f | %.3f | %.3f | %s | %.3f |",
		$2, $6, $4, $14, $15, $16, $17, $19, $20)
	req = $13
}
function get(scenario, policy, variant, routers, seed, poll) {
	return p99[key(scenario, policy, variant, routers, seed, poll)]
}
function has(scenario, policy, variant, routers, seed, poll) {
	return key(scenario, policy, variant, routers, seed, poll) in p99
}
function ratio(a, b) { return (b > 0) ? a / b : 0 }
function check(name, v, limit) {
	printf("| %s | %.2f | <= %.2f | %s |\n", name, v, limit, v <= limit ? "met" : "**missed**")
}
END {
	if (n == 0) { print "no headline rows" > "/dev/stderr"; exit 1 }
	printf("Headline: bimodal prompts, 80 %% load, 1 s poll, 16 workers, %s measured requests, seed 1.\n\n", req)
	print "| policy | routers | peer_routers | mean (s) | p50 (s) | p99 (s) | p99.9 (s) | preemptions | CoV of backlog |"
	print "|---|---|---|---|---|---|---|---|---|"
	for (i = 1; i <= n; i++) print rows[i]
	s1 = get("headline", "steer", "base", 1, 1, 1)
	print ""
	print "| target (p99 ratio) | value | limit | |"
	print "|---|---|---|---|"
	check("steer / jsq", ratio(s1, get("headline", "jsq", "base", 1, 1, 1)), 0.5)
	check("steer / reqcount", ratio(s1, get("headline", "reqcount", "base", 1, 1, 1)), 0.7)
	check("steer / oracle", ratio(s1, get("headline", "oracle", "base", 1, 1, 1)), 1.25)
	check("steer-peers at 16 routers / steer at 1 router",
		ratio(get("headline", "steer-peers", "base", 16, 1, 1), s1), 1.5)
	# Other seeds and the proposed fixes, where the grid ran them.
	for (s = 2; s <= 3; s++)
		if (has("headline-seed", "steer", "base", 1, s, 1))
			printf("\nSeed %d: steer / jsq %.2f, steer / reqcount %.2f, steer / oracle %.2f.\n", s,
				ratio(get("headline-seed", "steer", "base", 1, s, 1), get("headline-seed", "jsq", "base", 1, s, 1)),
				ratio(get("headline-seed", "steer", "base", 1, s, 1), get("headline-seed", "reqcount", "base", 1, s, 1)),
				ratio(get("headline-seed", "steer", "base", 1, s, 1), get("headline-seed", "oracle", "base", 1, s, 1)))
	if (has("routers", "steer", "jitter", 16, 1, 1))
		printf("\nRouters sweep, 16 routers / 1 router: steer-peers %.2f (credit x 16 and the phase); steer with the phase forced at --peer-routers 1 (--steer-jitter) %.2f; steer as is %.2f.\n",
			ratio(get("routers", "steer-peers", "base", 16, 1, 1), get("routers", "steer", "base", 1, 1, 1)),
			ratio(get("routers", "steer", "jitter", 16, 1, 1), get("routers", "steer", "base", 1, 1, 1)),
			ratio(get("routers", "steer", "base", 16, 1, 1), get("routers", "steer", "base", 1, 1, 1)))
	if (has("poll", "steer", "running", 1, 1, 1))
		printf("\nAblations (poll sweep), steer / oracle at 1 s: %.2f as is, %.2f with the running prefill reported, %.2f with the real prompt credited as well; at 0.1 s: %.2f, %.2f, %.2f.\n",
			ratio(get("poll", "steer", "base", 1, 1, 1), get("poll", "oracle", "base", 1, 1, 1)),
			ratio(get("poll", "steer", "running", 1, 1, 1), get("poll", "oracle", "base", 1, 1, 1)),
			ratio(get("poll", "steer", "running+credit", 1, 1, 1), get("poll", "oracle", "base", 1, 1, 1)),
			ratio(get("poll", "steer", "base", 1, 1, 0.1), get("poll", "oracle", "base", 1, 1, 0.1)),
			ratio(get("poll", "steer", "running", 1, 1, 0.1), get("poll", "oracle", "base", 1, 1, 0.1)),
			ratio(get("poll", "steer", "running+credit", 1, 1, 0.1), get("poll", "oracle", "base", 1, 1, 0.1)))
}' "$1"
