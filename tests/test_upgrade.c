// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_upgrade.c - smg-steerd takes over what an older smg-steerd left pinned
 * (layout 0: the BPF object of commit 1795703, tests/data/layout0, and the
 * one before it whose steer_bk_info had no source field). The old object is
 * loaded, attached and given a table here, the way the old daemon did it;
 * connections are opened and held; then the new data plane opens the pin
 * directory as its owner while a client keeps connecting. No connect may
 * fail or go unsteered, the held connections keep their virtual address and
 * their live count, and the counters and the daemon's records carry over.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "dataplane.h"
#include "tap.h"
#include "testenv.h"

#define NB 4
#define HELD 5
#define VIP "127.0.0.110:8200"

static struct test_backend be[NB], decoy;
static struct steer_addr vip, addr[NB];
static char err[512];

/* ---- layout 0, as the older smg-steerd pinned it ------------------------------ */

struct slot_v0 { /* steer_slot of layout 0 */
	__u64 inflight_tokens, steered, fallbacks;
	__s64 live;
	__u32 gen, flags;
	__u64 reserved[3];
};

static const char *const v0_progs[] = { "steer_connect4", "steer_connect6", "steer_getpeername4",
					"steer_getpeername6", "steer_sockops" };
static const char *const v0_links[] = { "steer_lnk_c4", "steer_lnk_c6", "steer_lnk_gp4",
					"steer_lnk_gp6", "steer_lnk_ops" };

static int pinned_fd(const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), name);
	return bpf_obj_get(path);
}

static int v0_attach(struct bpf_object *obj)
{
	int cg = open(testenv_cgroup(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	size_t i;

	CHECK_RC(cg >= 0, "open cgroup");
	for (i = 0; i < sizeof(v0_progs) / sizeof(v0_progs[0]); i++) {
		struct bpf_program *p = bpf_object__find_program_by_name(obj, v0_progs[i]);
		struct bpf_link *l = p ? bpf_program__attach_cgroup(p, cg) : NULL;
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", testenv_pin_dir(), v0_links[i]);
		if (!l || bpf_link__pin(l, path) != 0) {
			close(cg);
			CHECK_RC(0, "attach %s: %s", v0_progs[i], strerror(errno));
		}
		bpf_link__destroy(l); /* pinned: stays attached */
	}
	close(cg);
	return 0;
}

/* Registry, slots, one table and the port filter, as the old publish wrote them. */
static int v0_publish(size_t bkinfo_size)
{
	struct steer_table *t = calloc(1, sizeof(*t));
	struct steer_ports *ports = calloc(1, sizeof(*ports));
	unsigned char bk[sizeof(struct steer_bk_info)];
	int svcid = pinned_fd("steer_svcid"), bkslot = pinned_fd("steer_bkslot");
	int slots = pinned_fd("steer_slots"), gen = pinned_fd("steer_gen");
	int portmap = pinned_fd("steer_ports"), bkinfo = pinned_fd("steer_bkinfo"), inner;
	struct steer_bk_info *info = (struct steer_bk_info *)bk;
	__u32 i, zero = 0;
	char path[512];

	CHECK_RC(t && ports && svcid >= 0 && bkslot >= 0 && slots >= 0 && gen >= 0 &&
			 portmap >= 0 && bkinfo >= 0,
		 "layout 0 maps missing");
	CHECK_RC(bpf_map_update_elem(svcid, &vip, &zero, BPF_ANY) == 0, "svcid");
	t->expires_ns = steer_monotonic_ns() + 3600ULL * 1000000000ULL;
	t->generation = 7;
	t->n = NB;
	t->credit_tokens = STEER_DEFAULT_CREDIT_TOKENS;
	for (i = 0; i < NB; i++) {
		struct steer_bk_key k = { .vip = vip, .backend = addr[i] };
		struct slot_v0 s = { .gen = 1 }; /* as the old slot reset left it */

		CHECK_RC(bpf_map_update_elem(bkslot, &k, &i, BPF_ANY) == 0, "bkslot");
		CHECK_RC(bpf_map_update_elem(slots, &i, &s, BPF_ANY) == 0, "slot");
		t->e[i].base_wait_ns = i * 1000000ULL;
		t->e[i].ns_per_token = 1000;
		memcpy(t->e[i].ip6, addr[i].ip6, sizeof(t->e[i].ip6));
		t->e[i].port = addr[i].port;
		t->e[i].slot = i;
	}
	inner = bpf_map_create(
		BPF_MAP_TYPE_HASH, "steer_tables", sizeof(struct steer_addr),
		sizeof(struct steer_table), STEER_MAX_SERVICES,
		&(struct bpf_map_create_opts){ .sz = sizeof(struct bpf_map_create_opts),
					       .map_flags = BPF_F_NO_PREALLOC });
	snprintf(path, sizeof(path), "%s/steer_tables", testenv_pin_dir());
	CHECK_RC(inner >= 0 && bpf_map_update_elem(inner, &vip, t, BPF_ANY) == 0 &&
			 bpf_obj_pin(inner, path) == 0 &&
			 bpf_map_update_elem(gen, &zero, &inner, BPF_ANY) == 0,
		 "generation: %s", strerror(errno));
	ports->bits[ntohs(vip.port) >> 6] |= 1ULL << (ntohs(vip.port) & 63);
	CHECK_RC(bpf_map_update_elem(portmap, &zero, ports, BPF_ANY) == 0, "ports");
	/* The daemon's record of backend 0, in the old size. */
	memset(bk, 0, sizeof(bk));
	info->queued_tokens = 1234;
	info->kv_ppm = 555;
	info->mode = STEER_MODE_SNAPSHOT;
	if (bkinfo_size == sizeof(struct steer_bk_info))
		info->source = STEER_SOURCE_GRPC_VLLM;
	CHECK_RC(bpf_map_update_elem(bkinfo, &zero, bk, BPF_ANY) == 0, "bkinfo");
	close(inner);
	close(svcid);
	close(bkslot);
	close(slots);
	close(gen);
	close(portmap);
	close(bkinfo);
	free(t);
	free(ports);
	return 0;
}

/* Load, pin and attach the layout-0 object, publish its table. */
static int v0_start(const char *obj_name, size_t bkinfo_size, struct bpf_object **out)
{
	char path[512];
	struct bpf_object *obj;
	const char *build = getenv("STEER_BUILD");

	snprintf(path, sizeof(path), "%s/layout0/%s", build ? build : "build/san", obj_name);
	mkdir(testenv_pin_dir(), 0700);
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = testenv_pin_dir());
	obj = bpf_object__open_file(path, &oo);
	CHECK_RC(obj, "open %s: %s", path, strerror(errno));
	bpf_map__set_autocreate(bpf_object__find_map_by_name(obj, "steer_tmpl"), false);
	CHECK_RC(bpf_object__load(obj) == 0, "load %s", path);
	*out = obj;
	CHECK_RC(v0_attach(obj) == 0, "attach");
	return v0_publish(bkinfo_size);
}

static int64_t v0_live_sum(void)
{
	int fd = pinned_fd("steer_slots");
	int64_t sum = 0;
	__u32 i;

	for (i = 0; i < NB; i++) {
		struct slot_v0 s;

		if (bpf_map_lookup_elem(fd, &i, &s) == 0)
			sum += s.live;
	}
	close(fd);
	return sum;
}

/* ---- a client that keeps connecting ------------------------------------------- */

struct looper {
	volatile int stop;
	int ok, failed, unsteered;
};

static void *connect_loop(void *arg)
{
	struct looper *l = arg;

	while (!l->stop) {
		char name[32];
		int rc = test_connect(VIP, false, name, sizeof(name), NULL, NULL);

		if (rc != 0)
			l->failed++;
		else if (name[0] != 'b')
			l->unsteered++;
		else
			__atomic_fetch_add(&l->ok, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int count_pins(void)
{
	DIR *d = opendir(testenv_pin_dir());
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n;
}

static int layout_pinned(struct steer_layout *l)
{
	int fd = pinned_fd(STEER_MAP_LAYOUT), rc;
	__u32 zero = 0;

	if (fd < 0)
		return -1;
	rc = bpf_map_lookup_elem(fd, &zero, l);
	close(fd);
	return rc;
}

/* ---- the upgrade -------------------------------------------------------------- */

static int upgrade_from(const char *obj_name, size_t bkinfo_size)
{
	struct steer_dp_opts own = { .pin_dir = testenv_pin_dir(),
				     .cgroup = testenv_cgroup(),
				     .own = true },
			     reader = { .pin_dir = testenv_pin_dir(), .cgroup = testenv_cgroup() };
	int held[HELD], on[NB] = { 0 }, i, ok_before, ok_at_open, wait;
	uint64_t steered = 0, inflight = 0;
	struct bpf_object *old = NULL;
	struct looper l = { 0 };
	struct steer_dp *dp = NULL;
	struct steer_layout lay;
	pthread_t thr;
	char name[32];

	CHECK_RC(v0_start(obj_name, bkinfo_size, &old) == 0, "layout 0 setup");
	for (i = 0; i < HELD; i++) {
		CHECK_RC(test_connect(VIP, false, name, sizeof(name), NULL, &held[i]) == 0 &&
				 name[0] == 'b',
			 "connect through layout 0: %s", name);
		on[atoi(name + 1)]++;
	}
	CHECK_RC(v0_live_sum() == HELD, "layout 0 counts %lld live", (long long)v0_live_sum());
	CHECK_RC(steer_dp_open(&reader, &dp, err, sizeof(err)) == -EPROTO &&
			 strstr(err, "layout 0"),
		 "a reader of layout 0 pins: %s", err);
	pthread_create(&thr, NULL, connect_loop, &l);
	for (wait = 0; wait < 2000 && __atomic_load_n(&l.ok, __ATOMIC_RELAXED) < 20; wait++)
		usleep(1000);
	bpf_object__close(old); /* the old daemon exits; its pins stay */
	ok_before = __atomic_load_n(&l.ok, __ATOMIC_RELAXED);
	if (steer_dp_open(&own, &dp, err, sizeof(err)) != 0) {
		l.stop = 1;
		pthread_join(thr, NULL);
		CHECK_RC(0, "the upgrade failed: %s", err);
	}
	ok_at_open = __atomic_load_n(&l.ok, __ATOMIC_RELAXED);
	for (wait = 0; wait < 2000 && __atomic_load_n(&l.ok, __ATOMIC_RELAXED) < ok_at_open + 50;
	     wait++)
		usleep(1000);
	l.stop = 1;
	pthread_join(thr, NULL);
	CHECK_RC(l.failed == 0 && l.unsteered == 0 && l.ok > ok_at_open,
		 "during the upgrade: %d connects failed, %d unsteered, %d ok (%d before)",
		 l.failed, l.unsteered, l.ok, ok_at_open);

	/* The held connections: their virtual address, their live count. */
	for (i = 0; i < HELD; i++) {
		struct sockaddr_storage peer;
		socklen_t plen = sizeof(peer);
		char p[64];

		CHECK_RC(getpeername(held[i], (struct sockaddr *)&peer, &plen) == 0,
			 "held connection %d lost", i);
		test_fmt_sockaddr(&peer, p, sizeof(p));
		CHECK_RC(strcmp(p, VIP) == 0, "held connection %d now reports %s", i, p);
	}
	for (i = 0; i < NB; i++) {
		uint32_t s;

		CHECK_RC(steer_dp_slot(dp, &vip, &addr[i], &s) == 0 && s == (uint32_t)i,
			 "b%d kept slot %d? got %u", i, i, s);
		CHECK_RC(steer_dp_live(dp, s) == on[i], "b%d: live %lld, held %d", i,
			 (long long)steer_dp_live(dp, s), on[i]);
		steered += steer_dp_slot_counters(dp, s)->steered;
		inflight += steer_dp_inflight_read(dp, s);
	}
	/* Every credit carries over; the steered statistic may miss what the
	 * old program steered while the new one was being switched in. */
	CHECK_RC(inflight == (uint64_t)(HELD + l.ok) * STEER_DEFAULT_CREDIT_TOKENS,
		 "in flight %llu tokens, want %llu", (unsigned long long)inflight,
		 (unsigned long long)(HELD + l.ok) * STEER_DEFAULT_CREDIT_TOKENS);
	CHECK_RC(steered <= (uint64_t)(HELD + l.ok) &&
			 steered + (uint64_t)(ok_at_open - ok_before) >= (uint64_t)(HELD + l.ok),
		 "steered %llu of %d, %d of them during the upgrade", (unsigned long long)steered,
		 HELD + l.ok, ok_at_open - ok_before);
	CHECK_RC(steer_dp_bk_info(dp, 0)->queued_tokens == 1234 &&
			 steer_dp_bk_info(dp, 0)->kv_ppm == 555 &&
			 steer_dp_bk_info(dp, 0)->source ==
				 (bkinfo_size == sizeof(struct steer_bk_info)
					  ? STEER_SOURCE_GRPC_VLLM
					  : 0),
		 "the daemon's record of b0 did not carry over");
	CHECK_RC(layout_pinned(&lay) == 0 && lay.version == STEER_LAYOUT_VERSION &&
			 (lay.flags & STEER_LAYOUT_LEGACY_SK) && lay.legacy_live == HELD,
		 "layout %u flags %#x legacy live %llu", lay.version, lay.flags,
		 (unsigned long long)lay.legacy_live);
	CHECK_RC(count_pins() == 21 && pinned_fd(STEER_LINK_SOCKOPS) < 0,
		 "%d pins (want 21: 14 maps, 7 links), sockops link %s", count_pins(),
		 pinned_fd(STEER_LINK_SOCKOPS) < 0 ? "gone" : "still pinned");

	/* The older sockets close: off the live count, once. */
	for (i = 0; i < HELD; i++)
		close(held[i]);
	for (i = 0; i < NB; i++)
		CHECK_RC(steer_dp_live(dp, (uint32_t)i) == 0, "b%d: live %lld after the close", i,
			 (long long)steer_dp_live(dp, (uint32_t)i));
	CHECK_RC(layout_pinned(&lay) == 0 && lay.legacy_live == 0, "legacy live %llu",
		 (unsigned long long)lay.legacy_live);
	/* And the next publish stops looking for their storage. */
	struct steer_dp_cost cost = { .addr = addr[1], .ns_per_token = 1000 };
	struct steer_dp_service svc = { .vip = vip,
					.configured = addr,
					.n_configured = NB,
					.table = &cost,
					.n_table = 1,
					.ttl_ns = 3600ULL * 1000000000ULL };
	CHECK_RC(steer_dp_publish(dp, &svc, 1, err, sizeof(err)) == 0, "publish: %s", err);
	CHECK_RC(layout_pinned(&lay) == 0 && !(lay.flags & STEER_LAYOUT_LEGACY_SK),
		 "flags %#x after the last older socket closed", lay.flags);
	CHECK_RC(test_connect(VIP, false, name, sizeof(name), NULL, NULL) == 0 &&
			 strcmp(name, "b1") == 0,
		 "the new table is not in force: %s", name);
	CHECK_RC(steer_dp_detach(dp, err, sizeof(err)) == 0, "detach: %s", err);
	steer_dp_close(dp);
	return 0;
}

static void test_upgrade_from_layout_0(void)
{
	CHECK(upgrade_from("steer.bpf.o", sizeof(struct steer_bk_info)) == 0, "see above");
}

static void test_upgrade_from_layout_0_without_sources(void)
{
	CHECK(upgrade_from("steer_nosource.bpf.o", 72) == 0, "see above");
}

int main(void)
{
	char a[64], n[16];
	int i;

	if (testenv_init("upgrade") != 0)
		return tap_setup_failed();
	for (i = 0; i < NB; i++) {
		snprintf(a, sizeof(a), "127.0.5.%d:%d", 11 + i, 9201 + i);
		snprintf(n, sizeof(n), "b%d", i);
		if (test_backend_start(&be[i], a, n) != 0 ||
		    steer_addr_parse(a, &addr[i], err, sizeof(err)) != 0)
			return tap_setup_failed();
	}
	if (test_backend_start(&decoy, VIP, "VIP") != 0 ||
	    steer_addr_parse(VIP, &vip, err, sizeof(err)) != 0)
		return tap_setup_failed();
	TAP_RUN(test_upgrade_from_layout_0);
	TAP_RUN(test_upgrade_from_layout_0_without_sources);
	for (i = 0; i < NB; i++)
		test_backend_stop(&be[i]);
	test_backend_stop(&decoy);
	return tap_done();
}
