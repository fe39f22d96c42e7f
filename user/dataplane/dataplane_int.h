/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * dataplane_int.h - what the dataplane*.c files share and nobody else sees.
 *
 *   dataplane.c           open, adopt, attach, close, detach (the loader)
 *   layout.c    the pinned layout's version, and migration of older pins
 *   pins.c      pinned maps of another shape than this build's
 *   publish.c   the registry, table building and the generation swap
 *   counters.c  counters, drains and the inspection view
 *   common/common.c      addresses, errors, the clock
 *   wire.c      request accounting: its programs, links and counters
 */
#ifndef STEER_DATAPLANE_INT_H
#define STEER_DATAPLANE_INT_H

#include <limits.h>
#include <pthread.h>

#include "dataplane/dataplane.h"

#define NO_SLOT UINT32_MAX
#define STEER_PIN_DIR_MAX 200	      /* leaves room for the object names in PATH_MAX */
#define HASH_CAP (2 * STEER_SLOT_IDS) /* power of two, load factor <= 1/2 */

/* The programs, in the order they are attached (see attach_or_adopt_links):
 * release first, so that a socket steered by the old programs during an
 * upgrade is already seen when it closes; sockops before the connect hooks,
 * so that every socket they steer has its resets followed. */
enum dp_link {
	DP_LINK_RELEASE,
	DP_LINK_SOCKOPS,
	DP_LINK_CONNECT4,
	DP_LINK_CONNECT6,
	DP_LINK_PEER4,
	DP_LINK_PEER6,
	DP_LINK_SETSOCKOPT,
	DP_LINKS,
};

/* The wire accounting's programs (wire.c), attached after the others. */
enum dp_wire_link {
	DP_WIRE_OUT,
	DP_WIRE_IN,
	DP_WIRE_LINKS,
};

struct steer_bpf;
struct steer_wire_bpf;
struct bpf_link;
struct bpf_program;

struct steer_dp {
	char pin_dir[STEER_PIN_DIR_MAX];
	char cgroup[PATH_MAX];
	char wire_cgroup[PATH_MAX]; /* steer_dp_opts.wire_cgroup, or cgroup */
	bool own;
	bool wire_off; /* steer_dp_opts.wire_off */
	int lock_fd;
	struct steer_bpf *skel; /* owner only */
	struct bpf_link *links[DP_LINKS];
	bool adopted; /* the links were pinned already: a previous owner left them */

	int gen_fd, slots_fd, svcst_fd, tree_fd, socks_fd, svcid_fd, bkslot_fd, drain_fd, bkinfo_fd,
		ports_fd, layout_fd;
	struct steer_slot *slots; /* mmap of the one value of steer_slots */
	size_t slots_len;
	struct steer_bk_info *bkinfo;
	size_t bkinfo_len;
	struct steer_ports *ports;
	size_t ports_len;
	struct steer_svc_stats *svcst;
	size_t svcst_len;
	struct steer_layout *layout;
	size_t layout_len;

	/* Request accounting (wire.c). */
	struct steer_wire_bpf *wire_skel; /* owner only */
	struct bpf_link *wire_links[DP_WIRE_LINKS];
	int wire_fd;		 /* -1: a reader of pins from before steer_wire */
	struct steer_wire *wire; /* mmap of the one value of steer_wire, or NULL */
	size_t wire_len;
	/* mmap of steer_peer_in, steer_peer_apply's argument (owner only). */
	struct steer_peer_batch *peer_in;
	size_t peer_in_len;
	/* mmap of steer_probe_in, steer_probe_apply's argument (owner only). */
	struct steer_probe_batch *probe_in;
	size_t probe_in_len;
	/* mmap of steer_kick: 1 while a --peer-push wake-up is pending (owner). */
	uint32_t *kick;
	size_t kick_len;

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
	 * RCU grace period in its own thread (see swap_in). */
	struct gen_swap {
		pthread_t thread;
		bool running; /* thread started and not yet joined */
		int map_fd;   /* the new generation; closed once joined */
		int err;      /* errno of the update, 0 on success */
		int done;     /* set (atomically) by the thread when the syscall returned */
	} swap;
};

/* dataplane.c */
void dp_pin_path(const struct steer_dp *dp, const char *name, char *buf, size_t len);
int dp_link_swap(struct bpf_link *l, struct bpf_program *prog, const char *path, char *err,
		 size_t errlen);
int dp_link_attach_pinned(const char *cgroup, struct bpf_program *prog, int cg_fd, const char *path,
			  struct bpf_link **out, char *err, size_t errlen);
/* The cgroup id of a cgroup2 directory (its inode number); 0 or -errno. */
int dp_cgroup_id(const char *path, uint64_t *id);
int dp_current_generation_fd(const struct steer_dp *dp);
/* Points the pin steer_tables at generation fd (publish.c). */
void dp_pin_generation(struct steer_dp *dp, int fd);
int dp_new_generation_map(struct steer_dp *dp);

/* pins.c: a map's bpf_map_info by descriptor (zeroed first); 0 or -errno. */
struct bpf_map_info;
int dp_map_info(int fd, struct bpf_map_info *info);

/* layout.c */
int dp_layout_check(struct steer_dp *dp, char *err, size_t errlen);
void dp_layout_stamp(struct steer_dp *dp);

/* publish.c */
uint32_t dp_slot_find(const struct steer_dp *dp, const struct steer_bk_key *k);
void dp_hash_rebuild(struct steer_dp *dp);
int dp_registry_load(struct steer_dp *dp);
void dp_ports_sync(struct steer_dp *dp);
int dp_swap_join(struct steer_dp *dp);

/* wire.c */
int dp_wire_load(struct steer_dp *dp, char *err, size_t errlen);
int dp_wire_open(struct steer_dp *dp, char *err, size_t errlen);
int dp_wire_check_shapes(struct steer_dp *dp, char *err, size_t errlen);
int dp_wire_attach(struct steer_dp *dp, char *err, size_t errlen);
void dp_wire_close(struct steer_dp *dp);
int dp_wire_detach(struct steer_dp *dp, char *err, size_t errlen);
void dp_wire_reset(struct steer_dp *dp, uint32_t slot);
void dp_wire_drained(struct steer_dp *dp, uint32_t slot);

/* counters.c */
void dp_slot_reset(struct steer_dp *dp, uint32_t s, uint32_t svc_id, bool drained);
void dp_slot_apply_drain(struct steer_dp *dp, uint32_t s, bool drained);
void dp_svc_touch(struct steer_dp *dp, uint32_t svc_id);
int dp_svc_id_of(const struct steer_dp *dp, const struct steer_addr *vip);

#endif /* STEER_DATAPLANE_INT_H */
