// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
#include "common/common.h"

#include <stdarg.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum steer_log_level current = STEER_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void steer_log_set_level(enum steer_log_level level)
{
	current = level;
}

void steer_log(enum steer_log_level level, const char *fmt, ...)
{
	char stamp[32], msg[1024];
	struct timeval tv;
	struct tm tm;
	va_list ap;

	if (level > current)
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* One write per record, so that lines of concurrent threads do not mix. */
	fprintf(stderr, "%s.%03ldZ smg-steerd[%d] %s: %s\n", stamp, (long)(tv.tv_usec / 1000),
		(int)getpid(), level_names[level], msg);
}

bool steer_log_limit_pass(struct steer_log_limit *l, uint64_t now_ns, uint64_t every_ns,
			  uint64_t burst, uint64_t *held)
{
	if (!l->since_ns || now_ns - l->since_ns >= every_ns) {
		l->since_ns = now_ns ? now_ns : 1; /* 0 means no window */
		l->logged = 0;
	}
	if (l->logged >= burst) {
		l->held++;
		return false;
	}
	l->logged++;
	if (held)
		*held = l->held;
	l->held = 0;
	return true;
}
