/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * common.h - what every module of smg-steer uses: transport addresses, the
 * error convention, the monotonic clock, the cgroup2 mount, the log and its
 * rate limit.
 *
 * The rate limit: a log line that something outside could repeat many times
 * a second (a flapping backend) passes at most once a period, and says how
 * many were held back since the last that passed.
 *
 * The error convention: a function that can fail returns 0 or a negative
 * errno and writes a one-line reason into err (which may be NULL);
 * steer_seterr does both.
 */
#ifndef STEER_USER_COMMON_H
#define STEER_USER_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "steer_common.h"

#define STEER_VERSION "0.1.0"

/* ---- Addresses ----------------------------------------------------------- */

/* "a.b.c.d:port" or "[v6]:port"; TCP. */
int steer_addr_parse(const char *s, struct steer_addr *out, char *err, size_t errlen);
/* Formats as parsed; buf of at least STEER_ADDR_STRLEN bytes. */
#define STEER_ADDR_STRLEN 56
const char *steer_addr_format(const struct steer_addr *a, char *buf, size_t len);
bool steer_addr_is_v4(const struct steer_addr *a);
bool steer_addr_equal(const struct steer_addr *a, const struct steer_addr *b);
/* What kind of address no connection can be steered to or from ("multicast
 * (224.0.0.0/4)", ...), or NULL for a usable one. */
const char *steer_addr_unusable(const struct steer_addr *a);
/* prefix and secret joined in one allocation of the exact size, or NULL.
 * Not asprintf: it shrinks a larger buffer with realloc, leaving a copy of
 * the secret in freed memory. The caller wipes the result before freeing. */
char *steer_secret_join(const char *prefix, const char *secret);

/* ---- Errors, clocks, the host --------------------------------------------- */

/* Writes a one-line reason into err (may be NULL) and returns -|rc|. */
int steer_seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* CLOCK_MONOTONIC, ns. */
uint64_t steer_monotonic_ns(void);
/* The cgroup2 mount point from /proc/mounts, or -ENOENT. */
int steer_cgroup2_root(char *buf, size_t len);
/* A duration for messages and status: the exact value in the largest unit
 * that divides it (2h, 10m, 500ms, 1500us, 7ns), "0" for none. */
const char *steer_duration_text(uint64_t ns, char *buf, size_t len);

/* ---- The log: one-line, timestamped records on stderr (journald and kubectl
 * logs take stderr as is) ---------------------------------------------------- */

enum steer_log_level {
	STEER_LOG_ERROR = 0,
	STEER_LOG_WARN = 1,
	STEER_LOG_INFO = 2,
	STEER_LOG_DEBUG = 3,
};

void steer_log_set_level(enum steer_log_level level);
void steer_log(enum steer_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) steer_log(STEER_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) steer_log(STEER_LOG_WARN, __VA_ARGS__)
#define log_info(...) steer_log(STEER_LOG_INFO, __VA_ARGS__)
#define log_debug(...) steer_log(STEER_LOG_DEBUG, __VA_ARGS__)

/*
 * A line that whoever can send this process a datagram could repeat at will
 * (a refused report, a forgery): at most `burst` of them per `every_ns`, so a
 * flood costs the log a few lines, and the first line let through after
 * some were held back says how many.
 *
 *   static struct steer_log_limit lim;
 *   uint64_t held;
 *
 *   if (steer_log_limit_pass(&lim, steer_monotonic_ns(), 10 * 1000000000ULL, 1, &held))
 *           log_warn("dropped a report from %s (%llu more since)", addr, held);
 *
 * Not locked: one thread owns each.
 */
struct steer_log_limit {
	uint64_t since_ns; /* when the current window began (0: none yet) */
	uint64_t logged;   /* lines let through in it */
	uint64_t held;	   /* lines held back since the last one let through */
};

/* Whether to log the line now (CLOCK_MONOTONIC now_ns). When true, *held
 * (may be NULL) is the number held back since the last one let through. */
bool steer_log_limit_pass(struct steer_log_limit *l, uint64_t now_ns, uint64_t every_ns,
			  uint64_t burst, uint64_t *held);

#endif /* STEER_USER_COMMON_H */
