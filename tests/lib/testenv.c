// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "testenv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char cg_root[PATH_MAX];
static char cg_dir[PATH_MAX + 128];
static char pin_dir[PATH_MAX];
static pid_t owner_pid;
#define MAX_CHILDREN 4
static char children[MAX_CHILDREN][PATH_MAX + 160];
static int n_children;

const char *testenv_cgroup(void)
{
	return cg_dir;
}

const char *testenv_pin_dir(void)
{
	return pin_dir;
}

int test_system(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	st = system(cmd);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -errno;
}

static int move_self(const char *cg)
{
	char path[PATH_MAX + 160], pid[32];

	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	return write_file(path, pid);
}

int testenv_leave_cgroup(void)
{
	return move_self(cg_root);
}

int testenv_enter_cgroup(void)
{
	return move_self(cg_dir);
}

int testenv_enter(const char *cg)
{
	return move_self(cg);
}

int testenv_child_cgroup(const char *name, char *out, size_t len)
{
	char *dir;

	if (n_children == MAX_CHILDREN || !cg_dir[0])
		return -ENOSPC;
	dir = children[n_children];
	snprintf(dir, sizeof(children[0]), "%s/%s", cg_dir, name);
	if (mkdir(dir, 0755) != 0)
		return -errno;
	n_children++;
	snprintf(out, len, "%s", dir);
	return 0;
}

/* Remove everything this test created. Runs once, in the creating process. */
static void cleanup(void)
{
	if (getpid() != owner_pid)
		return;
	if (pin_dir[0]) {
		/* Pinned links hold the programs attached; unpinning releases them. */
		test_system("rm -rf '%s' 2>/dev/null", pin_dir);
	}
	if (cg_dir[0]) {
		move_self(cg_root);
		while (n_children > 0)
			rmdir(children[--n_children]);
		rmdir(cg_dir);
	}
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int lo_up(void)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = 0;

	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0 ||
	    (ifr.ifr_flags |= IFF_UP, ioctl(fd, SIOCSIFFLAGS, &ifr) != 0))
		rc = -errno;
	close(fd);
	return rc;
}

static int find_cgroup2(char *buf, size_t len)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	int rc = -1;

	if (!f)
		return -1;
	while ((m = getmntent(f)))
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, len, "%s", m->mnt_dir);
			rc = 0;
			break;
		}
	endmntent(f);
	return rc;
}

int testenv_init(const char *name)
{
	owner_pid = getpid();
	if (geteuid() != 0) {
		fprintf(stderr, "testenv: must run as root\n");
		return -1;
	}
	if (unshare(CLONE_NEWNET) != 0) {
		fprintf(stderr, "testenv: unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return -1;
	}
	if (lo_up() != 0) {
		fprintf(stderr, "testenv: cannot bring lo up\n");
		return -1;
	}
	if (find_cgroup2(cg_root, sizeof(cg_root)) != 0) {
		fprintf(stderr, "testenv: no cgroup2 mount in /proc/mounts\n");
		return -1;
	}
	snprintf(cg_dir, sizeof(cg_dir), "%s/smg-steer-test-%s-%d", cg_root, name, (int)getpid());
	snprintf(pin_dir, sizeof(pin_dir), "/sys/fs/bpf/smg-steer-test-%s-%d", name, (int)getpid());
	atexit(cleanup);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGPIPE, SIG_IGN);
	if (mkdir(cg_dir, 0755) != 0) {
		fprintf(stderr, "testenv: mkdir %s: %s\n", cg_dir, strerror(errno));
		cg_dir[0] = 0;
		return -1;
	}
	if (testenv_enter_cgroup() != 0) {
		fprintf(stderr, "testenv: cannot enter %s\n", cg_dir);
		return -1;
	}
	return 0;
}

int test_sockaddr(const char *addr, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[128];
	const char *colon;
	int port;

	memset(ss, 0, sizeof(*ss));
	if (addr[0] == '[') {
		const char *close = strchr(addr, ']');
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		if (!close || close[1] != ':' || (size_t)(close - addr - 1) >= sizeof(host))
			return -EINVAL;
		memcpy(host, addr + 1, (size_t)(close - addr - 1));
		host[close - addr - 1] = 0;
		port = atoi(close + 2);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &s6->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*s6);
		return 0;
	}
	colon = strrchr(addr, ':');
	if (!colon || (size_t)(colon - addr) >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = 0;
	port = atoi(colon + 1);
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	s4->sin_family = AF_INET;
	s4->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
		return -EINVAL;
	*len = sizeof(*s4);
	return 0;
}

const char *test_fmt_sockaddr(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)ss;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(s4->sin_port));
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)ss;

		inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", ss->ss_family);
	}
	return buf;
}

static void *backend_loop(void *arg)
{
	struct test_backend *b = arg;

	while (!b->stop) {
		int c = accept4(b->fd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		__atomic_fetch_add(&b->accepted, 1, __ATOMIC_RELAXED);
		if (write(c, b->name, strlen(b->name)) < 0) {
			/* the client went away first; nothing to do */
		}
		close(c);
	}
	return NULL;
}

int test_backend_start(struct test_backend *b, const char *addr, const char *name)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;

	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	snprintf(b->addr, sizeof(b->addr), "%s", addr);
	if (test_sockaddr(addr, &ss, &len) != 0)
		return -EINVAL;
	b->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (b->fd < 0)
		return -errno;
	setsockopt(b->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ss.ss_family == AF_INET6)
		setsockopt(b->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(b->fd, (struct sockaddr *)&ss, len) != 0 || listen(b->fd, 1024) != 0) {
		int e = errno;

		close(b->fd);
		b->fd = -1;
		return -e;
	}
	if (pthread_create(&b->thr, NULL, backend_loop, b) != 0) {
		close(b->fd);
		b->fd = -1;
		return -EAGAIN;
	}
	return 0;
}

void test_backend_stop(struct test_backend *b)
{
	if (b->fd < 0)
		return;
	b->stop = 1;
	shutdown(b->fd, SHUT_RDWR); /* wakes accept() */
	pthread_join(b->thr, NULL);
	close(b->fd);
	b->fd = -1;
}

int test_connect(const char *addr, bool force_v6, char *name, size_t name_len,
		 struct sockaddr_storage *peer, int *hold_fd)
{
	struct sockaddr_storage ss, mapped;
	socklen_t len, plen = sizeof(struct sockaddr_storage);
	size_t got = 0;
	int fd, rc = 0;

	if (test_sockaddr(addr, &ss, &len) != 0)
		return -EINVAL;
	if (force_v6 && ss.ss_family == AF_INET) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&mapped;

		memset(&mapped, 0, sizeof(mapped));
		s6->sin6_family = AF_INET6;
		s6->sin6_port = s4->sin_port;
		s6->sin6_addr.s6_addr[10] = 0xff;
		s6->sin6_addr.s6_addr[11] = 0xff;
		memcpy(&s6->sin6_addr.s6_addr[12], &s4->sin_addr, 4);
		ss = mapped;
		len = sizeof(*s6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (peer && getpeername(fd, (struct sockaddr *)peer, &plen) != 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (name && name_len) {
		for (;;) {
			ssize_t n = read(fd, name + got, name_len - 1 - got);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			got += (size_t)n;
			if (got >= name_len - 1)
				break;
		}
		name[got] = 0;
	}
	if (hold_fd)
		*hold_fd = fd;
	else
		close(fd);
	return 0;
}
