// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * deccost.c - what one steering decision costs in the kernel.
 *
 *   deccost --pin DIR --cgroup DIR --first 127.0.3.1:9000 [--sizes 8,64,256]
 *           [--shapes passthrough,spread,equal] [--connects 5000] [--rounds 3]
 *           [--header]
 *
 * Loads and attaches the real programs (dataplane API), joins the cgroup,
 * turns on BPF run-time statistics with BPF_ENABLE_STATS (the same switch as
 * sysctl kernel.bpf_stats_enabled=1, but held by a file descriptor, so the
 * kernel turns it back off by itself when this process exits, however it
 * exits), and reads run_time_ns and run_cnt of the connect4 program before and
 * after K connects: cost = delta run_time_ns / delta run_cnt.
 *
 * Per table size n (backends FIRST, FIRST+1, ..., listening onebyte servers,
 * whose byte names the backend), interleaved round by round:
 *   passthrough  connects to a backend address directly: no table matches,
 *                the floor every connect in the cgroup pays;
 *   spread       base waits i x 100 ms, 2000 tokens/s (a connection's credit
 *                of 1024 tokens adds 512 ms), in-flight counters drained every
 *                4 connects as the daemon drains them: the early exit stops
 *                the scan after a few entries;
 *   equal        every base wait equal and every backend already credited:
 *                each decision scans the whole table (water-filling).
 * Before each steered connect the same selection (steer_select from
 * steer_common.h) runs in user space on the live counters: it gives the
 * number of entries the kernel scans, and its pick must be the backend that
 * answered (counted as mismatches otherwise). The sockops program's cost per
 * connection is reported too. One CSV row per measurement.
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
#include "dataplane.h"

#define MAX_SIZES 8
#define VIP "127.0.0.200:8000"
#define TTL_NS (3600ULL * 1000000000ULL)
#define SPREAD_STEP_NS 100e6
#define NS_PER_TOKEN 500000.0 /* 2000 tokens/s */
#define DRAIN_EVERY 4

enum shape {
	SHAPE_PASSTHROUGH,
	SHAPE_SPREAD,
	SHAPE_EQUAL,
	SHAPES
};
static const char *const shape_names[SHAPES] = { "passthrough", "spread", "equal" };

struct prog_stats {
	uint64_t run_time_ns, run_cnt;
};

struct bench {
	struct steer_dp *dp;
	struct steer_addr vip, backends[STEER_MAX_BACKENDS];
	uint32_t slots[STEER_MAX_BACKENDS];
	struct steer_table mirror; /* the published table, as the kernel sees it */
	int connect4_fd, sockops_fd;
	int empty_fd, empty_link_fd; /* calibration: a connect4 program that only returns 1 */
	long connects;
};

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* The program behind one of the pinned links. Returns a program fd or -errno. */
static int prog_of_link(const char *pin_dir, const char *link)
{
	struct bpf_link_info info;
	__u32 len = sizeof(info);
	char path[4096];
	int lfd, pfd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, link);
	lfd = bpf_obj_get(path);
	if (lfd < 0)
		return -errno;
	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(lfd, &info, &len) != 0) {
		close(lfd);
		return -errno;
	}
	close(lfd);
	pfd = bpf_prog_get_fd_by_id(info.prog_id);
	return pfd < 0 ? -errno : pfd;
}

/*
 * The measuring floor: a connect4 program of two instructions (r0 = 1; exit),
 * attached next to ours. Its run time per connect is what the statistics and
 * the program dispatch cost by themselves.
 */
static int attach_empty(struct bench *b, const char *cgroup)
{
	static const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = BPF_CGROUP_INET4_CONNECT);
	int cg = open(cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (cg < 0)
		return -errno;
	b->empty_fd = bpf_prog_load(BPF_PROG_TYPE_CGROUP_SOCK_ADDR, "bench_empty", "GPL", insns,
				    sizeof(insns) / sizeof(insns[0]), &po);
	if (b->empty_fd >= 0)
		b->empty_link_fd = bpf_link_create(b->empty_fd, cg, BPF_CGROUP_INET4_CONNECT, NULL);
	close(cg);
	return b->empty_fd < 0 || b->empty_link_fd < 0 ? -1 : 0;
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

static struct steer_slot *mirror_slot(void *ctx, __u32 slot)
{
	struct bench *b = ctx;

	/* steer_select only reads through this pointer. */
	return (struct steer_slot *)steer_dp_slot_counters(b->dp, slot);
}

static double base_wait(enum shape s, size_t i)
{
	return s == SHAPE_SPREAD ? SPREAD_STEP_NS * (double)i : 0.0;
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

/* Connect, read the backend's byte, close. Returns the byte or -1. */
static int connect_once(const struct steer_addr *to)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = to->port,
				  .sin_addr.s_addr = to->ip6[3] };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;
	unsigned char byte;

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && read(fd, &byte, 1) == 1)
		rc = byte;
	close(fd);
	return rc;
}

struct result {
	struct prog_stats c4, ops;
	long errors, mismatches;
	double scanned_sum;
	long steered;
};

static void run_connects(struct bench *b, size_t n, enum shape s, struct result *r)
{
	long k;

	for (k = 0; k < b->connects && !stopping; k++) {
		struct steer_pick pick;
		int got;

		if (s == SHAPE_PASSTHROUGH) {
			if (connect_once(&b->backends[k % (long)n]) < 0)
				r->errors++;
			continue;
		}
		if (s == SHAPE_SPREAD && k % DRAIN_EVERY == 0)
			drain(b, n);
		steer_select(&b->mirror, mirror_slot, b, 1, &pick);
		got = connect_once(&b->vip);
		if (got < 0) {
			r->errors++;
			continue;
		}
		r->steered++;
		r->scanned_sum += pick.scanned;
		if (!pick.found || got != (int)pick.pos)
			r->mismatches++;
	}
}

static int measure(struct bench *b, size_t n, enum shape s, int round)
{
	struct prog_stats c4a, c4b, opa, opb, ema, emb;
	struct result r = { 0 };
	size_t i;

	if (publish(b, n, s) != 0)
		return -1;
	if (s == SHAPE_EQUAL) /* credit every backend once: from here on, full scans */
		for (i = 0; i < n; i++)
			if (connect_once(&b->vip) < 0)
				r.errors++;
	if (read_stats(b->connect4_fd, &c4a) || read_stats(b->sockops_fd, &opa) ||
	    read_stats(b->empty_fd, &ema))
		return -1;
	run_connects(b, n, s, &r);
	if (read_stats(b->connect4_fd, &c4b) || read_stats(b->sockops_fd, &opb) ||
	    read_stats(b->empty_fd, &emb))
		return -1;
	r.c4.run_cnt = c4b.run_cnt - c4a.run_cnt;
	r.c4.run_time_ns = c4b.run_time_ns - c4a.run_time_ns;
	r.ops.run_time_ns = opb.run_time_ns - opa.run_time_ns;
	printf("%d,%zu,%s,%ld,%llu,%llu,%.1f,%.2f,%ld,%ld,%.1f,%.1f\n", round, n, shape_names[s],
	       b->connects, (unsigned long long)r.c4.run_cnt, (unsigned long long)r.c4.run_time_ns,
	       r.c4.run_cnt ? (double)r.c4.run_time_ns / (double)r.c4.run_cnt : 0.0,
	       r.steered ? r.scanned_sum / (double)r.steered : 0.0, r.mismatches, r.errors,
	       b->connects ? (double)r.ops.run_time_ns / (double)b->connects : 0.0,
	       emb.run_cnt > ema.run_cnt ? (double)(emb.run_time_ns - ema.run_time_ns) /
						   (double)(emb.run_cnt - ema.run_cnt)
					 : 0.0);
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
		"[--shapes passthrough,spread,equal] [--connects K] [--rounds R] [--header]\n");
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
		{ 0, 0, 0, 0 },
	};
	static struct bench b = { .connect4_fd = -1,
				  .sockops_fd = -1,
				  .empty_fd = -1,
				  .empty_link_fd = -1,
				  .connects = 5000 };
	struct steer_dp_opts o = { .own = true };
	size_t sizes[MAX_SIZES] = { 8, 64, 256 };
	int n_sizes = 3, rounds = 3, c, i, rc = 1, stats_fd = -1;
	unsigned shapes = (1u << SHAPES) - 1;
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
		default:
			usage();
		}
	}
	if (!o.pin_dir || !o.cgroup || !have_first || b.connects < 1 || rounds < 1)
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
	b.connect4_fd = prog_of_link(o.pin_dir, STEER_LINK_CONNECT4);
	b.sockops_fd = prog_of_link(o.pin_dir, STEER_LINK_SOCKOPS);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (b.connect4_fd < 0 || b.sockops_fd < 0 || stats_fd < 0 ||
	    attach_empty(&b, o.cgroup) != 0) {
		fprintf(stderr, "deccost: cannot find the programs or enable statistics: %s\n",
			strerror(errno));
	} else if (bench_join_cgroup(o.cgroup) != 0) {
		fprintf(stderr, "deccost: cannot join %s: %s\n", o.cgroup, strerror(errno));
	} else {
		if (header)
			printf("round,backends,shape,connects,run_cnt,run_time_ns,ns_per_decision,"
			       "mean_scanned,mismatches,errors,sockops_ns_per_conn,empty_prog_"
			       "ns\n");
		rc = run_rounds(&b, sizes, n_sizes, rounds, shapes) == 0 ? 0 : 1;
	}
	if (stats_fd >= 0)
		close(stats_fd);
	if (b.connect4_fd >= 0)
		close(b.connect4_fd);
	if (b.sockops_fd >= 0)
		close(b.sockops_fd);
	if (b.empty_link_fd >= 0)
		close(b.empty_link_fd); /* not pinned: closing detaches it */
	if (b.empty_fd >= 0)
		close(b.empty_fd);
	if (steer_dp_detach(b.dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "deccost: detach: %s\n", err);
		rc = 1;
	}
	steer_dp_close(b.dp);
	return rc;
}
