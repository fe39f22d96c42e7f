// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_wire_trace.c - the tracepoint ablation of request accounting
 * (bpf/steer_wire_tr.bpf.c: tp_btf/sock_send_length and tp_btf/tcp_probe),
 * which the bench measures next to the shipped cgroup_skb programs: it must
 * count exactly what they count, or its figures would compare different
 * things. The data plane is opened with its own accounting off (no cgroup_skb
 * program attached), the tracepoint object is loaded on its pins, and real
 * steered connections in a throwaway cgroup and network namespace send
 * requests of known sizes over keep-alive connections to responders that
 * answer in one piece or in chunks.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dataplane.h"
#include "tap.h"
#include "testenv.h"
#include "wire_lib.h"
#include "wire_cases.h"

static struct steer_addr vip_ka, vip_sse, vip_close, vip_fin;
static struct responder r_ka, r_sse, r_close;
static struct bpf_object *tr_obj;
static struct bpf_link *tr_links[2];

/* ---- 1. keep-alive: each request counted at its send, answered at its first byte ---- */

static void test_keepalive_requests_are_counted_exactly(void)
{
	keepalive_requests_counted_exactly(&vip_ka, &r_ka);
}

/* ---- 2. streaming: the first chunk answers, the later ones change nothing ----------- */

static void test_streaming_answers_at_the_first_chunk(void)
{
	struct responder *be[1] = { &r_sse };
	struct wire_now w;
	uint32_t s;
	int fd, k;

	CHECK(publish(&vip_sse, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_sse, &r_sse);
	fd = client_connect(&vip_sse);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_sse, 4000) == 0, "request not received");
	CHECK(steer_dp_pending_bytes(dp, s) == 4000, "pending %llu",
	      (unsigned long long)steer_dp_pending_bytes(dp, s));
	for (k = 0; k < SSE_CHUNKS; k++) {
		allow_chunk(&r_sse);
		CHECK(read_some(fd) > 0, "chunk %d missing", k);
		w = wire_now(s);
		CHECK(w.pending == 0 && w.answered == 4000 && w.sent == 4000,
		      "chunk %d: pending %llu answered %llu sent %llu", k,
		      (unsigned long long)w.pending, (unsigned long long)w.answered,
		      (unsigned long long)w.sent);
	}
	close(fd);
}

/* ---- 3. a close mid-request, and an unsteered socket ---------------------------------- */

static void test_close_mid_request_and_unsteered_socket(void)
{
	struct responder *be[1] = { &r_close };
	size_t before = tracked();
	struct wire_now w0, w;
	uint32_t s;
	int fd, k;

	CHECK(publish(&vip_close, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_close, &r_close);
	w0 = wire_now(s);
	for (k = 1; k <= 10; k++) {
		fd = client_connect(&vip_close);
		CHECK(fd >= 0, "connect: %s", strerror(-fd));
		CHECK(send_request(fd, &r_close, 1000) == 0, "request not received");
		CHECK(steer_dp_pending_bytes(dp, s) == 1000, "pending %llu",
		      (unsigned long long)steer_dp_pending_bytes(dp, s));
		close(fd); /* no answer came */
		w = wire_now(s);
		CHECK(w.pending == 0 && w.sent == w0.sent + 1000ULL * k &&
			      w.inflight == w0.inflight,
		      "close %d: pending %llu sent %llu in flight %llu (was %llu)", k,
		      (unsigned long long)w.pending, (unsigned long long)(w.sent - w0.sent),
		      (unsigned long long)w.inflight, (unsigned long long)w0.inflight);
		CHECK(finish_abandoned(&r_close), "the responder is stuck");
	}
	CHECK(tracked() == before, "%zu records held, %zu before", tracked(), before);
	w0 = wire_now(s);
	fd = client_connect(&r_close.addr); /* the backend itself: unsteered */
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(send_request(fd, &r_close, 1500) == 0, "request not received");
	allow_chunk(&r_close);
	CHECK(read_some(fd) > 0, "no response");
	close(fd);
	w = wire_now(s);
	CHECK(w.sent == w0.sent && w.answered == w0.answered && w.requests == w0.requests,
	      "a direct connection moved the counters: sent %llu -> %llu",
	      (unsigned long long)w0.sent, (unsigned long long)w.sent);
}

/* ---- 4. a bare FIN answers nothing (the payload test, not "any segment") -------------- */

static void test_a_bare_fin_answers_nothing(void)
{
	struct responder fin = { 0 };
	struct responder *be[1] = { &fin };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char buf[1000], eof;
	int one = 1, lfd, fd, srv;
	uint32_t s;
	size_t got = 0;
	ssize_t n;

	steer_addr_parse("127.0.5.14:9514", &fin.addr, err, sizeof(err));
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = fin.addr.port;
	sa.sin_addr.s_addr = fin.addr.ip6[3];
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(lfd, 4) == 0,
	      "listen: %s", strerror(errno));
	CHECK(publish(&vip_fin, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip_fin, &fin);
	fd = client_connect(&vip_fin);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	srv = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(srv >= 0, "accept: %s", strerror(errno));
	memset(buf, 'x', sizeof(buf));
	CHECK(send_all(fd, buf, sizeof(buf)) == 0, "send");
	while (got < sizeof(buf) && (n = read(srv, buf, sizeof(buf) - got)) > 0)
		got += (size_t)n;
	CHECK(got == sizeof(buf), "server read %zu bytes", got);
	shutdown(srv, SHUT_WR); /* a FIN, no payload */
	CHECK(read(fd, &eof, 1) == 0, "the client did not see the FIN");
	CHECK(steer_dp_pending_bytes(dp, s) == sizeof(buf),
	      "pending %llu after a bare FIN (want %zu: nothing answered it)",
	      (unsigned long long)steer_dp_pending_bytes(dp, s), sizeof(buf));
	close(fd);
	CHECK(steer_dp_pending_bytes(dp, s) == 0, "pending %llu after the close",
	      (unsigned long long)steer_dp_pending_bytes(dp, s));
	close(srv);
	close(lfd);
}

/* The tracepoint object on the data plane's pins, attached. */
static int attach_tracepoints(void)
{
	const char *build = getenv("STEER_BUILD");
	static const char *const progs[2] = { "steer_wtr_send", "steer_wtr_recv" };
	char obj[512];
	int i;

	snprintf(obj, sizeof(obj), "%s/steer_wire_tr.bpf.o", build ? build : "build/san");
	tr_obj = steer_dp_object_open(obj, testenv_pin_dir());
	if (!tr_obj)
		return -1;
	if (bpf_object__load(tr_obj) != 0)
		return -1;
	for (i = 0; i < 2; i++) {
		tr_links[i] =
			bpf_program__attach(bpf_object__find_program_by_name(tr_obj, progs[i]));
		if (!tr_links[i])
			return -1;
	}
	return 0;
}

static int setup(void)
{
	if (testenv_init("wiretr") != 0)
		return -1;
	if (responder_start(&r_ka, "127.0.5.11:9511", RESP_JSON) != 0 ||
	    responder_start(&r_sse, "127.0.5.12:9512", RESP_SSE) != 0 ||
	    responder_start(&r_close, "127.0.5.13:9513", RESP_JSON) != 0)
		return -1;
	steer_addr_parse("127.0.0.122:8211", &vip_ka, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8212", &vip_sse, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8213", &vip_close, err, sizeof(err));
	steer_addr_parse("127.0.0.122:8214", &vip_fin, err, sizeof(err));
	dp_opts.wire_off = true; /* no cgroup_skb program: the tracepoints count alone */
	if (wire_dp_open() != 0)
		return -1;
	if (attach_tracepoints() != 0) {
		fprintf(stderr, "tracepoints: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

int main(void)
{
	struct responder *all[] = { &r_ka, &r_sse, &r_close };
	size_t i;
	int rc = setup();

	if (rc == 0) {
		TAP_RUN(test_keepalive_requests_are_counted_exactly);
		TAP_RUN(test_streaming_answers_at_the_first_chunk);
		TAP_RUN(test_close_mid_request_and_unsteered_socket);
		TAP_RUN(test_a_bare_fin_answers_nothing);
	}
	for (i = 0; i < 2; i++)
		bpf_link__destroy(tr_links[i]);
	bpf_object__close(tr_obj);
	wire_dp_close();
	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		responder_stop(all[i]);
	return rc == 0 ? tap_done() : tap_setup_failed();
}
