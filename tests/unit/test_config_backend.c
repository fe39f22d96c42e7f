// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_backend.c - one backend as the flag, a YAML scalar and a YAML
 * mapping write it: loads=[SCHEME://]ADDR:PORT[/path], engine=, auth=bearer:FILE;
 * every malformed form refused with the key, the backend and the form; the
 * token files (trimmed, shared, bounded, re-read on reload, never printed);
 * and --check-config's summary of it all.
 *
 * No privileges needed. Files live in a mkdtemp directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config_testlib.h"
#include "loads/loads.h"

#define VIP4 "--vip", "127.0.0.100:8000"
#define SECRET "s3cr3t-t0ken.value"

static char token_path[128], token2_path[128];

/* Loads --vip 127.0.0.100:8000 --backend spec; the backend is cfg->services[0].backends[0]. */
static int load_backend(const char *spec, struct steer_config *cfg)
{
	return LOAD(cfg, VIP4, "--backend", spec);
}

/* The same backend as a YAML scalar of the file. */
static int load_backend_yaml_scalar(const char *spec, struct steer_config *cfg)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "services:\n"
		 "  - vip: 127.0.0.100:8000\n"
		 "    backends: ['%s']\n",
		 spec);
	return load_yaml(text, NULL, cfg);
}

/* ---- Accepted forms --------------------------------------------------------------------- */

static const struct good_case {
	const char *spec;
	enum steer_scheme scheme;
	const char *loads, *path;
	enum steer_engine engine;
} good[] = {
	{ "127.0.0.11:8000", STEER_SCHEME_AUTO, "127.0.0.11:8000", "", STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=127.0.0.11:30000", STEER_SCHEME_GRPC, "127.0.0.11:30000", "",
	  STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=grpc://127.0.0.11:30000", STEER_SCHEME_GRPC, "127.0.0.11:30000",
	  "", STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=http://127.0.0.11:8000", STEER_SCHEME_HTTP, "127.0.0.11:8000", "",
	  STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=http://127.0.0.11:8001/metrics", STEER_SCHEME_HTTP,
	  "127.0.0.11:8001", "/metrics", STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=http://127.0.0.11:8001/v1/loads?include=core", STEER_SCHEME_HTTP,
	  "127.0.0.11:8001", "/v1/loads?include=core", STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,loads=http://127.0.0.11:8000/a%2Fb", STEER_SCHEME_HTTP,
	  "127.0.0.11:8000", "/a%2Fb", STEER_ENGINE_AUTO },
	{ "127.0.0.11:8000,engine=vllm,loads=http://127.0.0.11:8001/metrics", STEER_SCHEME_HTTP,
	  "127.0.0.11:8001", "/metrics", STEER_ENGINE_VLLM },
	{ "127.0.0.11:8000,engine=tokenspeed", STEER_SCHEME_AUTO, "127.0.0.11:8000", "",
	  STEER_ENGINE_TOKENSPEED },
	{ "127.0.0.11:8000,engine=sglang,loads=127.0.0.12:30000", STEER_SCHEME_GRPC,
	  "127.0.0.12:30000", "", STEER_ENGINE_SGLANG },
	{ "127.0.0.11:8000,engine=auto", STEER_SCHEME_AUTO, "127.0.0.11:8000", "",
	  STEER_ENGINE_AUTO },
};

static int backend_is(const struct steer_backend_cfg *b, const struct good_case *g)
{
	return !strcmp(b->addr_str, "127.0.0.11:8000") && b->loads_scheme == g->scheme &&
	       !strcmp(b->loads_str, g->loads) && addr_is(&b->loads, g->loads) &&
	       !strcmp(b->loads_path, g->path) && b->engine == (int)g->engine && b->auth == 0;
}

/* The flag and the YAML scalar accept the same forms, with the same meaning. */
static void test_forms_flag_and_scalar(void)
{
	struct steer_config a, b;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		rc = load_backend(good[i].spec, &a);
		CHECK(rc == STEER_CONFIG_OK, "%s: rc=%d err=%s", good[i].spec, rc, err);
		CHECK(backend_is(&a.services[0].backends[0], &good[i]),
		      "%s: scheme %d loads %s path '%s' engine %d", good[i].spec,
		      a.services[0].backends[0].loads_scheme, a.services[0].backends[0].loads_str,
		      a.services[0].backends[0].loads_path, a.services[0].backends[0].engine);
		rc = load_backend_yaml_scalar(good[i].spec, &b);
		if (rc != STEER_CONFIG_OK)
			steer_config_free(&a);
		CHECK(rc == STEER_CONFIG_OK, "yaml %s: rc=%d err=%s", good[i].spec, rc, err);
		rc = memcmp(&a.services[0].backends[0], &b.services[0].backends[0],
			    sizeof(struct steer_backend_cfg));
		steer_config_free(&a);
		steer_config_free(&b);
		CHECK(rc == 0, "%s: the scalar differs from the flag", good[i].spec);
	}
}

static void test_forms_ipv6(void)
{
	struct steer_config c;
	const struct steer_backend_cfg *b;
	int rc = LOAD(&c, "--vip", "[::1]:8000", "--backend",
		      "[::1]:9001,loads=http://[::1]:9002/metrics,engine=vllm");

	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	b = &c.services[0].backends[0];
	CHECK(b->loads_scheme == STEER_SCHEME_HTTP && !strcmp(b->loads_str, "[::1]:9002") &&
		      !strcmp(b->loads_path, "/metrics") && b->engine == STEER_ENGINE_VLLM,
	      "scheme %d loads %s path %s", b->loads_scheme, b->loads_str, b->loads_path);
	steer_config_free(&c);
}

/* ---- Refused forms ---------------------------------------------------------------------- */

static const struct bad_backend {
	const char *spec;
	const char *needles[2];
} bad[] = {
	{ "127.0.0.12:8000,load=127.0.0.12:1", { "unknown key 'load'", "loads, engine, auth" } },
	{ "127.0.0.12:8000,loads=127.0.0.12:1,loads=127.0.0.12:2", { "loads= is given twice" } },
	{ "127.0.0.12:8000,engine=vllm,engine=sglang", { "engine= is given twice" } },
	{ "127.0.0.12:8000,", { "'' is not KEY=VALUE" } },
	{ "127.0.0.12:8000,,engine=vllm", { "'' is not KEY=VALUE" } },
	{ "127.0.0.12:8000,vllm", { "'vllm' is not KEY=VALUE" } },
	{ "127.0.0.12:8000,loads=https://127.0.0.12:1",
	  { "loads: ", "unknown scheme 'https://'" } },
	{ "127.0.0.12:8000,loads=HTTP://127.0.0.12:1", { "unknown scheme 'HTTP://'" } },
	{ "127.0.0.12:8000,loads=grpc://127.0.0.12:1/metrics",
	  { "loads: ", "a path (/metrics) needs http://" } },
	{ "127.0.0.12:8000,loads=127.0.0.12:1/metrics", { "a path (/metrics) needs http://" } },
	{ "127.0.0.12:8000,loads=http://127.0.0.12:1/a b", { "loads: ", "character" } },
	{ "127.0.0.12:8000,loads=http://127.0.0.12:1/a#b", { "character" } },
	{ "127.0.0.12:8000,loads=http://127.0.0.12:1/%zz", { "'%' not followed by two hex" } },
	{ "127.0.0.12:8000,loads=http://127.0.0.12:1/"
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	  { "longer than 127 bytes" } },
	{ "127.0.0.12:8000,loads=http://nowhere/metrics", { "loads: ", "'nowhere'" } },
	{ "127.0.0.12:8000,loads=http://", { "loads: ", "empty address" } },
	{ "127.0.0.12:8000,loads=", { "loads: ", "empty address" } },
	{ "127.0.0.12:8000,engine=trt",
	  { "engine: 'trt' is not one of auto, sglang, vllm or tokenspeed" } },
	{ "127.0.0.12:8000,engine=", { "engine: '' is not one of" } },
	{ "127.0.0.12:8000,engine=VLLM", { "engine: 'VLLM'" } },
	{ "127.0.0.12:8000,auth=basic:/etc/token",
	  { "auth: 'basic:/etc/token' is not bearer:FILE" } },
	{ "127.0.0.12:8000,auth=bearer:token.txt", { "auth: ", "absolute path, got 'token.txt'" } },
	{ "127.0.0.12:8000,auth=bearer:", { "auth: ", "absolute path, got ''" } },
	{ "127.0.0.12:8000,auth=bearer:/nonexistent/token",
	  { "auth: cannot read /nonexistent/token: No such file or directory" } },
};

/* Each names the key, the backend as given, and the accepted form. */
static void test_flag_errors(void)
{
	static struct steer_config before, after;
	char quoted[512];
	size_t i, j;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&before, 0xa5, sizeof(before));
		after = before;
		rc = load_with(ARGS(VIP4, "--backend", bad[i].spec), NULL, &after);
		CHECK(rejected(rc, &before, &after), "%s: rc=%d err=%s", bad[i].spec, rc, err);
		snprintf(quoted, sizeof(quoted), "--backend: '%s': ", bad[i].spec);
		CHECK(!strncmp(err, quoted, strlen(quoted)) &&
			      strstr(err, "; expected " BACKEND_FORM),
		      "%s: err '%s'", bad[i].spec, err);
		for (j = 0; j < 2 && bad[i].needles[j]; j++)
			CHECK(strstr(err, bad[i].needles[j]), "%s: '%s' not in '%s'", bad[i].spec,
			      bad[i].needles[j], err);
		/* The YAML scalar says the same, after FILE:LINE: backends: */
		rc = load_backend_yaml_scalar(bad[i].spec, &after);
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, ":3: backends: '") &&
			      strstr(err, bad[i].needles[0]),
		      "yaml %s: rc=%d err=%s", bad[i].spec, rc, err);
	}
}

/* ---- The mapping form ------------------------------------------------------------------- */

static void test_mapping_form(void)
{
	char text[2048];
	struct steer_config c;
	const struct steer_backend_cfg *b;
	int rc;

	/* Keys in any order: the address may come last. */
	snprintf(text, sizeof(text),
		 "services:\n"
		 "  - vip: 127.0.0.100:8000\n"
		 "    backends:\n"
		 "      - auth: bearer:%s\n"
		 "        engine: vllm\n"
		 "        loads: http://127.0.0.11:8001/metrics\n"
		 "        address: 127.0.0.11:8000\n"
		 "      - {address: 127.0.0.12:8000, loads: 127.0.0.12:30000}\n"
		 "      - {address: 127.0.0.13:8000, engine: tokenspeed}\n",
		 token_path);
	rc = load_yaml(text, NULL, &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	b = c.services[0].backends;
	CHECK(!strcmp(b[0].addr_str, "127.0.0.11:8000") && b[0].loads_scheme == STEER_SCHEME_HTTP &&
		      !strcmp(b[0].loads_str, "127.0.0.11:8001") &&
		      !strcmp(b[0].loads_path, "/metrics") && b[0].engine == STEER_ENGINE_VLLM &&
		      b[0].auth == 1 && c.n_auths == 1 && !strcmp(c.auths[0].token, SECRET),
	      "backend 0: scheme %d loads %s%s engine %d auth %u", b[0].loads_scheme,
	      b[0].loads_str, b[0].loads_path, b[0].engine, b[0].auth);
	CHECK(b[1].loads_scheme == STEER_SCHEME_GRPC &&
		      !strcmp(b[1].loads_str, "127.0.0.12:30000") && b[1].auth == 0,
	      "backend 1: old loads= keeps its meaning (gRPC)");
	CHECK(b[2].loads_scheme == STEER_SCHEME_AUTO &&
		      !strcmp(b[2].loads_str, "127.0.0.13:8000") &&
		      b[2].engine == STEER_ENGINE_TOKENSPEED,
	      "backend 2: auto on the traffic address");
	steer_config_free(&c);
}

static void test_mapping_errors(void)
{
	static const struct {
		const char *entry; /* the backend's lines, from line 4 */
		int line;
		const char *msg;
	} t[] = {
		{ "      - address: 127.0.0.11:8000\n"
		  "        engine: trt\n",
		  5,
		  "backend 127.0.0.11:8000: engine: 'trt' is not one of auto, sglang, vllm or "
		  "tokenspeed" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        loads: grpc://127.0.0.11:1/metrics\n",
		  5,
		  "backend 127.0.0.11:8000: loads: 'grpc://127.0.0.11:1/metrics': a path "
		  "(/metrics) "
		  "needs http://, e.g. http://ADDR:PORT/metrics; expected "
		  "[grpc://|http://]ADDR:PORT[/path]" },
		{ "      - loads: ftp://127.0.0.11:1\n"
		  "        address: 127.0.0.11:8000\n",
		  4,
		  "backend 127.0.0.11:8000: loads: 'ftp://127.0.0.11:1': unknown scheme 'ftp://' "
		  "(grpc:// or http://); expected [grpc://|http://]ADDR:PORT[/path]" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        auth: bearer:/nonexistent/token\n",
		  5,
		  "backend 127.0.0.11:8000: auth: cannot read /nonexistent/token: No such file or "
		  "directory; expected bearer:FILE" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        auth: token\n",
		  5,
		  "backend 127.0.0.11:8000: auth: 'token' is not bearer:FILE; expected "
		  "bearer:FILE" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        engine: [vllm]\n",
		  5, "engine: expected a single value, got a list" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        weight: 2\n",
		  5, "unknown key 'weight' in backend (expected address, loads, engine, auth)" },
		{ "      - address: 127.0.0.11:8000\n"
		  "        loads: 127.0.0.11:1\n"
		  "        loads: 127.0.0.11:2\n",
		  6, "duplicate key 'loads'" },
		{ "      - address: 127.0.0.11:8000,engine=vllm\n", 4,
		  "address: '127.0.0.11:8000,engine=vllm': port must be 1..65535, in decimal "
		  "without "
		  "sign or leading zero" },
		{ "      - engine: vllm\n", 4, "backend without 'address'" },
	};
	char text[1024];
	struct steer_config c;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(text, sizeof(text),
			 "services:\n"
			 "  - vip: 127.0.0.100:8000\n"
			 "    backends:\n"
			 "%s",
			 t[i].entry);
		rc = load_yaml(text, NULL, &c);
		CHECK(rc == STEER_CONFIG_USAGE, "case %zu: rc=%d", i, rc);
		CHECK(file_err_is(t[i].line, t[i].msg), "case %zu: err '%s', want line %d '%s'", i,
		      err, t[i].line, t[i].msg);
	}
}

/* ---- Token files ------------------------------------------------------------------------ */

static int write_bytes(const char *path, const char *bytes, size_t len)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fwrite(bytes, 1, len, f);
	return fclose(f);
}

/* The first line, trimmed; the rest of the file is not the token. */
static void test_auth_token_read(void)
{
	static const char *const texts[] = {
		SECRET,
		SECRET "\n",
		"  " SECRET "\t\r\nsecond line\n",
		"\t" SECRET " \n\n",
	};
	char spec[PATH_MAX + 64];
	struct steer_config c;
	size_t i;
	int rc;

	snprintf(spec, sizeof(spec), "127.0.0.11:8000,auth=bearer:%s", token2_path);
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		CHECK(!write_file(token2_path, texts[i]), "write");
		rc = load_backend(spec, &c);
		CHECK(rc == STEER_CONFIG_OK, "case %zu: rc=%d err=%s", i, rc, err);
		CHECK(c.n_auths == 1 && c.services[0].backends[0].auth == 1 &&
			      !strcmp(c.auths[0].file, token2_path) &&
			      !strcmp(c.auths[0].token, SECRET),
		      "case %zu: %zu auths, token '%s'", i, c.n_auths,
		      c.n_auths ? c.auths[0].token : "");
		steer_config_free(&c);
		CHECK(c.auths == NULL && c.n_auths == 0, "free clears the auths");
	}
	/* Exactly STEER_AUTH_TOKEN_MAX bytes is the longest token. */
	{
		static char big[STEER_AUTH_TOKEN_MAX + 2];

		memset(big, 'a', STEER_AUTH_TOKEN_MAX);
		big[STEER_AUTH_TOKEN_MAX] = '\n';
		CHECK(!write_bytes(token2_path, big, STEER_AUTH_TOKEN_MAX + 1), "write");
		rc = load_backend(spec, &c);
		CHECK(rc == STEER_CONFIG_OK && strlen(c.auths[0].token) == STEER_AUTH_TOKEN_MAX,
		      "%d bytes: rc=%d err=%s", STEER_AUTH_TOKEN_MAX, rc, err);
		steer_config_free(&c);
	}
}

/* Distinct files are read once each and shared by their backends. */
static void test_auth_shared(void)
{
	char text[4096], flag[PATH_MAX + 64];
	struct steer_config c;
	const struct steer_backend_cfg *b;
	int rc;

	CHECK(!write_file(token2_path, "other-token\n"), "write");
	snprintf(text, sizeof(text),
		 "services:\n"
		 "  - vip: 127.0.0.101:8000\n"
		 "    backends:\n"
		 "      - 127.0.0.11:8000,auth=bearer:%s\n"
		 "      - {address: 127.0.0.12:8000, auth: 'bearer:%s'}\n"
		 "      - {address: 127.0.0.13:8000, auth: 'bearer:%s'}\n"
		 "      - 127.0.0.14:8000\n",
		 token_path, token_path, token2_path);
	snprintf(flag, sizeof(flag), "127.0.0.15:8000,auth=bearer:%s", token2_path);
	rc = load_yaml(text, ARGS(VIP4, "--backend", flag), &c);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	CHECK(c.n_auths == 2, "%zu distinct files", c.n_auths);
	b = service_of(&c, "127.0.0.101:8000")->backends;
	CHECK(b[0].auth == b[1].auth && b[0].auth && b[2].auth && b[2].auth != b[0].auth &&
		      b[3].auth == 0,
	      "refs %u %u %u %u", b[0].auth, b[1].auth, b[2].auth, b[3].auth);
	CHECK(!strcmp(c.auths[b[0].auth - 1].token, SECRET) &&
		      !strcmp(c.auths[b[2].auth - 1].token, "other-token") &&
		      !strcmp(c.auths[b[2].auth - 1].file, token2_path),
	      "tokens by reference");
	CHECK(service_of(&c, "127.0.0.100:8000")->backends[0].auth == b[2].auth,
	      "a flag's backend shares the file's token");
	steer_config_free(&c);
}

/* An unusable file names the backend and the file, never the token. */
static void test_auth_errors(void)
{
	static const struct {
		const char *bytes;
		size_t len;
		const char *needle;
	} t[] = {
		{ "", 0, "the first line is empty" },
		{ "\n" SECRET "\n", sizeof(SECRET) + 1, "the first line is empty" },
		{ "   \t\r\n", 6, "the first line is empty" },
		{ SECRET "\x01x\n", sizeof(SECRET) + 2, "not printable ASCII (at offset 18)" },
		{ SECRET "\xc3\xa9\n", sizeof(SECRET) + 2, "not printable ASCII" },
		{ SECRET "\0x\n", sizeof(SECRET) + 2, "not printable ASCII" },
	};
	static char big[STEER_AUTH_TOKEN_MAX + 8];
	char spec[PATH_MAX + 64];
	struct steer_config c;
	size_t i;
	int rc;

	snprintf(spec, sizeof(spec), "127.0.0.11:8000,auth=bearer:%s", token2_path);
	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		CHECK(!write_bytes(token2_path, t[i].bytes, t[i].len), "write");
		rc = load_backend(spec, &c);
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, t[i].needle) &&
			      strstr(err, "127.0.0.11:8000") && strstr(err, token2_path),
		      "case %zu: rc=%d err=%s", i, rc, err);
		CHECK(!strstr(err, SECRET) && !strstr(err, "s3cr3t"),
		      "case %zu: the token leaked: %s", i, err);
	}
	memset(big, 'a', sizeof(big) - 1);
	CHECK(!write_bytes(token2_path, big, STEER_AUTH_TOKEN_MAX + 1), "write");
	rc = load_backend(spec, &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "longer than 8192 bytes"), "rc=%d err=%s", rc,
	      err);
	snprintf(spec, sizeof(spec), "127.0.0.11:8000,auth=bearer:%s", tmpdir);
	rc = load_backend(spec, &c);
	CHECK(rc == STEER_CONFIG_USAGE && strstr(err, "is not a regular file"), "dir: rc=%d err=%s",
	      rc, err);
}

/* SIGHUP loads again: a rotated token is read, the running one stays as it was. */
static void test_auth_reload(void)
{
	const char *argv[] = { "smg-steerd", "--config", yaml_path, NULL };
	char text[1024];
	struct steer_config a, b;
	int rc;

	snprintf(text, sizeof(text),
		 "services: [{vip: 127.0.0.100:8000, backends: "
		 "['127.0.0.11:8000,auth=bearer:%s']}]\n",
		 token2_path);
	CHECK(!write_file(yaml_path, text) && !write_file(token2_path, "first\n"), "write");
	rc = steer_config_load(3, (char *const *)argv, &a, err, sizeof(err));
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	write_file(token2_path, "second\n");
	rc = steer_config_load(3, (char *const *)argv, &b, err, sizeof(err));
	if (rc != STEER_CONFIG_OK)
		steer_config_free(&a);
	CHECK(rc == STEER_CONFIG_OK, "reload: rc=%d err=%s", rc, err);
	rc = !strcmp(a.auths[0].token, "first") && !strcmp(b.auths[0].token, "second");
	steer_config_free(&a);
	steer_config_free(&b);
	/* A token file that became empty fails the reload. */
	write_file(token2_path, "");
	memset(&a, 0x5a, sizeof(a));
	b = a;
	CHECK(rc, "the reload reads the file again");
	rc = steer_config_load(3, (char *const *)argv, &b, err, sizeof(err));
	unlink(yaml_path);
	CHECK(rejected(rc, &a, &b) && strstr(err, "the first line is empty"), "rc=%d err=%s", rc,
	      err);
}

/* ---- --check-config's summary ------------------------------------------------------------ */

static int print_summary(void *arg)
{
	steer_config_summary(stdout, arg);
	return 0;
}

static void test_summary(void)
{
	char spec[PATH_MAX + 64], expect[PATH_MAX + 128];
	struct steer_config c;
	char *out;
	int rc;

	snprintf(spec, sizeof(spec),
		 "127.0.0.14:8000,loads=http://127.0.0.14:8001/metrics,"
		 "engine=vllm,auth=bearer:%s",
		 token_path);
	rc = LOAD(&c, VIP4, "--backend", "127.0.0.11:8000", "--backend",
		  "127.0.0.12:8000,loads=127.0.0.12:30000,engine=sglang", "--backend",
		  "127.0.0.13:8000,loads=http://127.0.0.13:8000", "--backend", spec);
	CHECK(rc == STEER_CONFIG_OK, "rc=%d err=%s", rc, err);
	out = capture_stdout(print_summary, &c, &rc);
	steer_config_free(&c);
	CHECK(out, "no output");
	snprintf(expect, sizeof(expect),
		 "configuration ok: 1 service(s), 4 backend(s)\n"
		 "  127.0.0.100:8000: 4 backend(s)\n"
		 "    backend 127.0.0.11:8000: loads auto on 127.0.0.11:8000, engine auto\n"
		 "    backend 127.0.0.12:8000: loads grpc://127.0.0.12:30000, engine sglang\n"
		 "    backend 127.0.0.13:8000: loads http://127.0.0.13:8000, engine auto\n"
		 "    backend 127.0.0.14:8000: loads http://127.0.0.14:8001/metrics, engine vllm, "
		 "auth: %s\n",
		 token_path);
	rc = !strcmp(out, expect) && !strstr(out, SECRET);
	if (!rc)
		printf("# got:\n%s", out);
	free(out);
	CHECK(rc, "summary differs from\n%s", expect);
}

/* A token file group or others can read is used, with a warning naming it
 * in the summary (--check-config) and in steer_config.warnings (the log);
 * mode 0400 or 0600 gets none. */
static void test_auth_file_mode_warning(void)
{
	char spec[PATH_MAX + 64], want[PATH_MAX + 128];
	struct steer_config c;
	char *out;
	int rc;

	snprintf(spec, sizeof(spec), "127.0.0.11:8000,auth=bearer:%s", token2_path);
	CHECK(!write_file(token2_path, SECRET "\n") && !chmod(token2_path, 0644), "write");
	rc = load_backend(spec, &c);
	CHECK(rc == STEER_CONFIG_OK, "a 0644 file refused: rc=%d err=%s", rc, err);
	snprintf(want, sizeof(want),
		 "the token file %s can be read by group or others (mode 0644): chmod 0400 it, "
		 "or set defaultMode: 0400 on its Secret volume\n",
		 token2_path);
	CHECK(!strcmp(c.warnings, want), "warnings '%s'", c.warnings);
	out = summary_of(&c);
	steer_config_free(&c);
	CHECK(out && strstr(out, "configuration ok") && strstr(out, "  warning: the token file ") &&
		      !strstr(out, SECRET),
	      "summary:\n%s", out ? out : "");
	free(out);
	CHECK(!chmod(token2_path, 0640), "chmod");
	rc = load_backend(spec, &c);
	CHECK(rc == STEER_CONFIG_OK && strstr(c.warnings, "(mode 0640)"), "0640: '%s'", c.warnings);
	steer_config_free(&c);
	CHECK(!chmod(token2_path, 0400), "chmod");
	rc = load_backend(spec, &c);
	CHECK(rc == STEER_CONFIG_OK && !c.warnings[0], "0400 warned: '%s'", c.warnings);
	steer_config_free(&c);
	CHECK(!chmod(token2_path, 0600), "chmod");
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	snprintf(token_path, sizeof(token_path), "%s/token", tmpdir);
	snprintf(token2_path, sizeof(token2_path), "%s/token2", tmpdir);
	if (write_file(token_path, SECRET "\n"))
		return tap_setup_failed();

	TAP_RUN(test_forms_flag_and_scalar);
	TAP_RUN(test_forms_ipv6);
	TAP_RUN(test_flag_errors);
	TAP_RUN(test_mapping_form);
	TAP_RUN(test_mapping_errors);
	TAP_RUN(test_auth_token_read);
	TAP_RUN(test_auth_shared);
	TAP_RUN(test_auth_errors);
	TAP_RUN(test_auth_reload);
	TAP_RUN(test_summary);
	TAP_RUN(test_auth_file_mode_warning);
	unlink(token_path);
	unlink(token2_path);
	return tap_done();
}
