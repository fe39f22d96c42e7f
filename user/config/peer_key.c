// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peer_key.c - --peer-key FILE: the shared secret that signs and
 * verifies the reports between routers (user/peer/auth.c). Read each time
 * the configuration is loaded (start and SIGHUP), so that a rotated key is
 * picked up by a reload, as auth=bearer:FILE's tokens are (auth.c).
 *
 * The file: the key on its first line; optionally, on the second, the key
 * being rotated out, which still verifies but no longer signs. Each is the
 * line without surrounding blanks (a trailing "\r" too), 16 to 256 bytes.
 * Nothing here or anywhere else quotes a key, and every copy is zeroed
 * before it is freed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "config_int.h"

/* Two lines of the longest keys, their line ends, and room for blank lines
 * and blanks around them: anything longer is not a key file. */
#define KEY_FILE_MAX 1024

struct key_file {
	char b[KEY_FILE_MAX + 2]; /* one byte more: a longer file is seen; and a NUL */
	size_t len;
};

static int key_file_read(const char *file, struct key_file *kf, unsigned int *mode, char *why,
			 size_t whylen)
{
	int rc =
		cfg_secret_read(file, kf->b, sizeof(kf->b) - 1, false, &kf->len, mode, why, whylen);

	if (rc == 0 && kf->len > KEY_FILE_MAX)
		return cfg_why(why, whylen,
			       "%s is larger than %d bytes: expected the key on the first line "
			       "and, optionally, the previous key on the second",
			       file, KEY_FILE_MAX);
	return rc;
}

/* Blanks around a key (not strchr: it would match the NUL byte too). */
static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Line *pos of kf without surrounding blanks, [*a, *b); *pos moves past it. */
static void next_line(const struct key_file *kf, size_t *pos, size_t *a, size_t *b)
{
	const char *nl = memchr(kf->b + *pos, '\n', kf->len - *pos);
	size_t end = nl ? (size_t)(nl - kf->b) : kf->len;

	*a = *pos;
	*b = end;
	*pos = nl ? end + 1 : end;
	while (*a < *b && blank(kf->b[*a]))
		(*a)++;
	while (*b > *a && blank(kf->b[*b - 1]))
		(*b)--;
}

static int key_put(const char *file, const struct key_file *kf, size_t a, size_t b, int line,
		   struct steer_peer_keys *k, char *why, size_t whylen)
{
	size_t n = b - a, i;

	/* A key is a line of text (openssl rand -base64 32): a control byte in
	 * it is a binary file cut at its newlines, weaker than it looks. */
	for (i = a; i < b; i++)
		if ((unsigned char)kf->b[i] < 0x20 && kf->b[i] != '\t')
			return cfg_why(why, whylen,
				       "%s: the %s key (line %d) has a control byte at column %zu: "
				       "a key is one line of text",
				       file, line == 1 ? "first" : "previous", line, i - a + 1);
	if (n < STEER_PEER_KEY_MIN || n > STEER_PEER_KEY_MAX)
		return cfg_why(why, whylen,
			       "%s: the %s key (line %d) has %zu bytes; a key has %d to %d (e.g. "
			       "openssl rand -base64 32)",
			       file, line == 1 ? "first" : "previous", line, n, STEER_PEER_KEY_MIN,
			       STEER_PEER_KEY_MAX);
	memcpy(k->key[line - 1], kf->b + a, n);
	k->len[line - 1] = n;
	return 0;
}

/* The keys of kf: line 1, line 2 when not blank; nothing but blanks after. */
static int keys_parse(const char *file, const struct key_file *kf, struct steer_peer_keys *k,
		      char *why, size_t whylen)
{
	size_t pos = 0, a, b;
	int line;

	next_line(kf, &pos, &a, &b);
	if (a == b)
		return cfg_why(why, whylen, "%s: the first line is empty (expected the key)", file);
	if (key_put(file, kf, a, b, 1, k, why, whylen))
		return -1;
	next_line(kf, &pos, &a, &b);
	if (a < b && key_put(file, kf, a, b, 2, k, why, whylen))
		return -1;
	for (line = 3; pos < kf->len; line++) {
		next_line(kf, &pos, &a, &b);
		if (a < b)
			return cfg_why(why, whylen,
				       "%s: line %d is not blank: the file holds the key and at "
				       "most one previous key",
				       file, line);
	}
	return 0;
}

int cfg_peer_key_load(struct ctx *c)
{
	struct key_file *kf = malloc(sizeof(*kf));
	struct steer_peer_keys *k = calloc(1, sizeof(*k));
	char why[WHY_LEN], where[PATH_MAX + 32];
	unsigned int mode = 0;
	int rc = 0;

	if (!kf || !k)
		rc = cfg_why(why, sizeof(why), "out of memory");
	if (!rc)
		rc = key_file_read(c->out.peer_key_file, kf, &mode, why, sizeof(why));
	if (!rc)
		rc = keys_parse(c->out.peer_key_file, kf, k, why, sizeof(why));
	if (kf)
		explicit_bzero(kf, sizeof(*kf));
	free(kf);
	if (rc) {
		cfg_peer_keys_free(k);
		return cfg_fail(c, "%s: %s", cfg_origin(c, OPT_PEER_KEY, where, sizeof(where)),
				why);
	}
	cfg_secret_check_mode(c, "the --peer-key file", c->out.peer_key_file, mode);
	c->out.peer_keys = k; /* freed with c->out (steer_config_free) */
	return STEER_CONFIG_OK;
}

void cfg_peer_keys_free(struct steer_peer_keys *k)
{
	if (!k)
		return;
	explicit_bzero(k, sizeof(*k));
	free(k);
}
