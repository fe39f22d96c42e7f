// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_wire_cgroup.c - request accounting confined to a narrower cgroup than
 * steering (steer_dp_opts.wire_cgroup, --wire-cgroup), with the real programs
 * in a throwaway cgroup and network namespace. Steering attaches to the
 * test's cgroup, accounting to a child A. A steered keep-alive connection
 * made from A is counted exactly; one made from the parent is steered but
 * not counted and keeps its flat connect credit; the parent holds no
 * cgroup_skb program. A restart with child B moves the pinned links to B (A
 * then counts nothing, B does, one link of each pinned); a restart with the
 * same cgroup keeps the very links (no gap); a wire cgroup removed while the
 * daemon was away is left behind at the next start.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "dataplane/dataplane.h"
#include "tap.h"
#include "testenv.h"
#include "wire_lib.h"

static struct steer_addr vip;
static struct responder r_be;
static char cg_a[PATH_MAX], cg_b[PATH_MAX];

/* Programs attached to cg itself (not inherited) for the attach type. */
static int attached(const char *cg, enum bpf_attach_type type)
{
	__u32 ids[8], n = 8;
	int fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	rc = bpf_prog_query(fd, type, 0, NULL, ids, &n);
	close(fd);
	return rc ? -errno : (int)n;
}

/* Both accounting programs attached once to cg (1), or neither (0); else -1. */
static int wire_attached(const char *cg)
{
	int out = attached(cg, BPF_CGROUP_INET_EGRESS), in = attached(cg, BPF_CGROUP_INET_INGRESS);

	return out == in && (out == 0 || out == 1) ? out : -1;
}

/* A steered connection whose socket is created in cg (the process goes back
 * to the test's cgroup at once; the socket stays charged to cg). */
static int connect_from(const char *cg)
{
	int fd;

	if (testenv_enter(cg) != 0)
		return -EPERM;
	fd = client_connect(&vip);
	if (testenv_enter_cgroup() != 0 && fd >= 0) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* One request and its answer on fd; the wire counters before and after. */
static int request(int fd, size_t size, struct wire_now *before, struct wire_now *after, uint32_t s)
{
	*before = wire_now(s);
	if (send_request(fd, &r_be, size) != 0)
		return -1;
	*after = wire_now(s);
	allow_chunk(&r_be);
	return read_some(fd) > 0 ? 0 : -1;
}

static uint32_t link_id(const char *name)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), name);
	fd = bpf_obj_get(path);
	if (fd < 0)
		return 0;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0)
		info.id = 0;
	close(fd);
	return info.id;
}

static int reopen(const char *wire_cg)
{
	steer_dp_close(dp); /* the pins stay, as with --keep-pinned */
	dp = NULL;
	dp_opts.wire_cgroup = wire_cg;
	return steer_dp_open(&dp_opts, &dp, err, sizeof(err));
}

/* ---- 1. counted in the wire cgroup only --------------------------------------------- */

static void test_counted_only_in_the_wire_cgroup(void)
{
	struct responder *be[1] = { &r_be };
	struct wire_now b, a;
	uint32_t s;
	int fd;

	CHECK(publish(&vip, be, 1, 0) == 0, "publish: %s", err);
	s = slot_of(&vip, &r_be);
	steer_dp_inflight_exchange(dp, s);
	CHECK(wire_attached(testenv_cgroup()) == 0, "the steering cgroup has accounting programs");
	CHECK(wire_attached(cg_a) == 1, "A has not one egress and one ingress program");
	CHECK(attached(testenv_cgroup(), BPF_CGROUP_INET4_CONNECT) == 1,
	      "steering is not attached to the parent");
	CHECK(!strcmp(steer_dp_wire_cgroup(dp), cg_a), "wire cgroup '%s'",
	      steer_dp_wire_cgroup(dp));

	/* From the parent: steered, not counted, the flat credit stays. */
	fd = connect_from(testenv_cgroup());
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 1000, &b, &a, s) == 0, "request from the parent not served");
	CHECK(a.sent == b.sent && a.requests == b.requests && a.pending == 0,
	      "a request from outside A was counted: sent %llu -> %llu", (unsigned long long)b.sent,
	      (unsigned long long)a.sent);
	CHECK(a.inflight == CREDIT && a.withdrawn == 0, "in flight %llu withdrawn %llu",
	      (unsigned long long)a.inflight, (unsigned long long)a.withdrawn);
	close(fd);

	/* From A: counted exactly, its credit taken back at the first send. */
	fd = connect_from(cg_a);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 777, &b, &a, s) == 0, "request from A not served");
	CHECK(a.sent == b.sent + 777 && a.requests == b.requests + 1 && a.pending == 777,
	      "from A: sent %llu -> %llu, pending %llu", (unsigned long long)b.sent,
	      (unsigned long long)a.sent, (unsigned long long)a.pending);
	CHECK(a.withdrawn == CREDIT, "withdrawn %llu", (unsigned long long)a.withdrawn);
	CHECK(request(fd, 4321, &b, &a, s) == 0, "second request from A not served");
	CHECK(a.sent == b.sent + 4321 && a.requests == b.requests + 1,
	      "second from A: sent %llu -> %llu", (unsigned long long)b.sent,
	      (unsigned long long)a.sent);
	close(fd);
	CHECK(steer_dp_pending_bytes(dp, s) == 0, "pending %llu after close",
	      (unsigned long long)steer_dp_pending_bytes(dp, s));
}

/* ---- 2. a restart with the same wire cgroup keeps its links ------------------------- */

static void test_a_restart_in_place_keeps_the_links(void)
{
	uint32_t out = link_id(STEER_LINK_WIRE_OUT), in = link_id(STEER_LINK_WIRE_IN);

	CHECK(out && in, "no wire links pinned");
	CHECK(reopen(cg_a) == 0, "reopen: %s", err);
	CHECK(link_id(STEER_LINK_WIRE_OUT) == out && link_id(STEER_LINK_WIRE_IN) == in,
	      "links replaced: egress %u -> %u, ingress %u -> %u", out,
	      link_id(STEER_LINK_WIRE_OUT), in, link_id(STEER_LINK_WIRE_IN));
	CHECK(wire_attached(cg_a) == 1, "A lost its programs");
}

/* ---- 3. a restart with another wire cgroup moves the accounting --------------------- */

static void test_a_restart_moves_accounting_to_the_new_cgroup(void)
{
	struct wire_now b, a;
	uint32_t s;
	int fd_a_old, fd;

	/* A connection made in A before the restart. */
	fd_a_old = connect_from(cg_a);
	CHECK(fd_a_old >= 0, "connect: %s", strerror(-fd_a_old));
	CHECK(reopen(cg_b) == 0, "reopen with B: %s", err);
	CHECK(!strcmp(steer_dp_wire_cgroup(dp), cg_b), "wire cgroup '%s'",
	      steer_dp_wire_cgroup(dp));
	CHECK(wire_attached(cg_a) == 0, "A still has accounting programs");
	CHECK(wire_attached(cg_b) == 1, "B has not one egress and one ingress program");
	CHECK(wire_attached(testenv_cgroup()) == 0, "the parent has accounting programs");
	CHECK(link_id(STEER_LINK_WIRE_OUT) && link_id(STEER_LINK_WIRE_IN), "links not pinned");
	s = slot_of(&vip, &r_be);

	CHECK(request(fd_a_old, 500, &b, &a, s) == 0, "request on A's old socket not served");
	CHECK(a.sent == b.sent, "A's old socket still counted: sent %llu -> %llu",
	      (unsigned long long)b.sent, (unsigned long long)a.sent);
	close(fd_a_old);
	fd = connect_from(cg_a);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 600, &b, &a, s) == 0, "request from A not served");
	CHECK(a.sent == b.sent, "a new socket in A counted: sent %llu -> %llu",
	      (unsigned long long)b.sent, (unsigned long long)a.sent);
	close(fd);
	fd = connect_from(cg_b);
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 2048, &b, &a, s) == 0, "request from B not served");
	CHECK(a.sent == b.sent + 2048 && a.pending == 2048, "from B: sent %llu -> %llu",
	      (unsigned long long)b.sent, (unsigned long long)a.sent);
	close(fd);
}

/* ---- 4. back to the default: the steering cgroup counts again ----------------------- */

static void test_no_wire_cgroup_counts_in_the_steering_cgroup(void)
{
	struct wire_now b, a;
	uint32_t s;
	int fd;

	CHECK(reopen(NULL) == 0, "reopen: %s", err);
	CHECK(wire_attached(testenv_cgroup()) == 1, "the steering cgroup has no accounting");
	CHECK(wire_attached(cg_a) == 0 && wire_attached(cg_b) == 0, "a child kept its programs");
	s = slot_of(&vip, &r_be);
	fd = connect_from(testenv_cgroup());
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 999, &b, &a, s) == 0, "request not served");
	CHECK(a.sent == b.sent + 999, "from the parent: sent %llu -> %llu",
	      (unsigned long long)b.sent, (unsigned long long)a.sent);
	close(fd);
}

/* ---- 5. the wire cgroup was removed while the daemon was away ----------------------- */

static void test_a_removed_wire_cgroup_is_left_behind(void)
{
	char gone[PATH_MAX];
	struct wire_now b, a;
	uint32_t s;
	int fd;

	CHECK(testenv_child_cgroup("gone", gone, sizeof(gone)) == 0, "mkdir: %s", strerror(errno));
	CHECK(reopen(gone) == 0, "reopen with the new cgroup: %s", err);
	CHECK(wire_attached(gone) == 1, "the new cgroup has no accounting");
	steer_dp_close(dp); /* as a pod goes away while the daemon restarts */
	dp = NULL;
	CHECK(rmdir(gone) == 0, "rmdir %s: %s", gone, strerror(errno));
	CHECK(reopen(NULL) == 0, "reopen after the removal: %s", err);
	CHECK(wire_attached(testenv_cgroup()) == 1, "the steering cgroup has no accounting");
	s = slot_of(&vip, &r_be);
	fd = connect_from(testenv_cgroup());
	CHECK(fd >= 0, "connect: %s", strerror(-fd));
	CHECK(request(fd, 321, &b, &a, s) == 0, "request not served");
	CHECK(a.sent == b.sent + 321, "sent %llu -> %llu", (unsigned long long)b.sent,
	      (unsigned long long)a.sent);
	close(fd);
}

static int setup(void)
{
	if (testenv_init("wirecg") != 0)
		return -1;
	if (testenv_child_cgroup("a", cg_a, sizeof(cg_a)) != 0 ||
	    testenv_child_cgroup("b", cg_b, sizeof(cg_b)) != 0) {
		fprintf(stderr, "cannot create the child cgroups\n");
		return -1;
	}
	if (responder_start(&r_be, "127.0.6.1:9601", RESP_JSON) != 0)
		return -1;
	steer_addr_parse("127.0.0.122:8301", &vip, err, sizeof(err));
	dp_opts.wire_cgroup = cg_a;
	return wire_dp_open();
}

int main(void)
{
	if (setup() != 0)
		return tap_setup_failed();
	TAP_RUN(test_counted_only_in_the_wire_cgroup);
	TAP_RUN(test_a_restart_in_place_keeps_the_links);
	TAP_RUN(test_a_restart_moves_accounting_to_the_new_cgroup);
	TAP_RUN(test_no_wire_cgroup_counts_in_the_steering_cgroup);
	TAP_RUN(test_a_removed_wire_cgroup_is_left_behind);
	wire_dp_close();
	responder_stop(&r_be);
	return tap_done();
}
