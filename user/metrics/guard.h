/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * guard.h - which connection of the metrics server to drop when too
 * many are open, so that a scrape or a liveness probe always gets in.
 *
 * libmicrohttpd alone stops accepting at its connection limit and leaves the
 * rest in the listen backlog: a few hundred clients that connect and send
 * nothing (or half a request line) then hold /healthz off for minutes. The
 * server here accepts every connection and, once more than the limit are
 * open, drops one that is not being answered, the one waiting longest:
 * a connection still sending its request, or idle between requests. One
 * being answered is dropped only once it has taken longer than the answer
 * deadline (a client that does not read); if every one is being answered in
 * time, the newcomer is the one dropped.
 *
 * Pure bookkeeping, no I/O: the caller closes what it is told to. Not
 * thread-safe; libmicrohttpd calls everything from its one polling thread.
 */
#ifndef STEER_METRICS_GUARD_H
#define STEER_METRICS_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct steer_guard;
struct steer_guard_conn;

/* limit: connections served at once; cap: connections tracked at most
 * (dropped ones stay tracked until the server has closed them);
 * answer_deadline_ns: how long an answer may take before it may be dropped. */
struct steer_guard *steer_guard_new(size_t limit, size_t cap, uint64_t answer_deadline_ns);
void steer_guard_free(struct steer_guard *g);

/*
 * A connection was accepted; owner is the caller's handle for it. Sets *self
 * to its record (NULL when out of memory or beyond cap: drop the connection).
 * Returns the record of a connection to drop now (possibly *self), or NULL.
 */
struct steer_guard_conn *steer_guard_admit(struct steer_guard *g, void *owner, uint64_t now_ns,
					   struct steer_guard_conn **self);
/* Its request was read in full and is being answered. */
void steer_guard_answering(struct steer_guard_conn *c, uint64_t now_ns);
/* The answer is done: idle until the next request. */
void steer_guard_idle(struct steer_guard_conn *c, uint64_t now_ns);
/* The server closed it: forget it (c is freed). */
void steer_guard_closed(struct steer_guard *g, struct steer_guard_conn *c);

void *steer_guard_owner(const struct steer_guard_conn *c);
/* Open and not told to be dropped. */
size_t steer_guard_open(const struct steer_guard *g);
/* Connections dropped so far to stay within the limit. */
uint64_t steer_guard_dropped(const struct steer_guard *g);

#endif /* STEER_METRICS_GUARD_H */
