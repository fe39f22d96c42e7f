// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * steer_wire_lazy.bpf.c - ABLATION, bench only (wirecost's variant lazy): the
 * shipped request accounting (steer_wire.bpf.c, included unchanged) with one
 * difference: an answer re-keys its slot's leaf in the service's tree only
 * when the key fell (wire_answer_rescore in steer_wire.bpf.h). With one
 * router (peers 1) an answer usually raises the key: the request's tokens
 * move from the busy time, part of it already elapsed, to a flat in-flight
 * credit. The question is what the eight-level replay of the leaf's matches
 * costs a response, and how often it can be left to the next connect.
 * steer_wlazy_stats counts the answers that re-keyed and those that did
 * not.
 */
#include "vmlinux.h"

struct wlazy_stats {
	__u64 rekeyed; /* the key fell: the leaf re-keyed at once */
	__u64 lazy;    /* the key rose or held: left for the next connect */
};

/* A global (the object's .bss map): counted under the service's lock, where
 * no helper may be called. Plain increments: a bench's counts, not exact
 * across CPUs. */
struct wlazy_stats steer_wlazy_stats;

#define WIRE_ANSWER_LAZY(left) ((left) ? steer_wlazy_stats.lazy++ : steer_wlazy_stats.rekeyed++)
#include "steer_wire.bpf.c"
