// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_limits.c - what the configuration refuses because it cannot be
 * right: addresses no connection can go to, a VIP
 * that is also a backend or a load endpoint, ports written with a sign or a
 * leading zero, a --cgroup that is not a cgroup2 directory, every duration
 * and number outside its documented bounds, and YAML nested deeper than 64.
 * The probe's reproductions also run against the real smg-steerd binary,
 * which must exit 2 naming the problem.
 *
 * No privileges needed. Files live in a mkdtemp directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "config_testlib.h"

#define VIP "127.0.0.100:8000"
#define BK "127.0.0.11:8000"

struct refusal {
	const char *args[10];
	const char *needles[3]; /* all must appear in err */
};

/* Each is refused with one line holding every needle, and out untouched;
 * every case is tried, and each one that is not prints a diagnostic. */
static int refused_all(const struct refusal *t, size_t n)
{
	static struct steer_config before, after;
	int failed = 0, ok;
	size_t i, j;
	int rc;

	for (i = 0; i < n; i++) {
		memset(&before, 0xa5, sizeof(before));
		after = before;
		rc = load_with(t[i].args, NULL, &after);
		ok = rejected(rc, &before, &after);
		for (j = 0; ok && j < 3 && t[i].needles[j]; j++)
			ok = strstr(err, t[i].needles[j]) != NULL;
		if (!ok) {
			printf("# case %zu (%s %s %s %s %s %s): rc=%d err='%s', want '%s'\n", i,
			       t[i].args[0], t[i].args[1], t[i].args[2], t[i].args[3],
			       t[i].args[4] ? t[i].args[4] : "", t[i].args[5] ? t[i].args[5] : "",
			       rc, err, t[i].needles[0]);
			failed++;
		}
		if (rc == STEER_CONFIG_OK)
			steer_config_free(&after);
	}
	return failed ? -1 : 0;
}

/* Each is accepted. */
static int accepted_all(const char *const (*args)[10], size_t n)
{
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		rc = load_with(args[i], NULL, &c);
		CHECK_RC(rc == STEER_CONFIG_OK, "case %zu (%s %s %s %s %s %s): rc=%d err=%s", i,
			 args[i][0], args[i][1], args[i][2], args[i][3], args[i][4],
			 args[i][5] ? args[i][5] : "", rc, err);
		steer_config_free(&c);
	}
	return 0;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Addresses -------------------------------------------------------------------------- */

static const struct refusal bad_addresses[] = {
	/* the VIP is a backend, or where a backend's load is read */
	{ { "--vip", VIP, "--backend", VIP },
	  { "--backend: service " VIP ": backend " VIP " is the VIP of service " VIP,
	    "never reach it" } },
	{ { "--vip", VIP, "--backend", BK ",loads=" VIP },
	  { "backend " BK ": loads " VIP " is the VIP of service " VIP } },
	{ { "--vip", VIP, "--backend", BK ",loads=http://" VIP "/metrics" },
	  { "loads " VIP " is the VIP" } },
	/* a VIP no connection can be made to */
	{ { "--vip", "0.0.0.0:8000", "--backend", BK },
	  { "--vip: a VIP cannot be", "0.0.0.0:8000 is unspecified" } },
	{ { "--vip", "0.1.2.3:8000", "--backend", BK }, { "--vip: ", "unspecified (0.0.0.0/8)" } },
	{ { "--vip", "[::]:8000", "--backend", "[::1]:8001" },
	  { "--vip: ", "[::]:8000 is unspecified (::)" } },
	{ { "--vip", "224.0.0.1:8000", "--backend", BK },
	  { "--vip: ", "224.0.0.1:8000 is multicast (224.0.0.0/4)" } },
	{ { "--vip", "239.255.255.250:1900", "--backend", BK }, { "--vip: ", "multicast" } },
	{ { "--vip", "255.255.255.255:8000", "--backend", BK },
	  { "--vip: ", "is broadcast (255.255.255.255)" } },
	{ { "--vip", "[ff02::1]:8000", "--backend", "[::1]:8001" },
	  { "--vip: ", "multicast (ff00::/8)" } },
	{ { "--vip", "[::ffff:224.0.0.1]:8000", "--backend", BK }, { "--vip: ", "multicast" } },
	/* a backend, or its load endpoint, no connection can be made to */
	{ { "--vip", VIP, "--backend", "0.0.0.0:8000" },
	  { "--backend: ", "a backend cannot be", "0.0.0.0:8000 is unspecified" } },
	{ { "--vip", VIP, "--backend", "255.255.255.255:8000" }, { "--backend: ", "broadcast" } },
	{ { "--vip", VIP, "--backend", "224.0.0.1:8000" }, { "--backend: ", "multicast" } },
	{ { "--vip", "[::1]:8000", "--backend", "[ff02::1]:8000" },
	  { "--backend: ", "[ff02::1]:8000 is multicast" } },
	{ { "--vip", "[::1]:8000", "--backend", "[::]:8000" }, { "--backend: ", "unspecified" } },
	{ { "--vip", VIP, "--backend", BK ",loads=0.0.0.0:30000" },
	  { "--backend: ", "loads: a load endpoint cannot be", "unspecified" } },
	/* ports: plain decimal 1..65535 */
	{ { "--vip", "127.0.0.100:+8000", "--backend", BK },
	  { "--vip: '127.0.0.100:+8000': port must be 1..65535, in decimal without sign or "
	    "leading zero" } },
	{ { "--vip", "127.0.0.100:08000", "--backend", BK }, { "--vip: ", "leading zero" } },
	{ { "--vip", "127.0.0.100: 8000", "--backend", BK }, { "--vip: ", "port must be" } },
	{ { "--vip", "[::1]:+8000", "--backend", "[::1]:8001" }, { "--vip: ", "port must be" } },
	{ { "--vip", "127.0.0.100:0", "--backend", BK }, { "--vip: ", "port must be 1..65535" } },
	{ { "--vip", "127.0.0.100:65536", "--backend", BK }, { "--vip: ", "1..65535" } },
	{ { "--vip", VIP, "--backend", "127.0.0.11:08000" }, { "--backend: ", "leading zero" } },
	{ { "--vip", VIP, "--backend", BK ",loads=127.0.0.11:+30000" },
	  { "--backend: ", "loads: ", "without sign" } },
	{ { "--vip", VIP, "--backend", BK, "--metrics-listen", "127.0.0.1:09464" },
	  { "--metrics-listen: ", "leading zero" } },
	{ { "--vip", VIP, "--backend", BK, "--metrics-listen", "224.0.0.1:9464" },
	  { "--metrics-listen: cannot listen on 224.0.0.1:9464: it is multicast" } },
	/* paths */
	{ { "--vip", VIP, "--backend", BK, "--cgroup", "/sys/fs/cgroup/no-such-cgroup-here" },
	  { "--cgroup: '/sys/fs/cgroup/no-such-cgroup-here': No such file or directory" } },
	{ { "--vip", VIP, "--backend", BK, "--cgroup", "sys/fs/cgroup" },
	  { "--cgroup: must be an absolute path to a cgroup2 directory, got 'sys/fs/cgroup'" } },
	{ { "--vip", VIP, "--backend", BK, "--cgroup", "/etc/hostname" },
	  { "--cgroup: '/etc/hostname' is not a directory" } },
	{ { "--vip", VIP, "--backend", BK, "--cgroup", "/tmp" },
	  { "--cgroup: '/tmp' is not a cgroup2 directory (cgroup2 is mounted at " } },
	{ { "--vip", VIP, "--backend", BK, "--pin-path", "bpf/steer" },
	  { "--pin-path: ", "absolute", "'bpf/steer'" } },
};

static void test_addresses_refused(void)
{
	CHECK(!refused_all(bad_addresses, N(bad_addresses)), "see above");
}

/* What is near the refused cases stays accepted. */
static void test_addresses_accepted(void)
{
	static const char *const ok[][10] = {
		{ "--vip", VIP, "--backend", "127.0.0.100:9000" }, /* same host, other port */
		{ "--vip", VIP, "--backend", BK ",loads=127.0.0.100:30000" },
		{ "--vip", "127.0.0.100:1", "--backend", "127.0.0.11:65535" },
		{ "--vip", "223.255.255.255:80", "--backend", "240.0.0.1:80" },
		{ "--vip", "[2001:db8::1]:80", "--backend", "[fe80::1]:80" },
		{ "--vip", VIP, "--backend", BK, "--metrics-listen", "0.0.0.0:9464" },
		{ "--vip", VIP, "--backend", BK, "--metrics-listen", "[::]:9464" },
		{ "--vip", VIP, "--backend", BK, "--cgroup", "" },
	};
	struct steer_config c;
	int rc;

	CHECK(!accepted_all(ok, N(ok)), "see above");
	rc = LOAD(&c, "--vip", VIP, "--backend", BK, "--cgroup", cgroup_root());
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.cgroup, cgroup_root()), "%s: rc=%d err=%s",
	      cgroup_root(), rc, err);
	steer_config_free(&c);
}

/* Across services of the file, with the line of the service that lists it. */
static void test_addresses_across_services(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *msg;
	} t[] = {
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: [127.0.0.11:8000]\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    backends: [127.0.0.100:8000]\n",
		  4,
		  "service 127.0.0.101:8000: backend 127.0.0.100:8000 is the VIP of service "
		  "127.0.0.100:8000; connects to it would be steered and never reach it" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - {address: 127.0.0.11:8000, loads: 'grpc://127.0.0.101:8000'}\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    backends: [127.0.0.12:8000]\n",
		  2,
		  "service 127.0.0.100:8000: backend 127.0.0.11:8000: loads 127.0.0.101:8000 is "
		  "the VIP of service 127.0.0.101:8000; the load would come from whichever backend "
		  "that connect is steered to" },
		{ "services:\n"
		  "  - vip: 0.0.0.0:8000\n"
		  "    backends: [127.0.0.11:8000]\n",
		  2,
		  "vip: a VIP cannot be an unspecified, multicast or broadcast address: "
		  "0.0.0.0:8000 is unspecified (0.0.0.0/8)" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - address: 127.0.0.11:+8000\n",
		  4,
		  "address: '127.0.0.11:+8000': port must be 1..65535, in decimal without sign "
		  "or leading zero" },
		{ "cgroup: relative/cg\n", 1,
		  "cgroup: must be an absolute path to a cgroup2 directory, got 'relative/cg'" },
		{ "log-level: info\n"
		  "pin-path: relative/pins\n",
		  2, "pin-path: must be an absolute directory path in bpffs, got 'relative/pins'" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < N(t); i++) {
		rc = load_yaml(t[i].yaml, i >= 4 ? ARGS("--vip", VIP, "--backend", BK) : NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE, "case %zu: rc=%d", i, rc);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
	/* The flags' VIP against a backend of the file. */
	rc = load_yaml("services: [{vip: 127.0.0.101:8000, backends: [127.0.0.100:8000]}]\n",
		       ARGS("--vip", VIP, "--backend", BK), &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "backend 127.0.0.100:8000 is the VIP of "
						      "service 127.0.0.100:8000"),
	      "rc=%d err=%s", rc, err);
}

/* ---- Bounds ----------------------------------------------------------------------------- */

static const struct refusal out_of_bounds[] = {
	{ { BASE, "--load-check-interval", "1ns" },
	  { "--load-check-interval: must be between 10ms and 1h, got '1ns'" } },
	{ { BASE, "--load-check-interval", "9ms" }, { "--load-check-interval: ", "'9ms'" } },
	{ { BASE, "--load-check-interval", "5000000h" },
	  { "--load-check-interval: must be between 10ms and 1h, got '5000000h'" } },
	{ { BASE, "--load-check-interval", "1h1ns" },
	  { "--load-check-interval: ", "10ms and 1h" } },
	{ { BASE, "--load-timeout", "999us" },
	  { "--load-timeout: must be between 1ms and 1h, got '999us'" } },
	{ { BASE, "--load-timeout", "2h" }, { "--load-timeout: ", "1ms and 1h" } },
	{ { BASE, "--snapshot-max-age", "25h" },
	  { "--snapshot-max-age: must be between 10ms and 24h, got '25h'" } },
	{ { BASE, "--snapshot-max-age", "5ms" }, { "--snapshot-max-age: ", "10ms and 24h" } },
	{ { BASE, "--unhealthy-after", "4294967295" },
	  { "--unhealthy-after: must be an integer from 1 to 1000 (consecutive failed polls), "
	    "got '4294967295'" } },
	{ { BASE, "--unhealthy-after", "1001" }, { "--unhealthy-after: ", "1 to 1000" } },
	{ { BASE, "--healthy-after", "1001" },
	  { "--healthy-after: must be an integer from 1 to 1000 (consecutive good polls)" } },
	{ { BASE, "--least-load-default-throughput", "1e-300" },
	  { "--least-load-default-throughput: must be a number of tokens/s from 1 to 1e9, got "
	    "'1e-300'" } },
	{ { BASE, "--least-load-default-throughput", "0.5" }, { "from 1 to 1e9", "'0.5'" } },
	{ { BASE, "--least-load-default-throughput", "1000000001" }, { "from 1 to 1e9" } },
	{ { BASE, "--least-load-default-throughput", "1e300" }, { "from 1 to 1e9" } },
	{ { BASE, "--least-load-kv-pressure-weight", "1e300" },
	  { "--least-load-kv-pressure-weight: must be a number of seconds from 0 to 3600, got "
	    "'1e300'" } },
	{ { BASE, "--least-load-kv-pressure-weight", "3600.5" }, { "from 0 to 3600" } },
	{ { BASE, "--least-load-mean-prefill-tokens", "10000001" },
	  { "--least-load-mean-prefill-tokens: must be an integer from 1 to 10000000 (tokens), "
	    "got '10000001'" } },
	{ { BASE, "--peer-routers", "1025" },
	  { "--peer-routers: must be an integer from 1 to 1024 (routers), got '1025'" } },
	{ { BASE, "--bytes-per-token", "1025" },
	  { "--bytes-per-token: must be an integer from 1 to 1024 (request bytes per token), "
	    "got '1025'" } },
	{ { BASE, "--bytes-per-token", "0" }, { "--bytes-per-token: ", "from 1 to 1024", "'0'" } },
	{ { BASE, "--wire-estimator", "sum" },
	  { "--wire-estimator: must be fluid, fluid-step or off, got 'sum'" } },
	{ { BASE, "--bytes-per-token", "3.5" },
	  { "--bytes-per-token: ", "from 1 to 1024", "'3.5'" } },
	{ { BASE, "--bytes-per-token", "-3" },
	  { "--bytes-per-token: ", "from 1 to 1024", "'-3'" } },
	{ { BASE, "--bytes-per-token", "4294967299" },
	  { "--bytes-per-token: ", "from 1 to 1024", "'4294967299'" } },
	{ { BASE, "--bytes-per-token", "" }, { "--bytes-per-token: ", "from 1 to 1024", "''" } },
	{ { BASE, "--bytes-per-token" }, { "--bytes-per-token: missing value" } },
	/* the kernel's credit per connect, prefill x routers, is 32-bit */
	{ { BASE, "--least-load-mean-prefill-tokens", "4194304", "--peer-routers", "1024" },
	  { "service 127.0.0.100:8000: least-load-mean-prefill-tokens (4194304) x peer-routers "
	    "(1024) = 4294967296 tokens credited per connection, above the kernel's "
	    "4294967295" } },
	/* the checks between them stay */
	{ { BASE, "--load-check-interval", "10ms", "--load-timeout", "11ms" },
	  { "--load-timeout: must be <= the load-check-interval (10ms), got 11ms" } },
	{ { BASE, "--load-check-interval", "1h", "--snapshot-max-age", "1h" },
	  { "--snapshot-max-age: must be > the load-check-interval (1h), got 1h" } },
};

static void test_bounds_refused(void)
{
	CHECK(!refused_all(out_of_bounds, N(out_of_bounds)), "see above");
}

/* The edges are in. */
static void test_bounds_edges_accepted(void)
{
	static const char *const ok[][10] = {
		{ BASE, "--load-check-interval", "10ms" },
		{ BASE, "--load-check-interval", "1h" },
		{ BASE, "--load-check-interval", "10ms", "--load-timeout", "1ms" },
		{ BASE, "--load-check-interval", "1h", "--load-timeout", "1h" },
		{ BASE, "--snapshot-max-age", "24h" },
		{ BASE, "--unhealthy-after", "1000" },
		{ BASE, "--healthy-after", "1" },
		{ BASE, "--least-load-default-throughput", "1" },
		{ BASE, "--least-load-default-throughput", "1e9" },
		{ BASE, "--least-load-kv-pressure-weight", "0" },
		{ BASE, "--least-load-kv-pressure-weight", "3600" },
		{ BASE, "--least-load-mean-prefill-tokens", "10000000" },
		{ BASE, "--least-load-mean-prefill-tokens", "1" },
		{ BASE, "--peer-routers", "1024" },
		{ BASE, "--least-load-mean-prefill-tokens", "4194303", "--peer-routers", "1024" },
		{ BASE, "--bytes-per-token", "1" },
		{ BASE, "--bytes-per-token", "1024" },
	};
	struct steer_config c;
	int rc;

	CHECK(!accepted_all(ok, N(ok)), "see above");
	/* The longest interval's defaults are within their own bounds. */
	rc = LOAD(&c, BASE, "--load-check-interval", "1h");
	CHECK(rc == STEER_CONFIG_OK && c.timeout_ns == NS_PER_S &&
		      c.max_age_ns == 3 * 3600 * NS_PER_S,
	      "rc=%d timeout %llu max_age %llu", rc, (unsigned long long)c.timeout_ns,
	      (unsigned long long)c.max_age_ns);
	steer_config_free(&c);
}

/* The file is held to the same bounds, per service too. */
static void test_bounds_in_the_file(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *msg;
	} t[] = {
		{ "load-check-interval: 1ns\n", 1,
		  "load-check-interval: must be between 10ms and 1h, got '1ns'" },
		{ "log-level: info\n"
		  "unhealthy-after: 4294967295\n",
		  2,
		  "unhealthy-after: must be an integer from 1 to 1000 (consecutive failed polls), "
		  "got '4294967295'" },
		{ "services:\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    least-load-kv-pressure-weight: 1e300\n"
		  "    backends: [127.0.0.11:8000]\n",
		  3,
		  "least-load-kv-pressure-weight: must be a number of seconds from 0 to 3600, got "
		  "'1e300'" },
		{ "bytes-per-token: 0\n", 1,
		  "bytes-per-token: must be an integer from 1 to 1024 (request bytes per token), "
		  "got '0'" },
		{ "services:\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    backends: [127.0.0.11:8000]\n"
		  "    bytes-per-token: three\n",
		  4,
		  "bytes-per-token: must be an integer from 1 to 1024 (request bytes per token), "
		  "got 'three'" },
		{ "services:\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    backends: [127.0.0.11:8000]\n"
		  "    bytes-per-token: [3]\n",
		  4, "bytes-per-token: expected a single value, got a list" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < N(t); i++) {
		rc = load_yaml(t[i].yaml, ARGS(BASE), &c);
		CHECK(rc == STEER_CONFIG_USAGE, "case %zu: rc=%d", i, rc);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
}

/*
 * --bytes-per-token: default 4, and the precedence of the other
 * per-service knobs: default < file top level < service key < flag. A reload
 * parses the file again, so a changed file changes it (test_reload.py runs
 * the daemon).
 */
static void test_bytes_per_token(void)
{
	static const char yaml[] = "bytes-per-token: 5\n"
				   "services:\n"
				   "  - vip: 127.0.0.100:8000\n"
				   "    bytes-per-token: 3          # gRPC with token ids\n"
				   "    backends: [127.0.0.11:8000]\n"
				   "  - vip: 127.0.0.101:8000\n"
				   "    backends: [127.0.0.11:8000]\n";
	static const char plain[] = "services:\n"
				    "  - vip: 127.0.0.101:8000\n"
				    "    backends: [127.0.0.11:8000]\n";
	const struct steer_service_cfg *a, *b;
	struct steer_config c;
	int rc;

	rc = LOAD(&c, BASE);
	CHECK(rc == STEER_CONFIG_OK && c.services[0].policy.bytes_per_token == 4,
	      "default: rc=%d %u", rc, rc ? 0 : c.services[0].policy.bytes_per_token);
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&c);
	rc = LOAD(&c, BASE, "--bytes-per-token", "3");
	CHECK(rc == STEER_CONFIG_OK && c.services[0].policy.bytes_per_token == 3,
	      "flag: rc=%d err=%s", rc, err);
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&c);

	rc = load_yaml(yaml, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	if (rc != STEER_CONFIG_OK)
		return;
	a = service_of(&c, "127.0.0.100:8000");
	b = service_of(&c, "127.0.0.101:8000");
	CHECK(a && a->policy.bytes_per_token == 3, "service key beats top level: %u",
	      a ? a->policy.bytes_per_token : 0);
	CHECK(b && b->policy.bytes_per_token == 5, "top level beats default: %u",
	      b ? b->policy.bytes_per_token : 0);
	steer_config_free(&c);

	rc = load_yaml(yaml, ARGS("--bytes-per-token=7"), &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	if (rc != STEER_CONFIG_OK)
		return;
	a = service_of(&c, "127.0.0.100:8000");
	b = service_of(&c, "127.0.0.101:8000");
	CHECK(a && b && a->policy.bytes_per_token == 7 && b->policy.bytes_per_token == 7,
	      "the flag beats the service key and the top level");
	steer_config_free(&c);

	rc = load_yaml(plain, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK && c.services[0].policy.bytes_per_token == 4,
	      "a file without it: the default, rc=%d err=%s", rc, err);
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&c);
}

/* --help gives every bound. */
static int run_help(void *arg)
{
	struct steer_config c;

	(void)arg;
	return load_with(ARGS("--help"), NULL, &c);
}

static void test_bounds_in_help(void)
{
	static const char *const bounds[] = {
		"10ms..1h", "1ms..the interval", "24h",	    "1..1000", "0..3600",
		"1..1e9",   "1..10000000",	 "1..1024",
	};
	char *out;
	size_t i;
	int rc;

	out = capture_stdout(run_help, NULL, &rc);
	CHECK(out && rc == STEER_CONFIG_EXIT, "rc=%d", rc);
	for (i = 0; i < N(bounds) && strstr(out, bounds[i]); i++)
		;
	free(out);
	CHECK(i == N(bounds), "--help lacks '%s'", bounds[i]);
}

/* ---- Nesting ---------------------------------------------------------------------------- */

/* "x: " and n '[' ... n ']': the top-level mapping and n lists, n + 1 levels. */
static char *nested(size_t n, const char *before)
{
	size_t len = strlen(before) + 3 + 2 * n + 32;
	char *s = malloc(len), *p;

	if (!s)
		return NULL;
	p = s + sprintf(s, "%sx: ", before);
	memset(p, '[', n);
	memset(p + n, ']', n);
	strcpy(p + 2 * n, "\nservices: []\n");
	return s;
}

static void test_depth(void)
{
	struct steer_config c;
	char *text;
	int rc;

	/* 64 levels are read (and x is then unknown); 65 are not. */
	text = nested(63, "");
	CHECK(text, "malloc");
	rc = load_yaml(text, ARGS(BASE), &c);
	free(text);
	CHECK(rc == STEER_CONFIG_USAGE && file_err_is(1, "unknown key 'x' at the top level"),
	      "64 levels: rc=%d err=%s", rc, err);
	text = nested(64, "log-level: info\n# two lines down\n");
	CHECK(text, "malloc");
	rc = load_yaml(text, ARGS(BASE), &c);
	free(text);
	CHECK(rc == STEER_CONFIG_USAGE && file_err_is(3, "nested deeper than 64 levels"),
	      "65 levels: rc=%d err=%s", rc, err);
	/* The probe's file: 40,000 levels. */
	text = nested(40000, "");
	CHECK(text, "malloc");
	rc = load_yaml(text, ARGS(BASE), &c);
	free(text);
	CHECK(rc == STEER_CONFIG_USAGE && file_err_is(1, "nested deeper than 64 levels"),
	      "40000 levels: rc=%d err=%s", rc, err);
	/* Mappings count too. */
	{
		char deep[70 * 5 + 64] = "x: ";

		for (rc = 0; rc < 70; rc++)
			strcat(deep, "{a: ");
		strcat(deep, "1");
		for (rc = 0; rc < 70; rc++)
			strcat(deep, "}");
		strcat(deep, "\n");
		rc = load_yaml(deep, ARGS(BASE), &c);
		CHECK(rc == STEER_CONFIG_USAGE && file_err_is(1, "nested deeper than 64 levels"),
		      "mappings: rc=%d err=%s", rc, err);
	}
}

/* ---- The probe's reproductions, against the real binary ------------------------------------ */

static void test_probe_repros_exit_2(void)
{
	static const struct refusal t[] = {
		{ { BASE, "--load-check-interval", "1ns" }, { "--load-check-interval" } },
		{ { BASE, "--load-check-interval", "5000000h" }, { "--load-check-interval" } },
		{ { BASE, "--unhealthy-after", "4294967295" }, { "--unhealthy-after" } },
		{ { BASE, "--least-load-default-throughput", "1e-300" },
		  { "--least-load-default-throughput" } },
		{ { BASE, "--least-load-kv-pressure-weight", "1e300" },
		  { "--least-load-kv-pressure-weight" } },
		{ { "--vip", VIP, "--backend", VIP }, { "is the VIP" } },
		{ { "--vip", VIP, "--backend", BK ",loads=" VIP }, { "is the VIP" } },
		{ { "--vip", "0.0.0.0:8000", "--backend", BK }, { "unspecified" } },
		{ { "--vip", "[::]:8000", "--backend", "[::1]:8001" }, { "unspecified" } },
		{ { "--vip", "224.0.0.1:8000", "--backend", BK }, { "multicast" } },
		{ { "--vip", VIP, "--backend", "0.0.0.0:8000" }, { "unspecified" } },
		{ { "--vip", VIP, "--backend", "255.255.255.255:8000" }, { "broadcast" } },
		{ { "--vip", "[::1]:8000", "--backend", "[ff02::1]:8000" }, { "multicast" } },
		{ { "--vip", "127.0.0.100:+8000", "--backend", BK }, { "without sign" } },
		{ { "--vip", "127.0.0.100:08000", "--backend", BK }, { "leading zero" } },
		{ { BASE, "--cgroup", "/sys/fs/cgroup/no-such-cgroup-here" }, { "--cgroup" } },
		{ { BASE, "--cgroup", "relative/cg" }, { "--cgroup", "absolute" } },
		{ { BASE, "--pin-path", "relative/pins" }, { "--pin-path", "absolute" } },
	};
	char out[1024], *deep;
	int rc, failed = 0;
	size_t i;

	for (i = 0; i < N(t); i++) {
		rc = run_check_config(t[i].args, out, sizeof(out));
		if (rc == 2 && !strncmp(out, "smg-steerd: ", 12) && strstr(out, t[i].needles[0]) &&
		    (!t[i].needles[1] || strstr(out, t[i].needles[1])) &&
		    strchr(out, '\n') == out + strlen(out) - 1)
			continue;
		printf("# case %zu (%s %s %s): exit %d, stderr '%s'\n", i, t[i].args[1],
		       t[i].args[3], t[i].args[5] ? t[i].args[5] : "", rc, out);
		failed++;
	}
	CHECK(!failed, "%d of %zu exited otherwise", failed, N(t));
	deep = nested(40000, "");
	CHECK(deep && !write_file(yaml_path, deep), "write");
	free(deep);
	rc = run_check_config(ARGS("--config", yaml_path), out, sizeof(out));
	unlink(yaml_path);
	CHECK(rc == 2 && strstr(out, "nested deeper than 64 levels"), "deep: exit %d, '%s'", rc,
	      out);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	TAP_RUN(test_addresses_refused);
	TAP_RUN(test_addresses_accepted);
	TAP_RUN(test_addresses_across_services);
	TAP_RUN(test_bounds_refused);
	TAP_RUN(test_bounds_edges_accepted);
	TAP_RUN(test_bounds_in_the_file);
	TAP_RUN(test_bytes_per_token);
	TAP_RUN(test_bounds_in_help);
	TAP_RUN(test_depth);
	TAP_RUN(test_probe_repros_exit_2);
	return tap_done();
}
