/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * norel.h - ABLATION ONLY (issue 10): the data plane without the release hook
 * (bpf/steer_norel.bpf.c). smg-steerd never calls this; the bench
 * (tools/bench/norelbench.c) and its smoke test (tests/test_norel.c) do.
 *
 * steer_norel_open() takes a data plane already opened by steer_dp_open()
 * (own) at pin_dir, detaches its cgroup/sock_release link, loads the walk
 * and the reset signal from the object at obj_path over the same pinned maps,
 * and attaches the reset signal. steer_norel_poll() is what the daemon would
 * run once per poll: walk the TCP sockets of this network namespace, then
 * free the records of steered sockets that are gone and settle their live
 * counts. A record is freed at the first poll that does not see its socket,
 * provided the previous poll already knew the record (so that a socket whose
 * connect is still between the hook and the hash table is never taken for
 * gone): live counts are exact one poll after a close for sockets that lived
 * across a poll, two polls for sockets opened and closed between two polls.
 */
#ifndef STEER_NOREL_H
#define STEER_NOREL_H

#include <stddef.h>
#include <stdint.h>

struct steer_norel;

/* Empty programs of other hook types, attached on request for their floors. */
enum steer_norel_floor {
	NOREL_FLOOR_RESET,     /* tp_btf/tcp_receive_reset */
	NOREL_FLOOR_SET_STATE, /* tp_btf/inet_sock_set_state */
	NOREL_FLOOR_TCP_DONE,  /* fentry/tcp_done */
	NOREL_FLOORS
};

/* floors: bit mask of 1 << enum steer_norel_floor to load and attach. */
int steer_norel_open(const char *obj_path, const char *pin_dir, unsigned floors,
		     struct steer_norel **out, char *err, size_t errlen);
/* Does not attach the release hook again: detach the data plane after it. */
void steer_norel_close(struct steer_norel *n);

struct steer_norel_pass {
	uint64_t visited;   /* TCP sockets the walk met (all states, this namespace) */
	uint64_t matched;   /* of which steered and still open: their records seen */
	uint64_t reclaimed; /* records freed by this poll */
	uint64_t walk_ns;   /* wall time of the walk (iterator create, read, close) */
	uint64_t scan_ns;   /* wall time of the user-space scan of the records */
};

int steer_norel_poll(struct steer_norel *n, struct steer_norel_pass *out, char *err, size_t errlen);

/*
 * The other ablation: keep the release hook, but swap lean_release (the
 * shipped release program without its layout-0 branch) into the pinned
 * release link of the data plane at pin_dir. *obj is to be closed with
 * bpf_object__close after that data plane is detached.
 */
struct bpf_object;
int steer_norel_lean_release(const char *obj_path, const char *pin_dir, struct bpf_object **obj,
			     char *err, size_t errlen);

/* Program fds for the statistics: the walk, the reset signal, a floor (-1
 * when not loaded). */
int steer_norel_walk_fd(const struct steer_norel *n);
int steer_norel_reset_fd(const struct steer_norel *n);
int steer_norel_floor_fd(const struct steer_norel *n, enum steer_norel_floor f);

#endif
