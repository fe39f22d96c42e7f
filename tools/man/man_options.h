/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * man_options.h - the OPTIONS of smg-steerd(8), written in roff from the
 * table of options (user/config/options.c). gen_options.c puts them into
 * docs/man/smg-steerd.8 (make man); tests/unit/test_options.c checks that
 * the committed page holds exactly what this prints.
 */
#ifndef STEER_MAN_OPTIONS_H
#define STEER_MAN_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

/* The lines around the generated part of the page. */
#define MAN_OPTIONS_BEGIN                                                                        \
	".\\\" BEGIN OPTIONS: written by tools/man/gen_options from the table of options (make " \
	"man)\n"
#define MAN_OPTIONS_END ".\\\" END OPTIONS\n"

/* Every section and option, in --help order. */
void man_options_print(FILE *f);

/* Where the generated part of page is: from *start (after the line
 * MAN_OPTIONS_BEGIN) to *end (the line MAN_OPTIONS_END). 0, or -1 when the
 * page lacks either line. */
int man_options_find(const char *page, size_t *start, size_t *end);

#endif /* STEER_MAN_OPTIONS_H */
