/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * config.h - smg-steerd's command line and YAML configuration.
 *
 * One entry point parses argv (and the --config file it names) into a
 * struct steer_config. SIGHUP calls it again with the same argv: flags
 * always override the file, and a file that fails to parse leaves the
 * running configuration alone.
 */
#ifndef STEER_CONFIG_H
#define STEER_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/common.h"
#include "loads/loads.h"
#include "policy/policy.h"
#include "xdp/xdp.h"

#define STEER_AUTH_TOKEN_MAX 8192 /* bytes of a bearer token file */

struct steer_backend_cfg {
	struct steer_addr addr;	 /* traffic address */
	struct steer_addr loads; /* where the load is served; defaults to addr */
	char addr_str[STEER_ADDR_STRLEN];
	char loads_str[STEER_ADDR_STRLEN]; /* "A:P", without scheme or path */
	enum steer_scheme loads_scheme;
	/* HTTP only: "/v1/loads", "/metrics" or another path (query allowed);
	 * "" probes /v1/loads?include=core, then /metrics. */
	char loads_path[STEER_LOADS_PATH_MAX];
	int engine;    /* enum steer_engine (loads.h); AUTO by default */
	uint32_t auth; /* auth=bearer:FILE: 1 + index into steer_config.auths; 0: none */
};

/* A bearer token file, read when the configuration is loaded (start, SIGHUP). */
struct steer_auth {
	char file[PATH_MAX];
	char *token; /* the file's first line, trimmed; never logged */
};

/* DNS names, as --backend-dns and the file's backend-dns give them. */
#define STEER_DNS_NAME_MAX 253	  /* bytes of a name, without a trailing dot */
#define STEER_DNS_PER_SERVICE 32  /* backend-dns entries per service */
#define STEER_DNS_SERVERS_MAX 512 /* bytes of --dns-server */
#define STEER_DNS_SPEC_LEN (STEER_DNS_NAME_MAX + 8)

/*
 * Backends found through DNS: --backend-dns
 * NAME:PORT[,loads=[SCHEME://]:PORT[/path]][,engine=E][,auth=bearer:FILE].
 * Each A or AAAA record of name, of the VIP's family, is a backend on port;
 * its load is read from that same address (loads= names no host), as the
 * template says. steer_config_dns_backend() makes one.
 */
struct steer_dns_backend_cfg {
	char name[STEER_DNS_NAME_MAX + 2]; /* as given; a trailing dot is kept */
	char spec[STEER_DNS_SPEC_LEN];	   /* "NAME:PORT", for messages and metrics */
	uint16_t port;			   /* traffic port, host order */
	uint16_t loads_port;		   /* host order; the traffic port without loads= */
	/* loads_scheme, loads_path, engine and auth of every backend it makes;
	 * the addresses are unset. */
	struct steer_backend_cfg tmpl;
};

/* --xdp-encap-src's default: the outer source prefixes, whose host bits come
 * from the flow hash. */
#define STEER_XDP_ENCAP_SRC_DEFAULT "172.16.0.0/16,100::/64"

#define STEER_PEERS_MAX 64   /* --peer addresses, and those --peer-dns names give */
#define STEER_PEER_DNS_MAX 8 /* --peer-dns names */

/* --peer-key FILE: its first line signs this router's reports and verifies
 * the others'; an optional second line (the key being rotated out) only
 * verifies. Secrets: never logged, zeroed before they are freed. */
#define STEER_PEER_KEY_MIN 16 /* bytes of a key: HMAC-SHA256 wants entropy, not length */
#define STEER_PEER_KEY_MAX 256
struct steer_peer_keys {
	size_t len[2]; /* 0: none (only [1] may be 0) */
	unsigned char key[2][STEER_PEER_KEY_MAX];
};

/* A --peer-dns entry: every address NAME resolves to is a router, listening
 * on PORT (a Kubernetes headless Service over the DaemonSet's pods). */
struct steer_peer_dns_cfg {
	char name[STEER_DNS_NAME_MAX + 2]; /* as given; a trailing dot is kept */
	char spec[STEER_DNS_SPEC_LEN];	   /* "NAME:PORT", for messages */
	uint16_t port;			   /* host order */
};

struct steer_service_cfg {
	struct steer_addr vip;
	char vip_str[STEER_ADDR_STRLEN];
	struct steer_backend_cfg *backends; /* the literal ones (--backend) */
	size_t n_backends;
	struct steer_dns_backend_cfg *dns; /* --backend-dns */
	size_t n_dns;
	struct steer_policy policy; /* resolved: flag > service key > top-level key > default */
};

/* Room for the warnings of one load: each a line, "\n"-terminated. */
#define STEER_CONFIG_WARNINGS_MAX 1024

struct steer_config {
	/* What the load accepted but an operator should fix (a secret file that
	 * group or others can read), one line each; logged at start and at each
	 * reload, and listed by --check-config. */
	char warnings[STEER_CONFIG_WARNINGS_MAX];
	/* Attach and pinning. Empty cgroup: the cgroup2 root. */
	char cgroup[PATH_MAX];
	char pin_path[PATH_MAX];
	bool keep_pinned;
	/* --wire-estimator fluid-step: fluid, and a backend is also busy until
	 * the end of its engine step under way, as the gaps between a streamed
	 * response's packets predict it (STEER_TBL_STEP). */
	bool wire_step;
	/* --wire-estimator off: request bytes are not counted at all (the
	 * cgroup_skb programs are not attached, so unsteered sockets pay no
	 * per-packet dispatch); connections keep the flat connect credit. */
	bool wire_off;
	/* --wire-cgroup: the cgroup2 directory the accounting programs attach
	 * to, equal to or below cgroup. Empty: the same as cgroup. */
	char wire_cgroup[PATH_MAX];
	/* --step-probe PATH (probe/probe.h): with fluid-step, one streaming
	 * request of the daemon's own runs on every backend, POSTed to this
	 * path with step_probe_body, so that every step end of its engine shows
	 * even when the clients' responses are not streamed. Empty: off. */
	char step_probe_path[256];
	char step_probe_body[2048]; /* a JSON object (--step-probe-body) */

	/* Polling, nanoseconds. */
	uint64_t interval_ns; /* --load-check-interval, default 1 s */
	uint64_t timeout_ns;  /* --load-timeout, default min(interval / 2, 1 s) */
	uint64_t max_age_ns;  /* --snapshot-max-age, default 3 x interval */

	/* Health. */
	uint32_t unhealthy_after; /* default 3 */
	uint32_t healthy_after;	  /* default 2 */

	enum steer_log_level log_level; /* default info */

	/* Metrics: "ADDR:PORT", default "127.0.0.1:9464"; metrics_enabled false for "off". */
	bool metrics_enabled;
	char metrics_listen[STEER_ADDR_STRLEN];
	struct steer_addr metrics_addr;

	/* DNS discovery: a name is looked up again max(dns_interval, its records'
	 * TTL) after its last answer (see docs/operations.md). */
	uint64_t dns_interval_ns;		 /* --dns-interval, default 5 s */
	char dns_servers[STEER_DNS_SERVERS_MAX]; /* --dns-server; "": /etc/resolv.conf */

	/* XDP ingress (xdp/xdp.h): --xdp-dev (repeatable; none: no XDP),
	 * --xdp-mode, --xdp-encap-src (as given, and parsed). */
	char xdp_devs[STEER_XDP_DEVS_MAX][STEER_IFNAME_LEN];
	size_t n_xdp_devs;
	enum steer_xdp_mode xdp_mode;
	char xdp_encap_src[128];
	struct steer_xdp_cfg xdp_encap;

	/* Other routers (peer/peer.h): --peer (repeatable, or a comma-separated
	 * list), where each gets this router's reports; --peer-listen, where
	 * theirs arrive (UDP); --peer-interval, how often this router reports;
	 * --peer-timeout, how long a silent router's work still counts. */
	struct steer_addr peers[STEER_PEERS_MAX];
	char peer_strs[STEER_PEERS_MAX][STEER_ADDR_STRLEN];
	size_t n_peers;
	/* --peer-dns (repeatable, or a comma-separated list): names whose
	 * addresses are routers too, looked up like --backend-dns names. */
	struct steer_peer_dns_cfg peer_dns[STEER_PEER_DNS_MAX];
	size_t n_peer_dns;
	bool peer_listen_set;
	struct steer_addr peer_listen;
	char peer_listen_str[STEER_ADDR_STRLEN];
	uint64_t peer_interval_ns; /* default 1 ms */
	uint64_t peer_timeout_ns;  /* default 1 s */
	/* --peer-push: a request sent here wakes the peer thread, which reports
	 * it at once rather than at the next interval (default off).
	 * --peer-phase off: no random phase in the table (default on). */
	bool peer_push;
	bool peer_no_phase;
	/* --peer-key: the file ("" none), and the keys read from it at each load. */
	char peer_key_file[PATH_MAX];
	struct steer_peer_keys *peer_keys; /* NULL without --peer-key */

	char config_path[PATH_MAX]; /* --config, empty when none */
	bool check_only;	    /* --check-config: validate, report, exit */

	struct steer_service_cfg *services;
	size_t n_services;

	struct steer_auth *auths; /* distinct auth= files, shared by their backends */
	size_t n_auths;
};

/* Whether the routers share their work: --peer or --peer-dns given. */
static inline bool steer_config_peers_on(const struct steer_config *c)
{
	return c->n_peers > 0 || c->n_peer_dns > 0;
}

enum steer_config_rc {
	STEER_CONFIG_OK = 0,
	STEER_CONFIG_EXIT = 1,	/* --help or --version printed to stdout: exit 0 */
	STEER_CONFIG_USAGE = 2, /* invalid: one line in err; exit code 2 */
};

/*
 * Parse the command line and the config file it names. On STEER_CONFIG_USAGE
 * err holds one line naming the flag (or file:line and key) and the accepted
 * range, e.g. "--least-load-default-throughput: must be a finite number > 0
 * (tokens/s), got '0'" or "steer.yaml:7: unknown key 'bakends' in service".
 * out is only written on success. out must be released with steer_config_free.
 */
enum steer_config_rc steer_config_load(int argc, char *const argv[], struct steer_config *out,
				       char *err, size_t errlen);
/* Frees what steer_config_load allocated; the tokens and keys are zeroed first. */
void steer_config_free(struct steer_config *c);

/*
 * --check-config's report: "configuration ok: ...", then each service and
 * each backend with its load scheme, load address (and path), engine and
 * "auth: FILE". Never a token.
 */
void steer_config_summary(FILE *f, const struct steer_config *c);
/* Calls fn once per warning of c (see steer_config.warnings), in order. */
void steer_config_each_warning(const struct steer_config *c,
			       void (*fn)(const char *line, void *arg), void *arg);

/*
 * The backend that the resolved address ip (port ignored) of e makes: the
 * traffic port of e, and the load read from ip as e's template says.
 * 0, or -1 with the reason in why when ip cannot be a backend
 * (unspecified, multicast or broadcast).
 */
int steer_config_dns_backend(const struct steer_dns_backend_cfg *e, const struct steer_addr *ip,
			     struct steer_backend_cfg *out, char *why, size_t whylen);

/* "250ms", "2s", "1.5s", "1m" (also "us", "ns", "h") -> ns; -1 when invalid or <= 0. */
int steer_parse_duration(const char *s, uint64_t *ns);

/* ---- The options ---------------------------------------------------------------
 *
 * Every option of smg-steerd is described once, in a table (options.c): the
 * command line, the file's keys and the checks of the values read it, --help
 * is printed from it, and tools/man/ writes the man page's OPTIONS from it.
 */

/* What a SIGHUP does with a changed value. */
enum steer_option_reload {
	STEER_RELOAD_YES,     /* applied */
	STEER_RELOAD_RESTART, /* the running value stays until a restart */
	STEER_RELOAD_NA,      /* not a setting: --help, --check-config... */
};

/* Where the --config file takes the option. */
enum steer_option_scope {
	STEER_KEY_NONE,	   /* nowhere: a flag only */
	STEER_KEY_TOP,	   /* a top-level key */
	STEER_KEY_SERVICE, /* a key of each service */
	STEER_KEY_BOTH,	   /* a top-level key, and each service's (the policy) */
};

struct steer_option {
	const char *name; /* the flag without "--" */
	char short_name;  /* -h; 0: none */
	const char *arg;  /* the value's placeholder; NULL: the flag takes none */
	const char *def;  /* the default, as text; NULL: none */
	/* The values accepted, as text; NULL when the help says it. */
	const char *bounds;
	/* What it does: lower case, no final period. '\n' starts a new line,
	 * for the few that need several. */
	const char *help;
	const char *key; /* the file's key; NULL with STEER_KEY_NONE */
	enum steer_option_scope scope;
	enum steer_option_reload reload;
	const char *reload_note; /* what a SIGHUP does besides, or NULL */
	unsigned section;	 /* steer_config_section(section) */
};

/* A group of options in --help and the man page. */
struct steer_option_section {
	const char *title;
	const char *note; /* lower case, or NULL */
};

/* The options in --help order; NULL past the last. */
const struct steer_option *steer_config_option(size_t i);
/* The sections, in order; NULL past the last. */
const struct steer_option_section *steer_config_section(size_t i);

/* Prints the --help text to f. */
void steer_config_usage(FILE *f);

#endif /* STEER_CONFIG_H */
