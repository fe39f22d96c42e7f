/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * discovery.h - backends found through DNS (--backend-dns): every name of
 * the configuration is looked up with c-ares (resolver.h) on the daemon's loop,
 * and each service's backends are its literal ones plus those its names
 * resolve to.
 *
 * The daemon drives it from its wait loop (steer_discovery_step, never
 * blocking), and when a name's addresses changed it rebuilds its services
 * from steer_discovery_expand(): the same path as a reload, so that
 * unchanged backends keep their state.
 *
 * When a name is looked up: at once when it first appears (start, SIGHUP),
 * then max(--dns-interval, the smallest TTL of its last answer, at most 1 h)
 * after an answer with addresses, and --dns-interval after a failed or empty
 * one. A failed or empty answer keeps the last known addresses.
 *
 * --peer-dns names are looked up the same way; the routers this one reports
 * to are steer_discovery_peers().
 */
#ifndef STEER_DISCOVERY_H
#define STEER_DISCOVERY_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "metrics/metrics.h"

struct steer_discovery;

struct steer_discovery *steer_discovery_new(void);
void steer_discovery_free(struct steer_discovery *disc); /* NULL is fine */

/*
 * Follow cfg: look up its new names at once, forget the names it no longer
 * has, take its --dns-interval and --dns-server (a new server list restarts
 * every look-up). Names that stay keep their addresses. 0, or -ENOMEM.
 */
int steer_discovery_sync(struct steer_discovery *disc, const struct steer_config *cfg);

/* Starts the look-ups that are due and takes the answers that arrived,
 * without waiting. now_ns: CLOCK_MONOTONIC. */
void steer_discovery_step(struct steer_discovery *disc, uint64_t now_ns);

/*
 * At start, before the first publish: waits until every name has had an
 * answer (with addresses or not), at most timeout_ns, or until *stop. A
 * daemon that adopted published tables would otherwise replace them with
 * tables that lack every discovered backend. Returns steer_discovery_changed().
 */
bool steer_discovery_wait_first(struct steer_discovery *disc, uint64_t timeout_ns,
				volatile sig_atomic_t *stop);

/* True when a name's addresses changed since the last steer_discovery_expand. */
bool steer_discovery_changed(const struct steer_discovery *disc);

/*
 * cfg with each service's backends followed by those its backend-dns names
 * give: per address of the VIP's family, unless it is a literal backend
 * (the literal one wins), another entry's, a VIP, or unusable; at most
 * STEER_MAX_BACKENDS per service. *out shares cfg's auths and entries: free
 * it with steer_discovery_expanded_free, never steer_config_free. Keeps each
 * entry's count for the metrics, logs what it skips once per change, and
 * clears the changed flag. 0, or -ENOMEM.
 */
int steer_discovery_expand(struct steer_discovery *disc, const struct steer_config *cfg,
			   struct steer_config *out);
void steer_discovery_expanded_free(struct steer_config *out);

/*
 * The routers this one reports to: cfg's --peer addresses, then every
 * address its --peer-dns names last resolved to (with the entry's port),
 * leaving out duplicates, cfg's own --peer-listen and addresses of the
 * other family than it; at most
 * STEER_PEERS_MAX (out has that room; the rest are logged). disc may be NULL
 * (literal peers only).
 */
size_t steer_discovery_peers(const struct steer_discovery *disc, const struct steer_config *cfg,
			     struct steer_addr *out);

/* Fills snap's dns_names and dns_entries (malloc'd: the caller frees them). */
void steer_discovery_metrics(const struct steer_discovery *disc,
			     struct steer_metrics_snapshot *snap);

#endif /* STEER_DISCOVERY_H */
