// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_probe.c - the step probe's options: --step-probe PATH and
 * --step-probe-body JSON, as flags and as the file's keys. Refused with one
 * line naming the option (and the file's line): a path that is not absolute
 * or holds a space or a control byte, a path too long, a body that is not
 * JSON, is JSON but not an object, or has bytes after the object, a body
 * without the probe, the probe without --wire-estimator fluid-step.
 * Accepted: off by default, the default body, "off", the file, the flag
 * winning. --check-config's summary names the path and the body.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "config_testlib.h"

#define STEP "--wire-estimator", "fluid-step"
#define DEFAULT_BODY                                                                 \
	"{\"prompt\":\"0\",\"max_tokens\":1024,\"stream\":true,\"ignore_eos\":true," \
	"\"temperature\":0}"

static void test_flags_refused(void)
{
	char longpath[300];

	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "v1/completions"), NULL,
		      "--step-probe: must be an HTTP path starting with '/', or off, got "
		      "'v1/completions'",
		      NULL),
	      "a relative path");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "/v1/com pletions"), NULL,
		      "--step-probe: byte 8 is not visible ASCII", NULL),
	      "a space in the path");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "/v1\r\nX: y"), NULL,
		      "--step-probe: byte 4 is not visible ASCII", NULL),
	      "a CR LF in the path (a header injected)");
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = 0;
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", longpath), NULL,
		      "--step-probe: must be a path of at most 255 bytes", NULL),
	      "a path too long");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "/v1/completions", "--step-probe-body",
			   "{\"stream\": true"),
		      NULL, "--step-probe-body: is not JSON", NULL),
	      "a body cut short");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "/v1/completions", "--step-probe-body",
			   "[1, 2]"),
		      NULL, "--step-probe-body: must be a JSON object, got '[1, 2]'", NULL),
	      "a body that is not an object");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe", "/v1/completions", "--step-probe-body",
			   "{\"a\": 1} x"),
		      NULL, "--step-probe-body: is not JSON", NULL),
	      "bytes after the object");
	CHECK(refused(ARGS(BASE, STEP, "--step-probe-body", "{}"), NULL,
		      "--step-probe-body: needs --step-probe PATH", NULL),
	      "a body without the probe");
	CHECK(refused(ARGS(BASE, "--step-probe", "/v1/completions"), NULL,
		      "--step-probe: feeds the step cadence, which only --wire-estimator "
		      "fluid-step keeps",
		      NULL),
	      "the probe with fluid (the default)");
	CHECK(refused(ARGS(BASE, "--wire-estimator", "off", "--step-probe", "/v1/completions"),
		      NULL, "--step-probe: feeds the step cadence", NULL),
	      "the probe with the accounting off");
}

static void test_file_refused(void)
{
	CHECK(refused(ARGS(BASE),
		      "wire-estimator: fluid-step\nstep-probe: /x\nstep-probe-body: 7\n",
		      ":3: step-probe-body: must be a JSON object, got '7'", NULL),
	      "the file's body not an object: '%s'", err);
	CHECK(refused(ARGS(BASE), "step-probe: /v1/completions\n",
		      ":1: step-probe: feeds the step cadence", NULL),
	      "the file's probe without fluid-step: '%s'", err);
}

static void test_accepted(void)
{
	struct steer_config c;
	int rc;

	rc = LOAD(&c, BASE, STEP);
	CHECK(rc == STEER_CONFIG_OK && !c.step_probe_path[0] &&
		      !strcmp(c.step_probe_body, DEFAULT_BODY),
	      "off by default: rc=%d '%s' '%s'", rc, err, c.step_probe_body);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, STEP, "--step-probe", "/v1/completions");
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.step_probe_path, "/v1/completions") &&
		      !strcmp(c.step_probe_body, DEFAULT_BODY),
	      "the default body: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, STEP, "--step-probe", "/generate?x=1", "--step-probe-body",
		  "{\"text\": \"0\", \"stream\": true, \"sampling_params\": {\"max_new_tokens\": "
		  "64}}");
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.step_probe_path, "/generate?x=1") &&
		      !strcmp(c.step_probe_body, "{\"text\": \"0\", \"stream\": true, "
						 "\"sampling_params\": {\"max_new_tokens\": 64}}"),
	      "a body of its own, kept as given: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = load_yaml("wire-estimator: fluid-step\nstep-probe: /v1/completions\n",
		       ARGS(BASE, "--step-probe", "off"), &c);
	CHECK(rc == STEER_CONFIG_OK && !c.step_probe_path[0], "the flag's off wins: rc=%d '%s'", rc,
	      err);
	steer_config_free(&c);
	rc = load_yaml(
		"wire-estimator: fluid-step\nstep-probe: /a\nstep-probe-body: '{\"x\": 1}'\n",
		ARGS(BASE, "--step-probe", "/b"), &c);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.step_probe_path, "/b") &&
		      !strcmp(c.step_probe_body, "{\"x\": 1}"),
	      "file and flag: rc=%d '%s'", rc, err);
	steer_config_free(&c);
}

static void test_summary(void)
{
	struct steer_config c;
	int rc = LOAD(&c, BASE, STEP, "--step-probe", "/v1/completions");
	char *text = summary_of(&c);

	CHECK(text && rc == STEER_CONFIG_OK, "rc=%d '%s'", rc, err);
	CHECK(text && strstr(text, "  step probe: POST /v1/completions to every backend, "
				   "body " DEFAULT_BODY "\n"),
	      "summary: '%s'", text);
	free(text);
	steer_config_free(&c);
}

static void test_check_config(void)
{
	char out[2048];
	int rc;

	rc = run_check_config(ARGS(BASE, "--step-probe", "/v1/completions"), out, sizeof(out));
	CHECK(rc == 2 && strstr(out, "--step-probe: feeds the step cadence"), "exit %d, '%s'", rc,
	      out);
	rc = run_check_config(ARGS(BASE, STEP, "--step-probe", "/v1/completions"), out,
			      sizeof(out));
	CHECK(rc == 0, "valid: exit %d, '%s'", rc, out);
}

int main(void)
{
	if (config_test_setup())
		return tap_setup_failed();
	TAP_RUN(test_flags_refused);
	TAP_RUN(test_file_refused);
	TAP_RUN(test_accepted);
	TAP_RUN(test_summary);
	TAP_RUN(test_check_config);
	return tap_done();
}
