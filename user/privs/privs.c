// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * privs.c - capabilities (libcap), no_new_privs and the seccomp allowlist
 * (libseccomp) of smg-steerd and smg-steerctl. See privs.h.
 *
 * What the daemon still does once set up, and so what the filter allows:
 * bpf() (publish: a new table generation per publish, map updates, the pin
 * rename; shutdown: link detach), memory, threads (gRPC, libmicrohttpd, the
 * swap and reload threads), futexes, timers, signals, the sockets of gRPC,
 * libmicrohttpd, libcurl and c-ares (connect, poll, send/recv, ...), files
 * (the configuration on SIGHUP, the pins, /proc), getrandom. Not: exec,
 * fork, mount, ptrace, module loading, namespaces, keyrings, listen (the
 * metrics port is bound before the drop), perf_event_open (programs are
 * loaded and attached before it).
 */
#include "privs/privs.h"

#include <dirent.h>
#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/common.h"

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif

/* ASan and LSan make calls of their own: LSan's leak check at exit clones a
 * tracer process (clone without CLONE_THREAD) that ptrace()s every thread,
 * waits for them, and adjusts prctl(PR_SET_PTRACER/PR_SET_DUMPABLE);
 * symbolizing and stack walking use mincore and sched_getaffinity. Those are
 * allowed in sanitizer builds only, and the leak check then works as usual. */
#if defined(__SANITIZE_ADDRESS__)
#define STEER_SANITIZER_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(leak_sanitizer)
#define STEER_SANITIZER_BUILD 1
#endif
#endif
#ifndef STEER_SANITIZER_BUILD
#define STEER_SANITIZER_BUILD 0
#endif

/* Allowed without argument checks. */
const char *const steer_privs_allowed[] = {
	/* files: the configuration, /proc, pins (rename and unlink at publish,
	 * unlink and rmdir at detach) */
	"read",
	"write",
	"readv",
	"writev",
	"pread64",
	"pwrite64",
	"close",
	"open",
	"openat",
	"lseek",
	"fstat",
	"newfstatat",
	"stat",
	"lstat",
	"statx",
	"fcntl",
	"dup",
	"dup2",
	"dup3",
	"access",
	"faccessat",
	"faccessat2",
	"readlink",
	"readlinkat",
	"getdents",
	"getdents64",
	"unlink",
	"unlinkat",
	"rename",
	"renameat",
	"renameat2",
	"rmdir",
	"statfs",
	"fstatfs",
	"flock",
	"getcwd",
	"fsync",
	"fdatasync",
	/* memory */
	"brk",
	"mmap",
	"munmap",
	"mremap",
	"mprotect",
	"madvise",
	/* threads and synchronisation (clone is checked below) */
	"futex",
	"set_robust_list",
	"rseq",
	"set_tid_address",
	"sched_yield",
	"sched_getaffinity",
	"sched_getscheduler",
	"sched_getparam",
	"gettid",
	"getpid",
	"getppid",
	"tgkill",
	"exit",
	"exit_group",
	"restart_syscall",
	/* signals */
	"rt_sigaction",
	"rt_sigprocmask",
	"rt_sigreturn",
	"sigaltstack",
	/* time */
	"clock_gettime",
	"clock_getres",
	"gettimeofday",
	"time",
	"nanosleep",
	"clock_nanosleep",
	"timerfd_create",
	"timerfd_settime",
	"timerfd_gettime",
	/* sockets (socket() is checked below): gRPC, libmicrohttpd, libcurl, c-ares;
	 * bind because gRPC probes for IPv6 by binding [::1]:0 (no listen) */
	"socketpair",
	"bind",
	"connect",
	"accept",
	"accept4",
	"sendto",
	"recvfrom",
	"sendmsg",
	"recvmsg",
	"sendmmsg",
	"recvmmsg",
	"shutdown",
	"getsockopt",
	"setsockopt",
	"getsockname",
	"getpeername",
	/* readiness */
	"poll",
	"ppoll",
	"select",
	"pselect6",
	"epoll_create",
	"epoll_create1",
	"epoll_ctl",
	"epoll_wait",
	"epoll_pwait",
	"epoll_pwait2",
	"eventfd",
	"eventfd2",
	"pipe",
	"pipe2",
	/* the data plane */
	"bpf",
	/* identity and the machine, read only */
	"getrandom",
	"uname",
	"sysinfo",
	"getuid",
	"geteuid",
	"getgid",
	"getegid",
	"getresuid",
	"getresgid",
	"getgroups",
	"capget",
	"getrlimit",
	NULL,
};

/* Extra calls of sanitizer builds (see STEER_SANITIZER_BUILD). */
static const char *const sanitizer_allowed[] = {
	"ptrace", "wait4", "waitid", "kill", "mincore", "getrusage", NULL,
};

/* prctl options in use: thread names (gRPC, libmicrohttpd), libcap's and
 * our own reads, glibc's naming of anonymous mappings. */
static const int prctl_allowed[] = {
	PR_SET_NAME,	     PR_GET_NAME,    PR_GET_DUMPABLE, PR_CAPBSET_READ,
	PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP, PR_SET_VMA,
};

/* ioctl requests in use: non-blocking mode, bytes readable, isatty(). */
static const unsigned long ioctl_allowed[] = {
	FIONBIO, FIONREAD, FIOCLEX, FIONCLEX, TCGETS, TIOCGWINSZ,
};

static const int socket_families[] = { AF_INET, AF_INET6, AF_UNIX, AF_NETLINK };

bool steer_privs_sanitizer_build(void)
{
	return STEER_SANITIZER_BUILD;
}

int steer_privs_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- capabilities ----------------------------------------------------------------- */

static bool in_list(const int *caps, size_t n, int cap)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (caps[i] == cap)
			return true;
	return false;
}

/* CAP_SETPCAP is in the effective set: the bounding set may shrink. */
static bool have_setpcap(void)
{
	cap_flag_value_t v = CAP_CLEAR;
	cap_t c = cap_get_proc();

	if (c)
		cap_get_flag(c, CAP_SETPCAP, CAP_EFFECTIVE, &v);
	cap_free(c);
	return v == CAP_SET;
}

int steer_privs_keep_caps(const int *caps, size_t n, char *err, size_t errlen)
{
	cap_value_t keep[CAP_LAST_CAP + 1];
	int threads = steer_privs_thread_count(), cap, last = (int)cap_max_bits() - 1;
	cap_t c;
	size_t i;
	int rc = 0;

	if (threads != 1)
		return steer_seterr(err, errlen, threads < 0 ? threads : EBUSY,
				    "privileges: %d threads running; capabilities can only be "
				    "dropped for all of them before the first starts",
				    threads);
	if (n > CAP_LAST_CAP + 1)
		return steer_seterr(err, errlen, EINVAL, "privileges: too many capabilities");
	/* The bounding set first: dropping from it needs CAP_SETPCAP, which the
	 * capset below removes. A process started without CAP_SETPCAP (a
	 * container's capabilities.add, systemd's CapabilityBoundingSet) cannot
	 * shrink it and does not need to: the capset below still clears what is
	 * not kept from the permitted set, and no_new_privs, set by the callers
	 * next, keeps an exec from gaining any back. */
	for (cap = 0; cap <= last && have_setpcap(); cap++)
		if (!in_list(caps, n, cap) && cap_drop_bound((cap_value_t)cap) != 0 &&
		    errno != EINVAL)
			return steer_seterr(err, errlen, errno,
					    "privileges: cannot drop capability %d from the "
					    "bounding set: %s",
					    cap, strerror(errno));
	for (i = 0; i < n; i++)
		keep[i] = (cap_value_t)caps[i];
	c = cap_init(); /* all clear, inheritable included */
	if (!c)
		return steer_seterr(err, errlen, ENOMEM, "privileges: out of memory");
	if ((n && (cap_set_flag(c, CAP_EFFECTIVE, (int)n, keep, CAP_SET) != 0 ||
		   cap_set_flag(c, CAP_PERMITTED, (int)n, keep, CAP_SET) != 0)) ||
	    cap_set_proc(c) != 0)
		rc = steer_seterr(err, errlen, errno, "privileges: cannot set capabilities: %s",
				  strerror(errno));
	cap_free(c);
	/* Ambient capabilities would survive an exec; there is none left to
	 * raise, but clear them all the same (EINVAL: a kernel without them). */
	if (rc == 0 && cap_reset_ambient() != 0 && errno != EINVAL)
		rc = steer_seterr(err, errlen, errno, "privileges: cannot clear ambient: %s",
				  strerror(errno));
	return rc;
}

/* ---- seccomp ------------------------------------------------------------------------ */

/* Allow name (skipped when this architecture has no such call). */
static int allow(scmp_filter_ctx ctx, const char *name)
{
	int nr = seccomp_syscall_resolve_name(name);

	if (nr == __NR_SCMP_ERROR)
		return 0;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

/* Allow name when argument arg equals one of values. */
static int allow_values(scmp_filter_ctx ctx, const char *name, unsigned int arg,
			const scmp_datum_t *values, size_t n)
{
	int nr = seccomp_syscall_resolve_name(name), rc = 0;
	size_t i;

	if (nr == __NR_SCMP_ERROR)
		return 0;
	for (i = 0; i < n && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				      SCMP_CMP(arg, SCMP_CMP_EQ, values[i], 0));
	return rc;
}

static int add_checked_rules(scmp_filter_ctx ctx)
{
	scmp_datum_t v[16];
	size_t i;
	int rc;

	for (i = 0; i < sizeof(prctl_allowed) / sizeof(prctl_allowed[0]); i++)
		v[i] = (scmp_datum_t)prctl_allowed[i];
	rc = allow_values(ctx, "prctl", 0, v, i);
	for (i = 0; i < sizeof(ioctl_allowed) / sizeof(ioctl_allowed[0]); i++)
		v[i] = (scmp_datum_t)ioctl_allowed[i];
	if (rc == 0)
		rc = allow_values(ctx, "ioctl", 1, v, i);
	for (i = 0; i < sizeof(socket_families) / sizeof(socket_families[0]); i++)
		v[i] = (scmp_datum_t)socket_families[i];
	if (rc == 0)
		rc = allow_values(ctx, "socket", 0, v, i);
	/* Reading limits only: a NULL new limit. */
	v[0] = 0;
	if (rc == 0)
		rc = allow_values(ctx, "prlimit64", 2, v, 1);
	/* Threads only, never a new process (nor a namespace). clone3 is
	 * refused by the quiet filter (see clone3_filter). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (rc == 0)
		rc = allow(ctx, "clone3");
	return rc;
}

/*
 * glibc starts every thread with clone3 first, whose flags sit in memory a
 * filter cannot read; ENOSYS sends it to clone, whose flags are checked.
 * That refusal is expected at every thread start, so it comes from a filter
 * of its own without the audit log flag: the kernel applies the most
 * restrictive answer of all filters and logs it only if the filter that
 * gave it asks to.
 */
static int clone3_filter(void)
{
	int nr = seccomp_syscall_resolve_name("clone3"), rc;
	scmp_filter_ctx ctx;

	if (nr == __NR_SCMP_ERROR)
		return 0;
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

static int add_sanitizer_rules(scmp_filter_ctx ctx)
{
	size_t i;
	int rc = 0;

	for (i = 0; sanitizer_allowed[i] && rc == 0; i++)
		rc = allow(ctx, sanitizer_allowed[i]);
	/* LSan's tracer is a clone without CLONE_THREAD; prctl unrestricted. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 0);
	return rc;
}

int steer_privs_sandbox(char *err, size_t errlen)
{
	scmp_filter_ctx ctx;
	size_t i;
	int rc = 0;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return steer_seterr(err, errlen, errno, "privileges: cannot set no_new_privs: %s",
				    strerror(errno));
	/* EPERM, not a kill: a call missed here fails (and the caller logs
	 * what failed) while steering goes on. A trap to a SIGSYS handler could
	 * log it ourselves, but the kernel kills a thread that has SIGSYS
	 * blocked, as threads do while they start. */
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return steer_seterr(err, errlen, ENOMEM, "seccomp: cannot create a filter");
	for (i = 0; steer_privs_allowed[i] && rc == 0; i++)
		rc = allow(ctx, steer_privs_allowed[i]);
	if (rc == 0)
		rc = add_checked_rules(ctx);
	if (rc == 0 && STEER_SANITIZER_BUILD)
		rc = add_sanitizer_rules(ctx);
	/* Every thread, not only the caller (there should be none yet). */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	/* Each refused call goes to the kernel's audit log (dmesg, journalctl
	 * -k: "audit: type=1326 ... comm="smg-steerd" ... syscall=N"). */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_LOG, 1);
	if (rc == 0)
		rc = clone3_filter();
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc != 0)
		return steer_seterr(err, errlen, rc, "seccomp: cannot install the filter: %s",
				    strerror(-rc));
	return 0;
}

/* ---- the two programs ------------------------------------------------------------------ */

static bool sandbox_disabled(void)
{
	const char *v = getenv(STEER_PRIVS_NO_SANDBOX_ENV);

	return v && v[0] && strcmp(v, "0") != 0;
}

int steer_privs_no_core_dumps(char *err, size_t errlen)
{
	const struct rlimit none = { 0, 0 };

	if (setrlimit(RLIMIT_CORE, &none) != 0)
		return steer_seterr(err, errlen, errno, "privileges: cannot set RLIMIT_CORE 0: %s",
				    strerror(errno));
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		return steer_seterr(err, errlen, errno,
				    "privileges: cannot clear the dumpable flag: %s",
				    strerror(errno));
	return 0;
}

int steer_privs_daemon(char *err, size_t errlen)
{
	static const int keep[] = { CAP_BPF, CAP_NET_ADMIN };
	int rc;

	if (sandbox_disabled()) {
		log_warn("%s is set: keeping every capability, no seccomp filter",
			 STEER_PRIVS_NO_SANDBOX_ENV);
		return 1;
	}
	rc = steer_privs_keep_caps(keep, sizeof(keep) / sizeof(keep[0]), err, errlen);
	if (rc == 0)
		rc = steer_privs_sandbox(err, errlen);
	return rc;
}

int steer_privs_ctl(char *err, size_t errlen)
{
	static const int keep[] = { CAP_BPF };
	int rc = steer_privs_keep_caps(keep, 1, err, errlen);

	if (rc == 0 && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		rc = steer_seterr(err, errlen, errno, "privileges: cannot set no_new_privs: %s",
				  strerror(errno));
	return rc;
}
