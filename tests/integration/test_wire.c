// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_wire.c - request accounting on steered sockets, with the
 * real programs in a throwaway cgroup and network namespace: an HTTP/1.1
 * keep-alive client sends requests of known sizes over one steered
 * connection to responders that answer in one piece (JSON) or in several
 * chunks (SSE). The per-backend counters must equal the bytes sent, pending
 * work must appear at the send and go at the first response byte, a large
 * request must steer the next new connections away before any publish, and
 * closes mid-request, failed connects and a reopened data plane must leave
 * every counter exact.
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

#include <bpf/bpf.h>

#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"
#include "wire_lib.h"

/*
 * Requests of 200, 2000, 129, 65536 and 300000 bytes over one keep-alive
 * connection to vip, whose one backend is r: each is counted when it is sent
 * (the connect's flat credit withdrawn at the first), pending until the
 * first byte of its answer, then credited in flight at its real size.
 * 0, or -1 after a failed check.
 */
static int keepalive_requests_counted_exactly(const struct steer_addr *vip, struct responder *r)
{
	static const size_t sizes[] = { 200, 2000, 129, 65536, 300000 };
	struct responder *be[1] = { r };
	uint64_t total = 0, credited = 0;
	struct wire_now w;
	uint32_t s;
	size_t i;
	int fd;

	CHECK_RC(publish(vip, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(vip, r);
	steer_dp_inflight_exchange(dp, s);
	fd = client_connect(vip);
	CHECK_RC(fd >= 0, "connect: %s", strerror(-fd));
	w = wire_now(s);
	CHECK_RC(w.inflight == CREDIT && w.sent == 0 && w.requests == 0,
		 "after connect: in flight %llu sent %llu requests %llu",
		 (unsigned long long)w.inflight, (unsigned long long)w.sent,
		 (unsigned long long)w.requests);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		CHECK_RC(send_request(fd, r, sizes[i]) == 0, "request %zu not received", i);
		total += sizes[i];
		w = wire_now(s);
		CHECK_RC(
			w.sent == total && w.pending == sizes[i] && w.requests == i + 1,
			"request %zu (%zu bytes): sent %llu (want %llu) pending %llu requests %llu",
			i, sizes[i], (unsigned long long)w.sent, (unsigned long long)total,
			(unsigned long long)w.pending, (unsigned long long)w.requests);
		/* The flat credit went at the first send; in flight are the real
		 * sizes of the requests answered so far. */
		CHECK_RC(w.inflight == credited && w.withdrawn == CREDIT,
			 "in flight %llu (want %llu) withdrawn %llu",
			 (unsigned long long)w.inflight, (unsigned long long)credited,
			 (unsigned long long)w.withdrawn);
		allow_chunk(r);
		CHECK_RC(read_some(fd) > 0, "no response to request %zu", i);
		credited += sizes[i] / STEER_DEFAULT_BYTES_PER_TOKEN;
		w = wire_now(s);
		CHECK_RC(w.pending == 0 && w.answered == total && w.inflight == credited,
			 "after the response to %zu: pending %llu answered %llu in flight %llu "
			 "(want %llu)",
			 i, (unsigned long long)w.pending, (unsigned long long)w.answered,
			 (unsigned long long)w.inflight, (unsigned long long)credited);
	}
	close(fd);
	w = wire_now(s);
	CHECK_RC(w.pending == 0 && w.sent == total && w.requests == 5,
		 "after close: %llu pending, sent %llu requests %llu",
		 (unsigned long long)w.pending, (unsigned long long)w.sent,
		 (unsigned long long)w.requests);
	return 0;
}

/* ---- 1. keep-alive: every request counted when sent, answered at its first byte ---- */

static struct steer_addr vip_ka, vip_sse, vip_big, vip_close, vip_dead, vip_reopen, vip_bpt, vip_v6,
	vip_shape;
static struct responder r_ka, r_sse, r_big[2], r_close, r_reopen, r_bpt, r_v6, r_shape;

static void test_keepalive_requests_are_counted_when_sent(void)
{
	keepalive_requests_counted_exactly(&vip_ka, &r_ka);
}

/* ---- 2. streaming: pending goes at the first chunk, later chunks change nothing ---- */

static void test_streaming_response_answers_at_the_first_chunk(void)
{
	struct responder *be[1] = { &r_sse };
	uint32_t s;
	struct wire_now w;
	int fd, k, req;

	CHECK(publish(&vip_sse, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_sse, &r_sse);
	fd = client_connect(&vip_sse);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	for (req = 1; req <= 2; req++) {
		CHECK(send_request(fd, &r_sse, 4000) == 0, "request not received");
		w = wire_now(s);
		CHECK(w.pending == 4000 && w.requests == (uint64_t)req,
		      "pending %llu requests %llu", (unsigned long long)w.pending,
		      (unsigned long long)w.requests);
		for (k = 0; k < SSE_CHUNKS; k++) {
			allow_chunk(&r_sse);
			CHECK(read_some(fd) > 0, "chunk %d missing", k);
			w = wire_now(s);
			CHECK(w.pending == 0 && w.answered == 4000ULL * req &&
				      w.sent == 4000ULL * req && w.requests == (uint64_t)req,
			      "request %d chunk %d: pending %llu answered %llu sent %llu", req, k,
			      (unsigned long long)w.pending, (unsigned long long)w.answered,
			      (unsigned long long)w.sent);
		}
	}
	close(fd);
}

/* ---- 3. a socket closed mid-request leaves nothing pending -------------------------- */

static void test_close_mid_request_leaves_nothing_pending(void)
{
	struct responder *be[1] = { &r_close };
	size_t before = tracked();
	uint64_t inflight0;
	uint32_t s;
	struct wire_now w;
	int fd, k;

	CHECK(publish(&vip_close, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_close, &r_close);
	/* Abandoned requests are credited nothing; each connect's flat credit
	 * goes at its first send: in flight stays where it was. */
	inflight0 = steer_dp_inflight_read(dp, s);
	for (k = 0; k < 20; k++) {
		fd = client_connect(&vip_close);
		CHECK(fd >= 0, "connect: %s", strerror(-fd));
		CHECK(send_request(fd, &r_close, 1000) == 0, "request not received");
		CHECK(steer_dp_pending_bytes(dp, s) == 1000, "pending %llu",
		      (unsigned long long)steer_dp_pending_bytes(dp, s));
		close(fd); /* no answer came */
		w = wire_now(s);
		CHECK(w.pending == 0 && w.sent == 1000ULL * (k + 1) && w.answered == w.sent &&
			      w.inflight == inflight0,
		      "close %d: pending %llu sent %llu answered %llu", k,
		      (unsigned long long)w.pending, (unsigned long long)w.sent,
		      (unsigned long long)w.answered);
		CHECK(finish_abandoned(&r_close), "the responder is stuck");
	}
	CHECK(tracked() == before, "%zu records held, %zu before", tracked(), before);
}

/* ---- 4. a connect that fails moves no wire counter ----------------------------------- */

static void test_a_failed_connect_moves_no_wire_counter(void)
{
	struct responder dead = { 0 };
	struct responder *be[1] = { &dead };
	size_t before = tracked();
	uint32_t s;
	struct wire_now w;
	int k, fd;

	steer_addr_parse("127.0.5.9:9509", &dead.addr, err, sizeof(err)); /* nothing listens */
	CHECK(publish(&vip_dead, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_dead, &dead);
	for (k = 0; k < STEER_FAIL_EJECT - 1; k++) {
		fd = client_connect(&vip_dead);
		CHECK(fd == -ECONNREFUSED, "connect %d: %d", k, fd);
	}
	w = wire_now(s);
	CHECK(w.sent == 0 && w.answered == 0 && w.requests == 0 && w.withdrawn == 0,
	      "sent %llu answered %llu requests %llu withdrawn %llu", (unsigned long long)w.sent,
	      (unsigned long long)w.answered, (unsigned long long)w.requests,
	      (unsigned long long)w.withdrawn);
	/* Never sent: the flat credits stay in flight, for the daemon to drain. */
	CHECK(w.inflight == (uint64_t)CREDIT * (STEER_FAIL_EJECT - 1), "in flight %llu",
	      (unsigned long long)w.inflight);
	CHECK(tracked() == before, "%zu records held, %zu before", tracked(), before);
}

/* ---- 5. reopening the data plane (a daemon restart) loses and adds nothing ---------- */

static void test_reopen_mid_request_keeps_counters_exact(void)
{
	struct responder *be[1] = { &r_reopen };
	uint32_t s;
	struct wire_now w;
	int fd;

	CHECK(publish(&vip_reopen, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_reopen, &r_reopen);
	fd = client_connect(&vip_reopen);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_reopen, 5000) == 0, "request not received");
	steer_dp_close(dp); /* the daemon stops; its pinned links keep running */
	dp = NULL;
	CHECK(steer_dp_open(&dp_opts, &dp, err, sizeof(err)) == 0, "reopen: %s", err);
	CHECK(slot_of(&vip_reopen, &r_reopen) == s, "the slot moved");
	w = wire_now(s);
	CHECK(w.pending == 5000 && w.sent == 5000 && w.requests == 1,
	      "after reopen: pending %llu sent %llu", (unsigned long long)w.pending,
	      (unsigned long long)w.sent);
	allow_chunk(&r_reopen);
	CHECK(read_some(fd) > 0, "no response");
	CHECK(send_request(fd, &r_reopen, 700) == 0, "second request not received");
	w = wire_now(s);
	CHECK(w.pending == 700 && w.sent == 5700 && w.answered == 5000 && w.requests == 2,
	      "the reopened programs count: pending %llu sent %llu answered %llu",
	      (unsigned long long)w.pending, (unsigned long long)w.sent,
	      (unsigned long long)w.answered);
	close(fd);
	w = wire_now(s);
	CHECK(w.pending == 0 && w.answered == 5700, "after close: pending %llu",
	      (unsigned long long)w.pending);
}

/* ---- 6. bytes per token: per service, validated, in the view ------------------------ */

static void test_bytes_per_token_is_per_service_and_in_the_view(void)
{
	struct responder *be[1] = { &r_bpt };
	struct steer_view v;
	bool seen = false;
	size_t i;
	int fd;

	CHECK(publish(&vip_bpt, be, 1, STEER_MAX_BYTES_PER_TOKEN + 1) != 0 &&
		      strstr(err, "bytes_per_token") != NULL,
	      "a bytes_per_token of %u was accepted (%s)", STEER_MAX_BYTES_PER_TOKEN + 1, err);
	CHECK(publish(&vip_bpt, be, 1, 3) == 0, "publish: %s", err);
	fd = client_connect(&vip_bpt);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_bpt, 3000) == 0, "request not received");
	CHECK(steer_dp_view(dp, &v, err, sizeof(err)) == 0, "view: %s", err);
	for (i = 0; i < v.n_services; i++) {
		const struct steer_view_service *vs = &v.services[i];

		if (!steer_addr_equal(&vs->vip, &vip_bpt))
			continue;
		seen = vs->bytes_per_token == 3 && vs->n_backends == 1 &&
		       vs->backends[0].pending_bytes == 3000 &&
		       vs->backends[0].wire.sent_bytes == 3000 &&
		       vs->backends[0].wire.requests == 1;
	}
	steer_view_free(&v);
	CHECK(seen, "the view does not carry bytes_per_token 3 and 3000 pending bytes");
	allow_chunk(&r_bpt);
	CHECK(read_some(fd) > 0, "no response");
	close(fd);
}

/* ---- 7. an unsteered socket is not counted ------------------------------------------ */

static void test_an_unsteered_socket_is_not_counted(void)
{
	uint32_t s = slot_of(&vip_ka, &r_ka);
	struct wire_now before = wire_now(s), after;
	int fd = client_connect(&r_ka.addr); /* the backend itself, not the VIP */

	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_ka, 1500) == 0, "request not received");
	allow_chunk(&r_ka);
	CHECK(read_some(fd) > 0, "no response");
	close(fd);
	after = wire_now(s);
	CHECK(after.sent == before.sent && after.requests == before.requests &&
		      after.answered == before.answered,
	      "a direct connection moved the wire counters: sent %llu -> %llu",
	      (unsigned long long)before.sent, (unsigned long long)after.sent);
}

/* ---- 8. pins without steer_wire and its links: they are made afresh ------------------ */

static void unpin(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), name);
	unlink(path);
}

static void test_pins_without_the_wire_map_are_completed(void)
{
	struct responder *be[1] = { &r_ka };
	uint32_t s;
	struct wire_now w;
	int fd, held;

	CHECK(publish(&vip_ka, be, 1, 0) == 0, "publish: %s", err);
	/* A connection left mid-request, and one opened before, never used. */
	fd = client_connect(&vip_ka);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_ka, 900) == 0, "request not received");
	held = client_connect(&vip_ka);
	CHECK(held >= 0, "connect: %s", strerror(-held));
	/* Pins with no steer_wire and no wire links. */
	steer_dp_close(dp);
	dp = NULL;
	unpin(STEER_LINK_WIRE_OUT);
	unpin(STEER_LINK_WIRE_IN);
	unpin(STEER_MAP_WIRE);
	CHECK(steer_dp_open(&dp_opts, &dp, err, sizeof(err)) == 0, "open: %s", err);
	s = slot_of(&vip_ka, &r_ka);
	w = wire_now(s);
	CHECK(w.sent == 0 && w.pending == 0, "a fresh steer_wire: sent %llu",
	      (unsigned long long)w.sent);
	/* The old request's answer, and its close, cannot wrap the new counters. */
	allow_chunk(&r_ka);
	CHECK(read_some(fd) > 0, "no response");
	w = wire_now(s);
	CHECK(w.pending == 0 && w.answered == 0, "pending %llu answered %llu",
	      (unsigned long long)w.pending, (unsigned long long)w.answered);
	close(fd);
	/* The socket opened before counts from here on. */
	CHECK(send_request(held, &r_ka, 1234) == 0, "request not received");
	w = wire_now(s);
	CHECK(w.sent == 1234 && w.pending == 1234 && w.requests == 1, "sent %llu pending %llu",
	      (unsigned long long)w.sent, (unsigned long long)w.pending);
	close(held);
	w = wire_now(s);
	CHECK(w.pending == 0 && w.answered == 1234, "after close: pending %llu",
	      (unsigned long long)w.pending);
	CHECK(finish_abandoned(&r_ka), "the responder is stuck");
}

/* ---- 9. a pinned steer_wire of another shape is replaced ------------------------------ */

#define WIRE_SLOT_BYTES_OTHER 96 /* a smaller slot than this build's */

static int pin_wire_of_value_size(__u32 value_size)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_MMAPABLE);
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, STEER_MAP_WIRE, 4, value_size, 1, &o), rc;
	char path[512];

	if (fd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_WIRE);
	rc = bpf_obj_pin(fd, path) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

static __u32 pinned_wire_value_size(void)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	char path[512];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_MAP_WIRE);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
		info.value_size = 0;
	close(fd);
	return info.value_size;
}

static bool reports_vip(int fd, const struct steer_addr *want)
{
	struct sockaddr_storage peer;
	socklen_t plen = sizeof(peer);
	char got[64], exp[64];

	if (getpeername(fd, (struct sockaddr *)&peer, &plen) != 0)
		return false;
	test_fmt_sockaddr(&peer, got, sizeof(got));
	return strcmp(got, steer_addr_format(want, exp, sizeof(exp))) == 0;
}

/*
 * libbpf refuses to load over a pinned map of another shape; before
 * steer_pins_replace_misfits the daemon then failed on every start. The pin
 * here is what the build before the step cadence left (96 bytes a slot; 80
 * before commit 30ff90a); the programs still
 * attached are this build's, bound to the map that pin replaced. A reader
 * must refuse it: its buffers and mappings are of this build's sizes.
 */
static void test_a_wire_map_of_an_earlier_shape_is_replaced(void)
{
	struct steer_dp_opts reader = { .pin_dir = testenv_pin_dir(), .cgroup = testenv_cgroup() };
	struct responder *be[1] = { &r_shape };
	struct wire_now w;
	uint32_t s;
	int fd, held, c;

	CHECK(publish(&vip_shape, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_shape, &r_shape);
	fd = client_connect(&vip_shape);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_shape, 900) == 0, "request not received");
	held = client_connect(&vip_shape);
	CHECK(held >= 0, "connect: %s", strerror(-held));
	steer_dp_close(dp);
	dp = NULL;
	/* A reader (smg-steerctl) refuses a larger shape (a newer build's), which it
	 * would misread, and the earlier one, naming the map. */
	unpin(STEER_MAP_WIRE);
	CHECK(pin_wire_of_value_size(136 * STEER_SLOT_IDS) == 0, "cannot pin a larger shape");
	CHECK(steer_dp_open(&reader, &dp, err, sizeof(err)) == -EPROTO && !dp &&
		      strstr(err, "/" STEER_MAP_WIRE " (array, key 4 B, value 4456448 B"),
	      "a reader over a 136-byte-a-slot steer_wire: %s", err);
	unpin(STEER_MAP_WIRE);
	CHECK(pin_wire_of_value_size(WIRE_SLOT_BYTES_OTHER * STEER_SLOT_IDS) == 0,
	      "cannot pin the earlier shape");
	CHECK(steer_dp_open(&reader, &dp, err, sizeof(err)) == -EPROTO && !dp &&
		      strstr(err, "/" STEER_MAP_WIRE " (array, key 4 B, value 3145728 B") &&
		      strstr(err, "not of this build's shape"),
	      "a reader over a 96-byte-a-slot steer_wire: %s", err);
	CHECK(steer_dp_open(&dp_opts, &dp, err, sizeof(err)) == 0,
	      "open over a steer_wire of 96 bytes a slot: %s", err);
	CHECK(pinned_wire_value_size() == sizeof(struct steer_wire_array),
	      "steer_wire pinned with %u bytes, want %zu", pinned_wire_value_size(),
	      sizeof(struct steer_wire_array));
	CHECK(slot_of(&vip_shape, &r_shape) == s, "the slot moved");
	CHECK(steer_dp_live(dp, s) == 2, "live %lld, want the 2 held",
	      (long long)steer_dp_live(dp, s));
	CHECK(reports_vip(fd, &vip_shape) && reports_vip(held, &vip_shape),
	      "a held connection no longer reports the virtual address");
	w = wire_now(s);
	CHECK(w.sent == 0 && w.pending == 0, "the new steer_wire: sent %llu pending %llu",
	      (unsigned long long)w.sent, (unsigned long long)w.pending);
	/* The earlier request's answer and close cannot wrap the new counters. */
	allow_chunk(&r_shape);
	CHECK(read_some(fd) > 0, "no response");
	close(fd);
	w = wire_now(s);
	CHECK(w.pending == 0 && w.answered == 0, "pending %llu answered %llu",
	      (unsigned long long)w.pending, (unsigned long long)w.answered);
	/* The held socket and a new one count in the new map. */
	CHECK(send_request(held, &r_shape, 1234) == 0, "request not received");
	c = client_connect(&vip_shape);
	CHECK(c >= 0 && reports_vip(c, &vip_shape), "a new connection is not steered");
	w = wire_now(s);
	CHECK(w.sent == 1234 && w.pending == 1234 && w.requests == 1, "sent %llu pending %llu",
	      (unsigned long long)w.sent, (unsigned long long)w.pending);
	close(held);
	close(c);
	w = wire_now(s);
	CHECK(w.pending == 0 && w.answered == 1234 && steer_dp_live(dp, s) == 0,
	      "after close: pending %llu answered %llu live %lld", (unsigned long long)w.pending,
	      (unsigned long long)w.answered, (long long)steer_dp_live(dp, s));
	CHECK(finish_abandoned(&r_shape), "the responder is stuck");
}

/* ---- 10. the accounting can be left out, and put back ------------------------------- */

static void test_wire_off_counts_nothing_and_on_again_counts(void)
{
	struct responder *be[1] = { &r_ka };
	char path[512];
	uint32_t s;
	struct wire_now w0, w;
	int fd;

	steer_dp_close(dp);
	dp = NULL;
	dp_opts.wire_off = true;
	CHECK(steer_dp_open(&dp_opts, &dp, err, sizeof(err)) == 0, "open (wire off): %s", err);
	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), STEER_LINK_WIRE_OUT);
	CHECK(access(path, F_OK) != 0, "%s still pinned with the accounting off", path);
	CHECK(publish(&vip_ka, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_ka, &r_ka);
	w0 = wire_now(s);
	fd = client_connect(&vip_ka);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_ka, 2222) == 0, "request not received");
	w = wire_now(s);
	/* Nothing counted, and the connect's flat credit stays. */
	CHECK(w.sent == w0.sent && w.pending == 0 && w.inflight == w0.inflight + CREDIT,
	      "with the accounting off: sent %llu -> %llu, in flight %llu -> %llu",
	      (unsigned long long)w0.sent, (unsigned long long)w.sent,
	      (unsigned long long)w0.inflight, (unsigned long long)w.inflight);
	allow_chunk(&r_ka);
	CHECK(read_some(fd) > 0, "no response");
	steer_dp_close(dp);
	dp = NULL;
	dp_opts.wire_off = false;
	CHECK(steer_dp_open(&dp_opts, &dp, err, sizeof(err)) == 0, "open (wire on): %s", err);
	CHECK(access(path, F_OK) == 0, "%s not pinned again", path);
	CHECK(send_request(fd, &r_ka, 333) == 0, "request not received");
	w = wire_now(s);
	CHECK(w.sent == w0.sent + 333 && w.pending == 333, "on again: sent %llu pending %llu",
	      (unsigned long long)(w.sent - w0.sent), (unsigned long long)w.pending);
	allow_chunk(&r_ka);
	CHECK(read_some(fd) > 0, "no response");
	close(fd);
}

/* ---- 11. IPv6 ------------------------------------------------------------------------ */

static void test_ipv6_requests_are_counted_too(void)
{
	struct responder *be[1] = { &r_v6 };
	uint32_t s;
	struct wire_now w;
	int fd, k;

	CHECK(publish(&vip_v6, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_v6, &r_v6);
	fd = client_connect(&vip_v6);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	for (k = 1; k <= 3; k++) {
		CHECK(send_request(fd, &r_v6, 3000) == 0, "request not received");
		w = wire_now(s);
		CHECK(w.pending == 3000 && w.sent == 3000ULL * k && w.requests == (uint64_t)k,
		      "request %d: pending %llu sent %llu", k, (unsigned long long)w.pending,
		      (unsigned long long)w.sent);
		allow_chunk(&r_v6);
		CHECK(read_some(fd) > 0, "no response");
		CHECK(steer_dp_pending_bytes(dp, s) == 0, "pending %llu after the answer",
		      (unsigned long long)steer_dp_pending_bytes(dp, s));
	}
	close(fd);
}

static int setup(void)
{
	if (testenv_init("wire") != 0)
		return -1;
	if (responder_start(&r_ka, "127.0.5.1:9501", RESP_JSON) != 0 ||
	    responder_start(&r_sse, "127.0.5.2:9502", RESP_SSE) != 0 ||
	    responder_start(&r_big[0], "127.0.5.3:9503", RESP_JSON) != 0 ||
	    responder_start(&r_big[1], "127.0.5.4:9504", RESP_JSON) != 0 ||
	    responder_start(&r_close, "127.0.5.5:9505", RESP_JSON) != 0 ||
	    responder_start(&r_reopen, "127.0.5.6:9506", RESP_JSON) != 0 ||
	    responder_start(&r_bpt, "127.0.5.7:9507", RESP_JSON) != 0 ||
	    responder_start(&r_v6, "[::1]:9508", RESP_JSON) != 0 ||
	    responder_start(&r_shape, "127.0.5.10:9510", RESP_JSON) != 0)
		return -1;
	steer_addr_parse("127.0.0.121:8201", &vip_ka, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8202", &vip_sse, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8203", &vip_big, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8204", &vip_close, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8205", &vip_dead, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8206", &vip_reopen, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8207", &vip_bpt, err, sizeof(err));
	steer_addr_parse("[2001:db8::121]:8208", &vip_v6, err, sizeof(err));
	steer_addr_parse("127.0.0.121:8210", &vip_shape, err, sizeof(err));
	return wire_dp_open();
}

int main(void)
{
	struct responder *all[] = { &r_ka,     &r_sse, &r_big[0], &r_big[1], &r_close,
				    &r_reopen, &r_bpt, &r_v6,	  &r_shape };
	size_t i;

	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_keepalive_requests_are_counted_when_sent);
	TAP_RUN(test_streaming_response_answers_at_the_first_chunk);
	TAP_RUN(test_close_mid_request_leaves_nothing_pending);
	TAP_RUN(test_a_failed_connect_moves_no_wire_counter);
	TAP_RUN(test_reopen_mid_request_keeps_counters_exact);
	TAP_RUN(test_bytes_per_token_is_per_service_and_in_the_view);
	TAP_RUN(test_an_unsteered_socket_is_not_counted);
	TAP_RUN(test_pins_without_the_wire_map_are_completed);
	TAP_RUN(test_a_wire_map_of_an_earlier_shape_is_replaced);
	TAP_RUN(test_wire_off_counts_nothing_and_on_again_counts);
	TAP_RUN(test_ipv6_requests_are_counted_too);
	wire_dp_close();
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		responder_stop(all[i]);
	return tap_done();
}
