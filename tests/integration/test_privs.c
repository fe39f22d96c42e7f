// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_privs.c - the daemon's real seccomp filter and capability drop
 * (user/privs/privs.c), each applied in a forked child: calls outside the
 * allowlist fail with EPERM, the calls the daemon makes still work, every
 * thread is covered, and the capability sets read back from /proc are
 * exactly the ones kept. The running daemon is checked the same way by
 * tests/integration/test_daemon_privs.py.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "privs/privs.h"
#include "tap.h"
#include "testenv.h"

/* CapEff etc. of the daemon: CAP_BPF (39) and CAP_NET_ADMIN (12). */
#define DAEMON_CAPS ((1ULL << CAP_BPF) | (1ULL << CAP_NET_ADMIN))

/* In the child: report and fail. */
#define EXPECT(cond, ...)                                                          \
	do {                                                                       \
		if (!(cond)) {                                                     \
			printf("# child: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			printf(__VA_ARGS__);                                       \
			printf("\n");                                              \
			fflush(stdout);                                            \
			return 1;                                                  \
		}                                                                  \
	} while (0)

/* Run fn in a forked child (so the filter and the drop stay there).
 * Returns its exit status, 0 for success. */
static int in_child(int (*fn)(void))
{
	pid_t pid;
	int st;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int rc = fn();

		fflush(stdout);
		_exit(rc);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A field of /proc/self/task/TID/status (or /proc/self/status for tid 0). */
static int status_field(pid_t tid, const char *key, char *out, size_t len)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	FILE *f;

	if (tid)
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "r");
	if (!f)
		return -1;
	out[0] = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
			snprintf(out, len, "%s", line + klen + 1 + strspn(line + klen + 1, " \t"));
			out[strcspn(out, "\n")] = 0;
			break;
		}
	fclose(f);
	return out[0] ? 0 : -1;
}

static unsigned long long hex_field(pid_t tid, const char *key)
{
	char v[64];

	if (status_field(tid, key, v, sizeof(v)) != 0)
		return ~0ULL;
	return strtoull(v, NULL, 16);
}

/* ---- The filter refuses -------------------------------------------------------- */

static int refuses_unlisted(void)
{
	char err[256] = "";
	long r;
	int fd;

	EXPECT(steer_privs_sandbox(err, sizeof(err)) == 0, "sandbox: %s", err);
	/* Each of these does something else without the filter (a value, ENOENT, ...). */
	errno = 0;
	r = syscall(SYS_personality, 0xffffffffUL);
	EXPECT(r == -1 && errno == EPERM, "personality query: %ld errno %d", r, errno);
	errno = 0;
	r = syscall(SYS_mount, "none", "/nonexistent-smg-steer", "tmpfs", 0UL, NULL);
	EXPECT(r == -1 && errno == EPERM, "mount: %ld errno %d", r, errno);
	errno = 0;
	EXPECT(unshare(CLONE_NEWUSER) == -1 && errno == EPERM, "unshare(user): errno %d", errno);
	errno = 0;
	/* /bin/false: should the exec work, the child's status tells. */
	EXPECT(execl("/bin/false", "false", (char *)NULL) == -1 && errno == EPERM,
	       "execve: errno %d", errno);
	errno = 0;
	r = syscall(SYS_ptrace, 0L /* PTRACE_TRACEME */, 0L, 0L, 0L);
	EXPECT(steer_privs_sanitizer_build() || (r == -1 && errno == EPERM), "ptrace: %ld errno %d",
	       r, errno);
	/* Argument checks: listen is not allowed at all, socket only for IP,
	 * Unix and netlink, ioctl only for a few requests, prlimit64 only to read. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	EXPECT(fd >= 0, "socket(AF_INET): errno %d", errno);
	errno = 0;
	EXPECT(listen(fd, 1) == -1 && errno == EPERM, "listen: errno %d", errno);
	errno = 0;
	EXPECT(ioctl(fd, SIOCATMARK, &r) == -1 && errno == EPERM, "ioctl(SIOCATMARK): errno %d",
	       errno);
	close(fd);
	errno = 0;
	EXPECT(socket(AF_PACKET, SOCK_RAW, 0) == -1 && errno == EPERM, "socket(AF_PACKET): %d",
	       errno);
	{
		struct rlimit rl;

		EXPECT(getrlimit(RLIMIT_NOFILE, &rl) == 0, "getrlimit: errno %d", errno);
		errno = 0;
		EXPECT(setrlimit(RLIMIT_NOFILE, &rl) == -1 && errno == EPERM, "setrlimit: errno %d",
		       errno);
	}
	if (!steer_privs_sanitizer_build()) {
		/* A new process (clone without CLONE_THREAD) and prctl options
		 * beyond the few in use: allowed in sanitizer builds (LSan). */
		errno = 0;
		EXPECT(fork() == -1 && errno == EPERM, "fork: errno %d", errno);
		errno = 0;
		EXPECT(prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1 && errno == EPERM,
		       "prctl(PR_SET_DUMPABLE): errno %d", errno);
	}
	return 0;
}

static void test_filter_refuses_unlisted_calls(void)
{
	int st = in_child(refuses_unlisted);

	CHECK(st == 0, "child exit %d", st);
}

/* ---- The filter allows --------------------------------------------------------- */

static void *noop_thread(void *arg)
{
	return arg;
}

static int allows_daemon_calls(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(1) };
	union bpf_attr attr;
	char err[256] = "", buf[64];
	pthread_t thr;
	void *ret = NULL;
	int fd, efd, one = 1;

	EXPECT(steer_privs_sandbox(err, sizeof(err)) == 0, "sandbox: %s", err);
	/* Threads: glibc's clone3 gets ENOSYS and falls back to clone. */
	EXPECT(pthread_create(&thr, NULL, noop_thread, buf) == 0, "pthread_create");
	EXPECT(pthread_join(thr, &ret) == 0 && ret == buf, "join");
	/* Sockets: a refused connect is ECONNREFUSED, not EPERM. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	EXPECT(fd >= 0, "socket: errno %d", errno);
	EXPECT(setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) == 0, "setsockopt");
	EXPECT(ioctl(fd, FIONBIO, &one) == 0, "ioctl(FIONBIO): errno %d", errno);
	errno = 0;
	EXPECT(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == -1 &&
		       (errno == EINPROGRESS || errno == ECONNREFUSED),
	       "connect: errno %d", errno);
	close(fd);
	efd = epoll_create1(EPOLL_CLOEXEC);
	EXPECT(efd >= 0, "epoll_create1: errno %d", errno);
	fd = eventfd(0, EFD_CLOEXEC);
	EXPECT(fd >= 0, "eventfd: errno %d", errno);
	close(fd);
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	EXPECT(fd >= 0, "timerfd_create: errno %d", errno);
	close(fd);
	close(efd);
	/* Files, randomness, memory. */
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	EXPECT(fd >= 0 && read(fd, buf, sizeof(buf)) > 0, "read /proc/self/status: %d", errno);
	close(fd);
	EXPECT(getrandom(buf, 16, 0) == 16, "getrandom: errno %d", errno);
	{
		void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			       0);

		EXPECT(p != MAP_FAILED && munmap(p, 4096) == 0, "mmap: errno %d", errno);
	}
	EXPECT(usleep(1000) == 0, "nanosleep: errno %d", errno);
	EXPECT(prctl(PR_SET_NAME, "steer-test", 0, 0, 0) == 0, "prctl(PR_SET_NAME): %d", errno);
	/* bpf: a map created (this child has every capability). */
	memset(&attr, 0, sizeof(attr));
	attr.map_type = BPF_MAP_TYPE_ARRAY;
	attr.key_size = 4;
	attr.value_size = 8;
	attr.max_entries = 1;
	fd = (int)syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof(attr));
	EXPECT(fd >= 0, "bpf(BPF_MAP_CREATE): errno %d", errno);
	close(fd);
	return 0;
}

static void test_filter_allows_what_the_daemon_uses(void)
{
	int st = in_child(allows_daemon_calls);

	CHECK(st == 0, "child exit %d", st);
}

/* ---- Every thread ------------------------------------------------------------------ */

static int pipe_fds[2];
static pid_t early_tid;
static long early_result;
static int early_errno;

/* Started before the filter; asked afterwards to make a refused call. */
static void *early_thread(void *arg)
{
	char c;

	(void)arg;
	early_tid = (pid_t)syscall(SYS_gettid);
	if (read(pipe_fds[0], &c, 1) == 1) {
		errno = 0;
		early_result = syscall(SYS_personality, 0xffffffffUL);
		early_errno = errno;
	}
	return NULL;
}

static int covers_every_thread(void)
{
	char err[256] = "", v[32];
	pthread_t thr;

	EXPECT(pipe(pipe_fds) == 0, "pipe");
	EXPECT(pthread_create(&thr, NULL, early_thread, NULL) == 0, "pthread_create");
	while (!__atomic_load_n(&early_tid, __ATOMIC_ACQUIRE))
		usleep(1000);
	EXPECT(status_field(early_tid, "Seccomp", v, sizeof(v)) == 0 && strcmp(v, "0") == 0,
	       "before: Seccomp %s", v);
	EXPECT(steer_privs_sandbox(err, sizeof(err)) == 0, "sandbox: %s", err);
	EXPECT(status_field(early_tid, "Seccomp", v, sizeof(v)) == 0 && strcmp(v, "2") == 0,
	       "the thread started before: Seccomp %s", v);
	EXPECT(status_field(early_tid, "NoNewPrivs", v, sizeof(v)) == 0 && strcmp(v, "1") == 0,
	       "the thread started before: NoNewPrivs %s", v);
	EXPECT(write(pipe_fds[1], "x", 1) == 1, "write");
	EXPECT(pthread_join(thr, NULL) == 0, "join");
	EXPECT(early_result == -1 && early_errno == EPERM,
	       "the thread started before was not filtered: %ld errno %d", early_result,
	       early_errno);
	return 0;
}

static void test_filter_covers_threads_started_before(void)
{
	int st = in_child(covers_every_thread);

	CHECK(st == 0, "child exit %d", st);
}

/* ---- Capabilities -------------------------------------------------------------------- */

static int expect_caps(pid_t tid, unsigned long long want)
{
	EXPECT(hex_field(tid, "CapEff") == want, "CapEff %llx, want %llx", hex_field(tid, "CapEff"),
	       want);
	EXPECT(hex_field(tid, "CapPrm") == want, "CapPrm %llx", hex_field(tid, "CapPrm"));
	EXPECT(hex_field(tid, "CapBnd") == want, "CapBnd %llx", hex_field(tid, "CapBnd"));
	EXPECT(hex_field(tid, "CapInh") == 0, "CapInh %llx", hex_field(tid, "CapInh"));
	EXPECT(hex_field(tid, "CapAmb") == 0, "CapAmb %llx", hex_field(tid, "CapAmb"));
	return 0;
}

/* A thread's own capabilities, read while it runs. */
static void *report_caps(void *arg)
{
	*(unsigned long long *)arg = hex_field((pid_t)syscall(SYS_gettid), "CapEff");
	return NULL;
}

static int daemon_set(void)
{
	char err[256] = "", v[32];
	unsigned long long thread_caps = 0;
	pthread_t thr;
	int rc;

	unsetenv(STEER_PRIVS_NO_SANDBOX_ENV);
	rc = steer_privs_daemon(err, sizeof(err));
	EXPECT(rc == 0, "steer_privs_daemon: %d %s", rc, err);
	if (expect_caps(0, DAEMON_CAPS))
		return 1;
	EXPECT(status_field(0, "NoNewPrivs", v, sizeof(v)) == 0 && strcmp(v, "1") == 0,
	       "NoNewPrivs %s", v);
	EXPECT(status_field(0, "Seccomp", v, sizeof(v)) == 0 && strcmp(v, "2") == 0, "Seccomp %s",
	       v);
	/* A thread started afterwards inherits all of it. */
	EXPECT(pthread_create(&thr, NULL, report_caps, &thread_caps) == 0, "pthread_create");
	EXPECT(pthread_join(thr, NULL) == 0, "join");
	EXPECT(thread_caps == DAEMON_CAPS, "a later thread's CapEff %llx", thread_caps);
	return 0;
}

static void test_daemon_keeps_bpf_and_net_admin(void)
{
	int st = in_child(daemon_set);

	CHECK(st == 0, "child exit %d", st);
}

static int ctl_set(void)
{
	char err[256] = "", v[32];

	EXPECT(steer_privs_ctl(err, sizeof(err)) == 0, "steer_privs_ctl: %s", err);
	if (expect_caps(0, 1ULL << CAP_BPF))
		return 1;
	EXPECT(status_field(0, "NoNewPrivs", v, sizeof(v)) == 0 && strcmp(v, "1") == 0,
	       "NoNewPrivs %s", v);
	return 0;
}

static void test_ctl_keeps_bpf_only(void)
{
	int st = in_child(ctl_set);

	CHECK(st == 0, "child exit %d", st);
}

static void *sleeper(void *arg)
{
	char c;

	return read(*(int *)arg, &c, 1) == 1 ? NULL : arg;
}

/* With a second thread running, a drop could not reach it: refused. */
static int refuses_with_threads(void)
{
	char err[256] = "";
	pthread_t thr;
	int fds[2], rc;

	EXPECT(pipe(fds) == 0, "pipe");
	EXPECT(pthread_create(&thr, NULL, sleeper, &fds[0]) == 0, "pthread_create");
	rc = steer_privs_daemon(err, sizeof(err));
	EXPECT(write(fds[1], "x", 1) == 1, "write");
	pthread_join(thr, NULL);
	EXPECT(rc == -EBUSY && strstr(err, "2 threads running"), "rc %d: %s", rc, err);
	EXPECT(hex_field(0, "CapEff") != DAEMON_CAPS, "dropped anyway");
	return 0;
}

static void test_drop_refused_once_threads_run(void)
{
	int st = in_child(refuses_with_threads);

	CHECK(st == 0, "child exit %d", st);
}

static int escape_hatch(void)
{
	char err[256] = "", v[32];
	unsigned long long before = hex_field(0, "CapEff");

	setenv(STEER_PRIVS_NO_SANDBOX_ENV, "1", 1);
	EXPECT(steer_privs_daemon(err, sizeof(err)) == 1, "not skipped: %s", err);
	EXPECT(hex_field(0, "CapEff") == before, "capabilities changed");
	EXPECT(status_field(0, "Seccomp", v, sizeof(v)) == 0 && strcmp(v, "0") == 0, "Seccomp %s",
	       v);
	return 0;
}

static void test_no_sandbox_env_skips_both(void)
{
	int st = in_child(escape_hatch);

	CHECK(st == 0, "child exit %d", st);
}

/* Every name in the allowlist is a system call of this architecture (a
 * typo would silently allow nothing). Legacy calls absent on arm64 are
 * skipped there by privs.c itself. */
static void test_allowlist_names_resolve(void)
{
	size_t i, n = 0;

	for (i = 0; steer_privs_allowed[i]; i++, n++) {
#if defined(__x86_64__)
		CHECK(seccomp_syscall_resolve_name(steer_privs_allowed[i]) != __NR_SCMP_ERROR,
		      "unknown system call '%s'", steer_privs_allowed[i]);
#endif
	}
	printf("# %zu calls allowed without argument checks, plus clone (threads only), "
	       "socket, ioctl, prctl and prlimit64 with checked arguments\n",
	       n);
	CHECK(n > 50, "only %zu names", n);
}

/* Every call of the allowlist is allowed by the systemd unit's
 * SystemCallFilter too (it applies from the start, a superset). */
static void test_systemd_unit_allows_the_allowlist(void)
{
	const char *top = getenv("STEER_TOP");
	char path[4096], line[1024], *units = NULL, *p;
	size_t len = 0, i;
	FILE *f, *m;

	snprintf(path, sizeof(path), "%s/docs/deploy/smg-steerd.service", top ? top : ".");
	f = fopen(path, "r");
	CHECK(f, "%s: %s", path, strerror(errno));
	m = open_memstream(&units, &len);
	while (m && fgets(line, sizeof(line), f))
		if (strncmp(line, "SystemCallFilter=", 17) == 0) {
			line[strcspn(line, "\n")] = 0;
			fprintf(m, " %s ", line + 17);
		}
	fclose(f);
	if (m)
		fclose(m);
	CHECK(units && len > 0, "no SystemCallFilter= in %s", path);
	for (i = 0; steer_privs_allowed[i]; i++) {
		char word[64];

		snprintf(word, sizeof(word), " %s ", steer_privs_allowed[i]);
		p = strstr(units, word);
		if (!p) {
			free(units);
			CHECK(0, "%s is allowed by the daemon but not by %s",
			      steer_privs_allowed[i], path);
		}
	}
	free(units);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (testenv_init("privs") != 0)
		return tap_setup_failed();
	TAP_RUN(test_filter_refuses_unlisted_calls);
	TAP_RUN(test_filter_allows_what_the_daemon_uses);
	TAP_RUN(test_filter_covers_threads_started_before);
	TAP_RUN(test_daemon_keeps_bpf_and_net_admin);
	TAP_RUN(test_ctl_keeps_bpf_only);
	TAP_RUN(test_drop_refused_once_threads_run);
	TAP_RUN(test_no_sandbox_env_skips_both);
	TAP_RUN(test_allowlist_names_resolve);
	TAP_RUN(test_systemd_unit_allows_the_allowlist);
	return tap_done();
}
