// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdppass.c - the empty XDP program (r0 = XDP_PASS; exit), attached to one
 * interface for as long as this process runs.
 *
 *   nsenter --net=/run/netns/NS xdppass --dev IFACE [--mode native|generic]
 *
 * Two uses in the ingress benchmark (tools/bench/ingress.py): a veth accepts
 * frames sent with XDP_TX by its peer only while it runs an XDP program
 * itself, and this one is the cheapest that qualifies; and its run time per
 * packet (bpf_stats) is the floor that the statistics and the XDP dispatch cost
 * by themselves, printed next to the steering program's. Prints
 * "READY <prog id>" once attached; SIGTERM or SIGINT detaches it (only if it is
 * still the program attached) and exits.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <getopt.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: xdppass --dev IFACE [--mode native|generic]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dev", required_argument, 0, 'd' },
		{ "mode", required_argument, 0, 'm' },
		{ 0, 0, 0, 0 },
	};
	const struct bpf_insn prog[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_xdp_attach_opts, aopts);
	struct bpf_prog_info info = { 0 };
	__u32 info_len = sizeof(info);
	const char *dev = NULL;
	__u32 flags = XDP_FLAGS_DRV_MODE;
	int c, fd, ifindex, err;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dev = optarg;
			break;
		case 'm':
			if (strcmp(optarg, "native") == 0)
				flags = XDP_FLAGS_DRV_MODE;
			else if (strcmp(optarg, "generic") == 0)
				flags = XDP_FLAGS_SKB_MODE;
			else
				usage();
			break;
		default:
			usage();
		}
	}
	if (!dev)
		usage();
	ifindex = (int)if_nametoindex(dev);
	if (!ifindex) {
		fprintf(stderr, "xdppass: no interface %s in this network namespace\n", dev);
		return 1;
	}
	fd = bpf_prog_load(BPF_PROG_TYPE_XDP, "bench_xdp_pass", "GPL", prog, 2, NULL);
	if (fd < 0) {
		fprintf(stderr, "xdppass: cannot load the program: %s\n", strerror(-fd));
		return 1;
	}
	/* XDP_FLAGS_UPDATE_IF_NOEXIST: never replace somebody else's program. */
	err = bpf_xdp_attach(ifindex, fd, flags | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);
	if (err) {
		fprintf(stderr, "xdppass: cannot attach to %s: %s\n", dev, strerror(-err));
		return 1;
	}
	if (bpf_obj_get_info_by_fd(fd, &info, &info_len) != 0) {
		fprintf(stderr, "xdppass: cannot read the program's id: %s\n", strerror(errno));
		bpf_xdp_detach(ifindex, flags, NULL);
		return 1;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	printf("READY %u\n", info.id);
	fflush(stdout);
	while (!stopping)
		pause();
	aopts.old_prog_fd = fd; /* detach only our own program */
	bpf_xdp_detach(ifindex, flags | XDP_FLAGS_REPLACE, &aopts);
	close(fd);
	return 0;
}
