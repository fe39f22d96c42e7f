// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * metrics.c - Prometheus text exposition (format 0.0.4) on /metrics and
 * liveness on /healthz, served by libmicrohttpd from its own polling thread.
 *
 * The daemon calls steer_metrics_update after every publish with a complete
 * snapshot; we keep a deep copy under a mutex, and a scrape renders that copy
 * while holding the same mutex, so a scrape never sees half of two updates.
 */
#include "metrics/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/common.h"
#include "loads/loads.h"
#include "policy/policy.h"
#include "guard.h"

const double steer_poll_bucket_bounds[STEER_POLL_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};

/* ---- Rendering ------------------------------------------------------------ */

#define TEXT_FORMAT_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define PLAIN_CONTENT_TYPE "text/plain; charset=utf-8"

enum value_kind {
	VALUE_DOUBLE,
	VALUE_I64,
	VALUE_U64,
	VALUE_BOOL,
};

/* A metric family with one sample per backend, read from a field of the backend. */
struct backend_family {
	const char *name;
	const char *type;
	const char *help;
	size_t offset;
	enum value_kind kind;
};

#define BK_FIELD(f) offsetof(struct steer_metrics_backend, f)

static const struct backend_family backend_families[] = {
	{ "smg_steer_backend_score_seconds", "gauge",
	  "Expected wait in seconds for the next connection to the backend, as last scored.",
	  BK_FIELD(score_s), VALUE_DOUBLE },
	{ "smg_steer_backend_queued_tokens", "gauge",
	  "Tokens queued on the backend as scored (reported, or estimated from waiting requests).",
	  BK_FIELD(queued_tokens), VALUE_DOUBLE },
	{ "smg_steer_backend_throughput_tokens_per_second", "gauge",
	  "Backend throughput in tokens per second as scored.", BK_FIELD(throughput),
	  VALUE_DOUBLE },
	{ "smg_steer_backend_kv_usage_ratio", "gauge",
	  "Backend KV cache usage ratio (0..1) as scored.", BK_FIELD(kv_usage), VALUE_DOUBLE },
	{ "smg_steer_backend_inflight_tokens", "gauge",
	  "Tokens credited to the backend by new connections and not yet drained.",
	  BK_FIELD(inflight_tokens), VALUE_DOUBLE },
	{ "smg_steer_backend_live_connections", "gauge",
	  "Connections to the backend established and not yet closed.", BK_FIELD(live_connections),
	  VALUE_I64 },
	{ "smg_steer_backend_healthy", "gauge",
	  "1 while the backend is eligible for the table, 0 while it is ejected.",
	  BK_FIELD(healthy), VALUE_BOOL },
	{ "smg_steer_connections_steered_total", "counter",
	  "Connections placed on the backend, by score or by the stale-table fallback.",
	  BK_FIELD(steered_total), VALUE_U64 },
	{ "smg_steer_backend_pending_tokens", "gauge",
	  "Request tokens sent to the backend on steered connections and not answered yet "
	  "(pending bytes / bytes per token), as the kernel scores them.",
	  BK_FIELD(pending_tokens), VALUE_U64 },
	{ "smg_steer_backend_pending_bytes", "gauge",
	  "Request bytes sent to the backend on steered connections and not answered yet.",
	  BK_FIELD(pending_bytes), VALUE_U64 },
	{ "smg_steer_backend_queued_pending_tokens", "gauge",
	  "Tokens taken off the backend's reported queue as scored: this node's own work "
	  "when the poll was sent (its busy-until estimate), which the kernel counts instead.",
	  BK_FIELD(queued_pending_tokens), VALUE_DOUBLE },
	{ "smg_steer_backend_busy_seconds", "gauge",
	  "Remaining busy-until time: how long the backend is still estimated busy with this "
	  "node's unanswered requests (their tokens at its rate, capped by the pending ones), "
	  "the term the kernel adds to the score.",
	  BK_FIELD(busy_left_s), VALUE_DOUBLE },
	{ "smg_steer_backend_step_seconds", "gauge",
	  "The step cadence (--wire-estimator fluid-step): the backend engine's last step, "
	  "the gap between two packets of one streamed response; 0 until one is seen.",
	  BK_FIELD(step_s), VALUE_DOUBLE },
	{ "smg_steer_backend_step_left_seconds", "gauge",
	  "The step cadence: time until the backend's engine step under way ends, as its last "
	  "step predicts; with fluid-step the kernel keys the backend busy until then too.",
	  BK_FIELD(step_left_s), VALUE_DOUBLE },
	{ "smg_steer_backend_peer_pending_tokens", "gauge",
	  "Request tokens the other routers (--peer) reported sent to the backend and not "
	  "answered yet, as this node's kernel adds them to its busy-until estimate.",
	  BK_FIELD(peer_pending_tokens), VALUE_U64 },
	{ "smg_steer_backend_sent_bytes_total", "counter",
	  "Request bytes sent to the backend on steered connections.", BK_FIELD(sent_bytes_total),
	  VALUE_U64 },
	{ "smg_steer_backend_requests_total", "counter",
	  "Requests sent to the backend on steered connections.", BK_FIELD(requests_total),
	  VALUE_U64 },
	{ "smg_steer_backend_overloaded", "gauge",
	  "1 while the backend takes no new connection for overload: KV usage or waiting "
	  "requests at their bound by its last poll, or a 429/503 answer not yet ended.",
	  BK_FIELD(overloaded), VALUE_BOOL },
	{ "smg_steer_backend_pushbacks_total", "counter",
	  "Answers with HTTP status 429 or 503 on steered connections (read with overload "
	  "protection on).",
	  BK_FIELD(pushbacks_total), VALUE_U64 },
	{ "smg_steer_backend_server_errors_total", "counter",
	  "Answers with an HTTP status 5xx other than 503 on steered connections, each a failed "
	  "connect for fast ejection (read with overload protection on).",
	  BK_FIELD(server_errors_total), VALUE_U64 },
};

/* A family with one integer sample per service. */
struct service_family {
	const char *name;
	const char *type;
	const char *help;
	size_t offset;
};

#define SVC_FIELD(f) offsetof(struct steer_metrics_service, f)

static const struct service_family service_families[] = {
	{ "smg_steer_table_publishes_total", "counter", "Service tables published into the kernel.",
	  SVC_FIELD(table_publishes_total) },
	{ "smg_steer_fallback_connections_total", "counter",
	  "Connections placed round-robin because the service table had expired.",
	  SVC_FIELD(fallback_connections_total) },
	{ "smg_steer_refused_connections_total", "counter",
	  "Connections refused because no backend of the service was eligible.",
	  SVC_FIELD(refused_connections_total) },
	{ "smg_steer_overload_refused_connections_total", "counter",
	  "Connections refused at connect() because every backend was overloaded (KV usage or "
	  "waiting requests at their bound, or pushing back with 429/503).",
	  SVC_FIELD(overload_refused_total) },
	{ "smg_steer_wait_refused_connections_total", "counter",
	  "Connections refused at connect() because the least expected wait was over "
	  "--worker-overload-wait.",
	  SVC_FIELD(wait_refused_total) },
	{ "smg_steer_overload_admitted_connections_total", "counter",
	  "Connections given to the least bad backend while every one was overloaded "
	  "(--when-all-overloaded least).",
	  SVC_FIELD(overload_admitted_total) },
	{ "smg_steer_bytes_per_token", "gauge",
	  "Request bytes on the wire per token, by which the kernel converts pending bytes.",
	  SVC_FIELD(bytes_per_token) },
};

/* XDP ingress (bpf/steer_xdp.bpf.c), rendered only while it runs. */
static const struct service_family xdp_service_families[] = {
	{ "smg_steer_xdp_packets_total", "counter",
	  "Packets to the VIP steered by XDP ingress (encapsulated towards a backend).",
	  SVC_FIELD(xdp_packets_total) },
	{ "smg_steer_xdp_bytes_total", "counter",
	  "Bytes of those packets, from the Ethernet header.", SVC_FIELD(xdp_bytes_total) },
	{ "smg_steer_xdp_new_flows_total", "counter",
	  "TCP flows to the VIP that XDP ingress placed (SYNs credited like a connect).",
	  SVC_FIELD(xdp_new_flows_total) },
	{ "smg_steer_xdp_lru_misses_total", "counter",
	  "Non-SYN packets to the VIP of no flow XDP ingress knows: dropped.",
	  SVC_FIELD(xdp_lru_miss_total) },
};

static const struct backend_family xdp_backend_families[] = {
	{ "smg_steer_xdp_backend_packets_total", "counter",
	  "Packets XDP ingress sent to the backend.", BK_FIELD(xdp_packets_total), VALUE_U64 },
	{ "smg_steer_xdp_backend_bytes_total", "counter",
	  "Bytes XDP ingress sent to the backend, before encapsulation.", BK_FIELD(xdp_bytes_total),
	  VALUE_U64 },
	{ "smg_steer_xdp_backend_new_flows_total", "counter",
	  "TCP flows XDP ingress placed on the backend.", BK_FIELD(xdp_new_flows_total),
	  VALUE_U64 },
	{ "smg_steer_xdp_backend_ended_flows_total", "counter",
	  "Flows to the backend whose client sent FIN or RST (off its live count).",
	  BK_FIELD(xdp_ended_total), VALUE_U64 },
};

/* The step probe (--step-probe, user/probe/probe.c): rendered only when it is on. */
static const struct backend_family probe_backend_families[] = {
	{ "smg_steer_probe_streaming", "gauge",
	  "1 while the step probe's stream on the backend delivers (its packets are the "
	  "engine's step ends); 0 while it connects, restarts or fails.",
	  BK_FIELD(probe_streaming), VALUE_BOOL },
	{ "smg_steer_probe_requests_total", "counter",
	  "Step probe requests started on the backend (one runs at a time; the next starts "
	  "when it ends, at its max_tokens).",
	  BK_FIELD(probe_requests_total), VALUE_U64 },
	{ "smg_steer_probe_failures_total", "counter",
	  "Step probe requests that failed: no connection, an HTTP status other than 2xx or an "
	  "empty body, a reset, 30 s without a byte, or a stream that ended within a second. "
	  "Retried after 0.25 s, doubling up to 10 s.",
	  BK_FIELD(probe_failures_total), VALUE_U64 },
	{ "smg_steer_probe_steps_total", "counter",
	  "Packets of the step probe's streams: engine step ends applied to the backend's "
	  "step cadence.",
	  BK_FIELD(probe_steps_total), VALUE_U64 },
};

#define POLLS_NAME "smg_steer_polls_total"
#define POLLS_HELP "Load polls of the backend by outcome."
#define SOURCE_NAME "smg_steer_backend_load_source"
#define SOURCE_HELP                                                                           \
	"Where the backend's load is read (label source: grpc-sglang, grpc-vllm, "            \
	"grpc-tokenspeed, http-loads, http-metrics-vllm, http-metrics-sglang, tcp for none, " \
	"none while unknown); always 1."
#define AFFINITY_NAME "smg_steer_affinity_connections_total"
#define AFFINITY_HELP                                                                            \
	"Connections of a client with a key under cache affinity (--affinity) by verdict: new "  \
	"(no backend remembered, placed by least wait), stay (on its last backend), left_slack " \
	"(its backend's wait over the least plus --affinity-slack), left_gone (its backend "     \
	"drained, ejected or out of the table), left_overload (its backend overloaded)."
#define POLL_DURATION_NAME "smg_steer_poll_duration_seconds"
#define POLL_DURATION_HELP "Duration of GetLoads polls of the service's backends, in seconds."

static void write_family_header(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * A label value escaped per the text format: backslash, double quote and
 * line feed. Fields are fixed arrays, so never read past their size even if
 * a caller forgot the terminator.
 */
static void write_label_value(FILE *f, const char *s, size_t size)
{
	size_t i, n = strnlen(s, size);

	for (i = 0; i < n; i++) {
		switch (s[i]) {
		case '\\':
			fputs("\\\\", f);
			break;
		case '"':
			fputs("\\\"", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		default:
			fputc(s[i], f);
		}
	}
}

/*
 * The shortest %g form that reads back as the same double, so "0.1" rather
 * than "0.10000000000000001". Non-finite values use the format's spellings;
 * the daemon never passes them (the poller rejects non-finite loads), but a
 * scrape must still parse if one slipped through. Assumes the "C" numeric
 * locale, which the daemon never changes.
 */
static void format_double(char *buf, size_t len, double v)
{
	int prec;

	if (isnan(v)) {
		snprintf(buf, len, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, len, "%s", v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (prec = 15; prec < 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
	snprintf(buf, len, "%.17g", v);
}

static void write_double(FILE *f, double v)
{
	char buf[40];

	format_double(buf, sizeof(buf), v);
	fputs(buf, f);
}

static void write_backend_labels(FILE *f, const struct steer_metrics_backend *b)
{
	fputs("vip=\"", f);
	write_label_value(f, b->vip, sizeof(b->vip));
	fputs("\",backend=\"", f);
	write_label_value(f, b->backend, sizeof(b->backend));
	fputc('"', f);
}

static void write_backend_value(FILE *f, const struct steer_metrics_backend *b,
				const struct backend_family *fam)
{
	const char *field = (const char *)b + fam->offset;

	switch (fam->kind) {
	case VALUE_DOUBLE: {
		double v;

		memcpy(&v, field, sizeof(v));
		write_double(f, v);
		break;
	}
	case VALUE_I64: {
		int64_t v;

		memcpy(&v, field, sizeof(v));
		fprintf(f, "%" PRId64, v);
		break;
	}
	case VALUE_U64: {
		uint64_t v;

		memcpy(&v, field, sizeof(v));
		fprintf(f, "%" PRIu64, v);
		break;
	}
	case VALUE_BOOL: {
		bool v;

		memcpy(&v, field, sizeof(v));
		fputs(v ? "1" : "0", f);
		break;
	}
	}
}

static void write_backend_family(FILE *f, const struct steer_metrics_snapshot *snap,
				 const struct backend_family *fam)
{
	size_t i;

	write_family_header(f, fam->name, fam->type, fam->help);
	for (i = 0; i < snap->n_backends; i++) {
		fprintf(f, "%s{", fam->name);
		write_backend_labels(f, &snap->backends[i]);
		fputs("} ", f);
		write_backend_value(f, &snap->backends[i], fam);
		fputc('\n', f);
	}
}

/* Every outcome is emitted, zeros included, so rate() sees a series from the start. */
static void write_polls_family(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i;
	int k;

	write_family_header(f, POLLS_NAME, "counter", POLLS_HELP);
	for (i = 0; i < snap->n_backends; i++) {
		const struct steer_metrics_backend *b = &snap->backends[i];

		for (k = STEER_POLL_OK; k <= STEER_POLL_ERROR; k++) {
			fprintf(f, "%s{", POLLS_NAME);
			write_backend_labels(f, b);
			fprintf(f, ",result=\"%s\"} %" PRIu64 "\n",
				steer_poll_kind_name((enum steer_poll_kind)k), b->polls_total[k]);
		}
	}
}

/* An info-style gauge: the source is a label, the value always 1. */
static void write_source_family(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i;

	write_family_header(f, SOURCE_NAME, "gauge", SOURCE_HELP);
	for (i = 0; i < snap->n_backends; i++) {
		fprintf(f, "%s{", SOURCE_NAME);
		write_backend_labels(f, &snap->backends[i]);
		fprintf(f, ",source=\"%s\"} 1\n",
			steer_source_name((enum steer_source)snap->backends[i].source));
	}
}

static void write_service_labels(FILE *f, const struct steer_metrics_service *s)
{
	fputs("vip=\"", f);
	write_label_value(f, s->vip, sizeof(s->vip));
	fputc('"', f);
}

static void write_service_family(FILE *f, const struct steer_metrics_snapshot *snap,
				 const struct service_family *fam)
{
	size_t i;

	write_family_header(f, fam->name, fam->type, fam->help);
	for (i = 0; i < snap->n_services; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&snap->services[i] + fam->offset, sizeof(v));
		fprintf(f, "%s{", fam->name);
		write_service_labels(f, &snap->services[i]);
		fprintf(f, "} %" PRIu64 "\n", v);
	}
}

/* Every verdict is emitted, zeros included (affinity off: all zero). */
static void write_affinity_family(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i;
	int v;

	write_family_header(f, AFFINITY_NAME, "counter", AFFINITY_HELP);
	for (i = 0; i < snap->n_services; i++) {
		for (v = 0; v < STEER_AFF_VERDICTS; v++) {
			fprintf(f, "%s{", AFFINITY_NAME);
			write_service_labels(f, &snap->services[i]);
			fprintf(f, ",verdict=\"%s\"} %" PRIu64 "\n",
				steer_aff_verdict_name((uint32_t)v),
				snap->services[i].affinity_connections_total[v]);
		}
	}
}

/* The snapshot's buckets are already cumulative; +Inf is the total count. */
static void write_poll_histogram(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i;
	int b;

	write_family_header(f, POLL_DURATION_NAME, "histogram", POLL_DURATION_HELP);
	for (i = 0; i < snap->n_services; i++) {
		const struct steer_metrics_service *s = &snap->services[i];

		for (b = 0; b < STEER_POLL_BUCKETS; b++) {
			fprintf(f, "%s_bucket{", POLL_DURATION_NAME);
			write_service_labels(f, s);
			fputs(",le=\"", f);
			write_double(f, steer_poll_bucket_bounds[b]);
			fprintf(f, "\"} %" PRIu64 "\n", s->poll_buckets[b]);
		}
		fprintf(f, "%s_bucket{", POLL_DURATION_NAME);
		write_service_labels(f, s);
		fprintf(f, ",le=\"+Inf\"} %" PRIu64 "\n", s->poll_count);
		fprintf(f, "%s_sum{", POLL_DURATION_NAME);
		write_service_labels(f, s);
		fputs("} ", f);
		write_double(f, s->poll_sum_s);
		fprintf(f, "\n%s_count{", POLL_DURATION_NAME);
		write_service_labels(f, s);
		fprintf(f, "} %" PRIu64 "\n", s->poll_count);
	}
}

/* Daemon-wide gauges of the control plane's own cost (no labels). */
static void write_cycle_gauges(FILE *f, const struct steer_metrics_snapshot *snap)
{
	if (!snap->last_publish_ns)
		return; /* no cycle completed yet */
	write_family_header(
		f, "smg_steer_cycle_seconds", "gauge",
		"Duration of the last control-plane cycle: GetLoads sent to new tables in effect.");
	fputs("smg_steer_cycle_seconds ", f);
	write_double(f, snap->last_cycle_s);
	fputc('\n', f);
	write_family_header(
		f, "smg_steer_publish_seconds", "gauge",
		"Scoring and publishing in the last cycle, until new tables are in effect.");
	fputs("smg_steer_publish_seconds ", f);
	write_double(f, snap->last_publish_s);
	fputc('\n', f);
}

const char *steer_dns_result_name(enum steer_dns_result r)
{
	switch (r) {
	case STEER_DNS_OK:
		return "ok";
	case STEER_DNS_EMPTY:
		return "empty";
	default:
		return "failed";
	}
}

static void write_dns_name_label(FILE *f, const char *name, size_t size)
{
	fputs("name=\"", f);
	write_label_value(f, name, size);
	fputc('"', f);
}

/* DNS discovery: per name, and per backend-dns entry of a service. */
static void write_probe_counters(FILE *f, const struct steer_metrics_snapshot *snap)
{
	steer_metrics_family_header(f, "smg_steer_probe_applied_total", "counter",
				    "Step probe packets applied to their backend's step cadence in "
				    "the kernel (steer_probe_apply).");
	fprintf(f, "smg_steer_probe_applied_total %" PRIu64 "\n", snap->probe_applied_total);
	steer_metrics_family_header(
		f, "smg_steer_probe_apply_errors_total", "counter",
		"Runs of steer_probe_apply that failed (their packets are lost).");
	fprintf(f, "smg_steer_probe_apply_errors_total %" PRIu64 "\n",
		snap->probe_apply_errors_total);
}

static void write_dns_families(FILE *f, const struct steer_metrics_snapshot *snap)
{
	size_t i;
	int r;

	if (!snap->n_dns_names && !snap->n_dns_entries)
		return; /* no backend-dns or peer-dns configured */
	write_family_header(f, "smg_steer_dns_resolutions_total", "counter",
			    "DNS look-ups of the name by result: ok (addresses), empty (no A or "
			    "AAAA record) or failed.");
	for (i = 0; i < snap->n_dns_names; i++)
		for (r = 0; r < STEER_DNS_RESULTS; r++) {
			fputs("smg_steer_dns_resolutions_total{", f);
			write_dns_name_label(f, snap->dns_names[i].name,
					     sizeof(snap->dns_names[i].name));
			fprintf(f, ",result=\"%s\"} %" PRIu64 "\n",
				steer_dns_result_name((enum steer_dns_result)r),
				snap->dns_names[i].resolutions_total[r]);
		}
	write_family_header(f, "smg_steer_dns_addresses", "gauge",
			    "Addresses of the name in use: those of its last answer that had any.");
	for (i = 0; i < snap->n_dns_names; i++) {
		fputs("smg_steer_dns_addresses{", f);
		write_dns_name_label(f, snap->dns_names[i].name, sizeof(snap->dns_names[i].name));
		fprintf(f, "} %u\n", snap->dns_names[i].addresses);
	}
	write_family_header(f, "smg_steer_dns_stale", "gauge",
			    "1 while the last look-up of the name failed or was empty, so that "
			    "its last known addresses stay in use.");
	for (i = 0; i < snap->n_dns_names; i++) {
		fputs("smg_steer_dns_stale{", f);
		write_dns_name_label(f, snap->dns_names[i].name, sizeof(snap->dns_names[i].name));
		fprintf(f, "} %d\n", snap->dns_names[i].stale ? 1 : 0);
	}
	write_family_header(f, "smg_steer_dns_backends", "gauge",
			    "Backends the service has from the name on that port.");
	for (i = 0; i < snap->n_dns_entries; i++) {
		const struct steer_metrics_dns_entry *e = &snap->dns_entries[i];

		fputs("smg_steer_dns_backends{vip=\"", f);
		write_label_value(f, e->vip, sizeof(e->vip));
		fputs("\",", f);
		write_dns_name_label(f, e->name, sizeof(e->name));
		fprintf(f, ",port=\"%u\"} %u\n", e->port, e->backends);
	}
}

char *steer_metrics_render(const struct steer_metrics_snapshot *snap)
{
	static const struct steer_metrics_snapshot empty;
	char *buf = NULL;
	size_t len = 0, i;
	FILE *f;
	int failed;

	if (!snap)
		snap = &empty;
	f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	for (i = 0; i < sizeof(backend_families) / sizeof(backend_families[0]); i++)
		write_backend_family(f, snap, &backend_families[i]);
	write_polls_family(f, snap);
	write_source_family(f, snap);
	for (i = 0; i < sizeof(service_families) / sizeof(service_families[0]); i++)
		write_service_family(f, snap, &service_families[i]);
	write_affinity_family(f, snap);
	write_poll_histogram(f, snap);
	write_cycle_gauges(f, snap);
	write_dns_families(f, snap);
	if (snap->peers_on)
		steer_metrics_write_peers(f, snap);
	for (i = 0; snap->probes_on &&
		    i < sizeof(probe_backend_families) / sizeof(probe_backend_families[0]);
	     i++)
		write_backend_family(f, snap, &probe_backend_families[i]);
	if (snap->probes_on)
		write_probe_counters(f, snap);
	for (i = 0; snap->xdp && i < sizeof(xdp_service_families) / sizeof(xdp_service_families[0]);
	     i++)
		write_service_family(f, snap, &xdp_service_families[i]);
	for (i = 0; snap->xdp && i < sizeof(xdp_backend_families) / sizeof(xdp_backend_families[0]);
	     i++)
		write_backend_family(f, snap, &xdp_backend_families[i]);
	/* A stream that ran out of memory loses output silently until here. */
	failed = ferror(f);
	if (fclose(f) != 0 || failed) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* ---- Snapshot ownership ---------------------------------------------------- */

struct steer_metrics {
	struct MHD_Daemon *daemon;
	int listen_fd; /* bound by steer_metrics_open; libmicrohttpd's once serving */
	char listen[STEER_ADDR_STRLEN];
	struct steer_guard *guard; /* touched only from libmicrohttpd's thread */
	pthread_mutex_t lock;	   /* guards snap and have_snap */
	struct steer_metrics_snapshot snap;
	bool have_snap;
	/* While starting, the first libmicrohttpd message explains a failure. */
	atomic_bool capture_log;
	char start_log[160];
};

static void snapshot_free(struct steer_metrics_snapshot *s)
{
	free(s->services);
	free(s->backends);
	free(s->dns_names);
	free(s->dns_entries);
	free(s->peers);
	memset(s, 0, sizeof(*s));
}

static void *dup_array(const void *src, size_t n, size_t size)
{
	void *p;

	if (n == 0)
		return NULL;
	p = calloc(n, size);
	if (p)
		memcpy(p, src, n * size);
	return p;
}

static int snapshot_copy(struct steer_metrics_snapshot *dst,
			 const struct steer_metrics_snapshot *src)
{
	memset(dst, 0, sizeof(*dst));
	if ((src->n_services && !src->services) || (src->n_backends && !src->backends) ||
	    (src->n_dns_names && !src->dns_names) || (src->n_dns_entries && !src->dns_entries))
		return -EINVAL;
	dst->services = dup_array(src->services, src->n_services, sizeof(*src->services));
	dst->backends = dup_array(src->backends, src->n_backends, sizeof(*src->backends));
	dst->dns_names = dup_array(src->dns_names, src->n_dns_names, sizeof(*src->dns_names));
	dst->dns_entries =
		dup_array(src->dns_entries, src->n_dns_entries, sizeof(*src->dns_entries));
	if ((src->n_services && !dst->services) || (src->n_backends && !dst->backends) ||
	    (src->n_dns_names && !dst->dns_names) || (src->n_dns_entries && !dst->dns_entries)) {
		snapshot_free(dst);
		return -ENOMEM;
	}
	dst->n_services = src->n_services;
	dst->n_backends = src->n_backends;
	dst->n_dns_names = src->n_dns_names;
	dst->n_dns_entries = src->n_dns_entries;
	dst->last_publish_ns = src->last_publish_ns;
	dst->last_cycle_s = src->last_cycle_s;
	dst->last_publish_s = src->last_publish_s;
	dst->healthy_within_ns = src->healthy_within_ns;
	dst->xdp = src->xdp;
	if (src->n_peers) {
		dst->peers = dup_array(src->peers, src->n_peers, sizeof(*src->peers));
		if (!dst->peers) {
			snapshot_free(dst);
			return -ENOMEM;
		}
		dst->n_peers = src->n_peers;
	}
	dst->peers_on = src->peers_on;
	dst->peer_rejected_total = src->peer_rejected_total;
	dst->peer_unknown_backends_total = src->peer_unknown_backends_total;
	dst->peer_applied_total = src->peer_applied_total;
	dst->peer_apply_errors_total = src->peer_apply_errors_total;
	dst->peer_own_reports_total = src->peer_own_reports_total;
	dst->peer_push_wakeups_total = src->peer_push_wakeups_total;
	dst->peer_keyed = src->peer_keyed;
	memcpy(dst->peer_key_refused_total, src->peer_key_refused_total,
	       sizeof(dst->peer_key_refused_total));
	dst->probes_on = src->probes_on;
	dst->probe_applied_total = src->probe_applied_total;
	dst->probe_apply_errors_total = src->probe_apply_errors_total;
	return 0;
}

int steer_metrics_update(struct steer_metrics *m, const struct steer_metrics_snapshot *snap)
{
	struct steer_metrics_snapshot fresh, old;
	int rc;

	if (!m || !snap)
		return -EINVAL;
	/* Copy outside the lock so a scrape waits only for the pointer swap. */
	rc = snapshot_copy(&fresh, snap);
	if (rc)
		return rc;
	pthread_mutex_lock(&m->lock);
	old = m->snap;
	m->snap = fresh;
	m->have_snap = true;
	pthread_mutex_unlock(&m->lock);
	snapshot_free(&old);
	return 0;
}

/* ---- HTTP ------------------------------------------------------------------ */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned int status,
			     const char *content_type, char *body, enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(strlen(body), body, mode);
	if (!resp) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result reply_static(struct MHD_Connection *conn, unsigned int status,
				    const char *text)
{
	/* MHD_RESPMEM_PERSISTENT never writes to or frees the buffer. */
	return reply(conn, status, PLAIN_CONTENT_TYPE, (char *)text, MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result reply_metrics(struct steer_metrics *m, struct MHD_Connection *conn)
{
	char *text;

	pthread_mutex_lock(&m->lock);
	text = steer_metrics_render(m->have_snap ? &m->snap : NULL);
	pthread_mutex_unlock(&m->lock);
	if (!text)
		return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
				    "cannot render metrics: out of memory\n");
	return reply(conn, MHD_HTTP_OK, TEXT_FORMAT_CONTENT_TYPE, text, MHD_RESPMEM_MUST_FREE);
}

/* Healthy while a publish happened within healthy_within_ns; else why not. */
static bool publish_is_recent(struct steer_metrics *m, char *why, size_t whylen)
{
	uint64_t now = steer_monotonic_ns(), last, within;
	bool have;

	pthread_mutex_lock(&m->lock);
	have = m->have_snap;
	last = m->snap.last_publish_ns;
	within = m->snap.healthy_within_ns;
	pthread_mutex_unlock(&m->lock);
	if (!have || last == 0) {
		snprintf(why, whylen, "no table published yet\n");
		return false;
	}
	/* A publish stamped after now (clock read races) counts as just now. */
	if (now > last && now - last > within) {
		snprintf(why, whylen, "last table publish %.3f s ago, limit %.3f s\n",
			 (double)(now - last) / 1e9, (double)within / 1e9);
		return false;
	}
	return true;
}

static enum MHD_Result reply_healthz(struct steer_metrics *m, struct MHD_Connection *conn)
{
	char why[128];

	if (publish_is_recent(m, why, sizeof(why)))
		return reply_static(conn, MHD_HTTP_OK, "ok\n");
	return reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, PLAIN_CONTENT_TYPE, why,
		     MHD_RESPMEM_MUST_COPY);
}

static struct steer_guard_conn *guard_conn(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

static enum MHD_Result handle_request(void *cls, struct MHD_Connection *conn, const char *url,
				      const char *method, const char *version,
				      const char *upload_data, size_t *upload_data_size,
				      void **req_cls)
{
	struct steer_metrics *m = cls;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	/* The request is complete: it is answered now, not a candidate to drop. */
	steer_guard_answering(guard_conn(conn), steer_monotonic_ns());
	/* HEAD is answered like GET; libmicrohttpd drops the body itself. */
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
	if (strcmp(url, "/metrics") == 0)
		return reply_metrics(m, conn);
	if (strcmp(url, "/healthz") == 0)
		return reply_healthz(m, conn);
	return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found\n");
}

/*
 * Keeps the first message libmicrohttpd logs while starting: it names the
 * failing step (e.g. the bind). Later messages concern single connections
 * (a client that went away) and are dropped: Prometheus reports failed
 * scrapes itself.
 */
static void log_start_failure(void *cls, const char *fmt, va_list ap)
{
	struct steer_metrics *m = cls;
	size_t n;

	if (!atomic_exchange(&m->capture_log, false))
		return;
	vsnprintf(m->start_log, sizeof(m->start_log), fmt, ap);
	n = strlen(m->start_log);
	while (n > 0 && (m->start_log[n - 1] == '\n' || m->start_log[n - 1] == '\r'))
		m->start_log[--n] = 0;
}

/* Drop a connection to make room: the shutdown makes libmicrohttpd see the
 * end of the stream at its next poll and close it; the 1 s timeout closes it
 * even if that wakeup were missed. */
static void drop_connection(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	if (info)
		shutdown(info->connect_fd, SHUT_RDWR);
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, 1u);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	struct steer_metrics *m = cls;
	struct steer_guard_conn *self, *victim;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		steer_guard_closed(m->guard, *socket_context);
		*socket_context = NULL;
		return;
	}
	victim = steer_guard_admit(m->guard, conn, steer_monotonic_ns(), &self);
	*socket_context = self;
	if (!self)
		drop_connection(conn); /* untracked (out of memory): never let it stay */
	else if (victim)
		drop_connection(steer_guard_owner(victim));
}

/* The answer went out (or the client left): the connection idles. */
static void on_request_done(void *cls, struct MHD_Connection *conn, void **req_cls,
			    enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)req_cls;
	(void)toe;
	steer_guard_idle(guard_conn(conn), steer_monotonic_ns());
}

static socklen_t to_sockaddr(const struct steer_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (steer_addr_is_v4(a)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = a->port;
		memcpy(&s4->sin_addr, &a->ip6[3], sizeof(s4->sin_addr));
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = a->port;
	memcpy(&s6->sin6_addr, a->ip6, sizeof(s6->sin6_addr));
	return sizeof(*s6);
}

/*
 * The listening socket, bound to exactly the given address (IPv6 sockets
 * IPv6-only), with SO_REUSEADDR as libmicrohttpd would set it, so that a
 * restart does not wait for TIME_WAIT. Returns the fd or a negative errno.
 */
static int bind_listener(const struct steer_addr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = to_sockaddr(addr, &ss);
	int fd, one = 1, e;

	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    (ss.ss_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
	    bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, SOMAXCONN) != 0) {
		e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int steer_metrics_open(const char *listen, struct steer_metrics **out, char *err, size_t errlen)
{
	struct steer_metrics *m;
	struct steer_addr addr;
	char why[160];
	int rc;

	if (!out)
		return steer_seterr(err, errlen, EINVAL, "metrics: no result pointer");
	*out = NULL;
	rc = steer_addr_parse(listen, &addr, why, sizeof(why));
	if (rc)
		return steer_seterr(err, errlen, rc, "metrics: listen address %s", why);
	m = calloc(1, sizeof(*m));
	if (!m)
		return steer_seterr(err, errlen, ENOMEM, "metrics: out of memory");
	m->guard = steer_guard_new(STEER_METRICS_MAX_CONNECTIONS, STEER_METRICS_MAX_TRACKED,
				   STEER_METRICS_TIMEOUT_S * 1000000000ULL);
	if (!m->guard) {
		free(m);
		return steer_seterr(err, errlen, ENOMEM, "metrics: out of memory");
	}
	m->listen_fd = bind_listener(&addr);
	if (m->listen_fd < 0) {
		rc = m->listen_fd;
		steer_guard_free(m->guard);
		free(m);
		return steer_seterr(err, errlen, rc, "metrics: cannot listen on %s: %s", listen,
				    strerror(-rc));
	}
	snprintf(m->listen, sizeof(m->listen), "%s", listen);
	pthread_mutex_init(&m->lock, NULL);
	atomic_init(&m->capture_log, true);
	*out = m;
	return 0;
}

/*
 * Why libmicrohttpd did not start. errno from the failing system call
 * survives MHD_start_daemon's cleanup; when it does not, the library's own
 * message is the best we have.
 */
static int start_failure(struct steer_metrics *m, int saved_errno, char *err, size_t errlen)
{
	if (saved_errno > 0)
		return steer_seterr(err, errlen, saved_errno, "metrics: cannot serve on %s: %s",
				    m->listen, strerror(saved_errno));
	return steer_seterr(err, errlen, EIO, "metrics: cannot serve on %s: %s", m->listen,
			    m->start_log[0] ? m->start_log : "libmicrohttpd failed to start");
}

int steer_metrics_serve(struct steer_metrics *m, char *err, size_t errlen)
{
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ERROR_LOG;
	int saved_errno;

	if (!m || m->daemon || m->listen_fd < 0)
		return steer_seterr(err, errlen, EINVAL, "metrics: not open, or already serving");
	errno = 0;
	/* The guard keeps at most MAX_CONNECTIONS open (see guard.h);
	 * libmicrohttpd's own limit only bounds the dropped ones not yet
	 * closed, so it never stops accepting and nothing queues behind an
	 * abuser in the listen backlog. */
	m->daemon = MHD_start_daemon(
		flags, 0, NULL, NULL, handle_request, m, MHD_OPTION_EXTERNAL_LOGGER,
		log_start_failure, m, MHD_OPTION_LISTEN_SOCKET, m->listen_fd,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, m, MHD_OPTION_NOTIFY_COMPLETED,
		on_request_done, m, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned int)STEER_METRICS_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned int)STEER_METRICS_MAX_TRACKED, MHD_OPTION_END);
	saved_errno = errno;
	atomic_store(&m->capture_log, false);
	if (!m->daemon) {
		/* libmicrohttpd closed (or owns) the socket on its way out. */
		m->listen_fd = -1;
		return start_failure(m, saved_errno, err, errlen);
	}
	return 0;
}

int steer_metrics_start(const char *listen, struct steer_metrics **out, char *err, size_t errlen)
{
	int rc = steer_metrics_open(listen, out, err, errlen);

	if (rc)
		return rc;
	rc = steer_metrics_serve(*out, err, errlen);
	if (rc) {
		steer_metrics_stop(*out);
		*out = NULL;
	}
	return rc;
}

void steer_metrics_stop(struct steer_metrics *m)
{
	if (!m)
		return;
	/* Joins the polling thread (no handler runs after this) and closes the
	 * listening socket, which libmicrohttpd owns once serving. */
	if (m->daemon)
		MHD_stop_daemon(m->daemon);
	else if (m->listen_fd >= 0)
		close(m->listen_fd);
	steer_guard_free(m->guard);
	snapshot_free(&m->snap);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

/* For the families rendered elsewhere (peers.c). */
void steer_metrics_family_header(FILE *f, const char *name, const char *type, const char *help)
{
	write_family_header(f, name, type, help);
}

void steer_metrics_double(FILE *f, double v)
{
	write_double(f, v);
}
