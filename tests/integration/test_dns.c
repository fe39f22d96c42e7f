// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_dns.c - user/discovery/resolver.c against a real DNS server: dnsmasq (Debian's
 * dnsmasq-base) on 127.0.0.53:5353 in a private network namespace, serving
 * a hosts file that the test rewrites (and reloads with SIGHUP).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dataplane/dataplane.h"
#include "discovery/resolver.h"
#include "tap.h"
#include "testenv.h"

#define SERVER "127.0.0.53:5353"

static char dir[] = "/tmp/smg-steer-dns-XXXXXX";
static char hosts[PATH_MAX];
static pid_t dnsmasq;
static struct steer_dns *D;

static void write_hosts(const char *text)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", hosts);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	rename(tmp, hosts);
}

static int start_dnsmasq(void)
{
	char arg_hosts[PATH_MAX + 16];

	snprintf(arg_hosts, sizeof(arg_hosts), "--addn-hosts=%s", hosts);
	dnsmasq = fork();
	if (dnsmasq < 0)
		return -1;
	if (dnsmasq == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execlp("dnsmasq", "dnsmasq", "--keep-in-foreground", "--conf-file=/dev/null",
		       "--no-resolv", "--no-hosts", "--bind-interfaces",
		       "--listen-address=127.0.0.53", "--port=5353", "--local-ttl=1",
		       "--pid-file=", "--user=root", arg_hosts, (char *)NULL);
		_exit(127);
	}
	return 0;
}

static void cleanup(void)
{
	char cmd[PATH_MAX + 16];

	if (dnsmasq > 0) {
		kill(dnsmasq, SIGTERM);
		waitpid(dnsmasq, NULL, 0);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

/* Resolve name; waits up to 10 s for the answer. */
static int lookup(const char *name, struct steer_dns_answer *a)
{
	int i;

	if (steer_dns_query(D, name, (void *)name) != 0)
		return -1;
	for (i = 0; i < 1000; i++) {
		if (steer_dns_next(D, a))
			return a->tag == name ? 0 : -1;
		steer_dns_step(D, 10);
	}
	return -1;
}

static const char *fmt(const struct steer_addr *a, char *buf, size_t len)
{
	return steer_addr_format(a, buf, len);
}

/* Waits until the server answers at all (it starts in the background). */
static int wait_server(void)
{
	struct steer_dns_answer a;
	int i;

	for (i = 0; i < 100; i++) {
		if (lookup("ready.test", &a) == 0 && a.ok && a.n == 1)
			return 0;
		usleep(100000);
	}
	return -1;
}

static void test_a_records_sorted_unique(void)
{
	static struct steer_dns_answer a;
	char b0[64], b1[64];

	CHECK(lookup("workers.test", &a) == 0, "no answer");
	CHECK(a.ok, "failed: %s", a.detail);
	CHECK(a.n == 2, "%zu addresses", a.n);
	fmt(&a.addrs[0], b0, sizeof(b0));
	fmt(&a.addrs[1], b1, sizeof(b1));
	CHECK(!strcmp(b0, "192.0.2.11:0") && !strcmp(b1, "192.0.2.12:0"), "%s %s", b0, b1);
}

static void test_aaaa_records(void)
{
	static struct steer_dns_answer a;
	char b0[64];

	CHECK(lookup("v6.test", &a) == 0 && a.ok, "failed: %s", a.detail);
	CHECK(a.n == 1, "%zu addresses", a.n);
	fmt(&a.addrs[0], b0, sizeof(b0));
	CHECK(!strcmp(b0, "[2001:db8::7]:0"), "%s", b0);
}

static void test_unknown_name_fails(void)
{
	static struct steer_dns_answer a;

	CHECK(lookup("nope.test", &a) == 0, "no answer");
	CHECK(!a.ok && a.n == 0 && a.detail[0], "ok %d n %zu detail '%s'", a.ok, a.n, a.detail);
}

static void test_records_change(void)
{
	static struct steer_dns_answer a;
	char b0[64];
	int i;

	write_hosts("192.0.2.1 ready.test\n192.0.2.13 workers.test\n2001:db8::7 v6.test\n");
	kill(dnsmasq, SIGHUP);
	for (i = 0; i < 100; i++) { /* until the server has reread the file */
		CHECK(lookup("workers.test", &a) == 0 && a.ok, "failed: %s", a.detail);
		if (a.n == 1)
			break;
		usleep(50000);
	}
	fmt(&a.addrs[0], b0, sizeof(b0));
	CHECK(a.n == 1 && !strcmp(b0, "192.0.2.13:0"), "%zu addresses, first %s", a.n, b0);
}

/* 320 records in shuffled order (seeded): 10 unspecified, 10 multicast, and
 * 300 usable of which 256 fit. */
static void write_many(const char *name, unsigned int seed, char *text, size_t cap, size_t *at)
{
	char lines[320][48];
	int i, n = 0;

	for (i = 1; i <= 10; i++) {
		snprintf(lines[n++], sizeof(lines[0]), "0.1.0.%d %s\n", i, name);
		snprintf(lines[n++], sizeof(lines[0]), "224.0.0.%d %s\n", i, name);
	}
	for (i = 0; i < 256; i++)
		snprintf(lines[n++], sizeof(lines[0]), "198.51.100.%d %s\n", i, name);
	for (i = 0; i < 44; i++)
		snprintf(lines[n++], sizeof(lines[0]), "203.0.113.%d %s\n", i, name);
	srand(seed);
	for (i = n - 1; i > 0; i--) { /* Fisher-Yates */
		int j = rand() % (i + 1);
		char tmp[48];

		memcpy(tmp, lines[i], sizeof(tmp));
		memcpy(lines[i], lines[j], sizeof(tmp));
		memcpy(lines[j], tmp, sizeof(tmp));
	}
	for (i = 0; i < n; i++)
		*at += (size_t)snprintf(text + *at, cap - *at, "%s", lines[i]);
}

/* More records than a service holds: the unusable ones are filtered, the rest
 * sorted and de-duplicated, and only then capped, so that the same set is
 * kept whatever order the records come in. */
static void test_many_records(void)
{
	static char text[3 * 320 * 48 + 256];
	static struct steer_dns_answer a;
	const char *names[] = { "many1.test", "many2.test", "many3.test" };
	size_t at = 0;
	int i, k;

	at += (size_t)snprintf(text, sizeof(text), "192.0.2.1 ready.test\n");
	for (k = 0; k < 3; k++)
		write_many(names[k], 7u + (unsigned int)k, text, sizeof(text), &at);
	write_hosts(text);
	kill(dnsmasq, SIGHUP);
	for (k = 0; k < 3; k++) {
		char b0[64], b1[64];
		bool exact = true;

		for (i = 0; i < 100; i++) { /* until the server has reread the file */
			CHECK(lookup(names[k], &a) == 0, "%s: no answer", names[k]);
			if (a.ok)
				break;
			usleep(50000);
		}
		CHECK(a.ok, "%s failed: %s", names[k], a.detail);
		CHECK(a.n == 256, "%s: %zu addresses kept", names[k], a.n);
		for (i = 0; i < 256 && exact; i++) {
			char want[32], got[64];

			snprintf(want, sizeof(want), "198.51.100.%d:0", i);
			exact = !strcmp(fmt(&a.addrs[i], got, sizeof(got)), want);
		}
		fmt(&a.addrs[0], b0, sizeof(b0));
		fmt(&a.addrs[a.n - 1], b1, sizeof(b1));
		CHECK(exact, "%s: kept %s..%s, want 198.51.100.0..255", names[k], b0, b1);
		CHECK(a.dropped == 44 && a.unusable == 20, "%s: dropped %zu unusable %zu", names[k],
		      a.dropped, a.unusable);
		printf("# %s: kept %s..%s, %zu dropped, %zu unusable\n", names[k], b0, b1,
		       a.dropped, a.unusable);
	}
}

static void test_dead_server_fails_in_time(void)
{
	static struct steer_dns_answer a;
	char err[160];
	struct steer_dns *dead = steer_dns_new("127.0.0.54:5353", err, sizeof(err));
	uint64_t t0 = steer_monotonic_ns();
	int i, got = 0;

	CHECK(dead, "%s", err);
	CHECK(steer_dns_query(dead, "workers.test", NULL) == 0, "query");
	for (i = 0; i < 3000 && !got; i++) {
		got = steer_dns_next(dead, &a);
		steer_dns_step(dead, 10);
	}
	steer_dns_free(dead);
	CHECK(got && !a.ok, "got %d ok %d", got, a.ok);
	CHECK(steer_monotonic_ns() - t0 < 10ULL * 1000000000ULL, "took too long");
}

static void test_bad_server_spec(void)
{
	char err[160] = "";

	CHECK(!steer_dns_new("not an address", err, sizeof(err)), "accepted");
	CHECK(strstr(err, "not an address"), "message '%s' does not name the input", err);
}

int main(void)
{
	char err[160];

	if (testenv_init("dns") != 0 || !mkdtemp(dir))
		return tap_setup_failed();
	atexit(cleanup);
	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	write_hosts("192.0.2.1 ready.test\n192.0.2.12 workers.test\n192.0.2.11 workers.test\n"
		    "192.0.2.11 workers.test\n2001:db8::7 v6.test\n");
	D = steer_dns_new(SERVER, err, sizeof(err));
	if (!D || start_dnsmasq() != 0 || wait_server() != 0) {
		printf("# dns setup: %s\n", D ? "dnsmasq did not answer" : err);
		return tap_setup_failed();
	}
	TAP_RUN(test_a_records_sorted_unique);
	TAP_RUN(test_aaaa_records);
	TAP_RUN(test_unknown_name_fails);
	TAP_RUN(test_records_change);
	TAP_RUN(test_many_records);
	TAP_RUN(test_dead_server_fails_in_time);
	TAP_RUN(test_bad_server_spec);
	steer_dns_free(D);
	return tap_done();
}
