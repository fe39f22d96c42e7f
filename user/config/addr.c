// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * addr.c - addresses and paths that cannot be right, refused before
 * anything is attached: a port written with a sign or a leading zero, a VIP
 * or a backend that is unspecified, multicast or broadcast (no connection
 * can go there), and a --cgroup that is not a cgroup2 directory.
 *
 * Errors as everywhere in the module: the reason in why, and -1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "config_int.h"

/* The port is the text after the last ':' (after "]:" for IPv6 too). */
int cfg_addr_parse(const char *s, struct steer_addr *out, char *why, size_t whylen)
{
	const char *colon = strrchr(s, ':');

	if (colon && colon[1] &&
	    (strspn(colon + 1, "0123456789") != strlen(colon + 1) || colon[1] == '0'))
		return cfg_why(why, whylen,
			       "'%s': port must be 1..65535, in decimal without sign or "
			       "leading zero",
			       s);
	return steer_addr_parse(s, out, why, whylen) ? -1 : 0;
}

int cfg_addr_check_usable(const struct steer_addr *a, const char *role, char *why, size_t whylen)
{
	const char *kind = steer_addr_unusable(a);
	char text[STEER_ADDR_STRLEN];

	if (!kind)
		return 0;
	return cfg_why(why, whylen, "%s cannot be %s: %s is %s", role,
		       "an unspecified, multicast or broadcast address",
		       steer_addr_format(a, text, sizeof(text)), kind);
}

/* A listener may take the unspecified address (all interfaces), not the others. */
int cfg_addr_check_listen(const struct steer_addr *a, char *why, size_t whylen)
{
	const char *kind = steer_addr_unusable(a);
	char text[STEER_ADDR_STRLEN];

	if (!kind || !strncmp(kind, "unspecified", 11))
		return 0;
	return cfg_why(why, whylen, "cannot listen on %s: it is %s",
		       steer_addr_format(a, text, sizeof(text)), kind);
}

/* One --dns-server entry: IPV4, IPV4:PORT, IPV6, [IPV6] or [IPV6]:PORT, into *a
 * (port 53 when none is given). */
static int dns_server_parse(const char *item, struct steer_addr *a, char *why, size_t whylen)
{
	const char *colon = strchr(item, ':'), *kind;
	char text[STEER_ADDR_STRLEN + 8];

	if (!item[0])
		return cfg_why(why, whylen, "an empty server in the list");
	if (strlen(item) > STEER_ADDR_STRLEN)
		return cfg_why(why, whylen, "'%s' is too long for an address", item);
	if (item[0] == '[') /* [IPV6] or [IPV6]:PORT */
		snprintf(text, sizeof(text), "%s%s", item,
			 item[strlen(item) - 1] == ']' ? ":53" : "");
	else if (colon && colon != strrchr(item, ':')) /* IPV6 */
		snprintf(text, sizeof(text), "[%s]:53", item);
	else /* IPV4 or IPV4:PORT */
		snprintf(text, sizeof(text), "%s%s", item, colon ? "" : ":53");
	if (cfg_addr_parse(text, a, why, whylen))
		return cfg_why(why, whylen,
			       "'%s' is not IPV4[:PORT] or [IPV6][:PORT] (a name needs a "
			       "resolver: give an address)",
			       item);
	kind = steer_addr_unusable(a);
	if (kind)
		return cfg_why(why, whylen, "'%s' cannot be a DNS server: it is %s", item, kind);
	return 0;
}

/* Each entry as c-ares 1.18 reads every form: IPV4:PORT or [IPV6]:PORT. */
int cfg_dns_servers_parse(const char *v, char *out, size_t outlen, char *why, size_t whylen)
{
	char list[STEER_DNS_SERVERS_MAX], text[STEER_ADDR_STRLEN], *item, *save = NULL;
	struct steer_addr a;
	size_t len = 0;

	if (!v[0])
		return cfg_why(why, whylen,
			       "expected ADDR[:PORT][,ADDR[:PORT]]... (omit it for the "
			       "system's resolver)");
	if (strlen(v) >= sizeof(list))
		return cfg_why(why, whylen, "longer than %zu bytes", sizeof(list) - 1);
	if (v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
		return cfg_why(why, whylen, "'%s': an empty server in the list", v);
	snprintf(list, sizeof(list), "%s", v);
	out[0] = 0;
	for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (dns_server_parse(item, &a, why, whylen))
			return -1;
		steer_addr_format(&a, text, sizeof(text));
		len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
					len ? "," : "", text);
	}
	if (len >= outlen)
		return cfg_why(why, whylen, "longer than %zu bytes with the ports", outlen - 1);
	return 0;
}

/* "" is the cgroup2 root (found at attach time); anything else must be one. */
int cfg_cgroup_check(const char *path, char *why, size_t whylen)
{
	char root[PATH_MAX] = "";
	struct statfs fs;
	struct stat st;

	if (!path[0])
		return 0;
	if (path[0] != '/')
		return cfg_why(why, whylen,
			       "must be an absolute path to a cgroup2 directory, got '%s'", path);
	if (stat(path, &st))
		return cfg_why(why, whylen, "'%s': %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return cfg_why(why, whylen, "'%s' is not a directory", path);
	if (statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
		return 0;
	steer_cgroup2_root(root, sizeof(root));
	return cfg_why(why, whylen, "'%s' is not a cgroup2 directory%s%s%s", path,
		       root[0] ? " (cgroup2 is mounted at " : "", root, root[0] ? ")" : "");
}
