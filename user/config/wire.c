// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * wire.c - --wire-cgroup PATH (the file's wire-cgroup key): the
 * cgroup2 directory request accounting (the cgroup_skb programs of
 * bpf/steer_wire.bpf.c) attaches to. Their dispatch costs every packet of
 * every socket in that cgroup, steered or not (docs/benchmarks.md), so an
 * operator who steers at the host's root can count request bytes only where
 * the inference clients run. It must lie within --cgroup: a steered socket
 * is counted only when both its connect and its packets pass the programs.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

int cfg_parse_wire_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (!v[0])
		return cfg_why(why, whylen,
			       "must be an absolute path to a cgroup2 directory, got ''");
	if (strlen(v) >= sizeof(dst->wire_cgroup))
		return cfg_why(why, whylen, "must be a path of at most %zu bytes",
			       sizeof(dst->wire_cgroup) - 1);
	if (cfg_cgroup_check(v, why, whylen))
		return -1;
	snprintf(dst->wire_cgroup, sizeof(dst->wire_cgroup), "%s", v);
	return 0;
}

/* True when dir is top or a directory below it, by their real paths. */
static int is_within(const char *dir, const char *top, bool *within, char *why, size_t whylen)
{
	char d[PATH_MAX], t[PATH_MAX];
	size_t n;

	if (!realpath(dir, d))
		return cfg_why(why, whylen, "'%s': %s", dir, strerror(errno));
	if (!realpath(top, t))
		return cfg_why(why, whylen, "'%s': %s", top, strerror(errno));
	n = strlen(t);
	*within = !strncmp(d, t, n) && (d[n] == 0 || d[n] == '/' || (n == 1 && t[0] == '/'));
	return 0;
}

int cfg_check_wire_cgroup(struct ctx *c)
{
	const struct steer_config *o = &c->out;
	char where[PATH_MAX + 32], why[WHY_LEN];
	bool within = true;

	if (!o->wire_cgroup[0])
		return STEER_CONFIG_OK;
	if (o->wire_off)
		return cfg_fail(c,
				"%s: given with --wire-estimator off, which counts no request "
				"bytes anywhere; leave one of them out",
				cfg_origin(c, OPT_WIRE_CGROUP, where, sizeof(where)));
	/* An empty --cgroup is the cgroup2 root: every cgroup2 directory
	 * (checked when parsed) lies within it. */
	if (o->cgroup[0] && is_within(o->wire_cgroup, o->cgroup, &within, why, sizeof(why)))
		return cfg_fail(c, "%s: %s", cfg_origin(c, OPT_WIRE_CGROUP, where, sizeof(where)),
				why);
	if (!within)
		return cfg_fail(c,
				"%s: '%s' is not the --cgroup (%s) or a cgroup below it: steered "
				"connections are made only there",
				cfg_origin(c, OPT_WIRE_CGROUP, where, sizeof(where)),
				o->wire_cgroup, o->cgroup);
	return STEER_CONFIG_OK;
}
