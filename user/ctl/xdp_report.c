// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp_report.c - the XDP ingress section of `smg-steerctl status` (text and
 * JSON): interfaces, flows tracked, and the counters of every VIP and backend.
 */
#include <json-c/json.h>
#include <string.h>

#include "xdp/xdp.h"
#include "ctl.h"

static void ctr_json(struct json_object *o, const struct steer_xdp_ctr *c, bool vip)
{
	json_object_object_add(o, "packets", json_object_new_uint64(c->packets));
	json_object_object_add(o, "bytes", json_object_new_uint64(c->bytes));
	json_object_object_add(o, "new_flows", json_object_new_uint64(c->new_flows));
	if (vip) {
		json_object_object_add(o, "lru_miss", json_object_new_uint64(c->lru_miss));
		json_object_object_add(o, "refused", json_object_new_uint64(c->refused));
		json_object_object_add(o, "icmp", json_object_new_uint64(c->icmp));
	} else {
		json_object_object_add(o, "ended", json_object_new_uint64(c->ended));
	}
	json_object_object_add(o, "no_route", json_object_new_uint64(c->no_route));
}

struct json_object *steer_xdp_report_json(const char *pin_dir, const struct steer_view *v)
{
	char devs[STEER_XDP_DEVS_MAX][STEER_IFNAME_LEN];
	size_t n_devs = steer_xdp_devs(pin_dir, devs, STEER_XDP_DEVS_MAX), i, j, flows = 0;
	struct json_object *o, *arr, *svcs;
	struct steer_xdp_stats *st;

	if (steer_xdp_stats_open(pin_dir, &st) != 0)
		return NULL;
	o = json_object_new_object();
	arr = json_object_new_array();
	for (i = 0; i < n_devs; i++)
		json_object_array_add(arr, json_object_new_string(devs[i]));
	json_object_object_add(o, "devices", arr);
	steer_xdp_stats_flows(st, &flows);
	json_object_object_add(o, "flows", json_object_new_uint64(flows));
	svcs = json_object_new_array();
	for (i = 0; i < v->n_services; i++) {
		const struct steer_view_service *s = &v->services[i];
		struct json_object *so = json_object_new_object(), *bks = json_object_new_array();
		struct steer_xdp_ctr c;
		char buf[STEER_ADDR_STRLEN];

		json_object_object_add(
			so, "vip",
			json_object_new_string(steer_addr_format(&s->vip, buf, sizeof(buf))));
		if (steer_xdp_stats_vip(st, s->svc_id, &c) == 0)
			ctr_json(so, &c, true);
		for (j = 0; j < s->n_backends; j++) {
			struct json_object *bo = json_object_new_object();

			json_object_object_add(bo, "address",
					       json_object_new_string(steer_addr_format(
						       &s->backends[j].addr, buf, sizeof(buf))));
			if (steer_xdp_stats_backend(st, s->backends[j].slot, &c) == 0)
				ctr_json(bo, &c, false);
			json_object_array_add(bks, bo);
		}
		json_object_object_add(so, "backends", bks);
		json_object_array_add(svcs, so);
	}
	json_object_object_add(o, "services", svcs);
	steer_xdp_stats_close(st);
	return o;
}

/*
 * "name: label N, label N, ...", at indent; a counter that would pass
 * STATUS_COLUMNS starts a new line, two blanks further in, so that
 * big counters of IPv6 addresses fit a terminal as the backends' table does.
 */
static void ctr_text(FILE *f, int indent, const char *name, const char *const *labels,
		     const unsigned long long *vals, size_t n)
{
	int col = fprintf(f, "%*s%s:", indent, "", name);
	char item[64];
	size_t i;

	for (i = 0; i < n; i++) {
		int len = snprintf(item, sizeof(item), "%s %llu%s", labels[i], vals[i],
				   i + 1 < n ? "," : "");

		if (col + 1 + len > STATUS_COLUMNS)
			col = fprintf(f, "\n%*s", indent + 2, "") - 1;
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%s", item);
	}
	fprintf(f, "\n");
}

void steer_xdp_report_text(FILE *f, const char *pin_dir, const struct steer_view *v)
{
	static const char *const vip_labels[] = { "packets", "bytes", "new flows", "lru misses",
						  "refused", "icmp",  "no route" };
	static const char *const backend_labels[] = { "packets", "bytes", "new flows", "ended",
						      "no route" };
	char devs[STEER_XDP_DEVS_MAX][STEER_IFNAME_LEN], buf[STEER_ADDR_STRLEN];
	size_t n_devs = steer_xdp_devs(pin_dir, devs, STEER_XDP_DEVS_MAX), i, j, flows = 0;
	struct steer_xdp_stats *st;
	struct steer_xdp_ctr c;

	if (steer_xdp_stats_open(pin_dir, &st) != 0)
		return;
	steer_xdp_stats_flows(st, &flows);
	fprintf(f, "\nXDP ingress on");
	for (i = 0; i < n_devs; i++)
		fprintf(f, " %s", devs[i]);
	fprintf(f, "%s: %zu flow%s tracked\n", n_devs ? "" : " no interface", flows,
		flows == 1 ? "" : "s");
	for (i = 0; i < v->n_services; i++) {
		const struct steer_view_service *s = &v->services[i];

		if (steer_xdp_stats_vip(st, s->svc_id, &c) != 0)
			continue;
		ctr_text(f, 2, steer_addr_format(&s->vip, buf, sizeof(buf)), vip_labels,
			 (const unsigned long long[]){ c.packets, c.bytes, c.new_flows, c.lru_miss,
						       c.refused, c.icmp, c.no_route },
			 7);
		for (j = 0; j < s->n_backends; j++) {
			if (steer_xdp_stats_backend(st, s->backends[j].slot, &c) != 0)
				continue;
			ctr_text(f, 4, steer_addr_format(&s->backends[j].addr, buf, sizeof(buf)),
				 backend_labels,
				 (const unsigned long long[]){ c.packets, c.bytes, c.new_flows,
							       c.ended, c.no_route },
				 5);
		}
	}
	steer_xdp_stats_close(st);
}
