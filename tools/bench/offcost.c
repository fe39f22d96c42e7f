// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * offcost.c - what the shipped programs cost an unsteered connection in wall
 * time, with the BPF statistics off (as in production), next to what
 * bpf_stats says of the same workloads. The targets: an unsteered connection
 * pays <= 150 ns in all; an unsteered socket pays nothing beyond one early
 * return per packet.
 *
 *   offcost --pin PREFIX --cgroup-ship CG --cgroup-empty CG --cgroup-none CG
 *           [--cgroup-nowire CG] [--rounds 1500] [--rounds-on 300]
 *           [--ops-udp 400] [--ops-tcp 100] [--ops-pkt 400] [--ops-steered 100]
 *           [--workloads udp,tcp,pkt,steered] [--hooks FILE] [--cpu N] [--header]
 *
 * Sibling cgroups: ship = the data plane attached as smg-steerd does it
 * (steer_dp_open as owner: the connect, getpeername, release and sockops programs and,
 * by default, the cgroup_skb request accounting), with tables published for
 * 64 virtual addresses; empty = an empty program (r0 = 1) of exactly each hook
 * type ship attaches, read from ship's pinned links; none = no program; nowire
 * (with --cgroup-nowire; pins at PREFIX-nowire) = the data plane with the
 * request accounting off (smg-steerd --wire-estimator off). In each round, for
 * each workload, the process moves itself into each cgroup in turn (the first
 * one rotates) and runs a short block of operations there, timing every
 * operation by itself (CLOCK_MONOTONIC, vDSO); a row is one block, with the
 * median, quartiles and mean of its operations. --cpu pins the process to
 * one CPU. A socket belongs to the cgroup of the process that created it: the
 * listener and the UDP sink are created in none, so that only the measured
 * (client) side meets the programs.
 *   udp      socket(AF_INET, SOCK_DGRAM) + connect() to a 127.x address + close():
 *            connect4 (returns at its TCP test) and sock_release, no packet.
 *   tcp      a whole unsteered TCP connection to a listener of this process
 *            (127.0.9.1-64:9000, a port no virtual address uses): connect,
 *            accept, the server writes one byte and closes, the client reads
 *            it and closes. connect4, sock_release, sockops while the client
 *            connects, and the cgroup_skb programs on each packet of the
 *            client socket.
 *   pkt      on a connected UDP socket of the cgroup: send 16 bytes to a sink
 *            in none, which sends them back: one egress and one ingress packet
 *            of an unsteered socket per operation.
 *   steered  (in the arms with a data plane, ship and nowire, right
 *            after the arm's tcp block) the tcp operation to the virtual
 *            addresses 127.0.8.1-64:8000, each steered over its one backend,
 *            the listener's address 127.0.9.1-64:9000 (both data planes
 *            publish them).
 * Phase off: --rounds rounds, the statistics off. The run counts of the
 * block's cgroup's programs are read around every block (outside the timed
 * operations): with the statistics off the kernel counts no run, so a
 * non-zero count in an off row means something held them on (a warning on
 * stderr; the summary reports the total). Phase on: --rounds-on rounds with
 * BPF_ENABLE_STATS held: the same rows, plus each hook's run_time_ns and
 * run_cnt per operation (ship's and nowire's programs, or empty's floors).
 * One CSV row per workload, cgroup and round on stdout.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"
#include "dataplane/dataplane.h"

#define VIP "127.0.8.1:8000"	 /* + i: N_DEST services, one backend each */
#define BACKEND "127.0.9.1:9000" /* + i: the listener's addresses, VIP + i's backend */
#define N_DEST 64		 /* 64 destinations: 64 port spaces for the server's TIME_WAIT */
#define UDP_DEST "127.0.10.1:9001"
#define SINK "127.0.10.2:9002"
#define TTL_NS (3600ULL * 1000000000ULL)
#define SLOW_NS 1000000u /* an operation over 1 ms: a retransmission or a preemption */
#define MAX_OPS 100000

/* Each hook the data plane may attach, by its pinned link. */
enum hook {
	H_CONNECT4,
	H_CONNECT6,
	H_PEER4,
	H_PEER6,
	H_RELEASE,
	H_SKB_OUT,
	H_SKB_IN,
	H_SOCKOPS,
	HOOKS
};
static const char *const hook_names[HOOKS] = { "connect4",     "connect6",     "getpeername4",
					       "getpeername6", "sock_release", "skb_egress",
					       "skb_ingress",  "sockops" };
static const char *const hook_links[HOOKS] = { STEER_LINK_CONNECT4, STEER_LINK_CONNECT6,
					       STEER_LINK_PEER4,    STEER_LINK_PEER6,
					       STEER_LINK_RELEASE,  STEER_LINK_WIRE_OUT,
					       STEER_LINK_WIRE_IN,  STEER_LINK_SOCKOPS };

enum arm {
	A_SHIP,
	A_NOWIRE,
	A_EMPTY,
	A_NONE,
	ARMS
};
static const char *const arm_names[ARMS] = { "ship", "nowire", "empty", "none" };

enum workload {
	W_UDP,
	W_TCP,
	W_PKT,
	W_STEERED,
	WORKLOADS
};
static const char *const workload_names[WORKLOADS] = { "udp", "tcp", "pkt", "steered" };

struct stats {
	uint64_t ns, cnt;
};

static struct oc {
	struct steer_dp *dp, *dp_nowire;
	const char *pin, *cg[ARMS], *hooks_out;
	char pin_nowire[512];
	/* per arm and hook: its program, the empty twin's link; -1: none */
	int prog[ARMS][HOOKS], empty_link[HOOKS];
	enum bpf_attach_type attach[HOOKS];
	enum bpf_prog_type type[HOOKS];
	struct steer_addr vip[N_DEST], backend[N_DEST];
	uint32_t slot[2][N_DEST]; /* the virtual addresses' slots in ship's, nowire's data plane */
	int lfd, sink, cpu;
	struct sockaddr_in dest[N_DEST], vip_sin[N_DEST], udp_dest, sink_addr;
	long ops[WORKLOADS];
	bool on[WORKLOADS];
	int rounds, rounds_on;
	uint32_t *t;
} B = {
	.ops = { 400, 100, 400, 100 },
	.on = { true, true, true, true },
	.rounds = 1500,
	.rounds_on = 300,
	.lfd = -1,
	.sink = -1,
	.cpu = -1,
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static struct sockaddr_in sin_of(const char *s)
{
	struct steer_addr a;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char err[128];

	if (steer_addr_parse(s, &a, err, sizeof(err)) == 0) {
		sa.sin_port = a.port;
		sa.sin_addr.s_addr = a.ip6[3];
	}
	return sa;
}

static void stats_of(int fd, struct stats *s)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(s, 0, sizeof(*s));
	memset(&info, 0, sizeof(info));
	if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0) {
		s->ns = info.run_time_ns;
		s->cnt = info.run_cnt;
	}
}

/* ---- setup: ship, its empty twin, the sockets ------------------------------------------ */

/* The program behind one of a data plane's pinned links, and for ship its
 * attach and program type; -1: no such link. */
static int pinned_hook(const char *pin, enum hook h, bool ship)
{
	struct bpf_link_info li;
	struct bpf_prog_info pi;
	__u32 len = sizeof(pi);
	int pfd = bench_prog_of_link(pin, hook_links[h], &li, NULL);

	memset(&pi, 0, sizeof(pi));
	if (pfd >= 0 && li.type != BPF_LINK_TYPE_CGROUP) {
		close(pfd);
		pfd = -1;
	}
	if (pfd < 0 || bpf_obj_get_info_by_fd(pfd, &pi, &len) != 0) {
		if (pfd >= 0)
			close(pfd);
		return -1;
	}
	if (ship) {
		B.attach[h] = (enum bpf_attach_type)li.cgroup.attach_type;
		B.type[h] = (enum bpf_prog_type)pi.type;
	}
	return pfd;
}

/* r0 = 1; exit: of the same program and attach type, on the empty cgroup. */
static int attach_empty(enum hook h)
{
	int cg;

	B.prog[A_EMPTY][h] = bench_empty_prog(B.type[h], B.attach[h]);
	if (B.prog[A_EMPTY][h] < 0)
		return -1;
	cg = open(B.cg[A_EMPTY], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg < 0)
		return -1;
	B.empty_link[h] = bpf_link_create(B.prog[A_EMPTY][h], cg, B.attach[h], NULL);
	close(cg);
	return B.empty_link[h] < 0 ? -1 : 0;
}

/* Programs in effect at a cgroup for an attach type (its ancestors' included). */
static long effective(const char *cgdir, enum bpf_attach_type at)
{
	LIBBPF_OPTS(bpf_prog_query_opts, q, .query_flags = BPF_F_QUERY_EFFECTIVE);
	int cg = open(cgdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n = -1;

	if (cg >= 0 && bpf_prog_query_opts(cg, at, &q) == 0)
		n = q.prog_cnt;
	if (cg >= 0)
		close(cg);
	return n;
}

/* What ship attaches, what empty mirrors, what is in effect at each cgroup. */
static void write_hooks(void)
{
	FILE *f = B.hooks_out ? fopen(B.hooks_out, "w") : NULL;
	int h, a;

	if (!f)
		return;
	fprintf(f, "hook,link_pin,attach_type,prog_type,ship_effective,nowire_effective,"
		   "empty_effective,none_effective\n");
	for (h = 0; h < HOOKS; h++) {
		if (B.prog[A_SHIP][h] < 0)
			continue;
		fprintf(f, "%s,%s,%s,%s", hook_names[h], hook_links[h],
			libbpf_bpf_attach_type_str(B.attach[h]) ?: "?",
			libbpf_bpf_prog_type_str(B.type[h]) ?: "?");
		for (a = 0; a < ARMS; a++)
			fprintf(f, ",%ld", B.cg[a] ? effective(B.cg[a], B.attach[h]) : -1);
		fprintf(f, "\n");
	}
	fclose(f);
}

/* Virtual address i, steered over its one backend, the listener's address i;
 * its slot into *slot. */
static int publish(struct steer_dp *dp, int i, uint32_t *slot)
{
	struct steer_dp_cost cost = { .addr = B.backend[i], .ns_per_token = 500000.0 };
	struct steer_dp_service svc = { .vip = B.vip[i],
					.configured = &B.backend[i],
					.n_configured = 1,
					.table = &cost,
					.n_table = 1,
					.ttl_ns = TTL_NS };
	char err[512];

	if (steer_dp_publish_one(dp, &svc, err, sizeof(err)) != 0) {
		fprintf(stderr, "offcost: publish: %s\n", err);
		return -1;
	}
	B.vip_sin[i] = (struct sockaddr_in){ .sin_family = AF_INET,
					     .sin_port = B.vip[i].port,
					     .sin_addr.s_addr = B.vip[i].ip6[3] };
	return steer_dp_slot(dp, &B.vip[i], &B.backend[i], slot);
}

static int bound(int type, const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) != 0 ||
	    (type == SOCK_STREAM && listen(fd, 4096) != 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* A receive that cannot hang the bench when a datagram is lost. */
static void recv_timeout(int fd)
{
	struct timeval tv = { .tv_sec = 1 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int setup(void)
{
	struct steer_dp_opts o = { .own = true, .pin_dir = B.pin, .cgroup = B.cg[A_SHIP] };
	struct sockaddr_in any = sin_of(BACKEND);
	char err[512];
	int h, i;

	/* The listener and the sink belong to none: created there. */
	if (bench_join_cgroup(B.cg[A_NONE]) != 0) {
		fprintf(stderr, "offcost: cannot join %s: %s\n", B.cg[A_NONE], strerror(errno));
		return -1;
	}
	if (steer_dp_open(&o, &B.dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "offcost: %s\n", err);
		return -1;
	}
	if (B.cg[A_NOWIRE]) { /* smg-steerd --wire-estimator off */
		snprintf(B.pin_nowire, sizeof(B.pin_nowire), "%s-nowire", B.pin);
		o.pin_dir = B.pin_nowire;
		o.cgroup = B.cg[A_NOWIRE];
		o.wire_off = true;
		if (steer_dp_open(&o, &B.dp_nowire, err, sizeof(err)) != 0) {
			fprintf(stderr, "offcost: %s\n", err);
			return -1;
		}
		for (h = 0; h < HOOKS; h++)
			B.prog[A_NOWIRE][h] = pinned_hook(B.pin_nowire, (enum hook)h, false);
	}
	for (h = 0; h < HOOKS; h++) {
		B.prog[A_SHIP][h] = pinned_hook(B.pin, (enum hook)h, true);
		if (B.prog[A_SHIP][h] >= 0 && attach_empty((enum hook)h) != 0) {
			fprintf(stderr, "offcost: empty %s: %s\n", hook_names[h], strerror(errno));
			return -1;
		}
	}
	if (B.prog[A_SHIP][H_CONNECT4] < 0 || B.prog[A_SHIP][H_RELEASE] < 0) {
		fprintf(stderr, "offcost: no connect4 or release link in %s\n", B.pin);
		return -1;
	}
	steer_addr_parse(VIP, &B.vip[0], err, sizeof(err));
	steer_addr_parse(BACKEND, &B.backend[0], err, sizeof(err));
	for (i = 0; i < N_DEST; i++) {
		B.vip[i] = bench_addr_plus(&B.vip[0], (uint32_t)i);
		B.backend[i] = bench_addr_plus(&B.backend[0], (uint32_t)i);
		/* nowire too: its connect4 steers the same virtual addresses */
		if ((B.dp_nowire && publish(B.dp_nowire, i, &B.slot[1][i]) != 0) ||
		    publish(B.dp, i, &B.slot[0][i]) != 0)
			return -1;
	}
	any.sin_addr.s_addr = htonl(INADDR_ANY); /* port 9000 on 127.0.9.1-64 */
	B.lfd = bound(SOCK_STREAM, &any);
	B.sink_addr = sin_of(SINK);
	B.sink = bound(SOCK_DGRAM, &B.sink_addr);
	if (B.lfd < 0 || B.sink < 0) {
		fprintf(stderr, "offcost: listener or sink: %s\n", strerror(errno));
		return -1;
	}
	recv_timeout(B.sink);
	for (i = 0; i < N_DEST; i++) {
		B.dest[i] = sin_of(BACKEND);
		B.dest[i].sin_addr.s_addr = htonl(ntohl(B.dest[i].sin_addr.s_addr) + (uint32_t)i);
	}
	B.udp_dest = sin_of(UDP_DEST);
	write_hooks();
	return 0;
}

static void teardown(void)
{
	char err[512];
	int a, h;

	if (B.cg[A_NONE])
		bench_join_cgroup(B.cg[A_NONE]);
	if (B.lfd >= 0)
		close(B.lfd);
	if (B.sink >= 0)
		close(B.sink);
	for (h = 0; h < HOOKS; h++) {
		if (B.empty_link[h] >= 0)
			close(B.empty_link[h]); /* not pinned: closing detaches it */
		for (a = 0; a < ARMS; a++)
			if (B.prog[a][h] >= 0)
				close(B.prog[a][h]);
	}
	if (B.dp) {
		if (steer_dp_detach(B.dp, err, sizeof(err)) != 0)
			fprintf(stderr, "offcost: detach: %s\n", err);
		steer_dp_close(B.dp);
	}
	if (B.dp_nowire) {
		if (steer_dp_detach(B.dp_nowire, err, sizeof(err)) != 0)
			fprintf(stderr, "offcost: detach: %s\n", err);
		steer_dp_close(B.dp_nowire);
	}
}

/* ---- the operations ---------------------------------------------------------------------- */

static int op_udp(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -1;
	rc = connect(fd, (const struct sockaddr *)&B.udp_dest, sizeof(B.udp_dest));
	close(fd);
	return rc;
}

/* Connect, accept, one byte from the server, which closes first (no TIME_WAIT
 * on the client: its ports come back at once). */
static int op_tcp(const struct sockaddr_in *to)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), s = -1, rc = -1;
	unsigned char byte = 1;

	if (c < 0)
		return -1;
	if (connect(c, (const struct sockaddr *)to, sizeof(*to)) == 0 &&
	    (s = accept4(B.lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0 && write(s, &byte, 1) == 1) {
		close(s);
		s = -1;
		rc = read(c, &byte, 1) == 1 ? 0 : -1;
	}
	if (s >= 0)
		close(s);
	close(c);
	return rc;
}

/* One datagram out of the measured socket m and one back into it. */
static int op_pkt(int m, const struct sockaddr_in *m_addr)
{
	char buf[64] = "offcost-16-bytes";

	if (send(m, buf, 16, 0) != 16 || recv(B.sink, buf, sizeof(buf), 0) != 16 ||
	    sendto(B.sink, buf, 16, 0, (const struct sockaddr *)m_addr, sizeof(*m_addr)) != 16 ||
	    recv(m, buf, sizeof(buf), 0) != 16)
		return -1;
	return 0;
}

/* ---- one row: a workload in a cgroup ------------------------------------------------------ */

static void read_stats(enum arm a, struct stats *s)
{
	int h;

	for (h = 0; h < HOOKS; h++)
		stats_of(a == A_NONE ? -1 : B.prog[a][h], &s[h]);
}

/* The measured UDP socket for pkt, created in the current cgroup. */
static int pkt_socket(struct sockaddr_in *m_addr)
{
	socklen_t len = sizeof(*m_addr);
	int m = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (m < 0)
		return -1;
	recv_timeout(m);
	if (connect(m, (const struct sockaddr *)&B.sink_addr, sizeof(B.sink_addr)) != 0 ||
	    getsockname(m, (struct sockaddr *)m_addr, &len) != 0) {
		close(m);
		return -1;
	}
	return m;
}

/* n operations of w, each timed into B.t; the programs' statistics of arm a
 * read around the loop only (not around the pkt socket's own connect and close). */
static long timed_ops(enum workload w, enum arm a, long n, long *errors, struct stats *s0,
		      struct stats *s1)
{
	struct sockaddr_in m_addr;
	uint64_t t0, t1;
	int m = -1, rc;
	long k;

	if (w == W_PKT && (m = pkt_socket(&m_addr)) < 0)
		return -1;
	for (k = 0; w == W_STEERED && k < N_DEST; k++) /* what the daemon does each poll */
		steer_dp_inflight_exchange(a == A_SHIP ? B.dp : B.dp_nowire,
					   B.slot[a == A_SHIP ? 0 : 1][k]);
	read_stats(a, s0);
	t0 = bench_now_ns();
	for (k = 0; k < n && !stopping; k++) {
		switch (w) {
		case W_UDP:
			rc = op_udp();
			break;
		case W_TCP:
			rc = op_tcp(&B.dest[k % N_DEST]);
			break;
		case W_PKT:
			rc = op_pkt(m, &m_addr);
			break;
		default:
			rc = op_tcp(&B.vip_sin[k % N_DEST]);
			break;
		}
		t1 = bench_now_ns();
		B.t[k] = (uint32_t)(t1 - t0 > UINT32_MAX ? UINT32_MAX : t1 - t0);
		t0 = t1;
		*errors += rc != 0;
	}
	read_stats(a, s1);
	if (m >= 0)
		close(m);
	return k;
}

static int row(const char *phase, int round, enum workload w, enum arm a)
{
	struct stats s0[HOOKS], s1[HOOKS];
	long n, k, errors = 0, slow = 0;
	double mean = 0, ns_sum = 0, runs_sum = 0;
	int h;

	n = timed_ops(w, a, B.ops[w], &errors, s0, s1);
	if (n <= 0)
		return -1;
	for (k = 0; k < n; k++) {
		mean += B.t[k];
		slow += B.t[k] > SLOW_NS;
	}
	qsort(B.t, (size_t)n, sizeof(B.t[0]), bench_cmp_u32);
	printf("%s,%d,%s,%s,%ld,%ld,%ld,%u,%u,%u,%.1f", phase, round, workload_names[w],
	       arm_names[a], n, errors, slow, B.t[n / 2], B.t[n / 4], B.t[3 * n / 4],
	       mean / (double)n);
	for (h = 0; h < HOOKS; h++) {
		ns_sum += (double)(s1[h].ns - s0[h].ns);
		runs_sum += (double)(s1[h].cnt - s0[h].cnt);
	}
	printf(",%.3f,%.1f", runs_sum / (double)n, ns_sum / (double)n);
	if (runs_sum > 0 && !strcmp(phase, "off"))
		fprintf(stderr,
			"offcost: round %d: %.0f program runs counted with the statistics "
			"off: someone holds them on\n",
			round, runs_sum);
	for (h = 0; h < HOOKS; h++) {
		if (a == A_NONE || B.prog[a][h] < 0)
			printf(",,");
		else
			printf(",%.3f,%.1f", (double)(s1[h].cnt - s0[h].cnt) / (double)n,
			       (double)(s1[h].ns - s0[h].ns) / (double)n);
	}
	printf("\n");
	fflush(stdout);
	return errors > n / 100 ? -1 : 0; /* a few lost datagrams; more is a broken setup */
}

static int stats_sysctl(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "r");
	int v = -1;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* One workload's blocks in a round, back to back: each cgroup in turn (the
 * first rotates with the round), and steered right after the tcp block of
 * each arm with a data plane. */
static int workload_round(const char *name, int r, enum workload w)
{
	int i, rc = 0;

	for (i = 0; i < ARMS && rc == 0; i++) {
		enum arm a = (enum arm)((i + r) % ARMS);
		bool dp = a == A_SHIP || a == A_NOWIRE;
		enum workload x;

		if (!B.cg[a])
			continue;
		if (bench_join_cgroup(B.cg[a]) != 0) {
			fprintf(stderr, "offcost: cannot join %s: %s\n", B.cg[a], strerror(errno));
			return -1;
		}
		for (x = w; rc == 0; x = W_STEERED) {
			struct stats s0[HOOKS], s1[HOOKS];
			long e = 0;

			if (r == 0) /* warm-up */
				rc = timed_ops(x, a, B.ops[x] / 4 + 1, &e, s0, s1) < 0;
			else
				rc = row(name, r, x, a);
			if (x != W_TCP || !dp || !B.on[W_STEERED])
				break;
		}
	}
	return rc;
}

/* Many short rounds: the state of a shared VM drifts over tens of
 * milliseconds, so the blocks compared are adjacent and short. */
static int phase(const char *name, int rounds)
{
	static const enum workload order[] = { W_UDP, W_TCP, W_PKT };
	int r, i, rc = 0;

	for (r = 0; r <= rounds && rc == 0 && !stopping; r++) /* round 0: warm-up */
		for (i = 0; i < 3 && rc == 0; i++)
			if (B.on[order[i]])
				rc = workload_round(name, r, order[i]);
	if (rc)
		fprintf(stderr, "offcost: phase %s failed: %s\n", name, strerror(errno));
	return rc || stopping ? -1 : 0;
}

static int run(bool header)
{
	int h, stats_fd, rc;

	if (header) {
		printf("phase,round,workload,cgroup,ops,errors,slow,median_ns,p25_ns,p75_ns,mean_"
		       "ns,bpf_runs_per_op,bpf_ns_per_op");
		for (h = 0; h < HOOKS; h++)
			printf(",%s_runs_per_op,%s_ns_per_op", hook_names[h], hook_names[h]);
		printf("\n");
	}
	if (stats_sysctl() != 0) {
		fprintf(stderr, "offcost: kernel.bpf_stats_enabled is not 0: the statistics are "
				"on for everyone; set it to 0\n");
		return -1;
	}
	rc = phase("off", B.rounds);
	if (rc == 0 && B.rounds_on > 0) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0) {
			fprintf(stderr, "offcost: BPF_ENABLE_STATS: %s\n", strerror(errno));
			return -1;
		}
		rc = phase("on", B.rounds_on);
		close(stats_fd);
	}
	return rc;
}

/* ---- main ----------------------------------------------------------------------------------- */

static int parse_workloads(const char *s)
{
	char buf[128], *tok, *save = NULL;
	int w;

	snprintf(buf, sizeof(buf), "%s", s);
	memset(B.on, 0, sizeof(B.on));
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (w = 0; w < WORKLOADS && strcmp(tok, workload_names[w]); w++)
			;
		if (w == WORKLOADS)
			return -1;
		B.on[w] = true;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: offcost --pin PREFIX --cgroup-ship CG --cgroup-empty CG "
			"--cgroup-none CG [--cgroup-nowire CG] [--rounds R] [--rounds-on R] "
			"[--ops-udp N] [--ops-tcp N] [--ops-pkt N] [--ops-steered N] "
			"[--workloads udp,tcp,pkt,steered] [--hooks FILE] [--cpu N] [--header]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pin", required_argument, 0, 'p' },
		{ "cgroup-ship", required_argument, 0, 's' },
		{ "cgroup-empty", required_argument, 0, 'e' },
		{ "cgroup-none", required_argument, 0, 'n' },
		{ "cgroup-nowire", required_argument, 0, 'W' },
		{ "rounds", required_argument, 0, 'r' },
		{ "rounds-on", required_argument, 0, 'R' },
		{ "ops-udp", required_argument, 0, 'u' },
		{ "ops-tcp", required_argument, 0, 't' },
		{ "ops-pkt", required_argument, 0, 'k' },
		{ "ops-steered", required_argument, 0, 'S' },
		{ "workloads", required_argument, 0, 'w' },
		{ "hooks", required_argument, 0, 'o' },
		{ "cpu", required_argument, 0, 'c' },
		{ "header", no_argument, 0, 'H' },
		{ 0, 0, 0, 0 },
	};
	bool header = false;
	int c, a, h, w, rc = 1;

	for (a = 0; a < ARMS; a++)
		for (h = 0; h < HOOKS; h++)
			B.prog[a][h] = B.empty_link[h] = -1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			B.pin = optarg;
			break;
		case 's':
			B.cg[A_SHIP] = optarg;
			break;
		case 'e':
			B.cg[A_EMPTY] = optarg;
			break;
		case 'n':
			B.cg[A_NONE] = optarg;
			break;
		case 'W':
			B.cg[A_NOWIRE] = optarg;
			break;
		case 'r':
			B.rounds = atoi(optarg);
			break;
		case 'R':
			B.rounds_on = atoi(optarg);
			break;
		case 'u':
			B.ops[W_UDP] = atol(optarg);
			break;
		case 't':
			B.ops[W_TCP] = atol(optarg);
			break;
		case 'k':
			B.ops[W_PKT] = atol(optarg);
			break;
		case 'S':
			B.ops[W_STEERED] = atol(optarg);
			break;
		case 'w':
			if (parse_workloads(optarg) != 0)
				usage();
			break;
		case 'o':
			B.hooks_out = optarg;
			break;
		case 'c':
			B.cpu = atoi(optarg);
			break;
		case 'H':
			header = true;
			break;
		default:
			usage();
		}
	}
	if (!B.pin || !B.cg[A_SHIP] || !B.cg[A_EMPTY] || !B.cg[A_NONE] || B.rounds < 1 ||
	    B.rounds_on < 0)
		usage();
	for (w = 0; w < WORKLOADS; w++)
		if (B.ops[w] < 4 || B.ops[w] > MAX_OPS)
			usage();
	if (B.on[W_STEERED] && !B.on[W_TCP]) /* steered runs next to an arm's tcp block */
		usage();
	if (B.cpu >= 0) { /* every block on the same CPU: the two vCPUs differ */
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(B.cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0) {
			fprintf(stderr, "offcost: cpu %d: %s\n", B.cpu, strerror(errno));
			return 1;
		}
	}
	B.t = calloc(MAX_OPS, sizeof(B.t[0]));
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (B.t && setup() == 0)
		rc = run(header) == 0 ? 0 : 1;
	teardown();
	free(B.t);
	return rc;
}
