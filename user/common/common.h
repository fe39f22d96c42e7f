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

/* ---- Errors, clocks, the host --------------------------------------------- */

/* Writes a one-line reason into err (may be NULL) and returns -|rc|. */
int steer_seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* CLOCK_MONOTONIC, ns. */
uint64_t steer_monotonic_ns(void);
/* The cgroup2 mount point from /proc/mounts, or -ENOENT. */
int steer_cgroup2_root(char *buf, size_t len);

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

/* ---- The rate limit of a log line that may recur often ------------------ */

/* Zero-initialised: the first line passes. */
struct steer_ratelimit {
	uint64_t next_ns; /* CLOCK_MONOTONIC ns: no line passes before it; 0: one passes */
	uint64_t held;	  /* lines held back since the last that passed */
};

/* True when a line may be logged at now_ns (ns, CLOCK_MONOTONIC); the next
 * passes period_ns later. *held (may be NULL) is then how many were held
 * back before this one. False: held back, and counted. */
bool steer_ratelimit_pass(struct steer_ratelimit *rl, uint64_t now_ns, uint64_t period_ns,
			  uint64_t *held);

#endif /* STEER_USER_COMMON_H */
