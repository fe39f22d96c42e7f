/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * log.h - one-line, timestamped log records on stderr (journald and
 * kubectl logs take stderr as is).
 */
#ifndef STEER_LOG_H
#define STEER_LOG_H

#include "config.h"

void steer_log_set_level(enum steer_log_level level);
void steer_log(enum steer_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_error(...) steer_log(STEER_LOG_ERROR, __VA_ARGS__)
#define log_warn(...) steer_log(STEER_LOG_WARN, __VA_ARGS__)
#define log_info(...) steer_log(STEER_LOG_INFO, __VA_ARGS__)
#define log_debug(...) steer_log(STEER_LOG_DEBUG, __VA_ARGS__)

#endif
