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

static enum steer_poll_kind read_rank(json_object *obj, size_t i, struct steer_rank_load *r,
				      char *detail, size_t detail_len)
{
	if (!json_object_is_type(obj, json_type_object))
		return steer_decode_invalid(detail, detail_len, "loads[%zu] is not an object", i);
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
	return STEER_POLL_OK;
}

/* The parsed document: {"dp_rank_count": N, "loads": [...]}. */
static enum steer_poll_kind read_response(json_object *root, struct steer_load *load, char *detail,
					  size_t detail_len)
{
	struct steer_rank_load *ranks;
	enum steer_poll_kind kind = STEER_POLL_OK;
	json_object *loads, *count;
	size_t i, n;

	if (!json_object_is_type(root, json_type_object))
		return steer_decode_invalid(detail, detail_len, "the body is not a JSON object");
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
	ranks = calloc(n, sizeof(*ranks));
	if (!ranks)
		return steer_decode_invalid(detail, detail_len, "out of memory for %zu ranks", n);
	for (i = 0; i < n && kind == STEER_POLL_OK; i++)
		kind = read_rank(json_object_array_get_idx(loads, i), i, &ranks[i], detail,
				 detail_len);
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
	tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	if (!tok)
		return steer_decode_invalid(detail, detail_len,
					    "out of memory for the JSON parser");
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
		kind = read_response(root, load, detail, detail_len);
	json_object_put(root);
	return kind;
}
