// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * xdp.c - load and attach XDP ingress (bpf/steer_xdp.bpf.c) on the data
 * plane's pin directory; read its counters.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "xdp/xdp.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>

#include "dataplane/dataplane.h"
#include "steer_xdp.skel.h"

struct steer_xdp {
	struct steer_xdp_bpf *skel;
};

static void pin_path(const char *dir, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

static void link_path(const char *dir, const char *dev, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s%s", dir, STEER_LINK_XDP_PREFIX, dev);
}

/* ---- attach ------------------------------------------------------------------- */

/* Is the XDP program on ifindex attached in mode? */
static bool mode_is(unsigned ifindex, enum steer_xdp_mode mode)
{
	LIBBPF_OPTS(bpf_xdp_query_opts, q);

	if (bpf_xdp_query((int)ifindex, 0, &q) != 0)
		return true; /* cannot tell: keep what is attached */
	return q.attach_mode == (mode == STEER_XDP_GENERIC ? XDP_ATTACHED_SKB : XDP_ATTACHED_DRV);
}

static int attach_dev(struct steer_xdp *x, const struct steer_xdp_opts *o, const char *dev,
		      char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_link_create_opts, lo);
	struct bpf_program *prog = x->skel->progs.steer_xdp;
	unsigned ifindex = if_nametoindex(dev);
	char path[PATH_MAX];
	struct bpf_link *l;
	int fd;

	if (!ifindex)
		return steer_seterr(err, errlen, ENODEV, "--xdp-dev: no interface '%s' here", dev);
	link_path(o->pin_dir, dev, path, sizeof(path));
	l = access(path, F_OK) == 0 ? bpf_link__open(path) : NULL;
	if (l && !mode_is(ifindex, o->mode)) {
		/* Another mode asked for: attach afresh. The flows stay in the
		 * pinned table; packets of the moment in between go to the stack. */
		bpf_link__detach(l);
		bpf_link__destroy(l);
		unlink(path);
		l = NULL;
	}
	if (l) {
		struct bpf_link_info info = { 0 };
		__u32 len = sizeof(info);
		int rc = 0;

		if (bpf_obj_get_info_by_fd(bpf_link__fd(l), &info, &len) == 0 &&
		    info.type == BPF_LINK_TYPE_XDP && info.xdp.ifindex != ifindex)
			rc = steer_seterr(err, errlen, EEXIST,
					  "%s is attached to interface index %u, not %s (%u); "
					  "detach the old instance first",
					  path, info.xdp.ifindex, dev, ifindex);
		else if (bpf_link__update_program(l, prog) != 0)
			rc = steer_seterr(err, errlen, errno, "cannot update pinned link %s: %s",
					  path, strerror(errno));
		bpf_link__destroy(l); /* the pin keeps it */
		return rc;
	}
	lo.flags = o->mode == STEER_XDP_GENERIC ? XDP_FLAGS_SKB_MODE : XDP_FLAGS_DRV_MODE;
	fd = bpf_link_create(bpf_program__fd(prog), (int)ifindex, BPF_XDP, &lo);
	if (fd < 0)
		return steer_seterr(err, errlen, -fd, "cannot attach XDP to %s in %s mode: %s%s",
				    dev, o->mode == STEER_XDP_GENERIC ? "generic" : "native",
				    strerror(-fd),
				    o->mode == STEER_XDP_GENERIC
					    ? " (another XDP program attached?)"
					    : " (no driver support, or another XDP program "
					      "attached? --xdp-mode generic works on any device)");
	if (bpf_obj_pin(fd, path) != 0) {
		int e = errno;

		close(fd);
		return steer_seterr(err, errlen, e, "cannot pin %s: %s", path, strerror(e));
	}
	close(fd);
	return 0;
}

/* net.ipvX.conf.DEV.forwarding of this network namespace is 1? */
static int forwarding_check(const char *dev, int family, char *err, size_t errlen)
{
	const char *v = family == 4 ? "ipv4" : "ipv6";
	char path[PATH_MAX], c = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/sys/net/%s/conf/%s/forwarding", v, dev);
	f = fopen(path, "r");
	if (f) {
		c = (char)fgetc(f);
		fclose(f);
	}
	if (c == '1')
		return 0;
	return steer_seterr(
		err, errlen, EINVAL,
		"--xdp-dev %s: net.%s.conf.%s.forwarding is not 1; XDP ingress finds "
		"each backend's next hop with the kernel's FIB look-up, which answers "
		"only on a forwarding interface (sysctl -w net.%s.conf.%s.forwarding=1)",
		dev, v, dev, v, dev);
}

static bool listed(const struct steer_xdp_opts *o, const char *dev)
{
	size_t i;

	for (i = 0; i < o->n_devs; i++)
		if (!strcmp(o->devs[i], dev))
			return true;
	return false;
}

static int unpin_link(const char *path, char *err, size_t errlen)
{
	struct bpf_link *l = bpf_link__open(path);
	int rc = 0;

	if (l) {
		if (bpf_link__detach(l) != 0)
			rc = steer_seterr(err, errlen, errno, "cannot detach %s: %s", path,
					  strerror(errno));
		bpf_link__destroy(l);
	}
	if (unlink(path) != 0 && errno != ENOENT && rc == 0)
		rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path, strerror(errno));
	return rc;
}

/* Detach the links of devices that are no longer listed (NULL o: all). */
static int unpin_links_except(const char *pin_dir, const struct steer_xdp_opts *o, char *err,
			      size_t errlen)
{
	size_t plen = strlen(STEER_LINK_XDP_PREFIX);
	DIR *d = opendir(pin_dir);
	struct dirent *e;
	int rc = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((e = readdir(d))) {
		char path[PATH_MAX];

		if (strncmp(e->d_name, STEER_LINK_XDP_PREFIX, plen) ||
		    (o && listed(o, e->d_name + plen)))
			continue;
		pin_path(pin_dir, e->d_name, path, sizeof(path));
		if (unpin_link(path, err, rc ? 0 : errlen) && !rc)
			rc = -EIO;
	}
	closedir(d);
	return rc;
}

static int load(struct steer_xdp *x, const struct steer_xdp_opts *o, char *err, size_t errlen)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = o->pin_dir);
	__u32 zero = 0;
	int rc;

	x->skel = steer_xdp_bpf__open_opts(&oo);
	if (!x->skel)
		return steer_seterr(err, errlen, errno, "cannot open the XDP object: %s",
				    strerror(errno));
	bpf_map__set_autocreate(x->skel->maps.steer_tmpl, false);
	rc = steer_pins_replace_misfits(x->skel->obj, err, errlen);
	if (rc)
		return rc;
	rc = steer_xdp_bpf__load(x->skel);
	if (rc)
		return steer_seterr(err, errlen, rc, "cannot load the XDP program: %s",
				    strerror(-rc));
	if (bpf_map__update_elem(x->skel->maps.steer_xcfg, &zero, sizeof(zero), &o->encap,
				 sizeof(o->encap), BPF_ANY) != 0)
		return steer_seterr(err, errlen, errno, "cannot write %s: %s", STEER_MAP_XCFG,
				    strerror(errno));
	return 0;
}

int steer_xdp_attach(const struct steer_xdp_opts *o, struct steer_xdp **out, char *err,
		     size_t errlen)
{
	struct steer_xdp *x = calloc(1, sizeof(*x));
	size_t i;
	int rc;

	*out = NULL;
	if (!x)
		return steer_seterr(err, errlen, ENOMEM, "out of memory");
	for (i = 0, rc = 0; rc == 0 && i < o->n_devs; i++) {
		if (!if_nametoindex(o->devs[i]))
			rc = steer_seterr(err, errlen, ENODEV, "--xdp-dev: no interface '%s' here",
					  o->devs[i]);
		if (rc == 0 && o->v4)
			rc = forwarding_check(o->devs[i], 4, err, errlen);
		if (rc == 0 && o->v6)
			rc = forwarding_check(o->devs[i], 6, err, errlen);
	}
	if (rc == 0)
		rc = load(x, o, err, errlen);
	for (i = 0; rc == 0 && i < o->n_devs; i++)
		rc = attach_dev(x, o, o->devs[i], err, errlen);
	if (rc == 0)
		rc = unpin_links_except(o->pin_dir, o, err, errlen);
	if (rc) {
		steer_xdp_close(x);
		return rc;
	}
	*out = x;
	return 0;
}

void steer_xdp_close(struct steer_xdp *x)
{
	if (!x)
		return;
	if (x->skel)
		steer_xdp_bpf__destroy(x->skel);
	free(x);
}

int steer_xdp_detach_all(const char *pin_dir, char *err, size_t errlen)
{
	static const char *const maps[] = { STEER_MAP_XFLOWS, STEER_MAP_XVIPST, STEER_MAP_XBKST,
					    STEER_MAP_XCFG };
	char path[PATH_MAX];
	size_t i;
	int rc = unpin_links_except(pin_dir, NULL, err, errlen);

	for (i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
		pin_path(pin_dir, maps[i], path, sizeof(path));
		if (unlink(path) != 0 && errno != ENOENT && rc == 0)
			rc = steer_seterr(err, errlen, errno, "cannot unpin %s: %s", path,
					  strerror(errno));
	}
	return rc;
}

size_t steer_xdp_devs(const char *pin_dir, char names[][STEER_IFNAME_LEN], size_t max)
{
	size_t plen = strlen(STEER_LINK_XDP_PREFIX), n = 0;
	DIR *d = opendir(pin_dir);
	struct dirent *e;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		if (strncmp(e->d_name, STEER_LINK_XDP_PREFIX, plen))
			continue;
		snprintf(names[n++], STEER_IFNAME_LEN, "%.15s", e->d_name + plen);
	}
	closedir(d);
	return n;
}

/* ---- counters ------------------------------------------------------------------ */

struct steer_xdp_stats {
	int vip_fd, bk_fd, flows_fd;
	int ncpu;
	struct steer_xdp_ctr *buf; /* one value per possible CPU */
};

int steer_xdp_stats_open(const char *pin_dir, struct steer_xdp_stats **out)
{
	struct steer_xdp_stats *s;
	char path[PATH_MAX];
	int ncpu = libbpf_num_possible_cpus();

	*out = NULL;
	if (ncpu <= 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ncpu = ncpu;
	s->buf = calloc((size_t)ncpu, sizeof(*s->buf));
	pin_path(pin_dir, STEER_MAP_XVIPST, path, sizeof(path));
	s->vip_fd = bpf_obj_get(path);
	pin_path(pin_dir, STEER_MAP_XBKST, path, sizeof(path));
	s->bk_fd = bpf_obj_get(path);
	pin_path(pin_dir, STEER_MAP_XFLOWS, path, sizeof(path));
	s->flows_fd = bpf_obj_get(path);
	if (!s->buf || s->vip_fd < 0 || s->bk_fd < 0 || s->flows_fd < 0) {
		steer_xdp_stats_close(s);
		return -ENOENT;
	}
	*out = s;
	return 0;
}

void steer_xdp_stats_close(struct steer_xdp_stats *s)
{
	if (!s)
		return;
	if (s->vip_fd >= 0)
		close(s->vip_fd);
	if (s->bk_fd >= 0)
		close(s->bk_fd);
	if (s->flows_fd >= 0)
		close(s->flows_fd);
	free(s->buf);
	free(s);
}

static int sum_cpus(const struct steer_xdp_stats *s, int fd, uint32_t key,
		    struct steer_xdp_ctr *out)
{
	int c;

	memset(out, 0, sizeof(*out));
	if (bpf_map_lookup_elem(fd, &key, s->buf) != 0)
		return -errno;
	for (c = 0; c < s->ncpu; c++) {
		out->packets += s->buf[c].packets;
		out->bytes += s->buf[c].bytes;
		out->new_flows += s->buf[c].new_flows;
		out->lru_miss += s->buf[c].lru_miss;
		out->ended += s->buf[c].ended;
		out->no_route += s->buf[c].no_route;
		out->refused += s->buf[c].refused;
		out->icmp += s->buf[c].icmp;
	}
	return 0;
}

int steer_xdp_stats_vip(const struct steer_xdp_stats *s, uint32_t svc_id, struct steer_xdp_ctr *out)
{
	return sum_cpus(s, s->vip_fd, svc_id, out);
}

int steer_xdp_stats_backend(const struct steer_xdp_stats *s, uint32_t slot,
			    struct steer_xdp_ctr *out)
{
	return sum_cpus(s, s->bk_fd, slot, out);
}

int steer_xdp_stats_flows(const struct steer_xdp_stats *s, size_t *out)
{
	struct steer_xflow_key k, next;
	void *prev = NULL;
	size_t n = 0;

	while (bpf_map_get_next_key(s->flows_fd, prev, &next) == 0) {
		n++;
		k = next;
		prev = &k;
	}
	*out = n;
	return 0;
}
