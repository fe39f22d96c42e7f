// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decap.c - `smg-steerctl decap attach IFACE [--pin-dir DIR]`,
 * `decap detach IFACE [--pin-dir DIR]` and `decap status`: the backends' half
 * of XDP ingress (user/xdp/decap.c). Needs no smg-steerd and no pinned data plane.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "xdp/xdp.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

static int decap_usage(const char *prog, const char *why)
{
	fprintf(stderr,
		"%s: decap: %s\n"
		"Usage: %s decap attach IFACE [--pin-dir DIR]\n"
		"       %s decap detach IFACE [--pin-dir DIR]\n"
		"       %s decap status\n",
		prog, why, prog, prog, prog);
	return EXIT_USAGE;
}

int steer_decap_cli(int argc, char **argv, const char *prog)
{
	const char *verb = argc > 1 ? argv[1] : NULL, *ifname = NULL, *pin_dir = NULL;
	char err[512];
	int i, rc;

	if (!verb)
		return decap_usage(prog, "missing attach, detach or status");
	for (i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--pin-dir")) {
			if (i + 1 >= argc || argv[i + 1][0] != '/')
				return decap_usage(prog, "--pin-dir needs an absolute directory "
							 "on a bpffs");
			pin_dir = argv[++i];
		} else if (!strncmp(argv[i], "--pin-dir=", 10) && argv[i][10] == '/') {
			pin_dir = argv[i] + 10;
		} else if (!ifname && argv[i][0] != '-') {
			ifname = argv[i];
		} else {
			fprintf(stderr, "%s: decap: unexpected argument '%s'\n", prog, argv[i]);
			return EXIT_USAGE;
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "%s: decap needs root (CAP_BPF, CAP_NET_ADMIN)\n", prog);
		return EXIT_ERROR;
	}
	if (!strcmp(verb, "status")) {
		if (ifname || pin_dir)
			return decap_usage(prog, "status takes no argument");
		rc = steer_decap_status(stdout, err, sizeof(err));
	} else if (!strcmp(verb, "attach") || !strcmp(verb, "detach")) {
		if (!ifname)
			return decap_usage(prog, "missing the interface");
		rc = verb[0] == 'a' ? steer_decap_attach(ifname, pin_dir, err, sizeof(err))
				    : steer_decap_detach(ifname, pin_dir, err, sizeof(err));
		if (rc == 0)
			printf("decap %s %s\n", verb[0] == 'a' ? "attached to" : "detached from",
			       ifname);
	} else {
		return decap_usage(prog, "unknown verb (attach, detach or status)");
	}
	if (rc < 0) {
		fprintf(stderr, "%s: decap %s: %s\n", prog, verb, err);
		return EXIT_ERROR;
	}
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_ERROR;
}
