// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * common.c - addresses, the error convention, the clock and the cgroup2 mount
 * (common.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "common/common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <mntent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int steer_seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc < 0 ? rc : -rc;
}

uint64_t steer_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

bool steer_addr_is_v4(const struct steer_addr *a)
{
	return a->ip6[0] == 0 && a->ip6[1] == 0 && a->ip6[2] == htonl(0x0000ffff);
}

/* What kind of address no connection can be steered to or from, or NULL. */
const char *steer_addr_unusable(const struct steer_addr *a)
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

char *steer_secret_join(const char *prefix, const char *secret)
{
	size_t a = strlen(prefix), b = strlen(secret);
	char *s = malloc(a + b + 1);

	if (!s)
		return NULL;
	memcpy(s, prefix, a);
	memcpy(s + a, secret, b + 1);
	return s;
}

bool steer_addr_equal(const struct steer_addr *a, const struct steer_addr *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

int steer_addr_parse(const char *s, struct steer_addr *out, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port_s;
	size_t hlen;
	char *end;
	long port;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return steer_seterr(err, errlen, EINVAL, "empty address, expected ADDR:PORT");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': an IPv6 address is written [ADDR]:PORT", s);
		hlen = (size_t)(close - s - 1);
		port_s = close + 2;
		if (hlen >= sizeof(host))
			return steer_seterr(err, errlen, EINVAL, "'%s': address too long", s);
		memcpy(host, s + 1, hlen);
		host[hlen] = 0;
		if (inet_pton(AF_INET6, host, out->ip6) != 1)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': '%s' is not an IPv6 address", s, host);
	} else {
		const char *colon = strrchr(s, ':');

		if (!colon || strchr(s, ':') != colon)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': expected IPV4:PORT or [IPV6]:PORT", s);
		hlen = (size_t)(colon - s);
		port_s = colon + 1;
		if (hlen >= sizeof(host))
			return steer_seterr(err, errlen, EINVAL, "'%s': address too long", s);
		memcpy(host, s, hlen);
		host[hlen] = 0;
		out->ip6[2] = htonl(0x0000ffff);
		if (inet_pton(AF_INET, host, &out->ip6[3]) != 1)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': '%s' is not an IPv4 address", s, host);
	}
	errno = 0;
	port = strtol(port_s, &end, 10);
	if (!*port_s || *end || errno || port < 1 || port > 65535)
		return steer_seterr(err, errlen, EINVAL, "'%s': port must be 1..65535", s);
	out->port = htons((uint16_t)port);
	out->proto = STEER_IPPROTO_TCP;
	return 0;
}

const char *steer_addr_format(const struct steer_addr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (steer_addr_is_v4(a)) {
		inet_ntop(AF_INET, &a->ip6[3], host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->port));
	} else {
		inet_ntop(AF_INET6, a->ip6, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->port));
	}
	return buf;
}

int steer_cgroup2_root(char *buf, size_t len)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while ((m = getmntent(f))) {
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, len, "%s", m->mnt_dir);
			rc = 0;
			break;
		}
	}
	endmntent(f);
	return rc;
}

const char *steer_duration_text(uint64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *unit;
		uint64_t ns;
	} units[] = { { "h", 3600000000000ULL },
		      { "m", 60000000000ULL },
		      { "s", 1000000000ULL },
		      { "ms", 1000000ULL },
		      { "us", 1000ULL } };
	size_t i;

	for (i = 0; ns && i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].ns == 0) {
			snprintf(buf, len, "%llu%s", (unsigned long long)(ns / units[i].ns),
				 units[i].unit);
			return buf;
		}
	}
	snprintf(buf, len, ns ? "%lluns" : "0", (unsigned long long)ns);
	return buf;
}
