// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config.c - smg-steerd's command line and YAML configuration (see config.h):
 * the entry point, the defaults, and the resolution of the layers into one
 * struct steer_config. How the parts divide the work is in config_int.h.
 *
 * Everything lives in one heap context per call, so that SIGHUP can call
 * steer_config_load again and a failed call leaves *out untouched.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* ---- Resolution ------------------------------------------------------------------------- */

/* The table's defaults (options.c), and the probe's body, whose default the
 * table describes in words. */
static void defaults_set(struct steer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg_defaults_apply(cfg);
	cfg_probe_defaults(cfg);
}

/* Defaults that follow the interval, unless given. */
static void derived_defaults_set(struct ctx *c)
{
	struct steer_config *o = &c->out;

	if (!c->flags.set[OPT_TIMEOUT] && !c->top.set[OPT_TIMEOUT]) {
		o->timeout_ns = o->interval_ns / 2 < NS_PER_S ? o->interval_ns / 2 : NS_PER_S;
	}
	if (!c->flags.set[OPT_MAX_AGE] && !c->top.set[OPT_MAX_AGE])
		o->max_age_ns = 3 * o->interval_ns; /* at most 3 h: within its own bound */
}

static int globals_resolve(struct ctx *c)
{
	int rc;

	defaults_set(&c->out);
	cfg_layer_apply(&c->out, &c->top);
	cfg_layer_apply(&c->out, &c->flags);
	derived_defaults_set(c);
	memcpy(c->out.config_path, c->config_path, sizeof(c->out.config_path));
	rc = cfg_check_timing(c);
	if (!rc)
		rc = cfg_check_wire_cgroup(c);
	if (!rc)
		rc = cfg_check_peers(c);
	return rc ? rc : cfg_check_probe(c);
}

/* The flags' service joins the file's, replacing one with the same vip. */
static int flag_service_merge(struct ctx *c)
{
	struct service_draft *d = &c->flag_svc;
	char why[WHY_LEN];
	ssize_t same;
	size_t i;

	if (!c->flag_vip_given) {
		if (d->cfg.n_backends)
			return cfg_fail(c, "--backend requires --vip ADDR:PORT");
		if (d->cfg.n_dns)
			return cfg_fail(c, "--backend-dns requires --vip ADDR:PORT");
		return STEER_CONFIG_OK;
	}
	if (!d->cfg.n_backends && !d->cfg.n_dns)
		return cfg_fail(c, "--vip: at least one --backend ADDR:PORT or --backend-dns "
				   "NAME:PORT is required");
	for (i = 0; i < d->cfg.n_backends; i++) {
		if (cfg_backend_check_family(d, &d->cfg.backends[i], "--vip", why, sizeof(why)))
			return cfg_fail(c, "--backend: %s", why);
	}
	same = cfg_service_find(c, &d->cfg.vip);
	if (same >= 0) {
		cfg_draft_free(&c->svcs[same]);
		c->svcs[same] = *d;
	} else if (c->n_svcs >= STEER_MAX_SERVICES) {
		return cfg_fail(c, "--vip: the file has %d services already, at most %d",
				STEER_MAX_SERVICES, STEER_MAX_SERVICES);
	} else if (cfg_service_append(c)) {
		c->svcs[c->n_svcs - 1] = *d;
	} else {
		return cfg_fail(c, "out of memory");
	}
	memset(d, 0, sizeof(*d)); /* owned by svcs now */
	return STEER_CONFIG_OK;
}

/* The kernel credits prefill x routers tokens per connect in a 32-bit field:
 * each knob is in range, but their product must fit too. */
static int credit_check(struct ctx *c, const struct steer_service_cfg *s)
{
	uint64_t credit = (uint64_t)s->policy.mean_prefill_tokens * s->policy.peer_routers;

	if (credit <= UINT32_MAX)
		return STEER_CONFIG_OK;
	return cfg_fail(c,
			"service %s: least-load-mean-prefill-tokens (%u) x peer-routers (%u) = "
			"%llu tokens credited per connection, above the kernel's %u",
			s->vip_str, s->policy.mean_prefill_tokens, s->policy.peer_routers,
			(unsigned long long)credit, UINT32_MAX);
}

/* Moves the drafts into out with each policy resolved. */
static int services_resolve(struct ctx *c)
{
	struct steer_policy defaults = STEER_POLICY_DEFAULTS;
	size_t i;

	if (!c->n_svcs)
		return cfg_fail(c, "no service configured: give --vip ADDR:PORT with --backend "
				   "ADDR:PORT, or services in --config FILE");
	c->out.services = calloc(c->n_svcs, sizeof(*c->out.services));
	if (!c->out.services)
		return cfg_fail(c, "out of memory");
	for (i = 0; i < c->n_svcs; i++) {
		struct steer_service_cfg *s = &c->out.services[i];

		*s = c->svcs[i].cfg;
		s->policy = defaults;
		cfg_knobs_apply(&s->policy, &c->top.knobs);
		cfg_knobs_apply(&s->policy, &c->svcs[i].knobs);
		cfg_knobs_apply(&s->policy, &c->flags.knobs);
		memset(&c->svcs[i].cfg, 0, sizeof(c->svcs[i].cfg));
		c->out.n_services = i + 1; /* owned by out now, freed with it */
		if (credit_check(c, s) || cfg_check_service_peers(c, s))
			return STEER_CONFIG_USAGE;
	}
	return STEER_CONFIG_OK;
}

static void ctx_free(struct ctx *c)
{
	size_t i;

	for (i = 0; i < c->n_svcs; i++)
		cfg_draft_free(&c->svcs[i]);
	free(c->svcs);
	cfg_draft_free(&c->flag_svc);
	cfg_auths_free(c->auths, c->n_auths);
	steer_config_free(&c->out);
	free(c);
}

enum steer_config_rc steer_config_load(int argc, char *const argv[], struct steer_config *out,
				       char *err, size_t errlen)
{
	struct ctx *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return STEER_CONFIG_USAGE;
	}
	c->err = err;
	c->errlen = errlen;
	rc = cfg_flags_parse(c, argc, argv);
	if (!rc && c->config_path[0])
		rc = cfg_file_parse(c);
	if (!rc)
		rc = globals_resolve(c);
	if (!rc)
		rc = flag_service_merge(c);
	if (!rc)
		rc = cfg_services_check(c);
	if (!rc)
		rc = services_resolve(c);
	if (!rc) {
		c->out.check_only = c->check_only;
		c->out.auths = c->auths;
		c->out.n_auths = c->n_auths;
		memcpy(c->out.warnings, c->warnings, sizeof(c->out.warnings));
		c->auths = NULL;
		c->n_auths = 0;
		*out = c->out;
		memset(&c->out, 0, sizeof(c->out)); /* owned by the caller now */
	}
	ctx_free(c);
	return (enum steer_config_rc)rc;
}

void steer_config_free(struct steer_config *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->n_services; i++) {
		free(c->services[i].backends);
		free(c->services[i].dns);
	}
	free(c->services);
	c->services = NULL;
	c->n_services = 0;
	cfg_auths_free(c->auths, c->n_auths);
	c->auths = NULL;
	c->n_auths = 0;
	cfg_peer_keys_free(c->peer_keys);
	c->peer_keys = NULL;
}

/* One line per backend: where and how its load is read, and the token file
 * (never the token). */
static void backend_summary(FILE *f, const struct steer_config *c,
			    const struct steer_backend_cfg *b)
{
	if (b->loads_scheme == STEER_SCHEME_AUTO)
		fprintf(f, "    backend %s: loads auto on %s", b->addr_str, b->loads_str);
	else
		fprintf(f, "    backend %s: loads %s://%s%s", b->addr_str,
			cfg_scheme_name(b->loads_scheme), b->loads_str, b->loads_path);
	fprintf(f, ", engine %s", cfg_engine_name(b->engine));
	if (b->auth && b->auth <= c->n_auths)
		fprintf(f, ", auth: %s", c->auths[b->auth - 1].file);
	fputc('\n', f);
}

void steer_config_each_warning(const struct steer_config *c,
			       void (*fn)(const char *line, void *arg), void *arg)
{
	const char *at = c->warnings, *nl;
	char line[STEER_CONFIG_WARNINGS_MAX];

	while ((nl = strchr(at, '\n'))) {
		snprintf(line, sizeof(line), "%.*s", (int)(nl - at), at);
		fn(line, arg);
		at = nl + 1;
	}
}

static void summary_warning(const char *line, void *f)
{
	fprintf(f, "  warning: %s\n", line);
}

void steer_config_summary(FILE *f, const struct steer_config *c)
{
	size_t i, j, backends = 0, names = 0;

	for (i = 0; i < c->n_services; i++) {
		backends += c->services[i].n_backends;
		names += c->services[i].n_dns;
	}
	fprintf(f, "configuration ok: %zu service(s), %zu backend(s)", c->n_services, backends);
	if (names)
		fprintf(f, ", %zu DNS name(s)", names);
	fputc('\n', f);
	steer_config_each_warning(c, summary_warning, f);
	if (names)
		cfg_dns_summary(f, c, NULL);
	cfg_peer_summary(f, c);
	cfg_probe_summary(f, c);
	for (i = 0; i < c->n_services; i++) {
		const struct steer_service_cfg *s = &c->services[i];

		fprintf(f, "  %s: %zu backend(s)", s->vip_str, s->n_backends);
		if (s->n_dns)
			fprintf(f, ", %zu DNS name(s)", s->n_dns);
		fputc('\n', f);
		for (j = 0; j < s->n_backends; j++)
			backend_summary(f, c, &s->backends[j]);
		cfg_dns_summary(f, c, s);
	}
}
