/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * config_testlib.h - helpers of the configuration tests (tests/test_config*.c):
 * load a command line, with a YAML file written for the call, and check how
 * it was refused. Each test program calls config_test_setup() first; files
 * live in a mkdtemp directory that atexit removes.
 */
#ifndef STEER_CONFIG_TESTLIB_H
#define STEER_CONFIG_TESTLIB_H

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "tap.h"

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
#define MAX_ARGS 1200

/* The smallest valid command line. */
#define BASE "--vip", "127.0.0.100:8000", "--backend", "127.0.0.11:8000"

static char tmpdir[] = "/tmp/test_config.XXXXXX";
static char yaml_path[PATH_MAX];
static char err[512];

/* The form every --backend error quotes. */
#define BACKEND_FORM                                                                               \
	"ADDR:PORT[,loads=[grpc://|http://]ADDR:PORT[/path]][,engine=auto|sglang|vllm|tokenspeed]" \
	"[,auth=bearer:FILE]"

/* ---- Helpers ------------------------------------------------------------------------ */

/* Loads "smg-steerd" + args (NULL-terminated) + "--config FILE" when file. */
static inline int load_with(const char *const *args, const char *file, struct steer_config *cfg)
{
	const char *argv[MAX_ARGS + 4];
	int argc = 0, i;

	argv[argc++] = "smg-steerd";
	for (i = 0; args && args[i] && argc < MAX_ARGS; i++)
		argv[argc++] = args[i];
	if (file) {
		argv[argc++] = "--config";
		argv[argc++] = file;
	}
	argv[argc] = NULL;
	err[0] = 0;
	return steer_config_load(argc, (char *const *)argv, cfg, err, sizeof(err));
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define LOAD(cfg, ...) load_with(ARGS(__VA_ARGS__), NULL, cfg)

/* Writes text to path; a new file is made 0600, as a secret file should be
 * (a looser one is warned about: test_auth_file_mode_warning). */
static inline int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");

	if (!f) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	fputs(text, f);
	return fclose(f);
}

/* Writes text as the config file, loads it with the flags, and removes it. */
static inline int load_yaml(const char *text, const char *const *flags, struct steer_config *cfg)
{
	int rc;

	if (write_file(yaml_path, text)) {
		snprintf(err, sizeof(err), "cannot write the config file");
		return -1;
	}
	rc = load_with(flags, yaml_path, cfg);
	unlink(yaml_path);
	return rc;
}

/* A rejected load: usage rc, one line, out untouched. */
static inline int rejected(int rc, const struct steer_config *before,
			   const struct steer_config *after)
{
	return rc == STEER_CONFIG_USAGE && err[0] && !strchr(err, '\n') &&
	       !memcmp(before, after, sizeof(*before));
}

/* Refused (the flags args, with file_text as the file unless NULL):
 * STEER_CONFIG_USAGE, one line holding n1 and n2 (unless NULL), out untouched. */
static inline int refused(const char *const *args, const char *file_text, const char *n1,
			  const char *n2)
{
	static struct steer_config before, after;
	int rc;

	memset(&before, 0xa5, sizeof(before));
	after = before;
	rc = file_text ? load_yaml(file_text, args, &after) : load_with(args, NULL, &after);
	if (rejected(rc, &before, &after) && strstr(err, n1) && (!n2 || strstr(err, n2)))
		return 1;
	printf("# rc=%d err='%s', want '%s'%s%s\n", rc, err, n1, n2 ? " and " : "", n2 ? n2 : "");
	if (rc == STEER_CONFIG_OK)
		steer_config_free(&after);
	return 0;
}

/* err, starting with "FILE:line: ", equals the expected text. */
static inline int file_err_is(int line, const char *text)
{
	char expect[sizeof(err) + PATH_MAX];

	snprintf(expect, sizeof(expect), "%s:%d: %s", yaml_path, line, text);
	return !strcmp(err, expect);
}

static inline int addr_is(const struct steer_addr *a, const char *text)
{
	struct steer_addr b;

	return steer_addr_parse(text, &b, NULL, 0) == 0 && steer_addr_equal(a, &b);
}

static inline const struct steer_service_cfg *service_of(const struct steer_config *c,
							 const char *vip)
{
	size_t i;

	for (i = 0; i < c->n_services; i++) {
		if (addr_is(&c->services[i].vip, vip))
			return &c->services[i];
	}
	return NULL;
}

/* Runs fn with stdout in a temporary file and returns what it printed. */
static inline char *capture_stdout(int (*fn)(void *), void *arg, int *rc)
{
	char path[PATH_MAX], *text = calloc(1, 65536);
	int saved, fd;
	FILE *f;

	snprintf(path, sizeof(path), "%s/stdout", tmpdir);
	fflush(stdout);
	saved = dup(1);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	dup2(fd, 1);
	close(fd);
	*rc = fn(arg);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	f = fopen(path, "r");
	if (f && text)
		text[fread(text, 1, 65535, f)] = 0;
	if (f)
		fclose(f);
	unlink(path);
	return text;
}

/* Runs the real smg-steerd (STEER_BUILD, else build/san) with args and
 * --check-config: its exit code, and its stderr in out. */
/* What --check-config prints of c (steer_config_summary), malloc'd; NULL
 * when it could not be captured. */
static inline char *summary_of(const struct steer_config *c)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	steer_config_summary(f, c);
	fclose(f);
	return text;
}

static inline int run_check_config(const char *const *args, char *out, size_t outlen)
{
	const char *build = getenv("STEER_BUILD");
	char bin[PATH_MAX], errpath[PATH_MAX];
	const char *argv[24];
	int argc = 0, status;
	pid_t pid;
	FILE *f;

	snprintf(bin, sizeof(bin), "%s/smg-steerd", build ? build : "build/san");
	snprintf(errpath, sizeof(errpath), "%s/stderr", tmpdir);
	argv[argc++] = bin;
	while (*args && argc < 22)
		argv[argc++] = *args++;
	argv[argc++] = "--check-config";
	argv[argc] = NULL;
	fflush(stdout); /* the child must not write the parent's buffered lines again */
	pid = fork();
	if (pid == 0) {
		int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null = open("/dev/null", O_WRONLY);

		if (fd < 0 || null < 0 || dup2(fd, 2) < 0 || dup2(null, 1) < 0)
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	out[0] = 0;
	f = fopen(errpath, "r");
	if (f) {
		out[fread(out, 1, outlen - 1, f)] = 0;
		fclose(f);
	}
	unlink(errpath);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The cgroup2 mount point: the one cgroup every machine has. */
static inline const char *cgroup_root(void)
{
	static char root[PATH_MAX];

	if (!root[0] && steer_cgroup2_root(root, sizeof(root)))
		snprintf(root, sizeof(root), "/sys/fs/cgroup");
	return root;
}

static inline void config_test_cleanup(void)
{
	unlink(yaml_path);
	rmdir(tmpdir);
}

/* The temporary directory and the YAML path; 0 on success. */
static inline int config_test_setup(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return -1;
	}
	atexit(config_test_cleanup);
	snprintf(yaml_path, sizeof(yaml_path), "%s/steer.yaml", tmpdir);
	return 0;
}

#endif /* STEER_CONFIG_TESTLIB_H */
