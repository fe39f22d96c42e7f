// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_dns.c - backends found through DNS in the configuration:
 * --backend-dns NAME:PORT[,loads=[SCHEME://]:PORT[/path]][,engine=E][,auth=...]
 * as a flag, a YAML scalar and a YAML mapping {name, loads, engine, auth};
 * --dns-interval and --dns-server as flags and top-level keys; every
 * malformed form refused with the field named; services with only DNS
 * names, and mixed with literal backends; --check-config's summary; and
 * the backend a resolved address makes (steer_config_dns_backend).
 *
 * No privileges needed. Files live in a mkdtemp directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config_testlib.h"
#include "loads/loads.h"

#define VIP4 "--vip", "127.0.0.100:8000"
#define N(a) (sizeof(a) / sizeof((a)[0]))

static char token_path[128];

/* ---- Accepted forms ----------------------------------------------------------------------- */

static const struct good_dns {
	const char *spec;
	const char *name;
	uint16_t port, loads_port;
	enum steer_scheme scheme;
	const char *path;
	enum steer_engine engine;
} good[] = {
	{ "workers.test:8000", "workers.test", 8000, 8000, STEER_SCHEME_AUTO, "",
	  STEER_ENGINE_AUTO },
	{ "workers.test:8000,loads=grpc://:30000", "workers.test", 8000, 30000, STEER_SCHEME_GRPC,
	  "", STEER_ENGINE_AUTO },
	{ "workers.test:8000,loads=:30000", "workers.test", 8000, 30000, STEER_SCHEME_GRPC, "",
	  STEER_ENGINE_AUTO },
	{ "workers.test:8000,loads=http://:8001/metrics,engine=vllm", "workers.test", 8000, 8001,
	  STEER_SCHEME_HTTP, "/metrics", STEER_ENGINE_VLLM },
	{ "workers.test:8000,loads=http://:8000", "workers.test", 8000, 8000, STEER_SCHEME_HTTP, "",
	  STEER_ENGINE_AUTO },
	{ "sglang-0.sglang-workers.sglang.svc.cluster.local.:30000,engine=sglang",
	  "sglang-0.sglang-workers.sglang.svc.cluster.local.", 30000, 30000, STEER_SCHEME_AUTO, "",
	  STEER_ENGINE_SGLANG },
	{ "localhost:1", "localhost", 1, 1, STEER_SCHEME_AUTO, "", STEER_ENGINE_AUTO },
	{ "A-1.b2.C:65535,loads=http://:9/v1/loads?include=core", "A-1.b2.C", 65535, 9,
	  STEER_SCHEME_HTTP, "/v1/loads?include=core", STEER_ENGINE_AUTO },
};

static int dns_is(const struct steer_dns_backend_cfg *e, const struct good_dns *g)
{
	char spec[STEER_DNS_SPEC_LEN];

	snprintf(spec, sizeof(spec), "%s:%u", g->name, g->port);
	return !strcmp(e->name, g->name) && e->port == g->port && e->loads_port == g->loads_port &&
	       e->tmpl.loads_scheme == g->scheme && !strcmp(e->tmpl.loads_path, g->path) &&
	       e->tmpl.engine == (int)g->engine && e->tmpl.auth == 0 && !strcmp(e->spec, spec);
}

static int load_dns_yaml_scalar(const char *spec, struct steer_config *cfg)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "services:\n"
		 "  - vip: 127.0.0.100:8000\n"
		 "    backend-dns: ['%s']\n",
		 spec);
	return load_yaml(text, NULL, cfg);
}

/* The flag and the YAML scalar accept the same forms, with the same meaning. */
static void test_forms_flag_and_scalar(void)
{
	struct steer_config a, b;
	size_t i;
	int rc;

	for (i = 0; i < N(good); i++) {
		rc = LOAD(&a, VIP4, "--backend-dns", good[i].spec);
		CHECK(rc == STEER_CONFIG_OK, "%s: rc=%d err=%s", good[i].spec, rc, err);
		CHECK(a.n_services == 1 && a.services[0].n_backends == 0 &&
			      a.services[0].n_dns == 1,
		      "%s: %zu backends %zu names", good[i].spec, a.services[0].n_backends,
		      a.services[0].n_dns);
		CHECK(dns_is(&a.services[0].dns[0], &good[i]),
		      "%s: name %s port %u loads %u scheme %d path '%s' engine %d", good[i].spec,
		      a.services[0].dns[0].name, a.services[0].dns[0].port,
		      a.services[0].dns[0].loads_port, a.services[0].dns[0].tmpl.loads_scheme,
		      a.services[0].dns[0].tmpl.loads_path, a.services[0].dns[0].tmpl.engine);
		rc = load_dns_yaml_scalar(good[i].spec, &b);
		if (rc != STEER_CONFIG_OK)
			steer_config_free(&a);
		CHECK(rc == STEER_CONFIG_OK, "yaml %s: rc=%d err=%s", good[i].spec, rc, err);
		rc = memcmp(&a.services[0].dns[0], &b.services[0].dns[0],
			    sizeof(struct steer_dns_backend_cfg));
		steer_config_free(&a);
		steer_config_free(&b);
		CHECK(rc == 0, "%s: the scalar differs from the flag", good[i].spec);
	}
}

static void test_mapping_form(void)
{
	char text[1024];
	struct steer_config c;
	const struct steer_dns_backend_cfg *e;
	int rc;

	snprintf(text, sizeof(text),
		 "services:\n"
		 "  - vip: 127.0.0.100:8000\n"
		 "    backends: [127.0.0.11:8000]\n"
		 "    backend-dns:\n"
		 "      - name: workers.test:8000\n"
		 "        loads: http://:9000/metrics\n"
		 "        engine: vllm\n"
		 "        auth: bearer:%s\n"
		 "      - other.test:8000\n",
		 token_path);
	rc = load_yaml(text, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	e = &c.services[0].dns[0];
	rc = c.services[0].n_backends == 1 && c.services[0].n_dns == 2 &&
	     !strcmp(e->spec, "workers.test:8000") && e->loads_port == 9000 &&
	     e->tmpl.loads_scheme == STEER_SCHEME_HTTP && !strcmp(e->tmpl.loads_path, "/metrics") &&
	     e->tmpl.engine == STEER_ENGINE_VLLM && e->tmpl.auth == 1 && c.n_auths == 1 &&
	     !strcmp(c.services[0].dns[1].spec, "other.test:8000");
	steer_config_free(&c);
	CHECK(rc, "mapping form not read as written");
}

/* Mixed literal and DNS backends; the flags' service replaces the file's with its VIP. */
static void test_mixed_and_flags_override(void)
{
	struct steer_config c;
	const struct steer_service_cfg *s;
	int rc;

	rc = load_yaml("services:\n"
		       "  - vip: 127.0.0.100:8000\n"
		       "    backend-dns: [file.test:8000]\n"
		       "  - vip: 127.0.0.101:8000\n"
		       "    backend-dns: [kept.test:8000]\n",
		       ARGS(VIP4, "--backend", "127.0.0.11:8000", "--backend-dns", "flag.test:8000",
			    "--backend-dns", "flag.test:9000"),
		       &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	s = service_of(&c, "127.0.0.100:8000");
	rc = s && s->n_backends == 1 && s->n_dns == 2 &&
	     !strcmp(s->dns[0].spec, "flag.test:8000") && !strcmp(s->dns[1].spec, "flag.test:9000");
	s = service_of(&c, "127.0.0.101:8000");
	rc = rc && s && s->n_backends == 0 && s->n_dns == 1 && !strcmp(s->dns[0].name, "kept.test");
	steer_config_free(&c);
	CHECK(rc, "services not as given");
}

/* ---- Refused forms ------------------------------------------------------------------------ */

static const struct bad_dns {
	const char *spec;
	const char *needles[2];
} bad[] = {
	{ "workers.test", { "'workers.test': the port is missing" } },
	{ "workers.test:0", { "'workers.test:0': port must be 1..65535" } },
	{ "workers.test:65536", { "port must be 1..65535" } },
	{ "workers.test:080", { "port must be 1..65535" } },
	{ "workers.test:+80", { "port must be 1..65535" } },
	{ ":8000", { "the name is empty" } },
	{ "127.0.0.11:8000", { "'127.0.0.11' is an IP address, not a name", "--backend" } },
	{ "[::1]:8000", { "is an IP address, not a name" } },
	{ "::1:8000", { "is an IP address, not a name" } },
	{ "work_ers.test:8000", { "'work_ers.test' is not a DNS name", "'_'" } },
	{ "workers..test:8000", { "an empty label" } },
	{ ".workers.test:8000", { "an empty label" } },
	{ "-w.test:8000", { "starts or ends with '-'" } },
	{ "w-.test:8000", { "starts or ends with '-'" } },
	{ "w .test:8000", { "is not a DNS name", "' '" } },
	{ "workers.test:8000,loads=10.0.0.1:30000",
	  { "loads: '10.0.0.1:30000'", "give the port without a host" } },
	{ "workers.test:8000,loads=grpc://workers.test:30000", { "without a host" } },
	{ "workers.test:8000,loads=grpc://:30000/metrics", { "a path (/metrics) needs http://" } },
	{ "workers.test:8000,loads=https://:30000", { "unknown scheme 'https://'" } },
	{ "workers.test:8000,loads=http://:0/metrics", { "port must be 1..65535" } },
	{ "workers.test:8000,loads=http://:8000/a b", { "character" } },
	{ "workers.test:8000,loads=:", { "port must be 1..65535" } },
	{ "workers.test:8000,engine=triton", { "engine: 'triton' is not one of" } },
	{ "workers.test:8000,auth=basic:/x", { "auth: 'basic:/x' is not bearer:FILE" } },
	{ "workers.test:8000,address=1", { "unknown key 'address'", "loads, engine, auth" } },
	{ "workers.test:8000,engine=vllm,engine=sglang", { "engine= is given twice" } },
	{ "workers.test:8000,", { "'' is not KEY=VALUE" } },
};

static void test_flag_errors(void)
{
	static struct steer_config before, after;
	size_t i, j;
	int rc;

	for (i = 0; i < N(bad); i++) {
		memset(&before, 0xa5, sizeof(before));
		after = before;
		rc = LOAD(&after, VIP4, "--backend-dns", bad[i].spec);
		CHECK(rejected(rc, &before, &after), "%s: rc=%d err=%s", bad[i].spec, rc, err);
		CHECK(!strncmp(err, "--backend-dns: ", 15), "%s: '%s' does not name the flag",
		      bad[i].spec, err);
		CHECK(strstr(err, "expected NAME:PORT[,loads=[grpc://|http://]:PORT[/path]]"),
		      "%s: '%s' lacks the form", bad[i].spec, err);
		for (j = 0; j < 2 && bad[i].needles[j]; j++)
			CHECK(strstr(err, bad[i].needles[j]), "%s: '%s' not in '%s'", bad[i].spec,
			      bad[i].needles[j], err);
	}
}

static void test_name_lengths(void)
{
	char name[300], spec[320];
	struct steer_config c;
	int rc;

	/* A 63-byte label is fine, 64 is not. */
	memset(name, 'a', 63);
	strcpy(name + 63, ".test");
	snprintf(spec, sizeof(spec), "%s:80", name);
	rc = LOAD(&c, VIP4, "--backend-dns", spec);
	CHECK(rc == STEER_CONFIG_OK, "63-byte label: %s", err);
	steer_config_free(&c);
	memset(name, 'a', 64);
	strcpy(name + 64, ".test");
	snprintf(spec, sizeof(spec), "%s:80", name);
	rc = LOAD(&c, VIP4, "--backend-dns", spec);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "a label of 64 bytes (at most 63)"),
	      "64-byte label: rc=%d err=%s", rc, err);
	/* 253 bytes in all (a trailing dot aside), not 254. */
	memset(name, 'a', 253);
	for (rc = 63; rc < 253; rc += 64)
		name[rc] = '.';
	name[253] = 0;
	snprintf(spec, sizeof(spec), "%s.:80", name);
	rc = LOAD(&c, VIP4, "--backend-dns", spec);
	CHECK(rc == STEER_CONFIG_OK, "253 bytes and a dot: %s", err);
	steer_config_free(&c);
	name[253] = 'a';
	name[254] = 0;
	snprintf(spec, sizeof(spec), "%s:80", name);
	rc = LOAD(&c, VIP4, "--backend-dns", spec);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "254 bytes long, at most 253"),
	      "254 bytes: rc=%d err=%s", rc, err);
}

static void test_service_rules(void)
{
	static const struct {
		const char *args[8];
		const char *needle;
	} cases[] = {
		{ { "--backend-dns", "w.test:80" }, "--backend-dns requires --vip ADDR:PORT" },
		{ { VIP4 }, "at least one --backend ADDR:PORT or --backend-dns NAME:PORT" },
		{ { VIP4, "--backend-dns", "w.test:80", "--backend-dns", "W.TEST.:80" },
		  "--backend-dns: backend-dns W.TEST.:80 is listed twice" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < N(cases); i++) {
		rc = load_with(cases[i].args, NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, cases[i].needle),
		      "case %zu: rc=%d err=%s", i, rc, err);
	}
	/* The same name on another port is another set of backends. */
	rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80", "--backend-dns", "w.test:81");
	CHECK(rc == STEER_CONFIG_OK && c.services[0].n_dns == 2, "rc=%d err=%s", rc, err);
	steer_config_free(&c);
}

static void test_per_service_limit(void)
{
	static char specs[STEER_DNS_PER_SERVICE + 1][32];
	const char *args[2 * STEER_DNS_PER_SERVICE + 8];
	struct steer_config c;
	int n = 0, i, rc;

	args[n++] = "--vip";
	args[n++] = "127.0.0.100:8000";
	for (i = 0; i < STEER_DNS_PER_SERVICE; i++) {
		snprintf(specs[i], sizeof(specs[i]), "w%d.test:80", i);
		args[n++] = "--backend-dns";
		args[n++] = specs[i];
	}
	args[n] = NULL;
	rc = load_with(args, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "%d names: %s", STEER_DNS_PER_SERVICE, err);
	steer_config_free(&c);
	snprintf(specs[i], sizeof(specs[i]), "w%d.test:80", i);
	args[n++] = "--backend-dns";
	args[n++] = specs[i];
	args[n] = NULL;
	rc = load_with(args, NULL, &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "at most 32 DNS names per service"),
	      "rc=%d err=%s", rc, err);
}

static const struct bad_yaml {
	const char *yaml;
	int line;
	const char *msg;
} bad_yaml[] = {
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns: w.test:80\n", 3,
	  "backend-dns: expected a list, got a single value" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns:\n      - loads: :1\n", 4,
	  "backend-dns entry without 'name' (NAME:PORT)" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns:\n"
	  "      - {name: w.test:80, address: 1}\n",
	  4, "unknown key 'address' in backend-dns (expected name, loads, engine, auth)" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns:\n"
	  "      - {name: w_x.test:80}\n",
	  4, "name: 'w_x.test' is not a DNS name: '_' (labels are letters, digits and '-')" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns:\n"
	  "      - name: w.test:80\n        loads: grpc://1.2.3.4:5\n",
	  5,
	  "backend-dns w.test:80: loads: 'grpc://1.2.3.4:5': each resolved address serves its own "
	  "load, so give the port without a host, e.g. grpc://:30000 or http://:8000/metrics; "
	  "expected [grpc://|http://]:PORT[/path]" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns: [w.test:80, W.test:80]\n", 3,
	  "service 127.0.0.100:8000: backend-dns W.test:80 is listed twice" },
	{ "services:\n  - vip: 127.0.0.100:8000\n    backend-dns: []\n", 3,
	  "service 127.0.0.100:8000 has no backends (at least one is required)" },
	{ "dns-interval: 50ms\nservices: []\n", 1,
	  "dns-interval: must be between 100ms and 1h, got '50ms'" },
	{ "dns-server: 'ns1.example:53'\nservices: []\n", 1,
	  "dns-server: 'ns1.example:53' is not IPV4[:PORT] or [IPV6][:PORT] (a name needs a "
	  "resolver: give an address)" },
};

static void test_yaml_errors(void)
{
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < N(bad_yaml); i++) {
		rc = load_yaml(bad_yaml[i].yaml, NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE && file_err_is(bad_yaml[i].line, bad_yaml[i].msg),
		      "case %zu: rc=%d err '%s', want line %d '%s'", i, rc, err, bad_yaml[i].line,
		      bad_yaml[i].msg);
	}
}

/* ---- --dns-interval, --dns-server ------------------------------------------------------------- */

static void test_dns_interval(void)
{
	static const struct {
		const char *v;
		uint64_t ns;
	} ok[] = { { "100ms", 100 * NS_PER_MS },
		   { "5s", 5 * NS_PER_S },
		   { "1h", 3600 * NS_PER_S } };
	static const char *const refused[] = { "99ms", "61m", "0", "-1s", "5", "fast" };
	struct steer_config c;
	size_t i;
	int rc;

	rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80");
	CHECK(rc == STEER_CONFIG_OK && c.dns_interval_ns == 5 * NS_PER_S && !c.dns_servers[0],
	      "defaults: rc=%d interval %llu servers '%s'", rc,
	      (unsigned long long)c.dns_interval_ns, c.dns_servers);
	steer_config_free(&c);
	for (i = 0; i < N(ok); i++) {
		rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80", "--dns-interval", ok[i].v);
		CHECK(rc == STEER_CONFIG_OK && c.dns_interval_ns == ok[i].ns, "%s: rc=%d %s",
		      ok[i].v, rc, err);
		steer_config_free(&c);
	}
	for (i = 0; i < N(refused); i++) {
		rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80", "--dns-interval", refused[i]);
		CHECK(rc == STEER_CONFIG_USAGE && !strncmp(err, "--dns-interval: ", 16),
		      "%s: rc=%d err=%s", refused[i], rc, err);
	}
	/* The flag overrides the file. */
	rc = load_yaml("dns-interval: 2s\ndns-server: 192.0.2.53\n",
		       ARGS(VIP4, "--backend-dns", "w.test:80", "--dns-interval", "300ms"), &c);
	CHECK(rc == STEER_CONFIG_OK && c.dns_interval_ns == 300 * NS_PER_MS &&
		      !strcmp(c.dns_servers, "192.0.2.53:53"),
	      "rc=%d interval %llu servers %s", rc, (unsigned long long)c.dns_interval_ns,
	      c.dns_servers);
	steer_config_free(&c);
}

static void test_dns_server(void)
{
	static const struct {
		const char *v, *as;
	} ok[] = {
		{ "127.0.0.53:5353", "127.0.0.53:5353" },
		{ "192.0.2.1", "192.0.2.1:53" },
		{ "2001:db8::53", "[2001:db8::53]:53" },
		{ "[2001:db8::53]", "[2001:db8::53]:53" },
		{ "[2001:db8::53]:5353,192.0.2.1,::1",
		  "[2001:db8::53]:5353,192.0.2.1:53,[::1]:53" },
	};
	static const struct {
		const char *v, *needle;
	} refused[] = {
		{ "", "expected ADDR[:PORT]" },
		{ "kube-dns.kube-system",
		  "'kube-dns.kube-system' is not IPV4[:PORT] or [IPV6][:PORT]" },
		{ "192.0.2.1,,192.0.2.2", "an empty server in the list" },
		{ "192.0.2.1,", "an empty server in the list" },
		{ "192.0.2.1:0", "is not IPV4[:PORT]" },
		{ "192.0.2.1:053", "is not IPV4[:PORT]" },
		{ "[2001:db8::53", "is not IPV4[:PORT]" },
		{ "0.0.0.0", "cannot be a DNS server: it is unspecified" },
		{ "224.0.0.251", "cannot be a DNS server: it is multicast" },
	};
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < N(ok); i++) {
		rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80", "--dns-server", ok[i].v);
		CHECK(rc == STEER_CONFIG_OK && !strcmp(c.dns_servers, ok[i].as),
		      "%s: rc=%d err=%s servers '%s'", ok[i].v, rc, err, c.dns_servers);
		steer_config_free(&c);
	}
	for (i = 0; i < N(refused); i++) {
		rc = LOAD(&c, VIP4, "--backend-dns", "w.test:80", "--dns-server", refused[i].v);
		CHECK(rc == STEER_CONFIG_USAGE && !strncmp(err, "--dns-server: ", 14) &&
			      strstr(err, refused[i].needle),
		      "'%s': rc=%d err=%s", refused[i].v, rc, err);
	}
}

/* ---- What a resolved address makes ------------------------------------------------------------ */

static void test_backend_from_address(void)
{
	struct steer_config c;
	struct steer_backend_cfg b;
	struct steer_addr ip;
	char why[256];
	int rc;

	rc = LOAD(&c, VIP4, "--backend-dns", "w.test:8000,loads=http://:9000/metrics,engine=vllm",
		  "--backend-dns", "v.test:8001");
	CHECK(rc == STEER_CONFIG_OK, "%s", err);
	steer_addr_parse("192.0.2.7:0", &ip, NULL, 0);
	rc = steer_config_dns_backend(&c.services[0].dns[0], &ip, &b, why, sizeof(why));
	CHECK(rc == 0 && !strcmp(b.addr_str, "192.0.2.7:8000") &&
		      !strcmp(b.loads_str, "192.0.2.7:9000") &&
		      addr_is(&b.addr, "192.0.2.7:8000") && addr_is(&b.loads, "192.0.2.7:9000") &&
		      b.loads_scheme == STEER_SCHEME_HTTP && !strcmp(b.loads_path, "/metrics") &&
		      b.engine == STEER_ENGINE_VLLM,
	      "rc=%d addr %s loads %s", rc, b.addr_str, b.loads_str);
	/* Without loads=: auto on the traffic port, as a literal backend. */
	steer_addr_parse("[2001:db8::7]:0", &ip, NULL, 0);
	rc = steer_config_dns_backend(&c.services[0].dns[1], &ip, &b, why, sizeof(why));
	CHECK(rc == 0 && !strcmp(b.addr_str, "[2001:db8::7]:8001") &&
		      !strcmp(b.loads_str, "[2001:db8::7]:8001") &&
		      b.loads_scheme == STEER_SCHEME_AUTO && !b.loads_path[0],
	      "rc=%d addr %s loads %s", rc, b.addr_str, b.loads_str);
	/* An address no connection can go to. */
	steer_addr_parse("0.0.0.0:0", &ip, NULL, 0);
	rc = steer_config_dns_backend(&c.services[0].dns[0], &ip, &b, why, sizeof(why));
	CHECK(rc == -1 && strstr(why, "0.0.0.0:8000 is unspecified"), "rc=%d why=%s", rc, why);
	steer_addr_parse("[ff02::1]:0", &ip, NULL, 0);
	rc = steer_config_dns_backend(&c.services[0].dns[0], &ip, &b, why, sizeof(why));
	steer_config_free(&c);
	CHECK(rc == -1 && strstr(why, "multicast"), "rc=%d why=%s", rc, why);
}

/* ---- --check-config and --help ------------------------------------------------------------------ */

static int print_summary(void *arg)
{
	steer_config_summary(stdout, arg);
	return 0;
}

static void test_summary(void)
{
	char spec[PATH_MAX + 64], expect[PATH_MAX + 1024];
	struct steer_config c;
	char *out;
	int rc;

	snprintf(spec, sizeof(spec), "w.test:8000,loads=http://:9000/metrics,auth=bearer:%s",
		 token_path);
	rc = LOAD(&c, VIP4, "--backend", "127.0.0.11:8000", "--backend-dns", spec, "--backend-dns",
		  "v.test.:8001,loads=grpc://:30000,engine=sglang", "--backend-dns", "u.test:8002",
		  "--dns-interval", "1500ms", "--dns-server", "127.0.0.53:5353");
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	out = capture_stdout(print_summary, &c, &rc);
	steer_config_free(&c);
	CHECK(out, "no output");
	snprintf(expect, sizeof(expect),
		 "configuration ok: 1 service(s), 1 backend(s), 3 DNS name(s)\n"
		 "  dns: each name looked up every 1500ms (or its records' TTL, if longer), "
		 "servers: 127.0.0.53:5353\n"
		 "  127.0.0.100:8000: 1 backend(s), 3 DNS name(s)\n"
		 "    backend 127.0.0.11:8000: loads auto on 127.0.0.11:8000, engine auto\n"
		 "    backend-dns w.test:8000: loads http://:9000/metrics, engine auto, auth: %s\n"
		 "    backend-dns v.test.:8001: loads grpc://:30000, engine sglang\n"
		 "    backend-dns u.test:8002: loads auto on :8002, engine auto\n",
		 token_path);
	rc = !strcmp(out, expect);
	if (!rc)
		printf("# got:\n%s", out);
	free(out);
	CHECK(rc, "summary differs from\n%s", expect);
}

static int run_help(void *arg)
{
	struct steer_config c;

	(void)arg;
	return load_with(ARGS("--help"), NULL, &c);
}

static void test_help(void)
{
	static const char *const needles[] = {
		"--backend-dns NAME:PORT", "loads=grpc://:30000", "--dns-interval DUR",
		"100ms..1h (default 5s)",  "--dns-server",	  "/etc/resolv.conf",
	};
	char *out;
	size_t i;
	int rc;

	out = capture_stdout(run_help, NULL, &rc);
	CHECK(out && rc == STEER_CONFIG_EXIT, "rc=%d", rc);
	for (i = 0; i < N(needles) && strstr(out, needles[i]); i++)
		;
	free(out);
	CHECK(i == N(needles), "--help lacks '%s'", needles[i]);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	snprintf(token_path, sizeof(token_path), "%s/token", tmpdir);
	if (write_file(token_path, "t0ken\n"))
		return tap_setup_failed();

	TAP_RUN(test_forms_flag_and_scalar);
	TAP_RUN(test_mapping_form);
	TAP_RUN(test_mixed_and_flags_override);
	TAP_RUN(test_flag_errors);
	TAP_RUN(test_name_lengths);
	TAP_RUN(test_service_rules);
	TAP_RUN(test_per_service_limit);
	TAP_RUN(test_yaml_errors);
	TAP_RUN(test_dns_interval);
	TAP_RUN(test_dns_server);
	TAP_RUN(test_backend_from_address);
	TAP_RUN(test_summary);
	TAP_RUN(test_help);
	unlink(token_path);
	return tap_done();
}
