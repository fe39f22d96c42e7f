// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * service.c - the services being assembled, from the flags (--vip,
 * --backend) or the file: their vip, and their backends, each listed once;
 * and the addresses that clash across services.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

void cfg_draft_free(struct service_draft *d)
{
	free(d->cfg.backends);
	free(d->cfg.dns);
	memset(d, 0, sizeof(*d));
}

void cfg_draft_set_vip(struct service_draft *d, const struct steer_addr *vip)
{
	d->cfg.vip = *vip;
	steer_addr_format(vip, d->cfg.vip_str, sizeof(d->cfg.vip_str));
}

/* Appends b unless it is listed already or the service is full. */
int cfg_backend_add(struct service_draft *d, const struct steer_backend_cfg *b, char *why,
		    size_t whylen)
{
	struct steer_backend_cfg *grown;
	size_t i;

	for (i = 0; i < d->cfg.n_backends; i++) {
		if (steer_addr_equal(&d->cfg.backends[i].addr, &b->addr))
			return cfg_why(why, whylen, "backend %s is listed twice", b->addr_str);
	}
	if (d->cfg.n_backends >= STEER_MAX_BACKENDS)
		return cfg_why(why, whylen, "at most %d backends per service, got more",
			       STEER_MAX_BACKENDS);
	grown = realloc(d->cfg.backends, (d->cfg.n_backends + 1) * sizeof(*grown));
	if (!grown)
		return cfg_why(why, whylen, "out of memory");
	d->cfg.backends = grown;
	d->cfg.backends[d->cfg.n_backends++] = *b;
	return 0;
}

/* The kernel rewrites a connect within its family: a backend must share the vip's. */
int cfg_backend_check_family(const struct service_draft *d, const struct steer_backend_cfg *b,
			     const char *vip_label, char *why, size_t whylen)
{
	bool v4 = steer_addr_is_v4(&d->cfg.vip);

	if (steer_addr_is_v4(&b->addr) == v4)
		return 0;
	return cfg_why(why, whylen, "backend %s is %s but %s %s is %s", b->addr_str,
		       v4 ? "IPv6" : "IPv4", vip_label, d->cfg.vip_str, v4 ? "IPv4" : "IPv6");
}

ssize_t cfg_service_find(const struct ctx *c, const struct steer_addr *vip)
{
	size_t i;

	for (i = 0; i < c->n_svcs; i++) {
		if (steer_addr_equal(&c->svcs[i].cfg.vip, vip))
			return (ssize_t)i;
	}
	return -1;
}

/* Appends a zeroed draft; NULL when out of memory. */
struct service_draft *cfg_service_append(struct ctx *c)
{
	struct service_draft *grown = realloc(c->svcs, (c->n_svcs + 1) * sizeof(*grown));

	if (!grown)
		return NULL;
	c->svcs = grown;
	memset(&c->svcs[c->n_svcs], 0, sizeof(c->svcs[0]));
	return &c->svcs[c->n_svcs++];
}

int cfg_vip_parse(const char *v, struct steer_addr *vip, char *why, size_t whylen)
{
	if (cfg_addr_parse(v, vip, why, whylen) || cfg_addr_check_usable(vip, "a VIP", why, whylen))
		return -1;
	return 0;
}

/* Where a service was given, for messages: "FILE:LINE: " or "--backend: ". */
static const char *service_origin(const struct ctx *c, const struct service_draft *d, char *buf,
				  size_t len)
{
	if (d->line > 0)
		snprintf(buf, len, "%s:%d: ", c->config_path, d->line);
	else
		snprintf(buf, len, "--backend: ");
	return buf;
}

/* The service whose VIP is a, or NULL. */
static const struct service_draft *vip_owner(const struct ctx *c, const struct steer_addr *a)
{
	ssize_t i = cfg_service_find(c, a);

	return i < 0 ? NULL : &c->svcs[i];
}

/*
 * A VIP is rewritten on every connect in the attached cgroup: a backend at
 * that address could never be reached (even directly), and a load endpoint
 * there would report whichever backend the connect was steered to.
 */
int cfg_services_check(struct ctx *c)
{
	char where[PATH_MAX + 32];
	size_t i, j;

	for (i = 0; i < c->n_svcs; i++) {
		const struct service_draft *d = &c->svcs[i];

		for (j = 0; j < d->cfg.n_backends; j++) {
			const struct steer_backend_cfg *b = &d->cfg.backends[j];
			const struct service_draft *o = vip_owner(c, &b->addr);

			if (o)
				return cfg_fail(
					c,
					"%sservice %s: backend %s is the VIP of service %s; "
					"connects to it would be steered and never reach it",
					service_origin(c, d, where, sizeof(where)), d->cfg.vip_str,
					b->addr_str, o->cfg.vip_str);
			o = b->loads_scheme == STEER_SCHEME_AUTO ? NULL : vip_owner(c, &b->loads);
			if (o)
				return cfg_fail(c,
						"%sservice %s: backend %s: loads %s is the VIP of "
						"service %s; the load would come from whichever "
						"backend that connect is steered to",
						service_origin(c, d, where, sizeof(where)),
						d->cfg.vip_str, b->addr_str, b->loads_str,
						o->cfg.vip_str);
		}
	}
	return STEER_CONFIG_OK;
}
