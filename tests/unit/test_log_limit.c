// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_log_limit.c - the limit on lines that any sender can cause
 * (steer_log_limit_pass, user/common/log.c), on a clock the test sets: how
 * many lines a flood lets through, and what the next line says was held.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "tap.h"

#define S 1000000000ULL

/* The lines a flood of n, one every `step` ns from `start`, lets through. */
static uint64_t passed(struct steer_log_limit *l, uint64_t start, uint64_t step, uint64_t n,
		       uint64_t every, uint64_t burst)
{
	uint64_t i, k = 0;

	for (i = 0; i < n; i++)
		k += steer_log_limit_pass(l, start + i * step, every, burst, NULL);
	return k;
}

static void test_one_per_window(void)
{
	struct steer_log_limit l = { 0 };
	uint64_t held = 99;

	/* 4,000 lines in 5 s, one a window of 10 s: the first only. */
	CHECK(passed(&l, 7 * S, 5 * S / 4000, 4000, 10 * S, 1) == 1, "a flood let more through");
	CHECK(l.held == 3999, "held %llu", (unsigned long long)l.held);
	/* The window over, the next line goes and says how many were held. */
	CHECK(steer_log_limit_pass(&l, 17 * S, 10 * S, 1, &held) && held == 3999,
	      "held %llu after the window", (unsigned long long)held);
	CHECK(!steer_log_limit_pass(&l, 17 * S + 1, 10 * S, 1, &held), "two in a window");
	CHECK(steer_log_limit_pass(&l, 27 * S, 10 * S, 1, &held) && held == 1, "held %llu",
	      (unsigned long long)held);
}

static void test_burst(void)
{
	struct steer_log_limit l = { 0 };
	uint64_t held = 99;

	/* A burst of 64 a window: 64 of 100 lines in 1 s, the next window 64 more. */
	CHECK(passed(&l, S, S / 100, 100, 10 * S, 64) == 64, "not 64 of the first 100");
	CHECK(passed(&l, 11 * S, S / 100, 100, 10 * S, 64) == 64, "not 64 of the next 100");
	CHECK(steer_log_limit_pass(&l, 21 * S, 10 * S, 64, &held) && held == 36, "held %llu",
	      (unsigned long long)held);
}

static void test_clock_at_zero(void)
{
	struct steer_log_limit l = { 0 };

	/* A clock that reads 0 still opens a window (0 means none). */
	CHECK(steer_log_limit_pass(&l, 0, 10 * S, 1, NULL), "the first line held");
	CHECK(!steer_log_limit_pass(&l, 1, 10 * S, 1, NULL), "a second line in the window");
}

int main(void)
{
	TAP_RUN(test_one_per_window);
	TAP_RUN(test_burst);
	TAP_RUN(test_clock_at_zero);
	return tap_done();
}
