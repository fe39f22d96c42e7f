// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * man_options.c - smg-steerd(8)'s OPTIONS from the table of options, in
 * the man page's style: a .SS per --help section, a .TP per option with its
 * help as --help prints it, then its default, accepted values, file key and
 * what SIGHUP does with it.
 */
#include "man_options.h"

#include <ctype.h>
#include <string.h>

#include "config/config.h"

/* Text as roff reads it: '-' as a minus (option names must not become
 * hyphens), '\' escaped, and a line that would start a request made plain. */
static void roff_put(FILE *f, const char *s, size_t n, bool line_start)
{
	size_t i;

	if (line_start && n && (s[0] == '.' || s[0] == '\''))
		fputs("\\&", f);
	for (i = 0; i < n; i++) {
		if (s[i] == '-')
			fputs("\\-", f);
		else if (s[i] == '\\')
			fputs("\\e", f);
		else
			fputc(s[i], f);
	}
}

/* Whether an option's value has a '[' outside brackets past its start:
 * where it may break, for the longest do not fit in 80 columns. */
static bool arg_breaks(const char *arg, size_t i, int depth)
{
	return arg[i] == '[' && depth == 0 && i > 0;
}

static void arg_put(FILE *f, const char *arg)
{
	int depth = 0;
	size_t i;

	for (i = 0; arg[i]; i++) {
		if (arg_breaks(arg, i, depth))
			fputs("\\:", f);
		depth += (arg[i] == '[') - (arg[i] == ']');
		roff_put(f, arg + i, 1, false);
	}
}

static bool arg_may_break(const char *arg)
{
	int depth = 0;
	size_t i;

	for (i = 0; arg && arg[i]; i++) {
		if (arg_breaks(arg, i, depth))
			return true;
		depth += (arg[i] == '[') - (arg[i] == ']');
	}
	return false;
}

/*
 * ".BI \-\-name " ARG"", ".B \-\-name" or ".BR \-h ", " \-\-help". A
 * tag that may break is not adjusted: its first line has too few words to
 * stretch.
 */
static void tag_print(FILE *f, const struct steer_option *o)
{
	bool breaks = arg_may_break(o->arg);

	fputs(breaks ? ".TP\n.na\n" : ".TP\n", f);
	if (o->short_name) {
		fprintf(f, ".BR \\-%c \", \" \\-\\-", o->short_name);
		roff_put(f, o->name, strlen(o->name), false);
	} else {
		fputs(o->arg ? ".BI \\-\\-" : ".B \\-\\-", f);
		roff_put(f, o->name, strlen(o->name), false);
	}
	if (o->arg) {
		fputs(" \" ", f);
		arg_put(f, o->arg);
		fputc('"', f);
	}
	fputs(breaks ? "\n.ad\n" : "\n", f);
}

/* Each line of the help, as --help prints them. */
static void help_print(FILE *f, const char *help)
{
	const char *p = help;

	for (;;) {
		size_t n = strcspn(p, "\n");

		roff_put(f, p, n, true);
		fputc('\n', f);
		if (!p[n])
			return;
		fputs(".br\n", f);
		p += n + 1;
	}
}

static void key_print(FILE *f, const struct steer_option *o)
{
	static const char *const where[] = {
		[STEER_KEY_TOP] = "",
		[STEER_KEY_SERVICE] = ", in a service",
		[STEER_KEY_BOTH] = ", at the top level or in a service",
	};

	if (o->scope == STEER_KEY_NONE) {
		fputs("No file key.\n", f);
		return;
	}
	fputs("File key: ", f);
	roff_put(f, o->key, strlen(o->key), false);
	fprintf(f, "%s.\n", where[o->scope]);
}

static void reload_print(FILE *f, const struct steer_option *o)
{
	if (o->reload == STEER_RELOAD_RESTART)
		fputs("A change needs a restart: SIGHUP keeps the running value.\n", f);
	else
		fputs("SIGHUP applies a change", f);
	if (o->reload == STEER_RELOAD_YES && o->reload_note) {
		fputs("; ", f);
		roff_put(f, o->reload_note, strlen(o->reload_note), false);
	}
	if (o->reload == STEER_RELOAD_YES)
		fputs(".\n", f);
}

/* The default, the values, the file key and SIGHUP, after a line break. */
static void facts_print(FILE *f, const struct steer_option *o)
{
	if (!o->def && !o->bounds && o->reload == STEER_RELOAD_NA)
		return;
	fputs(".br\n", f);
	if (o->def) {
		fputs("Default: ", f);
		roff_put(f, o->def, strlen(o->def), false);
		fputs(".\n", f);
	}
	if (o->bounds) {
		fputs("Accepted: ", f);
		roff_put(f, o->bounds, strlen(o->bounds), false);
		fputs(".\n", f);
	}
	if (o->reload == STEER_RELOAD_NA)
		return;
	key_print(f, o);
	reload_print(f, o);
}

/* A section's note, as a sentence. */
static void note_print(FILE *f, const char *note)
{
	char first[2] = { (char)toupper((unsigned char)note[0]), 0 };

	roff_put(f, first, 1, true);
	roff_put(f, note + 1, strlen(note + 1), false);
	fputs(".\n", f);
}

void man_options_print(FILE *f)
{
	const struct steer_option_section *sec;
	const struct steer_option *o;
	size_t s, i;

	for (s = 0; (sec = steer_config_section(s)); s++) {
		fputs(".SS \"", f);
		roff_put(f, sec->title, strlen(sec->title), false);
		fputs("\"\n", f);
		if (sec->note)
			note_print(f, sec->note);
		for (i = 0; (o = steer_config_option(i)); i++) {
			if (o->section != s)
				continue;
			tag_print(f, o);
			help_print(f, o->help);
			facts_print(f, o);
		}
	}
}

int man_options_find(const char *page, size_t *start, size_t *end)
{
	const char *b = strstr(page, MAN_OPTIONS_BEGIN), *e;

	if (!b || (b != page && b[-1] != '\n'))
		return -1;
	b += strlen(MAN_OPTIONS_BEGIN);
	e = strstr(b, MAN_OPTIONS_END);
	if (!e || (e != b && e[-1] != '\n'))
		return -1;
	*start = (size_t)(b - page);
	*end = (size_t)(e - page);
	return 0;
}
