// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * fuzz_cli.c - the command-line parser on any argv: the input is split at
 * newlines into up to 64 arguments after "smg-steerd" and handed to
 * steer_config_load, as main() does.
 */
#include "config/config.h"
#include "fuzz_common.h"
#include "fuzz_paths.h"

#define MAX_ARGS 64

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fuzz_quiet_stdout();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *argv[MAX_ARGS + 2], *copy, *s, *nl;
	struct steer_config cfg;
	enum steer_config_rc rc;
	char err[512];
	int argc = 0;

	if (fuzz_names_special_file(data, size) || memchr(data, 0, size))
		return 0;
	copy = malloc(size + 1);
	FUZZ_ASSERT(copy != NULL);
	memcpy(copy, data, size);
	copy[size] = 0;
	argv[argc++] = "smg-steerd";
	for (s = copy; argc <= MAX_ARGS; s = nl + 1) {
		nl = strchr(s, '\n');
		argv[argc++] = s;
		if (!nl)
			break;
		*nl = 0;
	}
	argv[argc] = NULL;
	err[0] = 0;
	rc = steer_config_load(argc, argv, &cfg, err, sizeof(err));
	FUZZ_ASSERT(rc == STEER_CONFIG_OK || rc == STEER_CONFIG_EXIT || rc == STEER_CONFIG_USAGE);
	FUZZ_ASSERT(memchr(err, 0, sizeof(err)) != NULL);
	if (rc == STEER_CONFIG_USAGE)
		FUZZ_ASSERT(err[0] != 0);
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&cfg);
	free(copy);
	return 0;
}
