/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * fuzz_paths.h - keeping the config and CLI targets away from files that
 * block or are not files: the loader opens the paths it is given (--config,
 * token files), and /dev/stdin, /proc/kmsg or a FIFO under /run would hang
 * a run, not find a bug. Inputs naming such places, or climbing with "..",
 * are skipped. Relative paths resolve from the working directory, the
 * checkout when run by `make fuzz`, which holds no such files.
 */
#ifndef STEER_FUZZ_PATHS_H
#define STEER_FUZZ_PATHS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline bool fuzz_names_special_file(const uint8_t *data, size_t size)
{
	static const char *const avoid[] = { "/dev", "/proc", "/run", "/sys", ".." };
	size_t i;

	for (i = 0; i < sizeof(avoid) / sizeof(avoid[0]); i++)
		if (memmem(data, size, avoid[i], strlen(avoid[i])))
			return true;
	return false;
}

/* --help and --version print to stdout: keep libFuzzer's log readable. */
static inline void fuzz_quiet_stdout(void)
{
	if (!freopen("/dev/null", "w", stdout))
		exit(1);
}

#endif /* STEER_FUZZ_PATHS_H */
