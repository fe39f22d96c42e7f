// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_norel.c - smoke test of the issue-10 ablation without the release hook
 * (bpf/steer_norel.bpf.c, user/norel.c; bench-only, smg-steerd never loads
 * it), with the real programs in a throwaway cgroup and network namespace:
 * it loads over the real data plane and steers; live counts and records are
 * settled by the per-poll walk, not at close; a refused connect is counted by
 * the reset signal at once (fast ejection after exactly STEER_FAIL_EJECT);
 * a connect the walk sees established resets the count; and no record leaks
 * after 100,000 connects that are refused by the backend, by the hook, or
 * reset.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane.h"
#include "norel.h"
#include "tap.h"
#include "testenv.h"

#define TTL_LONG (600ULL * 1000000000ULL)

static struct steer_dp *dp;
static struct steer_norel *nr;
static char err[512];
static struct test_backend be_a, be_b;
static struct steer_addr vip, vip_ej, vip_dead, vip_empty, vip_reset, addr_a, addr_b, dead_be,
	reset_be;
static int reset_lfd = -1;

static int publish(const struct steer_addr *v, const struct steer_addr *be, int n,
		   const double *base)
{
	struct steer_dp_cost cost[4];
	struct steer_dp_service s = { .vip = *v,
				      .configured = be,
				      .n_configured = (size_t)n,
				      .table = cost,
				      .n_table = base ? (size_t)n : 0,
				      .ttl_ns = TTL_LONG,
				      .allow_empty = !base };
	int i;

	for (i = 0; base && i < n; i++) {
		cost[i].addr = be[i];
		cost[i].base_wait_ns = base[i];
		cost[i].ns_per_token = 1000;
	}
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

static uint32_t slot_of(const struct steer_addr *v, const struct steer_addr *be)
{
	uint32_t s = UINT32_MAX;

	steer_dp_slot(dp, v, be, &s);
	return s;
}

static size_t tracked(void)
{
	size_t n = 0;

	steer_dp_sockets_tracked(dp, &n);
	return n;
}

static int poll_once(void)
{
	struct steer_norel_pass p;

	return steer_norel_poll(nr, &p, err, sizeof(err));
}

/* Connect to a, keep the socket in *fd (or close it); first byte in *tag. */
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

static void test_loads_steers_and_settles_at_the_poll(void)
{
	const double base[2] = { 0, 1e9 };
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	size_t before = tracked();
	uint32_t s = slot_of(&vip, &addr_a);
	int fd = -1, tag, k;

	CHECK(publish(&vip, (const struct steer_addr[]){ addr_a, addr_b }, 2, base) == 0,
	      "publish: %s", err);
	s = slot_of(&vip, &addr_a);
	CHECK(connect_to(&vip, &fd, &tag) == 0 && tag == 'a', "steered to %c, want a", tag);
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 &&
		      peer.sin_addr.s_addr == vip.ip6[3] && peer.sin_port == vip.port,
	      "getpeername does not report the virtual address");
	CHECK(steer_dp_live(dp, s) == 1 && tracked() == before + 1, "live %lld, records %zu",
	      (long long)steer_dp_live(dp, s), tracked());
	/* Open across several polls: never taken for gone, found by the walk. */
	for (k = 0; k < 3; k++) {
		struct steer_norel_pass p;

		CHECK(steer_norel_poll(nr, &p, err, sizeof(err)) == 0, "poll: %s", err);
		CHECK(steer_dp_live(dp, s) == 1 && tracked() == before + 1,
		      "poll %d settled an open socket: live %lld", k,
		      (long long)steer_dp_live(dp, s));
		CHECK(p.matched == 1 && p.visited >= 2,
		      "poll %d: walk met %llu sockets, %llu steered", k,
		      (unsigned long long)p.visited, (unsigned long long)p.matched);
	}
	close(fd);
	/* No release hook: the count stays until a poll no longer sees it. */
	CHECK(steer_dp_live(dp, s) == 1, "live %lld right after close: is release attached?",
	      (long long)steer_dp_live(dp, s));
	CHECK(poll_once() == 0, "poll: %s", err);
	CHECK(steer_dp_live(dp, s) == 0 && tracked() == before,
	      "one poll after close: live %lld, records %zu (before %zu)",
	      (long long)steer_dp_live(dp, s), tracked(), before);
	/* Opened and closed between two polls: settled at the second. */
	for (k = 0; k < 10; k++)
		CHECK(connect_to(&vip, NULL, &tag) == 0 && tag == 'a', "connect %d", k);
	CHECK(poll_once() == 0 && poll_once() == 0, "poll: %s", err);
	CHECK(steer_dp_live(dp, s) == 0 && tracked() == before, "two polls: live %lld, records %zu",
	      (long long)steer_dp_live(dp, s), tracked());
}

static void test_refusals_eject_at_once_and_a_success_seen_by_the_walk_resets(void)
{
	const double base[2] = { 0, 1e9 };
	uint32_t dead;
	size_t before = tracked();
	int k, tag, failed = 0, rc, fd = -1;
	struct test_backend revived;

	CHECK(publish(&vip_ej, (const struct steer_addr[]){ dead_be, addr_b }, 2, base) == 0,
	      "publish: %s", err);
	dead = slot_of(&vip_ej, &dead_be);
	for (k = 0; k < 20; k++) {
		rc = connect_to(&vip_ej, NULL, &tag);
		if (rc == -ECONNREFUSED)
			failed++;
		else
			CHECK(rc == 0 && tag == 'b', "connect %d: rc %d tag %d", k, rc, tag);
	}
	CHECK(failed == STEER_FAIL_EJECT, "%d connects failed, want %d", failed, STEER_FAIL_EJECT);
	CHECK(steer_dp_live(dp, dead) == 0, "refused sockets still live: %lld",
	      (long long)steer_dp_live(dp, dead));
	CHECK(poll_once() == 0 && poll_once() == 0 && tracked() == before,
	      "records %zu, before %zu", tracked(), before);
	/* Readmitted, refused fewer times than the threshold, then alive: a
	 * connect that the walk sees established resets the count. */
	steer_dp_readmit(dp, dead);
	for (k = 0; k < STEER_FAIL_EJECT - 1; k++)
		CHECK(connect_to(&vip_ej, NULL, &tag) == -ECONNREFUSED, "failure %d", k);
	CHECK(test_backend_start(&revived, "127.0.0.62:9062", "x") == 0, "listener");
	rc = connect_to(&vip_ej, &fd, &tag);
	CHECK(rc == 0 && tag == 'x', "the revived backend was not chosen: rc %d tag %d", rc, tag);
	CHECK(steer_dp_fails(dp, dead) == STEER_FAIL_EJECT - 1, "fails %u before the walk",
	      steer_dp_fails(dp, dead));
	CHECK(poll_once() == 0, "poll: %s", err);
	close(fd);
	test_backend_stop(&revived);
	CHECK(steer_dp_fails(dp, dead) == 0, "fails %u after the walk saw a connect through",
	      steer_dp_fails(dp, dead));
	CHECK(poll_once() == 0 && tracked() == before,
	      "records %zu one poll after close, before %zu", tracked(), before);
}

/* A connect to vip_reset completes into the listener's backlog; accepting
 * it and closing with SO_LINGER 0 resets it. */
static int reset_one(void)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd = -1, c, rc = connect_to(&vip_reset, &fd, NULL);

	if (rc != 0)
		return rc;
	c = accept4(reset_lfd, NULL, NULL, SOCK_CLOEXEC);
	if (c >= 0) {
		setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c);
	}
	close(fd);
	return c >= 0 ? 0 : -errno;
}

static void test_no_record_leaks_after_refused_and_reset_connects(void)
{
	const double zero = 0;
	size_t before = tracked();
	long k, odd = 0, n = 100000;
	uint32_t s_dead, s_reset;

	CHECK(publish(&vip_dead, &dead_be, 1, &zero) == 0, "publish: %s", err);
	CHECK(publish(&vip_empty, &dead_be, 1, NULL) == 0, "publish: %s", err);
	CHECK(publish(&vip_reset, &reset_be, 1, &zero) == 0, "publish: %s", err);
	s_dead = slot_of(&vip_dead, &dead_be);
	s_reset = slot_of(&vip_reset, &reset_be);
	for (k = 0; k < n; k++) {
		int rc = k % 3 == 0   ? connect_to(&vip_dead, NULL, NULL)
			 : k % 3 == 1 ? connect_to(&vip_empty, NULL, NULL)
				      : reset_one();

		odd += k % 3 == 2 ? rc != 0 : rc != -ECONNREFUSED;
		if (steer_dp_fails(dp, s_dead) >= STEER_FAIL_EJECT - 1)
			steer_dp_readmit(dp, s_dead);
		if (k % 5000 == 4999) /* the daemon polls meanwhile */
			CHECK(poll_once() == 0, "poll: %s", err);
	}
	CHECK(odd == 0, "%ld connects ended otherwise than refused or reset", odd);
	CHECK(poll_once() == 0 && poll_once() == 0, "poll: %s", err);
	CHECK(tracked() == before, "%zu records held, %zu before %ld connects", tracked(), before,
	      n);
	CHECK(steer_dp_live(dp, s_dead) == 0 && steer_dp_live(dp, s_reset) == 0,
	      "live: dead %lld, reset %lld", (long long)steer_dp_live(dp, s_dead),
	      (long long)steer_dp_live(dp, s_reset));
}

static int setup(void)
{
	const char *build = getenv("STEER_BUILD");
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char obj[512];
	int one = 1;

	if (testenv_init("norel") != 0)
		return -1;
	if (test_backend_start(&be_a, "127.0.5.1:9101", "a") != 0 ||
	    test_backend_start(&be_b, "127.0.5.2:9102", "b") != 0)
		return -1;
	steer_addr_parse("127.0.5.1:9101", &addr_a, err, sizeof(err));
	steer_addr_parse("127.0.5.2:9102", &addr_b, err, sizeof(err));
	steer_addr_parse("127.0.0.62:9062", &dead_be, err, sizeof(err)); /* nothing listens */
	steer_addr_parse("127.0.5.3:9103", &reset_be, err, sizeof(err));
	steer_addr_parse("127.0.0.150:8150", &vip, err, sizeof(err));
	steer_addr_parse("127.0.0.151:8151", &vip_ej, err, sizeof(err));
	steer_addr_parse("127.0.0.152:8152", &vip_dead, err, sizeof(err));
	steer_addr_parse("127.0.0.152:8153", &vip_empty, err, sizeof(err));
	steer_addr_parse("127.0.0.152:8154", &vip_reset, err, sizeof(err));
	reset_lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = reset_be.port;
	sa.sin_addr.s_addr = reset_be.ip6[3];
	setsockopt(reset_lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(reset_lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(reset_lfd, 64) != 0)
		return -1;
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(),
				   .cgroup = testenv_cgroup(),
				   .own = true };
	if (steer_dp_open(&o, &dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	snprintf(obj, sizeof(obj), "%s/steer_norel.bpf.o", build ? build : "build/san");
	if (steer_norel_open(obj, testenv_pin_dir(), 0, &nr, err, sizeof(err)) != 0) {
		fprintf(stderr, "norel: %s\n", err);
		return -1;
	}
	return 0;
}

int main(void)
{
	int rc = setup();

	if (rc == 0) {
		TAP_RUN(test_loads_steers_and_settles_at_the_poll);
		TAP_RUN(test_refusals_eject_at_once_and_a_success_seen_by_the_walk_resets);
		TAP_RUN(test_no_record_leaks_after_refused_and_reset_connects);
	}
	steer_norel_close(nr);
	if (dp) {
		steer_dp_detach(dp, err, sizeof(err));
		steer_dp_close(dp);
	}
	if (reset_lfd >= 0)
		close(reset_lfd);
	test_backend_stop(&be_a);
	test_backend_stop(&be_b);
	return rc == 0 ? tap_done() : tap_setup_failed();
}
