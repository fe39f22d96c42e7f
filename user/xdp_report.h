/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * xdp_report.h - the XDP ingress section of `smg-steerctl status`. Both print
 * nothing (return NULL) when no XDP program was attached with this pin path.
 */
#ifndef STEER_XDP_REPORT_H
#define STEER_XDP_REPORT_H

#include <stdio.h>

#include "dataplane.h"

struct json_object;

void steer_xdp_report_text(FILE *f, const char *pin_dir, const struct steer_view *v);
/* {"devices": [...], "flows": N, "services": [{"vip", counters, "backends": [...]}]} */
struct json_object *steer_xdp_report_json(const char *pin_dir, const struct steer_view *v);

#endif /* STEER_XDP_REPORT_H */
