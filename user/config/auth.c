// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * auth.c - auth=bearer:FILE: the token files, read each time the
 * configuration is loaded (start and SIGHUP), so that a rotated secret is
 * picked up by a reload. A file named by several backends is read once and
 * shared (steer_config.auths; a backend's auth is 1 + the index).
 *
 * The token is a secret: no message here or anywhere else quotes it, and
 * every copy is zeroed before it is freed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"

/* The first line, up to one byte more than a token may have, so that a
 * longer one is seen; the rest of the file is never read. */
struct token_buf {
	char b[STEER_AUTH_TOKEN_MAX + 2];
	size_t len;
};

/*
 * Up to cap bytes of a secret file into buf (NUL-terminated: buf has cap + 1
 * bytes), stopping early at the first newline when first_line: the rest of a
 * token file is never read. Refuses what is not a regular file: a FIFO or a
 * device would block the reload, or never end. Shared by auth=bearer:FILE and
 * --peer-key (peer_key.c); the caller wipes buf.
 */
int cfg_secret_read(const char *file, char *buf, size_t cap, bool first_line, size_t *len,
		    unsigned int *mode, char *why, size_t whylen)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	struct stat st;
	ssize_t n;

	*len = 0;
	buf[0] = 0;
	if (fd < 0)
		return cfg_why(why, whylen, "cannot read %s: %s", file, strerror(errno));
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return cfg_why(why, whylen, "%s is not a regular file", file);
	}
	*mode = (unsigned int)st.st_mode & 07777;
	while (*len < cap && !(first_line && memchr(buf, '\n', *len))) {
		n = read(fd, buf + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			close(fd);
			return cfg_why(why, whylen, "cannot read %s: %s", file, strerror(errno));
		}
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	close(fd);
	buf[*len] = 0;
	return 0;
}

/*
 * A warning, not an error: Kubernetes mounts a Secret's files 0644 unless its
 * volume sets defaultMode, and refusing those would stop a fleet at its next
 * restart. Any local user (or process in a shared volume) can read such a
 * file, so it is said at every load until the mode is fixed.
 */
void cfg_secret_check_mode(struct ctx *c, const char *what, const char *file, unsigned int mode)
{
	if (mode & 077)
		cfg_warn(c,
			 "%s %s can be read by group or others (mode %04o): chmod 0400 it, or "
			 "set defaultMode: 0400 on its Secret volume",
			 what, file, mode);
}

static int file_head(const char *file, struct token_buf *t, unsigned int *mode, char *why,
		     size_t whylen)
{
	return cfg_secret_read(file, t->b, sizeof(t->b) - 1, true, &t->len, mode, why, whylen);
}

/* The first line without surrounding blanks: [*start, *start + *len). */
static int token_extract(const char *file, struct token_buf *t, size_t *start, size_t *len,
			 char *why, size_t whylen)
{
	const char *nl = memchr(t->b, '\n', t->len);
	size_t a = 0, b = nl ? (size_t)(nl - t->b) : t->len, i;

	if (!nl && t->len > STEER_AUTH_TOKEN_MAX)
		return cfg_why(why, whylen, "%s: the first line is longer than %d bytes", file,
			       STEER_AUTH_TOKEN_MAX);
	while (a < b && strchr(" \t\r", t->b[a]))
		a++;
	while (b > a && strchr(" \t\r", t->b[b - 1]))
		b--;
	if (a == b)
		return cfg_why(why, whylen, "%s: the first line is empty (expected a token)", file);
	if (b - a > STEER_AUTH_TOKEN_MAX)
		return cfg_why(why, whylen, "%s: the token is longer than %d bytes", file,
			       STEER_AUTH_TOKEN_MAX);
	/* It goes into an HTTP header and gRPC metadata: printable ASCII only. */
	for (i = a; i < b; i++) {
		if ((unsigned char)t->b[i] < 0x20 || (unsigned char)t->b[i] > 0x7e)
			return cfg_why(why, whylen,
				       "%s: the token has a byte that is not printable ASCII "
				       "(at offset %zu)",
				       file, i);
	}
	*start = a;
	*len = b - a;
	return 0;
}

/* Reads the token of file into a new heap string. */
static int token_read(const char *file, char **token, unsigned int *mode, char *why, size_t whylen)
{
	struct token_buf *t = malloc(sizeof(*t));
	size_t start = 0, len = 0;
	int rc;

	*token = NULL;
	if (!t)
		return cfg_why(why, whylen, "out of memory");
	rc = file_head(file, t, mode, why, whylen);
	if (!rc)
		rc = token_extract(file, t, &start, &len, why, whylen);
	if (!rc) {
		*token = strndup(t->b + start, len);
		if (!*token)
			rc = cfg_why(why, whylen, "out of memory");
	}
	explicit_bzero(t, sizeof(*t));
	free(t);
	return rc;
}

int cfg_auth_add(struct ctx *c, const char *file, uint32_t *ref, char *why, size_t whylen)
{
	struct steer_auth *grown;
	unsigned int mode = 0;
	char *token;
	size_t i;

	if (file[0] != '/')
		return cfg_why(why, whylen, "bearer:FILE: FILE must be an absolute path, got '%s'",
			       file);
	if (strlen(file) >= PATH_MAX)
		return cfg_why(why, whylen, "bearer:FILE: the path is longer than %d bytes",
			       PATH_MAX - 1);
	for (i = 0; i < c->n_auths; i++) {
		if (!strcmp(c->auths[i].file, file)) {
			*ref = (uint32_t)i + 1;
			return 0;
		}
	}
	if (token_read(file, &token, &mode, why, whylen))
		return -1;
	cfg_secret_check_mode(c, "the token file", file, mode);
	grown = realloc(c->auths, (c->n_auths + 1) * sizeof(*grown));
	if (!grown) {
		explicit_bzero(token, strlen(token));
		free(token);
		return cfg_why(why, whylen, "out of memory");
	}
	c->auths = grown;
	snprintf(grown[c->n_auths].file, sizeof(grown[c->n_auths].file), "%s", file);
	grown[c->n_auths].token = token;
	*ref = (uint32_t)++c->n_auths;
	return 0;
}

void cfg_auths_free(struct steer_auth *a, size_t n)
{
	size_t i;

	for (i = 0; a && i < n; i++) {
		if (a[i].token) {
			explicit_bzero(a[i].token, strlen(a[i].token));
			free(a[i].token);
		}
	}
	free(a);
}
