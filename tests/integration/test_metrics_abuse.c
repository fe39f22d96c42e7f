// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_metrics_abuse.c - /metrics and /healthz stay available while hundreds
 * of clients hold connections open sending nothing or half a request, or
 * keep opening such connections. First the guard's choice of a connection
 * to drop (pure bookkeeping), then the real libmicrohttpd server in a
 * private network namespace, scraped with the curl command line tool.
 *
 * Assertions are about availability, not speed: every scrape must answer
 * within a generous bound (curl -m 20), which the server without the guard
 * missed by minutes (64 connections, then a queue behind the abusers).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane/dataplane.h"
#include "metrics/metrics.h"
#include "metrics/guard.h"
#include "tap.h"
#include "testenv.h"

#define SEC 1000000000ULL
#define MS 1000000ULL
#define LISTEN "127.0.0.1:9466"
#define BASE_URL "http://127.0.0.1:9466"
#define N_PARTIAL 300
#define N_IDLE 200

static uint64_t now_ns(void)
{
	return steer_monotonic_ns();
}

/* ---- The guard's choice ------------------------------------------------------- */

static void test_guard_admits_up_to_the_limit(void)
{
	struct steer_guard *g = steer_guard_new(3, 6, 5 * SEC);
	struct steer_guard_conn *c[4], *victim = NULL;
	int owners[4], i;

	CHECK(g, "new");
	for (i = 0; i < 3; i++) {
		victim = steer_guard_admit(g, &owners[i], 100 + (uint64_t)i, &c[i]);
		if (victim || !c[i])
			break;
	}
	if (i < 3) {
		steer_guard_free(g);
		CHECK(0, "connection %d: victim %p self %p", i, (void *)victim, (void *)c[i]);
	}
	CHECK(steer_guard_open(g) == 3, "open %zu", steer_guard_open(g));
	/* The fourth makes room by dropping the one waiting longest: the first. */
	victim = steer_guard_admit(g, &owners[3], 200, &c[3]);
	CHECK(victim == c[0] && steer_guard_owner(victim) == &owners[0], "victim %p, want %p",
	      (void *)victim, (void *)c[0]);
	CHECK(steer_guard_open(g) == 3 && steer_guard_dropped(g) == 1, "open %zu dropped %llu",
	      steer_guard_open(g), (unsigned long long)steer_guard_dropped(g));
	/* Closing the dropped one does not count it twice. */
	steer_guard_closed(g, c[0]);
	CHECK(steer_guard_open(g) == 3, "open %zu after closing the victim", steer_guard_open(g));
	steer_guard_closed(g, c[1]);
	CHECK(steer_guard_open(g) == 2, "open %zu after a close", steer_guard_open(g));
	steer_guard_free(g); /* frees c[2] and c[3] */
}

static void test_guard_spares_answers_in_progress(void)
{
	struct steer_guard *g = steer_guard_new(2, 8, 5 * SEC);
	struct steer_guard_conn *a, *b, *c, *d, *victim;
	int o[4];

	CHECK(g, "new");
	CHECK(!steer_guard_admit(g, &o[0], 100, &a) && !steer_guard_admit(g, &o[1], 200, &b),
	      "admit");
	/* The older one is being answered: the younger, idle one goes. */
	steer_guard_answering(a, 300);
	victim = steer_guard_admit(g, &o[2], 400, &c);
	CHECK(victim == b, "victim %p, want the idle %p", (void *)victim, (void *)b);
	/* Both left are answered in time: the newcomer itself is refused. */
	steer_guard_answering(c, 500);
	victim = steer_guard_admit(g, &o[3], 600, &d);
	CHECK(victim == d, "victim %p, want the newcomer %p", (void *)victim, (void *)d);
	steer_guard_closed(g, d);
	/* An answer overdue (a client that does not read) may go. */
	victim = steer_guard_admit(g, &o[3], 300 + 5 * SEC + 1, &d);
	CHECK(victim == a, "victim %p, want the overdue %p", (void *)victim, (void *)a);
	/* Back to idle: a candidate again, by the time its answer ended. */
	steer_guard_idle(c, 300 + 6 * SEC);
	steer_guard_closed(g, a);
	steer_guard_closed(g, b);
	CHECK(steer_guard_open(g) == 2, "open %zu", steer_guard_open(g));
	steer_guard_free(g);
}

static void test_guard_cap_refuses_beyond_tracking(void)
{
	struct steer_guard *g = steer_guard_new(1, 2, SEC);
	struct steer_guard_conn *a, *b, *c;
	int o;

	CHECK(g, "new");
	steer_guard_admit(g, &o, 1, &a);
	steer_guard_admit(g, &o, 2, &b); /* drops a, which stays tracked */
	CHECK(a && b && steer_guard_open(g) == 1, "open %zu", steer_guard_open(g));
	CHECK(!steer_guard_admit(g, &o, 3, &c) && !c, "a third beyond cap 2 was tracked");
	steer_guard_free(g);
}

/* ---- The server, scraped with curl ---------------------------------------- */

/* GET url with curl; returns the HTTP status (0: no answer), *ms the time taken. */
static int scrape(const char *url, unsigned int *ms)
{
	char cmd[512], out[64] = "";
	uint64_t t0 = now_ns();
	int status = 0;
	FILE *p;

	*ms = 0;
	/* -m 20: generous; the server without the guard kept /healthz away for minutes. */
	snprintf(cmd, sizeof(cmd),
		 "curl -sS --noproxy '*' -m 20 -o /dev/null -w '%%{http_code}' '%s' 2>/dev/null",
		 url);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	if (!fgets(out, sizeof(out), p))
		out[0] = 0;
	pclose(p);
	*ms = (unsigned int)((now_ns() - t0) / MS);
	if (sscanf(out, "%d", &status) != 1)
		status = 0;
	return status;
}

static struct steer_metrics *start_fresh(void)
{
	struct steer_metrics_snapshot snap = { 0 };
	struct steer_metrics *m = NULL;
	char err[256] = "";

	if (steer_metrics_start(LISTEN, &m, err, sizeof(err)) != 0) {
		printf("# start: %s\n", err);
		return NULL;
	}
	/* A publish now, valid for an hour: /healthz answers 200. */
	snap.last_publish_ns = now_ns();
	snap.healthy_within_ns = 3600 * SEC;
	steer_metrics_update(m, &snap);
	return m;
}

/* A connected socket that has sent the given bytes (maybe none), or -1. */
static int open_abuser(const char *bytes)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	if (test_sockaddr(LISTEN, &ss, &len) != 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) != 0 ||
	    (bytes[0] && send(fd, bytes, strlen(bytes), MSG_NOSIGNAL) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -1;
	if (rl.rlim_cur < 4096)
		rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 2048 ? 0 : -1;
}

/* Every scrape of /healthz and /metrics answers 200; prints the slowest. */
static int check_scrapes_answer(int rounds, const char *when)
{
	static const char *const paths[] = { "/healthz", "/metrics" };
	unsigned int ms = 0, worst = 0;
	char url[128];
	int i, k, st;

	for (i = 0; i < rounds; i++)
		for (k = 0; k < 2; k++) {
			snprintf(url, sizeof(url), "%s%s", BASE_URL, paths[k]);
			st = scrape(url, &ms);
			CHECK_RC(st == 200, "%s: %s answered %d after %u ms", when, paths[k], st,
				 ms);
			if (ms > worst)
				worst = ms;
		}
	printf("# %s: %d scrapes, slowest %u ms\n", when, 2 * rounds, worst);
	return 0;
}

/* Held connections the server has closed (EOF or reset seen). */
static int count_closed(const int *fds, int n)
{
	int i, closed = 0;
	char c;

	for (i = 0; i < n; i++) {
		ssize_t r = recv(fds[i], &c, 1, MSG_DONTWAIT);

		closed += r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
	}
	return closed;
}

static int check_held_connections(struct steer_metrics *m)
{
	static int fds[N_PARTIAL + N_IDLE];
	int i, n = 0, rc, closed;

	for (i = 0; i < N_PARTIAL + N_IDLE; i++) {
		/* Half a request line, or nothing at all, and then silence. */
		fds[n] = open_abuser(i < N_PARTIAL ? "GET /metr" : "");
		if (fds[n] >= 0)
			n++;
	}
	rc = n == N_PARTIAL + N_IDLE ? 0 : -1;
	if (rc == 0)
		rc = check_scrapes_answer(3, "500 connections held open");
	/* The server dropped the abusers to make room (or timed them out). */
	closed = count_closed(fds, n);
	printf("# %d of %d held connections closed by the server\n", closed, n);
	for (i = 0; i < n; i++)
		close(fds[i]);
	(void)m;
	CHECK_RC(n == N_PARTIAL + N_IDLE, "opened only %d connections", n);
	CHECK_RC(rc == 0, "scrapes failed");
	CHECK_RC(closed >= n - STEER_METRICS_MAX_CONNECTIONS, "only %d of %d closed", closed, n);
	return 0;
}

static void test_scrapes_answer_while_connections_are_held(void)
{
	struct steer_metrics *m;

	CHECK(raise_fd_limit() == 0, "cannot raise RLIMIT_NOFILE to 2048");
	m = start_fresh();
	CHECK(m, "start failed");
	check_held_connections(m);
	steer_metrics_stop(m);
}

/* Clients that keep connecting, send half a request line and hang up. */
struct churn {
	volatile int stop;
	int opened;
};

static void *churn_loop(void *arg)
{
	struct churn *c = arg;
	int ring[256], i;

	for (i = 0; i < 256; i++)
		ring[i] = -1;
	for (i = 0; !c->stop; i = (i + 1) % 256) {
		if (ring[i] >= 0)
			close(ring[i]); /* each stays open for 256 connects */
		ring[i] = open_abuser("GET /healthz HT");
		if (ring[i] >= 0)
			c->opened++;
	}
	for (i = 0; i < 256; i++)
		if (ring[i] >= 0)
			close(ring[i]);
	return NULL;
}

static void test_scrapes_answer_during_a_connection_flood(void)
{
	struct churn c = { 0 };
	struct steer_metrics *m;
	uint64_t t0;
	pthread_t thr;
	int rc;

	CHECK(raise_fd_limit() == 0, "cannot raise RLIMIT_NOFILE to 2048");
	m = start_fresh();
	CHECK(m, "start failed");
	t0 = now_ns();
	if (pthread_create(&thr, NULL, churn_loop, &c) != 0) {
		steer_metrics_stop(m);
		CHECK(0, "pthread_create");
	}
	/* Let the flood fill every slot before the first scrape. */
	while (c.opened < 2 * STEER_METRICS_MAX_TRACKED)
		usleep(1000);
	rc = check_scrapes_answer(5, "connection flood");
	c.stop = 1;
	pthread_join(thr, NULL);
	steer_metrics_stop(m);
	printf("# the flood opened %d connections in %.1f s\n", c.opened,
	       (double)(now_ns() - t0) / 1e9);
	CHECK(rc == 0, "scrapes failed during the flood");
}

/* A connection that sends nothing is closed by the timeout, even alone. */
static void test_idle_connection_times_out(void)
{
	struct steer_metrics *m = start_fresh();
	uint64_t t0 = now_ns();
	struct pollfd p;
	char c;
	int fd;
	ssize_t r = -1;

	CHECK(m, "start failed");
	fd = open_abuser("");
	if (fd < 0) {
		steer_metrics_stop(m);
		CHECK(0, "connect");
	}
	p = (struct pollfd){ .fd = fd, .events = POLLIN };
	/* Generous: the timeout is STEER_METRICS_TIMEOUT_S. */
	if (poll(&p, 1, 60 * 1000) == 1)
		r = recv(fd, &c, 1, 0);
	close(fd);
	steer_metrics_stop(m);
	printf("# idle connection closed after %llu ms\n",
	       (unsigned long long)((now_ns() - t0) / MS));
	CHECK(r == 0, "not closed by the server within 60 s (recv %zd)", r);
}

int main(void)
{
	if (testenv_init("metrics-abuse") != 0)
		return tap_setup_failed();
	TAP_RUN(test_guard_admits_up_to_the_limit);
	TAP_RUN(test_guard_spares_answers_in_progress);
	TAP_RUN(test_guard_cap_refuses_beyond_tracking);
	TAP_RUN(test_scrapes_answer_while_connections_are_held);
	TAP_RUN(test_scrapes_answer_during_a_connection_flood);
	TAP_RUN(test_idle_connection_times_out);
	return tap_done();
}
