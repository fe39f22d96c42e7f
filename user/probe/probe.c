// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * probe.c - the step probe (--step-probe, probe.h): one streaming POST of the
 * daemon's own on every backend, each of its stream's packets a step end of
 * the backend's engine, applied to the slot by the kernel program
 * steer_probe_apply.
 *
 * One thread owns the libcurl multi handle and every probe. It holds the
 * mutex while it works and lets go only while it waits in curl_multi_poll,
 * so the main thread's calls (new backends, a reload, statistics) see
 * consistent state and wake it with curl_multi_wakeup.
 *
 * A backend with auth=bearer:FILE gets its token on the probe as on the load
 * polls ("Authorization: Bearer TOKEN"): each probe keeps its own copy and
 * builds its own header list for each transfer. The token is a secret: no
 * message, statistic or error string here quotes it, and every copy (the
 * targets', the probe's, the header line's) is wiped before it is freed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "probe/probe.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "loads/loads.h" /* steer_curl_global_init */
#include "common/common.h"

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
#define CONNECT_TIMEOUT_MS 2000L
/* A stream that delivers nothing for this long is taken as stalled and
 * restarted: an engine step is milliseconds, a stall of seconds is a fault. */
#define STALL_S 30L
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 10000
#define PENDING_MAX 256 /* packets held before a flush (one wake rarely has more) */

/* Where a probe's packets go: one slot per service that has the backend. */
struct probe_slot {
	uint32_t svc_id, slot, slot_gen;
};

#define PROBE_SLOTS_MAX 64 /* services sharing one backend address */

/* One backend address's probe: one stream, however many services steer to
 * it. Allocated once and never moved: libcurl keeps pointers to it (write
 * callback data, error buffer). */
struct probe {
	struct steer_probe *owner;
	struct steer_addr addr;
	struct probe_slot slots[PROBE_SLOTS_MAX];
	uint32_t n_slots;
	char url[STEER_ADDR_STRLEN + 264];
	CURL *easy; /* the transfer under way, or NULL */
	/* The transfer under way's headers (libcurl reads them to its end): the
	 * shared ones and its own Authorization line. */
	struct curl_slist *headers;
	char *token;	      /* its backend's bearer token, for the next transfer; or NULL */
	bool token_differs;   /* take_targets: another service gives it another token */
	bool token_warned;    /* that was logged (once while it lasts) */
	bool status_ok;	      /* its response status was 2xx */
	uint64_t last_ns;     /* CLOCK_MONOTONIC_COARSE of its stream's last packet, 0: none */
	uint64_t started_ns;  /* when the transfer under way started */
	uint64_t retry_at_ns; /* when to start the next transfer */
	uint32_t backoff_ms;  /* after the next failure */
	bool failing;	      /* the last transfer failed (logged once per streak) */
	bool keep;	      /* take_targets: still a backend's */
	struct steer_probe_stat st;
	char errbuf[CURL_ERROR_SIZE];
};

struct pending_step {
	uint32_t svc_id;
	struct steer_probe_step s;
};

struct steer_probe {
	struct steer_dp *dp;
	pthread_t thread;
	bool started;
	atomic_bool stop;
	CURLM *multi;
	struct curl_slist *headers;
	pthread_mutex_t mu;
	/* Handed over by the main thread, taken by the thread (under mu). */
	struct steer_probe_target *next_t;
	size_t next_n;
	bool next_targets;
	char *next_path, *next_body; /* non-NULL: a reload's, to take */
	/* The thread's (read by steer_probe_stats under mu). */
	char *path, *body;
	struct probe **pr;
	size_t n_pr;
	struct pending_step pend[PENDING_MAX];
	size_t n_pend;
	uint64_t applied, apply_errors;
};

/* ---- Applying the packets ------------------------------------------------------- */

/* Every pending packet, one steer_probe_apply run per service and 32
 * packets, each service's in the order they came. */
static void flush(struct steer_probe *p)
{
	bool done[PENDING_MAX] = { 0 };
	size_t i, j;

	for (i = 0; i < p->n_pend; i++) {
		struct steer_probe_batch b = { .svc_id = p->pend[i].svc_id };
		char err[160];

		if (done[i])
			continue;
		/* From the earliest left: a full batch leaves the rest of the
		 * service's for a later i, still in order. */
		for (j = i; j < p->n_pend && b.n < STEER_PROBE_BATCH; j++) {
			if (done[j] || p->pend[j].svc_id != b.svc_id)
				continue;
			b.p[b.n++] = p->pend[j].s;
			done[j] = true;
		}
		if (steer_dp_probe_apply(p->dp, &b, err, sizeof(err))) {
			if (p->apply_errors++ == 0)
				log_warn("step probe: %s", err);
		} else {
			p->applied += b.applied;
		}
	}
	p->n_pend = 0;
}

/* The packet, for every slot of the probe's backend. */
static void queue_step(struct probe *pr, uint64_t last, uint64_t at)
{
	struct steer_probe *p = pr->owner;
	uint32_t k;

	for (k = 0; k < pr->n_slots; k++) {
		if (p->n_pend == PENDING_MAX)
			flush(p);
		p->pend[p->n_pend++] = (struct pending_step){
			.svc_id = pr->slots[k].svc_id,
			.s = { .slot = pr->slots[k].slot,
			       .slot_gen = pr->slots[k].slot_gen,
			       .last_ns = last,
			       .at_ns = at },
		};
	}
}

/* ---- The bearer token -------------------------------------------------------------- */

static void wipe_free(char *s)
{
	if (!s)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

/* curl_slist_append copies each line: the copy of the Authorization line is
 * wiped too. */
static void headers_free(struct curl_slist *h)
{
	struct curl_slist *l;

	for (l = h; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(h);
}

static bool same_token(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

/* The header list of a probe's next transfer: the shared lines, and its
 * backend's Authorization line when it has a token. NULL: out of memory. */
static struct curl_slist *probe_headers(const struct steer_probe *p, const struct probe *pr)
{
	struct curl_slist *h = NULL, *grown;
	const struct curl_slist *l;
	char *line = NULL;

	for (l = p->headers; l; l = l->next) {
		grown = curl_slist_append(h, l->data);
		if (!grown) {
			headers_free(h);
			return NULL;
		}
		h = grown;
	}
	if (!pr->token)
		return h;
	line = steer_secret_join("Authorization: Bearer ", pr->token);
	if (!line) {
		headers_free(h);
		return NULL;
	}
	grown = curl_slist_append(h, line);
	wipe_free(line);
	if (!grown)
		headers_free(h);
	return grown;
}

/* ---- One probe's transfer ------------------------------------------------------- */

/* Bytes of the stream: a packet, and so a step end, unless they came in the
 * same tick of the coarse clock as the last (one step's bytes in pieces). */
static size_t on_data(char *data, size_t size, size_t nmemb, void *ud)
{
	struct probe *pr = ud;
	uint64_t now;

	(void)data;
	if (!pr->status_ok) {
		long code = 0;

		curl_easy_getinfo(pr->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code < 200 || code > 299) {
			snprintf(pr->st.error, sizeof(pr->st.error), "HTTP status %ld", code);
			return 0; /* ends the transfer: CURLE_WRITE_ERROR */
		}
		pr->status_ok = true;
	}
	now = steer_dp_clock_ns();
	if (now != pr->last_ns) {
		queue_step(pr, pr->last_ns, now);
		if (pr->last_ns)
			pr->st.step_ns = now - pr->last_ns;
		pr->last_ns = now;
		pr->st.packets++;
		pr->st.streaming = true;
	}
	return size * nmemb;
}

static void transfer_end(struct steer_probe *p, struct probe *pr)
{
	if (!pr->easy)
		return;
	curl_multi_remove_handle(p->multi, pr->easy);
	curl_easy_cleanup(pr->easy);
	pr->easy = NULL;
	headers_free(pr->headers); /* after the handle: it used them to the end */
	pr->headers = NULL;
	pr->last_ns = 0; /* the next stream's first packet starts no gap */
	pr->st.streaming = false;
}

static void transfer_start(struct steer_probe *p, struct probe *pr)
{
	CURL *e = curl_easy_init();
	struct curl_slist *headers = e ? probe_headers(p, pr) : NULL;

	if (!headers) {
		if (e)
			curl_easy_cleanup(e);
		pr->retry_at_ns = steer_monotonic_ns() + BACKOFF_MAX_MS * NS_PER_MS;
		return;
	}
	curl_easy_setopt(e, CURLOPT_URL, pr->url);
	curl_easy_setopt(e, CURLOPT_POSTFIELDS, p->body);
	curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(p->body));
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "smg-steerd step probe");
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, pr);
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, pr->errbuf);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, STALL_S);
	curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(e, CURLOPT_PROXY, "");
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	if (curl_multi_add_handle(p->multi, e) != CURLM_OK) {
		curl_easy_cleanup(e);
		headers_free(headers);
		pr->retry_at_ns = steer_monotonic_ns() + BACKOFF_MAX_MS * NS_PER_MS;
		return;
	}
	pr->errbuf[0] = 0;
	pr->st.error[0] = 0;
	pr->started_ns = steer_monotonic_ns();
	pr->easy = e;
	pr->headers = headers;
	pr->status_ok = false;
	pr->last_ns = 0;
	pr->st.starts++;
}

/* Why the transfer failed, into st.error, while its handle still answers. A
 * stream that ended well but within a second counts as a failure too: a probe
 * that the engine ends at once (a refusal sent as an event, max_tokens tiny)
 * would otherwise be started again in a tight loop. */
static bool transfer_failed(struct probe *pr, CURLcode rc, uint64_t now)
{
	long code = 0;

	if (rc == CURLE_WRITE_ERROR && pr->st.error[0])
		return true; /* on_data refused the status and said so */
	if (rc != CURLE_OK) {
		snprintf(pr->st.error, sizeof(pr->st.error), "%.120s",
			 pr->errbuf[0] ? pr->errbuf : curl_easy_strerror(rc));
		return true;
	}
	curl_easy_getinfo(pr->easy, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		snprintf(pr->st.error, sizeof(pr->st.error), "HTTP status %ld", code);
		return true;
	}
	if (!pr->status_ok) {
		snprintf(pr->st.error, sizeof(pr->st.error), "HTTP status %ld, but an empty body",
			 code);
		return true;
	}
	if (now - pr->started_ns < NS_PER_S) {
		snprintf(pr->st.error, sizeof(pr->st.error),
			 "the stream ended after %llu ms (a probe must stream for seconds: "
			 "ignore_eos, max_tokens)",
			 (unsigned long long)((now - pr->started_ns) / NS_PER_MS));
		return true;
	}
	return false;
}

/* The transfer ended: at the stream's end (its max_tokens) the next starts
 * at once; after a failure, after a back-off that doubles up to 10 s. */
static void transfer_done(struct steer_probe *p, struct probe *pr, CURLcode rc)
{
	char addr[STEER_ADDR_STRLEN];
	uint64_t now = steer_monotonic_ns();
	bool failed = transfer_failed(pr, rc, now);

	transfer_end(p, pr);
	steer_addr_format(&pr->addr, addr, sizeof(addr));
	if (!failed) {
		if (pr->failing)
			log_info("step probe of %s: streaming again", addr);
		pr->failing = false;
		pr->backoff_ms = BACKOFF_MIN_MS;
		pr->retry_at_ns = now;
		return;
	}
	pr->st.failures++;
	if (!pr->failing)
		log_warn("step probe of %s (POST %s): %s; retrying every %u ms up to %u ms", addr,
			 pr->url, pr->st.error, pr->backoff_ms, BACKOFF_MAX_MS);
	pr->failing = true;
	pr->retry_at_ns = now + (uint64_t)pr->backoff_ms * NS_PER_MS;
	pr->backoff_ms = pr->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : pr->backoff_ms * 2;
}

static void probe_url(const struct steer_probe *p, struct probe *pr)
{
	char addr[STEER_ADDR_STRLEN];

	steer_addr_format(&pr->addr, addr, sizeof(addr));
	snprintf(pr->url, sizeof(pr->url), "http://%s%s", addr, p->path);
}

/* ---- Backends and reloads --------------------------------------------------------- */

static struct probe *probe_new(struct steer_probe *p, const struct steer_addr *addr)
{
	struct probe *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return NULL;
	pr->owner = p;
	pr->addr = *addr;
	pr->st.addr = *addr;
	pr->backoff_ms = BACKOFF_MIN_MS;
	probe_url(p, pr);
	return pr;
}

/* A probe that ends: its transfer, and its copy of the token. */
static void probe_del(struct steer_probe *p, struct probe *pr)
{
	transfer_end(p, pr);
	wipe_free(pr->token);
	free(pr);
}

/* steer_probe_set_targets' copies, tokens wiped. */
static void targets_free(struct steer_probe_target *t, size_t n)
{
	size_t i;

	for (i = 0; t && i < n; i++)
		wipe_free((char *)t[i].token); /* our own strdup (steer_probe_set_targets) */
	free(t);
}

/* The token the probe's next transfer sends. A stream under way goes on
 * with the one it was started with: libcurl sent that with the request, and
 * ending the stream would cost the engine a new prefill for nothing. A probe
 * waiting out a back-off (refused for the old token, perhaps) tries the new
 * one at once. Out of memory, the old token stays until the next call (the
 * next publish). */
static void probe_set_token(struct probe *pr, const char *token, bool kept)
{
	char addr[STEER_ADDR_STRLEN], *copy = NULL;

	if (same_token(pr->token, token) || (token && !(copy = strdup(token))))
		return;
	wipe_free(pr->token);
	pr->token = copy;
	if (!kept)
		return; /* a new probe: its first transfer is yet to start */
	steer_addr_format(&pr->addr, addr, sizeof(addr));
	log_info("step probe of %s: its backend's auth= token changed; the next request sends "
		 "the new one",
		 addr);
	if (!pr->easy) {
		pr->retry_at_ns = 0;
		pr->backoff_ms = BACKOFF_MIN_MS;
	}
}

/* One stream per address sends one token: the first service's. Another
 * service listing the address with another token (or none) is logged once
 * while it lasts, quoting neither. */
static void warn_token_conflicts(struct probe **list, size_t n)
{
	char addr[STEER_ADDR_STRLEN];
	size_t i;

	for (i = 0; i < n; i++) {
		struct probe *pr = list[i];

		if (pr->token_differs && !pr->token_warned) {
			steer_addr_format(&pr->addr, addr, sizeof(addr));
			log_warn("step probe of %s: services list it with different auth= tokens; "
				 "the probe sends the first service's",
				 addr);
		}
		pr->token_warned = pr->token_differs;
		pr->token_differs = false;
	}
}

/* The probe of addr in list[0..n), or NULL. */
static struct probe *probe_of(struct probe **list, size_t n, const struct steer_addr *addr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (steer_addr_equal(&list[i]->addr, addr))
			return list[i];
	return NULL;
}

/* The main thread's new backends, one probe per address: a probe whose
 * address stays keeps its stream and takes the address's slots now (a
 * service added or removed, a slot given anew); the others end, new
 * addresses start. */
static void take_targets(struct steer_probe *p)
{
	struct probe **next;
	size_t i, j, n = 0;

	if (!p->next_targets)
		return;
	next = calloc(p->next_n + p->n_pr + 1, sizeof(*next));
	if (!next)
		return; /* tried again at the next wake */
	p->next_targets = false;
	for (j = 0; j < p->n_pr; j++)
		p->pr[j]->keep = false;
	for (i = 0; i < p->next_n; i++) {
		const struct steer_probe_target *t = &p->next_t[i];
		struct probe *pr = probe_of(next, n, &t->addr);

		if (!pr) {
			struct probe *old = probe_of(p->pr, p->n_pr, &t->addr);

			pr = old ? old : probe_new(p, &t->addr);
			if (!pr)
				continue;
			pr->keep = true;
			pr->n_slots = 0;
			probe_set_token(pr, t->token, old != NULL);
			next[n++] = pr;
		} else if (!same_token(pr->token, t->token)) {
			pr->token_differs = true;
		}
		if (pr->n_slots < PROBE_SLOTS_MAX)
			pr->slots[pr->n_slots++] =
				(struct probe_slot){ t->svc_id, t->slot, t->slot_gen };
	}
	for (j = 0; j < p->n_pr; j++)
		if (!p->pr[j]->keep)
			probe_del(p, p->pr[j]);
	free(p->pr);
	p->pr = next;
	p->n_pr = n;
	warn_token_conflicts(p->pr, p->n_pr);
	/* Taken: the tokens now live in the probes only. */
	targets_free(p->next_t, p->next_n);
	p->next_t = NULL;
	p->next_n = 0;
}

/* A reload's path or body: every probe restarts with it. */
static void take_request(struct steer_probe *p)
{
	size_t i;

	if (!p->next_path)
		return;
	for (i = 0; i < p->n_pr; i++) {
		transfer_end(p, p->pr[i]);
		p->pr[i]->retry_at_ns = 0;
	}
	free(p->path);
	free(p->body);
	p->path = p->next_path;
	p->body = p->next_body;
	p->next_path = p->next_body = NULL;
	for (i = 0; i < p->n_pr; i++)
		probe_url(p, p->pr[i]);
}

/* ---- The thread --------------------------------------------------------------------- */

/* Starts the probes that are due; returns the ms until the next is (at most
 * one second: the thread also wakes to notice a stop). */
static int start_due(struct steer_probe *p)
{
	uint64_t now = steer_monotonic_ns(), next = now + NS_PER_S;
	size_t i;

	for (i = 0; i < p->n_pr; i++) {
		struct probe *pr = p->pr[i];

		if (pr->easy)
			continue;
		if (pr->retry_at_ns <= now)
			transfer_start(p, pr);
		else if (pr->retry_at_ns < next)
			next = pr->retry_at_ns;
	}
	return (int)((next - now + NS_PER_MS - 1) / NS_PER_MS);
}

static void reap_done(struct steer_probe *p)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(p->multi, &left))) {
		size_t i;

		if (m->msg != CURLMSG_DONE)
			continue;
		for (i = 0; i < p->n_pr; i++)
			if (p->pr[i]->easy == m->easy_handle) {
				transfer_done(p, p->pr[i], m->data.result);
				break;
			}
	}
}

static void *probe_main(void *arg)
{
	struct steer_probe *p = arg;

	prctl(PR_SET_NAME, "smg-probe"); /* top -H tells it apart */
	pthread_mutex_lock(&p->mu);
	while (!atomic_load(&p->stop)) {
		int running = 0, wait_ms;

		take_targets(p);
		take_request(p);
		wait_ms = start_due(p);
		curl_multi_perform(p->multi, &running);
		reap_done(p);
		flush(p);
		pthread_mutex_unlock(&p->mu);
		curl_multi_poll(p->multi, NULL, 0, wait_ms, NULL);
		pthread_mutex_lock(&p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

/* ---- API ------------------------------------------------------------------------------ */

static void probe_free(struct steer_probe *p)
{
	size_t i;

	for (i = 0; i < p->n_pr; i++)
		probe_del(p, p->pr[i]);
	free(p->pr);
	targets_free(p->next_t, p->next_n);
	free(p->path);
	free(p->body);
	free(p->next_path);
	free(p->next_body);
	curl_slist_free_all(p->headers);
	if (p->multi)
		curl_multi_cleanup(p->multi);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int steer_probe_start(struct steer_dp *dp, const char *path, const char *body,
		      struct steer_probe **out, char *err, size_t errlen)
{
	struct steer_probe *p;
	struct curl_slist *h;
	int rc;

	*out = NULL;
	if (steer_curl_global_init())
		return steer_seterr(err, errlen, EIO, "step probe: cannot initialize libcurl");
	p = calloc(1, sizeof(*p));
	if (!p)
		return steer_seterr(err, errlen, ENOMEM, "step probe: out of memory");
	pthread_mutex_init(&p->mu, NULL);
	p->dp = dp;
	p->multi = curl_multi_init();
	p->path = strdup(path);
	p->body = strdup(body);
	h = curl_slist_append(NULL, "Content-Type: application/json");
	p->headers = h ? curl_slist_append(h, "Accept: text/event-stream") : NULL;
	if (!p->headers)
		curl_slist_free_all(h);
	if (!p->multi || !p->path || !p->body || !p->headers) {
		probe_free(p);
		return steer_seterr(err, errlen, ENOMEM, "step probe: out of memory");
	}
	rc = pthread_create(&p->thread, NULL, probe_main, p);
	if (rc) {
		probe_free(p);
		return steer_seterr(err, errlen, rc, "step probe: cannot start its thread: %s",
				    strerror(rc));
	}
	p->started = true;
	*out = p;
	return 0;
}

int steer_probe_set_targets(struct steer_probe *p, const struct steer_probe_target *t, size_t n)
{
	struct steer_probe_target *copy = calloc(n ? n : 1, sizeof(*copy));
	size_t i;

	if (!copy)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		copy[i] = t[i];
		copy[i].token = t[i].token ? strdup(t[i].token) : NULL;
		if (t[i].token && !copy[i].token) {
			targets_free(copy, i);
			return -ENOMEM;
		}
	}
	pthread_mutex_lock(&p->mu);
	targets_free(p->next_t, p->next_n); /* not taken yet: replaced */
	p->next_t = copy;
	p->next_n = n;
	p->next_targets = true;
	pthread_mutex_unlock(&p->mu);
	curl_multi_wakeup(p->multi);
	return 0;
}

int steer_probe_set_request(struct steer_probe *p, const char *path, const char *body)
{
	char *np = strdup(path), *nb = strdup(body);

	if (!np || !nb) {
		free(np);
		free(nb);
		return -ENOMEM;
	}
	pthread_mutex_lock(&p->mu);
	if (!strcmp(np, p->path) && !strcmp(nb, p->body) && !p->next_path) {
		pthread_mutex_unlock(&p->mu);
		free(np);
		free(nb);
		return 0; /* unchanged: the streams go on */
	}
	free(p->next_path);
	free(p->next_body);
	p->next_path = np;
	p->next_body = nb;
	pthread_mutex_unlock(&p->mu);
	curl_multi_wakeup(p->multi);
	return 0;
}

void steer_probe_stats(struct steer_probe *p, struct steer_probe_stats *out)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&p->mu);
	for (i = 0; i < p->n_pr && out->n < STEER_PROBE_STATS_MAX; i++)
		out->p[out->n++] = p->pr[i]->st;
	out->applied = p->applied;
	out->apply_errors = p->apply_errors;
	pthread_mutex_unlock(&p->mu);
}

void steer_probe_stop(struct steer_probe *p)
{
	if (!p)
		return;
	atomic_store(&p->stop, true);
	curl_multi_wakeup(p->multi);
	if (p->started)
		pthread_join(p->thread, NULL);
	probe_free(p);
}
