// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_dataplane.c - the real BPF programs, attached to a throwaway cgroup in
 * a private network namespace, steering real connects to real listeners.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"

#define NB 16			/* IPv4 backends 127.0.0.11.. :9001.. */
#define VIP4 "127.0.0.100:8000" /* a decoy listener sits here: no SYN may reach it */
#define VIP6 "[2001:db8::100]:8000"
#define TTL_LONG (600ULL * 1000000000ULL)

static struct steer_dp *dp;
static struct test_backend be[NB], be6[2], decoy, direct;
static struct steer_addr vip4, vip6, addr4[NB], addr6[2];
static char err[512];

static int open_dp(void)
{
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(),
				   .cgroup = testenv_cgroup(),
				   .own = true };

	return steer_dp_open(&o, &dp, err, sizeof(err));
}

/* Publish the IPv4 service: backends idx[0..n) with the given costs; all NB
 * backends configured. */
static int publish4(const int *idx, const double *base_ns, const double *npt, int n, uint64_t ttl,
		    bool allow_empty)
{
	struct steer_dp_cost cost[NB];
	struct steer_dp_service s = {
		.vip = vip4,
		.configured = addr4,
		.n_configured = NB,
		.table = cost,
		.n_table = (size_t)n,
		.ttl_ns = ttl,
		.allow_empty = allow_empty,
	};
	int i;

	for (i = 0; i < n; i++) {
		cost[i].addr = addr4[idx[i]];
		cost[i].base_wait_ns = base_ns[i];
		cost[i].ns_per_token = npt[i];
	}
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

static uint32_t slot4(int i)
{
	uint32_t s = UINT32_MAX;

	steer_dp_slot(dp, &vip4, &addr4[i], &s);
	return s;
}

static void zero_inflight(void)
{
	int i;

	for (i = 0; i < NB; i++)
		steer_dp_inflight_exchange(dp, slot4(i));
}

static int backend_index(const char *name)
{
	return name[0] == 'b' ? atoi(name + 1) : -1;
}

static int connect_name(const char *addr, char *name, size_t len)
{
	return test_connect(addr, false, name, len, NULL, NULL);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_steers_to_best_and_reports_vip(void)
{
	int idx[3] = { 0, 1, 2 };
	double base[3] = { 3e6, 1e6, 2e6 }, npt[3] = { 500000, 500000, 500000 };
	struct sockaddr_storage peer;
	char name[32], p[64];
	int rc;

	CHECK(publish4(idx, base, npt, 3, TTL_LONG, false) == 0, "publish: %s", err);
	zero_inflight();
	rc = test_connect(VIP4, false, name, sizeof(name), &peer, NULL);
	CHECK(rc == 0, "connect: %s", strerror(-rc));
	CHECK(strcmp(name, "b1") == 0, "landed on '%s', want b1 (least base wait)", name);
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(strcmp(p, VIP4) == 0, "getpeername says %s, want the virtual address", p);
}

/*
 * Independent reference of the kernel's choice: a stable sort of the table by
 * base wait, then a full scan in 128-bit integers, first minimum wins.
 */
struct ref_entry {
	int backend;
	uint64_t base, npt;
};

static void ref_sort(struct ref_entry *e, int n)
{
	int i, j;

	for (i = 1; i < n; i++) /* insertion sort: stable */
		for (j = i; j > 0 && e[j - 1].base > e[j].base; j--) {
			struct ref_entry t = e[j];

			e[j] = e[j - 1];
			e[j - 1] = t;
		}
}

static int ref_pick(const struct ref_entry *e, int n, const unsigned __int128 *inflight)
{
	unsigned __int128 best = 0;
	int i, pick = -1;

	for (i = 0; i < n; i++) {
		unsigned __int128 sc = e[i].base + inflight[e[i].backend] * e[i].npt;

		if (pick < 0 || sc < best) {
			best = sc;
			pick = i;
		}
	}
	return e[pick].backend;
}

static int run_against_reference(const int *idx, const double *base, const double *npt, int n,
				 int connects)
{
	unsigned __int128 inflight[NB] = { 0 };
	struct ref_entry e[NB];
	int i, k;

	CHECK_RC(publish4(idx, base, npt, n, TTL_LONG, false) == 0, "publish: %s", err);
	zero_inflight();
	for (i = 0; i < n; i++) {
		e[i].backend = idx[i];
		e[i].base = (uint64_t)base[i];
		e[i].npt = (uint64_t)npt[i];
	}
	ref_sort(e, n);
	for (k = 0; k < connects; k++) {
		char name[32];
		int want = ref_pick(e, n, inflight), rc = connect_name(VIP4, name, sizeof(name));

		CHECK_RC(rc == 0, "connect %d: %s", k, strerror(-rc));
		CHECK_RC(backend_index(name) == want, "connect %d landed on %s, reference says b%d",
			 k, name, want);
		inflight[want] += STEER_DEFAULT_CREDIT_TOKENS;
	}
	for (i = 0; i < n; i++)
		CHECK_RC(steer_dp_inflight_read(dp, slot4(idx[i])) == (uint64_t)inflight[idx[i]],
			 "b%d in-flight %llu, reference %llu", idx[i],
			 (unsigned long long)steer_dp_inflight_read(dp, slot4(idx[i])),
			 (unsigned long long)inflight[idx[i]]);
	return 0;
}

static void test_water_filling_matches_reference(void)
{
	/* Unsorted on purpose; two equal bases to exercise ties. Throughputs
	 * 2000, 4000, 1000, 8000 and 2000 tok/s. */
	int idx[5] = { 3, 0, 2, 1, 4 };
	double base[5] = { 2e6, 0, 3e5, 2e5, 3e5 };
	double npt[5] = { 125000, 500000, 1000000, 250000, 500000 };

	CHECK(run_against_reference(idx, base, npt, 5, 60) == 0, "see above");
}

static void test_early_exit_in_kernel_equals_full_scan(void)
{
	/* Sixteen backends, spread bases: most connects stop early in the
	 * kernel; the reference always scans everything. */
	int idx[NB], i;
	double base[NB], npt[NB];
	unsigned seed = 7;

	for (i = 0; i < NB; i++) {
		idx[i] = (i * 7) % NB;
		base[i] = (double)(rand_r(&seed) % 40) * 1e5;
		npt[i] = 50000.0 + (double)(rand_r(&seed) % 20) * 50000.0;
	}
	CHECK(run_against_reference(idx, base, npt, NB, 150) == 0, "see above");
}

struct hammer {
	int connects;
	int failures;
};

static void *hammer_thread(void *arg)
{
	struct hammer *h = arg;
	int i;

	for (i = 0; i < h->connects; i++) {
		char name[32];

		if (connect_name(VIP4, name, sizeof(name)) != 0 || backend_index(name) < 0)
			h->failures++;
	}
	return NULL;
}

static void test_concurrent_connects_lose_no_credit(void)
{
	int idx[4] = { 0, 1, 2, 3 };
	double base[4] = { 0, 0, 0, 0 }, npt[4] = { 1000, 1000, 1000, 1000 };
	struct hammer h[2] = { { 400, 0 }, { 400, 0 } };
	uint64_t drained = 0, remaining = 0, steered_before = 0, steered_after = 0;
	bool joined[2] = { false, false };
	pthread_t t[2];
	int i;

	CHECK(publish4(idx, base, npt, 4, TTL_LONG, false) == 0, "publish: %s", err);
	zero_inflight();
	for (i = 0; i < 4; i++)
		steered_before += steer_dp_slot_counters(dp, slot4(i))->steered;
	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, hammer_thread, &h[i]);
	/* Drain the way the daemon does: read, then subtract what was read. */
	while (!joined[0] || !joined[1]) {
		for (i = 0; i < 4; i++) {
			uint64_t v = steer_dp_inflight_read(dp, slot4(i));

			steer_dp_inflight_sub(dp, slot4(i), v);
			drained += v;
		}
		for (i = 0; i < 2; i++)
			if (!joined[i])
				joined[i] = pthread_tryjoin_np(t[i], NULL) == 0;
	}
	for (i = 0; i < 4; i++) {
		remaining += steer_dp_inflight_read(dp, slot4(i));
		steered_after += steer_dp_slot_counters(dp, slot4(i))->steered;
	}
	CHECK(h[0].failures + h[1].failures == 0, "%d connects failed",
	      h[0].failures + h[1].failures);
	CHECK(steered_after - steered_before == 800, "steered %llu, want 800",
	      (unsigned long long)(steered_after - steered_before));
	CHECK(drained + remaining == 800ULL * STEER_DEFAULT_CREDIT_TOKENS,
	      "drained %llu + remaining %llu != 800 x %d", (unsigned long long)drained,
	      (unsigned long long)remaining, STEER_DEFAULT_CREDIT_TOKENS);
}

/*
 * A publish returns once connects see the new table (the kernel's wait for
 * readers of the old generation continues in the background), and swapping
 * tables under continuous connects never lets one through unsteered or fail,
 * also when each publish frees a slot that a later one reuses.
 */
static void test_republish_under_connects_takes_effect_at_once(void)
{
	struct hammer h[2] = { { 300, 0 }, { 300, 0 } };
	struct steer_dp_cost cost = { .base_wait_ns = 0, .ns_per_token = 1000 };
	struct steer_dp_service s = {
		.vip = vip4, .n_configured = 1, .table = &cost, .n_table = 1, .ttl_ns = TTL_LONG
	};
	int round, misses = 0, first_miss = -1;
	bool joined[2] = { false, false };
	pthread_t t[2];
	char name[32];
	int i;

	for (i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, hammer_thread, &h[i]);
	for (round = 0; !joined[0] || !joined[1] || round < 2 * NB; round++) {
		int k = round % NB;

		/* Only backend k is configured: the previous one's slot is freed. */
		s.configured = &addr4[k];
		cost.addr = addr4[k];
		CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish %d: %s", round,
		      err);
		if (connect_name(VIP4, name, sizeof(name)) != 0 || backend_index(name) != k) {
			misses++;
			if (first_miss < 0)
				first_miss = round;
		}
		for (i = 0; i < 2; i++)
			if (!joined[i])
				joined[i] = pthread_tryjoin_np(t[i], NULL) == 0;
	}
	CHECK(misses == 0,
	      "%d of %d connects right after a publish missed its backend (first: round %d)",
	      misses, round, first_miss);
	CHECK(h[0].failures + h[1].failures == 0,
	      "%d of 600 connects during republishing failed or were not steered",
	      h[0].failures + h[1].failures);
	/* Back to the full configuration for the tests that follow. */
	s.configured = addr4;
	s.n_configured = NB;
	cost.addr = addr4[0];
	CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish: %s", err);
}

static void test_expired_table_falls_back_to_round_robin(void)
{
	int idx[3] = { 4, 5, 6 };
	double base[3] = { 0, 1e9, 2e9 }, npt[3] = { 1000, 1000, 1000 };
	uint64_t fb_before[3], svc_fb_before = 0, svc_fb_after = 0;
	int seen[NB] = { 0 }, order[9], i;
	struct steer_view v;

	CHECK(publish4(idx, base, npt, 3, 1000000 /* 1 ms */, false) == 0, "publish: %s", err);
	usleep(20000);
	zero_inflight();
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	svc_fb_before = v.services[0].stats.fallbacks;
	steer_view_free(&v);
	for (i = 0; i < 3; i++)
		fb_before[i] = steer_dp_slot_counters(dp, slot4(idx[i]))->fallbacks;
	for (i = 0; i < 9; i++) {
		char name[32];

		CHECK(connect_name(VIP4, name, sizeof(name)) == 0, "connect %d", i);
		order[i] = backend_index(name);
		CHECK(order[i] >= 4 && order[i] <= 6, "connect %d went to %s", i, name);
		seen[order[i]]++;
	}
	/* Round robin: a period of 3 that visits all three, despite the scores. */
	for (i = 3; i < 9; i++)
		CHECK(order[i] == order[i - 3], "not round robin at %d: %d vs %d", i, order[i],
		      order[i - 3]);
	CHECK(seen[4] == 3 && seen[5] == 3 && seen[6] == 3, "spread %d/%d/%d", seen[4], seen[5],
	      seen[6]);
	for (i = 0; i < 3; i++) {
		CHECK(steer_dp_slot_counters(dp, slot4(idx[i]))->fallbacks - fb_before[i] == 3,
		      "b%d fallbacks not counted", idx[i]);
		CHECK(steer_dp_inflight_read(dp, slot4(idx[i])) == 0,
		      "fallback connects must not be credited");
	}
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	svc_fb_after = v.services[0].stats.fallbacks;
	steer_view_free(&v);
	CHECK(svc_fb_after - svc_fb_before == 9, "service fallbacks %llu",
	      (unsigned long long)(svc_fb_after - svc_fb_before));
}

static double now_s(void)
{
	return (double)steer_monotonic_ns() / 1e9;
}

static void test_empty_table_refuses_without_a_syn(void)
{
	struct steer_view v;
	uint64_t refused_before;
	double t0, dt;
	char name[32];
	int rc;

	CHECK(publish4(NULL, NULL, NULL, 0, TTL_LONG, true) == 0, "publish empty: %s", err);
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	refused_before = v.services[0].stats.refused;
	steer_view_free(&v);
	t0 = now_s();
	rc = connect_name(VIP4, name, sizeof(name));
	dt = now_s() - t0;
	/* A listener sits on the virtual address itself: had a SYN left, the
	 * connect would have succeeded and read "VIP". */
	CHECK(rc == -ECONNREFUSED, "connect returned %d (%s), name '%s'", rc, strerror(-rc),
	      rc == 0 ? name : "");
	CHECK(dt < 0.5, "refusal took %.3f s: not fast", dt);
	CHECK(__atomic_load_n(&decoy.accepted, __ATOMIC_RELAXED) == 0, "the decoy saw a connect");
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	CHECK(v.services[0].stats.refused == refused_before + 1, "refusal not counted");
	steer_view_free(&v);
}

static void test_ipv6_service(void)
{
	struct steer_dp_cost cost[2] = {
		{ .addr = addr6[0], .base_wait_ns = 5e6, .ns_per_token = 1000 },
		{ .addr = addr6[1], .base_wait_ns = 1e6, .ns_per_token = 1000 },
	};
	struct steer_dp_service s = { .vip = vip6,
				      .configured = addr6,
				      .n_configured = 2,
				      .table = cost,
				      .n_table = 2,
				      .ttl_ns = TTL_LONG };
	struct sockaddr_storage peer;
	char name[32], p[64];
	int rc;

	CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish: %s", err);
	rc = test_connect(VIP6, false, name, sizeof(name), &peer, NULL);
	CHECK(rc == 0, "connect: %s", strerror(-rc));
	CHECK(strcmp(name, "v6b") == 0, "landed on %s, want v6b", name);
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(strcmp(p, VIP6) == 0, "getpeername %s", p);
}

static void test_v4_mapped_destination(void)
{
	int idx[2] = { 7, 8 };
	double base[2] = { 4e6, 1e6 }, npt[2] = { 1000, 1000 };
	struct sockaddr_storage peer;
	char name[32], p[64];
	int rc;

	CHECK(publish4(idx, base, npt, 2, TTL_LONG, false) == 0, "publish: %s", err);
	rc = test_connect(VIP4, true, name, sizeof(name), &peer, NULL);
	CHECK(rc == 0, "connect over AF_INET6: %s", strerror(-rc));
	CHECK(strcmp(name, "b8") == 0, "landed on %s, want b8", name);
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(strcmp(p, "[::ffff:127.0.0.100]:8000") == 0, "getpeername %s", p);
}

static void test_other_destinations_pass_through(void)
{
	struct sockaddr_storage peer, ss;
	uint64_t steered_before = 0, steered_after = 0;
	struct steer_view v;
	socklen_t len, plen = sizeof(peer);
	char name[32], p[64];
	size_t i;
	int rc, fd;

	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	for (i = 0; i < v.n_services; i++)
		steered_before += v.services[i].stats.steered + v.services[i].stats.fallbacks;
	steer_view_free(&v);
	rc = test_connect("127.0.0.50:9050", false, name, sizeof(name), &peer, NULL);
	CHECK(rc == 0 && strcmp(name, "direct") == 0, "rc=%d name=%s", rc, name);
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(strcmp(p, "127.0.0.50:9050") == 0, "peer %s", p);
	/* Same port as the virtual address, other IP: untouched too. */
	rc = test_connect("127.0.0.101:8000", false, name, sizeof(name), NULL, NULL);
	CHECK(rc == -ECONNREFUSED, "127.0.0.101:8000 should reach nothing, got %d", rc);
	/* UDP to the virtual address is not steered. */
	test_sockaddr(VIP4, &ss, &len);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&ss, len) == 0, "udp connect");
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &plen) == 0, "udp getpeername");
	close(fd);
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(strcmp(p, VIP4) == 0, "udp peer %s", p);
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	for (i = 0; i < v.n_services; i++)
		steered_after += v.services[i].stats.steered + v.services[i].stats.fallbacks;
	steer_view_free(&v);
	CHECK(steered_after == steered_before, "a passthrough connect was counted");
}

/* Generous: the count follows the sockets' state changes, which a loaded
 * machine may deliver late. */
static int wait_live(uint32_t slot, int64_t want)
{
	uint64_t end = steer_monotonic_ns() + 10ULL * 1000000000ULL;

	while (steer_dp_live(dp, slot) != want && steer_monotonic_ns() < end)
		usleep(5000);
	return steer_dp_live(dp, slot) == want ? 0 : -1;
}

static void test_live_connections_are_counted(void)
{
	int idx[1] = { 9 }, fds[3], i;
	double base[1] = { 0 }, npt[1] = { 1000 };
	int64_t before;

	CHECK(publish4(idx, base, npt, 1, TTL_LONG, false) == 0, "publish: %s", err);
	before = steer_dp_live(dp, slot4(9));
	CHECK(before == 0, "live starts at %lld", (long long)before);
	for (i = 0; i < 3; i++) {
		char name[32];

		CHECK(test_connect(VIP4, false, name, sizeof(name), NULL, &fds[i]) == 0,
		      "connect %d", i);
	}
	CHECK(wait_live(slot4(9), 3) == 0, "live %lld, want 3",
	      (long long)steer_dp_live(dp, slot4(9)));
	for (i = 0; i < 3; i++)
		close(fds[i]);
	CHECK(wait_live(slot4(9), 0) == 0, "live %lld after close, want 0",
	      (long long)steer_dp_live(dp, slot4(9)));
}

static void test_drained_backend_gets_nothing(void)
{
	int idx[2] = { 10, 11 };
	double base[2] = { 0, 5e6 }, npt[2] = { 1, 1 };
	char name[32];
	int i;

	CHECK(publish4(idx, base, npt, 2, TTL_LONG, false) == 0, "publish: %s", err);
	CHECK(steer_dp_set_drained(dp, &addr4[10], true, err, sizeof(err)) == 0, "drain: %s", err);
	CHECK(steer_dp_is_drained(dp, &addr4[10]), "drain not recorded");
	for (i = 0; i < 10; i++) {
		CHECK(connect_name(VIP4, name, sizeof(name)) == 0, "connect");
		CHECK(strcmp(name, "b11") == 0, "drained b10 got connect %d (%s)", i, name);
	}
	/* The drain survives a republish. */
	CHECK(publish4(idx, base, npt, 2, TTL_LONG, false) == 0, "publish: %s", err);
	CHECK(connect_name(VIP4, name, sizeof(name)) == 0 && strcmp(name, "b11") == 0,
	      "after republish: %s", name);
	CHECK(steer_dp_set_drained(dp, &addr4[10], false, err, sizeof(err)) == 0, "undrain");
	CHECK(connect_name(VIP4, name, sizeof(name)) == 0 && strcmp(name, "b10") == 0,
	      "after undrain: %s", name);
	/* Everything drained: refused, never the virtual address itself. */
	CHECK(steer_dp_set_drained(dp, &addr4[10], true, err, sizeof(err)) == 0, "drain");
	CHECK(steer_dp_set_drained(dp, &addr4[11], true, err, sizeof(err)) == 0, "drain");
	CHECK(connect_name(VIP4, name, sizeof(name)) == -ECONNREFUSED, "all drained: not refused");
	steer_dp_set_drained(dp, &addr4[10], false, err, sizeof(err));
	steer_dp_set_drained(dp, &addr4[11], false, err, sizeof(err));
}

/* A steered connect that fails leaves nothing behind: the same socket, then
 * connected to a plain address, reports that address, and no live
 * connection is counted for the dead backend. */
static void test_failed_steered_connect_leaves_no_trace(void)
{
	struct steer_addr cfg[2] = { addr4[0] }, dead;
	struct steer_dp_cost cost = { .ns_per_token = 1000 };
	struct steer_dp_service s = { .vip = vip4,
				      .configured = cfg,
				      .n_configured = 2,
				      .table = &cost,
				      .n_table = 1,
				      .ttl_ns = TTL_LONG };
	struct sockaddr_storage ss, peer;
	socklen_t len, plen = sizeof(peer);
	uint32_t slot = UINT32_MAX;
	char p[64], byte;
	int fd, rc;

	steer_addr_parse("127.0.0.60:9060", &dead, err, sizeof(err)); /* nothing listens */
	cfg[1] = dead;
	cost.addr = dead;
	CHECK(steer_dp_publish_one(dp, &s, err, sizeof(err)) == 0, "publish: %s", err);
	CHECK(steer_dp_slot(dp, &vip4, &dead, &slot) == 0, "slot");
	test_sockaddr(VIP4, &ss, &len);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	rc = connect(fd, (struct sockaddr *)&ss, len);
	CHECK(rc != 0 && errno == ECONNREFUSED, "steered connect to a dead backend: rc=%d", rc);
	test_sockaddr("127.0.0.50:9050", &ss, &len);
	CHECK(connect(fd, (struct sockaddr *)&ss, len) == 0, "reconnect: %s", strerror(errno));
	CHECK(getpeername(fd, (struct sockaddr *)&peer, &plen) == 0, "getpeername");
	test_fmt_sockaddr(&peer, p, sizeof(p));
	CHECK(read(fd, &byte, 1) == 1, "read");
	close(fd);
	CHECK(strcmp(p, "127.0.0.50:9050") == 0, "getpeername after a failed steer says %s", p);
	CHECK(steer_dp_live(dp, slot) == 0, "dead backend has %lld live",
	      (long long)steer_dp_live(dp, slot));
}

static int expect_publish_error(struct steer_dp_service *s, const char *needle)
{
	int rc = steer_dp_publish_one(dp, s, err, sizeof(err));

	CHECK_RC(rc < 0, "publish accepted bad input (%s)", needle);
	CHECK_RC(strstr(err, needle) != NULL, "error '%s' does not mention '%s'", err, needle);
	return 0;
}

static void test_invalid_input_publishes_nothing(void)
{
	int idx[2] = { 12, 13 };
	double base[2] = { 0, 1e6 }, npt[2] = { 1000, 1000 };
	struct steer_addr many[STEER_MAX_BACKENDS + 1], dup[2] = { addr4[0], addr4[0] };
	struct steer_dp_cost cost[2] = {
		{ .addr = addr4[0], .base_wait_ns = 1, .ns_per_token = 1 },
		{ .addr = addr4[1], .base_wait_ns = 1, .ns_per_token = 1 }
	};
	struct steer_dp_service s = { .vip = vip4,
				      .configured = addr4,
				      .n_configured = NB,
				      .table = cost,
				      .n_table = 2,
				      .ttl_ns = TTL_LONG };
	struct steer_view v;
	uint64_t gen_before;
	char name[32];
	int i;

	CHECK(publish4(idx, base, npt, 2, TTL_LONG, false) == 0, "publish: %s", err);
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view");
	gen_before = v.services[0].generation;
	steer_view_free(&v);

	cost[0].base_wait_ns = NAN;
	CHECK(expect_publish_error(&s, "base_wait_ns must be finite") == 0, "NaN");
	cost[0].base_wait_ns = INFINITY;
	CHECK(expect_publish_error(&s, "base_wait_ns must be finite") == 0, "Inf");
	cost[0].base_wait_ns = 1;
	cost[1].ns_per_token = -1;
	CHECK(expect_publish_error(&s, "ns_per_token must be finite and >= 0") == 0, "negative");
	cost[1].ns_per_token = 1;
	cost[1].addr = addr4[0];
	CHECK(expect_publish_error(&s, "appears twice") == 0, "dup in table");
	cost[1].addr = addr4[1];
	s.n_table = 0;
	CHECK(expect_publish_error(&s, "no backends to publish") == 0, "zero backends");
	s.n_table = 2;
	s.configured = dup;
	s.n_configured = 2;
	CHECK(expect_publish_error(&s, "duplicate backend") == 0, "dup configured");
	for (i = 0; i <= STEER_MAX_BACKENDS; i++) {
		many[i] = addr4[0];
		many[i].port = htons((uint16_t)(20000 + i));
	}
	s.configured = many;
	s.n_configured = STEER_MAX_BACKENDS + 1;
	CHECK(expect_publish_error(&s, "at most 256") == 0, "capacity");
	s.configured = addr6;
	s.n_configured = 2;
	CHECK(expect_publish_error(&s, "address family") == 0, "family");
	s.configured = addr4 + 2;
	s.n_configured = 2;
	CHECK(expect_publish_error(&s, "is not configured") == 0, "unconfigured");

	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view");
	CHECK(v.services[0].generation == gen_before, "a rejected publish changed the table");
	steer_view_free(&v);
	CHECK(connect_name(VIP4, name, sizeof(name)) == 0 && strcmp(name, "b12") == 0,
	      "steering changed: %s", name);
}

static void test_pins_names_permissions_and_bpftool(void)
{
	const char *dir = testenv_pin_dir();
	char path[512], cmd[1024];
	struct dirent *de;
	struct stat st;
	int n = 0;
	DIR *d;

	CHECK(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "pin dir mode %o",
	      st.st_mode & 0777);
	d = opendir(dir);
	CHECK(d, "opendir");
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n++;
		if (stat(path, &st) != 0 || (st.st_mode & 0777) != 0600 ||
		    strncmp(de->d_name, "steer_", 6) != 0 || strlen(de->d_name) > 15) {
			closedir(d);
			CHECK(0, "%s: mode %o, name must be steer_* and <= 15 chars", de->d_name,
			      st.st_mode & 0777);
		}
	}
	closedir(d);
	if (n != 24)
		test_system("ls -la %s >&2", dir);
	CHECK(n == 24,
	      "%d pins, want 15 maps (steer_wire, steer_affin, steer_affkey too) + 9 links "
	      "(2 wire, setsockopt)",
	      n);
	snprintf(cmd, sizeof(cmd),
		 "bpftool map dump pinned %s/steer_tables | grep -q '\"base_wait_ns\"'", dir);
	CHECK(test_system("%s", cmd) == 0, "bpftool dump of steer_tables lacks named fields");
	snprintf(cmd, sizeof(cmd),
		 "bpftool map lookup pinned %s/steer_slots key 0 0 0 0 | grep -q "
		 "'\"inflight_tokens\"'",
		 dir);
	CHECK(test_system("%s", cmd) == 0, "bpftool lookup of steer_slots lacks named fields");
}

/* Writes version into the pinned steer_layout; 0 or -errno. */
static int stamp_layout(__u32 version)
{
	struct steer_layout l = { .version = version };
	char path[512];
	__u32 zero = 0;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_LAYOUT);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	rc = bpf_map_update_elem(fd, &zero, &l, BPF_ANY) ? -errno : 0;
	close(fd);
	return rc;
}

/* Pins of another layout version are refused, by a reader and by an owner,
 * with the command that clears them; the running data plane is untouched. */
static void test_pins_of_another_layout_are_refused(void)
{
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(), .cgroup = testenv_cgroup() };
	struct steer_dp *other = NULL;
	char name[32];
	int rc;

	CHECK(stamp_layout(STEER_LAYOUT_VERSION + 1) == 0, "stamp: %s", strerror(errno));
	rc = steer_dp_open(&o, &other, err, sizeof(err));
	CHECK(rc == -EPROTO && !other && strstr(err, "smg-steerctl") && strstr(err, "uninstall"),
	      "reader: rc=%d '%s'", rc, err);
	CHECK(stamp_layout(STEER_LAYOUT_VERSION) == 0, "stamp back: %s", strerror(errno));
	rc = steer_dp_open(&o, &other, err, sizeof(err));
	CHECK(rc == 0 && other, "this layout opens again: rc=%d '%s'", rc, err);
	steer_dp_close(other);
	CHECK(connect_name(VIP4, name, sizeof(name)) == 0 && backend_index(name) >= 0,
	      "still steered: %s", name);
}

static void test_second_owner_is_refused(void)
{
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(),
				   .cgroup = testenv_cgroup(),
				   .own = true };
	struct steer_dp *other = NULL;
	int rc = steer_dp_open(&o, &other, err, sizeof(err));

	CHECK(rc == -EBUSY && !other, "second owner: rc=%d", rc);
	CHECK(strstr(err, "already owns") != NULL, "message: %s", err);
}

struct looper {
	volatile int stop;
	int ok, failed;
};

static void *connect_loop(void *arg)
{
	struct looper *l = arg;

	while (!l->stop) {
		char name[32];

		if (connect_name(VIP4, name, sizeof(name)) == 0 && backend_index(name) >= 0)
			l->ok++;
		else
			l->failed++;
	}
	return NULL;
}

static void test_second_process_adopts_without_a_gap(void)
{
	int idx[2] = { 14, 15 };
	double base[2] = { 0, 9e6 }, npt[2] = { 1, 1 };
	struct looper l = { 0 };
	uint32_t slot_before = slot4(14);
	pthread_t thr;
	char name[32];
	pid_t pid;
	int st = 0;

	CHECK(publish4(idx, base, npt, 2, TTL_LONG, false) == 0, "publish: %s", err);
	pthread_create(&thr, NULL, connect_loop, &l);
	steer_dp_close(dp); /* as a daemon exiting with --keep-pinned */
	dp = NULL;
	usleep(20000);
	pid = fork();
	if (pid == 0) {
		uint32_t s = UINT32_MAX;
		int rc = open_dp();

		if (rc) {
			fprintf(stderr, "child open: %s\n", err);
			_exit(2);
		}
		if (steer_dp_slot(dp, &vip4, &addr4[14], &s) != 0 || s != slot_before)
			_exit(3);
		/* The adopter publishes a table that prefers b15. */
		double b2[2] = { 9e6, 0 };
		if (publish4(idx, b2, npt, 2, TTL_LONG, false) != 0) {
			fprintf(stderr, "child publish: %s\n", err);
			_exit(4);
		}
		steer_dp_close(dp);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	{
		/* Some connects after the adoption too, however slow the machine. */
		int ok = __atomic_load_n(&l.ok, __ATOMIC_RELAXED);
		uint64_t end = steer_monotonic_ns() + 10ULL * 1000000000ULL;

		while (__atomic_load_n(&l.ok, __ATOMIC_RELAXED) < ok + 3 &&
		       steer_monotonic_ns() < end)
			usleep(1000);
	}
	l.stop = 1;
	pthread_join(thr, NULL);
	CHECK(open_dp() == 0, "reopen: %s", err);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child failed: status %d", st);
	CHECK(l.failed == 0 && l.ok > 0, "during the handover %d connects failed, %d ok", l.failed,
	      l.ok);
	CHECK(connect_name(VIP4, name, sizeof(name)) == 0 && strcmp(name, "b15") == 0,
	      "the adopter's table is not in force: %s", name);
	CHECK(slot4(14) == slot_before, "slot changed across adoption");
}

/* A reader's view of the registry: what smg-steerctl would see. */
static int registered_services(size_t *n, struct steer_addr *first)
{
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(), .cgroup = testenv_cgroup() };
	struct steer_dp *reader = NULL;
	struct steer_view v;

	CHECK_RC(steer_dp_open(&o, &reader, err, sizeof(err)) == 0, "reader: %s", err);
	CHECK_RC(steer_dp_view(reader, &v, err, sizeof(err)) == 0, "view: %s", err);
	*n = v.n_services;
	if (first && v.n_services)
		*first = v.services[0].vip;
	steer_view_free(&v);
	steer_dp_close(reader);
	return 0;
}

static void test_changing_a_vip_many_times_leaks_nothing(void)
{
	struct steer_dp_cost cost = { .addr = addr4[0], .base_wait_ns = 0, .ns_per_token = 1000 };
	struct steer_dp_service s = { .configured = addr4,
				      .n_configured = 1,
				      .table = &cost,
				      .n_table = 1,
				      .ttl_ns = TTL_LONG };
	struct steer_addr last;
	char a[64], name[32];
	size_t n = 0;
	int i;

	for (i = 0; i < 3 * STEER_SVC_IDS; i++) {
		snprintf(a, sizeof(a), "127.0.0.100:%d", 20000 + i);
		steer_addr_parse(a, &s.vip, err, sizeof(err));
		CHECK(steer_dp_publish(dp, &s, 1, err, sizeof(err)) == 0, "publish %d: %s", i, err);
	}
	CHECK(registered_services(&n, &last) == 0, "reader");
	CHECK(n == 1 && steer_addr_equal(&last, &s.vip), "%zu services registered, want 1", n);
	CHECK(test_connect(a, false, name, sizeof(name), NULL, NULL) == 0 &&
		      strcmp(name, "b0") == 0,
	      "the last vip does not steer: %s", name);
}

static void test_full_capacity_can_still_be_replaced(void)
{
	static struct steer_dp_service svcs[STEER_MAX_SERVICES];
	static struct steer_addr cfg[STEER_MAX_SERVICES][STEER_MAX_BACKENDS];
	static struct steer_dp_cost cost[STEER_MAX_SERVICES];
	size_t n = 0;
	char a[64];
	int i, j;

	for (i = 0; i < STEER_MAX_SERVICES; i++) {
		snprintf(a, sizeof(a), "127.0.0.100:%d", 30000 + i);
		steer_addr_parse(a, &svcs[i].vip, err, sizeof(err));
		for (j = 0; j < STEER_MAX_BACKENDS; j++) {
			snprintf(a, sizeof(a), "127.0.%d.%d:9000", 64 + i, j);
			steer_addr_parse(a, &cfg[i][j], err, sizeof(err));
		}
		cost[i] = (struct steer_dp_cost){ .addr = cfg[i][0], .ns_per_token = 1000 };
		svcs[i] = (struct steer_dp_service){ .vip = svcs[i].vip,
						     .configured = cfg[i],
						     .n_configured = STEER_MAX_BACKENDS,
						     .table = &cost[i],
						     .n_table = 1,
						     .ttl_ns = TTL_LONG };
	}
	CHECK(steer_dp_publish(dp, svcs, STEER_MAX_SERVICES, err, sizeof(err)) == 0, "64 x 256: %s",
	      err);
	/* One backend replaced, and one service moved to another address. */
	steer_addr_parse("127.0.200.1:9000", &cfg[3][7], err, sizeof(err));
	steer_addr_parse("127.0.0.100:31000", &svcs[5].vip, err, sizeof(err));
	CHECK(steer_dp_publish(dp, svcs, STEER_MAX_SERVICES, err, sizeof(err)) == 0,
	      "replacing at full capacity: %s", err);
	/* Every backend replaced at once: still within the id space. */
	for (i = 0; i < STEER_MAX_SERVICES; i++)
		for (j = 0; j < STEER_MAX_BACKENDS; j++)
			cfg[i][j].port = htons(9001);
	for (i = 0; i < STEER_MAX_SERVICES; i++)
		cost[i].addr = cfg[i][0];
	CHECK(steer_dp_publish(dp, svcs, STEER_MAX_SERVICES, err, sizeof(err)) == 0,
	      "replacing everything: %s", err);
	CHECK(registered_services(&n, NULL) == 0 && n == STEER_MAX_SERVICES, "%zu services", n);
	/* Over the limits: refused, nothing changed. */
	cfg[0][0] = cfg[0][1];
	CHECK(steer_dp_publish(dp, svcs, STEER_MAX_SERVICES, err, sizeof(err)) < 0 &&
		      strstr(err, "duplicate"),
	      "duplicate accepted: %s", err);
}

static void test_detach_removes_everything(void)
{
	struct stat st;
	char name[32];
	int rc;

	CHECK(steer_dp_detach(dp, err, sizeof(err)) == 0, "detach: %s", err);
	steer_dp_close(dp);
	dp = NULL;
	CHECK(stat(testenv_pin_dir(), &st) != 0 && errno == ENOENT, "pin dir still exists");
	rc = connect_name(VIP4, name, sizeof(name));
	CHECK(rc == 0 && strcmp(name, "VIP") == 0,
	      "after detach a connect must reach the plain address: rc=%d name=%s", rc, name);
}

static int setup(void)
{
	char a[64], n[16];
	int i;

	if (testenv_init("dp") != 0)
		return -1;
	for (i = 0; i < NB; i++) {
		snprintf(a, sizeof(a), "127.0.0.%d:%d", 11 + i, 9001 + i);
		snprintf(n, sizeof(n), "b%d", i);
		if (test_backend_start(&be[i], a, n) != 0 ||
		    steer_addr_parse(a, &addr4[i], err, sizeof(err)) != 0)
			return -1;
	}
	if (test_backend_start(&be6[0], "[::1]:9101", "v6a") != 0 ||
	    test_backend_start(&be6[1], "[::1]:9102", "v6b") != 0 ||
	    test_backend_start(&decoy, VIP4, "VIP") != 0 ||
	    test_backend_start(&direct, "127.0.0.50:9050", "direct") != 0)
		return -1;
	steer_addr_parse("[::1]:9101", &addr6[0], err, sizeof(err));
	steer_addr_parse("[::1]:9102", &addr6[1], err, sizeof(err));
	steer_addr_parse(VIP4, &vip4, err, sizeof(err));
	steer_addr_parse(VIP6, &vip6, err, sizeof(err));
	if (open_dp() != 0) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	return 0;
}

int main(void)
{
	int i;

	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_steers_to_best_and_reports_vip);
	TAP_RUN(test_water_filling_matches_reference);
	TAP_RUN(test_early_exit_in_kernel_equals_full_scan);
	TAP_RUN(test_concurrent_connects_lose_no_credit);
	TAP_RUN(test_republish_under_connects_takes_effect_at_once);
	TAP_RUN(test_expired_table_falls_back_to_round_robin);
	TAP_RUN(test_empty_table_refuses_without_a_syn);
	TAP_RUN(test_ipv6_service);
	TAP_RUN(test_v4_mapped_destination);
	TAP_RUN(test_other_destinations_pass_through);
	TAP_RUN(test_live_connections_are_counted);
	TAP_RUN(test_drained_backend_gets_nothing);
	TAP_RUN(test_failed_steered_connect_leaves_no_trace);
	TAP_RUN(test_invalid_input_publishes_nothing);
	TAP_RUN(test_pins_names_permissions_and_bpftool);
	TAP_RUN(test_pins_of_another_layout_are_refused);
	TAP_RUN(test_second_owner_is_refused);
	TAP_RUN(test_second_process_adopts_without_a_gap);
	TAP_RUN(test_changing_a_vip_many_times_leaks_nothing);
	TAP_RUN(test_full_capacity_can_still_be_replaced);
	TAP_RUN(test_detach_removes_everything);
	if (dp)
		steer_dp_close(dp);
	for (i = 0; i < NB; i++)
		test_backend_stop(&be[i]);
	test_backend_stop(&be6[0]);
	test_backend_stop(&be6[1]);
	test_backend_stop(&decoy);
	test_backend_stop(&direct);
	return tap_done();
}
