// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * poll_http.c - HTTP GETs and TCP connect probes with libcurl's multi
 * interface.
 *
 * Each backend keeps one easy handle for its GETs, so that libcurl keeps its
 * connection alive between polls (one TCP handshake per backend, not per
 * poll). A connect probe uses a throwaway easy handle with a fresh
 * connection that is closed as soon as it is made: it must prove that the
 * port accepts connections now, not that an old connection survived.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "loads_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define URL_MAX 96

struct http_handle {
	bool used;
	void *tag;
	char base[URL_MAX]; /* "http://ADDR:PORT" */
	CURL *get;	    /* kept across polls: its connection is reused */
	CURL *probe;	    /* a connect probe in flight, else NULL */
	bool get_running;
	struct curl_slist *headers; /* Authorization, when set */
	char *auth_line;	    /* the header line, wiped when replaced */
	struct steer_http *owner;
	char *body;
	size_t body_len, body_cap;
	bool too_large;
	bool over_budget; /* too large for what the other bodies left of BODIES_MAX */
	uint64_t started_ns;
	char errbuf[CURL_ERROR_SIZE];
};

struct steer_http {
	CURLM *multi;
	/* One allocation per handle: libcurl keeps pointers into it (the body
	 * callback's data, the error buffer), so it must never move. */
	struct http_handle **handles;
	size_t n_handles;
	size_t outstanding;
	int last_body;	   /* the handle whose body the last result lent out, or -1 */
	size_t body_bytes; /* every handle's body_cap */
};

/* A body buffer larger than this is freed once its answer is decoded: one
 * large answer must not pin STEER_HTTP_BODY_MAX per backend for good (256
 * backends x 4 MiB). Below it the buffer is kept for the next poll. */
#define BODY_KEEP (16u << 10)
/* All bodies together: past BODY_KEEP a body grows only within this, so that
 * backends answering STEER_HTTP_BODY_MAX each in the same cycle cannot hold
 * n x 4 MiB at once. 16 MiB holds 256 /metrics pages of 64 KiB in flight. */
#define BODIES_MAX (16u << 20)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

/*
 * libcurl's memory, wiped when freed. libcurl copies the Authorization line
 * into its header list and into each request it assembles, and frees those
 * buffers without clearing them: a bearer token would stay in freed heap
 * memory, for a core dump or a later bug to expose. Every block libcurl
 * frees or moves is cleared first (malloc_usable_size: the whole block, not
 * only what libcurl asked for). libcurl's allocations are few and small per
 * poll, so the cost does not show in a cycle.
 */
static void wiping_free(void *p)
{
	if (!p)
		return;
	explicit_bzero(p, malloc_usable_size(p));
	free(p);
}

static void *wiping_realloc(void *p, size_t size)
{
	size_t old;
	void *q;

	if (!p)
		return malloc(size);
	if (!size) {
		wiping_free(p);
		return NULL;
	}
	old = malloc_usable_size(p);
	q = malloc(size);
	if (!q)
		return NULL; /* p stays, as realloc leaves it */
	memcpy(q, p, old < size ? old : size);
	wiping_free(p);
	return q;
}

static char *wiping_strdup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);

	return d ? memcpy(d, s, n) : NULL;
}

static void curl_init(void)
{
	/* Once for the process, never cleaned up: libcurl's global state is
	 * shared by every poller and costs nothing idle. */
	curl_init_rc = curl_global_init_mem(CURL_GLOBAL_DEFAULT, malloc, wiping_free,
					    wiping_realloc, wiping_strdup, calloc);
}

int steer_curl_global_init(void)
{
	pthread_once(&curl_once, curl_init);
	return curl_init_rc == CURLE_OK ? 0 : -EIO;
}

struct steer_http *steer_http_new(void)
{
	struct steer_http *h;

	if (steer_curl_global_init())
		return NULL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->last_body = -1;
	h->multi = curl_multi_init();
	if (!h->multi) {
		free(h);
		return NULL;
	}
	return h;
}

static struct http_handle *handle_at(const struct steer_http *h, int handle)
{
	if (!h || handle < 0 || (size_t)handle >= h->n_handles || !h->handles[handle] ||
	    !h->handles[handle]->used)
		return NULL;
	return h->handles[handle];
}

static int free_slot(struct steer_http *h)
{
	struct http_handle **grown;
	size_t i, n;

	for (i = 0; i < h->n_handles; i++)
		if (!h->handles[i])
			return (int)i;
	if (h->n_handles >= INT32_MAX / 2)
		return -ENOSPC;
	n = h->n_handles ? h->n_handles * 2 : 16;
	grown = realloc(h->handles, n * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	memset(grown + h->n_handles, 0, (n - h->n_handles) * sizeof(*grown));
	h->handles = grown;
	i = h->n_handles;
	h->n_handles = n;
	return (int)i;
}

int steer_http_add(struct steer_http *h, const char *addr, void *tag)
{
	struct http_handle *hh;
	int idx;

	if (!h || !addr)
		return -EINVAL;
	idx = free_slot(h);
	if (idx < 0)
		return idx;
	hh = calloc(1, sizeof(*hh));
	if (!hh)
		return -ENOMEM;
	if ((size_t)snprintf(hh->base, sizeof(hh->base), "http://%s", addr) >= sizeof(hh->base)) {
		free(hh);
		return -EINVAL;
	}
	hh->get = curl_easy_init();
	if (!hh->get) {
		free(hh);
		return -ENOMEM;
	}
	hh->used = true;
	h->handles[idx] = hh;
	hh->tag = tag;
	hh->owner = h;
	/* Keep one idle connection per backend in the multi's cache. */
	curl_multi_setopt(h->multi, CURLMOPT_MAXCONNECTS, (long)h->n_handles + 4);
	return idx;
}

static void wipe_auth(struct http_handle *hh)
{
	curl_slist_free_all(hh->headers);
	hh->headers = NULL;
	if (hh->auth_line) {
		explicit_bzero(hh->auth_line, strlen(hh->auth_line));
		free(hh->auth_line);
		hh->auth_line = NULL;
	}
}

static void stop_probe(struct steer_http *h, struct http_handle *hh)
{
	if (!hh->probe)
		return;
	curl_multi_remove_handle(h->multi, hh->probe);
	curl_easy_cleanup(hh->probe);
	hh->probe = NULL;
	h->outstanding--;
}

static void stop_get(struct steer_http *h, struct http_handle *hh)
{
	if (!hh->get_running)
		return;
	curl_multi_remove_handle(h->multi, hh->get);
	hh->get_running = false;
	h->outstanding--;
}

void steer_http_remove(struct steer_http *h, int handle)
{
	struct http_handle *hh = handle_at(h, handle);

	if (!hh)
		return;
	stop_get(h, hh);
	stop_probe(h, hh);
	curl_easy_cleanup(hh->get);
	wipe_auth(hh);
	h->body_bytes -= hh->body_cap;
	free(hh->body);
	free(hh);
	h->handles[handle] = NULL;
}

int steer_http_set_auth(struct steer_http *h, int handle, const char *token)
{
	struct http_handle *hh = handle_at(h, handle);
	struct curl_slist *list;
	char *line = NULL;

	if (!hh)
		return -EINVAL;
	if (hh->get_running)
		return -EBUSY; /* libcurl reads the header list during the transfer */
	if (token && !(line = steer_secret_join("Authorization: Bearer ", token)))
		return -ENOMEM;
	list = line ? curl_slist_append(NULL, line) : NULL;
	if (line && !list) {
		explicit_bzero(line, strlen(line));
		free(line);
		return -ENOMEM;
	}
	wipe_auth(hh);
	hh->auth_line = line;
	hh->headers = list;
	return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
	struct http_handle *hh = user;
	size_t n = size * nmemb, cap;
	char *grown;

	if (hh->body_len + n + 1 > STEER_HTTP_BODY_MAX) {
		hh->too_large = true;
		return 0; /* libcurl fails the transfer with CURLE_WRITE_ERROR */
	}
	if (hh->body_len + n + 1 > hh->body_cap) {
		cap = hh->body_cap ? hh->body_cap : 4096;
		while (cap < hh->body_len + n + 1)
			cap *= 2;
		if (cap > BODY_KEEP && hh->owner->body_bytes - hh->body_cap + cap > BODIES_MAX) {
			hh->too_large = hh->over_budget = true;
			return 0;
		}
		grown = realloc(hh->body, cap);
		if (!grown)
			return 0;
		hh->owner->body_bytes += cap - hh->body_cap;
		hh->body = grown;
		hh->body_cap = cap;
	}
	memcpy(hh->body + hh->body_len, data, n);
	hh->body_len += n;
	hh->body[hh->body_len] = 0;
	return n;
}

static long timeout_ms_of(uint64_t timeout_ns)
{
	uint64_t ms = (timeout_ns + 999999) / 1000000;

	return ms < 1 ? 1 : ms > 3600000 ? 3600000 : (long)ms;
}

/* Options every transfer shares: plain HTTP/1.1, no proxy from the
 * environment (a poll must reach the worker itself), no redirects, no signals. */
static void common_options(CURL *e, struct http_handle *hh, int handle, uint64_t timeout_ns)
{
	long ms = timeout_ms_of(timeout_ns);

	curl_easy_setopt(e, CURLOPT_PRIVATE, (void *)(intptr_t)handle);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, ms);
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, hh->errbuf);
	hh->errbuf[0] = 0;
}

int steer_http_start_get(struct steer_http *h, int handle, const char *path, uint64_t timeout_ns)
{
	struct http_handle *hh = handle_at(h, handle);
	char url[URL_MAX + 256];

	if (!hh || !path || path[0] != '/')
		return -EINVAL;
	if (hh->get_running || hh->probe)
		return -EBUSY;
	if ((size_t)snprintf(url, sizeof(url), "%s%s", hh->base, path) >= sizeof(url))
		return -EINVAL;
	common_options(hh->get, hh, handle, timeout_ns);
	curl_easy_setopt(hh->get, CURLOPT_URL, url);
	curl_easy_setopt(hh->get, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(hh->get, CURLOPT_HTTPHEADER, hh->headers);
	curl_easy_setopt(hh->get, CURLOPT_USERAGENT, "smg-steerd");
	curl_easy_setopt(hh->get, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(hh->get, CURLOPT_WRITEDATA, hh);
	hh->body_len = 0;
	hh->too_large = hh->over_budget = false;
	if (hh->body)
		hh->body[0] = 0;
	hh->started_ns = steer_monotonic_ns();
	if (curl_multi_add_handle(h->multi, hh->get) != CURLM_OK)
		return -EIO;
	hh->get_running = true;
	h->outstanding++;
	return 0;
}

int steer_http_start_connect(struct steer_http *h, int handle, uint64_t timeout_ns)
{
	struct http_handle *hh = handle_at(h, handle);

	if (!hh)
		return -EINVAL;
	if (hh->get_running || hh->probe)
		return -EBUSY;
	hh->probe = curl_easy_init();
	if (!hh->probe)
		return -ENOMEM;
	common_options(hh->probe, hh, handle, timeout_ns);
	curl_easy_setopt(hh->probe, CURLOPT_URL, hh->base);
	curl_easy_setopt(hh->probe, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(hh->probe, CURLOPT_FRESH_CONNECT, 1L);
	curl_easy_setopt(hh->probe, CURLOPT_FORBID_REUSE, 1L);
	hh->started_ns = steer_monotonic_ns();
	if (curl_multi_add_handle(h->multi, hh->probe) != CURLM_OK) {
		curl_easy_cleanup(hh->probe);
		hh->probe = NULL;
		return -EIO;
	}
	h->outstanding++;
	return 0;
}

size_t steer_http_outstanding(const struct steer_http *h)
{
	return h ? h->outstanding : 0;
}

void steer_http_wait(struct steer_http *h, int timeout_ms)
{
	int running;

	if (!h)
		return;
	if (h->outstanding)
		curl_multi_poll(h->multi, NULL, 0, timeout_ms < 0 ? 0 : timeout_ms, NULL);
	curl_multi_perform(h->multi, &running);
}

static enum steer_http_outcome outcome_of(CURLcode rc, bool too_large)
{
	switch (rc) {
	case CURLE_OK:
		return STEER_HTTP_DONE;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
		return STEER_HTTP_REFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return STEER_HTTP_TIMEOUT;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_GOT_NOTHING:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_HTTP2:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_BAD_CONTENT_ENCODING:
		return STEER_HTTP_NOT_HTTP;
	case CURLE_WRITE_ERROR:
		return too_large ? STEER_HTTP_TOO_LARGE : STEER_HTTP_FAILED;
	default:
		return STEER_HTTP_FAILED;
	}
}

static void finish(struct steer_http *h, struct http_handle *hh, CURL *e, CURLcode rc,
		   struct steer_http_result *out)
{
	memset(out, 0, sizeof(*out));
	out->tag = hh->tag;
	out->started_ns = hh->started_ns;
	out->duration_ns = steer_monotonic_ns() - hh->started_ns;
	out->outcome = outcome_of(rc, hh->too_large);
	if (rc != CURLE_OK && hh->over_budget)
		snprintf(out->detail, sizeof(out->detail),
			 "the answers in flight together are over %u MiB", BODIES_MAX >> 20);
	else if (rc == CURLE_OUT_OF_MEMORY)
		/* libcurl's answer to a header over its 100 KiB limit as well */
		snprintf(out->detail, sizeof(out->detail),
			 "the answer's headers are over 100 KiB (or out of memory)");
	else if (rc != CURLE_OK && hh->too_large)
		snprintf(out->detail, sizeof(out->detail), "over %u MiB",
			 STEER_HTTP_BODY_MAX >> 20);
	else if (rc != CURLE_OK)
		snprintf(out->detail, sizeof(out->detail), "%.*s", (int)sizeof(out->detail) - 1,
			 hh->errbuf[0] ? hh->errbuf : curl_easy_strerror(rc));
	if (e == hh->probe) {
		if (out->outcome == STEER_HTTP_DONE)
			out->outcome = STEER_HTTP_CONNECTED;
		stop_probe(h, hh); /* closes the connection */
		return;
	}
	if (out->outcome == STEER_HTTP_DONE) {
		curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &out->status);
		out->body = hh->body ? hh->body : (char *)"";
		out->body_len = hh->body_len;
	}
	stop_get(h, hh);
}

/* The body the last result lent out has been decoded by now. */
static void release_large_body(struct steer_http *h)
{
	struct http_handle *hh = handle_at(h, h->last_body);

	h->last_body = -1;
	if (!hh || hh->body_cap <= BODY_KEEP)
		return;
	h->body_bytes -= hh->body_cap;
	free(hh->body);
	hh->body = NULL;
	hh->body_len = hh->body_cap = 0;
}

int steer_http_next(struct steer_http *h, struct steer_http_result *out)
{
	CURLMsg *m;
	int left;

	if (!h)
		return 0;
	release_large_body(h);
	while ((m = curl_multi_info_read(h->multi, &left))) {
		struct http_handle *hh;
		void *priv = NULL;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
		hh = handle_at(h, (int)(intptr_t)priv);
		if (!hh || (m->easy_handle != hh->get && m->easy_handle != hh->probe)) {
			curl_multi_remove_handle(h->multi, m->easy_handle);
			continue; /* not ours any more (never seen: removal cancels) */
		}
		finish(h, hh, m->easy_handle, m->data.result, out);
		h->last_body = (int)(intptr_t)priv;
		return 1;
	}
	return 0;
}

void steer_http_free(struct steer_http *h)
{
	size_t i;

	if (!h)
		return;
	for (i = 0; i < h->n_handles; i++)
		if (h->handles[i])
			steer_http_remove(h, (int)i);
	curl_multi_cleanup(h->multi);
	free(h->handles);
	free(h);
}
