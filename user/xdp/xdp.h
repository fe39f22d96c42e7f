/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * xdp.h - XDP ingress (bpf/steer_xdp.bpf.c) and the backends' decap
 * (bpf/steer_decap.bpf.c): loading, attaching, detaching, counters.
 *
 * The XDP program lives in the data plane's pin directory: it reuses the maps
 * the connect hooks use (steer_dp_open must have created them) and pins its
 * own flow table, counters and one bpf_link per interface there, so that a
 * restarted smg-steerd (or one that exited with --keep-pinned) leaves the
 * program attached and every flow going.
 *
 * Functions that can fail return 0 or a negative errno and write a one-line
 * reason into err.
 */
#ifndef STEER_XDP_H
#define STEER_XDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "steer_common.h"

#define STEER_XDP_DEVS_MAX 8
#define STEER_IFNAME_LEN 16 /* IFNAMSIZ */

enum steer_xdp_mode {
	STEER_XDP_NATIVE = 0, /* the driver's XDP (veth, most NICs); refused where absent */
	STEER_XDP_GENERIC = 1 /* after the skb is built: any device, slower */
};

struct steer_xdp_opts {
	const char *pin_dir; /* the data plane's, already open */
	char devs[STEER_XDP_DEVS_MAX][STEER_IFNAME_LEN];
	size_t n_devs;
	enum steer_xdp_mode mode;
	struct steer_xdp_cfg encap; /* outer source prefixes (--xdp-encap-src) */
	/* Families of the VIPs: each device must forward them (checked), since
	 * the kernel's FIB look-up for the next hop answers only there. */
	bool v4, v6;
};

struct steer_xdp;

/*
 * Load the XDP program and attach it to every device of o, or adopt the link
 * a previous smg-steerd pinned for it (swapping in this build's program with
 * no gap). Links pinned for devices no longer listed are detached.
 */
int steer_xdp_attach(const struct steer_xdp_opts *o, struct steer_xdp **out, char *err,
		     size_t errlen);
/* Releases memory and descriptors; the pinned links keep the program attached. */
void steer_xdp_close(struct steer_xdp *x);
/* Detach every XDP link pinned under pin_dir and remove the XDP pins. Nothing
 * pinned is success. */
int steer_xdp_detach_all(const char *pin_dir, char *err, size_t errlen);

/* ---- counters ------------------------------------------------------------- */

struct steer_xdp_stats; /* the pinned counter maps, opened for reading */

/* -ENOENT when no XDP program was ever attached with this pin directory. */
int steer_xdp_stats_open(const char *pin_dir, struct steer_xdp_stats **out);
void steer_xdp_stats_close(struct steer_xdp_stats *s);
/* Sum over CPUs of a VIP's (by svc_id) or a backend's (by slot) counters. */
int steer_xdp_stats_vip(const struct steer_xdp_stats *s, uint32_t svc_id,
			struct steer_xdp_ctr *out);
int steer_xdp_stats_backend(const struct steer_xdp_stats *s, uint32_t slot,
			    struct steer_xdp_ctr *out);
/* Flows in the flow table now (one pass over it). */
int steer_xdp_stats_flows(const struct steer_xdp_stats *s, size_t *out);
/* Interfaces with a pinned XDP link, by name, into names (at most max). */
size_t steer_xdp_devs(const char *pin_dir, char names[][STEER_IFNAME_LEN], size_t max);

/* ---- backend decap (xdp/decap.c) ----------------------------------------- */

/*
 * Attach the decap to ifname's tc ingress (clsact, created if missing),
 * replacing an earlier one. Pins nothing unless pin_dir is given (several
 * backend network namespaces may share one bpffs): then the program and its
 * counters are pinned there, as steer_dcp_prog and steer_dcp_ctr.
 */
int steer_decap_attach(const char *ifname, const char *pin_dir, char *err, size_t errlen);
/* Remove it (and the pins under pin_dir, when given). */
int steer_decap_detach(const char *ifname, const char *pin_dir, char *err, size_t errlen);
/* One line per interface of this network namespace with the decap attached:
 * its counters. Returns how many, or a negative errno. */
int steer_decap_status(FILE *out, char *err, size_t errlen);

#endif /* STEER_XDP_H */
