// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * options.c - every option of smg-steerd, once: its name, value, default,
 * bounds, help, file key, what a reload does with it, and how its value is
 * read. getopt_long's options (cli.c), the file's keys (yaml.c), the values'
 * bounds and the layers (values.c), --help and the man page (tools/man/) all
 * come from this table, so that none of them can name an option the others
 * do not know.
 *
 * Help texts are lower case without a final period: --help prints them after
 * the option, the man page as sentences.
 */
#include <stddef.h>
#include <string.h>

#include "config_int.h"

#define STR_(x) #x
#define STR(x) STR_(x)

#define DEFAULT_METRICS_LISTEN "127.0.0.1:9464"

enum section {
	SEC_SERVICES,
	SEC_DNS,
	SEC_DATA_PLANE,
	SEC_XDP,
	SEC_PEERS,
	SEC_POLLING,
	SEC_POLICY,
	SEC_OVERLOAD,
	SEC_AFFINITY,
	SEC_OPERATION,
	N_SECTIONS,
};

static const struct steer_option_section sections[N_SECTIONS] = {
	[SEC_SERVICES] = { "Services",
			   "the command line defines one; --config FILE may define more" },
	[SEC_DNS] = { "DNS discovery", "for --backend-dns and --peer-dns" },
	[SEC_DATA_PLANE] = { "Data plane", NULL },
	[SEC_XDP] = { "XDP ingress",
		      "clients off the node; backends run smg-steerctl decap attach" },
	[SEC_PEERS] = { "Several routers", "each node's smg-steerd tells the others its requests" },
	[SEC_POLLING] = { "Load polling", "durations like 250ms, 2s, 1.5s, 1m; also ns, us, h" },
	[SEC_POLICY] = { "Policy", "also per service in the file, except --wire-estimator" },
	[SEC_OVERLOAD] = { "Overload protection", "also per service in the file; off unless set" },
	[SEC_AFFINITY] = { "Cache affinity", "also per service in the file; off unless set" },
	[SEC_OPERATION] = { "Operation", NULL },
};

/* Where a value goes: the bytes of struct steer_config a layer copies when
 * it set the option. */
#define FIELD(f) \
	.field = offsetof(struct steer_config, f), .size = sizeof(((struct steer_config *)0)->f)
#define FIELDS(first, last)                                                                      \
	.field = offsetof(struct steer_config, first),                                           \
	.size = offsetof(struct steer_config, last) + sizeof(((struct steer_config *)0)->last) - \
		offsetof(struct steer_config, first)
/* How the value is read: by the option's parser, as a duration or a count
 * within [lo, hi], or as a policy knob (a field of struct steer_policy). */
#define PARSED(o, fn, f) .opt = o, .kind = VALUE_PARSE, .parse = fn, FIELD(f)
#define PARSED_RANGE(o, fn, first, last) \
	.opt = o, .kind = VALUE_PARSE, .parse = fn, FIELDS(first, last)
#define DURATION(o, f, lo, hi) .opt = o, .kind = VALUE_DURATION, FIELD(f), .min = lo, .max = hi
#define COUNT(o, f, hi, unit) \
	.opt = o, .kind = VALUE_COUNT, FIELD(f), .min = 1, .max = hi, .what = unit
#define KNOB(k, f, lo, hi, must_be)                                                                \
	.opt = OPT_KNOB, .kind = VALUE_KNOB, .knob = k, .field = offsetof(struct steer_policy, f), \
	.size = sizeof(((struct steer_policy *)0)->f), .min = lo, .max = hi, .what = must_be
/* A policy knob that is not a number: a switch, a choice of two words, a
 * duration. */
#define KNOB_OF(k, f, type)                                                \
	.opt = OPT_KNOB, .kind = VALUE_KNOB, .knob = k, .knob_type = type, \
	.field = offsetof(struct steer_policy, f), .size = sizeof(((struct steer_policy *)0)->f)
/* A flag, and where the file takes it: nowhere, at the top level or in a
 * service (key k), or in both (the policy). */
#define FLAG(n) .name = n, .scope = STEER_KEY_NONE
#define TOP(n) .name = n, .key = n, .scope = STEER_KEY_TOP
#define SERVICE(n, k) .name = n, .key = k, .scope = STEER_KEY_SERVICE
#define POLICY(n) .name = n, .key = n, .scope = STEER_KEY_BOTH

const struct cfg_option cfg_options[CFG_N_OPTIONS] = {
	/* ---- Services ---- */
	{ .doc = { SERVICE("vip", "vip"), .arg = "ADDR:PORT",
		   .help = "the address clients connect to; IPv6: [::1]:8000; not unspecified, "
			   "multicast, broadcast or a backend",
		   .section = SEC_SERVICES },
	  .opt = OPT_VIP },
	{ .doc = { SERVICE("backend", "backends"),
		   .arg = "ADDR:PORT[,loads=...][,engine=E][,auth=bearer:FILE]",
		   .bounds = "at most " STR(STEER_MAX_BACKENDS) " per service",
		   .help = "a backend (repeat)\n"
			   "each key at most once:\n"
			   "loads=[SCHEME://]ADDR:PORT[/path]: where its load is read; SCHEME "
			   "grpc (the default) or http, a path only with http (/metrics, "
			   "/v1/loads?include=core); without loads=, probed on the traffic port "
			   "(gRPC, then HTTP)\n"
			   "engine=E: auto (the default), sglang, vllm or tokenspeed\n"
			   "auth=bearer:FILE: an absolute path; its first line is the token, "
			   "read at start and on SIGHUP, never printed",
		   .section = SEC_SERVICES },
	  .opt = OPT_BACKEND },
	{ .doc = { SERVICE("backend-dns", "backend-dns"),
		   .arg = "NAME:PORT[,loads=[SCHEME://]:PORT[/path]][,engine=E][,auth=bearer:FILE]",
		   .bounds = "at most " STR(STEER_DNS_PER_SERVICE) " names per service",
		   .help = "backends found through DNS (repeat): each A or AAAA record of NAME of "
			   "the VIP's family is a backend on PORT; loads= names no host (each "
			   "address serves its own load), e.g. loads=grpc://:30000; the other "
			   "keys as for --backend",
		   .section = SEC_SERVICES },
	  .opt = OPT_BACKEND_DNS },
	{ .doc = { FLAG("config"), .arg = "FILE",
		   .help = "YAML: the options below as keys, and 'services'; flags override it, "
			   "and --vip replaces the file's service with the same VIP",
		   .bounds = "at most 1 MiB, nested at most 64 levels",
		   .reload_note = "the file is read again", .section = SEC_SERVICES },
	  .opt = OPT_CONFIG },

	/* ---- DNS discovery ---- */
	{ .doc = { TOP("dns-interval"), .arg = "DUR", .def = "5s", .bounds = "100ms..1h",
		   .help = "look each name up again this long after its last answer, or its "
			   "records' TTL if longer (a TTL counts up to 1h)",
		   .section = SEC_DNS },
	  DURATION(OPT_DNS_INTERVAL, dns_interval_ns, CFG_DNS_INTERVAL_MIN_NS,
		   CFG_DNS_INTERVAL_MAX_NS),
	  .def_is_value = true },
	{ .doc = { TOP("dns-server"), .arg = "ADDR[:PORT][,ADDR[:PORT]]...",
		   .def = "the system's, from /etc/resolv.conf",
		   .help = "DNS servers, IPv6 as [ADDR]:PORT, port 53 by default",
		   .reload_note = "a change starts every look-up again", .section = SEC_DNS },
	  PARSED(OPT_DNS_SERVER, cfg_parse_dns_server, dns_servers) },

	/* ---- Data plane ---- */
	{ .doc = { TOP("cgroup"), .arg = "PATH", .def = "the cgroup2 root",
		   .help = "cgroup2 directory to attach to, absolute: only the processes in it "
			   "and below it are steered",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_DATA_PLANE },
	  PARSED(OPT_CGROUP, cfg_parse_cgroup, cgroup) },
	{ .doc = { TOP("wire-cgroup"), .arg = "PATH", .def = "--cgroup",
		   .help = "cgroup2 directory where request bytes are counted: --cgroup or one "
			   "below it; each packet there pays the accounting's dispatch; not "
			   "with --wire-estimator off",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_DATA_PLANE },
	  PARSED(OPT_WIRE_CGROUP, cfg_parse_wire_cgroup, wire_cgroup) },
	{ .doc = { TOP("step-probe"), .arg = "PATH", .def = "off",
		   .bounds = "an absolute HTTP path of visible ASCII, at most 255 bytes, or off",
		   .help = "fluid-step: keep one streaming request POSTed to PATH on every "
			   "backend, to see each engine step when clients' answers are not "
			   "streamed",
		   .section = SEC_DATA_PLANE },
	  PARSED(OPT_STEP_PROBE, cfg_parse_step_probe, step_probe_path),
	  .def_is_value = true },
	{ .doc = { TOP("step-probe-body"), .arg = "JSON",
		   .def = "a 1,024-token streamed completion of prompt \"0\"",
		   .bounds = "a JSON object of at most 2047 bytes",
		   .help = "what the probe POSTs; needs --step-probe",
		   .reload_note = "every probe restarts with it", .section = SEC_DATA_PLANE },
	  PARSED(OPT_STEP_PROBE_BODY, cfg_parse_step_probe_body, step_probe_body) },
	{ .doc = { TOP("pin-path"), .arg = "DIR", .def = STEER_DEFAULT_PIN_DIR,
		   .help = "bpffs pin directory, absolute; one smg-steerd per directory",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_DATA_PLANE },
	  PARSED(OPT_PIN_PATH, cfg_parse_pin_path, pin_path),
	  .def_is_value = true },
	{ .doc = { TOP("keep-pinned"), .def = "off",
		   .help = "stay attached and pinned after exit, so that a restart has no gap; "
			   "in the file, true or false",
		   .reload_note = "it takes effect at exit", .section = SEC_DATA_PLANE },
	  PARSED(OPT_KEEP_PINNED, cfg_parse_keep_pinned, keep_pinned),
	  .def_is_value = true },

	/* ---- XDP ingress ---- */
	{ .doc = { TOP("xdp-dev"), .arg = "IFACE", .def = "none",
		   .bounds = "at most " STR(STEER_XDP_DEVS_MAX),
		   .help = "steer TCP to the VIPs arriving on IFACE (repeat, or a comma list); "
			   "IFACE must forward the VIPs' family",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_XDP },
	  PARSED_RANGE(OPT_XDP_DEV, cfg_parse_xdp_dev, xdp_devs, n_xdp_devs) },
	{ .doc = { TOP("xdp-mode"), .arg = "MODE", .def = "native",
		   .help = "native: the driver's XDP; generic: any device, slower",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_XDP },
	  PARSED(OPT_XDP_MODE, cfg_parse_xdp_mode, xdp_mode),
	  .def_is_value = true },
	{ .doc = { TOP("xdp-encap-src"), .arg = "P4/LEN[,P6/LEN]",
		   .def = STEER_XDP_ENCAP_SRC_DEFAULT, .bounds = "IPv4 /8 to /24, IPv6 /64 to /120",
		   .help = "outer source prefixes, host bits from the flow hash; a family not "
			   "given keeps the default's",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_XDP },
	  PARSED_RANGE(OPT_XDP_ENCAP_SRC, cfg_parse_xdp_encap_src, xdp_encap_src, xdp_encap),
	  .def_is_value = true },

	/* ---- Several routers ---- */
	{ .doc = { TOP("peer"), .arg = "ADDR:PORT",
		   .bounds = "at most " STR(STEER_PEERS_MAX) " routers in all",
		   .help = "another router's --peer-listen (repeat, or a comma-separated list); "
			   "needs --peer-listen and peer-routers 1",
		   .reload_note = "turning sharing on or off needs a restart",
		   .section = SEC_PEERS },
	  PARSED_RANGE(OPT_PEER, cfg_parse_peer, peers, n_peers) },
	{ .doc = { TOP("peer-dns"), .arg = "NAME:PORT",
		   .bounds = "at most " STR(STEER_PEER_DNS_MAX) " names",
		   .help = "every address NAME resolves to is a router listening on PORT (e.g. a "
			   "headless Service; repeat, or a list; looked up as --backend-dns)",
		   .reload_note = "turning sharing on or off needs a restart",
		   .section = SEC_PEERS },
	  PARSED_RANGE(OPT_PEER_DNS, cfg_parse_peer_dns, peer_dns, n_peer_dns) },
	{ .doc = { TOP("peer-listen"), .arg = "ADDR:PORT",
		   .help = "where the other routers' reports arrive (UDP)",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_PEERS },
	  PARSED_RANGE(OPT_PEER_LISTEN, cfg_parse_peer_listen, peer_listen_set, peer_listen_str) },
	{ .doc = { TOP("peer-interval"), .arg = "DUR", .def = "1ms", .bounds = "100us..10s",
		   .help = "how often this router reports", .section = SEC_PEERS },
	  DURATION(OPT_PEER_INTERVAL, peer_interval_ns, CFG_PEER_INTERVAL_MIN_NS,
		   CFG_PEER_INTERVAL_MAX_NS),
	  .def_is_value = true },
	{ .doc = { TOP("peer-timeout"), .arg = "DUR", .def = "1s",
		   .bounds = "1ms..60s, and at least 3 x --peer-interval",
		   .help = "a silent router's work is forgotten after this long; without "
			   "--peer-key, a new router id at its address is heard only then",
		   .section = SEC_PEERS },
	  DURATION(OPT_PEER_TIMEOUT, peer_timeout_ns, CFG_PEER_TIMEOUT_MIN_NS,
		   CFG_PEER_TIMEOUT_MAX_NS),
	  .def_is_value = true },
	{ .doc = { TOP("peer-push"), .arg = "on|off", .def = "off",
		   .help = "report each request as it is sent, not only every interval",
		   .section = SEC_PEERS },
	  PARSED(OPT_PEER_PUSH, cfg_parse_peer_push, peer_push),
	  .def_is_value = true },
	{ .doc = { TOP("peer-phase"), .arg = "on|off", .def = "on",
		   .help = "the random phase that spreads routers' picks; off only with a fast "
			   "--peer-push",
		   .section = SEC_PEERS },
	  PARSED(OPT_PEER_PHASE, cfg_parse_peer_phase, peer_no_phase),
	  .def_is_value = true },
	{ .doc = { TOP("peer-key"), .arg = "FILE",
		   .bounds = "an absolute path; keys of " STR(STEER_PEER_KEY_MIN) ".." STR(
			   STEER_PEER_KEY_MAX) " bytes",
		   .help = "sign the reports and accept only signed ones (HMAC-SHA256): the key "
			   "is FILE's first line; a previous key on the second line still "
			   "verifies (rotation); read at start and on SIGHUP, never printed",
		   .section = SEC_PEERS },
	  PARSED(OPT_PEER_KEY, cfg_parse_peer_key, peer_key_file) },

	/* ---- Load polling ---- */
	{ .doc = { TOP("load-check-interval"), .arg = "DUR", .def = "1s", .bounds = "10ms..1h",
		   .help = "poll period", .section = SEC_POLLING },
	  DURATION(OPT_INTERVAL, interval_ns, CFG_INTERVAL_MIN_NS, CFG_INTERVAL_MAX_NS),
	  .def_is_value = true },
	{ .doc = { TOP("load-timeout"), .arg = "DUR", .def = "min(interval/2, 1s)",
		   .bounds = "1ms..the interval", .help = "deadline of one poll",
		   .section = SEC_POLLING },
	  DURATION(OPT_TIMEOUT, timeout_ns, CFG_TIMEOUT_MIN_NS, CFG_TIMEOUT_MAX_NS) },
	{ .doc = { TOP("snapshot-max-age"), .arg = "DUR", .def = "3 x interval",
		   .bounds = "above the interval, at most 24h",
		   .help = "older loads are stale, and a table expires this long after its "
			   "publish",
		   .section = SEC_POLLING },
	  DURATION(OPT_MAX_AGE, max_age_ns, CFG_MAX_AGE_MIN_NS, CFG_MAX_AGE_MAX_NS) },
	{ .doc = { TOP("unhealthy-after"), .arg = "N", .def = "3",
		   .bounds = "1.." STR(CFG_HEALTH_COUNT_MAX),
		   .help = "failed polls in a row to eject a backend", .section = SEC_POLLING },
	  COUNT(OPT_UNHEALTHY, unhealthy_after, CFG_HEALTH_COUNT_MAX, "consecutive failed polls"),
	  .def_is_value = true },
	{ .doc = { TOP("healthy-after"), .arg = "N", .def = "2",
		   .bounds = "1.." STR(CFG_HEALTH_COUNT_MAX),
		   .help = "good polls in a row to readmit an ejected backend",
		   .section = SEC_POLLING },
	  COUNT(OPT_HEALTHY, healthy_after, CFG_HEALTH_COUNT_MAX, "consecutive good polls"),
	  .def_is_value = true },

	/* ---- Policy ---- */
	{ .doc = { POLICY("least-load-kv-pressure-weight"), .arg = "S", .def = "0.15",
		   .bounds = "0..3600",
		   .help = "seconds of wait per unit of k / (1 - k), k the KV usage",
		   .section = SEC_POLICY },
	  KNOB(KNOB_WEIGHT, kv_pressure_weight, 0, 3600, "a number of seconds from 0 to 3600") },
	{ .doc = { POLICY("least-load-default-throughput"), .arg = "T", .def = "2000",
		   .bounds = "1..1e9", .help = "tokens/s assumed for a backend that reports none",
		   .section = SEC_POLICY },
	  KNOB(KNOB_THROUGHPUT, default_throughput, 1, 1000000000,
	       "a number of tokens/s from 1 to 1e9") },
	{ .doc = { POLICY("least-load-mean-prefill-tokens"), .arg = "N", .def = "1024",
		   .bounds = "1..10000000, and times --peer-routers at most 4294967295",
		   .help = "tokens credited to a backend per connect", .section = SEC_POLICY },
	  KNOB(KNOB_PREFILL, mean_prefill_tokens, 1, 10000000,
	       "an integer from 1 to 10000000 (tokens)") },
	{ .doc = { POLICY("peer-routers"), .arg = "N", .def = "1", .bounds = "1..1024",
		   .help = "routers steering to the same backends without --peer (1 with --peer)",
		   .section = SEC_POLICY },
	  KNOB(KNOB_PEERS, peer_routers, 1, 1024, "an integer from 1 to 1024 (routers)") },
	{ .doc = { POLICY("bytes-per-token"), .arg = "N", .def = STR(STEER_DEFAULT_BYTES_PER_TOKEN),
		   .bounds = "1.." STR(STEER_MAX_BYTES_PER_TOKEN),
		   .help = "request bytes on the wire per token (3 for gRPC carrying token ids)",
		   .section = SEC_POLICY },
	  KNOB(KNOB_BYTES_PER_TOKEN, bytes_per_token, 1, STEER_MAX_BYTES_PER_TOKEN,
	       "an integer from 1 to " STR(
		       STEER_MAX_BYTES_PER_TOKEN) " (request bytes per token)") },
	{ .doc = { TOP("wire-estimator"), .arg = "fluid|fluid-step|off", .def = "fluid",
		   .help = "how unanswered requests are scored: fluid, by the time they keep the "
			   "backend busy; fluid-step, also until the end of the engine step under "
			   "way, from streamed answers' packet gaps; off, request bytes not "
			   "counted (the flat connect credit only); for the whole daemon",
		   .reload_note = "to or from off needs a restart", .section = SEC_POLICY },
	  PARSED_RANGE(OPT_WIRE_ESTIMATOR, cfg_parse_wire_estimator, wire_step, wire_off),
	  .def_is_value = true },

	/* ---- Overload protection ---- */
	{ .doc = { POLICY("worker-overload-protection"),
		   .help = "a backend whose KV usage is 0.9 or more takes no new connection (smg's "
			   "bound); the file takes true or false",
		   .section = SEC_OVERLOAD },
	  KNOB_OF(KNOB_OVERLOAD_PROTECTION, overload_protection, KNOB_SWITCH),
	  .what = "true or false" },
	{ .doc = { POLICY("worker-overload-token-usage"), .arg = "K", .bounds = "over 0, at most 1",
		   .help = "the KV usage bound instead of 0.9; on by itself",
		   .section = SEC_OVERLOAD },
	  KNOB(KNOB_OVERLOAD_TOKEN_USAGE, overload_token_usage, 0, 1,
	       "a number over 0 and at most 1 (KV usage)"),
	  .above_min = true },
	{ .doc = { POLICY("worker-overload-waiting-requests"), .arg = "N", .bounds = "1..1000000",
		   .help = "a backend with N or more waiting requests takes no new connection",
		   .section = SEC_OVERLOAD },
	  KNOB(KNOB_OVERLOAD_WAITING, overload_waiting, 1, 1000000,
	       "an integer from 1 to 1000000 (waiting requests)") },
	{ .doc = { POLICY("worker-overload-wait"), .arg = "DUR", .bounds = "1ms..1h",
		   .help = "a backend whose expected wait, the kernel's in-flight work "
			   "included, is over DUR takes no new connection",
		   .section = SEC_OVERLOAD },
	  KNOB_OF(KNOB_OVERLOAD_WAIT, overload_wait_ns, KNOB_DURATION),
	  .min = NS_PER_MS,
	  .max = 3600 * NS_PER_S,
	  .what = "a duration from 1ms to 1h, like 500ms or 2s" },
	{ .doc = { POLICY("worker-overload-connections"), .arg = "N", .bounds = "1..1000000",
		   .help = "a backend with N or more of this node's live connections takes no new "
			   "connection (the engine's running-request limit, shared among routers)",
		   .section = SEC_OVERLOAD },
	  KNOB(KNOB_OVERLOAD_CONNECTIONS, overload_connections, 1, 1000000,
	       "an integer from 1 to 1000000 (live connections)") },
	{ .doc = { POLICY("when-all-overloaded"), .arg = "refuse|least", .def = "refuse",
		   .help = "when every backend is overloaded: refuse the connect at once "
			   "(ECONNREFUSED, no SYN sent), or give it to the least bad",
		   .section = SEC_OVERLOAD },
	  KNOB_OF(KNOB_OVERLOAD_LEAST, overload_least, KNOB_CHOICE),
	  .choices = (const char *const[]){ "refuse", "least", NULL },
	  .what = "refuse or least" },

	/* ---- Cache affinity ---- */
	{ .doc = { POLICY("affinity"), .arg = "off|cgroup|netns|sockopt", .def = "off",
		   .help = "send a client's connects to the backend of its last, which holds its "
			   "prefix cache; what identifies a client: cgroup, the connecting "
			   "task's cgroup v2 id (a container); netns, its network namespace "
			   "cookie (a pod); sockopt, a 64-bit key the application sets with "
			   "setsockopt(fd, 0x534d47, 1, &key, 8) before connect (e.g. one per "
			   "conversation)",
		   .section = SEC_AFFINITY },
	  KNOB_OF(KNOB_AFFINITY, affinity, KNOB_CHOICE),
	  .choices = (const char *const[]){ "off", "cgroup", "netns", "sockopt", NULL },
	  .what = "off, cgroup, netns or sockopt" },
	{ .doc = { POLICY("affinity-slack"), .arg = "DUR", .def = "500ms", .bounds = "0..1h",
		   .help = "a client stays on its backend while that backend's expected wait is "
			   "at most the least wait plus DUR (0: only on a tie)",
		   .section = SEC_AFFINITY },
	  KNOB_OF(KNOB_AFFINITY_SLACK, affinity_slack_ns, KNOB_DURATION),
	  .min = 0,
	  .max = 3600 * NS_PER_S,
	  .what = "a duration from 0 to 1h, like 500ms or 2s" },
	{ .doc = { POLICY("affinity-timeout"), .arg = "DUR", .def = "10m", .bounds = "1s..24h",
		   .help = "a client idle this long is forgotten: its next connect is placed by "
			   "the least wait",
		   .section = SEC_AFFINITY },
	  KNOB_OF(KNOB_AFFINITY_TIMEOUT, affinity_idle_ns, KNOB_DURATION),
	  .min = NS_PER_S,
	  .max = 24 * 3600 * NS_PER_S,
	  .what = "a duration from 1s to 24h, like 10m or 1h" },

	/* ---- Operation ---- */
	{ .doc = { TOP("log-level"), .arg = "LEVEL", .def = "info",
		   .bounds = "error, warn, info or debug", .help = "what is logged",
		   .section = SEC_OPERATION },
	  PARSED(OPT_LOG_LEVEL, cfg_parse_log_level, log_level),
	  .def_is_value = true },
	{ .doc = { TOP("metrics-listen"), .arg = "ADDR:PORT", .def = DEFAULT_METRICS_LISTEN,
		   .help = "where Prometheus /metrics and /healthz listen, or 'off'",
		   .reload = STEER_RELOAD_RESTART, .section = SEC_OPERATION },
	  PARSED_RANGE(OPT_METRICS, cfg_parse_metrics, metrics_enabled, metrics_addr),
	  .def_is_value = true },
	{ .doc = { FLAG("check-config"),
		   .help = "validate the flags and the file, print a summary and exit (0 valid, "
			   "2 invalid)",
		   .reload = STEER_RELOAD_NA, .section = SEC_OPERATION },
	  .opt = OPT_CHECK_CONFIG },
	{ .doc = { FLAG("help"), .short_name = 'h', .help = "this text", .reload = STEER_RELOAD_NA,
		   .section = SEC_OPERATION },
	  .opt = OPT_HELP },
	{ .doc = { FLAG("version"), .help = "print the version", .reload = STEER_RELOAD_NA,
		   .section = SEC_OPERATION },
	  .opt = OPT_VERSION },
};

const struct steer_option *steer_config_option(size_t i)
{
	return i < CFG_N_OPTIONS ? &cfg_options[i].doc : NULL;
}

const struct steer_option_section *steer_config_section(size_t i)
{
	return i < N_SECTIONS ? &sections[i] : NULL;
}

const struct cfg_option *cfg_option_by_key(const char *key, bool service)
{
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		const struct steer_option *d = &cfg_options[i].doc;
		bool here = d->scope == STEER_KEY_BOTH ||
			    d->scope == (service ? STEER_KEY_SERVICE : STEER_KEY_TOP);

		if (here && !strcmp(d->key, key))
			return &cfg_options[i];
	}
	return NULL;
}

const struct cfg_option *cfg_option_of(enum opt o)
{
	size_t i;

	for (i = 0; i < CFG_N_OPTIONS; i++) {
		if (cfg_options[i].opt == o)
			return &cfg_options[i];
	}
	return NULL;
}
