// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decode_prom.c - load from a Prometheus text exposition (GET /metrics), as
 * vLLM and SGLang serve it (see loads.h).
 *
 * Debian has no C parser for the format, so this is a small strict one for
 * the text format 0.0.4 (what prometheus_client, used by both engines,
 * serves by default). It accepts exactly what Prometheus' own parser
 * (expfmt/text_parse.go) accepts, with these differences:
 *  - CRLF line endings are accepted (a trailing '\r' is dropped);
 *  - control characters other than tab are refused anywhere;
 *  - values are decimal floats, [+-]Inf/Infinity and NaN (any case, as Go's
 *    ParseFloat); Go's hexadecimal floats are refused;
 *  - HELP and TYPE are checked for form, not for order or repetition, and a
 *    repeated series is summed again, not refused.
 * Any malformed line makes the whole text INVALID, and so does a text that
 * does not end with a newline (the format requires one; it is how a body
 * cut short at a line boundary is noticed). Bounds: STEER_DECODE_MAX_BYTES
 * of text, PROM_MAX_SAMPLES sample lines, STEER_DECODE_MAX_RANKS series of
 * any metric read here, PROM_MAX_LABELS labels per series.
 *
 * The metric names and how they combine are upstream's (lightseekorg/smg,
 * model_gateway/src/worker/monitor.rs, fetch_http_load_vllm/_sglang):
 *  - vLLM: KV usage is vllm:gpu_cache_usage_perc (v0) if present, else
 *    vllm:kv_cache_usage_perc (v1); vllm:num_requests_waiting and
 *    vllm:num_requests_running. No throughput and no queued tokens.
 *  - SGLang: the prefix is "sglang:" (up to 0.5.3) if sglang:token_usage is
 *    present, else "sglang_" (0.5.4 and later); <prefix>token_usage,
 *    num_queue_reqs (waiting), num_running_reqs, gen_throughput.
 *    <prefix>cache_hit_rate is recognised but not used: struct steer_load
 *    has no field for it and the score does not need it.
 *  - The KV-usage gauge is required: without it a worker of unknown
 *    pressure would look idle. The others default to 0.
 *  - Over label sets (DP ranks, engines): counts summed, KV usage averaged.
 *    Throughput is summed too, like the per-rank sources (upstream takes
 *    the mean here, which understates a DP engine's rate by its rank count
 *    while its queue is summed).
 * Every value used must be finite, a KV usage within [0, 1], a count >= 0
 * and its sum within int32; the result then goes through the same
 * validation as every source (steer_load_aggregate). load->ranks is the
 * number of KV-usage series.
 */
#include "loads_int.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROM_MAX_SAMPLES 100000 /* sample lines in one text */
#define PROM_MAX_LABELS 64	/* labels of one series */
#define PROM_MAX_NUMBER 64	/* characters of a value */

enum value_kind {
	KIND_RATIO,  /* a fraction in [0, 1]: averaged */
	KIND_COUNT,  /* requests: summed, must fit in int32 */
	KIND_RATE,   /* tokens/s: summed */
	KIND_UNUSED, /* recognised, not used */
};

enum metric {
	VLLM_KV_V0,
	VLLM_KV_V1,
	VLLM_WAITING,
	VLLM_RUNNING,
	/* SGLang: two blocks in the same order, "sglang:" then "sglang_". */
	SGL_USAGE,
	SGL_QUEUE,
	SGL_RUNNING,
	SGL_TPUT,
	SGL_HIT,
	SGL_BLOCK = SGL_HIT - SGL_USAGE + 1,
	N_METRICS = SGL_USAGE + 2 * SGL_BLOCK,
};

/* name_len spares a strlen per name on every line of the page. */
#define WANTED(s, k)                \
	{                           \
		s, sizeof(s) - 1, k \
	}
static const struct wanted {
	const char *name;
	size_t name_len;
	enum value_kind kind;
} wanted[N_METRICS] = {
	[VLLM_KV_V0] = WANTED("vllm:gpu_cache_usage_perc", KIND_RATIO),
	[VLLM_KV_V1] = WANTED("vllm:kv_cache_usage_perc", KIND_RATIO),
	[VLLM_WAITING] = WANTED("vllm:num_requests_waiting", KIND_COUNT),
	[VLLM_RUNNING] = WANTED("vllm:num_requests_running", KIND_COUNT),
	[SGL_USAGE] = WANTED("sglang:token_usage", KIND_RATIO),
	[SGL_QUEUE] = WANTED("sglang:num_queue_reqs", KIND_COUNT),
	[SGL_RUNNING] = WANTED("sglang:num_running_reqs", KIND_COUNT),
	[SGL_TPUT] = WANTED("sglang:gen_throughput", KIND_RATE),
	[SGL_HIT] = WANTED("sglang:cache_hit_rate", KIND_UNUSED),
	[SGL_USAGE + SGL_BLOCK] = WANTED("sglang_token_usage", KIND_RATIO),
	[SGL_QUEUE + SGL_BLOCK] = WANTED("sglang_num_queue_reqs", KIND_COUNT),
	[SGL_RUNNING + SGL_BLOCK] = WANTED("sglang_num_running_reqs", KIND_COUNT),
	[SGL_TPUT + SGL_BLOCK] = WANTED("sglang_gen_throughput", KIND_RATE),
	[SGL_HIT + SGL_BLOCK] = WANTED("sglang_cache_hit_rate", KIND_UNUSED),
};

/* Every series of one wanted metric. */
struct acc {
	double sum;	  /* of the values within range */
	uint32_t n;	  /* series */
	size_t bad_line;  /* first line whose value is out of range; 0: none */
	double bad_value; /* its value */
	const char *rule; /* what it broke */
};

struct prom {
	size_t line; /* 1-based number of the line being parsed */
	size_t samples;
	struct acc acc[N_METRICS];
	char *detail;
	size_t detail_len;
};

/* A position within one line (without its newline). */
struct cur {
	const char *p, *e;
};

static enum steer_poll_kind bad_line(struct prom *ps, const char *what)
{
	return steer_decode_invalid(ps->detail, ps->detail_len, "/metrics line %zu: %s", ps->line,
				    what);
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

static void skip_blanks(struct cur *c)
{
	while (c->p < c->e && is_blank(*c->p))
		c->p++;
}

static bool at(const struct cur *c, char ch)
{
	return c->p < c->e && *c->p == ch;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Character classes of names, by table: every line of a page starts with one. */
#define NAME_FIRST 1 /* [a-zA-Z_] */
#define NAME_REST 2  /* [a-zA-Z0-9_] */
#define NAME_COLON 4 /* ':' */
static const unsigned char name_class[256] = {
	['a' ... 'z'] = NAME_FIRST | NAME_REST,
	['A' ... 'Z'] = NAME_FIRST | NAME_REST,
	['_'] = NAME_FIRST | NAME_REST,
	['0' ... '9'] = NAME_REST,
	[':'] = NAME_COLON,
};

/* [a-zA-Z_:][a-zA-Z0-9_:]* (a metric name) or, without colons, a label name. */
static size_t read_name(struct cur *c, bool colon)
{
	unsigned first = NAME_FIRST | (colon ? NAME_COLON : 0u);
	unsigned rest = NAME_REST | (colon ? NAME_COLON : 0u);
	const char *s = c->p;

	if (c->p < c->e && (name_class[(unsigned char)*c->p] & first))
		c->p++;
	else
		return 0;
	while (c->p < c->e && (name_class[(unsigned char)*c->p] & rest))
		c->p++;
	return (size_t)(c->p - s);
}

/* A run of non-blank characters. */
static size_t read_token(struct cur *c)
{
	const char *s = c->p;

	while (c->p < c->e && !is_blank(*c->p))
		c->p++;
	return (size_t)(c->p - s);
}

static bool token_is(const char *s, size_t n, const char *word)
{
	return strlen(word) == n && memcmp(s, word, n) == 0;
}

/* ---- values ---------------------------------------------------------------- */

/* Go's ParseFloat specials: [+-]inf, [+-]infinity, nan, in any case. */
static bool parse_special(const char *s, size_t n, double *out)
{
	double sign = 1;
	size_t i = 0;

	if (n == 3 && strncasecmp(s, "nan", 3) == 0) {
		*out = NAN;
		return true;
	}
	if (n && (s[0] == '+' || s[0] == '-')) {
		sign = s[0] == '-' ? -1 : 1;
		i = 1;
	}
	if ((n - i == 3 && strncasecmp(s + i, "inf", 3) == 0) ||
	    (n - i == 8 && strncasecmp(s + i, "infinity", 8) == 0)) {
		*out = sign * INFINITY;
		return true;
	}
	return false;
}

/* [+-]? (D+ (. D*)? | . D+) ([eE] [+-]? D+)? */
static bool is_decimal(const char *s, size_t n)
{
	size_t i = 0, int_digits = 0, frac_digits = 0, exp_digits = 0;

	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	while (i < n && is_digit(s[i]))
		i++, int_digits++;
	if (i < n && s[i] == '.') {
		i++;
		while (i < n && is_digit(s[i]))
			i++, frac_digits++;
	}
	if (int_digits + frac_digits == 0)
		return false;
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		while (i < n && is_digit(s[i]))
			i++, exp_digits++;
		if (exp_digits == 0)
			return false;
	}
	return i == n;
}

/* A sample value; false when malformed or out of double's range. */
static bool parse_value(const char *s, size_t n, double *out)
{
	char buf[PROM_MAX_NUMBER + 1];
	char *end;

	if (parse_special(s, n, out))
		return true;
	if (n == 0 || n > PROM_MAX_NUMBER || !is_decimal(s, n))
		return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	*out = strtod(buf, &end); /* the daemon never sets a locale: '.' is the point */
	if (end != buf + n)
		return false;
	/* Go refuses an overflow (ErrRange with Inf); an underflow is a tiny value. */
	return !(errno == ERANGE && isinf(*out));
}

/* An optional millisecond timestamp: a base-10 int64, as Go's ParseInt. */
static bool parse_timestamp(const char *s, size_t n)
{
	char buf[24];
	size_t i = 0;
	char *end;

	if (n && (s[0] == '+' || s[0] == '-'))
		i = 1;
	if (n == i || n >= sizeof(buf))
		return false;
	for (; i < n; i++)
		if (!is_digit(s[i]))
			return false;
	memcpy(buf, s, n);
	buf[n] = 0;
	errno = 0;
	(void)strtoll(buf, &end, 10);
	return errno != ERANGE && end == buf + n;
}

/* ---- lines ----------------------------------------------------------------- */

static enum steer_poll_kind parse_help_text(struct prom *ps, struct cur *c)
{
	for (; c->p < c->e; c->p++)
		if (*c->p == '\\') {
			c->p++;
			if (c->p == c->e || (*c->p != '\\' && *c->p != 'n'))
				return bad_line(ps, "invalid escape in HELP (only \\\\ and \\n)");
		}
	return STEER_POLL_OK;
}

static bool known_type(const char *s, size_t n)
{
	static const char *const types[] = {
		"counter",
		"gauge",
		"histogram",
		"summary",
		"untyped",
		/* OpenMetrics' own, harmless here */
		"unknown",
		"info",
		"stateset",
		"gaugehistogram",
	};
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (token_is(s, n, types[i]))
			return true;
	return false;
}

/* "# HELP name text", "# TYPE name type", or any other comment. */
static enum steer_poll_kind parse_comment(struct prom *ps, struct cur *c)
{
	const char *word, *type;
	size_t n, type_len;
	bool help;

	c->p++; /* '#' */
	skip_blanks(c);
	word = c->p;
	n = read_token(c);
	help = token_is(word, n, "HELP");
	if (!help && !token_is(word, n, "TYPE"))
		return STEER_POLL_OK; /* a plain comment */
	skip_blanks(c);
	if (read_name(c, true) == 0)
		return bad_line(ps, help ? "HELP without a valid metric name"
					 : "TYPE without a valid metric name");
	if (c->p < c->e && !is_blank(*c->p))
		return bad_line(ps, "invalid character in the metric name of a comment");
	skip_blanks(c);
	if (help)
		return parse_help_text(ps, c);
	type = c->p;
	type_len = read_token(c);
	skip_blanks(c);
	if (!known_type(type, type_len) || c->p != c->e)
		return bad_line(ps, "TYPE must be counter, gauge, histogram, summary or untyped");
	return STEER_POLL_OK;
}

/* "value" up to its closing quote; escapes \\ \" \n only. */
static enum steer_poll_kind parse_label_value(struct prom *ps, struct cur *c)
{
	if (!at(c, '"'))
		return bad_line(ps, "label value must be quoted");
	for (c->p++; c->p < c->e; c->p++) {
		if (*c->p == '"') {
			c->p++;
			return STEER_POLL_OK;
		}
		if (*c->p == '\\') {
			c->p++;
			if (c->p == c->e || (*c->p != '\\' && *c->p != '"' && *c->p != 'n'))
				return bad_line(ps, "invalid escape in a label value");
		}
	}
	return bad_line(ps, "unterminated label value");
}

struct label_name {
	const char *s;
	size_t n;
};

static bool seen_label(const struct label_name *names, size_t count, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < count; i++)
		if (names[i].n == n && memcmp(names[i].s, s, n) == 0)
			return true;
	return false;
}

/* {name="value",...} with an optional trailing comma; blanks allowed between. */
static enum steer_poll_kind parse_labels(struct prom *ps, struct cur *c)
{
	struct label_name names[PROM_MAX_LABELS];
	size_t count = 0;

	c->p++; /* '{' */
	for (;;) {
		const char *name;
		size_t n;

		skip_blanks(c);
		if (at(c, '}'))
			break;
		name = c->p;
		n = read_name(c, false);
		if (n == 0)
			return bad_line(ps, "invalid label name");
		if (seen_label(names, count, name, n))
			return bad_line(ps, "label name repeated in one series");
		if (count == PROM_MAX_LABELS)
			return bad_line(ps, "more than 64 labels in one series");
		names[count++] = (struct label_name){ name, n };
		skip_blanks(c);
		if (!at(c, '='))
			return bad_line(ps, "expected '=' after a label name");
		c->p++;
		skip_blanks(c);
		if (parse_label_value(ps, c) != STEER_POLL_OK)
			return STEER_POLL_INVALID;
		skip_blanks(c);
		if (at(c, '}'))
			break;
		if (!at(c, ','))
			return bad_line(ps, "expected ',' or '}' after a label value");
		c->p++;
	}
	c->p++; /* '}' */
	return STEER_POLL_OK;
}

static int find_wanted(const char *name, size_t n)
{
	int i;

	if (n == 0 || (name[0] != 'v' && name[0] != 's'))
		return -1;
	for (i = 0; i < N_METRICS; i++)
		if (wanted[i].name_len == n && !memcmp(name, wanted[i].name, n))
			return i;
	return -1;
}

/* Why v is out of range for a metric of this kind, or NULL. */
static const char *out_of_range(enum value_kind kind, double v)
{
	if (kind == KIND_UNUSED)
		return NULL;
	if (!isfinite(v))
		return "not finite";
	if (v < 0)
		return "negative";
	if (kind == KIND_RATIO && v > 1)
		return "above 1";
	return NULL;
}

static enum steer_poll_kind record(struct prom *ps, int m, double v)
{
	struct acc *a = &ps->acc[m];
	const char *rule = out_of_range(wanted[m].kind, v);

	if (a->n == STEER_DECODE_MAX_RANKS)
		return steer_decode_invalid(ps->detail, ps->detail_len,
					    "/metrics line %zu: more than %d series of %s",
					    ps->line, STEER_DECODE_MAX_RANKS, wanted[m].name);
	a->n++;
	if (rule && !a->bad_line) {
		a->bad_line = ps->line;
		a->bad_value = v;
		a->rule = rule;
	} else if (!rule && wanted[m].kind != KIND_UNUSED) {
		a->sum += v;
	}
	return STEER_POLL_OK;
}

/* name[{labels}] value [timestamp] */
static enum steer_poll_kind parse_sample(struct prom *ps, struct cur *c)
{
	const char *name = c->p, *value;
	size_t name_len, value_len;
	double v;
	int m;

	if (++ps->samples > PROM_MAX_SAMPLES)
		return bad_line(ps, "more than 100000 samples");
	name_len = read_name(c, true);
	if (name_len == 0)
		return bad_line(ps, "expected a metric name");
	skip_blanks(c);
	if (at(c, '{')) {
		if (parse_labels(ps, c) != STEER_POLL_OK)
			return STEER_POLL_INVALID;
		skip_blanks(c);
	} else if (c->p == name + name_len && c->p < c->e) {
		return bad_line(ps, "invalid character in a metric name");
	}
	value = c->p;
	value_len = read_token(c);
	if (value_len == 0)
		return bad_line(ps, "sample without a value");
	if (!parse_value(value, value_len, &v))
		return bad_line(ps, "the value is not a number");
	skip_blanks(c);
	if (c->p < c->e) {
		const char *ts = c->p;
		size_t ts_len = read_token(c);

		if (!parse_timestamp(ts, ts_len))
			return bad_line(ps, "the timestamp is not an integer (ms)");
		skip_blanks(c);
		if (c->p < c->e)
			return bad_line(ps, "unexpected text after the timestamp");
	}
	m = find_wanted(name, name_len);
	return m < 0 ? STEER_POLL_OK : record(ps, m, v);
}

/*
 * Could a name starting at p (left bytes to the end of the line) be one of
 * the wanted ones? Every wanted name is longer than 8 bytes, so a name whose
 * first 8 bytes are none of theirs is not; a shorter line, or one that does
 * not start like a name, may be anything and is parsed.
 */
static bool head_may_be_wanted(const char *p, size_t left)
{
	uint64_t head, w;
	int i;

	if (left < sizeof(head) || !(name_class[(unsigned char)*p] & (NAME_FIRST | NAME_COLON)))
		return true; /* short, or no name at all: parse it and say what is wrong */
	memcpy(&head, p, sizeof(head));
	for (i = 0; i < N_METRICS; i++) {
		memcpy(&w, wanted[i].name, sizeof(w));
		if (head == w)
			return true;
	}
	return false;
}

/*
 * Is this sample line one of the metrics read? Only those are parsed in
 * full: a busy engine's page is mostly histogram buckets of metrics nobody
 * here reads, and checking each of their labels and values cost ~5 ns per
 * byte of the page (vLLM's, 54 KB: 280 us, 4x a whole gRPC poll). A line of
 * another metric is skipped after its name, still counted against the
 * sample bound; what it holds cannot reach the load.
 */
static bool sample_is_wanted(struct prom *ps, const struct cur *c)
{
	struct cur name = *c;
	size_t n;

	if (!head_may_be_wanted(c->p, (size_t)(c->e - c->p)))
		goto skip; /* most lines leave here: 8 bytes compared as one word */
	n = read_name(&name, true);
	if (n == 0 || find_wanted(c->p, n) >= 0)
		return true; /* not a name: parse it, and say what is wrong */
skip:
	++ps->samples;
	return false;
}

/* A "# HELP name ..." or "# TYPE name ..." line about a metric that may be
 * read (parsed strictly), or any other comment (skipped). */
static bool comment_is_wanted(const struct cur *c)
{
	struct cur w = { c->p + 1, c->e };
	const char *word;

	skip_blanks(&w);
	word = w.p;
	if (read_token(&w) != 4 || (memcmp(word, "HELP", 4) && memcmp(word, "TYPE", 4)))
		return false;
	skip_blanks(&w);
	return head_may_be_wanted(w.p, (size_t)(w.e - w.p));
}

static enum steer_poll_kind parse_line(struct prom *ps, const char *s, const char *e)
{
	struct cur c = { s, e };
	const char *q;

	skip_blanks(&c);
	if (c.p < c.e && *c.p == '#' && !comment_is_wanted(&c))
		return STEER_POLL_OK;
	if (c.p < c.e && *c.p != '#' && !sample_is_wanted(ps, &c))
		return ps->samples > PROM_MAX_SAMPLES ? bad_line(ps, "more than 100000 samples")
						      : STEER_POLL_OK;
	c.p = s;
	for (q = s; q < e; q++)
		if ((unsigned char)*q < 0x20 && *q != '\t')
			return bad_line(ps, "control character");
	skip_blanks(&c);
	if (c.p == c.e)
		return STEER_POLL_OK;
	if (*c.p == '#')
		return parse_comment(ps, &c);
	return parse_sample(ps, &c);
}

static enum steer_poll_kind parse_text(struct prom *ps, const char *buf, size_t len)
{
	const char *s = buf, *end = buf + len;

	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		const char *e = nl;

		ps->line++;
		if (!nl)
			return bad_line(ps, "the text does not end with a newline (cut short?)");
		if (e > s && e[-1] == '\r')
			e--;
		if (parse_line(ps, s, e) != STEER_POLL_OK)
			return STEER_POLL_INVALID;
		s = nl + 1;
	}
	return STEER_POLL_OK;
}

/* ---- the load -------------------------------------------------------------- */

/* The value of metric m as used: the sum (or mean) of its series. */
static enum steer_poll_kind use(struct prom *ps, int m, double *out)
{
	const struct acc *a = &ps->acc[m];

	*out = 0;
	if (a->bad_line)
		return steer_decode_invalid(ps->detail, ps->detail_len,
					    "/metrics line %zu: %s is %g, %s", a->bad_line,
					    wanted[m].name, a->bad_value, a->rule);
	if (a->n == 0)
		return STEER_POLL_OK;
	*out = wanted[m].kind == KIND_RATIO ? a->sum / a->n : a->sum;
	if (!isfinite(*out))
		return steer_decode_invalid(ps->detail, ps->detail_len,
					    "%s: the sum over %u series is not finite",
					    wanted[m].name, a->n);
	return STEER_POLL_OK;
}

static enum steer_poll_kind use_count(struct prom *ps, int m, int32_t *out)
{
	double v;

	*out = 0;
	if (use(ps, m, &v) != STEER_POLL_OK)
		return STEER_POLL_INVALID;
	if (v > INT32_MAX)
		return steer_decode_invalid(ps->detail, ps->detail_len,
					    "%s sums to %g, more than int32", wanted[m].name, v);
	*out = (int32_t)v; /* truncated, as upstream's `as i32` */
	return STEER_POLL_OK;
}

static enum steer_poll_kind vllm_rank(struct prom *ps, struct steer_rank_load *r, uint32_t *kv_n)
{
	int kv = ps->acc[VLLM_KV_V0].n ? VLLM_KV_V0 : VLLM_KV_V1;

	*kv_n = ps->acc[kv].n;
	if (use(ps, kv, &r->token_usage) != STEER_POLL_OK ||
	    use_count(ps, VLLM_WAITING, &r->num_waiting_reqs) != STEER_POLL_OK ||
	    use_count(ps, VLLM_RUNNING, &r->num_running_reqs) != STEER_POLL_OK)
		return STEER_POLL_INVALID;
	return STEER_POLL_OK;
}

static enum steer_poll_kind sglang_rank(struct prom *ps, struct steer_rank_load *r, uint32_t *kv_n)
{
	int base = ps->acc[SGL_USAGE].n ? 0 : SGL_BLOCK; /* "sglang:" first */

	*kv_n = ps->acc[SGL_USAGE + base].n;
	if (use(ps, SGL_USAGE + base, &r->token_usage) != STEER_POLL_OK ||
	    use_count(ps, SGL_QUEUE + base, &r->num_waiting_reqs) != STEER_POLL_OK ||
	    use_count(ps, SGL_RUNNING + base, &r->num_running_reqs) != STEER_POLL_OK ||
	    use(ps, SGL_TPUT + base, &r->gen_throughput) != STEER_POLL_OK)
		return STEER_POLL_INVALID;
	return STEER_POLL_OK;
}

/* Which names the text has, as the engine allows: a source or NONE. */
static enum steer_source detect(const struct prom *ps, enum steer_engine engine)
{
	bool vllm = ps->acc[VLLM_KV_V0].n || ps->acc[VLLM_KV_V1].n;
	bool sglang = ps->acc[SGL_USAGE].n || ps->acc[SGL_USAGE + SGL_BLOCK].n;

	if (vllm && (engine == STEER_ENGINE_AUTO || engine == STEER_ENGINE_VLLM))
		return STEER_SOURCE_HTTP_METRICS_VLLM;
	if (sglang && (engine == STEER_ENGINE_AUTO || engine == STEER_ENGINE_SGLANG))
		return STEER_SOURCE_HTTP_METRICS_SGLANG;
	return STEER_SOURCE_NONE;
}

static enum steer_poll_kind no_names(struct prom *ps, enum steer_engine engine)
{
	const char *names = engine == STEER_ENGINE_VLLM ? "vllm:gpu_cache_usage_perc or "
							  "vllm:kv_cache_usage_perc"
			    : engine == STEER_ENGINE_SGLANG
				    ? "sglang:token_usage or sglang_token_usage"
				    : "vllm:gpu_cache_usage_perc, "
				      "vllm:kv_cache_usage_perc, "
				      "sglang:token_usage or "
				      "sglang_token_usage";

	return steer_decode_invalid(ps->detail, ps->detail_len,
				    "/metrics has no KV-usage gauge (%s)", names);
}

/*
 * *found is set whenever the engine's names were recognised, also when a
 * value of theirs then made the text INVALID (a vLLM /metrics whose KV usage
 * is NaN is still vLLM's); NONE when they were not, or the text did not parse.
 */
enum steer_poll_kind steer_decode_prometheus(const char *buf, size_t len, enum steer_engine engine,
					     struct steer_load *load, enum steer_source *found,
					     char *detail, size_t detail_len)
{
	struct steer_rank_load rank = { 0 };
	struct prom *ps;
	enum steer_source src;
	enum steer_poll_kind kind;
	uint32_t kv_n = 0;

	steer_decode_clear(detail, detail_len);
	if (found)
		*found = STEER_SOURCE_NONE;
	if (engine != STEER_ENGINE_AUTO && engine != STEER_ENGINE_VLLM &&
	    engine != STEER_ENGINE_SGLANG)
		return steer_decode_invalid(detail, detail_len,
					    "no /metrics names are known for engine %s",
					    steer_engine_name(engine));
	if (!buf || len == 0)
		return steer_decode_invalid(detail, detail_len, "empty /metrics body");
	if (len > STEER_DECODE_MAX_BYTES)
		return steer_decode_invalid(detail, detail_len,
					    "/metrics body of %zu bytes, more than %u", len,
					    STEER_DECODE_MAX_BYTES);
	ps = calloc(1, sizeof(*ps));
	if (!ps)
		return steer_decode_invalid(detail, detail_len, "out of memory");
	ps->detail = detail;
	ps->detail_len = detail_len;
	kind = parse_text(ps, buf, len);
	src = kind == STEER_POLL_OK ? detect(ps, engine) : STEER_SOURCE_NONE;
	if (kind == STEER_POLL_OK)
		kind = src == STEER_SOURCE_NONE		       ? no_names(ps, engine)
		       : src == STEER_SOURCE_HTTP_METRICS_VLLM ? vllm_rank(ps, &rank, &kv_n)
							       : sglang_rank(ps, &rank, &kv_n);
	free(ps);
	if (found)
		*found = src;
	if (kind != STEER_POLL_OK)
		return kind;
	if (steer_load_aggregate(&rank, 1, load, detail, detail_len) != 0)
		return STEER_POLL_INVALID;
	load->ranks = kv_n;
	return STEER_POLL_OK;
}
