// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decap.c - attach the backends' decapsulation (bpf/steer_decap.bpf.c) to an
 * interface's tc ingress, detach it, and report it.
 *
 * Attached through netlink (a tc filter), which holds the program without any
 * pin: backends in several network namespaces of one host share a bpffs, so
 * nothing is pinned unless asked for (--pin-dir). The filter is found again by
 * its fixed handle and priority.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "xdp/xdp.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/common.h"
#include "steer_decap.skel.h"

/* Our filter on ingress: "5e7e" reads as steer; the priority keeps it ahead
 * of filters an operator adds with the default priorities. */
#define DECAP_HANDLE 0x5e7e
#define DECAP_PRIO 1

static int ifindex_of(const char *ifname, char *err, size_t errlen)
{
	unsigned i = if_nametoindex(ifname);

	if (!i)
		return steer_seterr(err, errlen, ENODEV,
				    "no interface '%s' in this network "
				    "namespace",
				    ifname);
	return (int)i;
}

static int pin_into(const char *dir, struct steer_decap_bpf *skel, char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return steer_seterr(err, errlen, errno, "cannot create %s: %s", dir,
				    strerror(errno));
	snprintf(path, sizeof(path), "%s/%s", dir, STEER_DECAP_PROG);
	unlink(path); /* a re-attach replaces the earlier pins */
	if (bpf_program__pin(skel->progs.steer_decap, path) != 0)
		return steer_seterr(err, errlen, errno, "cannot pin %s: %s (is %s on a bpffs?)",
				    path, strerror(errno), dir);
	snprintf(path, sizeof(path), "%s/%s", dir, STEER_DECAP_CTR);
	unlink(path);
	if (bpf_map__pin(skel->maps.steer_dcp_ctr, path) != 0)
		return steer_seterr(err, errlen, errno, "cannot pin %s: %s", path, strerror(errno));
	return 0;
}

int steer_decap_attach(const char *ifname, const char *pin_dir, char *err, size_t errlen)
{
	struct steer_decap_bpf *skel;
	int ifindex = ifindex_of(ifname, err, errlen), rc;

	if (ifindex < 0)
		return ifindex;
	skel = steer_decap_bpf__open_and_load();
	if (!skel)
		return steer_seterr(err, errlen, errno, "cannot load the decap program: %s",
				    strerror(errno));
	{
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex, .attach_point = BPF_TC_INGRESS);
		LIBBPF_OPTS(bpf_tc_opts, to, .handle = DECAP_HANDLE, .priority = DECAP_PRIO,
			    .flags = BPF_TC_F_REPLACE,
			    .prog_fd = bpf_program__fd(skel->progs.steer_decap));

		rc = bpf_tc_hook_create(&hook);
		if (rc && rc != -EEXIST) {
			rc = steer_seterr(err, errlen, rc, "cannot add clsact to %s: %s", ifname,
					  strerror(-rc));
		} else {
			rc = bpf_tc_attach(&hook, &to);
			if (rc)
				rc = steer_seterr(err, errlen, rc,
						  "cannot attach the decap to %s ingress: %s",
						  ifname, strerror(-rc));
		}
	}
	if (rc == 0 && pin_dir)
		rc = pin_into(pin_dir, skel, err, errlen);
	steer_decap_bpf__destroy(skel); /* the tc filter holds the program */
	return rc;
}

int steer_decap_detach(const char *ifname, const char *pin_dir, char *err, size_t errlen)
{
	int ifindex = ifindex_of(ifname, err, errlen), rc;
	LIBBPF_OPTS(bpf_tc_hook, hook, .attach_point = BPF_TC_INGRESS);
	LIBBPF_OPTS(bpf_tc_opts, to, .handle = DECAP_HANDLE, .priority = DECAP_PRIO);

	if (ifindex < 0)
		return ifindex;
	hook.ifindex = ifindex;
	rc = bpf_tc_detach(&hook, &to);
	if (rc == -ENOENT || rc == -EINVAL)
		rc = steer_seterr(err, errlen, ENOENT, "no smg-steer decap on %s", ifname);
	else if (rc)
		rc = steer_seterr(err, errlen, rc, "cannot detach the decap from %s: %s", ifname,
				  strerror(-rc));
	if (pin_dir) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/%s", pin_dir, STEER_DECAP_PROG);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%s", pin_dir, STEER_DECAP_CTR);
		unlink(path);
		rmdir(pin_dir); /* only when empty */
	}
	return rc;
}

/* The counters of the decap program prog_id, summed over CPUs. */
static int decap_counters(__u32 prog_id, struct steer_decap_ctr *sum)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info), map_ids[4] = { 0 }, zero = 0, i;
	int fd = bpf_prog_get_fd_by_id(prog_id), ncpu = libbpf_num_possible_cpus(), rc = -ENOENT;

	memset(sum, 0, sizeof(*sum));
	if (fd < 0)
		return fd;
	info.nr_map_ids = 4;
	info.map_ids = (__u64)(unsigned long)map_ids;
	if (bpf_obj_get_info_by_fd(fd, &info, &len) != 0 || ncpu <= 0) {
		close(fd);
		return -errno;
	}
	close(fd);
	for (i = 0; i < info.nr_map_ids && i < 4 && rc; i++) {
		struct steer_decap_ctr *v = calloc((size_t)ncpu, sizeof(*v));
		int mfd = bpf_map_get_fd_by_id(map_ids[i]), c;

		if (v && mfd >= 0 && bpf_map_lookup_elem(mfd, &zero, v) == 0) {
			for (c = 0; c < ncpu; c++) {
				sum->ipip += v[c].ipip;
				sum->ip6ip6 += v[c].ip6ip6;
				sum->failed += v[c].failed;
			}
			rc = 0;
		}
		if (mfd >= 0)
			close(mfd);
		free(v);
	}
	return rc;
}

int steer_decap_status(FILE *out, char *err, size_t errlen)
{
	struct if_nameindex *ifs = if_nameindex(), *i;
	int n = 0;

	if (!ifs)
		return steer_seterr(err, errlen, errno, "cannot list interfaces: %s",
				    strerror(errno));
	for (i = ifs; i->if_index; i++) {
		LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = (int)i->if_index,
			    .attach_point = BPF_TC_INGRESS);
		LIBBPF_OPTS(bpf_tc_opts, to, .handle = DECAP_HANDLE, .priority = DECAP_PRIO);
		struct steer_decap_ctr c;

		if (bpf_tc_query(&hook, &to) != 0)
			continue;
		n++;
		if (decap_counters(to.prog_id, &c) != 0) {
			fprintf(out, "%s: decap attached (program id %u), counters unreadable\n",
				i->if_name, to.prog_id);
			continue;
		}
		fprintf(out,
			"%s: decap attached (program id %u): ipip %llu, ip6ip6 %llu, "
			"failed %llu\n",
			i->if_name, to.prog_id, (unsigned long long)c.ipip,
			(unsigned long long)c.ip6ip6, (unsigned long long)c.failed);
	}
	if_freenameindex(ifs);
	if (n == 0)
		fprintf(out, "no interface of this network namespace has the decap attached\n");
	return n;
}
