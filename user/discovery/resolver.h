/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * resolver.h - A and AAAA look-ups with c-ares, asynchronous, driven by the
 * caller's thread (the daemon's loop): start queries, give the resolver a
 * moment now and then with steer_dns_step(), collect answers.
 */
#ifndef STEER_DNS_H
#define STEER_DNS_H

#include <stddef.h>
#include <stdint.h>

#include "steer_common.h"

struct steer_dns;

/* More addresses than a service can hold backends: of the usable ones, the
 * smallest are kept and the rest dropped (counted in dropped). */
#define STEER_DNS_MAX_ADDRS STEER_MAX_BACKENDS

struct steer_dns_answer {
	void *tag;	  /* as given to steer_dns_query */
	int ok;		  /* 1: the name resolved (n may still be 0: no records) */
	char detail[128]; /* why it failed; "" when ok */
	/* Usable addresses (network order, IPv4 v4-mapped, port 0), sorted and
	 * unique: the smallest STEER_DNS_MAX_ADDRS of the answer's. */
	struct steer_addr addrs[STEER_DNS_MAX_ADDRS];
	size_t n;
	size_t dropped;	    /* usable records past STEER_DNS_MAX_ADDRS */
	size_t unusable;    /* multicast, broadcast or unspecified records */
	uint32_t min_ttl_s; /* smallest TTL of the records, seconds */
};

/*
 * servers: "ADDR[:PORT][,ADDR[:PORT]...]" (IPv6 in brackets), or NULL or ""
 * for the system's resolver configuration (/etc/resolv.conf).
 * Returns NULL with the reason in err.
 */
struct steer_dns *steer_dns_new(const char *servers, char *err, size_t errlen);
void steer_dns_free(struct steer_dns *d); /* answers not yet collected are dropped */

/* Look up A and AAAA records of name. 0, or a negative errno. */
int steer_dns_query(struct steer_dns *d, const char *name, void *tag);

/* Wait at most timeout_ms for the resolver's sockets, then process them
 * and its timeouts. */
void steer_dns_step(struct steer_dns *d, int timeout_ms);
/* One finished look-up: 1 with *out filled, 0 when none is ready. */
int steer_dns_next(struct steer_dns *d, struct steer_dns_answer *out);

#endif /* STEER_DNS_H */
