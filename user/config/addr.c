// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * addr.c - addresses and paths that cannot be right, refused before
 * anything is attached: a port written with a sign or a leading zero, a VIP
 * or a backend that is unspecified, multicast or broadcast (no connection
 * can go there), and a --cgroup that is not a cgroup2 directory.
 *
 * Errors follow steer_seterr's convention (dataplane.h): a one-line reason
 * in err, and a negative return.
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
int cfg_addr_parse(const char *s, struct steer_addr *out, char *err, size_t errlen)
{
	const char *colon = strrchr(s, ':');

	if (colon && colon[1] &&
	    (strspn(colon + 1, "0123456789") != strlen(colon + 1) || colon[1] == '0'))
		return steer_seterr(err, errlen, EINVAL,
				    "'%s': port must be 1..65535, in decimal without sign or "
				    "leading zero",
				    s);
	return steer_addr_parse(s, out, err, errlen);
}

/* What kind of address no connection can be steered to or from, or NULL. */
static const char *addr_unusable(const struct steer_addr *a)
{
	if (steer_addr_is_v4(a)) {
		uint32_t v4 = ntohl(a->ip6[3]);

		if ((v4 >> 24) == 0)
			return "unspecified (0.0.0.0/8)";
		if ((v4 >> 28) == 0xe)
			return "multicast (224.0.0.0/4)";
		if (v4 == 0xffffffffu)
			return "broadcast (255.255.255.255)";
		return NULL;
	}
	if (!a->ip6[0] && !a->ip6[1] && !a->ip6[2] && !a->ip6[3])
		return "unspecified (::)";
	if ((ntohl(a->ip6[0]) >> 24) == 0xff)
		return "multicast (ff00::/8)";
	return NULL;
}

int cfg_addr_check_usable(const struct steer_addr *a, const char *role, char *err, size_t errlen)
{
	const char *why = addr_unusable(a);
	char text[STEER_ADDR_STRLEN];

	if (!why)
		return 0;
	return steer_seterr(err, errlen, EINVAL, "%s cannot be %s: %s is %s", role,
			    "an unspecified, multicast or broadcast address",
			    steer_addr_format(a, text, sizeof(text)), why);
}

/* A listener may take the unspecified address (all interfaces), not the others. */
int cfg_addr_check_listen(const struct steer_addr *a, char *err, size_t errlen)
{
	const char *why = addr_unusable(a);
	char text[STEER_ADDR_STRLEN];

	if (!why || !strncmp(why, "unspecified", 11))
		return 0;
	return steer_seterr(err, errlen, EINVAL, "cannot listen on %s: it is %s",
			    steer_addr_format(a, text, sizeof(text)), why);
}

/* One --dns-server entry: IPV4, IPV4:PORT, IPV6, [IPV6] or [IPV6]:PORT, into *a
 * (port 53 when none is given). */
static int dns_server_parse(const char *item, struct steer_addr *a, char *err, size_t errlen)
{
	const char *colon = strchr(item, ':'), *why;
	char text[STEER_ADDR_STRLEN + 8];

	if (!item[0])
		return steer_seterr(err, errlen, EINVAL, "an empty server in the list");
	if (strlen(item) > STEER_ADDR_STRLEN)
		return steer_seterr(err, errlen, EINVAL, "'%s' is too long for an address", item);
	if (item[0] == '[') /* [IPV6] or [IPV6]:PORT */
		snprintf(text, sizeof(text), "%s%s", item,
			 item[strlen(item) - 1] == ']' ? ":53" : "");
	else if (colon && colon != strrchr(item, ':')) /* IPV6 */
		snprintf(text, sizeof(text), "[%s]:53", item);
	else /* IPV4 or IPV4:PORT */
		snprintf(text, sizeof(text), "%s%s", item, colon ? "" : ":53");
	if (cfg_addr_parse(text, a, err, errlen))
		return steer_seterr(err, errlen, EINVAL,
				    "'%s' is not IPV4[:PORT] or [IPV6][:PORT] (a name needs a "
				    "resolver: give an address)",
				    item);
	why = addr_unusable(a);
	if (why)
		return steer_seterr(err, errlen, EINVAL, "'%s' cannot be a DNS server: it is %s",
				    item, why);
	return 0;
}

/* Each entry as c-ares 1.18 reads every form: IPV4:PORT or [IPV6]:PORT. */
int cfg_dns_servers_parse(const char *v, char *out, size_t outlen, char *err, size_t errlen)
{
	char list[STEER_DNS_SERVERS_MAX], text[STEER_ADDR_STRLEN], *item, *save = NULL;
	struct steer_addr a;
	size_t len = 0;

	if (!v[0])
		return steer_seterr(err, errlen, EINVAL,
				    "expected ADDR[:PORT][,ADDR[:PORT]]... (omit it for the "
				    "system's resolver)");
	if (strlen(v) >= sizeof(list))
		return steer_seterr(err, errlen, EINVAL, "longer than %zu bytes", sizeof(list) - 1);
	if (v[0] == ',' || v[strlen(v) - 1] == ',' || strstr(v, ",,"))
		return steer_seterr(err, errlen, EINVAL, "'%s': an empty server in the list", v);
	snprintf(list, sizeof(list), "%s", v);
	out[0] = 0;
	for (item = strtok_r(list, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		if (dns_server_parse(item, &a, err, errlen))
			return -EINVAL;
		steer_addr_format(&a, text, sizeof(text));
		len += (size_t)snprintf(out + len, len < outlen ? outlen - len : 0, "%s%s",
					len ? "," : "", text);
	}
	if (len >= outlen)
		return steer_seterr(err, errlen, EINVAL, "longer than %zu bytes with the ports",
				    outlen - 1);
	return 0;
}

/* "" is the cgroup2 root (found at attach time); anything else must be one. */
int cfg_cgroup_check(const char *path, char *err, size_t errlen)
{
	char root[PATH_MAX] = "";
	struct statfs fs;
	struct stat st;

	if (!path[0])
		return 0;
	if (path[0] != '/')
		return steer_seterr(err, errlen, EINVAL,
				    "must be an absolute path to a cgroup2 directory, got '%s'",
				    path);
	if (stat(path, &st))
		return steer_seterr(err, errlen, errno, "'%s': %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return steer_seterr(err, errlen, ENOTDIR, "'%s' is not a directory", path);
	if (statfs(path, &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC)
		return 0;
	steer_cgroup2_root(root, sizeof(root));
	return steer_seterr(err, errlen, EINVAL, "'%s' is not a cgroup2 directory%s%s%s", path,
			    root[0] ? " (cgroup2 is mounted at " : "", root, root[0] ? ")" : "");
}
