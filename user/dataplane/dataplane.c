// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dataplane.c - open or adopt the pinned BPF state: load, attach, close, detach.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>

#include "steer.skel.h"

bool steer_dp_adopted(const struct steer_dp *dp)
{
	return dp->adopted;
}

const char *steer_dp_pin_dir(const struct steer_dp *dp)
{
	return dp->pin_dir;
}

const char *steer_dp_cgroup(const struct steer_dp *dp)
{
	return dp->cgroup;
}

const char *steer_dp_wire_cgroup(const struct steer_dp *dp)
{
	return dp->wire_cgroup;
}

void dp_pin_path(const struct steer_dp *dp, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dp->pin_dir, name);
}

/* Swap prog into a link a previous owner pinned, without a gap; the link is
 * destroyed (the pin stays) when that fails. */
int dp_link_swap(struct bpf_link *l, struct bpf_program *prog, const char *path, char *err,
		 size_t errlen)
{
	if (bpf_link__update_program(l, prog) == 0)
		return 0;
	bpf_link__destroy(l);
	return steer_seterr(err, errlen, errno, "cannot update pinned link %s: %s", path,
			    strerror(errno));
}

/* Attach prog to the cgroup cg_fd (the directory cgroup) and pin the link at path. */
int dp_link_attach_pinned(const char *cgroup, struct bpf_program *prog, int cg_fd, const char *path,
			  struct bpf_link **out, char *err, size_t errlen)
{
	struct bpf_link *l = bpf_program__attach_cgroup(prog, cg_fd);

	if (!l)
		return steer_seterr(err, errlen, errno, "cannot attach %s to cgroup %s: %s",
				    bpf_program__name(prog), cgroup, strerror(errno));
	if (bpf_link__pin(l, path) != 0) {
		int rc = steer_seterr(err, errlen, errno, "cannot pin %s: %s", path,
				      strerror(errno));

		bpf_link__destroy(l);
		return rc;
	}
	*out = l;
	return 0;
}

/* ---- open ---------------------------------------------------------------- */

static int ensure_bpffs(const char *pin_dir, char *err, size_t errlen)
{
	struct statfs sfs;

	if (statfs("/sys/fs/bpf", &sfs) == 0 && sfs.f_type == BPF_FS_MAGIC)
		return 0;
	if (strncmp(pin_dir, "/sys/fs/bpf/", 12) != 0)
		return 0; /* the caller chose another bpffs mount; checked below */
	if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0)
		return steer_seterr(
			err, errlen, errno,
			"bpffs is not mounted at /sys/fs/bpf and mounting it failed: %s",
			strerror(errno));
	return 0;
}

static int ensure_pin_dir(const char *dir, char *err, size_t errlen)
{
	char parent[PATH_MAX];
	struct statfs sfs;
	char *slash;

	snprintf(parent, sizeof(parent), "%s", dir);
	slash = strrchr(parent, '/');
	if (slash && slash != parent)
		*slash = 0;
	if (statfs(parent, &sfs) != 0 || sfs.f_type != BPF_FS_MAGIC)
		return steer_seterr(err, errlen, ENOTSUP,
				    "pin directory %s is not on a bpffs mount", dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return steer_seterr(err, errlen, errno, "cannot create pin directory %s: %s", dir,
				    strerror(errno));
	if (chmod(dir, 0700) != 0)
		return steer_seterr(err, errlen, errno, "cannot chmod %s: %s", dir,
				    strerror(errno));
	return 0;
}

static int take_lock(struct steer_dp *dp, char *err, size_t errlen)
{
	dp->lock_fd = open(dp->pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dp->lock_fd < 0)
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", dp->pin_dir,
				    strerror(errno));
	if (flock(dp->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return steer_seterr(
			err, errlen, EBUSY,
			"another smg-steerd already owns %s; stop it first, or use another "
			"--pin-path",
			dp->pin_dir);
	return 0;
}

static int map_mmap(int fd, size_t len, void **out, char *err, size_t errlen, const char *name)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return steer_seterr(err, errlen, errno, "cannot mmap %s: %s", name,
				    strerror(errno));
	*out = p;
	return 0;
}

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

/* Type ids of the generation map's key and value in the BTF of steer_slots'
 * object: the same in every process, owner or not. */
static int btf_prepare(struct steer_dp *dp, char *err, size_t errlen)
{
	struct bpf_map_info info = { 0 };
	__u32 len = sizeof(info);
	struct btf *btf;
	int id;

	if (bpf_obj_get_info_by_fd(dp->slots_fd, &info, &len) != 0 || !info.btf_id)
		return steer_seterr(err, errlen, ENOENT, "steer_slots carries no BTF");
	btf = btf__load_from_kernel_by_id(info.btf_id);
	if (!btf)
		return steer_seterr(err, errlen, ENOENT, "cannot load BTF id %u", info.btf_id);
	id = btf__find_by_name_kind(btf, "steer_addr", BTF_KIND_STRUCT);
	dp->btf_key_id = id > 0 ? (uint32_t)id : 0;
	id = btf__find_by_name_kind(btf, "steer_table", BTF_KIND_STRUCT);
	dp->btf_value_id = id > 0 ? (uint32_t)id : 0;
	btf__free(btf);
	dp->btf_fd = bpf_btf_get_fd_by_id(info.btf_id);
	if (dp->btf_fd < 0 || !dp->btf_key_id || !dp->btf_value_id) {
		/* Tables still work without BTF; bpftool then prints hex. */
		if (dp->btf_fd >= 0)
			close(dp->btf_fd);
		dp->btf_fd = -1;
	}
	return 0;
}

int dp_new_generation_map(struct steer_dp *dp)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = BPF_F_NO_PREALLOC);

	if (dp->btf_fd >= 0) {
		o.btf_fd = (__u32)dp->btf_fd;
		o.btf_key_type_id = dp->btf_key_id;
		o.btf_value_type_id = dp->btf_value_id;
	}
	return bpf_map_create(BPF_MAP_TYPE_HASH, STEER_MAP_TABLES, sizeof(struct steer_addr),
			      sizeof(struct steer_table), STEER_MAX_SERVICES, &o);
}

/*
 * fd of the generation currently in steer_gen, or -ENOENT. Opening a map by
 * id needs CAP_SYS_ADMIN, which the daemon and smg-steerctl drop once set up
 * (user/privs/privs.c). Without it, the pin steer_tables (every publish points it
 * at its new generation) is opened instead, and used only when it names the
 * map in steer_gen: another process's publish moves the pin a moment before
 * it swaps, so a mismatch is tried again, for at most ~50 ms.
 */
int dp_current_generation_fd(const struct steer_dp *dp)
{
	const struct timespec ms = { .tv_nsec = 1000000 };
	char path[PATH_MAX];
	__u32 zero = 0, id = 0;
	int fd, tries;

	for (tries = 0; tries < 50; tries++) {
		struct bpf_map_info info = { 0 };
		__u32 len = sizeof(info);

		if (bpf_map_lookup_elem(dp->gen_fd, &zero, &id) != 0 || !id)
			return -ENOENT;
		fd = bpf_map_get_fd_by_id(id);
		if (fd != -EPERM)
			return fd;
		dp_pin_path(dp, STEER_MAP_TABLES, path, sizeof(path));
		fd = bpf_obj_get(path);
		if (fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &len) == 0 && info.id == id)
			return fd;
		if (fd >= 0)
			close(fd);
		nanosleep(&ms, NULL);
	}
	return -ENOENT;
}

static int open_pinned(struct steer_dp *dp, const char *name, int *fd, char *err, size_t errlen)
{
	char path[PATH_MAX];

	dp_pin_path(dp, name, path, sizeof(path));
	*fd = bpf_obj_get(path);
	if (*fd < 0) {
		int e = errno;

		if (e == ENOENT)
			return steer_seterr(
				err, errlen, ENOENT,
				"nothing is pinned at %s (is smg-steerd running with this "
				"--pin-path?)",
				dp->pin_dir);
		if (e == EACCES || e == EPERM)
			return steer_seterr(err, errlen, e,
					    "permission denied opening %s: run as root", path);
		return steer_seterr(err, errlen, e, "cannot open %s: %s", path, strerror(e));
	}
	return 0;
}

int dp_cgroup_id(const char *path, uint64_t *id)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -errno;
	*id = (uint64_t)st.st_ino; /* on cgroup2, the inode number is the cgroup id */
	return 0;
}

static const char *const link_names[DP_LINKS] = {
	[DP_LINK_RELEASE] = STEER_LINK_RELEASE,	      [DP_LINK_SOCKOPS] = STEER_LINK_SOCKOPS,
	[DP_LINK_CONNECT4] = STEER_LINK_CONNECT4,     [DP_LINK_CONNECT6] = STEER_LINK_CONNECT6,
	[DP_LINK_PEER4] = STEER_LINK_PEER4,	      [DP_LINK_PEER6] = STEER_LINK_PEER6,
	[DP_LINK_SETSOCKOPT] = STEER_LINK_SETSOCKOPT,
};

static struct bpf_program *link_prog(struct steer_dp *dp, int i)
{
	struct bpf_program *p[DP_LINKS] = {
		[DP_LINK_RELEASE] = dp->skel->progs.steer_release,
		[DP_LINK_SOCKOPS] = dp->skel->progs.steer_sockops,
		[DP_LINK_CONNECT4] = dp->skel->progs.steer_connect4,
		[DP_LINK_CONNECT6] = dp->skel->progs.steer_connect6,
		[DP_LINK_PEER4] = dp->skel->progs.steer_getpeername4,
		[DP_LINK_PEER6] = dp->skel->progs.steer_getpeername6,
		[DP_LINK_SETSOCKOPT] = dp->skel->progs.steer_setsockopt,
	};
	return p[i];
}

/*
 * Attach each program to the cgroup, or, when a link is already pinned (a
 * previous daemon left it with --keep-pinned, or crashed), swap this build's
 * program into that link: connects keep being steered throughout.
 */
static int attach_or_adopt_links(struct steer_dp *dp, char *err, size_t errlen)
{
	uint64_t want_id = 0;
	int cg_fd, i, rc = 0;

	if (dp_cgroup_id(dp->cgroup, &want_id) != 0)
		return steer_seterr(err, errlen, errno, "cgroup %s: %s", dp->cgroup,
				    strerror(errno));
	cg_fd = open(dp->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0)
		return steer_seterr(err, errlen, errno, "cannot open cgroup %s: %s", dp->cgroup,
				    strerror(errno));
	for (i = 0; i < DP_LINKS && rc == 0; i++) {
		char path[PATH_MAX];
		struct bpf_link *l;

		dp_pin_path(dp, link_names[i], path, sizeof(path));
		l = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
		if (l) {
			struct bpf_link_info info = { 0 };
			__u32 len = sizeof(info);

			if (bpf_obj_get_info_by_fd(bpf_link__fd(l), &info, &len) == 0 &&
			    info.type == BPF_LINK_TYPE_CGROUP && info.cgroup.cgroup_id != want_id) {
				bpf_link__destroy(l);
				rc = steer_seterr(
					err, errlen, EEXIST,
					"%s is attached to another cgroup (id %llu), not %s; "
					"detach the old instance first",
					path, (unsigned long long)info.cgroup.cgroup_id,
					dp->cgroup);
				break;
			}
			rc = dp_link_swap(l, link_prog(dp, i), path, err, errlen);
			if (rc != 0)
				break;
			dp->links[i] = l;
			dp->adopted = true;
			continue;
		}
		rc = dp_link_attach_pinned(dp->cgroup, link_prog(dp, i), cg_fd, path, &dp->links[i],
					   err, errlen);
	}
	close(cg_fd);
	return rc;
}

/*
 * libbpf's messages: debug and info only with STEER_LIBBPF_DEBUG=1; warnings
 * always, but cut short, since a rejected program comes with a verifier log
 * of tens of thousands of lines.
 */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	static const size_t keep = 3000;
	bool debug = getenv("STEER_LIBBPF_DEBUG") != NULL;
	char buf[3200];
	int n;

	if (level != LIBBPF_WARN && !debug)
		return 0;
	if (debug)
		return vfprintf(stderr, fmt, ap);
	n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n > 0 && (size_t)n > keep) {
		buf[keep] = 0;
		return fprintf(stderr,
			       "libbpf: %s\n... (%d more bytes; STEER_LIBBPF_DEBUG=1 prints all)\n",
			       buf, n - (int)keep);
	}
	return fprintf(stderr, "%s", buf);
}

static int load_programs(struct steer_dp *dp, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = dp->pin_dir);
	int rc;

	dp->skel = steer_bpf__open_opts(&oo);
	if (!dp->skel)
		return steer_seterr(err, errlen, errno, "cannot open the BPF object: %s",
				    strerror(errno));
	bpf_map__set_autocreate(dp->skel->maps.steer_tmpl, false);
	rc = steer_pins_replace_misfits(dp->skel->obj, err, errlen);
	if (rc)
		return rc;
	rc = steer_bpf__load(dp->skel);
	if (rc == -EPERM || rc == -EACCES)
		return steer_seterr(
			err, errlen, rc,
			"cannot load the BPF programs (%s): needs CAP_BPF with CAP_PERFMON, "
			"or CAP_SYS_ADMIN",
			strerror(-rc));
	if (rc)
		return steer_seterr(err, errlen, rc,
				    "cannot load the BPF programs (%s); if %s holds maps this "
				    "smg-steerd does not know, detach that instance and remove it",
				    strerror(-rc), dp->pin_dir);
	return 0;
}

static int open_maps(struct steer_dp *dp, char *err, size_t errlen)
{
	struct {
		const char *name;
		int *fd;
	} m[] = {
		{ STEER_MAP_GEN, &dp->gen_fd },	      { STEER_MAP_SLOTS, &dp->slots_fd },
		{ STEER_MAP_SVCST, &dp->svcst_fd },   { STEER_MAP_TREE, &dp->tree_fd },
		{ STEER_MAP_SOCKS, &dp->socks_fd },   { STEER_MAP_SVCID, &dp->svcid_fd },
		{ STEER_MAP_BKSLOT, &dp->bkslot_fd }, { STEER_MAP_DRAIN, &dp->drain_fd },
		{ STEER_MAP_BKINFO, &dp->bkinfo_fd }, { STEER_MAP_PORTS, &dp->ports_fd },
		{ STEER_MAP_LAYOUT, &dp->layout_fd },
	};
	struct {
		const int *fd;
		size_t len;
		void **at;
		size_t *len_at;
		const char *name;
	} mm[] = {
		{ &dp->slots_fd, sizeof(struct steer_slot_array), (void **)&dp->slots,
		  &dp->slots_len, STEER_MAP_SLOTS },
		{ &dp->bkinfo_fd, sizeof(struct steer_bk_info) * STEER_SLOT_IDS,
		  (void **)&dp->bkinfo, &dp->bkinfo_len, STEER_MAP_BKINFO },
		{ &dp->ports_fd, sizeof(struct steer_ports), (void **)&dp->ports, &dp->ports_len,
		  STEER_MAP_PORTS },
		{ &dp->svcst_fd, sizeof(struct steer_svc_stats) * STEER_SVC_IDS,
		  (void **)&dp->svcst, &dp->svcst_len, STEER_MAP_SVCST },
		{ &dp->layout_fd, sizeof(struct steer_layout), (void **)&dp->layout,
		  &dp->layout_len, STEER_MAP_LAYOUT },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		rc = open_pinned(dp, m[i].name, m[i].fd, err, errlen);
		if (rc)
			return rc;
	}
	for (i = 0; i < sizeof(mm) / sizeof(mm[0]); i++) {
		*mm[i].len_at = page_round(mm[i].len);
		rc = map_mmap(*mm[i].fd, *mm[i].len_at, mm[i].at, err, errlen, mm[i].name);
		if (rc)
			return rc;
	}
	return dp_wire_open(dp, err, errlen);
}

/* A fresh install has no generation yet: start with an empty one, so that the
 * programs find the map and let every connect pass. Either way the pin
 * steer_tables names the current generation from here on: once privileges
 * are dropped it is the only way to it (dp_current_generation_fd). */
static int ensure_generation(struct steer_dp *dp, char *err, size_t errlen)
{
	__u32 zero = 0;
	int fd = dp_current_generation_fd(dp);

	if (fd >= 0) {
		dp_pin_generation(dp, fd);
		close(fd);
		return 0;
	}
	fd = dp_new_generation_map(dp);
	if (fd < 0)
		return steer_seterr(err, errlen, fd, "cannot create a table generation: %s",
				    strerror(-fd));
	if (bpf_map_update_elem(dp->gen_fd, &zero, &fd, BPF_ANY) != 0) {
		int e = errno;

		close(fd);
		return steer_seterr(err, errlen, e, "cannot install a table generation: %s",
				    strerror(e));
	}
	dp_pin_generation(dp, fd);
	close(fd);
	return 0;
}

static void dp_init_fds(struct steer_dp *dp)
{
	dp->lock_fd = dp->gen_fd = dp->slots_fd = dp->svcst_fd = -1;
	dp->svcid_fd = dp->bkslot_fd = dp->drain_fd = dp->btf_fd = dp->bkinfo_fd = -1;
	dp->ports_fd = dp->tree_fd = dp->socks_fd = dp->layout_fd = dp->wire_fd = -1;
	dp->swap.map_fd = -1;
}

static int dp_init_paths(struct steer_dp *dp, const struct steer_dp_opts *opts, char *err,
			 size_t errlen)
{
	const char *pin = opts->pin_dir ? opts->pin_dir : STEER_DEFAULT_PIN_DIR;

	if (strlen(pin) >= sizeof(dp->pin_dir))
		return steer_seterr(err, errlen, ENAMETOOLONG,
				    "pin path longer than %zu characters", sizeof(dp->pin_dir) - 1);
	snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s", pin);
	if (opts->cgroup)
		snprintf(dp->cgroup, sizeof(dp->cgroup), "%s", opts->cgroup);
	else if (steer_cgroup2_root(dp->cgroup, sizeof(dp->cgroup)) != 0)
		return steer_seterr(
			err, errlen, ENOENT,
			"no cgroup2 mount in /proc/mounts; mount cgroup2 or pass --cgroup");
	if (strlen(opts->wire_cgroup ? opts->wire_cgroup : "") >= sizeof(dp->wire_cgroup))
		return steer_seterr(err, errlen, ENAMETOOLONG, "wire cgroup path too long");
	snprintf(dp->wire_cgroup, sizeof(dp->wire_cgroup), "%s",
		 opts->wire_cgroup ? opts->wire_cgroup : dp->cgroup);
	return ensure_bpffs(dp->pin_dir, err, errlen);
}

/* The owner: lock, check the pinned layout, load, attach. */
static int open_owner(struct steer_dp *dp, char *err, size_t errlen)
{
	int rc = ensure_pin_dir(dp->pin_dir, err, errlen);

	if (rc == 0)
		rc = take_lock(dp, err, errlen);
	if (rc == 0)
		rc = dp_layout_check(dp, err, errlen);
	if (rc == 0)
		rc = load_programs(dp, err, errlen);
	if (rc == 0)
		rc = dp_wire_load(dp, err, errlen);
	if (rc == 0)
		rc = open_maps(dp, err, errlen);
	if (rc == 0)
		rc = btf_prepare(dp, err, errlen);
	if (rc == 0) {
		dp_layout_stamp(dp);
		rc = ensure_generation(dp, err, errlen);
	}
	if (rc == 0)
		rc = dp_registry_load(dp);
	if (rc == 0)
		rc = attach_or_adopt_links(dp, err, errlen);
	if (rc == 0)
		rc = dp_wire_attach(dp, err, errlen);
	if (rc == 0)
		dp_ports_sync(dp); /* in step with the registry it adopted */
	return rc;
}

/* A reader: every pinned map is of this build's shape (pins.c). */
static int check_shapes(struct steer_dp *dp, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = dp->pin_dir);
	struct steer_bpf *skel = steer_bpf__open_opts(&oo);
	int rc;

	if (!skel)
		return steer_seterr(err, errlen, errno, "cannot open the BPF object: %s",
				    strerror(errno));
	bpf_map__set_autocreate(skel->maps.steer_tmpl, false);
	rc = steer_pins_check_shapes(skel->obj, err, errlen);
	steer_bpf__destroy(skel);
	return rc ? rc : dp_wire_check_shapes(dp, err, errlen);
}

/* A reader: the pinned maps as they are, if this build knows their layout. */
static int open_reader(struct steer_dp *dp, char *err, size_t errlen)
{
	int rc = dp_layout_check(dp, err, errlen);

	if (rc == 0)
		rc = check_shapes(dp, err, errlen);
	if (rc == 0)
		rc = open_maps(dp, err, errlen);
	if (rc == 0)
		rc = btf_prepare(dp, err, errlen);
	if (rc == 0)
		rc = dp_registry_load(dp);
	return rc;
}

int steer_dp_open(const struct steer_dp_opts *opts, struct steer_dp **out, char *err, size_t errlen)
{
	struct steer_dp *dp;
	int rc;

	*out = NULL;
	if (geteuid() != 0)
		return steer_seterr(err, errlen, EPERM,
				    "smg-steer needs root (CAP_BPF, CAP_NET_ADMIN, CAP_SYS_ADMIN)");
	libbpf_set_print(libbpf_print);
	dp = calloc(1, sizeof(*dp));
	if (!dp)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	dp_init_fds(dp);
	dp->own = opts->own;
	dp->wire_off = opts->wire_off;
	rc = dp_init_paths(dp, opts, err, errlen);
	if (rc == 0)
		rc = dp->own ? open_owner(dp, err, errlen) : open_reader(dp, err, errlen);
	if (rc) {
		steer_dp_close(dp);
		return rc;
	}
	*out = dp;
	return 0;
}

void steer_dp_close(struct steer_dp *dp)
{
	int i;

	if (!dp)
		return;
	dp_swap_join(dp);
	dp_wire_close(dp);
	for (i = 0; i < DP_LINKS; i++)
		if (dp->links[i])
			bpf_link__destroy(dp->links[i]); /* pinned: stays attached */
	if (dp->slots)
		munmap(dp->slots, dp->slots_len);
	if (dp->svcst)
		munmap(dp->svcst, dp->svcst_len);
	if (dp->bkinfo)
		munmap(dp->bkinfo, dp->bkinfo_len);
	if (dp->ports)
		munmap(dp->ports, dp->ports_len);
	if (dp->layout)
		munmap(dp->layout, dp->layout_len);
	int fds[] = { dp->gen_fd,   dp->slots_fd,  dp->svcst_fd,  dp->tree_fd,
		      dp->socks_fd, dp->svcid_fd,  dp->bkslot_fd, dp->drain_fd,
		      dp->btf_fd,   dp->bkinfo_fd, dp->ports_fd,  dp->layout_fd };
	for (i = 0; i < (int)(sizeof(fds) / sizeof(fds[0])); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (dp->skel)
		steer_bpf__destroy(dp->skel);
	if (dp->lock_fd >= 0)
		close(dp->lock_fd); /* releases the flock */
	free(dp);
}

/* Detach the link pinned at path (a program in the kernel stops running) and
 * remove the pin. */
static int unpin_link(const char *path, struct bpf_link *held, char *err, size_t errlen)
{
	struct bpf_link *l = held;
	int rc = 0;

	if (!l && access(path, F_OK) == 0)
		l = bpf_link__open(path);
	if (l) {
		if (bpf_link__detach(l) != 0)
			rc = steer_seterr(err, errlen, errno, "cannot detach %s: %s", path,
					  strerror(errno));
		if (l != held)
			bpf_link__destroy(l);
	}
	if (unlink(path) != 0 && errno != ENOENT && rc == 0)
		rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path, strerror(errno));
	return rc;
}

int steer_dp_detach(struct steer_dp *dp, char *err, size_t errlen)
{
	/* Every map this build pins, and the generation a publish may have
	 * left pinned under its temporary name. */
	static const char *const maps[] = {
		STEER_MAP_GEN,	 STEER_MAP_TABLES, STEER_MAP_SLOTS,  STEER_MAP_SVCST,
		STEER_MAP_TREE,	 STEER_MAP_SOCKS,  STEER_MAP_SVCID,  STEER_MAP_BKSLOT,
		STEER_MAP_DRAIN, STEER_MAP_BKINFO, STEER_MAP_PORTS,  STEER_MAP_LAYOUT,
		STEER_MAP_AFFIN, STEER_MAP_AFFKEY, "steer_tbl_next",
	};
	char path[PATH_MAX];
	int i, rc = 0, r;

	dp_swap_join(dp);
	rc = dp_wire_detach(dp, err, errlen);
	/* Connect hooks first, release last: no socket is steered whose
	 * release would go unseen. */
	for (i = DP_LINKS - 1; i >= 0; i--) {
		dp_pin_path(dp, link_names[i], path, sizeof(path));
		r = unpin_link(path, dp->links[i], err, rc == 0 ? errlen : 0);
		rc = rc ? rc : r;
	}
	for (i = 0; i < (int)(sizeof(maps) / sizeof(maps[0])); i++) {
		dp_pin_path(dp, maps[i], path, sizeof(path));
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
					  strerror(errno));
	}
	if (rmdir(dp->pin_dir) != 0 && errno != ENOENT && rc == 0)
		rc = steer_seterr(err, errlen, errno, "cannot remove %s: %s", dp->pin_dir,
				  strerror(errno));
	return rc;
}
