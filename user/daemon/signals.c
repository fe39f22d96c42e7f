// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * signals.c - smg-steerd's signals: SIGTERM and SIGINT stop it, SIGHUP
 * reloads its configuration. The handlers only set the flags that every
 * wait of the daemon looks at (wait_results, at least every SLICE_NS).
 */
#include <signal.h>
#include <stddef.h>

#include "daemon.h"

volatile sig_atomic_t stop_requested, reload_requested;

static void on_stop(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void on_hup(int sig)
{
	(void)sig;
	reload_requested = 1;
}

void install_signals(void)
{
	struct sigaction sa = { 0 };

	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_stop;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_hup;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}
