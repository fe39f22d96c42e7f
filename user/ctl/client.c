// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * client.c - smg-steerctl explain --client KEY: the client of cache affinity
 * (steer_common.h, "Cache affinity") as the kernel keys it, from a cgroup v2
 * directory, a network namespace file, the application's key or an XDP
 * source address.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif
#define CGROUP2_MAGIC 0x63677270 /* CGROUP2_SUPER_MAGIC */
#define CGROUP2_ROOT "/sys/fs/cgroup"

/* The policy's names, but "key" for the application's: the --client form. */
const char *ctl_affinity_name(uint32_t kind)
{
	return kind == STEER_AFF_SOCKOPT ? "key" : steer_affinity_name(kind);
}

/* A 64-bit number, decimal or 0x hex, nothing else. */
static int parse_u64(const char *s, uint64_t *out)
{
	int base = 10;
	char *end;
	unsigned long long v;

	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (!*s || !(base == 16 ? !!strchr("0123456789abcdefABCDEF", *s) : *s >= '0' && *s <= '9'))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The source address folded as the XDP ingress folds it
 * (steer_aff_source_client). */
static int parse_source(const char *arg, uint64_t *out)
{
	char buf[INET6_ADDRSTRLEN + 2];
	__u32 src[4] = { 0, 0, 0, 0 };
	size_t n = strlen(arg);

	if (n >= sizeof(buf))
		return -EINVAL;
	if (arg[0] == '[' && n > 2 && arg[n - 1] == ']') {
		memcpy(buf, arg + 1, n - 2);
		buf[n - 2] = '\0';
	} else {
		memcpy(buf, arg, n + 1);
	}
	if (inet_pton(AF_INET, buf, &src[3]) != 1 && inet_pton(AF_INET6, buf, src) != 1)
		return -EINVAL;
	*out = steer_aff_source_client(src);
	return 0;
}

int ctl_client_parse(const char *arg, struct ctl_client *c, char *err, size_t errlen)
{
	const char *colon = strchr(arg, ':');
	size_t kl = colon ? (size_t)(colon - arg) : 0;
	const char *v = colon ? colon + 1 : "";

	memset(c, 0, sizeof(*c));
	c->arg = arg;
	if (!colon || !*v) {
		snprintf(err, errlen,
			 "--client: expected cgroup:PATH, netns:PATH, key:N or source:ADDR, got "
			 "'%s'",
			 arg);
		return -EINVAL;
	}
	c->value = v;
	if (kl == 6 && !strncmp(arg, "cgroup", kl)) {
		c->kind = STEER_AFF_CGROUP;
	} else if (kl == 5 && !strncmp(arg, "netns", kl)) {
		c->kind = STEER_AFF_NETNS;
	} else if (kl == 3 && !strncmp(arg, "key", kl)) {
		c->kind = STEER_AFF_SOCKOPT;
		if (parse_u64(v, &c->client) != 0) {
			snprintf(err, errlen,
				 "--client key: expected a 64-bit number (decimal or 0x hex), got "
				 "'%s'",
				 v);
			return -EINVAL;
		}
	} else if (kl == 6 && !strncmp(arg, "source", kl)) {
		c->kind = STEER_AFF_SOURCE;
		if (parse_source(v, &c->client) != 0) {
			snprintf(err, errlen,
				 "--client source: expected an IPv4 or IPv6 address, got '%s'", v);
			return -EINVAL;
		}
	} else {
		snprintf(err, errlen,
			 "--client: unknown kind '%.*s' (cgroup, netns, key or source)", (int)kl,
			 arg);
		return -EINVAL;
	}
	return 0;
}

/* A cgroup v2 directory's id: its inode number (what
 * bpf_get_current_cgroup_id answers for a task in it). A relative path that
 * does not exist as given is taken under /sys/fs/cgroup. */
static int resolve_cgroup(struct ctl_client *c, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct statfs fs;
	struct stat st;

	snprintf(path, sizeof(path), "%s", c->value);
	if (c->value[0] != '/' && access(path, F_OK) != 0)
		snprintf(path, sizeof(path), "%s/%s", CGROUP2_ROOT, c->value);
	if (stat(path, &st) != 0) {
		int e = errno;

		snprintf(err, errlen, "--client cgroup: %s: %s", path, strerror(e));
		return -e;
	}
	if (!S_ISDIR(st.st_mode) || statfs(path, &fs) != 0 || fs.f_type != CGROUP2_MAGIC) {
		snprintf(err, errlen, "--client cgroup: %s is not a cgroup v2 directory", path);
		return -EINVAL;
	}
	c->client = (uint64_t)st.st_ino;
	return 0;
}

/* The child: into the namespace, one socket, its cookie down the pipe. */
static void __attribute__((noreturn)) netns_child(int nsfd, int wfd)
{
	struct {
		int32_t err;
		uint32_t pad;
		uint64_t cookie;
	} msg = { 0, 0, 0 };
	socklen_t len = sizeof(msg.cookie);
	int fd;

	if (setns(nsfd, CLONE_NEWNET) != 0) {
		msg.err = errno;
	} else {
		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0)
			fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &msg.cookie, &len) != 0)
			msg.err = errno;
	}
	if (write(wfd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
		_exit(1);
	_exit(0);
}

/* A network namespace's cookie (what bpf_get_netns_cookie answers for a
 * connect from it): read from a socket made inside it, by a child process
 * that enters it, so that this one stays where it is. */
static int resolve_netns(struct ctl_client *c, char *err, size_t errlen)
{
	struct {
		int32_t err;
		uint32_t pad;
		uint64_t cookie;
	} msg = { EIO, 0, 0 };
	int nsfd, p[2], status = 0;
	ssize_t got;
	pid_t pid;

	nsfd = open(c->value, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0) {
		int e = errno;

		snprintf(err, errlen, "--client netns: %s: %s", c->value, strerror(e));
		return -e;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		int e = errno;

		close(nsfd);
		snprintf(err, errlen, "--client netns: pipe: %s", strerror(e));
		return -e;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		netns_child(nsfd, p[1]);
	}
	close(nsfd);
	close(p[1]);
	if (pid < 0) {
		int e = errno;

		close(p[0]);
		snprintf(err, errlen, "--client netns: fork: %s", strerror(e));
		return -e;
	}
	do
		got = read(p[0], &msg, sizeof(msg));
	while (got < 0 && errno == EINTR);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got != (ssize_t)sizeof(msg)) {
		snprintf(err, errlen, "--client netns: %s: no answer from the child", c->value);
		return -EIO;
	}
	if (msg.err) {
		snprintf(err, errlen, "--client netns: %s: %s%s", c->value, strerror(msg.err),
			 msg.err == EINVAL ? " (not a network namespace file?)" : "");
		return -msg.err;
	}
	c->client = msg.cookie;
	return 0;
}

int ctl_client_resolve(struct ctl_client *c, char *err, size_t errlen)
{
	if (c->kind == STEER_AFF_CGROUP)
		return resolve_cgroup(c, err, errlen);
	if (c->kind == STEER_AFF_NETNS)
		return resolve_netns(c, err, errlen);
	return 0;
}
