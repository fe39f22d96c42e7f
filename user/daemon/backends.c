// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * backends.c - smg-steerd's services and backends: built from the configuration,
 * and rebuilt by a reload or a DNS change keeping the state of unchanged backends.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "daemon.h"

/* ---- services and backends ------------------------------------------------------- */

const char *backend_token(const struct steer_config *cfg, const struct steer_backend_cfg *b)
{
	return b->auth && b->auth <= cfg->n_auths ? cfg->auths[b->auth - 1].token : NULL;
}

static int backend_loads_add(struct daemon *d, const struct steer_config *all,
			     const struct steer_backend_cfg *cfg, void *tag,
			     uint32_t max_backoff_ms)
{
	struct steer_loads_spec spec = {
		.scheme = cfg->loads_scheme,
		.engine = cfg->engine,
		.loads_addr = cfg->loads_str,
		.path = cfg->loads_path,
		.traffic_addr = cfg->addr_str,
		.token = backend_token(all, cfg),
		/* A backend whose source stopped answering looks for another
		 * once it has failed long enough to be ejected. */
		.reprobe_after = all->unhealthy_after,
		.max_backoff_ms = max_backoff_ms,
	};

	return steer_loads_add(d->loads, &spec, tag);
}

static struct backend *backend_new(struct daemon *d, const struct steer_config *all,
				   const struct steer_backend_cfg *cfg, struct service *s)
{
	struct backend *b = calloc(1, sizeof(*b));
	uint32_t max_backoff_ms;

	if (!b)
		return NULL;
	b->cfg = *cfg;
	b->slot = NO_SLOT;
	eject_init(b);
	/* Not in the table until a poll succeeds: a backend that is not up yet
	 * would otherwise look idle (no snapshot, no live connections). */
	b->health = STEER_HEALTH_UNKNOWN;
	b->logged_kind = STEER_POLL_OK; /* only report what goes wrong, and recoveries */
	/* Reconnect attempts at least once an interval (of the configuration
	 * being built: a reload may change it). */
	max_backoff_ms = (uint32_t)(all->interval_ns / NS_PER_MS);
	b->handle = backend_loads_add(d, all, cfg, b, max_backoff_ms ? max_backoff_ms : 1);
	if (b->handle < 0) {
		log_error("%s: backend %s: cannot set up load polling of %s: %s", s->vip_str,
			  cfg->addr_str, cfg->loads_str, strerror(-b->handle));
		free(b);
		return NULL;
	}
	return b;
}

static void backend_free(struct daemon *d, struct backend *b)
{
	if (!b)
		return;
	if (b->call_pending && d->pending)
		d->pending--; /* a removed handle's result is never reported */
	if (b->handle >= 0)
		steer_loads_remove(d->loads, b->handle);
	eject_free(b);
	free(b);
}

void services_free(struct daemon *d, struct service *svcs, size_t n)
{
	size_t i, j;

	for (i = 0; i < n; i++) {
		for (j = 0; j < svcs[i].n; j++)
			backend_free(d, svcs[i].b[j]);
		free(svcs[i].b);
	}
	free(svcs);
}

/* Find (and take) the state of a backend that a reload keeps unchanged. */
/* Same load source: address, scheme, path, engine and auth file. */
static bool same_source(const struct steer_config *old_all, const struct steer_backend_cfg *old,
			const struct steer_config *all, const struct steer_backend_cfg *cfg)
{
	const char *old_file = old->auth ? old_all->auths[old->auth - 1].file : "";
	const char *file = cfg->auth ? all->auths[cfg->auth - 1].file : "";

	return steer_addr_equal(&old->loads, &cfg->loads) &&
	       old->loads_scheme == cfg->loads_scheme && old->engine == cfg->engine &&
	       !strcmp(old->loads_path, cfg->loads_path) && !strcmp(old_file, file);
}

/* A reload reads the token files again: a rotated token takes effect. */
static void refresh_token(struct daemon *d, struct backend *b, const struct steer_config *all,
			  const struct steer_backend_cfg *cfg)
{
	const char *old = backend_token(&d->cfg, &b->cfg), *now = backend_token(all, cfg);

	if ((old == NULL) != (now == NULL) || (old && strcmp(old, now)))
		steer_loads_set_auth(d->loads, b->handle, now);
}

static struct backend *take_old_backend(struct daemon *d, const struct steer_config *all,
					const struct steer_addr *vip,
					const struct steer_backend_cfg *cfg)
{
	size_t i, j;

	for (i = 0; i < d->n_svcs; i++) {
		struct service *s = &d->svcs[i];

		if (!steer_addr_equal(&s->vip, vip))
			continue;
		for (j = 0; j < s->n; j++) {
			struct backend *b = s->b[j];

			if (b && steer_addr_equal(&b->cfg.addr, &cfg->addr) &&
			    same_source(&d->cfg, &b->cfg, all, cfg)) {
				refresh_token(d, b, all, cfg);
				b->cfg = *cfg; /* its auth index is the new configuration's */
				s->b[j] = NULL;
				b->origin = &s->b[j];
				return b;
			}
		}
	}
	return NULL;
}

/*
 * Build the service list of cfg, moving over the state of every backend
 * that is unchanged (same service, traffic and loads address): its
 * snapshot, health and in-flight bookkeeping survive a reload.
 */
/* The running service whose backend array holds the slot p. */
static struct service *service_holding(struct daemon *d, struct backend **p)
{
	size_t i;

	for (i = 0; i < d->n_svcs; i++)
		if (p >= d->svcs[i].b && p < d->svcs[i].b + d->svcs[i].n)
			return &d->svcs[i];
	return NULL;
}

static int services_build(struct daemon *d, const struct steer_config *cfg, struct service **out)
{
	struct service *svcs = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*svcs));
	size_t i, j;

	if (!svcs)
		return -ENOMEM;
	for (i = 0; i < cfg->n_services; i++) {
		const struct steer_service_cfg *sc = &cfg->services[i];
		struct service *s = &svcs[i];

		s->vip = sc->vip;
		snprintf(s->vip_str, sizeof(s->vip_str), "%s", sc->vip_str);
		s->policy = sc->policy;
		s->policy.wire_step = cfg->wire_step;
		s->b = calloc(sc->n_backends ? sc->n_backends : 1, sizeof(*s->b));
		if (!s->b)
			goto fail;
		for (j = 0; j < sc->n_backends; j++) {
			struct backend *b = take_old_backend(d, cfg, &sc->vip, &sc->backends[j]);

			if (!b) {
				b = backend_new(d, cfg, &sc->backends[j], s);
				/* Adopted state: the slot (and its counters) may exist. */
				if (b)
					steer_dp_slot(d->dp, &sc->vip, &b->cfg.addr, &b->slot);
			}
			if (!b)
				goto fail;
			b->svc = s;
			s->b[s->n++] = b;
		}
		/* Keep the service's counters across a reload. */
		for (j = 0; j < d->n_svcs; j++)
			if (steer_addr_equal(&d->svcs[j].vip, &s->vip)) {
				s->publishes = d->svcs[j].publishes;
				s->poll_count = d->svcs[j].poll_count;
				s->poll_sum_s = d->svcs[j].poll_sum_s;
				s->fail_open = d->svcs[j].fail_open;
				s->fail_open_alarm = d->svcs[j].fail_open_alarm;
				memcpy(s->poll_buckets, d->svcs[j].poll_buckets,
				       sizeof(s->poll_buckets));
			}
	}
	for (i = 0; i < cfg->n_services; i++)
		for (j = 0; j < svcs[i].n; j++)
			svcs[i].b[j]->origin = NULL;
	*out = svcs;
	return 0;
fail:
	/* Give the taken backends back: the running configuration stays whole. */
	for (i = 0; i < cfg->n_services; i++)
		for (j = 0; j < svcs[i].n; j++) {
			struct backend *b = svcs[i].b[j];

			if (!b->origin)
				continue;
			*b->origin = b;
			b->svc = service_holding(d, b->origin);
			b->origin = NULL;
			svcs[i].b[j] = NULL;
		}
	services_free(d, svcs, cfg->n_services);
	return -ENOMEM;
}

/*
 * services_build with each service's discovered backends added to cfg's
 * (discovery.h); then discovery follows cfg (new names, --dns-interval).
 */
int services_build_dns(struct daemon *d, const struct steer_config *cfg, struct service **out)
{
	struct steer_config all;
	int rc = steer_discovery_expand(d->disc, cfg, &all);

	if (rc)
		return rc;
	rc = services_build(d, &all, out);
	steer_discovery_expanded_free(&all);
	if (!rc && steer_discovery_sync(d->disc, cfg))
		log_error(
			"dns: out of memory; the names of the configuration are not all looked up");
	return rc;
}

/* Every backend that has a slot, with its service's id in the data plane:
 * what the peer and probe threads map their work to. A calloc'd array the
 * caller frees (*n may be 0), or NULL when out of memory. */
struct slotted_backend *slotted_backends(struct daemon *d, size_t *n)
{
	struct slotted_backend *out;
	size_t i, j, total = 0;

	*n = 0;
	for (i = 0; i < d->n_svcs; i++)
		total += d->svcs[i].n;
	out = calloc(total ? total : 1, sizeof(*out));
	if (!out)
		return NULL;
	for (i = 0; i < d->n_svcs; i++) {
		const struct service *s = &d->svcs[i];
		int id = steer_dp_service_id(d->dp, &s->vip);

		for (j = 0; id >= 0 && j < s->n; j++) {
			if (s->b[j]->slot == NO_SLOT)
				continue;
			out[(*n)++] = (struct slotted_backend){ .s = s,
								.b = s->b[j],
								.svc_id = (uint32_t)id,
								.slot_gen = steer_dp_slot_gen(
									d->dp, s->b[j]->slot) };
		}
	}
	return out;
}
