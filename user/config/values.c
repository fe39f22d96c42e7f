// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * values.c - errors, and the values of the options: numbers, durations and the
 * policy knobs, each checked against the bounds of its row in the table
 * (options.c); the parsers of the general options; and the layers, which
 * copy what each source set (see config_int.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"

#define DURATION_EXAMPLES "(e.g. 250ms, 2s, 1.5s, 1m)"

/* ---- Errors --------------------------------------------------------------------- */

/* Writes the one-line reason and returns STEER_CONFIG_USAGE. Values quoted
 * from a file may hold newlines: they are masked to keep the line single. */
int cfg_fail(struct ctx *c, const char *fmt, ...)
{
	va_list ap;
	char *p;

	if (!c->err || !c->errlen)
		return STEER_CONFIG_USAGE;
	va_start(ap, fmt);
	vsnprintf(c->err, c->errlen, fmt, ap);
	va_end(ap);
	for (p = c->err; *p; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	}
	return STEER_CONFIG_USAGE;
}

int cfg_why(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
}

void cfg_warn(struct ctx *c, const char *fmt, ...)
{
	size_t at = strlen(c->warnings), room = sizeof(c->warnings) - at;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(c->warnings + at, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n + 1 >= room) {
		c->warnings[at] = 0; /* no room for it and its newline */
		return;
	}
	c->warnings[at + (size_t)n] = '\n';
	c->warnings[at + (size_t)n + 1] = 0;
}

/* ---- Scalars ---------------------------------------------------------------------- */

/* A decimal number, nothing else: strtod alone would take "nan", "inf",
 * hex floats and leading blanks. */
static int parse_finite(const char *s, double *out)
{
	char *end;
	double v;

	if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (*end || errno || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

/* Digits only, within 0..UINT32_MAX. */
static int parse_u32(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || strspn(s, "0123456789") != strlen(s))
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end || errno || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int cfg_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "true", "yes", "on" };
	static const char *const no[] = { "false", "no", "off" };
	size_t i;

	for (i = 0; i < 3; i++) {
		if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
			*out = !strcasecmp(s, yes[i]);
			return 0;
		}
	}
	return -1;
}

/* ---- Durations -------------------------------------------------------------------- */

struct duration_unit {
	const char *suffix;
	double ns;
};

/* Longer suffixes first, so that "ms" is not read as "m" then "s". */
static const struct duration_unit duration_units[] = {
	{ "ns", 1 },	 { "us", 1e3 }, { "\xc2\xb5s", 1e3 }, { "ms", 1e6 },
	{ "h", 3600e9 }, { "m", 60e9 }, { "s", 1e9 },
};

/* Reads "1", "1.5" or ".5" at *s; -1 without a digit. */
static int duration_number(const char **s, double *out)
{
	double v = 0, scale = 1;
	bool digits = false, dot = false;
	const char *p;

	for (p = *s; (*p >= '0' && *p <= '9') || (*p == '.' && !dot); p++) {
		if (*p == '.') {
			dot = true;
			continue;
		}
		digits = true;
		if (dot) {
			scale /= 10;
			v += (*p - '0') * scale;
		} else {
			v = v * 10 + (*p - '0');
		}
	}
	*s = p;
	*out = v;
	return digits ? 0 : -1;
}

static int duration_unit(const char **s, double *ns)
{
	size_t i;

	for (i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
		size_t n = strlen(duration_units[i].suffix);

		if (!strncmp(*s, duration_units[i].suffix, n)) {
			*s += n;
			*ns = duration_units[i].ns;
			return 0;
		}
	}
	return -1;
}

/* A sequence of NUMBER UNIT pairs, as Go writes them ("1m30s" too). */
int steer_parse_duration(const char *s, uint64_t *ns)
{
	double total = 0, num, unit;

	if (!s || !*s)
		return -1;
	while (*s) {
		if (duration_number(&s, &num) || duration_unit(&s, &unit))
			return -1;
		total += num * unit;
	}
	/* Below 2^64, and at least 1 ns once rounded. */
	if (!(total < 18446744073709549568.0) || total < 0.5)
		return -1;
	*ns = (uint64_t)(total + 0.5);
	return 0;
}

/* ---- Policy knobs ------------------------------------------------------------------- */

/*
 * A knob within its row's bounds (docs/operations.md says why), narrower
 * than what the policy module can compute with (steer_policy_check):
 * outside them a value is a typo or a unit mistake, never a setting. An
 * integer knob is a uint32_t of struct steer_policy, the others a double.
 */
/* A choice's word: its index in o->choices, or -1. */
static int knob_word(const struct cfg_option *o, const char *v)
{
	int i;

	for (i = 0; v && o->choices[i]; i++) {
		if (!strcmp(v, o->choices[i]))
			return i;
	}
	return -1;
}

/* "0", or NUMBER UNIT pairs that are all zero ("0s", "0ms"). */
static bool duration_is_zero(const char *s)
{
	double num, unit;

	if (!strcmp(s, "0"))
		return true;
	if (!*s)
		return false;
	while (*s) {
		if (duration_number(&s, &num) || duration_unit(&s, &unit) || num != 0)
			return false;
	}
	return true;
}

static int knob_duration(const struct cfg_option *o, const char *v, uint64_t *out)
{
	uint64_t ns;

	if (v && o->min == 0 && duration_is_zero(v)) {
		*out = 0;
		return 0;
	}
	if (!v || steer_parse_duration(v, &ns) || ns < o->min || ns > o->max)
		return -1;
	*out = ns;
	return 0;
}

static int knob_value(const struct cfg_option *o, const char *v, struct steer_policy *p)
{
	bool integer = o->size == sizeof(uint32_t);
	uint32_t u = 0;
	uint64_t ns = 0;
	double d = 0;
	bool b = false;
	int rc;

	if (o->knob_type == KNOB_SWITCH) {
		if (v ? cfg_parse_bool(v, &b) : (b = true, 0))
			return -1;
		memcpy((char *)p + o->field, &b, sizeof(b));
		return 0;
	}
	if (o->knob_type == KNOB_CHOICE) {
		rc = knob_word(o, v);
		if (rc < 0)
			return -1;
		u = (uint32_t)rc;
		b = rc != 0;
		if (integer)
			memcpy((char *)p + o->field, &u, sizeof(u));
		else
			memcpy((char *)p + o->field, &b, sizeof(b));
		return 0;
	}
	if (o->knob_type == KNOB_DURATION) {
		if (knob_duration(o, v, &ns))
			return -1;
		memcpy((char *)p + o->field, &ns, sizeof(ns));
		return 0;
	}
	if (!v)
		return -1;
	rc = integer ? parse_u32(v, &u) : parse_finite(v, &d);
	if (integer)
		d = u;
	if (rc || d < (double)o->min || d > (double)o->max || (o->above_min && d <= (double)o->min))
		return -1;
	if (integer)
		memcpy((char *)p + o->field, &u, sizeof(u));
	else
		memcpy((char *)p + o->field, &d, sizeof(d));
	return 0;
}

/* Parses one knob's value into kl; the policy module agrees with every value in range. */
int cfg_knob_parse(const struct cfg_option *o, const char *v, struct knob_layer *kl, char *why,
		   size_t whylen)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;

	if (knob_value(o, v, &p) || steer_policy_check(&p, NULL, 0))
		return cfg_why(why, whylen, "must be %s, got '%s'", o->what, v ? v : "");
	knob_value(o, v, &kl->p);
	kl->set[o->knob] = true;
	return 0;
}

void cfg_knobs_apply(struct steer_policy *dst, const struct knob_layer *kl)
{
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct cfg_option *o = &cfg_options[i];

		if (o->kind == VALUE_KNOB && kl->set[o->knob])
			memcpy((char *)dst + o->field, (const char *)&kl->p + o->field, o->size);
	}
}

/* ---- Global options ---------------------------------------------------------------- */

static int parse_path(const char *v, char *dst, char *why, size_t whylen)
{
	if (strlen(v) >= PATH_MAX)
		return cfg_why(why, whylen, "must be a path of at most %d bytes", PATH_MAX - 1);
	snprintf(dst, PATH_MAX, "%s", v);
	return 0;
}

/* Checked when given, so that --check-config says it; "" is the cgroup2 root. */
int cfg_parse_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (parse_path(v, dst->cgroup, why, whylen))
		return -1;
	return cfg_cgroup_check(v, why, whylen);
}

int cfg_parse_pin_path(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (v[0] != '/')
		return cfg_why(why, whylen, "must be an absolute directory path in bpffs, got '%s'",
			       v);
	return parse_path(v, dst->pin_path, why, whylen);
}

/* v is NULL for the flag, which takes no value. */
int cfg_parse_keep_pinned(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (!v) {
		dst->keep_pinned = true;
		return 0;
	}
	if (cfg_parse_bool(v, &dst->keep_pinned))
		return cfg_why(why, whylen, "must be true or false, got '%s'", v);
	return 0;
}

/* A duration within [min, max]: outside, it is a typo or a unit mistake. */
static int duration_parse(const struct cfg_option *o, const char *v, uint64_t *dst, char *why,
			  size_t whylen)
{
	char lo[32], hi[32];
	uint64_t ns;

	if (steer_parse_duration(v, &ns))
		return cfg_why(why, whylen, "'%s' is not a duration > 0 " DURATION_EXAMPLES, v);
	if (ns < o->min || ns > o->max)
		return cfg_why(why, whylen, "must be between %s and %s, got '%s'",
			       steer_duration_text(o->min, lo, sizeof(lo)),
			       steer_duration_text(o->max, hi, sizeof(hi)), v);
	*dst = ns;
	return 0;
}

static int count_parse(const struct cfg_option *o, const char *v, uint32_t *dst, char *why,
		       size_t whylen)
{
	uint32_t n;

	if (parse_u32(v, &n) || n < o->min || n > o->max)
		return cfg_why(why, whylen, "must be an integer from %llu to %llu (%s), got '%s'",
			       (unsigned long long)o->min, (unsigned long long)o->max, o->what, v);
	*dst = n;
	return 0;
}

int cfg_parse_log_level(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	int i;

	for (i = 0; i < 4; i++) {
		if (!strcmp(v, names[i])) {
			dst->log_level = (enum steer_log_level)i;
			return 0;
		}
	}
	return cfg_why(why, whylen, "must be one of error, warn, info, debug, got '%s'", v);
}

int cfg_parse_wire_estimator(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (!strcmp(v, "fluid") || !strcmp(v, "fluid-step") || !strcmp(v, "off")) {
		dst->wire_step = !strcmp(v, "fluid-step");
		dst->wire_off = !strcmp(v, "off");
		return 0;
	}
	if (!strcmp(v, "pending"))
		return cfg_why(why, whylen,
			       "'pending' is no longer offered: use fluid (the default), which "
			       "scores unanswered requests by the time they keep the backend busy");
	return cfg_why(why, whylen, "must be fluid, fluid-step or off, got '%s'", v);
}

/* Checked here so that a typo is refused before anything starts; c-ares
 * reads the same text. */
int cfg_parse_dns_server(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_dns_servers_parse(v, dst->dns_servers, sizeof(dst->dns_servers), why, whylen);
}

/*
 * "[192.0.2.10]:9464" -> "192.0.2.10:9464" in buf; anything else is returned
 * as is. A DaemonSet writes --metrics-listen=[$(NODE_IP)]:PORT, one form that
 * fits the node's IPv4 and IPv6 address alike (a bare IPv6 address followed
 * by :PORT is ambiguous, so brackets are the only form that fits both).
 */
static const char *unbracket_v4(const char *v, char *buf, size_t len)
{
	const char *close = v[0] == '[' ? strchr(v, ']') : NULL;
	struct in_addr a;
	char host[INET_ADDRSTRLEN];
	size_t hlen;

	if (!close || close[1] != ':')
		return v;
	hlen = (size_t)(close - v - 1);
	if (hlen >= sizeof(host))
		return v;
	memcpy(host, v + 1, hlen);
	host[hlen] = 0;
	if (inet_pton(AF_INET, host, &a) != 1)
		return v;
	if ((size_t)snprintf(buf, len, "%s%s", host, close + 1) >= len)
		return v;
	return buf;
}

int cfg_parse_metrics(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	char detail[WHY_LEN], plain[STEER_ADDR_STRLEN + 8];

	if (!strcmp(v, "off")) {
		dst->metrics_enabled = false;
		snprintf(dst->metrics_listen, sizeof(dst->metrics_listen), "off");
		memset(&dst->metrics_addr, 0, sizeof(dst->metrics_addr));
		return 0;
	}
	v = unbracket_v4(v, plain, sizeof(plain));
	if (cfg_addr_parse(v, &dst->metrics_addr, detail, sizeof(detail)) ||
	    cfg_addr_check_listen(&dst->metrics_addr, detail, sizeof(detail)))
		return cfg_why(why, whylen, "%s (or 'off' to disable)", detail);
	dst->metrics_enabled = true;
	steer_addr_format(&dst->metrics_addr, dst->metrics_listen, sizeof(dst->metrics_listen));
	return 0;
}

/* ---- The layers ------------------------------------------------------------------ */

int cfg_value_parse(const struct cfg_option *o, const char *v, struct steer_config *cfg, char *why,
		    size_t whylen)
{
	char *field = (char *)cfg + o->field;

	switch (o->kind) {
	case VALUE_PARSE:
		return o->parse(v, cfg, why, whylen);
	case VALUE_DURATION:
		return duration_parse(o, v, (uint64_t *)(void *)field, why, whylen);
	case VALUE_COUNT:
		return count_parse(o, v, (uint32_t *)(void *)field, why, whylen);
	default:
		return cfg_why(why, whylen, "takes no value here");
	}
}

int cfg_option_parse(const struct cfg_option *o, const char *v, struct layer *l, int line,
		     char *why, size_t whylen)
{
	if (o->kind == VALUE_KNOB)
		return cfg_knob_parse(o, v, &l->knobs, why, whylen);
	if (cfg_value_parse(o, v, &l->v, why, whylen))
		return -1;
	l->set[o->opt] = true;
	l->line[o->opt] = line;
	return 0;
}

/* The defaults that are values in the table; the others stay zero, or follow
 * another option (config.c). Each of them parses: the unit tests check it. */
void cfg_defaults_apply(struct steer_config *cfg)
{
	char why[WHY_LEN];
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		if (cfg_options[i].def_is_value)
			cfg_value_parse(&cfg_options[i], cfg_options[i].doc.def, cfg, why,
					sizeof(why));
	}
}

/* Copies the options the layer set into dst: the bytes of each one's fields. */
void cfg_layer_apply(struct steer_config *dst, const struct layer *l)
{
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct cfg_option *o = &cfg_options[i];

		if (o->opt < N_OPTS && l->set[o->opt])
			memcpy((char *)dst + o->field, (const char *)&l->v + o->field, o->size);
	}
}

/* "--NAME" or "FILE:LINE: KEY", whichever gave the option: how an error
 * between options names the one to change. */
const char *cfg_origin(struct ctx *c, enum opt o, char *buf, size_t len)
{
	const struct cfg_option *opt = cfg_option_of(o);

	if (c->flags.set[o])
		snprintf(buf, len, "--%s", opt->doc.name);
	else
		snprintf(buf, len, "%s:%d: %s", c->config_path, c->top.line[o], opt->doc.key);
	return buf;
}

/* The option was given, as a flag or in the file. */
bool cfg_given(const struct ctx *c, enum opt o)
{
	return c->flags.set[o] || c->top.set[o];
}

/* A poll that may outlast its interval would overlap the next one. */
static int timeout_check(struct ctx *c)
{
	char where[PATH_MAX + 32], t[32], i[32];

	if (c->out.timeout_ns <= c->out.interval_ns)
		return STEER_CONFIG_OK;
	return cfg_fail(c, "%s: must be <= the load-check-interval (%s), got %s",
			cfg_origin(c, OPT_TIMEOUT, where, sizeof(where)),
			steer_duration_text(c->out.interval_ns, i, sizeof(i)),
			steer_duration_text(c->out.timeout_ns, t, sizeof(t)));
}

/*
 * Every table expires --snapshot-max-age after its publish, and the next
 * publish comes one interval plus the poll later: a max age not above the
 * interval would let every table expire between publishes, and steering fall
 * back to round robin every cycle.
 */
static int max_age_check(struct ctx *c)
{
	char where[PATH_MAX + 32], a[32], i[32];

	if (c->out.max_age_ns > c->out.interval_ns)
		return STEER_CONFIG_OK;
	steer_duration_text(c->out.max_age_ns, a, sizeof(a));
	steer_duration_text(c->out.interval_ns, i, sizeof(i));
	if (cfg_given(c, OPT_MAX_AGE))
		return cfg_fail(c, "%s: must be > the load-check-interval (%s), got %s",
				cfg_origin(c, OPT_MAX_AGE, where, sizeof(where)), i, a);
	return cfg_fail(c, "--load-check-interval: %s is not below --snapshot-max-age (%s)", i, a);
}

int cfg_check_timing(struct ctx *c)
{
	int rc = timeout_check(c);

	return rc ? rc : max_age_check(c);
}
