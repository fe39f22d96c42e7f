// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * wire.c - request accounting on steered sockets: the
 * second BPF object (bpf/steer_wire.bpf.c, cgroup_skb egress and ingress),
 * its pinned links, the per-slot counters (steer_wire) and their readers.
 *
 * The object is loaded with the same pin root as steer.bpf.o, after it, so
 * that it takes every map over by pin. Its links are pinned like the others:
 * --keep-pinned and restarts keep them, and a new owner swaps its programs in
 * (or, when --wire-cgroup changed, moves them to the new cgroup). They attach
 * to steer_dp_opts.wire_cgroup, which may be narrower than the steering
 * programs' cgroup: their dispatch costs every packet of every socket there.
 * The kernel writes every counter of steer_wire but drain_seq; user space
 * zeroes an entry only when its slot changes owner, before any table points
 * at the slot, and bumps drain_seq at every drain of the slot's in-flight
 * tokens (counters.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/common.h"
#include "steer_wire.skel.h"

static const char *const wire_link_names[DP_WIRE_LINKS] = {
	[DP_WIRE_OUT] = STEER_LINK_WIRE_OUT,
	[DP_WIRE_IN] = STEER_LINK_WIRE_IN,
};

static struct bpf_program *wire_prog(struct steer_dp *dp, int i)
{
	return i == DP_WIRE_OUT ? dp->wire_skel->progs.steer_wire_out
				: dp->wire_skel->progs.steer_wire_in;
}

/* A syscall program's argument map, mapped for writing (owner). */
static void *arg_map(struct bpf_map *m, size_t size, size_t *len, char *err, size_t errlen)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	*len = (size + pg - 1) / pg * pg;
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
	if (p == MAP_FAILED) {
		steer_seterr(err, errlen, errno, "cannot mmap %s: %s", bpf_map__name(m),
			     strerror(errno));
		return NULL;
	}
	return p;
}

/* steer_peer_apply's and steer_probe_apply's argument maps, and the
 * --peer-push word (owner). */
static int arg_maps(struct steer_dp *dp, char *err, size_t errlen)
{
	dp->kick = arg_map(dp->wire_skel->maps.steer_kick, sizeof(*dp->kick), &dp->kick_len, err,
			   errlen);
	if (!dp->kick)
		return -EINVAL;
	dp->peer_in = arg_map(dp->wire_skel->maps.steer_peer_in, sizeof(*dp->peer_in),
			      &dp->peer_in_len, err, errlen);
	if (!dp->peer_in)
		return -EINVAL;
	dp->probe_in = arg_map(dp->wire_skel->maps.steer_probe_in, sizeof(*dp->probe_in),
			       &dp->probe_in_len, err, errlen);
	return dp->probe_in ? 0 : -EINVAL;
}

/* Owner: load the object over the pinned maps (before the maps are mapped). */
int dp_wire_load(struct steer_dp *dp, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = dp->pin_dir);
	int rc;

	if (dp->wire_off)
		return 0;
	dp->wire_skel = steer_wire_bpf__open_opts(&oo);
	if (!dp->wire_skel)
		return steer_seterr(err, errlen, errno, "cannot open the wire BPF object: %s",
				    strerror(errno));
	bpf_map__set_autocreate(dp->wire_skel->maps.steer_tmpl, false);
	rc = steer_pins_replace_misfits(dp->wire_skel->obj, err, errlen);
	if (rc)
		return rc;
	rc = steer_wire_bpf__load(dp->wire_skel);
	if (rc)
		return steer_seterr(err, errlen, rc, "cannot load the wire BPF programs: %s",
				    strerror(-rc));
	return arg_maps(dp, err, errlen);
}

/* A reader: the pinned maps the wire object names are of this build's shape. */
int dp_wire_check_shapes(struct steer_dp *dp, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = dp->pin_dir);
	struct steer_wire_bpf *skel = steer_wire_bpf__open_opts(&oo);
	int rc;

	if (!skel)
		return steer_seterr(err, errlen, errno, "cannot open the wire BPF object: %s",
				    strerror(errno));
	bpf_map__set_autocreate(skel->maps.steer_tmpl, false);
	rc = steer_pins_check_shapes(skel->obj, err, errlen);
	steer_wire_bpf__destroy(skel);
	return rc;
}

/* Map steer_wire. A reader of pins from before it existed goes on without:
 * the wire counters then read 0. */
int dp_wire_open(struct steer_dp *dp, char *err, size_t errlen)
{
	char path[PATH_MAX];
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	dp_pin_path(dp, STEER_MAP_WIRE, path, sizeof(path));
	dp->wire_fd = bpf_obj_get(path);
	if (dp->wire_fd < 0) {
		if (!dp->own && errno == ENOENT)
			return 0;
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", path,
				    strerror(errno));
	}
	dp->wire_len = (sizeof(struct steer_wire_array) + pg - 1) / pg * pg;
	p = mmap(NULL, dp->wire_len, PROT_READ | PROT_WRITE, MAP_SHARED, dp->wire_fd, 0);
	if (p == MAP_FAILED)
		return steer_seterr(err, errlen, errno, "cannot mmap %s: %s", STEER_MAP_WIRE,
				    strerror(errno));
	dp->wire = p;
	return 0;
}

static int dp_wire_unlink(struct steer_dp *dp, char *err, size_t errlen);

/*
 * A link a previous owner pinned on another cgroup than the one asked for now
 * (--wire-cgroup changed across a restart): detach it and remove its pin, so
 * that the caller attaches anew. Accounting stops in the old cgroup; sockets
 * that pass neither program meanwhile keep their flat connect credit. A link
 * whose cgroup was removed since (a pod's, gone) is moved the same way.
 * 1 when it was moved (l is destroyed), 0 when it stays (l is kept), or
 * -errno (l is destroyed).
 */
static int wire_link_elsewhere(struct steer_dp *dp, struct bpf_link *l, uint64_t want_id,
			       const char *path, char *err, size_t errlen)
{
	struct bpf_link_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(bpf_link__fd(l), &info, &len) != 0 ||
	    info.type != BPF_LINK_TYPE_CGROUP || info.cgroup.cgroup_id == want_id)
		return 0;
	if (bpf_link__detach(l) != 0) {
		int rc = steer_seterr(err, errlen, errno, "cannot detach %s: %s", path,
				      strerror(errno));

		bpf_link__destroy(l);
		return rc;
	}
	bpf_link__destroy(l);
	if (unlink(path) != 0 && errno != ENOENT)
		return steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
				    strerror(errno));
	if (info.cgroup.cgroup_id == 0) /* the kernel detached it when the cgroup went */
		log_info("data plane: request accounting moved from a removed cgroup to %s (%s)",
			 dp->wire_cgroup, path);
	else
		log_info("data plane: request accounting moved from cgroup id %llu to %s (%s)",
			 (unsigned long long)info.cgroup.cgroup_id, dp->wire_cgroup, path);
	return 1;
}

/* Attach both programs to the wire cgroup, or swap them into links a
 * previous owner pinned there, as attach_or_adopt_links does for the others. */
int dp_wire_attach(struct steer_dp *dp, char *err, size_t errlen)
{
	const char *cg = dp->wire_cgroup;
	uint64_t want_id = 0;
	int cg_fd, i, rc = 0;

	if (dp->wire_off)
		return dp_wire_unlink(dp, err, errlen);
	if (dp_cgroup_id(cg, &want_id) != 0)
		return steer_seterr(err, errlen, errno, "cgroup %s: %s", cg, strerror(errno));
	cg_fd = open(cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0)
		return steer_seterr(err, errlen, errno, "cannot open cgroup %s: %s", cg,
				    strerror(errno));
	for (i = 0; i < DP_WIRE_LINKS && rc == 0; i++) {
		char path[PATH_MAX];
		struct bpf_link *l;

		dp_pin_path(dp, wire_link_names[i], path, sizeof(path));
		l = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
		if (l) {
			rc = wire_link_elsewhere(dp, l, want_id, path, err, errlen);
			if (rc < 0)
				break;
			if (rc == 1) {
				rc = 0;
				l = NULL;
			}
		}
		if (l) {
			rc = dp_link_swap(l, wire_prog(dp, i), path, err, errlen);
			if (rc == 0)
				dp->wire_links[i] = l;
			continue;
		}
		rc = dp_link_attach_pinned(cg, wire_prog(dp, i), cg_fd, path, &dp->wire_links[i],
					   err, errlen);
	}
	close(cg_fd);
	return rc;
}

void dp_wire_close(struct steer_dp *dp)
{
	int i;

	for (i = 0; i < DP_WIRE_LINKS; i++)
		if (dp->wire_links[i])
			bpf_link__destroy(dp->wire_links[i]); /* pinned: stays attached */
	if (dp->wire)
		munmap(dp->wire, dp->wire_len);
	if (dp->peer_in)
		munmap(dp->peer_in, dp->peer_in_len);
	if (dp->probe_in)
		munmap(dp->probe_in, dp->probe_in_len);
	if (dp->kick)
		munmap(dp->kick, dp->kick_len);
	if (dp->wire_fd >= 0)
		close(dp->wire_fd);
	if (dp->wire_skel)
		steer_wire_bpf__destroy(dp->wire_skel);
}

/* Detach the programs and remove their links' pins. */
static int dp_wire_unlink(struct steer_dp *dp, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int i, rc = 0;

	for (i = 0; i < DP_WIRE_LINKS; i++) {
		struct bpf_link *l = dp->wire_links[i];

		dp_pin_path(dp, wire_link_names[i], path, sizeof(path));
		if (!l && access(path, F_OK) == 0)
			l = bpf_link__open(path);
		if (l && bpf_link__detach(l) != 0 && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot detach %s: %s", path,
					  strerror(errno));
		if (l && l != dp->wire_links[i])
			bpf_link__destroy(l);
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
					  strerror(errno));
	}
	return rc;
}

/* Detach the programs and remove their pins and steer_wire's. */
int dp_wire_detach(struct steer_dp *dp, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int rc = dp_wire_unlink(dp, err, errlen);

	dp_pin_path(dp, STEER_MAP_WIRE, path, sizeof(path));
	if (unlink(path) != 0 && errno != ENOENT && rc == 0)
		rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path, strerror(errno));
	return rc;
}

/* A slot changes owner: its accounting starts over (see dp_slot_reset). */
void dp_wire_reset(struct steer_dp *dp, uint32_t slot)
{
	if (dp->wire && slot < STEER_SLOT_IDS)
		memset(&dp->wire[slot], 0, sizeof(dp->wire[slot]));
}

/* The slot's in-flight tokens are about to be drained: sockets connected
 * before now keep their flat credit at their first send. */
void dp_wire_drained(struct steer_dp *dp, uint32_t slot)
{
	if (dp->wire && slot < STEER_SLOT_IDS)
		__atomic_fetch_add(&dp->wire[slot].drain_seq, 1, __ATOMIC_ACQ_REL);
}

void steer_dp_inflight_mark(struct steer_dp *dp, uint32_t slot)
{
	dp_wire_drained(dp, slot);
}

const struct steer_wire *steer_dp_wire_counters(const struct steer_dp *dp, uint32_t slot)
{
	return dp->wire && slot < STEER_SLOT_IDS ? &dp->wire[slot] : NULL;
}

static uint64_t wire_load(const struct steer_dp *dp, uint32_t slot, size_t off)
{
	if (!dp->wire || slot >= STEER_SLOT_IDS)
		return 0;
	return __atomic_load_n((const uint64_t *)((const char *)&dp->wire[slot] + off),
			       __ATOMIC_ACQUIRE);
}

uint64_t steer_dp_sent_bytes(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, sent_bytes));
}

uint64_t steer_dp_answered_bytes(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, answered_bytes));
}

uint64_t steer_dp_requests(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, requests));
}

uint64_t steer_dp_withdrawn_tokens(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, withdrawn_tokens));
}

uint64_t steer_dp_pending_bytes(const struct steer_dp *dp, uint32_t slot)
{
	/* Answered first: the sent count read after it is at least as large. */
	uint64_t answered = steer_dp_answered_bytes(dp, slot);

	return steer_dp_sent_bytes(dp, slot) - answered;
}

uint64_t steer_dp_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t steer_dp_busy_left_ns(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns)
{
	return steer_until_left(wire_load(dp, slot, offsetof(struct steer_wire, busy_until_ns)),
				now_ns);
}

uint64_t steer_dp_step_ns(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, step_ns));
}

uint64_t steer_dp_step_left_ns(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns)
{
	return steer_until_left(wire_load(dp, slot, offsetof(struct steer_wire, step_until_ns)),
				now_ns);
}

uint64_t steer_dp_busy_left_tokens(const struct steer_dp *dp, uint32_t slot, uint64_t now_ns)
{
	uint64_t npt = wire_load(dp, slot, offsetof(struct steer_wire, cache_npt));

	return npt ? steer_dp_busy_left_ns(dp, slot, now_ns) / npt : 0;
}

/* The slot accessor for steer_select_wire over the mmap (read only). */
struct steer_wire *steer_dp_wire_at(void *dp, __u32 slot)
{
	const struct steer_dp *d = dp;

	return d->wire && slot < STEER_SLOT_IDS ? &d->wire[slot] : NULL;
}

uint64_t steer_dp_peer_pending_tokens(const struct steer_dp *dp, uint32_t slot)
{
	return wire_load(dp, slot, offsetof(struct steer_wire, peer_pending_tokens));
}

uint32_t steer_dp_slot_gen(const struct steer_dp *dp, uint32_t slot)
{
	const struct steer_slot *s = steer_dp_slot_counters(dp, slot);

	return s ? __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) : 0;
}

/*
 * A syscall program that applies a batch to one service's slots (its
 * argument map mmapped at in): the batch copied in, one BPF_PROG_TEST_RUN,
 * the program's count of applied entries read back (the __u32 at
 * applied_off in both). 0, or -errno with err set.
 */
static int run_apply(struct bpf_program *prog, void *in, const void *batch, size_t size,
		     size_t applied_off, uint32_t svc_id, uint32_t *applied, char *err,
		     size_t errlen)
{
	LIBBPF_OPTS(bpf_test_run_opts, o);
	int rc;

	memcpy(in, batch, size);
	rc = bpf_prog_test_run_opts(bpf_program__fd(prog), &o);
	if (rc)
		return steer_seterr(err, errlen, errno ? errno : -rc, "cannot run %s: %s",
				    bpf_program__name(prog), strerror(errno ? errno : -rc));
	*applied = __atomic_load_n((uint32_t *)((char *)in + applied_off), __ATOMIC_ACQUIRE);
	if (o.retval)
		return steer_seterr(err, errlen, ENOENT, "%s: service %u has no maps",
				    bpf_program__name(prog), svc_id);
	return 0;
}

/* The other routers' changes: run steer_peer_apply over b (its applied is
 * written back). Only the owner has the program; one thread at a time. */
int steer_dp_peer_apply(struct steer_dp *dp, struct steer_peer_batch *b, char *err, size_t errlen)
{
	if (!dp->wire_skel || !dp->peer_in)
		return steer_seterr(
			err, errlen, ENOTSUP,
			"the request accounting is off: no other router's work applies");
	b->clock_ns = steer_dp_clock_ns();
	return run_apply(dp->wire_skel->progs.steer_peer_apply, dp->peer_in, b, sizeof(*b),
			 offsetof(struct steer_peer_batch, applied), b->svc_id, &b->applied, err,
			 errlen);
}

/* The step probe's packets: run steer_probe_apply over b (its applied is
 * written back). Only the owner has the program; one thread at a time. */
int steer_dp_probe_apply(struct steer_dp *dp, struct steer_probe_batch *b, char *err, size_t errlen)
{
	if (!dp->wire_skel || !dp->probe_in)
		return steer_seterr(err, errlen, ENOTSUP,
				    "the request accounting is off: no step cadence to apply");
	return run_apply(dp->wire_skel->progs.steer_probe_apply, dp->probe_in, b, sizeof(*b),
			 offsetof(struct steer_probe_batch, applied), b->svc_id, &b->applied, err,
			 errlen);
}

/* --peer-push: the ring a send on a STEER_TBL_PEER_PUSH service writes to
 * when it finds the word at 0 (steer_kick_ring), -1 when the accounting is
 * off. Only the owner has it. */
int steer_dp_kick_ring_fd(struct steer_dp *dp)
{
	return dp->wire_skel && dp->kick ? bpf_map__fd(dp->wire_skel->maps.steer_kick_ring) : -1;
}

/* Arm the next wake-up: the word goes to 0, with a full barrier, so that the
 * counters read after this include every send that found it at 1. */
void steer_dp_kick_rearm(struct steer_dp *dp)
{
	if (dp->kick)
		__atomic_exchange_n(dp->kick, 0, __ATOMIC_SEQ_CST);
}

void steer_dp_pushback(const struct steer_dp *dp, uint32_t slot, struct steer_dp_pushback *out)
{
	const struct steer_slot *c = steer_dp_slot_counters(dp, slot);

	out->on = c && (__atomic_load_n(&c->flags, __ATOMIC_ACQUIRE) & STEER_SLOT_PUSHBACK);
	out->at_ns = wire_load(dp, slot, offsetof(struct steer_wire, pushback_at_ns));
	out->until_ns = wire_load(dp, slot, offsetof(struct steer_wire, pushback_until_ns));
	out->pushbacks = wire_load(dp, slot, offsetof(struct steer_wire, pushbacks));
	out->server_errors = wire_load(dp, slot, offsetof(struct steer_wire, server_errors));
}

void steer_dp_pushback_end(struct steer_dp *dp, uint32_t slot, uint64_t at_ns)
{
	if (slot >= STEER_SLOT_IDS)
		return;
	__atomic_fetch_and(&dp->slots[slot].flags, ~(__u32)STEER_SLOT_PUSHBACK, __ATOMIC_ACQ_REL);
	/* A 429 that came between the read and the clear has flagged it again
	 * before the clear: its own pushback must stand. */
	if (wire_load(dp, slot, offsetof(struct steer_wire, pushback_at_ns)) != at_ns)
		__atomic_fetch_or(&dp->slots[slot].flags, STEER_SLOT_PUSHBACK, __ATOMIC_ACQ_REL);
	dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
}

void steer_dp_set_max_live(struct steer_dp *dp, uint32_t slot, uint32_t max_live)
{
	if (!dp->wire || slot >= STEER_SLOT_IDS)
		return;
	if (__atomic_exchange_n(&dp->wire[slot].max_live, max_live, __ATOMIC_ACQ_REL) != max_live)
		dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
}
