// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_poller.c - the GetLoads poller against real gRPC servers: fake SGLang
 * workers (tests/lib/fake_worker.py, grpcio) in a private network namespace,
 * switched between behaviours by rewriting their state files. Plus decode
 * cases on messages built with protobuf-c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loads/loads_int.h"
#include "sglang_scheduler.pb-c.h"
#include "tap.h"
#include "testenv.h"

#define MS (1000000ull)
#define SEC (1000000000ull)
#define NHANG 8
#define MAX_WORKERS 16
#define READY_TIMEOUT_MS 20000
/* Deadline of a call expected to succeed: generous, for a loaded machine
 * (the fake worker is Python, the test runs under ASan). */
#define CALL_TIMEOUT (10 * SEC)

struct worker {
	char name[32];
	char grpc[64];	  /* "" = no gRPC server */
	char traffic[64]; /* "" = no traffic listener */
	char state[PATH_MAX];
	pid_t pid;
};

static char top[PATH_MAX], pb2_dir[PATH_MAX + 32], tmpdir[64];
static struct worker *workers[MAX_WORKERS];
static int n_workers;
static struct steer_poller *poller;
static struct worker w_ok, w_v6, w_restart, w_hang[NHANG];

/* ---- helpers: time, files, workers ------------------------------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC + (uint64_t)ts.tv_nsec;
}

/* Atomic replace, as the fake worker expects. */
static int write_state(const struct worker *w, const char *json)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", w->state);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fputs(json, f);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, w->state);
}

/* The worker's counters; -1 when unreadable. */
static int worker_stat(const struct worker *w, const char *key)
{
	char path[PATH_MAX + 8];
	struct json_object *root, *v;
	int n = -1;

	snprintf(path, sizeof(path), "%s.stats", w->state);
	root = json_object_from_file(path);
	if (!root)
		return -1;
	if (json_object_object_get_ex(root, key, &v))
		n = json_object_get_int(v);
	json_object_put(root);
	return n;
}

/* Wait (the worker flushes its counters every 100 ms) until key >= want. */
static int wait_stat(const struct worker *w, const char *key, int want)
{
	uint64_t end = now_ns() + 5 * SEC;
	int n;

	while ((n = worker_stat(w, key)) < want && now_ns() < end)
		usleep(20000);
	return n;
}

static void worker_init(struct worker *w, const char *name, const char *grpc, const char *traffic)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->grpc, sizeof(w->grpc), "%s", grpc ? grpc : "");
	snprintf(w->traffic, sizeof(w->traffic), "%s", traffic ? traffic : "");
	snprintf(w->state, sizeof(w->state), "%s/%s.json", tmpdir, name);
	if (n_workers < MAX_WORKERS)
		workers[n_workers++] = w;
}

static void exec_worker(const struct worker *w, int out_fd)
{
	char script[PATH_MAX + 32];
	const char *argv[16];
	int a = 0;

	/* A worker never outlives the test, whatever kills the test. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (dup2(out_fd, STDOUT_FILENO) < 0)
		_exit(126);
	snprintf(script, sizeof(script), "%s/tests/lib/fake_worker.py", top);
	argv[a++] = "/usr/bin/python3";
	argv[a++] = script;
	argv[a++] = "--name";
	argv[a++] = w->name;
	argv[a++] = "--state";
	argv[a++] = w->state;
	argv[a++] = "--pb2-dir";
	argv[a++] = pb2_dir;
	if (w->grpc[0]) {
		argv[a++] = "--grpc";
		argv[a++] = w->grpc;
	}
	if (w->traffic[0]) {
		argv[a++] = "--traffic";
		argv[a++] = w->traffic;
	}
	argv[a] = NULL;
	execv(argv[0], (char *const *)argv);
	_exit(127);
}

/* Fork the worker; its stdout comes back on *fd_out. */
static int worker_spawn(struct worker *w, int *fd_out)
{
	int fds[2];

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	w->pid = fork();
	if (w->pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (w->pid == 0)
		exec_worker(w, fds[1]);
	close(fds[1]);
	*fd_out = fds[0];
	return 0;
}

/* Read the worker's stdout until "READY <name>". */
static int worker_wait_ready(struct worker *w, int fd)
{
	char buf[256], want[64];
	size_t got = 0;
	uint64_t end = now_ns() + READY_TIMEOUT_MS * MS;

	buf[0] = 0;
	snprintf(want, sizeof(want), "READY %s\n", w->name);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = now_ns();
		ssize_t n;

		buf[got] = 0;
		if (strstr(buf, want))
			break;
		if (now >= end || poll(&pfd, 1, (int)((end - now) / MS) + 1) <= 0)
			break;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
		buf[got] = 0;
	}
	close(fd);
	if (!strstr(buf, want)) {
		printf("# worker %s did not become ready (output: \"%s\")\n", w->name, buf);
		return -1;
	}
	return 0;
}

static void worker_kill(struct worker *w)
{
	if (w->pid <= 0)
		return;
	kill(w->pid, SIGKILL);
	waitpid(w->pid, NULL, 0);
	w->pid = 0;
}

/* Start several workers at once (Python's start-up is the slow part). */
static int workers_start(struct worker **ws, int n)
{
	int fds[MAX_WORKERS], i, rc = 0;

	for (i = 0; i < n; i++)
		if (worker_spawn(ws[i], &fds[i]) != 0)
			return -1;
	for (i = 0; i < n; i++)
		if (worker_wait_ready(ws[i], fds[i]) != 0)
			rc = -1;
	return rc;
}

static int worker_start(struct worker *w)
{
	return workers_start(&w, 1);
}

/* SIGTERM is the clean way out; tests use SIGKILL to make a worker "die". */
static void cleanup(void)
{
	int i;

	for (i = 0; i < n_workers; i++)
		if (workers[i]->pid > 0) {
			kill(workers[i]->pid, SIGTERM);
			waitpid(workers[i]->pid, NULL, 0);
			workers[i]->pid = 0;
		}
	if (tmpdir[0])
		test_system("rm -rf '%s'", tmpdir);
}

/* ---- helpers: polling --------------------------------------------------- */

/* One GetLoads call, waited for. Returns 1 with *r filled, 0 if nothing came. */
static int poll_once(struct steer_poller *p, int h, uint64_t timeout_ns,
		     struct steer_poll_result *r)
{
	memset(r, 0, sizeof(*r));
	if (steer_poller_start(p, h, timeout_ns) != 0)
		return 0;
	return steer_poller_next(p, now_ns() + timeout_ns + 5 * SEC, r);
}

static const char *kind_name(enum steer_poll_kind k)
{
	static const char *names[] = { "NONE",	   "OK",      "UNIMPLEMENTED", "UNAVAILABLE",
				       "DEADLINE", "INVALID", "ERROR" };

	return k < STEER_POLL_KINDS ? names[k] : "?";
}

static const char *TWO_RANKS =
	"{\"mode\": \"ok\", \"loads\": ["
	"{\"dp_rank\": 0, \"num_waiting_uncached_tokens\": 4000, \"num_waiting_reqs\": 3,"
	" \"num_running_reqs\": 8, \"token_usage\": 0.4, \"gen_throughput\": 1800.0},"
	"{\"dp_rank\": 1, \"num_waiting_uncached_tokens\": 1000, \"num_waiting_reqs\": 1,"
	" \"num_running_reqs\": 2, \"token_usage\": 0.2, \"gen_throughput\": 1200.0}]}";

static const char *ONE_RANK = "{\"mode\": \"ok\", \"loads\": [{\"dp_rank\": 0,"
			      " \"num_waiting_uncached_tokens\": 7, \"token_usage\": 0.5,"
			      " \"gen_throughput\": 100.0}]}";

/* ---- decode on hand-built messages ---------------------------------------- */

/* Pack a response of n ranks, each with the given values, then decode it. */
static enum steer_poll_kind decode_ranks(size_t n, int32_t uncached, double usage,
					 double throughput, struct steer_load *load, char *why,
					 size_t why_len)
{
	Sglang__Grpc__Scheduler__GetLoadsResponse resp =
		SGLANG__GRPC__SCHEDULER__GET_LOADS_RESPONSE__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad *l = calloc(n + 1, sizeof(*l));
	Sglang__Grpc__Scheduler__SchedulerLoad **lp = calloc(n + 1, sizeof(*lp));
	enum steer_poll_kind kind;
	uint8_t *buf;
	size_t i, len;

	for (i = 0; i < n; i++) {
		sglang__grpc__scheduler__scheduler_load__init(&l[i]);
		l[i].dp_rank = (int32_t)i;
		l[i].num_waiting_uncached_tokens = uncached;
		l[i].num_waiting_reqs = 1;
		l[i].num_running_reqs = 2;
		l[i].token_usage = usage;
		l[i].gen_throughput = throughput;
		lp[i] = &l[i];
	}
	resp.n_loads = n;
	resp.loads = lp;
	resp.dp_rank_count = (int32_t)n;
	len = sglang__grpc__scheduler__get_loads_response__get_packed_size(&resp);
	buf = malloc(len + 1);
	sglang__grpc__scheduler__get_loads_response__pack(&resp, buf);
	kind = steer_poller_decode(buf, len, load, why, why_len);
	free(buf);
	free(lp);
	free(l);
	return kind;
}

static void test_decode_aggregates_ranks(void)
{
	Sglang__Grpc__Scheduler__GetLoadsResponse resp =
		SGLANG__GRPC__SCHEDULER__GET_LOADS_RESPONSE__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad a = SGLANG__GRPC__SCHEDULER__SCHEDULER_LOAD__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad b = SGLANG__GRPC__SCHEDULER__SCHEDULER_LOAD__INIT;
	Sglang__Grpc__Scheduler__SchedulerLoad *lp[] = { &a, &b };
	struct steer_load load;
	uint8_t buf[512];
	char why[200];
	size_t len;

	a.dp_rank = 0;
	a.num_waiting_uncached_tokens = 4000;
	a.num_waiting_reqs = 3;
	a.num_running_reqs = 8;
	a.token_usage = 0.4;
	a.gen_throughput = 1800;
	b.dp_rank = 1;
	b.num_waiting_uncached_tokens = 1000;
	b.num_waiting_reqs = 1;
	b.num_running_reqs = 2;
	b.token_usage = 0.2;
	b.gen_throughput = 1200;
	b.cache_hit_rate = 0.9; /* read by nobody, must not disturb */
	resp.loads = lp;
	resp.n_loads = 2;
	resp.version = "test";
	len = sglang__grpc__scheduler__get_loads_response__pack(&resp, buf);
	CHECK(len < sizeof(buf), "packed %zu", len);
	CHECK(steer_poller_decode(buf, len, &load, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	CHECK(why[0] == 0, "detail on OK: %s", why);
	CHECK(load.ranks == 2, "ranks %u", load.ranks);
	CHECK(load.queued_uncached_tokens == 5000, "uncached %f", load.queued_uncached_tokens);
	CHECK(load.waiting_reqs == 4 && load.running_reqs == 10, "waiting %f running %f",
	      load.waiting_reqs, load.running_reqs);
	CHECK(load.throughput == 3000, "throughput %f", load.throughput);
	CHECK(fabs(load.kv_usage - 0.3) < 1e-12, "kv %f", load.kv_usage);

	/* Fields upstream sends that we do not declare are skipped: append
	 * an unknown length-delimited field 12 to the message. */
	buf[len++] = (12 << 3) | 2;
	buf[len++] = 2;
	buf[len++] = 0x08;
	buf[len++] = 0x01;
	CHECK(steer_poller_decode(buf, len, &load, why, sizeof(why)) == STEER_POLL_OK,
	      "unknown field rejected: %s", why);
	CHECK(load.queued_uncached_tokens == 5000, "uncached %f", load.queued_uncached_tokens);
}

static void test_decode_rejects_bad_messages(void)
{
	static const uint8_t garbage[] = { 0xff, 0xff, 0xff, 0xff };
	struct steer_load load;
	char why[200];

	CHECK(steer_poller_decode(garbage, sizeof(garbage), &load, why, sizeof(why)) ==
		      STEER_POLL_INVALID,
	      "garbage accepted");
	CHECK(strstr(why, "undecodable"), "why: %s", why);
	CHECK(steer_poller_decode(garbage, 0, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "zero bytes (no loads) accepted");
	CHECK(decode_ranks(0, 0, 0, 0, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "empty accepted");
	CHECK(decode_ranks(2, 0, NAN, 1, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "NaN token_usage accepted");
	CHECK(strstr(why, "token_usage"), "why: %s", why);
	CHECK(decode_ranks(1, 0, 0.1, INFINITY, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "infinite throughput accepted");
	CHECK(decode_ranks(1, -5, 0.1, 1, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "negative uncached tokens accepted");
	CHECK(strstr(why, "num_waiting_uncached_tokens"), "why: %s", why);
	CHECK(decode_ranks(1, 0, -0.5, 1, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "negative usage accepted");
}

static void test_decode_bounds_rank_count(void)
{
	struct steer_load load;
	char why[200];

	CHECK(decode_ranks(1024, 1, 0.5, 10, &load, why, sizeof(why)) == STEER_POLL_OK, "%s", why);
	CHECK(load.ranks == 1024 && load.queued_uncached_tokens == 1024, "ranks %u uncached %f",
	      load.ranks, load.queued_uncached_tokens);
	CHECK(decode_ranks(1025, 1, 0.5, 10, &load, why, sizeof(why)) == STEER_POLL_INVALID,
	      "1025 ranks accepted");
	CHECK(why[0], "no reason given");
}

static void test_add_rejects_non_literal_targets(void)
{
	static const char *bad[] = { "localhost:30000",
				     "127.0.0.1",
				     "127.0.0.1:",
				     "127.0.0.1:0",
				     "127.0.0.1:70000",
				     "127.0.0.1:30x",
				     "[::1]30000",
				     "[::1:30000",
				     "::1:30000",
				     "[127.0.0.1]:1",
				     "" };
	size_t i;
	int h;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		h = steer_poller_add(poller, bad[i], NULL, 1000);
		CHECK(h == -EINVAL, "\"%s\" gave %d", bad[i], h);
	}
	h = steer_poller_add(poller, "[::1]:30009", NULL, 1000);
	CHECK(h >= 0, "ipv6 literal refused: %d", h);
	steer_poller_remove(poller, h);
	CHECK(steer_poller_start(poller, h, SEC) == -EINVAL, "removed handle started");
	CHECK(steer_poller_start(poller, 999, SEC) == -EINVAL, "unknown handle started");
	CHECK(!steer_poller_busy(poller, -1), "busy(-1)");
}

/* ---- against real gRPC servers ------------------------------------------- */

static void test_ok_two_ranks_aggregated(void)
{
	struct steer_poll_result r;
	int tag, h, before;

	CHECK(write_state(&w_ok, TWO_RANKS) == 0, "state");
	h = steer_poller_add(poller, w_ok.grpc, &tag, 1000);
	CHECK(h >= 0, "add %d", h);
	before = worker_stat(&w_ok, "getloads");
	CHECK(poll_once(poller, h, CALL_TIMEOUT, &r) == 1, "no result");
	steer_poller_remove(poller, h);
	CHECK(r.kind == STEER_POLL_OK, "kind %s status %d: %s", kind_name(r.kind), r.grpc_status,
	      r.detail);
	CHECK(r.tag == &tag, "tag %p", r.tag);
	CHECK(r.grpc_status == 0 && r.detail[0] == 0, "status %d detail %s", r.grpc_status,
	      r.detail);
	CHECK(r.load.ranks == 2, "ranks %u", r.load.ranks);
	CHECK(r.load.queued_uncached_tokens == 5000, "uncached %f", r.load.queued_uncached_tokens);
	CHECK(r.load.throughput == 3000, "throughput %f", r.load.throughput);
	CHECK(fabs(r.load.kv_usage - 0.3) < 1e-12, "kv %f", r.load.kv_usage);
	CHECK(r.load.waiting_reqs == 4 && r.load.running_reqs == 10, "reqs %f %f",
	      r.load.waiting_reqs, r.load.running_reqs);
	CHECK(r.started_ns > 0 && r.duration_ns > 0 && r.duration_ns < CALL_TIMEOUT,
	      "started %llu duration %llu", (unsigned long long)r.started_ns,
	      (unsigned long long)r.duration_ns);
	CHECK(wait_stat(&w_ok, "getloads", before + 1) >= before + 1, "the worker saw no call");
}

/* The state file is read per call: a rewrite shows in the next poll. */
static void test_state_changes_show_in_next_poll(void)
{
	struct steer_poll_result r;
	int h = steer_poller_add(poller, w_ok.grpc, NULL, 1000);

	CHECK(h >= 0, "add %d", h);
	CHECK(write_state(&w_ok, TWO_RANKS) == 0, "state");
	CHECK(poll_once(poller, h, CALL_TIMEOUT, &r) == 1 && r.kind == STEER_POLL_OK, "first %s",
	      kind_name(r.kind));
	CHECK(r.load.ranks == 2, "ranks %u", r.load.ranks);
	CHECK(write_state(&w_ok, ONE_RANK) == 0, "state");
	CHECK(poll_once(poller, h, CALL_TIMEOUT, &r) == 1 && r.kind == STEER_POLL_OK, "second %s",
	      kind_name(r.kind));
	steer_poller_remove(poller, h);
	CHECK(r.load.ranks == 1 && r.load.queued_uncached_tokens == 7 && r.load.kv_usage == 0.5,
	      "ranks %u uncached %f kv %f", r.load.ranks, r.load.queued_uncached_tokens,
	      r.load.kv_usage);
}

static void test_ipv6_backend(void)
{
	struct steer_poll_result r;
	int h = steer_poller_add(poller, w_v6.grpc, NULL, 1000);

	CHECK(h >= 0, "add %d", h);
	CHECK(write_state(&w_v6, ONE_RANK) == 0, "state");
	CHECK(poll_once(poller, h, CALL_TIMEOUT, &r) == 1, "no result");
	steer_poller_remove(poller, h);
	CHECK(r.kind == STEER_POLL_OK && r.load.queued_uncached_tokens == 7, "kind %s: %s",
	      kind_name(r.kind), r.detail);
}

/* Poll w_ok once in the given state; expect kind. */
static int poll_in_state(const char *state, enum steer_poll_kind want, struct steer_poll_result *r)
{
	int h = steer_poller_add(poller, w_ok.grpc, NULL, 1000), got;

	CHECK_RC(h >= 0, "add %d", h);
	CHECK_RC(write_state(&w_ok, state) == 0, "state");
	got = poll_once(poller, h, CALL_TIMEOUT, r);
	steer_poller_remove(poller, h);
	CHECK_RC(got == 1, "no result for %s", state);
	CHECK_RC(r->kind == want, "state %s: kind %s (want %s), status %d: %s", state,
		 kind_name(r->kind), kind_name(want), r->grpc_status, r->detail);
	return 0;
}

static void test_unimplemented(void)
{
	struct steer_poll_result r;

	CHECK(poll_in_state("{\"mode\": \"unimplemented\"}", STEER_POLL_UNIMPLEMENTED, &r) == 0,
	      "see above");
	CHECK(r.grpc_status == 12, "status %d", r.grpc_status);
	CHECK(strstr(r.detail, "not implemented"), "detail \"%s\"", r.detail);
}

static void test_garbage_is_invalid(void)
{
	struct steer_poll_result r;

	CHECK(poll_in_state("{\"mode\": \"garbage\"}", STEER_POLL_INVALID, &r) == 0, "see above");
	CHECK(r.grpc_status == 0 && strstr(r.detail, "undecodable"), "status %d detail \"%s\"",
	      r.grpc_status, r.detail);
}

static void test_empty_is_invalid(void)
{
	struct steer_poll_result r;

	CHECK(poll_in_state("{\"mode\": \"empty\"}", STEER_POLL_INVALID, &r) == 0, "see above");
	CHECK(strstr(r.detail, "no load"), "detail \"%s\"", r.detail);
}

static void test_bad_numbers_are_invalid(void)
{
	struct steer_poll_result r;

	/* The fake's default invalid rank: token_usage NaN, uncached -5. */
	CHECK(poll_in_state("{\"mode\": \"invalid\"}", STEER_POLL_INVALID, &r) == 0, "see above");
	CHECK(poll_in_state("{\"mode\": \"invalid\", \"loads\": [{\"dp_rank\": 0,"
			    " \"num_waiting_uncached_tokens\": -5, \"token_usage\": 0.1}]}",
			    STEER_POLL_INVALID, &r) == 0,
	      "see above");
	CHECK(strstr(r.detail, "num_waiting_uncached_tokens"), "detail \"%s\"", r.detail);
	CHECK(poll_in_state("{\"mode\": \"ok\", \"loads\": [{\"dp_rank\": 0},"
			    " {\"dp_rank\": 1, \"gen_throughput\": Infinity}]}",
			    STEER_POLL_INVALID, &r) == 0,
	      "see above");
	CHECK(strstr(r.detail, "gen_throughput"), "detail \"%s\"", r.detail);
	CHECK(poll_in_state("{\"mode\": \"ok\", \"loads\": [{\"dp_rank\": 0,"
			    " \"num_running_reqs\": -1}]}",
			    STEER_POLL_INVALID, &r) == 0,
	      "see above");
	/* And back to valid on the same worker. */
	CHECK(poll_in_state(ONE_RANK, STEER_POLL_OK, &r) == 0, "see above");
}

static void test_deadline_when_the_worker_hangs(void)
{
	struct steer_poll_result r;
	int h = steer_poller_add(poller, w_ok.grpc, NULL, 1000), got;

	CHECK(h >= 0, "add %d", h);
	CHECK(write_state(&w_ok, "{\"mode\": \"hang\", \"hang_seconds\": 10}") == 0, "state");
	got = poll_once(poller, h, 500 * MS, &r);
	steer_poller_remove(poller, h);
	write_state(&w_ok, ONE_RANK);
	CHECK(got == 1, "no result");
	CHECK(r.kind == STEER_POLL_DEADLINE, "kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(r.grpc_status == 4, "status %d", r.grpc_status);
	/* Generous: only guards against the deadline not firing (the worker
	 * would answer after 10 s). */
	CHECK(r.duration_ns >= 400 * MS && r.duration_ns < 8 * SEC, "took %llu ms",
	      (unsigned long long)(r.duration_ns / MS));
}

static void test_no_server_fails_cleanly(void)
{
	struct steer_poll_result r;
	int h = steer_poller_add(poller, "127.0.0.99:30000", NULL, 1000), i;

	CHECK(h >= 0, "add %d", h);
	for (i = 0; i < 3; i++) {
		int got = poll_once(poller, h, SEC, &r);

		if (got != 1 ||
		    (r.kind != STEER_POLL_UNAVAILABLE && r.kind != STEER_POLL_DEADLINE)) {
			steer_poller_remove(poller, h);
			CHECK(0, "poll %d: got %d kind %s: %s", i, got, kind_name(r.kind),
			      r.detail);
		}
	}
	steer_poller_remove(poller, h);
	CHECK(r.grpc_status == 14 || r.grpc_status == 4, "status %d", r.grpc_status);
}

static void test_busy_while_in_flight(void)
{
	struct steer_poll_result r;
	int h = steer_poller_add(poller, w_ok.grpc, NULL, 1000), got;

	CHECK(h >= 0, "add %d", h);
	CHECK(write_state(&w_ok, "{\"mode\": \"hang\", \"hang_seconds\": 0.3}") == 0, "state");
	CHECK(!steer_poller_busy(poller, h), "busy before start");
	CHECK(steer_poller_start(poller, h, CALL_TIMEOUT) == 0, "start");
	CHECK(steer_poller_busy(poller, h), "not busy in flight");
	CHECK(steer_poller_start(poller, h, CALL_TIMEOUT) == -EBUSY, "second start not refused");
	got = steer_poller_next(poller, now_ns() + CALL_TIMEOUT + 5 * SEC, &r);
	CHECK(!steer_poller_busy(poller, h), "busy after the result");
	steer_poller_remove(poller, h);
	write_state(&w_ok, ONE_RANK);
	CHECK(got == 1 && r.kind == STEER_POLL_OK, "got %d kind %s: %s", got, kind_name(r.kind),
	      r.detail);
}

/* Nothing in flight: next() idles until its deadline and reports nothing. */
static void test_next_times_out_when_idle(void)
{
	struct steer_poll_result r;
	uint64_t t0 = now_ns();

	CHECK(steer_poller_next(poller, t0 + 200 * MS, &r) == 0, "a result from nowhere");
	CHECK(now_ns() - t0 >= 150 * MS, "returned after %llu ms",
	      (unsigned long long)((now_ns() - t0) / MS));
	CHECK(steer_poller_next(poller, t0, &r) == 0, "past deadline");
}

/* Eight slow backends at once take about one call's time, not eight. The
 * calls hang 2 s each: in sequence they would take 16 s, concurrently 2 s;
 * the bound in between (half of 16 s) leaves room for a loaded machine. */
#define HANG_S 2
static void test_calls_run_concurrently(void)
{
	struct steer_poll_result r;
	int h[NHANG], seen[NHANG] = { 0 }, i, done = 0;
	uint64_t t0, elapsed;
	char state[64];

	snprintf(state, sizeof(state), "{\"mode\": \"hang\", \"hang_seconds\": %d}", HANG_S);
	for (i = 0; i < NHANG; i++) {
		CHECK(write_state(&w_hang[i], state) == 0, "state");
		h[i] = steer_poller_add(poller, w_hang[i].grpc, &seen[i], 1000);
		CHECK(h[i] >= 0, "add %d", h[i]);
	}
	t0 = now_ns();
	for (i = 0; i < NHANG; i++)
		CHECK(steer_poller_start(poller, h[i], 60 * SEC) == 0, "start %d", i);
	while (done < NHANG && steer_poller_next(poller, t0 + 60 * SEC, &r) == 1) {
		CHECK(r.kind == STEER_POLL_OK, "kind %s: %s", kind_name(r.kind), r.detail);
		CHECK(r.tag >= (void *)&seen[0] && r.tag <= (void *)&seen[NHANG - 1], "tag %p",
		      r.tag);
		(*(int *)r.tag)++;
		done++;
	}
	elapsed = now_ns() - t0;
	for (i = 0; i < NHANG; i++)
		steer_poller_remove(poller, h[i]);
	printf("# %d calls of %d s took %llu ms\n", NHANG, HANG_S,
	       (unsigned long long)(elapsed / MS));
	CHECK(done == NHANG, "%d results", done);
	for (i = 0; i < NHANG; i++)
		CHECK(seen[i] == 1, "backend %d reported %d times", i, seen[i]);
	CHECK(elapsed >= (HANG_S * SEC * 9) / 10 && elapsed < NHANG * HANG_S * SEC / 2,
	      "%d x %d s calls took %llu ms", NHANG, HANG_S, (unsigned long long)(elapsed / MS));
}

/*
 * Poll as the daemon does, a call every period (deadline 80 % of it), for up
 * to bound_ns. Returns the time from the start to the first OK, or -1 when
 * none came; counts the failed results in *failures (may be NULL).
 */
static int64_t poll_until_ok(int h, uint64_t period_ns, uint64_t bound_ns, int *failures)
{
	uint64_t t0 = now_ns(), end = t0 + bound_ns;
	struct steer_poll_result r;

	while (now_ns() < end) {
		uint64_t next = now_ns() + period_ns;

		if (!steer_poller_busy(poller, h) &&
		    steer_poller_start(poller, h, period_ns * 8 / 10) != 0)
			return -1;
		while (steer_poller_next(poller, next < end ? next : end, &r) == 1) {
			if (r.kind == STEER_POLL_OK)
				return (int64_t)(now_ns() - t0);
			if (failures)
				(*failures)++;
		}
	}
	return -1;
}

/*
 * A restarted worker is polled successfully again. Waits for that with a
 * generous bound rather than counting intervals: the reconnect backoff is
 * capped at max_backoff_ms (1 s here) but gRPC adds up to 20 % jitter, and
 * a loaded machine adds more. That the cap holds at all is
 * test_reconnect_backoff_is_capped's business.
 */
static void test_reconnects_after_restart(void)
{
	int h = steer_poller_add(poller, w_restart.grpc, NULL, 1000), failures = 0;
	int64_t took;

	CHECK(h >= 0, "add %d", h);
	CHECK(write_state(&w_restart, ONE_RANK) == 0, "state");
	took = poll_until_ok(h, SEC, 30 * SEC, NULL);
	if (took < 0) {
		steer_poller_remove(poller, h);
		CHECK(0, "not OK before the restart");
	}
	worker_kill(&w_restart);
	/* Ten seconds dead: gRPC's default backoff would have grown to 4-8 s. */
	took = poll_until_ok(h, SEC, 10 * SEC, &failures);
	if (took >= 0 || failures == 0) {
		steer_poller_remove(poller, h);
		CHECK(0, "dead worker: OK after %lld ms, %d failures",
		      (long long)(took / (int64_t)MS), failures);
	}
	if (worker_start(&w_restart) != 0) {
		steer_poller_remove(poller, h);
		CHECK(0, "restart failed");
	}
	took = poll_until_ok(h, SEC, 30 * SEC, NULL);
	steer_poller_remove(poller, h);
	CHECK(took >= 0, "not OK again within 30 s of the restart");
	printf("# OK again %lld ms after the restart\n", (long long)(took / (int64_t)MS));
}

/*
 * The channel reconnects at least once per max_backoff_ms however long the
 * backend has been failing. A listener that accepts and hangs up (never a
 * valid HTTP/2 server) counts the attempts while calls keep failing. Over
 * 10 s a 200 ms cap allows about 50 (measured: 41 in 8 s); the same backoff
 * without the cap (100 ms growing by 1.6x) makes about 10 (measured: 9 in
 * 8 s). The threshold between leaves a factor of two on either side.
 */
static void test_reconnect_backoff_is_capped(void)
{
	struct test_backend b;
	int h, attempts;

	CHECK(test_backend_start(&b, "127.0.0.13:30000", "nothttp2") == 0, "listener");
	h = steer_poller_add(poller, "127.0.0.13:30000", NULL, 200);
	if (h < 0) {
		test_backend_stop(&b);
		CHECK(0, "add %d", h);
	}
	poll_until_ok(h, 100 * MS, 10 * SEC, NULL);
	steer_poller_remove(poller, h);
	attempts = __atomic_load_n(&b.accepted, __ATOMIC_RELAXED);
	test_backend_stop(&b);
	printf("# %d connection attempts in 10 s with a 200 ms backoff cap\n", attempts);
	CHECK(attempts >= 22, "only %d connection attempts in 10 s", attempts);
}

/* A removed handle's call never reports, even when its slot is reused. */
static void test_remove_swallows_the_result(void)
{
	struct steer_poll_result r;
	int tag_old, tag_new, h, h2, before, got;

	CHECK(write_state(&w_hang[0], "{\"mode\": \"hang\", \"hang_seconds\": 1}") == 0, "state");
	CHECK(write_state(&w_ok, ONE_RANK) == 0, "state");
	before = worker_stat(&w_hang[0], "getloads");
	h = steer_poller_add(poller, w_hang[0].grpc, &tag_old, 1000);
	CHECK(h >= 0, "add %d", h);
	CHECK(steer_poller_start(poller, h, 5 * SEC) == 0, "start");
	/* Let the call reach the worker, then remove the handle. */
	got = steer_poller_next(poller, now_ns() + 300 * MS, &r);
	CHECK(got == 0, "early result, kind %s", kind_name(r.kind));
	CHECK(wait_stat(&w_hang[0], "getloads", before + 1) >= before + 1, "call never arrived");
	steer_poller_remove(poller, h);
	CHECK(!steer_poller_busy(poller, h), "removed handle busy");

	h2 = steer_poller_add(poller, w_ok.grpc, &tag_new, 1000);
	CHECK(h2 >= 0, "add %d", h2);
	CHECK(steer_poller_start(poller, h2, CALL_TIMEOUT) == 0, "start");
	got = steer_poller_next(poller, now_ns() + CALL_TIMEOUT + 5 * SEC, &r);
	CHECK(got == 1 && r.tag == &tag_new && r.kind == STEER_POLL_OK, "got %d tag %p kind %s",
	      got, r.tag, kind_name(r.kind));
	/* Well past the removed call's hang: still nothing. */
	got = steer_poller_next(poller, now_ns() + 1500 * MS, &r);
	steer_poller_remove(poller, h2);
	CHECK(got == 0, "removed handle reported: tag %p (old %p) kind %s", r.tag, (void *)&tag_old,
	      kind_name(r.kind));
}

/* Free with calls in flight returns at once; LSan checks the leaks at exit.
 * A second poller keeps working while the first goes (grpc_init counts). */
static void test_free_with_calls_in_flight(void)
{
	struct steer_poller *p = steer_poller_new(), *p2 = steer_poller_new();
	struct steer_poll_result r;
	uint64_t t0;
	int i, h, got;

	CHECK(p && p2, "new");
	for (i = 0; i < 3; i++) {
		write_state(&w_hang[i], "{\"mode\": \"hang\", \"hang_seconds\": 10}");
		h = steer_poller_add(p, w_hang[i].grpc, NULL, 1000);
		CHECK(h >= 0, "add %d", h);
		CHECK(steer_poller_start(p, h, 20 * SEC) == 0, "start");
	}
	CHECK(steer_poller_add(p, "127.0.0.99:30000", NULL, 1000) >= 0, "idle handle");
	CHECK(steer_poller_next(p, now_ns() + 300 * MS, &r) == 0, "early result");
	t0 = now_ns();
	steer_poller_free(p);
	/* Generous: waiting for the calls would take their 10 s hang. */
	CHECK(now_ns() - t0 < 7 * SEC, "free took %llu ms",
	      (unsigned long long)((now_ns() - t0) / MS));

	h = steer_poller_add(p2, w_ok.grpc, NULL, 1000);
	CHECK(h >= 0, "add %d", h);
	got = poll_once(p2, h, CALL_TIMEOUT, &r);
	steer_poller_free(p2);
	for (i = 0; i < 3; i++)
		write_state(&w_hang[i], ONE_RANK);
	CHECK(got == 1 && r.kind == STEER_POLL_OK, "second poller: got %d kind %s: %s", got,
	      kind_name(r.kind), r.detail);
}

/* The fake's traffic port: the name, then the connection stays open. */
static void test_fake_worker_traffic_port(void)
{
	char name[4]; /* exactly "ok\n": test_connect reads until the buffer is full */
	int before = worker_stat(&w_ok, "accepted"), rc;

	rc = test_connect(w_ok.traffic, false, name, sizeof(name), NULL, NULL);
	CHECK(rc == 0, "connect %d", rc);
	CHECK(strcmp(name, "ok\n") == 0, "name \"%s\"", name);
	CHECK(wait_stat(&w_ok, "accepted", before + 1) == before + 1, "accepted %d, was %d",
	      worker_stat(&w_ok, "accepted"), before);
}

/* ---- setup ------------------------------------------------------------------ */

static int setup(void)
{
	struct worker *all[3 + NHANG];
	const char *env;
	char name[32], addr[64];
	int i, n = 0;

	if (testenv_init("poller") != 0)
		return -1;
	env = getenv("STEER_TOP");
	if (env)
		snprintf(top, sizeof(top), "%s", env);
	else if (!getcwd(top, sizeof(top)))
		return -1;
	env = getenv("STEER_BUILD");
	if (env)
		snprintf(pb2_dir, sizeof(pb2_dir), "%s/py", env);
	else
		snprintf(pb2_dir, sizeof(pb2_dir), "%s/build/san/py", top);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/smg-steer-poller-XXXXXX");
	if (!mkdtemp(tmpdir)) {
		tmpdir[0] = 0;
		return -1;
	}
	atexit(cleanup);

	worker_init(&w_ok, "ok", "127.0.0.11:30000", "127.0.0.11:8000");
	worker_init(&w_v6, "v6", "[::1]:30001", NULL);
	worker_init(&w_restart, "restart", "127.0.0.12:30000", NULL);
	all[n++] = &w_ok;
	all[n++] = &w_v6;
	all[n++] = &w_restart;
	for (i = 0; i < NHANG; i++) {
		snprintf(name, sizeof(name), "hang%d", i);
		snprintf(addr, sizeof(addr), "127.0.0.%d:30000", 21 + i);
		worker_init(&w_hang[i], name, addr, NULL);
		all[n++] = &w_hang[i];
	}
	if (workers_start(all, n) != 0)
		return -1;
	poller = steer_poller_new();
	return poller ? 0 : -1;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_decode_aggregates_ranks);
	TAP_RUN(test_decode_rejects_bad_messages);
	TAP_RUN(test_decode_bounds_rank_count);
	TAP_RUN(test_add_rejects_non_literal_targets);
	TAP_RUN(test_ok_two_ranks_aggregated);
	TAP_RUN(test_state_changes_show_in_next_poll);
	TAP_RUN(test_ipv6_backend);
	TAP_RUN(test_unimplemented);
	TAP_RUN(test_garbage_is_invalid);
	TAP_RUN(test_empty_is_invalid);
	TAP_RUN(test_bad_numbers_are_invalid);
	TAP_RUN(test_deadline_when_the_worker_hangs);
	TAP_RUN(test_no_server_fails_cleanly);
	TAP_RUN(test_busy_while_in_flight);
	TAP_RUN(test_next_times_out_when_idle);
	TAP_RUN(test_calls_run_concurrently);
	TAP_RUN(test_reconnects_after_restart);
	TAP_RUN(test_reconnect_backoff_is_capped);
	TAP_RUN(test_remove_swallows_the_result);
	TAP_RUN(test_free_with_calls_in_flight);
	TAP_RUN(test_fake_worker_traffic_port);
	steer_poller_free(poller);
	poller = NULL;
	return tap_done();
}
