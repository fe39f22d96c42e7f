// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * gen_options.c - a build tool, not part of the product: prints smg-steerd(8)'s
 * OPTIONS from the table of options, or with a man page as argument rewrites
 * the part of it between the MAN_OPTIONS_BEGIN and MAN_OPTIONS_END lines in
 * place (make man).
 *
 *   gen-options                        the roff, to standard output
 *   gen-options docs/man/smg-steerd.8  the page, regenerated
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "man_options.h"

static char *file_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf = NULL;
	size_t cap = 0, len = 0, n;

	if (!f)
		return NULL;
	do {
		char *grown = realloc(buf, cap + 65536 + 1);

		if (!grown) {
			free(buf);
			fclose(f);
			return NULL;
		}
		buf = grown;
		cap += 65536;
		n = fread(buf + len, 1, cap - len, f);
		len += n;
	} while (n > 0 && len == cap);
	buf[len] = 0;
	fclose(f);
	return buf;
}

/* The page with its generated part replaced, written next to it and renamed
 * over it, so that a failure leaves the page as it was. */
static int page_rewrite(const char *path)
{
	char *page = file_read(path), tmp[4096];
	size_t start, end;
	FILE *f;

	if (!page) {
		fprintf(stderr, "gen-options: %s: %s\n", path, strerror(errno));
		return 1;
	}
	if (man_options_find(page, &start, &end)) {
		fprintf(stderr, "gen-options: %s: no '%.*s' and '%.*s' lines\n", path,
			(int)strlen(MAN_OPTIONS_BEGIN) - 1, MAN_OPTIONS_BEGIN,
			(int)strlen(MAN_OPTIONS_END) - 1, MAN_OPTIONS_END);
		free(page);
		return 1;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "gen-options: %s: %s\n", tmp, strerror(errno));
		free(page);
		return 1;
	}
	fwrite(page, 1, start, f);
	man_options_print(f);
	fputs(page + end, f);
	free(page);
	if (fclose(f) || rename(tmp, path)) {
		fprintf(stderr, "gen-options: %s: %s\n", path, strerror(errno));
		remove(tmp);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
		fprintf(stderr, "usage: gen-options [MAN_PAGE]\n");
		return 2;
	}
	if (argc == 1) {
		man_options_print(stdout);
		return fflush(stdout) ? 1 : 0;
	}
	return page_rewrite(argv[1]);
}
