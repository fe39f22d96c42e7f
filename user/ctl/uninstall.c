// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_uninstall: detach and unpin everything under a pin directory.
 *
 * The pins are the only references a stopped `--keep-pinned` daemon leaves
 * behind, so unlinking them would detach the links too; the links are
 * detached explicitly first anyway, because a process may still hold a link
 * fd (a daemon stuck in its exit, a bpftool), and then removing the pin alone
 * would leave the program attached.
 */
#include "ctl.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/common.h"

/* Directories below the pin directory that are followed (a future layout
 * may group its pins); deeper ones are refused rather than walked. */
#define MAX_DEPTH 3

enum obj_kind {
	OBJ_OTHER,
	OBJ_LINK,
	OBJ_MAP,
	OBJ_PROG,
};

struct walk {
	FILE *out;
	struct steer_uninstall_report *rep;
	char *err;
	size_t errlen;
};

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void free_names(char **names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* The entries of a directory but . and .., sorted, so the report is stable. */
static int list_dir(const char *dir, char ***names_out, size_t *n_out, char *err, size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;

	if (!d)
		return steer_seterr(err, errlen, errno, "cannot read %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (n == cap) {
			char **grown = realloc(names, (cap = cap ? 2 * cap : 16) * sizeof(*names));

			if (!grown)
				goto oom;
			names = grown;
		}
		if (!(names[n] = strdup(e->d_name)))
			goto oom;
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_names);
	*names_out = names;
	*n_out = n;
	return 0;
oom:
	closedir(d);
	free_names(names, n);
	return steer_seterr(err, errlen, ENOMEM, "out of memory listing %s", dir);
}

/* What a BPF fd refers to, from the name of its anonymous inode:
 * "anon_inode:bpf-map", "anon_inode:bpf-prog", "anon_inode:bpf-link"
 * (older kernels spell the link "bpf_link"). */
static enum obj_kind fd_kind(int fd)
{
	static const struct {
		const char *name;
		enum obj_kind kind;
	} kinds[] = {
		{ "anon_inode:bpf-link", OBJ_LINK },
		{ "anon_inode:bpf_link", OBJ_LINK },
		{ "anon_inode:bpf-map", OBJ_MAP },
		{ "anon_inode:bpf-prog", OBJ_PROG },
	};
	char path[64], target[64];
	ssize_t n;
	size_t i;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return OBJ_OTHER;
	target[n] = 0;
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(target, kinds[i].name))
			return kinds[i].kind;
	return OBJ_OTHER;
}

static const char *or_unknown(const char *s)
{
	return s ? s : "unknown";
}

/* "link 12: cgroup_inet4_connect on cgroup id 3456, program 78" */
static void describe_link(int fd, char *buf, size_t len)
{
	struct bpf_link_info info;
	__u32 ilen = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(fd, &info, &ilen) != 0) {
		snprintf(buf, len, "link");
		return;
	}
	if (info.type == BPF_LINK_TYPE_CGROUP)
		snprintf(buf, len, "link %u: %s on cgroup id %llu, program %u", info.id,
			 or_unknown(libbpf_bpf_attach_type_str(info.cgroup.attach_type)),
			 (unsigned long long)info.cgroup.cgroup_id, info.prog_id);
	else
		snprintf(buf, len, "link %u: %s, program %u", info.id,
			 or_unknown(libbpf_bpf_link_type_str(info.type)), info.prog_id);
}

static void describe(int fd, enum obj_kind kind, char *buf, size_t len)
{
	struct bpf_map_info mi;
	struct bpf_prog_info pi;
	__u32 ilen;

	switch (kind) {
	case OBJ_LINK:
		describe_link(fd, buf, len);
		return;
	case OBJ_MAP:
		memset(&mi, 0, sizeof(mi));
		ilen = sizeof(mi);
		if (bpf_obj_get_info_by_fd(fd, &mi, &ilen) == 0)
			snprintf(buf, len, "map %u: %s", mi.id,
				 or_unknown(libbpf_bpf_map_type_str(mi.type)));
		else
			snprintf(buf, len, "map");
		return;
	case OBJ_PROG:
		memset(&pi, 0, sizeof(pi));
		ilen = sizeof(pi);
		if (bpf_obj_get_info_by_fd(fd, &pi, &ilen) == 0)
			snprintf(buf, len, "program %u: %s", pi.id,
				 or_unknown(libbpf_bpf_prog_type_str(pi.type)));
		else
			snprintf(buf, len, "program");
		return;
	default:
		snprintf(buf, len, "not a BPF object");
	}
}

/*
 * One pin. links_only: the first pass detaches and unpins links only; the
 * second unpins the rest. *done tells whether this call removed the pin.
 */
static int remove_pin(struct walk *w, const char *path, bool links_only, bool *done)
{
	int fd = bpf_obj_get(path);
	enum obj_kind kind = fd >= 0 ? fd_kind(fd) : OBJ_OTHER;
	char what[160];
	bool detached = false;

	*done = false;
	if (links_only && kind != OBJ_LINK) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	describe(fd, kind, what, sizeof(what));
	if (kind == OBJ_LINK) {
		/* A cgroup link detaches at once; a type without detach (none
		 * of ours) is released by the unlink below. */
		if (bpf_link_detach(fd) == 0)
			detached = true;
		else if (errno != EOPNOTSUPP && errno != EINVAL) {
			int e = errno;

			close(fd);
			return steer_seterr(w->err, w->errlen, e, "cannot detach %s: %s", path,
					    strerror(e));
		}
	}
	if (fd >= 0)
		close(fd);
	if (unlink(path) != 0 && errno != ENOENT)
		return steer_seterr(w->err, w->errlen, errno, "cannot remove %s: %s", path,
				    strerror(errno));
	w->rep->pins_removed++;
	if (detached)
		w->rep->links_detached++;
	if (w->out)
		fprintf(w->out, "%s %s (%s)\n", detached ? "detached and removed" : "removed", path,
			what);
	*done = true;
	return 0;
}

static int remove_tree(struct walk *w, const char *dir, int depth, bool links_only);

static int remove_entry(struct walk *w, const char *dir, const char *name, int depth,
			bool links_only)
{
	char path[PATH_MAX];
	struct stat st;
	bool done;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return steer_seterr(w->err, w->errlen, ENAMETOOLONG, "path too long: %s/%s", dir,
				    name);
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0
				       : steer_seterr(w->err, w->errlen, errno,
						      "cannot stat %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return remove_pin(w, path, links_only, &done);
	if (depth >= MAX_DEPTH)
		return steer_seterr(w->err, w->errlen, EINVAL,
				    "%s: directories nested deeper than %d; not a pin directory "
				    "of smg-steer",
				    path, MAX_DEPTH);
	rc = remove_tree(w, path, depth + 1, links_only);
	if (rc || links_only)
		return rc;
	if (rmdir(path) != 0)
		return steer_seterr(w->err, w->errlen, errno, "cannot remove %s: %s", path,
				    strerror(errno));
	w->rep->dirs_removed++;
	if (w->out)
		fprintf(w->out, "removed %s/\n", path);
	return 0;
}

static int remove_tree(struct walk *w, const char *dir, int depth, bool links_only)
{
	char **names = NULL;
	size_t n = 0, i;
	int rc = list_dir(dir, &names, &n, w->err, w->errlen);

	for (i = 0; rc == 0 && i < n; i++)
		rc = remove_entry(w, dir, names[i], depth, links_only);
	free_names(names, n);
	return rc;
}

/* Refuses what is not a pin directory of ours, before anything is removed. */
static int check_pin_dir(const char *pin_dir, char *err, size_t errlen)
{
	char parent[PATH_MAX], *slash;
	struct stat st, pst;
	struct statfs sfs;
	char **names = NULL;
	size_t n = 0, i;
	bool ours = false;
	int rc;

	if (statfs(pin_dir, &sfs) != 0 || stat(pin_dir, &st) != 0)
		return steer_seterr(err, errlen, errno, "%s: %s", pin_dir, strerror(errno));
	if (!S_ISDIR(st.st_mode) || sfs.f_type != BPF_FS_MAGIC)
		return steer_seterr(err, errlen, EINVAL,
				    "%s is not a directory on a bpffs: not a pin directory",
				    pin_dir);
	/* The bpffs root (/sys/fs/bpf) holds other tools' pins: never empty it. */
	snprintf(parent, sizeof(parent), "%s", pin_dir);
	while ((slash = strrchr(parent, '/')) && slash[1] == 0 && slash != parent)
		*slash = 0; /* trailing slashes */
	slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = 0;
	else
		snprintf(parent, sizeof(parent), ".");
	if (stat(parent, &pst) != 0 || pst.st_dev != st.st_dev || pst.st_ino == st.st_ino)
		return steer_seterr(err, errlen, EINVAL,
				    "%s is the root of a bpffs mount, not a pin directory of "
				    "smg-steer (the default is %s)",
				    pin_dir, STEER_DEFAULT_PIN_DIR);
	rc = list_dir(pin_dir, &names, &n, err, errlen);
	if (rc)
		return rc;
	for (i = 0; i < n; i++)
		ours |= strncmp(names[i], "steer_", 6) == 0;
	free_names(names, n);
	if (n && !ours)
		return steer_seterr(err, errlen, EINVAL,
				    "%s holds no steer_* pin: not a pin directory of smg-steer; "
				    "nothing removed",
				    pin_dir);
	return 0;
}

int steer_uninstall(const char *pin_dir, FILE *out, struct steer_uninstall_report *rep, char *err,
		    size_t errlen)
{
	struct walk w = { .out = out, .rep = rep, .err = err, .errlen = errlen };
	int fd, rc;

	memset(rep, 0, sizeof(*rep));
	fd = open(pin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		rep->nothing_pinned = true;
		if (out)
			fprintf(out, "nothing to remove: %s does not exist\n", pin_dir);
		return 0;
	}
	if (fd < 0)
		return steer_seterr(err, errlen, errno, "cannot open %s: %s", pin_dir,
				    strerror(errno));
	/* The daemon holds this lock while it runs (steer_dp_open): removing
	 * its pins under it would leave it steering from unpinned maps, and a
	 * daemon starting now must not adopt a half-removed directory. */
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK
			     ? steer_seterr(
				       err, errlen, EBUSY,
				       "a smg-steerd is running on %s (it holds the directory's "
				       "lock): stop it first; nothing removed",
				       pin_dir)
			     : steer_seterr(err, errlen, errno, "cannot lock %s: %s", pin_dir,
					    strerror(errno));
		close(fd);
		return rc;
	}
	rc = check_pin_dir(pin_dir, err, errlen);
	if (rc == 0)
		rc = remove_tree(&w, pin_dir, 0, true);
	if (rc == 0)
		rc = remove_tree(&w, pin_dir, 0, false);
	if (rc == 0 && rmdir(pin_dir) != 0 && errno != ENOENT)
		rc = steer_seterr(err, errlen, errno, "cannot remove %s: %s", pin_dir,
				  strerror(errno));
	else if (rc == 0) {
		rep->dirs_removed++;
		if (out)
			fprintf(out, "removed %s/\n", pin_dir);
	}
	close(fd); /* releases the lock */
	return rc;
}
