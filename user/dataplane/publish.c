// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * publish.c - the registry of services and backends, table building
 * and the atomic swap of a whole generation of tables.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "policy/policy.h"

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

void dp_hash_rebuild(struct steer_dp *dp)
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

uint32_t dp_slot_find(const struct steer_dp *dp, const struct steer_bk_key *k)
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

struct plan;
static void ports_set(struct steer_dp *dp, const struct plan *p, bool add_plan);

/* Continue the publish sequence of whoever published before. */
static void generation_load(struct steer_dp *dp)
{
	struct steer_table *t = malloc(sizeof(*t));
	int cur = dp_current_generation_fd(dp);
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

int dp_registry_load(struct steer_dp *dp)
{
	struct steer_addr vip, next_vip;
	struct steer_bk_key k, next_k;
	void *prev;
	__u32 v;

	int cur = dp_current_generation_fd(dp);

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
	dp_hash_rebuild(dp);
	generation_load(dp);
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
	uint32_t slot_svc[STEER_SLOT_IDS]; /* service id of each new slot */
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
	if (s->bytes_per_token > STEER_MAX_BYTES_PER_TOKEN)
		return steer_seterr(err, errlen, EINVAL,
				    "service %s: bytes_per_token %u is above %d", a,
				    s->bytes_per_token, STEER_MAX_BYTES_PER_TOKEN);
	if (s->peers > 65535)
		return steer_seterr(err, errlen, EINVAL, "service %s: peers %u is above 65535", a,
				    s->peers);
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
		uint32_t slot = dp_slot_find(dp, &key);

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
		p->slot_svc[next_free] = (uint32_t)id;
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
		e->peers = (__u16)(s->peers ? s->peers : 1);
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
	t->flags = (__u16)s->flags;
	t->bytes_per_token = (__u16)steer_bytes_per_token(s->bytes_per_token);
	t->wait_bound_ns = s->wait_bound_ns;
	t->affinity = s->affinity;
	t->affinity_slack_ns = s->affinity_slack_ns;
	t->affinity_idle_ns = s->affinity_idle_ns;
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
		dp_slot_reset(dp, i, p->slot_svc[i],
			      steer_dp_is_drained(dp, &p->slot_key[i].backend));
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
	dp_hash_rebuild(dp);
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
void dp_pin_generation(struct steer_dp *dp, int fd)
{
	char path[PATH_MAX], tmp[PATH_MAX + 16];

	dp_pin_path(dp, STEER_MAP_TABLES, path, sizeof(path));
	/* bpffs reserves names with dots; the lock makes one owner the only writer. */
	dp_pin_path(dp, "steer_tbl_next", tmp, sizeof(tmp));
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
int dp_swap_join(struct steer_dp *dp)
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
			return dp_swap_join(dp); /* failed, or exchanged and already waited */
		sched_yield();
	}
}

/* Each backend of a new table learns its position there (steer_wire.
 * table_pos), before connects can see the table: cache affinity finds a
 * client's backend by it. */
static void table_positions(struct steer_dp *dp, const struct steer_table *t)
{
	uint32_t k;

	if (!dp->wire || !t)
		return;
	for (k = 0; k < t->n && k < STEER_MAX_BACKENDS; k++)
		__atomic_store_n(&dp->wire[t->e[k].slot & (STEER_SLOT_IDS - 1)].table_pos,
				 (uint32_t)((t->generation & 0xffff) << 16 | k), __ATOMIC_RELEASE);
}

/* Build a generation map from the plan and swap it in. */
static int swap_generation(struct steer_dp *dp, const struct plan *p, char *err, size_t errlen)
{
	struct steer_table *old = NULL;
	int fd, cur, rc = 0;
	uint32_t i;

	fd = dp_new_generation_map(dp);
	if (fd < 0)
		return steer_seterr(err, errlen, fd, "cannot create a table generation: %s",
				    strerror(-fd));
	cur = dp_current_generation_fd(dp);
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
		if (t == p->tables[i])
			table_positions(dp, t);
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
	dp_pin_generation(dp, fd);
	rc = swap_in(dp, fd);
	if (rc != 0) {
		/* The pin must keep naming what connects see: the old generation. */
		cur = dp_current_generation_fd(dp);
		if (cur >= 0) {
			dp_pin_generation(dp, cur);
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
			dp_slot_apply_drain(dp, s, want);
	}
}

/*
 * Every backend a new table lists gets its fast-ejection count back to zero:
 * the daemon's view is newer than the failures the kernel counted. Connects
 * see the new tables already, whose trees are rebuilt at their next connect.
 */
static void readmit(struct steer_dp *dp, const struct plan *p)
{
	uint32_t i, k;

	for (i = 0; i < STEER_SVC_IDS; i++) {
		const struct steer_table *t = p->tables[i];

		for (k = 0; t && k < t->n && k < STEER_MAX_BACKENDS; k++)
			if (t->e[k].slot < STEER_SLOT_IDS &&
			    __atomic_load_n(&dp->slots[t->e[k].slot].fails, __ATOMIC_RELAXED))
				__atomic_store_n(&dp->slots[t->e[k].slot].fails, 0,
						 __ATOMIC_RELEASE);
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
	dp_swap_join(dp);
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
		readmit(dp, p);
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
		dp_swap_join(dp); /* a swap that failed was reported by its publish */
}

/* The port filter in step with the registry (after adopting one). */
void dp_ports_sync(struct steer_dp *dp)
{
	ports_set(dp, NULL, false);
}
