/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * benchlib.h - small helpers shared by the benchmark programs that drive the
 * data plane (vipctl, deccost): address arithmetic and cgroup membership.
 */
#ifndef STEER_BENCHLIB_H
#define STEER_BENCHLIB_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dataplane.h"

/* The i-th address after first ("127.0.1.1:9000" + 2 = 127.0.1.3:9000). */
static inline struct steer_addr bench_addr_plus(const struct steer_addr *first, uint32_t i)
{
	struct steer_addr a = *first;

	a.ip6[3] = htonl(ntohl(first->ip6[3]) + i);
	return a;
}

/* Move the calling process into a cgroup (its connects then meet the
 * programs attached there). Returns 0 or -errno. */
static inline int bench_join_cgroup(const char *dir)
{
	char path[4096], pid[32];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, pid, strlen(pid)) != (ssize_t)strlen(pid))
		rc = -errno;
	close(fd);
	return rc;
}

#endif
