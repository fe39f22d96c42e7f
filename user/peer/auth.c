// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * auth.c - --peer-key: the reports between routers signed and checked
 * with HMAC-SHA256 (OpenSSL's libcrypto). The encoding and why it is this
 * one are in docs/algorithm.md, "Several routers". In short: the sender packs its report
 * with sent_unix_ns (its CLOCK_REALTIME), then appends field 15, auth_tag,
 * the MAC of every byte before it, so that the datagram is still a valid
 * Report that unkeyed routers read as before. A keyed receiver checks the
 * tag over the exact bytes it received, with its key and then the previous
 * one, before it unpacks anything; then it drops reports that are too old or
 * that replay a router's earlier ones (peer_auth_admit).
 *
 * The keys live in libcrypto's contexts, which zero them when freed; the
 * configuration's copy is zeroed by peer_key.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>

#include "common/common.h"
#include "peer_int.h"

#define TAG_LEN 32		  /* SHA-256 */
#define TRAILER_LEN (2 + TAG_LEN) /* the field's key, its length, the tag */
#define TAG_KEY ((15 << 3) | 2)	  /* field 15, length-delimited: 0x7a */

struct peer_auth {
	EVP_MAC *alg;
	/* Each key's context, keyed once and started again for each report
	 * (mac). [0] signs and verifies, [1] (NULL: none) only verifies. */
	EVP_MAC_CTX *key[2];
};

static uint64_t unix_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- Keys ------------------------------------------------------------------- */

static EVP_MAC_CTX *key_ctx(EVP_MAC *alg, const unsigned char *key, size_t len)
{
	OSSL_PARAM params[] = {
		OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
		OSSL_PARAM_construct_end(),
	};
	EVP_MAC_CTX *c = EVP_MAC_CTX_new(alg);

	if (c && EVP_MAC_init(c, key, len, params) == 1)
		return c;
	EVP_MAC_CTX_free(c);
	return NULL;
}

void peer_auth_free(struct peer_auth *a)
{
	if (!a)
		return;
	EVP_MAC_CTX_free(a->key[0]);
	EVP_MAC_CTX_free(a->key[1]);
	EVP_MAC_free(a->alg);
	free(a);
}

int peer_auth_new(const struct steer_peer_keys *k, struct peer_auth **out)
{
	struct peer_auth *a;
	int i;

	*out = NULL;
	if (!k)
		return 0;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->alg = EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL);
	for (i = 0; i < 2 && a->alg; i++) {
		if (k->len[i])
			a->key[i] = key_ctx(a->alg, k->key[i], k->len[i]);
	}
	if (!a->key[0] || (k->len[1] && !a->key[1])) {
		peer_auth_free(a);
		return -EIO; /* libcrypto has no HMAC-SHA256, or no memory */
	}
	*out = a;
	return 0;
}

int steer_peer_set_keys(struct steer_peer *p, const struct steer_peer_keys *k)
{
	struct peer_auth *a, *old;
	int rc = peer_auth_new(k, &a);

	if (rc)
		return rc;
	pthread_mutex_lock(&p->mu);
	old = p->next_auth; /* handed over before, not taken yet */
	p->next_auth = a;
	p->next_auth_ready = true;
	pthread_mutex_unlock(&p->mu);
	peer_auth_free(old);
	return 0;
}

void peer_auth_take(struct steer_peer *p)
{
	struct peer_auth *a;

	pthread_mutex_lock(&p->mu);
	if (!p->next_auth_ready) {
		pthread_mutex_unlock(&p->mu);
		return;
	}
	a = p->next_auth;
	p->next_auth = NULL;
	p->next_auth_ready = false;
	p->st.keyed = a != NULL;
	pthread_mutex_unlock(&p->mu);
	peer_auth_free(p->auth);
	p->auth = a;
}

/* ---- Signing ------------------------------------------------------------------ */

/* The context is keyed once; EVP_MAC_init with no key starts a new MAC with
 * that key, with no allocation (a copy per report cost a malloc and three
 * digest contexts: 0.65-0.84 us against 0.47 on the test VM).
 * Only the peer thread uses it. */
static bool mac(EVP_MAC_CTX *key, const uint8_t *buf, size_t len, unsigned char *out)
{
	size_t n = 0;

	return EVP_MAC_init(key, NULL, 0, NULL) == 1 && EVP_MAC_update(key, buf, len) == 1 &&
	       EVP_MAC_final(key, out, &n, TAG_LEN) == 1 && n == TAG_LEN;
}

void peer_auth_stamp(const struct steer_peer *p, SmgSteer__Peer__Report *m)
{
	m->sent_unix_ns = p->auth ? unix_ns() : 0;
}

/* buf has room: a report is far below the receive buffer (MAX_DATAGRAM). */
size_t peer_auth_sign(struct steer_peer *p, uint8_t *buf, size_t len)
{
	if (!p->auth)
		return len;
	if (!mac(p->auth->key[0], buf, len, buf + len + 2)) {
		if (!p->auth_sign_failed++)
			log_error("peer: libcrypto could not sign a report; it is not sent (and no "
				  "later one that fails)");
		return 0;
	}
	buf[len] = TAG_KEY;
	buf[len + 1] = TAG_LEN;
	return len + TRAILER_LEN;
}

/* ---- Checking ------------------------------------------------------------------ */

/* Counted; a warning at most every PEER_WARN_EVERY_NS per reason, naming the
 * sender (a flood of forgeries cannot flood the log). */
static bool refuse(struct steer_peer *p, const struct steer_addr *from, enum steer_peer_refusal why,
		   const char *what)
{
	char addr[STEER_ADDR_STRLEN];
	uint64_t held;

	pthread_mutex_lock(&p->mu);
	p->st.refused[why]++;
	pthread_mutex_unlock(&p->mu);
	if (!steer_log_limit_pass(&p->auth_warn[why], peer_mono_ns(), PEER_WARN_EVERY_NS, 1, &held))
		return false;
	log_warn("peer: dropped a report from %s: %s (--peer-key; %llu more dropped for this "
		 "reason since its last warning)",
		 steer_addr_format(from, addr, sizeof(addr)), what, (unsigned long long)held);
	return false;
}

bool peer_auth_verify(struct steer_peer *p, const struct steer_addr *from, const uint8_t *buf,
		      size_t *len)
{
	unsigned char tag[TAG_LEN];
	size_t n = *len, body = n - TRAILER_LEN;
	int i;

	if (!p->auth)
		return true;
	if (n >= TRAILER_LEN && buf[body] == TAG_KEY && buf[body + 1] == TAG_LEN) {
		for (i = 0; i < 2 && p->auth->key[i]; i++) {
			if (mac(p->auth->key[i], buf, body, tag) &&
			    !CRYPTO_memcmp(tag, buf + body + 2, TAG_LEN)) {
				*len = body;
				return true;
			}
		}
	}
	return refuse(p, from, STEER_PEER_REFUSED_AUTH,
		      "its tag is missing or not made by this router's keys (a router without "
		      "--peer-key, another key, or a forgery)");
}

static const struct remote *remote_at(const struct steer_peer *p, const struct steer_addr *from)
{
	size_t i;

	for (i = 0; i < p->n_remotes; i++)
		if (steer_addr_equal(&p->remotes[i].from, from))
			return &p->remotes[i];
	return NULL;
}

/* A router's report from one address that another address sends too: a
 * copy sent from elsewhere, which would count its work twice. */
static bool reports_elsewhere(const struct steer_peer *p, const struct steer_addr *from,
			      uint64_t router)
{
	size_t i;

	for (i = 0; i < p->n_remotes; i++) {
		const struct remote *q = &p->remotes[i];

		if (q->live && q->router == router && !steer_addr_equal(&q->from, from))
			return true;
	}
	return false;
}

/*
 * The tag says a router with the key made the report, not when nor for whom:
 * a recorded one can be sent again. Refused: one sent 30 s or more from this
 * router's clock (an earlier instance's); one that names a router live at
 * another address; one of an earlier router from the address of its live
 * successor (older than what the successor said); and one of a router that
 * fell silent, sent again from its own address (its sequence is behind).
 * From another address that last one passes: the case docs/algorithm.md, "Several routers"
 * leaves open, bounded by the 30 s window and --peer-timeout.
 */
bool peer_auth_admit(struct steer_peer *p, const struct steer_addr *from,
		     const SmgSteer__Peer__Report *m)
{
	uint64_t now = unix_ns();
	const struct remote *r;
	char what[160];

	if (!p->auth)
		return true;
	if (!m->sent_unix_ns)
		return refuse(p, from, STEER_PEER_REFUSED_STALE, "it has no send time");
	if ((m->sent_unix_ns > now ? m->sent_unix_ns - now : now - m->sent_unix_ns) >=
	    PEER_REPORT_TTL_NS) {
		snprintf(what, sizeof(what),
			 "it was sent %.1f s from this router's clock (30 s at most: a replay, "
			 "or clocks that disagree)",
			 ((double)m->sent_unix_ns - (double)now) / 1e9);
		return refuse(p, from, STEER_PEER_REFUSED_STALE, what);
	}
	if (reports_elsewhere(p, from, m->router)) {
		snprintf(what, sizeof(what), "router %016llx reports from another address",
			 (unsigned long long)m->router);
		return refuse(p, from, STEER_PEER_REFUSED_REPLAY, what);
	}
	r = remote_at(p, from);
	if (r && r->live && r->router && r->router != m->router && m->sent_unix_ns <= r->unix_ns)
		return refuse(p, from, STEER_PEER_REFUSED_STALE,
			      "an earlier router's report, older than its successor's");
	if (r && !r->live && r->router == m->router && m->seq < r->next_seq)
		return refuse(p, from, STEER_PEER_REFUSED_REPLAY,
			      "a report sent again, from before its router fell silent");
	return true;
}

int peer_auth_open(struct steer_peer *p, const struct steer_peer_keys *k, char *err, size_t errlen)
{
	int rc = peer_auth_new(k, &p->auth);

	/* Without a key too: a reload may bring one once privileges are gone. */
	if (!k)
		EVP_MAC_free(EVP_MAC_fetch(NULL, OSSL_MAC_NAME_HMAC, NULL));
	if (rc)
		return steer_seterr(err, errlen, rc,
				    "--peer-key: libcrypto cannot compute HMAC-SHA256 (%s)",
				    strerror(-rc));
	p->st.keyed = p->auth != NULL;
	return 0;
}
