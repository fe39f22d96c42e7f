// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * pins.c - pinned maps of another shape than this build's, found
 * by an owner before it loads an object over the pin directory.
 *
 * libbpf reuses a pinned map only if its type, key and value sizes, entries
 * and flags are the object's; otherwise it refuses the whole load, and a
 * daemon restarted by systemd or a DaemonSet would fail the same way on every
 * start. A map's shape can change within one pin layout: steer_wire grew from
 * 80 to 96 bytes a slot when the busy-until estimate came (commit 30ff90a),
 * and to 120 with the step cadence.
 * Changes that must carry counters over bump STEER_LAYOUT_VERSION and have
 * their own take-over (layout.c); anything else that no longer fits
 * is replaced: its pin is removed, with a warning that names the map and both
 * shapes, and the load pins a new, empty one.
 *
 * A reader (smg-steerctl) reads those maps with buffers and mappings of this
 * build's sizes, so it refuses a map of another shape instead, naming it: a
 * larger value would overrun its buffers, a smaller one be misread.
 *
 * Programs still attached from the previous object keep the old map until
 * their links get this build's programs, moments later. What the old map held
 * starts from zero in the new one; the kernel programs allow for that (a
 * socket's unanswered bytes never settle more than its slot has pending,
 * steer_wire.bpf.h wire_settle), so nothing wraps or drifts.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/common.h"

struct map_shape {
	__u32 type, key_size, value_size, max_entries, flags;
	__u64 extra;
};

static void shape_of_object(const struct bpf_map *m, struct map_shape *s)
{
	s->type = (__u32)bpf_map__type(m);
	s->key_size = bpf_map__key_size(m);
	s->value_size = bpf_map__value_size(m);
	s->max_entries = bpf_map__max_entries(m);
	s->flags = bpf_map__map_flags(m);
	s->extra = bpf_map__map_extra(m);
}

int dp_map_info(int fd, struct bpf_map_info *info)
{
	__u32 len = sizeof(*info);

	memset(info, 0, sizeof(*info));
	return bpf_obj_get_info_by_fd(fd, info, &len) == 0 ? 0 : -errno;
}

/* The pinned map's shape: 0, -ENOENT when nothing is pinned there, or -errno. */
static int shape_of_pin(const char *path, struct map_shape *s)
{
	struct bpf_map_info info;
	int fd = bpf_obj_get(path), rc;

	if (fd < 0)
		return -errno;
	rc = dp_map_info(fd, &info);
	close(fd);
	if (rc)
		return rc;
	*s = (struct map_shape){ .type = info.type,
				 .key_size = info.key_size,
				 .value_size = info.value_size,
				 .max_entries = info.max_entries,
				 .flags = info.map_flags,
				 .extra = info.map_extra };
	return 0;
}

static bool shape_equal(const struct map_shape *a, const struct map_shape *b)
{
	return a->type == b->type && a->key_size == b->key_size && a->value_size == b->value_size &&
	       a->max_entries == b->max_entries && a->flags == b->flags && a->extra == b->extra;
}

static void shape_format(const struct map_shape *s, char *buf, size_t len)
{
	const char *type = libbpf_bpf_map_type_str((enum bpf_map_type)s->type);

	snprintf(buf, len, "%s, key %u B, value %u B, max_entries %u, flags %#x",
		 type ? type : "unknown type", s->key_size, s->value_size, s->max_entries,
		 s->flags);
}

/* The pin of the current generation beside the pinned steer_gen gen_path. */
static void tables_pin(const char *gen_path, char *path, size_t len)
{
	const char *slash = strrchr(gen_path, '/');
	int dir = slash ? (int)(slash - gen_path) : 0;

	snprintf(path, len, "%.*s%s%s", dir, gen_path, slash ? "/" : "", STEER_MAP_TABLES);
}

static void unpin_tables(const char *gen_path)
{
	char path[PATH_MAX];

	tables_pin(gen_path, path, sizeof(path));
	unlink(path);
}

/*
 * The generations (steer_gen) keep the shape they were created with for
 * their tables, which its own shape does not show: the verifier checks a
 * program against the pinned map's table size. The current generation's
 * pin (steer_tables, beside it) tells that size; true when it is this
 * build's (struct steer_table, as the object's template steer_tmpl has it),
 * or unknown. What was pinned with a smaller table would refuse the load.
 */
static bool tables_fit(struct bpf_object *obj, const char *gen_path, char *have, size_t len)
{
	const struct bpf_map *tmpl = bpf_object__find_map_by_name(obj, "steer_tmpl");
	char path[PATH_MAX];
	struct map_shape tables;

	if (!tmpl)
		return true;
	tables_pin(gen_path, path, sizeof(path));
	if (shape_of_pin(path, &tables) != 0 || tables.value_size == bpf_map__value_size(tmpl))
		return true;
	snprintf(have, len, "tables of %u bytes, this build's %u", tables.value_size,
		 bpf_map__value_size(tmpl));
	return false;
}

/*
 * Each pinned map of obj whose shape is not the object's: replace (the owner)
 * unpins it, with a warning; otherwise (a reader) it is an error naming it.
 */
static int visit_misfits(struct bpf_object *obj, bool replace, char *err, size_t errlen)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, obj)
	{
		const char *path = bpf_map__pin_path(m);
		struct map_shape want, have = { 0 };
		char a[96], b[96];
		int rc;

		if (!path || !bpf_map__autocreate(m))
			continue;
		rc = shape_of_pin(path, &have);
		if (rc == -ENOENT)
			continue; /* the owner's load pins it; a reader says so when it opens */
		if (rc)
			return steer_seterr(err, errlen, rc, "cannot inspect the pinned map %s: %s",
					    path, strerror(-rc));
		shape_of_object(m, &want);
		if (shape_equal(&have, &want)) {
			if (strcmp(bpf_map__name(m), STEER_MAP_GEN) != 0 ||
			    tables_fit(obj, path, a, sizeof(a)))
				continue;
			snprintf(b, sizeof(b), "%s", "the tables of this build");
		} else {
			shape_format(&have, a, sizeof(a));
			shape_format(&want, b, sizeof(b));
		}
		if (!replace)
			return steer_seterr(err, errlen, EPROTO,
					    "the pinned map %s (%s) is not of this build's shape "
					    "(%s): the smg-steerd that pinned it is another build; "
					    "use the smg-steerctl of that build",
					    path, a, b);
		if (unlink(path) != 0)
			return steer_seterr(err, errlen, errno,
					    "the pinned map %s is not of this build's shape, and "
					    "cannot be removed: %s",
					    path, strerror(errno));
		if (strcmp(bpf_map__name(m), STEER_MAP_GEN) == 0)
			unpin_tables(path); /* it named a generation of the map replaced */
		log_warn("data plane: replaced the pinned map %s (%s) with one of this build's "
			 "shape (%s); what it held starts from zero",
			 path, a, b);
	}
	return 0;
}

int steer_pins_replace_misfits(struct bpf_object *obj, char *err, size_t errlen)
{
	return visit_misfits(obj, true, err, errlen);
}

int steer_pins_check_shapes(struct bpf_object *obj, char *err, size_t errlen)
{
	return visit_misfits(obj, false, err, errlen);
}
