// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * cli.c - smg-steerd's command line (getopt_long) and its --help, both
 * from the table of options (options.c). Each flag is parsed into the
 * flags' layer, or the flags' service for --vip, --backend and
 * --backend-dns (see config_int.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <getopt.h>
#include <string.h>

#include "config_int.h"

/* getopt_long's value of cfg_options[i] (its short option aside). */
#define LONG_VAL 0x100

static void long_options_build(struct option *lo)
{
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++)
		lo[i] = (struct option){ cfg_options[i].doc.name,
					 cfg_options[i].doc.arg ? required_argument : no_argument,
					 NULL, LONG_VAL + (int)i };
	lo[i] = (struct option){ NULL, 0, NULL, 0 };
}

/* "+:" and the short options: "+" stops at the first operand instead of
 * permuting argv (which SIGHUP parses again), ":" reports a missing value
 * as ':'. */
static void short_options_build(char *buf, size_t len)
{
	size_t i, n = 0;

	buf[n++] = '+';
	buf[n++] = ':';
	for (i = 0; i < CFG_N_OPTIONS && n + 3 < len; i++) {
		if (!cfg_options[i].doc.short_name)
			continue;
		buf[n++] = cfg_options[i].doc.short_name;
		if (cfg_options[i].doc.arg)
			buf[n++] = ':';
	}
	buf[n] = 0;
}

/* The option getopt_long returned val for: a long option's index, or a
 * short option's letter. */
static const struct cfg_option *option_of_val(int val)
{
	size_t i;

	if (val >= LONG_VAL && val < LONG_VAL + CFG_N_OPTIONS)
		return &cfg_options[val - LONG_VAL];
	for (i = 0; i < CFG_N_OPTIONS; i++) {
		if (cfg_options[i].doc.short_name && cfg_options[i].doc.short_name == val)
			return &cfg_options[i];
	}
	return NULL;
}

static const char *option_name(int val)
{
	const struct cfg_option *o = option_of_val(val);

	return o ? o->doc.name : "?";
}

static int flag_vip(struct ctx *c, const char *v)
{
	struct steer_addr vip;
	char detail[WHY_LEN];

	if (c->flag_vip_given)
		return cfg_fail(c, "--vip: given twice; the command line defines one service "
				   "(use --config for more)");
	if (cfg_vip_parse(v, &vip, detail, sizeof(detail)))
		return cfg_fail(c, "--vip: %s", detail);
	c->flag_vip_given = true;
	cfg_draft_set_vip(&c->flag_svc, &vip);
	return STEER_CONFIG_OK;
}

static int flag_backend(struct ctx *c, const char *v)
{
	struct steer_backend_cfg b;
	char why[WHY_LEN];

	if (cfg_backend_parse(c, v, &b, why, sizeof(why)) ||
	    cfg_backend_add(&c->flag_svc, &b, why, sizeof(why)))
		return cfg_fail(c, "--backend: %s", why);
	return STEER_CONFIG_OK;
}

static int flag_backend_dns(struct ctx *c, const char *v)
{
	struct steer_dns_backend_cfg e;
	char why[WHY_LEN];

	if (cfg_dns_parse(c, v, &e, why, sizeof(why)) ||
	    cfg_dns_add(&c->flag_svc, &e, why, sizeof(why)))
		return cfg_fail(c, "--backend-dns: %s", why);
	return STEER_CONFIG_OK;
}

static int flag_setting(struct ctx *c, const struct cfg_option *o, const char *v)
{
	char why[WHY_LEN];

	if (cfg_option_parse(o, v, &c->flags, 0, why, sizeof(why)))
		return cfg_fail(c, "--%s: %s", o->doc.name, why);
	return STEER_CONFIG_OK;
}

/* getopt_long reported '?' or ':'; name the offending argument. */
static int flag_error(struct ctx *c, int opt, char *const argv[])
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return cfg_fail(c, "--%s: missing value", option_name(optopt));
	if (optopt && !strncmp(arg, "--", 2)) /* a long option without value, given one */
		return cfg_fail(c, "--%s takes no value, got '%s'", option_name(optopt), arg);
	if (optopt)
		return cfg_fail(c, "unknown option '-%c' (see --help)", optopt);
	return cfg_fail(c, "unknown or ambiguous option '%s' (see --help)", arg);
}

/* A value that is the next flag means the flag's own value is missing. */
static bool value_is_flag(const char *v)
{
	return v && v[0] == '-' && v[1] == '-';
}

static int flag_config(struct ctx *c, const char *v)
{
	if (!*v || strlen(v) >= sizeof(c->config_path))
		return cfg_fail(c, "--config: must be a file path (1..%d bytes), got '%s'",
				PATH_MAX - 1, v);
	snprintf(c->config_path, sizeof(c->config_path), "%s", v);
	return STEER_CONFIG_OK;
}

static int flag_one(struct ctx *c, const struct cfg_option *o, const char *v)
{
	if (value_is_flag(v))
		return cfg_fail(c, "--%s: missing value (got '%s')", o->doc.name, v);
	switch (o->opt) {
	case OPT_HELP:
		steer_config_usage(stdout);
		return STEER_CONFIG_EXIT;
	case OPT_VERSION:
		printf("smg-steerd %s\n", STEER_VERSION);
		return STEER_CONFIG_EXIT;
	case OPT_CHECK_CONFIG:
		c->check_only = true;
		return STEER_CONFIG_OK;
	case OPT_VIP:
		return flag_vip(c, v);
	case OPT_BACKEND:
		return flag_backend(c, v);
	case OPT_BACKEND_DNS:
		return flag_backend_dns(c, v);
	case OPT_CONFIG:
		return flag_config(c, v);
	default:
		return flag_setting(c, o, v);
	}
}

/* optind = 0 makes glibc reinitialize its scanner, so every call starts afresh. */
int cfg_flags_parse(struct ctx *c, int argc, char *const argv[])
{
	struct option lo[CFG_N_OPTIONS + 1];
	int saved_opterr = opterr, opt, rc = STEER_CONFIG_OK;
	char shorts[16];

	long_options_build(lo);
	short_options_build(shorts, sizeof(shorts));
	optind = 0;
	opterr = 0;
	while (rc == STEER_CONFIG_OK && (opt = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (opt == '?' || opt == ':')
			rc = flag_error(c, opt, argv);
		else
			rc = flag_one(c, option_of_val(opt), optarg);
	}
	if (rc == STEER_CONFIG_OK && optind < argc)
		rc = cfg_fail(c, "unexpected argument '%s' (options only; see --help)",
			      argv[optind]);
	opterr = saved_opterr;
	return rc;
}

/* ---- --help, from the table ---------------------------------------------------- */

#define HELP_WIDTH 79  /* columns of a line */
#define HELP_COLUMN 30 /* where the help of an option starts */
#define HEAD_INDENT 12 /* continuation lines of a long "--option VALUE" */

static void pad(FILE *f, size_t from, size_t to)
{
	for (; from < to; from++)
		fputc(' ', f);
}

/* "  --option VALUE", broken before a '[' outside brackets when longer than
 * a line; returns the column it ends at. */
static size_t head_print(FILE *f, const struct steer_option *o)
{
	char head[256];
	size_t col = 0, len, cut, i;
	const char *p = head;
	int depth;

	if (o->short_name)
		snprintf(head, sizeof(head), "  -%c, --%s%s%s", o->short_name, o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
	else
		snprintf(head, sizeof(head), "  --%s%s%s", o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
	for (len = strlen(p); col + len > HELP_WIDTH; len = strlen(p)) {
		for (cut = 0, depth = 0, i = 0; i < len && col + i <= HELP_WIDTH; i++) {
			if (p[i] == '[' && depth++ == 0)
				cut = i;
			else if (p[i] == ']')
				depth--;
		}
		if (!cut)
			break;
		fprintf(f, "%.*s\n", (int)cut, p);
		pad(f, 0, HEAD_INDENT);
		col = HEAD_INDENT;
		p += cut;
	}
	fputs(p, f);
	return col + strlen(p);
}

/* The words of text, from column HELP_COLUMN, each line at most HELP_WIDTH
 * unless one word is longer. */
static void words_print(FILE *f, const char *text)
{
	size_t col = HELP_COLUMN;

	while (*text) {
		size_t n = strcspn(text, " ");

		if (col > HELP_COLUMN && col + 1 + n > HELP_WIDTH) {
			fputc('\n', f);
			pad(f, 0, HELP_COLUMN);
			col = HELP_COLUMN;
		}
		if (col > HELP_COLUMN) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)n, text);
		col += n;
		text += n + strspn(text + n, " ");
	}
	fputc('\n', f);
}

/* The help's first line, then its bounds and default, then its other lines. */
static void option_print(FILE *f, const struct steer_option *o)
{
	const char *rest = strchr(o->help, '\n');
	int first = rest ? (int)(rest - o->help) : (int)strlen(o->help);
	char text[1024];
	size_t col = head_print(f, o);

	/* "(default 5s)", but "(default: the cgroup2 root)" */
	snprintf(text, sizeof(text), "%.*s%s%s%s%s%s", first, o->help, o->bounds ? "; " : "",
		 o->bounds ? o->bounds : "",
		 !o->def	       ? ""
		 : strchr(o->def, ' ') ? " (default: "
				       : " (default ",
		 o->def ? o->def : "", o->def ? ")" : "");
	if (col + 2 > HELP_COLUMN)
		fputc('\n', f);
	pad(f, col + 2 > HELP_COLUMN ? 0 : col, HELP_COLUMN);
	words_print(f, text);
	while (rest) {
		const char *next = strchr(rest + 1, '\n');

		snprintf(text, sizeof(text), "%.*s",
			 next ? (int)(next - rest - 1) : (int)strlen(rest + 1), rest + 1);
		pad(f, 0, HELP_COLUMN);
		words_print(f, text);
		rest = next;
	}
}

void steer_config_usage(FILE *f)
{
	const struct steer_option_section *sec;
	const struct steer_option *o;
	size_t s, i;

	fputs("Usage: smg-steerd --vip ADDR:PORT --backend ADDR:PORT[,KEY=VALUE]...\n"
	      "                  [OPTION]...\n"
	      "       smg-steerd --vip ADDR:PORT --backend-dns NAME:PORT[,KEY=VALUE]...\n"
	      "                  [OPTION]...\n"
	      "       smg-steerd --config FILE [OPTION]...\n"
	      "\n"
	      "Steers new TCP connections to a VIP towards the backend with the least expected\n"
	      "wait, from the loads each backend reports (gRPC GetLoads, HTTP /v1/loads or\n"
	      "Prometheus /metrics).\n",
	      f);
	for (s = 0; (sec = steer_config_section(s)); s++) {
		fprintf(f, "\n%s%s%s%s:\n", sec->title, sec->note ? " (" : "",
			sec->note ? sec->note : "", sec->note ? ")" : "");
		for (i = 0; (o = steer_config_option(i)); i++) {
			if (o->section == s)
				option_print(f, o);
		}
	}
	fputs("\nOptions also take the form --option=value. SIGHUP reloads the configuration.\n",
	      f);
}
