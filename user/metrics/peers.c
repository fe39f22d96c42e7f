// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peers.c - the /metrics families of sharing the request accounting
 * with other routers (--peer, user/peer/peer.c), rendered only when it is on.
 * The peer label is an address ("127.0.0.1:9470", "[2001:db8::1]:9470"):
 * nothing in it needs escaping.
 */
#include <inttypes.h>

#include "metrics/metrics.h"

const double steer_peer_rtt_bounds[STEER_PEER_RTT_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1,
};

struct peer_counter {
	const char *name, *help;
	size_t offset;
};

#define PEER_FIELD(f) offsetof(struct steer_metrics_peer, f)

static const struct peer_counter peer_counters[] = {
	{ "smg_steer_peer_reports_received_total",
	  "Reports (UDP datagrams) accepted from the router at that address.",
	  PEER_FIELD(received_total) },
	{ "smg_steer_peer_reports_lost_total",
	  "Reports of the router that never arrived (gaps in its sequence); what they said "
	  "arrives with the next one, its counters being cumulative.",
	  PEER_FIELD(lost_total) },
	{ "smg_steer_peer_reports_sent_total", "Reports sent to the router at that address.",
	  PEER_FIELD(sent_total) },
	{ "smg_steer_peer_send_errors_total", "Reports to the router that could not be sent.",
	  PEER_FIELD(send_errors_total) },
	{ "smg_steer_peer_forgotten_total",
	  "Times the router's work was taken back: it fell silent for --peer-timeout, or "
	  "restarted.",
	  PEER_FIELD(forgotten_total) },
};

static void peer_label(FILE *f, const char *name, const struct steer_metrics_peer *p)
{
	fprintf(f, "%s{peer=\"%.*s\"} ", name, (int)sizeof(p->peer), p->peer);
}

static void write_node_counter(FILE *f, const char *name, const char *help, uint64_t v)
{
	steer_metrics_family_header(f, name, "counter", help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

/* Round trips to each peer: cumulative buckets, +Inf the count. */
static void write_rtt_histogram(FILE *f, const struct steer_metrics_snapshot *snap)
{
	const char *name = "smg_steer_peer_rtt_seconds";
	size_t i;
	int b;

	steer_metrics_family_header(
		f, name, "histogram",
		"Round trips of this router's reports to the router at that address and back "
		"(its echo; the time it held the report left out). Half of it is about how late "
		"each router learns of the other's requests.");
	for (i = 0; i < snap->n_peers; i++) {
		const struct steer_metrics_peer *p = &snap->peers[i];

		for (b = 0; b < STEER_PEER_RTT_BUCKETS; b++) {
			fprintf(f, "%s_bucket{peer=\"%.*s\",le=\"", name, (int)sizeof(p->peer),
				p->peer);
			steer_metrics_double(f, steer_peer_rtt_bounds[b]);
			fprintf(f, "\"} %" PRIu64 "\n", p->rtt_buckets[b]);
		}
		fprintf(f, "%s_bucket{peer=\"%.*s\",le=\"+Inf\"} %" PRIu64 "\n", name,
			(int)sizeof(p->peer), p->peer, p->rtt_count);
		peer_label(f, "smg_steer_peer_rtt_seconds_sum", p);
		steer_metrics_double(f, p->rtt_sum_s);
		fputc('\n', f);
		peer_label(f, "smg_steer_peer_rtt_seconds_count", p);
		fprintf(f, "%" PRIu64 "\n", p->rtt_count);
	}
}

/* --peer-key: whether it is on, and what it dropped, by reason (the label
 * is one of three words: an unsigned sender cannot make up a series). */
static void write_key_families(FILE *f, const struct steer_metrics_snapshot *snap)
{
	static const char *const reasons[STEER_PEER_REFUSAL_REASONS] = { "auth", "stale",
									 "replay" };
	const char *name = "smg_steer_peer_key_refused_total";
	int i;

	steer_metrics_family_header(f, "smg_steer_peer_key_enabled", "gauge",
				    "1 when this router signs its reports and accepts only signed "
				    "ones (--peer-key).");
	fprintf(f, "smg_steer_peer_key_enabled %d\n", snap->peer_keyed ? 1 : 0);
	steer_metrics_family_header(
		f, name, "counter",
		"Reports dropped by --peer-key before any of it was used: auth (no tag, or one no "
		"key of this router made), stale (sent 30 s or more from this router's clock, or "
		"older than the report of the router that replaced its sender), replay (a "
		"router's report from a second address, or from before it fell silent).");
	for (i = 0; i < STEER_PEER_REFUSAL_REASONS; i++)
		fprintf(f, "%s{reason=\"%s\"} %" PRIu64 "\n", name, reasons[i],
			snap->peer_key_refused_total[i]);
}

void steer_metrics_write_peers(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i, k;

	steer_metrics_family_header(
		f, "smg_steer_peer_up", "gauge",
		"1 while the router at that address reports within --peer-timeout; 0 once its "
		"work no longer counts (or it was never heard).");
	for (i = 0; i < snap->n_peers; i++) {
		peer_label(f, "smg_steer_peer_up", &snap->peers[i]);
		fprintf(f, "%d\n", snap->peers[i].up ? 1 : 0);
	}
	steer_metrics_family_header(f, "smg_steer_peer_report_age_seconds", "gauge",
				    "Seconds since the router's last report; -1 before the first.");
	for (i = 0; i < snap->n_peers; i++) {
		peer_label(f, "smg_steer_peer_report_age_seconds", &snap->peers[i]);
		steer_metrics_double(f, snap->peers[i].age_s);
		fputc('\n', f);
	}
	for (k = 0; k < sizeof(peer_counters) / sizeof(peer_counters[0]); k++) {
		steer_metrics_family_header(f, peer_counters[k].name, "counter",
					    peer_counters[k].help);
		for (i = 0; i < snap->n_peers; i++) {
			peer_label(f, peer_counters[k].name, &snap->peers[i]);
			fprintf(f, "%" PRIu64 "\n",
				*(const uint64_t *)((const char *)&snap->peers[i] +
						    peer_counters[k].offset));
		}
	}
	write_rtt_histogram(f, snap);
	write_node_counter(f, "smg_steer_peer_reports_rejected_total",
			   "Datagrams at --peer-listen that were not a valid report, came from "
			   "a new sender while every place not kept for the routers of --peer "
			   "and --peer-dns was held by a sender still reporting, or (without "
			   "--peer-key) named a new router at the address of one still "
			   "reporting.",
			   snap->peer_rejected_total);
	write_node_counter(f, "smg_steer_peer_unknown_backends_total",
			   "Backends in the other routers' reports that this router does not "
			   "steer to (ignored).",
			   snap->peer_unknown_backends_total);
	write_node_counter(f, "smg_steer_peer_applied_total",
			   "Changes of the other routers' work applied to a backend in the "
			   "kernel (steer_peer_apply).",
			   snap->peer_applied_total);
	write_node_counter(f, "smg_steer_peer_own_reports_total",
			   "This router's own reports that came back to it (a --peer that is "
			   "this router): ignored.",
			   snap->peer_own_reports_total);
	write_node_counter(f, "smg_steer_peer_apply_errors_total",
			   "Runs of steer_peer_apply that failed (their changes are lost).",
			   snap->peer_apply_errors_total);
	write_key_families(f, snap);
	write_node_counter(f, "smg_steer_peer_push_wakeups_total",
			   "Times the kernel woke the peer thread to report a request at once "
			   "(--peer-push).",
			   snap->peer_push_wakeups_total);
}
