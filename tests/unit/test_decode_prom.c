// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_decode_prom.c - the Prometheus /metrics decoder (user/loads/decode_prom.c)
 * on real expositions: the files of tests/data/metrics were written by
 * python3-prometheus-client (the library vLLM and SGLang serve /metrics
 * with) under the engines' metric and label names, two DP ranks each; plus
 * CRLF, escapes, timestamps and every malformed line the parser must refuse.
 * Expected values are the numbers in those files, added up by hand.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loads/loads.h"
#include "tap.h"

static char top[4096];

static bool near(double got, double want)
{
	return fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want));
}

/* A file of tests/data/metrics, NUL-terminated; NULL on failure. */
static char *sample(const char *name, size_t *len)
{
	char path[4200];
	char *buf;
	long n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/tests/data/metrics/%s", top, name);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = malloc((size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	if (buf) {
		buf[n] = 0;
		*len = (size_t)n;
	}
	return buf;
}

static enum steer_poll_kind prom(const char *text, enum steer_engine e, struct steer_load *l,
				 enum steer_source *src, char *why, size_t whylen)
{
	memset(l, 0, sizeof(*l));
	return steer_decode_prometheus(text, strlen(text), e, l, src, why, whylen);
}

/* text with every "\n" turned into "\r\n" */
static char *crlf(const char *text)
{
	char *out = malloc(2 * strlen(text) + 1), *o = out;

	if (!out)
		return NULL;
	for (; *text; text++) {
		if (*text == '\n')
			*o++ = '\r';
		*o++ = *text;
	}
	*o = 0;
	return out;
}

struct expect {
	const char *file;
	enum steer_engine engine;
	enum steer_source source;
	double running, waiting, kv, tput;
	uint32_t ranks;
};

static const struct expect samples[] = {
	/* engine 0: 3 running, 2 waiting, kv 0.25; engine 1: 5, 7, 0.75 */
	{ "vllm_v1_dp2.txt", STEER_ENGINE_VLLM, STEER_SOURCE_HTTP_METRICS_VLLM, 8, 9, 0.5, 0, 2 },
	{ "vllm_v0.txt", STEER_ENGINE_VLLM, STEER_SOURCE_HTTP_METRICS_VLLM, 4, 6, 0.5, 0, 1 },
	/* rank 0: 8 running, 3 queued, usage 0.4, 1800.5 tok/s; rank 1: 2, 1, 0.2, 1199.5 */
	{ "sglang_053_dp2.txt", STEER_ENGINE_SGLANG, STEER_SOURCE_HTTP_METRICS_SGLANG, 10, 4, 0.3,
	  3000, 2 },
	/* rank 0: 7, 4, 0.6, 900; rank 1: 1, 0, 0.0, 100 */
	{ "sglang_054_dp2.txt", STEER_ENGINE_SGLANG, STEER_SOURCE_HTTP_METRICS_SGLANG, 8, 4, 0.3,
	  1000, 2 },
};

static int check_sample(const struct expect *x, const char *text, enum steer_engine e)
{
	enum steer_source src = STEER_SOURCE_TCP;
	struct steer_load l;
	char why[200] = "x";

	CHECK_RC(prom(text, e, &l, &src, why, sizeof(why)) == STEER_POLL_OK, "%s (%s): %s", x->file,
		 steer_engine_name(e), why);
	CHECK_RC(why[0] == 0, "detail on OK: %s", why);
	CHECK_RC(src == x->source, "%s: source %s", x->file, steer_source_name(src));
	CHECK_RC(l.running_reqs == x->running && l.waiting_reqs == x->waiting &&
			 near(l.kv_usage, x->kv) && near(l.throughput, x->tput) &&
			 l.queued_uncached_tokens == 0 && l.ranks == x->ranks,
		 "%s: running %g waiting %g kv %g tp %g uncached %g ranks %u", x->file,
		 l.running_reqs, l.waiting_reqs, l.kv_usage, l.throughput, l.queued_uncached_tokens,
		 l.ranks);
	return 0;
}

static void test_real_expositions(void)
{
	size_t i, len;

	for (i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
		const struct expect *x = &samples[i];
		char *text = sample(x->file, &len), *text_crlf;
		enum steer_engine other =
			x->engine == STEER_ENGINE_VLLM ? STEER_ENGINE_SGLANG : STEER_ENGINE_VLLM;
		struct steer_load l;
		char why[200];
		int rc;

		CHECK(text != NULL, "read %s", x->file);
		text_crlf = crlf(text);
		rc = check_sample(x, text, STEER_ENGINE_AUTO);
		if (rc == 0)
			rc = check_sample(x, text, x->engine);
		if (rc == 0)
			rc = check_sample(x, text_crlf, STEER_ENGINE_AUTO);
		/* The other engine's names are absent: refused, not zero. */
		if (rc == 0 && prom(text, other, &l, NULL, why, sizeof(why)) != STEER_POLL_INVALID)
			rc = -1;
		if (rc == 0 && prom(text, STEER_ENGINE_TOKENSPEED, &l, NULL, why, sizeof(why)) !=
				       STEER_POLL_INVALID)
			rc = -1;
		free(text);
		free(text_crlf);
		CHECK(rc == 0, "%s", x->file);
	}
}

/* Every cut inside a line is refused (the final newline is missing). */
static void test_cut_short(void)
{
	size_t len, cut;
	char *text = sample("vllm_v1_dp2.txt", &len);
	struct steer_load l;
	char why[200];

	CHECK(text != NULL, "read");
	for (cut = 1; cut < len; cut++) {
		if (text[cut - 1] == '\n')
			continue;
		if (steer_decode_prometheus(text, cut, STEER_ENGINE_AUTO, &l, NULL, why,
					    sizeof(why)) != STEER_POLL_INVALID) {
			free(text);
			CHECK(0, "cut at %zu accepted", cut);
		}
	}
	free(text);
}

static void test_both_vllm_names_prefers_v0(void)
{
	static const char text[] = "vllm:kv_cache_usage_perc{engine=\"0\"} 0.9\n"
				   "vllm:gpu_cache_usage_perc{engine=\"0\"} 0.2\n"
				   "vllm:num_requests_waiting 1\n";
	struct steer_load l;
	char why[200];

	CHECK(prom(text, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(l.kv_usage == 0.2 && l.waiting_reqs == 1, "kv %g (upstream reads v0 first)",
	      l.kv_usage);
}

static void test_both_sglang_prefixes_prefers_colon(void)
{
	static const char text[] = "sglang_token_usage 0.9\nsglang:token_usage 0.1\n"
				   "sglang_num_queue_reqs 50\nsglang:num_queue_reqs 5\n";
	struct steer_load l;
	char why[200];

	CHECK(prom(text, STEER_ENGINE_SGLANG, &l, NULL, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(l.kv_usage == 0.1 && l.waiting_reqs == 5, "kv %g waiting %g", l.kv_usage,
	      l.waiting_reqs);
}

static void test_syntax_accepted(void)
{
	/* Escapes, braces and commas in label values, blanks between tokens,
	 * timestamps, a trailing comma, exponents, specials in unused series. */
	static const char text[] =
		"# A plain comment\n"
		"#\n"
		"\n"
		"   \t\n"
		"# HELP vllm:num_requests_running Running, \\\\ and \\n escaped.\n"
		"# TYPE vllm:num_requests_running gauge\n"
		"# UNIT vllm:x seconds\n"
		"#HELP vllm:kv_cache_usage_perc\n"
		"vllm:num_requests_running{model_name=\"a \\\"quoted\\\" \\\\ "
		"path\\nx\",engine=\"0\"} "
		"2.5e0 1719849600000\n"
		"vllm:num_requests_running{ model_name = \"} b{c,d=\\\"e\\\"\" , engine=\"1\", } "
		"+3E+0\n"
		"  vllm:num_requests_waiting\t{}\t4.0\t-1\t\n"
		"vllm:num_requests_waiting {engine=\"\"}  .5e1\n"
		"vllm:kv_cache_usage_perc{engine=\"0\"} 0.125\n"
		"vllm:kv_cache_usage_perc{engine=\"1\"} 1e-1\n"
		"vllm:kv_cache_usage_perc{engine=\"2\"} 1\n"
		"vllm:kv_cache_usage_perc{engine=\"3\"} 0.\n"
		"vllm:time_to_first_token_seconds_bucket{le=\"+Inf\"} +Inf\n"
		"vllm:something_nan NaN\n"
		"vllm:something_neg -Inf\n"
		"vllm:something_inf inf\n"
		"vllm:something_infinity -Infinity\n"
		"vllm:something_tiny 1e-400\n"
		"vllm:utf8{model=\"\xc3\xa9t\xc3\xa9\"} 1\n"
		"sglang:token_usage{rank=\"0\"} NaN\n" /* the other engine's: not used */
		"__name_:x_1 0\n"
		/* Lines of metrics that are not read are skipped after their name:
		 * only the lines the load comes from are parsed strictly. */
		"go_gc_duration_seconds{quantile=unquoted} 1 2 3 4\n"
		"process_open_fds not-a-number\n";
	struct steer_load l;
	enum steer_source src;
	char why[200];

	CHECK(prom(text, STEER_ENGINE_AUTO, &l, &src, why, sizeof(why)) == STEER_POLL_OK, "%s",
	      why);
	CHECK(src == STEER_SOURCE_HTTP_METRICS_VLLM, "source %s", steer_source_name(src));
	/* 2.5 + 3 = 5.5 running, truncated to 5; 4 + 5 waiting; kv mean of 4. */
	CHECK(l.running_reqs == 5 && l.waiting_reqs == 9, "running %g waiting %g", l.running_reqs,
	      l.waiting_reqs);
	CHECK(near(l.kv_usage, (0.125 + 0.1 + 1 + 0) / 4) && l.ranks == 4, "kv %g ranks %u",
	      l.kv_usage, l.ranks);
}

struct bad {
	const char *text, *why;
};

static const struct bad refused[] = {
	/* values used that are out of range */
	{ "vllm:kv_cache_usage_perc NaN\n", "line 1: vllm:kv_cache_usage_perc is nan, not finite" },
	{ "vllm:kv_cache_usage_perc{e=\"0\"} 0.5\nvllm:kv_cache_usage_perc{e=\"1\"} 1.5\n",
	  "line 2: vllm:kv_cache_usage_perc is 1.5, above 1" },
	{ "vllm:kv_cache_usage_perc -0.1\n", "negative" },
	{ "vllm:kv_cache_usage_perc 0.5\nvllm:num_requests_waiting +Inf\n",
	  "vllm:num_requests_waiting is inf, not finite" },
	{ "vllm:kv_cache_usage_perc 0.5\nvllm:num_requests_running -1\n", "negative" },
	{ "vllm:kv_cache_usage_perc 0.5\nvllm:num_requests_running 3e9\n", "more than int32" },
	{ "sglang_token_usage 0.5\nsglang_gen_throughput NaN\n", "sglang_gen_throughput" },
	{ "sglang_token_usage 0.5\nsglang_gen_throughput 2e9\n", "gen_throughput" },
	{ "sglang:token_usage 0.5\nsglang:gen_throughput 1e308\nsglang:gen_throughput 1e308\n",
	  "not finite" },
	/* no KV gauge */
	{ "process_cpu_seconds_total 1.5\n", "no KV-usage gauge" },
	{ "vllm:num_requests_waiting 3\n", "no KV-usage gauge" },
	{ "# HELP vllm:kv_cache_usage_perc x\n# TYPE vllm:kv_cache_usage_perc gauge\n",
	  "no KV-usage gauge" },
	/* malformed lines */
	{ "vllm:kv_cache_usage_perc 0.5", "does not end with a newline" },
	{ "vllm:kv_cache_usage_perc\n", "line 1: sample without a value" },
	{ "vllm:kv_cache_usage_perc 0.5\nvllm:num_requests_running{bar=baz} 1\n",
	  "line 2: label value must be quoted" },
	{ "vllm:num_requests_running{bar=\"baz} 1\n", "unterminated label value" },
	{ "vllm:num_requests_running{bar=\"b\\taz\"} 1\n", "invalid escape in a label value" },
	{ "vllm:num_requests_running{bar=\"baz\" x=\"y\"} 1\n", "expected ',' or '}'" },
	{ "vllm:num_requests_running{bar=\"1\",bar=\"2\"} 1\n", "label name repeated" },
	{ "vllm:num_requests_running{1bar=\"1\"} 1\n", "invalid label name" },
	{ "vllm:num_requests_running{bar:x=\"1\"} 1\n", "expected '='" },
	{ "vllm:num_requests_running{,} 1\n", "invalid label name" },
	{ "vllm:num_requests_running-bar 1\n", "invalid character in a metric name" },
	{ "1foo 1\n", "expected a metric name" },
	{ "{a=\"b\"} 1\n", "expected a metric name" },
	{ "vllm:num_requests_running 1.0abc\n", "not a number" },
	{ "vllm:num_requests_running 0x1p3\n", "not a number" },
	{ "vllm:num_requests_running 1e999\n", "not a number" },
	{ "vllm:num_requests_running 1e\n", "not a number" },
	{ "vllm:num_requests_running .\n", "not a number" },
	{ "vllm:num_requests_running +nan\n", "not a number" },
	{ "vllm:num_requests_running 1,5\n", "not a number" },
	{ "vllm:num_requests_running 1 12.5\n", "timestamp" },
	{ "vllm:num_requests_running 1 99999999999999999999\n", "timestamp" },
	{ "vllm:num_requests_running 1 2 3\n", "after the timestamp" },
	{ "# HELP\n", "HELP without a valid metric name" },
	{ "# HELP 9x text\n", "HELP without a valid metric name" },
	{ "# HELP vllm:num_requests_running bad \\t escape\n", "invalid escape in HELP" },
	{ "# TYPE vllm:num_requests_running\n", "TYPE must be" },
	{ "# TYPE vllm:num_requests_running gauge extra\n", "TYPE must be" },
	{ "# TYPE vllm:num_requests_running Gauge\n", "TYPE must be" },
	{ "# TYPE vllm:num_requests_running-bar gauge\n", "invalid character in the metric name" },
	{ "vllm:num_requests_running 1\r\r\n", "control character" },
	{ "vllm:num_requests_running\v 1\n", "control character" },
	{ "<html><body>Not Found</body></html>\n", "expected a metric name" },
	{ "{\"loads\": []}\n", "expected a metric name" },
};

static void test_refused(void)
{
	size_t i;

	for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		struct steer_load l;
		char why[200] = "";

		CHECK(prom(refused[i].text, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) ==
			      STEER_POLL_INVALID,
		      "case %zu accepted: %s", i, refused[i].text);
		CHECK(strstr(why, refused[i].why) != NULL, "case %zu: detail '%s' lacks '%s'", i,
		      why, refused[i].why);
	}
	/* NUL inside the text */
	{
		static const char nul[] = "vllm:kv_cache_usage_perc 0.5\n\0foo 1\n";
		struct steer_load l;
		char why[200];

		CHECK(steer_decode_prometheus(nul, sizeof(nul) - 1, STEER_ENGINE_AUTO, &l, NULL,
					      why, sizeof(why)) == STEER_POLL_INVALID,
		      "NUL accepted");
	}
}

/* A refused value still tells which engine the text is from. */
static void test_found_on_invalid(void)
{
	struct steer_load l;
	enum steer_source src = STEER_SOURCE_TCP;
	char why[200];

	CHECK(prom("vllm:kv_cache_usage_perc NaN\n", STEER_ENGINE_AUTO, &l, &src, why,
		   sizeof(why)) == STEER_POLL_INVALID,
	      "NaN accepted");
	CHECK(src == STEER_SOURCE_HTTP_METRICS_VLLM, "source %s", steer_source_name(src));
	CHECK(prom("foo 1\n", STEER_ENGINE_AUTO, &l, &src, why, sizeof(why)) ==
			      STEER_POLL_INVALID &&
		      src == STEER_SOURCE_NONE,
	      "source %s", steer_source_name(src));
}

static void test_bounds(void)
{
	size_t cap = 1100 * 64, n = 0, i;
	char *text = malloc(cap), why[200];
	struct steer_load l;
	char *big;

	CHECK(text != NULL, "malloc");
	n += (size_t)sprintf(text, "vllm:kv_cache_usage_perc 0.5\n");
	for (i = 0; i < 1024; i++)
		n += (size_t)sprintf(text + n, "vllm:num_requests_running{e=\"%zu\"} 1\n", i);
	CHECK(steer_decode_prometheus(text, n, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) ==
			      STEER_POLL_OK &&
		      l.running_reqs == 1024,
	      "1024 series: %s", why);
	n += (size_t)sprintf(text + n, "vllm:num_requests_running{e=\"x\"} 1\n");
	CHECK(steer_decode_prometheus(text, n, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) ==
			      STEER_POLL_INVALID &&
		      strstr(why, "more than 1024 series"),
	      "1025 series: '%s'", why);
	free(text);

	/* 65 labels in one series */
	text = malloc(65 * 16 + 96);
	CHECK(text != NULL, "malloc");
	n = (size_t)sprintf(text, "vllm:num_requests_running{");
	for (i = 0; i < 65; i++)
		n += (size_t)sprintf(text + n, "l%zu=\"v\",", i);
	sprintf(text + n, "} 1\n");
	CHECK(prom(text, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) == STEER_POLL_INVALID &&
		      strstr(why, "more than 64 labels"),
	      "65 labels: '%s'", why);
	free(text);

	/* More than 4 MiB: refused before parsing. */
	big = malloc((4u << 20) + 2);
	CHECK(big != NULL, "malloc");
	memset(big, '\n', (4u << 20) + 1);
	CHECK(steer_decode_prometheus(big, (4u << 20) + 1, STEER_ENGINE_AUTO, &l, NULL, why,
				      sizeof(why)) == STEER_POLL_INVALID &&
		      strstr(why, "more than"),
	      "4 MiB + 1: '%s'", why);
	free(big);
	CHECK(steer_decode_prometheus(NULL, 0, STEER_ENGINE_AUTO, &l, NULL, why, sizeof(why)) ==
		      STEER_POLL_INVALID,
	      "empty accepted");
}

int main(void)
{
	const char *env = getenv("STEER_TOP");

	snprintf(top, sizeof(top), "%s", env ? env : ".");
	TAP_RUN(test_real_expositions);
	TAP_RUN(test_cut_short);
	TAP_RUN(test_both_vllm_names_prefers_v0);
	TAP_RUN(test_both_sglang_prefixes_prefers_colon);
	TAP_RUN(test_syntax_accepted);
	TAP_RUN(test_refused);
	TAP_RUN(test_found_on_invalid);
	TAP_RUN(test_bounds);
	return tap_done();
}
