// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ccprobe.c - the congestion-control probe (bpf/steer_ccprobe.bpf.c): can a
 * per-socket congestion control, chosen at connect, carry request
 * accounting so that unsteered sockets pay nothing? Run in a private netns
 * (lo up) with three empty cgroups (the wrapper, the host's algorithm, the
 * floor: BBR through BPF without the probes):
 *
 *   ccprobe --obj steer_ccprobe.bpf.o --cgroup-set CG --cgroup-none CG --cgroup-floor CG
 *           [--requests 100] [--late-ms 60] [--connects 2000] [--rounds 9]
 *           [--exchanges 2000]
 *
 * It prints, as key=value lines:
 *   1. signals: keep-alive requests of known sizes over one connection with
 *      the wrapper, against a server that answers at once and one that
 *      answers after --late-ms (its delayed ACK goes first): requests begun,
 *      request bytes counted against those written, answers seen at an ACK
 *      event, answers seen only at the next request; and that a connection
 *      in the other cgroup keeps the host's algorithm and runs no callback;
 *   2. BPF time (BPF_ENABLE_STATS, run_time_ns / run_cnt), rounds of
 *      interleaved blocks: connect4 with and without the setsockopt, the
 *      event callbacks per call, and every callback summed per exchange, for
 *      the wrapper and the floor;
 *   3. wall time per request/response exchange (statistics off), wrapper and
 *      floor against the host's algorithm, blocks in rotating order: the
 *      medians of the per-round ratios.
 * Everything stays on 127.0.0.1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "benchlib.h"

#define PORT_SIGNALS 7701
#define PORT_CONNECTS 7702
#define RESPONSE_BYTES 64
/* Kernel 6.4's uapi values; Debian 12's uapi header predates them. */
#define CCPROBE_F_LINK (1U << 13)    /* BPF_F_LINK */
#define CCPROBE_ATTACH_STRUCT_OPS 44 /* BPF_STRUCT_OPS */

/* Mirrors struct probe_totals in steer_ccprobe.bpf.c. */
struct totals {
	uint64_t tx_starts, ack_events, request_bytes, answered_ack, answered_late, setsockopt_err;
};

struct opts {
	const char *obj, *cg_set, *cg_none, *cg_floor;
	int requests, late_ms, connects, rounds, exchanges;
};

static struct bpf_object *obj;
static int totals_fd;

/* ---- the server: length-prefixed requests, a fixed answer ---- */

struct server {
	int lfd;
	int late_ms; /* answer this long after the request (0: at once) */
};

struct conn {
	struct server *srv;
	int fd;
};

static bool read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n) {
		ssize_t r = read(fd, p, n);

		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

static bool write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t r = write(fd, p, n);

		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* One connection: each request is a 4-byte length and the bytes. */
static void *serve_one(void *arg)
{
	struct conn *cn = arg;
	char *body = malloc(1 << 20), answer[RESPONSE_BYTES] = { 0 };
	uint32_t len;

	while (body && read_full(cn->fd, &len, sizeof(len))) {
		int late = __atomic_load_n(&cn->srv->late_ms, __ATOMIC_RELAXED);

		len = ntohl(len);
		if (len > (1u << 20) || !read_full(cn->fd, body, len))
			break;
		if (late)
			usleep((useconds_t)late * 1000);
		if (!write_full(cn->fd, answer, sizeof(answer)))
			break;
	}
	close(cn->fd);
	free(body);
	free(cn);
	return NULL;
}

/* Every connection gets its own thread. */
static void *serve(void *arg)
{
	struct server *s = arg;

	for (;;) {
		struct conn *cn = malloc(sizeof(*cn));
		pthread_t th;

		if (!cn)
			return NULL;
		cn->srv = s;
		cn->fd = accept(s->lfd, NULL, NULL);
		if (cn->fd < 0 || pthread_create(&th, NULL, serve_one, cn)) {
			free(cn);
			return NULL;
		}
		pthread_detach(th);
	}
}

static int listen_local(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4096)) {
		perror("ccprobe: listen");
		exit(1);
	}
	return fd;
}

static int connect_local(uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("ccprobe: connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

/* One request of n bytes and its whole answer. */
static void exchange(int fd, uint32_t n)
{
	static char body[1 << 20];
	char answer[RESPONSE_BYTES];
	uint32_t len = htonl(n);

	if (!write_full(fd, &len, sizeof(len)) || !write_full(fd, body, n) ||
	    !read_full(fd, answer, sizeof(answer))) {
		fprintf(stderr, "ccprobe: exchange failed\n");
		exit(1);
	}
}

static struct totals read_totals(void)
{
	struct totals t = { 0 };
	uint32_t k = 0;

	bpf_map_lookup_elem(totals_fd, &k, &t);
	return t;
}

static void ca_name(int fd, char *out, socklen_t n)
{
	memset(out, 0, n);
	if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, out, &n))
		snprintf(out, 16, "?");
}

/* ---- part 1: what the callbacks see ---- */

static void signals(const struct opts *o, struct server *srv, const char *mode)
{
	struct totals a, z;
	uint64_t written = 0;
	char ca[16];
	int fd, i;

	__atomic_store_n(&srv->late_ms, strcmp(mode, "late") ? 0 : o->late_ms, __ATOMIC_RELAXED);
	a = read_totals();
	fd = connect_local(PORT_SIGNALS);
	ca_name(fd, ca, sizeof(ca));
	for (i = 0; i < o->requests; i++) {
		/* 100 B to 300 kB: small requests and ones the stack sends in many
		 * segments, each counted from write_seq. */
		uint32_t n = 100u + (uint32_t)((i * 7919u) % 300000u) * (i % 4 == 3);

		exchange(fd, n);
		written += n + 4;
	}
	/* Read before the close: its FIN takes a sequence number too. Every
	 * request byte is counted by now (its answer acknowledged it). */
	z = read_totals();
	close(fd);
	printf("signals.%s.ca=%s\n", mode, ca);
	printf("signals.%s.requests=%d\n", mode, o->requests);
	printf("signals.%s.tx_starts=%llu\n", mode,
	       (unsigned long long)(z.tx_starts - a.tx_starts));
	printf("signals.%s.bytes_written=%llu\n", mode, (unsigned long long)written);
	printf("signals.%s.bytes_counted=%llu\n", mode,
	       (unsigned long long)(z.request_bytes - a.request_bytes));
	printf("signals.%s.answered_at_ack=%llu\n", mode,
	       (unsigned long long)(z.answered_ack - a.answered_ack));
	printf("signals.%s.answered_next_request=%llu\n", mode,
	       (unsigned long long)(z.answered_late - a.answered_late));
	printf("signals.%s.ack_events=%llu\n", mode,
	       (unsigned long long)(z.ack_events - a.ack_events));
}

/* ---- part 2: BPF time ---- */

struct prog_stat {
	uint64_t ns, cnt;
};

static struct prog_stat prog_stat(const char *name)
{
	struct bpf_prog_info info = { 0 };
	uint32_t len = sizeof(info);
	struct prog_stat s = { 0 };
	struct bpf_program *p = bpf_object__find_program_by_name(obj, name);

	if (p && !bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len)) {
		s.ns = info.run_time_ns;
		s.cnt = info.run_cnt;
	}
	return s;
}

static double per_run(struct prog_stat a, struct prog_stat z)
{
	return z.cnt > a.cnt ? (double)(z.ns - a.ns) / (double)(z.cnt - a.cnt) : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* n connects to a listener that accepts and closes, from the given cgroup. */
static void connect_block(const char *cg, int lfd, int n)
{
	int i;

	if (bench_join_cgroup(cg)) {
		fprintf(stderr, "ccprobe: cannot join %s\n", cg);
		exit(1);
	}
	for (i = 0; i < n; i++) {
		int fd = connect_local(PORT_CONNECTS), c = accept(lfd, NULL, NULL);

		close(fd);
		close(c);
	}
}

/* The wrapper's callbacks, and the floor's (the same without the probes). */
static const char *const probe_cbs[] = { "probe_cwnd_event",  "probe_in_ack_event",
					 "probe_main",	      "probe_init",
					 "probe_set_state",   "probe_ssthresh",
					 "probe_undo_cwnd",   "probe_sndbuf_expand",
					 "probe_min_tso_segs" };
static const char *const floor_cbs[] = { "floor_cwnd_event",	"floor_main",
					 "floor_init",		"floor_set_state",
					 "floor_ssthresh",	"floor_undo_cwnd",
					 "floor_sndbuf_expand", "floor_min_tso_segs" };
#define N_PROBE_CBS (sizeof(probe_cbs) / sizeof(probe_cbs[0]))
#define N_FLOOR_CBS (sizeof(floor_cbs) / sizeof(floor_cbs[0]))
#define MAX_ROUNDS 64

/* BPF ns per exchange, summed over a set of callbacks, on a new connection
 * from the cgroup; per-call figures of the first two into per_call. */
static double callbacks_per_exchange(const char *cg, const char *const *cbs, size_t n,
				     const struct opts *o, double *per_call)
{
	struct prog_stat a[16], z[16];
	double sum = 0;
	size_t k;
	int fd, i;

	bench_join_cgroup(cg);
	fd = connect_local(PORT_SIGNALS);
	exchange(fd, 512); /* past the handshake's callbacks */
	for (k = 0; k < n; k++)
		a[k] = prog_stat(cbs[k]);
	for (i = 0; i < o->exchanges; i++)
		exchange(fd, 512);
	for (k = 0; k < n; k++) {
		z[k] = prog_stat(cbs[k]);
		sum += (double)(z[k].ns - a[k].ns);
		if (k < 2)
			per_call[k] = per_run(a[k], z[k]);
	}
	close(fd);
	return sum / o->exchanges;
}

static double connect_block_ns(const char *cg, const char *prog, int lfd, int n)
{
	struct prog_stat a = prog_stat(prog), z;

	connect_block(cg, lfd, n);
	z = prog_stat(prog);
	return per_run(a, z);
}

static void bpf_time(const struct opts *o)
{
	double set[MAX_ROUNDS], none[MAX_ROUNDS], flr[MAX_ROUNDS], probe_req[MAX_ROUNDS],
		floor_req[MAX_ROUNDS], ev[MAX_ROUNDS], ack[MAX_ROUNDS], fev[MAX_ROUNDS],
		fmain[MAX_ROUNDS];
	int lfd = listen_local(PORT_CONNECTS), r, stats = bpf_enable_stats(BPF_STATS_RUN_TIME);
	int rounds = o->rounds < MAX_ROUNDS ? o->rounds : MAX_ROUNDS;

	if (stats < 0) {
		perror("ccprobe: BPF_ENABLE_STATS");
		exit(1);
	}
	for (r = 0; r < rounds; r++) {
		double pc[2], fc[2];

		set[r] = connect_block_ns(o->cg_set, "probe_connect_set", lfd, o->connects);
		none[r] = connect_block_ns(o->cg_none, "probe_connect_none", lfd, o->connects);
		flr[r] = connect_block_ns(o->cg_floor, "probe_connect_floor", lfd, o->connects);
		probe_req[r] = callbacks_per_exchange(o->cg_set, probe_cbs, N_PROBE_CBS, o, pc);
		floor_req[r] = callbacks_per_exchange(o->cg_floor, floor_cbs, N_FLOOR_CBS, o, fc);
		ev[r] = pc[0];
		ack[r] = pc[1];
		fev[r] = fc[0];
		fmain[r] = fc[1];
	}
	close(stats);
	close(lfd);
	printf("bpf.connect4_set_ns=%.0f\n", median(set, rounds));
	printf("bpf.connect4_set_floor_ns=%.0f\n", median(flr, rounds));
	printf("bpf.connect4_none_ns=%.0f\n", median(none, rounds));
	printf("bpf.probe_cwnd_event_ns=%.0f\n", median(ev, rounds));
	printf("bpf.probe_in_ack_event_ns=%.0f\n", median(ack, rounds));
	printf("bpf.floor_cwnd_event_ns=%.0f\n", median(fev, rounds));
	printf("bpf.floor_main_ns=%.0f\n", median(fmain, rounds));
	printf("bpf.probe_per_exchange_ns=%.0f\n", median(probe_req, rounds));
	printf("bpf.floor_per_exchange_ns=%.0f\n", median(floor_req, rounds));
}

/* ---- part 3: wall time per exchange ---- */

static double exchange_block(int fd, int n)
{
	uint64_t t0 = bench_now_ns();
	int i;

	for (i = 0; i < n; i++)
		exchange(fd, 512);
	return (double)(bench_now_ns() - t0) / n;
}

/* Three keep-alive connections (wrapper, floor, host's algorithm), blocks in
 * a rotating order; medians of the per-round ratios to the host's. */
static void wall_time(const struct opts *o)
{
	const char *cgs[3] = { o->cg_set, o->cg_floor, o->cg_none };
	double ns[3][MAX_ROUNDS], ratio[2][MAX_ROUNDS];
	int rounds = o->rounds < MAX_ROUNDS ? o->rounds : MAX_ROUNDS, fd[3], r, i;
	char ca[3][16];

	for (i = 0; i < 3; i++) {
		bench_join_cgroup(cgs[i]);
		fd[i] = connect_local(PORT_SIGNALS);
		ca_name(fd[i], ca[i], sizeof(ca[i]));
		exchange_block(fd[i], o->exchanges / 10 + 1); /* warm */
	}
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < 3; i++) {
			int j = (i + r) % 3;

			ns[j][r] = exchange_block(fd[j], o->exchanges);
		}
		ratio[0][r] = ns[0][r] / ns[2][r];
		ratio[1][r] = ns[1][r] / ns[2][r];
	}
	for (i = 0; i < 3; i++)
		close(fd[i]);
	printf("wall.ca=%s,%s,%s\n", ca[0], ca[1], ca[2]);
	printf("wall.probe_ns=%.0f\n", median(ns[0], rounds));
	printf("wall.floor_ns=%.0f\n", median(ns[1], rounds));
	printf("wall.host_ns=%.0f\n", median(ns[2], rounds));
	printf("wall.probe_ratio=%.3f\n", median(ratio[0], rounds));
	printf("wall.floor_ratio=%.3f\n", median(ratio[1], rounds));
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ccprobe --obj OBJ --cgroup-set CG --cgroup-none CG --cgroup-floor CG\n"
		"       [--requests N]"
		"       [--late-ms MS] [--connects N] [--rounds N] [--exchanges N]\n");
	exit(2);
}

static void parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "obj", 1, 0, 'o' },	      { "cgroup-set", 1, 0, 's' },
		{ "cgroup-none", 1, 0, 'n' }, { "cgroup-floor", 1, 0, 'f' },
		{ "requests", 1, 0, 'q' },    { "late-ms", 1, 0, 'l' },
		{ "connects", 1, 0, 'c' },    { "rounds", 1, 0, 'r' },
		{ "exchanges", 1, 0, 'x' },   { 0, 0, 0, 0 }
	};
	int c;

	*o = (struct opts){
		.requests = 100, .late_ms = 60, .connects = 2000, .rounds = 9, .exchanges = 2000
	};
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o->obj = optarg;
			break;
		case 's':
			o->cg_set = optarg;
			break;
		case 'n':
			o->cg_none = optarg;
			break;
		case 'f':
			o->cg_floor = optarg;
			break;
		case 'q':
			o->requests = atoi(optarg);
			break;
		case 'l':
			o->late_ms = atoi(optarg);
			break;
		case 'c':
			o->connects = atoi(optarg);
			break;
		case 'r':
			o->rounds = atoi(optarg);
			break;
		case 'x':
			o->exchanges = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (!o->obj || !o->cg_set || !o->cg_none || !o->cg_floor || o->requests < 1 ||
	    o->connects < 1 || o->rounds < 1 || o->exchanges < 1 || o->late_ms < 0)
		usage();
}

/* Attach a program to a cgroup; the link goes when the process exits. */
static void attach_cgroup(const char *prog, const char *cg)
{
	int fd = open(cg, O_RDONLY | O_DIRECTORY);

	if (fd < 0 ||
	    !bpf_program__attach_cgroup(bpf_object__find_program_by_name(obj, prog), fd)) {
		fprintf(stderr, "ccprobe: cannot attach %s to %s\n", prog, cg);
		exit(1);
	}
}

/*
 * Register a congestion control (a struct_ops map loaded with BPF_F_LINK) by
 * a link: unlike a plain map update, which stays registered after the
 * process dies, it is unregistered when the link's last descriptor closes.
 * libbpf's attach only fills the map here; the link registers it.
 */
static int register_ca(const char *map_name)
{
	struct bpf_map *m = bpf_object__find_map_by_name(obj, map_name);

	if (!m || !bpf_map__attach_struct_ops(m))
		return -1;
	return bpf_link_create(bpf_map__fd(m), 0, CCPROBE_ATTACH_STRUCT_OPS, NULL) < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	struct server srv = { 0 };
	struct totals t0, t1;
	pthread_t th;
	struct opts o;
	char ca[16];
	int fd;

	parse(argc, argv, &o);
	obj = bpf_object__open_file(o.obj, NULL);
	if (obj) { /* registered by a link: gone when this process is, however it ends */
		bpf_map__set_map_flags(bpf_object__find_map_by_name(obj, "probe_wire"),
				       CCPROBE_F_LINK);
		bpf_map__set_map_flags(bpf_object__find_map_by_name(obj, "probe_floor"),
				       CCPROBE_F_LINK);
	}
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "ccprobe: cannot load %s (needs BPF struct_ops and BBR)\n", o.obj);
		return 1;
	}
	if (register_ca("probe_wire") || register_ca("probe_floor")) {
		fprintf(stderr, "ccprobe: cannot register the congestion control: %s\n",
			strerror(errno));
		return 1;
	}
	totals_fd = bpf_map__fd(bpf_object__find_map_by_name(obj, "probe_totals"));
	attach_cgroup("probe_connect_set", o.cg_set);
	attach_cgroup("probe_connect_none", o.cg_none);
	attach_cgroup("probe_connect_floor", o.cg_floor);
	srv.lfd = listen_local(PORT_SIGNALS);
	pthread_create(&th, NULL, serve, &srv);

	if (bench_join_cgroup(o.cg_set))
		return 1;
	signals(&o, &srv, "quick");
	signals(&o, &srv, "late");
	__atomic_store_n(&srv.late_ms, 0, __ATOMIC_RELAXED);

	/* Unsteered: the host's algorithm, and not one callback. */
	bench_join_cgroup(o.cg_none);
	t0 = read_totals();
	fd = connect_local(PORT_SIGNALS);
	ca_name(fd, ca, sizeof(ca));
	for (int i = 0; i < 50; i++)
		exchange(fd, 1000);
	close(fd);
	t1 = read_totals();
	printf("unsteered.ca=%s\n", ca);
	printf("unsteered.callback_events=%llu\n",
	       (unsigned long long)(t1.tx_starts - t0.tx_starts + t1.ack_events - t0.ack_events));
	printf("setsockopt_errors=%llu\n", (unsigned long long)t1.setsockopt_err);

	bpf_time(&o);
	wall_time(&o);
	return 0;
}
