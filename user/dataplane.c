// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * dataplane.c - open, adopt, publish, drain and inspect the pinned BPF state.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <mntent.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/magic.h>

#include "policy.h"
#include "steer.skel.h"

#define NO_SLOT UINT32_MAX
#define STEER_PIN_DIR_MAX 200	      /* leaves room for the object names in PATH_MAX */
#define HASH_CAP (2 * STEER_SLOT_IDS) /* power of two, load factor <= 1/2 */

struct steer_dp {
	char pin_dir[STEER_PIN_DIR_MAX];
	char cgroup[PATH_MAX];
	bool own;
	int lock_fd;
	struct steer_bpf *skel; /* owner only */
	struct bpf_link *links[5];
	bool adopted; /* the links were pinned already: a previous owner left them */

	int gen_fd, slots_fd, svcst_fd, sk_fd, svcid_fd, bkslot_fd, drain_fd, bkinfo_fd;
	struct steer_slot *slots;
	size_t slots_len;
	struct steer_bk_info *bkinfo;
	size_t bkinfo_len;
	struct steer_ports *ports;
	size_t ports_len;
	int ports_fd;
	struct steer_svc_stats *svcst;
	size_t svcst_len;

	/* BTF of struct steer_table, so that each generation dumps with names. */
	int btf_fd;
	uint32_t btf_key_id, btf_value_id;
	uint64_t generation;

	/* In-memory copy of the registries (steer_svcid, steer_bkslot). */
	bool svc_used[STEER_SVC_IDS];
	struct steer_addr svc_vip[STEER_SVC_IDS];
	bool slot_used[STEER_SLOT_IDS];
	struct steer_bk_key slot_key[STEER_SLOT_IDS];
	uint32_t slot_hash[HASH_CAP]; /* open addressing: slot number or NO_SLOT */

	/* The last generation swap, whose syscall may still be waiting out the
	 * RCU grace period in its own thread (see swap_generation). */
	struct gen_swap {
		pthread_t thread;
		bool running; /* thread started and not yet joined */
		int map_fd;   /* the new generation; closed once joined */
		int err;      /* errno of the update, 0 on success */
		int done;     /* set (atomically) by the thread when the syscall returned */
	} swap;
};

/* ---- small helpers ------------------------------------------------------- */

int steer_seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc < 0 ? rc : -rc;
}

uint64_t steer_monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

bool steer_addr_is_v4(const struct steer_addr *a)
{
	return a->ip6[0] == 0 && a->ip6[1] == 0 && a->ip6[2] == htonl(0x0000ffff);
}

bool steer_addr_equal(const struct steer_addr *a, const struct steer_addr *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}

int steer_addr_parse(const char *s, struct steer_addr *out, char *err, size_t errlen)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *port_s;
	size_t hlen;
	char *end;
	long port;

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return steer_seterr(err, errlen, EINVAL, "empty address, expected ADDR:PORT");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close || close[1] != ':')
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': an IPv6 address is written [ADDR]:PORT", s);
		hlen = (size_t)(close - s - 1);
		port_s = close + 2;
		if (hlen >= sizeof(host))
			return steer_seterr(err, errlen, EINVAL, "'%s': address too long", s);
		memcpy(host, s + 1, hlen);
		host[hlen] = 0;
		if (inet_pton(AF_INET6, host, out->ip6) != 1)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': '%s' is not an IPv6 address", s, host);
	} else {
		const char *colon = strrchr(s, ':');

		if (!colon || strchr(s, ':') != colon)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': expected IPV4:PORT or [IPV6]:PORT", s);
		hlen = (size_t)(colon - s);
		port_s = colon + 1;
		if (hlen >= sizeof(host))
			return steer_seterr(err, errlen, EINVAL, "'%s': address too long", s);
		memcpy(host, s, hlen);
		host[hlen] = 0;
		out->ip6[2] = htonl(0x0000ffff);
		if (inet_pton(AF_INET, host, &out->ip6[3]) != 1)
			return steer_seterr(err, errlen, EINVAL,
					    "'%s': '%s' is not an IPv4 address", s, host);
	}
	errno = 0;
	port = strtol(port_s, &end, 10);
	if (!*port_s || *end || errno || port < 1 || port > 65535)
		return steer_seterr(err, errlen, EINVAL, "'%s': port must be 1..65535", s);
	out->port = htons((uint16_t)port);
	out->proto = STEER_IPPROTO_TCP;
	return 0;
}

const char *steer_addr_format(const struct steer_addr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (steer_addr_is_v4(a)) {
		inet_ntop(AF_INET, &a->ip6[3], host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(a->port));
	} else {
		inet_ntop(AF_INET6, a->ip6, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(a->port));
	}
	return buf;
}

int steer_cgroup2_root(char *buf, size_t len)
{
	FILE *f = setmntent("/proc/mounts", "r");
	struct mntent *m;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while ((m = getmntent(f))) {
		if (strcmp(m->mnt_type, "cgroup2") == 0) {
			snprintf(buf, len, "%s", m->mnt_dir);
			rc = 0;
			break;
		}
	}
	endmntent(f);
	return rc;
}

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

static void pin_path(const struct steer_dp *dp, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dp->pin_dir, name);
}

/* ---- registry (in-memory copy of steer_svcid / steer_bkslot) ------------- */

static uint32_t bk_hash(const struct steer_bk_key *k)
{
	const unsigned char *p = (const unsigned char *)k;
	uint32_t h = 2166136261u; /* FNV-1a */
	size_t i;

	for (i = 0; i < sizeof(*k); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static void hash_rebuild(struct steer_dp *dp)
{
	uint32_t s;

	for (s = 0; s < HASH_CAP; s++)
		dp->slot_hash[s] = NO_SLOT;
	for (s = 0; s < STEER_SLOT_IDS; s++) {
		uint32_t h;

		if (!dp->slot_used[s])
			continue;
		h = bk_hash(&dp->slot_key[s]) & (HASH_CAP - 1);
		while (dp->slot_hash[h] != NO_SLOT)
			h = (h + 1) & (HASH_CAP - 1);
		dp->slot_hash[h] = s;
	}
}

static uint32_t slot_find(const struct steer_dp *dp, const struct steer_bk_key *k)
{
	uint32_t h = bk_hash(k) & (HASH_CAP - 1);

	while (dp->slot_hash[h] != NO_SLOT) {
		uint32_t s = dp->slot_hash[h];

		if (memcmp(&dp->slot_key[s], k, sizeof(*k)) == 0)
			return s;
		h = (h + 1) & (HASH_CAP - 1);
	}
	return NO_SLOT;
}

static int current_generation_fd(const struct steer_dp *dp);
struct plan;
static void ports_set(struct steer_dp *dp, const struct plan *p, bool add_plan);
static int swap_join(struct steer_dp *dp);

/* Continue the publish sequence of whoever published before. */
static void generation_load(struct steer_dp *dp)
{
	struct steer_table *t = malloc(sizeof(*t));
	int cur = current_generation_fd(dp);
	struct steer_addr k, next;
	void *prev;

	for (prev = NULL; t && cur >= 0 && bpf_map_get_next_key(cur, prev, &next) == 0; prev = &k) {
		k = next;
		if (bpf_map_lookup_elem(cur, &k, t) == 0 && t->generation > dp->generation)
			dp->generation = t->generation;
	}
	if (cur >= 0)
		close(cur);
	free(t);
}

/* Does the generation map gen hold a table for vip with service id id? */
static bool published_with_id(int gen, const struct steer_addr *vip, __u32 id)
{
	struct steer_table *t;
	bool yes;

	if (gen < 0 || !(t = malloc(sizeof(*t))))
		return false;
	yes = bpf_map_lookup_elem(gen, vip, t) == 0 && t->svc_id == id;
	free(t);
	return yes;
}

static int registry_load(struct steer_dp *dp, char *err, size_t errlen)
{
	struct steer_addr vip, next_vip;
	struct steer_bk_key k, next_k;
	void *prev;
	__u32 v;

	int cur = current_generation_fd(dp);

	memset(dp->svc_used, 0, sizeof(dp->svc_used));
	memset(dp->slot_used, 0, sizeof(dp->slot_used));
	for (prev = NULL; bpf_map_get_next_key(dp->svcid_fd, prev, &next_vip) == 0; prev = &vip) {
		vip = next_vip;
		if (bpf_map_lookup_elem(dp->svcid_fd, &vip, &v) != 0 || v >= STEER_SVC_IDS)
			continue;
		/* An id registered twice (left by an older version): keep the
		 * address whose table carries that id. */
		if (dp->svc_used[v] && !published_with_id(cur, &vip, v))
			continue;
		dp->svc_used[v] = true;
		dp->svc_vip[v] = vip;
	}
	if (cur >= 0)
		close(cur);
	for (prev = NULL; bpf_map_get_next_key(dp->bkslot_fd, prev, &next_k) == 0; prev = &k) {
		k = next_k;
		if (bpf_map_lookup_elem(dp->bkslot_fd, &k, &v) == 0 && v < STEER_SLOT_IDS) {
			dp->slot_used[v] = true;
			dp->slot_key[v] = k;
		}
	}
	hash_rebuild(dp);
	generation_load(dp);
	(void)err;
	(void)errlen;
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

static int new_generation_map(struct steer_dp *dp)
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
 * (user/privs.c). Without it, the pin steer_tables (every publish points it
 * at its new generation) is opened instead, and used only when it names the
 * map in steer_gen: another process's publish moves the pin a moment before
 * it swaps, so a mismatch is tried again, for at most ~50 ms.
 */
static int current_generation_fd(const struct steer_dp *dp)
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
		pin_path(dp, STEER_MAP_TABLES, path, sizeof(path));
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

	pin_path(dp, name, path, sizeof(path));
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

static int cgroup_id_of(const char *path, uint64_t *id)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -errno;
	*id = (uint64_t)st.st_ino; /* on cgroup2, the inode number is the cgroup id */
	return 0;
}

static const char *const link_names[5] = {
	STEER_LINK_CONNECT4, STEER_LINK_CONNECT6, STEER_LINK_PEER4,
	STEER_LINK_PEER6,    STEER_LINK_SOCKOPS,
};

static struct bpf_program *link_prog(struct steer_dp *dp, int i)
{
	struct bpf_program *p[5] = {
		dp->skel->progs.steer_connect4,	    dp->skel->progs.steer_connect6,
		dp->skel->progs.steer_getpeername4, dp->skel->progs.steer_getpeername6,
		dp->skel->progs.steer_sockops,
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

	if (cgroup_id_of(dp->cgroup, &want_id) != 0)
		return steer_seterr(err, errlen, errno, "cgroup %s: %s", dp->cgroup,
				    strerror(errno));
	cg_fd = open(dp->cgroup, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (cg_fd < 0)
		return steer_seterr(err, errlen, errno, "cannot open cgroup %s: %s", dp->cgroup,
				    strerror(errno));
	for (i = 0; i < 5 && rc == 0; i++) {
		char path[PATH_MAX];
		struct bpf_link *l;

		pin_path(dp, link_names[i], path, sizeof(path));
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
			if (bpf_link__update_program(l, link_prog(dp, i)) != 0) {
				rc = steer_seterr(err, errlen, errno,
						  "cannot update pinned link %s: %s", path,
						  strerror(errno));
				bpf_link__destroy(l);
				break;
			}
			dp->links[i] = l;
			dp->adopted = true;
			continue;
		}
		l = bpf_program__attach_cgroup(link_prog(dp, i), cg_fd);
		if (!l) {
			rc = steer_seterr(err, errlen, errno, "cannot attach %s to cgroup %s: %s",
					  bpf_program__name(link_prog(dp, i)), dp->cgroup,
					  strerror(errno));
			break;
		}
		if (bpf_link__pin(l, path) != 0) {
			rc = steer_seterr(err, errlen, errno, "cannot pin %s: %s", path,
					  strerror(errno));
			bpf_link__destroy(l);
			break;
		}
		dp->links[i] = l;
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
	rc = steer_bpf__load(dp->skel);
	if (rc == -EPERM || rc == -EACCES)
		return steer_seterr(
			err, errlen, rc,
			"cannot load the BPF programs (%s): needs CAP_BPF with CAP_PERFMON, "
			"or CAP_SYS_ADMIN",
			strerror(-rc));
	if (rc)
		return steer_seterr(
			err, errlen, rc,
			"cannot load the BPF programs (%s); if %s holds maps of an older "
			"layout, detach that instance and remove it",
			strerror(-rc), dp->pin_dir);
	return 0;
}

static int open_maps(struct steer_dp *dp, char *err, size_t errlen)
{
	struct {
		const char *name;
		int *fd;
	} m[] = {
		{ STEER_MAP_GEN, &dp->gen_fd },	    { STEER_MAP_SLOTS, &dp->slots_fd },
		{ STEER_MAP_SVCST, &dp->svcst_fd }, { STEER_MAP_SK, &dp->sk_fd },
		{ STEER_MAP_SVCID, &dp->svcid_fd }, { STEER_MAP_BKSLOT, &dp->bkslot_fd },
		{ STEER_MAP_DRAIN, &dp->drain_fd }, { STEER_MAP_BKINFO, &dp->bkinfo_fd },
		{ STEER_MAP_PORTS, &dp->ports_fd },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		rc = open_pinned(dp, m[i].name, m[i].fd, err, errlen);
		if (rc)
			return rc;
	}
	dp->slots_len = page_round(sizeof(struct steer_slot) * STEER_SLOT_IDS);
	dp->svcst_len = page_round(sizeof(struct steer_svc_stats) * STEER_SVC_IDS);
	rc = map_mmap(dp->slots_fd, dp->slots_len, (void **)&dp->slots, err, errlen,
		      STEER_MAP_SLOTS);
	if (rc)
		return rc;
	dp->bkinfo_len = page_round(sizeof(struct steer_bk_info) * STEER_SLOT_IDS);
	rc = map_mmap(dp->bkinfo_fd, dp->bkinfo_len, (void **)&dp->bkinfo, err, errlen,
		      STEER_MAP_BKINFO);
	if (rc)
		return rc;
	dp->ports_len = page_round(sizeof(struct steer_ports));
	rc = map_mmap(dp->ports_fd, dp->ports_len, (void **)&dp->ports, err, errlen,
		      STEER_MAP_PORTS);
	if (rc)
		return rc;
	return map_mmap(dp->svcst_fd, dp->svcst_len, (void **)&dp->svcst, err, errlen,
			STEER_MAP_SVCST);
}

static void pin_generation(struct steer_dp *dp, int fd);

/* A fresh install has no generation yet: start with an empty one, so that the
 * programs find the map and let every connect pass. Either way the pin
 * steer_tables names the current generation from here on: once privileges
 * are dropped it is the only way to it (current_generation_fd). */
static int ensure_generation(struct steer_dp *dp, char *err, size_t errlen)
{
	__u32 zero = 0;
	int fd = current_generation_fd(dp);

	if (fd >= 0) {
		pin_generation(dp, fd);
		close(fd);
		return 0;
	}
	fd = new_generation_map(dp);
	if (fd < 0)
		return steer_seterr(err, errlen, fd, "cannot create a table generation: %s",
				    strerror(-fd));
	if (bpf_map_update_elem(dp->gen_fd, &zero, &fd, BPF_ANY) != 0) {
		int e = errno;

		close(fd);
		return steer_seterr(err, errlen, e, "cannot install a table generation: %s",
				    strerror(e));
	}
	pin_generation(dp, fd);
	close(fd);
	return 0;
}

static void dp_init_fds(struct steer_dp *dp)
{
	dp->lock_fd = dp->gen_fd = dp->slots_fd = dp->svcst_fd = dp->sk_fd = -1;
	dp->svcid_fd = dp->bkslot_fd = dp->drain_fd = dp->btf_fd = dp->bkinfo_fd = -1;
	dp->ports_fd = -1;
	dp->swap.map_fd = -1;
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
	if (strlen(opts->pin_dir ? opts->pin_dir : STEER_DEFAULT_PIN_DIR) >= sizeof(dp->pin_dir)) {
		rc = steer_seterr(err, errlen, ENAMETOOLONG, "pin path longer than %zu characters",
				  sizeof(dp->pin_dir) - 1);
		goto fail;
	}
	snprintf(dp->pin_dir, sizeof(dp->pin_dir), "%s",
		 opts->pin_dir ? opts->pin_dir : STEER_DEFAULT_PIN_DIR);
	if (opts->cgroup) {
		snprintf(dp->cgroup, sizeof(dp->cgroup), "%s", opts->cgroup);
	} else if (steer_cgroup2_root(dp->cgroup, sizeof(dp->cgroup)) != 0) {
		rc = steer_seterr(
			err, errlen, ENOENT,
			"no cgroup2 mount in /proc/mounts; mount cgroup2 or pass --cgroup");
		goto fail;
	}
	rc = ensure_bpffs(dp->pin_dir, err, errlen);
	if (rc)
		goto fail;
	if (dp->own) {
		rc = ensure_pin_dir(dp->pin_dir, err, errlen);
		if (rc)
			goto fail;
		rc = take_lock(dp, err, errlen);
		if (rc)
			goto fail;
		rc = load_programs(dp, err, errlen);
		if (rc)
			goto fail;
	}
	rc = open_maps(dp, err, errlen);
	if (rc)
		goto fail;
	rc = btf_prepare(dp, err, errlen);
	if (rc)
		goto fail;
	if (dp->own) {
		rc = ensure_generation(dp, err, errlen);
		if (rc)
			goto fail;
		rc = attach_or_adopt_links(dp, err, errlen);
		if (rc)
			goto fail;
	}
	rc = registry_load(dp, err, errlen);
	if (rc)
		goto fail;
	if (dp->own)
		ports_set(dp, NULL, false); /* in step with the registry it adopted */
	*out = dp;
	return 0;
fail:
	steer_dp_close(dp);
	return rc;
}

void steer_dp_close(struct steer_dp *dp)
{
	int i;

	if (!dp)
		return;
	swap_join(dp);
	for (i = 0; i < 5; i++)
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
	int fds[] = { dp->gen_fd,    dp->slots_fd, dp->svcst_fd, dp->sk_fd,	dp->svcid_fd,
		      dp->bkslot_fd, dp->drain_fd, dp->btf_fd,	 dp->bkinfo_fd, dp->ports_fd };
	for (i = 0; i < (int)(sizeof(fds) / sizeof(fds[0])); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (dp->skel)
		steer_bpf__destroy(dp->skel);
	if (dp->lock_fd >= 0)
		close(dp->lock_fd); /* releases the flock */
	free(dp);
}

int steer_dp_detach(struct steer_dp *dp, char *err, size_t errlen)
{
	static const char *const maps[] = {
		STEER_MAP_GEN,	  STEER_MAP_TABLES, STEER_MAP_SLOTS,  STEER_MAP_SVCST,
		STEER_MAP_SK,	  STEER_MAP_SVCID,  STEER_MAP_BKSLOT, STEER_MAP_DRAIN,
		STEER_MAP_BKINFO, STEER_MAP_PORTS,
	};
	char path[PATH_MAX];
	int i, rc = 0;

	swap_join(dp);
	for (i = 0; i < 5; i++) {
		struct bpf_link *l = dp->links[i];

		pin_path(dp, link_names[i], path, sizeof(path));
		if (!l && access(path, F_OK) == 0)
			l = bpf_link__open(path);
		if (l) {
			if (bpf_link__detach(l) != 0 && rc == 0)
				rc = steer_seterr(err, errlen, errno, "cannot detach %s: %s", path,
						  strerror(errno));
			if (l != dp->links[i])
				bpf_link__destroy(l);
		}
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
					  strerror(errno));
	}
	for (i = 0; i < (int)(sizeof(maps) / sizeof(maps[0])); i++) {
		pin_path(dp, maps[i], path, sizeof(path));
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
					  strerror(errno));
	}
	if (rmdir(dp->pin_dir) != 0 && errno != ENOENT && rc == 0)
		rc = steer_seterr(err, errlen, errno, "cannot remove %s: %s", dp->pin_dir,
				  strerror(errno));
	return rc;
}

/* ---- counters and drain ---------------------------------------------------- */

int steer_dp_slot(const struct steer_dp *dp, const struct steer_addr *vip,
		  const struct steer_addr *backend, uint32_t *slot)
{
	struct steer_bk_key k = { .vip = *vip, .backend = *backend };
	uint32_t s = slot_find(dp, &k);

	if (s == NO_SLOT)
		return -ENOENT;
	*slot = s;
	return 0;
}

const struct steer_slot *steer_dp_slot_counters(const struct steer_dp *dp, uint32_t slot)
{
	return slot < STEER_SLOT_IDS ? &dp->slots[slot] : NULL;
}

struct steer_bk_info *steer_dp_bk_info(const struct steer_dp *dp, uint32_t slot)
{
	return slot < STEER_SLOT_IDS ? &dp->bkinfo[slot] : NULL;
}

uint64_t steer_dp_inflight_read(const struct steer_dp *dp, uint32_t slot)
{
	if (slot >= STEER_SLOT_IDS)
		return 0;
	return __atomic_load_n(&dp->slots[slot].inflight_tokens, __ATOMIC_ACQUIRE);
}

void steer_dp_inflight_sub(struct steer_dp *dp, uint32_t slot, uint64_t tokens)
{
	__u64 *ctr, cur, next;

	if (slot >= STEER_SLOT_IDS || !tokens)
		return;
	ctr = &dp->slots[slot].inflight_tokens;
	cur = __atomic_load_n(ctr, __ATOMIC_ACQUIRE);
	/* Compare-and-swap rather than fetch_sub: a concurrent kernel credit
	 * makes it retry (no credit is lost), and a caller that subtracts more
	 * than is there stops at zero instead of wrapping to a huge score. */
	do {
		next = cur > tokens ? cur - tokens : 0;
	} while (!__atomic_compare_exchange_n(ctr, &cur, next, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
}

uint64_t steer_dp_inflight_exchange(struct steer_dp *dp, uint32_t slot)
{
	if (slot >= STEER_SLOT_IDS)
		return 0;
	return __atomic_exchange_n(&dp->slots[slot].inflight_tokens, 0, __ATOMIC_ACQ_REL);
}

int64_t steer_dp_live(const struct steer_dp *dp, uint32_t slot)
{
	int64_t v;

	if (slot >= STEER_SLOT_IDS)
		return 0;
	v = __atomic_load_n(&dp->slots[slot].live, __ATOMIC_ACQUIRE);
	return v < 0 ? 0 : v; /* a close racing a slot reset can leave -1 */
}

bool steer_dp_is_drained(const struct steer_dp *dp, const struct steer_addr *backend)
{
	__u32 v;

	return bpf_map_lookup_elem(dp->drain_fd, backend, &v) == 0 && v;
}

size_t steer_dp_drained_list(const struct steer_dp *dp, struct steer_addr *out, size_t max)
{
	struct steer_addr k, next;
	size_t n = 0;
	void *prev;
	__u32 v;

	for (prev = NULL; n < max && bpf_map_get_next_key(dp->drain_fd, prev, &next) == 0;
	     prev = &k) {
		k = next;
		if (bpf_map_lookup_elem(dp->drain_fd, &k, &v) == 0 && v)
			out[n++] = k;
	}
	return n;
}

static void slot_apply_drain(struct steer_dp *dp, uint32_t s, bool drained)
{
	if (drained)
		__atomic_fetch_or(&dp->slots[s].flags, STEER_SLOT_DRAINED, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&dp->slots[s].flags, ~(__u32)STEER_SLOT_DRAINED,
				   __ATOMIC_RELEASE);
}

int steer_dp_set_drained(struct steer_dp *dp, const struct steer_addr *backend, bool drained,
			 char *err, size_t errlen)
{
	__u32 one = 1;
	uint32_t s;

	if (drained) {
		if (bpf_map_update_elem(dp->drain_fd, backend, &one, BPF_ANY) != 0)
			return steer_seterr(err, errlen, errno, "cannot record the drain: %s",
					    strerror(errno));
	} else if (bpf_map_delete_elem(dp->drain_fd, backend) != 0 && errno != ENOENT) {
		return steer_seterr(err, errlen, errno, "cannot clear the drain: %s",
				    strerror(errno));
	}
	/* Takes effect at once: the kernel skips drained slots. */
	for (s = 0; s < STEER_SLOT_IDS; s++)
		if (dp->slot_used[s] && steer_addr_equal(&dp->slot_key[s].backend, backend))
			slot_apply_drain(dp, s, drained);
	return 0;
}

/* ---- publishing ------------------------------------------------------------- */

/* A publish under construction: the registry as it will be, and the tables. */
struct plan {
	bool svc_used[STEER_SVC_IDS];
	struct steer_addr svc_vip[STEER_SVC_IDS];
	bool slot_used[STEER_SLOT_IDS];
	struct steer_bk_key slot_key[STEER_SLOT_IDS];
	bool slot_new[STEER_SLOT_IDS];
	bool svc_new[STEER_SVC_IDS];
	bool svc_keep[STEER_SVC_IDS];		   /* untouched by this publish (publish_one) */
	struct steer_table *tables[STEER_SVC_IDS]; /* new tables by svc id, or NULL */
};

struct sort_item {
	struct steer_entry e;
	size_t order;
};

static int sort_cmp(const void *a, const void *b)
{
	const struct sort_item *x = a, *y = b;

	if (x->e.base_wait_ns != y->e.base_wait_ns)
		return x->e.base_wait_ns < y->e.base_wait_ns ? -1 : 1;
	return x->order < y->order ? -1 : (x->order > y->order);
}

static int validate_service(const struct steer_dp_service *s, char *err, size_t errlen)
{
	char a[STEER_ADDR_STRLEN], b[STEER_ADDR_STRLEN];
	bool v4 = steer_addr_is_v4(&s->vip);
	size_t i, j;

	steer_addr_format(&s->vip, a, sizeof(a));
	if (s->vip.proto != STEER_IPPROTO_TCP || !s->vip.port)
		return steer_seterr(err, errlen, EINVAL,
				    "service %s: only TCP with a port is supported", a);
	if (s->n_configured > STEER_MAX_BACKENDS)
		return steer_seterr(err, errlen, E2BIG, "service %s: %zu backends, at most %d", a,
				    s->n_configured, STEER_MAX_BACKENDS);
	if (s->n_table > s->n_configured)
		return steer_seterr(err, errlen, EINVAL,
				    "service %s: %zu table entries but %zu configured backends", a,
				    s->n_table, s->n_configured);
	if (s->n_table == 0 && !s->allow_empty)
		return steer_seterr(err, errlen, EINVAL, "service %s: no backends to publish", a);
	for (i = 0; i < s->n_configured; i++) {
		const struct steer_addr *c = &s->configured[i];

		steer_addr_format(c, b, sizeof(b));
		if (steer_addr_is_v4(c) != v4)
			return steer_seterr(
				err, errlen, EINVAL,
				"service %s: backend %s is not of the service's address family", a,
				b);
		if (c->proto != STEER_IPPROTO_TCP || !c->port)
			return steer_seterr(err, errlen, EINVAL,
					    "service %s: backend %s needs a TCP port", a, b);
		for (j = 0; j < i; j++)
			if (steer_addr_equal(c, &s->configured[j]))
				return steer_seterr(err, errlen, EEXIST,
						    "service %s: duplicate backend %s", a, b);
	}
	for (i = 0; i < s->n_table; i++) {
		const struct steer_dp_cost *c = &s->table[i];
		bool configured = false;

		steer_addr_format(&c->addr, b, sizeof(b));
		if (!isfinite(c->base_wait_ns) || c->base_wait_ns < 0)
			return steer_seterr(
				err, errlen, EINVAL,
				"service %s: backend %s: base_wait_ns must be finite and >= 0", a,
				b);
		if (!isfinite(c->ns_per_token) || c->ns_per_token < 0)
			return steer_seterr(
				err, errlen, EINVAL,
				"service %s: backend %s: ns_per_token must be finite and >= 0", a,
				b);
		for (j = 0; j < i; j++)
			if (steer_addr_equal(&c->addr, &s->table[j].addr))
				return steer_seterr(
					err, errlen, EEXIST,
					"service %s: backend %s appears twice in the table", a, b);
		for (j = 0; j < s->n_configured && !configured; j++)
			configured = steer_addr_equal(&c->addr, &s->configured[j]);
		if (!configured)
			return steer_seterr(err, errlen, EINVAL,
					    "service %s: table backend %s is not configured", a, b);
	}
	return 0;
}

/* Registry and table for one service; allocates its id and slots in the plan. */
static int plan_service(struct steer_dp *dp, struct plan *p, const struct steer_dp_service *s,
			uint64_t now, char *err, size_t errlen)
{
	char a[STEER_ADDR_STRLEN];
	struct sort_item *items;
	struct steer_table *t;
	uint32_t cfg_slot[STEER_MAX_BACKENDS];
	uint32_t next_free = 0;
	int id = -1, i;
	size_t k;

	for (i = 0; i < STEER_SVC_IDS; i++)
		if (p->svc_used[i] && steer_addr_equal(&p->svc_vip[i], &s->vip))
			id = i;
	if (id < 0) {
		/* Like slots, an id freed by this plan is not reused before the swap:
		 * its old address stays registered until the commit. */
		for (i = 0; i < STEER_SVC_IDS && id < 0; i++)
			if (!p->svc_used[i] && !dp->svc_used[i])
				id = i;
		if (id < 0)
			return steer_seterr(err, errlen, E2BIG, "more than %d services",
					    STEER_MAX_SERVICES);
		p->svc_used[id] = true;
		p->svc_new[id] = true;
		p->svc_vip[id] = s->vip;
	}
	if (p->tables[id])
		return steer_seterr(err, errlen, EEXIST, "service %s listed twice",
				    steer_addr_format(&s->vip, a, sizeof(a)));
	p->svc_keep[id] = false;

	/* Slots: keep the ones of configured backends, free the others. */
	for (k = 0; k < STEER_SLOT_IDS; k++)
		if (p->slot_used[k] && steer_addr_equal(&p->slot_key[k].vip, &s->vip)) {
			bool still = false;
			size_t j;

			for (j = 0; j < s->n_configured && !still; j++)
				still = steer_addr_equal(&p->slot_key[k].backend,
							 &s->configured[j]);
			if (!still) {
				p->slot_used[k] = false;
				p->slot_new[k] = false;
			}
		}
	for (k = 0; k < s->n_configured; k++) {
		struct steer_bk_key key = { .vip = s->vip, .backend = s->configured[k] };
		uint32_t slot = slot_find(dp, &key);

		if (slot != NO_SLOT && p->slot_used[slot]) {
			cfg_slot[k] = slot;
			continue;
		}
		/* A slot freed by this plan is not reused before the swap completes:
		 * an old table still in use could point at it. */
		while (next_free < STEER_SLOT_IDS &&
		       (p->slot_used[next_free] || dp->slot_used[next_free]))
			next_free++;
		if (next_free >= STEER_SLOT_IDS)
			return steer_seterr(err, errlen, E2BIG,
					    "more than %d backends in all services",
					    STEER_MAX_SLOTS);
		p->slot_used[next_free] = true;
		p->slot_new[next_free] = true;
		p->slot_key[next_free] = key;
		cfg_slot[k] = next_free;
	}

	t = calloc(1, sizeof(*t));
	items = calloc(s->n_table ? s->n_table : 1, sizeof(*items));
	if (!t || !items) {
		free(t);
		free(items);
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	}
	for (k = 0; k < s->n_table; k++) {
		struct steer_entry *e = &items[k].e;
		size_t j = 0;

		while (j < s->n_configured &&
		       !steer_addr_equal(&s->configured[j], &s->table[k].addr))
			j++; /* found: validate_service checked that it is configured */

		e->base_wait_ns = steer_policy_u64_sat(s->table[k].base_wait_ns);
		e->ns_per_token = steer_policy_u64_sat(s->table[k].ns_per_token);
		memcpy(e->ip6, s->table[k].addr.ip6, sizeof(e->ip6));
		e->port = s->table[k].addr.port;
		e->slot = cfg_slot[j];
		items[k].order = k;
	}
	qsort(items, s->n_table, sizeof(*items), sort_cmp);
	for (k = 0; k < s->n_table; k++)
		t->e[k] = items[k].e;
	free(items);
	t->n = (__u32)s->n_table;
	t->svc_id = (__u32)id;
	t->credit_tokens = s->credit_tokens ? s->credit_tokens : STEER_DEFAULT_CREDIT_TOKENS;
	t->expires_ns = steer_policy_u64_sat((double)now + (double)s->ttl_ns);
	t->published_ns = now;
	t->flags = s->flags;
	t->generation = dp->generation + 1;
	p->tables[id] = t;
	return 0;
}

static void plan_free(struct plan *p)
{
	int i;

	for (i = 0; i < STEER_SVC_IDS; i++)
		free(p->tables[i]);
	free(p);
}

/* Zero a slot for its new owner. The generation goes first, so a close of a
 * socket of the previous owner no longer matches it. */
static void slot_reset(struct steer_dp *dp, uint32_t s, bool drained)
{
	struct steer_slot *c = &dp->slots[s];

	__atomic_fetch_add(&c->gen, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&c->inflight_tokens, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->steered, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->fallbacks, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->live, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->flags, drained ? STEER_SLOT_DRAINED : 0, __ATOMIC_RELEASE);
	memset(&dp->bkinfo[s], 0, sizeof(dp->bkinfo[s]));
}

/* Write the plan's registry additions to the kernel before the swap. */
static int registry_add(struct steer_dp *dp, const struct plan *p, char *err, size_t errlen)
{
	uint32_t i;

	for (i = 0; i < STEER_SVC_IDS; i++) {
		if (!p->svc_new[i])
			continue;
		if (bpf_map_update_elem(dp->svcid_fd, &p->svc_vip[i], &i, BPF_ANY) != 0)
			return steer_seterr(err, errlen, errno, "cannot register a service: %s",
					    strerror(errno));
		memset(&dp->svcst[i], 0, sizeof(dp->svcst[i]));
	}
	for (i = 0; i < STEER_SLOT_IDS; i++) {
		if (!p->slot_new[i])
			continue;
		if (bpf_map_update_elem(dp->bkslot_fd, &p->slot_key[i], &i, BPF_ANY) != 0)
			return steer_seterr(err, errlen, errno, "cannot register a backend: %s",
					    strerror(errno));
		slot_reset(dp, i, steer_dp_is_drained(dp, &p->slot_key[i].backend));
	}
	return 0;
}

/* After the swap: drop what the plan no longer has, and adopt the plan. */
static void registry_commit(struct steer_dp *dp, const struct plan *p)
{
	uint32_t i;

	for (i = 0; i < STEER_SVC_IDS; i++)
		if (dp->svc_used[i] && !p->svc_used[i])
			bpf_map_delete_elem(dp->svcid_fd, &dp->svc_vip[i]);
	for (i = 0; i < STEER_SLOT_IDS; i++)
		if (dp->slot_used[i] && !p->slot_used[i])
			bpf_map_delete_elem(dp->bkslot_fd, &dp->slot_key[i]);
	memcpy(dp->svc_used, p->svc_used, sizeof(dp->svc_used));
	memcpy(dp->svc_vip, p->svc_vip, sizeof(dp->svc_vip));
	memcpy(dp->slot_used, p->slot_used, sizeof(dp->slot_used));
	memcpy(dp->slot_key, p->slot_key, sizeof(dp->slot_key));
	hash_rebuild(dp);
}

static void registry_rollback(struct steer_dp *dp, const struct plan *p)
{
	uint32_t i;

	for (i = 0; i < STEER_SVC_IDS; i++)
		if (p->svc_new[i])
			bpf_map_delete_elem(dp->svcid_fd, &p->svc_vip[i]);
	for (i = 0; i < STEER_SLOT_IDS; i++)
		if (p->slot_new[i])
			bpf_map_delete_elem(dp->bkslot_fd, &p->slot_key[i]);
}

/* Make the pin steer_tables name the new generation (rename is atomic). */
static void pin_generation(struct steer_dp *dp, int fd)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16];

	pin_path(dp, STEER_MAP_TABLES, path, sizeof(path));
	/* bpffs reserves names with dots; the lock makes one owner the only writer. */
	pin_path(dp, "steer_tbl_next", tmp, sizeof(tmp));
	unlink(tmp);
	if (bpf_obj_pin(fd, tmp) == 0 && rename(tmp, path) != 0)
		unlink(tmp);
}

/* The swap itself, on its own thread: bpf(BPF_MAP_UPDATE_ELEM) on an
 * ARRAY_OF_MAPS exchanges the inner map at once, then blocks in
 * synchronize_rcu() until no program can still be reading the old one. */
static void *swap_thread(void *arg)
{
	struct steer_dp *dp = arg;
	struct gen_swap *sw = &dp->swap;
	__u32 zero = 0;

	sw->err = bpf_map_update_elem(dp->gen_fd, &zero, &sw->map_fd, BPF_ANY) ? errno : 0;
	__atomic_store_n(&sw->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Wait until the previous swap's grace period has ended. Needed before
 * anything that would reuse what the old generation referenced (slot and
 * service ids freed by that publish) and before closing. Returns the errno
 * of that swap's update, 0 on success. */
static int swap_join(struct steer_dp *dp)
{
	struct gen_swap *sw = &dp->swap;

	if (!sw->running)
		return 0;
	pthread_join(sw->thread, NULL);
	sw->running = false;
	close(sw->map_fd);
	sw->map_fd = -1;
	return sw->err;
}

static uint32_t map_id(int fd)
{
	struct bpf_map_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	return bpf_obj_get_info_by_fd(fd, &info, &len) == 0 ? info.id : 0;
}

/*
 * Swap generation map fd in (taking ownership of fd). Returns 0 once
 * connects see the new generation. The kernel's wait for a grace period
 * after the exchange (8-16 ms on a 2-vCPU VM, most of a publish) goes on in
 * a thread and is joined before the next publish or close; nothing a caller
 * does in between can be affected by a program still reading the old
 * generation, because ids it freed are not reused before that join.
 */
static int swap_in(struct steer_dp *dp, int fd)
{
	struct gen_swap *sw = &dp->swap;
	uint32_t want = map_id(fd), cur;
	__u32 zero = 0;

	*sw = (struct gen_swap){ .map_fd = fd };
	if (want == 0 || pthread_create(&sw->thread, NULL, swap_thread, dp) != 0) {
		swap_thread(dp); /* no thread: wait for the grace period here */
		close(fd);
		sw->map_fd = -1;
		return sw->err;
	}
	sw->running = true;
	for (;;) {
		/* From user space, an ARRAY_OF_MAPS element reads as the id of
		 * the inner map: equal to ours once the exchange happened. */
		if (bpf_map_lookup_elem(dp->gen_fd, &zero, &cur) == 0 && cur == want)
			return 0;
		if (__atomic_load_n(&sw->done, __ATOMIC_ACQUIRE))
			return swap_join(dp); /* failed, or exchanged and already waited */
		sched_yield();
	}
}

/* Build a generation map from the plan and swap it in. */
static int swap_generation(struct steer_dp *dp, const struct plan *p, char *err, size_t errlen)
{
	struct steer_table *old = NULL;
	int fd, cur, rc = 0;
	uint32_t i;

	fd = new_generation_map(dp);
	if (fd < 0)
		return steer_seterr(err, errlen, fd, "cannot create a table generation: %s",
				    strerror(-fd));
	cur = current_generation_fd(dp);
	for (i = 0; i < STEER_SVC_IDS && rc == 0; i++) {
		const struct steer_table *t = p->tables[i];

		if (!p->svc_used[i])
			continue;
		if (!t && p->svc_keep[i] && cur >= 0) {
			/* Untouched service: carry its table over as is. */
			if (!old)
				old = malloc(sizeof(*old));
			if (old && bpf_map_lookup_elem(cur, &p->svc_vip[i], old) == 0)
				t = old;
		}
		if (t && bpf_map_update_elem(fd, &p->svc_vip[i], t, BPF_NOEXIST) != 0)
			rc = steer_seterr(err, errlen, errno,
					  "cannot fill the table generation: %s", strerror(errno));
	}
	free(old);
	if (cur >= 0)
		close(cur);
	if (rc != 0) {
		close(fd);
		return rc;
	}
	pin_generation(dp, fd);
	rc = swap_in(dp, fd);
	if (rc != 0) {
		/* The pin must keep naming what connects see: the old generation. */
		cur = current_generation_fd(dp);
		if (cur >= 0) {
			pin_generation(dp, cur);
			close(cur);
		}
		return steer_seterr(err, errlen, rc, "cannot swap the table generation: %s",
				    strerror(rc));
	}
	return 0;
}

static void port_bit(struct steer_ports *ports, const struct steer_addr *a)
{
	uint16_t port = ntohs(a->port);

	ports->bits[port >> 6] |= 1ULL << (port & 63);
}

/*
 * Store the port filter: the ports of the registered services, plus those of
 * the plan when add_plan (before its swap). Each word is written with one
 * atomic store, so a connect reads a consistent bit.
 */
static void ports_set(struct steer_dp *dp, const struct plan *p, bool add_plan)
{
	struct steer_ports want = { 0 };
	size_t i;

	for (i = 0; i < STEER_SVC_IDS; i++) {
		if (dp->svc_used[i])
			port_bit(&want, &dp->svc_vip[i]);
		if (add_plan && p && p->svc_used[i])
			port_bit(&want, &p->svc_vip[i]);
	}
	for (i = 0; i < 1024; i++)
		__atomic_store_n(&dp->ports->bits[i], want.bits[i], __ATOMIC_RELEASE);
}

/*
 * Make every registered slot's drain flag agree with steer_drain. A drain set
 * by smg-steerctl while a publish registered a new slot for that backend
 * could otherwise miss it (or an undrain leave it drained).
 */
static void drain_flags_sync(struct steer_dp *dp)
{
	static struct steer_addr drained[STEER_MAX_DRAINED];
	size_t n = steer_dp_drained_list(dp, drained, STEER_MAX_DRAINED), i;
	uint32_t s;

	for (s = 0; s < STEER_SLOT_IDS; s++) {
		bool want = false;

		if (!dp->slot_used[s])
			continue;
		for (i = 0; i < n && !want; i++)
			want = steer_addr_equal(&drained[i], &dp->slot_key[s].backend);
		if (want != ((__atomic_load_n(&dp->slots[s].flags, __ATOMIC_ACQUIRE) &
			      STEER_SLOT_DRAINED) != 0))
			slot_apply_drain(dp, s, want);
	}
}

/* The limits hold for what the plan keeps; the id spaces are twice as large. */
static int plan_check_limits(const struct plan *p, char *err, size_t errlen)
{
	size_t i, services = 0, slots = 0;

	for (i = 0; i < STEER_SVC_IDS; i++)
		services += p->svc_used[i];
	for (i = 0; i < STEER_SLOT_IDS; i++)
		slots += p->slot_used[i];
	if (services > STEER_MAX_SERVICES)
		return steer_seterr(err, errlen, E2BIG, "%zu services, at most %d", services,
				    STEER_MAX_SERVICES);
	if (slots > STEER_MAX_SLOTS)
		return steer_seterr(err, errlen, E2BIG, "%zu backends in all services, at most %d",
				    slots, STEER_MAX_SLOTS);
	return 0;
}

static int publish_plan(struct steer_dp *dp, const struct steer_dp_service *svcs, size_t n,
			bool replace_all, char *err, size_t errlen)
{
	uint64_t now = steer_monotonic_ns();
	struct plan *p;
	size_t i;
	int rc = 0;

	if (n > STEER_MAX_SERVICES)
		return steer_seterr(err, errlen, E2BIG, "%zu services, at most %d", n,
				    STEER_MAX_SERVICES);
	for (i = 0; i < n; i++) {
		rc = validate_service(&svcs[i], err, errlen);
		if (rc)
			return rc;
	}
	/* Ids the last publish freed may be handed out below: no connect may
	 * still be reading the generation that used them. */
	swap_join(dp);
	p = calloc(1, sizeof(*p));
	if (!p)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	memcpy(p->svc_used, dp->svc_used, sizeof(p->svc_used));
	memcpy(p->svc_vip, dp->svc_vip, sizeof(p->svc_vip));
	memcpy(p->slot_used, dp->slot_used, sizeof(p->slot_used));
	memcpy(p->slot_key, dp->slot_key, sizeof(p->slot_key));
	for (i = 0; i < STEER_SVC_IDS; i++)
		p->svc_keep[i] = p->svc_used[i];
	if (replace_all) {
		/* Services not mentioned go away with their slots. */
		for (i = 0; i < STEER_SVC_IDS; i++) {
			size_t j;
			bool listed = false;

			if (!p->svc_used[i])
				continue;
			for (j = 0; j < n && !listed; j++)
				listed = steer_addr_equal(&p->svc_vip[i], &svcs[j].vip);
			if (listed)
				continue;
			p->svc_used[i] = false;
			p->svc_keep[i] = false;
			for (j = 0; j < STEER_SLOT_IDS; j++)
				if (p->slot_used[j] &&
				    steer_addr_equal(&p->slot_key[j].vip, &p->svc_vip[i]))
					p->slot_used[j] = false;
		}
	}
	for (i = 0; i < n && rc == 0; i++)
		rc = plan_service(dp, p, &svcs[i], now, err, errlen);
	if (rc == 0)
		rc = plan_check_limits(p, err, errlen);
	if (rc == 0)
		rc = registry_add(dp, p, err, errlen);
	if (rc == 0) {
		/* Ports of new services open before their tables appear... */
		ports_set(dp, p, true);
		rc = swap_generation(dp, p, err, errlen);
	}
	if (rc == 0) {
		registry_commit(dp, p);
		dp->generation++;
		drain_flags_sync(dp);
	} else {
		registry_rollback(dp, p);
	}
	/* ...and the ports of removed services close after theirs are gone. */
	ports_set(dp, NULL, false);
	plan_free(p);
	return rc;
}

int steer_dp_publish(struct steer_dp *dp, const struct steer_dp_service *svcs, size_t n, char *err,
		     size_t errlen)
{
	return publish_plan(dp, svcs, n, true, err, errlen);
}

int steer_dp_publish_one(struct steer_dp *dp, const struct steer_dp_service *svc, char *err,
			 size_t errlen)
{
	return publish_plan(dp, svc, 1, false, err, errlen);
}

void steer_dp_settle(struct steer_dp *dp)
{
	if (dp)
		swap_join(dp); /* a swap that failed was reported by its publish */
}

/* ---- inspection ------------------------------------------------------------- */

static void view_backend_fill(const struct steer_dp *dp, struct steer_view_backend *b,
			      uint32_t slot, const struct steer_addr *addr)
{
	b->addr = *addr;
	b->slot = slot;
	b->rank = -1;
	memcpy(&b->ctr, &dp->slots[slot], sizeof(b->ctr));
	if (b->ctr.live < 0)
		b->ctr.live = 0;
	b->drained = (b->ctr.flags & STEER_SLOT_DRAINED) != 0;
}

static int view_service(const struct steer_dp *dp, int cur, uint32_t id,
			struct steer_view_service *vs, struct steer_table *t)
{
	size_t nb = 0, k;
	uint32_t s;

	vs->vip = dp->svc_vip[id];
	vs->svc_id = id;
	memcpy(&vs->stats, &dp->svcst[id], sizeof(vs->stats));
	vs->published = cur >= 0 && bpf_map_lookup_elem(cur, &vs->vip, t) == 0;
	if (vs->published) {
		vs->expires_ns = t->expires_ns;
		vs->published_ns = t->published_ns;
		vs->generation = t->generation;
		vs->credit_tokens = t->credit_tokens;
		vs->table_flags = t->flags;
		vs->n_table = t->n;
	}
	for (s = 0; s < STEER_SLOT_IDS; s++)
		if (dp->slot_used[s] && steer_addr_equal(&dp->slot_key[s].vip, &vs->vip))
			nb++;
	vs->backends = calloc(nb ? nb : 1, sizeof(*vs->backends));
	if (!vs->backends)
		return -ENOMEM;
	/* Table order first, then the configured backends outside the table. */
	for (k = 0; vs->published && k < t->n && k < STEER_MAX_BACKENDS; k++) {
		struct steer_addr a = { .port = t->e[k].port, .proto = STEER_IPPROTO_TCP };
		struct steer_view_backend *b;

		memcpy(a.ip6, t->e[k].ip6, sizeof(a.ip6));
		if (t->e[k].slot >= STEER_SLOT_IDS || vs->n_backends >= nb)
			continue;
		b = &vs->backends[vs->n_backends++];
		view_backend_fill(dp, b, t->e[k].slot, &a);
		b->rank = (int)k;
		b->base_wait_ns = t->e[k].base_wait_ns;
		b->ns_per_token = t->e[k].ns_per_token;
	}
	for (s = 0; s < STEER_SLOT_IDS && vs->n_backends < nb; s++) {
		bool listed = false;

		if (!dp->slot_used[s] || !steer_addr_equal(&dp->slot_key[s].vip, &vs->vip))
			continue;
		for (k = 0; k < vs->n_backends && !listed; k++)
			listed = vs->backends[k].slot == s;
		if (!listed)
			view_backend_fill(dp, &vs->backends[vs->n_backends++], s,
					  &dp->slot_key[s].backend);
	}
	return 0;
}

int steer_dp_view(const struct steer_dp *dp, struct steer_view *out, char *err, size_t errlen)
{
	struct steer_table *t = malloc(sizeof(*t));
	int cur = current_generation_fd(dp);
	uint32_t id;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!t) {
		if (cur >= 0)
			close(cur);
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	}
	out->now_ns = steer_monotonic_ns();
	out->services = calloc(STEER_SVC_IDS, sizeof(*out->services));
	if (!out->services)
		rc = steer_seterr(err, errlen, ENOMEM, "out of memory");
	for (id = 0; rc == 0 && id < STEER_SVC_IDS; id++) {
		if (!dp->svc_used[id])
			continue;
		if (view_service(dp, cur, id, &out->services[out->n_services++], t) != 0)
			rc = steer_seterr(err, errlen, ENOMEM, "out of memory");
	}
	free(t);
	if (cur >= 0)
		close(cur);
	if (rc)
		steer_view_free(out);
	return rc;
}

int steer_dp_service_stats(const struct steer_dp *dp, const struct steer_addr *vip,
			   struct steer_svc_stats *out)
{
	int i;

	for (i = 0; i < STEER_SVC_IDS; i++)
		if (dp->svc_used[i] && steer_addr_equal(&dp->svc_vip[i], vip)) {
			memcpy(out, &dp->svcst[i], sizeof(*out));
			return 0;
		}
	return -ENOENT;
}

void steer_view_free(struct steer_view *v)
{
	size_t i;

	for (i = 0; v->services && i < v->n_services; i++)
		free(v->services[i].backends);
	free(v->services);
	memset(v, 0, sizeof(*v));
}
