// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * reload.c - the configuration parse of a SIGHUP, off the control loop (see
 * reload.h).
 */
#include "reload.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "common/common.h"

enum reload_state {
	RELOAD_IDLE,	/* no parse, no result */
	RELOAD_RUNNING, /* the thread parses */
	RELOAD_DONE,	/* a result waits; the thread has ended or is ending */
};

struct steer_reload {
	int argc;
	char **argv;
	char name[PATH_MAX];
	pthread_mutex_t lock; /* guards everything below but ready */
	enum reload_state state;
	bool thread_started; /* a thread to join once DONE */
	bool again;	     /* a request came during the parse */
	bool abandoned;	     /* freed while running: the thread frees it all */
	pthread_t thread;
	atomic_bool ready;
	/* The result. */
	int rc; /* STEER_CONFIG_OK or not */
	struct steer_config cfg;
	char err[512];
};

struct steer_reload *steer_reload_new(int argc, char **argv, const char *name)
{
	struct steer_reload *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->argc = argc;
	r->argv = argv;
	snprintf(r->name, sizeof(r->name), "%s", name);
	pthread_mutex_init(&r->lock, NULL);
	atomic_init(&r->ready, false);
	return r;
}

static void destroy(struct steer_reload *r)
{
	if (r->state == RELOAD_DONE && r->rc == STEER_CONFIG_OK)
		steer_config_free(&r->cfg);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static void *parse_thread(void *arg)
{
	struct steer_reload *r = arg;
	struct steer_config cfg;
	char err[512] = "";
	int rc;

	/* Named, so that ps and /proc show a parse in progress. */
	prctl(PR_SET_NAME, "smg-reload", 0, 0, 0);
	rc = steer_config_load(r->argc, r->argv, &cfg, err, sizeof(err));
	pthread_mutex_lock(&r->lock);
	if (r->abandoned) {
		pthread_mutex_unlock(&r->lock);
		if (rc == STEER_CONFIG_OK)
			steer_config_free(&cfg);
		r->state = RELOAD_IDLE;
		destroy(r);
		return NULL;
	}
	r->rc = rc;
	if (rc == STEER_CONFIG_OK)
		r->cfg = cfg;
	else if (rc == STEER_CONFIG_EXIT) /* --help or --version: not a reload */
		snprintf(r->err, sizeof(r->err), "the command line asks for --help or --version");
	else
		snprintf(r->err, sizeof(r->err), "%s", err);
	r->state = RELOAD_DONE;
	atomic_store(&r->ready, true);
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* Called with the lock held, in state IDLE. */
static void start_parse(struct steer_reload *r)
{
	sigset_t all, old;
	int e;

	r->state = RELOAD_RUNNING;
	/* Signals stay with the control loop's thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	e = pthread_create(&r->thread, NULL, parse_thread, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	r->thread_started = e == 0;
	if (e != 0) {
		r->rc = -e;
		snprintf(r->err, sizeof(r->err), "cannot start the reload thread: %s", strerror(e));
		r->state = RELOAD_DONE;
		atomic_store(&r->ready, true);
	}
}

void steer_reload_request(struct steer_reload *r)
{
	pthread_mutex_lock(&r->lock);
	if (r->state == RELOAD_IDLE) {
		log_info("reload: parsing %s", r->name);
		start_parse(r);
	} else {
		log_info("reload: SIGHUP during a parse; one more parse follows it");
		r->again = true;
	}
	pthread_mutex_unlock(&r->lock);
}

bool steer_reload_ready(struct steer_reload *r)
{
	return r && atomic_load(&r->ready);
}

int steer_reload_take(struct steer_reload *r, struct steer_config *cfg, char *err, size_t errlen)
{
	int out;

	if (!steer_reload_ready(r))
		return 0;
	pthread_mutex_lock(&r->lock);
	if (r->thread_started)
		pthread_join(r->thread, NULL); /* it is past its last use of r */
	r->thread_started = false;
	if (r->rc == STEER_CONFIG_OK) {
		*cfg = r->cfg;
		out = 1;
	} else {
		snprintf(err, errlen, "%s", r->err);
		out = -1;
	}
	memset(&r->cfg, 0, sizeof(r->cfg));
	r->state = RELOAD_IDLE;
	atomic_store(&r->ready, false);
	if (r->again) {
		r->again = false;
		log_info("reload: parsing %s again (SIGHUP during the last parse)", r->name);
		start_parse(r);
	}
	pthread_mutex_unlock(&r->lock);
	return out;
}

void steer_reload_free(struct steer_reload *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	if (r->state == RELOAD_RUNNING) {
		/* The parse may block (a FIFO): leave it to free everything. */
		r->abandoned = true;
		pthread_detach(r->thread);
		pthread_mutex_unlock(&r->lock);
		return;
	}
	if (r->thread_started)
		pthread_join(r->thread, NULL);
	pthread_mutex_unlock(&r->lock);
	destroy(r);
}
