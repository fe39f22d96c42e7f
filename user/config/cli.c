// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * cli.c - smg-steerd's command line (getopt_long) and its --help.
 * Each flag is parsed into the flags' layer, or the flags' service for --vip
 * and --backend (see config_int.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <getopt.h>
#include <string.h>

#include "config_int.h"

enum {
	/* getopt_long values: cfg_settings[i] is SETTING_VAL + i. */
	VAL_HELP = 'h',
	VAL_VIP = 0x100,
	VAL_BACKEND,
	VAL_BACKEND_DNS,
	VAL_CONFIG,
	VAL_VERSION,
	VAL_CHECK_CONFIG,
	SETTING_VAL = 0x200,
};

#define N_LONG_OPTS (CFG_N_SETTINGS + 7)

static void long_options_build(struct option *lo)
{
	size_t i;

	for (i = 0; i < CFG_N_SETTINGS; i++) {
		lo[i] = (struct option){ cfg_settings[i].name,
					 cfg_settings[i].opt == OPT_KEEP_PINNED ? no_argument
										: required_argument,
					 NULL, SETTING_VAL + (int)i };
	}
	lo[i++] = (struct option){ "vip", required_argument, NULL, VAL_VIP };
	lo[i++] = (struct option){ "backend", required_argument, NULL, VAL_BACKEND };
	lo[i++] = (struct option){ "backend-dns", required_argument, NULL, VAL_BACKEND_DNS };
	lo[i++] = (struct option){ "config", required_argument, NULL, VAL_CONFIG };
	lo[i++] = (struct option){ "help", no_argument, NULL, VAL_HELP };
	lo[i++] = (struct option){ "version", no_argument, NULL, VAL_VERSION };
	lo[i++] = (struct option){ "check-config", no_argument, NULL, VAL_CHECK_CONFIG };
	lo[i] = (struct option){ NULL, 0, NULL, 0 };
}

static const char *long_option_name(const struct option *lo, int val)
{
	for (; lo->name; lo++) {
		if (lo->val == val)
			return lo->name;
	}
	return "?";
}

static int flag_vip(struct ctx *c, const char *v)
{
	struct steer_addr vip;
	char detail[WHY_LEN];

	if (c->flag_vip_given)
		return cfg_fail(c, "--vip: given twice; the command line defines one service "
				   "(use --config for more)");
	if (cfg_vip_parse(v, &vip, detail, sizeof(detail)))
		return cfg_fail(c, "--vip: %s", detail);
	c->flag_vip_given = true;
	cfg_draft_set_vip(&c->flag_svc, &vip);
	return STEER_CONFIG_OK;
}

static int flag_backend(struct ctx *c, const char *v)
{
	struct steer_backend_cfg b;
	char why[WHY_LEN];

	if (cfg_backend_parse(c, v, &b, why, sizeof(why)) ||
	    cfg_backend_add(&c->flag_svc, &b, why, sizeof(why)))
		return cfg_fail(c, "--backend: %s", why);
	return STEER_CONFIG_OK;
}

static int flag_backend_dns(struct ctx *c, const char *v)
{
	struct steer_dns_backend_cfg e;
	char why[WHY_LEN];

	if (cfg_dns_parse(c, v, &e, why, sizeof(why)) ||
	    cfg_dns_add(&c->flag_svc, &e, why, sizeof(why)))
		return cfg_fail(c, "--backend-dns: %s", why);
	return STEER_CONFIG_OK;
}

static int flag_setting(struct ctx *c, const struct setting *s, const char *v)
{
	char why[WHY_LEN];

	if (cfg_setting_parse(s, v, &c->flags, 0, why, sizeof(why)))
		return cfg_fail(c, "--%s: %s", s->name, why);
	return STEER_CONFIG_OK;
}

/* getopt_long reported '?' or ':'; name the offending argument. */
static int flag_error(struct ctx *c, int opt, const struct option *lo, char *const argv[])
{
	const char *arg = argv[optind - 1];

	if (opt == ':')
		return cfg_fail(c, "--%s: missing value", long_option_name(lo, optopt));
	if (optopt && !strncmp(arg, "--", 2)) /* a long option without value, given one */
		return cfg_fail(c, "--%s takes no value, got '%s'", long_option_name(lo, optopt),
				arg);
	if (optopt)
		return cfg_fail(c, "unknown option '-%c' (see --help)", optopt);
	return cfg_fail(c, "unknown or ambiguous option '%s' (see --help)", arg);
}

/* A value that is the next flag means the flag's own value is missing. */
static bool value_is_flag(const char *v)
{
	return v && v[0] == '-' && v[1] == '-';
}

static int flag_one(struct ctx *c, int opt, const char *v, const struct option *lo)
{
	if (value_is_flag(v))
		return cfg_fail(c, "--%s: missing value (got '%s')", long_option_name(lo, opt), v);
	switch (opt) {
	case VAL_HELP:
		steer_config_usage(stdout);
		return STEER_CONFIG_EXIT;
	case VAL_VERSION:
		printf("smg-steerd %s\n", STEER_VERSION);
		return STEER_CONFIG_EXIT;
	case VAL_CHECK_CONFIG:
		c->check_only = true;
		return STEER_CONFIG_OK;
	case VAL_VIP:
		return flag_vip(c, v);
	case VAL_BACKEND:
		return flag_backend(c, v);
	case VAL_BACKEND_DNS:
		return flag_backend_dns(c, v);
	case VAL_CONFIG:
		if (!*v || strlen(v) >= sizeof(c->config_path))
			return cfg_fail(c, "--config: must be a file path (1..%d bytes), got '%s'",
					PATH_MAX - 1, v);
		snprintf(c->config_path, sizeof(c->config_path), "%s", v);
		return STEER_CONFIG_OK;
	default:
		return flag_setting(c, &cfg_settings[opt - SETTING_VAL], v);
	}
}

/*
 * "+" stops at the first operand instead of permuting argv (which SIGHUP
 * parses again); ":" reports a missing value as ':'. optind = 0 makes glibc
 * reinitialize its scanner, so every call starts afresh.
 */
int cfg_flags_parse(struct ctx *c, int argc, char *const argv[])
{
	struct option lo[N_LONG_OPTS + 1];
	int saved_opterr = opterr, opt, rc = STEER_CONFIG_OK;

	long_options_build(lo);
	optind = 0;
	opterr = 0;
	while (rc == STEER_CONFIG_OK && (opt = getopt_long(argc, argv, "+:h", lo, NULL)) != -1) {
		if (opt == '?' || opt == ':')
			rc = flag_error(c, opt, lo, argv);
		else
			rc = flag_one(c, opt, optarg, lo);
	}
	if (rc == STEER_CONFIG_OK && optind < argc)
		rc = cfg_fail(c, "unexpected argument '%s' (options only; see --help)",
			      argv[optind]);
	opterr = saved_opterr;
	return rc;
}

void steer_config_usage(FILE *f)
{
	fputs("Usage: smg-steerd --vip ADDR:PORT --backend ADDR:PORT[,KEY=VALUE]... [OPTION]...\n"
	      "       smg-steerd --vip ADDR:PORT --backend-dns NAME:PORT[,KEY=VALUE]... "
	      "[OPTION]...\n"
	      "       smg-steerd --config FILE [OPTION]...\n"
	      "\n"
	      "Steers new TCP connections to a VIP towards the backend with the least expected\n"
	      "wait, from the loads each backend reports (gRPC GetLoads, HTTP /v1/loads or\n"
	      "Prometheus /metrics).\n"
	      "\n"
	      "Services (the command line defines one; --config FILE may define more):\n"
	      "  --vip ADDR:PORT             the address clients connect to; IPv6: [::1]:8000;\n"
	      "                              not unspecified, multicast, broadcast or a backend\n"
	      "  --backend ADDR:PORT[,loads=[SCHEME://]ADDR:PORT[/path]][,engine=E]\n"
	      "            [,auth=bearer:FILE]  a backend (repeat); each key at most once:\n"
	      "      loads=    where its load is read: SCHEME grpc (the default) or http, a\n"
	      "                path only with http (/metrics, /v1/loads?include=core); without\n"
	      "                loads=, probed on the traffic port (gRPC, then HTTP)\n"
	      "      engine=   auto (default), sglang, vllm or tokenspeed\n"
	      "      auth=     bearer:FILE, an absolute path; its first line is the token,\n"
	      "                read at start and on SIGHUP, never printed\n"
	      "  --backend-dns NAME:PORT[,loads=[SCHEME://]:PORT[/path]][,engine=E]\n"
	      "            [,auth=bearer:FILE]  backends found through DNS (repeat): each A or\n"
	      "                AAAA record of NAME of the VIP's family is a backend on PORT;\n"
	      "                loads= names no host (each address serves its own load), e.g.\n"
	      "                loads=grpc://:30000; the other keys as for --backend\n"
	      "  --config FILE               YAML: the options below as keys, and 'services';\n"
	      "                              flags override it, and --vip replaces the file's\n"
	      "                              service with the same VIP\n"
	      "\n"
	      "DNS discovery (for --backend-dns):\n"
	      "  --dns-interval DUR          look each name up again this long after its last\n"
	      "                              answer, or its records' TTL if longer (at most\n"
	      "                              1h); 100ms..1h (default 5s)\n"
	      "  --dns-server ADDR[:PORT][,ADDR[:PORT]]...\n"
	      "                              DNS servers, IPv6 as [ADDR]:PORT (default: the\n"
	      "                              system's, from /etc/resolv.conf)\n"
	      "\n"
	      "Data plane:\n"
	      "  --cgroup PATH               cgroup2 directory to attach to, absolute (default:\n"
	      "                              the cgroup2 root)\n"
	      "  --wire-cgroup PATH          cgroup2 directory where request bytes are counted:\n"
	      "                              --cgroup or one below it (default: --cgroup);\n"
	      "                              each packet there pays the accounting's dispatch\n"
	      "  --step-probe PATH           fluid-step: keep one streaming request POSTed to\n"
	      "                              PATH on every backend, to see each engine step\n"
	      "                              when clients' answers are not streamed (off)\n"
	      "  --step-probe-body JSON      what the probe POSTs (default: a 1,024-token\n"
	      "                              streamed completion of prompt \"0\")\n"
	      "  --pin-path DIR              bpffs pin directory, absolute\n"
	      "                              (default " STEER_DEFAULT_PIN_DIR ")\n"
	      "  --keep-pinned               stay attached and pinned after exit\n"
	      "\n"
	      "XDP ingress (clients off the node; backends run `smg-steerctl decap attach`):\n"
	      "  --xdp-dev IFACE             steer TCP to the VIPs arriving on IFACE (repeat,\n"
	      "                              or a comma list; at most 8)\n"
	      "  --xdp-mode MODE             native (default) or generic\n"
	      "  --xdp-encap-src P4/LEN[,P6/LEN]  outer source prefixes, host bits from the\n"
	      "                              flow hash (default " STEER_XDP_ENCAP_SRC_DEFAULT ")\n"
	      "\n"
	      "Several routers (each node's smg-steerd tells the others its requests):\n"
	      "  --peer ADDR:PORT            another router's --peer-listen (repeat, or a\n"
	      "                              comma-separated list); needs peer-routers 1\n"
	      "  --peer-dns NAME:PORT        every address NAME resolves to is a router\n"
	      "                              listening on PORT (e.g. a headless Service;\n"
	      "                              repeat, or a list; looked up as --backend-dns)\n"
	      "  --peer-listen ADDR:PORT     where the other routers' reports arrive (UDP)\n"
	      "  --peer-interval DUR         how often this router reports (default 1ms)\n"
	      "  --peer-timeout DUR          a silent router's work is forgotten after this\n"
	      "                              long (default 1s)\n"
	      "  --peer-push on|off          report each request as it is sent, not only\n"
	      "                              every interval (default off)\n"
	      "  --peer-phase on|off         the random phase that spreads routers' picks\n"
	      "                              (default on; off only with a fast --peer-push)\n"
	      "  --peer-key FILE             sign the reports and accept only signed ones\n"
	      "                              (HMAC-SHA256): the key is FILE's first line,\n"
	      "                              16..256 bytes; a previous key on the second\n"
	      "                              line still verifies (rotation); read at start\n"
	      "                              and on SIGHUP, never printed\n"
	      "\n"
	      "Load polling (durations like 250ms, 2s, 1.5s, 1m; also ns, us, h):\n"
	      "  --load-check-interval DUR   poll period, 10ms..1h (default 1s)\n"
	      "  --load-timeout DUR          1ms..the interval (default min(interval/2, 1s))\n"
	      "  --snapshot-max-age DUR      older loads are stale; above the interval, at most\n"
	      "                              24h (default 3 x interval)\n"
	      "  --unhealthy-after N         failed polls to eject, 1..1000 (default 3)\n"
	      "  --healthy-after N           good polls to readmit, 1..1000 (default 2)\n"
	      "\n"
	      "Policy (also per service in the file):\n"
	      "  --least-load-kv-pressure-weight S   seconds, 0..3600 (default 0.15)\n"
	      "  --least-load-default-throughput T   tokens/s, 1..1e9 (default 2000)\n"
	      "  --least-load-mean-prefill-tokens N  tokens, 1..10000000 (default 1024)\n"
	      "  --peer-routers N                    routers on the fleet, 1..1024 (default 1)\n"
	      "  --bytes-per-token N                 request bytes on the wire per token,\n"
	      "                                      1..1024 (default 4; 3 for gRPC token ids)\n"
	      "  --wire-estimator fluid|fluid-step|pending|off  unanswered requests scored\n"
	      "                                      by busy-until (fluid, default) or pending\n"
	      "                                      tokens; fluid-step: also the engine step\n"
	      "                                      under way, from streamed responses'\n"
	      "                                      packet gaps; off: request bytes not\n"
	      "                                      counted (flat credit); for the whole\n"
	      "                                      daemon, not per service\n"
	      "\n"
	      "Operation:\n"
	      "  --log-level LEVEL           error, warn, info or debug (default info)\n"
	      "  --metrics-listen ADDR:PORT  Prometheus endpoint or 'off' (default "
	      "127.0.0.1:9464)\n"
	      "  --check-config              validate the flags and the file, print a\n"
	      "                              summary and exit (0 valid, 2 invalid)\n"
	      "  -h, --help                  this text\n"
	      "  --version                   print the version\n"
	      "\n"
	      "Options also take the form --option=value. SIGHUP reloads the configuration.\n",
	      f);
}
