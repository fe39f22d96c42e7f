// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * values.c - errors, and the values of the options: numbers, durations and the
 * policy knobs, each checked against its bounds, and the table of options
 * that are both a flag and a top-level key of the file (see config_int.h).
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

const char *const cfg_knob_names[N_KNOBS] = {
	[KNOB_WEIGHT] = "least-load-kv-pressure-weight",
	[KNOB_THROUGHPUT] = "least-load-default-throughput",
	[KNOB_PREFILL] = "least-load-mean-prefill-tokens",
	[KNOB_PEERS] = "peer-routers",
	[KNOB_BYTES_PER_TOKEN] = "bytes-per-token",
};

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

/* For messages: the exact value in the largest unit that divides it. */
const char *cfg_duration_text(uint64_t ns, char *buf, size_t len)
{
	if (ns % (3600 * NS_PER_S) == 0)
		snprintf(buf, len, "%lluh", (unsigned long long)(ns / (3600 * NS_PER_S)));
	else if (ns % (60 * NS_PER_S) == 0)
		snprintf(buf, len, "%llum", (unsigned long long)(ns / (60 * NS_PER_S)));
	else if (ns % NS_PER_S == 0)
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
	case KNOB_BYTES_PER_TOKEN:
		p->bytes_per_token = (uint32_t)v;
		break;
	default:
		break;
	}
}

/*
 * The accepted range of each knob (docs/operations.md says why), narrower
 * than what the policy module can compute with (steer_policy_check):
 * outside it a value is a typo or a unit mistake, never a setting.
 */
static const struct knob_bound {
	double min, max;
	bool integer;
	const char *text; /* "must be %s" */
} knob_bounds[N_KNOBS] = {
	[KNOB_WEIGHT] = { 0, 3600, false, "a number of seconds from 0 to 3600" },
	[KNOB_THROUGHPUT] = { 1, 1e9, false, "a number of tokens/s from 1 to 1e9" },
	[KNOB_PREFILL] = { 1, 1e7, true, "an integer from 1 to 10000000 (tokens)" },
	[KNOB_PEERS] = { 1, 1024, true, "an integer from 1 to 1024 (routers)" },
	[KNOB_BYTES_PER_TOKEN] = { 1, STEER_MAX_BYTES_PER_TOKEN, true,
				   "an integer from 1 to 1024 (request bytes per token)" },
};

/* Parses one knob's value into kl; the policy module agrees with every value in range. */
int cfg_knob_parse(const char *v, struct knob_layer *kl, enum knob k, char *why, size_t whylen)
{
	const struct knob_bound *b = &knob_bounds[k];
	struct steer_policy p = STEER_POLICY_DEFAULTS;
	uint32_t u = 0;
	double d = 0;
	int rc;

	if (b->integer) {
		rc = parse_u32(v, &u);
		d = u;
	} else {
		rc = parse_finite(v, &d);
	}
	if (rc == 0 && (d < b->min || d > b->max))
		rc = -1;
	if (rc == 0) {
		knob_put(&p, k, d);
		rc = steer_policy_check(&p, NULL, 0);
	}
	if (rc)
		return cfg_why(why, whylen, "must be %s, got '%s'", b->text, v);
	knob_put(&kl->p, k, d);
	kl->set[k] = true;
	return 0;
}

void cfg_knobs_apply(struct steer_policy *dst, const struct knob_layer *kl)
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
		case KNOB_BYTES_PER_TOKEN:
			dst->bytes_per_token = kl->p.bytes_per_token;
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
		return cfg_why(why, whylen, "must be a path of at most %d bytes", PATH_MAX - 1);
	snprintf(dst, PATH_MAX, "%s", v);
	return 0;
}

/* Checked when given, so that --check-config says it; "" is the cgroup2 root. */
static int parse_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (parse_path(v, dst->cgroup, why, whylen))
		return -1;
	return cfg_cgroup_check(v, why, whylen) ? -1 : 0;
}

static int parse_pin_path(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (v[0] != '/')
		return cfg_why(why, whylen, "must be an absolute directory path in bpffs, got '%s'",
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
	if (cfg_parse_bool(v, &dst->keep_pinned))
		return cfg_why(why, whylen, "must be true or false, got '%s'", v);
	return 0;
}

/* A duration within [min, max]: outside, it is a typo or a unit mistake. */
int cfg_parse_duration_to(const char *v, uint64_t *dst, uint64_t min, uint64_t max, char *why,
			  size_t whylen)
{
	char lo[32], hi[32];
	uint64_t ns;

	if (steer_parse_duration(v, &ns))
		return cfg_why(why, whylen, "'%s' is not a duration > 0 " DURATION_EXAMPLES, v);
	if (ns < min || ns > max)
		return cfg_why(why, whylen, "must be between %s and %s, got '%s'",
			       cfg_duration_text(min, lo, sizeof(lo)),
			       cfg_duration_text(max, hi, sizeof(hi)), v);
	*dst = ns;
	return 0;
}

static int parse_interval(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_parse_duration_to(v, &dst->interval_ns, CFG_INTERVAL_MIN_NS, CFG_INTERVAL_MAX_NS,
				     why, whylen);
}

static int parse_timeout(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_parse_duration_to(v, &dst->timeout_ns, CFG_TIMEOUT_MIN_NS, CFG_TIMEOUT_MAX_NS,
				     why, whylen);
}

static int parse_max_age(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_parse_duration_to(v, &dst->max_age_ns, CFG_MAX_AGE_MIN_NS, CFG_MAX_AGE_MAX_NS,
				     why, whylen);
}

static int parse_dns_interval(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_parse_duration_to(v, &dst->dns_interval_ns, CFG_DNS_INTERVAL_MIN_NS,
				     CFG_DNS_INTERVAL_MAX_NS, why, whylen);
}

/* Checked here so that a typo is refused before anything starts; c-ares
 * reads the same text. */
static int parse_dns_server(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return cfg_dns_servers_parse(v, dst->dns_servers, sizeof(dst->dns_servers), why, whylen)
		       ? -1
		       : 0;
}

static int parse_count(const char *v, uint32_t *dst, const char *what, char *why, size_t whylen)
{
	uint32_t n;

	if (parse_u32(v, &n) || n < 1 || n > CFG_HEALTH_COUNT_MAX)
		return cfg_why(why, whylen, "must be an integer from 1 to %d (%s), got '%s'",
			       CFG_HEALTH_COUNT_MAX, what, v);
	*dst = n;
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
	return cfg_why(why, whylen, "must be one of error, warn, info, debug, got '%s'", v);
}

static int parse_wire_estimator(const char *v, struct steer_config *dst, char *why, size_t whylen)
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

static int parse_metrics(const char *v, struct steer_config *dst, char *why, size_t whylen)
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

/* Every option that is both a flag and a top-level key, in --help order. */
const struct setting cfg_settings[] = {
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
	{ "bytes-per-token", N_OPTS, KNOB_BYTES_PER_TOKEN, NULL },
	{ "wire-estimator", OPT_WIRE_ESTIMATOR, -1, parse_wire_estimator },
	{ "wire-cgroup", OPT_WIRE_CGROUP, -1, cfg_parse_wire_cgroup },
	{ "unhealthy-after", OPT_UNHEALTHY, -1, parse_unhealthy },
	{ "healthy-after", OPT_HEALTHY, -1, parse_healthy },
	{ "log-level", OPT_LOG_LEVEL, -1, parse_log_level },
	{ "metrics-listen", OPT_METRICS, -1, parse_metrics },
	{ "dns-interval", OPT_DNS_INTERVAL, -1, parse_dns_interval },
	{ "dns-server", OPT_DNS_SERVER, -1, parse_dns_server },
	{ "xdp-dev", OPT_XDP_DEV, -1, cfg_parse_xdp_dev },
	{ "xdp-mode", OPT_XDP_MODE, -1, cfg_parse_xdp_mode },
	{ "xdp-encap-src", OPT_XDP_ENCAP_SRC, -1, cfg_parse_xdp_encap_src },
	{ "peer", OPT_PEER, -1, cfg_parse_peer },
	{ "peer-dns", OPT_PEER_DNS, -1, cfg_parse_peer_dns },
	{ "peer-listen", OPT_PEER_LISTEN, -1, cfg_parse_peer_listen },
	{ "peer-interval", OPT_PEER_INTERVAL, -1, cfg_parse_peer_interval },
	{ "peer-timeout", OPT_PEER_TIMEOUT, -1, cfg_parse_peer_timeout },
	{ "peer-push", OPT_PEER_PUSH, -1, cfg_parse_peer_push },
	{ "peer-phase", OPT_PEER_PHASE, -1, cfg_parse_peer_phase },
	{ "peer-key", OPT_PEER_KEY, -1, cfg_parse_peer_key },
	{ "step-probe", OPT_STEP_PROBE, -1, cfg_parse_step_probe },
	{ "step-probe-body", OPT_STEP_PROBE_BODY, -1, cfg_parse_step_probe_body },
};

const struct setting *cfg_setting_find(const char *name)
{
	size_t i;

	for (i = 0; i < CFG_N_SETTINGS; i++) {
		if (!strcmp(cfg_settings[i].name, name))
			return &cfg_settings[i];
	}
	return NULL;
}

/* Parses v into the layer; line is the file line (0 for a flag). */
int cfg_setting_parse(const struct setting *s, const char *v, struct layer *l, int line, char *why,
		      size_t whylen)
{
	if (s->knob >= 0)
		return cfg_knob_parse(v, &l->knobs, (enum knob)s->knob, why, whylen);
	if (s->parse(v, &l->v, why, whylen))
		return -1;
	l->set[s->opt] = true;
	l->line[s->opt] = line;
	return 0;
}

/* Copies the options the layer set into dst. */
void cfg_layer_apply(struct steer_config *dst, const struct layer *l)
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
	if (l->set[OPT_WIRE_ESTIMATOR]) {
		dst->wire_step = v->wire_step;
		dst->wire_off = v->wire_off;
	}
	if (l->set[OPT_WIRE_CGROUP])
		memcpy(dst->wire_cgroup, v->wire_cgroup, sizeof(dst->wire_cgroup));
	if (l->set[OPT_DNS_INTERVAL])
		dst->dns_interval_ns = v->dns_interval_ns;
	if (l->set[OPT_DNS_SERVER])
		memcpy(dst->dns_servers, v->dns_servers, sizeof(dst->dns_servers));
	cfg_xdp_apply(dst, l);
	cfg_peer_apply(dst, l);
	cfg_probe_apply(dst, l);
	if (l->set[OPT_METRICS]) {
		dst->metrics_enabled = v->metrics_enabled;
		dst->metrics_addr = v->metrics_addr;
		memcpy(dst->metrics_listen, v->metrics_listen, sizeof(dst->metrics_listen));
	}
}

/* "--NAME" or "FILE:LINE: NAME", whichever gave the option: how an error
 * between options names the one to change. */
const char *cfg_origin(struct ctx *c, enum opt o, const char *name, char *buf, size_t len)
{
	if (c->flags.set[o])
		snprintf(buf, len, "--%s", name);
	else
		snprintf(buf, len, "%s:%d: %s", c->config_path, c->top.line[o], name);
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
	char t[32], i[32];

	if (c->out.timeout_ns <= c->out.interval_ns)
		return STEER_CONFIG_OK;
	cfg_duration_text(c->out.timeout_ns, t, sizeof(t));
	cfg_duration_text(c->out.interval_ns, i, sizeof(i));
	if (c->flags.set[OPT_TIMEOUT])
		return cfg_fail(
			c, "--load-timeout: must be <= the load-check-interval (%s), got %s", i, t);
	return cfg_fail(c, "%s:%d: load-timeout: must be <= the load-check-interval (%s), got %s",
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
	cfg_duration_text(c->out.max_age_ns, a, sizeof(a));
	cfg_duration_text(c->out.interval_ns, i, sizeof(i));
	if (c->flags.set[OPT_MAX_AGE])
		return cfg_fail(
			c, "--snapshot-max-age: must be > the load-check-interval (%s), got %s", i,
			a);
	if (c->top.set[OPT_MAX_AGE])
		return cfg_fail(
			c,
			"%s:%d: snapshot-max-age: must be > the load-check-interval (%s), got %s",
			c->config_path, c->top.line[OPT_MAX_AGE], i, a);
	return cfg_fail(c, "--load-check-interval: %s is not below --snapshot-max-age (%s)", i, a);
}

int cfg_check_timing(struct ctx *c)
{
	int rc = timeout_check(c);

	return rc ? rc : max_age_check(c);
}
