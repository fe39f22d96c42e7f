// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * decode_json.c - the body of the native HTTP GET /v1/loads?include=core
 * (see loads.h), parsed with json-c.
 *
 * The shape is upstream's WorkerLoadResponse (lightseekorg/smg,
 * crates/protocols/src/worker.rs), served by SGLang builds and smg's mock
 * worker, with the GetLoads proto's field names:
 *
 *   {"timestamp": "...", "dp_rank_count": 2,
 *    "loads": [{"dp_rank": 0, "num_running_reqs": 3, "num_waiting_reqs": 1,
 *               "num_waiting_uncached_tokens": 800, "token_usage": 0.42,
 *               "gen_throughput": 1800.0, ...}, ...]}
 *
 * As upstream deserializes it (serde, every field defaulted): a missing
 * field is 0, a field of the wrong type (a string, null, a fraction where an
 * integer belongs) refuses the whole body, and so does an empty "loads".
 * Fields not read here are not looked at. Beyond upstream: the parse is
 * strict (json-c's JSON_TOKENER_STRICT, UTF-8 validated, nothing after the
 * object), and the numbers go through the same validation as every other
 * source (steer_load_aggregate): NaN or Infinity, which json-c accepts and
 * Python's json module emits, is a failed poll. json-c 0.16's strict mode
 * still lets a few things pass that serde would refuse (single-quoted
 * strings, a raw tab inside a string, "1."); they carry the same data, and
 * no JSON parser is written here to refuse them.
 */
#include "loads_int.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The body nests three deep; json-c's default allows 32. */
#define JSON_MAX_DEPTH 16
/* What json-c may be given to build: at most this many values (containers
 * included) and objects. json-c spends about 100 bytes a value and 600 an
 * object (its hash table), so a body within both needs at most ~6 MiB to
 * parse, whatever its shape; a real answer has ~10 values a rank. */
#define JSON_MAX_VALUES (STEER_DECODE_MAX_RANKS * 32)
#define JSON_MAX_OBJECTS (STEER_DECODE_MAX_RANKS * 4)

/* The shape of a body, counted before json-c builds anything. */
struct json_shape {
	size_t values, objects;
	size_t root_keys; /* keys written in the root object, duplicates included */
	size_t ranks;	  /* elements of the root's "loads" array */
	bool loads_seen;
	uint16_t rank_keys[STEER_DECODE_MAX_RANKS]; /* keys written in each rank */
};

/* What the scanner knows about each open container. */
struct json_level {
	bool object, expect_key, is_loads, is_rank;
	size_t rank; /* is_rank: its index */
};

struct json_scan {
	struct json_shape *shape;
	struct json_level lv[JSON_MAX_DEPTH + 2];
	size_t depth;	     /* open containers */
	bool key_was_loads;  /* the last key of the root object was "loads" */
	const char *refused; /* why the body is refused, or NULL */
};

/* A value starts in the current container: counted, and a rank when that
 * container is the root's "loads". */
static void scan_value(struct json_scan *sc)
{
	struct json_level *in = &sc->lv[sc->depth];

	if (++sc->shape->values > JSON_MAX_VALUES)
		sc->refused = "more values than a load answer has";
	if (sc->depth && in->is_loads && ++sc->shape->ranks > STEER_DECODE_MAX_RANKS)
		sc->refused = "more ranks than any engine has";
}

static void scan_open(struct json_scan *sc, bool object)
{
	struct json_level *up = &sc->lv[sc->depth], *lv;

	scan_value(sc);
	if (sc->refused)
		return;
	if (sc->depth == JSON_MAX_DEPTH) {
		sc->refused = "nested too deep";
		return;
	}
	if (object && ++sc->shape->objects > JSON_MAX_OBJECTS) {
		sc->refused = "more objects than a load answer has";
		return;
	}
	lv = &sc->lv[++sc->depth];
	*lv = (struct json_level){ .object = object, .expect_key = object };
	lv->is_loads = !object && sc->depth == 2 && up->object && sc->key_was_loads;
	lv->is_rank = object && sc->depth == 3 && up->is_loads;
	lv->rank = sc->shape->ranks - 1;
	if (lv->is_loads)
		sc->shape->loads_seen = true;
}

/* A key of the current object (the string at [s, s + n)). */
static void scan_key(struct json_scan *sc, const char *s, size_t n)
{
	struct json_level *lv = &sc->lv[sc->depth];

	lv->expect_key = false;
	if (sc->depth == 1) {
		sc->shape->root_keys++;
		sc->key_was_loads = n == 5 && !memcmp(s, "loads", 5);
	} else if (lv->is_rank && sc->shape->rank_keys[lv->rank] < UINT16_MAX) {
		sc->shape->rank_keys[lv->rank]++;
	}
}

/* The end of the string opening at buf[i]: the index of its closing quote,
 * or len when it has none. */
static size_t string_end(const char *buf, size_t len, size_t i)
{
	for (i++; i < len && buf[i] != '"'; i++)
		if (buf[i] == '\\')
			i++;
	return i < len ? i : len;
}

/*
 * Counts the values, objects, ranks and keys of buf without building
 * anything, so that json-c is given only a body within the limits. Only the
 * structure is followed (strings, brackets, commas); json-c then checks the
 * grammar. NULL, or why the body is refused.
 */
static const char *json_prescan(const char *buf, size_t len, struct json_shape *shape)
{
	struct json_scan sc = { .shape = shape };
	size_t i, end;

	memset(shape, 0, sizeof(*shape));
	for (i = 0; i < len && !sc.refused; i++) {
		struct json_level *lv = &sc.lv[sc.depth];

		switch (buf[i]) {
		case ' ':
		case '\t':
		case '\r':
		case '\n':
		case ':':
			break;
		case '"':
			end = string_end(buf, len, i);
			if (sc.depth && lv->object && lv->expect_key)
				scan_key(&sc, buf + i + 1, end - i - 1);
			else
				scan_value(&sc);
			i = end;
			break;
		case '{':
		case '[':
			scan_open(&sc, buf[i] == '{');
			break;
		case '}':
		case ']':
			if (sc.depth)
				sc.depth--;
			break;
		case ',':
			lv->expect_key = lv->object;
			break;
		default: /* a number, true, false or null: up to its end */
			scan_value(&sc);
			while (i + 1 < len && !strchr(" \t\r\n,]}:", buf[i + 1]))
				i++;
			break;
		}
	}
	return sc.refused;
}

/* An integer field (int32 in the proto): 0 when absent. */
static enum steer_poll_kind get_i32(json_object *rank, size_t i, const char *key, int32_t *out,
				    char *detail, size_t detail_len)
{
	json_object *v;
	int64_t x;

	*out = 0;
	if (!json_object_object_get_ex(rank, key, &v))
		return STEER_POLL_OK;
	if (!json_object_is_type(v, json_type_int))
		return steer_decode_invalid(detail, detail_len, "loads[%zu].%s is not an integer",
					    i, key);
	x = json_object_get_int64(v);
	if (x < INT32_MIN || x > INT32_MAX)
		return steer_decode_invalid(detail, detail_len,
					    "loads[%zu].%s is out of range for int32", i, key);
	*out = (int32_t)x;
	return STEER_POLL_OK;
}

/* A number field (double in the proto): 0 when absent; integers allowed. */
static enum steer_poll_kind get_f64(json_object *rank, size_t i, const char *key, double *out,
				    char *detail, size_t detail_len)
{
	json_object *v;

	*out = 0;
	if (!json_object_object_get_ex(rank, key, &v))
		return STEER_POLL_OK;
	if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
		return steer_decode_invalid(detail, detail_len, "loads[%zu].%s is not a number", i,
					    key);
	*out = json_object_get_double(v);
	return STEER_POLL_OK;
}

/* The fields a load is read from; dp_rank alone is none. */
static bool has_load_field(json_object *rank)
{
	static const char *const fields[] = { "num_running_reqs", "num_waiting_reqs",
					      "num_waiting_uncached_tokens", "token_usage",
					      "gen_throughput" };
	size_t k;

	for (k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
		if (json_object_object_get_ex(rank, fields[k], NULL))
			return true;
	return false;
}

/* keys_written: the keys the scanner counted in this rank. json-c keeps the
 * last of two equal keys, so a rank saying 50000 and then 0 would read as
 * idle: a key written twice refuses the body. */
static enum steer_poll_kind read_rank(json_object *obj, size_t i, size_t keys_written,
				      struct steer_rank_load *r, char *detail, size_t detail_len)
{
	if (!json_object_is_type(obj, json_type_object))
		return steer_decode_invalid(detail, detail_len, "loads[%zu] is not an object", i);
	if ((size_t)json_object_object_length(obj) != keys_written)
		return steer_decode_invalid(detail, detail_len, "loads[%zu] has a key twice", i);
	if (get_i32(obj, i, "dp_rank", &r->dp_rank, detail, detail_len) != STEER_POLL_OK ||
	    get_i32(obj, i, "num_running_reqs", &r->num_running_reqs, detail, detail_len) !=
		    STEER_POLL_OK ||
	    get_i32(obj, i, "num_waiting_reqs", &r->num_waiting_reqs, detail, detail_len) !=
		    STEER_POLL_OK ||
	    get_i32(obj, i, "num_waiting_uncached_tokens", &r->num_waiting_uncached_tokens, detail,
		    detail_len) != STEER_POLL_OK ||
	    get_f64(obj, i, "token_usage", &r->token_usage, detail, detail_len) != STEER_POLL_OK ||
	    get_f64(obj, i, "gen_throughput", &r->gen_throughput, detail, detail_len) !=
		    STEER_POLL_OK)
		return STEER_POLL_INVALID;
	if (!has_load_field(obj))
		return steer_decode_invalid(detail, detail_len,
					    "loads[%zu] has none of the load fields "
					    "(num_running_reqs, num_waiting_reqs, "
					    "num_waiting_uncached_tokens, token_usage, "
					    "gen_throughput)",
					    i);
	return STEER_POLL_OK;
}

/* The parsed document: {"dp_rank_count": N, "loads": [...]}. */
static enum steer_poll_kind read_response(json_object *root, const struct json_shape *shape,
					  struct steer_load *load, char *detail, size_t detail_len)
{
	struct steer_rank_load *ranks;
	enum steer_poll_kind kind = STEER_POLL_OK;
	json_object *loads, *count;
	size_t i, n;

	if (!json_object_is_type(root, json_type_object))
		return steer_decode_invalid(detail, detail_len, "the body is not a JSON object");
	if ((size_t)json_object_object_length(root) != shape->root_keys)
		return steer_decode_invalid(detail, detail_len,
					    "the body's object has a key twice");
	if (json_object_object_get_ex(root, "dp_rank_count", &count) &&
	    (!json_object_is_type(count, json_type_int) || json_object_get_int64(count) < 0 ||
	     json_object_get_int64(count) > INT32_MAX))
		return steer_decode_invalid(detail, detail_len,
					    "dp_rank_count is not an integer >= 0");
	if (!json_object_object_get_ex(root, "loads", &loads))
		return steer_decode_invalid(detail, detail_len, "no \"loads\" in the body");
	if (!json_object_is_type(loads, json_type_array))
		return steer_decode_invalid(detail, detail_len, "\"loads\" is not an array");
	n = json_object_array_length(loads);
	if (n == 0)
		return steer_decode_invalid(detail, detail_len, "\"loads\" is empty");
	if (n > STEER_DECODE_MAX_RANKS)
		return steer_decode_invalid(detail, detail_len,
					    "\"loads\" has %zu entries, more than any engine has "
					    "(at most %d)",
					    n, STEER_DECODE_MAX_RANKS);
	if (!shape->loads_seen || shape->ranks != n) /* "loads" written with escapes */
		return steer_decode_invalid(detail, detail_len,
					    "the \"loads\" key is not written plainly");
	ranks = calloc(n, sizeof(*ranks));
	if (!ranks)
		return steer_decode_invalid(detail, detail_len, "out of memory for %zu ranks", n);
	for (i = 0; i < n && kind == STEER_POLL_OK; i++)
		kind = read_rank(json_object_array_get_idx(loads, i), i, shape->rank_keys[i],
				 &ranks[i], detail, detail_len);
	if (kind == STEER_POLL_OK && steer_load_aggregate(ranks, n, load, detail, detail_len) != 0)
		kind = STEER_POLL_INVALID;
	free(ranks);
	return kind;
}

static bool only_whitespace(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
			return false;
	return true;
}

enum steer_poll_kind steer_decode_loads_json(const char *buf, size_t len, struct steer_load *load,
					     char *detail, size_t detail_len)
{
	enum json_tokener_error err;
	enum steer_poll_kind kind;
	struct json_shape *shape;
	const char *refused;
	json_tokener *tok;
	json_object *root;
	size_t end;

	steer_decode_clear(detail, detail_len);
	if (!buf || len == 0)
		return steer_decode_invalid(detail, detail_len, "empty /v1/loads body");
	if (len > STEER_DECODE_MAX_BYTES)
		return steer_decode_invalid(detail, detail_len,
					    "/v1/loads body of %zu bytes, more than %u", len,
					    STEER_DECODE_MAX_BYTES);
	if (memchr(buf, 0, len))
		return steer_decode_invalid(detail, detail_len, "NUL byte in the /v1/loads body");
	shape = malloc(sizeof(*shape));
	if (!shape)
		return steer_decode_invalid(detail, detail_len, "out of memory for the JSON scan");
	refused = json_prescan(buf, len, shape);
	if (refused) {
		kind = steer_decode_invalid(detail, detail_len,
					    "/v1/loads body refused before parsing: %s (over %d "
					    "ranks, %d values or %d objects, or nested over %d)",
					    refused, STEER_DECODE_MAX_RANKS, JSON_MAX_VALUES,
					    JSON_MAX_OBJECTS, JSON_MAX_DEPTH);
		free(shape);
		return kind;
	}
	tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	if (!tok) {
		free(shape);
		return steer_decode_invalid(detail, detail_len,
					    "out of memory for the JSON parser");
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	root = json_tokener_parse_ex(tok, buf, (int)len);
	err = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (!root && err == json_tokener_continue) {
		/* The body ends here. The terminator settles a value that has no
		 * end of its own (a number, null); an object stays incomplete. */
		root = json_tokener_parse_ex(tok, "", 1);
		err = json_tokener_get_error(tok);
		end = len;
		if (!root && err != json_tokener_success)
			err = json_tokener_continue;
	}
	json_tokener_free(tok);
	if (!root) {
		free(shape);
		if (err == json_tokener_success) /* the literal null */
			return steer_decode_invalid(detail, detail_len,
						    "the body is not a JSON object");
		if (err == json_tokener_continue)
			return steer_decode_invalid(detail, detail_len,
						    "truncated JSON (%zu bytes, the value is "
						    "incomplete)",
						    len);
		return steer_decode_invalid(detail, detail_len, "invalid JSON near byte %zu: %s",
					    end, json_tokener_error_desc(err));
	}
	if (end > len || !only_whitespace(buf + end, len - end))
		kind = steer_decode_invalid(detail, detail_len,
					    "bytes after the JSON value (from byte %zu)", end);
	else
		kind = read_response(root, shape, load, detail, detail_len);
	json_object_put(root);
	free(shape);
	return kind;
}
