// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * vipctl.c - the data plane of the benchmark's "VIP" path without a daemon:
 * loads and attaches the real BPF programs through the dataplane API, publishes
 * one table per service and, like smg-steerd after each poll, drains the
 * kernel's in-flight counters once per --drain-ms, until SIGTERM or SIGINT;
 * then it detaches and removes every pin.
 *
 *   vipctl --pin /sys/fs/bpf/X --cgroup /sys/fs/cgroup/.../Y
 *          --service 127.0.0.100:8000=127.0.1.1:9000*64 [--service ...]
 *          [--drain-ms 1000] [--tokens-per-s 2000] [--wire-off]
 *
 * A service VIP=FIRST*N gets the N backends FIRST, FIRST+1, ... (consecutive
 * IPv4 addresses, one port). Every backend is published with base wait 0 and
 * the same throughput: an idle, uniform fleet, as fake workers report it. So
 * within one drain period the kernel water-fills: connection k goes to the
 * backend with the fewest credits, and once each backend holds one, every
 * decision scans the whole table (the worst case of the early exit).
 * "READY" goes to stdout when the tables are live.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchlib.h"
#include "dataplane/dataplane.h"

#define MAX_SVCS 8
#define TTL_NS (3600ULL * 1000000000ULL)

struct svc {
	struct steer_addr vip;
	struct steer_addr backends[STEER_MAX_BACKENDS];
	struct steer_dp_cost cost[STEER_MAX_BACKENDS];
	uint32_t slots[STEER_MAX_BACKENDS];
	size_t n;
};

static volatile sig_atomic_t stopping;
static struct svc svcs[MAX_SVCS];
static size_t n_svcs;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* "VIP=FIRST*N" */
static int parse_service(const char *arg, struct svc *s)
{
	char buf[256], *eq, *star, err[256];
	long n;
	size_t i;

	snprintf(buf, sizeof(buf), "%s", arg);
	eq = strchr(buf, '=');
	star = eq ? strchr(eq, '*') : NULL;
	if (!eq || !star)
		return -1;
	*eq = *star = 0;
	n = strtol(star + 1, NULL, 10);
	if (n < 1 || n > STEER_MAX_BACKENDS || steer_addr_parse(buf, &s->vip, err, sizeof(err)) ||
	    steer_addr_parse(eq + 1, &s->backends[0], err, sizeof(err)) ||
	    !steer_addr_is_v4(&s->vip)) {
		fprintf(stderr, "vipctl: bad --service '%s'\n", arg);
		return -1;
	}
	s->n = (size_t)n;
	for (i = 1; i < s->n; i++)
		s->backends[i] = bench_addr_plus(&s->backends[0], (uint32_t)i);
	return 0;
}

static int publish_all(struct steer_dp *dp, double ns_per_token)
{
	struct steer_dp_service spec[MAX_SVCS];
	char err[512];
	size_t i, j;

	for (i = 0; i < n_svcs; i++) {
		for (j = 0; j < svcs[i].n; j++) {
			svcs[i].cost[j].addr = svcs[i].backends[j];
			svcs[i].cost[j].base_wait_ns = 0;
			svcs[i].cost[j].ns_per_token = ns_per_token;
		}
		spec[i] = (struct steer_dp_service){ .vip = svcs[i].vip,
						     .configured = svcs[i].backends,
						     .n_configured = svcs[i].n,
						     .table = svcs[i].cost,
						     .n_table = svcs[i].n,
						     .ttl_ns = TTL_NS };
	}
	if (steer_dp_publish(dp, spec, n_svcs, err, sizeof(err)) != 0) {
		fprintf(stderr, "vipctl: publish: %s\n", err);
		return -1;
	}
	for (i = 0; i < n_svcs; i++)
		for (j = 0; j < svcs[i].n; j++)
			if (steer_dp_slot(dp, &svcs[i].vip, &svcs[i].backends[j],
					  &svcs[i].slots[j]) != 0) {
				fprintf(stderr, "vipctl: no slot for a published backend\n");
				return -1;
			}
	return 0;
}

static void drain_all(struct steer_dp *dp)
{
	size_t i, j;

	for (i = 0; i < n_svcs; i++)
		for (j = 0; j < svcs[i].n; j++)
			steer_dp_inflight_exchange(dp, svcs[i].slots[j]);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL); /* a signal cuts it short, which is what we want */
}

static void usage(void)
{
	fprintf(stderr, "usage: vipctl --pin DIR --cgroup DIR --service VIP=FIRST*N... "
			"[--drain-ms MS] [--tokens-per-s T] [--wire-off]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "pin", required_argument, 0, 'p' },
		{ "cgroup", required_argument, 0, 'g' },
		{ "service", required_argument, 0, 's' },
		{ "drain-ms", required_argument, 0, 'd' },
		{ "tokens-per-s", required_argument, 0, 't' },
		{ "wire-off", no_argument, 0, 'w' }, /* smg-steerd --wire-estimator off */
		{ 0, 0, 0, 0 },
	};
	struct steer_dp_opts o = { .own = true };
	struct steer_dp *dp = NULL;
	double tokens_per_s = 2000;
	long drain_ms = 1000;
	char err[512];
	int c, rc = 1;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			o.pin_dir = optarg;
			break;
		case 'g':
			o.cgroup = optarg;
			break;
		case 's':
			if (n_svcs == MAX_SVCS || parse_service(optarg, &svcs[n_svcs]) != 0)
				usage();
			n_svcs++;
			break;
		case 'd':
			drain_ms = atol(optarg);
			break;
		case 't':
			tokens_per_s = atof(optarg);
			break;
		case 'w':
			o.wire_off = true;
			break;
		default:
			usage();
		}
	}
	if (!o.pin_dir || !o.cgroup || !n_svcs || drain_ms < 1 || !(tokens_per_s > 0))
		usage();
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	if (steer_dp_open(&o, &dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "vipctl: %s\n", err);
		return 1;
	}
	if (publish_all(dp, 1e9 / tokens_per_s) == 0) {
		printf("READY\n");
		fflush(stdout);
		while (!stopping) {
			sleep_ms(drain_ms);
			drain_all(dp);
		}
		rc = 0;
	}
	if (steer_dp_detach(dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "vipctl: detach: %s\n", err);
		rc = 1;
	}
	steer_dp_close(dp);
	return rc;
}
