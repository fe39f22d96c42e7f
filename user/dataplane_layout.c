// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dataplane_layout.c - the version of the pinned layout, and the take-over of
 * pins an older smg-steerd left, without a connect going unsteered.
 *
 * Layout 0 (before steer_layout existed) chose by scanning the table at each
 * connect, kept per-socket state in socket storage (steer_sk) and counted live
 * connections with a sockops program. Layout 1 (STEER_LAYOUT_VERSION) picks
 * from a per-service tree, keeps a per-socket record (steer_socks) and counts
 * at connect and release. Most maps are the same in both and are kept as they
 * are: the tables and their generation map, the registries, the drains, the
 * port filter, the service counters (whose reserved words became epoch and
 * untracked, zero in layout 0) and steer_sk, which layout 1 still reads for
 * the sockets layout 0 steered. What changes:
 *
 *   steer_slots   ARRAY[32768] of 64 B -> ARRAY[1] of all slots, fields added
 *   steer_bkinfo  72 B (before the source field) -> 80 B; 80 B is kept
 *   sockops link  removed: live counts come from connect and release
 *
 * The take-over, in order (dp_layout_prepare, then dp_layout_take_over right
 * after the release program is attached, then the connect and getpeername
 * links get the new programs in place, then dp_layout_retire):
 *
 *  1. The old steer_slots (and a 72-byte steer_bkinfo) are unpinned but kept
 *     open; loading the new object pins new ones.
 *  2. The release program is attached. It leaves layout-0 sockets alone for
 *     now: sockops still counts their closes in the old map.
 *  3. Slot by slot (the same slot numbers), the generations, drain flags and
 *     statistics are copied, with the in-flight credits as they are now; the
 *     live counts start at 0. (The connects the old program steers from here
 *     to step 4 are missing from the steered statistic; their credits are
 *     not: see step 5.) Then the release program is told that layout-0
 *     sockets exist: a closing layout-0 socket that sockops counted live
 *     (STEER_SK_LIVE) is from now on taken off the new count (closed + 1) and
 *     its live flag cleared, so that sockops, still attached for a moment,
 *     no longer takes it off the old one. Each close is counted exactly once,
 *     in one map or the other.
 *  4. The connect and getpeername links are switched to the new programs,
 *     each in one update: every connect is steered, before or after.
 *  5. The sockops link is detached: the old live counts stop moving. They are
 *     added to the new ones (as closed - old live, the user-space side of the
 *     difference), and the credits the old connect program made since step 3
 *     are added to the new in-flight counts (as drained - those credits).
 *
 * What is not exact: a program run already under way at the instant of a
 * switch (microseconds), and a socket that a peer resets while its
 * application closes it on another CPU at that moment.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "log.h"

/* steer_slot of layout 0. */
struct slot_v0 {
	__u64 inflight_tokens;
	__u64 steered;
	__u64 fallbacks;
	__s64 live;
	__u32 gen;
	__u32 flags;
	__u64 reserved[3];
};

#define BKINFO_V0_SIZE 72 /* steer_bk_info before the source field */

struct dp_migration {
	int old_slots_fd;  /* layout 0 steer_slots, unpinned, read at the take-over */
	int old_bkinfo_fd; /* layout 0 steer_bkinfo of 72 bytes, or -1 (kept as is) */
	bool taken_over;
	__u64 credited[STEER_SLOT_IDS]; /* old inflight_tokens at step 3 */
};

static bool pinned(const struct steer_dp *dp, const char *name)
{
	char path[PATH_MAX];

	dp_pin_path(dp, name, path, sizeof(path));
	return access(path, F_OK) == 0;
}

static int open_pin(const struct steer_dp *dp, const char *name)
{
	char path[PATH_MAX];

	dp_pin_path(dp, name, path, sizeof(path));
	return bpf_obj_get(path);
}

static void unpin(const struct steer_dp *dp, const char *name)
{
	char path[PATH_MAX];

	dp_pin_path(dp, name, path, sizeof(path));
	unlink(path);
}

/* The version in a pinned steer_layout: >= 0, or -errno. */
static int pinned_version(const struct steer_dp *dp)
{
	struct steer_layout l;
	__u32 zero = 0;
	int fd = open_pin(dp, STEER_MAP_LAYOUT), rc;

	if (fd < 0)
		return -errno;
	rc = bpf_map_lookup_elem(fd, &zero, &l) == 0 ? (int)l.version : -errno;
	close(fd);
	return rc;
}

/* A reader (smg-steerctl) only opens a layout it knows. */
int dp_layout_check(struct steer_dp *dp, char *err, size_t errlen)
{
	int v = pinned_version(dp);

	if (v == -ENOENT && pinned(dp, STEER_MAP_GEN))
		return steer_seterr(err, errlen, EPROTO,
				    "%s holds pins of an older smg-steer (layout 0); the new "
				    "smg-steerd upgrades them when it starts",
				    dp->pin_dir);
	if (v >= 0 && v != STEER_LAYOUT_VERSION)
		return steer_seterr(err, errlen, EPROTO,
				    "%s holds pins of layout %d; this build reads layout %d",
				    dp->pin_dir, v, STEER_LAYOUT_VERSION);
	return 0; /* missing pins are reported by the first open */
}

/* Layout 0 found: keep what changes open, unpin it, let the load pin anew. */
static int prepare_from_v0(struct steer_dp *dp, char *err, size_t errlen)
{
	struct dp_migration *m = calloc(1, sizeof(*m));
	struct bpf_map_info info;
	int fd;

	if (!m)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	m->old_slots_fd = m->old_bkinfo_fd = -1;
	dp->mig = m;
	m->old_slots_fd = open_pin(dp, STEER_MAP_SLOTS);
	if (m->old_slots_fd < 0 || dp_map_info(m->old_slots_fd, &info) != 0 ||
	    info.value_size != sizeof(struct slot_v0) || info.max_entries != STEER_SLOT_IDS)
		return steer_seterr(err, errlen, EPROTO,
				    "%s/%s is not of a layout this smg-steerd knows; detach the "
				    "instance that pinned it and remove %s",
				    dp->pin_dir, STEER_MAP_SLOTS, dp->pin_dir);
	fd = open_pin(dp, STEER_MAP_BKINFO);
	if (fd >= 0 && dp_map_info(fd, &info) == 0 && info.value_size == BKINFO_V0_SIZE) {
		m->old_bkinfo_fd = fd;
		unpin(dp, STEER_MAP_BKINFO);
	} else if (fd >= 0) {
		close(fd);
	}
	unpin(dp, STEER_MAP_SLOTS);
	log_info("data plane: %s holds layout 0 pins%s; upgrading them to layout %d in place",
		 dp->pin_dir, m->old_bkinfo_fd >= 0 ? " (without backend sources)" : "",
		 STEER_LAYOUT_VERSION);
	return 0;
}

int dp_layout_prepare(struct steer_dp *dp, char *err, size_t errlen)
{
	int v = pinned_version(dp);

	if (v == STEER_LAYOUT_VERSION)
		return 0;
	if (v == 0) {
		log_warn("data plane: %s: an earlier upgrade did not finish; the counters of "
			 "that moment start from zero",
			 dp->pin_dir);
		return 0;
	}
	if (v > 0)
		return steer_seterr(err, errlen, EPROTO,
				    "%s holds pins of layout %d, newer than this smg-steerd's "
				    "%d; stop that instance and remove %s first",
				    dp->pin_dir, v, STEER_LAYOUT_VERSION, dp->pin_dir);
	if (!pinned(dp, STEER_MAP_GEN))
		return 0; /* a fresh install */
	return prepare_from_v0(dp, err, errlen);
}

/* Step 3: layout-0 counters into the new slots, same numbers and generations;
 * live counts start at 0 (see step 5). */
static void copy_slots_v0(struct steer_dp *dp, const struct slot_v0 *old)
{
	uint32_t s;

	for (s = 0; s < STEER_SLOT_IDS; s++) {
		struct steer_slot *n = &dp->slots[s];
		int svc = dp->slot_used[s] ? dp_svc_id_of(dp, &dp->slot_key[s].vip) : -1;

		dp->mig->credited[s] = __atomic_load_n(&old[s].inflight_tokens, __ATOMIC_ACQUIRE);
		n->inflight_tokens = dp->mig->credited[s];
		n->drained_tokens = 0;
		n->steered = old[s].steered;
		n->fallbacks = old[s].fallbacks;
		n->live = 0;
		n->closed = 0;
		n->flags = old[s].flags;
		n->svc_id = svc >= 0 ? (uint32_t)svc : 0;
		__atomic_store_n(&n->gen, old[s].gen, __ATOMIC_RELEASE);
	}
}

/* Step 5: the old live counts, final now, and the old program's last credits. */
static uint64_t add_final_v0(struct steer_dp *dp, const struct slot_v0 *old)
{
	uint64_t legacy_live = 0;
	uint32_t s;

	for (s = 0; s < STEER_SLOT_IDS; s++) {
		struct steer_slot *n = &dp->slots[s];
		int64_t live = __atomic_load_n(&old[s].live, __ATOMIC_ACQUIRE);
		__u64 late = __atomic_load_n(&old[s].inflight_tokens, __ATOMIC_ACQUIRE) -
			     dp->mig->credited[s];

		if (live > 0) {
			__atomic_fetch_sub(&n->closed, (uint64_t)live, __ATOMIC_ACQ_REL);
			legacy_live += (uint64_t)live;
		}
		if (late)
			__atomic_fetch_sub(&n->drained_tokens, late, __ATOMIC_ACQ_REL);
	}
	return legacy_live;
}

static void copy_bkinfo_v0(struct steer_dp *dp, const unsigned char *old)
{
	uint32_t s;

	for (s = 0; s < STEER_SLOT_IDS; s++) {
		memset(&dp->bkinfo[s], 0, sizeof(dp->bkinfo[s]));
		memcpy(&dp->bkinfo[s], old + (size_t)s * BKINFO_V0_SIZE, BKINFO_V0_SIZE);
	}
}

static void *map_read(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Step 3, right after the release program is attached. */
int dp_layout_take_over(struct steer_dp *dp, char *err, size_t errlen)
{
	struct dp_migration *m = dp->mig;
	size_t slots_len = sizeof(struct slot_v0) * STEER_SLOT_IDS;
	size_t bk_len = (size_t)BKINFO_V0_SIZE * STEER_SLOT_IDS;
	struct slot_v0 *old;

	if (!m || m->taken_over)
		return 0;
	old = map_read(m->old_slots_fd, slots_len);
	if (!old)
		return steer_seterr(err, errlen, errno, "cannot read the layout 0 counters: %s",
				    strerror(errno));
	copy_slots_v0(dp, old);
	munmap(old, slots_len);
	if (m->old_bkinfo_fd >= 0) {
		unsigned char *bk = map_read(m->old_bkinfo_fd, bk_len);

		if (bk) {
			copy_bkinfo_v0(dp, bk);
			munmap(bk, bk_len);
		}
	}
	__atomic_fetch_or(&dp->layout->flags, STEER_LAYOUT_LEGACY_SK, __ATOMIC_ACQ_REL);
	m->taken_over = true;
	return 0;
}

/* Step 5, once every link runs the new programs. */
static int finish_v0(struct steer_dp *dp, char *err, size_t errlen)
{
	size_t slots_len = sizeof(struct slot_v0) * STEER_SLOT_IDS;
	uint64_t legacy_live;
	char path[PATH_MAX];
	struct slot_v0 *old;
	uint32_t i;

	dp_pin_path(dp, STEER_LINK_SOCKOPS, path, sizeof(path));
	if (access(path, F_OK) == 0) {
		struct bpf_link *l = bpf_link__open(path);

		if (l) {
			bpf_link__detach(l);
			bpf_link__destroy(l);
		}
		unlink(path);
	}
	old = map_read(dp->mig->old_slots_fd, slots_len);
	if (!old)
		return steer_seterr(err, errlen, errno, "cannot read the layout 0 counters: %s",
				    strerror(errno));
	legacy_live = add_final_v0(dp, old);
	munmap(old, slots_len);
	__atomic_fetch_add(&dp->layout->legacy_live, legacy_live, __ATOMIC_ACQ_REL);
	for (i = 0; i < STEER_SVC_IDS; i++)
		dp_svc_touch(dp, i);
	log_info("data plane: took over the layout 0 counters (%llu live connections of older "
		 "sockets); sockops detached; %s is at layout %d",
		 (unsigned long long)legacy_live, dp->pin_dir, STEER_LAYOUT_VERSION);
	return 0;
}

/* The end of any open by the owner: the pins are of this layout now. */
int dp_layout_retire(struct steer_dp *dp, char *err, size_t errlen)
{
	int rc = 0;

	if (dp->mig && dp->mig->taken_over)
		rc = finish_v0(dp, err, errlen);
	if (rc == 0 &&
	    __atomic_load_n(&dp->layout->version, __ATOMIC_ACQUIRE) != STEER_LAYOUT_VERSION)
		__atomic_store_n(&dp->layout->version, STEER_LAYOUT_VERSION, __ATOMIC_RELEASE);
	dp_layout_free(dp);
	return rc;
}

void dp_layout_free(struct steer_dp *dp)
{
	struct dp_migration *m = dp->mig;

	if (!m)
		return;
	if (m->old_slots_fd >= 0)
		close(m->old_slots_fd);
	if (m->old_bkinfo_fd >= 0)
		close(m->old_bkinfo_fd);
	free(m);
	dp->mig = NULL;
}

/* Once the last layout-0 socket counted live has closed, releases stop
 * looking for socket storage. */
void dp_layout_tidy(struct steer_dp *dp)
{
	struct steer_layout *l = dp->layout;

	if (l && (__atomic_load_n(&l->flags, __ATOMIC_ACQUIRE) & STEER_LAYOUT_LEGACY_SK) &&
	    (int64_t)__atomic_load_n(&l->legacy_live, __ATOMIC_ACQUIRE) <= 0)
		__atomic_fetch_and(&l->flags, ~(__u32)STEER_LAYOUT_LEGACY_SK, __ATOMIC_ACQ_REL);
}
