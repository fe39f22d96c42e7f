// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fuzz_config.c - the config loader on any file: the input is written to
 * steer.yaml and loaded through the public API, as smg-steerd --config
 * does at start and on SIGHUP (steer_config_load). What it accepts must
 * come back whole and be freed without leaks (LeakSanitizer checks each
 * input).
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "fuzz_common.h"
#include "fuzz_paths.h"

static char scratch[64], path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv);

static void remove_scratch(void)
{
	unlink(path);
	rmdir(scratch);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	/* tmpfs when there is one: a file is written for every input. */
	snprintf(scratch, sizeof(scratch), "%s/smg-steer-fuzz-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(scratch)) {
		perror("mkdtemp");
		exit(1);
	}
	snprintf(path, sizeof(path), "%s/steer.yaml", scratch);
	atexit(remove_scratch);
	fuzz_quiet_stdout();
	return 0;
}

static void write_file(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	FUZZ_ASSERT(fd >= 0);
	FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size);
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *const argv[] = { "smg-steerd", "--config", path, "--check-config", NULL };
	struct steer_config cfg;
	enum steer_config_rc rc;
	char err[512];
	size_t i;

	if (fuzz_names_special_file(data, size))
		return 0;
	write_file(data, size);
	err[0] = 0;
	rc = steer_config_load(4, argv, &cfg, err, sizeof(err));
	FUZZ_ASSERT(rc == STEER_CONFIG_OK || rc == STEER_CONFIG_USAGE);
	FUZZ_ASSERT(memchr(err, 0, sizeof(err)) != NULL);
	if (rc != STEER_CONFIG_OK) {
		FUZZ_ASSERT(err[0] != 0);
		return 0;
	}
	for (i = 0; i < cfg.n_services; i++)
		FUZZ_ASSERT(cfg.services[i].n_backends <= STEER_MAX_BACKENDS);
	FUZZ_ASSERT(cfg.n_services <= STEER_MAX_SERVICES);
	steer_config_free(&cfg);
	return 0;
}
