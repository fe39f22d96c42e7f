// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* wire_lib.h - what the request-accounting tests share (see wire_lib.c). */
#ifndef WIRE_LIB_H
#define WIRE_LIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "dataplane/dataplane.h"

#define TTL_LONG (600ULL * 1000000000ULL)
#define WAIT_MS 10000 /* generous bound on every wait for a condition */
#define NPT 1000.0    /* ns per token of every backend here */
#define CREDIT STEER_DEFAULT_CREDIT_TOKENS

enum resp_mode {
	RESP_JSON, /* one write: {"ok":true} */
	RESP_SSE,  /* SSE_CHUNKS writes, each when told */
};
#define SSE_CHUNKS 3

/*
 * One backend. The test announces how many request bytes to expect; the
 * responder reads exactly that many from its current connection, says so,
 * and writes its answer (or each chunk of it) when the test says go. It does
 * not parse HTTP: the test knows each request's size.
 */
struct responder {
	struct steer_addr addr;
	enum resp_mode mode;
	int lfd;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	long expect;   /* bytes of the next request; 0: none announced */
	long received; /* of the current request */
	int go;	       /* chunks the test allowed to be written */
	int written;   /* chunks written for the current request */
	long seq;      /* requests announced */
	long finished; /* requests handled, answered or not */
	int stop;
};

/* The slot's accounting as now: what the assertions compare. */
struct wire_now {
	uint64_t sent, answered, requests, pending, withdrawn, inflight;
};

/* The data plane every test uses (opened by the test's setup). */
extern struct steer_dp *dp;
extern struct steer_dp_opts dp_opts;
extern char err[512];

/* Open dp as the owner on the test's pins and cgroup (testenv), with any other
 * dp_opts the test set before; 0, or -1 said on stderr. */
int wire_dp_open(void);
/* Detach and close dp, if open (the test's end). */
void wire_dp_close(void);

bool wait_until(struct responder *r, bool (*cond)(struct responder *));
bool all_received(struct responder *r);
bool idle(struct responder *r);
int responder_start(struct responder *r, const char *addr, enum resp_mode mode);
void responder_stop(struct responder *r);
/* The next request's size; the previous one is let finish first. */
void announce(struct responder *r, long bytes);
/* Let the responder write one more chunk of its answer. */
void allow_chunk(struct responder *r);
bool finish_abandoned(struct responder *r);
/* Connect to a steer_addr with TCP_NODELAY; fd or -errno. */
int client_connect(const struct steer_addr *a);
char *http_request(size_t total);
int send_all(int fd, const char *p, size_t n);
/* Send a request of size bytes and wait until the responder has all of it. */
int send_request(int fd, struct responder *r, size_t size);
/* Read one response piece (a chunk the responder wrote). */
ssize_t read_some(int fd);
/* Publish one service over the responders, base 0, NPT ns per token. */
int publish(const struct steer_addr *vip, struct responder **be, int n, uint32_t bpt);
/* The same with table flags (STEER_TBL_*) and ns per token. */
int publish_flags(const struct steer_addr *vip, struct responder **be, int n, uint32_t bpt,
		  uint32_t flags, double npt);
uint32_t slot_of(const struct steer_addr *vip, const struct responder *be);
struct wire_now wire_now(uint32_t slot);
/* steer_select only reads through this pointer. */
struct steer_slot *slot_at(void *ctx, __u32 slot);
size_t tracked(void);

#endif /* WIRE_LIB_H */
