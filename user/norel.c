// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * norel.c - ABLATION ONLY (issue 10): loader and per-poll reclaim of the data
 * plane without the release hook. See norel.h; the daemon does not use it.
 */
#include "norel.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "dataplane.h"
#include "steer_common.h"

/* What steer_norel.bpf.c keeps per record, and the walk's control. */
struct norel_seen {
	uint64_t cookie;
	uint64_t pass;
};

struct norel_ctl {
	uint64_t pass, visited, matched;
};

static const char *const floor_progs[NOREL_FLOORS] = { "floor_reset", "floor_set_state",
						       "floor_tcp_done" };

struct steer_norel {
	struct bpf_object *obj;
	struct bpf_link *walk, *reset, *floors[NOREL_FLOORS];
	int walk_fd, reset_fd, floor_fd[NOREL_FLOORS];
	struct steer_sock *socks; /* steer_socks, mmapped */
	struct norel_seen *seen;  /* norel_seen, mmapped */
	struct steer_slot_array *slots;
	volatile struct norel_ctl *ctl; /* norel_ctl, mmapped */
	uint64_t *known;		/* the cookie each record held at the previous poll */
	uint64_t pass;
	size_t socks_len, seen_len, slots_len, ctl_len;
	int socks_fd, slots_fd;
};

static size_t page_up(size_t len)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (len + pg - 1) / pg * pg;
}

static void *pinned_mmap(const char *pin_dir, const char *name, size_t len, int *fd_out)
{
	char path[PATH_MAX];
	void *p;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, name);
	*fd_out = bpf_obj_get(path);
	if (*fd_out < 0)
		return NULL;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, *fd_out, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* The data plane's release hook stops running: its pinned link is detached
 * (the pin stays, and steer_dp_detach removes it as usual). */
static int detach_release(const char *pin_dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct bpf_link *l;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", pin_dir, STEER_LINK_RELEASE);
	l = bpf_link__open(path);
	if (!l)
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", path,
				    strerror(errno));
	rc = bpf_link__detach(l);
	bpf_link__destroy(l);
	return rc ? steer_seterr(err, errlen, errno, "cannot detach %s: %s", path, strerror(errno))
		  : 0;
}

static int load(struct steer_norel *n, const char *obj_path, const char *pin_dir, unsigned floors,
		char *err, size_t errlen)
{
	struct bpf_program *p;
	int i;

	n->obj = steer_dp_object_open(obj_path, pin_dir);
	if (!n->obj)
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", obj_path,
				    strerror(errno));
	bpf_object__for_each_program(p, n->obj)
	{
		const char *name = bpf_program__name(p);
		bool want = !strcmp(name, "norel_walk") || !strcmp(name, "norel_reset");

		for (i = 0; i < NOREL_FLOORS; i++)
			want |= (floors & (1u << i)) && !strcmp(name, floor_progs[i]);
		bpf_program__set_autoload(p, want);
	}
	if (bpf_object__load(n->obj) != 0)
		return steer_seterr(err, errlen, errno, "cannot load %s: %s", obj_path,
				    strerror(errno));
	return 0;
}

static int attach(struct steer_norel *n, unsigned floors, char *err, size_t errlen)
{
	struct bpf_program *walk = bpf_object__find_program_by_name(n->obj, "norel_walk");
	struct bpf_program *reset = bpf_object__find_program_by_name(n->obj, "norel_reset");
	int i;

	n->walk = bpf_program__attach_iter(walk, NULL);
	n->reset = bpf_program__attach(reset);
	if (!n->walk || !n->reset)
		return steer_seterr(err, errlen, errno, "cannot attach the walk or the reset: %s",
				    strerror(errno));
	n->walk_fd = bpf_program__fd(walk);
	n->reset_fd = bpf_program__fd(reset);
	for (i = 0; i < NOREL_FLOORS; i++) {
		struct bpf_program *f;

		if (!(floors & (1u << i)))
			continue;
		f = bpf_object__find_program_by_name(n->obj, floor_progs[i]);
		n->floors[i] = bpf_program__attach(f);
		if (!n->floors[i])
			return steer_seterr(err, errlen, errno, "cannot attach %s: %s",
					    floor_progs[i], strerror(errno));
		n->floor_fd[i] = bpf_program__fd(f);
	}
	return 0;
}

static int map_views(struct steer_norel *n, const char *pin_dir, char *err, size_t errlen)
{
	struct bpf_map *seen = bpf_object__find_map_by_name(n->obj, "norel_seen");
	struct bpf_map *ctl = bpf_object__find_map_by_name(n->obj, "norel_ctl");
	void *p;

	n->socks_len = page_up(sizeof(struct steer_sock) * STEER_SOCK_RECORDS);
	n->slots_len = page_up(sizeof(struct steer_slot_array));
	n->seen_len = page_up(sizeof(struct norel_seen) * STEER_SOCK_RECORDS);
	n->ctl_len = page_up(sizeof(struct norel_ctl));
	n->socks = pinned_mmap(pin_dir, STEER_MAP_SOCKS, n->socks_len, &n->socks_fd);
	n->slots = pinned_mmap(pin_dir, STEER_MAP_SLOTS, n->slots_len, &n->slots_fd);
	p = seen ? mmap(NULL, n->seen_len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(seen), 0)
		 : MAP_FAILED;
	n->seen = p == MAP_FAILED ? NULL : p;
	p = ctl ? mmap(NULL, n->ctl_len, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(ctl), 0)
		: MAP_FAILED;
	n->ctl = p == MAP_FAILED ? NULL : p;
	n->known = calloc(STEER_SOCK_RECORDS, sizeof(*n->known));
	if (!n->socks || !n->slots || !n->seen || !n->ctl || !n->known)
		return steer_seterr(err, errlen, errno ? errno : EINVAL,
				    "cannot map the records, the slots or the walk's state");
	return 0;
}

int steer_norel_open(const char *obj_path, const char *pin_dir, unsigned floors,
		     struct steer_norel **out, char *err, size_t errlen)
{
	struct steer_norel *n = calloc(1, sizeof(*n));
	int rc, i;

	*out = NULL;
	if (!n)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	n->walk_fd = n->reset_fd = n->socks_fd = n->slots_fd = -1;
	for (i = 0; i < NOREL_FLOORS; i++)
		n->floor_fd[i] = -1;
	rc = load(n, obj_path, pin_dir, floors, err, errlen);
	if (!rc)
		rc = map_views(n, pin_dir, err, errlen);
	if (!rc)
		rc = attach(n, floors, err, errlen);
	/* Only now, with the walk and the reset signal in place: no steered
	 * socket is left without a way to be settled. */
	if (!rc)
		rc = detach_release(pin_dir, err, errlen);
	if (rc) {
		steer_norel_close(n);
		return rc;
	}
	*out = n;
	return 0;
}

void steer_norel_close(struct steer_norel *n)
{
	int i;

	if (!n)
		return;
	bpf_link__destroy(n->walk);
	bpf_link__destroy(n->reset);
	for (i = 0; i < NOREL_FLOORS; i++)
		bpf_link__destroy(n->floors[i]);
	if (n->socks)
		munmap(n->socks, n->socks_len);
	if (n->slots)
		munmap(n->slots, n->slots_len);
	if (n->seen)
		munmap(n->seen, n->seen_len);
	if (n->ctl)
		munmap((void *)n->ctl, n->ctl_len);
	if (n->socks_fd >= 0)
		close(n->socks_fd);
	if (n->slots_fd >= 0)
		close(n->slots_fd);
	free(n->known);
	bpf_object__close(n->obj);
	free(n);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Run the walk to its end: one pass over every TCP socket of the namespace. */
static int walk(struct steer_norel *n, char *err, size_t errlen)
{
	char buf[64];
	int fd = bpf_iter_create(bpf_link__fd(n->walk));
	ssize_t r;

	if (fd < 0)
		return steer_seterr(err, errlen, errno, "cannot start the walk: %s",
				    strerror(errno));
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		;
	close(fd);
	return r < 0 ? steer_seterr(err, errlen, errno, "walk: %s", strerror(errno)) : 0;
}

/*
 * A record whose socket is gone: off its backend's live count, then free.
 * Known race, acceptable in an ablation: a socket that left the hash table
 * without being closed (its connect failed otherwise than by a reset) and
 * that is connected again during this scan may be settled twice, here and
 * by the connect program's take-over of its old record.
 */
static int reclaim(struct steer_norel *n, struct steer_sock *r, uint64_t cookie)
{
	uint16_t flags = __atomic_load_n(&r->flags, __ATOMIC_ACQUIRE);
	uint32_t slot = r->slot, gen = r->slot_gen;
	__u64 want = cookie;
	struct steer_slot *s;

	if (!__atomic_compare_exchange_n(&r->cookie, &want, 0, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return 0;
	s = &n->slots->s[slot & (STEER_SLOT_IDS - 1)];
	if ((flags & STEER_SOCK_LIVE) && __atomic_load_n(&s->gen, __ATOMIC_ACQUIRE) == gen)
		__atomic_fetch_add(&s->closed, 1, __ATOMIC_RELAXED);
	return 1;
}

int steer_norel_poll(struct steer_norel *n, struct steer_norel_pass *out, char *err, size_t errlen)
{
	uint64_t t0, t1, t2, freed = 0;
	uint32_t i;
	int rc;

	n->pass++;
	n->ctl->pass = n->pass;
	n->ctl->visited = n->ctl->matched = 0;
	t0 = now_ns();
	rc = walk(n, err, errlen);
	t1 = now_ns();
	if (rc)
		return rc;
	for (i = 0; i < STEER_SOCK_RECORDS; i++) {
		uint64_t c = __atomic_load_n(&n->socks[i].cookie, __ATOMIC_ACQUIRE);

		if (!c) {
			n->known[i] = 0;
		} else if (n->seen[i].pass == n->pass && n->seen[i].cookie == c) {
			n->known[i] = c; /* still open */
		} else if (n->known[i] == c) {
			freed += (uint64_t)reclaim(n, &n->socks[i], c);
			n->known[i] = 0;
		} else {
			n->known[i] = c; /* new since the last poll: judged at the next */
		}
	}
	t2 = now_ns();
	if (out) {
		out->visited = n->ctl->visited;
		out->matched = n->ctl->matched;
		out->reclaimed = freed;
		out->walk_ns = t1 - t0;
		out->scan_ns = t2 - t1;
	}
	return 0;
}

int steer_norel_lean_release(const char *obj_path, const char *pin_dir, struct bpf_object **obj,
			     char *err, size_t errlen)
{
	struct bpf_program *p, *lean = NULL;
	struct bpf_link *l;
	char path[PATH_MAX];
	int rc = 0;

	*obj = steer_dp_object_open(obj_path, pin_dir);
	if (!*obj)
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", obj_path,
				    strerror(errno));
	bpf_object__for_each_program(p, *obj)
	{
		bool want = !strcmp(bpf_program__name(p), "lean_release");

		bpf_program__set_autoload(p, want);
		if (want)
			lean = p;
	}
	if (!lean || bpf_object__load(*obj) != 0)
		return steer_seterr(err, errlen, errno, "cannot load lean_release from %s: %s",
				    obj_path, strerror(errno));
	snprintf(path, sizeof(path), "%s/%s", pin_dir, STEER_LINK_RELEASE);
	l = bpf_link__open(path);
	if (!l || bpf_link__update_program(l, lean) != 0)
		rc = steer_seterr(err, errlen, errno, "cannot swap lean_release into %s: %s", path,
				  strerror(errno));
	bpf_link__destroy(l);
	return rc;
}

int steer_norel_walk_fd(const struct steer_norel *n)
{
	return n->walk_fd;
}

int steer_norel_reset_fd(const struct steer_norel *n)
{
	return n->reset_fd;
}

int steer_norel_floor_fd(const struct steer_norel *n, enum steer_norel_floor f)
{
	return f < NOREL_FLOORS ? n->floor_fd[f] : -1;
}
