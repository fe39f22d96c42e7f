// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config/xdp.c - the XDP ingress options: --xdp-dev IFACE (repeatable, or a
 * comma-separated list, also as the file's xdp-dev key), --xdp-mode
 * native|generic, --xdp-encap-src PREFIX4/LEN[,PREFIX6/LEN].
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
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

/* ---- the outer source prefixes ---------------------------------------------- */

/* Host bits of a prefix of len bits out of total, network order, into mask. */
static void host_mask(unsigned len, unsigned total, uint32_t *mask)
{
	unsigned w;

	for (w = 0; w < total / 32; w++) {
		unsigned lo = w * 32;
		uint32_t m;

		if (len <= lo)
			m = 0xffffffffu;
		else if (len >= lo + 32)
			m = 0;
		else
			m = 0xffffffffu >> (len - lo);
		mask[w] = htonl(m);
	}
}

static int encap_one(const char *s, struct steer_xdp_cfg *out, bool *seen4, bool *seen6, char *why,
		     size_t whylen)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = strchr(s, '/');
	char *end;
	unsigned long len;
	uint32_t a[4], mask[4];
	bool v6;
	int i;

	if (!slash || (size_t)(slash - s) >= sizeof(addr))
		return cfg_why(why, whylen, "'%s' is not a prefix ADDR/LEN", s);
	memcpy(addr, s, (size_t)(slash - s));
	addr[slash - s] = 0;
	v6 = strchr(addr, ':') != NULL;
	errno = 0;
	len = strtoul(slash + 1, &end, 10);
	if (*end || end == slash + 1 || errno)
		return cfg_why(why, whylen, "'%s': the prefix length is not a number", s);
	if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, a) != 1)
		return cfg_why(why, whylen, "'%s' is not an IPv%d address", addr, v6 ? 6 : 4);
	/* At least 8 host bits to spread by; a /64 keeps the IPv6 interface
	 * identifier for the hash. */
	if (v6 ? (len < 64 || len > 120) : (len < 8 || len > 24))
		return cfg_why(why, whylen, "'%s': the length must be %s", s,
			       v6 ? "64..120" : "8..24");
	if (v6 ? *seen6 : *seen4)
		return cfg_why(why, whylen, "'%s': a second IPv%d prefix", s, v6 ? 6 : 4);
	host_mask((unsigned)len, v6 ? 128 : 32, mask);
	if (v6) {
		for (i = 0; i < 4; i++) {
			out->src6[i] = a[i] & ~mask[i];
			out->src6_host[i] = mask[i];
		}
		*seen6 = true;
	} else {
		out->src4 = a[0] & ~mask[0];
		out->src4_host = mask[0];
		*seen4 = true;
	}
	return 0;
}

static int encap_parse(const char *v, struct steer_xdp_cfg *out, char *why, size_t whylen)
{
	struct steer_xdp_cfg c = { 0 };
	bool seen4 = false, seen6 = false;
	char buf[128], *save = NULL, *tok;

	if (strlen(v) >= sizeof(buf) || !*v)
		return cfg_why(why, whylen, "must be PREFIX4/LEN[,PREFIX6/LEN], got '%s'", v);
	snprintf(buf, sizeof(buf), "%s", v);
	/* What is not given keeps the default's prefix. */
	if (strcmp(v, STEER_XDP_ENCAP_SRC_DEFAULT) &&
	    encap_parse(STEER_XDP_ENCAP_SRC_DEFAULT, &c, why, whylen))
		return -1;
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int rc = encap_one(tok, &c, &seen4, &seen6, why, whylen);

		if (rc)
			return rc;
	}
	*out = c;
	return 0;
}

/* ---- the interfaces ------------------------------------------------------------ */

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
	if (encap_parse(v, &dst->xdp_encap, why, whylen))
		return -1;
	snprintf(dst->xdp_encap_src, sizeof(dst->xdp_encap_src), "%s", v);
	return 0;
}
