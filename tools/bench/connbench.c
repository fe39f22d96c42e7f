// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * connbench.c - short-connection client: connect, read one byte, close, as
 * fast as it can for a fixed time, from C threads each running connections
 * one after another.
 *
 *   connbench --addr 127.0.0.100:8000 --seconds 3 [--concurrency 1]
 *             [--addr-count 1] [--label vip] [--cgroup DIR] [--warmup-ms 250] [--header]
 *             [--request]
 *
 * Prints one CSV row (--header prints the column names first):
 *   label,concurrency,seconds,connections,errors,conns_per_s,p50_us,p99_us,
 *   mean_us,per_conn_us,backends_seen,attempts
 * Latency is connect() called to the first byte read (CLOCK_MONOTONIC);
 * per_conn_us is the wall time one connection takes in a client thread,
 * socket() to close() included (seconds x concurrency / connections).
 * backends_seen counts distinct first bytes (onebyte writes its listener
 * index), a check that the path spread the load. --cgroup moves this process
 * into that cgroup first, so that the steering programs attached there see
 * its connects. Connections during the warm-up are not counted, except in
 * attempts (every connect tried, for CPU-per-connection accounting). --addr-count N
 * spreads the connections round-robin over N consecutive IPv4 addresses from
 * --addr (same port): the client-side balancing anchor. --request writes a
 * one-byte request after connect (onebyte --request reads it before it
 * answers): a request/response exchange, latency still up to the answer.
 *
 * With --pair-addr, one thread alternates blocks of --block connections
 * between two paths (see run_pairs) and prints one row instead:
 *   label_a,label_b,block,pairs,errors,p50_a_us,p50_b_us,ratio_p50,
 *   ratio_p50_q1,ratio_p50_q3,ratio_mean,ratio_mean_q1,ratio_mean_q3
 * p50_*_us: the median over blocks of each block's median connection time,
 * socket() to close(); ratio_p50: the median over block pairs of
 * median A / median B, with its quartiles; ratio_mean: the same of the
 * blocks' mean times (per-connection wall time, as per_conn_us).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchlib.h"

#define MAX_THREADS 64

struct worker {
	pthread_t thr;
	uint32_t *lat_ns; /* one sample per counted connection */
	size_t n, cap;
	uint64_t errors;
	uint64_t attempts; /* every connection tried, warm-up included */
	uint64_t seen[256];
	uint64_t done_ns; /* when this thread stopped */
	bool oom;
};

#define MAX_TARGETS 256

static struct sockaddr_in target[MAX_TARGETS]; /* consecutive IPv4 addresses, one port */
static int n_targets = 1;
static bool send_request; /* --request */
static uint64_t warm_end_ns, end_ns;
static struct worker workers[MAX_THREADS];
static pthread_barrier_t start_line;

static void record(struct worker *w, uint64_t ns)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 65536;
		uint32_t *p = realloc(w->lat_ns, cap * sizeof(*p));

		if (!p) {
			w->oom = true;
			return;
		}
		w->lat_ns = p;
		w->cap = cap;
	}
	w->lat_ns[w->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/* One connection: returns the latency in ns and the byte read, or -1. */
static int64_t one_connection(const struct sockaddr_in *to, unsigned char *byte)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	uint64_t t0, t1;
	ssize_t n;

	if (fd < 0)
		return -1;
	t0 = bench_now_ns();
	if (connect(fd, (const struct sockaddr *)to, sizeof(*to)) != 0 ||
	    (send_request && write(fd, "r", 1) != 1)) {
		close(fd);
		return -1;
	}
	do
		n = read(fd, byte, 1);
	while (n < 0 && errno == EINTR);
	t1 = bench_now_ns();
	close(fd);
	return n == 1 ? (int64_t)(t1 - t0) : -1;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	unsigned next = (unsigned)(w - workers); /* threads start on different targets */
	uint64_t t;

	pthread_barrier_wait(&start_line);
	while ((t = bench_now_ns()) < end_ns) {
		unsigned char byte = 0;
		int64_t lat = one_connection(&target[next++ % (unsigned)n_targets], &byte);

		w->attempts++;
		if (t < warm_end_ns)
			continue;
		if (lat < 0) {
			w->errors++;
			usleep(1000); /* do not spin on a persistent failure */
			continue;
		}
		record(w, (uint64_t)lat);
		w->seen[byte]++;
	}
	w->done_ns = bench_now_ns();
	return NULL;
}

static double percentile_us(const uint32_t *sorted, size_t n, double q)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(q * (double)(n - 1) + 0.5);
	return sorted[i] / 1000.0;
}

static int parse_target(const char *s, struct sockaddr_in *dst)
{
	char host[64];
	const char *colon = strrchr(s, ':');

	if (!colon || (size_t)(colon - s) >= sizeof(host))
		return -1;
	memcpy(host, s, (size_t)(colon - s));
	host[colon - s] = 0;
	dst->sin_family = AF_INET;
	dst->sin_port = htons((uint16_t)atoi(colon + 1));
	return inet_pton(AF_INET, host, &dst->sin_addr) == 1 && dst->sin_port ? 0 : -1;
}

/* addr[1..n) = the n - 1 IPv4 addresses after addr[0], same port. */
static void consecutive_targets(struct sockaddr_in *addr, int n)
{
	for (int t = 1; t < n; t++) {
		addr[t] = addr[0];
		addr[t].sin_addr.s_addr = htonl(ntohl(addr[0].sin_addr.s_addr) + (uint32_t)t);
	}
}

/*
 * --pair: blocks of --block connections alternate between path A (--addr,
 * --addr-count, --cgroup) and path B (--pair-addr, --pair-addr-count,
 * --pair-cgroup) in one thread, in ABBA order, the process moving to the
 * path's cgroup before each block. Each connection is timed from socket() to
 * close(). Side by side in the same seconds, slow drifts of a shared machine
 * hit both paths alike, and a block's median ignores the preemptions that
 * make per-round means noisy.
 */
struct pair_path {
	struct sockaddr_in addr[MAX_TARGETS];
	int n_addr;
	const char *cgroup, *label;
	unsigned next;
};

struct block_stat {
	double med_ns, mean_ns;
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n) (sorted in place), nearest rank. */
static double quantile(double *v, size_t n, double q)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return v[(size_t)(q * (double)(n - 1) + 0.5)];
}

/* One connection, socket() to close(): its wall time in ns, or -1. */
static int64_t timed_connection(const struct sockaddr_in *to)
{
	uint64_t t0 = bench_now_ns();
	unsigned char byte;

	if (one_connection(to, &byte) < 0)
		return -1;
	return (int64_t)(bench_now_ns() - t0);
}

/* One block on path p: its median and mean connection time. */
static int run_block(struct pair_path *p, int block, uint32_t *scratch, struct block_stat *out,
		     uint64_t *errors)
{
	double sum = 0;
	int k = 0;

	if (p->cgroup && bench_join_cgroup(p->cgroup) != 0) {
		fprintf(stderr, "connbench: cannot join cgroup %s: %s\n", p->cgroup,
			strerror(errno));
		return -1;
	}
	while (k < block) {
		int64_t ns = timed_connection(&p->addr[p->next++ % (unsigned)p->n_addr]);

		if (ns < 0) {
			if (++*errors > 1000) {
				fprintf(stderr, "connbench: too many failed connections\n");
				return -1;
			}
			continue;
		}
		scratch[k++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
		sum += (double)ns;
	}
	qsort(scratch, (size_t)block, sizeof(*scratch), bench_cmp_u32);
	out->med_ns = scratch[block / 2];
	out->mean_ns = sum / block;
	return 0;
}

static void pair_report(const struct pair_path *a, const struct pair_path *b, int block,
			struct block_stat *sa, struct block_stat *sb, size_t pairs, uint64_t errors)
{
	double *med_a = calloc(pairs + 1, sizeof(double)),
	       *med_b = calloc(pairs + 1, sizeof(double));
	double *r_med = calloc(pairs + 1, sizeof(double)),
	       *r_mean = calloc(pairs + 1, sizeof(double));
	size_t i;

	if (!med_a || !med_b || !r_med || !r_mean) {
		fprintf(stderr, "connbench: out of memory\n");
		exit(1);
	}
	for (i = 0; i < pairs; i++) {
		med_a[i] = sa[i].med_ns;
		med_b[i] = sb[i].med_ns;
		r_med[i] = sa[i].med_ns / sb[i].med_ns;
		r_mean[i] = sa[i].mean_ns / sb[i].mean_ns;
	}
	printf("%s,%s,%d,%zu,%llu,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f\n", a->label, b->label,
	       block, pairs, (unsigned long long)errors, quantile(med_a, pairs, 0.5) / 1000.0,
	       quantile(med_b, pairs, 0.5) / 1000.0, quantile(r_med, pairs, 0.5),
	       quantile(r_med, pairs, 0.25), quantile(r_med, pairs, 0.75),
	       quantile(r_mean, pairs, 0.5), quantile(r_mean, pairs, 0.25),
	       quantile(r_mean, pairs, 0.75));
	free(med_a);
	free(med_b);
	free(r_med);
	free(r_mean);
}

static int run_pairs(struct pair_path *a, struct pair_path *b, int block, double seconds,
		     int warm_ms, bool header)
{
	size_t cap = 1024, pairs = 0;
	struct block_stat *sa = malloc(cap * sizeof(*sa)), *sb = malloc(cap * sizeof(*sb));
	uint32_t *scratch = malloc((size_t)block * sizeof(*scratch));
	uint64_t warm_end = bench_now_ns() + (uint64_t)warm_ms * 1000000ULL, errors = 0;
	uint64_t end = warm_end + (uint64_t)(seconds * 1e9);
	int rc = 0;

	if (!sa || !sb || !scratch) {
		fprintf(stderr, "connbench: out of memory\n");
		return 1;
	}
	if (header)
		printf("label_a,label_b,block,pairs,errors,p50_a_us,p50_b_us,ratio_p50,"
		       "ratio_p50_q1,ratio_p50_q3,ratio_mean,ratio_mean_q1,ratio_mean_q3\n");
	for (unsigned round = 0; rc == 0 && bench_now_ns() < end; round++) {
		struct block_stat x, y;
		bool counted = bench_now_ns() >= warm_end;
		/* ABBA: each path goes first in half the pairs */
		bool a_first = (round & 1) == 0;

		rc = run_block(a_first ? a : b, block, scratch, a_first ? &x : &y, &errors);
		if (rc == 0)
			rc = run_block(a_first ? b : a, block, scratch, a_first ? &y : &x, &errors);
		if (rc != 0 || !counted)
			continue;
		if (pairs == cap) {
			struct block_stat *na, *nb;

			cap *= 2;
			na = realloc(sa, cap * sizeof(*sa));
			if (na)
				sa = na;
			nb = realloc(sb, cap * sizeof(*sb));
			if (nb)
				sb = nb;
			if (!na || !nb) {
				fprintf(stderr, "connbench: out of memory\n");
				rc = -1;
				break;
			}
		}
		sa[pairs] = x;
		sb[pairs++] = y;
	}
	if (rc == 0 && pairs > 0)
		pair_report(a, b, block, sa, sb, pairs, errors);
	free(sa);
	free(sb);
	free(scratch);
	return rc == 0 && pairs > 0 ? 0 : 1;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: connbench --addr IPV4:PORT --seconds S [--concurrency C] "
		"[--addr-count N] [--label L] [--cgroup DIR] [--warmup-ms MS] [--header] "
		"[--request] [--pair-addr IPV4:PORT [--pair-addr-count N] [--pair-cgroup DIR] "
		"[--pair-label L] [--block K]]\n");
	exit(2);
}

static void report(const char *label, struct worker *w, int conc, uint64_t start_ns)
{
	size_t total = 0, k = 0, i;
	uint64_t errors = 0, attempts = 0, seen[256] = { 0 }, last = start_ns;
	uint32_t *all;
	double secs, sum = 0;
	int distinct = 0, t;

	for (t = 0; t < conc; t++) {
		total += w[t].n;
		errors += w[t].errors;
		attempts += w[t].attempts;
		last = w[t].done_ns > last ? w[t].done_ns : last;
		for (i = 0; i < 256; i++)
			seen[i] += w[t].seen[i];
	}
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all) {
		fprintf(stderr, "connbench: out of memory\n");
		exit(1);
	}
	for (t = 0; t < conc; t++) {
		memcpy(all + k, w[t].lat_ns, w[t].n * sizeof(*all));
		k += w[t].n;
	}
	qsort(all, total, sizeof(*all), bench_cmp_u32);
	for (i = 0; i < total; i++)
		sum += all[i];
	for (i = 0; i < 256; i++)
		distinct += seen[i] > 0;
	secs = (double)(last - start_ns) / 1e9;
	printf("%s,%d,%.3f,%zu,%llu,%.1f,%.2f,%.2f,%.2f,%.2f,%d,%llu\n", label, conc, secs, total,
	       (unsigned long long)errors, total ? (double)total / secs : 0.0,
	       percentile_us(all, total, 0.50), percentile_us(all, total, 0.99),
	       total ? sum / (double)total / 1000.0 : 0.0,
	       total ? secs * conc * 1e6 / (double)total : 0.0, distinct,
	       (unsigned long long)attempts);
	free(all);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "addr", required_argument, 0, 'a' },
		{ "seconds", required_argument, 0, 's' },
		{ "concurrency", required_argument, 0, 'c' },
		{ "label", required_argument, 0, 'l' },
		{ "cgroup", required_argument, 0, 'g' },
		{ "warmup-ms", required_argument, 0, 'w' },
		{ "header", no_argument, 0, 'H' },
		{ "addr-count", required_argument, 0, 'n' },
		{ "request", no_argument, 0, 'r' },
		{ "pair-addr", required_argument, 0, 'A' },
		{ "pair-addr-count", required_argument, 0, 'N' },
		{ "pair-cgroup", required_argument, 0, 'G' },
		{ "pair-label", required_argument, 0, 'L' },
		{ "block", required_argument, 0, 'b' },
		{ 0, 0, 0, 0 },
	};
	static struct pair_path pa, pb; /* --pair: A is --addr, B is --pair-addr */
	struct worker *w = workers;
	const char *label = "run", *cgroup = NULL;
	int block = 200;
	double seconds = 0;
	int conc = 1, warm_ms = 250, c, t;
	bool header = false, oom = false;
	uint64_t start;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			if (parse_target(optarg, &target[0]) != 0)
				usage();
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 'c':
			conc = atoi(optarg);
			break;
		case 'l':
			label = optarg;
			break;
		case 'g':
			cgroup = optarg;
			break;
		case 'w':
			warm_ms = atoi(optarg);
			break;
		case 'H':
			header = true;
			break;
		case 'n':
			n_targets = atoi(optarg);
			break;
		case 'r':
			send_request = true;
			break;
		case 'A':
			if (parse_target(optarg, &pb.addr[0]) != 0)
				usage();
			pb.n_addr = pb.n_addr ? pb.n_addr : 1;
			break;
		case 'N':
			pb.n_addr = atoi(optarg);
			break;
		case 'G':
			pb.cgroup = optarg;
			break;
		case 'L':
			pb.label = optarg;
			break;
		case 'b':
			block = atoi(optarg);
			break;
		default:
			usage();
		}
	}
	if (!target[0].sin_port || seconds <= 0 || conc < 1 || conc > MAX_THREADS || warm_ms < 0 ||
	    n_targets < 1 || n_targets > MAX_TARGETS)
		usage();
	consecutive_targets(target, n_targets);
	if (pb.addr[0].sin_port) {
		if (conc != 1 || pb.n_addr < 1 || pb.n_addr > MAX_TARGETS || block < 8 ||
		    block > 1000000)
			usage();
		memcpy(pa.addr, target, sizeof(target));
		pa.n_addr = n_targets;
		pa.cgroup = cgroup;
		pa.label = label;
		pb.label = pb.label ? pb.label : "b";
		consecutive_targets(pb.addr, pb.n_addr);
		return run_pairs(&pa, &pb, block, seconds, warm_ms, header);
	}
	if (cgroup && bench_join_cgroup(cgroup) != 0) {
		fprintf(stderr, "connbench: cannot join cgroup %s: %s\n", cgroup, strerror(errno));
		return 1;
	}
	if (header)
		printf("label,concurrency,seconds,connections,errors,conns_per_s,p50_us,p99_us,"
		       "mean_us,per_conn_us,backends_seen,attempts\n");
	pthread_barrier_init(&start_line, NULL, (unsigned)conc + 1);
	start = bench_now_ns() + 50000000ULL; /* threads are up by then */
	warm_end_ns = start + (uint64_t)warm_ms * 1000000ULL;
	end_ns = warm_end_ns + (uint64_t)(seconds * 1e9);
	for (t = 0; t < conc; t++)
		if (pthread_create(&w[t].thr, NULL, run, &w[t]) != 0) {
			fprintf(stderr, "connbench: cannot start thread %d\n", t);
			return 1;
		}
	pthread_barrier_wait(&start_line);
	for (t = 0; t < conc; t++) {
		pthread_join(w[t].thr, NULL);
		oom |= w[t].oom;
	}
	pthread_barrier_destroy(&start_line);
	if (oom)
		fprintf(stderr, "connbench: out of memory for samples; counts are short\n");
	report(label, w, conc, warm_end_ns);
	for (t = 0; t < conc; t++)
		free(w[t].lat_ns);
	return 0;
}
