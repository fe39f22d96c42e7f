// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peerbench.c - what sharing the request accounting between routers costs
 * (--peer, user/peer/peer.c), and how soon one router sees another's request.
 *
 *   peerbench --part bpf --pin DIR --cgroup DIR --cost-obj build/bench/wire_cost.bpf.o
 *             [--first 127.0.4.1:9000] [--backends 64] [--rounds 8] [--runs 20000]
 *             [--header]
 *   peerbench --part prop --r1-pin DIR --r2-pin DIR --r1-cgroup DIR --r2-cgroup DIR
 *             --r1-pid PID --r2-pid PID [--r1-metrics ADDR:PORT --r2-metrics ADDR:PORT]
 *             [--vip 127.0.0.100:8000] [--first 127.0.0.11:8000] [--backends 2]
 *             [--request-bytes 4000] [--bytes-per-token 4] [--samples 300]
 *             [--warmup 20] [--idle-seconds 10] [--busy-seconds 10]
 *             [--busy-rate 2000] [--cpu-csv FILE] [--header]
 *
 * Part bpf: the kernel half, steer_peer_apply (bpf/steer_wire.bpf.c), as
 * smg-steerd runs it. This process owns a data plane of its own (pins and
 * cgroup given), publishes one service of --backends backends, connects once
 * to its address from the cgroup (the connect builds the service's tree, so
 * that each delta re-keys a leaf as in a router that steers), then runs the
 * program with BPF_PROG_TEST_RUN through steer_dp_peer_apply (the daemon's
 * call: the batch copied into the mmapped steer_peer_in, the clock read, one
 * system call), with batches of 1 delta and of 32 deltas (32 distinct slots),
 * each run adding tokens and the next taking them back; and steer_probe_apply
 * (--step-probe) through steer_dp_probe_apply with 1 and 32 packets (32
 * slots), a 20 ms and a 1 ms step in turn. Next to them, the floor: an empty
 * syscall program (steer_peer_floor in tools/bench/bpf/wire_cost.bpf.c), run
 * the same way. Variants are interleaved round by round (the first rotates);
 * per round and variant: BPF ns per run from
 * bpf_stats (run_time_ns / run_cnt, BPF_ENABLE_STATS held by a descriptor)
 * and the wall time of each call (CLOCK_MONOTONIC around it: what the daemon's
 * thread pays per batch), mean, p50 and p99. One CSV row per round and variant.
 *
 * Part prop: two real smg-steerd, R1 and R2 (started by the caller with
 * --peer each other), steer --vip over --backends backends; this process
 * serves them (a forked child outside every cgroup: it reads each request of
 * --request-bytes and answers 64 bytes, at once or when told). A keep-alive
 * connection made in R1's cgroup sends one request at a time; R2's pinned
 * steer_wire is read through its mmap (a reader's steer_dp_open, as
 * smg-steerctl does) in a tight loop (sched_yield between reads). Per sample:
 * send -> seen, from just before send() until R2's peer_pending_tokens (summed
 * over the backends) rises; the backend is then told to answer; answer ->
 * seen, from the client's receipt of the whole answer until R2's value is
 * back at 0. A random pause of 1-3 ms precedes the send and another the
 * answer (their phase against R1's report tick is then uniform, not locked
 * to it). One CSV row per sample on stdout. With --reader-gap-us 0,20 the
 * samples take turns between the tight reader and one that reads every
 * 20 us, side by side: on two vCPUs the tight one takes CPU time from the
 * routers whose exchange it times.
 * With --cpu-csv, the CPU time of R1 and R2 (/proc: utime + stime of the
 * process; of the peer thread, the thread besides main named smg-steerd
 * (or smg-peer*), also its schedstat run time) over phases: idle (nothing sent),
 * samples (the phase above) and busy (a connection through each router sends
 * --busy-rate requests per second, answered at once: every report tick of
 * both routers has news).
 *
 * Network: 127.0.0.0/8 only (the caller's private namespace).
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/bpf.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"
#include "dataplane/dataplane.h"

#define RESP_BYTES 64
#define MAX_BACKENDS STEER_MAX_BACKENDS
#define TTL_NS (3600ULL * 1000000000ULL)
#define NS_PER_TOKEN 500000.0 /* 2000 tokens/s */
#define BPF_VIP "127.0.0.201:8000"
#define APPLY_TOKENS 1000		      /* per delta and run, added then taken back */
#define WAIT_FIRST_NS (20ULL * 1000000000ULL) /* the first sample: threads starting */
#define WAIT_NS (2ULL * 1000000000ULL)

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile (0..1) of n sorted values, nearest rank. */
static uint64_t quantile(const uint64_t *v, size_t n, double q)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(q * (double)n + 0.5);
	if (i > 0)
		i--;
	return v[i < n ? i : n - 1];
}

static int read_stats(int prog_fd, uint64_t *run_ns, uint64_t *cnt)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len) != 0)
		return -errno;
	*run_ns = info.run_time_ns;
	*cnt = info.run_cnt;
	return 0;
}

/* ---- part bpf ------------------------------------------------------------------ */

enum variant {
	V_FLOOR,
	V_APPLY1,
	V_APPLY32,
	V_PROBE1,  /* steer_probe_apply (--step-probe): one packet */
	V_PROBE32, /* 32 packets of 32 slots */
	VARIANTS
};
static const char *const variant_names[VARIANTS] = { "floor", "apply1", "apply32", "probe1",
						     "probe32" };
static const uint32_t variant_deltas[VARIANTS] = { 0, 1, STEER_PEER_BATCH, 1, STEER_PROBE_BATCH };

struct bpfb {
	const char *pin, *cgroup, *cost_obj;
	struct steer_addr first, vip;
	int n_backends, rounds;
	long runs;
	struct steer_dp *dp;
	uint32_t svc_id, slots[MAX_BACKENDS], gens[MAX_BACKENDS];
	int apply_fd, floor_fd, probe_fd;
	struct bpf_object *obj;
	uint64_t *wall;
	int tree_built;
};

/*
 * The syscall program this data plane loaded under name (steer_peer_apply,
 * steer_probe_apply: the daemon's own, not a copy): the one of that name that
 * uses the steer_wire map pinned in pin. A new descriptor, or -errno
 * (-EEXIST: more than one).
 */
static int find_apply_prog(const char *pin, const char *name)
{
	struct bpf_map_info mi;
	__u32 mlen = sizeof(mi), id = 0, wire_id;
	char path[4096];
	int mfd, found = -ENOENT;

	snprintf(path, sizeof(path), "%s/%s", pin, STEER_MAP_WIRE);
	mfd = bpf_obj_get(path);
	if (mfd < 0)
		return -errno;
	memset(&mi, 0, sizeof(mi));
	if (bpf_obj_get_info_by_fd(mfd, &mi, &mlen) != 0) {
		close(mfd);
		return -errno;
	}
	close(mfd);
	wire_id = mi.id;
	while (bpf_prog_get_next_id(id, &id) == 0) {
		struct bpf_prog_info pi;
		__u32 maps[64], plen = sizeof(pi), k;
		bool uses = false;
		int fd = bpf_prog_get_fd_by_id(id);

		if (fd < 0)
			continue;
		memset(&pi, 0, sizeof(pi));
		pi.nr_map_ids = 64;
		pi.map_ids = (__u64)(uintptr_t)maps;
		if (bpf_obj_get_info_by_fd(fd, &pi, &plen) == 0 &&
		    pi.type == BPF_PROG_TYPE_SYSCALL &&
		    strncmp(pi.name, name, BPF_OBJ_NAME_LEN - 1) == 0)
			for (k = 0; k < pi.nr_map_ids && k < 64; k++)
				uses |= maps[k] == wire_id;
		if (!uses) {
			close(fd);
			continue;
		}
		if (found >= 0) {
			close(found);
			close(fd);
			return -EEXIST;
		}
		found = fd;
	}
	return found;
}

/* The floor: wire_cost.bpf.o's empty syscall program, alone loaded
 * from that object (over this data plane's pins, as wirecost opens it). */
static int load_floor(struct bpfb *b)
{
	struct bpf_program *p;

	b->obj = bench_object_open(b->cost_obj, b->pin);
	if (!b->obj)
		return -1;
	bpf_object__for_each_program(p, b->obj)
		bpf_program__set_autoload(p, !strcmp(bpf_program__name(p), "steer_peer_floor"));
	if (bpf_object__load(b->obj) != 0)
		return -1;
	p = bpf_object__find_program_by_name(b->obj, "steer_peer_floor");
	b->floor_fd = p ? bpf_program__fd(p) : -1;
	return b->floor_fd < 0 ? -1 : 0;
}

static int bpf_publish(struct bpfb *b)
{
	static struct steer_addr addrs[MAX_BACKENDS];
	static struct steer_dp_cost cost[MAX_BACKENDS];
	struct steer_dp_service svc = { .vip = b->vip,
					.configured = addrs,
					.n_configured = (size_t)b->n_backends,
					.table = cost,
					.n_table = (size_t)b->n_backends,
					.ttl_ns = TTL_NS };
	char err[512];
	int i, id;

	for (i = 0; i < b->n_backends; i++) {
		addrs[i] = bench_addr_plus(&b->first, (uint32_t)i);
		cost[i].addr = addrs[i];
		cost[i].base_wait_ns = 0;
		cost[i].ns_per_token = NS_PER_TOKEN;
	}
	if (steer_dp_publish_one(b->dp, &svc, err, sizeof(err)) != 0) {
		fprintf(stderr, "peerbench: publish: %s\n", err);
		return -1;
	}
	for (i = 0; i < b->n_backends; i++) {
		if (steer_dp_slot(b->dp, &b->vip, &addrs[i], &b->slots[i]) != 0)
			return -1;
		b->gens[i] = steer_dp_slot_gen(b->dp, b->slots[i]);
	}
	id = steer_dp_service_id(b->dp, &b->vip);
	if (id < 0)
		return -1;
	b->svc_id = (uint32_t)id;
	return 0;
}

/* One connect to the service from the cgroup: the connect program builds the
 * tree (the backends do not listen: refused, which does not matter). Returns
 * how many slots then hold the tree's cache. */
static int build_tree(struct bpfb *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = b->vip.port,
				  .sin_addr.s_addr = b->vip.ip6[3] };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), i, n = 0;

	if (fd < 0)
		return -1;
	(void)!connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	for (i = 0; i < b->n_backends; i++) {
		const struct steer_wire *w = steer_dp_wire_counters(b->dp, b->slots[i]);

		n += w && w->cache_tgen != 0;
	}
	return n;
}

/* The batch of run k: the first n slots, tokens added (k even) or taken back. */
static void fill_batch(const struct bpfb *b, struct steer_peer_batch *pb, uint32_t n, long k)
{
	uint32_t i;

	pb->svc_id = b->svc_id;
	pb->n = n;
	pb->applied = 0;
	for (i = 0; i < n; i++) {
		struct steer_peer_delta *d = &pb->d[i];

		d->slot = b->slots[i];
		d->slot_gen = b->gens[i];
		d->sent_tokens = k % 2 ? 0 : APPLY_TOKENS;
		d->answered_tokens = k % 2 ? APPLY_TOKENS : 0;
		d->ns_per_token = (uint64_t)NS_PER_TOKEN;
	}
}

/* The probe's packets of run k: one per slot of the first n, a 20 ms step
 * and a 1 ms one in turn (step_until rises, then falls: both re-key). */
static void fill_probe_batch(const struct bpfb *b, struct steer_probe_batch *pb, uint32_t n, long k)
{
	uint64_t now = steer_dp_clock_ns(), gap = k % 2 ? 1000000 : 20000000;
	uint32_t i;

	pb->svc_id = b->svc_id;
	pb->n = n;
	pb->applied = 0;
	for (i = 0; i < n; i++)
		pb->p[i] = (struct steer_probe_step){ .slot = b->slots[i],
						      .slot_gen = b->gens[i],
						      .last_ns = now - gap,
						      .at_ns = now };
}

struct vresult {
	double bpf_ns, wall_mean;
	uint64_t wall_p50, wall_p99, errors;
};

static int run_variant(struct bpfb *b, enum variant v, long runs, struct vresult *r)
{
	LIBBPF_OPTS(bpf_test_run_opts, o);
	struct steer_peer_batch pb;
	struct steer_probe_batch qb;
	bool probe = v == V_PROBE1 || v == V_PROBE32;
	uint64_t t0, t1, run0 = 0, cnt0 = 0, run1 = 0, cnt1 = 0, sum = 0;
	int fd = v == V_FLOOR ? b->floor_fd : probe ? b->probe_fd : b->apply_fd, rc;
	char err[256];
	long k;

	memset(&pb, 0, sizeof(pb));
	memset(&qb, 0, sizeof(qb));
	memset(r, 0, sizeof(*r));
	if (read_stats(fd, &run0, &cnt0) != 0)
		return -1;
	for (k = 0; k < runs && !stopping; k++) {
		if (probe)
			fill_probe_batch(b, &qb, variant_deltas[v], k);
		else if (v != V_FLOOR)
			fill_batch(b, &pb, variant_deltas[v], k);
		t0 = bench_now_ns();
		if (v == V_FLOOR) {
			rc = bpf_prog_test_run_opts(fd, &o);
			rc = rc ? rc : o.retval != 0;
		} else if (probe) {
			rc = steer_dp_probe_apply(b->dp, &qb, err, sizeof(err));
			rc = rc ? rc : qb.applied != qb.n;
		} else {
			rc = steer_dp_peer_apply(b->dp, &pb, err, sizeof(err));
			rc = rc ? rc : pb.applied != pb.n;
		}
		t1 = bench_now_ns();
		b->wall[k] = t1 - t0;
		sum += t1 - t0;
		if (rc && !r->errors++)
			fprintf(stderr, "peerbench: %s: run %ld failed: %s\n", variant_names[v], k,
				v == V_FLOOR ? strerror(errno) : err);
	}
	if (read_stats(fd, &run1, &cnt1) != 0 || k == 0)
		return -1;
	r->bpf_ns = cnt1 > cnt0 ? (double)(run1 - run0) / (double)(cnt1 - cnt0) : 0;
	r->wall_mean = (double)sum / (double)k;
	qsort(b->wall, (size_t)k, sizeof(b->wall[0]), cmp_u64);
	r->wall_p50 = quantile(b->wall, (size_t)k, 0.5);
	r->wall_p99 = quantile(b->wall, (size_t)k, 0.99);
	return 0;
}

static int bpf_rounds(struct bpfb *b, bool header)
{
	struct vresult r;
	int round, j;

	if (header)
		printf("round,variant,deltas,runs,bpf_ns_per_run,bpf_ns_per_delta,wall_ns_mean,"
		       "wall_ns_p50,wall_ns_p99,errors,backends,tree_built\n");
	/* Warm-up, not counted: caches, the verifier's first runs. */
	for (j = 0; j < VARIANTS; j++)
		if (run_variant(b, (enum variant)j, 2000, &r) != 0)
			return -1;
	for (round = 1; round <= b->rounds && !stopping; round++)
		for (j = 0; j < VARIANTS && !stopping; j++) {
			enum variant v = (enum variant)((round - 1 + j) % VARIANTS);

			if (run_variant(b, v, b->runs, &r) != 0)
				return -1;
			printf("%d,%s,%u,%ld,%.1f,%.1f,%.1f,%llu,%llu,%llu,%d,%d\n", round,
			       variant_names[v], variant_deltas[v], b->runs, r.bpf_ns,
			       variant_deltas[v] ? r.bpf_ns / variant_deltas[v] : r.bpf_ns,
			       r.wall_mean, (unsigned long long)r.wall_p50,
			       (unsigned long long)r.wall_p99, (unsigned long long)r.errors,
			       b->n_backends, b->tree_built);
			fflush(stdout);
			if (r.errors)
				return -1;
		}
	return stopping ? -1 : 0;
}

static int part_bpf(struct bpfb *b, bool header)
{
	struct steer_dp_opts o = { .pin_dir = b->pin, .cgroup = b->cgroup, .own = true };
	char err[512];
	int rc = 1, stats_fd = -1;

	if (b->n_backends < STEER_PEER_BATCH || b->n_backends > MAX_BACKENDS) {
		fprintf(stderr, "peerbench: --backends must be %d..%d\n", STEER_PEER_BATCH,
			MAX_BACKENDS);
		return 2;
	}
	b->apply_fd = b->floor_fd = b->probe_fd = -1;
	b->wall = calloc((size_t)(b->runs > 2000 ? b->runs : 2000), sizeof(*b->wall));
	if (!b->wall)
		return 1;
	steer_addr_parse(BPF_VIP, &b->vip, err, sizeof(err));
	if (steer_dp_open(&o, &b->dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "peerbench: %s\n", err);
		free(b->wall);
		return 1;
	}
	if (bpf_publish(b) != 0) {
		fprintf(stderr, "peerbench: cannot publish %d backends\n", b->n_backends);
	} else if (bench_join_cgroup(b->cgroup) != 0) {
		fprintf(stderr, "peerbench: cannot join %s: %s\n", b->cgroup, strerror(errno));
	} else if ((b->tree_built = build_tree(b)) < b->n_backends) {
		fprintf(stderr, "peerbench: the connect built the tree for %d of %d slots\n",
			b->tree_built, b->n_backends);
	} else if ((b->apply_fd = find_apply_prog(b->pin, "steer_peer_apply")) < 0) {
		fprintf(stderr, "peerbench: cannot find this data plane's steer_peer_apply: %s\n",
			strerror(-b->apply_fd));
	} else if ((b->probe_fd = find_apply_prog(b->pin, "steer_probe_apply")) < 0) {
		fprintf(stderr, "peerbench: cannot find this data plane's steer_probe_apply: %s\n",
			strerror(-b->probe_fd));
	} else if (load_floor(b) != 0) {
		fprintf(stderr, "peerbench: cannot load steer_peer_floor from %s: %s\n",
			b->cost_obj, strerror(errno));
	} else if ((stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME)) < 0) {
		fprintf(stderr, "peerbench: cannot enable statistics: %s\n", strerror(errno));
	} else {
		rc = bpf_rounds(b, header) == 0 ? 0 : 1;
	}
	if (stats_fd >= 0)
		close(stats_fd);
	if (b->apply_fd >= 0)
		close(b->apply_fd);
	if (b->probe_fd >= 0)
		close(b->probe_fd);
	if (b->obj)
		bpf_object__close(b->obj);
	if (steer_dp_detach(b->dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "peerbench: detach: %s\n", err);
		rc = 1;
	}
	steer_dp_close(b->dp);
	free(b->wall);
	return rc;
}

/* ---- part prop: the backends ------------------------------------------------------ */

struct prop {
	const char *pin[2], *cgroup[2], *metrics[2], *cpu_csv;
	pid_t pid[2];
	struct steer_addr vip, first;
	int n_backends, samples, warmup;
	long request, bpt;
	double idle_s, busy_s, busy_rate;
	/* --reader-gap-us: how R2's value is watched, per sample in turn: 0 is a
	 * tight loop with sched_yield, N > 0 a read every N us (nanosleep, 1 ns
	 * timer slack). On two vCPUs a tight reader competes with the routers'
	 * threads for the CPUs whose delay it measures. */
	long gaps_us[8];
	int n_gaps;
	long gap_us;		/* this sample's */
	struct steer_dp *rd[2]; /* readers of R1's and R2's pins */
	uint32_t slot[2][MAX_BACKENDS];
	int ctl;      /* write end: one byte lets the held answer go */
	pid_t server; /* the child serving the backends */
	char home[4096];
	char *req_hold, *req_now;
};

static long srv_request;
static int srv_ctl; /* read end */

static int read_full(int fd, char *p, size_t n)
{
	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A connection of the backend: each request of srv_request bytes gets
 * RESP_BYTES, at once ('A' first) or once the parent writes a byte ('H'). */
static void *srv_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc((size_t)srv_request), resp[RESP_BYTES], c;

	memset(resp, 'r', sizeof(resp));
	while (buf && read_full(fd, buf, (size_t)srv_request) == 0) {
		if (buf[0] == 'H' && read(srv_ctl, &c, 1) != 1)
			break;
		if (write_full(fd, resp, sizeof(resp)) != 0)
			break;
	}
	free(buf);
	close(fd);
	return NULL;
}

static void srv_main(const int *lfd, int n)
{
	struct pollfd pf[MAX_BACKENDS];
	int i;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (i = 0; i < n; i++)
		pf[i] = (struct pollfd){ .fd = lfd[i], .events = POLLIN };
	for (;;) {
		if (poll(pf, (nfds_t)n, -1) <= 0)
			continue;
		for (i = 0; i < n; i++) {
			int c, one = 1;
			pthread_t t;

			if (!(pf[i].revents & POLLIN))
				continue;
			c = accept4(lfd[i], NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			if (pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)c) == 0)
				pthread_detach(t);
			else
				close(c);
		}
	}
}

static int start_server(struct prop *p)
{
	int lfd[MAX_BACKENDS], pipefd[2], i, one = 1;

	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return -1;
	for (i = 0; i < p->n_backends; i++) {
		struct steer_addr a = bench_addr_plus(&p->first, (uint32_t)i);
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_port = a.port,
					  .sin_addr.s_addr = a.ip6[3] };

		lfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(lfd[i], SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (lfd[i] < 0 || bind(lfd[i], (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    listen(lfd[i], 128) != 0) {
			fprintf(stderr, "peerbench: cannot listen on backend %d: %s\n", i,
				strerror(errno));
			return -1;
		}
	}
	srv_request = p->request;
	p->server = fork();
	if (p->server == 0) {
		close(pipefd[1]);
		srv_ctl = pipefd[0];
		srv_main(lfd, p->n_backends);
		_exit(0);
	}
	close(pipefd[0]);
	for (i = 0; i < p->n_backends; i++)
		close(lfd[i]);
	p->ctl = pipefd[1];
	return p->server > 0 ? 0 : -1;
}

/* ---- part prop: the routers --------------------------------------------------------- */

/* This process's cgroup now (to come back to after a connect elsewhere). */
static int own_cgroup(char *out, size_t len)
{
	char line[4096], root[4096] = "", *nl;
	FILE *f = fopen("/proc/mounts", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char dev[256], dir[4096], type[64];

		if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
		    !strcmp(type, "cgroup2")) {
			snprintf(root, sizeof(root), "%s", dir);
			break;
		}
	}
	if (f)
		fclose(f);
	f = fopen("/proc/self/cgroup", "r");
	if (!f || !root[0])
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "0::", 3)) {
			nl = strchr(line, '\n');
			if (nl)
				*nl = 0;
			snprintf(out, len, "%s%s", root, line + 3);
			fclose(f);
			return 0;
		}
	fclose(f);
	return -1;
}

/* A connection to the VIP made in a router's cgroup: that router steers it. */
static int connect_via(struct prop *p, int r)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = p->vip.port,
				  .sin_addr.s_addr = p->vip.ip6[3] };
	int fd, one = 1, e = 0;

	if (bench_join_cgroup(p->cgroup[r]) != 0)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	if (bench_join_cgroup(p->home) != 0)
		fprintf(stderr, "peerbench: cannot go back to %s\n", p->home);
	if (fd < 0)
		fprintf(stderr, "peerbench: connect through R%d: %s\n", r + 1, strerror(e));
	return fd;
}

/* Open both routers' pins as a reader, once each has published the VIP with
 * every backend. */
static int open_routers(struct prop *p)
{
	uint64_t deadline = bench_now_ns() + 30ULL * 1000000000ULL;
	char err[512];
	int r, i;

	for (r = 0; r < 2; r++) {
		struct steer_dp_opts o = { .pin_dir = p->pin[r], .own = false };

		for (;;) {
			bool ok = p->rd[r] || steer_dp_open(&o, &p->rd[r], err, sizeof(err)) == 0;

			for (i = 0; ok && i < p->n_backends; i++) {
				struct steer_addr a = bench_addr_plus(&p->first, (uint32_t)i);

				ok = steer_dp_slot(p->rd[r], &p->vip, &a, &p->slot[r][i]) == 0;
			}
			if (ok && steer_dp_service_id(p->rd[r], &p->vip) >= 0)
				break;
			if (bench_now_ns() > deadline || stopping) {
				fprintf(stderr, "peerbench: R%d (%s) did not publish: %s\n", r + 1,
					p->pin[r], p->rd[r] ? "no slots" : err);
				return -1;
			}
			usleep(50000);
		}
	}
	return 0;
}

/* The other routers' pending tokens at router r, summed over the backends. */
static uint64_t peer_pending(const struct prop *p, int r)
{
	uint64_t s = 0;
	int i;

	for (i = 0; i < p->n_backends; i++)
		s += steer_dp_peer_pending_tokens(p->rd[r], p->slot[r][i]);
	return s;
}

/* Spin until R2's value rises above 0 (rise) or is back at 0; the time it was
 * first seen so, or 0 at the deadline. */
static uint64_t spin_until(const struct prop *p, bool rise, uint64_t deadline, uint64_t *val)
{
	for (;;) {
		uint64_t v = peer_pending(p, 1), now = bench_now_ns();

		if (rise ? v > 0 : v == 0) {
			*val = v;
			return now;
		}
		if (now > deadline || stopping)
			return 0;
		if (p->gap_us > 0) {
			struct timespec ts = { 0, p->gap_us * 1000L };

			nanosleep(&ts, NULL);
		} else {
			sched_yield();
		}
	}
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ULL),
			       .tv_nsec = (long)(ns % 1000000000ULL) };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR && !stopping)
		;
}

/* One sample on fd (steered by R1). Prints its row unless warm-up. */
static int one_sample(struct prop *p, int fd, int n, bool count, bool first)
{
	uint64_t t_send, t_up, t_rel, t_ans, t_down, up_val = 0, v, wait;
	char resp[RESP_BYTES];

	wait = first ? WAIT_FIRST_NS : WAIT_NS;
	p->gap_us = p->n_gaps ? p->gaps_us[(n < 0 ? -n : n) % p->n_gaps] : 0;
	/* Nothing of R1's left at R2 (a previous sample's drop not yet seen). */
	if (!spin_until(p, false, bench_now_ns() + wait, &v)) {
		fprintf(stderr, "peerbench: R2 holds %llu tokens before sample %d\n",
			(unsigned long long)peer_pending(p, 1), n);
		return -1;
	}
	sleep_ns(1000000ULL + (uint64_t)(random() % 2000000));
	t_send = bench_now_ns();
	if (write_full(fd, p->req_hold, (size_t)p->request) != 0)
		return -1;
	t_up = spin_until(p, true, bench_now_ns() + wait, &up_val);
	/* The rise was seen just after one of R1's ticks: a random pause again,
	 * or the answer would always come just after a tick too. */
	sleep_ns(1000000ULL + (uint64_t)(random() % 2000000));
	t_rel = bench_now_ns();
	if (write(p->ctl, "g", 1) != 1 || read_full(fd, resp, sizeof(resp)) != 0)
		return -1;
	t_ans = bench_now_ns();
	t_down = spin_until(p, false, bench_now_ns() + wait, &v);
	if (count)
		printf("%d,%llu,%llu,%.3f,%.3f,%.3f,%.3f,%d,%ld\n", n, (unsigned long long)up_val,
		       (unsigned long long)(p->request / p->bpt),
		       t_up ? (double)(t_up - t_send) / 1e3 : -1.0, (double)(t_ans - t_rel) / 1e3,
		       t_down ? ((double)t_down - (double)t_ans) / 1e3 : -1.0,
		       t_down ? (double)(t_down - t_rel) / 1e3 : -1.0, !t_up || !t_down, p->gap_us);
	if (!t_up || !t_down)
		fprintf(stderr, "peerbench: sample %d: R2 did not see the %s within %.1f s\n", n,
			!t_up ? "request" : "answer", (double)wait / 1e9);
	return 0;
}

/* ---- part prop: CPU ---------------------------------------------------------------- */

struct cpu {
	uint64_t proc_ticks;	/* utime + stime of the process (exited threads included) */
	uint64_t peer_ticks;	/* of the peer thread */
	uint64_t peer_sched_ns; /* its schedstat run time */
	int peer_threads;	/* threads counted as the peer thread (1) */
	double reports_sent, reports_received, applied; /* its /metrics (NAN: none) */
};

/* utime + stime (ticks) and comm of /proc/PID[/task/TID]/stat. */
static int stat_ticks(const char *path, uint64_t *ticks, char *comm, size_t commlen)
{
	char buf[2048], *open_p, *close_p;
	unsigned long ut = 0, st = 0;
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	open_p = strchr(buf, '(');
	close_p = strrchr(buf, ')');
	if (!open_p || !close_p || close_p < open_p)
		return -1;
	if (comm)
		snprintf(comm, commlen, "%.*s", (int)(close_p - open_p - 1), open_p + 1);
	if (sscanf(close_p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) !=
	    2)
		return -1;
	*ticks = ut + st;
	return 0;
}

/* A counter of the daemon's /metrics, summed over its label sets; NAN when
 * none (or no --rN-metrics). */
static double scrape(const char *addr, const char *name)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct steer_addr a;
	char err[128], *buf, *line;
	size_t cap = 1 << 20, len = 0;
	double sum = NAN;
	int fd;

	if (!addr || steer_addr_parse(addr, &a, err, sizeof(err)) != 0 || !steer_addr_is_v4(&a))
		return NAN;
	sa.sin_port = a.port;
	sa.sin_addr.s_addr = a.ip6[3];
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	buf = malloc(cap);
	if (fd < 0 || !buf || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write_full(fd, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n", 34) != 0) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NAN;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, cap - 1 - len);

		if (r <= 0)
			break;
		len += (size_t)r;
		if (len == cap - 1)
			break;
	}
	close(fd);
	buf[len] = 0;
	for (line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		size_t nl = strlen(name);
		char *sp;

		if (strncmp(line, name, nl) != 0 || (line[nl] != ' ' && line[nl] != '{'))
			continue;
		sp = strchr(line, ' ');
		if (line[nl] == '{')
			sp = strstr(line, "} ") ? strstr(line, "} ") + 1 : NULL;
		if (!sp)
			continue;
		sum = (sum != sum ? 0 : sum) + strtod(sp + 1, NULL);
	}
	free(buf);
	return sum;
}

static int read_cpu(const struct prop *p, int r, struct cpu *c)
{
	char path[512], comm[64];
	struct dirent *de;
	DIR *d;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid[r]);
	if (stat_ticks(path, &c->proc_ticks, NULL, 0) != 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)p->pid[r]);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		long tid = atol(de->d_name);
		uint64_t ticks, run = 0;
		FILE *f;

		if (tid <= 0 || tid == p->pid[r])
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/stat", (int)p->pid[r], tid);
		/* The peer thread: the one besides main that keeps the process's
		 * name (the gRPC and HTTP threads name themselves), or one named
		 * for the peers. */
		if (stat_ticks(path, &ticks, comm, sizeof(comm)) != 0 ||
		    (strcmp(comm, "smg-steerd") && strncmp(comm, "smg-peer", 8)))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%ld/schedstat", (int)p->pid[r], tid);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%lu", &run) != 1)
				run = 0;
			fclose(f);
		}
		c->peer_ticks += ticks;
		c->peer_sched_ns += run;
		c->peer_threads++;
	}
	closedir(d);
	c->reports_sent = scrape(p->metrics[r], "smg_steer_peer_reports_sent_total");
	c->reports_received = scrape(p->metrics[r], "smg_steer_peer_reports_received_total");
	c->applied = scrape(p->metrics[r], "smg_steer_peer_applied_total");
	return 0;
}

/* smg-steerd refreshes its /metrics once a second: a phase's reports are
 * read after this much quiet at both ends (a few full reports of the quiet
 * time are counted with it). */
#define METRICS_SETTLE_NS 1200000000ULL

struct phase {
	struct cpu c0[2];
	uint64_t t0;
};

static void phase_begin(const struct prop *p, struct phase *ph)
{
	sleep_ns(METRICS_SETTLE_NS);
	read_cpu(p, 0, &ph->c0[0]);
	read_cpu(p, 1, &ph->c0[1]);
	ph->t0 = bench_now_ns();
}

static void phase_end(const struct prop *p, const struct phase *ph, const char *name, long requests,
		      FILE *out)
{
	double wall = (double)(bench_now_ns() - ph->t0) / 1e9,
	       tick_ms = 1000.0 / sysconf(_SC_CLK_TCK);
	struct cpu c[2];
	int r;

	for (r = 0; r < 2; r++)
		if (read_cpu(p, r, &c[r]) != 0)
			return;
	sleep_ns(METRICS_SETTLE_NS);
	for (r = 0; r < 2 && out; r++) {
		struct cpu c1 = c[r];
		const struct cpu *c0 = &ph->c0[r];

		c1.reports_sent = scrape(p->metrics[r], "smg_steer_peer_reports_sent_total");
		c1.reports_received =
			scrape(p->metrics[r], "smg_steer_peer_reports_received_total");
		c1.applied = scrape(p->metrics[r], "smg_steer_peer_applied_total");
		fprintf(out, "%s,R%d,%.3f,%.1f,%.1f,%.3f,%.3f,%d,%.0f,%.0f,%.0f,%ld\n", name, r + 1,
			wall, (double)(c1.proc_ticks - c0->proc_ticks) * tick_ms,
			(double)(c1.peer_ticks - c0->peer_ticks) * tick_ms,
			(double)(c1.peer_sched_ns - c0->peer_sched_ns) / 1e6,
			(double)(c1.peer_sched_ns - c0->peer_sched_ns) / 1e7 / wall,
			c1.peer_threads, c1.reports_sent - c0->reports_sent,
			c1.reports_received - c0->reports_received, c1.applied - c0->applied,
			requests);
		fflush(out);
	}
}

/* ---- part prop: busy traffic --------------------------------------------------------- */

struct busy {
	const struct prop *p;
	int fd;
	uint64_t until;
	long requests, errors;
};

/* Requests answered at once, paced at busy_rate per second until until. */
static void *busy_loop(void *arg)
{
	struct busy *b = arg;
	uint64_t period = (uint64_t)(1e9 / b->p->busy_rate), next = bench_now_ns();
	char resp[RESP_BYTES];

	while (!stopping && next < b->until) {
		uint64_t now = bench_now_ns();

		if (now < next)
			sleep_ns(next - now);
		if (write_full(b->fd, b->p->req_now, (size_t)b->p->request) != 0 ||
		    read_full(b->fd, resp, sizeof(resp)) != 0) {
			b->errors++;
			break;
		}
		b->requests++;
		next += period;
	}
	return NULL;
}

static int busy_phase(struct prop *p, FILE *cpu)
{
	struct busy b[2] = { { .fd = -1 }, { .fd = -1 } };
	bool made[2] = { false, false };
	pthread_t t[2];
	struct phase ph;
	int r, rc = 0;

	for (r = 0; r < 2 && rc == 0; r++) {
		b[r] = (struct busy){ .p = p, .fd = connect_via(p, r) };
		rc = b[r].fd < 0 ? -1 : 0;
	}
	if (rc == 0) {
		phase_begin(p, &ph);
		for (r = 0; r < 2; r++) {
			b[r].until = ph.t0 + (uint64_t)(p->busy_s * 1e9);
			made[r] = pthread_create(&t[r], NULL, busy_loop, &b[r]) == 0;
			b[r].errors += !made[r];
		}
		for (r = 0; r < 2; r++)
			if (made[r])
				pthread_join(t[r], NULL);
		if (!stopping)
			phase_end(p, &ph, "busy", b[0].requests + b[1].requests, cpu);
	}
	for (r = 0; r < 2; r++) {
		if (b[r].fd >= 0)
			close(b[r].fd);
		rc |= b[r].errors ? -1 : 0;
	}
	return rc;
}

static int part_prop(struct prop *p, bool header)
{
	struct phase ph;
	FILE *cpu = NULL;
	int fd = -1, i, rc = 1;

	if (p->n_backends < 1 || p->n_backends > MAX_BACKENDS || p->request < 16 || p->bpt < 1 ||
	    p->busy_rate <= 0) {
		fprintf(stderr, "peerbench: bad --backends, --request-bytes, --bytes-per-token "
				"or --busy-rate\n");
		return 2;
	}
	p->req_hold = malloc((size_t)p->request);
	p->req_now = malloc((size_t)p->request);
	if (!p->req_hold || !p->req_now || own_cgroup(p->home, sizeof(p->home)) != 0)
		return 1;
	memset(p->req_hold, 'x', (size_t)p->request);
	memset(p->req_now, 'x', (size_t)p->request);
	p->req_hold[0] = 'H';
	p->req_now[0] = 'A';
	if (p->cpu_csv) {
		cpu = fopen(p->cpu_csv, "w");
		if (!cpu)
			return 1;
		fprintf(cpu, "phase,router,wall_s,proc_cpu_ms,peer_cpu_ms,peer_sched_ms,peer_cpu_"
			     "pct,peer_threads,reports_sent,reports_received,applied,requests\n");
	}
	srandom((unsigned)bench_now_ns());
	prctl(PR_SET_TIMERSLACK, 1UL); /* a gapped reader's sleeps end on time */
	if (start_server(p) != 0 || open_routers(p) != 0)
		goto out;
	fd = connect_via(p, 0);
	if (fd < 0)
		goto out;
	if (header)
		printf("sample,tokens_seen,tokens_sent,send_to_seen_us,release_to_answer_us,"
		       "answer_to_seen_us,release_to_seen_us,timeout,reader_gap_us\n");
	fprintf(stderr, "peerbench: %d warm-up samples\n", p->warmup);
	for (i = 0; i < p->warmup && !stopping; i++)
		if (one_sample(p, fd, -1 - i, false, i == 0) != 0)
			goto out;
	fprintf(stderr, "peerbench: idle %.0f s\n", p->idle_s);
	phase_begin(p, &ph);
	sleep_ns((uint64_t)(p->idle_s * 1e9));
	if (stopping)
		goto out;
	phase_end(p, &ph, "idle", 0, cpu);
	fprintf(stderr, "peerbench: %d samples\n", p->samples);
	phase_begin(p, &ph);
	for (i = 1; i <= p->samples && !stopping; i++) {
		if (one_sample(p, fd, i, true, false) != 0)
			goto out;
		fflush(stdout);
	}
	if (stopping)
		goto out;
	phase_end(p, &ph, "samples", p->samples, cpu);
	fprintf(stderr, "peerbench: busy %.0f s at %.0f requests/s through each router\n",
		p->busy_s, p->busy_rate);
	if (p->busy_s > 0 && busy_phase(p, cpu) != 0)
		goto out;
	rc = stopping ? 1 : 0;
out:
	if (fd >= 0)
		close(fd);
	if (cpu)
		fclose(cpu);
	if (p->server > 0) {
		kill(p->server, SIGKILL);
		waitpid(p->server, NULL, 0);
	}
	for (i = 0; i < 2; i++)
		if (p->rd[i])
			steer_dp_close(p->rd[i]);
	free(p->req_hold);
	free(p->req_now);
	return rc;
}

/* ---- main ----------------------------------------------------------------------------- */

/* --reader-gap-us N[,N...]: up to 8 gaps, 0 to 1000 us each. */
static int parse_gaps(struct prop *p, const char *arg)
{
	const char *s = arg;
	char *end;

	p->n_gaps = 0;
	while (*s) {
		long v = strtol(s, &end, 10);

		if (end == s || v < 0 || v > 1000 || p->n_gaps == 8 || (*end && *end != ','))
			return -1;
		p->gaps_us[p->n_gaps++] = v;
		s = *end ? end + 1 : end;
	}
	return p->n_gaps ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: peerbench --part bpf --pin DIR --cgroup DIR --cost-obj FILE [--first "
		"ADDR:PORT] [--backends N] [--rounds R] [--runs K] [--header]\n"
		"       peerbench --part prop --r1-pin DIR --r2-pin DIR --r1-cgroup DIR "
		"--r2-cgroup DIR --r1-pid PID --r2-pid PID [--r1-metrics ADDR:PORT] "
		"[--r2-metrics ADDR:PORT] [--vip ADDR:PORT] [--first ADDR:PORT] [--backends N] "
		"[--request-bytes B] [--bytes-per-token N] [--samples N] [--warmup N] "
		"[--idle-seconds S] [--busy-seconds S] [--busy-rate R] [--cpu-csv FILE] "
		"[--reader-gap-us N[,N...]] [--header]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "part", 1, 0, 'P' },		{ "pin", 1, 0, 'p' },
		{ "cgroup", 1, 0, 'g' },	{ "cost-obj", 1, 0, 'C' },
		{ "first", 1, 0, 'f' },		{ "backends", 1, 0, 'n' },
		{ "rounds", 1, 0, 'r' },	{ "runs", 1, 0, 'k' },
		{ "header", 0, 0, 'H' },	{ "r1-pin", 1, 0, '1' },
		{ "r2-pin", 1, 0, '2' },	{ "r1-cgroup", 1, 0, '3' },
		{ "r2-cgroup", 1, 0, '4' },	{ "r1-pid", 1, 0, '5' },
		{ "r2-pid", 1, 0, '6' },	{ "r1-metrics", 1, 0, '7' },
		{ "r2-metrics", 1, 0, '8' },	{ "vip", 1, 0, 'v' },
		{ "request-bytes", 1, 0, 'b' }, { "bytes-per-token", 1, 0, 't' },
		{ "samples", 1, 0, 's' },	{ "warmup", 1, 0, 'w' },
		{ "idle-seconds", 1, 0, 'i' },	{ "busy-seconds", 1, 0, 'B' },
		{ "busy-rate", 1, 0, 'R' },	{ "cpu-csv", 1, 0, 'c' },
		{ "reader-gap-us", 1, 0, 'G' }, { 0, 0, 0, 0 },
	};
	static struct bpfb b = { .n_backends = 64, .rounds = 8, .runs = 20000 };
	static struct prop p = { .n_backends = 2,
				 .samples = 300,
				 .warmup = 20,
				 .request = 4000,
				 .bpt = 4,
				 .idle_s = 10,
				 .busy_s = 10,
				 .busy_rate = 2000 };
	const char *part = NULL, *first = NULL, *vip = "127.0.0.100:8000";
	bool header = false;
	char err[256];
	int c, n = -1;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'P':
			part = optarg;
			break;
		case 'p':
			b.pin = optarg;
			break;
		case 'g':
			b.cgroup = optarg;
			break;
		case 'C':
			b.cost_obj = optarg;
			break;
		case 'f':
			first = optarg;
			break;
		case 'n':
			n = atoi(optarg);
			break;
		case 'r':
			b.rounds = atoi(optarg);
			break;
		case 'k':
			b.runs = atol(optarg);
			break;
		case 'H':
			header = true;
			break;
		case '1':
		case '2':
			p.pin[c - '1'] = optarg;
			break;
		case '3':
		case '4':
			p.cgroup[c - '3'] = optarg;
			break;
		case '5':
		case '6':
			p.pid[c - '5'] = (pid_t)atoi(optarg);
			break;
		case '7':
		case '8':
			p.metrics[c - '7'] = optarg;
			break;
		case 'v':
			vip = optarg;
			break;
		case 'b':
			p.request = atol(optarg);
			break;
		case 't':
			p.bpt = atol(optarg);
			break;
		case 's':
			p.samples = atoi(optarg);
			break;
		case 'w':
			p.warmup = atoi(optarg);
			break;
		case 'i':
			p.idle_s = atof(optarg);
			break;
		case 'B':
			p.busy_s = atof(optarg);
			break;
		case 'R':
			p.busy_rate = atof(optarg);
			break;
		case 'c':
			p.cpu_csv = optarg;
			break;
		case 'G':
			if (parse_gaps(&p, optarg) != 0)
				usage();
			break;
		default:
			usage();
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (part && !strcmp(part, "bpf")) {
		if (!b.pin || !b.cgroup || !b.cost_obj || b.rounds < 1 || b.runs < 1)
			usage();
		if (n > 0)
			b.n_backends = n;
		if (steer_addr_parse(first ? first : "127.0.4.1:9000", &b.first, err,
				     sizeof(err)) != 0 ||
		    !steer_addr_is_v4(&b.first))
			usage();
		return part_bpf(&b, header);
	}
	if (part && !strcmp(part, "prop")) {
		if (!p.pin[0] || !p.pin[1] || !p.cgroup[0] || !p.cgroup[1] || p.pid[0] <= 0 ||
		    p.pid[1] <= 0 || p.samples < 1 || p.warmup < 1)
			usage();
		if (n > 0)
			p.n_backends = n;
		if (steer_addr_parse(first ? first : "127.0.0.11:8000", &p.first, err,
				     sizeof(err)) != 0 ||
		    steer_addr_parse(vip, &p.vip, err, sizeof(err)) != 0 ||
		    !steer_addr_is_v4(&p.first) || !steer_addr_is_v4(&p.vip))
			usage();
		return part_prop(&p, header);
	}
	usage();
	return 2;
}
