// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * counters.c - the per-backend counters, drains and the view.
 *
 * The kernel writes a slot's counters under its service's lock and only ever
 * adds; user space never writes a field the kernel writes. A drain therefore
 * adds to drained_tokens (in flight = inflight_tokens - drained_tokens), and
 * every change that the kernel's selection tree caches (drained_tokens, a
 * drain flag, a slot's owner) is followed by a bump of the service's epoch,
 * after which the next connect rebuilds the tree from the counters as they are.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "dataplane_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bpf/bpf.h>

int dp_svc_id_of(const struct steer_dp *dp, const struct steer_addr *vip)
{
	int i;

	for (i = 0; i < STEER_SVC_IDS; i++)
		if (dp->svc_used[i] && steer_addr_equal(&dp->svc_vip[i], vip))
			return i;
	return -ENOENT;
}

/* The kernel rebuilds this service's selection tree at its next connect. */
void dp_svc_touch(struct steer_dp *dp, uint32_t svc_id)
{
	if (svc_id < STEER_SVC_IDS)
		__atomic_fetch_add(&dp->svcst[svc_id].epoch, 1, __ATOMIC_RELEASE);
}

/* Zero a slot for its new owner. The generation goes first, so that a release
 * of a socket of the previous owner no longer matches it. No table points at
 * the slot yet, so the kernel writes none of these fields meanwhile (but a
 * release racing this may still count one close: see steer_dp_live). */
void dp_slot_reset(struct steer_dp *dp, uint32_t s, uint32_t svc_id, bool drained)
{
	struct steer_slot *c = &dp->slots[s];

	__atomic_fetch_add(&c->gen, 1, __ATOMIC_ACQ_REL);
	__atomic_store_n(&c->inflight_tokens, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->drained_tokens, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->steered, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->fallbacks, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->live, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->closed, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->svc_id, svc_id, __ATOMIC_RELEASE);
	__atomic_store_n(&c->fails, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&c->flags, drained ? STEER_SLOT_DRAINED : 0, __ATOMIC_RELEASE);
	memset(&dp->bkinfo[s], 0, sizeof(dp->bkinfo[s]));
	dp_wire_reset(dp, s);
	dp_svc_touch(dp, svc_id);
}

void dp_slot_apply_drain(struct steer_dp *dp, uint32_t s, bool drained)
{
	if (drained)
		__atomic_fetch_or(&dp->slots[s].flags, STEER_SLOT_DRAINED, __ATOMIC_RELEASE);
	else
		__atomic_fetch_and(&dp->slots[s].flags, ~(__u32)STEER_SLOT_DRAINED,
				   __ATOMIC_RELEASE);
	dp_svc_touch(dp, __atomic_load_n(&dp->slots[s].svc_id, __ATOMIC_ACQUIRE));
}

void steer_dp_set_overloaded(struct steer_dp *dp, uint32_t slot, bool overloaded)
{
	__u32 was;

	if (slot >= STEER_SLOT_IDS)
		return;
	if (overloaded)
		was = __atomic_fetch_or(&dp->slots[slot].flags, STEER_SLOT_OVERLOADED,
					__ATOMIC_RELEASE);
	else
		was = __atomic_fetch_and(&dp->slots[slot].flags, ~(__u32)STEER_SLOT_OVERLOADED,
					 __ATOMIC_RELEASE);
	if (!(was & STEER_SLOT_OVERLOADED) != !overloaded)
		dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
}

int steer_dp_slot(const struct steer_dp *dp, const struct steer_addr *vip,
		  const struct steer_addr *backend, uint32_t *slot)
{
	struct steer_bk_key k = { .vip = *vip, .backend = *backend };
	uint32_t s = dp_slot_find(dp, &k);

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
	const struct steer_slot *s;
	uint64_t drained;

	if (slot >= STEER_SLOT_IDS)
		return 0;
	s = &dp->slots[slot];
	/* Drained first: the credit read after it is at least as large. */
	drained = __atomic_load_n(&s->drained_tokens, __ATOMIC_ACQUIRE);
	return __atomic_load_n(&s->inflight_tokens, __ATOMIC_ACQUIRE) - drained;
}

void steer_dp_inflight_sub(struct steer_dp *dp, uint32_t slot, uint64_t tokens)
{
	__u64 *drained, cur, credited, take;

	if (slot >= STEER_SLOT_IDS || !tokens)
		return;
	dp_wire_drained(dp, slot);
	drained = &dp->slots[slot].drained_tokens;
	cur = __atomic_load_n(drained, __ATOMIC_ACQUIRE);
	/* Compare-and-swap: a caller that subtracts more than is in flight
	 * stops at zero instead of wrapping to a huge score. The kernel only
	 * adds to inflight_tokens, so in flight never goes negative after. */
	do {
		credited = __atomic_load_n(&dp->slots[slot].inflight_tokens, __ATOMIC_ACQUIRE);
		take = credited - cur < tokens ? credited - cur : tokens;
	} while (!__atomic_compare_exchange_n(drained, &cur, cur + take, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	if (take)
		dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
}

uint64_t steer_dp_inflight_exchange(struct steer_dp *dp, uint32_t slot)
{
	__u64 *drained, cur, credited;

	if (slot >= STEER_SLOT_IDS)
		return 0;
	dp_wire_drained(dp, slot);
	drained = &dp->slots[slot].drained_tokens;
	cur = __atomic_load_n(drained, __ATOMIC_ACQUIRE);
	do {
		credited = __atomic_load_n(&dp->slots[slot].inflight_tokens, __ATOMIC_ACQUIRE);
	} while (!__atomic_compare_exchange_n(drained, &cur, credited, false, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	if (credited != cur)
		dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
	return credited - cur;
}

int64_t steer_dp_live(const struct steer_dp *dp, uint32_t slot)
{
	const struct steer_slot *s;
	uint64_t closed;
	int64_t v;

	if (slot >= STEER_SLOT_IDS)
		return 0;
	s = &dp->slots[slot];
	closed = __atomic_load_n(&s->closed, __ATOMIC_ACQUIRE);
	v = (int64_t)((uint64_t)__atomic_load_n(&s->live, __ATOMIC_ACQUIRE) - closed);
	return v < 0 ? 0 : v; /* a release racing a slot reset can leave -1 */
}

uint32_t steer_dp_fails(const struct steer_dp *dp, uint32_t slot)
{
	return slot < STEER_SLOT_IDS ? __atomic_load_n(&dp->slots[slot].fails, __ATOMIC_ACQUIRE)
				     : 0;
}

void steer_dp_readmit(struct steer_dp *dp, uint32_t slot)
{
	if (slot >= STEER_SLOT_IDS || !__atomic_load_n(&dp->slots[slot].fails, __ATOMIC_ACQUIRE))
		return;
	__atomic_store_n(&dp->slots[slot].fails, 0, __ATOMIC_RELEASE);
	dp_svc_touch(dp, __atomic_load_n(&dp->slots[slot].svc_id, __ATOMIC_ACQUIRE));
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
	/* Takes effect at the next connect: its service's tree is rebuilt. */
	for (s = 0; s < STEER_SLOT_IDS; s++)
		if (dp->slot_used[s] && steer_addr_equal(&dp->slot_key[s].backend, backend))
			dp_slot_apply_drain(dp, s, drained);
	return 0;
}

/* ---- inspection ------------------------------------------------------------- */

/* A copy of a slot's counters with the differences taken (see steer_slot). */
static void counters_copy(const struct steer_dp *dp, uint32_t slot, struct steer_slot *out)
{
	memcpy(out, &dp->slots[slot], sizeof(*out));
	out->inflight_tokens = steer_dp_inflight_read(dp, slot);
	out->drained_tokens = 0;
	out->live = steer_dp_live(dp, slot);
	out->closed = 0;
}

static void view_backend_fill(const struct steer_dp *dp, struct steer_view_backend *b,
			      uint32_t slot, const struct steer_addr *addr)
{
	b->addr = *addr;
	b->slot = slot;
	b->rank = -1;
	counters_copy(dp, slot, &b->ctr);
	if (dp->wire)
		memcpy(&b->wire, &dp->wire[slot], sizeof(b->wire));
	b->pending_bytes = steer_dp_pending_bytes(dp, slot);
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
		vs->bytes_per_token = steer_bytes_per_token(t->bytes_per_token);
		vs->table_flags = t->flags;
		vs->wait_bound_ns = t->wait_bound_ns;
		vs->affinity = t->affinity;
		vs->affinity_slack_ns = t->affinity_slack_ns;
		vs->affinity_idle_ns = t->affinity_idle_ns;
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
	int cur = dp_current_generation_fd(dp);
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
	int i = dp_svc_id_of(dp, vip);

	if (i < 0)
		return i;
	memcpy(out, &dp->svcst[i], sizeof(*out));
	return 0;
}

void steer_view_free(struct steer_view *v)
{
	size_t i;

	for (i = 0; v->services && i < v->n_services; i++)
		free(v->services[i].backends);
	free(v->services);
	memset(v, 0, sizeof(*v));
}

int steer_dp_sockets_tracked(const struct steer_dp *dp, size_t *out)
{
	size_t len = (size_t)STEER_SOCK_RECORDS * sizeof(struct steer_sock), i;
	const struct steer_sock *r;
	void *p;

	p = mmap(NULL, len, PROT_READ, MAP_SHARED, dp->socks_fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	r = p;
	*out = 0;
	for (i = 0; i < STEER_SOCK_RECORDS; i++)
		*out += __atomic_load_n(&r[i].cookie, __ATOMIC_RELAXED) != 0;
	munmap(p, len);
	return 0;
}

int steer_dp_service_id(const struct steer_dp *dp, const struct steer_addr *vip)
{
	return dp_svc_id_of(dp, vip);
}
