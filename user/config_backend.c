// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config_backend.c - one backend as the flag (and a YAML scalar) write it.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <string.h>

#include "config_int.h"

/* "ADDR:PORT[,loads=ADDR:PORT]": the flag's form, and a backend scalar's. */
int cfg_backend_parse(const char *spec, struct steer_backend_cfg *b, char *why, size_t whylen)
{
	char addr[STEER_ADDR_STRLEN + 64], detail[160];
	const char *comma = strchr(spec, ','), *loads = NULL;
	size_t len = comma ? (size_t)(comma - spec) : strlen(spec);

	if (len >= sizeof(addr))
		return cfg_why(why, whylen, "'%s': address too long, expected " BACKEND_SYNTAX,
			       spec);
	memcpy(addr, spec, len);
	addr[len] = 0;
	if (comma) {
		if (strncmp(comma + 1, "loads=", 6))
			return cfg_why(why, whylen, "'%s': expected " BACKEND_SYNTAX, spec);
		loads = comma + 7;
	}
	memset(b, 0, sizeof(*b));
	if (steer_addr_parse(addr, &b->addr, detail, sizeof(detail)) ||
	    (loads && steer_addr_parse(loads, &b->loads, detail, sizeof(detail))))
		return cfg_why(why, whylen, "%s; expected " BACKEND_SYNTAX, detail);
	if (!loads)
		b->loads = b->addr;
	steer_addr_format(&b->addr, b->addr_str, sizeof(b->addr_str));
	steer_addr_format(&b->loads, b->loads_str, sizeof(b->loads_str));
	return 0;
}
