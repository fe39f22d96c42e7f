// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * wire_lib.c - what the request-accounting tests share (test_wire.c,
 * test_wire_fluid.c): responders that count a request's bytes and answer when
 * told, a keep-alive HTTP/1.1 client, and readers of a slot's counters.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dataplane/dataplane.h"
#include "testenv.h"
#include "wire_lib.h"

struct steer_dp *dp;
struct steer_dp_opts dp_opts;
char err[512];

int wire_dp_open(void)
{
	dp_opts.pin_dir = testenv_pin_dir();
	dp_opts.cgroup = testenv_cgroup();
	dp_opts.own = true;
	if (steer_dp_open(&dp_opts, &dp, err, sizeof(err)) != 0) {
		fprintf(stderr, "open: %s\n", err);
		return -1;
	}
	return 0;
}

void wire_dp_close(void)
{
	if (dp) {
		steer_dp_detach(dp, err, sizeof(err));
		steer_dp_close(dp);
		dp = NULL;
	}
}

/* ---- a responder: counts a request's bytes, answers when told -------------------- */

bool wait_until(struct responder *r, bool (*cond)(struct responder *))
{
	struct timespec dl;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&r->mu);
	while (!(ok = cond(r)) && pthread_cond_timedwait(&r->cv, &r->mu, &dl) == 0)
		;
	pthread_mutex_unlock(&r->mu);
	return ok;
}

static bool has_expect(struct responder *r)
{
	return r->stop || r->seq > r->finished;
}

static void finish(struct responder *r, long served)
{
	pthread_mutex_lock(&r->mu);
	r->finished = served;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

bool all_received(struct responder *r)
{
	return r->expect > 0 && r->received >= r->expect;
}

static bool may_write(struct responder *r)
{
	return r->stop || r->go > r->written;
}

static const char *chunk_text(const struct responder *r, int i)
{
	static const char *const sse[SSE_CHUNKS] = {
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
		"Transfer-Encoding: chunked\r\n\r\n10\r\ndata: {\"t\":\"a\"}\n\n\r\n",
		"10\r\ndata: {\"t\":\"b\"}\n\n\r\n",
		"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
	};

	if (r->mode == RESP_SSE)
		return sse[i];
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
	       "Content-Length: 11\r\n\r\n{\"ok\":true}";
}

static int chunks_of(const struct responder *r)
{
	return r->mode == RESP_SSE ? SSE_CHUNKS : 1;
}

/* Serve one connection until it closes. */
static void serve(struct responder *r, int c)
{
	char buf[65536];
	long served;

	for (;;) {
		struct pollfd p = { .fd = c, .events = POLLIN };
		ssize_t n;
		int i;

		if (!wait_until(r, has_expect)) {
			/* no request announced: a probe that only connects; see if it left */
			if (poll(&p, 1, 0) == 1 && recv(c, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
				return;
			continue;
		}
		if (r->stop)
			return;
		pthread_mutex_lock(&r->mu);
		served = r->seq; /* the request being served; a later one waits */
		pthread_mutex_unlock(&r->mu);
		while (!all_received(r)) {
			n = read(c, buf, sizeof(buf));
			if (n <= 0)
				return; /* the client closed: this request waits for the next */
			pthread_mutex_lock(&r->mu);
			r->received += n;
			pthread_cond_broadcast(&r->cv);
			pthread_mutex_unlock(&r->mu);
		}
		for (i = 0; i < chunks_of(r); i++) {
			const char *t;

			if (!wait_until(r, may_write) || r->stop)
				return;
			t = chunk_text(r, i);
			n = send(c, t, strlen(t), MSG_NOSIGNAL);
			pthread_mutex_lock(&r->mu);
			r->written++;
			pthread_cond_broadcast(&r->cv);
			pthread_mutex_unlock(&r->mu);
			if (n != (ssize_t)strlen(t))
				break;
		}
		finish(r, served);
	}
}

static void *responder_loop(void *arg)
{
	struct responder *r = arg;

	while (!r->stop) {
		struct pollfd p = { .fd = r->lfd, .events = POLLIN };
		int c;

		if (poll(&p, 1, 100) != 1)
			continue;
		c = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		serve(r, c);
		close(c);
	}
	return NULL;
}

int responder_start(struct responder *r, const char *addr, enum resp_mode mode)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	memset(r, 0, sizeof(*r));
	r->mode = mode;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (test_sockaddr(addr, &ss, &len) != 0 ||
	    steer_addr_parse(addr, &r->addr, err, sizeof(err)))
		return -1;
	r->lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(r->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(r->lfd, (struct sockaddr *)&ss, len) != 0 || listen(r->lfd, 1024) != 0)
		return -1;
	return pthread_create(&r->thr, NULL, responder_loop, r) == 0 ? 0 : -1;
}

void responder_stop(struct responder *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = 1;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thr, NULL);
	close(r->lfd);
}

/* The next request's size. The previous one is let finish first: the
 * responder updates its counters after its last write. */
void announce(struct responder *r, long bytes)
{
	wait_until(r, idle);
	pthread_mutex_lock(&r->mu);
	r->expect = bytes;
	r->received = 0;
	r->go = r->written = 0;
	r->seq++;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void allow_chunk(struct responder *r)
{
	pthread_mutex_lock(&r->mu);
	r->go++;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

bool idle(struct responder *r)
{
	return r->finished == r->seq;
}

/* Let the responder answer a request whose client has gone, and wait until
 * it is ready for the next one. */
bool finish_abandoned(struct responder *r)
{
	allow_chunk(r);
	return wait_until(r, idle);
}

/* ---- the client ------------------------------------------------------------------ */

/* Connect to a steer_addr with TCP_NODELAY; fd or -errno. */
int client_connect(const struct steer_addr *a)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sa = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)&ss;
	bool v4 = steer_addr_is_v4(a);
	int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (v4) {
		sa->sin_family = AF_INET;
		sa->sin_port = a->port;
		sa->sin_addr.s_addr = a->ip6[3];
	} else {
		sa6->sin6_family = AF_INET6;
		sa6->sin6_port = a->port;
		memcpy(&sa6->sin6_addr, a->ip6, sizeof(a->ip6));
	}
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&ss, v4 ? sizeof(*sa) : sizeof(*sa6)) != 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* An HTTP/1.1 keep-alive request of exactly total bytes (headers and body);
 * total >= 128. Caller frees. */
char *http_request(size_t total)
{
	char head[128];
	size_t hl = 0, body = 0, i;
	char *req = malloc(total);

	/* The header's length depends on the digits of the body's length. */
	for (i = 0; i < 3; i++) {
		hl = (size_t)snprintf(head, sizeof(head),
				      "POST /v1/completions HTTP/1.1\r\nHost: vip\r\n"
				      "Content-Length: %zu\r\n\r\n",
				      body);
		body = total - hl;
	}
	if (!req)
		return NULL;
	memcpy(req, head, hl);
	memset(req + hl, 'a', total - hl);
	return req;
}

int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Send a request of size bytes and wait until the responder has all of it. */
int send_request(int fd, struct responder *r, size_t size)
{
	char *req = http_request(size);
	int rc;

	announce(r, (long)size);
	rc = req ? send_all(fd, req, size) : -1;
	free(req);
	if (rc == 0 && !wait_until(r, all_received))
		rc = -1;
	return rc;
}

/* Read one response piece (a chunk the responder wrote). */
ssize_t read_some(int fd)
{
	char buf[4096];
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, WAIT_MS) != 1)
		return -1;
	return read(fd, buf, sizeof(buf));
}

/* ---- helpers ------------------------------------------------------------------------- */

int publish_flags(const struct steer_addr *vip, struct responder **be, int n, uint32_t bpt,
		  uint32_t flags, double npt)
{
	struct steer_addr cfg[8];
	struct steer_dp_cost cost[8];
	struct steer_dp_service s = { .vip = *vip,
				      .configured = cfg,
				      .n_configured = (size_t)n,
				      .table = cost,
				      .n_table = (size_t)n,
				      .ttl_ns = TTL_LONG,
				      .bytes_per_token = bpt,
				      .flags = flags };
	int i;

	for (i = 0; i < n; i++) {
		cfg[i] = be[i]->addr;
		cost[i].addr = be[i]->addr;
		cost[i].base_wait_ns = 0;
		cost[i].ns_per_token = npt;
	}
	return steer_dp_publish_one(dp, &s, err, sizeof(err));
}

int publish(const struct steer_addr *vip, struct responder **be, int n, uint32_t bpt)
{
	return publish_flags(vip, be, n, bpt, 0, NPT);
}

uint32_t slot_of(const struct steer_addr *vip, const struct responder *be)
{
	uint32_t s = UINT32_MAX;

	steer_dp_slot(dp, vip, &be->addr, &s);
	return s;
}

struct wire_now wire_now(uint32_t slot)
{
	struct wire_now w = {
		.sent = steer_dp_sent_bytes(dp, slot),
		.answered = steer_dp_answered_bytes(dp, slot),
		.requests = steer_dp_requests(dp, slot),
		.pending = steer_dp_pending_bytes(dp, slot),
		.withdrawn = steer_dp_withdrawn_tokens(dp, slot),
		.inflight = steer_dp_inflight_read(dp, slot),
	};
	return w;
}

/* steer_select only reads through this pointer. */
struct steer_slot *slot_at(void *ctx, __u32 slot)
{
	return (struct steer_slot *)steer_dp_slot_counters(ctx, slot);
}

size_t tracked(void)
{
	size_t n = 0;

	steer_dp_sockets_tracked(dp, &n);
	return n;
}
