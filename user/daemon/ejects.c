// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * ejects.c - fast ejection's way back (docs/operations.md, "Health and fast
 * ejection").
 *
 * The kernel stops choosing a backend once STEER_FAIL_EJECT of its steered
 * connects in a row failed (refused, or reset before an answer); polls.c
 * sees it and calls eject_skip. A good load poll says nothing about the
 * traffic port: a worker whose load endpoint answers while its traffic port
 * refuses, or accepts and resets, would be put back by every poll and fail
 * 4 more connects each time. So the way back is a TCP connect of the
 * daemon's own to the traffic address (from the daemon's network
 * namespace), judged as the kernel judges a steered one: refused, timed out
 * or reset within STEER_RESET_FAIL_NS of the handshake with nothing received
 * is a failure; anything else got through.
 *
 * Each skip has a back-off that the way back waits out: 1 s, doubled at
 * every skip that comes soon after the last way back, at most the poll
 * interval. A worker that fails only real requests (it resets once it has
 * read one, which a probe that sends nothing cannot see) then costs 4 failed
 * connects per interval at worst instead of 4 per probe.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"

/* The first skip's back-off: long enough that a worker failing every
 * connect costs at most 4 a second, short enough that a restart's blip
 * costs its share of the traffic for about a second. */
#define EJECT_FIRST_WAIT_NS (1 * NS_PER_S)
/*
 * A backend that stays back for this many caps (--load-check-interval) is
 * taken as well again: its next skip starts from EJECT_FIRST_WAIT_NS. A
 * backend that fails again sooner is still flapping and keeps its longer
 * back-off. After a reset, a flapper costs 4 failed connects per 8
 * intervals at most: an eighth of what it costs at the cap, so the reset
 * never makes a slow flapper the bigger cost.
 */
#define EJECT_CALM_CAPS 8
/* After its handshake, a probe waits this long for a reset before it has
 * got through: the same "soon after the handshake" as the kernel's count. */
#define EJECT_HOLD_NS STEER_RESET_FAIL_NS
/* A backend's skips are logged at most once a minute (their way back and
 * probe failures with them): a flapping worker must not flood the log. */
#define EJECT_LOG_PERIOD_NS (60 * NS_PER_S)

static double secs(uint64_t ns)
{
	return (double)ns / 1e9;
}

static socklen_t to_sockaddr(const struct steer_addr *a, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (steer_addr_is_v4(a)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = a->port;
		memcpy(&s4->sin_addr, &a->ip6[3], sizeof(s4->sin_addr));
		return sizeof(*s4);
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	s6->sin6_family = AF_INET6;
	s6->sin6_port = a->port;
	memcpy(&s6->sin6_addr, a->ip6, sizeof(s6->sin6_addr));
	return sizeof(*s6);
}

static void probe_close(struct backend_eject *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
	e->connected_ns = 0;
}

void eject_init(struct backend *b)
{
	b->ej = (struct backend_eject){ .fd = -1 };
}

void eject_free(struct backend *b)
{
	probe_close(&b->ej);
}

/* The back-off of a skip at now_ns (see EJECT_CALM_CAPS). */
static uint64_t next_wait(const struct daemon *d, const struct backend_eject *e, uint64_t now_ns)
{
	uint64_t cap = d->cfg.interval_ns, w = EJECT_FIRST_WAIT_NS;

	if (e->back_ns && now_ns - e->back_ns < EJECT_CALM_CAPS * cap)
		w = 2 * e->wait_ns;
	return w < cap ? w : cap;
}

void eject_skip(struct daemon *d, const struct service *s, struct backend *b, uint64_t now_ns)
{
	struct backend_eject *e = &b->ej;
	uint64_t held = 0;

	b->suspect = true;
	probe_close(e);
	e->confirm = true;
	e->passed = false;
	e->last_err = 0;
	e->wait_ns = next_wait(d, e, now_ns);
	e->since_ns = now_ns;
	/* The first probe ends its hold as the back-off ends: a worker that is
	 * well again is back after its back-off, not a hold later. */
	e->probe_at_ns = now_ns + (e->wait_ns > EJECT_HOLD_NS ? e->wait_ns - EJECT_HOLD_NS : 0);
	/* Every one at debug level, whatever the limit lets through below. */
	log_debug("%s: backend %s: fast ejection: back-off %.3g s", s->vip_str, b->cfg.addr_str,
		  secs(e->wait_ns));
	e->logged = steer_log_limit_pass(&e->rl, now_ns, EJECT_LOG_PERIOD_NS, 1, &held);
	if (!e->logged)
		return;
	if (held)
		log_warn("%s: backend %s: %d connects in a row failed again; not chosen until a "
			 "connect to its traffic port gets through, and for %.3g s at least "
			 "(%llu more times since the last such line)",
			 s->vip_str, b->cfg.addr_str, STEER_FAIL_EJECT, secs(e->wait_ns),
			 (unsigned long long)held);
	else
		log_warn("%s: backend %s: %d connects in a row failed (refused, or reset before an "
			 "answer); not chosen until a connect to its traffic port gets through, "
			 "and for %.3g s at least",
			 s->vip_str, b->cfg.addr_str, STEER_FAIL_EJECT, secs(e->wait_ns));
}

/* Start the probe: a non-blocking connect to the traffic address. 1: under
 * way, or a negative errno. */
static int probe_open(struct backend *b, uint64_t now_ns)
{
	struct backend_eject *e = &b->ej;
	struct sockaddr_storage ss;
	socklen_t len = to_sockaddr(&b->cfg.addr, &ss);

	e->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (e->fd < 0)
		return -errno;
	e->started_ns = now_ns;
	e->connected_ns = 0;
	if (connect(e->fd, (struct sockaddr *)&ss, len) == 0)
		e->connected_ns = now_ns;
	else if (errno != EINPROGRESS)
		return -errno;
	return 1;
}

/*
 * Where the probe is, without waiting: 1 still under way, 0 got through, or
 * a negative errno. Refused, timed out (--load-timeout) or reset within the
 * hold is a failure; an answer byte, an orderly close or a hold without
 * either got through (as the kernel counts a steered connect).
 */
static int probe_check(const struct daemon *d, struct backend_eject *e, uint64_t now_ns)
{
	struct pollfd p = { .fd = e->fd, .events = POLLIN | POLLOUT | POLLRDHUP };
	socklen_t len = sizeof(int);
	int soerr = 0;
	char c;

	if (poll(&p, 1, 0) < 0)
		return errno == EINTR ? 1 : -errno;
	if (p.revents && getsockopt(e->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr)
		return -soerr;
	if (!e->connected_ns) {
		if (!(p.revents & POLLOUT))
			return now_ns - e->started_ns >= d->cfg.timeout_ns ? -ETIMEDOUT : 1;
		e->connected_ns = now_ns;
	}
	if (p.revents & (POLLIN | POLLRDHUP | POLLHUP)) {
		if (recv(e->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno != EAGAIN &&
		    errno != EWOULDBLOCK)
			return -errno;
		return 0;
	}
	return now_ns - e->connected_ns >= EJECT_HOLD_NS ? 0 : 1;
}

/* A probe failed: the next one a back-off later. Logged once per skip and
 * reason, and only in a skip that was logged. */
static void probe_failed(const struct service *s, struct backend *b, int err, uint64_t now_ns)
{
	struct backend_eject *e = &b->ej;

	e->probe_at_ns = now_ns + e->wait_ns;
	if (!e->logged || err == e->last_err)
		return;
	e->last_err = err;
	log_warn("%s: backend %s: a connect to its traffic port failed: %s; still not chosen, "
		 "tried again every %.3g s",
		 s->vip_str, b->cfg.addr_str, strerror(err), secs(e->wait_ns));
}

/* The way back: the kernel's count starts over, and the next publish lists
 * the backend if its polls are good. */
static void come_back(struct daemon *d, const struct service *s, struct backend *b, uint64_t now_ns)
{
	struct backend_eject *e = &b->ej;

	b->suspect = false;
	e->passed = false;
	e->back_ns = now_ns;
	if (b->slot != NO_SLOT)
		steer_dp_readmit(d->dp, b->slot);
	log_debug("%s: backend %s: fast ejection: back after %.3g s", s->vip_str, b->cfg.addr_str,
		  secs(now_ns - e->since_ns));
	if (e->logged)
		log_info("%s: backend %s: a connect to its traffic port got through after %.3g s "
			 "out; chosen again%s",
			 s->vip_str, b->cfg.addr_str, secs(now_ns - e->since_ns),
			 b->health == STEER_HEALTH_HEALTHY ? "" : " once its polls readmit it");
}

void eject_step(struct daemon *d, const struct service *s, struct backend *b, uint64_t now_ns)
{
	struct backend_eject *e = &b->ej;
	int rc;

	if (!e->passed) {
		if (e->fd < 0 && now_ns < e->probe_at_ns)
			return;
		rc = e->fd < 0 ? probe_open(b, now_ns) : probe_check(d, e, now_ns);
		if (rc > 0)
			return;
		probe_close(e);
		if (rc < 0) {
			probe_failed(s, b, -rc, now_ns);
			return;
		}
		e->passed = true;
	}
	if (now_ns - e->since_ns >= e->wait_ns)
		come_back(d, s, b, now_ns);
}
