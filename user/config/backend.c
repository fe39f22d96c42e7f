// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * backend.c - one backend, as the flag (and a YAML scalar) write it,
 *
 *   ADDR:PORT[,loads=[SCHEME://]ADDR:PORT[/path]][,engine=E][,auth=bearer:FILE]
 *
 * or as a YAML mapping {address, loads, engine, auth}: both forms end in the
 * same key handlers, so that they accept and refuse the same values.
 *
 * loads: SCHEME is grpc or http, and no scheme is gRPC; a path only with
 * http. Without loads=, the load is probed on the traffic address
 * (STEER_SCHEME_AUTO).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "loads/loads.h"

#define ENGINE_FORM "auto, sglang, vllm or tokenspeed"

/* The engines' names, as engine= takes them and the summary prints them. */
static const char *const engine_names[] = {
	[STEER_ENGINE_AUTO] = "auto",
	[STEER_ENGINE_SGLANG] = "sglang",
	[STEER_ENGINE_VLLM] = "vllm",
	[STEER_ENGINE_TOKENSPEED] = "tokenspeed",
};

#define N_ENGINES (sizeof(engine_names) / sizeof(engine_names[0]))

const char *cfg_engine_name(int engine)
{
	if (engine < 0 || (size_t)engine >= N_ENGINES)
		return "?";
	return engine_names[engine];
}

const char *cfg_scheme_name(enum steer_scheme s)
{
	switch (s) {
	case STEER_SCHEME_GRPC:
		return "grpc";
	case STEER_SCHEME_HTTP:
		return "http";
	default:
		return "auto";
	}
}

/* ---- loads= ---------------------------------------------------------------- */

static bool is_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* An HTTP path and query as RFC 3986 writes them: no blank, no fragment,
 * nothing a request line or a log line could be confused by. */
static int path_check(const char *path, char *why, size_t whylen)
{
	static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
				      "0123456789-._~!$&'()*+,;=:@/?%";
	size_t i;

	if (strlen(path) >= STEER_LOADS_PATH_MAX)
		return cfg_why(why, whylen, "the path is longer than %d bytes",
			       STEER_LOADS_PATH_MAX - 1);
	for (i = 0; path[i]; i++) {
		if (!strchr(allowed, path[i]))
			return cfg_why(why, whylen,
				       "the path has a character that a URL path cannot hold "
				       "(byte %zu)",
				       i + 1);
		if (path[i] == '%' && !(is_hex(path[i + 1]) && is_hex(path[i + 2])))
			return cfg_why(why, whylen,
				       "the path has a '%%' not followed by two hex "
				       "digits");
	}
	return 0;
}

/* "grpc://" or "http://" at the start of v, or none (gRPC); *rest after it. */
static int scheme_parse(const char *v, enum steer_scheme *scheme, const char **rest, char *why,
			size_t whylen)
{
	const char *sep = strstr(v, "://");

	*scheme = STEER_SCHEME_GRPC;
	*rest = v;
	if (!sep)
		return 0;
	if (sep - v == 4 && !strncmp(v, "grpc", 4)) {
		*scheme = STEER_SCHEME_GRPC;
	} else if (sep - v == 4 && !strncmp(v, "http", 4)) {
		*scheme = STEER_SCHEME_HTTP;
	} else {
		return cfg_why(why, whylen, "unknown scheme '%.*s://' (grpc:// or http://)",
			       (int)(sep - v), v);
	}
	*rest = sep + 3;
	return 0;
}

/* Fills *loads_* from "[SCHEME://]ADDR:PORT[/path]". */
static int loads_set(struct steer_backend_cfg *b, const char *v, char *why, size_t whylen)
{
	char addr[STEER_ADDR_STRLEN + 8], detail[WHY_LEN];
	enum steer_scheme scheme;
	const char *rest, *path;
	size_t len;

	if (scheme_parse(v, &scheme, &rest, detail, sizeof(detail)))
		return cfg_why(why, whylen, "loads: '%s': %s", v, detail);
	path = strchr(rest, '/');
	len = path ? (size_t)(path - rest) : strlen(rest);
	if (path && scheme != STEER_SCHEME_HTTP)
		return cfg_why(
			why, whylen,
			"loads: '%s': a path (%s) needs http://, e.g. http://ADDR:PORT/metrics", v,
			path);
	if (path && path_check(path, detail, sizeof(detail)))
		return cfg_why(why, whylen, "loads: '%s': %s", v, detail);
	if (len >= sizeof(addr))
		return cfg_why(why, whylen, "loads: '%s': the address is too long", v);
	memcpy(addr, rest, len);
	addr[len] = 0;
	if (cfg_addr_parse(addr, &b->loads, detail, sizeof(detail)) ||
	    cfg_addr_check_usable(&b->loads, "a load endpoint", detail, sizeof(detail)))
		return cfg_why(why, whylen, "loads: %s", detail);
	b->loads_scheme = scheme;
	snprintf(b->loads_path, sizeof(b->loads_path), "%s", path ? path : "");
	steer_addr_format(&b->loads, b->loads_str, sizeof(b->loads_str));
	return 0;
}

int cfg_loads_scheme(const char *v, enum steer_scheme *scheme, const char **rest, char *why,
		     size_t whylen)
{
	return scheme_parse(v, scheme, rest, why, whylen);
}

int cfg_loads_path_check(const char *path, char *why, size_t whylen)
{
	return path_check(path, why, whylen);
}

/* ---- engine=, auth= -------------------------------------------------------- */

static int engine_set(struct steer_backend_cfg *b, const char *v, char *why, size_t whylen)
{
	size_t i;

	for (i = 0; i < N_ENGINES; i++) {
		if (!strcmp(v, engine_names[i])) {
			b->engine = (int)i;
			return 0;
		}
	}
	return cfg_why(why, whylen, "engine: '%s' is not one of %s", v, ENGINE_FORM);
}

static int auth_set(struct ctx *c, struct steer_backend_cfg *b, const char *v, char *why,
		    size_t whylen)
{
	char detail[WHY_LEN];

	if (strncmp(v, "bearer:", 7))
		return cfg_why(why, whylen, "auth: '%s' is not bearer:FILE", v);
	if (cfg_auth_add(c, v + 7, &b->auth, detail, sizeof(detail)))
		return cfg_why(why, whylen, "auth: %s", detail);
	return 0;
}

/* ---- The address, and the keys of both forms ------------------------------- */

int cfg_backend_address(const char *v, struct steer_backend_cfg *b, char *why, size_t whylen)
{
	memset(b, 0, sizeof(*b));
	if (cfg_addr_parse(v, &b->addr, why, whylen) ||
	    cfg_addr_check_usable(&b->addr, "a backend", why, whylen))
		return -1;
	b->loads = b->addr;
	b->loads_scheme = STEER_SCHEME_AUTO;
	b->engine = STEER_ENGINE_AUTO;
	steer_addr_format(&b->addr, b->addr_str, sizeof(b->addr_str));
	steer_addr_format(&b->loads, b->loads_str, sizeof(b->loads_str));
	return 0;
}

int cfg_backend_key(struct ctx *c, struct steer_backend_cfg *b, const char *key, const char *v,
		    char *why, size_t whylen)
{
	if (!strcmp(key, "loads"))
		return loads_set(b, v, why, whylen);
	if (!strcmp(key, "engine"))
		return engine_set(b, v, why, whylen);
	if (!strcmp(key, "auth"))
		return auth_set(c, b, v, why, whylen);
	return cfg_why(why, whylen, "unknown key '%s'", key);
}

const char *cfg_backend_key_form(const char *key)
{
	if (!strcmp(key, "loads"))
		return "[grpc://|http://]ADDR:PORT[/path]";
	if (!strcmp(key, "engine"))
		return NULL; /* its message lists the names */
	if (!strcmp(key, "auth"))
		return "bearer:FILE";
	return "IPV4:PORT or [IPV6]:PORT";
}

/* ---- The flag's form ----------------------------------------------------------- */

static const char *const flag_keys[CFG_N_FIELD_KEYS] = { "loads", "engine", "auth" };

int cfg_field_split(char *field, bool *seen, const char **value, char *why, size_t whylen)
{
	char *eq = strchr(field, '=');
	size_t k;

	if (!eq)
		return cfg_why(why, whylen, "'%s' is not KEY=VALUE (keys: loads, engine, auth)",
			       field);
	*eq = 0;
	for (k = 0; k < CFG_N_FIELD_KEYS && strcmp(field, flag_keys[k]); k++)
		;
	if (k == CFG_N_FIELD_KEYS)
		return cfg_why(why, whylen, "unknown key '%s' (keys: loads, engine, auth)", field);
	if (seen[k])
		return cfg_why(why, whylen, "%s= is given twice", field);
	seen[k] = true;
	*value = eq + 1;
	return 0;
}

/* One "key=value" after the address; seen[] has the keys given so far. */
static int field_parse(struct ctx *c, struct steer_backend_cfg *b, char *field, bool *seen,
		       char *why, size_t whylen)
{
	const char *value;

	if (cfg_field_split(field, seen, &value, why, whylen))
		return -1;
	return cfg_backend_key(c, b, field, value, why, whylen);
}

/* The address, then each key=value; *at_address tells where it failed. */
static int fields_parse(struct ctx *c, char *copy, struct steer_backend_cfg *b, bool *at_address,
			char *why, size_t whylen)
{
	bool seen[CFG_N_FIELD_KEYS] = { false };
	char *field = copy, *comma = strchr(copy, ',');

	if (comma)
		*comma = 0;
	*at_address = true;
	if (cfg_backend_address(field, b, why, whylen))
		return -1;
	*at_address = false;
	while (comma) {
		field = comma + 1;
		comma = strchr(field, ',');
		if (comma)
			*comma = 0;
		if (field_parse(c, b, field, seen, why, whylen))
			return -1;
	}
	return 0;
}

/*
 * The error names the backend as given (an address error quotes it already
 * when there is nothing else), the key, and the form.
 */
int cfg_backend_parse(struct ctx *c, const char *spec, struct steer_backend_cfg *b, char *why,
		      size_t whylen)
{
	char detail[WHY_LEN], *copy = strdup(spec);
	bool at_address;
	int rc;

	if (!copy)
		return cfg_why(why, whylen, "out of memory");
	rc = fields_parse(c, copy, b, &at_address, detail, sizeof(detail));
	free(copy);
	if (!rc)
		return 0;
	if (at_address && !strchr(spec, ','))
		return cfg_why(why, whylen, "%s; expected " BACKEND_SYNTAX, detail);
	return cfg_why(why, whylen, "'%s': %s; expected " BACKEND_SYNTAX, spec, detail);
}
