/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * privs.h - least privilege once set up: capabilities reduced to what later
 * work needs (libcap), no_new_privs, and a seccomp allowlist of the system
 * calls the daemon makes (libseccomp).
 *
 * Capabilities belong to each thread, and a thread keeps those it was
 * started with: steer_privs_daemon() and steer_privs_ctl() refuse to run
 * while the process has more than one thread, so every thread started later
 * (gRPC's, libmicrohttpd's, the publish's swap thread, a reload's parser)
 * inherits the reduced set. The seccomp filter is installed with TSYNC all
 * the same.
 *
 * A system call outside the allowlist fails with EPERM, and the kernel logs
 * it (audit type 1326, in dmesg and the journal): a gap shows up in the logs
 * instead of killing a steering daemon.
 */
#ifndef STEER_PRIVS_H
#define STEER_PRIVS_H

#include <stdbool.h>
#include <stddef.h>

/* The escape hatch: SMG_STEERD_NO_SANDBOX=1 in the environment skips both
 * the capability drop and the filter (logged as a warning). */
#define STEER_PRIVS_NO_SANDBOX_ENV "SMG_STEERD_NO_SANDBOX"

/*
 * The daemon, after setup (programs loaded and attached, maps opened, the
 * metrics port bound), before it starts any thread: keeps CAP_BPF (a map is
 * created at every publish) and CAP_NET_ADMIN (cgroup attaches), sets
 * no_new_privs and installs the filter. Returns 0, 1 when the sandbox was
 * skipped on request, or a negative errno with err.
 */
int steer_privs_daemon(char *err, size_t errlen);

/*
 * No core dump and no ptrace attach by other users' processes: RLIMIT_CORE 0
 * (soft and hard) and PR_SET_DUMPABLE 0. The daemon holds bearer tokens and
 * the --peer-key, and libraries (libcurl, gRPC) keep copies of headers that
 * a core would write out. Called before the first secret is read. 0 or a
 * negative errno with err.
 */
int steer_privs_no_core_dumps(char *err, size_t errlen);

/* smg-steerctl, once the pinned maps are open: keeps CAP_BPF only and sets
 * no_new_privs (no filter: a short-lived tool). Returns 0 or a negative errno. */
int steer_privs_ctl(char *err, size_t errlen);

/* ---- The pieces, exposed for tests ----------------------------------------- */

/* Keep exactly these capabilities (effective and permitted; inheritable and
 * ambient are cleared; the bounding set loses every other when the process
 * holds CAP_SETPCAP). Only in a single-threaded process (else -EBUSY). */
int steer_privs_keep_caps(const int *caps, size_t n, char *err, size_t errlen);
/* no_new_privs and the daemon's filter, for every thread. */
int steer_privs_sandbox(char *err, size_t errlen);
/* The allowlist, NULL-terminated: names as libseccomp spells them. */
extern const char *const steer_privs_allowed[];
/* True when this build allows the extra calls of ASan/LSan (see privs.c). */
bool steer_privs_sanitizer_build(void);
/* Threads of this process (entries of /proc/self/task), or -errno. */
int steer_privs_thread_count(void);

#endif /* STEER_PRIVS_H */
