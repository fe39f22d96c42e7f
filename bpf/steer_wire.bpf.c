// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire.bpf.c - request accounting on steered sockets, from the packets
 * (docs/algorithm.md, request accounting).
 *
 * cgroup_skb/egress sees every packet a socket of the cgroup sends: the new
 * payload bytes of a steered socket's TCP segments (not retransmissions: the
 * segment's bytes below the socket's snd_nxt were sent before) are request
 * bytes of its backend. cgroup_skb/ingress sees every packet it receives: the
 * first payload byte after a send marks what was sent as answered. Both find
 * the socket's record by cookie (steer_socks), and an unsteered socket leaves
 * after one load: it has no cookie, or no record. The accounting itself is in
 * steer_wire.bpf.h, shared with the release hook (steer.bpf.c).
 *
 * A separate object from steer.bpf.c that shares its maps by pin.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <bpf/bpf_core_read.h>
#include "steer_common.h"
#include "steer_maps.bpf.h"

/*
 * --peer-push: a request sent or answered wakes smg-steerd's peer thread,
 * which then reports to the other routers at once (docs/algorithm.md, "Several routers").
 * steer_kick[0] is 1 while a wake-up is on its way and the thread has not yet
 * read the counters: the thread sets it to 0 first and reads the counters
 * after, so a send that finds it 1 is in that read, and only a send that
 * finds it 0 writes to the ring. At most one record is in the ring; under
 * load one wake-up carries every send since the last. The thread also clears
 * it at every --peer-interval, so a lost record delays pushes by one interval
 * at most. Neither map is pinned: the daemon that loaded the programs reads
 * them.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, __u32); /* 1: a wake-up is pending */
} steer_kick SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* one page: records are 8 bytes, at most one queued */
} steer_kick_ring SEC(".maps");

static __always_inline void wire_kick(const struct steer_wire *w)
{
	__u32 zero = 0, *pending;
	__u64 rec = 1;

	if (!(w->cache_flags & STEER_TBL_PEER_PUSH))
		return;
	pending = bpf_map_lookup_elem(&steer_kick, &zero);
	/* A plain read first: the exchange would bounce the line between CPUs. */
	if (!pending || *pending || __sync_lock_test_and_set(pending, 1))
		return;
	/* Forced: the record exists only to wake the thread. */
	bpf_ringbuf_output(&steer_kick_ring, &rec, sizeof(rec), BPF_RB_FORCE_WAKEUP);
}
#define WIRE_MOVED(w) wire_kick(w)

#include "steer_wire.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

extern void *bpf_cast_to_kern_ctx(void *obj) __ksym;
extern void *bpf_rdonly_cast(void *obj, __u32 btf_id) __ksym;

/* The packet's socket and its cookie, read without creating one; 0: none. */
static __always_inline __u64 skb_cookie(struct __sk_buff *ctx, struct sk_buff **kskb,
					struct sock **sk)
{
	*kskb = bpf_cast_to_kern_ctx(ctx);
	*sk = (*kskb)->sk;
	if (!*sk)
		return 0;
	return (*sk)->__sk_common.skc_cookie.counter;
}

/*
 * The TCP segment's sequence number and payload length. The packet starts at
 * its network header; the transport header's offset is the kernel's own.
 * Returns false when the headers are not where they should be.
 */
static __always_inline bool tcp_payload(struct __sk_buff *ctx, struct sk_buff *kskb, __u32 *seq,
					__u32 *len, __u32 *off)
{
	void *data = (void *)(long)ctx->data, *end = (void *)(long)ctx->data_end;
	__u32 thoff = (__u32)(kskb->transport_header - kskb->network_header) & 0xff;
	struct tcphdr *th = data + thoff;
	__u32 hl;

	if ((void *)(th + 1) > end)
		return false;
	hl = thoff + th->doff * 4;
	if (ctx->len <= hl) {
		*len = 0;
		return true;
	}
	*len = ctx->len - hl;
	*seq = bpf_ntohl(th->seq);
	*off = hl;
	return true;
}

/*
 * A segment sent: its socket's cookie and, in *len, its new payload bytes.
 * Returns 0 (nothing to count) for a socket without a cookie (unsteered: the
 * one early return), a segment without payload, or a retransmission.
 */
static __always_inline __u64 egress_new_bytes(struct __sk_buff *ctx, __u32 *len)
{
	struct sk_buff *kskb;
	struct sock *sk;
	__u64 cookie = skb_cookie(ctx, &kskb, &sk);
	struct tcp_sock *tp;
	__u32 seq = 0, nxt, end, off;

	*len = 0;
	if (!cookie || !tcp_payload(ctx, kskb, &seq, len, &off) || !*len)
		return 0;
	/* New data only: the stack advances snd_nxt after this hook runs, so a
	 * segment's bytes below snd_nxt are a retransmission. */
	tp = bpf_rdonly_cast(sk, bpf_core_type_id_kernel(struct tcp_sock));
	nxt = tp->snd_nxt;
	end = seq + *len;
	if ((__s32)(end - nxt) <= 0)
		return 0;
	if ((__s32)(seq - nxt) < 0)
		*len = end - nxt;
	return cookie;
}

SEC("cgroup_skb/egress")
int steer_wire_out(struct __sk_buff *ctx)
{
	__u32 len;
	__u64 cookie = egress_new_bytes(ctx, &len);
	struct steer_sock *r;

	if (!cookie)
		return 1;
	r = sock_find(cookie);
	if (r)
		wire_sent(r, cookie, len);
	return 1;
}

/* The step cadence's per-socket clock (struct steer_sock_rx), by record
 * index. Not pinned: a new owner starts it afresh (the first packet on each
 * socket after that only starts a gap). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STEER_SOCK_RECORDS);
	__type(key, __u32);
	__type(value, struct steer_sock_rx);
} steer_sockrx SEC(".maps");

/* ---- Capacity pushback: the status of an answer (STEER_TBL_OVERLOAD) ---- */

/* Bytes of an answer read for its status line and a Retry-After header: one
 * segment's worth of headers is what most servers send first. */
#define ANSWER_HEAD 256
#define RETRY_AFTER "\nretry-after:"
#define RETRY_AFTER_LEN 13
/* Digits of a Retry-After read: 99999 s is more than STEER_PUSHBACK_MAX_NS. */
#define RETRY_DIGITS 5

static __always_inline char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Does head[i..] start with "\nretry-after:", any case? */
static __always_inline bool retry_after_at(const char *head, __u32 i)
{
	const char *want = RETRY_AFTER;
	__u32 k;

	for (k = 0; k < RETRY_AFTER_LEN; k++)
		if (i + k >= ANSWER_HEAD || lower(head[(i + k) & (ANSWER_HEAD - 1)]) != want[k])
			return false;
	return true;
}

/* The seconds of a Retry-After header in head's n bytes, as ns, capped at
 * STEER_PUSHBACK_MAX_NS; that cap when there is none, or when it is a date
 * (then the next good poll ends the pushback). */
static __always_inline __u64 retry_after_ns(const char *head, __u32 n)
{
	__u64 secs = 0;
	__u32 i, k, at = 0, digits = 0;

	for (i = 0; i + RETRY_AFTER_LEN < ANSWER_HEAD && i + RETRY_AFTER_LEN < n; i++)
		if (head[i] == '\n' && retry_after_at(head, i)) {
			at = i + RETRY_AFTER_LEN;
			break;
		}
	if (!at)
		return STEER_PUSHBACK_MAX_NS;
	while (at < n && at < ANSWER_HEAD && head[at & (ANSWER_HEAD - 1)] == ' ')
		at++;
	for (k = 0; k < RETRY_DIGITS && at + k < n && at + k < ANSWER_HEAD; k++) {
		char c = head[(at + k) & (ANSWER_HEAD - 1)];

		if (c < '0' || c > '9')
			break;
		secs = secs * 10 + (__u64)(c - '0');
		digits++;
	}
	if (!digits || secs * 1000000000ULL > STEER_PUSHBACK_MAX_NS)
		return STEER_PUSHBACK_MAX_NS;
	return secs * 1000000000ULL;
}

/*
 * The first segment of an answer, from its payload at off (len bytes): an
 * HTTP/1.x status line says whether the backend pushes back (429, 503) or
 * failed (another 5xx). HTTP/2, TLS and anything else read as plain.
 */
static __always_inline void read_answer(struct __sk_buff *ctx, __u32 off, __u32 len,
					struct wire_answer *ans)
{
	char head[ANSWER_HEAD];
	__u32 n = len < ANSWER_HEAD ? len : ANSWER_HEAD, code;

	ans->kind = ANSWER_PLAIN;
	if (n < 12 || bpf_skb_load_bytes(ctx, off, head, 12))
		return;
	if (head[0] != 'H' || head[1] != 'T' || head[2] != 'T' || head[3] != 'P' ||
	    head[4] != '/' || head[5] != '1' || head[6] != '.' || head[8] != ' ' || head[9] < '1' ||
	    head[9] > '5' || head[10] < '0' || head[10] > '9' || head[11] < '0' || head[11] > '9')
		return;
	code = (head[9] - '0') * 100 + (head[10] - '0') * 10 + (head[11] - '0');
	if (code != 429 && code < 500)
		return;
	if (code != 429 && code != 503) {
		ans->kind = ANSWER_ERROR;
		return;
	}
	ans->kind = ANSWER_PUSHBACK;
	ans->hold_ns = STEER_PUSHBACK_MAX_NS;
	/* n is 12..ANSWER_HEAD; the mask says so to the verifier */
	if (bpf_skb_load_bytes(ctx, off, head, ((n - 1) & (ANSWER_HEAD - 1)) + 1) == 0)
		ans->hold_ns = retry_after_ns(head, n);
}

SEC("cgroup_skb/ingress")
int steer_wire_in(struct __sk_buff *ctx)
{
	struct sk_buff *kskb;
	struct sock *sk;
	__u64 cookie = skb_cookie(ctx, &kskb, &sk), at;
	struct steer_sock_rx *rx;
	struct steer_sock *r;
	__u32 seq = 0, len = 0, idx = 0, off = 0;

	if (!cookie)
		return 1;
	if (!tcp_payload(ctx, kskb, &seq, &len, &off) || !len)
		return 1; /* a pure ACK answers nothing */
	r = sock_find_idx(cookie, &idx);
	if (!r)
		return 1;
	if (r->unanswered) {
		struct wire_answer ans = { .kind = ANSWER_PLAIN };

		if (r->flags & STEER_SOCK_STATUS)
			read_answer(ctx, off, len, &ans);
		/* The answer; with the step cadence on, the socket's clock starts. */
		at = wire_answered(r, cookie, &ans);
		rx = at ? bpf_map_lookup_elem(&steer_sockrx, &idx) : 0;
		if (rx) {
			rx->cookie = cookie;
			rx->last_ns = at;
		}
		return 1;
	}
	/* A later packet: a step, if the socket's clock runs (the cadence on). */
	rx = bpf_map_lookup_elem(&steer_sockrx, &idx);
	if (rx)
		wire_step(r, cookie, rx);
	return 1;
}

/* A syscall program's service, by the id user space wrote: its tree and
 * statistics, or false when the id is out of range or has none. */
static __always_inline bool apply_service(__u32 svc_id, struct steer_svc_tree **tr,
					  struct steer_svc_stats **st)
{
	__u32 id = svc_id & (STEER_SVC_IDS - 1);

	if (svc_id >= STEER_SVC_IDS)
		return false;
	*tr = bpf_map_lookup_elem(&steer_tree, &id);
	*st = bpf_map_lookup_elem(&steer_svcst, &id);
	return *tr && *st;
}

/* The slot is still the one the daemon mapped: the same owner generation,
 * the same service (else its counters started afresh since). */
static __always_inline bool apply_slot_same(const struct steer_slot *s, __u32 gen, __u32 svc_id)
{
	return s->gen == gen && s->svc_id == svc_id;
}

/* steer_peer_apply's argument, written by smg-steerd through an mmap of this
 * map just before each run (one thread writes and runs). Not pinned: the
 * daemon that loaded the program is its only user. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct steer_peer_batch);
} steer_peer_in SEC(".maps");

/*
 * The other routers' reports (--peer, docs/algorithm.md, "Several routers"): smg-steerd runs
 * this with BPF_PROG_TEST_RUN after writing into steer_peer_in the changes of
 * up to STEER_PEER_BATCH slots of one service since its last run. The tree's
 * keys change only under the service's lock, which user space cannot take;
 * this program takes it, applies each change to the slot's fluid estimate
 * (steer_busy_peer) and re-keys the slot's leaf, so that the kernel's pick
 * stays exactly steer_select_at()'s. A slot whose owner or service changed
 * since the daemon mapped it is skipped (its counters started afresh).
 */
SEC("syscall")
int steer_peer_apply(void *ctx)
{
	__u32 zero = 0, id, n, applied = 0, i;
	struct steer_peer_batch *b = bpf_map_lookup_elem(&steer_peer_in, &zero);
	struct steer_slot_array *all = slots_all();
	struct steer_wire_array *wall = wire_all();
	struct steer_svc_tree *tr;
	struct steer_svc_stats *st;
	__u64 clock, now;

	if (!b)
		return 1;
	b->applied = 0;
	/* A syscall program may not read the coarse clock the keys are at; the
	 * daemon read it just before. Never later than the precise clock. */
	clock = bpf_ktime_get_ns();
	if (b->clock_ns && b->clock_ns < clock)
		clock = b->clock_ns;
	id = b->svc_id;
	n = b->n;
	if (!all || !wall || !apply_service(id, &tr, &st))
		return 1;
	bpf_spin_lock(&tr->lock);
	now = key_clock(st, clock);
	for (i = 0; i < STEER_PEER_BATCH && i < n; i++) {
		struct steer_peer_delta *d = &b->d[i & (STEER_PEER_BATCH - 1)];
		struct steer_slot *s = slot_in(all, d->slot);
		struct steer_wire *w = wire_in(wall, d->slot);

		if (!apply_slot_same(s, d->slot_gen, id))
			continue;
		/* No connect here has cached the table's rate since the tree was
		 * built (a backend this router has not steered to lately): the
		 * published one, until the next build writes the cache. */
		if ((!w->cache_tgen || w->cache_tgen != tr->tgen) && d->ns_per_token)
			w->cache_npt = d->ns_per_token;
		steer_busy_peer(w, now, d->sent_tokens, d->answered_tokens);
		steer_tree_rekey(tr, s, w, &st->tree_clock);
		applied++;
	}
	bpf_spin_unlock(&tr->lock);
	b->applied = applied;
	return 0;
}

/* steer_probe_apply's argument, as steer_peer_in is steer_peer_apply's (the
 * probe thread writes and runs it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct steer_probe_batch);
} steer_probe_in SEC(".maps");

/*
 * The step probe's packets (--step-probe, docs/algorithm.md, "The step probe"): each is a
 * step end of its backend's engine, as a streamed response's later packet is
 * in steer_wire_in. The new step_until is written and the leaf re-keyed under
 * the service's lock whether it rose or fell: the probe thread batches, so
 * the lock is taken once per batch, not per packet.
 */
SEC("syscall")
int steer_probe_apply(void *ctx)
{
	__u32 zero = 0, id, n, applied = 0, i;
	struct steer_probe_batch *b = bpf_map_lookup_elem(&steer_probe_in, &zero);
	struct steer_slot_array *all = slots_all();
	struct steer_wire_array *wall = wire_all();
	struct steer_svc_tree *tr;
	struct steer_svc_stats *st;

	if (!b)
		return 1;
	b->applied = 0;
	id = b->svc_id;
	n = b->n;
	if (!all || !wall || !apply_service(id, &tr, &st))
		return 1;
	bpf_spin_lock(&tr->lock);
	for (i = 0; i < STEER_PROBE_BATCH && i < n; i++) {
		struct steer_probe_step *p = &b->p[i & (STEER_PROBE_BATCH - 1)];
		struct steer_slot *s = slot_in(all, p->slot);
		struct steer_wire *w = wire_in(wall, p->slot);

		if (!apply_slot_same(s, p->slot_gen, id))
			continue;
		w->step_until_ns = steer_step_next(w, p->last_ns, p->at_ns);
		steer_tree_rekey(tr, s, w, &st->tree_clock);
		applied++;
	}
	bpf_spin_unlock(&tr->lock);
	b->applied = applied;
	return 0;
}
