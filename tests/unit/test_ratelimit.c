// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_ratelimit.c - steer_ratelimit_pass (user/common/log.c), the rate limit
 * of log lines that something outside can repeat at will (a backend that
 * flaps): the first line passes, then one a period, each saying how many
 * were held back before it.
 */
#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "tap.h"

#define S 1000000000ULL

static void test_the_first_line_passes_then_one_a_period(void)
{
	struct steer_ratelimit rl = { 0 };
	uint64_t held = 99;

	CHECK(steer_ratelimit_pass(&rl, 5 * S, 10 * S, &held) && held == 0, "first: held %llu",
	      (unsigned long long)held);
	CHECK(!steer_ratelimit_pass(&rl, 5 * S, 10 * S, &held), "the same instant passed");
	CHECK(!steer_ratelimit_pass(&rl, 15 * S - 1, 10 * S, &held), "passed before the period");
	CHECK(steer_ratelimit_pass(&rl, 15 * S, 10 * S, &held) && held == 2,
	      "at the period: held %llu, want 2", (unsigned long long)held);
	CHECK(steer_ratelimit_pass(&rl, 40 * S, 10 * S, NULL), "a quiet while later");
	CHECK(!steer_ratelimit_pass(&rl, 41 * S, 10 * S, NULL), "the next within the period");
	CHECK(steer_ratelimit_pass(&rl, 50 * S, 10 * S, &held) && held == 1, "held %llu, want 1",
	      (unsigned long long)held);
}

/* A flood of 1000 lines a second for a minute: 6 pass at a 10 s period. */
static void test_a_flood_passes_once_a_period(void)
{
	struct steer_ratelimit rl = { 0 };
	uint64_t t, passed = 0, held_sum = 0, held;

	for (t = 0; t < 60 * S; t += S / 1000)
		if (steer_ratelimit_pass(&rl, S + t, 10 * S, &held)) {
			passed++;
			held_sum += held;
		}
	CHECK(passed == 6, "%llu passed", (unsigned long long)passed);
	CHECK(held_sum + passed + rl.held == 60000, "held %llu + passed %llu + pending %llu",
	      (unsigned long long)held_sum, (unsigned long long)passed,
	      (unsigned long long)rl.held);
}

int main(void)
{
	TAP_RUN(test_the_first_line_passes_then_one_a_period);
	TAP_RUN(test_a_flood_passes_once_a_period);
	return tap_done();
}
