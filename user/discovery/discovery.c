// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * discovery.c - backends found through DNS (see discovery.h).
 *
 * One record per distinct name (two services, or two ports, that use one
 * name share its look-ups), keyed by an id that tags its query: a name
 * forgotten by a reload while its query is out is simply not found when the
 * answer comes. Each record keeps the addresses of its last answer that had
 * any; that set is what services get, so that a failed or empty answer, or a
 * dead server, never takes backends away.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "discovery/discovery.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "resolver.h"
#include "common/common.h"

#define NS_PER_S 1000000000ULL
#define TTL_FLOOR_MAX_S 3600 /* a longer TTL does not delay the next look-up further */

struct name {
	uint64_t id; /* the tag of its queries */
	char name[STEER_DNS_NAME_MAX + 2];
	/* The last known set: the last answer that had addresses. */
	struct steer_addr addrs[STEER_DNS_MAX_ADDRS];
	size_t n;
	bool answered;	     /* has had an answer with addresses */
	size_t told_dropped; /* records past the cap, as last logged */
	enum steer_dns_result state;
	bool in_flight;
	uint64_t next_ns; /* when the next look-up starts */
	uint64_t results[STEER_DNS_RESULTS];
	bool used; /* by the configuration being synced */
};

/* What a backend-dns entry of a service gave at the last expand. */
struct entry {
	char vip[STEER_ADDR_STRLEN];
	char name[STEER_DNS_NAME_MAX + 2];
	uint16_t port;
	uint32_t backends;
	uint32_t skipped; /* addresses of the VIP's family that could not be backends */
	bool wrong_family_only;
};

struct steer_discovery {
	struct steer_dns *dns; /* created when first needed */
	char servers[STEER_DNS_SERVERS_MAX];
	bool told_dns_broken;
	uint64_t channel_retry_ns; /* after a failed steer_dns_new */
	uint64_t interval_ns;
	struct name **names;
	size_t n_names;
	uint64_t next_id;
	bool changed;
	struct entry *entries;
	size_t n_entries;
	struct steer_dns_answer answer; /* large: kept here, not on the stack */
};

/* Names compare as DNS does: without case, a trailing dot or not. */
static bool same_name(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);

	la -= la && a[la - 1] == '.';
	lb -= lb && b[lb - 1] == '.';
	return la == lb && !strncasecmp(a, b, la);
}

struct steer_discovery *steer_discovery_new(void)
{
	struct steer_discovery *disc = calloc(1, sizeof(*disc));

	if (disc)
		disc->next_id = 1;
	return disc;
}

void steer_discovery_free(struct steer_discovery *disc)
{
	size_t i;

	if (!disc)
		return;
	steer_dns_free(disc->dns);
	for (i = 0; i < disc->n_names; i++)
		free(disc->names[i]);
	free(disc->names);
	free(disc->entries);
	free(disc);
}

/* ---- Following the configuration ------------------------------------------------ */

static struct name *name_find(const struct steer_discovery *disc, const char *name)
{
	size_t i;

	for (i = 0; i < disc->n_names; i++)
		if (same_name(disc->names[i]->name, name))
			return disc->names[i];
	return NULL;
}

static int name_use(struct steer_discovery *disc, const char *name)
{
	struct name *n = name_find(disc, name), **grown;

	if (n) {
		n->used = true;
		return 0;
	}
	n = calloc(1, sizeof(*n));
	grown = n ? realloc(disc->names, (disc->n_names + 1) * sizeof(*grown)) : NULL;
	if (!grown) {
		free(n);
		return -ENOMEM;
	}
	disc->names = grown;
	n->id = disc->next_id++;
	snprintf(n->name, sizeof(n->name), "%s", name);
	n->state = STEER_DNS_OK;
	n->used = true; /* next_ns 0: looked up at the next step */
	disc->names[disc->n_names++] = n;
	return 0;
}

/* Forgets the names that cfg does not use; their queries' answers are dropped. */
static void names_sweep(struct steer_discovery *disc)
{
	size_t i, kept = 0;

	for (i = 0; i < disc->n_names; i++) {
		if (disc->names[i]->used) {
			disc->names[kept++] = disc->names[i];
			continue;
		}
		/* The build that came with this configuration left its backends out. */
		log_info("dns: %s is no longer configured", disc->names[i]->name);
		free(disc->names[i]);
	}
	disc->n_names = kept;
}

/* A new server list: the old channel's queries are cancelled, every name is
 * looked up again with the new one. */
static void servers_set(struct steer_discovery *disc, const char *servers)
{
	size_t i;

	if (!strcmp(disc->servers, servers))
		return;
	snprintf(disc->servers, sizeof(disc->servers), "%s", servers);
	steer_dns_free(disc->dns);
	disc->dns = NULL;
	disc->told_dns_broken = false;
	disc->channel_retry_ns = 0;
	for (i = 0; i < disc->n_names; i++) {
		disc->names[i]->in_flight = false;
		disc->names[i]->next_ns = 0;
	}
}

int steer_discovery_sync(struct steer_discovery *disc, const struct steer_config *cfg)
{
	size_t i, j;

	for (i = 0; i < disc->n_names; i++)
		disc->names[i]->used = false;
	for (i = 0; i < cfg->n_services; i++)
		for (j = 0; j < cfg->services[i].n_dns; j++)
			if (name_use(disc, cfg->services[i].dns[j].name))
				return -ENOMEM; /* nothing is swept: every name stays */
	for (i = 0; i < cfg->n_peer_dns; i++)
		if (name_use(disc, cfg->peer_dns[i].name))
			return -ENOMEM;
	names_sweep(disc);
	disc->interval_ns = cfg->dns_interval_ns;
	servers_set(disc, cfg->dns_servers);
	return 0;
}

/* ---- Looking up ------------------------------------------------------------------- */

static bool addrs_differ(const struct name *n, const struct steer_dns_answer *a)
{
	return n->n != a->n || memcmp(n->addrs, a->addrs, a->n * sizeof(a->addrs[0]));
}

/* How long until the next look-up after an answer with addresses. */
static uint64_t next_wait_ns(const struct steer_discovery *disc, uint32_t ttl_s)
{
	uint64_t ttl_ns = (uint64_t)(ttl_s < TTL_FLOOR_MAX_S ? ttl_s : TTL_FLOOR_MAX_S) * NS_PER_S;

	return ttl_ns > disc->interval_ns ? ttl_ns : disc->interval_ns;
}

/* Appends " +A" or " -A" for each address only in a or only in b (both
 * sorted), at most 8 of them, to buf. */
static void addrs_diff(const struct steer_addr *a, size_t na, const struct steer_addr *b, size_t nb,
		       char *buf, size_t len)
{
	size_t i = 0, j = 0, shown = 0, at = strlen(buf);
	char text[STEER_ADDR_STRLEN];

	while ((i < na || j < nb) && at < len) {
		int c = i == na ? 1 : j == nb ? -1 : memcmp(&a[i], &b[j], sizeof(a[0]));
		const struct steer_addr *x = c < 0 ? &a[i] : &b[j];

		if (c == 0) {
			i++, j++;
			continue;
		}
		c < 0 ? i++ : j++;
		if (shown++ == 8) {
			snprintf(buf + at, len - at, " ...");
			return;
		}
		steer_addr_format(x, text, sizeof(text));
		text[strlen(text) - 2] = 0; /* the port, ":0" */
		at += (size_t)snprintf(buf + at, len - at, " %c%s", c < 0 ? '-' : '+', text);
	}
}

static void answer_with_addresses(struct steer_discovery *disc, struct name *n,
				  const struct steer_dns_answer *a, uint64_t now)
{
	bool changed = !n->answered || addrs_differ(n, a);
	char diff[256] = "";

	if (changed)
		addrs_diff(n->addrs, n->n, a->addrs, a->n, diff, sizeof(diff));
	if (n->answered && n->state != STEER_DNS_OK)
		log_info("dns: %s answers again: %zu address(es)%s", n->name, a->n, diff);
	else if (changed)
		log_info("dns: %s: %zu address(es):%s", n->name, a->n, diff);
	if (a->dropped != n->told_dropped && a->dropped)
		log_warn("dns: %s: %zu address(es) past the %d a service can hold; keeping "
			 "the %d lowest",
			 n->name, a->dropped, STEER_DNS_MAX_ADDRS, STEER_DNS_MAX_ADDRS);
	n->told_dropped = a->dropped;
	if (changed) {
		memcpy(n->addrs, a->addrs, a->n * sizeof(a->addrs[0]));
		n->n = a->n;
		n->answered = true;
		disc->changed = true;
	}
	n->state = STEER_DNS_OK;
	n->results[STEER_DNS_OK]++;
	n->next_ns = now + next_wait_ns(disc, a->min_ttl_s);
}

/* Failed or empty: keep what is known; warn once per change of state. */
static void answer_without(struct steer_discovery *disc, struct name *n,
			   const struct steer_dns_answer *a, uint64_t now)
{
	enum steer_dns_result r = a->ok ? STEER_DNS_EMPTY : STEER_DNS_FAILED;
	const char *why = !a->ok	? a->detail
			  : a->unusable ? "only multicast, broadcast or unspecified addresses"
					: "no A or AAAA record";

	if (n->state != r && n->answered)
		log_warn("dns: %s: %s; keeping the last known %zu address(es)", n->name, why, n->n);
	else if (n->state != r)
		log_warn("dns: %s: %s; no backends from it until it answers", n->name, why);
	n->state = r;
	n->results[r]++;
	n->next_ns = now + disc->interval_ns;
}

static void answer_take(struct steer_discovery *disc, const struct steer_dns_answer *a,
			uint64_t now)
{
	size_t i;

	for (i = 0; i < disc->n_names; i++) {
		struct name *n = disc->names[i];

		if (n->id != (uint64_t)(uintptr_t)a->tag)
			continue;
		n->in_flight = false;
		if (a->ok && a->n)
			answer_with_addresses(disc, n, a, now);
		else
			answer_without(disc, n, a, now);
		return;
	}
}

/* The channel, made when first needed; a failure is retried each interval. */
static bool channel_ready(struct steer_discovery *disc, uint64_t now)
{
	char err[256];

	if (disc->dns)
		return true;
	if (now < disc->channel_retry_ns)
		return false;
	disc->dns = steer_dns_new(disc->servers, err, sizeof(err));
	if (disc->dns) {
		disc->told_dns_broken = false;
		return true;
	}
	if (!disc->told_dns_broken)
		log_error("dns: cannot set up the resolver: %s; the last known addresses stay",
			  err);
	disc->told_dns_broken = true;
	disc->channel_retry_ns = now + disc->interval_ns;
	return false;
}

/* Starts the due look-ups, waits at most wait_ms for the resolver, takes the answers. */
static void step(struct steer_discovery *disc, uint64_t now_ns, int wait_ms)
{
	size_t i;

	if (!disc || !disc->n_names || !channel_ready(disc, now_ns))
		return;
	for (i = 0; i < disc->n_names; i++) {
		struct name *n = disc->names[i];

		if (n->in_flight || now_ns < n->next_ns)
			continue;
		if (steer_dns_query(disc->dns, n->name, (void *)(uintptr_t)n->id) == 0)
			n->in_flight = true;
		else
			n->next_ns = now_ns + disc->interval_ns;
	}
	steer_dns_step(disc->dns, wait_ms);
	while (steer_dns_next(disc->dns, &disc->answer))
		answer_take(disc, &disc->answer, steer_monotonic_ns());
}

void steer_discovery_step(struct steer_discovery *disc, uint64_t now_ns)
{
	step(disc, now_ns, 0);
}

/* The first name that has had no answer yet, or NULL. */
static const struct name *unanswered(const struct steer_discovery *disc)
{
	size_t i;

	for (i = 0; i < disc->n_names; i++) {
		const uint64_t *r = disc->names[i]->results;

		if (!r[STEER_DNS_OK] && !r[STEER_DNS_EMPTY] && !r[STEER_DNS_FAILED])
			return disc->names[i];
	}
	return NULL;
}

bool steer_discovery_wait_first(struct steer_discovery *disc, uint64_t timeout_ns,
				volatile sig_atomic_t *stop)
{
	uint64_t deadline = steer_monotonic_ns() + timeout_ns;
	const struct name *n;

	if (!disc)
		return false;
	while (!*stop && (n = unanswered(disc))) {
		uint64_t now = steer_monotonic_ns();

		if (now >= deadline) {
			log_warn("dns: %s has not answered within %llu ms; starting without its "
				 "backends",
				 n->name, (unsigned long long)(timeout_ns / 1000000));
			break;
		}
		step(disc, now, 50);
		if (!disc->dns)
			break; /* no resolver (logged): nothing to wait for */
	}
	return disc->changed;
}

bool steer_discovery_changed(const struct steer_discovery *disc)
{
	return disc && disc->changed;
}

/* ---- Backends from the addresses ------------------------------------------------------ */

static bool is_vip(const struct steer_config *cfg, const struct steer_addr *a)
{
	size_t i;

	for (i = 0; i < cfg->n_services; i++)
		if (steer_addr_equal(&cfg->services[i].vip, a))
			return true;
	return false;
}

static bool listed(const struct steer_service_cfg *o, const struct steer_addr *a)
{
	size_t i;

	for (i = 0; i < o->n_backends; i++)
		if (steer_addr_equal(&o->backends[i].addr, a))
			return true;
	return false;
}

/* Why address ip of entry e cannot be a backend, or NULL (*b made). */
static const char *backend_of(const struct steer_config *cfg, const struct steer_dns_backend_cfg *e,
			      const struct steer_addr *ip, struct steer_backend_cfg *b)
{
	static char why[160];

	if (steer_config_dns_backend(e, ip, b, why, sizeof(why)))
		return why;
	if (is_vip(cfg, &b->addr) ||
	    (b->loads_scheme != STEER_SCHEME_AUTO && is_vip(cfg, &b->loads)))
		return "it is a VIP: connects to it are steered";
	return NULL;
}

/* The previous expand's record of an entry, for logging changes only. */
static const struct entry *entry_before(const struct steer_discovery *disc, const struct entry *e)
{
	size_t i;

	for (i = 0; i < disc->n_entries; i++) {
		const struct entry *p = &disc->entries[i];

		if (!strcmp(p->vip, e->vip) && same_name(p->name, e->name) && p->port == e->port)
			return p;
	}
	return NULL;
}

/* Appends the backends entry e of service s gives to o; records them in rec. */
static void entry_expand(const struct steer_discovery *disc, const struct steer_config *cfg,
			 const struct steer_service_cfg *s, const struct steer_dns_backend_cfg *e,
			 struct steer_service_cfg *o, struct entry *rec)
{
	const struct name *n = name_find(disc, e->name);
	bool v4 = steer_addr_is_v4(&s->vip);
	size_t i, other_family = 0;

	*rec = (struct entry){ .port = e->port };
	snprintf(rec->vip, sizeof(rec->vip), "%s", s->vip_str);
	snprintf(rec->name, sizeof(rec->name), "%s", e->name);
	for (i = 0; n && i < n->n; i++) {
		struct steer_backend_cfg b;
		const char *why;

		if (steer_addr_is_v4(&n->addrs[i]) != v4) {
			other_family++; /* the kernel rewrites a connect within its family */
			continue;
		}
		why = backend_of(cfg, e, &n->addrs[i], &b);
		if (!why && listed(o, &b.addr))
			continue; /* a literal backend, or another entry's: the first wins */
		if (!why && o->n_backends >= STEER_MAX_BACKENDS)
			why = "the service has its maximum of backends";
		if (why) {
			if (rec->skipped++ == 0)
				log_debug("%s: backend-dns %s: skipping %s: %s", s->vip_str,
					  e->spec, b.addr_str, why);
			continue;
		}
		o->backends[o->n_backends++] = b;
		rec->backends++;
	}
	rec->wrong_family_only = n && n->n && other_family == n->n;
}

/* Logs what changed about an entry since the last expand (never once per look-up). */
static void entry_log(const struct steer_discovery *disc, const struct entry *rec, const char *spec)
{
	const struct entry *p = entry_before(disc, rec);

	if (rec->wrong_family_only && !(p && p->wrong_family_only))
		log_warn("%s: backend-dns %s: no address of the VIP's family (IPv%c)", rec->vip,
			 spec, strchr(rec->vip, '[') ? '6' : '4');
	if (rec->skipped && !(p && p->skipped == rec->skipped))
		log_warn("%s: backend-dns %s: %u address(es) cannot be backends (a VIP, "
			 "unusable, or the service is full; see debug)",
			 rec->vip, spec, rec->skipped);
	if (p ? p->backends != rec->backends : rec->backends > 0)
		log_info("%s: backend-dns %s: %u backend(s)", rec->vip, spec, rec->backends);
}

static int service_expand(struct steer_discovery *disc, const struct steer_config *cfg,
			  const struct steer_service_cfg *s, struct steer_service_cfg *o,
			  struct entry *recs)
{
	size_t j, cap = s->n_backends;

	for (j = 0; j < s->n_dns; j++) {
		const struct name *n = name_find(disc, s->dns[j].name);

		cap += n ? n->n : 0;
	}
	*o = *s;
	/* Room for every address (entry_expand stops at STEER_MAX_BACKENDS). */
	o->backends = malloc((cap ? cap : 1) * sizeof(*o->backends));
	if (!o->backends)
		return -ENOMEM;
	if (s->n_backends)
		memcpy(o->backends, s->backends, s->n_backends * sizeof(*s->backends));
	for (j = 0; j < s->n_dns; j++)
		entry_expand(disc, cfg, s, &s->dns[j], o, &recs[j]);
	return 0;
}

int steer_discovery_expand(struct steer_discovery *disc, const struct steer_config *cfg,
			   struct steer_config *out)
{
	struct entry *recs;
	size_t i, j, n_recs = 0, k = 0;

	disc->changed = false; /* also on failure: the next change tries again */
	*out = *cfg;
	for (i = 0; i < cfg->n_services; i++)
		n_recs += cfg->services[i].n_dns;
	out->services = calloc(cfg->n_services ? cfg->n_services : 1, sizeof(*out->services));
	recs = calloc(n_recs ? n_recs : 1, sizeof(*recs));
	if (!out->services || !recs) {
		free(recs);
		out->n_services = 0;
		steer_discovery_expanded_free(out);
		return -ENOMEM;
	}
	for (i = 0; i < cfg->n_services; i++) {
		if (service_expand(disc, cfg, &cfg->services[i], &out->services[i], &recs[k])) {
			out->n_services = i;
			free(recs);
			steer_discovery_expanded_free(out);
			return -ENOMEM;
		}
		for (j = 0; j < cfg->services[i].n_dns; j++, k++)
			entry_log(disc, &recs[k], cfg->services[i].dns[j].spec);
	}
	free(disc->entries);
	disc->entries = recs;
	disc->n_entries = n_recs;
	return 0;
}

void steer_discovery_expanded_free(struct steer_config *out)
{
	size_t i;

	for (i = 0; i < out->n_services; i++)
		free(out->services[i].backends);
	free(out->services);
	out->services = NULL;
	out->n_services = 0;
}

/* ---- Peers from the addresses ---------------------------------------------------------- */

/* Appends a to out (room for STEER_PEERS_MAX) unless it is there already, is
 * this router's own --peer-listen, or is of the other address family (the
 * reports go out of the --peer-listen socket); false when out is full. */
static bool peer_append(const struct steer_config *cfg, const struct steer_addr *a,
			struct steer_addr *out, size_t *n)
{
	size_t i;

	if (cfg->peer_listen_set && (steer_addr_equal(a, &cfg->peer_listen) ||
				     steer_addr_is_v4(a) != steer_addr_is_v4(&cfg->peer_listen)))
		return true;
	for (i = 0; i < *n; i++)
		if (steer_addr_equal(&out[i], a))
			return true;
	if (*n == STEER_PEERS_MAX)
		return false;
	out[(*n)++] = *a;
	return true;
}

size_t steer_discovery_peers(const struct steer_discovery *disc, const struct steer_config *cfg,
			     struct steer_addr *out)
{
	size_t i, j, n = 0, left_out = 0;

	for (i = 0; i < cfg->n_peers; i++)
		out[n++] = cfg->peers[i];
	for (i = 0; disc && i < cfg->n_peer_dns; i++) {
		const struct name *nm = name_find(disc, cfg->peer_dns[i].name);

		for (j = 0; nm && j < nm->n; j++) {
			struct steer_addr a = nm->addrs[j];

			a.port = htons(cfg->peer_dns[i].port);
			left_out += !peer_append(cfg, &a, out, &n);
		}
	}
	if (left_out)
		log_warn("peer-dns: %zu address(es) left out: at most %d peers", left_out,
			 STEER_PEERS_MAX);
	return n;
}

/* ---- Metrics ------------------------------------------------------------------------------ */

void steer_discovery_metrics(const struct steer_discovery *disc,
			     struct steer_metrics_snapshot *snap)
{
	size_t i;

	if (!disc || (!disc->n_names && !disc->n_entries))
		return;
	snap->dns_names = calloc(disc->n_names ? disc->n_names : 1, sizeof(*snap->dns_names));
	snap->dns_entries =
		calloc(disc->n_entries ? disc->n_entries : 1, sizeof(*snap->dns_entries));
	if (!snap->dns_names || !snap->dns_entries)
		return; /* the DNS families are left out of this scrape */
	for (i = 0; i < disc->n_names; i++) {
		const struct name *n = disc->names[i];
		struct steer_metrics_dns_name *m = &snap->dns_names[i];

		snprintf(m->name, sizeof(m->name), "%s", n->name);
		memcpy(m->resolutions_total, n->results, sizeof(m->resolutions_total));
		m->addresses = (uint32_t)n->n;
		m->stale = n->state != STEER_DNS_OK;
	}
	snap->n_dns_names = disc->n_names;
	for (i = 0; i < disc->n_entries; i++) {
		const struct entry *e = &disc->entries[i];
		struct steer_metrics_dns_entry *m = &snap->dns_entries[i];

		snprintf(m->vip, sizeof(m->vip), "%s", e->vip);
		snprintf(m->name, sizeof(m->name), "%s", e->name);
		m->port = e->port;
		m->backends = e->backends;
	}
	snap->n_dns_entries = disc->n_entries;
}
