/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * ctl.h - what the parts of smg-steerctl share (private to tools/):
 *
 *   smg-steerctl.c  arguments, opening the data plane, status, drain, uninstall, main,
 *                   and the names, numbers and JSON helpers below
 *   ctl_explain.c   explain: the kernel's decision recomputed, and why
 */
#ifndef STEER_CTL_H
#define STEER_CTL_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "dataplane.h"
#include "steer_common.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

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

struct ctl {
	const char *pin_dir;
	enum output_format output;
	enum command cmd;
	struct steer_addr target; /* explain: the VIP; drain/undrain: the backend */
	char target_str[STEER_ADDR_STRLEN];
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

/* ---- ctl_explain.c ---- */

int cmd_explain(const struct ctl *c, struct steer_dp *dp);

#endif /* STEER_CTL_H */
