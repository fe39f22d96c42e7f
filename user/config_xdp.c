// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config_xdp.c - the XDP ingress options: --xdp-dev IFACE (repeatable, or a
 * comma-separated list, also as the file's xdp-dev key), --xdp-mode
 * native|generic, --xdp-encap-src PREFIX4/LEN[,PREFIX6/LEN].
 */
#include <string.h>

#include "config_int.h"

/* An interface name the kernel could have: 1..15 bytes, no '/', ':' or space. */
static int ifname_check(const char *n, size_t len, char *why, size_t whylen)
{
	size_t i;

	if (len == 0 || len >= STEER_IFNAME_LEN)
		return cfg_why(why, whylen, "an interface name has 1..%d characters, got '%.*s'",
			       STEER_IFNAME_LEN - 1, (int)len, n);
	for (i = 0; i < len; i++)
		if (n[i] == '/' || n[i] == ':' || n[i] == ' ' || n[i] == '\t')
			return cfg_why(why, whylen, "'%.*s' is not an interface name", (int)len, n);
	return 0;
}

/* Each call adds to the list of its layer: the flag may be repeated. */
int cfg_parse_xdp_dev(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	const char *p = v;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p), i;

		if (ifname_check(p, len, why, whylen))
			return -1;
		for (i = 0; i < dst->n_xdp_devs; i++)
			if (strlen(dst->xdp_devs[i]) == len && !strncmp(dst->xdp_devs[i], p, len))
				return cfg_why(why, whylen, "interface '%.*s' given twice",
					       (int)len, p);
		if (dst->n_xdp_devs == STEER_XDP_DEVS_MAX)
			return cfg_why(why, whylen, "at most %d interfaces", STEER_XDP_DEVS_MAX);
		memcpy(dst->xdp_devs[dst->n_xdp_devs], p, len);
		dst->xdp_devs[dst->n_xdp_devs++][len] = 0;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

int cfg_parse_xdp_mode(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (!strcmp(v, "native"))
		dst->xdp_mode = STEER_XDP_NATIVE;
	else if (!strcmp(v, "generic"))
		dst->xdp_mode = STEER_XDP_GENERIC;
	else
		return cfg_why(why, whylen, "must be native or generic, got '%s'", v);
	return 0;
}

int cfg_parse_xdp_encap_src(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (steer_xdp_encap_parse(v, &dst->xdp_encap, why, whylen))
		return -1;
	snprintf(dst->xdp_encap_src, sizeof(dst->xdp_encap_src), "%s", v);
	return 0;
}

void cfg_xdp_apply(struct steer_config *dst, const struct layer *l)
{
	const struct steer_config *v = &l->v;

	if (l->set[OPT_XDP_DEV]) {
		memcpy(dst->xdp_devs, v->xdp_devs, sizeof(dst->xdp_devs));
		dst->n_xdp_devs = v->n_xdp_devs;
	}
	if (l->set[OPT_XDP_MODE])
		dst->xdp_mode = v->xdp_mode;
	if (l->set[OPT_XDP_ENCAP_SRC]) {
		dst->xdp_encap = v->xdp_encap;
		memcpy(dst->xdp_encap_src, v->xdp_encap_src, sizeof(dst->xdp_encap_src));
	}
}
