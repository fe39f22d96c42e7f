/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * poller.h - GetLoads over gRPC (the gRPC core C API), many backends
 * concurrently from one completion queue, driven by the caller's thread.
 *
 * The caller starts one call per backend per interval and then idles in
 * steer_poller_next(), which is where gRPC makes progress, reconnects
 * included. Nothing here sleeps. A response is decoded with protobuf-c and
 * validated; only a valid one reaches the caller as STEER_POLL_OK.
 */
#ifndef STEER_POLLER_H
#define STEER_POLLER_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "steer_common.h"

struct steer_poller;

struct steer_poll_result {
	void *tag;		   /* as given to steer_poller_add */
	enum steer_poll_kind kind; /* OK, UNIMPLEMENTED, UNAVAILABLE, DEADLINE, INVALID, ERROR */
	int grpc_status;	   /* grpc_status_code as received (0 for INVALID) */
	char detail[200];	   /* status message or validation failure; "" for OK */
	struct steer_load load;	   /* OK only: validated and aggregated across DP ranks */
	uint64_t started_ns;	   /* CLOCK_MONOTONIC when the call was started */
	uint64_t duration_ns;	   /* until the result */
};

/* grpc_init() is called by the first poller, grpc_shutdown() by the last free. */
struct steer_poller *steer_poller_new(void);
void steer_poller_free(struct steer_poller *p); /* cancels calls in flight and drains */

/*
 * Register a backend's GetLoads endpoint ("127.0.0.1:30000", "[::1]:30000").
 * Returns a handle >= 0 or a negative errno. The channel is created with
 * short reconnect backoff so a restarted backend is reachable again within
 * an interval; max_backoff_ms bounds it (use the load check interval).
 */
int steer_poller_add(struct steer_poller *p, const char *target, void *tag,
		     uint32_t max_backoff_ms);
/* Unregister; a call in flight is cancelled and its result is never reported. */
void steer_poller_remove(struct steer_poller *p, int handle);

/* Start a GetLoads call with the given deadline. -EBUSY if one is in flight.
 * steer_poller_start asks SGLang's service; _engine any enum steer_engine but
 * AUTO (load_decode.h), whose method it calls and whose decoder it uses. */
int steer_poller_start(struct steer_poller *p, int handle, uint64_t timeout_ns);
int steer_poller_start_engine(struct steer_poller *p, int handle, uint64_t timeout_ns, int engine);
/* Send "authorization: Bearer <token>" with every call (NULL: nothing). The
 * handle keeps its own copy, wiped when replaced or removed. */
int steer_poller_set_auth(struct steer_poller *p, int handle, const char *token);
/* True while a call for handle is in flight. */
int steer_poller_busy(const struct steer_poller *p, int handle);

/*
 * Wait for the next finished call until deadline_ns (CLOCK_MONOTONIC).
 * Returns 1 with *out filled, 0 when the deadline passed first.
 */
int steer_poller_next(struct steer_poller *p, uint64_t deadline_ns, struct steer_poll_result *out);

/* Decode and validate a serialized SGLang GetLoadsResponse (exposed for tests).
 * Returns STEER_POLL_OK with *load filled, or STEER_POLL_INVALID with detail. */
enum steer_poll_kind steer_poller_decode(const uint8_t *buf, size_t len, struct steer_load *load,
					 char *detail, size_t detail_len);

#endif /* STEER_POLLER_H */
