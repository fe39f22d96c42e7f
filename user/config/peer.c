// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * peer.c - the options of several routers sharing their work
 * (user/peer/peer.c): the parsers of --peer ADDR:PORT (repeatable, or a
 * comma-separated list), --peer-dns NAME:PORT (the same forms), --peer-listen,
 * --peer-push, --peer-phase and --peer-key FILE (its file is read in
 * peer_key.c), and the checks between them; --peer-interval and
 * --peer-timeout are durations of the table (options.c).
 */
#include <string.h>

#include "config_int.h"

/* One address of a --peer list: a router's --peer-listen. */
static int peer_add(const char *p, size_t len, struct steer_config *dst, char *why, size_t whylen)
{
	char text[STEER_ADDR_STRLEN], detail[256];
	struct steer_addr a;
	size_t i;

	if (len == 0 || len >= sizeof(text))
		return cfg_why(why, whylen, "'%.*s' is not ADDR:PORT", (int)len, p);
	memcpy(text, p, len);
	text[len] = 0;
	if (cfg_addr_parse(text, &a, detail, sizeof(detail)) ||
	    cfg_addr_check_usable(&a, "a peer", detail, sizeof(detail)))
		return cfg_why(why, whylen, "%s", detail);
	for (i = 0; i < dst->n_peers; i++)
		if (steer_addr_equal(&dst->peers[i], &a))
			return cfg_why(why, whylen, "peer %s given twice", text);
	if (dst->n_peers == STEER_PEERS_MAX)
		return cfg_why(why, whylen, "at most %d peers", STEER_PEERS_MAX);
	dst->peers[dst->n_peers] = a;
	steer_addr_format(&a, dst->peer_strs[dst->n_peers], STEER_ADDR_STRLEN);
	dst->n_peers++;
	return 0;
}

typedef int (*list_add_fn)(const char *p, size_t len, struct steer_config *dst, char *why,
			   size_t whylen);

/* Each entry of a comma-separated list, given to add; the first error stops. */
static int each_of_list(const char *v, list_add_fn add, struct steer_config *dst, char *why,
			size_t whylen)
{
	const char *p = v;

	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (add(p, len, dst, why, whylen))
			return -1;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

/* Each call adds to the list of its layer: the flag may be repeated. */
int cfg_parse_peer(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return each_of_list(v, peer_add, dst, why, whylen);
}

/* One name of a --peer-dns list: NAME:PORT, checked as --backend-dns's. */
static int peer_dns_add(const char *p, size_t len, struct steer_config *dst, char *why,
			size_t whylen)
{
	struct steer_dns_backend_cfg e;
	char text[STEER_DNS_SPEC_LEN + 8];
	struct steer_peer_dns_cfg *d;
	size_t i;

	if (len == 0 || len >= sizeof(text))
		return cfg_why(why, whylen, "'%.*s' is not NAME:PORT", (int)len, p);
	memcpy(text, p, len);
	text[len] = 0;
	if (cfg_dns_target(text, &e, why, whylen))
		return -1;
	for (i = 0; i < dst->n_peer_dns; i++)
		if (!strcmp(dst->peer_dns[i].spec, e.spec))
			return cfg_why(why, whylen, "peer-dns %s given twice", e.spec);
	if (dst->n_peer_dns == STEER_PEER_DNS_MAX)
		return cfg_why(why, whylen, "at most %d peer-dns names", STEER_PEER_DNS_MAX);
	d = &dst->peer_dns[dst->n_peer_dns++];
	memcpy(d->name, e.name, sizeof(d->name));
	memcpy(d->spec, e.spec, sizeof(d->spec));
	d->port = e.port;
	return 0;
}

/* Each call adds to the list of its layer, like --peer. */
int cfg_parse_peer_dns(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	return each_of_list(v, peer_dns_add, dst, why, whylen);
}

int cfg_parse_peer_listen(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	char detail[256];

	if (cfg_addr_parse(v, &dst->peer_listen, detail, sizeof(detail)) ||
	    cfg_addr_check_listen(&dst->peer_listen, detail, sizeof(detail)))
		return cfg_why(why, whylen, "%s", detail);
	dst->peer_listen_set = true;
	steer_addr_format(&dst->peer_listen, dst->peer_listen_str, sizeof(dst->peer_listen_str));
	return 0;
}

int cfg_parse_peer_push(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (cfg_parse_bool(v, &dst->peer_push))
		return cfg_why(why, whylen, "must be on or off, got '%s'", v);
	return 0;
}

int cfg_parse_peer_phase(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	bool on;

	if (cfg_parse_bool(v, &on))
		return cfg_why(why, whylen, "must be on or off, got '%s'", v);
	dst->peer_no_phase = !on;
	return 0;
}

/* The file is read once the layers are resolved (cfg_check_peers), so that
 * its errors name whichever layer gave it and a flag's file replaces the
 * config file's unread. */
int cfg_parse_peer_key(const char *v, struct steer_config *dst, char *why, size_t whylen)
{
	if (v[0] != '/')
		return cfg_why(why, whylen, "FILE must be an absolute path, got '%s'", v);
	if (strlen(v) >= sizeof(dst->peer_key_file))
		return cfg_why(why, whylen, "the path is longer than %zu bytes",
			       sizeof(dst->peer_key_file) - 1);
	snprintf(dst->peer_key_file, sizeof(dst->peer_key_file), "%s", v);
	return 0;
}

/* Where sharing was asked for: --peer's origin, or --peer-dns's without it. */
static const char *peers_origin(struct ctx *c, char *where, size_t len)
{
	if (c->out.n_peers)
		return cfg_origin(c, OPT_PEER, where, len);
	return cfg_origin(c, OPT_PEER_DNS, where, len);
}

/* A timeout under 3 intervals: the option given names the fix, the timeout
 * when both are. */
static int peer_timing_fail(struct ctx *c)
{
	char where[PATH_MAX + 32], t[32], i[32];

	steer_duration_text(c->out.peer_interval_ns, i, sizeof(i));
	steer_duration_text(c->out.peer_timeout_ns, t, sizeof(t));
	if (cfg_given(c, OPT_PEER_TIMEOUT))
		return cfg_fail(c,
				"%s: must be at least 3 x the peer-interval (%s), got %s: a "
				"router would be forgotten between two of its reports",
				cfg_origin(c, OPT_PEER_TIMEOUT, where, sizeof(where)), i, t);
	return cfg_fail(c,
			"%s: must be at most a third of the peer-timeout (%s), got %s: a router "
			"would be forgotten between two of its reports",
			cfg_origin(c, OPT_PEER_INTERVAL, where, sizeof(where)), t, i);
}

int cfg_check_peers(struct ctx *c)
{
	const struct steer_config *o = &c->out;
	char where[PATH_MAX + 32];
	size_t k;

	if (!steer_config_peers_on(o)) {
		if (cfg_given(c, OPT_PEER_LISTEN) || cfg_given(c, OPT_PEER_INTERVAL) ||
		    cfg_given(c, OPT_PEER_TIMEOUT) || cfg_given(c, OPT_PEER_PUSH) ||
		    cfg_given(c, OPT_PEER_PHASE))
			return cfg_fail(c, "--peer-listen, --peer-interval, --peer-timeout, "
					   "--peer-push and --peer-phase need --peer ADDR:PORT or "
					   "--peer-dns NAME:PORT (the other routers)");
		if (cfg_given(c, OPT_PEER_KEY))
			return cfg_fail(c,
					"%s: needs --peer ADDR:PORT or --peer-dns NAME:PORT (the "
					"routers whose reports it signs and verifies)",
					cfg_origin(c, OPT_PEER_KEY, where, sizeof(where)));
		return STEER_CONFIG_OK;
	}
	if (!o->peer_listen_set)
		return cfg_fail(c,
				"%s: needs --peer-listen ADDR:PORT, where the other routers' "
				"reports arrive",
				peers_origin(c, where, sizeof(where)));
	if (o->wire_off)
		return cfg_fail(c,
				"%s: the routers share the request accounting, which "
				"--wire-estimator off turns off; leave one of them out",
				peers_origin(c, where, sizeof(where)));
	for (k = 0; k < o->n_peers; k++)
		if (steer_addr_equal(&o->peers[k], &o->peer_listen))
			return cfg_fail(c, "%s: %s is this router's own --peer-listen",
					cfg_origin(c, OPT_PEER, where, sizeof(where)),
					o->peer_strs[k]);
	if (o->peer_timeout_ns < 3 * o->peer_interval_ns)
		return peer_timing_fail(c);
	return o->peer_key_file[0] ? cfg_peer_key_load(c) : STEER_CONFIG_OK;
}

int cfg_check_service_peers(struct ctx *c, struct steer_service_cfg *s)
{
	if (!steer_config_peers_on(&c->out))
		return STEER_CONFIG_OK;
	if (s->policy.peer_routers > 1)
		return cfg_fail(c,
				"service %s: peer-routers is %u with --peer: the other routers "
				"report their work, so it must be 1 (their sends would count "
				"twice)",
				s->vip_str, s->policy.peer_routers);
	s->policy.peers_report = true;
	return STEER_CONFIG_OK;
}

void cfg_peer_summary(FILE *f, const struct steer_config *c)
{
	char i[32], t[32];
	size_t k;

	if (!steer_config_peers_on(c))
		return;
	fprintf(f, "  peers: listen %s, report every %s%s, forget after %s, phase %s:",
		c->peer_listen_str, steer_duration_text(c->peer_interval_ns, i, sizeof(i)),
		c->peer_push ? " and at each request" : "",
		steer_duration_text(c->peer_timeout_ns, t, sizeof(t)),
		c->peer_no_phase ? "off" : "on");
	for (k = 0; k < c->n_peers; k++)
		fprintf(f, " %s", c->peer_strs[k]);
	for (k = 0; k < c->n_peer_dns; k++)
		fprintf(f, " dns %s", c->peer_dns[k].spec);
	fputc('\n', f);
	/* The file, never a key. */
	if (c->peer_key_file[0])
		fprintf(f, "  peer key: %s%s\n", c->peer_key_file,
			c->peer_keys && c->peer_keys->len[1]
				? " (and a previous key on line 2, verifying only)"
				: "");
}
