// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * norelbench.c - issue 10's ablation, side by side: the data plane as shipped
 * (cgroup/sock_release settles each socket) against the same programs without
 * the release hook (bpf/steer_norel.bpf.c: a TCP-socket walk per poll and a
 * reset signal for fast ejection; user/norel.c).
 *
 *   norelbench --pin PREFIX --cgroup-a CG --cgroup-b CG --cgroup-c CG
 *              --cgroup-none CG
 *              --obj build/steer_norel.bpf.o --first 127.0.3.1:9000
 *              [--backends 256] [--connects 5000] [--rounds 8]
 *              [--scales 1000,10000,100000] [--polls 5] [--wall-ops 20000]
 *              --part bpf|walk|wall [--header]
 *
 * Three data planes, pinned at PREFIX-a, -b and -c, attached to three sibling
 * cgroups; the process moves itself into the one it measures. a (today) is
 * the data plane as shipped; b (norel) has no release hook; c (lean) keeps
 * the hook with the release program cut to its cookie test
 * (lean_release: no layout-0 branch), the other way to a cheaper unsteered
 * socket.
 *   bpf   BPF time per connection, every program summed, run_time_ns /
 *         run_cnt with BPF_ENABLE_STATS, the three variants interleaved
 *         round by round, unsteered (a connect to a backend
 *         directly), steered (the virtual address, spread shape over
 *         --backends onebyte servers at FIRST, FIRST+1, ...) and refused (a
 *         virtual address whose one backend refuses: the failure signal's
 *         cost; readmitted as it is ejected). Next to them,
 *         empty programs of each hook type: connect4, sock_release,
 *         getpeername4 and sockops in both cgroups, and the host-wide
 *         tracing hooks a failure signal could use (tp_btf/tcp_receive_reset,
 *         tp_btf/inet_sock_set_state, fentry/tcp_done): their time per run
 *         and how often each runs per connection.
 *   walk  the per-poll cost of variant b at each scale: N/2 steered sockets
 *         held open to 8 listeners that never accept (N sockets in the
 *         namespace with the listeners' children), --polls polls: the walk's
 *         wall time and BPF time per socket, the user-space scan of the
 *         records; then every socket closed and how many polls until the
 *         live counts say 0 (the lag). With --netns-check, first: a steered
 *         socket held open in another network namespace of the same
 *         cgroup, and what two polls make of it.
 *   wall  without statistics and without the empty programs:
 *         socket()+close() in each cgroup (a, b, c, and none: no program
 *         at all), interleaved: what sock_release costs an
 *         unsteered socket in wall time, with no instrument around it.
 * One CSV row per measurement on stdout.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"
#include "dataplane.h"
#include "norel.h"

#define VIP "127.0.0.200:8000"
#define VIP_WALK "127.0.0.201:8001"
#define VIP_DEAD "127.0.0.202:8002"
#define VIP_NETNS "127.0.0.204:8004"
#define NETNS_BACKEND "127.0.0.1:7777" /* in the other namespace */
#define DEAD_BACKEND "127.0.0.9:9"     /* nothing listens: connects are refused */
#define WALK_FIRST "127.0.6.1:7000"
#define WALK_LISTENERS 8
#define TTL_NS (3600ULL * 1000000000ULL)
#define MAX_SCALES 6

enum cg_prog {
	P_CONNECT4,
	P_RELEASE,
	P_PEER4,
	P_SOCKOPS,
	CG_PROGS
};
static const enum bpf_attach_type cg_attach[CG_PROGS] = { BPF_CGROUP_INET4_CONNECT,
							  BPF_CGROUP_INET_SOCK_RELEASE,
							  BPF_CGROUP_INET4_GETPEERNAME,
							  BPF_CGROUP_SOCK_OPS };
static const enum bpf_prog_type cg_type[CG_PROGS] = { BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
						      BPF_PROG_TYPE_CGROUP_SOCK,
						      BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
						      BPF_PROG_TYPE_SOCK_OPS };

/* The variants measured side by side, each in its own cgroup. */
enum {
	V_TODAY,
	V_NOREL,
	V_LEAN,
	NV
};
static const char *const variant_names[NV + 1] = { "today", "norel", "lean", "none" };

struct stats {
	uint64_t ns, cnt;
};

static struct nb {
	struct steer_dp *dp[NV];
	struct bpf_object *lean;
	struct steer_norel *nr;
	const char *pin[NV], *cg[NV + 1], *obj; /* cg[NV]: no program at all */
	char pin_buf[NV][512];
	struct steer_addr vip, backends[STEER_MAX_BACKENDS], vip_dead, dead;
	uint32_t dead_slot[NV];
	uint32_t slots[NV][STEER_MAX_BACKENDS];
	int prog[NV][3]; /* connect4, release, getpeername4 of each variant */
	int empty[CG_PROGS], empty_link[NV][CG_PROGS];
	long connects, wall_ops, max_held;
	bool netns_check;
	int n, rounds, polls, n_scales;
	long scales[MAX_SCALES];
} B = { .connects = 5000, .wall_ops = 20000, .n = 256, .rounds = 8, .polls = 5 };

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int stats_of(int fd, struct stats *s)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(s, 0, sizeof(*s));
	if (fd < 0)
		return 0;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
		return -errno;
	s->ns = info.run_time_ns;
	s->cnt = info.run_cnt;
	return 0;
}

/* r0 = 1; exit, of each cgroup hook type, attached to both measured cgroups. */
static int attach_empty(void)
{
	int i, v;

	for (i = 0; i < CG_PROGS; i++) {
		B.empty[i] = bench_empty_prog(cg_type[i], cg_attach[i]);
		if (B.empty[i] < 0)
			return -1;
		for (v = 0; v < NV; v++) {
			int cg = open(B.cg[v], O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			B.empty_link[v][i] =
				cg < 0 ? -1 : bpf_link_create(B.empty[i], cg, cg_attach[i], NULL);
			if (cg >= 0)
				close(cg);
			if (B.empty_link[v][i] < 0)
				return -1;
		}
	}
	return 0;
}

static int publish(int v, const struct steer_addr *vip, const struct steer_addr *be, int n,
		   double step_ns, uint32_t *slots)
{
	static struct steer_dp_cost cost[STEER_MAX_BACKENDS];
	struct steer_dp_service svc = { .vip = *vip,
					.configured = be,
					.n_configured = (size_t)n,
					.table = cost,
					.n_table = (size_t)n,
					.ttl_ns = TTL_NS };
	char err[512];
	int i;

	for (i = 0; i < n; i++) {
		cost[i].addr = be[i];
		cost[i].base_wait_ns = step_ns * i;
		cost[i].ns_per_token = 500000.0;
	}
	if (steer_dp_publish_one(B.dp[v], &svc, err, sizeof(err)) != 0) {
		fprintf(stderr, "norelbench: publish: %s\n", err);
		return -1;
	}
	for (i = 0; slots && i < n; i++)
		if (steer_dp_slot(B.dp[v], vip, &be[i], &slots[i]) != 0)
			return -1;
	return 0;
}

/* Connect, read one byte, close; with vip, getpeername must report it. */
static int connect_once(const struct steer_addr *to, const struct steer_addr *vip, int *hold)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = to->port,
				  .sin_addr.s_addr = to->ip6[3] };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	unsigned char byte;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    (hold || read(fd, &byte, 1) == 1))
		rc = 0;
	if (rc == 0 && vip &&
	    (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
	     peer.sin_addr.s_addr != vip->ip6[3] || peer.sin_port != vip->port))
		rc = -1;
	if (hold && rc == 0)
		*hold = fd;
	else
		close(fd);
	return rc;
}

static int poll_b(struct steer_norel_pass *p)
{
	char err[512];

	if (steer_norel_poll(B.nr, p, err, sizeof(err)) != 0) {
		fprintf(stderr, "norelbench: poll: %s\n", err);
		return -1;
	}
	return 0;
}

/* ---- part bpf ---------------------------------------------------------------- */

enum {
	S_UNSTEERED,
	S_STEERED,
	S_REFUSED,
	SHAPES
};
static const char *const shape_names[SHAPES] = { "unsteered", "steered", "refused" };
#define N_ST (3 + 1 + CG_PROGS + NOREL_FLOORS) /* progs, reset, cg floors, tracing floors */

static int read_all(int v, struct stats *s)
{
	int i, rc = 0;

	for (i = 0; i < 3; i++)
		rc |= stats_of(B.prog[v][i], &s[i]);
	rc |= stats_of(v == V_NOREL ? steer_norel_reset_fd(B.nr) : -1, &s[3]);
	for (i = 0; i < CG_PROGS; i++)
		rc |= stats_of(B.empty[i], &s[4 + i]);
	for (i = 0; i < NOREL_FLOORS; i++)
		rc |= stats_of(steer_norel_floor_fd(B.nr, (enum steer_norel_floor)i),
			       &s[4 + CG_PROGS + i]);
	return rc;
}

static double per_conn(const struct stats *a, const struct stats *z, long k)
{
	return k > 0 ? (double)(z->ns - a->ns) / (double)k : 0;
}

static double per_run(const struct stats *a, const struct stats *z)
{
	return z->cnt > a->cnt ? (double)(z->ns - a->ns) / (double)(z->cnt - a->cnt) : 0;
}

static double runs_per_conn(const struct stats *a, const struct stats *z, long k)
{
	return k > 0 ? (double)(z->cnt - a->cnt) / (double)k : 0;
}

static int measure_bpf(int v, int shape, int round)
{
	struct stats a[N_ST], z[N_ST];
	struct steer_norel_pass p;
	long k, errors = 0;
	double c4, rel, rst, gp, total, f[CG_PROGS], ft[NOREL_FLOORS], rt[NOREL_FLOORS], ops;
	int i;

	if (bench_join_cgroup(B.cg[v]) != 0 || read_all(v, a) != 0)
		return -1;
	for (k = 0; k < B.connects && !stopping; k++) {
		if (shape == S_UNSTEERED) {
			errors += connect_once(&B.backends[k % B.n], NULL, NULL) != 0;
			continue;
		}
		if (shape == S_REFUSED) { /* the backend refuses: a reset in SYN_SENT */
			errors += connect_once(&B.vip_dead, NULL, NULL) == 0;
			if (steer_dp_fails(B.dp[v], B.dead_slot[v]) >= STEER_FAIL_EJECT - 1)
				steer_dp_readmit(B.dp[v], B.dead_slot[v]);
			continue;
		}
		if (k % 1000 == 0) { /* what the daemon does once per poll */
			for (i = 0; i < B.n; i++)
				steer_dp_inflight_exchange(B.dp[v], B.slots[v][i]);
			if (v == 1 && poll_b(&p) != 0)
				return -1;
		}
		errors += connect_once(&B.vip, &B.vip, NULL) != 0;
	}
	if (read_all(v, z) != 0)
		return -1;
	c4 = per_conn(&a[0], &z[0], k);
	rel = per_conn(&a[1], &z[1], k);
	gp = per_run(&a[2], &z[2]);
	rst = per_conn(&a[3], &z[3], k);
	for (i = 0; i < CG_PROGS; i++)
		f[i] = per_run(&a[4 + i], &z[4 + i]);
	ops = runs_per_conn(&a[4 + P_SOCKOPS], &z[4 + P_SOCKOPS], k);
	for (i = 0; i < NOREL_FLOORS; i++) {
		bool loaded = steer_norel_floor_fd(B.nr, (enum steer_norel_floor)i) >= 0;

		ft[i] = loaded ? per_run(&a[4 + CG_PROGS + i], &z[4 + CG_PROGS + i]) : -1;
		rt[i] = runs_per_conn(&a[4 + CG_PROGS + i], &z[4 + CG_PROGS + i], k);
	}
	total = c4 + rel + rst;
	printf("%d,%s,%s,%ld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.2f,%.1f,%.3f,%.1f,%.2f,"
	       "%.1f,%.2f,%.1f,%ld\n",
	       round, variant_names[v], shape_names[shape], k, c4, rel, rst, gp, total,
	       f[P_CONNECT4], f[P_RELEASE], f[P_PEER4], f[P_SOCKOPS], ops, ft[NOREL_FLOOR_RESET],
	       rt[NOREL_FLOOR_RESET], ft[NOREL_FLOOR_SET_STATE], rt[NOREL_FLOOR_SET_STATE],
	       ft[NOREL_FLOOR_TCP_DONE], rt[NOREL_FLOOR_TCP_DONE],
	       total - f[P_CONNECT4] - (v == V_NOREL ? 0 : f[P_RELEASE]), errors);
	fflush(stdout);
	return 0;
}

static int part_bpf(bool header)
{
	int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME), r, v, s, rc = 0;

	if (stats_fd < 0 || attach_empty() != 0) {
		fprintf(stderr, "norelbench: cannot enable statistics or attach the floors: %s\n",
			strerror(errno));
		if (stats_fd >= 0)
			close(stats_fd);
		return -1;
	}
	if (header)
		printf("round,variant,shape,connects,connect4_ns,release_ns,reset_ns,getpeername_"
		       "ns,"
		       "total_ns,floor_connect4_ns,floor_release_ns,floor_getpeername_ns,floor_"
		       "sockops_ns,sockops_runs,floor_tp_reset_ns,tp_reset_runs,floor_tp_set_"
		       "state_ns,tp_set_state_runs,floor_fentry_tcp_done_ns,fentry_tcp_done_runs,"
		       "net_ns,errors\n");
	for (r = 1; r <= B.rounds && !stopping && rc == 0; r++)
		for (s = 0; s < SHAPES && rc == 0; s++)
			for (v = 0; v < NV && rc == 0; v++) /* rotate who goes first */
				rc = measure_bpf((v + r) % NV, s, r);
	close(stats_fd);
	return rc || stopping ? -1 : 0;
}

/* ---- part walk --------------------------------------------------------------- */

static int listen_on(const struct steer_addr *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = a->port,
				  .sin_addr.s_addr = a->ip6[3] };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 65535) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int64_t live_sum(const uint32_t *slots)
{
	int64_t sum = 0;
	int i;

	for (i = 0; i < WALK_LISTENERS; i++)
		sum += steer_dp_live(B.dp[V_NOREL], slots[i]);
	return sum;
}

static int walk_scale(long n_sockets, struct steer_addr *vip, const struct steer_addr *first)
{
	struct steer_addr be[WALK_LISTENERS];
	uint32_t slots[WALK_LISTENERS];
	int lfd[WALK_LISTENERS], *fds, i, rc = 0, lag = 0;
	long held = 0, k, want = n_sockets / 2, max_held = B.max_held;
	struct stats a, z;
	struct steer_norel_pass p;

	fds = calloc((size_t)want, sizeof(int));
	for (i = 0; i < WALK_LISTENERS; i++) {
		be[i] = bench_addr_plus(first, (uint32_t)i);
		lfd[i] = listen_on(&be[i]);
		if (lfd[i] < 0)
			rc = -1;
	}
	if (!fds || rc || publish(1, vip, be, WALK_LISTENERS, 0, slots) != 0 ||
	    bench_join_cgroup(B.cg[V_NOREL]) != 0)
		rc = -1;
	/* Up to max_held open (the descriptor limit); the rest connected and
	 * closed: still in the table, orphaned, as many sockets to walk. */
	for (k = 0; k < want && rc == 0 && !stopping; k++) {
		int fd = -1;

		if (connect_once(vip, NULL, &fd) != 0)
			break;
		if (held < max_held)
			fds[held++] = fd;
		else
			close(fd);
	}
	if (k != want) {
		fprintf(stderr, "norelbench: walk: %ld of %ld connects: %s\n", k, want,
			strerror(errno));
		rc = -1;
	}
	for (i = 0; i < B.polls && rc == 0; i++) {
		if (stats_of(steer_norel_walk_fd(B.nr), &a) || poll_b(&p) ||
		    stats_of(steer_norel_walk_fd(B.nr), &z)) {
			rc = -1;
			break;
		}
		printf("walk,%ld,%d,%llu,%llu,%llu,%llu,%.1f,%.1f,%llu,%lld\n", n_sockets, i + 1,
		       (unsigned long long)p.visited, (unsigned long long)p.matched,
		       (unsigned long long)p.walk_ns,
		       (unsigned long long)(z.ns - a.ns), /* BPF time of the whole walk */
		       p.visited ? (double)p.walk_ns / (double)p.visited : 0,
		       p.visited ? (double)(z.ns - a.ns) / (double)p.visited : 0,
		       (unsigned long long)p.scan_ns, (long long)live_sum(slots));
	}
	for (k = 0; k < held; k++)
		close(fds[k]);
	/* The lag: polls until the live counts know every socket is closed. */
	while (rc == 0 && live_sum(slots) != 0 && lag < 4) {
		if (poll_b(&p) != 0)
			rc = -1;
		lag++;
	}
	if (rc == 0)
		printf("lag,%ld,%d,%lld\n", n_sockets, lag, (long long)live_sum(slots));
	fflush(stdout);
	for (i = 0; i < WALK_LISTENERS; i++)
		if (lfd[i] >= 0)
			close(lfd[i]);
	free(fds);
	return rc;
}

/*
 * A steered socket held open by a process of the same cgroup in another
 * network namespace (a container with its own): the walk sees its own
 * namespace only. Prints live before and after two polls, and whether
 * getpeername in that process still reports the virtual address then.
 */
static void netns_child(int to_parent, int from_parent, const struct steer_addr *vip,
			const struct steer_addr *be)
{
	struct sockaddr_in peer;
	socklen_t plen = sizeof(peer);
	char ok = 0, c;
	int fd = -1;

	/* ok: steered, and getpeername reported the virtual address before the polls */
	if (unshare(CLONE_NEWNET) == 0 && system("ip link set lo up") == 0 && listen_on(be) >= 0 &&
	    connect_once(vip, NULL, &fd) == 0 &&
	    getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 &&
	    peer.sin_addr.s_addr == vip->ip6[3] && peer.sin_port == vip->port)
		ok = 1;
	plen = sizeof(peer);
	if (write(to_parent, &ok, 1) != 1 || read(from_parent, &c, 1) != 1)
		_exit(1);
	ok = fd >= 0 && getpeername(fd, (struct sockaddr *)&peer, &plen) == 0 &&
	     peer.sin_addr.s_addr == vip->ip6[3] && peer.sin_port == vip->port;
	if (write(to_parent, &ok, 1) != 1)
		_exit(1);
	_exit(0);
}

static int other_netns(void)
{
	struct steer_addr vip, be;
	struct steer_norel_pass p;
	int up[2], down[2], rc = -1;
	char ok = 0, peer_ok = 0, err[128];
	long long live0 = -1, live2 = -1;
	uint32_t slot;
	pid_t pid;

	steer_addr_parse(VIP_NETNS, &vip, err, sizeof(err));
	steer_addr_parse(NETNS_BACKEND, &be, err, sizeof(err));
	if (publish(V_NOREL, &vip, &be, 1, 0, &slot) != 0 ||
	    bench_join_cgroup(B.cg[V_NOREL]) != 0 || pipe(up) != 0 || pipe(down) != 0)
		return -1;
	pid = fork();
	if (pid == 0)
		netns_child(up[1], down[0], &vip, &be);
	if (pid > 0 && read(up[0], &ok, 1) == 1 && ok) {
		live0 = (long long)steer_dp_live(B.dp[V_NOREL], slot);
		if (poll_b(&p) == 0 && poll_b(&p) == 0) {
			live2 = (long long)steer_dp_live(B.dp[V_NOREL], slot);
			rc = 0;
		}
	}
	if (pid > 0) {
		if (write(down[1], "x", 1) != 1 || read(up[0], &peer_ok, 1) != 1)
			rc = -1;
		waitpid(pid, NULL, 0);
	}
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	printf("netns,%d,%lld,%lld,%d\n", ok, live0, live2, peer_ok);
	return rc;
}

static int part_walk(bool header)
{
	struct steer_addr vip, first;
	char err[256];
	int stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME), i, rc = 0;

	steer_addr_parse(VIP_WALK, &vip, err, sizeof(err));
	steer_addr_parse(WALK_FIRST, &first, err, sizeof(err));
	if (header)
		printf("kind,sockets,poll,visited,matched,walk_ns,walk_bpf_ns,walk_ns_per_socket,"
		       "walk_bpf_ns_per_socket,scan_ns,live\n");
	if (B.netns_check)
		rc = other_netns();
	for (i = 0; i < B.n_scales && rc == 0 && !stopping; i++) {
		/* each scale on its own listeners: no port of a closed one in the way */
		first.ip6[3] = htonl(ntohl(first.ip6[3]) + (uint32_t)(i ? 256 : 0));
		rc = walk_scale(B.scales[i], &vip, &first);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	return rc || stopping ? -1 : 0;
}

/* ---- part wall ---------------------------------------------------------------- */

static int part_wall(bool header)
{
	int r, v, rc = 0;

	if (header)
		printf("round,variant,ops,ns_per_socket_close\n");
	for (r = 1; r <= B.rounds && !stopping && rc == 0; r++)
		for (v = 0; v <= NV && rc == 0; v++) {
			int c = (v + r) % (NV + 1);
			uint64_t t0;
			long k;

			if (bench_join_cgroup(B.cg[c]) != 0)
				return -1;
			t0 = bench_now_ns();
			for (k = 0; k < B.wall_ops; k++) {
				int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

				if (fd < 0)
					rc = -1;
				else
					close(fd);
			}
			printf("%d,%s,%ld,%.1f\n", r, variant_names[c], B.wall_ops,
			       (double)(bench_now_ns() - t0) / (double)B.wall_ops);
			fflush(stdout);
		}
	return rc;
}

/* ---- setup ---------------------------------------------------------------------- */

static int parse_scales(const char *s)
{
	char buf[128], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	B.n_scales = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v = strtol(tok, NULL, 10);

		if (v < 2 || v > 200000 || B.n_scales == MAX_SCALES)
			return -1;
		B.scales[B.n_scales++] = v;
	}
	return B.n_scales ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: norelbench --pin PREFIX --cgroup-a CG --cgroup-b CG --cgroup-c CG "
		"--cgroup-none CG --obj FILE --first IPV4:PORT --part bpf|walk|wall [--backends N] "
		"[--connects K] [--rounds R] [--scales 1000,10000,100000] [--polls P] "
		"[--wall-ops K] [--header]\n");
	exit(2);
}

static int setup(const char *prefix)
{
	struct steer_dp_opts o = { .own = true };
	char err[512];
	int v, i;

	for (v = 0; v < NV; v++) {
		snprintf(B.pin_buf[v], sizeof(B.pin_buf[v]), "%s-%c", prefix, 'a' + v);
		o.pin_dir = B.pin[v] = B.pin_buf[v];
		o.cgroup = B.cg[v];
		if (steer_dp_open(&o, &B.dp[v], err, sizeof(err)) != 0) {
			fprintf(stderr, "norelbench: %s\n", err);
			return -1;
		}
		B.prog[v][0] = bench_prog_of_link(B.pin[v], STEER_LINK_CONNECT4, NULL, NULL);
		B.prog[v][1] = bench_prog_of_link(B.pin[v], STEER_LINK_RELEASE, NULL, NULL);
		B.prog[v][2] = bench_prog_of_link(B.pin[v], STEER_LINK_PEER4, NULL, NULL);
		if (B.prog[v][0] < 0 || B.prog[v][1] < 0 || B.prog[v][2] < 0)
			return -1;
	}
	close(B.prog[V_NOREL][1]); /* no release hook: nothing to read */
	B.prog[V_NOREL][1] = -1;
	if (steer_norel_lean_release(B.obj, B.pin[V_LEAN], &B.lean, err, sizeof(err)) != 0) {
		fprintf(stderr, "norelbench: %s\n", err);
		return -1;
	}
	close(B.prog[V_LEAN][1]);
	B.prog[V_LEAN][1] = bench_prog_of_link(B.pin[V_LEAN], STEER_LINK_RELEASE, NULL, NULL);
	/* fentry needs a trampoline, which some kernels refuse (EPERM here):
	 * without that floor then. */
	if (steer_norel_open(B.obj, B.pin[V_NOREL], (1u << NOREL_FLOORS) - 1, &B.nr, err,
			     sizeof(err)) != 0 &&
	    steer_norel_open(B.obj, B.pin[V_NOREL], (1u << NOREL_FLOOR_TCP_DONE) - 1, &B.nr, err,
			     sizeof(err)) != 0) {
		fprintf(stderr, "norelbench: %s\n", err);
		return -1;
	}
	for (i = 1; i < B.n; i++)
		B.backends[i] = bench_addr_plus(&B.backends[0], (uint32_t)i);
	steer_addr_parse(VIP_DEAD, &B.vip_dead, err, sizeof(err));
	steer_addr_parse(DEAD_BACKEND, &B.dead, err, sizeof(err));
	for (v = 0; v < NV; v++)
		if (publish(v, &B.vip, B.backends, B.n, 100e6, B.slots[v]) != 0 ||
		    publish(v, &B.vip_dead, &B.dead, 1, 0, &B.dead_slot[v]) != 0)
			return -1;
	return 0;
}

static void teardown(void)
{
	char err[512];
	int v, i;

	bench_join_cgroup(B.cg[NV]);
	for (v = 0; v < NV; v++)
		for (i = 0; i < CG_PROGS; i++)
			if (B.empty_link[v][i] > 0)
				close(B.empty_link[v][i]);
	for (i = 0; i < CG_PROGS; i++)
		if (B.empty[i] > 0)
			close(B.empty[i]);
	steer_norel_close(B.nr);
	for (v = 0; v < NV; v++) {
		for (i = 0; i < 3; i++)
			if (B.prog[v][i] > 0)
				close(B.prog[v][i]);
		if (B.dp[v]) {
			if (steer_dp_detach(B.dp[v], err, sizeof(err)) != 0)
				fprintf(stderr, "norelbench: detach: %s\n", err);
			steer_dp_close(B.dp[v]);
		}
	}
	bpf_object__close(B.lean);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pin", required_argument, 0, 'p' },
		{ "cgroup-a", required_argument, 0, 'a' },
		{ "cgroup-b", required_argument, 0, 'b' },
		{ "cgroup-c", required_argument, 0, 'c' },
		{ "cgroup-none", required_argument, 0, 'N' },
		{ "obj", required_argument, 0, 'o' },
		{ "first", required_argument, 0, 'f' },
		{ "backends", required_argument, 0, 'n' },
		{ "connects", required_argument, 0, 'k' },
		{ "rounds", required_argument, 0, 'r' },
		{ "scales", required_argument, 0, 's' },
		{ "polls", required_argument, 0, 'P' },
		{ "wall-ops", required_argument, 0, 'w' },
		{ "part", required_argument, 0, 'x' },
		{ "netns-check", no_argument, 0, 'X' },
		{ "header", no_argument, 0, 'H' },
		{ 0, 0, 0, 0 },
	};
	const char *prefix = NULL, *part = NULL;
	bool header = false, have_first = false;
	char err[512];
	int c, i, rc;

	for (i = 0; i < NV; i++)
		for (c = 0; c < 3; c++)
			B.prog[i][c] = -1;
	for (i = 0; i < NV; i++)
		for (c = 0; c < CG_PROGS; c++)
			B.empty_link[i][c] = B.empty[c] = -1;
	parse_scales("1000,10000,100000");
	{
		struct rlimit rl;

		/* descriptors left for what is held open in part walk */
		B.max_held = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur > 2000
				     ? (long)rl.rlim_cur - 1000
				     : 1000;
	}
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			prefix = optarg;
			break;
		case 'a':
			B.cg[0] = optarg;
			break;
		case 'b':
			B.cg[1] = optarg;
			break;
		case 'c':
			B.cg[V_LEAN] = optarg;
			break;
		case 'N':
			B.cg[NV] = optarg;
			break;
		case 'o':
			B.obj = optarg;
			break;
		case 'f':
			have_first =
				steer_addr_parse(optarg, &B.backends[0], err, sizeof(err)) == 0 &&
				steer_addr_is_v4(&B.backends[0]);
			break;
		case 'n':
			B.n = atoi(optarg);
			break;
		case 'k':
			B.connects = atol(optarg);
			break;
		case 'r':
			B.rounds = atoi(optarg);
			break;
		case 's':
			if (parse_scales(optarg) != 0)
				usage();
			break;
		case 'P':
			B.polls = atoi(optarg);
			break;
		case 'w':
			B.wall_ops = atol(optarg);
			break;
		case 'x':
			part = optarg;
			break;
		case 'X':
			B.netns_check = true;
			break;
		case 'H':
			header = true;
			break;
		default:
			usage();
		}
	}
	if (!prefix || !B.cg[0] || !B.cg[1] || !B.cg[2] || !B.cg[3] || !B.obj || !have_first ||
	    !part || B.n < 1 || B.n > STEER_MAX_BACKENDS || B.connects < 1 || B.rounds < 1 ||
	    B.polls < 1 || B.wall_ops < 1)
		usage();
	steer_addr_parse(VIP, &B.vip, err, sizeof(err));
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	rc = setup(prefix);
	if (rc == 0) {
		if (!strcmp(part, "bpf"))
			rc = part_bpf(header);
		else if (!strcmp(part, "walk"))
			rc = part_walk(header);
		else if (!strcmp(part, "wall"))
			rc = part_wall(header);
		else
			rc = -1;
	}
	teardown();
	return rc == 0 ? 0 : 1;
}
