/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ctl.h - what the parts of smg-steerctl share (private to user/ctl):
 *
 *   smg-steerctl.c  arguments, opening the data plane, status, drain, main,
 *                   and the names, numbers and JSON helpers below
 *   explain.c       explain: the kernel's decision recomputed, and why
 *   client.c        explain --client: a cache affinity client, keyed as the
 *                   kernel keys it
 *   xdp_report.c    the XDP ingress section of status
 *   decap.c         smg-steerctl decap attach|detach|status (a backend's side)
 *   uninstall.c     smg-steerctl uninstall: every program detached, every pin
 *                   removed, whatever layout wrote them
 */
#ifndef STEER_CTL_H
#define STEER_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "dataplane/dataplane.h"
#include "policy/policy.h"
#include "steer_common.h"
#include "xdp/xdp.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

/* The width status text fits: a terminal's, for 8 backends with IPv6
 * addresses (the backends' table sizes each column to its widest cell). */
#define STATUS_COLUMNS 120

enum output_format {
	OUTPUT_TEXT,
	OUTPUT_JSON,
};

enum command {
	CMD_NONE,
	CMD_STATUS,
	CMD_EXPLAIN,
	CMD_DRAIN,
	CMD_UNDRAIN,
	CMD_UNINSTALL,
};

/* explain --client KEY: a client of cache affinity (steer_common.h). */
struct ctl_client {
	const char *arg;   /* KEY as given; NULL: no --client */
	const char *value; /* what follows "KIND:" */
	uint32_t kind;	   /* enum steer_affinity: CGROUP, NETNS, SOCKOPT or SOURCE */
	uint64_t client;   /* steer_aff_key.client, once resolved */
};

struct ctl {
	const char *pin_dir;
	enum output_format output;
	enum command cmd;
	struct steer_addr target; /* explain: the VIP; drain/undrain: the backend */
	char target_str[STEER_ADDR_STRLEN];
	struct ctl_client client; /* explain --client, resolved in main */
};

extern const char *prog;

/* ---- names and numbers (smg-steerctl.c) ---- */

const char *health_name(uint8_t h);
const char *mode_name(uint8_t m);
const char *poll_name(uint8_t p);
/* "12.345 ms", or "saturated" for the kernel's saturated maximum. */
const char *fmt_ms(uint64_t ns, char *buf, size_t len);
double ns_to_s(int64_t ns);
/* Signed difference a - b of two monotonic timestamps, clamped to int64. */
int64_t mono_diff(uint64_t a, uint64_t b);
bool table_expired(const struct steer_view *v, const struct steer_view_service *s);
/* The daemon's record of a backend; an all-zero one when there is none. */
const struct steer_bk_info *bk_info(const struct steer_dp *dp, const struct steer_view_backend *b);
struct steer_view_service *find_service(struct steer_view *v, const struct steer_addr *vip);
int read_view(const struct steer_dp *dp, struct steer_view *v);
void print_table_state(const struct steer_view *v, const struct steer_view_service *s);
void health_text(const struct steer_view_backend *b, const struct steer_bk_info *info, char *buf,
		 size_t len);
/* Seconds since the backend's last good snapshot (info->snapshot_ns != 0). */
double snapshot_age_s(const struct steer_bk_info *info);
/* Request bytes sent and not answered, in tokens, as the kernel converts them. */
uint64_t backend_pending_tokens(const struct steer_view_service *s,
				const struct steer_view_backend *b);

/* ---- JSON helpers (smg-steerctl.c) ---- */

void jadd(struct json_object *o, const char *k, struct json_object *v);
void jadd_u64(struct json_object *o, const char *k, uint64_t v);
void jadd_i64(struct json_object *o, const char *k, int64_t v);
void jadd_str(struct json_object *o, const char *k, const char *v);
void jadd_bool(struct json_object *o, const char *k, bool v);
void jadd_double(struct json_object *o, const char *k, double v);
void jadd_addr(struct json_object *o, const char *k, const struct steer_addr *a);
int json_print_and_free(struct json_object *root);
void json_table_state(struct json_object *o, const struct steer_view *v,
		      const struct steer_view_service *s);
struct json_object *json_backend_status(const struct steer_dp *dp,
					const struct steer_view_service *s,
					const struct steer_view_backend *b);

/* ---- client.c ---- */

/* "cgroup", "netns", "key", "source" or "off": an enum steer_affinity as
 * --client names its kinds. */
const char *ctl_affinity_name(uint32_t kind);
/* KEY of --client: its kind, and the number of key:N and source:ADDR. 0, or
 * -EINVAL with err set. */
int ctl_client_parse(const char *arg, struct ctl_client *c, char *err, size_t errlen);
/* The id of a cgroup:PATH, the cookie of a netns:PATH (forks a child that
 * enters the namespace: before the privileges are dropped). 0, or -errno
 * with err set. */
int ctl_client_resolve(struct ctl_client *c, char *err, size_t errlen);

/* ---- explain.c ---- */

int cmd_explain(const struct ctl *c, struct steer_dp *dp);

/* ---- uninstall.c: removing smg-steer from a host ---------------------------- */

/* Works on the pin directory alone, whatever map layout wrote it (it never
 * loads our BPF object), so that a host can always be cleaned, also after a
 * failed upgrade. */
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

/* ---- xdp_report.c: the XDP ingress section of status. Both print nothing
 * (return NULL) when no XDP program was attached with this pin path. ---------- */

void steer_xdp_report_text(FILE *f, const char *pin_dir, const struct steer_view *v);
/* {"devices": [...], "flows": N, "services": [{"vip", counters, "backends": [...]}]} */
struct json_object *steer_xdp_report_json(const char *pin_dir, const struct steer_view *v);

/* ---- decap.c ------------------------------------------------------------------- */

/* `smg-steerctl decap ...`: argv[0] is "decap"; returns the exit code. */
int steer_decap_cli(int argc, char **argv, const char *prog);

#endif /* STEER_CTL_H */
