// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * config.c - smg-steerd's command line and YAML configuration (see config.h).
 *
 * Options come from up to three layers: built-in defaults, the --config
 * file (libyaml's document API) and the flags (getopt_long). Each layer is
 * parsed on its own into a "layer" that remembers which options it set;
 * resolution then applies defaults < file < flags, and for the policy knobs
 * of a service defaults < file top level < service keys < flags.
 *
 * Everything lives in one heap context per call, so that SIGHUP can call
 * steer_config_load again and a failed call leaves *out untouched.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include <yaml.h>

#define NS_PER_US 1000ULL
#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
#define DEFAULT_METRICS_LISTEN "127.0.0.1:9464"
#define CONFIG_FILE_MAX (1 << 20) /* a config file is small; this stops /dev/zero */
#define WHY_LEN 320
#define DURATION_EXAMPLES "(e.g. 250ms, 2s, 1.5s, 1m)"
#define U32_MAX_TEXT "4294967295"
#define BACKEND_SYNTAX "ADDR:PORT[,loads=ADDR:PORT]"

/* ---- Options shared by the flags and the file's top level ------------------ */

enum knob {
	KNOB_WEIGHT,
	KNOB_THROUGHPUT,
	KNOB_PREFILL,
	KNOB_PEERS,
	N_KNOBS,
};

static const char *const knob_names[N_KNOBS] = {
	[KNOB_WEIGHT] = "least-load-kv-pressure-weight",
	[KNOB_THROUGHPUT] = "least-load-default-throughput",
	[KNOB_PREFILL] = "least-load-mean-prefill-tokens",
	[KNOB_PEERS] = "peer-routers",
};

/* Global (non-policy) options. */
enum opt {
	OPT_CGROUP,
	OPT_PIN_PATH,
	OPT_KEEP_PINNED,
	OPT_INTERVAL,
	OPT_TIMEOUT,
	OPT_MAX_AGE,
	OPT_UNHEALTHY,
	OPT_HEALTHY,
	OPT_LOG_LEVEL,
	OPT_METRICS,
	N_OPTS,
};

/* Policy knobs set by one source (flags, top level or one service). */
struct knob_layer {
	bool set[N_KNOBS];
	struct steer_policy p;
};

/* The options one source (the flags or the file's top level) set. */
struct layer {
	bool set[N_OPTS];
	int line[N_OPTS]; /* file line, for checks made after parsing; 0 for flags */
	struct steer_config v;
	struct knob_layer knobs;
};

typedef int (*opt_parser)(const char *v, struct steer_config *dst, char *why, size_t whylen);

/* One option: a global one (parse) or a policy knob (knob >= 0). */
struct setting {
	const char *name; /* the flag without "--", and the top-level key */
	enum opt opt;
	int knob;
	opt_parser parse;
};

/* ---- One service being assembled ------------------------------------------- */

struct service_draft {
	struct steer_service_cfg cfg; /* policy is resolved at the end */
	struct knob_layer knobs;      /* the service's own keys */
	int line;		      /* 0 for the flags' service */
};

struct ctx {
	char *err;
	size_t errlen;
	char config_path[PATH_MAX];
	struct layer flags, top;
	bool flag_vip_given;
	bool check_only;	       /* --check-config */
	struct service_draft flag_svc; /* --vip and --backend */
	struct service_draft *svcs;    /* from the file, then merged with flag_svc */
	size_t n_svcs;
	struct steer_config out;
};

/* ---- Errors --------------------------------------------------------------------- */

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the one-line reason and returns STEER_CONFIG_USAGE. Values quoted
 * from a file may hold newlines: they are masked to keep the line single. */
static int fail(struct ctx *c, const char *fmt, ...)
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

static int why_set(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int why_set(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -1;
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

/* A well-formed integer too large for 32 bits: the message then gives the upper bound. */
static const char *u32_bound_note(const char *s)
{
	uint32_t v;

	if (*s && strspn(s, "0123456789") == strlen(s) && parse_u32(s, &v))
		return " and <= " U32_MAX_TEXT;
	return "";
}

static int parse_bool(const char *s, bool *out)
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

/* For messages: the exact value in the largest unit that divides it. */
static const char *duration_text(uint64_t ns, char *buf, size_t len)
{
	if (ns % NS_PER_S == 0)
		snprintf(buf, len, "%llus", (unsigned long long)(ns / NS_PER_S));
	else if (ns % NS_PER_MS == 0)
		snprintf(buf, len, "%llums", (unsigned long long)(ns / NS_PER_MS));
	else if (ns % NS_PER_US == 0)
		snprintf(buf, len, "%lluus", (unsigned long long)(ns / NS_PER_US));
	else
		snprintf(buf, len, "%lluns", (unsigned long long)ns);
	return buf;
}

/* ---- Policy knobs ------------------------------------------------------------------- */

static void knob_put(struct steer_policy *p, enum knob k, double v)
{
	switch (k) {
	case KNOB_WEIGHT:
		p->kv_pressure_weight = v;
		break;
	case KNOB_THROUGHPUT:
		p->default_throughput = v;
		break;
	case KNOB_PREFILL:
		p->mean_prefill_tokens = (uint32_t)v;
		break;
	case KNOB_PEERS:
		p->peer_routers = (uint32_t)v;
		break;
	default:
		break;
	}
}

static bool knob_is_integer(enum knob k)
{
	return k == KNOB_PREFILL || k == KNOB_PEERS;
}

/*
 * The accepted range of a knob in steer_policy_check()'s own words, so that
 * the flag, the file and the policy module say the same thing: check a
 * policy where only this knob is out of range, and drop the knob's name.
 */
static const char *knob_range(enum knob k, char *buf, size_t len)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;
	size_t name_len = strlen(knob_names[k]);

	knob_put(&p, k, knob_is_integer(k) ? 0 : NAN);
	steer_policy_check(&p, buf, len);
	if (!strncmp(buf, knob_names[k], name_len) && buf[name_len] == ' ')
		memmove(buf, buf + name_len + 1, strlen(buf + name_len + 1) + 1);
	return buf;
}

/* Parses one knob's value into kl, checked by the policy module. */
static int knob_parse(const char *v, struct knob_layer *kl, enum knob k, char *why, size_t whylen)
{
	struct steer_policy p = STEER_POLICY_DEFAULTS;
	char range[160];
	uint32_t u = 0;
	double d = 0;
	int rc;

	if (knob_is_integer(k)) {
		rc = parse_u32(v, &u);
		d = u;
	} else {
		rc = parse_finite(v, &d);
	}
	if (rc == 0) {
		knob_put(&p, k, d);
		rc = steer_policy_check(&p, NULL, 0);
	}
	if (rc)
		return why_set(why, whylen, "%s%s, got '%s'", knob_range(k, range, sizeof(range)),
			       knob_is_integer(k) ? u32_bound_note(v) : "", v);
	knob_put(&kl->p, k, d);
	kl->set[k] = true;
	return 0;
}

static void knobs_apply(struct steer_policy *dst, const struct knob_layer *kl)
{
	int k;

	for (k = 0; k < N_KNOBS; k++) {
		if (!kl->set[k])
			continue;
		switch (k) {
		case KNOB_WEIGHT:
			dst->kv_pressure_weight = kl->p.kv_pressure_weight;
			break;
		case KNOB_THROUGHPUT:
			dst->default_throughput = kl->p.default_throughput;
			break;
		case KNOB_PREFILL:
			dst->mean_prefill_tokens = kl->p.mean_prefill_tokens;
			break;
		default:
			dst->peer_routers = kl->p.peer_routers;
			break;
		}
	}
}

/* ---- Global options ---------------------------------------------------------------- */

static int parse_path(const char *v, char *dst, char *why, size_t whylen)
{
	if (strlen(v) >= PATH_MAX)
		return why_set(why, whylen, "must be a path of at most %d bytes", PATH_MAX - 1);
	snprintf(dst, PATH_MAX, "%s", v);
	return 0;
}

static int parse_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_path(v, dst->cgroup, why, whylen);
}

static int parse_pin_path(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (v[0] != '/')
		return why_set(why, whylen, "must be an absolute directory path in bpffs, got '%s'",
			       v);
	return parse_path(v, dst->pin_path, why, whylen);
}

/* v is NULL for the flag, which takes no value. */
static int parse_keep_pinned(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (!v) {
		dst->keep_pinned = true;
		return 0;
	}
	if (parse_bool(v, &dst->keep_pinned))
		return why_set(why, whylen, "must be true or false, got '%s'", v);
	return 0;
}

static int parse_duration_to(const char *v, uint64_t *dst, char *why, size_t whylen)
{
	if (steer_parse_duration(v, dst))
		return why_set(why, whylen, "'%s' is not a duration > 0 " DURATION_EXAMPLES, v);
	return 0;
}

static int parse_interval(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_duration_to(v, &dst->interval_ns, why, whylen);
}

static int parse_timeout(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_duration_to(v, &dst->timeout_ns, why, whylen);
}

static int parse_max_age(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_duration_to(v, &dst->max_age_ns, why, whylen);
}

static int parse_count(const char *v, uint32_t *dst, const char *what, char *why, size_t whylen)
{
	if (parse_u32(v, dst) || *dst < 1)
		return why_set(why, whylen, "must be an integer >= 1%s (%s), got '%s'",
			       u32_bound_note(v), what, v);
	return 0;
}

static int parse_unhealthy(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_count(v, &dst->unhealthy_after, "consecutive failed polls", why, whylen);
}

static int parse_healthy(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return parse_count(v, &dst->healthy_after, "consecutive good polls", why, whylen);
}

static int parse_log_level(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	int i;

	for (i = 0; i < 4; i++) {
		if (!strcmp(v, names[i])) {
			dst->log_level = (enum steer_log_level)i;
			return 0;
		}
	}
	return why_set(why, whylen, "must be one of error, warn, info, debug, got '%s'", v);
}

static int parse_metrics(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	char detail[160];

	if (!strcmp(v, "off")) {
		dst->metrics_enabled = false;
		snprintf(dst->metrics_listen, sizeof(dst->metrics_listen), "off");
		memset(&dst->metrics_addr, 0, sizeof(dst->metrics_addr));
		return 0;
	}
	if (steer_addr_parse(v, &dst->metrics_addr, detail, sizeof(detail)))
		return why_set(why, whylen, "%s (or 'off' to disable)", detail);
	dst->metrics_enabled = true;
	steer_addr_format(&dst->metrics_addr, dst->metrics_listen, sizeof(dst->metrics_listen));
	return 0;
}

/* Every option that is both a flag and a top-level key, in --help order. */
static const struct setting settings[] = {
	{ "cgroup", OPT_CGROUP, -1, parse_cgroup },
	{ "pin-path", OPT_PIN_PATH, -1, parse_pin_path },
	{ "keep-pinned", OPT_KEEP_PINNED, -1, parse_keep_pinned },
	{ "load-check-interval", OPT_INTERVAL, -1, parse_interval },
	{ "load-timeout", OPT_TIMEOUT, -1, parse_timeout },
	{ "snapshot-max-age", OPT_MAX_AGE, -1, parse_max_age },
	{ "least-load-kv-pressure-weight", N_OPTS, KNOB_WEIGHT, NULL },
	{ "least-load-default-throughput", N_OPTS, KNOB_THROUGHPUT, NULL },
	{ "least-load-mean-prefill-tokens", N_OPTS, KNOB_PREFILL, NULL },
	{ "peer-routers", N_OPTS, KNOB_PEERS, NULL },
	{ "unhealthy-after", OPT_UNHEALTHY, -1, parse_unhealthy },
	{ "healthy-after", OPT_HEALTHY, -1, parse_healthy },
	{ "log-level", OPT_LOG_LEVEL, -1, parse_log_level },
	{ "metrics-listen", OPT_METRICS, -1, parse_metrics },
};

#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))

static const struct setting *setting_find(const char *name)
{
	size_t i;

	for (i = 0; i < N_SETTINGS; i++) {
		if (!strcmp(settings[i].name, name))
			return &settings[i];
	}
	return NULL;
}

/* Parses v into the layer; line is the file line (0 for a flag). */
static int setting_parse(const struct setting *s, const char *v, struct layer *l, int line,
			 char *why, size_t whylen)
{
	if (s->knob >= 0)
		return knob_parse(v, &l->knobs, (enum knob)s->knob, why, whylen);
	if (s->parse(v, &l->v, why, whylen))
		return -1;
	l->set[s->opt] = true;
	l->line[s->opt] = line;
	return 0;
}

/* Copies the options the layer set into dst. */
static void layer_apply(struct steer_config *dst, const struct layer *l)
{
	const struct steer_config *v = &l->v;

	if (l->set[OPT_CGROUP])
		memcpy(dst->cgroup, v->cgroup, sizeof(dst->cgroup));
	if (l->set[OPT_PIN_PATH])
		memcpy(dst->pin_path, v->pin_path, sizeof(dst->pin_path));
	if (l->set[OPT_KEEP_PINNED])
		dst->keep_pinned = v->keep_pinned;
	if (l->set[OPT_INTERVAL])
		dst->interval_ns = v->interval_ns;
	if (l->set[OPT_TIMEOUT])
		dst->timeout_ns = v->timeout_ns;
	if (l->set[OPT_MAX_AGE])
		dst->max_age_ns = v->max_age_ns;
	if (l->set[OPT_UNHEALTHY])
		dst->unhealthy_after = v->unhealthy_after;
	if (l->set[OPT_HEALTHY])
		dst->healthy_after = v->healthy_after;
	if (l->set[OPT_LOG_LEVEL])
		dst->log_level = v->log_level;
	if (l->set[OPT_METRICS]) {
		dst->metrics_enabled = v->metrics_enabled;
		dst->metrics_addr = v->metrics_addr;
		memcpy(dst->metrics_listen, v->metrics_listen, sizeof(dst->metrics_listen));
	}
}

/* ---- Services and backends ---------------------------------------------------------- */

static void draft_free(struct service_draft *d)
{
	free(d->cfg.backends);
	memset(d, 0, sizeof(*d));
}

static void draft_set_vip(struct service_draft *d, const struct steer_addr *vip)
{
	d->cfg.vip = *vip;
	steer_addr_format(vip, d->cfg.vip_str, sizeof(d->cfg.vip_str));
}

/* "ADDR:PORT[,loads=ADDR:PORT]": the flag's form, and a backend scalar's. */
static int backend_parse(const char *spec, struct steer_backend_cfg *b, char *why, size_t whylen)
{
	char addr[STEER_ADDR_STRLEN + 64], detail[160];
	const char *comma = strchr(spec, ','), *loads = NULL;
	size_t len = comma ? (size_t)(comma - spec) : strlen(spec);

	if (len >= sizeof(addr))
		return why_set(why, whylen, "'%s': address too long, expected " BACKEND_SYNTAX,
			       spec);
	memcpy(addr, spec, len);
	addr[len] = 0;
	if (comma) {
		if (strncmp(comma + 1, "loads=", 6))
			return why_set(why, whylen, "'%s': expected " BACKEND_SYNTAX, spec);
		loads = comma + 7;
	}
	memset(b, 0, sizeof(*b));
	if (steer_addr_parse(addr, &b->addr, detail, sizeof(detail)) ||
	    (loads && steer_addr_parse(loads, &b->loads, detail, sizeof(detail))))
		return why_set(why, whylen, "%s; expected " BACKEND_SYNTAX, detail);
	if (!loads)
		b->loads = b->addr;
	steer_addr_format(&b->addr, b->addr_str, sizeof(b->addr_str));
	steer_addr_format(&b->loads, b->loads_str, sizeof(b->loads_str));
	return 0;
}

/* Appends b unless it is listed already or the service is full. */
static int backend_add(struct service_draft *d, const struct steer_backend_cfg *b, char *why,
		       size_t whylen)
{
	struct steer_backend_cfg *grown;
	size_t i;

	for (i = 0; i < d->cfg.n_backends; i++) {
		if (steer_addr_equal(&d->cfg.backends[i].addr, &b->addr))
			return why_set(why, whylen, "backend %s is listed twice", b->addr_str);
	}
	if (d->cfg.n_backends >= STEER_MAX_BACKENDS)
		return why_set(why, whylen, "at most %d backends per service, got more",
			       STEER_MAX_BACKENDS);
	grown = realloc(d->cfg.backends, (d->cfg.n_backends + 1) * sizeof(*grown));
	if (!grown)
		return why_set(why, whylen, "out of memory");
	d->cfg.backends = grown;
	d->cfg.backends[d->cfg.n_backends++] = *b;
	return 0;
}

/* The kernel rewrites a connect within its family: a backend must share the vip's. */
static int backend_check_family(const struct service_draft *d, const struct steer_backend_cfg *b,
				const char *vip_label, char *why, size_t whylen)
{
	bool v4 = steer_addr_is_v4(&d->cfg.vip);

	if (steer_addr_is_v4(&b->addr) == v4)
		return 0;
	return why_set(why, whylen, "backend %s is %s but %s %s is %s", b->addr_str,
		       v4 ? "IPv6" : "IPv4", vip_label, d->cfg.vip_str, v4 ? "IPv4" : "IPv6");
}

static ssize_t service_find(const struct ctx *c, const struct steer_addr *vip)
{
	size_t i;

	for (i = 0; i < c->n_svcs; i++) {
		if (steer_addr_equal(&c->svcs[i].cfg.vip, vip))
			return (ssize_t)i;
	}
	return -1;
}

/* Appends a zeroed draft; NULL when out of memory. */
static struct service_draft *service_append(struct ctx *c)
{
	struct service_draft *grown = realloc(c->svcs, (c->n_svcs + 1) * sizeof(*grown));

	if (!grown)
		return NULL;
	c->svcs = grown;
	memset(&c->svcs[c->n_svcs], 0, sizeof(c->svcs[0]));
	return &c->svcs[c->n_svcs++];
}

/* ---- Command line ---------------------------------------------------------------------- */

enum {
	/* getopt_long values: settings[i] is SETTING_VAL + i. */
	VAL_HELP = 'h',
	VAL_VIP = 0x100,
	VAL_BACKEND,
	VAL_CONFIG,
	VAL_VERSION,
	VAL_CHECK_CONFIG,
	SETTING_VAL = 0x200,
};

#define N_LONG_OPTS (N_SETTINGS + 6)

static void long_options_build(struct option *lo)
{
	size_t i;

	for (i = 0; i < N_SETTINGS; i++) {
		lo[i] = (struct option){ settings[i].name,
					 settings[i].opt == OPT_KEEP_PINNED ? no_argument
									    : required_argument,
					 NULL, SETTING_VAL + (int)i };
	}
	lo[i++] = (struct option){ "vip", required_argument, NULL, VAL_VIP };
	lo[i++] = (struct option){ "backend", required_argument, NULL, VAL_BACKEND };
	lo[i++] = (struct option){ "config", required_argument, NULL, VAL_CONFIG };
	lo[i++] = (struct option){ "help", no_argument, NULL, VAL_HELP };
	lo[i++] = (struct option){ "version", no_argument, NULL, VAL_VERSION };
	lo[i++] = (struct option){ "check-config", no_argument, NULL, VAL_CHECK_CONFIG };
	lo[i] = (struct option){ NULL, 0, NULL, 0 };
}

static const char *long_option_name(const struct option *lo, int val)
{
	for (; lo->name; lo++) {
		if (lo->val == val)
			return lo->name;
	}
	return "?";
}

static int flag_vip(struct ctx *c, const char *v)
{
	struct steer_addr vip;
	char detail[160];

	if (c->flag_vip_given)
		return fail(c, "--vip: given twice; the command line defines one service "
			       "(use --config for more)");
	if (steer_addr_parse(v, &vip, detail, sizeof(detail)))
		return fail(c, "--vip: %s", detail);
	c->flag_vip_given = true;
	draft_set_vip(&c->flag_svc, &vip);
	return STEER_CONFIG_OK;
}

static int flag_backend(struct ctx *c, const char *v)
{
	struct steer_backend_cfg b;
	char why[WHY_LEN];

	if (backend_parse(v, &b, why, sizeof(why)) ||
	    backend_add(&c->flag_svc, &b, why, sizeof(why)))
		return fail(c, "--backend: %s", why);
	return STEER_CONFIG_OK;
}

static int flag_setting(struct ctx *c, const struct setting *s, const char *v)
{
	char why[WHY_LEN];

	if (setting_parse(s, v, &c->flags, 0, why, sizeof(why)))
		return fail(c, "--%s: %s", s->name, why);
	return STEER_CONFIG_OK;
}

/* getopt_long reported '?' or ':'; name the offending argument. */
static int flag_error(struct ctx *c, int opt, const struct option *lo, char *const argv[])
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return fail(c, "--%s: missing value", long_option_name(lo, optopt));
	if (optopt && !strncmp(arg, "--", 2)) /* a long option without value, given one */
		return fail(c, "--%s takes no value, got '%s'", long_option_name(lo, optopt), arg);
	if (optopt)
		return fail(c, "unknown option '-%c' (see --help)", optopt);
	return fail(c, "unknown or ambiguous option '%s' (see --help)", arg);
}

/* A value that is the next flag means the flag's own value is missing. */
static bool value_is_flag(const char *v)
{
	return v && v[0] == '-' && v[1] == '-';
}

static int flag_one(struct ctx *c, int opt, const char *v, const struct option *lo)
{
	if (value_is_flag(v))
		return fail(c, "--%s: missing value (got '%s')", long_option_name(lo, opt), v);
	switch (opt) {
	case VAL_HELP:
		steer_config_usage(stdout);
		return STEER_CONFIG_EXIT;
	case VAL_VERSION:
		printf("smg-steerd %s\n", STEER_VERSION);
		return STEER_CONFIG_EXIT;
	case VAL_CHECK_CONFIG:
		c->check_only = true;
		return STEER_CONFIG_OK;
	case VAL_VIP:
		return flag_vip(c, v);
	case VAL_BACKEND:
		return flag_backend(c, v);
	case VAL_CONFIG:
		if (!*v || strlen(v) >= sizeof(c->config_path))
			return fail(c, "--config: must be a file path (1..%d bytes), got '%s'",
				    PATH_MAX - 1, v);
		snprintf(c->config_path, sizeof(c->config_path), "%s", v);
		return STEER_CONFIG_OK;
	default:
		return flag_setting(c, &settings[opt - SETTING_VAL], v);
	}
}

/*
 * "+" stops at the first operand instead of permuting argv (which SIGHUP
 * parses again); ":" reports a missing value as ':'. optind = 0 makes glibc
 * reinitialize its scanner, so every call starts afresh.
 */
static int flags_parse(struct ctx *c, int argc, char *const argv[])
{
	struct option lo[N_LONG_OPTS + 1];
	int saved_opterr = opterr, opt, rc = STEER_CONFIG_OK;

	long_options_build(lo);
	optind = 0;
	opterr = 0;
	while (rc == STEER_CONFIG_OK && (opt = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		if (opt == '?' || opt == ':')
			rc = flag_error(c, opt, lo, argv);
		else
			rc = flag_one(c, opt, optarg, lo);
	}
	if (rc == STEER_CONFIG_OK && optind < argc)
		rc = fail(c, "unexpected argument '%s' (options only; see --help)", argv[optind]);
	opterr = saved_opterr;
	return rc;
}

/* ---- Config file ------------------------------------------------------------------------ */

struct file_walk {
	struct ctx *c;
	yaml_document_t *doc;
};

static int node_line(const yaml_node_t *n)
{
	return (int)n->start_mark.line + 1;
}

static int file_fail(struct file_walk *w, const yaml_node_t *n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* "FILE:LINE: ..." */
static int file_fail(struct file_walk *w, const yaml_node_t *n, const char *fmt, ...)
{
	char msg[WHY_LEN + 128];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return fail(w->c, "%s:%d: %s", w->c->config_path, node_line(n), msg);
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return "a single value";
	}
}

/* The scalar text of n, or an error naming key. */
static int node_scalar(struct file_walk *w, const yaml_node_t *n, const char *key, const char **out)
{
	*out = "";
	if (n->type != YAML_SCALAR_NODE)
		return file_fail(w, n, "%s: expected a single value, got %s", key, node_kind(n));
	if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length)
		return file_fail(w, n, "%s: the value contains a NUL character", key);
	*out = (const char *)n->data.scalar.value;
	return STEER_CONFIG_OK;
}

static const char *pair_key(struct file_walk *w, const yaml_node_pair_t *pair)
{
	return (const char *)yaml_document_get_node(w->doc, pair->key)->data.scalar.value;
}

/* Keys must be plain words, each given once (libyaml keeps duplicates). */
static int mapping_check_keys(struct file_walk *w, const yaml_node_t *map)
{
	const yaml_node_pair_t *p, *q, *start = map->data.mapping.pairs.start;

	for (p = start; p < map->data.mapping.pairs.top; p++) {
		const yaml_node_t *key = yaml_document_get_node(w->doc, p->key);

		if (key->type != YAML_SCALAR_NODE)
			return file_fail(w, key, "a key must be a single word, got %s",
					 node_kind(key));
		for (q = start; q < p; q++) {
			if (!strcmp(pair_key(w, q), pair_key(w, p)))
				return file_fail(w, key, "duplicate key '%s'", pair_key(w, p));
		}
	}
	return STEER_CONFIG_OK;
}

static int expect_mapping(struct file_walk *w, const yaml_node_t *n, const char *what)
{
	if (n->type != YAML_MAPPING_NODE)
		return file_fail(w, n, "%s must be a mapping of keys, got %s", what, node_kind(n));
	return mapping_check_keys(w, n);
}

static int file_setting(struct file_walk *w, const struct setting *s, const yaml_node_t *value,
			struct layer *l)
{
	char why[WHY_LEN];
	const char *v;
	int rc = node_scalar(w, value, s->name, &v);

	if (rc)
		return rc;
	if (setting_parse(s, v, l, node_line(value), why, sizeof(why)))
		return file_fail(w, value, "%s: %s", s->name, why);
	return STEER_CONFIG_OK;
}

static int file_knob(struct file_walk *w, enum knob k, const yaml_node_t *value,
		     struct knob_layer *kl)
{
	char why[WHY_LEN];
	const char *v;
	int rc = node_scalar(w, value, knob_names[k], &v);

	if (rc)
		return rc;
	if (knob_parse(v, kl, k, why, sizeof(why)))
		return file_fail(w, value, "%s: %s", knob_names[k], why);
	return STEER_CONFIG_OK;
}

static int file_address(struct file_walk *w, const yaml_node_t *value, const char *key,
			struct steer_addr *out)
{
	char detail[160];
	const char *v;
	int rc = node_scalar(w, value, key, &v);

	if (rc)
		return rc;
	if (steer_addr_parse(v, out, detail, sizeof(detail)))
		return file_fail(w, value, "%s: %s", key, detail);
	return STEER_CONFIG_OK;
}

/* A backend in mapping form: address (required) and loads. */
static int file_backend_mapping(struct file_walk *w, const yaml_node_t *n,
				struct steer_backend_cfg *b)
{
	const yaml_node_pair_t *p;
	bool has_loads = false;
	int rc = expect_mapping(w, n, "a backend");

	memset(b, 0, sizeof(*b));
	for (p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
		const yaml_node_t *value = yaml_document_get_node(w->doc, p->value);
		const char *key = pair_key(w, p);

		if (!strcmp(key, "address")) {
			rc = file_address(w, value, "address", &b->addr);
		} else if (!strcmp(key, "loads")) {
			rc = file_address(w, value, "loads", &b->loads);
			has_loads = true;
		} else {
			rc = file_fail(w, yaml_document_get_node(w->doc, p->key),
				       "unknown key '%s' in backend (expected address, loads)",
				       key);
		}
	}
	if (!rc && !b->addr.proto)
		rc = file_fail(w, n, "backend without 'address'");
	if (rc)
		return rc;
	if (!has_loads)
		b->loads = b->addr;
	steer_addr_format(&b->addr, b->addr_str, sizeof(b->addr_str));
	steer_addr_format(&b->loads, b->loads_str, sizeof(b->loads_str));
	return STEER_CONFIG_OK;
}

static int file_backend(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	struct steer_backend_cfg b;
	char why[WHY_LEN];
	int rc;

	if (n->type == YAML_SCALAR_NODE) {
		const char *v;

		rc = node_scalar(w, n, "backends", &v);
		if (!rc && backend_parse(v, &b, why, sizeof(why)))
			rc = file_fail(w, n, "backends: %s", why);
	} else {
		rc = file_backend_mapping(w, n, &b);
	}
	if (rc)
		return rc;
	if (backend_check_family(d, &b, "the service's vip", why, sizeof(why)))
		return file_fail(w, n, "%s", why);
	if (backend_add(d, &b, why, sizeof(why)))
		return file_fail(w, n, "service %s: %s", d->cfg.vip_str, why);
	return STEER_CONFIG_OK;
}

static int file_backends(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	yaml_node_item_t *it;
	int rc = STEER_CONFIG_OK;

	if (n->type != YAML_SEQUENCE_NODE)
		return file_fail(w, n, "backends: expected a list, got %s", node_kind(n));
	for (it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++)
		rc = file_backend(w, yaml_document_get_node(w->doc, *it), d);
	return rc;
}

static int file_service_vip(struct file_walk *w, const yaml_node_t *value, struct service_draft *d)
{
	struct steer_addr vip;
	ssize_t other;
	int rc = file_address(w, value, "vip", &vip);

	if (rc)
		return rc;
	other = service_find(w->c, &vip);
	if (other >= 0)
		return file_fail(w, value, "vip %s is listed twice (first at line %d)",
				 w->c->svcs[other].cfg.vip_str, w->c->svcs[other].line);
	draft_set_vip(d, &vip);
	return STEER_CONFIG_OK;
}

/* The service's keys but backends, which need the vip (keys come in any order). */
static int file_service_keys(struct file_walk *w, const yaml_node_t *n, struct service_draft *d,
			     const yaml_node_t **backends)
{
	const yaml_node_pair_t *p;
	int rc = STEER_CONFIG_OK;

	for (p = n->data.mapping.pairs.start; !rc && p < n->data.mapping.pairs.top; p++) {
		const yaml_node_t *value = yaml_document_get_node(w->doc, p->value);
		const struct setting *s = setting_find(pair_key(w, p));

		if (!strcmp(pair_key(w, p), "vip"))
			rc = file_service_vip(w, value, d);
		else if (!strcmp(pair_key(w, p), "backends"))
			*backends = value;
		else if (s && s->knob >= 0)
			rc = file_knob(w, (enum knob)s->knob, value, &d->knobs);
		else
			rc = file_fail(w, yaml_document_get_node(w->doc, p->key),
				       "unknown key '%s' in service", pair_key(w, p));
	}
	return rc;
}

/* Builds the draft in place; the caller appended it, so it is freed with the context. */
static int file_service(struct file_walk *w, const yaml_node_t *n, struct service_draft *d)
{
	const yaml_node_t *backends = NULL;
	int rc = expect_mapping(w, n, "a service");

	d->line = node_line(n);
	if (!rc)
		rc = file_service_keys(w, n, d, &backends);
	if (!rc && !d->cfg.vip.proto)
		rc = file_fail(w, n, "service without 'vip'");
	if (!rc && backends)
		rc = file_backends(w, backends, d);
	if (!rc && !d->cfg.n_backends)
		rc = file_fail(w, backends ? backends : n,
			       "service %s has no backends (at least one is required)",
			       d->cfg.vip_str);
	return rc;
}

static int file_services(struct file_walk *w, const yaml_node_t *n)
{
	yaml_node_item_t *it;
	int rc = STEER_CONFIG_OK;

	if (n->type != YAML_SEQUENCE_NODE)
		return file_fail(w, n, "services: expected a list, got %s", node_kind(n));
	for (it = n->data.sequence.items.start; !rc && it < n->data.sequence.items.top; it++) {
		const yaml_node_t *item = yaml_document_get_node(w->doc, *it);
		struct service_draft *d;

		if (w->c->n_svcs >= STEER_MAX_SERVICES)
			return file_fail(w, item, "services: at most %d services",
					 STEER_MAX_SERVICES);
		d = service_append(w->c);
		if (!d)
			return fail(w->c, "out of memory");
		rc = file_service(w, item, d);
	}
	return rc;
}

static int file_top(struct file_walk *w, const yaml_node_t *root)
{
	const yaml_node_pair_t *p;
	int rc = expect_mapping(w, root, "the top level");

	for (p = root->data.mapping.pairs.start; !rc && p < root->data.mapping.pairs.top; p++) {
		const yaml_node_t *value = yaml_document_get_node(w->doc, p->value);
		const struct setting *s = setting_find(pair_key(w, p));

		if (!strcmp(pair_key(w, p), "services"))
			rc = file_services(w, value);
		else if (s)
			rc = file_setting(w, s, value, &w->c->top);
		else
			rc = file_fail(w, yaml_document_get_node(w->doc, p->key),
				       "unknown key '%s' at the top level", pair_key(w, p));
	}
	return rc;
}

/* The whole file, at most CONFIG_FILE_MAX bytes; *buf is NUL-terminated. */
static int file_read(struct ctx *c, char **buf, size_t *len)
{
	FILE *f = fopen(c->config_path, "r");
	int rc = STEER_CONFIG_OK;

	*buf = NULL;
	*len = 0;
	if (!f)
		return fail(c, "%s: cannot open: %s", c->config_path, strerror(errno));
	*buf = malloc(CONFIG_FILE_MAX + 1);
	if (!*buf) {
		fclose(f);
		return fail(c, "out of memory");
	}
	*len = fread(*buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f))
		rc = fail(c, "%s: cannot read: %s", c->config_path, strerror(errno));
	else if (*len > CONFIG_FILE_MAX)
		rc = fail(c, "%s: larger than %d bytes", c->config_path, CONFIG_FILE_MAX);
	else
		(*buf)[*len] = 0;
	fclose(f);
	return rc;
}

/* Reader errors carry a byte offset rather than a line. */
static int syntax_error(struct ctx *c, const yaml_parser_t *p, const char *buf)
{
	size_t line = p->problem_mark.line + 1, i;

	if (p->error == YAML_READER_ERROR) {
		for (line = 1, i = 0; i < p->problem_offset && buf[i]; i++)
			line += buf[i] == '\n';
	}
	return fail(c, "%s:%zu: YAML syntax error: %s%s%s%s", c->config_path, line,
		    p->problem ? p->problem : "unknown error", p->context ? " (" : "",
		    p->context ? p->context : "", p->context ? ")" : "");
}

/* Loads the first document; a second one would be silently ignored, so refuse it. */
static int file_load_document(struct ctx *c, yaml_parser_t *p, const char *buf,
			      yaml_document_t *doc)
{
	yaml_document_t extra;
	yaml_node_t *root;

	if (!yaml_parser_load(p, doc))
		return syntax_error(c, p, buf);
	if (!yaml_parser_load(p, &extra)) {
		yaml_document_delete(doc);
		return syntax_error(c, p, buf);
	}
	root = yaml_document_get_root_node(&extra);
	if (root) {
		int line = node_line(root);

		yaml_document_delete(&extra);
		yaml_document_delete(doc);
		return fail(c, "%s:%d: only one YAML document is allowed", c->config_path, line);
	}
	yaml_document_delete(&extra);
	return STEER_CONFIG_OK;
}

static int file_parse(struct ctx *c)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	yaml_node_t *root;
	size_t len;
	char *buf;
	int rc = file_read(c, &buf, &len);

	if (rc) {
		free(buf);
		return rc;
	}
	if (!yaml_parser_initialize(&parser)) {
		free(buf);
		return fail(c, "out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
	rc = file_load_document(c, &parser, buf, &doc);
	if (!rc) {
		struct file_walk w = { c, &doc };

		root = yaml_document_get_root_node(&doc);
		if (root) /* an empty file is fine: the flags may give the service */
			rc = file_top(&w, root);
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&parser);
	free(buf);
	return rc;
}

/* ---- Resolution ------------------------------------------------------------------------- */

static void defaults_set(struct steer_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->pin_path, sizeof(cfg->pin_path), "%s", STEER_DEFAULT_PIN_DIR);
	cfg->interval_ns = NS_PER_S;
	cfg->unhealthy_after = 3;
	cfg->healthy_after = 2;
	cfg->log_level = STEER_LOG_INFO;
	cfg->metrics_enabled = true;
	snprintf(cfg->metrics_listen, sizeof(cfg->metrics_listen), "%s", DEFAULT_METRICS_LISTEN);
	steer_addr_parse(DEFAULT_METRICS_LISTEN, &cfg->metrics_addr, NULL, 0);
}

/* Defaults that follow the interval, unless given. */
static void derived_defaults_set(struct ctx *c)
{
	struct steer_config *o = &c->out;

	if (!c->flags.set[OPT_TIMEOUT] && !c->top.set[OPT_TIMEOUT]) {
		o->timeout_ns = o->interval_ns / 2 < NS_PER_S ? o->interval_ns / 2 : NS_PER_S;
		if (!o->timeout_ns) /* a 1 ns interval */
			o->timeout_ns = o->interval_ns;
	}
	if (!c->flags.set[OPT_MAX_AGE] && !c->top.set[OPT_MAX_AGE])
		o->max_age_ns = o->interval_ns > UINT64_MAX / 3 ? UINT64_MAX : 3 * o->interval_ns;
}

/* A poll that may outlast its interval would overlap the next one. */
static int timeout_check(struct ctx *c)
{
	char t[32], i[32];

	if (c->out.timeout_ns <= c->out.interval_ns)
		return STEER_CONFIG_OK;
	duration_text(c->out.timeout_ns, t, sizeof(t));
	duration_text(c->out.interval_ns, i, sizeof(i));
	if (c->flags.set[OPT_TIMEOUT])
		return fail(c, "--load-timeout: must be <= the load-check-interval (%s), got %s", i,
			    t);
	return fail(c, "%s:%d: load-timeout: must be <= the load-check-interval (%s), got %s",
		    c->config_path, c->top.line[OPT_TIMEOUT], i, t);
}

/*
 * Every table expires --snapshot-max-age after its publish, and the next
 * publish comes one interval plus the poll later: a max age not above the
 * interval would let every table expire between publishes, and steering fall
 * back to round robin every cycle.
 */
static int max_age_check(struct ctx *c)
{
	char a[32], i[32];

	if (c->out.max_age_ns > c->out.interval_ns)
		return STEER_CONFIG_OK;
	duration_text(c->out.max_age_ns, a, sizeof(a));
	duration_text(c->out.interval_ns, i, sizeof(i));
	if (c->flags.set[OPT_MAX_AGE])
		return fail(c, "--snapshot-max-age: must be > the load-check-interval (%s), got %s",
			    i, a);
	if (c->top.set[OPT_MAX_AGE])
		return fail(
			c,
			"%s:%d: snapshot-max-age: must be > the load-check-interval (%s), got %s",
			c->config_path, c->top.line[OPT_MAX_AGE], i, a);
	return fail(c, "--load-check-interval: %s is not below --snapshot-max-age (%s)", i, a);
}

static int globals_resolve(struct ctx *c)
{
	int rc;

	defaults_set(&c->out);
	layer_apply(&c->out, &c->top);
	layer_apply(&c->out, &c->flags);
	derived_defaults_set(c);
	memcpy(c->out.config_path, c->config_path, sizeof(c->out.config_path));
	rc = timeout_check(c);
	return rc ? rc : max_age_check(c);
}

/* The flags' service joins the file's, replacing one with the same vip. */
static int flag_service_merge(struct ctx *c)
{
	struct service_draft *d = &c->flag_svc;
	char why[WHY_LEN];
	ssize_t same;
	size_t i;

	if (!c->flag_vip_given) {
		if (d->cfg.n_backends)
			return fail(c, "--backend requires --vip ADDR:PORT");
		return STEER_CONFIG_OK;
	}
	if (!d->cfg.n_backends)
		return fail(c, "--vip: at least one --backend ADDR:PORT is required");
	for (i = 0; i < d->cfg.n_backends; i++) {
		if (backend_check_family(d, &d->cfg.backends[i], "--vip", why, sizeof(why)))
			return fail(c, "--backend: %s", why);
	}
	same = service_find(c, &d->cfg.vip);
	if (same >= 0) {
		draft_free(&c->svcs[same]);
		c->svcs[same] = *d;
	} else if (c->n_svcs >= STEER_MAX_SERVICES) {
		return fail(c, "--vip: the file has %d services already, at most %d",
			    STEER_MAX_SERVICES, STEER_MAX_SERVICES);
	} else if (service_append(c)) {
		c->svcs[c->n_svcs - 1] = *d;
	} else {
		return fail(c, "out of memory");
	}
	memset(d, 0, sizeof(*d)); /* owned by svcs now */
	return STEER_CONFIG_OK;
}

/* Moves the drafts into out with each policy resolved. */
static int services_resolve(struct ctx *c)
{
	struct steer_policy defaults = STEER_POLICY_DEFAULTS;
	size_t i;

	if (!c->n_svcs)
		return fail(c, "no service configured: give --vip ADDR:PORT with --backend "
			       "ADDR:PORT, or services in --config FILE");
	c->out.services = calloc(c->n_svcs, sizeof(*c->out.services));
	if (!c->out.services)
		return fail(c, "out of memory");
	for (i = 0; i < c->n_svcs; i++) {
		struct steer_service_cfg *s = &c->out.services[i];

		*s = c->svcs[i].cfg;
		s->policy = defaults;
		knobs_apply(&s->policy, &c->top.knobs);
		knobs_apply(&s->policy, &c->svcs[i].knobs);
		knobs_apply(&s->policy, &c->flags.knobs);
		memset(&c->svcs[i].cfg, 0, sizeof(c->svcs[i].cfg));
	}
	c->out.n_services = c->n_svcs;
	return STEER_CONFIG_OK;
}

static void ctx_free(struct ctx *c)
{
	size_t i;

	for (i = 0; i < c->n_svcs; i++)
		draft_free(&c->svcs[i]);
	free(c->svcs);
	draft_free(&c->flag_svc);
	steer_config_free(&c->out);
	free(c);
}

enum steer_config_rc steer_config_load(int argc, char *const argv[], struct steer_config *out,
				       char *err, size_t errlen)
{
	struct ctx *c = calloc(1, sizeof(*c));
	int rc;

	if (!c) {
		if (err && errlen)
			snprintf(err, errlen, "out of memory");
		return STEER_CONFIG_USAGE;
	}
	c->err = err;
	c->errlen = errlen;
	rc = flags_parse(c, argc, argv);
	if (!rc && c->config_path[0])
		rc = file_parse(c);
	if (!rc)
		rc = globals_resolve(c);
	if (!rc)
		rc = flag_service_merge(c);
	if (!rc)
		rc = services_resolve(c);
	if (!rc) {
		c->out.check_only = c->check_only;
		*out = c->out;
		memset(&c->out, 0, sizeof(c->out)); /* owned by the caller now */
	}
	ctx_free(c);
	return (enum steer_config_rc)rc;
}

void steer_config_free(struct steer_config *c)
{
	size_t i;

	if (!c)
		return;
	for (i = 0; i < c->n_services; i++)
		free(c->services[i].backends);
	free(c->services);
	c->services = NULL;
	c->n_services = 0;
}

void steer_config_usage(FILE *f)
{
	fputs("Usage: smg-steerd --vip ADDR:PORT --backend ADDR:PORT[,loads=ADDR:PORT]... "
	      "[OPTION]...\n"
	      "       smg-steerd --config FILE [OPTION]...\n"
	      "\n"
	      "Steers new TCP connections to a VIP towards the backend with the least expected\n"
	      "wait, from the loads each backend reports over gRPC GetLoads.\n"
	      "\n"
	      "Services (the command line defines one; --config FILE may define more):\n"
	      "  --vip ADDR:PORT             the address clients connect to; IPv6: [::1]:8000\n"
	      "  --backend ADDR:PORT[,loads=ADDR:PORT]\n"
	      "                              a backend (repeat); loads: where it serves GetLoads\n"
	      "                              (default: the backend's own address)\n"
	      "  --config FILE               YAML: the options below as keys, and 'services';\n"
	      "                              flags override it, and --vip replaces the file's\n"
	      "                              service with the same VIP\n"
	      "\n"
	      "Data plane:\n"
	      "  --cgroup PATH               cgroup2 to attach to (default: the cgroup2 root)\n"
	      "  --pin-path DIR              bpffs pin directory (default " STEER_DEFAULT_PIN_DIR
	      ")\n"
	      "  --keep-pinned               stay attached and pinned after exit\n"
	      "\n"
	      "Load polling (durations like 250ms, 2s, 1.5s, 1m; also ns, us, h):\n"
	      "  --load-check-interval DUR   poll each backend this often (default 1s)\n"
	      "  --load-timeout DUR          at most the interval (default min(interval/2, 1s))\n"
	      "  --snapshot-max-age DUR      older loads are stale, > interval (default 3 x "
	      "interval)\n"
	      "  --unhealthy-after N         failed polls to turn unhealthy, >= 1 (default 3)\n"
	      "  --healthy-after N           good polls to turn healthy, >= 1 (default 2)\n"
	      "\n"
	      "Policy (also per service in the file):\n"
	      "  --least-load-kv-pressure-weight S   seconds, finite, >= 0 (default 0.15)\n"
	      "  --least-load-default-throughput T   tokens/s, finite, > 0 (default 2000)\n"
	      "  --least-load-mean-prefill-tokens N  integer >= 1 (default 1024)\n"
	      "  --peer-routers N                    routers sharing the fleet, >= 1 (default 1)\n"
	      "\n"
	      "Operation:\n"
	      "  --log-level LEVEL           error, warn, info or debug (default info)\n"
	      "  --metrics-listen ADDR:PORT  Prometheus endpoint or 'off' (default "
	      "127.0.0.1:9464)\n"
	      "  --check-config              validate the flags and the file, print a\n"
	      "                              summary and exit (0 valid, 2 invalid)\n"
	      "  -h, --help                  this text\n"
	      "  --version                   print the version\n"
	      "\n"
	      "Options also take the form --option=value. SIGHUP reloads the configuration.\n",
	      f);
}
