// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dns.c - backends found through DNS, as the flag (and a YAML scalar)
 * write them,
 *
 *   NAME:PORT[,loads=[SCHEME://]:PORT[/path]][,engine=E][,auth=bearer:FILE]
 *
 * or as a YAML mapping {name, loads, engine, auth}: both forms end in the
 * same key handlers. engine= and auth= mean what they mean for --backend
 * (backend.c); loads= names no host, because each resolved address
 * serves its own load: "grpc://:30000" is "this address, port 30000".
 * Without loads=, the load is probed on the traffic port, as for a literal
 * backend.
 *
 * Which addresses become backends is decided when the name resolves (the
 * daemon's discovery.c): those of the VIP's family, each checked by
 * steer_config_dns_backend().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"
#include "loads/loads.h"

/* ---- NAME:PORT --------------------------------------------------------------- */

/* A port in plain decimal, 1..65535: no sign, no leading zero. */
static int port_parse(const char *s, uint16_t *port)
{
	unsigned long v;

	if (!*s || strspn(s, "0123456789") != strlen(s) || s[0] == '0' || strlen(s) > 5)
		return -1;
	v = strtoul(s, NULL, 10);
	if (v > 65535)
		return -1;
	*port = (uint16_t)v;
	return 0;
}

static bool label_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '-';
}

/* One label of a host name (RFC 1123): 1..63 letters, digits and '-', not
 * starting or ending with '-'. */
static int label_check(const char *name, const char *l, size_t len, char *why, size_t whylen)
{
	size_t i;

	if (len == 0)
		return cfg_why(why, whylen, "'%s' is not a DNS name: an empty label", name);
	if (len > 63)
		return cfg_why(why, whylen,
			       "'%s' is not a DNS name: a label of %zu bytes (at most 63)", name,
			       len);
	for (i = 0; i < len; i++)
		if (!label_char(l[i]))
			return cfg_why(why, whylen,
				       "'%s' is not a DNS name: '%c' (labels are letters, digits "
				       "and '-')",
				       name, l[i]);
	if (l[0] == '-' || l[len - 1] == '-')
		return cfg_why(why, whylen,
			       "'%s' is not a DNS name: a label starts or ends with '-'", name);
	return 0;
}

/*
 * A host name as RFC 1123 allows it, optionally ending in a dot: what
 * Kubernetes gives Services and Pods. A literal address is refused here:
 * it belongs in --backend, where it is checked as one.
 */
static int name_check(const char *name, char *why, size_t whylen)
{
	struct in_addr a4;
	size_t len = strlen(name);
	const char *l, *dot;

	if (len && name[len - 1] == '.')
		len--;
	if (name[0] == '[' || inet_pton(AF_INET, name, &a4) == 1)
		return cfg_why(why, whylen,
			       "'%s' is an IP address, not a name: give it with --backend", name);
	if (len == 0)
		return cfg_why(why, whylen, "the name is empty");
	if (len > STEER_DNS_NAME_MAX)
		return cfg_why(why, whylen, "the name is %zu bytes long, at most %d", len,
			       STEER_DNS_NAME_MAX);
	for (l = name; l < name + len; l = dot + 1) {
		dot = memchr(l, '.', (size_t)(name + len - l));
		if (!dot)
			dot = name + len;
		if (label_check(name, l, (size_t)(dot - l), why, whylen))
			return -1;
	}
	return 0;
}

int cfg_dns_target(const char *v, struct steer_dns_backend_cfg *e, char *why, size_t whylen)
{
	const char *colon = strrchr(v, ':');
	size_t len;

	memset(e, 0, sizeof(*e));
	if (!colon)
		return cfg_why(why, whylen, "'%s': the port is missing (NAME:PORT)", v);
	len = (size_t)(colon - v);
	if (len >= sizeof(e->name))
		return cfg_why(why, whylen, "the name is %zu bytes long, at most %d", len,
			       STEER_DNS_NAME_MAX);
	memcpy(e->name, v, len);
	e->name[len] = 0;
	if (strchr(e->name, ':'))
		return cfg_why(why, whylen,
			       "'%s' is an IP address, not a name: give it with --backend", v);
	if (name_check(e->name, why, whylen))
		return -1;
	if (port_parse(colon + 1, &e->port))
		return cfg_why(why, whylen,
			       "'%s': port must be 1..65535, in decimal without sign or leading "
			       "zero",
			       v);
	snprintf(e->spec, sizeof(e->spec), "%s:%u", e->name, e->port);
	e->loads_port = e->port;
	e->tmpl.loads_scheme = STEER_SCHEME_AUTO;
	e->tmpl.engine = STEER_ENGINE_AUTO;
	return 0;
}

/* ---- loads= ------------------------------------------------------------------- */

/* "[SCHEME://]:PORT[/path]": the resolved address, that port. */
static int dns_loads_set(struct steer_dns_backend_cfg *e, const char *v, char *why, size_t whylen)
{
	char port[16], detail[WHY_LEN];
	enum steer_scheme scheme;
	const char *rest, *path;
	size_t len;

	if (cfg_loads_scheme(v, &scheme, &rest, detail, sizeof(detail)))
		return cfg_why(why, whylen, "loads: '%s': %s", v, detail);
	path = strchr(rest, '/');
	len = path ? (size_t)(path - rest) : strlen(rest);
	if (path && scheme != STEER_SCHEME_HTTP)
		return cfg_why(why, whylen,
			       "loads: '%s': a path (%s) needs http://, e.g. http://:PORT/metrics",
			       v, path);
	if (path && cfg_loads_path_check(path, detail, sizeof(detail)))
		return cfg_why(why, whylen, "loads: '%s': %s", v, detail);
	if (rest[0] != ':')
		return cfg_why(
			why, whylen,
			"loads: '%s': each resolved address serves its own load, so give "
			"the port without a host, e.g. grpc://:30000 or http://:8000/metrics",
			v);
	len--; /* the ':' */
	if (len < sizeof(port)) {
		memcpy(port, rest + 1, len);
		port[len] = 0;
	}
	if (len >= sizeof(port) || port_parse(port, &e->loads_port))
		return cfg_why(why, whylen,
			       "loads: '%s': port must be 1..65535, in decimal without sign or "
			       "leading zero",
			       v);
	e->tmpl.loads_scheme = scheme;
	snprintf(e->tmpl.loads_path, sizeof(e->tmpl.loads_path), "%s", path ? path : "");
	return 0;
}

int cfg_dns_key(struct ctx *c, struct steer_dns_backend_cfg *e, const char *key, const char *v,
		char *why, size_t whylen)
{
	if (!strcmp(key, "loads"))
		return dns_loads_set(e, v, why, whylen);
	if (!strcmp(key, "engine") || !strcmp(key, "auth"))
		return cfg_backend_key(c, &e->tmpl, key, v, why, whylen);
	return cfg_why(why, whylen, "unknown key '%s'", key);
}

/* ---- The flag's form ------------------------------------------------------------ */

/* One "key=value" after NAME:PORT; seen[] has the keys given so far. */
static int dns_field_parse(struct ctx *c, struct steer_dns_backend_cfg *e, char *field, bool *seen,
			   char *why, size_t whylen)
{
	const char *value;

	if (cfg_field_split(field, seen, &value, why, whylen))
		return -1;
	return cfg_dns_key(c, e, field, value, why, whylen);
}

int cfg_dns_parse(struct ctx *c, const char *spec, struct steer_dns_backend_cfg *e, char *why,
		  size_t whylen)
{
	bool seen[CFG_N_FIELD_KEYS] = { false }, at_target = true;
	char detail[WHY_LEN], *copy = strdup(spec), *field, *comma;
	int rc;

	if (!copy)
		return cfg_why(why, whylen, "out of memory");
	comma = strchr(copy, ',');
	if (comma)
		*comma = 0;
	rc = cfg_dns_target(copy, e, detail, sizeof(detail));
	if (!rc)
		at_target = false;
	while (!rc && comma) {
		field = comma + 1;
		comma = strchr(field, ',');
		if (comma)
			*comma = 0;
		rc = dns_field_parse(c, e, field, seen, detail, sizeof(detail));
	}
	free(copy);
	if (!rc)
		return 0;
	if (at_target && !strchr(spec, ','))
		return cfg_why(why, whylen, "%s; expected " BACKEND_DNS_SYNTAX, detail);
	return cfg_why(why, whylen, "'%s': %s; expected " BACKEND_DNS_SYNTAX, spec, detail);
}

/* ---- The service's list ---------------------------------------------------------- */

/* Names compare as DNS does: without case, a trailing dot or not. */
static bool same_name(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	la -= la && a[la - 1] == '.';
	lb -= lb && b[lb - 1] == '.';
	return la == lb && !strncasecmp(a, b, la);
}

int cfg_dns_add(struct service_draft *d, const struct steer_dns_backend_cfg *e, char *why,
		size_t whylen)
{
	struct steer_dns_backend_cfg *grown;
	size_t i;

	for (i = 0; i < d->cfg.n_dns; i++)
		if (same_name(d->cfg.dns[i].name, e->name) && d->cfg.dns[i].port == e->port)
			return cfg_why(why, whylen, "backend-dns %s is listed twice", e->spec);
	if (d->cfg.n_dns >= STEER_DNS_PER_SERVICE)
		return cfg_why(why, whylen, "at most %d DNS names per service, got more",
			       STEER_DNS_PER_SERVICE);
	grown = realloc(d->cfg.dns, (d->cfg.n_dns + 1) * sizeof(*grown));
	if (!grown)
		return cfg_why(why, whylen, "out of memory");
	d->cfg.dns = grown;
	d->cfg.dns[d->cfg.n_dns++] = *e;
	return 0;
}

/* ---- What the daemon makes of a resolved address ------------------------------------ */

int steer_config_dns_backend(const struct steer_dns_backend_cfg *e, const struct steer_addr *ip,
			     struct steer_backend_cfg *out, char *why, size_t whylen)
{
	*out = e->tmpl;
	out->addr = *ip;
	out->addr.port = htons(e->port);
	out->addr.proto = STEER_IPPROTO_TCP;
	out->loads = out->addr;
	out->loads.port = htons(e->loads_port);
	steer_addr_format(&out->addr, out->addr_str, sizeof(out->addr_str));
	steer_addr_format(&out->loads, out->loads_str, sizeof(out->loads_str));
	return cfg_addr_check_usable(&out->addr, "a discovered backend", why, whylen);
}

/* ---- --check-config ------------------------------------------------------------------ */

static void duration_print(FILE *f, uint64_t ns)
{
	if (ns % NS_PER_S == 0)
		fprintf(f, "%llus", (unsigned long long)(ns / NS_PER_S));
	else
		fprintf(f, "%llums", (unsigned long long)(ns / NS_PER_MS));
}

/* s NULL: the discovery settings; else the entries of s. */
void cfg_dns_summary(FILE *f, const struct steer_config *c, const struct steer_service_cfg *s)
{
	size_t i;

	if (!s) {
		fputs("  dns: each name looked up every ", f);
		duration_print(f, c->dns_interval_ns);
		fprintf(f, " (or its records' TTL, if longer), servers: %s\n",
			c->dns_servers[0] ? c->dns_servers : "the system's (/etc/resolv.conf)");
		return;
	}
	for (i = 0; i < s->n_dns; i++) {
		const struct steer_dns_backend_cfg *e = &s->dns[i];

		if (e->tmpl.loads_scheme == STEER_SCHEME_AUTO)
			fprintf(f, "    backend-dns %s: loads auto on :%u", e->spec, e->loads_port);
		else
			fprintf(f, "    backend-dns %s: loads %s://:%u%s", e->spec,
				cfg_scheme_name(e->tmpl.loads_scheme), e->loads_port,
				e->tmpl.loads_path);
		fprintf(f, ", engine %s", cfg_engine_name(e->tmpl.engine));
		if (e->tmpl.auth && e->tmpl.auth <= c->n_auths)
			fprintf(f, ", auth: %s", c->auths[e->tmpl.auth - 1].file);
		fputc('\n', f);
	}
}
