// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * wirecost.c - what request accounting on steered sockets costs, side by side.
 *
 *   wirecost --pin DIR --cgroup DIR --cost-obj build/bench/wire_cost.bpf.o
 *            [--backend 127.0.6.1:9600] [--rounds 8] [--messages 5000]
 *            [--request 512] [--response 256] [--bulk-mb 32] [--header]
 *            [--variants off,skb,...] [--cpus any|same|split]
 *
 * Loads and attaches the real data plane (dataplane API) over one backend,
 * forks a server that stays outside the measured cgroup, joins the cgroup
 * and measures, interleaved round by round, these variants:
 *   off   no accounting program attached (the wire links are detached);
 *   skb   the shipped cgroup_skb egress and ingress programs
 *         (bpf/steer_wire.bpf.c), the table published as smg-steerd's
 *         default (--wire-estimator fluid);
 *   find, lock  the shipped egress program cut short after the record's
 *         lookup, or after the service's lock (tools/bench/bpf/wire_cost.bpf.c),
 *         attached alone: where a request's BPF time goes;
 *   step  the shipped pair with the table published with STEER_TBL_STEP
 *         (--wire-estimator fluid-step): the step cadence;
 *   push  the shipped pair with the table published with STEER_TBL_PEER_PUSH
 *         (--peer-push on), the wake-up re-armed and its ring drained before
 *         each request, as smg-steerd's peer thread does: every request pays
 *         the kick (the exchange and the ring record), its answer the test of
 *         the pending word;
 *   min   the least an exact per-socket count writes (steer_wmin_out,
 *         steer_wmin_in in wire_cost.bpf.c): the record's unanswered bytes,
 *         per-CPU slot counters, nothing else; a bound, not a design;
 * each over four phases:
 *   rr          one steered keep-alive connection, --messages request/response
 *               round trips (--request bytes out, --response bytes back);
 *   direct      the same to the backend's address: an unsteered socket;
 *   bulk        a steered connection uploading --bulk-mb MiB in 64 KiB writes;
 *   bulkdirect  the same, unsteered;
 * and, for skb, step and push, a fifth:
 *   stream      rr with every response written in STREAM_CHUNKS pieces (a
 *               streaming answer's packets: the step cadence's work runs on
 *               all but the first).
 * BPF_ENABLE_STATS is held by a descriptor (off again when this exits), and
 * run_time_ns / run_cnt of every accounting program is read around each
 * phase. Empty programs (r0 = 1; exit) of the cgroup types are attached next
 * to them throughout: their ns per run is the floor of dispatch and statistics.
 * --variants measures only those named. --cpus places the client and the
 * server: any (the scheduler's choice), same (both on CPU 0: a steered
 * socket's sends and, over loopback, its received packets run on one CPU,
 * as a NIC's receive flow steering gives a real host), split (client on CPU
 * 0, server on CPU 1: every message's lines move between the two CPUs).
 * Output: CSV, one row per (round, variant, phase, metric).
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
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

#define VIP "127.0.0.210:8000"
#define TTL_NS (3600ULL * 1000000000ULL)
#define BULK_CHUNK 65536
#define STREAM_CHUNKS 8 /* writes per response in the stream phase */

enum variant {
	V_OFF,
	V_SKB,
	V_FIND,
	V_LOCK,
	V_STEP,
	V_PUSH,
	V_MIN,
	VARIANTS
};
static const char *const variant_names[VARIANTS] = { "off",  "skb",  "find", "lock",
						     "step", "push", "min" };
enum phase {
	P_RR,
	P_DIRECT,
	P_BULK,
	P_BULKDIRECT,
	P_STREAM,
	PHASES
};
static const char *const phase_names[PHASES] = { "rr", "direct", "bulk", "bulkdirect", "stream" };

/* Every program measured: the shipped pair, the floors, the cost object's. */
enum prog {
	G_OUT,
	G_IN,
	G_FLOOR_OUT,
	G_FLOOR_IN,
	G_COST_FIND,
	G_COST_LOCK,
	G_MIN_OUT,
	G_MIN_IN,
	PROGS
};
static const char *const prog_names[PROGS] = {
	"skb_egress", "skb_ingress", "floor_egress", "floor_ingress",
	"cost_find",  "cost_lock",   "min_egress",   "min_ingress",
};

struct opts {
	const char *pin, *cgroup, *cost_obj, *backend;
	int rounds;
	int client_cpu, server_cpu; /* -1: any */
	bool only[VARIANTS];	    /* --variants: measure these (all when none named) */
	long messages, request, response, bulk_mb;
	bool header;
};

struct bench {
	struct opts o;
	struct steer_dp *dp;
	struct steer_addr vip, be;
	int prog_fd[PROGS];
	int cg_fd;
	int link_out, link_in; /* -1 when detached */
	struct bpf_object *cost_obj;
	struct ring_buffer *kick_rb; /* the push variant's wake-ups, drained per request */
	bool pushing;		     /* the push variant is attached */
	pid_t server;
};

/* The push variant's ring records: they only wake the peer thread. */
static int kick_record(void *ctx, void *data, size_t size)
{
	(void)ctx;
	(void)data;
	(void)size;
	return 0;
}

/* ---- the server (a child outside the cgroup) ------------------------------------ */

struct conn_arg {
	int fd;
	long request, response;
};

/* One response: at once, or (stream) in STREAM_CHUNKS writes, each its own
 * segment (TCP_NODELAY), as a streaming answer's tokens are. */
static bool respond(int fd, const char *resp, long n, bool stream)
{
	long piece = stream ? (n + STREAM_CHUNKS - 1) / STREAM_CHUNKS : n, off;

	for (off = 0; off < n; off += piece) {
		long k = n - off < piece ? n - off : piece;

		if (write(fd, resp + off, (size_t)k) != k)
			return false;
	}
	return true;
}

/* Request/response: read exactly request bytes, write response bytes, repeat;
 * a connection whose first bytes are "BULK" is a sink: read to EOF, answer 1
 * byte; one whose first bytes are "STRM" gets each response in pieces. */
static void *serve_conn(void *arg)
{
	struct conn_arg *a = arg;
	char *buf = malloc(BULK_CHUNK), *resp = calloc(1, (size_t)a->response);
	long got = 0;
	ssize_t n;
	bool stream = false, first = true;

	while (buf && resp && (n = read(a->fd, buf, BULK_CHUNK)) > 0) {
		if (first && n >= 4 && memcmp(buf, "STRM", 4) == 0)
			stream = true;
		first = false;
		got += n;
		if (got >= 4 && memcmp(buf, "BULK", 4) == 0 && got == n) {
			while (read(a->fd, buf, BULK_CHUNK) > 0)
				;
			if (write(a->fd, "k", 1) != 1)
				break;
			break;
		}
		while (got >= a->request) {
			got -= a->request;
			if (!respond(a->fd, resp, a->response, stream))
				goto out;
		}
	}
out:
	close(a->fd);
	free(buf);
	free(resp);
	free(a);
	return NULL;
}

static void server_main(int lfd, long request, long response)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC), one = 1;
		struct conn_arg *a;
		pthread_t t;

		if (c < 0)
			continue;
		setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		a = malloc(sizeof(*a));
		a->fd = c;
		a->request = request;
		a->response = response;
		if (pthread_create(&t, NULL, serve_conn, a) == 0)
			pthread_detach(t);
	}
}

/* The calling process (and what it forks or starts after) on one CPU; -1: any. */
static void pin_cpu(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0)
		fprintf(stderr, "wirecost: CPU %d: %s\n", cpu, strerror(errno));
}

static int start_server(struct bench *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = b->be.port,
				  .sin_addr.s_addr = b->be.ip6[3] };
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 1024) != 0)
		return -errno;
	b->server = fork();
	if (b->server == 0) {
		pin_cpu(b->o.server_cpu);
		server_main(lfd, b->o.request, b->o.response);
	}
	close(lfd);
	return b->server > 0 ? 0 : -1;
}

/* ---- programs --------------------------------------------------------------------- */

/* The cost object's programs (tools/bench/bpf/wire_cost.bpf.c), on the
 * data plane's pinned maps. */
static int setup_cost(struct bench *b)
{
	static const struct {
		enum prog g;
		const char *name;
	} progs[] = { { G_COST_FIND, "steer_wcost_find" },
		      { G_COST_LOCK, "steer_wcost_lock" },
		      { G_MIN_OUT, "steer_wmin_out" },
		      { G_MIN_IN, "steer_wmin_in" } };
	size_t i;

	b->cost_obj = bench_object_open(b->o.cost_obj, b->o.pin);
	if (!b->cost_obj) {
		fprintf(stderr, "wirecost: %s: %s\n", b->o.cost_obj, strerror(errno));
		return -1;
	}
	if (bpf_object__load(b->cost_obj) != 0) {
		fprintf(stderr, "wirecost: load %s: %s\n", b->o.cost_obj, strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
		struct bpf_program *p =
			bpf_object__find_program_by_name(b->cost_obj, progs[i].name);

		b->prog_fd[progs[i].g] = p ? bpf_program__fd(p) : -1;
		if (b->prog_fd[progs[i].g] < 0) {
			fprintf(stderr, "wirecost: no program %s in %s\n", progs[i].name,
				b->o.cost_obj);
			return -1;
		}
	}
	return 0;
}

/* The shipped programs (taken off their pinned links, which are removed: the
 * bench attaches them itself), the cost object and the floors. */
static int setup_programs(struct bench *b)
{
	int lfd;
	char path[4096];

	b->link_out = b->link_in = -1;
	b->prog_fd[G_OUT] = bench_prog_of_link(b->o.pin, STEER_LINK_WIRE_OUT, NULL, &lfd);
	if (b->prog_fd[G_OUT] < 0)
		return -1;
	bpf_link_detach(lfd);
	close(lfd);
	b->prog_fd[G_IN] = bench_prog_of_link(b->o.pin, STEER_LINK_WIRE_IN, NULL, &lfd);
	if (b->prog_fd[G_IN] < 0)
		return -1;
	bpf_link_detach(lfd);
	close(lfd);
	snprintf(path, sizeof(path), "%s/%s", b->o.pin, STEER_LINK_WIRE_OUT);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s", b->o.pin, STEER_LINK_WIRE_IN);
	unlink(path);

	b->prog_fd[G_FLOOR_OUT] =
		bench_empty_prog(BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_EGRESS);
	b->prog_fd[G_FLOOR_IN] =
		bench_empty_prog(BPF_PROG_TYPE_CGROUP_SKB, BPF_CGROUP_INET_INGRESS);
	if (b->prog_fd[G_FLOOR_OUT] < 0 || b->prog_fd[G_FLOOR_IN] < 0)
		return -1;
	if (bpf_link_create(b->prog_fd[G_FLOOR_OUT], b->cg_fd, BPF_CGROUP_INET_EGRESS, NULL) < 0 ||
	    bpf_link_create(b->prog_fd[G_FLOOR_IN], b->cg_fd, BPF_CGROUP_INET_INGRESS, NULL) < 0)
		return -1;
	return setup_cost(b);
}

static void detach_fd(int *fd)
{
	if (*fd >= 0) {
		bpf_link_detach(*fd);
		close(*fd);
		*fd = -1;
	}
}

static int publish(struct bench *b, uint32_t flags);

static int use_variant(struct bench *b, enum variant v)
{
	enum prog out = v == V_MIN ? G_MIN_OUT : G_OUT, in = v == V_MIN ? G_MIN_IN : G_IN;

	/* Only the step variant's table has the step cadence on, only the
	 * push variant's the push. */
	if (publish(b, v == V_STEP ? STEER_TBL_STEP : v == V_PUSH ? STEER_TBL_PEER_PUSH : 0) != 0)
		return -1;
	b->pushing = v == V_PUSH;
	detach_fd(&b->link_out);
	detach_fd(&b->link_in);
	if (v == V_OFF)
		return 0;
	if (v == V_FIND || v == V_LOCK) {
		b->link_out = bpf_link_create(b->prog_fd[v == V_FIND ? G_COST_FIND : G_COST_LOCK],
					      b->cg_fd, BPF_CGROUP_INET_EGRESS, NULL);
		return b->link_out < 0 ? -1 : 0;
	}
	b->link_out = bpf_link_create(b->prog_fd[out], b->cg_fd, BPF_CGROUP_INET_EGRESS, NULL);
	b->link_in = bpf_link_create(b->prog_fd[in], b->cg_fd, BPF_CGROUP_INET_INGRESS, NULL);
	return b->link_out < 0 || b->link_in < 0 ? -1 : 0;
}

struct stats {
	uint64_t ns[PROGS], cnt[PROGS];
};

static void read_stats(const struct bench *b, struct stats *s)
{
	int i;

	for (i = 0; i < PROGS; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);

		memset(&info, 0, sizeof(info));
		s->ns[i] = s->cnt[i] = 0;
		if (b->prog_fd[i] >= 0 && bpf_obj_get_info_by_fd(b->prog_fd[i], &info, &len) == 0) {
			s->ns[i] = info.run_time_ns;
			s->cnt[i] = info.run_cnt;
		}
	}
}

/* ---- the client ------------------------------------------------------------------- */

static int dial(const struct steer_addr *a)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = a->port,
				  .sin_addr.s_addr = a->ip6[3] };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_n(int fd, char *buf, long n)
{
	while (n > 0) {
		ssize_t r = read(fd, buf, (size_t)n);

		if (r <= 0)
			return -1;
		n -= r;
	}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct wall {
	double mean_us, p50_us, p99_us, mib_s;
	long msgs;
};

static int round_trips(struct bench *b, const struct steer_addr *to, bool stream, struct wall *w)
{
	long n = b->o.messages, i;
	uint64_t *lat = calloc((size_t)n, sizeof(*lat)), sum = 0;
	char *req = calloc(1, (size_t)b->o.request), *resp = malloc((size_t)b->o.response);
	int fd = dial(to), rc = 0;

	if (stream && req && b->o.request >= 4)
		memcpy(req, "STRM", 4); /* the server answers in pieces */

	for (i = 0; fd >= 0 && lat && req && resp && i < n; i++) {
		uint64_t t0;

		if (b->pushing) { /* what the peer thread does on each wake-up */
			ring_buffer__consume(b->kick_rb);
			steer_dp_kick_rearm(b->dp);
		}
		t0 = bench_now_ns();

		if (write(fd, req, (size_t)b->o.request) != b->o.request ||
		    read_n(fd, resp, b->o.response) != 0) {
			rc = -1;
			break;
		}
		lat[i] = bench_now_ns() - t0;
		sum += lat[i];
	}
	if (fd < 0 || i < n)
		rc = -1;
	if (rc == 0) {
		qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
		w->mean_us = (double)sum / (double)n / 1e3;
		w->p50_us = (double)lat[n / 2] / 1e3;
		w->p99_us = (double)lat[n * 99 / 100] / 1e3;
		w->msgs = n;
	}
	if (fd >= 0)
		close(fd);
	free(lat);
	free(req);
	free(resp);
	return rc;
}

static int bulk(struct bench *b, const struct steer_addr *to, struct wall *w)
{
	long total = b->o.bulk_mb * 1024 * 1024, sent = 0;
	char *buf = calloc(1, BULK_CHUNK), k;
	int fd = dial(to), rc = -1;
	uint64_t t0 = bench_now_ns();

	if (fd >= 0 && buf) {
		memcpy(buf, "BULK", 4);
		while (sent < total) {
			ssize_t n = write(fd, buf, BULK_CHUNK);

			if (n <= 0)
				break;
			sent += n;
		}
		shutdown(fd, SHUT_WR);
		if (sent >= total && read(fd, &k, 1) == 1)
			rc = 0;
		else
			fprintf(stderr, "wirecost: upload: %ld of %ld bytes, then %s\n", sent,
				total, strerror(errno));
	}
	w->mib_s = (double)sent / 1048576.0 / ((double)(bench_now_ns() - t0) / 1e9);
	w->msgs = sent / BULK_CHUNK;
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

static void emit(int round, enum variant v, enum phase p, const char *metric, double value)
{
	printf("%d,%s,%s,%s,%.3f\n", round, variant_names[v], phase_names[p], metric, value);
}

static int measure(struct bench *b, int round, enum variant v, enum phase p)
{
	struct stats s0, s1;
	struct wall w = { 0 };
	int i, rc;

	read_stats(b, &s0);
	switch (p) {
	case P_RR:
	case P_STREAM:
		rc = round_trips(b, &b->vip, p == P_STREAM, &w);
		break;
	case P_DIRECT:
		rc = round_trips(b, &b->be, false, &w);
		break;
	case P_BULK:
		rc = bulk(b, &b->vip, &w);
		break;
	default:
		rc = bulk(b, &b->be, &w);
	}
	read_stats(b, &s1);
	if (rc != 0) {
		fprintf(stderr, "wirecost: %s/%s failed\n", variant_names[v], phase_names[p]);
		return -1;
	}
	if (p == P_RR || p == P_DIRECT || p == P_STREAM) {
		emit(round, v, p, "mean_us", w.mean_us);
		emit(round, v, p, "p50_us", w.p50_us);
		emit(round, v, p, "p99_us", w.p99_us);
	} else {
		emit(round, v, p, "mib_per_s", w.mib_s);
	}
	emit(round, v, p, "messages", (double)w.msgs);
	for (i = 0; i < PROGS; i++) {
		uint64_t cnt = s1.cnt[i] - s0.cnt[i], ns = s1.ns[i] - s0.ns[i];
		char m[64];

		if (!cnt)
			continue;
		snprintf(m, sizeof(m), "%s_runs", prog_names[i]);
		emit(round, v, p, m, (double)cnt);
		snprintf(m, sizeof(m), "%s_ns_per_run", prog_names[i]);
		emit(round, v, p, m, (double)ns / (double)cnt);
		snprintf(m, sizeof(m), "%s_ns_per_msg", prog_names[i]);
		emit(round, v, p, m, (double)ns / (double)w.msgs);
	}
	return 0;
}

static int publish(struct bench *b, uint32_t flags)
{
	struct steer_dp_cost cost = { .addr = b->be, .base_wait_ns = 0, .ns_per_token = 1000 };
	struct steer_dp_service svc = { .vip = b->vip,
					.configured = &b->be,
					.n_configured = 1,
					.table = &cost,
					.n_table = 1,
					.ttl_ns = TTL_NS,
					.flags = flags };
	char err[512];

	if (steer_dp_publish_one(b->dp, &svc, err, sizeof(err)) != 0) {
		fprintf(stderr, "wirecost: publish: %s\n", err);
		return -1;
	}
	return 0;
}

/* --variants: a comma-separated list of variant names. */
static int parse_variants(const char *list, bool *only)
{
	char *copy = strdup(list), *save = NULL, *name;
	int v, rc = 0;

	for (name = strtok_r(copy, ",", &save); copy && name; name = strtok_r(NULL, ",", &save)) {
		for (v = 0; v < VARIANTS && strcmp(name, variant_names[v]) != 0; v++)
			;
		if (v == VARIANTS) {
			fprintf(stderr, "wirecost: --variants: no variant %s\n", name);
			rc = -1;
			break;
		}
		only[v] = true;
	}
	free(copy);
	return copy ? rc : -1;
}

/* Whether --variants leaves variant v in (all are in when none was named). */
static bool variant_wanted(const struct opts *o, int v)
{
	int i;

	for (i = 0; i < VARIANTS; i++)
		if (o->only[i])
			return o->only[v];
	return true;
}

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "pin", 1, 0, 'p' },	  { "cgroup", 1, 0, 'c' },   { "cost-obj", 1, 0, 'C' },
		{ "backend", 1, 0, 'b' }, { "rounds", 1, 0, 'r' },   { "messages", 1, 0, 'm' },
		{ "request", 1, 0, 'q' }, { "response", 1, 0, 's' }, { "bulk-mb", 1, 0, 'B' },
		{ "header", 0, 0, 'H' },  { "variants", 1, 0, 'V' }, { "cpus", 1, 0, 'P' },
		{ 0, 0, 0, 0 },
	};
	int c;

	*o = (struct opts){ .backend = "127.0.6.1:9600",
			    .rounds = 8,
			    .messages = 5000,
			    .request = 512,
			    .response = 256,
			    .bulk_mb = 32,
			    .client_cpu = -1,
			    .server_cpu = -1 };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->pin = optarg;
			break;
		case 'c':
			o->cgroup = optarg;
			break;
		case 'C':
			o->cost_obj = optarg;
			break;
		case 'b':
			o->backend = optarg;
			break;
		case 'r':
			o->rounds = atoi(optarg);
			break;
		case 'm':
			o->messages = atol(optarg);
			break;
		case 'q':
			o->request = atol(optarg);
			break;
		case 's':
			o->response = atol(optarg);
			break;
		case 'B':
			o->bulk_mb = atol(optarg);
			break;
		case 'H':
			o->header = true;
			break;
		case 'V':
			if (parse_variants(optarg, o->only) != 0)
				return -1;
			break;
		case 'P':
			if (strcmp(optarg, "same") == 0)
				o->client_cpu = o->server_cpu = 0;
			else if (strcmp(optarg, "split") == 0)
				o->client_cpu = 0, o->server_cpu = 1;
			else if (strcmp(optarg, "any") != 0)
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (!o->pin || !o->cgroup || !o->cost_obj || o->rounds < 1 || o->messages < 100 ||
	    o->request < 1 || o->response < 1 || o->bulk_mb < 1)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	static struct bench b;
	struct steer_dp_opts dopts = { 0 };
	char err[512];
	int stats_fd, r, v, p, rc = 0;

	b.link_out = b.link_in = -1;
	if (parse(argc, argv, &b.o) != 0) {
		fprintf(stderr,
			"usage: wirecost --pin DIR --cgroup DIR --cost-obj FILE [--backend A:P] "
			"[--rounds N] [--messages N] [--request B] [--response B] [--bulk-mb N] "
			"[--header] [--variants LIST] [--cpus any|same|split]\n");
		return 2;
	}
	if (steer_addr_parse(VIP, &b.vip, err, sizeof(err)) != 0 ||
	    steer_addr_parse(b.o.backend, &b.be, err, sizeof(err)) != 0) {
		fprintf(stderr, "wirecost: %s\n", err);
		return 2;
	}
	dopts.pin_dir = b.o.pin;
	dopts.cgroup = b.o.cgroup;
	dopts.own = true;
	if (steer_dp_open(&dopts, &b.dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "wirecost: %s\n", err);
		return 1;
	}
	b.cg_fd = open(b.o.cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	b.kick_rb = steer_dp_kick_ring_fd(b.dp) >= 0
			    ? ring_buffer__new(steer_dp_kick_ring_fd(b.dp), kick_record, NULL, NULL)
			    : NULL;
	if (b.cg_fd < 0 || stats_fd < 0 || !b.kick_rb || publish(&b, 0) != 0 ||
	    setup_programs(&b) != 0 || start_server(&b) != 0 ||
	    bench_join_cgroup(b.o.cgroup) != 0) {
		fprintf(stderr, "wirecost: setup failed: %s\n", strerror(errno));
		rc = 1;
		goto out;
	}
	pin_cpu(b.o.client_cpu);
	if (b.o.header)
		printf("round,variant,phase,metric,value\n");
	for (r = 1; r <= b.o.rounds && rc == 0; r++)
		for (v = 0; v < VARIANTS && rc == 0; v++) {
			if (!variant_wanted(&b.o, v))
				continue;
			if (use_variant(&b, (enum variant)v) != 0) {
				fprintf(stderr, "wirecost: cannot attach %s\n", variant_names[v]);
				rc = 1;
				break;
			}
			for (p = 0; p < PHASES && rc == 0; p++)
				if (p != P_STREAM || v == V_SKB || v == V_STEP || v == V_PUSH)
					rc = measure(&b, r, (enum variant)v, (enum phase)p);
			fflush(stdout);
		}
out:
	use_variant(&b, V_OFF);
	if (b.server > 0) {
		kill(b.server, SIGKILL);
		waitpid(b.server, NULL, 0);
	}
	ring_buffer__free(b.kick_rb);
	if (b.cost_obj)
		bpf_object__close(b.cost_obj);
	steer_dp_detach(b.dp, err, sizeof(err));
	steer_dp_close(b.dp);
	return rc;
}
