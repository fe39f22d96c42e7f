/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * benchlib.h - small helpers shared by the benchmark programs: address
 * arithmetic, cgroup membership, the clock, the programs behind the data
 * plane's pinned links with the empty programs measured next to them, and
 * the bench's own BPF objects opened on the pinned maps.
 */
#ifndef STEER_BENCHLIB_H
#define STEER_BENCHLIB_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dataplane/dataplane.h"

/* The i-th address after first ("127.0.1.1:9000" + 2 = 127.0.1.3:9000). */
static inline struct steer_addr bench_addr_plus(const struct steer_addr *first, uint32_t i)
{
	struct steer_addr a = *first;

	a.ip6[3] = htonl(ntohl(first->ip6[3]) + i);
	return a;
}

/* Move the calling process into a cgroup (its connects then meet the
 * programs attached there). Returns 0 or -errno. */
static inline int bench_join_cgroup(const char *dir)
{
	char path[4096], pid[32];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (write(fd, pid, strlen(pid)) != (ssize_t)strlen(pid))
		rc = -errno;
	close(fd);
	return rc;
}

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* qsort order of uint32_t values, ascending. */
static inline int bench_cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The program behind the link pinned at PIN_DIR/LINK: a new program fd, or
 * -errno. info (may be NULL) gets the link's info; link_fd (may be NULL)
 * keeps the link open for the caller, else it is closed.
 */
static inline int bench_prog_of_link(const char *pin_dir, const char *link,
				     struct bpf_link_info *info, int *link_fd)
{
	struct bpf_link_info li;
	__u32 len = sizeof(li);
	char path[4096];
	int lfd, pfd;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, link);
	lfd = bpf_obj_get(path);
	if (lfd < 0)
		return -errno;
	memset(&li, 0, sizeof(li));
	if (bpf_obj_get_info_by_fd(lfd, &li, &len) != 0) {
		pfd = -errno;
		close(lfd);
		return pfd;
	}
	pfd = bpf_prog_get_fd_by_id(li.prog_id);
	if (pfd < 0)
		pfd = -errno;
	if (info)
		*info = li;
	if (link_fd && pfd >= 0)
		*link_fd = lfd;
	else
		close(lfd);
	return pfd;
}

/*
 * The measuring floor: a program of two instructions (r0 = 1; exit) of a
 * program and attach type. Its run time next to ours is what the dispatch
 * (and, with statistics on, the statistics) cost by themselves. A program fd
 * or -errno.
 */
static inline int bench_empty_prog(enum bpf_prog_type type, enum bpf_attach_type at)
{
	static const struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 1 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, po, .expected_attach_type = at);
	int fd = bpf_prog_load(type, "bench_empty", "GPL", insns, 2, &po);

	return fd < 0 ? -errno : fd;
}

/*
 * A BPF object of the bench's own (tools/bench/bpf/), opened on a data
 * plane's pinned maps: every map of the object that the shipped programs pin
 * is reused from pin_dir when loaded, not created. steer_tmpl, a template
 * for user space only (bpf/steer_maps.bpf.h), is not created at all. NULL
 * with errno set when the file cannot be opened.
 */
static inline struct bpf_object *bench_object_open(const char *path, const char *pin_dir)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = pin_dir);
	struct bpf_object *obj = bpf_object__open_file(path, &oo);
	struct bpf_map *tmpl;

	if (!obj)
		return NULL;
	tmpl = bpf_object__find_map_by_name(obj, "steer_tmpl");
	if (tmpl)
		bpf_map__set_autocreate(tmpl, false);
	return obj;
}

#endif
