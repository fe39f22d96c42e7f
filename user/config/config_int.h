/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * config_int.h - what the parts of the configuration loader share; private
 * to user/config (the interface is config.h).
 *
 *   config.c     entry point, defaults, resolution
 *   options.c    the table of options: names, help, file keys, bounds, and
 *                the parser of each (the one list of them)
 *   cli.c        the command line (getopt_long) and --help
 *   yaml.c       the --config file (libyaml)
 *   service.c    the services being assembled, and the checks across them
 *   dns.c        backends found through DNS (--backend-dns), --dns-interval,
 *                --dns-server
 *   backend.c    one backend: ADDR:PORT[,loads=...][,engine=...][,auth=...]
 *   auth.c       auth=bearer:FILE token files
 *   peer.c       the options of several routers; peer_key.c --peer-key FILE
 *   probe.c      the step probe's options; wire.c --wire-cgroup; xdp.c XDP
 *   values.c     errors, scalars, durations, bounds, the layers
 *   addr.c       addresses and paths that cannot be right
 *
 * Each calls only the ones listed after it, but for the table, which names
 * the parsers of the others.
 *
 * Options come from up to three layers: built-in defaults, the --config
 * file and the flags. Each layer is parsed on its own into a "layer" that
 * remembers which options it set; resolution then applies defaults < file <
 * flags, and for the policy knobs of a service defaults < file top level <
 * service keys < flags.
 */
#ifndef STEER_CONFIG_INT_H
#define STEER_CONFIG_INT_H

#include <sys/types.h>

#include "config/config.h"

#define NS_PER_US 1000ULL
#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
#define WHY_LEN 512

/*
 * Bounds of the options, for the table (options.c); docs/operations.md
 * gives the reasons. The interval: below 10 ms a poll round (a network round
 * trip per backend) cannot finish before the next starts; above 1 h loads are
 * too old to steer by. The timeout: at most the interval (checked apart). The
 * max age: above the interval (checked apart), at most a day. Health counts:
 * 1000 failed polls is already ~17 min at 1 s; more means health checks off.
 */
#define CFG_INTERVAL_MIN_NS (10 * NS_PER_MS)
#define CFG_INTERVAL_MAX_NS (3600 * NS_PER_S)
#define CFG_TIMEOUT_MIN_NS NS_PER_MS
#define CFG_TIMEOUT_MAX_NS (3600 * NS_PER_S)
#define CFG_MAX_AGE_MIN_NS (10 * NS_PER_MS)
#define CFG_MAX_AGE_MAX_NS (24 * 3600 * NS_PER_S)
#define CFG_HEALTH_COUNT_MAX 1000
/* DNS: below 100 ms a look-up (a round trip, up to 2 tries of 1 s when the
 * server is slow) would not end before the next is due; above 1 h workers
 * that come and go would wait too long to be found. */
#define CFG_DNS_INTERVAL_MIN_NS (100 * NS_PER_MS)
#define CFG_DNS_INTERVAL_MAX_NS (3600 * NS_PER_S)
/* Between routers: up to 10 s, since with --peer-push the ticks carry little
 * more than liveness; a silent router is forgotten within a minute. */
#define CFG_PEER_INTERVAL_MIN_NS (100 * NS_PER_US)
#define CFG_PEER_INTERVAL_MAX_NS (10 * NS_PER_S)
#define CFG_PEER_TIMEOUT_MIN_NS NS_PER_MS
#define CFG_PEER_TIMEOUT_MAX_NS (60 * NS_PER_S)
#define BACKEND_SYNTAX                                                                             \
	"ADDR:PORT[,loads=[grpc://|http://]ADDR:PORT[/path]][,engine=auto|sglang|vllm|tokenspeed]" \
	"[,auth=bearer:FILE]"
#define BACKEND_DNS_SYNTAX                                                                     \
	"NAME:PORT[,loads=[grpc://|http://]:PORT[/path]][,engine=auto|sglang|vllm|tokenspeed]" \
	"[,auth=bearer:FILE]"

/* ---- The table of options (options.c) ------------------------------------------ */

enum knob {
	KNOB_WEIGHT,
	KNOB_THROUGHPUT,
	KNOB_PREFILL,
	KNOB_PEERS,
	KNOB_BYTES_PER_TOKEN,
	KNOB_OVERLOAD_PROTECTION,
	KNOB_OVERLOAD_TOKEN_USAGE,
	KNOB_OVERLOAD_WAITING,
	KNOB_OVERLOAD_WAIT,
	KNOB_OVERLOAD_CONNECTIONS,
	KNOB_OVERLOAD_LEAST,
	KNOB_AFFINITY,
	KNOB_AFFINITY_SLACK,
	KNOB_AFFINITY_TIMEOUT,
	N_KNOBS,
};

/* What an option sets: a global option a layer records (below N_OPTS), a
 * policy knob, or what a flag of its own does. */
enum opt {
	OPT_CGROUP,
	OPT_PIN_PATH,
	OPT_KEEP_PINNED,
	OPT_INTERVAL,
	OPT_TIMEOUT,
	OPT_MAX_AGE,
	OPT_UNHEALTHY,
	OPT_HEALTHY,
	OPT_LOG_LEVEL,
	OPT_METRICS,
	OPT_DNS_INTERVAL,
	OPT_DNS_SERVER,
	OPT_WIRE_ESTIMATOR,
	OPT_WIRE_CGROUP,
	OPT_XDP_DEV,
	OPT_XDP_MODE,
	OPT_XDP_ENCAP_SRC,
	OPT_PEER,
	OPT_PEER_LISTEN,
	OPT_PEER_INTERVAL,
	OPT_PEER_TIMEOUT,
	OPT_PEER_PUSH,
	OPT_PEER_PHASE,
	OPT_PEER_DNS,
	OPT_PEER_KEY,
	OPT_STEP_PROBE,
	OPT_STEP_PROBE_BODY,
	N_OPTS,
	OPT_KNOB = N_OPTS, /* a policy knob (struct cfg_option.knob) */
	OPT_VIP,
	OPT_BACKEND,
	OPT_BACKEND_DNS,
	OPT_CONFIG,
	OPT_CHECK_CONFIG,
	OPT_HELP,
	OPT_VERSION,
};

/* How a value is read. */
enum value_kind {
	VALUE_NONE,	/* the flag does what cli.c says */
	VALUE_PARSE,	/* the option's own parser */
	VALUE_DURATION, /* a duration within [min, max] ns, a uint64_t */
	VALUE_COUNT,	/* an integer within [min, max], a uint32_t */
	VALUE_KNOB,	/* a policy knob within [min, max] */
};

/* What a policy knob's field holds. */
enum knob_type {
	KNOB_NUMBER,   /* a double, or a uint32_t integer (by the field's size) */
	KNOB_DURATION, /* a uint64_t of ns, written like the durations; 0 too
			* when min is 0 */
	KNOB_SWITCH,   /* a bool: the flag takes no value, the file true or false */
	KNOB_CHOICE,   /* one of the words: a bool (choices[0] false, choices[1]
			* true), or a uint32_t of the word's index */
};

typedef int (*opt_parser)(const char *v, struct steer_config *dst, char *why, size_t whylen);

/* One option: what --help and the man page say of it, and how it is read. */
struct cfg_option {
	struct steer_option doc;
	enum opt opt;
	enum value_kind kind;
	opt_parser parse; /* VALUE_PARSE; v is NULL for a flag without value */
	enum knob knob;	  /* VALUE_KNOB */
	enum knob_type knob_type;
	const char *const *choices; /* KNOB_CHOICE: the words, NULL-terminated */
	bool above_min;		    /* VALUE_KNOB: the value must be over min, not at it */
	/* Where the value goes, in struct steer_config (in struct steer_policy
	 * for a knob): a layer that set the option copies these bytes. */
	size_t field, size;
	uint64_t min, max; /* VALUE_DURATION (ns), VALUE_COUNT, VALUE_KNOB */
	/* VALUE_COUNT: the unit ("consecutive good polls"); VALUE_KNOB: what
	 * the value must be ("an integer from 1 to 1024 (tokens)"). */
	const char *what;
	bool def_is_value; /* doc.def is the built-in default, parsed as a value */
};

#define CFG_N_OPTIONS 48
extern const struct cfg_option cfg_options[CFG_N_OPTIONS];

/* The option of a file key (service: a service's key, else a top-level
 * one), NULL when there is none; the option that sets o. */
const struct cfg_option *cfg_option_by_key(const char *key, bool service);
const struct cfg_option *cfg_option_of(enum opt o);

/* Policy knobs set by one source (flags, top level or one service). */
struct knob_layer {
	bool set[N_KNOBS];
	struct steer_policy p;
};

/* The options one source (the flags or the file's top level) set. */
struct layer {
	bool set[N_OPTS];
	int line[N_OPTS]; /* file line, for checks made after parsing; 0 for flags */
	struct steer_config v;
	struct knob_layer knobs;
};

/* ---- XDP ingress options (xdp.c) ---------------------------------------- */

int cfg_parse_xdp_dev(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_xdp_mode(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_xdp_encap_src(const char *v, struct steer_config *dst, char *why, size_t whylen);

/* ---- Other routers (peer.c) -------------------------------------------- */

struct ctx;

int cfg_parse_peer(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_peer_listen(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_peer_push(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_peer_phase(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_peer_dns(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_peer_key(const char *v, struct steer_config *dst, char *why, size_t whylen);
/* Between options: a listen address with peers, the timeout above the
 * interval, the request accounting on. */
int cfg_check_peers(struct ctx *c);
/* Per service, once resolved: peer-routers 1 with --peer (the other routers'
 * work is reported, not guessed). */
int cfg_check_service_peers(struct ctx *c, struct steer_service_cfg *s);
/* --check-config's line. */
void cfg_peer_summary(FILE *f, const struct steer_config *c);
/* peer_key.c: --peer-key's file, read into c->out.peer_keys (0, or
 * STEER_CONFIG_USAGE naming the option); and the keys zeroed and freed. */
int cfg_peer_key_load(struct ctx *c);
void cfg_peer_keys_free(struct steer_peer_keys *k);

/* ---- The step probe (probe.c) ------------------------------------------ */

void cfg_probe_defaults(struct steer_config *cfg);
int cfg_parse_step_probe(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_step_probe_body(const char *v, struct steer_config *dst, char *why, size_t whylen);
/* Between options: the probe needs fluid-step, a body needs the probe. */
int cfg_check_probe(struct ctx *c);
void cfg_probe_summary(FILE *f, const struct steer_config *c);

/* Between options (values.c): "--NAME" or "FILE:LINE: NAME", whichever
 * gave the option, in buf; and whether it was given at all. */
const char *cfg_origin(struct ctx *c, enum opt o, char *buf, size_t len);
bool cfg_given(const struct ctx *c, enum opt o);

/* ---- Request accounting's cgroup (wire.c) ------------------------------- */

int cfg_parse_wire_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen);

/* ---- One service being assembled ------------------------------------------- */

struct service_draft {
	struct steer_service_cfg cfg; /* policy is resolved at the end */
	struct knob_layer knobs;      /* the service's own keys */
	int line;		      /* 0 for the flags' service */
};

/* One call of steer_config_load: everything it allocates hangs from here. */
struct ctx {
	char *err;
	size_t errlen;
	char config_path[PATH_MAX];
	struct layer flags, top;
	bool flag_vip_given;
	bool check_only;	       /* --check-config */
	struct service_draft flag_svc; /* --vip and --backend */
	struct service_draft *svcs;    /* from the file, then merged with flag_svc */
	size_t n_svcs;
	struct steer_auth *auths; /* token files read so far (auth.c) */
	size_t n_auths;
	/* Kept apart from out, which is reset when the globals are resolved. */
	char warnings[STEER_CONFIG_WARNINGS_MAX];
	struct steer_config out;
};

/* ---- service.c ------------------------------------------------------ */

/* A VIP: an address connections can be made to. */
int cfg_vip_parse(const char *v, struct steer_addr *vip, char *why, size_t whylen);
void cfg_draft_free(struct service_draft *d);
void cfg_draft_set_vip(struct service_draft *d, const struct steer_addr *vip);
int cfg_backend_add(struct service_draft *d, const struct steer_backend_cfg *b, char *why,
		    size_t whylen);
int cfg_backend_check_family(const struct service_draft *d, const struct steer_backend_cfg *b,
			     const char *vip_label, char *why, size_t whylen);
ssize_t cfg_service_find(const struct ctx *c, const struct steer_addr *vip);
struct service_draft *cfg_service_append(struct ctx *c);
/* Addresses that clash across services: a VIP that is a backend or a loads=. */
int cfg_services_check(struct ctx *c);

/* ---- values.c: errors, values, bounds, the layers ---------------------- */

/*
 * Errors. A function that fails for its caller to say where writes the
 * reason into why (whylen bytes) and returns -1; one that has the context
 * writes the whole line with cfg_fail and returns STEER_CONFIG_USAGE.
 */
/* Writes the one-line reason into c->err and returns STEER_CONFIG_USAGE. */
int cfg_fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the reason into why and returns -1. */
int cfg_why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A warning line for the operator (no newline in fmt's result); one that
 * does not fit is dropped. */
void cfg_warn(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Up to cap bytes of a secret file into buf[cap + 1], and its permission
 * bits into *mode (auth.c). */
int cfg_secret_read(const char *file, char *buf, size_t cap, bool first_line, size_t *len,
		    unsigned int *mode, char *why, size_t whylen);
/* Warns when group or others can read the secret file (what: "the token
 * file", "the --peer-key file"). */
void cfg_secret_check_mode(struct ctx *c, const char *what, const char *file, unsigned int mode);

/* true/yes/on or false/no/off, any case: 0, else -1. */
int cfg_parse_bool(const char *s, bool *out);
/* The parsers of the general options, for the table. */
int cfg_parse_cgroup(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_pin_path(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_keep_pinned(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_log_level(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_wire_estimator(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_metrics(const char *v, struct steer_config *dst, char *why, size_t whylen);
int cfg_parse_dns_server(const char *v, struct steer_config *dst, char *why, size_t whylen);
/* A global option's value into cfg, or -1 with the reason in why. */
int cfg_value_parse(const struct cfg_option *o, const char *v, struct steer_config *cfg, char *why,
		    size_t whylen);
/* Parses v into the layer; line is the file line (0 for a flag). */
int cfg_option_parse(const struct cfg_option *o, const char *v, struct layer *l, int line,
		     char *why, size_t whylen);
/* Parses one knob's value into kl. */
int cfg_knob_parse(const struct cfg_option *o, const char *v, struct knob_layer *kl, char *why,
		   size_t whylen);
void cfg_knobs_apply(struct steer_policy *dst, const struct knob_layer *kl);
/* The built-in defaults of the options whose default is a value. */
void cfg_defaults_apply(struct steer_config *cfg);
/* Copies the options the layer set into dst. */
void cfg_layer_apply(struct steer_config *dst, const struct layer *l);
/* The checks between options, once the layers are resolved into c->out. */
int cfg_check_timing(struct ctx *c);
/* --wire-cgroup within --cgroup, and not with --wire-estimator off (wire.c). */
int cfg_check_wire_cgroup(struct ctx *c);

/* ---- backend.c ------------------------------------------------------ */

/* The flag's form (and a backend scalar's), BACKEND_SYNTAX. */
int cfg_backend_parse(struct ctx *c, const char *spec, struct steer_backend_cfg *b, char *why,
		      size_t whylen);
/* The keys after a backend's address (or a DNS name) in the flag's form:
 * loads, engine, auth. cfg_field_split cuts "key=value" at '=', checks the
 * key is one of them and not given before (seen[] marks those given), and
 * points *value after the '='. 0, or -1 with the reason in why. */
#define CFG_N_FIELD_KEYS 3
int cfg_field_split(char *field, bool *seen, const char **value, char *why, size_t whylen);
/* The mapping form: the address first (it resets b), then each other key. */
int cfg_backend_address(const char *v, struct steer_backend_cfg *b, char *why, size_t whylen);
int cfg_backend_key(struct ctx *c, struct steer_backend_cfg *b, const char *key, const char *v,
		    char *why, size_t whylen);
/* The accepted form of a key's value, for messages; NULL when its messages say it. */
const char *cfg_backend_key_form(const char *key);
const char *cfg_engine_name(int engine);
const char *cfg_scheme_name(enum steer_scheme s);

/* The scheme at the start of a loads= value (none: gRPC), and an HTTP path's check. */
int cfg_loads_scheme(const char *v, enum steer_scheme *scheme, const char **rest, char *why,
		     size_t whylen);
int cfg_loads_path_check(const char *path, char *why, size_t whylen);

/* ---- dns.c ---------------------------------------------------------- */

/* The flag's form (and a backend-dns scalar's), BACKEND_DNS_SYNTAX. */
int cfg_dns_parse(struct ctx *c, const char *spec, struct steer_dns_backend_cfg *e, char *why,
		  size_t whylen);
/* The mapping form: NAME:PORT first (it resets e), then each other key. */
int cfg_dns_target(const char *v, struct steer_dns_backend_cfg *e, char *why, size_t whylen);
int cfg_dns_key(struct ctx *c, struct steer_dns_backend_cfg *e, const char *key, const char *v,
		char *why, size_t whylen);
/* Appends e unless the service lists it already or has STEER_DNS_PER_SERVICE. */
int cfg_dns_add(struct service_draft *d, const struct steer_dns_backend_cfg *e, char *why,
		size_t whylen);
/* --check-config's lines: the discovery settings, and each entry of a service. */
void cfg_dns_summary(FILE *f, const struct steer_config *c, const struct steer_service_cfg *s);

/* ---- auth.c --------------------------------------------------------- */

/* Reads file's token (unless read already) and sets *ref to 1 + its index. */
int cfg_auth_add(struct ctx *c, const char *file, uint32_t *ref, char *why, size_t whylen);
/* Zeroes and frees the tokens, then the array. */
void cfg_auths_free(struct steer_auth *a, size_t n);

/* ---- cli.c, yaml.c ------------------------------------------- */

int cfg_flags_parse(struct ctx *c, int argc, char *const argv[]);
int cfg_file_parse(struct ctx *c);

/* ---- addr.c ------------------------------------------------------------ */

/* steer_addr_parse, and a port in plain decimal: no sign, no leading zero. */
int cfg_addr_parse(const char *s, struct steer_addr *out, char *why, size_t whylen);
/* Not unspecified, multicast or broadcast; role names it ("a backend"). */
int cfg_addr_check_usable(const struct steer_addr *a, const char *role, char *why, size_t whylen);
/* A listener: the unspecified address is fine, multicast and broadcast are not. */
int cfg_addr_check_listen(const struct steer_addr *a, char *why, size_t whylen);
/* --dns-server: "ADDR[:PORT][,ADDR[:PORT]]..." (IPv6 bracketed when a port
 * follows) into out as "IPV4:PORT,[IPV6]:PORT,...", port 53 by default. */
int cfg_dns_servers_parse(const char *v, char *out, size_t outlen, char *why, size_t whylen);
/* "" (the root) or an existing cgroup2 directory, by absolute path. */
int cfg_cgroup_check(const char *path, char *why, size_t whylen);

#endif /* STEER_CONFIG_INT_H */
