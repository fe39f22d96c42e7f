/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * wire_cases.h - a request-accounting case that more than one test runs
 * against its own hooks: test_wire (the shipped cgroup_skb programs) and
 * test_wire_trace (the tracepoint ablation) must count the same. Include after
 * tap.h and wire_lib.h: the case reports through the includer's CHECK_RC.
 */
#ifndef WIRE_CASES_H
#define WIRE_CASES_H

#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "wire_lib.h"

/*
 * Requests of 200, 2000, 129, 65536 and 300000 bytes over one keep-alive
 * connection to vip, whose one backend is r: each is counted when it is sent
 * (the connect's flat credit withdrawn at the first), pending until the
 * first byte of its answer, then credited in flight at its real size.
 * 0, or -1 after a failed check.
 */
static inline int keepalive_requests_counted_exactly(const struct steer_addr *vip,
						     struct responder *r)
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

#endif
