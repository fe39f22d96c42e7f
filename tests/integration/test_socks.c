// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_socks.c - the lean data plane at scale and under churn, with the real
 * programs in a throwaway cgroup and network namespace: the water-fill over
 * 256 equal backends is exact, per-socket records never leak, whatever way a
 * connect ends, fast ejection counts what fails (refused, or reset before an
 * answer), and live counts stay exact while releases race republishes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"

#define TTL_LONG (600ULL * 1000000000ULL)
#define FARM_MAX 300

static struct steer_dp *dp;
static char err[512];

/* ---- a farm of listeners on one epoll thread ---------------------------------- */

enum farm_mode {
	FARM_BYTE,	 /* write one byte, the listener's tag, then close */
	FARM_RESET,	 /* close at once with SO_LINGER 0: the client sees a reset */
	FARM_BYTE_RESET, /* write the tag, then close with SO_LINGER 0 */
};

static struct farm {
	int n, epfd;
	int fd[FARM_MAX];
	unsigned char tag[FARM_MAX];
	enum farm_mode mode[FARM_MAX];
	pthread_t thr;
	volatile int stop;
} farm;

static void *farm_loop(void *arg)
{
	(void)arg;
	while (!farm.stop) {
		struct epoll_event ev[32];
		int n = epoll_wait(farm.epfd, ev, 32, 100), i;

		for (i = 0; i < n; i++) {
			int k = (int)ev[i].data.u32, c;

			while ((c = accept4(farm.fd[k], NULL, NULL,
					    SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
				if (farm.mode[k] != FARM_RESET && write(c, &farm.tag[k], 1) < 0) {
					/* the client went away first */
				}
				if (farm.mode[k] != FARM_BYTE) {
					struct linger lg = { .l_onoff = 1, .l_linger = 0 };

					setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
				}
				close(c);
			}
		}
	}
	return NULL;
}

/* A listener at addr answering with tag (or a reset); its steer_addr in *out. */
static int farm_add(const char *addr, unsigned char tag, enum farm_mode mode,
		    struct steer_addr *out)
{
	struct sockaddr_storage ss;
	struct epoll_event ev = { .events = EPOLLIN };
	socklen_t len;
	int one = 1, fd, k = farm.n;

	if (k >= FARM_MAX || test_sockaddr(addr, &ss, &len) != 0 ||
	    steer_addr_parse(addr, out, err, sizeof(err)) != 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 4096) != 0) {
		close(fd);
		return -1;
	}
	ev.data.u32 = (uint32_t)k;
	if (epoll_ctl(farm.epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
		close(fd);
		return -1;
	}
	farm.fd[k] = fd;
	farm.tag[k] = tag;
	farm.mode[k] = mode;
	farm.n++;
	return 0;
}

static void farm_stop(void)
{
	int i;

	farm.stop = 1;
	pthread_join(farm.thr, NULL);
	for (i = 0; i < farm.n; i++)
		close(farm.fd[i]);
	close(farm.epfd);
}

/* ---- helpers ----------------------------------------------------------------- */

/* Connect to a steer_addr (IPv4); fd in *fd_out (or closed when NULL) and the
 * answer byte in *tag (or -1). Returns 0 or -errno of connect. */
static int connect_to(const struct steer_addr *a, int *fd_out, int *tag)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = a->port };
	unsigned char b;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	sa.sin_addr.s_addr = a->ip6[3];
	if (tag)
		*tag = -1;
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		rc = -errno;
	else if (tag && read(fd, &b, 1) == 1)
		*tag = b;
	if (fd_out && rc == 0)
		*fd_out = fd;
	else
		close(fd);
	return rc;
}

static int publish(const struct steer_addr *vip, const struct steer_addr *cfg, int n_cfg,
		   const int *in_table, const double *base, const double *npt, int n)
{
	struct steer_dp_cost cost[STEER_MAX_BACKENDS];
	struct steer_dp_service s = { .vip = *vip,
				      .configured = cfg,
				      .n_configured = (size_t)n_cfg,
				      .table = cost,
				      .n_table = (size_t)n,
				      .ttl_ns = TTL_LONG,
				      .allow_empty = n == 0 };
	int i;

	for (i = 0; i < n; i++) {
		cost[i].addr = cfg[in_table ? in_table[i] : i];
		cost[i].base_wait_ns = base[i];
		cost[i].ns_per_token = npt[i];
	}
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

static uint32_t slot_of(const struct steer_addr *vip, const struct steer_addr *be)
{
	uint32_t s = UINT32_MAX;

	steer_dp_slot(dp, vip, be, &s);
	return s;
}

static size_t tracked(void)
{
	size_t n = 0;

	steer_dp_sockets_tracked(dp, &n);
	return n;
}

/* ---- 1. the water-fill over 256 equal backends is exact ----------------------- */

static struct steer_addr vip_eq, farm_eq[STEER_MAX_BACKENDS];

/* Independent reference: every entry in table order (equal bases keep the
 * configured order), 128-bit scores, the first minimum. */
static int ref_pick(const uint64_t *base, const uint64_t *npt, const unsigned __int128 *inflight,
		    int n)
{
	unsigned __int128 best = 0;
	int i, pick = -1;

	for (i = 0; i < n; i++) {
		unsigned __int128 sc = base[i] + inflight[i] * npt[i];

		if (pick < 0 || sc < best) {
			best = sc;
			pick = i;
		}
	}
	return pick;
}

static int water_fill_equal(const double *npt_d, int connects)
{
	static double base[STEER_MAX_BACKENDS];
	uint64_t b[STEER_MAX_BACKENDS], npt[STEER_MAX_BACKENDS];
	unsigned __int128 inflight[STEER_MAX_BACKENDS] = { 0 };
	int i, k;

	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		base[i] = 1e6;
		b[i] = 1000000;
		npt[i] = (uint64_t)npt_d[i];
	}
	CHECK_RC(publish(&vip_eq, farm_eq, STEER_MAX_BACKENDS, NULL, base, npt_d,
			 STEER_MAX_BACKENDS) == 0,
		 "publish: %s", err);
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		steer_dp_inflight_exchange(dp, slot_of(&vip_eq, &farm_eq[i]));
	for (k = 0; k < connects; k++) {
		int want = ref_pick(b, npt, inflight, STEER_MAX_BACKENDS), got, rc;

		rc = connect_to(&vip_eq, NULL, &got);
		CHECK_RC(rc == 0, "connect %d: %s", k, strerror(-rc));
		CHECK_RC(got == want, "connect %d landed on backend %d, the reference says %d", k,
			 got, want);
		inflight[want] += STEER_DEFAULT_CREDIT_TOKENS;
	}
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		CHECK_RC(steer_dp_inflight_read(dp, slot_of(&vip_eq, &farm_eq[i])) ==
				 (uint64_t)inflight[i],
			 "backend %d: in flight %llu, reference %llu", i,
			 (unsigned long long)steer_dp_inflight_read(dp,
								    slot_of(&vip_eq, &farm_eq[i])),
			 (unsigned long long)inflight[i]);
	return 0;
}

static void test_equal_shape_at_256_backends_is_exact(void)
{
	static double npt[STEER_MAX_BACKENDS];
	static const double speeds[4] = { 125000, 250000, 500000, 1000000 };
	int i;

	/* Equal speeds: every connect is a tie broken by table position. */
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		npt[i] = 500000;
	CHECK(water_fill_equal(npt, 3 * STEER_MAX_BACKENDS) == 0, "equal speeds, see above");
	/* Equal bases, four speeds: faster backends take proportionally more. */
	for (i = 0; i < STEER_MAX_BACKENDS; i++)
		npt[i] = speeds[(i * 7) % 4];
	CHECK(water_fill_equal(npt, 3 * STEER_MAX_BACKENDS) == 0, "four speeds, see above");
}

/* ---- 2. no record leaks, however a connect ends ------------------------------- */

static struct steer_addr vip_dead, vip_empty, vip_reset, vip_ok, dead_be, reset_be, ok_be;

static void test_no_record_leaks_after_failed_refused_and_reset_connects(void)
{
	const double zero = 0, npt = 1000;
	size_t before = tracked();
	long n[3] = { 0 }, odd = 0, retried = 0, k;
	uint32_t s_dead, s_reset;
	uint64_t steered_dead, steered_reset;
	struct steer_svc_stats st;

	CHECK(publish(&vip_dead, &dead_be, 1, NULL, &zero, &npt, 1) == 0, "publish: %s", err);
	CHECK(publish(&vip_empty, &dead_be, 1, NULL, NULL, NULL, 0) == 0, "publish: %s", err);
	CHECK(publish(&vip_reset, &reset_be, 1, NULL, &zero, &npt, 1) == 0, "publish: %s", err);
	s_dead = slot_of(&vip_dead, &dead_be);
	s_reset = slot_of(&vip_reset, &reset_be);
	steered_dead = steer_dp_slot_counters(dp, s_dead)->steered;
	steered_reset = steer_dp_slot_counters(dp, slot_of(&vip_reset, &reset_be))->steered;
	for (k = 0; k < 100000; k++) {
		const struct steer_addr *to = k % 3 == 0   ? &vip_dead
					      : k % 3 == 1 ? &vip_empty
							   : &vip_reset;
		int fd = -1, tag, rc = connect_to(to, k % 3 == 2 ? &fd : NULL, &tag);

		n[k % 3]++;
		/* The dead backend would be ejected after STEER_FAIL_EJECT of these
		 * (and the connects refused by the hook): put it back each time, so
		 * that they keep failing in TCP. So would the resetting one, whose
		 * reset sometimes beats connect() back to the application. */
		if (steer_dp_fails(dp, s_dead) >= STEER_FAIL_EJECT - 1)
			steer_dp_readmit(dp, s_dead);
		if (steer_dp_fails(dp, s_reset) >= STEER_FAIL_EJECT - 1)
			steer_dp_readmit(dp, s_reset);
		if (k % 3 == 2 && rc == 0) { /* reset: the read saw it */
			odd += tag != -1;
			close(fd);
		} else if (rc != -ECONNREFUSED && !(k % 3 == 2 && rc == -ECONNRESET)) {
			/* (a reset can beat connect() back to the application) */
			if (odd < 5)
				printf("# connect %ld (kind %ld): %s\n", k, k % 3, strerror(-rc));
			odd++;
		}
		if (k % 48 == 0) { /* a failed socket connected again: its record moves */
			struct sockaddr_in sa = { .sin_family = AF_INET,
						  .sin_port = vip_dead.port };

			sa.sin_addr.s_addr = vip_dead.ip6[3];
			fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			odd += connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			odd += connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			close(fd);
			steer_dp_readmit(dp, s_dead);
			retried++;
		}
	}
	CHECK(odd == 0, "%ld connects ended otherwise than refused or reset", odd);
	CHECK(tracked() == before, "%zu socket records held, %zu before 100000 connects", tracked(),
	      before);
	CHECK(steer_dp_live(dp, slot_of(&vip_dead, &dead_be)) == 0, "dead backend: %lld live",
	      (long long)steer_dp_live(dp, slot_of(&vip_dead, &dead_be)));
	CHECK(steer_dp_live(dp, slot_of(&vip_reset, &reset_be)) == 0,
	      "resetting backend: %lld live",
	      (long long)steer_dp_live(dp, slot_of(&vip_reset, &reset_be)));
	CHECK(steer_dp_slot_counters(dp, slot_of(&vip_dead, &dead_be))->steered - steered_dead ==
		      (uint64_t)(n[0] + 2 * retried),
	      "dead backend steered %llu, want %ld",
	      (unsigned long long)(steer_dp_slot_counters(dp, slot_of(&vip_dead, &dead_be))
					   ->steered -
				   steered_dead),
	      n[0] + 2 * retried);
	CHECK(steer_dp_slot_counters(dp, slot_of(&vip_reset, &reset_be))->steered - steered_reset ==
		      (uint64_t)n[2],
	      "resetting backend steered %llu, want %ld (fails %u)",
	      (unsigned long long)(steer_dp_slot_counters(dp, slot_of(&vip_reset, &reset_be))
					   ->steered -
				   steered_reset),
	      n[2], steer_dp_fails(dp, slot_of(&vip_reset, &reset_be)));
	CHECK(steer_dp_service_stats(dp, &vip_empty, &st) == 0 && st.refused == (uint64_t)n[1],
	      "refused %llu, want %ld", (unsigned long long)st.refused, n[1]);
}

/* A socket whose steered connect failed, connected again to another virtual
 * address: reported as that one, counted live there once, released once. */
static void test_a_failed_socket_steered_again_is_counted_once(void)
{
	const double zero = 0, npt = 1000;
	struct sockaddr_in sa = { .sin_family = AF_INET }, peer;
	socklen_t plen = sizeof(peer);
	uint32_t s_ok = slot_of(&vip_ok, &ok_be), s_dead = slot_of(&vip_dead, &dead_be);
	unsigned char b;
	int fd;

	CHECK(publish(&vip_ok, &ok_be, 1, NULL, &zero, &npt, 1) == 0, "publish: %s", err);
	s_ok = slot_of(&vip_ok, &ok_be);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = vip_dead.port;
	sa.sin_addr.s_addr = vip_dead.ip6[3];
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno == ECONNREFUSED,
	      "first connect should be refused by the dead backend");
	CHECK(steer_dp_live(dp, s_dead) == 1, "the failed attempt is live until released: %lld",
	      (long long)steer_dp_live(dp, s_dead));
	sa.sin_port = vip_ok.port;
	sa.sin_addr.s_addr = vip_ok.ip6[3];
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "reconnect: %s",
	      strerror(errno));
	CHECK(read(fd, &b, 1) == 1 && b == 7, "answer from the wrong backend");
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 &&
		      peer.sin_addr.s_addr == vip_ok.ip6[3] && peer.sin_port == vip_ok.port,
	      "getpeername does not report the second virtual address");
	CHECK(steer_dp_live(dp, s_dead) == 0 && steer_dp_live(dp, s_ok) == 1,
	      "live dead=%lld ok=%lld, want 0 and 1", (long long)steer_dp_live(dp, s_dead),
	      (long long)steer_dp_live(dp, s_ok));
	close(fd);
	CHECK(steer_dp_live(dp, s_ok) == 0, "live %lld after close",
	      (long long)steer_dp_live(dp, s_ok));
}

/* ---- fast ejection -------------------------------------------------------------- */

static struct steer_addr vip_ej, ej_be[2];

/* A dead backend that looks best is chosen STEER_FAIL_EJECT times, then no
 * more until a publish or a readmission; fewer failures never eject it, and
 * one connect that gets through resets the count. */
static void test_a_dead_backend_is_ejected_after_a_few_failed_connects(void)
{
	const double base[2] = { 0, 1e9 }, npt[2] = { 1, 1 };
	struct test_backend revived;
	uint32_t dead;
	int k, tag, failed = 0, rc;

	CHECK(publish(&vip_ej, ej_be, 2, NULL, base, npt, 2) == 0, "publish: %s", err);
	dead = slot_of(&vip_ej, &ej_be[0]);
	for (k = 0; k < 20; k++) {
		rc = connect_to(&vip_ej, NULL, &tag);
		if (rc == -ECONNREFUSED)
			failed++;
		else
			CHECK(rc == 0 && tag == 9, "connect %d: rc %d tag %d", k, rc, tag);
	}
	CHECK(failed == STEER_FAIL_EJECT, "%d connects failed, want %d", failed, STEER_FAIL_EJECT);
	CHECK(steer_dp_fails(dp, dead) == STEER_FAIL_EJECT, "fails %u", steer_dp_fails(dp, dead));
	/* A publish puts it back: the same again, and no more. */
	CHECK(publish(&vip_ej, ej_be, 2, NULL, base, npt, 2) == 0, "publish: %s", err);
	for (k = 0, failed = 0; k < 20; k++)
		failed += connect_to(&vip_ej, NULL, &tag) == -ECONNREFUSED;
	CHECK(failed == STEER_FAIL_EJECT, "after a publish %d failed, want %d", failed,
	      STEER_FAIL_EJECT);
	/* Readmitted, fails fewer times than the threshold, comes back to life:
	 * still chosen, and the count starts over. */
	steer_dp_readmit(dp, dead);
	for (k = 0; k < STEER_FAIL_EJECT - 1; k++)
		CHECK(connect_to(&vip_ej, NULL, &tag) == -ECONNREFUSED, "failure %d", k);
	CHECK(test_backend_start(&revived, "127.0.0.62:9062", "x") == 0, "listener");
	rc = connect_to(&vip_ej, NULL, &tag);
	test_backend_stop(&revived);
	CHECK(rc == 0 && tag == 'x', "the revived backend was not chosen: rc %d tag %d", rc, tag);
	CHECK(steer_dp_fails(dp, dead) == 0, "fails %u after a connect got through",
	      steer_dp_fails(dp, dead));
}

static struct steer_addr vip_rst, rst_be[2], vip_late, late_be;

/* A backend that accepts and resets at once, before answering, fails its
 * connects as a dead one does: STEER_FAIL_EJECT of them, then no more. */
static void test_a_backend_that_resets_at_once_is_ejected_like_a_dead_one(void)
{
	const double base[2] = { 0, 1e9 }, npt[2] = { 1, 1 };
	int k, tag, failed = 0, rc;
	uint32_t rst;

	CHECK(publish(&vip_rst, rst_be, 2, NULL, base, npt, 2) == 0, "publish: %s", err);
	rst = slot_of(&vip_rst, &rst_be[0]);
	for (k = 0; k < 20; k++) {
		rc = connect_to(&vip_rst, NULL, &tag);
		if (rc == 0 && tag == 11)
			continue;
		/* A reset seen by the read, or one that beat connect() back. */
		CHECK(tag == -1 && (rc == 0 || rc == -ECONNRESET), "connect %d: rc %d tag %d", k,
		      rc, tag);
		failed++;
	}
	CHECK(failed == STEER_FAIL_EJECT, "%d connects were reset, want %d", failed,
	      STEER_FAIL_EJECT);
	CHECK(steer_dp_fails(dp, rst) == STEER_FAIL_EJECT, "fails %u", steer_dp_fails(dp, rst));
}

/* A backend that answers and then resets got its connects through: its
 * count stays 0 and it keeps being chosen. */
static void test_a_reset_after_an_answer_byte_is_no_failure(void)
{
	const double zero = 0, npt = 1;
	int k, tag, rc;

	CHECK(publish(&vip_late, &late_be, 1, NULL, &zero, &npt, 1) == 0, "publish: %s", err);
	for (k = 0; k < 20; k++) {
		rc = connect_to(&vip_late, NULL, &tag);
		CHECK(rc == 0 && tag == 12, "connect %d: rc %d tag %d", k, rc, tag);
	}
	CHECK(steer_dp_fails(dp, slot_of(&vip_late, &late_be)) == 0, "fails %u",
	      steer_dp_fails(dp, slot_of(&vip_late, &late_be)));
}

/* ---- 3. releases racing republishes ------------------------------------------- */

#define RACE_NB 8
#define RACE_HOLD 24

static struct steer_addr vip_race, race_be[RACE_NB];
static int race_open[RACE_NB]; /* sockets held open per backend, atomic */

struct holder {
	int rounds, failures;
	int fd[RACE_HOLD], tag[RACE_HOLD]; /* still open at the end */
};

static void *hold_and_release(void *arg)
{
	struct holder *h = arg;
	int *fd = h->fd, *tag = h->tag, i, r;

	for (i = 0; i < RACE_HOLD; i++)
		fd[i] = -1;
	for (r = 0; r < h->rounds; r++) {
		i = r % RACE_HOLD;
		if (fd[i] >= 0) {
			__atomic_fetch_sub(&race_open[tag[i]], 1, __ATOMIC_RELAXED);
			close(fd[i]);
			fd[i] = -1;
		}
		if (connect_to(&vip_race, &fd[i], &tag[i]) != 0 || tag[i] < 0 ||
		    tag[i] >= RACE_NB) {
			h->failures++;
			if (fd[i] >= 0)
				close(fd[i]);
			fd[i] = -1;
			continue;
		}
		__atomic_fetch_add(&race_open[tag[i]], 1, __ATOMIC_RELAXED);
	}
	return NULL; /* what is still open stays open, counted in race_open */
}

static struct holder holders[2] = { { .rounds = 12000 }, { .rounds = 12000 } };

static int live_matches(char *what, size_t len)
{
	int i;

	for (i = 0; i < RACE_NB; i++) {
		int64_t live = steer_dp_live(dp, slot_of(&vip_race, &race_be[i]));

		if (live != __atomic_load_n(&race_open[i], __ATOMIC_RELAXED)) {
			snprintf(what, len, "backend %d: live %lld, open %d", i, (long long)live,
				 race_open[i]);
			return -1;
		}
	}
	return 0;
}

/* The cookie of a socket held open, or 0. */
static uint64_t held_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t len = sizeof(c);

	return fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_COOKIE, &c, &len) == 0 ? c : 0;
}

static bool cookie_held(uint64_t c)
{
	int k, i;

	for (k = 0; k < 2; k++)
		for (i = 0; i < RACE_HOLD; i++)
			if (holders[k].fd[i] >= 0 && held_cookie(holders[k].fd[i]) == c)
				return true;
	return false;
}

/* When the counts disagree: each backend's counters, and every live record of
 * the race's service whose socket is not held open (a release that did not
 * find or settle it), so that a failure says which side is wrong. */
static void race_dump(void)
{
	size_t len = (size_t)STEER_SOCK_RECORDS * sizeof(struct steer_sock), i, stray = 0;
	char path[PATH_MAX];
	const struct steer_sock *r;
	int fd, b;
	void *p;

	for (b = 0; b < RACE_NB; b++) {
		uint32_t s = slot_of(&vip_race, &race_be[b]);
		const struct steer_slot *c = steer_dp_slot_counters(dp, s);

		printf("# backend %d slot %u: live %lld closed %llu gen %u, open %d\n", b, s,
		       (long long)c->live, (unsigned long long)c->closed, c->gen, race_open[b]);
	}
	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_SOCKS);
	fd = bpf_obj_get(path);
	p = fd >= 0 ? mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
	if (p == MAP_FAILED) {
		printf("# cannot map %s\n", path);
		if (fd >= 0)
			close(fd);
		return;
	}
	for (r = p, i = 0; i < STEER_SOCK_RECORDS; i++) {
		uint64_t c = __atomic_load_n(&r[i].cookie, __ATOMIC_RELAXED);

		if (c && (r[i].flags & STEER_SOCK_LIVE) && !cookie_held(c) && stray++ < 16)
			printf("# record %zu: cookie %llu slot %u gen %u flags %#x, no socket "
			       "held\n",
			       i, (unsigned long long)c, r[i].slot, r[i].slot_gen, r[i].flags);
	}
	printf("# %zu live records of no held socket\n", stray);
	munmap(p, len);
	close(fd);
}

static int64_t ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/*
 * Live counts equal the sockets held open, once every release has run. A
 * release runs when the socket's file loses its last reference, which is not
 * always the close() that the test returned from: anything else holding the
 * file for a moment (another process reading /proc/PID/fd, as ss -p and lsof
 * do) makes the last fput, and the release, its own, a little later. So wait
 * for the counts with a generous bound; a release that is lost stays a failure.
 */
static int live_settles(char *what, size_t len)
{
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (live_matches(what, len) != 0) {
		if (ms_since(&t0) > 10000) {
			race_dump();
			return -1;
		}
		usleep(1000);
	}
	if (ms_since(&t0) > 0)
		printf("# live counts settled %lld ms after the last close\n",
		       (long long)ms_since(&t0));
	return 0;
}

static void test_releases_racing_republishes_keep_live_exact(void)
{
	struct holder *h = holders;
	int subset[RACE_NB], i, round = 0, fails = 0;
	double base[RACE_NB], npt[RACE_NB];
	bool joined[2] = { false, false };
	pthread_t t[2];
	char what[128];

	for (i = 0; i < RACE_NB; i++) {
		base[i] = 0;
		npt[i] = 1000;
	}
	CHECK(publish(&vip_race, race_be, RACE_NB, NULL, base, npt, RACE_NB) == 0, "publish: %s",
	      err);
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, hold_and_release, &h[i]);
	while (!joined[0] || !joined[1]) {
		/* Every publish changes the order; every other one leaves half the
		 * backends out, whose sockets still close meanwhile. */
		int n = round % 2 ? RACE_NB / 2 : RACE_NB;

		for (i = 0; i < n; i++) {
			subset[i] = (i + round) % RACE_NB;
			base[i] = (double)((i * 37 + round * 11) % 97) * 1e5;
		}
		if (publish(&vip_race, race_be, RACE_NB, subset, base, npt, n) != 0)
			fails++;
		if (round % 4 == 0)
			for (i = 0; i < RACE_NB; i++) /* the daemon's drains too */
				steer_dp_inflight_exchange(dp, slot_of(&vip_race, &race_be[i]));
		round++;
		for (i = 0; i < 2; i++)
			if (!joined[i])
				joined[i] = pthread_tryjoin_np(t[i], NULL) == 0;
	}
	CHECK(fails == 0, "%d publishes failed: %s", fails, err);
	CHECK(h[0].failures + h[1].failures == 0, "%d connects failed",
	      h[0].failures + h[1].failures);
	CHECK(round > 20, "only %d publishes raced the connects", round);
	CHECK(live_settles(what, sizeof(what)) == 0, "after %d publishes: %s", round, what);
}

static void test_holders_closing_brings_live_to_zero(void)
{
	size_t before = tracked(), n = 0;
	char what[128];
	int i, k;

	for (k = 0; k < 2; k++)
		for (i = 0; i < RACE_HOLD; i++)
			if (holders[k].fd[i] >= 0) {
				__atomic_fetch_sub(&race_open[holders[k].tag[i]], 1,
						   __ATOMIC_RELAXED);
				close(holders[k].fd[i]);
				holders[k].fd[i] = -1;
				n++;
			}
	CHECK(n > 0, "no socket was left open to close");
	CHECK(live_settles(what, sizeof(what)) == 0, "after closing %zu held sockets: %s", n, what);
	CHECK(tracked() + n == before, "%zu records held, %zu before closing %zu sockets",
	      tracked(), before, n);
}

static int setup(void)
{
	char a[64];
	int i;

	if (testenv_init("socks") != 0)
		return -1;
	farm.epfd = epoll_create1(EPOLL_CLOEXEC);
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		snprintf(a, sizeof(a), "127.0.4.1:%d", 20000 + i);
		if (farm_add(a, (unsigned char)i, FARM_BYTE, &farm_eq[i]) != 0)
			return -1;
	}
	for (i = 0; i < RACE_NB; i++) {
		snprintf(a, sizeof(a), "127.0.4.3:%d", 22000 + i);
		if (farm_add(a, (unsigned char)i, FARM_BYTE, &race_be[i]) != 0)
			return -1;
	}
	if (farm_add("127.0.4.2:21000", 0, FARM_RESET, &reset_be) != 0 ||
	    farm_add("127.0.4.4:23000", 7, FARM_BYTE, &ok_be) != 0 ||
	    farm_add("127.0.4.5:24000", 9, FARM_BYTE, &ej_be[1]) != 0 ||
	    farm_add("127.0.4.6:25000", 0, FARM_RESET, &rst_be[0]) != 0 ||
	    farm_add("127.0.4.6:25001", 11, FARM_BYTE, &rst_be[1]) != 0 ||
	    farm_add("127.0.4.7:26000", 12, FARM_BYTE_RESET, &late_be) != 0 ||
	    pthread_create(&farm.thr, NULL, farm_loop, NULL) != 0)
		return -1;
	steer_addr_parse("127.0.0.61:9061", &dead_be, err, sizeof(err)); /* nothing listens */
	steer_addr_parse("127.0.0.101:8100", &vip_eq, err, sizeof(err));
	steer_addr_parse("127.0.0.102:8101", &vip_dead, err, sizeof(err));
	steer_addr_parse("127.0.0.102:8102", &vip_empty, err, sizeof(err));
	steer_addr_parse("127.0.0.102:8103", &vip_reset, err, sizeof(err));
	steer_addr_parse("127.0.0.102:8105", &vip_ok, err, sizeof(err));
	steer_addr_parse("127.0.0.103:8104", &vip_race, err, sizeof(err));
	steer_addr_parse("127.0.0.104:8106", &vip_ej, err, sizeof(err));
	steer_addr_parse("127.0.0.62:9062", &ej_be[0], err, sizeof(err)); /* dead, then revived */
	steer_addr_parse("127.0.0.105:8107", &vip_rst, err, sizeof(err));
	steer_addr_parse("127.0.0.105:8108", &vip_late, err, sizeof(err));
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(),
				   .cgroup = testenv_cgroup(),
				   .own = true };
	if (steer_dp_open(&o, &dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	return 0;
}

int main(void)
{
	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_equal_shape_at_256_backends_is_exact);
	TAP_RUN(test_no_record_leaks_after_failed_refused_and_reset_connects);
	TAP_RUN(test_a_failed_socket_steered_again_is_counted_once);
	TAP_RUN(test_a_dead_backend_is_ejected_after_a_few_failed_connects);
	TAP_RUN(test_a_backend_that_resets_at_once_is_ejected_like_a_dead_one);
	TAP_RUN(test_a_reset_after_an_answer_byte_is_no_failure);
	TAP_RUN(test_releases_racing_republishes_keep_live_exact);
	TAP_RUN(test_holders_closing_brings_live_to_zero);
	if (dp) {
		steer_dp_detach(dp, err, sizeof(err));
		steer_dp_close(dp);
	}
	farm_stop();
	return tap_done();
}
