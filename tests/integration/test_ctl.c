// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_ctl.c - the built smg-steerctl binary against the real data plane, with
 * no daemon running: this process owns the pinned maps, publishes tables and
 * fills the daemon's per-backend records itself, makes real connects through
 * the virtual addresses, and checks that what smg-steerctl reports (and
 * predicts) is what the kernel does.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config/config.h" /* STEER_VERSION */
#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"

#define NB 8			 /* IPv4 backends b0..b7 at 127.0.0.11:9001.. */
#define VIP_A "127.0.0.100:8000" /* scored: b0 b1 b2 in the table, b3 ejected */
#define VIP_B "127.0.0.101:8000" /* expired table: b4 b5 b0 */
#define VIP_C "127.0.0.102:8000" /* empty table */
#define VIP_D "127.0.0.103:8000" /* b6 b7, drained in one test */
#define VIP_6 "[::1]:8000"	 /* IPv6: v6a v6b */
#define VIP_E "127.0.0.104:8000" /* cache affinity by cgroup: b4 b5 */
#define VIP_F "127.0.0.105:8000" /* cache affinity by netns: b6 */
#define TTL_LONG (600ULL * 1000000000ULL)
#define OUT_MAX (256 * 1024)

/* A service of NW IPv6 backends, only published; status fits COLUMNS_MAX. */
#define VIP_W "[2001:db8:1f14:3c4::100]:8000"
#define NW 8
#define COLUMNS_MAX 120

static struct steer_dp *dp;
static struct test_backend be[NB], be6[2];
static struct steer_addr addr4[NB], addr6[2], vip_a, vip_b, vip_c, vip_d, vip_6;
static char ctl_path[4096];
static char err[512];
static char out[OUT_MAX];
/* Connections the kernel steered per backend of VIP_A, counted by where they landed. */
static int landed_a[NB];

/* ---- what the daemon would have recorded ------------------------------------------ */

struct fake_load {
	int backend;
	uint8_t mode, health, estimated;
	uint64_t queued_tokens;
	double throughput; /* tokens/s */
	uint32_t kv_ppm;
};

/* Service A, scored as smg's least_load: base = queued / throughput + 0.15 s * k / (1 - k).
 * b2 51.2 ms, b0 57.5 ms, b1 102.4 ms; b3 ejected and out of the table. */
static const struct fake_load loads_a[] = {
	{ 0, STEER_MODE_SNAPSHOT, STEER_HEALTH_HEALTHY, 0, 400, 20000, 200000 },
	{ 1, STEER_MODE_SNAPSHOT, STEER_HEALTH_HEALTHY, 1, 1024, 10000, 0 },
	{ 2, STEER_MODE_ESTIMATE, STEER_HEALTH_HEALTHY, 1, 2048, 40000, 0 },
};

static uint64_t work_ns(const struct fake_load *l)
{
	return (uint64_t)((double)l->queued_tokens / l->throughput * 1e9 + 0.5);
}

static uint64_t barrier_ns(const struct fake_load *l)
{
	double k = (double)l->kv_ppm / 1e6;

	return (uint64_t)(0.15 * k / (1.0 - k) * 1e9 + 0.5);
}

static void record_load(const struct steer_addr *vip, const struct fake_load *l)
{
	struct steer_bk_info *info;
	uint32_t slot;

	if (steer_dp_slot(dp, vip, &addr4[l->backend], &slot) != 0)
		return;
	info = steer_dp_bk_info(dp, slot);
	memset(info, 0, sizeof(*info));
	info->mode = l->mode;
	info->health = l->health;
	info->queued_estimated = l->estimated;
	info->queued_tokens = l->queued_tokens;
	info->throughput_mtps = (uint64_t)(l->throughput * 1000);
	info->kv_ppm = l->kv_ppm;
	info->work_ns = work_ns(l);
	info->barrier_ns = barrier_ns(l);
	info->last_poll = STEER_POLL_OK;
	info->dp_ranks = 1;
	info->updated_ns = steer_monotonic_ns();
	info->snapshot_ns = info->updated_ns;
}

static void record_ejected(const struct steer_addr *vip, int backend)
{
	uint32_t slot;

	if (steer_dp_slot(dp, vip, &addr4[backend], &slot) != 0)
		return;
	memset(steer_dp_bk_info(dp, slot), 0, sizeof(struct steer_bk_info));
	steer_dp_bk_info(dp, slot)->health = STEER_HEALTH_EJECTED;
	steer_dp_bk_info(dp, slot)->last_poll = STEER_POLL_UNAVAILABLE;
}

static int publish_a(void)
{
	struct steer_addr configured[4] = { addr4[0], addr4[1], addr4[2], addr4[3] };
	struct steer_dp_cost cost[3];
	struct steer_dp_service s = { .vip = vip_a,
				      .configured = configured,
				      .n_configured = 4,
				      .table = cost,
				      .n_table = 3,
				      .ttl_ns = TTL_LONG };
	size_t i;

	for (i = 0; i < 3; i++) {
		cost[i].addr = addr4[loads_a[i].backend];
		cost[i].base_wait_ns = (double)(work_ns(&loads_a[i]) + barrier_ns(&loads_a[i]));
		cost[i].ns_per_token = 1e9 / loads_a[i].throughput;
	}
	if (steer_dp_publish_one(dp, &s, err, sizeof(err)) != 0)
		return -1;
	for (i = 0; i < 3; i++)
		record_load(&vip_a, &loads_a[i]);
	record_ejected(&vip_a, 3);
	return 0;
}

/* A service of IPv4 backends idx[] with base waits base[] (ns), 1000 ns/token. */
static int publish_simple(const struct steer_addr *vip, const int *idx, const double *base,
			  size_t n, uint64_t ttl)
{
	struct steer_addr configured[NB];
	struct steer_dp_cost cost[NB];
	struct steer_dp_service s = { .vip = *vip,
				      .configured = configured,
				      .n_configured = n,
				      .table = cost,
				      .n_table = n,
				      .ttl_ns = ttl,
				      .allow_empty = n == 0 };
	size_t i;

	for (i = 0; i < n; i++) {
		configured[i] = addr4[idx[i]];
		cost[i].addr = addr4[idx[i]];
		cost[i].base_wait_ns = base[i];
		cost[i].ns_per_token = 1000;
	}
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

/* ---- running smg-steerctl ---------------------------------------------------------- */

/*
 * Run smg-steerctl with the test's pin directory and the given arguments,
 * stdout (and stderr when merge_stderr) into out. Returns the exit status, or
 * -1 when it did not exit normally.
 */
static int ctl_run(bool merge_stderr, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void print_comment(const char *cmd, const char *text)
{
	const char *p = text;

	printf("# $ %s\n", cmd);
	while (*p) {
		const char *eol = strchr(p, '\n');
		int l = eol ? (int)(eol - p) : (int)strlen(p);

		printf("#   %.*s\n", l, p);
		p += l + (eol ? 1 : 0);
	}
}

static int ctl_run_cmd(const char *prefix, bool merge_stderr, const char *args)
{
	char cmd[8192];
	size_t got = 0, n;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s'%s' --pin-path '%s' %s%s", prefix, ctl_path,
		 testenv_pin_dir(), args, merge_stderr ? " 2>&1" : "");
	fflush(stdout);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (got < sizeof(out) - 1 && (n = fread(out + got, 1, sizeof(out) - 1 - got, p)) > 0)
		got += n;
	out[got] = 0;
	st = pclose(p);
	if (getenv("TEST_VERBOSE")) /* the tool's output as TAP comments, for debugging */
		print_comment(cmd, out);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int ctl_run(bool merge_stderr, const char *fmt, ...)
{
	char args[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	return ctl_run_cmd("", merge_stderr, args);
}

/* ---- JSON access --------------------------------------------------------------------- */

static struct json_object *jget(struct json_object *o, const char *key)
{
	struct json_object *v = NULL;

	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *jstr(struct json_object *o, const char *key)
{
	struct json_object *v = jget(o, key);

	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

static bool jis_int(struct json_object *o, const char *key)
{
	return json_object_is_type(jget(o, key), json_type_int);
}

static int64_t jint(struct json_object *o, const char *key)
{
	return json_object_get_int64(jget(o, key));
}

/* The element of array arr whose string field key equals want. */
static struct json_object *jfind(struct json_object *arr, const char *key, const char *want)
{
	size_t i, n = arr && json_object_is_type(arr, json_type_array)
			      ? json_object_array_length(arr)
			      : 0;

	for (i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (strcmp(jstr(e, key), want) == 0)
			return e;
	}
	return NULL;
}

/* `explain -o json VIP`: the backend address the next connection goes to, and
 * the decision kind. Returns 0, or -1 with a diagnostic. */
static int explain_next(const char *vip, char *backend, size_t blen, char *kind, size_t klen)
{
	struct json_object *root, *next;
	int rc = ctl_run(false, "explain -o json '%s'", vip);

	CHECK_RC(rc == 0, "explain %s exited %d: %s", vip, rc, out);
	root = json_tokener_parse(out);
	CHECK_RC(root, "explain output is not JSON: %s", out);
	next = jget(root, "next_connection");
	snprintf(kind, klen, "%s", jstr(next, "kind"));
	snprintf(backend, blen, "%s", jstr(next, "backend"));
	json_object_put(root);
	return 0;
}

/* ---- connects ---------------------------------------------------------------------- */

/* The listener address of a backend name ("b3", "v6a"). */
static const char *backend_addr(const char *name)
{
	int i;

	for (i = 0; i < NB; i++)
		if (strcmp(be[i].name, name) == 0)
			return be[i].addr;
	for (i = 0; i < 2; i++)
		if (strcmp(be6[i].name, name) == 0)
			return be6[i].addr;
	return "?";
}

/* Connect through vip; the address of the backend that answered, or NULL. */
static const char *connect_via(const char *vip, int *hold_fd)
{
	static char name[32];

	if (test_connect(vip, false, name, sizeof(name), NULL, hold_fd) != 0)
		return NULL;
	if (name[0] == 'b' && vip && strcmp(vip, VIP_A) == 0)
		landed_a[atoi(name + 1)]++;
	return backend_addr(name);
}

static int wait_live(const struct steer_addr *vip, int b, int64_t want)
{
	uint32_t slot;
	int i;

	if (steer_dp_slot(dp, vip, &addr4[b], &slot) != 0)
		return -1;
	/* Generous: a loaded machine may deliver the state changes late. */
	for (i = 0; i < 2000 && steer_dp_live(dp, slot) != want; i++)
		usleep(5000);
	return steer_dp_live(dp, slot) == want ? 0 : -1;
}

/* The line of status/explain text that starts (after blanks) with addr. */
static const char *line_of(const char *text, const char *addr, char *line, size_t len)
{
	const char *p = text;

	while (p && *p) {
		const char *eol = strchr(p, '\n'), *q = p;
		size_t l = eol ? (size_t)(eol - p) : strlen(p);

		while (*q == ' ')
			q++;
		if (strncmp(q, addr, strlen(addr)) == 0 && q[strlen(addr)] == ' ') {
			snprintf(line, len, "%.*s", (int)l, p);
			return line;
		}
		p = eol ? eol + 1 : NULL;
	}
	return NULL;
}

/* ---- tests ------------------------------------------------------------------------- */

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (; (text = strstr(text, needle)); text += strlen(needle))
		n++;
	return n;
}

static void test_explain_shows_every_term(void)
{
	struct json_object *root, *b0, *b1, *b2, *b3, *next;
	int rc;

	rc = ctl_run(false, "-o json explain %s", VIP_A);
	CHECK(rc == 0, "exit %d: %s", rc, out);
	root = json_tokener_parse(out);
	CHECK(root, "not JSON: %s", out);
	b0 = jfind(jget(root, "backends"), "address", be[0].addr);
	b1 = jfind(jget(root, "backends"), "address", be[1].addr);
	b2 = jfind(jget(root, "backends"), "address", be[2].addr);
	b3 = jfind(jget(root, "backends"), "address", be[3].addr);
	next = jget(root, "next_connection");
	rc = -1;
	if (!b0 || !b1 || !b2 || !b3 || !next)
		printf("# missing backends or decision: %s\n", out);
	else if (jint(b0, "work_ns") != 20000000 || jint(b0, "barrier_ns") != 37500000 ||
		 jint(b0, "kv_ppm") != 200000 || jint(b0, "base_wait_ns") != 57500000 ||
		 jint(b0, "ns_per_token") != 50000 || jint(b0, "queued_tokens") != 400)
		printf("# b0's terms are wrong: %s\n", json_object_to_json_string(b0));
	else if (json_object_get_double(jget(b0, "throughput_tokens_per_s")) != 20000.0 ||
		 json_object_get_boolean(jget(b0, "queued_estimated")) ||
		 !json_object_get_boolean(jget(b1, "queued_estimated")))
		printf("# throughput or estimate flags wrong\n");
	else if (strcmp(jstr(b0, "queued_from"), "report") ||
		 strcmp(jstr(b1, "queued_from"), "waiting_requests") ||
		 strcmp(jstr(b2, "queued_from"), "live_connections"))
		printf("# queued_from wrong: %s\n", out);
	else if (strcmp(jstr(b0, "mode"), "snapshot") || strcmp(jstr(b2, "mode"), "estimate") ||
		 strcmp(jstr(b3, "health"), "ejected") || jget(b3, "rank") != NULL ||
		 jint(b2, "rank") != 0 || jint(b0, "rank") != 1 || jint(b1, "rank") != 2)
		printf("# modes, health or ranks wrong: %s\n", out);
	else if (strcmp(jstr(next, "kind"), "least_wait") ||
		 strcmp(jstr(next, "backend"), be[2].addr) || jint(next, "score_ns") != 51200000 ||
		 jint(next, "scanned") != 1 || !json_object_get_boolean(jget(next, "early_exit")) ||
		 strcmp(jstr(next, "next_best_backend"), be[0].addr))
		printf("# decision wrong: %s\n", json_object_to_json_string(next));
	else
		rc = 0;
	json_object_put(root);
	CHECK(rc == 0, "see above");

	rc = ctl_run(false, "explain %s", VIP_A);
	CHECK(rc == 0, "text explain exit %d", rc);
	/* b1 reported waiting requests only; b2 reported nothing at all. */
	CHECK(count_of(out, "estimated from waiting requests") == 1, "waiting-requests note:\n%s",
	      out);
	CHECK(count_of(out, "no load report: estimated from live connections") == 1,
	      "no-report note:\n%s", out);
	CHECK(strstr(out, "20000.0 tokens/s"), "no throughput:\n%s", out);
	CHECK(strstr(out, "KV barrier term 37.500 ms"), "no barrier term:\n%s", out);
	CHECK(strstr(out, "work term:      20.000 ms"), "no work term:\n%s", out);
	CHECK(strstr(out, "0 credited x 50000 ns/token + 0.000 ms busy = 0.000 ms"),
	      "no in-flight term:\n%s", out);
	CHECK(strstr(out, "busy until:     0.000 ms left"), "no busy time:\n%s", out);
	CHECK(strstr(out, "not in the table"), "ejected b3 not explained:\n%s", out);
	{
		char want[256];

		snprintf(want, sizeof(want),
			 "next connection -> %s: lowest expected wait 51.200 ms (next best %s at "
			 "57.500 ms); scan stopped after 1 of 3 entries (early exit",
			 be[2].addr, be[0].addr);
		CHECK(strstr(out, want), "want '%s' in:\n%s", want, out);
	}
}

/* Explain, connect, compare: the water-filling moves the pick around, with a tie. */
static void test_explain_predicts_the_kernel(void)
{
	int i;

	for (i = 0; i < 10; i++) {
		char want[64], kind[32], text_want[128];
		const char *got;

		CHECK(explain_next(VIP_A, want, sizeof(want), kind, sizeof(kind)) == 0, "explain");
		CHECK(strcmp(kind, "least_wait") == 0, "round %d: kind %s", i, kind);
		CHECK(ctl_run(false, "explain %s", VIP_A) == 0, "text explain");
		snprintf(text_want, sizeof(text_want), "next connection -> %s:", want);
		CHECK(strstr(out, text_want), "round %d: text does not say '%s':\n%s", i, text_want,
		      out);
		got = connect_via(VIP_A, NULL);
		CHECK(got, "round %d: connect failed", i);
		CHECK(strcmp(got, want) == 0, "round %d: explain said %s, the kernel chose %s", i,
		      want, got);
	}
	CHECK(landed_a[0] > 0 && landed_a[1] > 0 && landed_a[2] > 0, "picks never moved: %d/%d/%d",
	      landed_a[0], landed_a[1], landed_a[2]);
}

static void test_status_text(void)
{
	char line[512], addr[64], health[32], rank[16];
	int rc, i;

	rc = ctl_run(false, "status");
	CHECK(rc == 0, "exit %d: %s", rc, out);
	CHECK(strstr(out, "service " VIP_A), "no service line:\n%s", out);
	CHECK(strstr(out, "generation"), "no generation:\n%s", out);
	CHECK(strstr(out, "expires in"), "no expiry:\n%s", out);
	for (i = 0; i < 4; i++) {
		const char *want_rank[4] = { "1", "2", "0", "-" };
		const char *want_health = i == 3 ? "ejected" : "healthy";
		unsigned long long inflight, pending;
		char base[32];
		long long live;
		const char *sec = strstr(out, "service " VIP_A);

		/* Service A's block: b0 also appears under VIP_B. */
		CHECK(line_of(sec, be[i].addr, line, sizeof(line)), "b%d missing:\n%s", i, out);
		CHECK(sscanf(line, "%63s %31s %15s %31s %llu %llu %lld", addr, health, rank, base,
			     &inflight, &pending, &live) == 7,
		      "unparsable row '%s'", line);
		CHECK(pending == 0, "b%d: %llu tokens pending, nothing was sent", i, pending);
		CHECK(strcmp(health, want_health) == 0 && strcmp(rank, want_rank[i]) == 0,
		      "b%d: health %s rank %s, want %s %s", i, health, rank, want_health,
		      want_rank[i]);
		CHECK(inflight == (unsigned long long)landed_a[i] * STEER_DEFAULT_CREDIT_TOKENS,
		      "b%d in-flight %llu", i, inflight);
	}
	CHECK(line_of(strstr(out, "service " VIP_A), be[2].addr, line, sizeof(line)) &&
		      strstr(line, "estimate"),
	      "b2's mode: %s", line);
}

static int index_of_addr(const char *addr)
{
	int i;

	for (i = 0; addr && i < NB; i++)
		if (strcmp(be[i].addr, addr) == 0)
			return i;
	return -1;
}

static void test_status_json(void)
{
	struct json_object *root, *svc, *bks;
	int fds[3] = { -1, -1, -1 }, held[NB] = { 0 }, i, rc = 0;

	/* Three connections held open while status runs: live counts. */
	for (i = 0; i < 3 && rc == 0; i++) {
		int b = index_of_addr(connect_via(VIP_A, &fds[i]));

		if (b < 0)
			rc = -1;
		else
			held[b]++;
	}
	for (i = 0; i < NB && rc == 0; i++)
		if (held[i] && wait_live(&vip_a, i, held[i]) != 0)
			rc = -2;
	if (rc == 0)
		rc = ctl_run(false, "status -o json");
	for (i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	CHECK(rc != -1, "a connect through %s failed", VIP_A);
	CHECK(rc != -2, "the kernel never counted the held connections as live");
	CHECK(rc == 0, "exit %d: %s", rc, out);
	root = json_tokener_parse(out);
	CHECK(root, "not JSON: %s", out);
	svc = jfind(jget(root, "services"), "vip", VIP_A);
	bks = jget(svc, "backends");
	rc = -1;
	if (!svc || !bks || json_object_array_length(bks) != 4)
		printf("# service A or its 4 backends missing: %s\n", out);
	else if (!jis_int(svc, "steered") || !jis_int(svc, "table_age_ns") ||
		 !jis_int(svc, "expires_in_ns") ||
		 !json_object_is_type(jget(svc, "published"), json_type_boolean))
		printf("# numbers are not numbers: %s\n", json_object_to_json_string(svc));
	else if (jint(svc, "steered") != landed_a[0] + landed_a[1] + landed_a[2] ||
		 jint(svc, "refused") != 0 || jint(svc, "credit_tokens") != 1024 ||
		 jint(svc, "expires_in_ns") <= 0 || jint(svc, "table_age_ns") < 0)
		printf("# service totals wrong: %s\n", json_object_to_json_string(svc));
	else
		rc = 0;
	for (i = 0; rc == 0 && i < 4; i++) {
		struct json_object *b = jfind(bks, "address", be[i].addr);

		if (!b || jint(b, "steered") != landed_a[i] ||
		    jint(b, "inflight_tokens") != (int64_t)landed_a[i] * 1024 ||
		    jint(b, "live") != held[i]) {
			printf("# b%d: want steered %d in-flight %d live %d: %s\n", i, landed_a[i],
			       landed_a[i] * 1024, held[i], b ? json_object_to_json_string(b) : "");
			rc = -1;
		}
	}
	json_object_put(root);
	CHECK(rc == 0, "see above");
}

static void test_expired_table_predicts_round_robin(void)
{
	int idx[3] = { 4, 5, 0 };
	double base[3] = { 0, 1e9, 2e9 };
	int i;

	CHECK(publish_simple(&vip_b, idx, base, 3, 1000000 /* 1 ms */) == 0, "publish: %s", err);
	usleep(20000);
	CHECK(ctl_run(false, "status") == 0, "status");
	CHECK(strstr(out, "EXPIRED") && strstr(out, "round robin"), "status:\n%s", out);
	for (i = 0; i < 6; i++) {
		char want[64], kind[32];
		const char *got;

		CHECK(explain_next(VIP_B, want, sizeof(want), kind, sizeof(kind)) == 0, "explain");
		CHECK(strcmp(kind, "round_robin") == 0, "round %d: kind %s", i, kind);
		got = connect_via(VIP_B, NULL);
		CHECK(got && strcmp(got, want) == 0, "round %d: explain said %s, kernel chose %s",
		      i, want, got ? got : "(failed)");
	}
	CHECK(ctl_run(false, "explain %s", VIP_B) == 0 && strstr(out, "round robin") &&
		      strstr(out, "EXPIRED"),
	      "text:\n%s", out);
}

static void test_empty_and_all_drained_are_refused(void)
{
	int idx[2] = { 6, 7 };
	double base[2] = { 0, 1e6 };
	char want[64], kind[32];

	CHECK(publish_simple(&vip_c, NULL, NULL, 0, TTL_LONG) == 0, "publish empty: %s", err);
	CHECK(ctl_run(false, "explain %s", VIP_C) == 0, "explain C: %s", out);
	CHECK(strstr(out, "refused (ECONNREFUSED)"), "empty table:\n%s", out);
	CHECK(explain_next(VIP_C, want, sizeof(want), kind, sizeof(kind)) == 0, "json");
	CHECK(strcmp(kind, "refused") == 0, "kind %s", kind);
	CHECK(test_connect(VIP_C, false, NULL, 0, NULL, NULL) == -ECONNREFUSED,
	      "the kernel did not refuse");

	CHECK(publish_simple(&vip_d, idx, base, 2, TTL_LONG) == 0, "publish D: %s", err);
	CHECK(ctl_run(true, "drain %s", be[6].addr) == 0, "drain b6: %s", out);
	CHECK(ctl_run(true, "drain %s", be[7].addr) == 0, "drain b7: %s", out);
	CHECK(ctl_run(false, "explain %s", VIP_D) == 0, "explain D");
	CHECK(strstr(out, "refused (ECONNREFUSED)") && strstr(out, "2 of them drained"),
	      "all drained:\n%s", out);
	CHECK(strstr(out, "drained: skipped"), "drained entries not marked:\n%s", out);
	CHECK(test_connect(VIP_D, false, NULL, 0, NULL, NULL) == -ECONNREFUSED,
	      "the kernel did not refuse");
	CHECK(ctl_run(true, "undrain %s", be[6].addr) == 0, "undrain b6: %s", out);
	CHECK(ctl_run(true, "undrain %s", be[7].addr) == 0, "undrain b7: %s", out);
	CHECK(explain_next(VIP_D, want, sizeof(want), kind, sizeof(kind)) == 0 &&
		      strcmp(want, be[6].addr) == 0,
	      "after undrain: %s %s", kind, want);
}

static void test_drain_and_undrain(void)
{
	char target[64], want[64], kind[32], line[512];
	int i;

	CHECK(explain_next(VIP_A, target, sizeof(target), kind, sizeof(kind)) == 0, "explain");
	CHECK(ctl_run(true, "drain %s", target) == 0, "drain: %s", out);
	CHECK(strstr(out, "drained") && strstr(out, "1 service"), "drain report: %s", out);
	CHECK(ctl_run(false, "status") == 0, "status");
	CHECK(line_of(strstr(out, "service " VIP_A), target, line, sizeof(line)) &&
		      strstr(line, "drained,healthy"),
	      "status row of the drained backend: %s", line);
	for (i = 0; i < 6; i++) {
		const char *got;

		CHECK(explain_next(VIP_A, want, sizeof(want), kind, sizeof(kind)) == 0, "explain");
		CHECK(strcmp(want, target) != 0, "explain still picks the drained %s", target);
		got = connect_via(VIP_A, NULL);
		CHECK(got && strcmp(got, want) == 0, "explain said %s, kernel chose %s", want,
		      got ? got : "(failed)");
	}
	CHECK(ctl_run(true, "undrain %s", target) == 0, "undrain: %s", out);
	CHECK(strstr(out, "undrained"), "undrain report: %s", out);
	/* While drained it took no credit, the others did: it is the best again. */
	CHECK(explain_next(VIP_A, want, sizeof(want), kind, sizeof(kind)) == 0, "explain");
	CHECK(strcmp(want, target) == 0, "after undrain explain picks %s, not %s", want, target);
	{
		const char *got = connect_via(VIP_A, NULL);

		CHECK(got && strcmp(got, target) == 0, "after undrain the kernel chose %s, not %s",
		      got ? got : "(failed)", target);
	}
}

static void test_drain_of_unconfigured_address_is_recorded(void)
{
	struct steer_addr a;

	steer_addr_parse("192.0.2.7:9999", &a, err, sizeof(err));
	CHECK(ctl_run(true, "drain 192.0.2.7:9999") == 0, "drain: %s", out);
	CHECK(strstr(out, "not a configured backend of any service") && strstr(out, "recorded"),
	      "report: %s", out);
	CHECK(steer_dp_is_drained(dp, &a), "the drain was not persisted");
	CHECK(ctl_run(true, "-o json undrain 192.0.2.7:9999") == 0, "undrain: %s", out);
	CHECK(!steer_dp_is_drained(dp, &a), "the undrain was not persisted");
}

static void test_ipv6_service(void)
{
	struct steer_dp_cost cost[2] = {
		{ .addr = addr6[0], .base_wait_ns = 3e6, .ns_per_token = 1000 },
		{ .addr = addr6[1], .base_wait_ns = 1e6, .ns_per_token = 1000 },
	};
	struct steer_dp_service s = { .vip = vip_6,
				      .configured = addr6,
				      .n_configured = 2,
				      .table = cost,
				      .n_table = 2,
				      .ttl_ns = TTL_LONG };
	int i;

	CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish: %s", err);
	for (i = 0; i < 5; i++) {
		char want[64], kind[32];
		const char *got;

		CHECK(explain_next(VIP_6, want, sizeof(want), kind, sizeof(kind)) == 0, "explain");
		got = connect_via(VIP_6, NULL);
		CHECK(got && strcmp(got, want) == 0, "explain said %s, kernel chose %s", want,
		      got ? got : "(failed)");
	}
}

/*
 * Every line of status text fits COLUMNS_MAX columns, for a service of NW
 * backends with IPv6 addresses as a cloud gives them (all eight groups;
 * nothing listens on them), queues seconds long, one backend drained and one
 * ejected, next to every service the tests above left.
 */
static void test_status_fits_the_terminal(void)
{
	struct steer_addr vip, configured[NW];
	struct steer_dp_cost cost[NW - 1];
	struct steer_dp_service s = { .configured = configured,
				      .n_configured = NW,
				      .table = cost,
				      .n_table = NW - 1,
				      .ttl_ns = TTL_LONG };
	char a[64], line[1024];
	const char *p;
	int i, widest = 0;

	CHECK(steer_addr_parse(VIP_W, &vip, err, sizeof(err)) == 0, "%s", err);
	s.vip = vip;
	for (i = 0; i < NW; i++) {
		snprintf(a, sizeof(a), "[2001:db8:1f14:3c4:a200:6b7a:%x:%x]:8000", 0x9e00 + i,
			 0xc0d + 17 * i);
		CHECK(steer_addr_parse(a, &configured[i], err, sizeof(err)) == 0, "%s: %s", a, err);
		if (i == NW - 1)
			break; /* ejected: out of the table */
		cost[i].addr = configured[i];
		cost[i].base_wait_ns = 1234.567e6 * (i + 1); /* the widest a queue makes them */
		cost[i].ns_per_token = 333333;
	}
	CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish: %s", err);
	for (i = 0; i < NW; i++) {
		struct steer_bk_info *info;
		uint32_t slot;

		CHECK(steer_dp_slot(dp, &vip, &configured[i], &slot) == 0, "no slot for b%d", i);
		info = steer_dp_bk_info(dp, slot);
		memset(info, 0, sizeof(*info));
		info->health = i == NW - 1 ? STEER_HEALTH_EJECTED : STEER_HEALTH_HEALTHY;
		info->mode = i == NW - 1 ? STEER_MODE_NONE : STEER_MODE_SNAPSHOT;
		info->source = STEER_SOURCE_GRPC_SGLANG;
		info->last_poll = i == NW - 1 ? STEER_POLL_UNAVAILABLE : STEER_POLL_OK;
		info->updated_ns = steer_monotonic_ns();
		info->snapshot_ns = info->updated_ns - 12345678901ULL; /* 12.3 s old */
	}
	steer_addr_format(&configured[2], a, sizeof(a));
	CHECK(ctl_run(true, "drain %s", a) == 0, "drain: %s", out);
	CHECK(ctl_run(false, "status") == 0, "status: %s", out);
	for (p = out; *p;) {
		const char *eol = strchr(p, '\n');
		int l = eol ? (int)(eol - p) : (int)strlen(p);

		if (l > widest)
			widest = l;
		CHECK(l <= COLUMNS_MAX, "a line of %d columns (> %d):\n%.*s\nin:\n%s", l,
		      COLUMNS_MAX, l, p, out);
		p += l + (eol != NULL);
	}
	printf("# status: %d columns at most\n", widest);
	CHECK(line_of(strstr(out, "service " VIP_W), a, line, sizeof(line)) &&
		      strstr(line, "drained,healthy"),
	      "the drained backend's row: %s", out);
	CHECK(ctl_run(true, "undrain %s", a) == 0, "undrain: %s", out);
}

static void test_usage_and_errors(void)
{
	struct {
		const char *args;
		int want;
		const char *needle;
	} cases[] = {
		{ "", 2, "missing command" },
		{ "frobnicate", 2, "unknown command" },
		{ "explain", 2, "needs an address" },
		{ "explain 127.0.0.1", 2, "expected IPV4:PORT" },
		{ "drain 127.0.0.1:99999", 2, "port" },
		{ "undrain", 2, "needs an address" },
		{ "--bogus status", 2, "unknown option" },
		{ "-o yaml status", 2, "text or json" },
		{ "status extra", 2, "unexpected argument" },
		{ "explain 127.0.0.200:8000", 1, "not a virtual address" },
		{ "--help", 0, "Usage:" },
		{ "--version", 0, STEER_VERSION },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = ctl_run(true, "%s", cases[i].args);
		CHECK(rc == cases[i].want && strstr(out, cases[i].needle),
		      "'%s': exit %d (want %d), output: %s", cases[i].args, rc, cases[i].want, out);
	}
	/* Nothing pinned at the path: exit 1 with the data plane's hint. The
	 * --pin-path given last wins over the test's own. */
	rc = ctl_run(true, "status --pin-path /sys/fs/bpf/smg-steer-test-ctl-none");
	CHECK(rc == 1 && strstr(out, "nothing is pinned at /sys/fs/bpf/smg-steer-test-ctl-none"),
	      "exit %d: %s", rc, out);
}

static void test_non_root_is_refused(void)
{
	int rc = ctl_run_cmd("setpriv --reuid=65534 --regid=65534 --clear-groups ", true, "status");

	CHECK(rc == 1, "exit %d: %s", rc, out);
	CHECK(strstr(out, "must run as root"), "message: %s", out);
}

/* ---- setup ---------------------------------------------------------------------------- */

static int setup(void)
{
	struct steer_dp_opts o = { .pin_dir = NULL, .own = true };
	const char *build = getenv("STEER_BUILD");
	char a[64], n[16];
	int i;

	snprintf(ctl_path, sizeof(ctl_path), "%s/smg-steerctl", build ? build : "build/san");
	if (access(ctl_path, X_OK) != 0) {
		fprintf(stderr, "%s: %s (build it first)\n", ctl_path, strerror(errno));
		return -1;
	}
	if (testenv_init("ctl") != 0)
		return -1;
	for (i = 0; i < NB; i++) {
		snprintf(a, sizeof(a), "127.0.0.%d:%d", 11 + i, 9001 + i);
		snprintf(n, sizeof(n), "b%d", i);
		if (test_backend_start(&be[i], a, n) != 0 ||
		    steer_addr_parse(a, &addr4[i], err, sizeof(err)) != 0)
			return -1;
	}
	if (test_backend_start(&be6[0], "[::1]:9101", "v6a") != 0 ||
	    test_backend_start(&be6[1], "[::1]:9102", "v6b") != 0)
		return -1;
	steer_addr_parse(be6[0].addr, &addr6[0], err, sizeof(err));
	steer_addr_parse(be6[1].addr, &addr6[1], err, sizeof(err));
	steer_addr_parse(VIP_A, &vip_a, err, sizeof(err));
	steer_addr_parse(VIP_B, &vip_b, err, sizeof(err));
	steer_addr_parse(VIP_C, &vip_c, err, sizeof(err));
	steer_addr_parse(VIP_D, &vip_d, err, sizeof(err));
	steer_addr_parse(VIP_6, &vip_6, err, sizeof(err));
	o.pin_dir = testenv_pin_dir();
	o.cgroup = testenv_cgroup();
	if (steer_dp_open(&o, &dp, err, sizeof(err)) != 0 || publish_a() != 0) {
		fprintf(stderr, "data plane: %s\n", err);
		return -1;
	}
	return 0;
}

/* A service of b4 and b5 (base waits in ms) with cache affinity. */
static int publish_affinity(const char *vip_str, uint32_t kind, double base4_ms, double base5_ms)
{
	struct steer_addr vip, configured[2] = { addr4[4], addr4[5] };
	struct steer_dp_cost cost[2] = {
		{ .addr = addr4[4], .base_wait_ns = base4_ms * 1e6, .ns_per_token = 1000 },
		{ .addr = addr4[5], .base_wait_ns = base5_ms * 1e6, .ns_per_token = 1000 }
	};
	struct steer_dp_service s = { .configured = configured,
				      .n_configured = 2,
				      .table = cost,
				      .n_table = 2,
				      .ttl_ns = TTL_LONG,
				      .affinity = kind,
				      .affinity_slack_ns = 500 * 1000000ULL,
				      .affinity_idle_ns = 600 * 1000000000ULL };

	if (steer_addr_parse(vip_str, &vip, err, sizeof(err)) != 0)
		return -1;
	s.vip = vip;
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

/* `explain -o json VIP --client KEY`: the affinity object's verdict and the
 * backend this client's next connection goes to. */
static int explain_client(const char *vip, const char *key, char *verdict, size_t vlen, char *next,
			  size_t nlen)
{
	struct json_object *root, *a;
	int rc = ctl_run(false, "explain -o json '%s' --client '%s'", vip, key);

	CHECK_RC(rc == 0, "explain %s --client %s exited %d: %s", vip, key, rc, out);
	root = json_tokener_parse(out);
	CHECK_RC(root, "explain output is not JSON: %s", out);
	a = jget(root, "affinity");
	CHECK_RC(a, "no affinity object: %s", out);
	snprintf(verdict, vlen, "%s", jstr(a, "verdict"));
	snprintf(next, nlen, "%s", jstr(a, "next_backend"));
	json_object_put(root);
	return 0;
}

/* Explain --client says where this client's next connect goes, and the kernel
 * agrees: remembered, kept within the slack, moved past it or off a drained
 * backend. */
static void test_explain_affinity(void)
{
	char key[4200], verdict[32], next[64];
	const char *got;

	snprintf(key, sizeof(key), "cgroup:%s", testenv_cgroup());
	CHECK(publish_affinity(VIP_E, STEER_AFF_CGROUP, 10, 20) == 0, "publish: %s", err);
	CHECK(explain_client(VIP_E, key, verdict, sizeof(verdict), next, sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "new") == 0 && strcmp(next, be[4].addr) == 0, "first: %s %s", verdict,
	      next);
	CHECK(ctl_run(false, "explain %s --client '%s'", VIP_E, key) == 0 &&
		      strstr(out, "affinity (cgroup): client ") &&
		      strstr(out, ": not remembered: placed by least wait, "),
	      "text:\n%s", out);
	got = connect_via(VIP_E, NULL);
	CHECK(got && strcmp(got, be[4].addr) == 0, "first connect went to %s", got);
	/* Remembered on b4, which is the least anyway. */
	CHECK(explain_client(VIP_E, key, verdict, sizeof(verdict), next, sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "stay") == 0 && strcmp(next, be[4].addr) == 0, "again: %s %s",
	      verdict, next);
	/* b4 300 ms, b5 10 ms: within 10 ms + 500 ms, it stays on b4. */
	CHECK(publish_affinity(VIP_E, STEER_AFF_CGROUP, 300, 10) == 0, "publish: %s", err);
	CHECK(explain_client(VIP_E, key, verdict, sizeof(verdict), next, sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "stay") == 0 && strcmp(next, be[4].addr) == 0, "slack: %s %s",
	      verdict, next);
	CHECK(ctl_run(false, "explain %s --client '%s'", VIP_E, key) == 0 &&
		      strstr(out, "of 10m; wait 30") && strstr(out, " + slack 500ms: stays\n"),
	      "text:\n%s", out);
	got = connect_via(VIP_E, NULL);
	CHECK(got && strcmp(got, be[4].addr) == 0, "within the slack, the kernel went to %s", got);
	/* b4 600 ms: over the slack, it leaves for b5. */
	CHECK(publish_affinity(VIP_E, STEER_AFF_CGROUP, 600, 10) == 0, "publish: %s", err);
	CHECK(explain_client(VIP_E, key, verdict, sizeof(verdict), next, sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "left_slack") == 0 && strcmp(next, be[5].addr) == 0,
	      "over the slack: %s %s", verdict, next);
	CHECK(ctl_run(false, "explain %s --client '%s'", VIP_E, key) == 0 &&
		      strstr(out, ": leaves (over the slack) for "),
	      "text:\n%s", out);
	got = connect_via(VIP_E, NULL);
	CHECK(got && strcmp(got, be[5].addr) == 0, "over the slack, the kernel went to %s", got);
	/* Remembered on b5, drained: it leaves for b4. */
	CHECK(steer_dp_set_drained(dp, &addr4[5], true, err, sizeof(err)) == 0, "drain: %s", err);
	CHECK(explain_client(VIP_E, key, verdict, sizeof(verdict), next, sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "left_gone") == 0 && strcmp(next, be[4].addr) == 0, "drained: %s %s",
	      verdict, next);
	CHECK(ctl_run(false, "explain %s --client '%s'", VIP_E, key) == 0 &&
		      strstr(out, ": leaves (drained) for "),
	      "text:\n%s", out);
	CHECK(steer_dp_set_drained(dp, &addr4[5], false, err, sizeof(err)) == 0, "undrain: %s",
	      err);
	/* Another kind than the service's: said, and an error. */
	CHECK(ctl_run(false, "explain %s --client key:42", VIP_E) == 1 &&
		      strstr(out, "keys its clients by cgroup, not key"),
	      "mismatch:\n%s", out);
	/* The XDP ingress's source address is always a client. */
	CHECK(explain_client(VIP_E, "source:10.1.2.3", verdict, sizeof(verdict), next,
			     sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "new") == 0, "source: %s", verdict);
	/* A service without affinity. */
	CHECK(ctl_run(false, "explain %s --client '%s'", VIP_A, key) == 0 &&
		      strstr(out, "affinity (cgroup): affinity off"),
	      "off:\n%s", out);
	/* By network namespace: the cookie read in a child that enters it is the
	 * kernel's. */
	CHECK(publish_affinity(VIP_F, STEER_AFF_NETNS, 10, 20) == 0, "publish: %s", err);
	got = connect_via(VIP_F, NULL);
	CHECK(got && strcmp(got, be[4].addr) == 0, "netns connect went to %s", got);
	CHECK(publish_affinity(VIP_F, STEER_AFF_NETNS, 300, 10) == 0, "publish: %s", err);
	CHECK(explain_client(VIP_F, "netns:/proc/self/ns/net", verdict, sizeof(verdict), next,
			     sizeof(next)) == 0,
	      "explain");
	CHECK(strcmp(verdict, "stay") == 0 && strcmp(next, be[4].addr) == 0, "netns: %s %s",
	      verdict, next);
	got = connect_via(VIP_F, NULL);
	CHECK(got && strcmp(got, be[4].addr) == 0, "netns: the kernel went to %s", got);
	/* Bad keys are usage errors. */
	CHECK(ctl_run(true, "explain %s --client key:12x", VIP_E) == 2, "bad key: %s", out);
	CHECK(ctl_run(true, "explain %s --client pod:1", VIP_E) == 2, "bad kind: %s", out);
	CHECK(ctl_run(true, "status --client key:1") == 2, "status --client: %s", out);
	CHECK(ctl_run(true, "explain %s --client netns:/nonexistent", VIP_E) == 1, "%s", out);
}

int main(void)
{
	int i;

	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_explain_shows_every_term);
	TAP_RUN(test_explain_predicts_the_kernel);
	TAP_RUN(test_status_text);
	TAP_RUN(test_status_json);
	TAP_RUN(test_expired_table_predicts_round_robin);
	TAP_RUN(test_empty_and_all_drained_are_refused);
	TAP_RUN(test_drain_and_undrain);
	TAP_RUN(test_drain_of_unconfigured_address_is_recorded);
	TAP_RUN(test_ipv6_service);
	TAP_RUN(test_status_fits_the_terminal);
	TAP_RUN(test_explain_affinity);
	TAP_RUN(test_usage_and_errors);
	TAP_RUN(test_non_root_is_refused);
	if (dp) {
		steer_dp_detach(dp, err, sizeof(err));
		steer_dp_close(dp);
	}
	for (i = 0; i < NB; i++)
		test_backend_stop(&be[i]);
	test_backend_stop(&be6[0]);
	test_backend_stop(&be6[1]);
	return tap_done();
}
