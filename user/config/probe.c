// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * probe.c - the step probe's options (user/probe/probe.c): --step-probe PATH
 * (the file's step-probe key), the HTTP path of each backend's streaming
 * endpoint that the probe POSTs to, and --step-probe-body JSON, what it
 * POSTs. Only with --wire-estimator fluid-step, whose step cadence it feeds.
 */
#include <json-c/json.h>
#include <string.h>

#include "config_int.h"

/* A completion that streams one event a step and stops only at max_tokens.
 * Engines that need a model name take it in a --step-probe-body of their own. */
#define PROBE_BODY_DEFAULT                                                           \
	"{\"prompt\":\"0\",\"max_tokens\":1024,\"stream\":true,\"ignore_eos\":true," \
	"\"temperature\":0}"

void cfg_probe_defaults(struct steer_config *cfg)
{
	snprintf(cfg->step_probe_body, sizeof(cfg->step_probe_body), "%s", PROBE_BODY_DEFAULT);
}

/* An absolute path of visible ASCII (a request line cannot hold more), or
 * "off". */
int cfg_parse_step_probe(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	size_t i, n = strlen(v);

	if (!strcmp(v, "off")) {
		dst->step_probe_path[0] = 0;
		return 0;
	}
	if (v[0] != '/')
		return cfg_why(why, whylen,
			       "must be an HTTP path starting with '/', or off, got '%s'", v);
	if (n >= sizeof(dst->step_probe_path))
		return cfg_why(why, whylen, "must be a path of at most %zu bytes",
			       sizeof(dst->step_probe_path) - 1);
	for (i = 0; i < n; i++)
		if (v[i] <= ' ' || v[i] > '~')
			return cfg_why(why, whylen,
				       "byte %zu is not visible ASCII (a URL path has no spaces or "
				       "control bytes)",
				       i + 1);
	memcpy(dst->step_probe_path, v, n + 1);
	return 0;
}

/* A JSON object, checked with json-c: the probe sends it as it is. */
int cfg_parse_step_probe_body(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	struct json_tokener *tok;
	struct json_object *o;
	size_t n = strlen(v);
	bool object;

	if (n >= sizeof(dst->step_probe_body))
		return cfg_why(why, whylen, "must be at most %zu bytes",
			       sizeof(dst->step_probe_body) - 1);
	tok = json_tokener_new();
	if (!tok)
		return cfg_why(why, whylen, "out of memory");
	/* With its NUL, so that a bare number ends (json-c waits for more). */
	o = json_tokener_parse_ex(tok, v, (int)n + 1);
	if (!o || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) < n) {
		cfg_why(why, whylen, "is not JSON: %s",
			json_tokener_error_desc(o ? json_tokener_error_parse_unexpected
						  : json_tokener_get_error(tok)));
		json_object_put(o);
		json_tokener_free(tok);
		return -1;
	}
	object = json_object_is_type(o, json_type_object);
	json_object_put(o);
	json_tokener_free(tok);
	if (!object)
		return cfg_why(why, whylen, "must be a JSON object, got '%.40s'", v);
	memcpy(dst->step_probe_body, v, n + 1);
	return 0;
}

int cfg_check_probe(struct ctx *c)
{
	const struct steer_config *o = &c->out;
	char where[PATH_MAX + 32];

	if (!o->step_probe_path[0]) {
		if (cfg_given(c, OPT_STEP_PROBE_BODY))
			return cfg_fail(c, "%s: needs --step-probe PATH (the probe it is sent by)",
					cfg_origin(c, OPT_STEP_PROBE_BODY, where, sizeof(where)));
		return STEER_CONFIG_OK;
	}
	if (!o->wire_step)
		return cfg_fail(c,
				"%s: feeds the step cadence, which only --wire-estimator "
				"fluid-step keeps; give that too, or leave the probe out",
				cfg_origin(c, OPT_STEP_PROBE, where, sizeof(where)));
	return STEER_CONFIG_OK;
}

void cfg_probe_summary(FILE *f, const struct steer_config *c)
{
	if (c->step_probe_path[0])
		fprintf(f, "  step probe: POST %s to every backend, body %s\n", c->step_probe_path,
			c->step_probe_body);
}
