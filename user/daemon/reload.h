/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * reload.h - SIGHUP's configuration parse, on a thread of its own so that
 * the control loop goes on polling and publishing while a large (or slow to
 * read) file is parsed. The loop starts a parse when a SIGHUP comes in and
 * applies the result when it is ready.
 *
 * One parse at a time: a request while a parse runs (or while its result
 * waits) is remembered, and one more parse starts once the result has been
 * taken, so that the last SIGHUP always sees the file as it was when sent.
 * Any number of such requests make one parse.
 *
 * steer_config_load is safe here: it keeps no state of its own between
 * calls, and getopt_long's globals are only ever used by this one parse.
 * Not thread-safe itself: one thread (the control loop) calls everything.
 */
#ifndef STEER_RELOAD_H
#define STEER_RELOAD_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"

struct steer_reload;

/* argv must stay valid while parses run (main's argv does); name (the
 * file, for the log: "reload: parsing NAME") is copied. */
struct steer_reload *steer_reload_new(int argc, char **argv, const char *name);
/*
 * A parse still running is abandoned, not waited for (a configuration file
 * can be a FIFO nobody writes): its thread frees what it holds when done.
 */
void steer_reload_free(struct steer_reload *r);

/* Start a parse, or remember to parse once more after the one running.
 * Each is logged. */
void steer_reload_request(struct steer_reload *r);
/* A result waits to be taken (cheap: no lock). */
bool steer_reload_ready(struct steer_reload *r);
/*
 * Take the waiting result: 1 with *cfg filled (the caller frees it with
 * steer_config_free), -1 with a message in err when the file was rejected,
 * 0 when none waits. Starts the remembered parse, if any.
 */
int steer_reload_take(struct steer_reload *r, struct steer_config *cfg, char *err, size_t errlen);

#endif /* STEER_RELOAD_H */
