// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_loads.c - user/loads/loads.c against real peers in a private network
 * namespace: an HTTP/1.1 server run by this test (it answers each path as a
 * test says: status, body, a Bearer token it demands, a body that dribbles),
 * the SGLang gRPC fake (tests/lib/fake_worker.py), a closed port.
 *
 * What is checked is the probing order and its outcome (the source a backend
 * ends up with), that failures are failures and never a zero load, that a
 * backend without any load endpoint is alive through a TCP connect, and that
 * a source that stops answering is probed again after reprobe_after polls.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "dataplane/dataplane.h"
#include "loads/loads.h"
#include "metrics/metrics.h" /* steer_poll_kind_name */
#include "tap.h"
#include "testenv.h"

#define MS 1000000ULL
#define TIMEOUT_NS (500 * MS)
#define MAX_ROUTES 4

/* ---- a tiny HTTP/1.1 server, one connection at a time ----------------------------- */

struct route {
	char path[64];
	int status;
	char body[2048];
	int dribble_ms; /* > 0: send the body a byte at a time, this far apart */
};

struct http_server {
	char addr[64];
	int fd;
	pthread_t thr;
	atomic_int stop;
	pthread_mutex_t mu;
	struct route routes[MAX_ROUTES];
	int n_routes;
	char token[64];	     /* demanded when set */
	char last_auth[128]; /* the Authorization header last seen */
	atomic_int requests;
	atomic_int conns; /* connection threads running */
};

static void server_route(struct http_server *s, const char *path, int status, const char *body)
{
	int i;

	pthread_mutex_lock(&s->mu);
	for (i = 0; i < s->n_routes && strcmp(s->routes[i].path, path); i++)
		;
	if (i == s->n_routes && s->n_routes < MAX_ROUTES)
		s->n_routes++;
	if (i < MAX_ROUTES) {
		snprintf(s->routes[i].path, sizeof(s->routes[i].path), "%s", path);
		s->routes[i].status = status;
		snprintf(s->routes[i].body, sizeof(s->routes[i].body), "%s", body);
		s->routes[i].dribble_ms = 0;
	}
	pthread_mutex_unlock(&s->mu);
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Answer requests on one connection until the client closes it. */
static void serve_conn(struct http_server *s, int c)
{
	char req[4096];
	size_t got = 0;

	for (;;) {
		char path[256] = "", *auth, *end, head[256];
		struct route r = { .status = 404 };
		ssize_t n = recv(c, req + got, sizeof(req) - 1 - got, 0);
		int i;

		if (n <= 0 || got + (size_t)n >= sizeof(req) - 1)
			return;
		got += (size_t)n;
		req[got] = 0;
		end = strstr(req, "\r\n\r\n");
		if (!end)
			continue;
		sscanf(req, "GET %255s", path);
		auth = strcasestr(req, "\r\nAuthorization: ");
		pthread_mutex_lock(&s->mu);
		s->last_auth[0] = 0;
		if (auth)
			sscanf(auth + 17, "%127[^\r]", s->last_auth);
		for (i = 0; i < s->n_routes; i++)
			if (!strcmp(s->routes[i].path, path))
				r = s->routes[i];
		if (s->token[0] && !(auth && !strncmp(s->last_auth, "Bearer ", 7) &&
				     !strcmp(s->last_auth + 7, s->token)))
			r = (struct route){ .status = 401 };
		pthread_mutex_unlock(&s->mu);
		atomic_fetch_add(&s->requests, 1);
		snprintf(head, sizeof(head),
			 "HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
			 r.status, strlen(r.body));
		send_all(c, head, strlen(head));
		if (r.dribble_ms) {
			for (i = 0; r.body[i] && !atomic_load(&s->stop); i++) {
				send_all(c, &r.body[i], 1);
				usleep((useconds_t)r.dribble_ms * 1000);
			}
		} else {
			send_all(c, r.body, strlen(r.body));
		}
		memmove(req, end + 4, got - (size_t)(end + 4 - req));
		got -= (size_t)(end + 4 - req);
	}
}

struct conn {
	struct http_server *s;
	int fd;
};

static void *conn_main(void *arg)
{
	struct conn *c = arg;

	serve_conn(c->s, c->fd);
	close(c->fd);
	atomic_fetch_sub(&c->s->conns, 1);
	free(c);
	return NULL;
}

/* A thread per connection: a client's idle keep-alive connection (closed by
 * the 100 ms receive timeout) never holds up another client's. */
static void *server_main(void *arg)
{
	struct http_server *s = arg;

	while (!atomic_load(&s->stop)) {
		struct conn *c;
		pthread_t t;
		int fd = accept(s->fd, NULL, NULL);

		if (fd < 0)
			continue;
		c = malloc(sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		*c = (struct conn){ .s = s, .fd = fd };
		atomic_fetch_add(&s->conns, 1);
		if (pthread_create(&t, NULL, conn_main, c)) {
			atomic_fetch_sub(&s->conns, 1);
			close(fd);
			free(c);
			continue;
		}
		pthread_detach(t);
	}
	return NULL;
}

static int server_start(struct http_server *s, const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1;
	struct timeval tv = { .tv_usec = 100000 };

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	if (test_sockaddr(addr, &ss, &len))
		return -1;
	s->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/* accept() wakes up now and then to see stop. */
	setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&ss, len) || listen(s->fd, 16))
		return -1;
	return pthread_create(&s->thr, NULL, server_main, s) ? -1 : 0;
}

static void server_stop(struct http_server *s)
{
	if (s->fd <= 0)
		return;
	atomic_store(&s->stop, 1);
	shutdown(s->fd, SHUT_RDWR);
	pthread_join(s->thr, NULL);
	close(s->fd);
	s->fd = 0;
	while (atomic_load(&s->conns) > 0) /* each ends within its receive timeout */
		usleep(10000);
}

/* ---- driving the module --------------------------------------------------------------- */

static struct steer_loads *L;

static int add(int scheme, int engine, const char *addr, const char *path, const char *token)
{
	struct steer_loads_spec spec = {
		.scheme = scheme,
		.engine = engine,
		.loads_addr = addr,
		.path = path,
		.traffic_addr = addr,
		.token = token,
		.reprobe_after = 2,
		.max_backoff_ms = 200,
	};

	return steer_loads_add(L, &spec, (void *)addr);
}

/* One poll of handle h: its result, or kind NONE when none came within 10 s. */
static struct steer_loads_result poll_once(int h)
{
	struct steer_loads_result r = { .kind = STEER_POLL_NONE };
	uint64_t end = steer_monotonic_ns() + 10000 * MS;

	if (steer_loads_start(L, h, TIMEOUT_NS) != 0)
		return r;
	while (steer_monotonic_ns() < end)
		if (steer_loads_next(L, end, &r) == 1)
			break;
	return r;
}

static const char *kind_name(enum steer_poll_kind k)
{
	return steer_poll_kind_name(k);
}

static const char JSON_TWO_RANKS[] =
	"{\"dp_rank_count\": 2, \"loads\": ["
	"{\"dp_rank\": 0, \"num_running_reqs\": 3, \"num_waiting_reqs\": 2,"
	" \"num_waiting_uncached_tokens\": 1000, \"token_usage\": 0.25, \"gen_throughput\": 700.0},"
	"{\"dp_rank\": 1, \"num_running_reqs\": 1, \"num_waiting_reqs\": 4,"
	" \"num_waiting_uncached_tokens\": 500, \"token_usage\": 0.75, \"gen_throughput\": "
	"300.0}]}";

static const char VLLM_METRICS[] = "# HELP vllm:num_requests_waiting Number of requests waiting.\n"
				   "# TYPE vllm:num_requests_waiting gauge\n"
				   "vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 3.0\n"
				   "vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 5.0\n"
				   "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 1.0\n"
				   "vllm:num_requests_running{engine=\"1\",model_name=\"m\"} 2.0\n"
				   "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.2\n"
				   "vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.4\n";

/* ---- tests -------------------------------------------------------------------------- */

static struct http_server web;

static void test_auto_prefers_v1_loads(void)
{
	int h = add(STEER_SCHEME_AUTO, STEER_ENGINE_AUTO, web.addr, "", NULL);
	struct steer_loads_result r;

	server_route(&web, "/v1/loads?include=core", 200, JSON_TWO_RANKS);
	server_route(&web, "/metrics", 200, VLLM_METRICS);
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_OK, "kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(r.source == STEER_SOURCE_HTTP_LOADS, "source %s", steer_source_name(r.source));
	CHECK(r.load.queued_uncached_tokens == 1500 && r.load.throughput == 1000 &&
		      r.load.kv_usage == 0.5 && r.load.ranks == 2,
	      "queued %.0f throughput %.0f kv %.3f ranks %u", r.load.queued_uncached_tokens,
	      r.load.throughput, r.load.kv_usage, r.load.ranks);
	CHECK(steer_loads_source(L, h) == STEER_SOURCE_HTTP_LOADS, "not kept");
	steer_loads_remove(L, h);
}

static void test_auto_falls_back_to_metrics(void)
{
	int h = add(STEER_SCHEME_AUTO, STEER_ENGINE_AUTO, web.addr, "", NULL);
	struct steer_loads_result r;

	server_route(&web, "/v1/loads?include=core", 404, "not found");
	server_route(&web, "/metrics", 200, VLLM_METRICS);
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_OK, "kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(r.source == STEER_SOURCE_HTTP_METRICS_VLLM, "source %s", steer_source_name(r.source));
	CHECK(r.load.waiting_reqs == 8 && r.load.running_reqs == 3 && r.load.kv_usage > 0.299 &&
		      r.load.kv_usage < 0.301,
	      "waiting %.0f running %.0f kv %.3f", r.load.waiting_reqs, r.load.running_reqs,
	      r.load.kv_usage);
	steer_loads_remove(L, h);
}

/* No load endpoint at all: alive through a TCP connect, and kept that way. */
static void test_auto_without_endpoint_is_tcp(void)
{
	int h = add(STEER_SCHEME_AUTO, STEER_ENGINE_AUTO, web.addr, "", NULL);
	struct steer_loads_result r;
	int before;

	server_route(&web, "/v1/loads?include=core", 404, "");
	server_route(&web, "/metrics", 404, "");
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_UNIMPLEMENTED && r.source == STEER_SOURCE_TCP,
	      "kind %s source %s: %s", kind_name(r.kind), steer_source_name(r.source), r.detail);
	before = atomic_load(&web.requests);
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_UNIMPLEMENTED && r.source == STEER_SOURCE_TCP,
	      "second poll: kind %s source %s", kind_name(r.kind), steer_source_name(r.source));
	CHECK(atomic_load(&web.requests) == before,
	      "the kept TCP probe sent an HTTP request (%d before, %d after)", before,
	      atomic_load(&web.requests));
	steer_loads_remove(L, h);
}

static void test_refused_is_a_failure(void)
{
	int h = add(STEER_SCHEME_AUTO, STEER_ENGINE_AUTO, "127.0.0.1:1", "", NULL);
	struct steer_loads_result r = poll_once(h);

	CHECK(r.kind == STEER_POLL_UNAVAILABLE, "kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(steer_loads_source(L, h) == STEER_SOURCE_NONE, "locked to %s",
	      steer_source_name(steer_loads_source(L, h)));
	steer_loads_remove(L, h);
}

/* Broken answers are failed polls, never a zero load. */
static void test_broken_answers_fail(void)
{
	int h = add(STEER_SCHEME_HTTP, STEER_ENGINE_AUTO, web.addr, "/v1/loads?include=core", NULL);
	struct steer_loads_result r;

	server_route(&web, "/v1/loads?include=core", 200, "{\"dp_rank_count\": 1, \"loads\": [{");
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_INVALID, "truncated JSON: kind %s", kind_name(r.kind));
	server_route(&web, "/v1/loads?include=core", 500, "boom");
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_ERROR && r.status == 500, "500: kind %s status %d",
	      kind_name(r.kind), r.status);
	steer_loads_remove(L, h);

	h = add(STEER_SCHEME_HTTP, STEER_ENGINE_VLLM, web.addr, "/metrics", NULL);
	server_route(&web, "/metrics", 200,
		     "vllm:kv_cache_usage_perc{engine=\"0\"} NaN\nvllm:num_requests_waiting 1\n");
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_INVALID, "NaN KV: kind %s: %s", kind_name(r.kind), r.detail);
	steer_loads_remove(L, h);
}

static void test_slow_body_hits_the_deadline(void)
{
	int h = add(STEER_SCHEME_HTTP, STEER_ENGINE_AUTO, web.addr, "/v1/loads?include=core", NULL);
	struct steer_loads_result r;
	uint64_t t0 = steer_monotonic_ns();

	server_route(&web, "/v1/loads?include=core", 200, JSON_TWO_RANKS);
	pthread_mutex_lock(&web.mu);
	web.routes[0].dribble_ms = 50; /* about 17 s for the whole body */
	pthread_mutex_unlock(&web.mu);
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_DEADLINE, "kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(steer_monotonic_ns() - t0 < 5000 * MS, "took %.1f s",
	      (double)(steer_monotonic_ns() - t0) / 1e9);
	steer_loads_remove(L, h);
	pthread_mutex_lock(&web.mu);
	web.routes[0].dribble_ms = 0;
	pthread_mutex_unlock(&web.mu);
}

static void test_bearer_token(void)
{
	int h = add(STEER_SCHEME_HTTP, STEER_ENGINE_AUTO, web.addr, "", "s3cret");
	struct steer_loads_result r;

	server_route(&web, "/v1/loads?include=core", 200, JSON_TWO_RANKS);
	pthread_mutex_lock(&web.mu);
	snprintf(web.token, sizeof(web.token), "s3cret");
	pthread_mutex_unlock(&web.mu);
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_OK, "with the token: kind %s: %s", kind_name(r.kind), r.detail);
	CHECK(!strcmp(web.last_auth, "Bearer s3cret"), "Authorization: '%s'", web.last_auth);
	CHECK(steer_loads_set_auth(L, h, "wrong") == 0, "set_auth");
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_ERROR && r.status == 401, "wrong token: kind %s status %d",
	      kind_name(r.kind), r.status);
	pthread_mutex_lock(&web.mu);
	web.token[0] = 0;
	pthread_mutex_unlock(&web.mu);
	steer_loads_remove(L, h);
}

/* Occurrences in this process's writable memory of the string whose bytes
 * xored with 0x5a are enc[0..n): the pattern itself is never in memory.
 * Read through /proc/self/mem, which sees freed blocks too (ASan does not
 * stop it), and skips the sanitizers' huge shadow mappings. */
static int count_in_memory(const unsigned char *enc, size_t n)
{
	static unsigned char buf[1 << 16];
	FILE *maps = fopen("/proc/self/maps", "r");
	int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC), found = 0;
	char line[512];

	while (maps && mem >= 0 && fgets(line, sizeof(line), maps)) {
		unsigned long lo, hi, at;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3 || perms[0] != 'r' ||
		    perms[1] != 'w' || hi - lo > (1UL << 30))
			continue;
		for (at = lo; at < hi; at += sizeof(buf) - n) {
			size_t want = hi - at < sizeof(buf) ? hi - at : sizeof(buf), i, j;
			ssize_t got = pread(mem, buf, want, (off_t)at);

			for (i = 0; got > 0 && i + n <= (size_t)got; i++) {
				for (j = 0; j < n && (buf[i + j] ^ 0x5a) == enc[j]; j++)
					;
				found += j == n;
			}
			/* Cleared, so that reading buf's own pages finds nothing twice. */
			explicit_bzero(buf, sizeof(buf));
			if (want < sizeof(buf))
				break;
		}
	}
	if (maps)
		fclose(maps);
	if (mem >= 0)
		close(mem);
	return found;
}

/* A bearer token leaves no copy in the heap once its backend is removed:
 * libcurl's header list and the requests it built are wiped when freed. The
 * worker is a listening socket nobody reads, so the request stays in the
 * kernel, never in this process. */
static void test_token_copies_wiped(void)
{
	unsigned char raw[16], enc[32];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(8090) };
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), cfd, queued = 0, h, before;
	char *token = malloc(sizeof(enc) + 1);
	size_t i;

	CHECK(token && lfd >= 0 && getrandom(raw, sizeof(raw), 0) == sizeof(raw), "setup");
	for (i = 0; i < sizeof(raw); i++) {
		token[2 * i] = "0123456789abcdef"[raw[i] >> 4];
		token[2 * i + 1] = "0123456789abcdef"[raw[i] & 15];
	}
	token[sizeof(enc)] = 0;
	for (i = 0; i < sizeof(enc); i++)
		enc[i] = (unsigned char)token[i] ^ 0x5a;
	explicit_bzero(raw, sizeof(raw));
	inet_pton(AF_INET, "127.0.0.32", &sa.sin_addr);
	CHECK(!bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) && !listen(lfd, 4), "listen");
	before = count_in_memory(enc, sizeof(enc));
	CHECK(before >= 1, "the scan does not find the token where it is (%d)", before);
	h = add(STEER_SCHEME_HTTP, STEER_ENGINE_AUTO, "127.0.0.32:8090", "/v1/loads", token);
	explicit_bzero(token, sizeof(enc));
	free(token);
	CHECK(h >= 0, "add");
	poll_once(h); /* times out: nobody answers */
	poll_once(h);
	steer_loads_remove(L, h);
	cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	CHECK(cfd >= 0 && !ioctl(cfd, FIONREAD, &queued) && queued > 40,
	      "the request was not sent (%d bytes queued)", queued);
	i = (size_t)count_in_memory(enc, sizeof(enc));
	printf("# %d bytes of request sent; copies of the token in memory: %d while held, %zu "
	       "after the backend's removal\n",
	       queued, before, i);
	CHECK(i == 0, "%zu copies of the token left in memory", i);
	if (cfd >= 0)
		close(cfd);
	close(lfd);
}

/* A failed poll names the source that was polled: an engine=vllm backend's
 * /metrics is vLLM's, also before any answer was decoded. */
static void test_failure_names_the_polled_source(void)
{
	int h = add(STEER_SCHEME_HTTP, STEER_ENGINE_VLLM, web.addr, "/metrics", NULL);
	struct steer_loads_result r;

	server_route(&web, "/metrics", 500, "");
	r = poll_once(h);
	CHECK(r.kind != STEER_POLL_OK && r.source == STEER_SOURCE_HTTP_METRICS_VLLM,
	      "kind %s source %s", kind_name(r.kind), steer_source_name(r.source));
	steer_loads_remove(L, h);
}

/* A kept source that goes away: failed polls, then, after reprobe_after, the
 * next source that answers. */
static void test_reprobes_after_failures(void)
{
	int h = add(STEER_SCHEME_AUTO, STEER_ENGINE_AUTO, web.addr, "", NULL);
	struct steer_loads_result r;

	server_route(&web, "/v1/loads?include=core", 200, JSON_TWO_RANKS);
	server_route(&web, "/metrics", 200, VLLM_METRICS);
	r = poll_once(h);
	CHECK(r.source == STEER_SOURCE_HTTP_LOADS, "source %s", steer_source_name(r.source));
	server_route(&web, "/v1/loads?include=core", 404, "");
	r = poll_once(h);
	CHECK(r.kind != STEER_POLL_OK && r.kind != STEER_POLL_UNIMPLEMENTED,
	      "first poll after the endpoint went: kind %s", kind_name(r.kind));
	r = poll_once(h);
	CHECK(r.kind != STEER_POLL_OK, "second: kind %s", kind_name(r.kind));
	r = poll_once(h);
	CHECK(r.kind == STEER_POLL_OK && r.source == STEER_SOURCE_HTTP_METRICS_VLLM,
	      "after reprobe_after: kind %s source %s", kind_name(r.kind),
	      steer_source_name(r.source));
	steer_loads_remove(L, h);
}

/* Handles added while transfers are in flight (the tables grow): every poll
 * still ends with its own answer. */
static void test_many_handles_at_once(void)
{
	enum {
		N = 40
	};
	int h[N], i, got = 0, ok = 0;
	struct steer_loads_result r;
	uint64_t end;

	server_route(&web, "/v1/loads?include=core", 200, JSON_TWO_RANKS);
	for (i = 0; i < N; i++) {
		h[i] = add(STEER_SCHEME_HTTP, STEER_ENGINE_AUTO, web.addr, "/v1/loads?include=core",
			   NULL);
		CHECK(h[i] >= 0 && steer_loads_start(L, h[i], 5000 * MS) == 0, "handle %d", i);
	}
	end = steer_monotonic_ns() + 20000 * MS;
	while (got < N && steer_monotonic_ns() < end)
		if (steer_loads_next(L, end, &r) == 1) {
			got++;
			ok += r.kind == STEER_POLL_OK && r.load.ranks == 2;
		}
	for (i = 0; i < N; i++)
		steer_loads_remove(L, h[i]);
	CHECK(got == N && ok == N, "%d answers, %d ok", got, ok);
}

/* gRPC on an HTTP port and HTTP on a gRPC port are failures when configured. */
static void test_wrong_protocol_fails(void)
{
	int h = add(STEER_SCHEME_GRPC, STEER_ENGINE_SGLANG, web.addr, "", NULL);
	struct steer_loads_result r = poll_once(h);

	CHECK(r.kind != STEER_POLL_OK && r.kind != STEER_POLL_UNIMPLEMENTED,
	      "gRPC to an HTTP/1.1 server: kind %s", kind_name(r.kind));
	steer_loads_remove(L, h);
}

int main(void)
{
	if (testenv_init("loads") != 0 || server_start(&web, "127.0.0.31:8080") != 0)
		return tap_setup_failed();
	L = steer_loads_new();
	if (!L)
		return tap_setup_failed();
	TAP_RUN(test_auto_prefers_v1_loads);
	TAP_RUN(test_auto_falls_back_to_metrics);
	TAP_RUN(test_auto_without_endpoint_is_tcp);
	TAP_RUN(test_refused_is_a_failure);
	TAP_RUN(test_broken_answers_fail);
	TAP_RUN(test_slow_body_hits_the_deadline);
	TAP_RUN(test_bearer_token);
	TAP_RUN(test_token_copies_wiped);
	TAP_RUN(test_failure_names_the_polled_source);
	TAP_RUN(test_reprobes_after_failures);
	TAP_RUN(test_wrong_protocol_fails);
	TAP_RUN(test_many_handles_at_once);
	steer_loads_free(L);
	server_stop(&web);
	return tap_done();
}
