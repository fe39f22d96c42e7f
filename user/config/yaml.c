// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * yaml.c - the --config file: read (at most 1 MiB), parsed with
 * libyaml's document API, and walked into the file's layer and services.
 * Every error names FILE:LINE and the key.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config_int.h"

#define CONFIG_FILE_MAX (1 << 20) /* a config file is small; this stops /dev/zero */
#define CONFIG_DEPTH_MAX 64	  /* levels of nesting; a config file has 5 */

struct file_walk {
	struct ctx *c;
	yaml_document_t *doc;
};

static int node_line(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static int file_fail(struct file_walk *w, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "FILE:LINE: ..." */
static int file_fail(struct file_walk *w, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[WHY_LEN + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return cfg_fail(w->c, "%s:%d: %s", w->c->config_path, node_line(n), msg);
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return "a single value";
	}
}

/* The scalar text of n, or an error naming key. */
static int node_scalar(struct file_walk *w, const yaml_node_t *n, const char *key, const char **out)
{
	*out = "";
	if (n->type != YAML_SCALAR_NODE)
		return file_fail(w, n, "%s: expected a single value, got %s", key, node_kind(n));
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return file_fail(w, n, "%s: the value contains a NUL character", key);
	*out = (const char *)n->data.scalar.value;
	return STEER_CONFIG_OK;
}

static const char *pair_key(struct file_walk *w, const yaml_node_pair_t *pair)
{
	return (const char *)yaml_document_get_node(w->doc, pair->key)->data.scalar.value;
}

/* Keys must be plain words, each given once (libyaml keeps duplicates). */
static int mapping_check_keys(struct file_walk *w, const yaml_node_t *map)
{
	const yaml_node_pair_t *p, *q, *start = map->data.mapping.pairs.start;

	for (p = start; p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *key = yaml_document_get_node(w->doc, p->key);

		if (key->type != YAML_SCALAR_NODE)
			return file_fail(w, key, "a key must be a single word, got %s",
					 node_kind(key));
		for (q = start; q < p; q++) {
			if (!strcmp(pair_key(w, q), pair_key(w, p)))
				return file_fail(w, key, "duplicate key '%s'", pair_key(w, p));
		}
	}
	return STEER_CONFIG_OK;
}

static int expect_mapping(struct file_walk *w, const yaml_node_t *n, const char *what)
{
	if (n->type != YAML_MAPPING_NODE)
		return file_fail(w, n, "%s must be a mapping of keys, got %s", what, node_kind(n));
	return mapping_check_keys(w, n);
}

/* A top-level option into the file's layer, or a knob into a service's. */
static int file_option(struct file_walk *w, const struct cfg_option *o, const yaml_node_t *value,
		       struct layer *l, struct knob_layer *kl)
{
	char why[WHY_LEN];
	const char *v;
	int rc = node_scalar(w, value, o->doc.key, &v);

	if (rc)
		return rc;
	if (kl ? cfg_knob_parse(o, v, kl, why, sizeof(why))
	       : cfg_option_parse(o, v, l, node_line(value), why, sizeof(why)))
		return file_fail(w, value, "%s: %s", o->doc.key, why);
	return STEER_CONFIG_OK;
}

static int file_vip(struct file_walk *w, const yaml_node_t *value, struct steer_addr *out)
{
	char detail[WHY_LEN];
	const char *v;
	int rc = node_scalar(w, value, "vip", &v);

	if (rc)
		return rc;
	if (cfg_vip_parse(v, out, detail, sizeof(detail)))
		return file_fail(w, value, "vip: %s", detail);
	return STEER_CONFIG_OK;
}

static const char *const backend_keys[] = { "address", "loads", "engine", "auth" };

static const yaml_node_pair_t *pair_find(struct file_walk *w, const yaml_node_t *map,
					 const char *key)
{
	const yaml_node_pair_t *p;

	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
		if (!strcmp(pair_key(w, p), key))
			return p;
	}
	return NULL;
}

/* keys: the 4 keys of what (a backend or a backend-dns entry), the target first. */
static int keys_check(struct file_walk *w, const yaml_node_t *n, const char *const keys[4],
		      const char *what)
{
	const yaml_node_pair_t *p;
	size_t k;

	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		for (k = 0; k < 4 && strcmp(pair_key(w, p), keys[k]); k++)
			;
		if (k == 4)
			return file_fail(
				w, yaml_document_get_node(w->doc, p->key),
				"unknown key '%s' in %s (expected %s, loads, engine, auth)",
				pair_key(w, p), what, keys[0]);
	}
	return STEER_CONFIG_OK;
}

/* A backend in mapping form: address (required) first, then the other keys. */
static int file_backend_mapping(struct file_walk *w, const yaml_node_t *n,
				struct steer_backend_cfg *b)
{
	const yaml_node_pair_t *p, *addr;
	const yaml_node_t *value;
	char why[WHY_LEN];
	const char *v;
	int rc = expect_mapping(w, n, "a backend");

	if (!rc)
		rc = keys_check(w, n, backend_keys, "backend");
	if (rc)
		return rc;
	addr = pair_find(w, n, "address");
	if (!addr)
		return file_fail(w, n, "backend without 'address'");
	value = yaml_document_get_node(w->doc, addr->value);
	rc = node_scalar(w, value, "address", &v);
	if (rc)
		return rc;
	if (cfg_backend_address(v, b, why, sizeof(why)))
		return file_fail(w, value, "address: %s", why);
	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		const char *key = pair_key(w, p);

		if (p == addr)
			continue;
		value = yaml_document_get_node(w->doc, p->value);
		rc = node_scalar(w, value, key, &v);
		if (rc)
			return rc;
		if (cfg_backend_key(w->c, b, key, v, why, sizeof(why))) {
			const char *form = cfg_backend_key_form(key);

			return file_fail(w, value, "backend %s: %s%s%s", b->addr_str, why,
					 form ? "; expected " : "", form ? form : "");
		}
	}
	return STEER_CONFIG_OK;
}

static int file_backend(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	struct steer_backend_cfg b;
	char why[WHY_LEN];
	int rc;

	if (n->type == YAML_SCALAR_NODE) {
		const char *v;

		rc = node_scalar(w, n, "backends", &v);
		if (!rc && cfg_backend_parse(w->c, v, &b, why, sizeof(why)))
			rc = file_fail(w, n, "backends: %s", why);
	} else {
		rc = file_backend_mapping(w, n, &b);
	}
	if (rc)
		return rc;
	if (cfg_backend_check_family(d, &b, "the service's vip", why, sizeof(why)))
		return file_fail(w, n, "%s", why);
	if (cfg_backend_add(d, &b, why, sizeof(why)))
		return file_fail(w, n, "service %s: %s", d->cfg.vip_str, why);
	return STEER_CONFIG_OK;
}

static int file_backends(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	yaml_node_item_t *it;
	int rc = STEER_CONFIG_OK;

	if (n->type != YAML_SEQUENCE_NODE)
		return file_fail(w, n, "backends: expected a list, got %s", node_kind(n));
	for (it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++)
		rc = file_backend(w, yaml_document_get_node(w->doc, *it), d);
	return rc;
}

/* ---- backend-dns ---------------------------------------------------------------- */

static const char *const dns_keys[] = { "name", "loads", "engine", "auth" };

static const char *dns_key_form(const char *key)
{
	if (!strcmp(key, "loads"))
		return "[grpc://|http://]:PORT[/path]";
	return cfg_backend_key_form(key);
}

/* A backend-dns entry in mapping form: name (NAME:PORT, required) first. */
static int file_dns_mapping(struct file_walk *w, const yaml_node_t *n,
			    struct steer_dns_backend_cfg *e)
{
	const yaml_node_pair_t *p, *name;
	const yaml_node_t *value;
	char why[WHY_LEN];
	const char *v;
	int rc = expect_mapping(w, n, "a backend-dns entry");

	if (!rc)
		rc = keys_check(w, n, dns_keys, "backend-dns");
	if (rc)
		return rc;
	name = pair_find(w, n, "name");
	if (!name)
		return file_fail(w, n, "backend-dns entry without 'name' (NAME:PORT)");
	value = yaml_document_get_node(w->doc, name->value);
	rc = node_scalar(w, value, "name", &v);
	if (rc)
		return rc;
	if (cfg_dns_target(v, e, why, sizeof(why)))
		return file_fail(w, value, "name: %s", why);
	for (p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
		const char *key = pair_key(w, p), *form = dns_key_form(key);

		if (p == name)
			continue;
		value = yaml_document_get_node(w->doc, p->value);
		rc = node_scalar(w, value, key, &v);
		if (rc)
			return rc;
		if (cfg_dns_key(w->c, e, key, v, why, sizeof(why)))
			return file_fail(w, value, "backend-dns %s: %s%s%s", e->spec, why,
					 form ? "; expected " : "", form ? form : "");
	}
	return STEER_CONFIG_OK;
}

static int file_dns_entry(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	struct steer_dns_backend_cfg e;
	char why[WHY_LEN];
	int rc;

	if (n->type == YAML_SCALAR_NODE) {
		const char *v;

		rc = node_scalar(w, n, "backend-dns", &v);
		if (!rc && cfg_dns_parse(w->c, v, &e, why, sizeof(why)))
			rc = file_fail(w, n, "backend-dns: %s", why);
	} else {
		rc = file_dns_mapping(w, n, &e);
	}
	if (rc)
		return rc;
	if (cfg_dns_add(d, &e, why, sizeof(why)))
		return file_fail(w, n, "service %s: %s", d->cfg.vip_str, why);
	return STEER_CONFIG_OK;
}

static int file_dns_entries(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	yaml_node_item_t *it;
	int rc = STEER_CONFIG_OK;

	if (n->type != YAML_SEQUENCE_NODE)
		return file_fail(w, n, "backend-dns: expected a list, got %s", node_kind(n));
	for (it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++)
		rc = file_dns_entry(w, yaml_document_get_node(w->doc, *it), d);
	return rc;
}

/* ---- services ------------------------------------------------------------------------ */

static int file_service_vip(struct file_walk *w, const yaml_node_t *value, struct service_draft *d)
{
	struct steer_addr vip;
	ssize_t other;
	int rc = file_vip(w, value, &vip);

	if (rc)
		return rc;
	other = cfg_service_find(w->c, &vip);
	if (other >= 0)
		return file_fail(w, value, "vip %s is listed twice (first at line %d)",
				 w->c->svcs[other].cfg.vip_str, w->c->svcs[other].line);
	cfg_draft_set_vip(d, &vip);
	return STEER_CONFIG_OK;
}

/* The service's keys but the backends, which need the vip (keys come in any order). */
static int file_service_keys(struct file_walk *w, const yaml_node_t *n, struct service_draft *d,
			     const yaml_node_t **backends, const yaml_node_t **dns)
{
	const yaml_node_pair_t *p;
	int rc = STEER_CONFIG_OK;

	for (p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
		const yaml_node_t *value = yaml_document_get_node(w->doc, p->value);
		const struct cfg_option *o = cfg_option_by_key(pair_key(w, p), true);

		if (!o)
			rc = file_fail(w, yaml_document_get_node(w->doc, p->key),
				       "unknown key '%s' in service", pair_key(w, p));
		else if (o->opt == OPT_VIP)
			rc = file_service_vip(w, value, d);
		else if (o->opt == OPT_BACKEND)
			*backends = value;
		else if (o->opt == OPT_BACKEND_DNS)
			*dns = value;
		else
			rc = file_option(w, o, value, NULL, &d->knobs);
	}
	return rc;
}

/* Builds the draft in place; the caller appended it, so it is freed with the context. */
static int file_service(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	const yaml_node_t *backends = NULL, *dns = NULL;
	int rc = expect_mapping(w, n, "a service");

	d->line = node_line(n);
	if (!rc)
		rc = file_service_keys(w, n, d, &backends, &dns);
	if (!rc && !d->cfg.vip.proto)
		rc = file_fail(w, n, "service without 'vip'");
	if (!rc && backends)
		rc = file_backends(w, backends, d);
	if (!rc && dns)
		rc = file_dns_entries(w, dns, d);
	if (!rc && !d->cfg.n_backends && !d->cfg.n_dns)
		rc = file_fail(w,
			       backends ? backends
			       : dns	? dns
					: n,
			       "service %s has no backends (at least one is required)",
			       d->cfg.vip_str);
	return rc;
}

static int file_services(struct file_walk *w, const yaml_node_t *n)
{
	yaml_node_item_t *it;
	int rc = STEER_CONFIG_OK;

	if (n->type != YAML_SEQUENCE_NODE)
		return file_fail(w, n, "services: expected a list, got %s", node_kind(n));
	for (it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++) {
		const yaml_node_t *item = yaml_document_get_node(w->doc, *it);
		struct service_draft *d;

		if (w->c->n_svcs >= STEER_MAX_SERVICES)
			return file_fail(w, item, "services: at most %d services",
					 STEER_MAX_SERVICES);
		d = cfg_service_append(w->c);
		if (!d)
			return cfg_fail(w->c, "out of memory");
		rc = file_service(w, item, d);
	}
	return rc;
}

static int file_top(struct file_walk *w, const yaml_node_t *root)
{
	const yaml_node_pair_t *p;
	int rc = expect_mapping(w, root, "the top level");

	for (p = root->data.mapping.pairs.start; !rc && p < root->data.mapping.pairs.top; p++) {
		const yaml_node_t *value = yaml_document_get_node(w->doc, p->value);
		const struct cfg_option *o = cfg_option_by_key(pair_key(w, p), false);

		if (!strcmp(pair_key(w, p), "services"))
			rc = file_services(w, value);
		else if (o)
			rc = file_option(w, o, value, &w->c->top, NULL);
		else
			rc = file_fail(w, yaml_document_get_node(w->doc, p->key),
				       "unknown key '%s' at the top level", pair_key(w, p));
	}
	return rc;
}

/* The whole file, at most CONFIG_FILE_MAX bytes; *buf is NUL-terminated. */
static int file_read(struct ctx *c, char **buf, size_t *len)
{
	FILE *f = fopen(c->config_path, "r");
	int rc = STEER_CONFIG_OK;

	*buf = NULL;
	*len = 0;
	if (!f)
		return cfg_fail(c, "%s: cannot open: %s", c->config_path, strerror(errno));
	*buf = malloc(CONFIG_FILE_MAX + 1);
	if (!*buf) {
		fclose(f);
		return cfg_fail(c, "out of memory");
	}
	*len = fread(*buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f))
		rc = cfg_fail(c, "%s: cannot read: %s", c->config_path, strerror(errno));
	else if (*len > CONFIG_FILE_MAX)
		rc = cfg_fail(c, "%s: larger than %d bytes", c->config_path, CONFIG_FILE_MAX);
	else
		(*buf)[*len] = 0;
	fclose(f);
	return rc;
}

/* Reader errors carry a byte offset rather than a line. */
static int syntax_error(struct ctx *c, const yaml_parser_t *p, const char *buf)
{
	size_t line = p->problem_mark.line + 1, i;

	if (p->error == YAML_READER_ERROR) {
		for (line = 1, i = 0; i < p->problem_offset && buf[i]; i++)
			line += buf[i] == '\n';
	}
	return cfg_fail(c, "%s:%zu: YAML syntax error: %s%s%s%s", c->config_path, line,
			p->problem ? p->problem : "unknown error", p->context ? " (" : "",
			p->context ? p->context : "", p->context ? ")" : "");
}

/* Loads the first document; a second one would be silently ignored, so refuse it. */
static int file_load_document(struct ctx *c, yaml_parser_t *p, const char *buf,
			      yaml_document_t *doc)
{
	yaml_document_t extra;
	yaml_node_t *root;

	if (!yaml_parser_load(p, doc))
		return syntax_error(c, p, buf);
	if (!yaml_parser_load(p, &extra)) {
		yaml_document_delete(doc);
		return syntax_error(c, p, buf);
	}
	root = yaml_document_get_root_node(&extra);
	if (root) {
		int line = node_line(root);

		yaml_document_delete(&extra);
		yaml_document_delete(doc);
		return cfg_fail(c, "%s:%d: only one YAML document is allowed", c->config_path,
				line);
	}
	yaml_document_delete(&extra);
	return STEER_CONFIG_OK;
}

/*
 * Nesting deeper than CONFIG_DEPTH_MAX is refused as soon as the bound is
 * passed, from libyaml's events, before any document is built: the file
 * needs 5 levels, and libyaml's document loader is quadratic in the nesting
 * of flow collections (80 KB of '[' took 6 to 15 s). A syntax error stops
 * the count; the document loader then reports it as it always has.
 */
static int depth_check(struct ctx *c, const char *buf, size_t len)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int depth = 0, rc = STEER_CONFIG_OK;
	bool done = false;

	if (!yaml_parser_initialize(&p))
		return cfg_fail(c, "out of memory");
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, len);
	while (!done && !rc && yaml_parser_parse(&p, &ev)) {
		if (ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > CONFIG_DEPTH_MAX)
				rc = cfg_fail(c, "%s:%zu: nested deeper than %d levels",
					      c->config_path, ev.start_mark.line + 1,
					      CONFIG_DEPTH_MAX);
		} else if (ev.type == YAML_SEQUENCE_END_EVENT ||
			   ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		}
		done = ev.type == YAML_STREAM_END_EVENT;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	return rc;
}

int cfg_file_parse(struct ctx *c)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	size_t len;
	char *buf;
	int rc = file_read(c, &buf, &len);

	if (!rc)
		rc = depth_check(c, buf, len);
	if (rc) {
		free(buf);
		return rc;
	}
	if (!yaml_parser_initialize(&parser)) {
		free(buf);
		return cfg_fail(c, "out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	rc = file_load_document(c, &parser, buf, &doc);
	if (!rc) {
		struct file_walk w = { c, &doc };

		root = yaml_document_get_root_node(&doc);
		if (root) /* an empty file is fine: the flags may give the service */
			rc = file_top(&w, root);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);
	free(buf);
	return rc;
}
