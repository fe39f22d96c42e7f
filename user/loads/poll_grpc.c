// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * poll_grpc.c - GetLoads over the gRPC core C API.
 *
 * Every backend has its own channel; all calls complete on one completion
 * queue that the caller drains in steer_poller_next(). A call's tag is its
 * own context, which remembers the handle and the handle's generation, so a
 * result for a handle that was removed (or removed and reused) in the
 * meantime is recognised and dropped.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "loads_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
/* The first reconnect attempts come quickly: a restarted engine is polled
 * again at the next interval, not after gRPC's default 1 s..120 s backoff. */
#define RECONNECT_BACKOFF_MS 100
/* A busy engine may take a while to finish the HTTP/2 handshake; an attempt
 * cut short just starts over. Shorter than gRPC's 20 s so that a backend
 * that was unreachable (no RST) is tried with a fresh SYN soon after. */
#define CONNECT_TIMEOUT_MS 5000
#define TARGET_MAX 96

/* One call in flight; its address is the completion queue tag. */
struct poll_call {
	int handle;
	uint32_t gen;  /* the handle's generation when the call started */
	bool orphaned; /* the handle went away: swallow the result */
	grpc_call *call;
	grpc_byte_buffer *request;
	grpc_byte_buffer *response;
	grpc_metadata_array initial_md;
	grpc_metadata_array trailing_md;
	grpc_status_code status;
	grpc_slice details;
	grpc_metadata auth_md; /* "authorization: Bearer ..." when the handle has a token */
	int engine;	       /* enum steer_engine: which GetLoads, which decoder */
	uint64_t started_ns;
};

struct poll_handle {
	bool used;
	uint32_t gen;
	void *tag;
	grpc_channel *channel;
	struct poll_call *inflight;
	char *authorization; /* "Bearer <token>", or NULL */
};

struct steer_poller {
	grpc_completion_queue *cq;
	struct poll_handle *handles;
	size_t n_handles;   /* slots, used or not */
	size_t outstanding; /* calls whose tag has not come back yet */
};

/* gRPC's monotonic clock has its own origin; convert through "from now". */
static gpr_timespec grpc_deadline_in(uint64_t ns_from_now)
{
	/* Far enough to mean "never", small enough not to overflow. */
	const uint64_t cap = (uint64_t)INT64_MAX / 4;
	int64_t ns = (int64_t)(ns_from_now < cap ? ns_from_now : cap);

	return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_nanos(ns, GPR_TIMESPAN));
}

static gpr_timespec grpc_deadline_at(uint64_t deadline_ns)
{
	uint64_t now = steer_monotonic_ns();

	return grpc_deadline_in(deadline_ns > now ? deadline_ns - now : 0);
}

/*
 * absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle) as Debian's
 * abseil exports it (inline namespace debian3; the enum is an int, kIgnore is
 * 0). Debian builds abseil without NDEBUG, so every absl::Mutex lock gRPC
 * takes also updates a lock-order graph: 6-7% of the daemon's CPU at 1,000
 * backends (perf: GraphCycles::GetId) and ~6 MiB of RSS for the graph.
 * Weak: with an abseil that names it differently the pointer is NULL and the
 * detection simply stays as it was. Not linked explicitly: libgrpc already
 * loads libabsl_synchronization, and the loader binds the symbol from there.
 */
extern void steer_absl_set_deadlock_detection(int mode) __asm__(
	"_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE")
	__attribute__((weak));
#define ABSL_ON_DEADLOCK_CYCLE_IGNORE 0

struct steer_poller *steer_poller_new(void)
{
	struct steer_poller *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	/* Before grpc_init, so that no gRPC mutex enters the graph at all. */
	if (steer_absl_set_deadlock_detection)
		steer_absl_set_deadlock_detection(ABSL_ON_DEADLOCK_CYCLE_IGNORE);
	grpc_init(); /* gRPC counts initialisations; the last shutdown cleans up */
	p->cq = grpc_completion_queue_create_for_next(NULL);
	if (!p->cq) {
		grpc_shutdown();
		free(p);
		return NULL;
	}
	return p;
}

static void release_call(struct poll_call *c)
{
	if (c->call)
		grpc_call_unref(c->call);
	if (c->request)
		grpc_byte_buffer_destroy(c->request);
	if (c->response)
		grpc_byte_buffer_destroy(c->response);
	grpc_metadata_array_destroy(&c->initial_md);
	grpc_metadata_array_destroy(&c->trailing_md);
	grpc_slice_unref(c->details);
	grpc_slice_unref(c->auth_md.key);
	grpc_slice_unref(c->auth_md.value);
	free(c);
}

static struct poll_handle *handle_at(const struct steer_poller *p, int handle)
{
	if (handle < 0 || (size_t)handle >= p->n_handles || !p->handles[handle].used)
		return NULL;
	return &p->handles[handle];
}

/* "127.0.0.1:30000" -> "ipv4:127.0.0.1:30000", "[::1]:30000" ->
 * "ipv6:[::1]:30000": literal addresses only, so no resolver is involved. */
static int grpc_target(const char *addr, char *out, size_t out_len)
{
	char host[INET6_ADDRSTRLEN];
	unsigned char bin[sizeof(struct in6_addr)];
	const char *port_str, *end;
	bool v6 = addr[0] == '[';
	size_t host_len;
	char *tail;
	long port;

	if (v6) {
		end = strchr(addr, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		host_len = (size_t)(end - addr - 1);
		port_str = end + 2;
		addr++;
	} else {
		end = strrchr(addr, ':');
		if (!end)
			return -EINVAL;
		host_len = (size_t)(end - addr);
		port_str = end + 1;
	}
	if (host_len == 0 || host_len >= sizeof(host))
		return -EINVAL;
	memcpy(host, addr, host_len);
	host[host_len] = 0;
	if (inet_pton(v6 ? AF_INET6 : AF_INET, host, bin) != 1)
		return -EINVAL;
	errno = 0;
	port = strtol(port_str, &tail, 10);
	if (errno || tail == port_str || *tail || port < 1 || port > 65535)
		return -EINVAL;
	if ((size_t)snprintf(out, out_len, v6 ? "ipv6:[%s]:%ld" : "ipv4:%s:%ld", host, port) >=
	    out_len)
		return -EINVAL;
	return 0;
}

#define GRPC_ANSWER_MAX (256 << 10)

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static grpc_channel *open_channel(const char *target, uint32_t max_backoff_ms)
{
	int max_backoff = (int)clamp_u32(max_backoff_ms, RECONNECT_BACKOFF_MS, INT32_MAX);
	grpc_arg args[] = {
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
		  .value.integer = RECONNECT_BACKOFF_MS },
		/* Despite its name, the floor of a connect attempt's timeout. */
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
		  .value.integer = CONNECT_TIMEOUT_MS },
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
		  .value.integer = max_backoff },
		/* A failed poll is reported, not retried: the next interval is the retry. */
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_RETRIES, .value.integer = 0 },
		/* Responses are a few hundred bytes: bandwidth probing only adds a
		 * PING and its ack to every call. */
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_HTTP2_BDP_PROBE, .value.integer = 0 },
		{ .type = GRPC_ARG_INTEGER, .key = GRPC_ARG_ENABLE_CHANNELZ, .value.integer = 0 },
		/* gRPC holds a whole message before handing it over: 4 MiB by
		 * default, per backend. 1,024 ranks of every core field are about
		 * 90 KiB; a larger answer is refused from its length prefix. */
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
		  .value.integer = GRPC_ANSWER_MAX },
		{ .type = GRPC_ARG_INTEGER,
		  .key = GRPC_ARG_MAX_CHANNEL_TRACE_EVENT_MEMORY_PER_NODE,
		  .value.integer = 0 },
	};
	grpc_channel_args chargs = { .num_args = sizeof(args) / sizeof(args[0]), .args = args };
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch;

	if (!creds)
		return NULL;
	ch = grpc_channel_create(target, creds, &chargs);
	grpc_channel_credentials_release(creds);
	return ch;
}

static int free_slot(struct steer_poller *p)
{
	struct poll_handle *grown;
	size_t i, n;

	for (i = 0; i < p->n_handles; i++)
		if (!p->handles[i].used)
			return (int)i;
	if (p->n_handles >= INT32_MAX / 2)
		return -ENOSPC;
	n = p->n_handles ? p->n_handles * 2 : 16;
	grown = realloc(p->handles, n * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	memset(grown + p->n_handles, 0, (n - p->n_handles) * sizeof(*grown));
	p->handles = grown;
	i = p->n_handles;
	p->n_handles = n;
	return (int)i;
}

int steer_poller_add(struct steer_poller *p, const char *target, void *tag, uint32_t max_backoff_ms)
{
	char grpc_tgt[TARGET_MAX];
	struct poll_handle *h;
	int rc, idx;

	if (!p || !target)
		return -EINVAL;
	rc = grpc_target(target, grpc_tgt, sizeof(grpc_tgt));
	if (rc)
		return rc;
	idx = free_slot(p);
	if (idx < 0)
		return idx;
	h = &p->handles[idx];
	h->channel = open_channel(grpc_tgt, max_backoff_ms);
	if (!h->channel)
		return -ENOMEM;
	h->used = true;
	h->gen++;
	h->tag = tag;
	h->inflight = NULL;
	return idx;
}

/* Cancel the handle's call, if any; its completion still comes back through
 * the queue (that is when its memory is freed) and is dropped there. */
static void orphan_inflight(struct poll_handle *h)
{
	if (!h->inflight)
		return;
	h->inflight->orphaned = true;
	grpc_call_cancel(h->inflight->call, NULL);
	h->inflight = NULL;
}

static void free_authorization(struct poll_handle *h)
{
	if (!h->authorization)
		return;
	explicit_bzero(h->authorization, strlen(h->authorization));
	free(h->authorization);
	h->authorization = NULL;
}

int steer_poller_set_auth(struct steer_poller *p, int handle, const char *token)
{
	struct poll_handle *h = p ? handle_at(p, handle) : NULL;
	char *value = NULL;

	if (!h)
		return -EINVAL;
	if (token && !(value = steer_secret_join("Bearer ", token)))
		return -ENOMEM;
	free_authorization(h);
	h->authorization = value;
	return 0;
}

void steer_poller_remove(struct steer_poller *p, int handle)
{
	struct poll_handle *h = p ? handle_at(p, handle) : NULL;

	if (!h)
		return;
	orphan_inflight(h);
	/* A call holds its own reference on the channel's stack. */
	grpc_channel_destroy(h->channel);
	h->channel = NULL;
	free_authorization(h);
	h->used = false;
	h->gen++;
	h->tag = NULL;
}

int steer_poller_busy(const struct steer_poller *p, int handle)
{
	const struct poll_handle *h = p ? handle_at(p, handle) : NULL;

	return h && h->inflight;
}

/* An empty GetLoadsRequest, the same zero bytes for every engine: every DP
 * rank, the engine's default sections (the core metrics, which are all
 * smg-steer reads, are always included). */
static grpc_byte_buffer *pack_request(void)
{
	grpc_slice s = grpc_empty_slice();
	grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);

	grpc_slice_unref(s);
	return bb;
}

static grpc_call_error start_batch(struct poll_call *c)
{
	grpc_op ops[6];

	memset(ops, 0, sizeof(ops));
	/* No GRPC_INITIAL_METADATA_WAIT_FOR_READY: a backend that is down
	 * fails fast with UNAVAILABLE instead of holding the call. */
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (GRPC_SLICE_LENGTH(c->auth_md.value)) {
		ops[0].data.send_initial_metadata.count = 1;
		ops[0].data.send_initial_metadata.metadata = &c->auth_md;
	}
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = c->request;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->initial_md;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &c->response;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &c->trailing_md;
	ops[5].data.recv_status_on_client.status = &c->status;
	ops[5].data.recv_status_on_client.status_details = &c->details;
	return grpc_call_start_batch(c->call, ops, sizeof(ops) / sizeof(ops[0]), c, NULL);
}

int steer_poller_start(struct steer_poller *p, int handle, uint64_t timeout_ns)
{
	return steer_poller_start_engine(p, handle, timeout_ns, STEER_ENGINE_SGLANG);
}

int steer_poller_start_engine(struct steer_poller *p, int handle, uint64_t timeout_ns, int engine)
{
	struct poll_handle *h = p ? handle_at(p, handle) : NULL;
	grpc_slice method;
	struct poll_call *c;

	if (!h)
		return -EINVAL;
	if (h->inflight)
		return -EBUSY;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->handle = handle;
	c->gen = h->gen;
	c->details = grpc_empty_slice();
	c->engine = engine;
	c->auth_md.key = grpc_empty_slice();
	c->auth_md.value = grpc_empty_slice();
	if (h->authorization) {
		c->auth_md.key = grpc_slice_from_static_string("authorization");
		c->auth_md.value = grpc_slice_from_copied_string(h->authorization);
	}
	grpc_metadata_array_init(&c->initial_md);
	grpc_metadata_array_init(&c->trailing_md);
	c->started_ns = steer_monotonic_ns();
	c->request = pack_request();
	if (!c->request) {
		release_call(c);
		return -ENOMEM;
	}
	if (!steer_grpc_method(engine)) {
		release_call(c);
		return -EINVAL;
	}
	method = grpc_slice_from_static_string(steer_grpc_method(engine));
	c->call = grpc_channel_create_call(h->channel, NULL, GRPC_PROPAGATE_DEFAULTS, p->cq, method,
					   NULL, grpc_deadline_in(timeout_ns), NULL);
	grpc_slice_unref(method);
	if (!c->call) {
		release_call(c);
		return -ENOMEM;
	}
	if (start_batch(c) != GRPC_CALL_OK) {
		release_call(c);
		return -EIO;
	}
	h->inflight = c;
	p->outstanding++;
	return 0;
}

enum steer_poll_kind steer_poller_decode(const uint8_t *buf, size_t len, struct steer_load *load,
					 char *detail, size_t detail_len)
{
	return steer_decode_grpc(STEER_ENGINE_SGLANG, buf, len, load, detail, detail_len);
}

static enum steer_poll_kind kind_of_status(grpc_status_code status)
{
	switch (status) {
	case GRPC_STATUS_OK:
		return STEER_POLL_OK;
	case GRPC_STATUS_UNIMPLEMENTED:
		return STEER_POLL_UNIMPLEMENTED;
	case GRPC_STATUS_UNAVAILABLE:
		return STEER_POLL_UNAVAILABLE;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return STEER_POLL_DEADLINE;
	default:
		return STEER_POLL_ERROR;
	}
}

/* A status OK response: decode and validate its message. */
static void decode_response(struct poll_call *c, struct steer_poll_result *out)
{
	grpc_byte_buffer_reader reader;
	grpc_slice all;

	if (!c->response) {
		out->kind = STEER_POLL_INVALID;
		snprintf(out->detail, sizeof(out->detail), "status OK without a response message");
		return;
	}
	if (!grpc_byte_buffer_reader_init(&reader, c->response)) {
		out->kind = STEER_POLL_INVALID;
		snprintf(out->detail, sizeof(out->detail), "cannot read the response message");
		return;
	}
	all = grpc_byte_buffer_reader_readall(&reader);
	grpc_byte_buffer_reader_destroy(&reader);
	out->kind = steer_decode_grpc(c->engine, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all),
				      &out->load, out->detail, sizeof(out->detail));
	grpc_slice_unref(all);
}

static void fill_result(struct poll_call *c, void *tag, struct steer_poll_result *out)
{
	memset(out, 0, sizeof(*out));
	out->tag = tag;
	out->started_ns = c->started_ns;
	out->duration_ns = steer_monotonic_ns() - c->started_ns;
	out->kind = kind_of_status(c->status);
	if (out->kind == STEER_POLL_OK) {
		decode_response(c, out); /* OK or INVALID; grpc_status stays 0 */
		return;
	}
	out->grpc_status = (int)c->status;
	snprintf(out->detail, sizeof(out->detail), "%.*s", (int)GRPC_SLICE_LENGTH(c->details),
		 (const char *)GRPC_SLICE_START_PTR(c->details));
}

/* A tag came back: report it (1) unless its handle is gone (0). */
static int finish_call(struct steer_poller *p, struct poll_call *c, bool success,
		       struct steer_poll_result *out)
{
	struct poll_handle *h = c->orphaned ? NULL : handle_at(p, c->handle);
	int reported = 0;

	p->outstanding--;
	if (h && h->gen == c->gen && h->inflight == c) {
		h->inflight = NULL;
		if (!success) {
			/* The batch itself failed (never seen for a client batch
			 * with RECV_STATUS; kept so nothing is silently lost). */
			c->status = GRPC_STATUS_INTERNAL;
		}
		fill_result(c, h->tag, out);
		reported = 1;
	}
	release_call(c);
	return reported;
}

int steer_poller_next(struct steer_poller *p, uint64_t deadline_ns, struct steer_poll_result *out)
{
	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(p->cq, grpc_deadline_at(deadline_ns), NULL);

		if (ev.type == GRPC_QUEUE_TIMEOUT)
			return 0;
		if (ev.type != GRPC_OP_COMPLETE)
			return 0; /* shutdown: only steer_poller_free does that */
		if (finish_call(p, ev.tag, ev.success, out))
			return 1;
	}
}

/* Cancel everything, wait for every tag, then shut the queue down. */
void steer_poller_free(struct steer_poller *p)
{
	struct steer_poll_result ignored;
	size_t i;

	if (!p)
		return;
	for (i = 0; i < p->n_handles; i++)
		if (p->handles[i].used)
			steer_poller_remove(p, (int)i);
	while (p->outstanding) {
		grpc_event ev = grpc_completion_queue_next(
			p->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type != GRPC_OP_COMPLETE)
			break;
		finish_call(p, ev.tag, ev.success, &ignored);
	}
	grpc_completion_queue_shutdown(p->cq);
	while (grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(p->cq);
	free(p->handles);
	free(p);
	grpc_shutdown();
}
