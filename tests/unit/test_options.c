// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_options.c - the table of options (user/config/options.c) and what is
 * made of it: the table itself (names, keys, bounds and defaults that hold
 * together), --help, the command line and the file's keys, the man page's
 * generated OPTIONS (docs/man/smg-steerd.8 must be what tools/man writes:
 * "make man" after a change of the table), and the operator documentation:
 * docs/operations.md has one "### `--flag VALUE`" heading per option of the
 * table and no other in its option reference, and neither it nor the man
 * pages name a flag that smg-steerd, smg-steerctl or a named other tool does
 * not have.
 *
 * No binary, no root, no network: the documents are read from $STEER_TOP
 * (tests/run.sh sets it), or from the current directory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config_int.h"
#include "man_options.h"
#include "tap.h"

#define MAX_FLAGS 256

/* Long options of other tools that the documents show, with the tool. */
static const char *const foreign_flags[][2] = {
	{ "--now", "systemctl" },
	{ "--dry-run", "kubectl" },
	{ "--from-file", "kubectl" },
	{ "--from-literal", "kubectl" },
	{ "--cascade", "kubectl" },
	{ "--prefix", "kubectl logs" },
	{ "--bounding-set", "setpriv" },
	{ "--inh-caps", "setpriv" },
	{ "--reuid", "setpriv" },
	{ "--regid", "setpriv" },
	{ "--clear-groups", "setpriv" },
	{ "--fail", "curl" },
	{ "--silent", "curl" },
	{ "--max-time", "curl" },
	{ "--json", "bpftool" },
	{ "--pretty", "bpftool" },
	{ "--quick", "tools/sim/run.sh" },
	{ "--latency", "wrk" },
	{ "--cpu", "stress-ng" },
	{ "--cpu-load", "stress-ng" },
	{ "--runtime", "podman" },
};

/* ---- Helpers ------------------------------------------------------------------------ */

struct flags {
	char *name[MAX_FLAGS];
	size_t n;
};

static bool flags_has(const struct flags *s, const char *name)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (!strcmp(s->name[i], name))
			return true;
	}
	return false;
}

static void flags_add(struct flags *s, const char *name, size_t len)
{
	char *copy = strndup(name, len);

	if (!copy || flags_has(s, copy) || s->n == MAX_FLAGS) {
		free(copy);
		return;
	}
	s->name[s->n++] = copy;
}

static void flags_free(struct flags *s)
{
	while (s->n)
		free(s->name[--s->n]);
}

static char *file_read(const char *rel)
{
	const char *top = getenv("STEER_TOP");
	char path[4096];
	FILE *f;
	char *buf;
	long len;

	snprintf(path, sizeof(path), "%s/%s", top && *top ? top : ".", rel);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = len >= 0 ? malloc((size_t)len + 1) : NULL;
	if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	if (buf)
		buf[len] = 0;
	fclose(f);
	return buf;
}

/* What print writes, as one string. */
static char *captured(void (*print)(FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	print(f);
	fclose(f);
	return buf;
}

/* roff writes a minus as "\-": the text with plain '-'. */
static void unroff(char *s)
{
	char *w = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] == '-')
			s++;
		*w++ = *s;
	}
	*w = 0;
}

static bool flag_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* Every "--word[-word]..." of text not inside a word, a path or a value, as
 * tests/integration/test_deploy.py's doc_flags reads them too. */
static void flags_of_text(const char *text, struct flags *out)
{
	const char *p;

	for (p = text; (p = strstr(p, "--")); p += 2) {
		const char *e = p + 2;

		if (p > text && (isalnum((unsigned char)p[-1]) || strchr("_/.=-", p[-1])))
			continue;
		if (!(*e >= 'a' && *e <= 'z'))
			continue;
		while (flag_char(*e) || (*e == '-' && flag_char(e[1])))
			e++;
		flags_add(out, p, (size_t)(e - p));
	}
}

/* smg-steerctl's options: its getopt_long table and the "--x" it compares
 * argv with, from its sources. */
static int ctl_flags(struct flags *out)
{
	static const char *const files[] = { "user/ctl/smg-steerctl.c", "user/ctl/decap.c" };
	regex_t lo, lit;
	size_t i;

	if (regcomp(&lo, "\\{ *\"([a-z][a-z0-9-]*)\", *(no|required|optional)_argument",
		    REG_EXTENDED) ||
	    regcomp(&lit, "\"(--[a-z][a-z0-9-]*)", REG_EXTENDED))
		return -1;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char *src = file_read(files[i]), *p;
		regmatch_t m[2];

		if (!src)
			return -1;
		for (p = src; !regexec(&lo, p, 2, m, 0); p += m[0].rm_eo) {
			char name[64];

			snprintf(name, sizeof(name), "--%.*s", (int)(m[1].rm_eo - m[1].rm_so),
				 p + m[1].rm_so);
			flags_add(out, name, strlen(name));
		}
		for (p = src; !regexec(&lit, p, 2, m, 0); p += m[0].rm_eo)
			flags_add(out, p + m[1].rm_so, (size_t)(m[1].rm_eo - m[1].rm_so));
		free(src);
	}
	regfree(&lo);
	regfree(&lit);
	return 0;
}

/* Every flag a document may name: smg-steerd's, smg-steerctl's, the others'. */
static int known_flags(struct flags *out)
{
	const struct steer_option *o;
	size_t i;

	for (i = 0; (o = steer_config_option(i)); i++) {
		char name[64];

		snprintf(name, sizeof(name), "--%s", o->name);
		flags_add(out, name, strlen(name));
	}
	for (i = 0; i < sizeof(foreign_flags) / sizeof(foreign_flags[0]); i++)
		flags_add(out, foreign_flags[i][0], strlen(foreign_flags[i][0]));
	return ctl_flags(out);
}

/* The flags of doc that known lacks, comma-separated, in buf. */
static const char *unknown_flags(const char *doc, bool roff, const struct flags *known, char *buf,
				 size_t len)
{
	char *text = file_read(doc);
	struct flags named = { 0 };
	size_t i, n = 0;

	buf[0] = 0;
	if (!text) {
		snprintf(buf, len, "(%s cannot be read)", doc);
		return buf;
	}
	if (roff)
		unroff(text);
	flags_of_text(text, &named);
	for (i = 0; i < named.n; i++) {
		if (!flags_has(known, named.name[i]))
			n += (size_t)snprintf(buf + n, n < len ? len - n : 0, "%s%s", n ? ", " : "",
					      named.name[i]);
	}
	flags_free(&named);
	free(text);
	return buf;
}

/* ---- The table ------------------------------------------------------------------------ */

/* Names once, keys once where the file reads them, a help and a section
 * each, and a value exactly for the options that take one. */
static void test_table_holds_together(void)
{
	const struct steer_option *o, *p;
	size_t i, j;

	for (i = 0; (o = steer_config_option(i)); i++) {
		CHECK(o->name && o->help && *o->help, "option %zu lacks a name or a help", i);
		CHECK(steer_config_section(o->section), "--%s: section %u", o->name, o->section);
		CHECK((o->scope == STEER_KEY_NONE) == !o->key, "--%s: key and scope disagree",
		      o->name);
		CHECK(o->help[strlen(o->help) - 1] != '.', "--%s: the help ends with a period",
		      o->name);
		CHECK(!o->arg || !strchr(o->arg, '"'), "--%s: a quote in the value", o->name);
		for (j = 0; j < i; j++) {
			p = steer_config_option(j);
			CHECK(strcmp(o->name, p->name), "--%s twice", o->name);
			CHECK(!o->key || !p->key || strcmp(o->key, p->key), "key %s twice", o->key);
		}
	}
	CHECK(i == CFG_N_OPTIONS && i == 48, "%zu options", i);
	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct cfg_option *c = &cfg_options[i];
		bool flag_only = c->opt > OPT_KNOB;

		CHECK((c->kind == VALUE_NONE) == flag_only, "--%s: kind %d", c->doc.name, c->kind);
		CHECK(flag_only || c->size, "--%s: no field", c->doc.name);
		CHECK(!c->doc.arg == (c->opt == OPT_KEEP_PINNED || c->opt == OPT_CHECK_CONFIG ||
				      c->opt == OPT_HELP || c->opt == OPT_VERSION ||
				      (c->kind == VALUE_KNOB && c->knob_type == KNOB_SWITCH)),
		      "--%s: takes a value or not", c->doc.name);
		CHECK(c->kind != VALUE_PARSE || c->parse, "--%s: no parser", c->doc.name);
		CHECK(c->kind == VALUE_PARSE || !c->parse, "--%s: a parser unused", c->doc.name);
		CHECK(cfg_option_of(c->opt) == c || c->opt == OPT_KNOB, "--%s: opt %d twice",
		      c->doc.name, c->opt);
	}
}

/* "A..B" bounds text: A and B are the bounds the parser checks. */
static int bounds_agree(const struct cfg_option *c)
{
	char lo[32], hi[32];
	uint64_t a, b;

	if (c->kind != VALUE_DURATION && c->kind != VALUE_COUNT && c->kind != VALUE_KNOB)
		return 0;
	if (sscanf(c->doc.bounds ? c->doc.bounds : "", "%31[^.]..%31[^ ,;]", lo, hi) != 2)
		return 1; /* "above the interval, at most 24h": checked apart */
	if (c->kind == VALUE_DURATION || (c->kind == VALUE_KNOB && c->knob_type == KNOB_DURATION)) {
		if (steer_parse_duration(lo, &a) || steer_parse_duration(hi, &b))
			return 1; /* "1ms..the interval": checked apart */
	} else {
		a = strtoull(lo, NULL, 10);
		b = (uint64_t)strtod(hi, NULL);
	}
	return a == c->min && b == c->max ? 0 : -1;
}

static void test_bounds_and_defaults(void)
{
	struct steer_config cfg;
	char why[512];
	size_t i;
	int rc;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct cfg_option *c = &cfg_options[i];

		if (c->kind == VALUE_DURATION || c->kind == VALUE_COUNT ||
		    (c->kind == VALUE_KNOB && c->knob_type != KNOB_SWITCH &&
		     c->knob_type != KNOB_CHOICE))
			CHECK(c->min <= c->max && c->max, "--%s: bounds", c->doc.name);
		rc = bounds_agree(c);
		CHECK(rc >= 0, "--%s: '%s' is not [%llu, %llu]", c->doc.name, c->doc.bounds,
		      (unsigned long long)c->min, (unsigned long long)c->max);
		CHECK(!c->def_is_value || c->doc.def, "--%s: no default to parse", c->doc.name);
		memset(&cfg, 0, sizeof(cfg));
		CHECK(!c->def_is_value ||
			      cfg_value_parse(c, c->doc.def, &cfg, why, sizeof(why)) == 0,
		      "--%s: the default '%s' does not parse: %s", c->doc.name, c->doc.def, why);
	}
	/* The one bound of --bytes-per-token, from bpf/steer_common.h. */
	CHECK(cfg_option_by_key("bytes-per-token", true)->max == STEER_MAX_BYTES_PER_TOKEN &&
		      STEER_MAX_BYTES_PER_TOKEN == 1024,
	      "bytes-per-token bound");
}

/* ---- --help, the command line, the file ------------------------------------------- */

static void usage_print(FILE *f)
{
	steer_config_usage(f);
}

/* Its option lines are the table's options, every line in 79 columns. */
static void test_help_lists_the_table(void)
{
	char *help = captured(usage_print), *line, *save = NULL;
	struct flags listed = { 0 };
	size_t i, too_wide = 0;
	const struct steer_option *o;
	bool ok = true;

	CHECK(help, "no --help");
	for (line = strtok_r(help, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *p = line + strspn(line, " ");

		if (strlen(line) > 79)
			too_wide++;
		if (p - line != 2 || strncmp(p, "-", 1))
			continue;
		if (!strncmp(p, "-h, ", 4))
			p += 4;
		flags_add(&listed, p, strcspn(p, " "));
	}
	free(help);
	for (i = 0; (o = steer_config_option(i)); i++) {
		char name[64];

		snprintf(name, sizeof(name), "--%s", o->name);
		ok = ok && flags_has(&listed, name);
	}
	i = listed.n;
	flags_free(&listed);
	CHECK(ok && i == CFG_N_OPTIONS, "--help lists %zu options, the table %d", i, CFG_N_OPTIONS);
	CHECK(!too_wide, "%zu lines of --help are wider than 79 columns", too_wide);
}

static int load(const char *const *argv, char *err, size_t errlen)
{
	struct steer_config c;
	int argc = 0, rc;

	while (argv[argc])
		argc++;
	rc = steer_config_load(argc, (char *const *)argv, &c, err, errlen);
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&c);
	return rc;
}

/* Every option that takes a value is a flag that wants one; every key of
 * the top level is one the file knows (a list is refused as a value, not as
 * an unknown key). */
static void test_flags_and_keys_are_the_table(void)
{
	char err[512], want[128], path[] = "/tmp/test_options.XXXXXX";
	size_t i;
	int fd = mkstemp(path);

	CHECK(fd >= 0, "mkstemp");
	close(fd);
	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct steer_option *o = &cfg_options[i].doc;
		char flag[64];
		const char *argv[] = { "smg-steerd", flag, NULL };
		FILE *f;
		int rc;

		snprintf(flag, sizeof(flag), "--%s", o->name);
		if (o->arg) {
			rc = load(argv, err, sizeof(err));
			snprintf(want, sizeof(want), "--%s: missing value", o->name);
			CHECK(rc == STEER_CONFIG_USAGE && strstr(err, want), "%s: rc=%d '%s'", flag,
			      rc, err);
		}
		if (o->scope != STEER_KEY_TOP && o->scope != STEER_KEY_BOTH)
			continue;
		f = fopen(path, "w");
		CHECK(f, "fopen");
		fprintf(f, "%s: [1]\n", o->key);
		fclose(f);
		{
			const char *file_argv[] = { "smg-steerd", "--config", path, NULL };

			rc = load(file_argv, err, sizeof(err));
		}
		snprintf(want, sizeof(want), ":1: %s: expected a single value", o->key);
		CHECK(rc == STEER_CONFIG_USAGE && strstr(err, want), "key %s: rc=%d '%s'", o->key,
		      rc, err);
	}
	unlink(path);
}

/* ---- The man page ----------------------------------------------------------------- */

/* The committed page holds exactly what tools/man writes from the table. */
static void test_man_page_is_generated(void)
{
	char *page = file_read("docs/man/smg-steerd.8"), *want = captured(man_options_print);
	size_t start, end, line = 1, i;
	int rc;

	CHECK(page && want, "docs/man/smg-steerd.8 cannot be read (STEER_TOP?)");
	rc = man_options_find(page, &start, &end);
	if (rc == 0 && (end - start != strlen(want) || memcmp(page + start, want, end - start))) {
		for (i = 0; i < end - start && want[i] && page[start + i] == want[i]; i++)
			line += want[i] == '\n';
		printf("# first difference at line %zu of the generated part\n", line);
		rc = 1;
	}
	free(page);
	free(want);
	CHECK(rc >= 0, "no generated OPTIONS in docs/man/smg-steerd.8");
	CHECK(rc == 0, "docs/man/smg-steerd.8 differs from the options table: run make man");
}

/* Every option has its entry, the hand-written part names no other flag,
 * and the sections of a man page are there. */
static void test_man_page_flags_and_sections(void)
{
	static const char *const sections[] = {
		".SH NAME",	     ".SH SYNOPSIS",	 ".SH DESCRIPTION", ".SH OPTIONS",
		".SH CONFIGURATION", ".SH SIGNALS",	 ".SH FILES",	    ".SH \"EXIT STATUS\"",
		".SH EXAMPLES",	     ".SH \"SEE ALSO\"",
	};
	struct flags known = { 0 }, entries = { 0 };
	char *page = file_read("docs/man/smg-steerd.8"), unknown[1024], tag[128];
	const struct steer_option *o;
	const char *p;
	size_t i;
	bool ok;

	CHECK(page, "docs/man/smg-steerd.8 cannot be read");
	/* An option's entry is the tag line after ".TP" (and ".na", for a tag
	 * not adjusted); a mention elsewhere is not one. */
	for (p = page; (p = strstr(p, "\n.TP\n")); p += 5) {
		const char *tag = strncmp(p + 5, ".na\n", 4) ? p + 5 : p + 9;
		char *line = strndup(tag, strcspn(tag, "\n"));

		unroff(line);
		flags_of_text(line, &entries);
		free(line);
	}
	for (i = 0; (o = steer_config_option(i)); i++) {
		snprintf(tag, sizeof(tag), "--%s", o->name);
		if (!flags_has(&entries, tag))
			break;
	}
	flags_free(&entries);
	CHECK(!o, "no .TP entry for --%s", o->name);
	for (i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		snprintf(tag, sizeof(tag), "\n%s\n", sections[i]);
		if (!strstr(page, tag))
			break;
	}
	free(page);
	CHECK(i == sizeof(sections) / sizeof(sections[0]), "no %s", sections[i]);
	CHECK(known_flags(&known) == 0, "smg-steerctl's sources cannot be read");
	unknown_flags("docs/man/smg-steerd.8", true, &known, unknown, sizeof(unknown));
	ok = !unknown[0];
	if (ok)
		unknown_flags("docs/man/smg-steerctl.8", true, &known, unknown, sizeof(unknown));
	flags_free(&known);
	CHECK(ok && !unknown[0], "the man pages name unknown flags: %s", unknown);
}

/* ---- docs/operations.md ------------------------------------------------------------- */

/* "`--name VALUE`", or "`--help`, `-h`": an option's heading. */
static void heading_of(const struct steer_option *o, char *buf, size_t len)
{
	if (o->short_name)
		snprintf(buf, len, "`--%s`, `-%c`", o->name, o->short_name);
	else
		snprintf(buf, len, "`--%s%s%s`", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

/* The "### " headings of its option reference: the table's, none else. */
static void test_operations_reference_is_the_table(void)
{
	char *ops = file_read("docs/operations.md"), *ref, *line, *save = NULL, head[256];
	char missing[2048] = "", extra[2048] = "";
	struct flags headings = { 0 };
	const struct steer_option *o;
	size_t i, nm = 0, ne = 0;

	CHECK(ops, "docs/operations.md cannot be read");
	ref = strstr(ops, "\n## Option reference\n");
	if (ref) {
		char *next = strstr(ref + 1, "\n## ");

		if (next)
			*next = 0;
		for (line = strtok_r(ref, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (!strncmp(line, "### ", 4))
				flags_add(&headings, line + 4, strlen(line + 4));
	}
	free(ops);
	CHECK(ref, "docs/operations.md has no '## Option reference'");
	for (i = 0; (o = steer_config_option(i)); i++) {
		heading_of(o, head, sizeof(head));
		if (!flags_has(&headings, head))
			nm += (size_t)snprintf(missing + nm,
					       nm < sizeof(missing) ? sizeof(missing) - nm : 0,
					       " [%s]", head);
	}
	for (i = 0; i < headings.n; i++) {
		const struct steer_option *p;
		size_t j;

		for (j = 0; (p = steer_config_option(j)); j++) {
			heading_of(p, head, sizeof(head));
			if (!strcmp(head, headings.name[i]))
				break;
		}
		if (!p)
			ne += (size_t)snprintf(extra + ne,
					       ne < sizeof(extra) ? sizeof(extra) - ne : 0, " [%s]",
					       headings.name[i]);
	}
	flags_free(&headings);
	CHECK(!nm && !ne, "operations.md's option reference lacks:%s; has, not in the table:%s",
	      nm ? missing : " none", ne ? extra : " none");
}

static void test_operations_names_known_flags(void)
{
	struct flags known = { 0 };
	char unknown[1024];

	CHECK(known_flags(&known) == 0, "smg-steerctl's sources cannot be read");
	unknown_flags("docs/operations.md", false, &known, unknown, sizeof(unknown));
	flags_free(&known);
	CHECK(!unknown[0], "docs/operations.md names unknown flags: %s", unknown);
}

int main(void)
{
	TAP_RUN(test_table_holds_together);
	TAP_RUN(test_bounds_and_defaults);
	TAP_RUN(test_help_lists_the_table);
	TAP_RUN(test_flags_and_keys_are_the_table);
	TAP_RUN(test_man_page_is_generated);
	TAP_RUN(test_man_page_flags_and_sections);
	TAP_RUN(test_operations_reference_is_the_table);
	TAP_RUN(test_operations_names_known_flags);
	return tap_done();
}
