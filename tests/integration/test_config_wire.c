// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * test_config_wire.c - --wire-cgroup PATH (the file's wire-cgroup key): where
 * request accounting attaches. Refused with one line naming the option: a
 * relative path, a missing directory, one that is not a cgroup2 directory,
 * one outside --cgroup, and any given with --wire-estimator off; the same in
 * the file, with its line; and by the real smg-steerd --check-config with
 * exit 2. Accepted: --cgroup itself, a cgroup below it, anything with the
 * default --cgroup (the cgroup2 root), from the flags and from the file.
 *
 * Needs to create two cgroups (a parent and its child) under the cgroup2
 * root; they are removed at exit.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>

#include "config_testlib.h"

#define VIP "127.0.0.100:8000"
#define BK "127.0.0.11:8000"

static char parent[PATH_MAX], child[PATH_MAX + 16], sibling[PATH_MAX + 16];

static void cgroups_remove(void)
{
	rmdir(child);
	rmdir(sibling);
	rmdir(parent);
}

static int cgroups_make(void)
{
	snprintf(parent, sizeof(parent), "%s/smg-steer-test-cfgwire-%d", cgroup_root(),
		 (int)getpid());
	snprintf(child, sizeof(child), "%s/child", parent);
	snprintf(sibling, sizeof(sibling), "%s/sibling", parent);
	atexit(cgroups_remove);
	if (mkdir(parent, 0755) || mkdir(child, 0755) || mkdir(sibling, 0755)) {
		printf("# mkdir in %s: %s\n", cgroup_root(), strerror(errno));
		return -1;
	}
	return 0;
}

static void test_flag_refused(void)
{
	char buf[PATH_MAX + 64];

	CHECK(refused(ARGS(BASE, "--wire-cgroup", "relative/cg"), NULL,
		      "--wire-cgroup: must be an absolute path to a cgroup2 directory, got "
		      "'relative/cg'",
		      NULL),
	      "a relative path");
	CHECK(refused(ARGS(BASE, "--wire-cgroup", ""), NULL, "--wire-cgroup: must be an absolute",
		      NULL),
	      "an empty path");
	snprintf(buf, sizeof(buf), "%s/no-such-cgroup", parent);
	CHECK(refused(ARGS(BASE, "--wire-cgroup", buf), NULL, "--wire-cgroup: '",
		      "no-such-cgroup': No such file or directory"),
	      "a missing directory");
	CHECK(refused(ARGS(BASE, "--wire-cgroup", "/tmp"), NULL,
		      "--wire-cgroup: '/tmp' is not a cgroup2 directory", NULL),
	      "not a cgroup2 directory");
	/* Not below --cgroup: its parent, the root, a sibling. */
	CHECK(refused(ARGS(BASE, "--cgroup", child, "--wire-cgroup", parent), NULL,
		      "--wire-cgroup: '", "' is not the --cgroup ("),
	      "the parent of --cgroup");
	CHECK(refused(ARGS(BASE, "--cgroup", parent, "--wire-cgroup", cgroup_root()), NULL,
		      "--wire-cgroup: '", "or a cgroup below it"),
	      "the root, above --cgroup");
	CHECK(refused(ARGS(BASE, "--cgroup", child, "--wire-cgroup", sibling), NULL,
		      "--wire-cgroup: '", "' is not the --cgroup ("),
	      "a sibling of --cgroup");
	/* A name that starts like --cgroup's is not below it. */
	snprintf(buf, sizeof(buf), "%s-x", child);
	CHECK(mkdir(buf, 0755) == 0, "mkdir %s: %s", buf, strerror(errno));
	CHECK(refused(ARGS(BASE, "--cgroup", child, "--wire-cgroup", buf), NULL, "--wire-cgroup: '",
		      "' is not the --cgroup ("),
	      "a prefix of the name is not a parent");
	rmdir(buf);
	CHECK(refused(ARGS(BASE, "--wire-cgroup", child, "--wire-estimator", "off"), NULL,
		      "--wire-cgroup: given with --wire-estimator off", NULL),
	      "with --wire-estimator off");
}

static void test_file_refused(void)
{
	char text[3 * PATH_MAX], where[64];

	snprintf(text, sizeof(text), "log-level: info\nwire-cgroup: relative/cg\n");
	CHECK(refused(ARGS(BASE), text, "wire-cgroup: must be an absolute path", NULL) &&
		      file_err_is(2, "wire-cgroup: must be an absolute path to a cgroup2 "
				     "directory, got 'relative/cg'"),
	      "a relative path in the file: '%s'", err);
	snprintf(text, sizeof(text), "cgroup: %s\nlog-level: info\nwire-cgroup: %s\n", child,
		 parent);
	snprintf(where, sizeof(where), ":%d: wire-cgroup: '", 3);
	CHECK(refused(ARGS(BASE), text, where, "is not the --cgroup"),
	      "outside cgroup in the file");
	snprintf(text, sizeof(text), "wire-cgroup: %s\nwire-estimator: off\n", child);
	CHECK(refused(ARGS(BASE), text, ":1: wire-cgroup: given with --wire-estimator off", NULL),
	      "with wire-estimator off in the file");
	/* The file's wire-cgroup against the flags' --cgroup. */
	snprintf(text, sizeof(text), "wire-cgroup: %s\n", sibling);
	CHECK(refused(ARGS(BASE, "--cgroup", child), text, ":1: wire-cgroup: '",
		      "is not the --cgroup"),
	      "the file's wire-cgroup outside the flags' --cgroup");
}

static void test_accepted(void)
{
	struct steer_config c;
	char text[3 * PATH_MAX];
	int rc;

	rc = LOAD(&c, BASE);
	CHECK(rc == STEER_CONFIG_OK && c.wire_cgroup[0] == 0, "default: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--cgroup", parent, "--wire-cgroup", child);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.wire_cgroup, child), "below: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--cgroup", parent, "--wire-cgroup", parent);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.wire_cgroup, parent), "equal: rc=%d '%s'", rc,
	      err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--wire-cgroup", child, "--wire-estimator", "fluid-step");
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.wire_cgroup, child) && c.wire_step,
	      "under the root: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	rc = LOAD(&c, BASE, "--cgroup", cgroup_root(), "--wire-cgroup", cgroup_root());
	CHECK(rc == STEER_CONFIG_OK, "the root itself: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	snprintf(text, sizeof(text), "cgroup: %s\nwire-cgroup: %s\n", parent, child);
	rc = load_yaml(text, ARGS(BASE), &c);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.wire_cgroup, child), "file: rc=%d '%s'", rc, err);
	steer_config_free(&c);
	/* The flag overrides the file. */
	rc = load_yaml(text, ARGS(BASE, "--wire-cgroup", parent), &c);
	CHECK(rc == STEER_CONFIG_OK && !strcmp(c.wire_cgroup, parent), "flag wins: rc=%d '%s'", rc,
	      err);
	steer_config_free(&c);
}

static void test_check_config_exits_2(void)
{
	char out[1024];
	int rc;

	rc = run_check_config(ARGS(BASE, "--cgroup", child, "--wire-cgroup", parent), out,
			      sizeof(out));
	CHECK(rc == 2 && strstr(out, "--wire-cgroup: '") && strstr(out, "is not the --cgroup"),
	      "outside: exit %d, '%s'", rc, out);
	rc = run_check_config(ARGS(BASE, "--wire-cgroup", child, "--wire-estimator", "off"), out,
			      sizeof(out));
	CHECK(rc == 2 && strstr(out, "--wire-cgroup: given with --wire-estimator off"),
	      "with off: exit %d, '%s'", rc, out);
	rc = run_check_config(ARGS(BASE, "--wire-cgroup", "rel"), out, sizeof(out));
	CHECK(rc == 2 && strstr(out, "--wire-cgroup: must be an absolute path"),
	      "relative: exit %d, '%s'", rc, out);
	rc = run_check_config(ARGS(BASE, "--cgroup", parent, "--wire-cgroup", child), out,
			      sizeof(out));
	CHECK(rc == 0, "valid: exit %d, '%s'", rc, out);
}

int main(void)
{
	if (config_test_setup() || cgroups_make())
		return tap_setup_failed();
	TAP_RUN(test_flag_refused);
	TAP_RUN(test_file_refused);
	TAP_RUN(test_accepted);
	TAP_RUN(test_check_config_exits_2);
	return tap_done();
}
