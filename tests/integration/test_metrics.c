// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_metrics.c - the Prometheus exposition rendered from a known snapshot
 * (exact lines, escaping, histogram, family grouping, and a parse by the
 * official Python client's parser), then the real libmicrohttpd server in a
 * private network namespace, scraped with the curl command line tool.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataplane/dataplane.h"
#include "metrics/metrics.h"
#include "tap.h"
#include "testenv.h"

#define VIP_A "127.0.0.100:8000"
#define VIP_ODD "we\\ird\"vip\nx" /* backslash, quote and newline to escape */
#define VIP_ODD_ESCAPED "we\\\\ird\\\"vip\\nx"
#define SEC 1000000000ULL
#define N_FAMILIES 31

static const char *const family_types[N_FAMILIES][2] = {
	{ "smg_steer_backend_score_seconds", "gauge" },
	{ "smg_steer_backend_queued_tokens", "gauge" },
	{ "smg_steer_backend_throughput_tokens_per_second", "gauge" },
	{ "smg_steer_backend_kv_usage_ratio", "gauge" },
	{ "smg_steer_backend_inflight_tokens", "gauge" },
	{ "smg_steer_backend_live_connections", "gauge" },
	{ "smg_steer_backend_healthy", "gauge" },
	{ "smg_steer_connections_steered_total", "counter" },
	{ "smg_steer_backend_pending_tokens", "gauge" },
	{ "smg_steer_backend_pending_bytes", "gauge" },
	{ "smg_steer_backend_queued_pending_tokens", "gauge" },
	{ "smg_steer_backend_busy_seconds", "gauge" },
	{ "smg_steer_backend_step_seconds", "gauge" },
	{ "smg_steer_backend_step_left_seconds", "gauge" },
	{ "smg_steer_backend_peer_pending_tokens", "gauge" },
	{ "smg_steer_backend_sent_bytes_total", "counter" },
	{ "smg_steer_backend_requests_total", "counter" },
	{ "smg_steer_backend_overloaded", "gauge" },
	{ "smg_steer_backend_pushbacks_total", "counter" },
	{ "smg_steer_backend_server_errors_total", "counter" },
	{ "smg_steer_polls_total", "counter" },
	{ "smg_steer_backend_load_source", "gauge" },
	{ "smg_steer_table_publishes_total", "counter" },
	{ "smg_steer_fallback_connections_total", "counter" },
	{ "smg_steer_refused_connections_total", "counter" },
	{ "smg_steer_overload_refused_connections_total", "counter" },
	{ "smg_steer_wait_refused_connections_total", "counter" },
	{ "smg_steer_overload_admitted_connections_total", "counter" },
	{ "smg_steer_bytes_per_token", "gauge" },
	{ "smg_steer_affinity_connections_total", "counter" },
	{ "smg_steer_poll_duration_seconds", "histogram" },
};

/* ---- Fixture ------------------------------------------------------------- */

static struct steer_metrics_service fx_services[2];
static struct steer_metrics_backend fx_backends[2];
static struct steer_metrics_snapshot fx;

static void build_fixture(void)
{
	static const uint64_t buckets[STEER_POLL_BUCKETS] = {
		0, 1, 2, 2, 5, 5, 5, 9, 9, 10, 10, 10
	};
	struct steer_metrics_backend *b;
	struct steer_metrics_service *s;

	memset(fx_services, 0, sizeof(fx_services));
	memset(fx_backends, 0, sizeof(fx_backends));
	s = &fx_services[0];
	snprintf(s->vip, sizeof(s->vip), VIP_A);
	s->table_publishes_total = 42;
	s->fallback_connections_total = 3;
	s->refused_connections_total = 1;
	s->bytes_per_token = 3;
	s->affinity_connections_total[STEER_AFF_NEW] = 7;
	s->affinity_connections_total[STEER_AFF_STAY] = 30;
	s->affinity_connections_total[STEER_AFF_LEFT_GONE] = 2;
	memcpy(s->poll_buckets, buckets, sizeof(buckets));
	s->poll_count = 11;
	s->poll_sum_s = 1.75;
	snprintf(fx_services[1].vip, sizeof(fx_services[1].vip), VIP_ODD);

	b = &fx_backends[0];
	snprintf(b->vip, sizeof(b->vip), VIP_A);
	snprintf(b->backend, sizeof(b->backend), "127.0.0.11:9001");
	b->score_s = 0.25;
	b->queued_tokens = 1536;
	b->throughput = 2500.5;
	b->kv_usage = 0.1;
	b->inflight_tokens = 2048;
	b->live_connections = 3;
	b->healthy = true;
	b->steered_total = UINT64_MAX;
	b->polls_total[STEER_POLL_OK] = 40;
	b->polls_total[STEER_POLL_UNAVAILABLE] = 2;
	b->polls_total[STEER_POLL_DEADLINE] = 1;
	b->polls_total[STEER_POLL_ERROR] = 5;
	b->pending_bytes = 9001;
	b->pending_tokens = 3000;
	b->queued_pending_tokens = 1200;
	b->sent_bytes_total = 123456789012ULL;
	b->requests_total = 77;

	b = &fx_backends[1];
	snprintf(b->vip, sizeof(b->vip), VIP_ODD);
	snprintf(b->backend, sizeof(b->backend), "[2001:db8::12]:9002");
	b->score_s = 1.0 / 3.0;
	b->throughput = 1e-9;
	b->live_connections = -2;
	b->healthy = false;

	fx = (struct steer_metrics_snapshot){
		.services = fx_services, .n_services = 2, .backends = fx_backends, .n_backends = 2
	};
}

/* ---- Text helpers ------------------------------------------------------------ */

static char *rendered; /* the last render, freed by the next one and at exit */

static const char *render(const struct steer_metrics_snapshot *snap)
{
	free(rendered);
	rendered = steer_metrics_render(snap);
	return rendered;
}

/* Whole lines only: "x 1" must not match "x 10". */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	const char *p = text;

	while ((p = strstr(p, line))) {
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
		p++;
	}
	return false;
}

static int count_prefix(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *p = text;
	int c = 0;

	while (p && *p) {
		if (strncmp(p, prefix, n) == 0)
			c++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return c;
}

/* The value token of the first line starting with prefix, or NaN. */
static double value_after(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	const char *p = text;

	while (p && *p) {
		if (strncmp(p, prefix, n) == 0)
			return strtod(p + n, NULL);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return NAN;
}

/* ---- Rendering ------------------------------------------------------------ */

static void test_poll_kind_names(void)
{
	static const char *const want[STEER_POLL_KINDS] = {
		[STEER_POLL_OK] = "ok",
		[STEER_POLL_UNIMPLEMENTED] = "unimplemented",
		[STEER_POLL_UNAVAILABLE] = "unavailable",
		[STEER_POLL_DEADLINE] = "deadline_exceeded",
		[STEER_POLL_INVALID] = "invalid",
		[STEER_POLL_ERROR] = "error",
	};
	int k;

	for (k = STEER_POLL_OK; k <= STEER_POLL_ERROR; k++)
		CHECK(strcmp(steer_poll_kind_name((enum steer_poll_kind)k), want[k]) == 0,
		      "kind %d: %s", k, steer_poll_kind_name((enum steer_poll_kind)k));
}

static void test_bucket_bounds_ascend(void)
{
	int i;

	CHECK(steer_poll_bucket_bounds[0] > 0, "first bound %g", steer_poll_bucket_bounds[0]);
	for (i = 1; i < STEER_POLL_BUCKETS; i++)
		CHECK(steer_poll_bucket_bounds[i] > steer_poll_bucket_bounds[i - 1],
		      "bound %d (%g) not above bound %d (%g)", i, steer_poll_bucket_bounds[i],
		      i - 1, steer_poll_bucket_bounds[i - 1]);
}

static void test_backend_lines_exact(void)
{
	const char *t;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
#define L(x) "{vip=\"" VIP_A "\",backend=\"127.0.0.11:9001\"} " x
	static const char *const want[] = {
		"smg_steer_backend_score_seconds" L("0.25"),
		"smg_steer_backend_queued_tokens" L("1536"),
		"smg_steer_backend_throughput_tokens_per_second" L("2500.5"),
		"smg_steer_backend_kv_usage_ratio" L("0.1"),
		"smg_steer_backend_inflight_tokens" L("2048"),
		"smg_steer_backend_live_connections" L("3"),
		"smg_steer_backend_healthy" L("1"),
		"smg_steer_connections_steered_total" L("18446744073709551615"),
		"smg_steer_backend_pending_tokens" L("3000"),
		"smg_steer_backend_pending_bytes" L("9001"),
		"smg_steer_backend_queued_pending_tokens" L("1200"),
		"smg_steer_backend_sent_bytes_total" L("123456789012"),
		"smg_steer_backend_requests_total" L("77"),
		"smg_steer_bytes_per_token{vip=\"" VIP_A "\"} 3",
	};
#undef L
	size_t i;

	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(has_line(t, want[i]), "missing line: %s\n%s", want[i], t);
}

static void test_label_escaping(void)
{
	const char *t;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	CHECK(has_line(t, "smg_steer_backend_healthy{vip=\"" VIP_ODD_ESCAPED
			  "\",backend=\"[2001:db8::12]:9002\"} 0"),
	      "escaped backend line missing:\n%s", t);
	CHECK(has_line(t, "smg_steer_backend_live_connections{vip=\"" VIP_ODD_ESCAPED
			  "\",backend=\"[2001:db8::12]:9002\"} -2"),
	      "negative live connections line missing");
	CHECK(has_line(t, "smg_steer_table_publishes_total{vip=\"" VIP_ODD_ESCAPED "\"} 0"),
	      "escaped service line missing");
	/* The raw newline of the label must not have split a line. */
	CHECK(!strstr(t, "\nx\""), "an unescaped newline leaked into the output");
}

static void test_numbers_round_trip(void)
{
	const char *prefix = "smg_steer_backend_score_seconds{vip=\"" VIP_ODD_ESCAPED
			     "\",backend=\"[2001:db8::12]:9002\"} ";
	const char *t;
	double v;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	v = value_after(t, prefix);
	CHECK(v == 1.0 / 3.0, "1/3 printed as %.17g", v);
	v = value_after(t, "smg_steer_backend_throughput_tokens_per_second{vip=\"" VIP_ODD_ESCAPED
			   "\",backend=\"[2001:db8::12]:9002\"} ");
	CHECK(v == 1e-9, "1e-9 printed as %.17g", v);
	/* Non-finite values use the format's spellings. */
	fx_backends[1].score_s = NAN;
	fx_backends[1].queued_tokens = INFINITY;
	fx_backends[1].kv_usage = -INFINITY;
	t = render(&fx);
	CHECK(t, "render returned NULL");
	CHECK(count_prefix(t, prefix) == 1 && strstr(t, "\"} NaN\n"), "NaN missing:\n%s", t);
	CHECK(strstr(t, "\"} +Inf\n") && strstr(t, "\"} -Inf\n"), "+Inf/-Inf missing");
}

static void test_every_poll_result_present(void)
{
	static const uint64_t want[STEER_POLL_KINDS] = { 0, 40, 0, 2, 1, 0, 5 };
	char line[256];
	const char *t;
	int k;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	for (k = STEER_POLL_OK; k <= STEER_POLL_ERROR; k++) {
		snprintf(line, sizeof(line),
			 "smg_steer_polls_total{vip=\"" VIP_A
			 "\",backend=\"127.0.0.11:9001\",result=\"%s\"} %llu",
			 steer_poll_kind_name((enum steer_poll_kind)k),
			 (unsigned long long)want[k]);
		CHECK(has_line(t, line), "missing: %s", line);
		snprintf(line, sizeof(line),
			 "smg_steer_polls_total{vip=\"" VIP_ODD_ESCAPED
			 "\",backend=\"[2001:db8::12]:9002\",result=\"%s\"} 0",
			 steer_poll_kind_name((enum steer_poll_kind)k));
		CHECK(has_line(t, line), "missing zero: %s", line);
	}
	CHECK(count_prefix(t, "smg_steer_polls_total{") == 2 * 6, "expected 12 poll series");
	CHECK(!strstr(t, "result=\"none\""), "the unused NONE kind was emitted");
}

/* Cache affinity: every verdict of every service, zeros included. */
static void test_affinity_verdicts(void)
{
	static const char *const want[] = {
		"smg_steer_affinity_connections_total{vip=\"" VIP_A "\",verdict=\"new\"} 7",
		"smg_steer_affinity_connections_total{vip=\"" VIP_A "\",verdict=\"stay\"} 30",
		"smg_steer_affinity_connections_total{vip=\"" VIP_A "\",verdict=\"left_slack\"} 0",
		"smg_steer_affinity_connections_total{vip=\"" VIP_A "\",verdict=\"left_gone\"} 2",
		"smg_steer_affinity_connections_total{vip=\"" VIP_A
		"\",verdict=\"left_overload\"} 0",
		"smg_steer_affinity_connections_total{vip=\"" VIP_ODD_ESCAPED
		"\",verdict=\"left_overload\"} 0",
	};
	const char *t;
	size_t i;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	for (i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(has_line(t, want[i]), "missing: %s", want[i]);
	CHECK(count_prefix(t, "smg_steer_affinity_connections_total{") == 2 * STEER_AFF_VERDICTS,
	      "expected 10 affinity series");
}

static void test_histogram(void)
{
	char prefix[160];
	const char *t, *here;
	double prev = 0, v;
	int i;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	CHECK(has_line(t,
		       "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A "\",le=\"0.001\"} 0"),
	      "first bucket");
	CHECK(has_line(t,
		       "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A "\",le=\"0.0025\"} 1"),
	      "second bucket");
	CHECK(has_line(t, "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A "\",le=\"5\"} 10"),
	      "last finite bucket");
	CHECK(has_line(t,
		       "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A "\",le=\"+Inf\"} 11"),
	      "+Inf bucket");
	CHECK(has_line(t, "smg_steer_poll_duration_seconds_sum{vip=\"" VIP_A "\"} 1.75"), "sum");
	CHECK(has_line(t, "smg_steer_poll_duration_seconds_count{vip=\"" VIP_A "\"} 11"), "count");
	/* Every bound appears once, in order, with non-decreasing counts. */
	snprintf(prefix, sizeof(prefix),
		 "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A "\",le=\"");
	CHECK(count_prefix(t, prefix) == STEER_POLL_BUCKETS + 1, "%d bucket lines",
	      count_prefix(t, prefix));
	here = strstr(t, prefix);
	for (i = 0; i < STEER_POLL_BUCKETS; i++, here = strstr(here + 1, prefix)) {
		CHECK(here, "bucket %d missing", i);
		CHECK(strtod(here + strlen(prefix), NULL) == steer_poll_bucket_bounds[i],
		      "bucket %d has le=\"%.12s, want %g", i, here + strlen(prefix),
		      steer_poll_bucket_bounds[i]);
		v = strtod(strstr(here, "} ") + 2, NULL);
		CHECK(v >= prev, "bucket %d count %g below previous %g", i, v, prev);
		prev = v;
	}
	CHECK(here && strncmp(here + strlen(prefix), "+Inf\"} ", 7) == 0, "+Inf is not last");
	CHECK(value_after(t, "smg_steer_poll_duration_seconds_bucket{vip=\"" VIP_A
			     "\",le=\"+Inf\"} ") ==
		      value_after(t, "smg_steer_poll_duration_seconds_count{vip=\"" VIP_A "\"} "),
	      "+Inf bucket differs from count");
}

/* Metric name of a sample line: up to '{' or ' '. */
static void sample_name(const char *line, char *buf, size_t len)
{
	size_t n = strcspn(line, "{ ");

	if (n >= len)
		n = len - 1;
	memcpy(buf, line, n);
	buf[n] = 0;
}

static bool belongs_to(const char *sample, const char *family, const char *type)
{
	size_t n = strlen(family);

	if (strcmp(sample, family) == 0)
		return strcmp(type, "histogram") != 0;
	if (strcmp(type, "histogram") != 0 || strncmp(sample, family, n) != 0)
		return false;
	return !strcmp(sample + n, "_bucket") || !strcmp(sample + n, "_sum") ||
	       !strcmp(sample + n, "_count");
}

/* Families beyond family_types the text under check has (the --peer ones). */
static int extra_families;

/* HELP then TYPE once per family, every sample inside its family's block. */
static int check_family_grouping(const char *t)
{
	char family[96] = "", type[16] = "", name[96], buf[160];
	const char *p = t;
	int i, samples = 0, cycle;

	for (i = 0; i < N_FAMILIES; i++) {
		snprintf(buf, sizeof(buf), "# HELP %s ", family_types[i][0]);
		CHECK_RC(count_prefix(t, buf) == 1, "HELP of %s: %d times", family_types[i][0],
			 count_prefix(t, buf));
		snprintf(buf, sizeof(buf), "# TYPE %s %s", family_types[i][0], family_types[i][1]);
		CHECK_RC(has_line(t, buf), "missing: %s", buf);
	}
	/* The two cycle gauges appear once a publish has happened. */
	cycle = has_line(t, "# TYPE smg_steer_cycle_seconds gauge") ? 2 : 0;
	CHECK_RC(cycle == 0 || has_line(t, "# TYPE smg_steer_publish_seconds gauge"),
		 "cycle gauges come together");
	CHECK_RC(count_prefix(t, "# HELP ") == N_FAMILIES + cycle + extra_families,
		 "extra HELP lines");
	CHECK_RC(count_prefix(t, "# TYPE ") == N_FAMILIES + cycle + extra_families,
		 "extra TYPE lines");
	while (*p) {
		const char *nl = strchr(p, '\n');

		CHECK_RC(nl, "output does not end with a newline");
		if (strncmp(p, "# HELP ", 7) == 0) {
			sample_name(p + 7, family, sizeof(family));
			type[0] = 0;
		} else if (strncmp(p, "# TYPE ", 7) == 0) {
			sample_name(p + 7, name, sizeof(name));
			CHECK_RC(strcmp(name, family) == 0, "TYPE %s follows HELP %s", name,
				 family);
			sscanf(p + 7 + strlen(name), " %15s", type);
		} else {
			sample_name(p, name, sizeof(name));
			CHECK_RC(type[0] && belongs_to(name, family, type),
				 "sample %s outside its family (current %s %s)", name, family,
				 type);
			samples++;
		}
		p = nl + 1;
	}
	return samples;
}

static void test_help_type_once_and_grouped(void)
{
	const char *t;
	int samples;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	samples = check_family_grouping(t);
	/* 2 backends x (20 + 6 polls + source) + 2 services x (6 + 5 verdicts + 12 + 1 + sum
	 * + count) */
	CHECK(samples == 2 * 27 + 2 * 27, "%d samples", samples);
}

/* --peer: the peer families render after the others, one sample per peer
 * row (and the node's counters), grouped, with their exact values. */
static void test_peer_families(void)
{
	struct steer_metrics_peer peers[2] = {
		{ .peer = "127.0.0.1:9471",
		  .up = true,
		  .age_s = 0.25,
		  .received_total = 7,
		  .lost_total = 1,
		  .sent_total = 9,
		  .send_errors_total = 2,
		  .forgotten_total = 3,
		  /* one round trip of 0.3 ms */
		  .rtt_buckets = { 0, 0, 1, 1, 1, 1, 1, 1, 1, 1 },
		  .rtt_count = 1,
		  .rtt_sum_s = 0.0003 },
		{ .peer = "[2001:db8::1]:9470", .age_s = -1 },
	};
	struct steer_metrics_snapshot s;
	const char *t;

	build_fixture();
	s = fx;
	s.peers_on = true;
	s.peers = peers;
	s.n_peers = 2;
	s.peer_rejected_total = 4;
	s.peer_unknown_backends_total = 5;
	s.peer_applied_total = 6;
	s.peer_own_reports_total = 8;
	s.peer_apply_errors_total = 0;
	s.peer_push_wakeups_total = 11;
	s.peer_keyed = true;
	s.peer_key_refused_total[0] = 12;
	s.peer_key_refused_total[1] = 13;
	s.peer_key_refused_total[2] = 14;
	t = render(&s);
	CHECK(t, "render returned NULL");
	/* 2 gauges, 5 counters and a histogram per peer (13 samples), 6 counters of the
	 * node, and --peer-key's gauge and counter (one sample per reason) */
	extra_families = 16;
	CHECK(check_family_grouping(t) == 2 * 27 + 2 * 27 + 7 * 2 + 13 * 2 + 6 + 1 + 3,
	      "samples out of their families");
	extra_families = 0;
	CHECK(strstr(t, "\nsmg_steer_peer_up{peer=\"127.0.0.1:9471\"} 1\n") &&
		      strstr(t, "\nsmg_steer_peer_up{peer=\"[2001:db8::1]:9470\"} 0\n") &&
		      strstr(t, "\nsmg_steer_peer_report_age_seconds{peer=\"127.0.0.1:9471\"} "
				"0.25\n") &&
		      strstr(t, "\nsmg_steer_peer_report_age_seconds{peer=\"[2001:db8::1]:9470\"} "
				"-1\n") &&
		      strstr(t, "\nsmg_steer_peer_reports_received_total{peer=\"127.0.0.1:9471\"} "
				"7\n") &&
		      strstr(t,
			     "\nsmg_steer_peer_reports_lost_total{peer=\"127.0.0.1:9471\"} 1\n") &&
		      strstr(t,
			     "\nsmg_steer_peer_reports_sent_total{peer=\"127.0.0.1:9471\"} 9\n") &&
		      strstr(t,
			     "\nsmg_steer_peer_send_errors_total{peer=\"127.0.0.1:9471\"} 2\n") &&
		      strstr(t, "\nsmg_steer_peer_forgotten_total{peer=\"127.0.0.1:9471\"} 3\n") &&
		      strstr(t, "\nsmg_steer_peer_reports_rejected_total 4\n") &&
		      strstr(t, "\nsmg_steer_peer_unknown_backends_total 5\n") &&
		      strstr(t, "\nsmg_steer_peer_applied_total 6\n") &&
		      strstr(t, "\nsmg_steer_peer_own_reports_total 8\n") &&
		      strstr(t, "\nsmg_steer_peer_apply_errors_total 0\n") &&
		      strstr(t, "\nsmg_steer_peer_push_wakeups_total 11\n") &&
		      strstr(t, "\nsmg_steer_peer_key_enabled 1\n") &&
		      strstr(t, "# TYPE smg_steer_peer_key_refused_total counter\n") &&
		      strstr(t, "\nsmg_steer_peer_key_refused_total{reason=\"auth\"} 12\n") &&
		      strstr(t, "\nsmg_steer_peer_key_refused_total{reason=\"stale\"} 13\n") &&
		      strstr(t, "\nsmg_steer_peer_key_refused_total{reason=\"replay\"} 14\n") &&
		      strstr(t, "# TYPE smg_steer_peer_rtt_seconds histogram\n") &&
		      strstr(t, "\nsmg_steer_peer_rtt_seconds_bucket{peer=\"127.0.0.1:9471\",le="
				"\"0.00025\"} "
				"0\n") &&
		      strstr(t, "\nsmg_steer_peer_rtt_seconds_bucket{peer=\"127.0.0.1:9471\",le="
				"\"0.0005\"} "
				"1\n") &&
		      strstr(t, "\nsmg_steer_peer_rtt_seconds_bucket{peer=\"127.0.0.1:9471\",le=\"+"
				"Inf\"} "
				"1\n") &&
		      strstr(t, "\nsmg_steer_peer_rtt_seconds_sum{peer=\"127.0.0.1:9471\"} "
				"0.0003\n") &&
		      strstr(t, "\nsmg_steer_peer_rtt_seconds_count{peer=\"[2001:db8::1]:9470\"} "
				"0\n") &&
		      strstr(t, "# TYPE smg_steer_peer_up gauge\n") &&
		      strstr(t, "# TYPE smg_steer_peer_forgotten_total counter\n"),
	      "peer lines:\n%s", strstr(t, "smg_steer_peer_") ? strstr(t, "smg_steer_peer_") : t);
	/* Off: none of them. */
	t = render(&fx);
	CHECK(t && !strstr(t, "smg_steer_peer_"), "peer families without --peer");
}

/* --step-probe: four families per backend and two of the node, only when on. */
static void test_probe_families(void)
{
	struct steer_metrics_snapshot s;
	const char *t;

	build_fixture();
	s = fx;
	s.probes_on = true;
	s.probe_applied_total = 41;
	s.probe_apply_errors_total = 1;
	s.backends[0].probe_streaming = true;
	s.backends[0].probe_requests_total = 3;
	s.backends[0].probe_failures_total = 2;
	s.backends[0].probe_steps_total = 40;
	t = render(&s);
	CHECK(t, "render returned NULL");
	extra_families = 6;
	CHECK(check_family_grouping(t) == 2 * 27 + 2 * 27 + 4 * 2 + 2,
	      "samples out of their families");
	extra_families = 0;
	CHECK(strstr(t, "# TYPE smg_steer_probe_streaming gauge\n") &&
		      strstr(t, "# TYPE smg_steer_probe_steps_total counter\n") &&
		      strstr(t, "\nsmg_steer_probe_streaming{vip=\"127.0.0.100:8000\",backend="
				"\"127.0.0.11:9001\"} 1\n") &&
		      strstr(t, "\nsmg_steer_probe_requests_total{vip=\"127.0.0.100:8000\","
				"backend=\"127.0.0.11:9001\"} 3\n") &&
		      strstr(t, "\nsmg_steer_probe_failures_total{vip=\"127.0.0.100:8000\","
				"backend=\"127.0.0.11:9001\"} 2\n") &&
		      strstr(t, "\nsmg_steer_probe_steps_total{vip=\"127.0.0.100:8000\","
				"backend=\"127.0.0.11:9001\"} 40\n") &&
		      strstr(t, "\nsmg_steer_probe_applied_total 41\n") &&
		      strstr(t, "\nsmg_steer_probe_apply_errors_total 1\n"),
	      "probe lines:\n%s",
	      strstr(t, "smg_steer_probe_") ? strstr(t, "smg_steer_probe_") : t);
	t = render(&fx);
	CHECK(t && !strstr(t, "smg_steer_probe_"), "probe families without --step-probe");
}

static void test_empty_snapshot_has_only_headers(void)
{
	struct steer_metrics_snapshot empty = { 0 };
	const char *t;

	t = render(&empty);
	CHECK(t, "render returned NULL");
	CHECK(check_family_grouping(t) == 0, "samples in an empty snapshot");
	t = render(NULL);
	CHECK(t && check_family_grouping(t) == 0, "NULL snapshot");
}

/*
 * An independent reader: the official Python client's text parser (Debian
 * python3-prometheus-client) must read every family and sample and decode the
 * escaped label back to the raw value.
 */
static void test_official_parser_reads_it(void)
{
	static const char script[] =
		"import sys, json\n"
		"from prometheus_client.parser import text_string_to_metric_families as p\n"
		"fams = list(p(open(sys.argv[1]).read()))\n"
		"samples = [s for f in fams for s in f.samples]\n"
		"vips = sorted({s.labels['vip'] for s in samples})\n"
		"hist = [f for f in fams if f.type == 'histogram']\n"
		"print(len(fams), len(samples), len(hist), json.dumps(vips))\n";
	char path[] = "/tmp/smg-steer-metrics-XXXXXX", cmd[512], out[512] = "";
	const char *t;
	FILE *f, *pp;
	int fd, st, fams = -1, samples = -1, hist = -1;

	build_fixture();
	t = render(&fx);
	CHECK(t, "render returned NULL");
	fd = mkstemp(path);
	CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
	f = fdopen(fd, "w");
	fputs(t, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c \"$SCRIPT\" %s 2>&1", path);
	setenv("SCRIPT", script, 1);
	pp = popen(cmd, "r");
	if (pp) {
		if (!fgets(out, sizeof(out), pp))
			out[0] = 0;
		st = pclose(pp);
	} else {
		st = -1;
	}
	unsetenv("SCRIPT");
	unlink(path);
	CHECK(st == 0,
	      "python parser failed (status %d; is python3-prometheus-client installed?): %s", st,
	      out);
	CHECK(sscanf(out, "%d %d %d", &fams, &samples, &hist) == 3, "output: %s", out);
	CHECK(fams == N_FAMILIES && hist == 1, "families %d histograms %d", fams, hist);
	CHECK(samples == 2 * 27 + 2 * 27, "samples %d", samples);
	CHECK(strstr(out, "[\"127.0.0.100:8000\", \"we\\\\ird\\\"vip\\nx\"]"),
	      "labels not decoded to the raw values: %s", out);
}

/* ---- The server, scraped with curl ----------------------------------------------- */

struct http_reply {
	int status; /* 0: no HTTP answer (refused) */
	char type[128];
	char *body;
};

static struct http_reply last; /* body freed by the next request and at exit */

/* method "GET" or "POST"; the address part of url may be "[::1]". */
static int http(const char *method, const char *url)
{
	char path[] = "/tmp/smg-steer-metrics-XXXXXX", cmd[1024], out[256] = "";
	FILE *p, *f;
	long size;
	int fd, st;

	free(last.body);
	memset(&last, 0, sizeof(last));
	fd = mkstemp(path);
	CHECK_RC(fd >= 0, "mkstemp: %s", strerror(errno));
	close(fd);
	/* -g: brackets are an IPv6 literal; --noproxy: never leave the netns. */
	snprintf(
		cmd, sizeof(cmd),
		"curl -sS -g --noproxy '*' -m 10 %s -o %s -w '%%{http_code} %%{content_type}' '%s' "
		"2>/dev/null",
		strcmp(method, "POST") == 0 ? "-d x=1" : "", path, url);
	p = popen(cmd, "r");
	if (!p) {
		unlink(path);
		CHECK_RC(0, "popen curl: %s", strerror(errno));
	}
	if (!fgets(out, sizeof(out), p))
		out[0] = 0;
	st = pclose(p);
	(void)st; /* curl exits non-zero on refusal; the status code tells */
	if (sscanf(out, "%d %127[^\n]", &last.status, last.type) < 1)
		last.status = -1;
	f = fopen(path, "r");
	if (f) {
		fseek(f, 0, SEEK_END);
		size = ftell(f);
		fseek(f, 0, SEEK_SET);
		last.body = calloc(1, (size_t)(size > 0 ? size : 0) + 1);
		if (last.body && size > 0 && fread(last.body, 1, (size_t)size, f) != (size_t)size)
			last.body[0] = 0;
		fclose(f);
	}
	unlink(path);
	CHECK_RC(last.body, "no body");
	return 0;
}

static int update_fixture(struct steer_metrics *m, uint64_t publishes, uint64_t last_ns,
			  uint64_t within_ns)
{
	build_fixture();
	fx_services[0].table_publishes_total = publishes;
	fx.last_publish_ns = last_ns;
	fx.healthy_within_ns = within_ns;
	return steer_metrics_update(m, &fx);
}

static struct steer_metrics *start_ok(const char *listen)
{
	struct steer_metrics *m = NULL;
	char err[256] = "";
	int rc = steer_metrics_start(listen, &m, err, sizeof(err));

	if (rc != 0 || !m)
		printf("# start %s: rc=%d %s\n", listen, rc, err);
	return rc == 0 ? m : NULL;
}

static int check_scrape_and_updates(struct steer_metrics *m)
{
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0, "scrape");
	CHECK_RC(last.status == 200, "status %d", last.status);
	CHECK_RC(strcmp(last.type, "text/plain; version=0.0.4; charset=utf-8") == 0,
		 "content type '%s'", last.type);
	CHECK_RC(check_family_grouping(last.body) == 0, "samples before the first update");

	CHECK_RC(update_fixture(m, 7, steer_monotonic_ns(), 60 * SEC) == 0, "update");
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0, "scrape");
	CHECK_RC(last.status == 200, "status %d", last.status);
	CHECK_RC(has_line(last.body, "smg_steer_table_publishes_total{vip=\"" VIP_A "\"} 7"),
		 "update not visible:\n%s", last.body);
	/* Every fixture family plus the two cycle gauges of a published snapshot. */
	CHECK_RC(check_family_grouping(last.body) == 2 * 27 + 2 * 27 + 2, "served text differs");
	CHECK_RC(strstr(last.body, "\nsmg_steer_cycle_seconds 0\n") != NULL, "cycle gauge");

	CHECK_RC(update_fixture(m, 8, steer_monotonic_ns(), 60 * SEC) == 0, "update");
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0, "scrape");
	CHECK_RC(has_line(last.body, "smg_steer_table_publishes_total{vip=\"" VIP_A "\"} 8"),
		 "second update not visible");
	CHECK_RC(!has_line(last.body, "smg_steer_table_publishes_total{vip=\"" VIP_A "\"} 7"),
		 "old value still served");
	return 0;
}

static void test_server_scrape_sees_updates(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_scrape_and_updates(m);
	steer_metrics_stop(m);
}

static int check_healthz(struct steer_metrics *m)
{
	uint64_t now = steer_monotonic_ns();

	CHECK_RC(http("GET", "http://127.0.0.1:9464/healthz") == 0, "healthz");
	CHECK_RC(last.status == 503, "before any update: %d", last.status);
	CHECK_RC(strstr(last.body, "no table published"), "reason: %s", last.body);

	CHECK_RC(update_fixture(m, 1, now, 60 * SEC) == 0, "update");
	CHECK_RC(http("GET", "http://127.0.0.1:9464/healthz") == 0, "healthz");
	CHECK_RC(last.status == 200 && strcmp(last.body, "ok\n") == 0, "fresh: %d '%s'",
		 last.status, last.body);

	CHECK_RC(update_fixture(m, 1, now - 10 * SEC, 1 * SEC) == 0, "update");
	CHECK_RC(http("GET", "http://127.0.0.1:9464/healthz") == 0, "healthz");
	CHECK_RC(last.status == 503, "stale: %d", last.status);
	CHECK_RC(strstr(last.body, "ago") &&
			 strchr(last.body, '\n') == last.body + strlen(last.body) - 1,
		 "stale reason is not one line: '%s'", last.body);

	CHECK_RC(update_fixture(m, 1, 0, 60 * SEC) == 0, "update");
	CHECK_RC(http("GET", "http://127.0.0.1:9464/healthz") == 0, "healthz");
	CHECK_RC(last.status == 503, "never published: %d", last.status);
	return 0;
}

static void test_server_healthz(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_healthz(m);
	steer_metrics_stop(m);
}

static int check_other_paths_and_methods(void)
{
	CHECK_RC(http("GET", "http://127.0.0.1:9464/nope") == 0, "get");
	CHECK_RC(last.status == 404, "unknown path: %d", last.status);
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics/x") == 0, "get");
	CHECK_RC(last.status == 404, "path below /metrics: %d", last.status);
	CHECK_RC(http("POST", "http://127.0.0.1:9464/metrics") == 0, "post");
	CHECK_RC(last.status == 405, "POST: %d", last.status);
	CHECK_RC(http("POST", "http://127.0.0.1:9464/healthz") == 0, "post");
	CHECK_RC(last.status == 405, "POST: %d", last.status);
	/* The server survives all of it. */
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0, "get");
	CHECK_RC(last.status == 200, "after errors: %d", last.status);
	return 0;
}

static void test_server_404_and_405(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_other_paths_and_methods();
	steer_metrics_stop(m);
}

static int check_port_in_use(void)
{
	struct steer_metrics *second = NULL;
	char err[256] = "";
	int rc;

	rc = steer_metrics_start("127.0.0.1:9464", &second, err, sizeof(err));
	if (second)
		steer_metrics_stop(second);
	CHECK_RC(rc == -EADDRINUSE, "rc %d (%s)", rc, err);
	CHECK_RC(!second, "a result despite the failure");
	CHECK_RC(strcmp(err, "metrics: cannot listen on 127.0.0.1:9464: Address already in use") ==
			 0,
		 "err '%s'", err);
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0 && last.status == 200,
		 "the first server stopped serving: %d", last.status);
	return 0;
}

static void test_port_in_use_fails_clearly(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_port_in_use();
	steer_metrics_stop(m);
}

static void test_bad_listen_address(void)
{
	static const char *const bad[] = { "localhost:9464", "127.0.0.1", "[::1]:0", "", "[::1" };
	struct steer_metrics *m;
	char err[256];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m = NULL;
		err[0] = 0;
		rc = steer_metrics_start(bad[i], &m, err, sizeof(err));
		if (m)
			steer_metrics_stop(m);
		CHECK(rc == -EINVAL && !m, "'%s': rc %d", bad[i], rc);
		CHECK(strncmp(err, "metrics: ", 9) == 0 && !strchr(err, '\n'), "'%s': err '%s'",
		      bad[i], err);
	}
}

static int check_bound_exactly(const char *served, const char *not_served)
{
	CHECK_RC(http("GET", served) == 0, "get");
	CHECK_RC(last.status == 200, "%s: %d", served, last.status);
	CHECK_RC(http("GET", not_served) == 0, "get");
	CHECK_RC(last.status == 0, "%s answered %d: not bound to the exact address", not_served,
		 last.status);
	return 0;
}

static void test_binds_only_the_given_ipv4_address(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_bound_exactly("http://127.0.0.1:9464/metrics", "http://127.0.0.2:9464/metrics");
	steer_metrics_stop(m);
}

static void test_ipv6_listen(void)
{
	struct steer_metrics *m = start_ok("[::1]:9465");

	CHECK(m, "start failed");
	check_bound_exactly("http://[::1]:9465/metrics", "http://127.0.0.1:9465/metrics");
	steer_metrics_stop(m);
}

/* ---- Concurrency and ownership --------------------------------------------------- */

struct updater {
	struct steer_metrics *m;
	volatile int stop;
	int failures;
};

/* Every update carries one value k in all counters; a scrape must see one k. */
static void *update_loop(void *arg)
{
	struct updater *u = arg;
	struct steer_metrics_service s[2];
	struct steer_metrics_backend b[2];
	struct steer_metrics_snapshot snap = {
		.services = s, .n_services = 2, .backends = b, .n_backends = 2
	};
	uint64_t k;

	memset(s, 0, sizeof(s));
	memset(b, 0, sizeof(b));
	snprintf(s[0].vip, sizeof(s[0].vip), "127.0.0.100:8000");
	snprintf(s[1].vip, sizeof(s[1].vip), "127.0.0.101:8000");
	snprintf(b[0].vip, sizeof(b[0].vip), "127.0.0.100:8000");
	snprintf(b[0].backend, sizeof(b[0].backend), "127.0.0.11:9001");
	snprintf(b[1].vip, sizeof(b[1].vip), "127.0.0.101:8000");
	snprintf(b[1].backend, sizeof(b[1].backend), "127.0.0.12:9001");
	for (k = 1; !u->stop; k++) {
		s[0].table_publishes_total = s[1].table_publishes_total = k;
		b[0].steered_total = b[1].steered_total = k;
		if (steer_metrics_update(u->m, &snap) != 0)
			u->failures++;
	}
	return NULL;
}

/* All sample values of the four series must be equal. */
static int check_one_generation(const char *t)
{
	static const char *const prefixes[] = {
		"smg_steer_table_publishes_total{vip=\"127.0.0.100:8000\"} ",
		"smg_steer_table_publishes_total{vip=\"127.0.0.101:8000\"} ",
		"smg_steer_connections_steered_total{vip=\"127.0.0.100:8000\",backend=\"127.0.0.11:"
		"9001\"} ",
		"smg_steer_connections_steered_total{vip=\"127.0.0.101:8000\",backend=\"127.0.0.12:"
		"9001\"} ",
	};
	double first = value_after(t, prefixes[0]);
	size_t i;

	CHECK_RC(first >= 1, "no value: %s", t);
	for (i = 1; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		CHECK_RC(value_after(t, prefixes[i]) == first, "torn scrape: %s is %g, first %g",
			 prefixes[i], value_after(t, prefixes[i]), first);
	return 0;
}

static int check_scrapes_during_updates(struct steer_metrics *m)
{
	struct updater u = { .m = m };
	pthread_t thr;
	int i, rc = 0;

	CHECK_RC(pthread_create(&thr, NULL, update_loop, &u) == 0, "pthread_create");
	for (i = 0; i < 20 && rc == 0; i++) {
		rc = http("GET", "http://127.0.0.1:9464/metrics");
		if (rc == 0 && last.status != 200)
			rc = -1;
		if (rc == 0)
			rc = check_one_generation(last.body);
	}
	u.stop = 1;
	pthread_join(thr, NULL);
	CHECK_RC(rc == 0, "scrape %d failed (status %d)", i, last.status);
	CHECK_RC(u.failures == 0, "%d updates failed", u.failures);
	return 0;
}

static void test_scrapes_never_see_half_an_update(void)
{
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	check_scrapes_during_updates(m);
	steer_metrics_stop(m);
}

static int check_deep_copy(struct steer_metrics *m)
{
	struct steer_metrics_snapshot snap = { 0 };

	build_fixture();
	snap.n_services = 1;
	snap.services = calloc(1, sizeof(*snap.services));
	snap.n_backends = 1;
	snap.backends = calloc(1, sizeof(*snap.backends));
	CHECK_RC(snap.services && snap.backends, "calloc");
	*snap.services = fx_services[0];
	*snap.backends = fx_backends[0];
	CHECK_RC(steer_metrics_update(m, &snap) == 0, "update");
	/* The caller's memory is gone; ASan flags any read of it. */
	snap.services->table_publishes_total = 999;
	free(snap.services);
	free(snap.backends);
	CHECK_RC(http("GET", "http://127.0.0.1:9464/metrics") == 0 && last.status == 200, "get");
	CHECK_RC(has_line(last.body, "smg_steer_table_publishes_total{vip=\"" VIP_A "\"} 42"),
		 "not the value at update time:\n%s", last.body);
	return 0;
}

static void test_update_copies_and_validates(void)
{
	struct steer_metrics_snapshot bad = { .n_backends = 1, .backends = NULL };
	struct steer_metrics *m = start_ok("127.0.0.1:9464");

	CHECK(m, "start failed");
	if (steer_metrics_update(m, NULL) != -EINVAL || steer_metrics_update(m, &bad) != -EINVAL) {
		steer_metrics_stop(m);
		CHECK(0, "NULL or inconsistent snapshots were accepted");
	}
	check_deep_copy(m);
	steer_metrics_stop(m);
	steer_metrics_stop(NULL); /* a no-op, like free(NULL) */
}

int main(void)
{
	if (testenv_init("metrics") != 0) {
		printf("not ok 1 - testenv_init\n1..1\n");
		return 1;
	}
	TAP_RUN(test_poll_kind_names);
	TAP_RUN(test_bucket_bounds_ascend);
	TAP_RUN(test_backend_lines_exact);
	TAP_RUN(test_label_escaping);
	TAP_RUN(test_numbers_round_trip);
	TAP_RUN(test_every_poll_result_present);
	TAP_RUN(test_affinity_verdicts);
	TAP_RUN(test_histogram);
	TAP_RUN(test_help_type_once_and_grouped);
	TAP_RUN(test_peer_families);
	TAP_RUN(test_probe_families);
	TAP_RUN(test_empty_snapshot_has_only_headers);
	TAP_RUN(test_official_parser_reads_it);
	TAP_RUN(test_server_scrape_sees_updates);
	TAP_RUN(test_server_healthz);
	TAP_RUN(test_server_404_and_405);
	TAP_RUN(test_port_in_use_fails_clearly);
	TAP_RUN(test_bad_listen_address);
	TAP_RUN(test_binds_only_the_given_ipv4_address);
	TAP_RUN(test_ipv6_listen);
	TAP_RUN(test_scrapes_never_see_half_an_update);
	TAP_RUN(test_update_copies_and_validates);
	free(rendered);
	free(last.body);
	return tap_done();
}
