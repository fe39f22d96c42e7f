/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * Removing smg-steer from a host: detach every program and remove every pin.
 *
 * Works on the pin directory alone, whatever map layout wrote it (it never
 * loads our BPF object), so that a host can always be cleaned, also after a
 * failed upgrade. Used by `smg-steerctl uninstall`.
 */
#ifndef STEER_UNINSTALL_H
#define STEER_UNINSTALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct steer_uninstall_report {
	unsigned links_detached; /* BPF links detached from their cgroup */
	unsigned pins_removed;	 /* pinned links, maps and programs unlinked */
	unsigned dirs_removed;	 /* the pin directory and any directory below it */
	bool nothing_pinned;	 /* the pin directory did not exist: nothing to do */
};

/*
 * Detaches every BPF link pinned under pin_dir (links first, so that steering
 * stops before anything else goes), unlinks every pin and removes the
 * directories. Prints one line per object to out (may be NULL).
 *
 * Idempotent: a pin directory that does not exist is success with
 * rep->nothing_pinned. Refuses, changing nothing:
 *   -EBUSY  while a smg-steerd holds the directory's lock (it is running);
 *   -EINVAL for a path that is not a directory on a bpffs, that is a bpffs
 *           mount point itself, or whose entries include none named steer_*.
 * Returns 0 or a negative errno with err.
 */
int steer_uninstall(const char *pin_dir, FILE *out, struct steer_uninstall_report *rep, char *err,
		    size_t errlen);

#endif /* STEER_UNINSTALL_H */
