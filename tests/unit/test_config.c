// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config.c - smg-steerd's command line and YAML configuration: defaults,
 * every flag, every validation error (one line naming the flag and the range),
 * durations, and the file: forms, precedence, line numbers, reload.
 *
 * No privileges needed. YAML files live in a mkdtemp directory, and each one
 * exists only while the loader reads it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config_testlib.h"

/* ---- Command line -------------------------------------------------------------------- */

static void test_defaults(void)
{
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc = LOAD(&c, BASE, "--backend", "127.0.0.12:8000,loads=127.0.0.12:30000");

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.cgroup[0] == 0, "cgroup '%s'", c.cgroup);
	CHECK(!strcmp(c.pin_path, STEER_DEFAULT_PIN_DIR), "pin_path '%s'", c.pin_path);
	CHECK(!c.keep_pinned, "keep_pinned");
	CHECK(c.interval_ns == NS_PER_S, "interval %llu", (unsigned long long)c.interval_ns);
	CHECK(c.timeout_ns == 500 * NS_PER_MS, "timeout %llu", (unsigned long long)c.timeout_ns);
	CHECK(c.max_age_ns == 3 * NS_PER_S, "max_age %llu", (unsigned long long)c.max_age_ns);
	CHECK(c.unhealthy_after == 3 && c.healthy_after == 2, "health %u %u", c.unhealthy_after,
	      c.healthy_after);
	CHECK(c.log_level == STEER_LOG_INFO, "log level %d", c.log_level);
	CHECK(c.metrics_enabled && !strcmp(c.metrics_listen, "127.0.0.1:9464") &&
		      addr_is(&c.metrics_addr, "127.0.0.1:9464"),
	      "metrics '%s'", c.metrics_listen);
	CHECK(c.config_path[0] == 0, "config_path '%s'", c.config_path);
	CHECK(c.n_services == 1, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(addr_is(&s->vip, "127.0.0.100:8000") && !strcmp(s->vip_str, "127.0.0.100:8000"),
	      "vip %s", s->vip_str);
	CHECK(s->n_backends == 2, "%zu backends", s->n_backends);
	CHECK(addr_is(&s->backends[0].addr, "127.0.0.11:8000") &&
		      addr_is(&s->backends[0].loads, "127.0.0.11:8000") &&
		      !strcmp(s->backends[0].loads_str, "127.0.0.11:8000"),
	      "backend 0 %s loads %s", s->backends[0].addr_str, s->backends[0].loads_str);
	CHECK(addr_is(&s->backends[1].addr, "127.0.0.12:8000") &&
		      addr_is(&s->backends[1].loads, "127.0.0.12:30000") &&
		      !strcmp(s->backends[1].addr_str, "127.0.0.12:8000") &&
		      !strcmp(s->backends[1].loads_str, "127.0.0.12:30000"),
	      "backend 1 %s loads %s", s->backends[1].addr_str, s->backends[1].loads_str);
	CHECK(s->policy.kv_pressure_weight == 0.15 && s->policy.default_throughput == 2000.0 &&
		      s->policy.mean_prefill_tokens == 1024 && s->policy.peer_routers == 1,
	      "policy %g %g %u %u", s->policy.kv_pressure_weight, s->policy.default_throughput,
	      s->policy.mean_prefill_tokens, s->policy.peer_routers);
	steer_config_free(&c);
	CHECK(c.services == NULL && c.n_services == 0, "free clears the services");
	steer_config_free(&c); /* twice is harmless */
}

static void test_every_flag(void)
{
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc = LOAD(&c, "--vip=[::1]:8000", "--backend", "[::1]:9001",
		      "--backend=[::1]:9002,loads=127.0.0.1:30000", "--cgroup", cgroup_root(),
		      "--pin-path=/sys/fs/bpf/t", "--keep-pinned", "--load-check-interval", "2s",
		      "--load-timeout=250ms", "--snapshot-max-age", "1m",
		      "--least-load-kv-pressure-weight", "0.5",
		      "--least-load-default-throughput=1e4", "--least-load-mean-prefill-tokens",
		      "2048", "--peer-routers=4", "--unhealthy-after", "5", "--healthy-after=7",
		      "--log-level", "debug", "--metrics-listen=[::1]:9999", "--wire-estimator",
		      "fluid-step");

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.wire_step, "--wire-estimator fluid-step");
	CHECK(!strcmp(c.cgroup, cgroup_root()) && !strcmp(c.pin_path, "/sys/fs/bpf/t"),
	      "cgroup '%s' pin '%s'", c.cgroup, c.pin_path);
	CHECK(c.keep_pinned, "keep_pinned");
	CHECK(c.interval_ns == 2 * NS_PER_S && c.timeout_ns == 250 * NS_PER_MS &&
		      c.max_age_ns == 60 * NS_PER_S,
	      "durations %llu %llu %llu", (unsigned long long)c.interval_ns,
	      (unsigned long long)c.timeout_ns, (unsigned long long)c.max_age_ns);
	CHECK(c.unhealthy_after == 5 && c.healthy_after == 7, "health %u %u", c.unhealthy_after,
	      c.healthy_after);
	CHECK(c.log_level == STEER_LOG_DEBUG, "log level %d", c.log_level);
	CHECK(c.metrics_enabled && !strcmp(c.metrics_listen, "[::1]:9999") &&
		      addr_is(&c.metrics_addr, "[::1]:9999"),
	      "metrics '%s'", c.metrics_listen);
	CHECK(c.n_services == 1, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(!strcmp(s->vip_str, "[::1]:8000") && s->n_backends == 2, "vip %s, %zu backends",
	      s->vip_str, s->n_backends);
	CHECK(addr_is(&s->backends[1].addr, "[::1]:9002") &&
		      addr_is(&s->backends[1].loads, "127.0.0.1:30000"),
	      "backend 1 %s loads %s", s->backends[1].addr_str, s->backends[1].loads_str);
	CHECK(s->policy.kv_pressure_weight == 0.5 && s->policy.default_throughput == 1e4 &&
		      s->policy.mean_prefill_tokens == 2048 && s->policy.peer_routers == 4,
	      "policy %g %g %u %u", s->policy.kv_pressure_weight, s->policy.default_throughput,
	      s->policy.mean_prefill_tokens, s->policy.peer_routers);
	steer_config_free(&c);

	rc = LOAD(&c, BASE, "--metrics-listen", "off", "--log-level=error",
		  "--cgroup=", "--log-level", "warn");
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(!c.metrics_enabled, "metrics off");
	CHECK(c.log_level == STEER_LOG_WARN, "the last --log-level wins: %d", c.log_level);
	CHECK(c.cgroup[0] == 0, "empty cgroup is the root");
	CHECK(!c.wire_step, "busy-until (fluid) is the default");
	CHECK(!c.wire_off, "request bytes are counted by default");
	steer_config_free(&c);

	rc = LOAD(&c, BASE, "--wire-estimator", "fluid-step", "--wire-estimator", "off");
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.wire_off && !c.wire_step, "the last --wire-estimator wins: off");
	steer_config_free(&c);

	rc = LOAD(&c, BASE, "--wire-estimator", "pending");
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "--wire-estimator: 'pending' is no longer") &&
		      strstr(err, "use fluid"),
	      "pending is refused, naming the option and what to use: rc=%d '%s'", rc, err);
	steer_config_free(&c);

	rc = LOAD(&c, BASE, "--wire-estimator", "fluid-step");
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.wire_step && !c.wire_off, "--wire-estimator fluid-step");
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--wire-estimator", "fluid-step", "--wire-estimator", "fluid");
	CHECK(rc == STEER_CONFIG_OK && !c.wire_step, "the last --wire-estimator wins: fluid");
	steer_config_free(&c);
}

/* The timeout and the staleness bound follow the interval unless given. */
static void test_derived_defaults(void)
{
	static const struct {
		const char *interval;
		uint64_t timeout, max_age;
	} t[] = {
		{ "4s", NS_PER_S, 12 * NS_PER_S },
		{ "100ms", 50 * NS_PER_MS, 300 * NS_PER_MS },
		{ "10ms", 5 * NS_PER_MS, 30 * NS_PER_MS }, /* the shortest interval */
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rc = LOAD(&c, BASE, "--load-check-interval", t[i].interval);
		CHECK(rc == STEER_CONFIG_OK, "%s: rc=%d err=%s", t[i].interval, rc, err);
		CHECK(c.timeout_ns == t[i].timeout && c.max_age_ns == t[i].max_age,
		      "%s: timeout %llu max_age %llu", t[i].interval,
		      (unsigned long long)c.timeout_ns, (unsigned long long)c.max_age_ns);
		steer_config_free(&c);
	}
	rc = LOAD(&c, BASE, "--load-check-interval", "2s", "--load-timeout", "2s");
	CHECK(rc == STEER_CONFIG_OK && c.timeout_ns == 2 * NS_PER_S,
	      "a timeout equal to the interval is fine: rc=%d err=%s", rc, err);
	steer_config_free(&c);
}

static void test_duration_table(void)
{
	static const struct {
		const char *text;
		int rc;
		uint64_t ns;
	} t[] = {
		{ "250ms", 0, 250 * NS_PER_MS },
		{ "2s", 0, 2 * NS_PER_S },
		{ "1.5s", 0, 1500 * NS_PER_MS },
		{ "1m", 0, 60 * NS_PER_S },
		{ "1h", 0, 3600 * NS_PER_S },
		{ "10us", 0, 10000 },
		{ "10\xc2\xb5s", 0, 10000 },
		{ "7ns", 0, 7 },
		{ ".5s", 0, 500 * NS_PER_MS },
		{ "0.1s", 0, 100 * NS_PER_MS },
		{ "1m30s", 0, 90 * NS_PER_S },
		{ "1h2m3s4ms", 0, 3723 * NS_PER_S + 4 * NS_PER_MS },
		{ "500000h", 0, 500000ULL * 3600 * NS_PER_S },
		{ "0s", -1, 0 },
		{ "0", -1, 0 },
		{ "0.4ns", -1, 0 },
		{ "", -1, 0 },
		{ "s", -1, 0 },
		{ ".s", -1, 0 },
		{ "10", -1, 0 },
		{ "-1s", -1, 0 },
		{ "+1s", -1, 0 },
		{ " 1s", -1, 0 },
		{ "1s ", -1, 0 },
		{ "1 s", -1, 0 },
		{ "1.2.3s", -1, 0 },
		{ "1d", -1, 0 },
		{ "1sec", -1, 0 },
		{ "1S", -1, 0 },
		{ "nans", -1, 0 },
		{ "infs", -1, 0 },
		{ "1e3s", -1, 0 },
		{ "0x10s", -1, 0 },
		{ "6000000h", -1, 0 }, /* beyond 2^64 ns */
	};
	size_t i;

	CHECK(steer_parse_duration(NULL, &(uint64_t){ 0 }) == -1, "NULL is invalid");
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		uint64_t ns = 12345;
		int rc = steer_parse_duration(t[i].text, &ns);

		CHECK(rc == t[i].rc, "'%s': rc %d, want %d", t[i].text, rc, t[i].rc);
		CHECK(rc ? ns == 12345 : ns == t[i].ns, "'%s': %llu ns, want %llu", t[i].text,
		      (unsigned long long)ns, (unsigned long long)t[i].ns);
	}
}

struct bad_case {
	const char *args[14];
	const char *needles[4]; /* all must appear in err */
};

static const struct bad_case bad_flags[] = {
	/* policy knobs: range in the policy module's words, and the value given */
	{ { BASE, "--least-load-kv-pressure-weight", "-0.1" },
	  { "--least-load-kv-pressure-weight: ", "a number of seconds from 0 to 3600", "'-0.1'" } },
	{ { BASE, "--least-load-kv-pressure-weight=0.15x" },
	  { "--least-load-kv-pressure-weight: ", "from 0 to 3600", "'0.15x'" } },
	{ { BASE, "--least-load-kv-pressure-weight", "nan" },
	  { "--least-load-kv-pressure-weight: ", "from 0 to 3600", "'nan'" } },
	{ { BASE, "--least-load-kv-pressure-weight", "inf" },
	  { "--least-load-kv-pressure-weight: ", "from 0 to 3600", "'inf'" } },
	{ { BASE, "--least-load-kv-pressure-weight", "" },
	  { "--least-load-kv-pressure-weight: ", "from 0 to 3600", "''" } },
	{ { BASE, "--least-load-default-throughput", "0" },
	  { "--least-load-default-throughput: must be a number of tokens/s from 1 to 1e9, got "
	    "'0'" } },
	{ { BASE, "--least-load-default-throughput", "-5" },
	  { "--least-load-default-throughput: ", "from 1 to 1e9", "'-5'" } },
	{ { BASE, "--least-load-default-throughput", "1e999" },
	  { "--least-load-default-throughput: ", "from 1 to 1e9", "'1e999'" } },
	{ { BASE, "--least-load-default-throughput", "0x10" },
	  { "--least-load-default-throughput: ", "from 1 to 1e9", "'0x10'" } },
	{ { BASE, "--least-load-default-throughput", " 5" },
	  { "--least-load-default-throughput: ", "from 1 to 1e9", "' 5'" } },
	{ { BASE, "--least-load-mean-prefill-tokens", "0" },
	  { "--least-load-mean-prefill-tokens: ", "integer from 1 to 10000000", "'0'" } },
	{ { BASE, "--least-load-mean-prefill-tokens", "1.5" },
	  { "--least-load-mean-prefill-tokens: ", "integer from 1 to 10000000", "'1.5'" } },
	{ { BASE, "--least-load-mean-prefill-tokens", "-1" },
	  { "--least-load-mean-prefill-tokens: ", "integer from 1 to 10000000", "'-1'" } },
	{ { BASE, "--least-load-mean-prefill-tokens", "4294967296" },
	  { "--least-load-mean-prefill-tokens: ", "integer from 1 to 10000000", "'4294967296'" } },
	{ { BASE, "--peer-routers", "0" },
	  { "--peer-routers: ", "integer from 1 to 1024", "'0'" } },
	{ { BASE, "--peer-routers", "two" },
	  { "--peer-routers: ", "integer from 1 to 1024", "'two'" } },
	/* cache affinity: a choice, and durations within their bounds */
	{ { BASE, "--affinity", "pid" },
	  { "--affinity: ", "off, cgroup, netns or sockopt", "'pid'" } },
	{ { BASE, "--affinity", "source" },
	  { "--affinity: ", "off, cgroup, netns or sockopt", "'source'" } },
	{ { BASE, "--affinity", "CGROUP" }, { "--affinity: ", "'CGROUP'" } },
	{ { BASE, "--affinity" }, { "--affinity: missing value" } },
	{ { BASE, "--affinity-slack", "2h" }, { "--affinity-slack: ", "from 0 to 1h", "'2h'" } },
	{ { BASE, "--affinity-slack", "-1s" }, { "--affinity-slack: ", "'-1s'" } },
	{ { BASE, "--affinity-slack", "500" }, { "--affinity-slack: ", "'500'" } },
	{ { BASE, "--affinity-timeout", "0" },
	  { "--affinity-timeout: ", "from 1s to 24h", "'0'" } },
	{ { BASE, "--affinity-timeout", "999ms" },
	  { "--affinity-timeout: ", "from 1s to 24h", "'999ms'" } },
	{ { BASE, "--affinity-timeout", "25h" },
	  { "--affinity-timeout: ", "from 1s to 24h", "'25h'" } },
	/* health */
	{ { BASE, "--unhealthy-after", "0" },
	  { "--unhealthy-after: ", "integer from 1 to 1000", "'0'" } },
	{ { BASE, "--unhealthy-after", "99999999999" },
	  { "--unhealthy-after: ", "integer from 1 to 1000", "'99999999999'" } },
	{ { BASE, "--healthy-after", "2x" },
	  { "--healthy-after: ", "integer from 1 to 1000", "'2x'" } },
	/* durations */
	{ { BASE, "--load-check-interval", "fast" },
	  { "--load-check-interval: 'fast' is not a duration > 0 (e.g. 250ms, 2s, 1.5s, 1m)" } },
	{ { BASE, "--load-check-interval", "0s" }, { "--load-check-interval: ", "> 0", "'0s'" } },
	{ { BASE, "--load-check-interval", "10" }, { "--load-check-interval: ", "250ms", "'10'" } },
	{ { BASE, "--load-timeout", "-1s" }, { "--load-timeout: ", "> 0", "'-1s'" } },
	{ { BASE, "--snapshot-max-age", "1 s" }, { "--snapshot-max-age: ", "> 0", "'1 s'" } },
	{ { BASE, "--load-check-interval", "1s", "--load-timeout", "1500ms" },
	  { "--load-timeout: must be <= the load-check-interval (1s), got 1500ms" } },
	{ { BASE, "--load-timeout", "2s" },
	  { "--load-timeout: ", "<= the load-check-interval (1s)", "2s" } },
	/* other options */
	{ { BASE, "--log-level", "verbose" },
	  { "--log-level: ", "error, warn, info, debug", "'verbose'" } },
	{ { BASE, "--log-level", "INFO" }, { "--log-level: ", "'INFO'" } },
	{ { BASE, "--metrics-listen", "localhost:9464" },
	  { "--metrics-listen: ", "'localhost:9464'", "'off'" } },
	{ { BASE, "--metrics-listen", "127.0.0.1:0" },
	  { "--metrics-listen: ", "1..65535", "'127.0.0.1:0'" } },
	{ { BASE, "--pin-path", "relative/dir" },
	  { "--pin-path: ", "absolute", "'relative/dir'" } },
	{ { BASE, "--config", "" }, { "--config: ", "file path" } },
	{ { BASE, "--config", "/nonexistent/steer.yaml" },
	  { "/nonexistent/steer.yaml: cannot open: No such file or directory" } },
	/* services */
	{ { BASE, "--vip", "127.0.0.101:8000" }, { "--vip: given twice" } },
	{ { "--vip", "127.0.0.100", "--backend", "127.0.0.11:8000" },
	  { "--vip: ", "'127.0.0.100'", "PORT" } },
	{ { "--vip", "[::1]8000", "--backend", "[::1]:8001" }, { "--vip: ", "'[::1]8000'" } },
	{ { "--vip", "127.0.0.100:8000" }, { "--vip: at least one --backend" } },
	{ { "--backend", "127.0.0.11:8000" }, { "--backend requires --vip" } },
	{ { BASE, "--backend", "127.0.0.11:8000" }, { "--backend: ", "127.0.0.11:8000", "twice" } },
	{ { BASE, "--backend", "127.0.0.12:8000,load=127.0.0.12:1" },
	  { "--backend: ", "'127.0.0.12:8000,load=127.0.0.12:1'", "unknown key 'load'",
	    BACKEND_FORM } },
	{ { BASE, "--backend", "127.0.0.12:8000,loads=nowhere" },
	  { "--backend: ", "'nowhere'", BACKEND_FORM } },
	{ { BASE, "--backend", "127.0.0.12:99999" }, { "--backend: ", "1..65535" } },
	{ { BASE, "--backend", "[::1]:8000" },
	  { "--backend: backend [::1]:8000 is IPv6 but --vip 127.0.0.100:8000 is IPv4" } },
	{ { "--vip", "[::1]:8000", "--backend", "127.0.0.1:8000" },
	  { "--backend: ", "127.0.0.1:8000 is IPv4", "[::1]:8000 is IPv6" } },
	{ { NULL }, { "no service configured", "--vip", "--config" } },
	/* the command line itself */
	{ { BASE, "--bogus" }, { "unknown or ambiguous option '--bogus'" } },
	{ { BASE, "--bogus=1" }, { "'--bogus=1'" } },
	{ { BASE, "--least-load" }, { "ambiguous", "'--least-load'" } },
	{ { BASE, "-x" }, { "unknown option '-x'" } },
	{ { BASE, "--peer-routers" }, { "--peer-routers: missing value" } },
	{ { "--vip", "--backend", "127.0.0.11:8000" }, { "--vip: missing value", "'--backend'" } },
	{ { BASE, "--keep-pinned=yes" },
	  { "--keep-pinned takes no value", "'--keep-pinned=yes'" } },
	{ { BASE, "--version=2" }, { "--version takes no value" } },
	{ { BASE, "--help=all" }, { "--help takes no value" } },
	{ { BASE, "extra" }, { "unexpected argument 'extra'" } },
};

static void test_flag_errors(void)
{
	static struct steer_config before, after;
	size_t i, j;

	for (i = 0; i < sizeof(bad_flags) / sizeof(bad_flags[0]); i++) {
		const struct bad_case *b = &bad_flags[i];
		int rc;

		memset(&before, 0xa5, sizeof(before));
		after = before;
		rc = load_with(b->args, NULL, &after);
		CHECK(rejected(rc, &before, &after), "case %zu (%s %s): rc=%d err='%s'", i,
		      b->args[0] ? b->args[0] : "", b->args[4] ? b->args[4] : "", rc, err);
		for (j = 0; j < 4 && b->needles[j]; j++)
			CHECK(strstr(err, b->needles[j]), "case %zu: '%s' not in '%s'", i,
			      b->needles[j], err);
	}
}

static void test_backend_limit(void)
{
	static const char *args[2 * STEER_MAX_BACKENDS + 8];
	static char addrs[STEER_MAX_BACKENDS + 1][32];
	struct steer_config c;
	int n = 0, i, rc;

	args[n++] = "--vip";
	args[n++] = "127.0.0.100:8000";
	for (i = 0; i < STEER_MAX_BACKENDS; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "127.0.1.%d:%d", i % 250 + 1, 8000 + i);
		args[n++] = "--backend";
		args[n++] = addrs[i];
	}
	args[n] = NULL;
	rc = load_with(args, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK && c.services[0].n_backends == STEER_MAX_BACKENDS,
	      "%d backends are allowed: rc=%d err=%s", STEER_MAX_BACKENDS, rc, err);
	steer_config_free(&c);

	snprintf(addrs[i], sizeof(addrs[i]), "127.0.2.1:9000");
	args[n++] = "--backend";
	args[n++] = addrs[i];
	args[n] = NULL;
	rc = load_with(args, NULL, &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "--backend: ") && strstr(err, "256"),
	      "one more is refused: rc=%d err=%s", rc, err);
}

static int run_flags(void *arg)
{
	struct steer_config c;

	return load_with(arg, NULL, &c);
}

static void test_help_version(void)
{
	static const char *const names[] = {
		"--vip",
		"--backend",
		"--config",
		"--cgroup",
		"--pin-path",
		"--keep-pinned",
		"--load-check-interval",
		"--load-timeout",
		"--snapshot-max-age",
		"--least-load-kv-pressure-weight",
		"--least-load-default-throughput",
		"--least-load-mean-prefill-tokens",
		"--peer-routers",
		"--bytes-per-token",
		"--wire-estimator",
		"--wire-cgroup",
		"--unhealthy-after",
		"--healthy-after",
		"--log-level",
		"--metrics-listen",
		"--help",
		"--version",
	};
	char *out;
	size_t i;
	int rc;

	out = capture_stdout(run_flags, (void *)ARGS("--version"), &rc);
	CHECK(rc == STEER_CONFIG_EXIT, "--version rc=%d", rc);
	CHECK(out && !strcmp(out, "smg-steerd " STEER_VERSION "\n"), "printed '%s'", out);
	free(out);

	/* Help wins over what is missing or follows. */
	out = capture_stdout(run_flags, (void *)ARGS("--help", "--bogus"), &rc);
	CHECK(rc == STEER_CONFIG_EXIT, "--help rc=%d", rc);
	for (i = 0; out && i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(strstr(out, names[i]), "help lacks %s", names[i]);
	free(out);

	out = capture_stdout(run_flags, (void *)ARGS(BASE, "-h"), &rc);
	CHECK(rc == STEER_CONFIG_EXIT && out && strstr(out, "Usage: smg-steerd"), "-h rc=%d", rc);
	free(out);
}

/* SIGHUP parses the same argv again: nothing may carry over. */
static void test_reentrant(void)
{
	const char *argv[] = { "smg-steerd", BASE, "--peer-routers", "3", NULL };
	const char *copy[sizeof(argv) / sizeof(argv[0])];
	struct steer_config a, b;
	int rc;

	memcpy(copy, argv, sizeof(argv));
	rc = steer_config_load(7, (char *const *)argv, &a, err, sizeof(err));
	CHECK(rc == STEER_CONFIG_OK, "first: rc=%d err=%s", rc, err);
	/* A failure in the middle of "-xh" leaves getopt inside that word. */
	rc = LOAD(&b, "-xh");
	CHECK(rc == STEER_CONFIG_USAGE, "-xh rc=%d", rc);
	rc = steer_config_load(7, (char *const *)argv, &b, err, sizeof(err));
	CHECK(rc == STEER_CONFIG_OK, "again: rc=%d err=%s", rc, err);
	CHECK(!memcmp(argv, copy, sizeof(argv)), "argv was permuted");
	CHECK(b.n_services == 1 && b.services[0].n_backends == 1 &&
		      b.services[0].policy.peer_routers == 3 && a.services != b.services,
	      "second load differs");
	steer_config_free(&a);
	steer_config_free(&b);
	/* An operand stops parsing; argv stays in order for the next call. */
	{
		const char *with_operand[] = { "smg-steerd", "--vip",	  "127.0.0.100:8000",
					       "x",	     "--backend", "127.0.0.11:8000",
					       NULL };
		const char *orig[7];

		memcpy(orig, with_operand, sizeof(orig));
		rc = steer_config_load(6, (char *const *)with_operand, &a, err, sizeof(err));
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "'x'"), "rc=%d err=%s", rc, err);
		CHECK(!memcmp(orig, with_operand, sizeof(orig)), "argv was permuted");
	}
}

/* A NULL err must not crash; the rc still tells. */
static void test_null_err(void)
{
	const char *argv[] = { "smg-steerd", "--bogus", NULL };
	struct steer_config c;

	CHECK(steer_config_load(2, (char *const *)argv, &c, NULL, 0) == STEER_CONFIG_USAGE, "rc");
}

/* ---- Config file --------------------------------------------------------------------- */

static const char example_yaml[] =
	"load-check-interval: 2s\n"
	"least-load-kv-pressure-weight: 0.25\n"
	"log-level: debug\n"
	"metrics-listen: 127.0.0.1:9500\n"
	"cgroup: %s\n"
	"pin-path: /sys/fs/bpf/other\n"
	"keep-pinned: true\n"
	"load-timeout: 300ms\n"
	"snapshot-max-age: 10s\n"
	"unhealthy-after: 4\n"
	"healthy-after: 5\n"
	"least-load-default-throughput: 3000\n"
	"least-load-mean-prefill-tokens: 512\n"
	"peer-routers: 2\n"
	"services:\n"
	"  - vip: 127.0.0.100:8000\n"
	"    least-load-mean-prefill-tokens: 2048     # per-service knob\n"
	"    backends:\n"
	"      - 127.0.0.11:8000                      # scalar form\n"
	"      - address: 127.0.0.12:8000             # mapping form\n"
	"        loads: 127.0.0.12:30000\n"
	"      - address: 127.0.0.13:8000\n"
	"      - 127.0.0.14:8000,loads=127.0.0.14:30000\n";

static void test_yaml_full_example(void)
{
	struct steer_config c;
	const struct steer_service_cfg *s;
	char text[sizeof(example_yaml) + PATH_MAX];
	int rc;

	snprintf(text, sizeof(text), example_yaml, cgroup_root());
	rc = load_yaml(text, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(!strcmp(c.config_path, yaml_path), "config_path '%s'", c.config_path);
	CHECK(c.interval_ns == 2 * NS_PER_S && c.timeout_ns == 300 * NS_PER_MS &&
		      c.max_age_ns == 10 * NS_PER_S,
	      "durations");
	CHECK(c.log_level == STEER_LOG_DEBUG && c.keep_pinned && c.unhealthy_after == 4 &&
		      c.healthy_after == 5,
	      "log %d keep %d health %u %u", c.log_level, c.keep_pinned, c.unhealthy_after,
	      c.healthy_after);
	CHECK(!strcmp(c.cgroup, cgroup_root()) && !strcmp(c.pin_path, "/sys/fs/bpf/other"),
	      "paths '%s' '%s'", c.cgroup, c.pin_path);
	CHECK(c.metrics_enabled && !strcmp(c.metrics_listen, "127.0.0.1:9500"), "metrics '%s'",
	      c.metrics_listen);
	CHECK(c.n_services == 1, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(!strcmp(s->vip_str, "127.0.0.100:8000") && s->n_backends == 4, "%s, %zu backends",
	      s->vip_str, s->n_backends);
	CHECK(addr_is(&s->backends[0].addr, "127.0.0.11:8000") &&
		      addr_is(&s->backends[0].loads, "127.0.0.11:8000"),
	      "scalar form");
	CHECK(addr_is(&s->backends[1].addr, "127.0.0.12:8000") &&
		      addr_is(&s->backends[1].loads, "127.0.0.12:30000") &&
		      !strcmp(s->backends[1].loads_str, "127.0.0.12:30000"),
	      "mapping form");
	CHECK(addr_is(&s->backends[2].loads, "127.0.0.13:8000") &&
		      !strcmp(s->backends[2].loads_str, "127.0.0.13:8000"),
	      "mapping without loads");
	CHECK(addr_is(&s->backends[3].loads, "127.0.0.14:30000"), "scalar with loads");
	CHECK(s->policy.kv_pressure_weight == 0.25 && s->policy.default_throughput == 3000 &&
		      s->policy.mean_prefill_tokens == 2048 && s->policy.peer_routers == 2,
	      "policy %g %g %u %u", s->policy.kv_pressure_weight, s->policy.default_throughput,
	      s->policy.mean_prefill_tokens, s->policy.peer_routers);
	steer_config_free(&c);
}

/* The example shipped in tests/data/config stays valid and means what it says. */
static void test_yaml_shipped_example(void)
{
	const char *top = getenv("STEER_TOP");
	char path[PATH_MAX];
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc;

	snprintf(path, sizeof(path), "%s/tests/data/config/steer.yaml", top ? top : ".");
	rc = load_with(NULL, path, &c);
	CHECK(rc == STEER_CONFIG_OK, "%s: rc=%d err=%s", path, rc, err);
	CHECK(c.n_services == 2 && c.timeout_ns == 500 * NS_PER_MS, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(s->policy.mean_prefill_tokens == 2048 && s->n_backends == 2 &&
		      !strcmp(s->backends[1].loads_str, "127.0.0.12:30000"),
	      "first service");
	s = &c.services[1];
	CHECK(!strcmp(s->vip_str, "[::1]:8000") && s->policy.peer_routers == 2 &&
		      s->policy.mean_prefill_tokens == 1024 && s->policy.bytes_per_token == 3 &&
		      !strcmp(s->backends[1].loads_str, "[::1]:30002"),
	      "second service");
	steer_config_free(&c);
}

/* Cache affinity: off with its default slack and timeout; the flags for
 * every service, a service's keys for it alone; a slack of 0 is a value. */
static void test_affinity(void)
{
	static const char yaml[] = "affinity-slack: 2s\n"
				   "services:\n"
				   "  - vip: 127.0.0.100:8000\n"
				   "    affinity: netns\n"
				   "    affinity-timeout: 1h\n"
				   "    backends: [127.0.0.11:8000]\n"
				   "  - vip: 127.0.0.101:8000\n"
				   "    affinity: sockopt\n"
				   "    affinity-slack: 0ms\n"
				   "    backends: [127.0.0.11:8000]\n"
				   "  - vip: 127.0.0.102:8000\n"
				   "    backends: [127.0.0.11:8000]\n";
	static const char *const words[] = { "off", "cgroup", "netns", "sockopt" };
	const struct steer_service_cfg *a, *b, *d;
	struct steer_config c;
	uint32_t k;
	int rc = LOAD(&c, BASE);

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.services[0].policy.affinity == STEER_AFF_OFF &&
		      c.services[0].policy.affinity_slack_ns == 500 * NS_PER_MS &&
		      c.services[0].policy.affinity_idle_ns == 600 * NS_PER_S,
	      "defaults %u %llu %llu", c.services[0].policy.affinity,
	      (unsigned long long)c.services[0].policy.affinity_slack_ns,
	      (unsigned long long)c.services[0].policy.affinity_idle_ns);
	steer_config_free(&c);
	for (k = 0; k < 4; k++) {
		rc = LOAD(&c, BASE, "--affinity", words[k]);
		CHECK(rc == STEER_CONFIG_OK && c.services[0].policy.affinity == k,
		      "--affinity %s: rc=%d %u err=%s", words[k], rc,
		      rc ? 0 : c.services[0].policy.affinity, err);
		if (rc == STEER_CONFIG_OK)
			steer_config_free(&c);
	}
	CHECK(STEER_AFF_CGROUP == 1 && STEER_AFF_NETNS == 2 && STEER_AFF_SOCKOPT == 3,
	      "the words' order is enum steer_affinity's");
	rc = LOAD(&c, BASE, "--affinity=cgroup", "--affinity-slack", "0", "--affinity-timeout=24h");
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.services[0].policy.affinity_slack_ns == 0 &&
		      c.services[0].policy.affinity_idle_ns == 24 * 3600 * NS_PER_S,
	      "flags %llu %llu", (unsigned long long)c.services[0].policy.affinity_slack_ns,
	      (unsigned long long)c.services[0].policy.affinity_idle_ns);
	steer_config_free(&c);

	rc = load_yaml(yaml, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	a = service_of(&c, "127.0.0.100:8000");
	b = service_of(&c, "127.0.0.101:8000");
	d = service_of(&c, "127.0.0.102:8000");
	CHECK(a && b && d, "%zu services", c.n_services);
	CHECK(a->policy.affinity == STEER_AFF_NETNS &&
		      a->policy.affinity_slack_ns == 2 * NS_PER_S &&
		      a->policy.affinity_idle_ns == 3600 * NS_PER_S,
	      "a: %u %llu %llu", a->policy.affinity,
	      (unsigned long long)a->policy.affinity_slack_ns,
	      (unsigned long long)a->policy.affinity_idle_ns);
	CHECK(b->policy.affinity == STEER_AFF_SOCKOPT && b->policy.affinity_slack_ns == 0 &&
		      b->policy.affinity_idle_ns == 600 * NS_PER_S,
	      "b: %u %llu %llu", b->policy.affinity,
	      (unsigned long long)b->policy.affinity_slack_ns,
	      (unsigned long long)b->policy.affinity_idle_ns);
	CHECK(d->policy.affinity == STEER_AFF_OFF && d->policy.affinity_slack_ns == 2 * NS_PER_S,
	      "d: %u %llu", d->policy.affinity, (unsigned long long)d->policy.affinity_slack_ns);
	steer_config_free(&c);

	rc = load_yaml(yaml, ARGS("--affinity", "cgroup"), &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(service_of(&c, "127.0.0.100:8000")->policy.affinity == STEER_AFF_CGROUP &&
		      service_of(&c, "127.0.0.102:8000")->policy.affinity == STEER_AFF_CGROUP,
	      "the flag is every service's");
	steer_config_free(&c);
	rc = load_yaml("services:\n"
		       "  - vip: 127.0.0.100:8000\n"
		       "    affinity: pod\n"
		       "    backends: [127.0.0.11:8000]\n",
		       NULL, &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, ":3: affinity: ") &&
		      strstr(err, "off, cgroup, netns or sockopt") && strstr(err, "'pod'"),
	      "rc=%d err=%s", rc, err);
}

/* Knobs: flag > service key > top-level key > default; globals: flag > file. */
static void test_yaml_precedence(void)
{
	static const char yaml[] = "least-load-kv-pressure-weight: 0.3\n"
				   "least-load-default-throughput: 3000\n"
				   "load-check-interval: 2s\n"
				   "log-level: debug\n"
				   "metrics-listen: 127.0.0.1:9500\n"
				   "services:\n"
				   "  - vip: 127.0.0.100:8000\n"
				   "    least-load-kv-pressure-weight: 0.5\n"
				   "    least-load-default-throughput: 4000\n"
				   "    peer-routers: 3\n"
				   "    backends: [127.0.0.11:8000]\n"
				   "  - vip: 127.0.0.101:8000\n"
				   "    backends: [127.0.0.11:8000]\n";
	struct steer_config c;
	const struct steer_service_cfg *a, *b;
	int rc = load_yaml(yaml,
			   ARGS("--least-load-default-throughput", "5000", "--load-check-interval",
				"3s", "--metrics-listen", "off"),
			   &c);

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	a = service_of(&c, "127.0.0.100:8000");
	b = service_of(&c, "127.0.0.101:8000");
	CHECK(c.n_services == 2 && a && b, "%zu services", c.n_services);
	CHECK(a->policy.kv_pressure_weight == 0.5, "service key beats top level: %g",
	      a->policy.kv_pressure_weight);
	CHECK(b->policy.kv_pressure_weight == 0.3, "top level beats default: %g",
	      b->policy.kv_pressure_weight);
	CHECK(a->policy.default_throughput == 5000 && b->policy.default_throughput == 5000,
	      "flag beats service key and top level: %g %g", a->policy.default_throughput,
	      b->policy.default_throughput);
	CHECK(a->policy.peer_routers == 3 && b->policy.peer_routers == 1,
	      "a service key stays in its service: %u %u", a->policy.peer_routers,
	      b->policy.peer_routers);
	CHECK(a->policy.mean_prefill_tokens == 1024, "default: %u", a->policy.mean_prefill_tokens);
	CHECK(c.interval_ns == 3 * NS_PER_S && c.max_age_ns == 9 * NS_PER_S,
	      "flag interval wins, and the default staleness follows it");
	CHECK(c.log_level == STEER_LOG_DEBUG, "file log level kept: %d", c.log_level);
	CHECK(!c.metrics_enabled, "flag 'off' beats the file's address");
	steer_config_free(&c);
}

static void test_yaml_unknown_key_line(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *msg;
	} t[] = {
		{ "log-level: info\n"
		  "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - 127.0.0.11:8000\n"
		  "  - vip: 127.0.0.101:8000\n"
		  "    bakends:\n"
		  "      - 127.0.0.11:8000\n",
		  7, "unknown key 'bakends' in service" },
		{ "# comment\n"
		  "\n"
		  "log-levle: info\n",
		  3, "unknown key 'log-levle' at the top level" },
		{ "vip: 127.0.0.100:8000\n", 1, "unknown key 'vip' at the top level" },
		{ "config: other.yaml\n", 1, "unknown key 'config' at the top level" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    load-check-interval: 1s\n"
		  "    backends: [127.0.0.11:8000]\n",
		  3, "unknown key 'load-check-interval' in service" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - address: 127.0.0.11:8000\n"
		  "        load: 127.0.0.11:30000\n",
		  5, "unknown key 'load' in backend (expected address, loads, engine, auth)" },
	};
	static struct steer_config before, after;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		memset(&before, 0x5a, sizeof(before));
		after = before;
		rc = load_yaml(t[i].yaml, ARGS(BASE), &after);
		CHECK(rejected(rc, &before, &after), "case %zu: rc=%d err=%s", i, rc, err);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
}

static void test_yaml_wrong_type_line(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *msg;
	} t[] = {
		{ "log-level: info\n"
		  "metrics-listen: off\n"
		  "load-check-interval: fast\n",
		  3,
		  "load-check-interval: 'fast' is not a duration > 0 (e.g. 250ms, 2s, 1.5s, 1m)" },
		{ "least-load-kv-pressure-weight:\n"
		  "  a: 1\n",
		  2, "least-load-kv-pressure-weight: expected a single value, got a mapping" },
		{ "least-load-default-throughput: abc\n", 1,
		  "least-load-default-throughput: must be a number of tokens/s from 1 to 1e9, got "
		  "'abc'" },
		{ "least-load-default-throughput: .nan\n", 1,
		  "least-load-default-throughput: must be a number of tokens/s from 1 to 1e9, got "
		  "'.nan'" },
		{ "peer-routers: [1, 2]\n", 1,
		  "peer-routers: expected a single value, got a list" },
		{ "keep-pinned: maybe\n", 1, "keep-pinned: must be true or false, got 'maybe'" },
		{ "log-level:\n", 1, "log-level: must be one of error, warn, info, debug, got ''" },
		{ "services:\n"
		  "  vip: 127.0.0.100:8000\n",
		  2, "services: expected a list, got a mapping" },
		{ "services:\n"
		  "  - 127.0.0.100:8000\n",
		  2, "a service must be a mapping of keys, got a single value" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: 127.0.0.11:8000\n",
		  3, "backends: expected a list, got a single value" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    least-load-mean-prefill-tokens: 0\n"
		  "    backends: [127.0.0.11:8000]\n",
		  3,
		  "least-load-mean-prefill-tokens: must be an integer from 1 to 10000000 (tokens), "
		  "got "
		  "'0'" },
		{ "services:\n"
		  "  - vip: 127.0.0.100\n",
		  2, "vip: '127.0.0.100': expected IPV4:PORT or [IPV6]:PORT" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - [127.0.0.11:8000]\n",
		  4, "a backend must be a mapping of keys, got a list" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - loads: 127.0.0.11:8000\n",
		  4, "backend without 'address'" },
		{ "services:\n"
		  "  - backends: [127.0.0.11:8000]\n",
		  2, "service without 'vip'" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n",
		  2, "service 127.0.0.100:8000 has no backends (at least one is required)" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: []\n",
		  3, "service 127.0.0.100:8000 has no backends (at least one is required)" },
		{ "- a\n", 1, "the top level must be a mapping of keys, got a list" },
		{ "log-level: info\n"
		  "log-level: debug\n",
		  2, "duplicate key 'log-level'" },
		{ "? [a]\n"
		  ": b\n",
		  1, "a key must be a single word, got a list" },
		{ "log-level: info\n"
		  "load-check-interval: 1s\n"
		  "load-timeout: 3s\n",
		  3, "load-timeout: must be <= the load-check-interval (1s), got 3s" },
		{ "log-level: \"in\\nfo\"\n", 1,
		  "log-level: must be one of error, warn, info, debug, got 'in?fo'" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rc = load_yaml(t[i].yaml, ARGS(BASE), &c);
		CHECK(rc == STEER_CONFIG_USAGE, "case %zu: rc=%d", i, rc);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
}

static void test_yaml_syntax_error(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *needle;
	} t[] = {
		{ "log-level: info\n"
		  "metrics-listen: off\n"
		  "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: [127.0.0.11:8000\n"
		  "log-level: debug\n",
		  6, "YAML syntax error" },
		{ "log-level: info\n"
		  "log-level: \"debug\n",
		  3, "YAML syntax error: found unexpected end of stream" },
		{ "log-level: info\n"
		  "  peer-routers: 2\n",
		  2, "YAML syntax error: mapping values are not allowed" },
		{ "log-level: info\n"
		  "bad: \xff\xfe\n",
		  2, "YAML syntax error: invalid" },
		{ "log-level: info\n"
		  "---\n"
		  "log-level: debug\n",
		  3, "only one YAML document is allowed" },
	};
	char prefix[PATH_MAX + 32];
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rc = load_yaml(t[i].yaml, ARGS(BASE), &c);
		snprintf(prefix, sizeof(prefix), "%s:%d: ", yaml_path, t[i].line);
		CHECK(rc == STEER_CONFIG_USAGE && !strchr(err, '\n'), "case %zu: rc=%d", i, rc);
		CHECK(!strncmp(err, prefix, strlen(prefix)) && strstr(err, t[i].needle),
		      "case %zu: err '%s', want '%s...%s'", i, err, prefix, t[i].needle);
	}
}

/* The flag's --vip replaces the file's service of that vip, knobs included. */
static void test_yaml_flag_vip_replaces(void)
{
	static const char yaml[] = "least-load-kv-pressure-weight: 0.3\n"
				   "services:\n"
				   "  - vip: 127.0.0.100:8000\n"
				   "    least-load-kv-pressure-weight: 0.9\n"
				   "    backends: [127.0.0.11:8000, 127.0.0.12:8000]\n"
				   "  - vip: 127.0.0.101:8000\n"
				   "    backends: [127.0.0.13:8000]\n";
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc = load_yaml(yaml, ARGS("--vip", "127.0.0.100:8000", "--backend", "127.0.0.21:8000"),
			   &c);

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.n_services == 2, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(addr_is(&s->vip, "127.0.0.100:8000") && s->n_backends == 1 &&
		      addr_is(&s->backends[0].addr, "127.0.0.21:8000"),
	      "replaced in place: %s with %zu backends", s->vip_str, s->n_backends);
	CHECK(s->policy.kv_pressure_weight == 0.3, "the file's service knob went with it: %g",
	      s->policy.kv_pressure_weight);
	s = &c.services[1];
	CHECK(addr_is(&s->vip, "127.0.0.101:8000") && s->n_backends == 1 &&
		      addr_is(&s->backends[0].addr, "127.0.0.13:8000"),
	      "other service kept");
	steer_config_free(&c);

	rc = load_yaml(yaml, ARGS("--vip", "127.0.0.102:8000", "--backend", "127.0.0.21:8000"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_services == 3, "a new vip joins: rc=%d err=%s", rc, err);
	CHECK(addr_is(&c.services[2].vip, "127.0.0.102:8000"), "appended last");
	CHECK(service_of(&c, "127.0.0.100:8000")->n_backends == 2, "file service intact");
	steer_config_free(&c);
}

static void test_yaml_several_services_ipv6(void)
{
	static const char yaml[] = "services:\n"
				   "  - vip: \"[::1]:8000\"\n"
				   "    backends:\n"
				   "      - \"[::1]:9001\"\n"
				   "      - address: \"[2001:db8::2]:9002\"\n"
				   "        loads: 127.0.0.1:30000\n"
				   "  - vip: 127.0.0.100:8000\n"
				   "    backends:\n"
				   "      - 127.0.0.11:8000\n"
				   "  - vip: '[2001:db8::100]:80'\n"
				   "    backends: ['[2001:db8::1]:80']\n";
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc = load_yaml(yaml, NULL, &c);

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.n_services == 3, "%zu services", c.n_services);
	s = &c.services[0];
	CHECK(!strcmp(s->vip_str, "[::1]:8000") && !steer_addr_is_v4(&s->vip), "vip %s",
	      s->vip_str);
	CHECK(s->n_backends == 2 && !strcmp(s->backends[1].addr_str, "[2001:db8::2]:9002") &&
		      !strcmp(s->backends[1].loads_str, "127.0.0.1:30000"),
	      "v6 backend with a v4 load endpoint");
	CHECK(!strcmp(c.services[1].vip_str, "127.0.0.100:8000") &&
		      !strcmp(c.services[2].vip_str, "[2001:db8::100]:80"),
	      "file order kept");
	steer_config_free(&c);
}

static void test_yaml_duplicates_and_family(void)
{
	static const struct {
		const char *yaml;
		int line;
		const char *msg;
	} t[] = {
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends:\n"
		  "      - 127.0.0.11:8000\n"
		  "      - address: 127.0.0.11:8000\n"
		  "        loads: 127.0.0.11:30000\n",
		  5, "service 127.0.0.100:8000: backend 127.0.0.11:8000 is listed twice" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: [127.0.0.11:8000]\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: [127.0.0.12:8000]\n",
		  4, "vip 127.0.0.100:8000 is listed twice (first at line 2)" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    backends: [127.0.0.11:8000, '[::1]:8000']\n",
		  3,
		  "backend [::1]:8000 is IPv6 but the service's vip "
		  "127.0.0.100:8000 is IPv4" },
		{ "services:\n"
		  "  - backends:\n"
		  "      - 127.0.0.11:8000\n"
		  "    vip: '[::1]:8000'\n",
		  3,
		  "backend 127.0.0.11:8000 is IPv4 but the service's vip [::1]:8000 "
		  "is IPv6" },
		{ "services:\n"
		  "  - vip: 127.0.0.100:8000\n"
		  "    vip: 127.0.0.101:8000\n"
		  "    backends: [127.0.0.11:8000]\n",
		  3, "duplicate key 'vip'" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		rc = load_yaml(t[i].yaml, NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE, "case %zu: rc=%d", i, rc);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
	/* The same backend in two services is fine. */
	rc = load_yaml("services:\n"
		       "  - {vip: 127.0.0.100:8000, backends: [127.0.0.11:8000]}\n"
		       "  - {vip: 127.0.0.101:8000, backends: [127.0.0.11:8000]}\n",
		       NULL, &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_services == 2, "rc=%d err=%s", rc, err);
	steer_config_free(&c);
}

/* An empty file, or one without services, is fine when the flags give one. */
static void test_yaml_empty_and_no_services(void)
{
	static const char *const texts[] = { "", "# nothing yet\n", "log-level: warn\n" };
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		rc = load_yaml(texts[i], ARGS(BASE), &c);
		CHECK(rc == STEER_CONFIG_OK && c.n_services == 1, "case %zu: rc=%d err=%s", i, rc,
		      err);
		steer_config_free(&c);
		rc = load_yaml(texts[i], NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "no service configured"),
		      "case %zu without flags: rc=%d err=%s", i, rc, err);
	}
}

static void test_yaml_unreadable(void)
{
	struct steer_config c;
	char expect[PATH_MAX + 64];
	int rc = load_with(ARGS(BASE), tmpdir, &c);

	snprintf(expect, sizeof(expect), "%s: cannot read: Is a directory", tmpdir);
	CHECK(rc == STEER_CONFIG_USAGE && !strcmp(err, expect), "directory: rc=%d err=%s", rc, err);
}

/* A config file is small; reading stops after 1 MiB (think of /dev/zero). */
static void test_yaml_too_large(void)
{
	size_t len = (1 << 20) + 1;
	char *text = malloc(len + 1), expect[PATH_MAX + 64];
	struct steer_config c;
	int rc;

	CHECK(text, "malloc");
	memset(text, '#', len); /* one long comment */
	text[len] = 0;
	rc = load_yaml(text, ARGS(BASE), &c);
	snprintf(expect, sizeof(expect), "%s: larger than 1048576 bytes", yaml_path);
	if (rc != STEER_CONFIG_USAGE || strcmp(err, expect))
		free(text);
	CHECK(rc == STEER_CONFIG_USAGE && !strcmp(err, expect), "rc=%d err=%s", rc, err);
	text[len - 1] = 0; /* exactly 1 MiB is fine */
	rc = load_yaml(text, ARGS(BASE), &c);
	free(text);
	CHECK(rc == STEER_CONFIG_OK, "1 MiB: rc=%d err=%s", rc, err);
	steer_config_free(&c);
}

static void test_yaml_service_limit(void)
{
	size_t cap = 64 + STEER_MAX_SERVICES * 80, len = 0;
	char *text = malloc(cap);
	struct steer_config c;
	int i, rc;

	CHECK(text, "malloc");
	len += (size_t)snprintf(text + len, cap - len, "services:\n");
	for (i = 0; i < STEER_MAX_SERVICES; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"  - {vip: 127.0.1.%d:8000, backends: [127.0.0.11:8000]}\n",
					i + 1);
	rc = load_yaml(text, ARGS("--vip", "127.0.1.1:8000", "--backend", "127.0.0.12:8000"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.n_services == STEER_MAX_SERVICES,
	      "%d services, one replaced by the flags: rc=%d err=%s", STEER_MAX_SERVICES, rc, err);
	steer_config_free(&c);
	rc = load_yaml(text, ARGS("--vip", "127.0.2.1:8000", "--backend", "127.0.0.12:8000"), &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "--vip: ") && strstr(err, "64"),
	      "a 65th from the flags: rc=%d err=%s", rc, err);
	snprintf(text + len, cap - len, "  - {vip: 127.0.2.1:8000, backends: [127.0.0.11:8000]}\n");
	rc = load_yaml(text, NULL, &c);
	free(text);
	CHECK(rc == STEER_CONFIG_USAGE &&
		      file_err_is(STEER_MAX_SERVICES + 2, "services: at most 64 services"),
	      "a 65th in the file: rc=%d err=%s", rc, err);
}

/* SIGHUP: the same argv reads the file as it is now. */
static void test_yaml_reload(void)
{
	static struct steer_config a, b, before;
	const char *argv[] = { "smg-steerd", "--config", yaml_path, NULL };
	int rc;

	CHECK(!write_file(yaml_path, "services: [{vip: 127.0.0.100:8000, backends: "
				     "[127.0.0.11:8000]}]\n"),
	      "write");
	rc = steer_config_load(3, (char *const *)argv, &a, err, sizeof(err));
	write_file(yaml_path, "log-level: error\n"
			      "services: [{vip: 127.0.0.100:8000, backends: "
			      "[127.0.0.11:8000, 127.0.0.12:8000]}]\n");
	if (rc == STEER_CONFIG_OK)
		rc = steer_config_load(3, (char *const *)argv, &b, err, sizeof(err));
	unlink(yaml_path);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(a.services[0].n_backends == 1 && b.services[0].n_backends == 2 &&
		      a.log_level == STEER_LOG_INFO && b.log_level == STEER_LOG_ERROR,
	      "the reload sees the new file");
	steer_config_free(&a);

	/* A broken file leaves the running configuration (here b) alone. */
	before = b;
	write_file(yaml_path, "services: [\n");
	rc = steer_config_load(3, (char *const *)argv, &b, err, sizeof(err));
	unlink(yaml_path);
	CHECK(rejected(rc, &before, &b), "rc=%d err=%s", rc, err);
	steer_config_free(&b);
}

/* A max age not above the interval would expire every table between publishes. */
static void test_max_age_must_exceed_the_interval(void)
{
	struct steer_config c;
	char err[512];
	char *a1[] = { "smg-steerd",   "--vip",
		       "127.0.0.1:80", "--backend",
		       "127.0.0.2:80", "--load-check-interval",
		       "2s",	       "--snapshot-max-age",
		       "2s",	       NULL };
	char *a2[] = { "smg-steerd",   "--vip",
		       "127.0.0.1:80", "--backend",
		       "127.0.0.2:80", "--load-check-interval",
		       "2s",	       "--snapshot-max-age",
		       "2500ms",       NULL };
	int rc;

	rc = steer_config_load(9, a1, &c, err, sizeof(err));
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "--snapshot-max-age") &&
		      strstr(err, "load-check-interval"),
	      "rc=%d err=%s", rc, err);
	rc = steer_config_load(9, a2, &c, err, sizeof(err));
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	steer_config_free(&c);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();

	TAP_RUN(test_defaults);
	TAP_RUN(test_every_flag);
	TAP_RUN(test_derived_defaults);
	TAP_RUN(test_duration_table);
	TAP_RUN(test_flag_errors);
	TAP_RUN(test_backend_limit);
	TAP_RUN(test_help_version);
	TAP_RUN(test_reentrant);
	TAP_RUN(test_null_err);
	TAP_RUN(test_yaml_full_example);
	TAP_RUN(test_yaml_shipped_example);
	TAP_RUN(test_yaml_precedence);
	TAP_RUN(test_affinity);
	TAP_RUN(test_yaml_unknown_key_line);
	TAP_RUN(test_yaml_wrong_type_line);
	TAP_RUN(test_yaml_syntax_error);
	TAP_RUN(test_yaml_flag_vip_replaces);
	TAP_RUN(test_yaml_several_services_ipv6);
	TAP_RUN(test_yaml_duplicates_and_family);
	TAP_RUN(test_yaml_empty_and_no_services);
	TAP_RUN(test_yaml_unreadable);
	TAP_RUN(test_yaml_too_large);
	TAP_RUN(test_yaml_service_limit);
	TAP_RUN(test_yaml_reload);
	TAP_RUN(test_max_age_must_exceed_the_interval);
	return tap_done();
}
