// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * loads.c - one poll of a backend's load, over whichever source it has.
 *
 * A handle has a plan: the steps (sources) it may read, in the order they
 * are tried. A configured source is a plan of one step; engine=auto over
 * gRPC tries SGLang, TokenSpeed and vLLM's GetLoads; auto on the traffic
 * port (no loads=) goes on to HTTP /v1/loads, /metrics and finally a TCP
 * connect. While a handle is probing, a poll walks the plan until a step
 * answers; the step that answered is then kept ("locked") for every later
 * poll, until reprobe_after consecutive polls fail.
 *
 * A step either answers (a load, or for TCP a completed connect), says the
 * source is absent (UNIMPLEMENTED, HTTP 404, not the protocol, garbage), or
 * fails (refused, deadline, garbage, HTTP 401/5xx). Absent moves on to the next step;
 * a failure ends the poll as failed. A gRPC step that cannot reach a gRPC
 * server skips the other gRPC steps: it is the same port and transport.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "loads_int.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define NS_PER_MS 1000000ULL
/* While gRPC calls and HTTP transfers are both in flight (only for a few
 * milliseconds of a cycle), each gets the thread for this long in turn. */
#define MIXED_SLICE_NS (1 * NS_PER_MS)
#define MAX_STEPS 6
#define ADDR_MAX 64

enum step {
	STEP_GRPC_SGLANG,
	STEP_GRPC_TOKENSPEED,
	STEP_GRPC_VLLM,
	STEP_HTTP_LOADS,
	STEP_HTTP_METRICS,
	STEP_TCP,
};

#define LOADS_PATH "/v1/loads?include=core"
#define METRICS_PATH "/metrics"

struct src_handle {
	bool used;
	void *tag;
	int engine; /* enum steer_engine: the metric names /metrics may use */
	char loads_addr[ADDR_MAX], traffic_addr[ADDR_MAX];
	char path[STEER_LOADS_PATH_MAX]; /* HTTP path when configured, else "" */
	char *token;
	uint32_t reprobe_after, max_backoff_ms;

	enum step plan[MAX_STEPS];
	size_t n_plan;
	bool locked;	       /* plan[step] answered and is kept */
	size_t step;	       /* the step being tried (or kept) */
	enum steer_source src; /* what the kept step reported (metrics: its flavour) */
	uint32_t consec_fail;

	int grpc, http, tcp; /* lower handles, created when first needed; -1: none */
	bool grpc_running;
	bool running;
	uint64_t started_ns, timeout_ns;
	bool answered; /* probing: some step reached a live peer */
};

struct steer_loads {
	struct steer_poller *grpc;
	struct steer_http *http;
	struct src_handle *h;
	size_t n_h;
	size_t grpc_outstanding;
	struct steer_loads_result *ready; /* finished polls not yet returned */
	size_t n_ready, cap_ready;
};

/* ---- the plan ----------------------------------------------------------------- */

static bool step_is_grpc(enum step s)
{
	return s <= STEP_GRPC_VLLM;
}

static int engine_of_step(enum step s)
{
	return s == STEP_GRPC_VLLM	   ? STEER_ENGINE_VLLM
	       : s == STEP_GRPC_TOKENSPEED ? STEER_ENGINE_TOKENSPEED
					   : STEER_ENGINE_SGLANG;
}

/* The source a step polls; a /metrics step says which engine's names it
 * reads when the backend names its engine (auto: the decoder refines it). */
static enum steer_source source_of_step(int engine, enum step s)
{
	if (s == STEP_HTTP_METRICS && engine == STEER_ENGINE_VLLM)
		return STEER_SOURCE_HTTP_METRICS_VLLM;
	switch (s) {
	case STEP_GRPC_SGLANG:
		return STEER_SOURCE_GRPC_SGLANG;
	case STEP_GRPC_TOKENSPEED:
		return STEER_SOURCE_GRPC_TOKENSPEED;
	case STEP_GRPC_VLLM:
		return STEER_SOURCE_GRPC_VLLM;
	case STEP_HTTP_LOADS:
		return STEER_SOURCE_HTTP_LOADS;
	case STEP_HTTP_METRICS:
		return STEER_SOURCE_HTTP_METRICS_SGLANG; /* refined by the decoder */
	default:
		return STEER_SOURCE_TCP;
	}
}

static void plan_add(struct src_handle *sh, enum step s)
{
	if (sh->n_plan < MAX_STEPS)
		sh->plan[sh->n_plan++] = s;
}

/* gRPC steps in upstream's order: SGLang, TokenSpeed, vLLM (or the one engine). */
static void plan_grpc(struct src_handle *sh, int engine)
{
	if (engine == STEER_ENGINE_AUTO || engine == STEER_ENGINE_SGLANG)
		plan_add(sh, STEP_GRPC_SGLANG);
	if (engine == STEER_ENGINE_AUTO || engine == STEER_ENGINE_TOKENSPEED)
		plan_add(sh, STEP_GRPC_TOKENSPEED);
	if (engine == STEER_ENGINE_AUTO || engine == STEER_ENGINE_VLLM)
		plan_add(sh, STEP_GRPC_VLLM);
}

/* A configured path ending in "metrics" is a Prometheus page; any other is JSON. */
static bool path_is_metrics(const char *path)
{
	size_t n = strcspn(path, "?");

	return n >= 7 && !strncmp(path + n - 7, "metrics", 7);
}

static void plan_http(struct src_handle *sh)
{
	if (sh->path[0]) {
		plan_add(sh, path_is_metrics(sh->path) ? STEP_HTTP_METRICS : STEP_HTTP_LOADS);
		return;
	}
	if (sh->engine != STEER_ENGINE_VLLM)
		plan_add(sh, STEP_HTTP_LOADS); /* vLLM serves no /v1/loads */
	plan_add(sh, STEP_HTTP_METRICS);
}

static void plan_build(struct src_handle *sh, int scheme)
{
	sh->n_plan = 0;
	if (scheme == STEER_SCHEME_GRPC) {
		plan_grpc(sh, sh->engine);
	} else if (scheme == STEER_SCHEME_HTTP) {
		plan_http(sh);
	} else {
		plan_grpc(sh, sh->engine);
		plan_http(sh);
		plan_add(sh, STEP_TCP);
	}
}

/* ---- handles ------------------------------------------------------------------ */

static struct src_handle *handle_at(const struct steer_loads *l, int handle)
{
	if (!l || handle < 0 || (size_t)handle >= l->n_h || !l->h[handle].used)
		return NULL;
	return &l->h[handle];
}

struct steer_loads *steer_loads_new(void)
{
	struct steer_loads *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->grpc = steer_poller_new();
	l->http = steer_http_new();
	if (!l->grpc || !l->http) {
		steer_loads_free(l);
		return NULL;
	}
	return l;
}

static int free_slot(struct steer_loads *l)
{
	struct src_handle *grown;
	size_t i, n;

	for (i = 0; i < l->n_h; i++)
		if (!l->h[i].used)
			return (int)i;
	if (l->n_h >= INT32_MAX / 2)
		return -ENOSPC;
	n = l->n_h ? l->n_h * 2 : 16;
	grown = realloc(l->h, n * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	memset(grown + l->n_h, 0, (n - l->n_h) * sizeof(*grown));
	l->h = grown;
	i = l->n_h;
	l->n_h = n;
	return (int)i;
}

static void wipe_token(struct src_handle *sh)
{
	if (!sh->token)
		return;
	explicit_bzero(sh->token, strlen(sh->token));
	free(sh->token);
	sh->token = NULL;
}

static int copy_str(char *dst, size_t cap, const char *src)
{
	if (!src)
		src = "";
	if (strlen(src) >= cap)
		return -EINVAL;
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

int steer_loads_add(struct steer_loads *l, const struct steer_loads_spec *spec, void *tag)
{
	struct src_handle *sh;
	int idx;

	if (!l || !spec || !spec->loads_addr)
		return -EINVAL;
	idx = free_slot(l);
	if (idx < 0)
		return idx;
	sh = &l->h[idx];
	memset(sh, 0, sizeof(*sh));
	sh->grpc = sh->http = sh->tcp = -1;
	sh->tag = tag;
	sh->engine = spec->engine;
	sh->reprobe_after = spec->reprobe_after ? spec->reprobe_after : 1;
	sh->max_backoff_ms = spec->max_backoff_ms;
	if (copy_str(sh->loads_addr, sizeof(sh->loads_addr), spec->loads_addr) ||
	    copy_str(sh->traffic_addr, sizeof(sh->traffic_addr),
		     spec->traffic_addr ? spec->traffic_addr : spec->loads_addr) ||
	    copy_str(sh->path, sizeof(sh->path), spec->path))
		return -EINVAL;
	if (spec->token && !(sh->token = strdup(spec->token)))
		return -ENOMEM;
	plan_build(sh, spec->scheme);
	sh->locked = sh->n_plan == 1; /* nothing to choose between */
	sh->src = sh->locked ? source_of_step(sh->engine, sh->plan[0]) : STEER_SOURCE_NONE;
	sh->used = true;
	return idx;
}

static void drop_grpc(struct steer_loads *l, struct src_handle *sh)
{
	if (sh->grpc < 0)
		return;
	if (sh->grpc_running) {
		sh->grpc_running = false;
		l->grpc_outstanding--; /* a removed handle's result is never reported */
	}
	steer_poller_remove(l->grpc, sh->grpc);
	sh->grpc = -1;
}

static void drop_http(struct steer_loads *l, int *handle)
{
	if (*handle < 0)
		return;
	steer_http_remove(l->http, *handle);
	*handle = -1;
}

void steer_loads_remove(struct steer_loads *l, int handle)
{
	struct src_handle *sh = handle_at(l, handle);

	if (!sh)
		return;
	drop_grpc(l, sh);
	drop_http(l, &sh->http);
	drop_http(l, &sh->tcp);
	wipe_token(sh);
	memset(sh, 0, sizeof(*sh));
}

int steer_loads_set_auth(struct steer_loads *l, int handle, const char *token)
{
	struct src_handle *sh = handle_at(l, handle);
	char *copy = NULL;

	if (!sh)
		return -EINVAL;
	if (token && !(copy = strdup(token)))
		return -ENOMEM;
	wipe_token(sh);
	sh->token = copy;
	/* The lower handles take it when they are next used: recreate them. */
	if (!sh->running) {
		drop_grpc(l, sh);
		drop_http(l, &sh->http);
	}
	return 0;
}

enum steer_source steer_loads_source(const struct steer_loads *l, int handle)
{
	const struct src_handle *sh = handle_at(l, handle);

	return sh && sh->locked ? sh->src : STEER_SOURCE_NONE;
}

/* ---- running a step ----------------------------------------------------------- */

static int ensure_grpc(struct steer_loads *l, struct src_handle *sh, int idx)
{
	int h;

	if (sh->grpc >= 0)
		return 0;
	h = steer_poller_add(l->grpc, sh->loads_addr, (void *)(intptr_t)idx,
			     sh->max_backoff_ms ? sh->max_backoff_ms : 1);
	if (h < 0)
		return h;
	if (sh->token && steer_poller_set_auth(l->grpc, h, sh->token)) {
		steer_poller_remove(l->grpc, h);
		return -ENOMEM;
	}
	sh->grpc = h;
	return 0;
}

static int ensure_http(struct steer_loads *l, struct src_handle *sh, int idx, int *handle,
		       const char *addr, bool auth)
{
	int h;

	if (*handle >= 0)
		return 0;
	h = steer_http_add(l->http, addr, (void *)(intptr_t)idx);
	if (h < 0)
		return h;
	if (auth && sh->token && steer_http_set_auth(l->http, h, sh->token)) {
		steer_http_remove(l->http, h);
		return -ENOMEM;
	}
	*handle = h;
	return 0;
}

static const char *step_path(const struct src_handle *sh, enum step s)
{
	if (sh->path[0])
		return sh->path;
	return s == STEP_HTTP_LOADS ? LOADS_PATH : METRICS_PATH;
}

static int run_step(struct steer_loads *l, struct src_handle *sh, int idx)
{
	enum step s = sh->plan[sh->step];
	int rc;

	if (step_is_grpc(s)) {
		rc = ensure_grpc(l, sh, idx);
		if (!rc)
			rc = steer_poller_start_engine(l->grpc, sh->grpc, sh->timeout_ns,
						       engine_of_step(s));
		if (!rc) {
			sh->grpc_running = true;
			l->grpc_outstanding++;
		}
		return rc;
	}
	if (s == STEP_TCP) {
		rc = ensure_http(l, sh, idx, &sh->tcp, sh->traffic_addr, false);
		return rc ? rc : steer_http_start_connect(l->http, sh->tcp, sh->timeout_ns);
	}
	rc = ensure_http(l, sh, idx, &sh->http, sh->loads_addr, true);
	return rc ? rc : steer_http_start_get(l->http, sh->http, step_path(sh, s), sh->timeout_ns);
}

int steer_loads_start(struct steer_loads *l, int handle, uint64_t timeout_ns)
{
	struct src_handle *sh = handle_at(l, handle);
	int rc;

	if (!sh)
		return -EINVAL;
	if (sh->running)
		return -EBUSY;
	if (!sh->locked)
		sh->step = 0;
	sh->answered = false;
	sh->timeout_ns = timeout_ns;
	sh->started_ns = steer_monotonic_ns();
	rc = run_step(l, sh, handle);
	if (rc == 0)
		sh->running = true;
	return rc;
}

/* ---- finishing a poll ------------------------------------------------------------ */

static void push_ready(struct steer_loads *l, const struct steer_loads_result *r)
{
	if (l->n_ready == l->cap_ready) {
		size_t cap = l->cap_ready ? l->cap_ready * 2 : 16;
		struct steer_loads_result *grown = realloc(l->ready, cap * sizeof(*grown));

		if (!grown)
			return; /* the poll is lost; the next interval polls again */
		l->ready = grown;
		l->cap_ready = cap;
	}
	l->ready[l->n_ready++] = *r;
}

/* Keep the step that answered; forget the transports it will not use. */
static void lock_step(struct steer_loads *l, struct src_handle *sh, enum steer_source src)
{
	enum step s = sh->plan[sh->step];

	sh->locked = true;
	sh->src = src;
	if (!step_is_grpc(s))
		drop_grpc(l, sh); /* an idle channel would keep reconnecting */
	if (s != STEP_HTTP_LOADS && s != STEP_HTTP_METRICS)
		drop_http(l, &sh->http);
	if (s != STEP_TCP)
		drop_http(l, &sh->tcp);
}

static void finish_poll(struct steer_loads *l, struct src_handle *sh, struct steer_loads_result *r)
{
	r->tag = sh->tag;
	r->started_ns = sh->started_ns;
	r->duration_ns = steer_monotonic_ns() - sh->started_ns;
	sh->running = false;
	if (!sh->locked && r->kind != STEER_POLL_OK && r->kind != STEER_POLL_UNIMPLEMENTED)
		r->source = STEER_SOURCE_NONE; /* probing, and no source answered */
	if (r->kind == STEER_POLL_OK || r->kind == STEER_POLL_UNIMPLEMENTED) {
		sh->consec_fail = 0;
	} else if (++sh->consec_fail >= sh->reprobe_after && sh->n_plan > 1) {
		sh->locked = false; /* try every source again from the next poll */
		sh->src = STEER_SOURCE_NONE;
		sh->consec_fail = 0;
	}
	push_ready(l, r);
}

/* The step answered with a load (or, for TCP, a completed connect). */
static void step_answered(struct steer_loads *l, struct src_handle *sh,
			  struct steer_loads_result *r)
{
	lock_step(l, sh, r->source);
	finish_poll(l, sh, r);
}

/*
 * The step found no such source there: UNIMPLEMENTED, HTTP 404, a peer that
 * does not speak the protocol. Probing: try the next step (skip_grpc: the
 * port has no gRPC server at all). Nothing left to try: the poll ends with
 * what this step saw or, when some step reached a live peer that has no load
 * to report, as UNIMPLEMENTED (alive, scored without loads). Locked: the
 * source it had is gone, a failed poll (after reprobe_after of them the
 * handle probes again); with a single configured source there is nothing
 * else to find, and a live peer without loads is UNIMPLEMENTED, as ever.
 */
static void step_absent(struct steer_loads *l, struct src_handle *sh, int idx,
			struct steer_loads_result *r, bool skip_grpc)
{
	bool live_peer = r->kind == STEER_POLL_UNIMPLEMENTED || r->kind == STEER_POLL_INVALID;

	if (sh->locked) {
		if (sh->n_plan > 1 && r->kind == STEER_POLL_UNIMPLEMENTED)
			r->kind = STEER_POLL_ERROR;
		finish_poll(l, sh, r);
		return;
	}
	sh->answered |= live_peer;
	while (++sh->step < sh->n_plan) {
		if (skip_grpc && step_is_grpc(sh->plan[sh->step]))
			continue;
		if (run_step(l, sh, idx) == 0)
			return;
	}
	sh->step = 0;
	if (sh->answered) {
		r->kind = STEER_POLL_UNIMPLEMENTED;
		r->source = STEER_SOURCE_NONE;
	}
	finish_poll(l, sh, r);
}

static void on_grpc(struct steer_loads *l, const struct steer_poll_result *g)
{
	int idx = (int)(intptr_t)g->tag;
	struct src_handle *sh = handle_at(l, idx);
	struct steer_loads_result r = { 0 };

	if (!sh || !sh->grpc_running)
		return;
	sh->grpc_running = false;
	l->grpc_outstanding--;
	r.kind = g->kind;
	r.status = g->grpc_status;
	r.source = source_of_step(sh->engine, sh->plan[sh->step]);
	memcpy(r.detail, g->detail, sizeof(r.detail));
	r.load = g->load;
	switch (g->kind) {
	case STEER_POLL_OK:
		step_answered(l, sh, &r);
		break;
	case STEER_POLL_UNIMPLEMENTED: /* a gRPC server, but not this engine's */
		step_absent(l, sh, idx, &r, false);
		break;
	case STEER_POLL_UNAVAILABLE: /* no gRPC server there (or down): the other gRPC steps
				      * would fail too; HTTP may answer */
		step_absent(l, sh, idx, &r, true);
		break;
	default: /* a gRPC server that fails to answer (deadline, garbage, an error status) */
		finish_poll(l, sh, &r);
		break;
	}
}

static void http_failed(struct steer_loads_result *r, enum steer_poll_kind kind, const char *what,
			const char *detail)
{
	r->kind = kind;
	snprintf(r->detail, sizeof(r->detail), "%s%s%s", what, detail[0] ? ": " : "", detail);
}

static void decode_body(struct src_handle *sh, enum step s, const struct steer_http_result *h,
			struct steer_loads_result *r)
{
	if (s == STEP_HTTP_LOADS) {
		r->kind = steer_decode_loads_json(h->body, h->body_len, &r->load, r->detail,
						  sizeof(r->detail));
		return;
	}
	r->source = STEER_SOURCE_NONE; /* the decoder says which engine's names it found */
	r->kind = steer_decode_prometheus(h->body, h->body_len, (enum steer_engine)sh->engine,
					  &r->load, &r->source, r->detail, sizeof(r->detail));
}

static void on_http_get(struct steer_loads *l, struct src_handle *sh, int idx,
			const struct steer_http_result *h, struct steer_loads_result *r)
{
	enum step s = sh->plan[sh->step];
	char what[STEER_LOADS_PATH_MAX + 48];

	switch (h->outcome) {
	case STEER_HTTP_DONE:
		r->status = (int)h->status;
		if (h->status == 200) {
			decode_body(sh, s, h, r);
			if (r->kind == STEER_POLL_OK)
				step_answered(l, sh, r);
			else if (s == STEP_HTTP_METRICS && r->source == STEER_SOURCE_NONE)
				step_absent(l, sh, idx, r, false); /* metrics, but no engine's */
			else
				finish_poll(l, sh, r); /* the endpoint is there, and broken */
			return;
		}
		snprintf(what, sizeof(what), "HTTP %ld from %s", h->status, step_path(sh, s));
		if (h->status == 404 || h->status == 405 || h->status == 501) {
			http_failed(r, STEER_POLL_UNIMPLEMENTED, what, "");
			step_absent(l, sh, idx, r, false);
			return;
		}
		http_failed(r, STEER_POLL_ERROR, what,
			    h->status == 401 || h->status == 403 ? "check auth=" : "");
		break;
	case STEER_HTTP_NOT_HTTP:
		http_failed(r, STEER_POLL_INVALID, "not an HTTP/1.1 answer", h->detail);
		step_absent(l, sh, idx, r, false);
		return;
	case STEER_HTTP_REFUSED:
		http_failed(r, STEER_POLL_UNAVAILABLE, "cannot connect", h->detail);
		break;
	case STEER_HTTP_TIMEOUT:
		http_failed(r, STEER_POLL_DEADLINE, "deadline exceeded", h->detail);
		break;
	case STEER_HTTP_TOO_LARGE:
		http_failed(r, STEER_POLL_INVALID, "response body too large", h->detail);
		break;
	default:
		http_failed(r, STEER_POLL_ERROR, "HTTP transfer failed", h->detail);
		break;
	}
	finish_poll(l, sh, r);
}

static void on_http(struct steer_loads *l, const struct steer_http_result *h)
{
	int idx = (int)(intptr_t)h->tag;
	struct src_handle *sh = handle_at(l, idx);
	struct steer_loads_result r = { 0 };

	if (!sh || !sh->running)
		return;
	r.source = source_of_step(sh->engine, sh->plan[sh->step]);
	if (sh->plan[sh->step] != STEP_TCP) {
		on_http_get(l, sh, idx, h, &r);
		return;
	}
	if (h->outcome == STEER_HTTP_CONNECTED) {
		r.kind = STEER_POLL_UNIMPLEMENTED; /* alive; no load to report */
		step_answered(l, sh, &r);
		return;
	}
	http_failed(&r,
		    h->outcome == STEER_HTTP_TIMEOUT ? STEER_POLL_DEADLINE : STEER_POLL_UNAVAILABLE,
		    "TCP connect to the traffic port failed", h->detail);
	finish_poll(l, sh, &r);
}

/* ---- the loop ----------------------------------------------------------------------- */

static void drain_http(struct steer_loads *l)
{
	struct steer_http_result h;

	while (steer_http_next(l->http, &h))
		on_http(l, &h);
}

static int pop_ready(struct steer_loads *l, struct steer_loads_result *out)
{
	if (!l->n_ready)
		return 0;
	*out = l->ready[0];
	memmove(l->ready, l->ready + 1, (l->n_ready - 1) * sizeof(*l->ready));
	l->n_ready--;
	return 1;
}

static void wait_grpc(struct steer_loads *l, uint64_t until_ns)
{
	struct steer_poll_result g;

	if (steer_poller_next(l->grpc, until_ns, &g) == 1)
		on_grpc(l, &g);
}

int steer_loads_next(struct steer_loads *l, uint64_t deadline_ns, struct steer_loads_result *out)
{
	for (;;) {
		uint64_t now;
		bool http_busy;

		if (pop_ready(l, out))
			return 1;
		now = steer_monotonic_ns();
		if (now >= deadline_ns)
			return 0;
		http_busy = steer_http_outstanding(l->http) > 0;
		if (http_busy && l->grpc_outstanding) {
			/* Both in flight: neither library can wait on the other's
			 * sockets, so they take short turns. */
			steer_http_wait(l->http, 0);
			drain_http(l);
			wait_grpc(l, now + MIXED_SLICE_NS < deadline_ns ? now + MIXED_SLICE_NS
									: deadline_ns);
		} else if (http_busy) {
			uint64_t ms = (deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS;

			steer_http_wait(l->http, ms > 1000 ? 1000 : (int)ms);
			drain_http(l);
		} else {
			wait_grpc(l, deadline_ns); /* gRPC alone, or idle */
		}
	}
}

void steer_loads_free(struct steer_loads *l)
{
	size_t i;

	if (!l)
		return;
	for (i = 0; i < l->n_h; i++)
		if (l->h[i].used)
			steer_loads_remove(l, (int)i);
	if (l->grpc)
		steer_poller_free(l->grpc);
	steer_http_free(l->http);
	free(l->h);
	free(l->ready);
	free(l);
}
