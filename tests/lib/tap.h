/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * tap.h - a tiny TAP producer for the C tests. tests/run.sh counts the
 * "ok" and "not ok" lines of every test program into one summary.
 *
 *   static void test_x(void) { CHECK(a == b, "a=%d b=%d", a, b); }
 *   int main(void) { TAP_RUN(test_x); return tap_done(); }
 *
 * A failed CHECK prints a diagnostic and returns from the test function.
 */
#ifndef STEER_TAP_H
#define STEER_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count, tap_failures, tap_current_failed;

static void tap_diag(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 4, 5), unused));

static void tap_diag(const char *file, int line, const char *expr, const char *fmt, ...)
{
	va_list ap;

	tap_current_failed = 1;
	printf("# %s:%d: check failed: %s\n# ", file, line, expr);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

#define CHECK(cond, ...)                                                  \
	do {                                                              \
		if (!(cond)) {                                            \
			tap_diag(__FILE__, __LINE__, #cond, __VA_ARGS__); \
			return;                                           \
		}                                                         \
	} while (0)

/* Like CHECK, for helpers that return int (0 ok, -1 failed). */
#define CHECK_RC(cond, ...)                                               \
	do {                                                              \
		if (!(cond)) {                                            \
			tap_diag(__FILE__, __LINE__, #cond, __VA_ARGS__); \
			return -1;                                        \
		}                                                         \
	} while (0)

#define TAP_RUN(fn)                                                                         \
	do {                                                                                \
		tap_current_failed = 0;                                                     \
		fn();                                                                       \
		tap_count++;                                                                \
		if (tap_current_failed)                                                     \
			tap_failures++;                                                     \
		printf("%sok %d - %s\n", tap_current_failed ? "not " : "", tap_count, #fn); \
		fflush(stdout);                                                             \
	} while (0)

/* A setup that failed is one failed test and the whole plan: the exit code of main. */
static inline int tap_setup_failed(void)
{
	printf("not ok 1 - setup\n1..1\n");
	return 1;
}

static inline int tap_done(void)
{
	printf("1..%d\n", tap_count);
	return tap_failures ? 1 : 0;
}

#endif
