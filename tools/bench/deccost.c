// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * deccost.c - what a steered connection costs in BPF time, every program summed.
 *
 *   deccost --pin DIR --cgroup DIR --first 127.0.3.1:9000 [--sizes 8,64,256]
 *           [--shapes passthrough,spread,equal,bound,affinity,affinity-key,
 *                     affinity-new,spread-key,rebuild]
 *           [--connects 5000]
 *           [--rounds 3] [--drain-every 1000] [--header]
 *
 * Loads and attaches the real programs (dataplane API), joins the cgroup,
 * turns on BPF run-time statistics with BPF_ENABLE_STATS (the same switch as
 * sysctl kernel.bpf_stats_enabled=1, but held by a file descriptor, so the
 * kernel turns it back off by itself when this process exits, however it
 * exits), and reads run_time_ns and run_cnt of every program a connection
 * meets: connect4, sock_release and getpeername4, and the request accounting
 * programs (cgroup_skb egress and ingress, once per packet), before and after
 * K connects; and cgroup/setsockopt, which the key shapes call.
 * Next to each, an empty program of the same type (r0 = 1; exit) is attached:
 * its time per run is the floor that the statistics and the dispatch cost by
 * themselves, reported so that net = total - floors can be read too.
 *
 * Per table size n (backends FIRST, FIRST+1, ..., listening onebyte servers,
 * whose byte names the backend), interleaved round by round:
 *   passthrough  connects to a backend address directly: no table matches,
 *                what every unsteered connection in the cgroup pays;
 *   spread       base waits i x 100 ms, 2000 tokens/s (a connection's credit
 *                of 1024 tokens adds 512 ms);
 *   equal        every base wait equal and every backend already credited:
 *                a plain scan would read the whole table at each connect;
 *   bound        spread, with overload protection on (STEER_TBL_OVERLOAD and
 *                a wait bound of an hour): what the check adds to a connect;
 *   affinity     spread, with cache affinity by cgroup (STEER_AFF_CGROUP), a
 *                slack and an idle timeout of an hour: every connect of this
 *                process is the same client, and each one after the first
 *                stays on its backend (probe, stay, record in place): the
 *                steady state of a conversation;
 *   affinity-key spread, with affinity by the application's key
 *                (STEER_AFF_SOCKOPT), one key for every socket, set by
 *                setsockopt before each connect: each connect stays, as in
 *                affinity, but keyed by the socket's storage;
 *   affinity-new spread, with affinity by the application's key
 *                (STEER_AFF_SOCKOPT): each socket gets a fresh random key by
 *                setsockopt before its connect, so each connect is a new
 *                client (a probe that misses, a way written): the worst
 *                case. The setsockopt program's time is reported per call,
 *                apart from connect4's;
 *   spread-key   spread with affinity off, each socket given a fresh key by
 *                setsockopt as in affinity-new: the same calls, so that
 *                affinity-new and affinity-key less spread-key is what
 *                affinity adds to connect4, and nothing the socket's
 *                storage costs it;
 *   rebuild      spread, with the in-flight counters drained before every
 *                connect: each connect then rebuilds the selection tree (what
 *                the first connect after a publish or a drain pays).
 * In spread and equal the counters are drained every --drain-every connects,
 * as the daemon drains them once per poll. Each steered connect calls
 * getpeername once (its cost is reported per call) and checks that it gives
 * the virtual address. Before it, the same selection (steer_select_at from
 * bpf/steer_select.h, at the kernel's clock) runs in user space on the live
 * counters: its pick must be the backend that answered (counted as
 * mismatches otherwise); in the affinity shape, the backend of the client's
 * last connect while it is in the table. The service's affinity counters
 * (steer_svc_stats.affinity) give how many connects stayed and how many were
 * new clients. One CSV row per measurement.
 */
#include <bpf/bpf.h>
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
#include <sys/socket.h>
#include <unistd.h>

#include "benchlib.h"
#include "dataplane/dataplane.h"

#define MAX_SIZES 8
#define VIP "127.0.0.200:8000"
#define TTL_NS (3600ULL * 1000000000ULL)
#define SPREAD_STEP_NS 100e6
#define NS_PER_TOKEN 500000.0 /* 2000 tokens/s */

enum shape {
	SHAPE_PASSTHROUGH,
	SHAPE_SPREAD,
	SHAPE_EQUAL,
	SHAPE_BOUND,
	SHAPE_AFFINITY,
	SHAPE_AFFINITY_KEY,
	SHAPE_AFFINITY_NEW,
	SHAPE_SPREAD_KEY,
	SHAPE_REBUILD,
	SHAPES
};
static const char *const shape_names[SHAPES] = { "passthrough",	 "spread",     "equal",
						 "bound",	 "affinity",   "affinity-key",
						 "affinity-new", "spread-key", "rebuild" };
/* affinity-key's one key */
#define AFFINITY_KEY 0x5eedULL
/* The bound shape's --worker-overload-wait: above every wait, so that every
 * connect pays the check and none is refused. */
#define BOUND_NS (3600ULL * 1000000000ULL)
/* The affinity shapes' slack and idle timeout: a client always stays (a
 * connection's credit is 512 ms, drained every --drain-every connects) and is
 * never forgotten between rounds. */
#define AFFINITY_NS (3600ULL * 1000000000ULL)

/* The programs a connection meets, and the empty one of each type. */
enum prog {
	PROG_CONNECT4,
	PROG_RELEASE,
	PROG_PEER4,
	PROG_WIRE_OUT,	 /* request accounting: every packet the socket sends */
	PROG_WIRE_IN,	 /* and every packet it receives */
	PROG_SETSOCKOPT, /* the application's affinity key (the key shapes only) */
	PROGS
};
static const char *const prog_links[PROGS] = { STEER_LINK_CONNECT4, STEER_LINK_RELEASE,
					       STEER_LINK_PEER4,    STEER_LINK_WIRE_OUT,
					       STEER_LINK_WIRE_IN,  STEER_LINK_SETSOCKOPT };
static const enum bpf_attach_type prog_attach[PROGS] = {
	BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_INET_SOCK_RELEASE, BPF_CGROUP_INET4_GETPEERNAME,
	BPF_CGROUP_INET_EGRESS,	  BPF_CGROUP_INET_INGRESS,	BPF_CGROUP_SETSOCKOPT
};
static const enum bpf_prog_type prog_type[PROGS] = {
	BPF_PROG_TYPE_CGROUP_SOCK_ADDR, BPF_PROG_TYPE_CGROUP_SOCK, BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
	BPF_PROG_TYPE_CGROUP_SKB,	BPF_PROG_TYPE_CGROUP_SKB,  BPF_PROG_TYPE_CGROUP_SOCKOPT
};

struct prog_stats {
	uint64_t run_time_ns, run_cnt;
};

struct bench {
	struct steer_dp *dp;
	struct steer_addr vip, backends[STEER_MAX_BACKENDS];
	uint32_t slots[STEER_MAX_BACKENDS];
	struct steer_table mirror; /* the published table, as the kernel sees it */
	int prog_fd[PROGS];
	int empty_fd[PROGS], empty_link_fd[PROGS]; /* calibration: programs that only return 1 */
	long connects, drain_every;
	int aff_pos[SHAPES]; /* affinity, affinity-key: the backend of the client's last
			      * connect; -1: none */
	uint64_t aff_rng;    /* affinity-new: xorshift64 state of the keys */
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/*
 * The measuring floor: a program of two instructions (r0 = 1; exit) of each
 * type, attached next to ours. Its run time is what the statistics and the
 * program dispatch cost by themselves.
 */
static int attach_empty(struct bench *b, const char *cgroup)
{
	int cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC), i, rc = 0;

	if (cg < 0)
		return -errno;
	for (i = 0; i < PROGS && rc == 0; i++) {
		b->empty_fd[i] = bench_empty_prog(prog_type[i], prog_attach[i]);
		if (b->empty_fd[i] >= 0)
			b->empty_link_fd[i] =
				bpf_link_create(b->empty_fd[i], cg, prog_attach[i], NULL);
		rc = b->empty_fd[i] < 0 || b->empty_link_fd[i] < 0 ? -1 : 0;
	}
	close(cg);
	return rc;
}

static int read_stats(int prog_fd, struct prog_stats *out)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
		return -errno;
	out->run_time_ns = info.run_time_ns;
	out->run_cnt = info.run_cnt;
	return 0;
}

/* Statistics of every program and every floor, in one array. */
static int read_all(const struct bench *b, struct prog_stats *st)
{
	int i;

	for (i = 0; i < PROGS; i++)
		if (read_stats(b->prog_fd[i], &st[i]) || read_stats(b->empty_fd[i], &st[PROGS + i]))
			return -1;
	return 0;
}

static struct steer_slot *mirror_slot(void *ctx, __u32 slot)
{
	struct bench *b = ctx;

	/* steer_select only reads through this pointer. */
	return (struct steer_slot *)steer_dp_slot_counters(b->dp, slot);
}

static double base_wait(enum shape s, size_t i)
{
	/* bound and the affinity shapes: spread */
	return s == SHAPE_EQUAL ? 0.0 : SPREAD_STEP_NS * (double)i;
}

/* Publish n backends in the given shape; the mirror gets the same entries in
 * the same (already sorted) order. */
static int publish(struct bench *b, size_t n, enum shape s)
{
	static struct steer_dp_cost cost[STEER_MAX_BACKENDS];
	struct steer_dp_service svc = { .vip = b->vip,
					.configured = b->backends,
					.n_configured = n,
					.table = cost,
					.n_table = n,
					.ttl_ns = TTL_NS };
	char err[512];
	size_t i;

	if (s == SHAPE_BOUND) {
		svc.flags = STEER_TBL_OVERLOAD;
		svc.wait_bound_ns = BOUND_NS;
	}
	if (s == SHAPE_AFFINITY || s == SHAPE_AFFINITY_KEY || s == SHAPE_AFFINITY_NEW) {
		svc.affinity = s == SHAPE_AFFINITY ? STEER_AFF_CGROUP : STEER_AFF_SOCKOPT;
		svc.affinity_slack_ns = AFFINITY_NS;
		svc.affinity_idle_ns = AFFINITY_NS;
	}
	for (i = 0; i < n; i++) {
		cost[i].addr = b->backends[i];
		cost[i].base_wait_ns = base_wait(s, i);
		cost[i].ns_per_token = NS_PER_TOKEN;
	}
	if (steer_dp_publish_one(b->dp, &svc, err, sizeof(err)) != 0) {
		fprintf(stderr, "deccost: publish: %s\n", err);
		return -1;
	}
	memset(&b->mirror, 0, sizeof(b->mirror));
	b->mirror.n = (__u32)n;
	for (i = 0; i < n; i++) {
		if (steer_dp_slot(b->dp, &b->vip, &b->backends[i], &b->slots[i]) != 0)
			return -1;
		b->mirror.e[i].base_wait_ns = (__u64)base_wait(s, i);
		b->mirror.e[i].ns_per_token = (__u64)NS_PER_TOKEN;
		b->mirror.e[i].slot = b->slots[i];
		steer_dp_inflight_exchange(b->dp, b->slots[i]);
	}
	return 0;
}

static void drain(struct bench *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		steer_dp_inflight_exchange(b->dp, b->slots[i]);
}

/* Connect, read the backend's byte, close. With key not 0, set it as the
 * socket's affinity key first. With vip set, also ask getpeername, which must
 * report it. Returns the byte, or -1. */
static int connect_once(const struct steer_addr *to, const struct steer_addr *vip, uint64_t key)
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
	if (key && setsockopt(fd, STEER_SOL_AFFINITY, STEER_SO_AFFINITY_KEY, &key, sizeof(key))) {
		close(fd);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && read(fd, &byte, 1) == 1)
		rc = byte;
	if (rc >= 0 && vip &&
	    (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0 ||
	     peer.sin_addr.s_addr != vip->ip6[3] || peer.sin_port != vip->port))
		rc = -1;
	close(fd);
	return rc;
}

struct result {
	long errors, mismatches, steered;
};

/* affinity-new: a new key, never 0 (xorshift64). */
static uint64_t next_key(struct bench *b)
{
	b->aff_rng ^= b->aff_rng << 13;
	b->aff_rng ^= b->aff_rng >> 7;
	b->aff_rng ^= b->aff_rng << 17;
	return b->aff_rng;
}

static void run_connects(struct bench *b, size_t n, enum shape s, struct result *r)
{
	long every = s == SHAPE_REBUILD ? 1 : b->drain_every, k;

	for (k = 0; k < b->connects && !stopping; k++) {
		struct steer_pick pick;
		int got, want;

		if (s == SHAPE_PASSTHROUGH) {
			if (connect_once(&b->backends[k % (long)n], NULL, 0) < 0)
				r->errors++;
			continue;
		}
		if (every > 0 && k % every == 0)
			drain(b, n);
		steer_select_at(&b->mirror, mirror_slot, b, steer_dp_wire_at, b->dp,
				steer_dp_clock_ns(), 1, &pick);
		got = connect_once(&b->vip, &b->vip,
				   s == SHAPE_AFFINITY_NEW || s == SHAPE_SPREAD_KEY ? next_key(b)
				   : s == SHAPE_AFFINITY_KEY			    ? AFFINITY_KEY
										    : 0);
		if (got < 0) {
			r->errors++;
			continue;
		}
		r->steered++;
		want = pick.found ? (int)pick.pos : -1;
		if (b->aff_pos[s] >= 0 && b->aff_pos[s] < (int)n)
			want = b->aff_pos[s]; /* it stays */
		if (s == SHAPE_AFFINITY || s == SHAPE_AFFINITY_KEY)
			b->aff_pos[s] = got;
		if (got != want)
			r->mismatches++;
	}
}

static double per_run(const struct prog_stats *a, const struct prog_stats *z)
{
	return z->run_cnt > a->run_cnt ? (double)(z->run_time_ns - a->run_time_ns) /
						 (double)(z->run_cnt - a->run_cnt)
				       : 0.0;
}

static double per_conn(const struct prog_stats *a, const struct prog_stats *z, long conns)
{
	return conns > 0 ? (double)(z->run_time_ns - a->run_time_ns) / (double)conns : 0.0;
}

static int measure(struct bench *b, size_t n, enum shape s, int round)
{
	struct prog_stats a[2 * PROGS], z[2 * PROGS];
	struct steer_svc_stats sa, sz;
	struct result r = { 0 };
	double c4, rel, gp, floor_c4, floor_rel, floor_gp, total, w_out, w_in, w_runs, floor_w;
	double sso, floor_sso;
	size_t i;

	if (publish(b, n, s == SHAPE_REBUILD ? SHAPE_SPREAD : s) != 0)
		return -1;
	if (s == SHAPE_EQUAL) /* credit every backend once: a water-fill from here on */
		for (i = 0; i < n; i++)
			if (connect_once(&b->vip, NULL, 0) < 0)
				r.errors++;
	if (read_all(b, a) != 0 || steer_dp_service_stats(b->dp, &b->vip, &sa) != 0)
		return -1;
	run_connects(b, n, s, &r);
	if (read_all(b, z) != 0 || steer_dp_service_stats(b->dp, &b->vip, &sz) != 0)
		return -1;
	/* Per connection: connect4 and release run once for each; getpeername
	 * once per steered connect, reported per call. */
	c4 = per_conn(&a[PROG_CONNECT4], &z[PROG_CONNECT4], b->connects);
	rel = per_conn(&a[PROG_RELEASE], &z[PROG_RELEASE], b->connects);
	gp = per_run(&a[PROG_PEER4], &z[PROG_PEER4]);
	floor_c4 = per_run(&a[PROGS + PROG_CONNECT4], &z[PROGS + PROG_CONNECT4]);
	floor_rel = per_run(&a[PROGS + PROG_RELEASE], &z[PROGS + PROG_RELEASE]);
	floor_gp = per_run(&a[PROGS + PROG_PEER4], &z[PROGS + PROG_PEER4]);
	total = c4 + rel;
	/* Request accounting: once per packet, so per connection as many runs
	 * as the connection has packets (handshake, byte, teardown). */
	w_out = per_conn(&a[PROG_WIRE_OUT], &z[PROG_WIRE_OUT], b->connects);
	w_in = per_conn(&a[PROG_WIRE_IN], &z[PROG_WIRE_IN], b->connects);
	w_runs = (double)(z[PROG_WIRE_OUT].run_cnt - a[PROG_WIRE_OUT].run_cnt +
			  z[PROG_WIRE_IN].run_cnt - a[PROG_WIRE_IN].run_cnt) /
		 (double)b->connects;
	floor_w = (per_run(&a[PROGS + PROG_WIRE_OUT], &z[PROGS + PROG_WIRE_OUT]) +
		   per_run(&a[PROGS + PROG_WIRE_IN], &z[PROGS + PROG_WIRE_IN])) /
		  2;
	/* setsockopt: per call (the key shapes make one per connect), and its floor */
	sso = per_run(&a[PROG_SETSOCKOPT], &z[PROG_SETSOCKOPT]);
	floor_sso = per_run(&a[PROGS + PROG_SETSOCKOPT], &z[PROGS + PROG_SETSOCKOPT]);
	printf("%d,%zu,%s,%ld,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%ld,%ld,%.1f,%.1f,"
	       "%.2f,%.1f,%.1f,%.1f,%.1f,%.1f,%llu,%llu,%llu\n",
	       round, n, shape_names[s], b->connects, c4, rel, gp, total, total + gp, floor_c4,
	       floor_rel, floor_gp, total - floor_c4 - floor_rel,
	       total + gp - floor_c4 - floor_rel - (s == SHAPE_PASSTHROUGH ? 0 : floor_gp),
	       r.mismatches, r.errors, w_out, w_in, w_runs, floor_w, total + w_out + w_in,
	       total - floor_c4 - floor_rel + w_out + w_in - w_runs * floor_w, sso, floor_sso,
	       (unsigned long long)(sz.affinity[STEER_AFF_STAY] - sa.affinity[STEER_AFF_STAY]),
	       (unsigned long long)(sz.affinity[STEER_AFF_NEW] - sa.affinity[STEER_AFF_NEW]),
	       (unsigned long long)(sz.affinity[STEER_AFF_LEFT_SLACK] +
				    sz.affinity[STEER_AFF_LEFT_GONE] +
				    sz.affinity[STEER_AFF_LEFT_OVERLOAD] -
				    sa.affinity[STEER_AFF_LEFT_SLACK] -
				    sa.affinity[STEER_AFF_LEFT_GONE] -
				    sa.affinity[STEER_AFF_LEFT_OVERLOAD]));
	fflush(stdout);
	return 0;
}

static int parse_sizes(const char *s, size_t *sizes, int *n)
{
	char buf[128], *tok, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*n = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		long v = strtol(tok, NULL, 10);

		if (v < 1 || v > STEER_MAX_BACKENDS || *n == MAX_SIZES)
			return -1;
		sizes[(*n)++] = (size_t)v;
	}
	return *n ? 0 : -1;
}

/* "spread,equal" -> bit mask of enum shape */
static int parse_shapes(const char *s, unsigned *mask)
{
	char buf[128], *tok, *save = NULL;
	int i;

	snprintf(buf, sizeof(buf), "%s", s);
	*mask = 0;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < SHAPES && strcmp(tok, shape_names[i]) != 0; i++)
			;
		if (i == SHAPES)
			return -1;
		*mask |= 1u << i;
	}
	return *mask ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: deccost --pin DIR --cgroup DIR --first IPV4:PORT [--sizes 8,64,256] "
		"[--shapes "
		"passthrough,spread,equal,bound,affinity,affinity-key,affinity-new,spread-key,"
		"rebuild] "
		"[--connects K] [--rounds R] [--drain-every K] [--header]\n");
	exit(2);
}

static int run_rounds(struct bench *b, const size_t *sizes, int n_sizes, int rounds,
		      unsigned shapes)
{
	int r, i, s;

	for (r = 1; r <= rounds && !stopping; r++)
		for (i = 0; i < n_sizes && !stopping; i++)
			for (s = 0; s < SHAPES && !stopping; s++)
				if ((shapes & (1u << s)) &&
				    measure(b, sizes[i], (enum shape)s, r) != 0)
					return -1;
	return stopping ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pin", required_argument, 0, 'p' },
		{ "cgroup", required_argument, 0, 'g' },
		{ "first", required_argument, 0, 'f' },
		{ "sizes", required_argument, 0, 's' },
		{ "connects", required_argument, 0, 'k' },
		{ "rounds", required_argument, 0, 'r' },
		{ "header", no_argument, 0, 'H' },
		{ "shapes", required_argument, 0, 'S' },
		{ "drain-every", required_argument, 0, 'd' },
		{ 0, 0, 0, 0 },
	};
	static struct bench b = { .prog_fd = { -1, -1, -1, -1, -1, -1 },
				  .empty_fd = { -1, -1, -1, -1, -1, -1 },
				  .empty_link_fd = { -1, -1, -1, -1, -1, -1 },
				  .connects = 5000,
				  .drain_every = 1000 };
	struct steer_dp_opts o = { .own = true };
	size_t sizes[MAX_SIZES] = { 8, 64, 256 };
	int n_sizes = 3, rounds = 3, c, i, rc = 1, stats_fd = -1, missing = 0;
	unsigned shapes = (1u << SHAPE_REBUILD) - 1; /* rebuild on request */
	bool header = false, have_first = false;
	char err[512];

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o.pin_dir = optarg;
			break;
		case 'g':
			o.cgroup = optarg;
			break;
		case 'f':
			have_first =
				steer_addr_parse(optarg, &b.backends[0], err, sizeof(err)) == 0 &&
				steer_addr_is_v4(&b.backends[0]);
			break;
		case 's':
			if (parse_sizes(optarg, sizes, &n_sizes) != 0)
				usage();
			break;
		case 'k':
			b.connects = atol(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 'H':
			header = true;
			break;
		case 'S':
			if (parse_shapes(optarg, &shapes) != 0)
				usage();
			break;
		case 'd':
			b.drain_every = atol(optarg);
			break;
		default:
			usage();
		}
	}
	if (!o.pin_dir || !o.cgroup || !have_first || b.connects < 1 || rounds < 1 ||
	    b.drain_every < 0)
		usage();
	for (i = 1; i < STEER_MAX_BACKENDS; i++)
		b.backends[i] = bench_addr_plus(&b.backends[0], (uint32_t)i);
	steer_addr_parse(VIP, &b.vip, err, sizeof(err));
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (steer_dp_open(&o, &b.dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "deccost: %s\n", err);
		return 1;
	}
	for (i = 0; i < PROGS; i++) {
		b.prog_fd[i] = bench_prog_of_link(o.pin_dir, prog_links[i], NULL, NULL);
		missing |= b.prog_fd[i] < 0;
	}
	for (i = 0; i < SHAPES; i++)
		b.aff_pos[i] = -1;
	b.aff_rng = (uint64_t)steer_dp_clock_ns() | 1;
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (missing || stats_fd < 0 || attach_empty(&b, o.cgroup) != 0) {
		fprintf(stderr, "deccost: cannot find the programs or enable statistics: %s\n",
			strerror(errno));
	} else if (bench_join_cgroup(o.cgroup) != 0) {
		fprintf(stderr, "deccost: cannot join %s: %s\n", o.cgroup, strerror(errno));
	} else {
		if (header)
			printf("round,backends,shape,connects,connect4_ns,release_ns,getpeername_"
			       "ns,"
			       "total_ns,total_with_getpeername_ns,floor_connect4_ns,floor_release_"
			       "ns,floor_getpeername_ns,net_ns,net_with_getpeername_ns,mismatches,"
			       "errors,wire_out_ns,wire_in_ns,wire_runs,floor_wire_ns,total_all_ns,"
			       "net_all_ns,setsockopt_ns,floor_setsockopt_ns,aff_stay,aff_new,"
			       "aff_left\n");
		rc = run_rounds(&b, sizes, n_sizes, rounds, shapes) == 0 ? 0 : 1;
	}
	if (stats_fd >= 0)
		close(stats_fd);
	for (i = 0; i < PROGS; i++) {
		if (b.prog_fd[i] >= 0)
			close(b.prog_fd[i]);
		if (b.empty_link_fd[i] >= 0)
			close(b.empty_link_fd[i]); /* not pinned: closing detaches it */
		if (b.empty_fd[i] >= 0)
			close(b.empty_fd[i]);
	}
	if (steer_dp_detach(b.dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "deccost: detach: %s\n", err);
		rc = 1;
	}
	steer_dp_close(b.dp);
	return rc;
}
