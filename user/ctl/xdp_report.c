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

void steer_xdp_report_text(FILE *f, const char *pin_dir, const struct steer_view *v)
{
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
		fprintf(f,
			"  %s: packets %llu, bytes %llu, new flows %llu, lru misses %llu, "
			"refused %llu, icmp %llu, no route %llu\n",
			steer_addr_format(&s->vip, buf, sizeof(buf)), (unsigned long long)c.packets,
			(unsigned long long)c.bytes, (unsigned long long)c.new_flows,
			(unsigned long long)c.lru_miss, (unsigned long long)c.refused,
			(unsigned long long)c.icmp, (unsigned long long)c.no_route);
		for (j = 0; j < s->n_backends; j++) {
			if (steer_xdp_stats_backend(st, s->backends[j].slot, &c) != 0)
				continue;
			fprintf(f,
				"    %s: packets %llu, bytes %llu, new flows %llu, ended %llu, "
				"no route %llu\n",
				steer_addr_format(&s->backends[j].addr, buf, sizeof(buf)),
				(unsigned long long)c.packets, (unsigned long long)c.bytes,
				(unsigned long long)c.new_flows, (unsigned long long)c.ended,
				(unsigned long long)c.no_route);
		}
	}
	steer_xdp_stats_close(st);
}
