// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config_addr.c - addresses and paths that cannot be right, refused before
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
