// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_affinity.c - cache affinity with the real programs, real connects and
 * real cgroups, network namespaces and processes, in a throwaway cgroup and
 * network namespace:
 *
 *  - off: a client's connects water-fill over both backends;
 *  - cgroup: two cgroups each keep to their backend;
 *  - netns: two network namespaces (veth pairs into the test's) each keep to
 *    their backend;
 *  - sockopt: an unprivileged process sets a key with setsockopt; two keys
 *    keep to their backends, a socket without a key is placed by least wait;
 *    a bad length is EINVAL, and outside the cgroup the call fails with
 *    ENOPROTOOPT as on a host without smg-steer;
 *  - the slack: a client stays while its backend's wait is within the least
 *    wait plus the slack, exactly, and leaves past it (counted);
 *  - it leaves a drained, an ejected and an overloaded backend (counted);
 *  - a key idle past the timeout is forgotten; one that keeps connecting
 *    keeps its way while new keys fill its set;
 *  - a publish turning affinity off and on again;
 *  - the bound: after 1,000,000 keys each set holds its newest keys (a set's
 *    LRU), at most STEER_AFFINITY_KEYS, 99 % of the last STEER_AFFINITY_SETS;
 *  - an owner replaces the generations pinned by a build of smaller tables.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "../../include/smg_steer_affinity.h"
#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"

/* The applications' copy of the numbers is the contract's. */
_Static_assert(SMG_STEER_SOL_AFFINITY == STEER_SOL_AFFINITY, "level");
_Static_assert(SMG_STEER_SO_AFFINITY_KEY == STEER_SO_AFFINITY_KEY, "name");

#define TTL_LONG (600ULL * 1000000000ULL)
#define NS_PER_MS 1000000ULL
/* Each connect credits 100 tokens at 1 ms a token: 100 ms of expected wait. */
#define CREDIT 100
#define NPT_NS 1e6

static struct steer_dp *dp;
static char err[512];
static struct test_backend be[2];
static struct steer_addr vip, cfg[2];
static const char *VIP = "127.0.0.100:8000";
static char netns_name[2][64];

static int publish_aff(uint32_t affinity, uint64_t slack_ns, uint64_t idle_ns, uint32_t flags)
{
	struct steer_dp_cost cost[2] = {
		{ .addr = cfg[0], .base_wait_ns = 0, .ns_per_token = NPT_NS },
		{ .addr = cfg[1], .base_wait_ns = 0, .ns_per_token = NPT_NS },
	};
	struct steer_dp_service s = { .vip = vip,
				      .configured = cfg,
				      .n_configured = 2,
				      .table = cost,
				      .n_table = 2,
				      .ttl_ns = TTL_LONG,
				      .credit_tokens = CREDIT,
				      .flags = flags,
				      .affinity = affinity,
				      .affinity_slack_ns = slack_ns,
				      .affinity_idle_ns = idle_ns };

	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

/* Give every credit back: both backends idle again. */
static void drain_all(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		uint32_t slot;

		if (steer_dp_slot(dp, &vip, &cfg[i], &slot) == 0)
			steer_dp_inflight_exchange(dp, slot);
	}
	steer_dp_settle(dp);
}

#define HOUR_NS (3600ULL * 1000 * NS_PER_MS)
#define TEN_MIN_NS (600ULL * 1000 * NS_PER_MS)

/* Affinity of the kind that keeps every client (an hour of slack, 10 min of
 * timeout), both backends idle. */
static int publish_sticky(uint32_t affinity, uint32_t flags)
{
	int rc = publish_aff(affinity, HOUR_NS, TEN_MIN_NS, flags);

	drain_all();
	return rc;
}

static struct steer_svc_stats stats(void)
{
	struct steer_svc_stats st = { 0 };

	steer_dp_service_stats(dp, &vip, &st);
	return st;
}

/* Connect with the key (0: none), read the backend's name: 'A', 'B', or
 * '!' for a failed connect. */
static char connect_key(uint64_t key)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char name[32] = "";
	int fd, n;

	if (test_sockaddr(VIP, &ss, &len) != 0)
		return '?';
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return '?';
	if (key && smg_steer_set_affinity_key(fd, key) != 0) {
		close(fd);
		return 'k';
	}
	if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
		close(fd);
		return '!';
	}
	n = (int)read(fd, name, sizeof(name) - 1);
	close(fd);
	return n > 0 ? name[0] : '?';
}

/* n connects with the key; their backends in out (n + 1 bytes). */
static void connects(uint64_t key, int n, char *out)
{
	int i;

	for (i = 0; i < n; i++)
		out[i] = connect_key(key);
	out[n] = 0;
}

static bool all_of(const char *s, char c)
{
	for (; *s; s++)
		if (*s != c)
			return false;
	return true;
}

/* ---- off, and cgroups ------------------------------------------------------------ */

static void test_off_spreads(void)
{
	char got[11];

	CHECK(publish_aff(STEER_AFF_OFF, 0, 0, 0) == 0, "publish: %s", err);
	drain_all();
	connects(0, 10, got);
	CHECK(strchr(got, 'A') && strchr(got, 'B'), "off: connects %s", got);
	CHECK(stats().affinity[STEER_AFF_NEW] == 0, "off counted a client");
}

static void test_cgroups_keep_their_backend(void)
{
	char a[9], b[9], cg[2][4096];
	struct steer_svc_stats before, after;
	int i;

	CHECK(testenv_child_cgroup("clientA", cg[0], sizeof(cg[0])) == 0, "cgroup A");
	CHECK(testenv_child_cgroup("clientB", cg[1], sizeof(cg[1])) == 0, "cgroup B");
	CHECK(publish_sticky(STEER_AFF_CGROUP, 0) == 0, "publish: %s", err);
	before = stats();
	for (i = 0; i < 8; i++) {
		testenv_enter(cg[0]);
		a[i] = connect_key(0);
		testenv_enter(cg[1]);
		b[i] = connect_key(0);
	}
	a[8] = b[8] = 0;
	testenv_enter_cgroup();
	after = stats();
	CHECK(all_of(a, a[0]) && all_of(b, b[0]) && a[0] != b[0] && a[0] != '!',
	      "cgroup A %s, cgroup B %s", a, b);
	CHECK(after.affinity[STEER_AFF_NEW] - before.affinity[STEER_AFF_NEW] == 2 &&
		      after.affinity[STEER_AFF_STAY] - before.affinity[STEER_AFF_STAY] == 14,
	      "new %llu stay %llu",
	      (unsigned long long)(after.affinity[STEER_AFF_NEW] - before.affinity[STEER_AFF_NEW]),
	      (unsigned long long)(after.affinity[STEER_AFF_STAY] -
				   before.affinity[STEER_AFF_STAY]));
}

/* ---- network namespaces ------------------------------------------------------------- */

/* In a child: enter the named netns, connect n times, write the names to fd. */
static void netns_client(const char *name, int n, int out)
{
	char path[256], got[32];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0)
		_exit(1);
	connects(0, n, got);
	if (write(out, got, (size_t)n) != n)
		_exit(1);
	_exit(0);
}

static int netns_connects(int which, int n, char *got)
{
	int p[2], status;
	pid_t pid;

	if (pipe(p) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		netns_client(netns_name[which], n, p[1]);
	}
	close(p[1]);
	memset(got, 0, (size_t)n + 1);
	if (read(p[0], got, (size_t)n) != n)
		got[0] = '?';
	close(p[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static void test_netns_keep_their_backend(void)
{
	char a[9], b[9], one[2];
	int i;

	CHECK(publish_sticky(STEER_AFF_NETNS, 0) == 0, "publish: %s", err);
	for (i = 0; i < 8; i++) {
		CHECK(netns_connects(0, 1, one) == 0, "netns A client");
		a[i] = one[0];
		CHECK(netns_connects(1, 1, one) == 0, "netns B client");
		b[i] = one[0];
	}
	a[8] = b[8] = 0;
	CHECK(all_of(a, a[0]) && all_of(b, b[0]) && a[0] != b[0] && a[0] != '!' && a[0] != '?',
	      "netns A %s, netns B %s", a, b);
}

/* ---- the application's key ------------------------------------------------------------ */

/* In a child that dropped every privilege: keys 1 and 2 and no key, 6
 * connects each, then the setsockopt errors; a line to out. */
static void unprivileged_client(int out)
{
	char k1[7], k2[7], none[7], line[128];
	uint64_t key = 7;
	uint32_t shortkey = 7;
	int fd, e1;

	if (setgid(65534) != 0 || setuid(65534) != 0 || geteuid() == 0)
		_exit(1);
	connects(1001, 6, k1);
	connects(1002, 6, k2);
	connects(0, 6, none);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	e1 = setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &shortkey, 4) == 0 ? 0
											  : errno;
	close(fd);
	(void)key;
	snprintf(line, sizeof(line), "%s %s %s %d", k1, k2, none, e1);
	if (write(out, line, strlen(line)) < 0)
		_exit(1);
	_exit(0);
}

static void test_sockopt_unprivileged(void)
{
	char line[128] = "", k1[8], k2[8], none[8];
	int p[2], status, e1 = -1, fd, rc, e2;
	uint64_t key = 7;
	pid_t pid;

	CHECK(publish_sticky(STEER_AFF_SOCKOPT, 0) == 0, "publish: %s", err);
	CHECK(pipe(p) == 0, "pipe");
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		unprivileged_client(p[1]);
	}
	close(p[1]);
	CHECK(read(p[0], line, sizeof(line) - 1) > 0, "no answer from the unprivileged client");
	close(p[0]);
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "unprivileged client failed");
	CHECK(sscanf(line, "%7s %7s %7s %d", k1, k2, none, &e1) == 4, "answer: %s", line);
	CHECK(all_of(k1, k1[0]) && all_of(k2, k2[0]) && k1[0] != '!' && k2[0] != '!' &&
		      k1[0] != 'k',
	      "key 1001: %s, key 1002: %s", k1, k2);
	CHECK(strchr(none, 'A') && strchr(none, 'B'), "no key: %s", none);
	CHECK(e1 == EINVAL, "a 4-byte key: errno %d, not EINVAL", e1);

	/* The Python example: one conversation's connects keep to a backend. */
	{
		char a[128] = "", b[128] = "";
		FILE *f;

		f = popen("/usr/bin/python3 \"${STEER_TOP:-.}\"/examples/affinity_key.py "
			  "127.0.0.100:8000 conv-1 "
			  "&& /usr/bin/python3 \"${STEER_TOP:-.}\"/examples/affinity_key.py "
			  "127.0.0.100:8000 conv-1",
			  "r");
		CHECK(f && fgets(a, sizeof(a), f) && fgets(b, sizeof(b), f), "python example");
		pclose(f);
		CHECK(strstr(a, " set; the server said: ") && strcmp(a, b) == 0,
		      "python example: %s / %s", a, b);
	}

	/* Outside the cgroup the program does not run: the kernel's answer. */
	CHECK(testenv_leave_cgroup() == 0, "leave the cgroup");
	fd = socket(AF_INET, SOCK_STREAM, 0);
	rc = setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, 8);
	e2 = errno;
	close(fd);
	testenv_enter_cgroup();
	CHECK(rc != 0 && e2 == ENOPROTOOPT, "outside: rc %d errno %d", rc, e2);
}

/* ---- the slack, and leaving ----------------------------------------------------------- */

/*
 * Slack 250 ms, 100 ms of wait a held connect: the key stays on its backend
 * X while X's wait is at most the least + 250 ms:
 *   waits (X, Y) before each connect   0,0  100,0  200,0  300,0 -> leaves
 *   then on Y: (300,100) (300,200) (300,300) (300,400) (300,500) -> 600 > 550
 * so the connects go X X X Y Y Y Y Y Y X.
 */
static void test_slack_exact(void)
{
	const char *shape = "XXXYYYYYYX";
	char got[11], want[11];
	struct steer_svc_stats before, after;
	int fds[10], i;

	CHECK(publish_aff(STEER_AFF_SOCKOPT, 250 * NS_PER_MS, TEN_MIN_NS, 0) == 0, "publish: %s",
	      err);
	drain_all();
	before = stats();
	for (i = 0; i < 10; i++) {
		struct sockaddr_storage ss;
		socklen_t len;
		uint64_t key = 4242;
		char name[8] = "";

		test_sockaddr(VIP, &ss, &len);
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(fds[i], STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, 8);
		got[i] = connect(fds[i], (struct sockaddr *)&ss, len) == 0 &&
					 read(fds[i], name, sizeof(name) - 1) > 0
				 ? name[0]
				 : '!';
	}
	got[10] = 0;
	after = stats();
	for (i = 0; i < 10; i++) {
		want[i] = shape[i] == 'X' ? got[0] : (got[0] == 'A' ? 'B' : 'A');
		close(fds[i]);
	}
	want[10] = 0;
	CHECK(strcmp(got, want) == 0, "connects %s, want %s", got, want);
	CHECK(after.affinity[STEER_AFF_LEFT_SLACK] - before.affinity[STEER_AFF_LEFT_SLACK] == 2 &&
		      after.affinity[STEER_AFF_STAY] - before.affinity[STEER_AFF_STAY] == 7,
	      "left for the slack %llu, stayed %llu",
	      (unsigned long long)(after.affinity[STEER_AFF_LEFT_SLACK] -
				   before.affinity[STEER_AFF_LEFT_SLACK]),
	      (unsigned long long)(after.affinity[STEER_AFF_STAY] -
				   before.affinity[STEER_AFF_STAY]));
}

static int backend_index(char c)
{
	return c == 'A' ? 0 : 1;
}

static void test_leaves_drained(void)
{
	char first, next;
	uint64_t gone;

	CHECK(publish_sticky(STEER_AFF_SOCKOPT, 0) == 0, "publish: %s", err);
	first = connect_key(77);
	CHECK(first == 'A' || first == 'B', "first connect: %c", first);
	CHECK(connect_key(77) == first, "did not stay");
	gone = stats().affinity[STEER_AFF_LEFT_GONE];
	CHECK(steer_dp_set_drained(dp, &cfg[backend_index(first)], true, err, sizeof(err)) == 0,
	      "drain: %s", err);
	next = connect_key(77);
	steer_dp_set_drained(dp, &cfg[backend_index(first)], false, err, sizeof(err));
	CHECK(next != first && next != '!', "drained %c, went to %c", first, next);
	CHECK(stats().affinity[STEER_AFF_LEFT_GONE] == gone + 1, "not counted as gone");
	/* undrained: the key is on its new backend now, and stays there */
	CHECK(connect_key(77) == next, "did not stay on the new backend");
}

static void test_leaves_overloaded(void)
{
	char first, next;
	uint32_t slot;
	uint64_t over;

	CHECK(publish_sticky(STEER_AFF_SOCKOPT, STEER_TBL_OVERLOAD) == 0, "publish: %s", err);
	first = connect_key(78);
	CHECK(connect_key(78) == first, "did not stay");
	CHECK(steer_dp_slot(dp, &vip, &cfg[backend_index(first)], &slot) == 0, "slot");
	over = stats().affinity[STEER_AFF_LEFT_OVERLOAD];
	steer_dp_set_overloaded(dp, slot, true);
	next = connect_key(78);
	steer_dp_set_overloaded(dp, slot, false);
	CHECK(next != first && next != '!', "overloaded %c, went to %c", first, next);
	CHECK(stats().affinity[STEER_AFF_LEFT_OVERLOAD] == over + 1, "not counted as overload");
}

/* The key's backend stops listening: its connects are refused, and after
 * STEER_FAIL_EJECT of them it is ejected; the key's next connect leaves. */
static void test_leaves_ejected(void)
{
	char first, got[STEER_FAIL_EJECT + 1], next, addr[64];
	struct test_backend *x;
	uint64_t gone;
	int i;

	CHECK(publish_sticky(STEER_AFF_SOCKOPT, 0) == 0, "publish: %s", err);
	first = connect_key(79);
	CHECK(first == 'A' || first == 'B', "first: %c", first);
	x = &be[backend_index(first)];
	gone = stats().affinity[STEER_AFF_LEFT_GONE];
	test_backend_stop(x);
	for (i = 0; i < STEER_FAIL_EJECT; i++)
		got[i] = connect_key(79);
	got[STEER_FAIL_EJECT] = 0;
	next = connect_key(79);
	snprintf(addr, sizeof(addr), "%s", x->addr); /* start clears x first */
	CHECK(test_backend_start(x, addr, first == 'A' ? "A" : "B") == 0, "restart backend");
	CHECK(all_of(got, '!'), "while it refused: %s", got);
	CHECK(next != first && next != '!', "ejected %c, went to %c", first, next);
	CHECK(stats().affinity[STEER_AFF_LEFT_GONE] == gone + 1, "not counted as gone");
	/* a publish listing the backend puts it back */
	CHECK(publish_aff(STEER_AFF_OFF, 0, 0, 0) == 0, "publish: %s", err);
}

/* The client's way in steer_affin (the application's key): 0, -ENOENT, or
 * -errno. */
static int aff_entry(uint64_t key, struct steer_aff *out)
{
	struct steer_aff_key k = { .client = key,
				   .svc_id = (__u32)steer_dp_service_id(dp, &vip),
				   .kind = STEER_AFF_SOCKOPT };
	struct steer_aff_set set;
	__u64 hash = steer_aff_hash(&k);
	__u32 set_id = steer_aff_set_of(hash), way;
	char path[4096];
	int fd, rc;

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_AFFIN);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	rc = bpf_map_lookup_elem(fd, &set_id, &set) == 0 ? 0 : -errno;
	close(fd);
	if (rc)
		return rc;
	way = steer_aff_way_of(&set, steer_aff_tag(hash));
	if (way >= STEER_AFFINITY_WAYS)
		return -ENOENT;
	*out = set.way[way];
	return 0;
}

/* The kernel's clock of last_ns (bpf_ktime_get_coarse_ns). */
static uint64_t coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void test_idle_key_forgotten(void)
{
	const uint64_t idle = 3000 * NS_PER_MS;
	struct timespec tick = { .tv_nsec = 10 * 1000 * 1000 };
	struct steer_aff e = { 0 };
	uint64_t n0, n1, n2, deadline;

	CHECK(publish_aff(STEER_AFF_SOCKOPT, HOUR_NS, idle, 0) == 0, "publish: %s", err);
	drain_all();
	n0 = stats().affinity[STEER_AFF_NEW];
	connect_key(80);
	connect_key(80);
	n1 = stats().affinity[STEER_AFF_NEW];
	/* Until the kernel's clock is past the key's last connect plus the
	 * timeout, by the entry itself. */
	CHECK(aff_entry(80, &e) == 0, "the key is not remembered");
	deadline = coarse_ns() + 60ULL * 1000 * NS_PER_MS;
	while (coarse_ns() - e.last_ns <= idle && coarse_ns() < deadline)
		nanosleep(&tick, NULL);
	connect_key(80);
	n2 = stats().affinity[STEER_AFF_NEW];
	CHECK(n1 == n0 + 1 && n2 == n1 + 1, "new: %llu, %llu, %llu", (unsigned long long)n0,
	      (unsigned long long)n1, (unsigned long long)n2);
}

/* Until the kernel's coarse clock, which dates the ways, is past its reading
 * now: a connect from then on is dated after every connect before. */
static void next_tick(void)
{
	struct timespec ms = { .tv_nsec = 1000 * 1000 };
	uint64_t now = coarse_ns(), deadline = now + 10ULL * 1000 * NS_PER_MS;

	while (coarse_ns() == now && coarse_ns() < deadline)
		nanosleep(&ms, NULL);
}

/* A key of the application's kind whose set is set_id, from *next on. */
static uint64_t key_in_set(uint32_t set_id, uint64_t *next)
{
	const uint32_t svc_id = (uint32_t)steer_dp_service_id(dp, &vip);

	for (;; (*next)++) {
		struct steer_aff_key k = { .client = *next,
					   .svc_id = svc_id,
					   .kind = STEER_AFF_SOCKOPT };

		if (steer_aff_set_of(steer_aff_hash(&k)) == set_id)
			return (*next)++;
	}
}

/* A client that keeps connecting keeps its way while new clients fill its
 * set: each connect renews it, so the least recently connected is always
 * another. Without the renewal, the fourth newcomer would take its way. */
static void test_connecting_key_keeps_its_way(void)
{
	const uint64_t client = 0x6b6565700001ULL;
	struct steer_aff_key k = { .client = client,
				   .svc_id = (__u32)steer_dp_service_id(dp, &vip),
				   .kind = STEER_AFF_SOCKOPT };
	const uint32_t set_id = steer_aff_set_of(steer_aff_hash(&k));
	uint64_t next = 1ULL << 50, newcomer, stays;
	struct steer_aff e;
	char first, got;
	int i;

	CHECK(publish_aff(STEER_AFF_SOCKOPT, HOUR_NS, TEN_MIN_NS, 0) == 0, "publish: %s", err);
	first = connect_key(client);
	for (i = 0; i < STEER_AFFINITY_WAYS + 2; i++) {
		next_tick();
		newcomer = key_in_set(set_id, &next);
		CHECK(connect_key(newcomer) != '!', "newcomer %d", i);
		CHECK(aff_entry(newcomer, &e) == 0, "newcomer %d is not held", i);
		CHECK(aff_entry(client, &e) == 0, "the client lost its way to newcomer %d", i);
		next_tick();
		stays = stats().affinity[STEER_AFF_STAY];
		got = connect_key(client);
		CHECK(got == first && stats().affinity[STEER_AFF_STAY] == stays + 1,
		      "the client did not stay: %c, then %c", first, got);
	}
}

static void test_publish_off_and_on(void)
{
	char got[11];
	struct steer_svc_stats s0, s1;

	CHECK(publish_sticky(STEER_AFF_SOCKOPT, 0) == 0, "publish: %s", err);
	connects(90, 10, got);
	CHECK(all_of(got, got[0]), "on: %s", got);
	CHECK(publish_aff(STEER_AFF_OFF, 0, 0, 0) == 0, "publish: %s", err);
	drain_all();
	s0 = stats();
	connects(90, 10, got);
	s1 = stats();
	CHECK(strchr(got, 'A') && strchr(got, 'B'), "off: %s", got);
	CHECK(memcmp(s0.affinity, s1.affinity, sizeof(s0.affinity)) == 0, "off counted");
	CHECK(publish_sticky(STEER_AFF_SOCKOPT, 0) == 0, "publish: %s", err);
	connects(90, 10, got);
	CHECK(all_of(got, got[0]), "on again: %s", got);
}

/* ---- the bound ------------------------------------------------------------------------ */

/*
 * The clients the table should hold after keys base .. base + n - 1 connected
 * in order: in each set, the last STEER_AFFINITY_WAYS keys that landed in it
 * (expect[set * WAYS + i], 0 for none). The kernel dates ways by the coarse
 * clock, so keys of one set within one tick may be kept the other way round.
 */
static void lru_expect(uint64_t base, uint64_t n, uint32_t svc_id, uint64_t *expect)
{
	uint8_t *fill = calloc(STEER_AFFINITY_SETS, 1);
	uint64_t i;

	if (!fill)
		return;
	for (i = 0; i < n; i++) {
		struct steer_aff_key k = { .client = base + i,
					   .svc_id = svc_id,
					   .kind = STEER_AFF_SOCKOPT };
		__u32 set = steer_aff_set_of(steer_aff_hash(&k));
		uint64_t *w = &expect[(size_t)set * STEER_AFFINITY_WAYS];

		if (fill[set] == STEER_AFFINITY_WAYS) /* forget the oldest */
			memmove(w, w + 1, (STEER_AFFINITY_WAYS - 1) * sizeof(*w));
		else
			fill[set]++;
		w[fill[set] - 1] = base + i;
	}
	free(fill);
}

struct lru_count {
	uint64_t held;	     /* ways the flood wrote (dated from its start on) */
	uint64_t unexpected; /* ...holding none of the keys lru_expect keeps */
	uint64_t missing;    /* keys lru_expect keeps and the table does not */
	uint64_t recent;     /* of the last STEER_AFFINITY_SETS keys, held */
	bool has_last;	     /* the last key is held */
};

static __u32 key_tag(uint64_t client, uint32_t svc_id)
{
	struct steer_aff_key k = { .client = client, .svc_id = svc_id, .kind = STEER_AFF_SOCKOPT };

	return steer_aff_tag(steer_aff_hash(&k));
}

/* Which of the ways of set, dated since, holds client: its index, or -1. */
static int held_way(const struct steer_aff_set *set, uint64_t since, uint64_t client,
		    uint32_t svc_id)
{
	__u32 way = steer_aff_way_of(set, key_tag(client, svc_id));

	return way < STEER_AFFINITY_WAYS && set->way[way].last_ns >= since ? (int)way : -1;
}

static int lru_count(int fd, uint64_t base, uint64_t n, uint64_t since, uint32_t svc_id,
		     const uint64_t *expect, struct lru_count *c)
{
	struct steer_aff_set set;
	__u32 id;
	int i, w;

	memset(c, 0, sizeof(*c));
	for (id = 0; id < STEER_AFFINITY_SETS; id++) {
		const uint64_t *want = &expect[(size_t)id * STEER_AFFINITY_WAYS];
		bool expected[STEER_AFFINITY_WAYS] = { false };

		if (bpf_map_lookup_elem(fd, &id, &set) != 0)
			return -errno;
		for (i = 0; i < STEER_AFFINITY_WAYS && want[i]; i++) {
			w = held_way(&set, since, want[i], svc_id);
			if (w < 0) {
				c->missing++;
				continue;
			}
			expected[w] = true;
			c->recent += want[i] >= base + n - STEER_AFFINITY_SETS;
			c->has_last |= want[i] == base + n - 1;
		}
		for (i = 0; i < STEER_AFFINITY_WAYS; i++) {
			if (!set.way[i].tag || set.way[i].last_ns < since)
				continue;
			c->held++;
			c->unexpected += !expected[i];
		}
	}
	return 0;
}

/* A connect with the key, then an abort (RST): no TIME_WAIT on either side,
 * so that a million connects do not run out of ports. 0, or -errno. */
static int flood_connect(uint64_t key)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, rc = 0;

	if (test_sockaddr(VIP, &ss, &len) != 0)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, 8) != 0 ||
	    connect(fd, (struct sockaddr *)&ss, len) != 0)
		rc = -errno;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(fd);
	return rc;
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_lru_bound(void)
{
	const uint64_t n = 1000000, base = 1ULL << 40;
	const uint32_t svc_id = (uint32_t)steer_dp_service_id(dp, &vip);
	uint64_t *expect = calloc((size_t)STEER_AFFINITY_KEYS, sizeof(*expect));
	struct lru_count c = { 0 };
	char path[4096];
	double t0, secs;
	uint64_t i, since, failed = 0;
	int fd, rc;

	CHECK(expect, "no memory");
	if (!expect)
		return;
	CHECK(publish_aff(STEER_AFF_SOCKOPT, HOUR_NS, TEN_MIN_NS, 0) == 0, "publish: %s", err);
	since = coarse_ns();
	t0 = mono();
	for (i = 0; i < n; i++)
		if (flood_connect(base + i) != 0)
			failed++;
	secs = mono() - t0;
	lru_expect(base, n, svc_id, expect);
	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_AFFIN);
	fd = bpf_obj_get(path);
	CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
	rc = fd >= 0 ? lru_count(fd, base, n, since, svc_id, expect, &c) : -EBADF;
	if (fd >= 0)
		close(fd);
	free(expect);
	printf("# %llu keys in %.1f s (%.1f us a connect): %llu held (bound %u), "
	       "%llu of the last %u; %llu held that a set's LRU forgot, %llu forgotten it holds\n",
	       (unsigned long long)n, secs, secs * 1e6 / (double)n, (unsigned long long)c.held,
	       STEER_AFFINITY_KEYS, (unsigned long long)c.recent, STEER_AFFINITY_SETS,
	       (unsigned long long)c.unexpected, (unsigned long long)c.missing);
	CHECK(rc == 0, "read the table: %s", strerror(-rc));
	CHECK(failed == 0, "%llu connects failed", (unsigned long long)failed);
	CHECK(c.held > 0 && c.held <= STEER_AFFINITY_KEYS, "%llu held", (unsigned long long)c.held);
	/* Old keys make room: well under the million are held. */
	CHECK(c.held < n * 9 / 10, "%llu held of %llu", (unsigned long long)c.held,
	      (unsigned long long)n);
	/* Each set is an LRU: what it holds is its newest, but for keys of one
	 * set that met within one tick of the coarse clock (rare). A key of
	 * another test dated before the flood would count as missing. */
	CHECK(c.unexpected <= 50 && c.missing <= 50, "%llu unexpected, %llu missing",
	      (unsigned long long)c.unexpected, (unsigned long long)c.missing);
	CHECK(c.recent >= (uint64_t)STEER_AFFINITY_SETS * 99 / 100, "%llu of the last %u held",
	      (unsigned long long)c.recent, STEER_AFFINITY_SETS);
	CHECK(c.has_last, "the latest key is not remembered");
}

/* ---- an upgrade over generations of smaller tables ------------------------------------- */

static int pin_at(int fd, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), name);
	unlink(path);
	return bpf_obj_pin(fd, path) == 0 ? 0 : -errno;
}

/*
 * The tables grew with affinity's fields: a steer_gen pinned by the build
 * before holds tables of 24 bytes fewer, which its own shape does not show.
 * The owner must replace it (the verifier would refuse this build's
 * programs over it), and steering must go on.
 */
static void test_generations_of_smaller_tables_are_replaced(void)
{
	LIBBPF_OPTS(bpf_map_create_opts, io, .map_flags = BPF_F_NO_PREALLOC);
	LIBBPF_OPTS(bpf_map_create_opts, oo);
	struct steer_dp_opts o = { .pin_dir = testenv_pin_dir(),
				   .cgroup = testenv_cgroup(),
				   .own = true };
	__u32 zero = 0;
	int inner, outer, rc;
	char got[11];

	steer_dp_close(dp);
	dp = NULL;
	inner = bpf_map_create(BPF_MAP_TYPE_HASH, STEER_MAP_TABLES, sizeof(struct steer_addr),
			       sizeof(struct steer_table) - 24, STEER_MAX_SERVICES, &io);
	CHECK(inner >= 0, "inner: %s", strerror(errno));
	oo.inner_map_fd = (__u32)inner;
	outer = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, STEER_MAP_GEN, 4, 4, 1, &oo);
	CHECK(outer >= 0, "outer: %s", strerror(errno));
	CHECK(bpf_map_update_elem(outer, &zero, &inner, BPF_ANY) == 0, "fill: %s", strerror(errno));
	CHECK(pin_at(outer, STEER_MAP_GEN) == 0 && pin_at(inner, STEER_MAP_TABLES) == 0, "pin");
	close(inner);
	close(outer);
	rc = steer_dp_open(&o, &dp, err, sizeof(err));
	CHECK(rc == 0, "open over generations of smaller tables: %s", err);
	CHECK(publish_aff(STEER_AFF_SOCKOPT, HOUR_NS, TEN_MIN_NS, 0) == 0, "publish: %s", err);
	connects(91, 10, got);
	CHECK(all_of(got, got[0]) && got[0] != '!', "after the upgrade: %s", got);
}

/* ---- setup --------------------------------------------------------------------------- */

static void netns_cleanup(void)
{
	int i;

	for (i = 0; i < 2; i++)
		if (netns_name[i][0])
			test_system("ip netns del %s 2>/dev/null", netns_name[i]);
}

/*
 * Two network namespaces, each a veth pair into the test's: A 192.0.2.2
 * (the test's side 192.0.2.1), B 198.51.100.2 (198.51.100.1) routed to
 * 192.0.2.0/24. The backends listen on 192.0.2.1, which both reach.
 */
static int netns_setup(void)
{
	int pid = (int)getpid();

	snprintf(netns_name[0], sizeof(netns_name[0]), "smg-aff-a-%d", pid);
	snprintf(netns_name[1], sizeof(netns_name[1]), "smg-aff-b-%d", pid);
	atexit(netns_cleanup);
	if (test_system("ip netns add %s && ip netns add %s", netns_name[0], netns_name[1]) != 0)
		return -1;
	if (test_system("ip link add affa type veth peer name affa0 netns %s && "
			"ip link add affb type veth peer name affb0 netns %s && "
			"ip addr add 192.0.2.1/24 dev affa && ip link set affa up && "
			"ip addr add 198.51.100.1/24 dev affb && ip link set affb up",
			netns_name[0], netns_name[1]) != 0)
		return -1;
	if (test_system("ip -n %s addr add 192.0.2.2/24 dev affa0 && ip -n %s link set affa0 up && "
			"ip -n %s link set lo up",
			netns_name[0], netns_name[0], netns_name[0]) != 0)
		return -1;
	if (test_system("ip -n %s addr add 198.51.100.2/24 dev affb0 && "
			"ip -n %s link set affb0 up && ip -n %s link set lo up && "
			"ip -n %s route add 192.0.2.0/24 via 198.51.100.1",
			netns_name[1], netns_name[1], netns_name[1], netns_name[1]) != 0)
		return -1;
	return 0;
}

static int setup(void)
{
	struct steer_dp_opts o;
	char b0[64], b1[64];

	if (testenv_init("affinity") != 0)
		return -1;
	if (netns_setup() != 0) {
		fprintf(stderr, "cannot set up the client network namespaces\n");
		return -1;
	}
	snprintf(b0, sizeof(b0), "192.0.2.1:9101");
	snprintf(b1, sizeof(b1), "192.0.2.1:9102");
	if (test_backend_start(&be[0], b0, "A") != 0 || test_backend_start(&be[1], b1, "B") != 0)
		return -1;
	if (steer_addr_parse(VIP, &vip, err, sizeof(err)) != 0 ||
	    steer_addr_parse(b0, &cfg[0], err, sizeof(err)) != 0 ||
	    steer_addr_parse(b1, &cfg[1], err, sizeof(err)) != 0)
		return -1;
	o = (struct steer_dp_opts){ .pin_dir = testenv_pin_dir(),
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
	signal(SIGPIPE, SIG_IGN); /* a backend writing to a client that reset */
	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_off_spreads);
	TAP_RUN(test_cgroups_keep_their_backend);
	TAP_RUN(test_netns_keep_their_backend);
	TAP_RUN(test_sockopt_unprivileged);
	TAP_RUN(test_slack_exact);
	TAP_RUN(test_leaves_drained);
	TAP_RUN(test_leaves_overloaded);
	TAP_RUN(test_leaves_ejected);
	TAP_RUN(test_idle_key_forgotten);
	TAP_RUN(test_connecting_key_keeps_its_way);
	TAP_RUN(test_publish_off_and_on);
	TAP_RUN(test_lru_bound);
	TAP_RUN(test_generations_of_smaller_tables_are_replaced);
	if (dp) {
		steer_dp_detach(dp, err, sizeof(err));
		steer_dp_close(dp);
	}
	test_backend_stop(&be[0]);
	test_backend_stop(&be[1]);
	return tap_done();
}
