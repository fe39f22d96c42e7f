/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * testenv.h - throwaway surroundings for tests that load the real programs:
 * a private network namespace with lo up, a child cgroup the test process
 * moves into, a private pin directory, and TCP backends that tell the client
 * their name. Everything is removed at exit, also when a check failed.
 */
#ifndef STEER_TESTENV_H
#define STEER_TESTENV_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/*
 * Enter a new network namespace (lo up), create and enter a child cgroup of
 * the cgroup2 root, and choose a pin directory. Returns 0, or -1 with a
 * message on stderr. Cleanup runs at exit and on SIGINT/SIGTERM.
 */
int testenv_init(const char *name);
const char *testenv_cgroup(void);  /* the test's cgroup directory */
const char *testenv_pin_dir(void); /* under /sys/fs/bpf, not yet created */
/* Move the calling process back to the root cgroup (outside the hooks). */
int testenv_leave_cgroup(void);
int testenv_enter_cgroup(void);
/* Create the cgroup name below the test's (removed at exit, first); its path
 * in out. 0 or -errno. */
int testenv_child_cgroup(const char *name, char *out, size_t len);
/* Move the calling process (all its threads) into the cgroup cg. */
int testenv_enter(const char *cg);

/* A TCP listener that writes its name to each client, then closes. */
struct test_backend {
	char name[32];
	char addr[64]; /* "127.0.0.11:9001" or "[::1]:9001" */
	int fd;
	pthread_t thr;
	int accepted; /* atomic */
	volatile int stop;
};

int test_backend_start(struct test_backend *b, const char *addr, const char *name);
void test_backend_stop(struct test_backend *b);

/* Parse "a.b.c.d:port" / "[v6]:port" into a sockaddr. */
int test_sockaddr(const char *addr, struct sockaddr_storage *ss, socklen_t *len);

/*
 * Connect to addr (family of the address, or AF_INET6 with v4-mapped when
 * force_v6), report getpeername() in peer (may be NULL), read the backend's
 * name into name until EOF. Returns 0, or -errno of the failing step.
 * When hold_fd is not NULL the socket is left open and returned there.
 */
int test_connect(const char *addr, bool force_v6, char *name, size_t name_len,
		 struct sockaddr_storage *peer, int *hold_fd);

/* "127.0.0.100:8000" from a sockaddr, for messages. */
const char *test_fmt_sockaddr(const struct sockaddr_storage *ss, char *buf, size_t len);

/* Run a command, return its exit status (or -1). */
int test_system(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
