// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * layout.c - the version of the pinned layout. Pins of another
 * layout version are refused, by the owner and by readers alike: their maps
 * may have the same shapes and another meaning. Pinned maps of another shape
 * are handled apart (pins.c). STEER_LAYOUT_VERSION is bumped when a
 * pinned map keeps its shape and changes its meaning.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <bpf/bpf.h>

/* The version in a pinned steer_layout: >= 0, or -errno (-ENOENT: none). */
static int pinned_version(const struct steer_dp *dp)
{
	char path[PATH_MAX];
	struct steer_layout l;
	__u32 zero = 0;
	int fd, rc;

	dp_pin_path(dp, STEER_MAP_LAYOUT, path, sizeof(path));
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	rc = bpf_map_lookup_elem(fd, &zero, &l) == 0 ? (int)l.version : -errno;
	close(fd);
	return rc;
}

/* Before the owner loads, or a reader opens: no pins (a fresh install), pins
 * of this layout, or pins whose layout was never stamped (an owner that
 * stopped before dp_layout_stamp) are fine. */
int dp_layout_check(struct steer_dp *dp, char *err, size_t errlen)
{
	int v = pinned_version(dp);

	if (v <= 0 || v == STEER_LAYOUT_VERSION)
		return 0;
	return steer_seterr(err, errlen, EPROTO,
			    "%s holds pins of layout %d; this smg-steer uses layout %d: stop the "
			    "instance that pinned them and run 'smg-steerctl --pin-path %s "
			    "uninstall' first",
			    dp->pin_dir, v, STEER_LAYOUT_VERSION, dp->pin_dir);
}

/* The owner, once the maps are open: the pins are of this layout from now on. */
void dp_layout_stamp(struct steer_dp *dp)
{
	if (dp->layout &&
	    __atomic_load_n(&dp->layout->version, __ATOMIC_ACQUIRE) != STEER_LAYOUT_VERSION)
		__atomic_store_n(&dp->layout->version, STEER_LAYOUT_VERSION, __ATOMIC_RELEASE);
}
