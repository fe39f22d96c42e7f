// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * onebyte.c - the benchmark backend: N TCP listeners that each write one
 * byte to every connection they accept, then close it.
 *
 *   onebyte --base 127.0.1.1 --port 9000 --count 64 [--threads 2] [--byte B]
 *
 * Listener i is bound to base+i (the IPv4 address plus i) on --port, or with
 * --same-ip to base on port+i; --base 0.0.0.0 --count 1 binds the wildcard. The
 * byte written is (B + i) mod 256 (B is 0 unless given), so the client can
 * tell which backend served it, also when each backend is its own onebyte.
 * --request: a request/response exchange instead (connbench --request): the
 * listeners defer accept until the client's first bytes arrive
 * (TCP_DEFER_ACCEPT), which are read before the byte is written. Every thread runs its own epoll over all
 * listeners (EPOLLEXCLUSIVE: one thread is woken per connection). "READY" goes
 * to stdout once everything is bound; SIGTERM and SIGINT stop it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_LISTENERS 1024
#define MAX_THREADS 16

static volatile sig_atomic_t stopping;
static int listeners[MAX_LISTENERS];
static int n_listeners;
static unsigned first_byte; /* --byte: what listener 0 writes */
static bool request;	    /* --request: read the client's request first */

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int listen_on(uint32_t ip_host, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(ip_host) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (request) /* accept once the request is there: reading it never waits */
		setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 4096) != 0) {
		fprintf(stderr, "onebyte: cannot listen on %s:%u: %s\n", inet_ntoa(sa.sin_addr),
			port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Accept everything pending on one listener; each gets its byte and a close. */
static void drain_listener(int lfd, unsigned char byte)
{
	for (;;) {
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | (request ? SOCK_NONBLOCK : 0));
		char req[64];

		if (c < 0)
			return; /* EAGAIN, or a connection reset before accept */
		/* Unread bytes at close would turn the FIN into a reset. */
		if (request && read(c, req, sizeof(req)) < 0) {
			/* deferral timed out with nothing sent, or a reset: answer anyway */
		}
		if (write(c, &byte, 1) < 0) {
			/* the client went away first; nothing to do */
		}
		close(c);
	}
}

static void *serve(void *arg)
{
	struct epoll_event ev[64];
	int ep = epoll_create1(EPOLL_CLOEXEC), i;

	(void)arg;
	if (ep < 0)
		return NULL;
	for (i = 0; i < n_listeners; i++) {
		struct epoll_event e = { .events = EPOLLIN | EPOLLEXCLUSIVE,
					 .data.u32 = (uint32_t)i };

		if (epoll_ctl(ep, EPOLL_CTL_ADD, listeners[i], &e) != 0) {
			perror("onebyte: epoll_ctl");
			close(ep);
			return NULL;
		}
	}
	while (!stopping) {
		int n = epoll_wait(ep, ev, 64, 200);

		for (i = 0; i < n; i++)
			drain_listener(listeners[ev[i].data.u32],
				       (unsigned char)(first_byte + ev[i].data.u32));
	}
	close(ep);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: onebyte --base IPV4 --port PORT --count N [--same-ip] "
			"[--threads T] [--byte B] [--request]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "base", required_argument, 0, 'b' },	{ "port", required_argument, 0, 'p' },
		{ "count", required_argument, 0, 'n' }, { "threads", required_argument, 0, 't' },
		{ "same-ip", no_argument, 0, 's' },	{ "byte", required_argument, 0, 'B' },
		{ "request", no_argument, 0, 'r' },	{ 0, 0, 0, 0 },
	};
	pthread_t thr[MAX_THREADS];
	struct in_addr base = { 0 };
	int port = 0, threads = 2, c, i;
	bool same_ip = false;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'b':
			if (inet_pton(AF_INET, optarg, &base) != 1)
				usage();
			break;
		case 'p':
			port = atoi(optarg);
			break;
		case 'n':
			n_listeners = atoi(optarg);
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 's':
			same_ip = true;
			break;
		case 'B':
			first_byte = (unsigned)atoi(optarg) % 256;
			break;
		case 'r':
			request = true;
			break;
		default:
			usage();
		}
	}
	if ((!base.s_addr && n_listeners != 1) || port <= 0 || n_listeners <= 0 ||
	    n_listeners > MAX_LISTENERS || threads <= 0 || threads > MAX_THREADS ||
	    (same_ip && port + n_listeners > 65536))
		usage();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	for (i = 0; i < n_listeners; i++) {
		uint32_t ip = ntohl(base.s_addr) + (same_ip ? 0 : (uint32_t)i);

		listeners[i] = listen_on(ip, (uint16_t)(port + (same_ip ? i : 0)));
		if (listeners[i] < 0)
			return 1;
	}
	for (i = 0; i < threads; i++)
		if (pthread_create(&thr[i], NULL, serve, NULL) != 0) {
			fprintf(stderr, "onebyte: cannot start thread %d\n", i);
			return 1;
		}
	printf("READY\n");
	fflush(stdout);
	for (i = 0; i < threads; i++)
		pthread_join(thr[i], NULL);
	for (i = 0; i < n_listeners; i++)
		close(listeners[i]);
	return 0;
}
