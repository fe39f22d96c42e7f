// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * resolver.c - A and AAAA look-ups with c-ares (ares_getaddrinfo), on the
 * caller's thread.
 *
 * c-ares calls back from inside ares_process_fd(); the callback only copies
 * the addresses into a finished answer, which the caller collects with
 * steer_dns_next(), so that the caller never runs inside the resolver.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "resolver.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <ares.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

struct query {
	struct steer_dns *d;
	void *tag;
};

struct steer_dns {
	ares_channel ch;
	size_t pending;
	struct steer_dns_answer *done; /* finished, not yet collected */
	size_t n_done, cap_done;
};

static pthread_once_t ares_once = PTHREAD_ONCE_INIT;
static int ares_init_rc;

static void library_init(void)
{
	ares_init_rc = ares_library_init(ARES_LIB_INIT_ALL);
}

struct steer_dns *steer_dns_new(const char *servers, char *err, size_t errlen)
{
	struct ares_options o = { .timeout = 1000, .tries = 2 };
	struct steer_dns *d;
	int rc;

	pthread_once(&ares_once, library_init);
	if (ares_init_rc != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares: %s", ares_strerror(ares_init_rc));
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	/* Timeouts in milliseconds, two tries: a look-up ends within seconds. */
	rc = ares_init_options(&d->ch, &o, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
	if (rc != ARES_SUCCESS) {
		snprintf(err, errlen, "c-ares: %s", ares_strerror(rc));
		free(d);
		return NULL;
	}
	if (servers && servers[0]) {
		rc = ares_set_servers_ports_csv(d->ch, servers);
		if (rc != ARES_SUCCESS) {
			snprintf(err, errlen, "DNS servers '%s': %s", servers, ares_strerror(rc));
			steer_dns_free(d);
			return NULL;
		}
	}
	return d;
}

static struct steer_dns_answer *answer_slot(struct steer_dns *d)
{
	if (d->n_done == d->cap_done) {
		size_t cap = d->cap_done ? d->cap_done * 2 : 4;
		struct steer_dns_answer *grown = realloc(d->done, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		d->done = grown;
		d->cap_done = cap;
	}
	memset(&d->done[d->n_done], 0, sizeof(d->done[0]));
	return &d->done[d->n_done++];
}

static bool addr_of(const struct sockaddr *sa, struct steer_addr *out)
{
	memset(out, 0, sizeof(*out));
	out->proto = STEER_IPPROTO_TCP;
	if (sa->sa_family == AF_INET) {
		out->ip6[2] = htonl(0x0000ffff);
		out->ip6[3] = ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
		return true;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(out->ip6, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		return true;
	}
	return false;
}

static int addr_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct steer_addr));
}

/*
 * Keeps x if it is usable, new, and among the STEER_DNS_MAX_ADDRS smallest
 * seen so far; a->addrs stays sorted. Keeping the smallest rather than the
 * first makes the kept set the same whatever order the records come in, so
 * that a name with more records than a service holds keeps a stable set, and
 * unusable records never take a usable one's place.
 */
static void keep_address(struct steer_dns_answer *a, const struct steer_addr *x)
{
	size_t lo = 0, hi = a->n;

	if (steer_addr_unusable(x)) {
		a->unusable++;
		return;
	}
	while (lo < hi) { /* the first kept address not below x */
		size_t mid = lo + (hi - lo) / 2;

		if (addr_cmp(&a->addrs[mid], x) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < a->n && !addr_cmp(&a->addrs[lo], x))
		return; /* listed twice */
	if (a->n == STEER_DNS_MAX_ADDRS) {
		a->dropped++;
		if (lo == a->n)
			return; /* larger than every kept one */
		a->n--;		/* the largest kept one makes room */
	}
	memmove(&a->addrs[lo + 1], &a->addrs[lo], (a->n - lo) * sizeof(a->addrs[0]));
	a->addrs[lo] = *x;
	a->n++;
}

static void on_answer(void *arg, int status, int timeouts, struct ares_addrinfo *res)
{
	struct query *q = arg;
	struct steer_dns_answer *a = answer_slot(q->d);
	const struct ares_addrinfo_node *n;

	(void)timeouts;
	q->d->pending--;
	if (a) {
		a->tag = q->tag;
		a->min_ttl_s = UINT32_MAX;
		if (status == ARES_SUCCESS || status == ARES_ENODATA) {
			a->ok = 1; /* ENODATA: the name exists, with no A or AAAA records */
			for (n = res ? res->nodes : NULL; n; n = n->ai_next) {
				struct steer_addr x;

				if (addr_of(n->ai_addr, &x))
					keep_address(a, &x);
				if (n->ai_ttl >= 0 && (uint32_t)n->ai_ttl < a->min_ttl_s)
					a->min_ttl_s = (uint32_t)n->ai_ttl;
			}
		} else {
			snprintf(a->detail, sizeof(a->detail), "%s", ares_strerror(status));
		}
		if (a->min_ttl_s == UINT32_MAX)
			a->min_ttl_s = 0;
	}
	if (res)
		ares_freeaddrinfo(res);
	free(q);
}

int steer_dns_query(struct steer_dns *d, const char *name, void *tag)
{
	struct ares_addrinfo_hints hints = { .ai_family = AF_UNSPEC, .ai_flags = ARES_AI_NOSORT };
	struct query *q;

	if (!d || !name || !name[0])
		return -EINVAL;
	q = malloc(sizeof(*q));
	if (!q)
		return -ENOMEM;
	*q = (struct query){ .d = d, .tag = tag };
	d->pending++;
	/* May call on_answer right away (a cached or local answer). */
	ares_getaddrinfo(d->ch, name, NULL, &hints, on_answer, q);
	return 0;
}

void steer_dns_step(struct steer_dns *d, int timeout_ms)
{
	ares_socket_t socks[ARES_GETSOCK_MAXNUM];
	struct pollfd pfd[ARES_GETSOCK_MAXNUM];
	struct timeval max = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	struct timeval tv, *tvp;
	unsigned int bits;
	int i, n = 0, wait_ms;

	if (!d || !d->pending)
		return;
	/* The bits as unsigned: ARES_GETSOCK_WRITABLE(bits, 15) shifts a signed
	 * 1 by 31, which UBSan rejects. Socket i is readable at bit i, writable
	 * at bit i + ARES_GETSOCK_MAXNUM. */
	bits = (unsigned int)ares_getsock(d->ch, socks, ARES_GETSOCK_MAXNUM);
	for (i = 0; i < ARES_GETSOCK_MAXNUM; i++) {
		short ev = (short)(((bits >> i) & 1u ? POLLIN : 0) |
				   ((bits >> (i + ARES_GETSOCK_MAXNUM)) & 1u ? POLLOUT : 0));

		if (ev)
			pfd[n++] = (struct pollfd){ .fd = socks[i], .events = ev };
	}
	tvp = ares_timeout(d->ch, &max, &tv);
	wait_ms = (int)(tvp->tv_sec * 1000 + tvp->tv_usec / 1000);
	if (poll(pfd, (nfds_t)n, wait_ms) <= 0) {
		ares_process_fd(d->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timeouts */
		return;
	}
	for (i = 0; i < n; i++)
		ares_process_fd(d->ch,
				(pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) ? pfd[i].fd
										: ARES_SOCKET_BAD,
				(pfd[i].revents & POLLOUT) ? pfd[i].fd : ARES_SOCKET_BAD);
}

int steer_dns_next(struct steer_dns *d, struct steer_dns_answer *out)
{
	if (!d || !d->n_done)
		return 0;
	*out = d->done[0];
	memmove(d->done, d->done + 1, (d->n_done - 1) * sizeof(*d->done));
	d->n_done--;
	return 1;
}

void steer_dns_free(struct steer_dns *d)
{
	if (!d)
		return;
	ares_destroy(d->ch); /* cancels: every callback runs, with ARES_EDESTRUCTION */
	free(d->done);
	free(d);
}
