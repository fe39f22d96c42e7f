// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * smg-steerctl - the operator's view of smg-steer.
 *
 * Reads the pinned BPF maps directly (never talks to smg-steerd), so it works
 * while the daemon is down: status, explain (why the next connection goes
 * where it goes, computed with the kernel's own selection code from
 * steer_common.h), drain and undrain; uninstall removes smg-steer from the
 * host.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "config.h" /* STEER_VERSION */
#include "dataplane.h"
#include "load_decode.h"
#include "privs.h"
#include "steer_common.h"
#include "uninstall.h"
#include "xdp.h"
#include "xdp_report.h"

#define EXIT_OK 0
#define EXIT_ERROR 1
#define EXIT_USAGE 2

enum output_format {
	OUTPUT_TEXT,
	OUTPUT_JSON,
};

enum command {
	CMD_NONE,
	CMD_STATUS,
	CMD_EXPLAIN,
	CMD_DRAIN,
	CMD_UNDRAIN,
	CMD_UNINSTALL,
};

struct ctl {
	const char *pin_dir;
	enum output_format output;
	enum command cmd;
	struct steer_addr target; /* explain: the VIP; drain/undrain: the backend */
	char target_str[STEER_ADDR_STRLEN];
};

static const char *prog = "smg-steerctl";

/* ---- usage and argument parsing ------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [--pin-path DIR] [-o text|json] status\n"
		"       %s [--pin-path DIR] [-o text|json] explain VIP\n"
		"       %s [--pin-path DIR] drain ADDR:PORT\n"
		"       %s [--pin-path DIR] undrain ADDR:PORT\n"
		"       %s [--pin-path DIR] uninstall\n"
		"       %s decap attach|detach IFACE [--pin-dir DIR] | decap status\n"
		"       %s --help | --version\n"
		"\n"
		"Inspect and steer smg-steer's kernel data plane through its pinned BPF maps;\n"
		"works whether or not smg-steerd is running.\n"
		"\n"
		"Commands:\n"
		"  status           every service and backend: table age, scores' inputs, "
		"counters\n"
		"  explain VIP      every term of every backend's score, and where the next\n"
		"                   connection to VIP (127.0.0.100:8000 or [::1]:8000) goes and "
		"why\n"
		"  drain ADDR:PORT  stop sending new connections to a backend (persists)\n"
		"  undrain ADDR:PORT\n"
		"                   make a drained backend eligible again\n"
		"  uninstall        detach every program and remove every pin (smg-steerd\n"
		"                   must be stopped); prints what it removed; idempotent\n"
		"  decap ...        on a backend of XDP ingress: attach the IPIP/IP6IP6 decap\n"
		"                   to IFACE's tc ingress (pins nothing unless --pin-dir),\n"
		"                   detach it, or list where it is attached, with counters\n"
		"\n"
		"Options:\n"
		"  -p, --pin-path DIR   pin directory of the data plane (default %s)\n"
		"  -o, --output FMT     text (default) or json, for status and explain\n"
		"  -h, --help           this help\n"
		"  -V, --version        print the version\n"
		"  --pin-dir DIR        decap attach/detach: pin the decap under DIR (default: "
		"no pin)\n"
		"\n"
		"Exit status: 0 ok, 1 error (nothing pinned, unknown VIP, not root), 2 usage.\n",
		prog, prog, prog, prog, prog, prog, prog, STEER_DEFAULT_PIN_DIR);
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One line naming what is wrong, then where to look; exit code 2. */
static int usage_error(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return EXIT_USAGE;
}

static enum command command_from_name(const char *name)
{
	static const struct {
		const char *name;
		enum command cmd;
	} cmds[] = {
		{ "status", CMD_STATUS },   { "explain", CMD_EXPLAIN },	    { "drain", CMD_DRAIN },
		{ "undrain", CMD_UNDRAIN }, { "uninstall", CMD_UNINSTALL },
	};
	size_t i;

	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(name, cmds[i].name) == 0)
			return cmds[i].cmd;
	return CMD_NONE;
}

/* The positional arguments: COMMAND [ADDRESS]. */
static int parse_command(struct ctl *c, int argc, char *const argv[])
{
	char err[256];
	bool wants_address;

	if (argc < 1)
		return usage_error(
			"missing command (status, explain, drain, undrain or uninstall)");
	c->cmd = command_from_name(argv[0]);
	if (c->cmd == CMD_NONE)
		return usage_error("unknown command '%s'", argv[0]);
	wants_address = c->cmd != CMD_STATUS && c->cmd != CMD_UNINSTALL;
	if (wants_address && argc < 2)
		return usage_error("'%s' needs an address (ADDR:PORT or [ADDR]:PORT)", argv[0]);
	if (argc > (wants_address ? 2 : 1))
		return usage_error("unexpected argument '%s'", argv[wants_address ? 2 : 1]);
	if (!wants_address)
		return EXIT_OK;
	if (steer_addr_parse(argv[1], &c->target, err, sizeof(err)) != 0)
		return usage_error("%s", err);
	steer_addr_format(&c->target, c->target_str, sizeof(c->target_str));
	return EXIT_OK;
}

/* Returns -1 to go on, or the exit code (help, version, usage errors). */
static int parse_args(struct ctl *c, int argc, char *const argv[])
{
	static const struct option longopts[] = {
		{ "pin-path", required_argument, NULL, 'p' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, rc;

	opterr = 0; /* our own messages, with the usage hint */
	while ((opt = getopt_long(argc, argv, ":p:o:hV", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p':
			c->pin_dir = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "text") == 0)
				c->output = OUTPUT_TEXT;
			else if (strcmp(optarg, "json") == 0)
				c->output = OUTPUT_JSON;
			else
				return usage_error("-o: expected text or json, got '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("smg-steerctl %s\n", STEER_VERSION);
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt)
				return usage_error("unknown option '-%c'", optopt);
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	rc = parse_command(c, argc - optind, argv + optind);
	return rc == EXIT_OK ? -1 : rc;
}

/* ---- names and numbers ------------------------------------------------------ */

static const char *health_name(uint8_t h)
{
	switch (h) {
	case STEER_HEALTH_HEALTHY:
		return "healthy";
	case STEER_HEALTH_EJECTED:
		return "ejected";
	default:
		return "unknown";
	}
}

static const char *mode_name(uint8_t m)
{
	switch (m) {
	case STEER_MODE_SNAPSHOT:
		return "snapshot";
	case STEER_MODE_ESTIMATE:
		return "estimate";
	case STEER_MODE_DARK:
		return "dark";
	default:
		return "-";
	}
}

static const char *poll_name(uint8_t p)
{
	static const char *const names[STEER_POLL_KINDS] = {
		"none", "ok", "unimplemented", "unavailable", "deadline", "invalid", "error",
	};

	return p < STEER_POLL_KINDS ? names[p] : "?";
}

/* "12.345 ms", or "saturated" for the kernel's saturated maximum. */
static const char *fmt_ms(uint64_t ns, char *buf, size_t len)
{
	if (ns == STEER_U64_MAX)
		snprintf(buf, len, "saturated");
	else
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	return buf;
}

static double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

/* Signed difference a - b of two monotonic timestamps, clamped to int64. */
static int64_t mono_diff(uint64_t a, uint64_t b)
{
	if (a >= b)
		return a - b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(a - b);
	return b - a > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(b - a);
}

static bool table_expired(const struct steer_view *v, const struct steer_view_service *s)
{
	/* The kernel's test, with bpf_ktime_get_ns() = CLOCK_MONOTONIC. */
	return v->now_ns > s->expires_ns;
}

static const struct steer_bk_info *bk_info(const struct steer_dp *dp,
					   const struct steer_view_backend *b)
{
	static const struct steer_bk_info none;
	const struct steer_bk_info *i = steer_dp_bk_info(dp, b->slot);

	return i ? i : &none;
}

static struct steer_view_service *find_service(struct steer_view *v, const struct steer_addr *vip)
{
	size_t i;

	for (i = 0; i < v->n_services; i++)
		if (steer_addr_equal(&v->services[i].vip, vip))
			return &v->services[i];
	return NULL;
}

/* ---- opening the data plane -------------------------------------------------- */

static int require_root(void)
{
	if (geteuid() == 0)
		return 0;
	fprintf(stderr,
		"%s must run as root: it reads and writes the pinned BPF maps, which needs "
		"CAP_BPF and CAP_SYS_ADMIN (try: sudo %s ...)\n",
		prog, prog);
	return -1;
}

static int open_dataplane(const struct ctl *c, struct steer_dp **dp)
{
	struct steer_dp_opts o = { .pin_dir = c->pin_dir, .own = false };
	char err[512];
	int rc = steer_dp_open(&o, dp, err, sizeof(err));

	if (rc)
		fprintf(stderr, "%s: %s\n", prog, err);
	return rc;
}

static int drop_privileges(void)
{
	char err[256];
	int rc = steer_privs_ctl(err, sizeof(err));

	if (rc)
		fprintf(stderr, "%s: %s\n", prog, err);
	return rc;
}

static int read_view(const struct steer_dp *dp, struct steer_view *v)
{
	char err[512];
	int rc = steer_dp_view(dp, v, err, sizeof(err));

	if (rc)
		fprintf(stderr, "%s: cannot read the data plane: %s\n", prog, err);
	return rc;
}

/* ---- the kernel's decision, recomputed ----------------------------------------- */

enum decision_kind {
	DECIDE_PASSTHROUGH, /* no table: the connect goes to the address itself */
	DECIDE_SCORE,	    /* least expected wait */
	DECIDE_ROUND_ROBIN, /* the table expired */
	DECIDE_REFUSED,	    /* nothing eligible: ECONNREFUSED */
};

struct decision {
	enum decision_kind kind;
	struct steer_table *table; /* rebuilt from the view */
	struct steer_pick pick;	   /* DECIDE_SCORE */
	uint32_t rr_pos;	   /* DECIDE_ROUND_ROBIN: table position */
	bool has_next_best;
	uint32_t next_best_pos;
	uint64_t next_best_score;
	uint32_t eligible; /* table entries not drained */
};

/* The slot accessor handed to steer_select: the counters as read in the view. */
static struct steer_slot *view_slot_at(void *ctx, __u32 slot)
{
	struct steer_view_service *s = ctx;
	size_t i;

	for (i = 0; i < s->n_backends; i++)
		if (s->backends[i].slot == slot)
			return &s->backends[i].ctr;
	return NULL;
}

/* The published table as the kernel holds it, rebuilt from the view's rows. */
static struct steer_table *rebuild_table(const struct steer_view_service *s)
{
	struct steer_table *t = calloc(1, sizeof(*t));
	uint32_t k;
	size_t i;

	if (!t)
		return NULL;
	t->expires_ns = s->expires_ns;
	t->published_ns = s->published_ns;
	t->generation = s->generation;
	t->svc_id = s->svc_id;
	t->n = s->n_table < STEER_MAX_BACKENDS ? s->n_table : STEER_MAX_BACKENDS;
	t->credit_tokens = s->credit_tokens;
	t->flags = s->table_flags;
	/* A row the view could not resolve stays unresolvable here too. */
	for (k = 0; k < t->n; k++)
		t->e[k].slot = STEER_NO_PICK;
	for (i = 0; i < s->n_backends; i++) {
		const struct steer_view_backend *b = &s->backends[i];
		struct steer_entry *e;

		if (b->rank < 0 || (uint32_t)b->rank >= t->n)
			continue;
		e = &t->e[b->rank];
		e->base_wait_ns = b->base_wait_ns;
		e->ns_per_token = b->ns_per_token;
		memcpy(e->ip6, b->addr.ip6, sizeof(e->ip6));
		e->port = b->addr.port;
		e->slot = b->slot;
	}
	return t;
}

static uint64_t entry_score(const struct steer_table *t, uint32_t pos, struct steer_slot *ctr)
{
	return steer_score(t->e[pos].base_wait_ns, ctr->inflight_tokens, t->e[pos].ns_per_token);
}

/* The runner-up over the whole table (the kernel may not have looked). */
static void find_next_best(struct steer_view_service *s, struct decision *d)
{
	uint32_t k;

	for (k = 0; k < d->table->n; k++) {
		struct steer_slot *ctr = view_slot_at(s, d->table->e[k].slot);
		uint64_t sc;

		if (!ctr || (ctr->flags & STEER_SLOT_DRAINED))
			continue;
		d->eligible++;
		if (k == d->pick.pos)
			continue;
		sc = entry_score(d->table, k, ctr);
		if (!d->has_next_best || sc < d->next_best_score) {
			d->has_next_best = true;
			d->next_best_pos = k;
			d->next_best_score = sc;
		}
	}
}

static int decide(const struct steer_view *v, struct steer_view_service *s, struct decision *d)
{
	memset(d, 0, sizeof(*d));
	d->pick.pos = STEER_NO_PICK;
	d->rr_pos = STEER_NO_PICK;
	if (!s->published) {
		d->kind = DECIDE_PASSTHROUGH;
		return 0;
	}
	d->table = rebuild_table(s);
	if (!d->table)
		return -ENOMEM;
	if (table_expired(v, s)) {
		/* The kernel uses the cursor's value, then advances it. */
		d->rr_pos = steer_round_robin(d->table, view_slot_at, s, s->stats.rr_cursor);
		d->kind = d->rr_pos == STEER_NO_PICK ? DECIDE_REFUSED : DECIDE_ROUND_ROBIN;
	} else {
		steer_select(d->table, view_slot_at, s, 1, &d->pick);
		d->kind = d->pick.found ? DECIDE_SCORE : DECIDE_REFUSED;
	}
	find_next_best(s, d);
	return 0;
}

static void decision_free(struct decision *d)
{
	free(d->table);
	d->table = NULL;
}

static const char *entry_addr(const struct steer_table *t, uint32_t pos, char *buf, size_t len)
{
	struct steer_addr a = { .port = t->e[pos].port, .proto = STEER_IPPROTO_TCP };

	memcpy(a.ip6, t->e[pos].ip6, sizeof(a.ip6));
	return steer_addr_format(&a, buf, len);
}

static const char *decision_kind_name(enum decision_kind k)
{
	switch (k) {
	case DECIDE_PASSTHROUGH:
		return "passthrough";
	case DECIDE_SCORE:
		return "least_wait";
	case DECIDE_ROUND_ROBIN:
		return "round_robin";
	default:
		return "refused";
	}
}

/* Table position of the next connection's backend, or STEER_NO_PICK. */
static uint32_t decision_pos(const struct decision *d)
{
	if (d->kind == DECIDE_SCORE)
		return d->pick.pos;
	if (d->kind == DECIDE_ROUND_ROBIN)
		return d->rr_pos;
	return STEER_NO_PICK;
}

/* ---- status, text ----------------------------------------------------------------- */

static void print_table_state(const struct steer_view *v, const struct steer_view_service *s)
{
	int64_t age, ttl;

	if (!s->published) {
		printf("  table: not published (connects to the VIP are not steered)\n");
		return;
	}
	age = mono_diff(v->now_ns, s->published_ns);
	ttl = mono_diff(s->expires_ns, v->now_ns);
	printf("  table: published, generation %llu, %u entries, age %.1f s, ",
	       (unsigned long long)s->generation, s->n_table, ns_to_s(age));
	if (table_expired(v, s))
		printf("EXPIRED %.1f s ago: round robin\n", ns_to_s(-ttl));
	else
		printf("expires in %.1f s\n", ns_to_s(ttl));
	printf("  fail-open: %s, credit: %u tokens per connection\n",
	       (s->table_flags & STEER_TBL_FAIL_OPEN) ? "YES (every backend ejected)" : "no",
	       s->credit_tokens);
}

static void health_text(const struct steer_view_backend *b, const struct steer_bk_info *info,
			char *buf, size_t len)
{
	if (b->drained)
		snprintf(buf, len, "drained,%s", health_name(info->health));
	else
		snprintf(buf, len, "%s", health_name(info->health));
}

static int address_width(const struct steer_view_service *s)
{
	int w = (int)strlen("BACKEND");
	size_t i;

	for (i = 0; i < s->n_backends; i++) {
		char a[STEER_ADDR_STRLEN];
		int l = (int)strlen(steer_addr_format(&s->backends[i].addr, a, sizeof(a)));

		if (l > w)
			w = l;
	}
	return w;
}

/* Seconds since the backend's last good GetLoads snapshot (info->snapshot_ns != 0). */
static double snapshot_age_s(const struct steer_bk_info *info)
{
	uint64_t now = steer_monotonic_ns();

	return now > info->snapshot_ns ? (double)(now - info->snapshot_ns) / 1e9 : 0.0;
}

static void print_backend_row(const struct steer_dp *dp, const struct steer_view_backend *b, int aw)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	char a[STEER_ADDR_STRLEN], health[32], rank[16], base[32], npt[32], age[32];

	steer_addr_format(&b->addr, a, sizeof(a));
	health_text(b, info, health, sizeof(health));
	if (b->rank >= 0) {
		snprintf(rank, sizeof(rank), "%d", b->rank);
		snprintf(base, sizeof(base), "%.3f", (double)b->base_wait_ns / 1e6);
		snprintf(npt, sizeof(npt), "%llu", (unsigned long long)b->ns_per_token);
	} else {
		snprintf(rank, sizeof(rank), "-");
		snprintf(base, sizeof(base), "-");
		snprintf(npt, sizeof(npt), "-");
	}
	if (info->snapshot_ns)
		snprintf(age, sizeof(age), "%.1f", snapshot_age_s(info));
	else
		snprintf(age, sizeof(age), "-");
	printf("  %-*s  %-16s %4s %12s %10s %10llu %6lld %9llu %9llu %8s  %-8s %s\n", aw, a, health,
	       rank, base, npt, (unsigned long long)b->ctr.inflight_tokens, (long long)b->ctr.live,
	       (unsigned long long)b->ctr.steered, (unsigned long long)b->ctr.fallbacks, age,
	       mode_name(info->mode), steer_source_name((enum steer_source)info->source));
}

static void print_service_text(const struct steer_dp *dp, const struct steer_view *v,
			       const struct steer_view_service *s)
{
	char vip[STEER_ADDR_STRLEN];
	int aw = address_width(s);
	size_t i;

	printf("service %s\n", steer_addr_format(&s->vip, vip, sizeof(vip)));
	print_table_state(v, s);
	printf("  connections: steered %llu, fallbacks %llu, refused %llu\n\n",
	       (unsigned long long)s->stats.steered, (unsigned long long)s->stats.fallbacks,
	       (unsigned long long)s->stats.refused);
	if (s->n_backends == 0) {
		printf("  (no configured backends)\n");
		return;
	}
	printf("  %-*s  %-16s %4s %12s %10s %10s %6s %9s %9s %8s  %-8s %s\n", aw, "BACKEND",
	       "HEALTH", "RANK", "BASE_WAIT_MS", "NS/TOKEN", "INFLIGHT", "LIVE", "STEERED",
	       "FALLBACKS", "SNAP_AGE", "MODE", "SOURCE");
	for (i = 0; i < s->n_backends; i++)
		print_backend_row(dp, &s->backends[i], aw);
}

static void status_text(const struct ctl *c, const struct steer_dp *dp, const struct steer_view *v)
{
	size_t i;

	printf("smg-steer data plane at %s: %zu service%s\n", steer_dp_pin_dir(dp), v->n_services,
	       v->n_services == 1 ? "" : "s");
	for (i = 0; i < v->n_services; i++) {
		printf("\n");
		print_service_text(dp, v, &v->services[i]);
	}
	steer_xdp_report_text(stdout, steer_dp_pin_dir(dp), v);
	(void)c;
}

/* ---- JSON helpers -------------------------------------------------------------- */

static void jadd(struct json_object *o, const char *k, struct json_object *v)
{
	json_object_object_add(o, k, v);
}

static void jadd_u64(struct json_object *o, const char *k, uint64_t v)
{
	jadd(o, k, json_object_new_uint64(v));
}

static void jadd_i64(struct json_object *o, const char *k, int64_t v)
{
	jadd(o, k, json_object_new_int64(v));
}

static void jadd_str(struct json_object *o, const char *k, const char *v)
{
	jadd(o, k, json_object_new_string(v));
}

static void jadd_bool(struct json_object *o, const char *k, bool v)
{
	jadd(o, k, json_object_new_boolean(v));
}

static void jadd_double(struct json_object *o, const char *k, double v)
{
	jadd(o, k, json_object_new_double(v));
}

static void jadd_addr(struct json_object *o, const char *k, const struct steer_addr *a)
{
	char buf[STEER_ADDR_STRLEN];

	jadd_str(o, k, steer_addr_format(a, buf, sizeof(buf)));
}

static int json_print_and_free(struct json_object *root)
{
	const char *s = json_object_to_json_string_ext(
		root,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
	int rc = s && printf("%s\n", s) > 0 ? 0 : -1;

	json_object_put(root);
	return rc;
}

/* ---- status, JSON ------------------------------------------------------------------ */

static void json_table_state(struct json_object *o, const struct steer_view *v,
			     const struct steer_view_service *s)
{
	jadd_bool(o, "published", s->published);
	if (!s->published)
		return;
	jadd_u64(o, "generation", s->generation);
	jadd_u64(o, "table_entries", s->n_table);
	jadd_i64(o, "table_age_ns", mono_diff(v->now_ns, s->published_ns));
	jadd_double(o, "table_age_s", ns_to_s(mono_diff(v->now_ns, s->published_ns)));
	jadd_i64(o, "expires_in_ns", mono_diff(s->expires_ns, v->now_ns));
	jadd_double(o, "expires_in_s", ns_to_s(mono_diff(s->expires_ns, v->now_ns)));
	jadd_bool(o, "expired", table_expired(v, s));
	jadd_bool(o, "fail_open", (s->table_flags & STEER_TBL_FAIL_OPEN) != 0);
	jadd_u64(o, "credit_tokens", s->credit_tokens);
}

static struct json_object *json_backend_status(const struct steer_dp *dp,
					       const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	struct json_object *o = json_object_new_object();

	jadd_addr(o, "address", &b->addr);
	jadd_u64(o, "slot", b->slot);
	jadd_str(o, "health", health_name(info->health));
	jadd_bool(o, "drained", b->drained);
	jadd(o, "rank", b->rank >= 0 ? json_object_new_int(b->rank) : NULL);
	jadd(o, "base_wait_ns", b->rank >= 0 ? json_object_new_uint64(b->base_wait_ns) : NULL);
	jadd(o, "ns_per_token", b->rank >= 0 ? json_object_new_uint64(b->ns_per_token) : NULL);
	jadd_u64(o, "inflight_tokens", b->ctr.inflight_tokens);
	jadd_i64(o, "live", b->ctr.live);
	jadd_u64(o, "steered", b->ctr.steered);
	jadd_u64(o, "fallbacks", b->ctr.fallbacks);
	jadd_str(o, "mode", info->mode == STEER_MODE_NONE ? "none" : mode_name(info->mode));
	jadd_str(o, "last_poll", poll_name(info->last_poll));
	jadd_str(o, "source", steer_source_name((enum steer_source)info->source));
	jadd(o, "snapshot_age_s",
	     info->snapshot_ns ? json_object_new_double(snapshot_age_s(info)) : NULL);
	return o;
}

static struct json_object *json_service_status(const struct steer_dp *dp,
					       const struct steer_view *v,
					       const struct steer_view_service *s)
{
	struct json_object *o = json_object_new_object(), *bks = json_object_new_array();
	size_t i;

	jadd_addr(o, "vip", &s->vip);
	jadd_u64(o, "svc_id", s->svc_id);
	json_table_state(o, v, s);
	jadd_u64(o, "steered", s->stats.steered);
	jadd_u64(o, "fallbacks", s->stats.fallbacks);
	jadd_u64(o, "refused", s->stats.refused);
	jadd_u64(o, "rr_cursor", s->stats.rr_cursor);
	for (i = 0; i < s->n_backends; i++)
		json_object_array_add(bks, json_backend_status(dp, &s->backends[i]));
	jadd(o, "backends", bks);
	return o;
}

static int status_json(const struct steer_dp *dp, const struct steer_view *v)
{
	struct json_object *root = json_object_new_object(), *svcs = json_object_new_array();
	size_t i;

	jadd_str(root, "pin_path", steer_dp_pin_dir(dp));
	jadd_u64(root, "now_ns", v->now_ns);
	for (i = 0; i < v->n_services; i++)
		json_object_array_add(svcs, json_service_status(dp, v, &v->services[i]));
	jadd(root, "services", svcs);
	jadd(root, "xdp", steer_xdp_report_json(steer_dp_pin_dir(dp), v));
	return json_print_and_free(root);
}

static int cmd_status(const struct ctl *c, struct steer_dp *dp)
{
	struct steer_view v;
	int rc;

	if (read_view(dp, &v) != 0)
		return EXIT_ERROR;
	if (c->output == OUTPUT_JSON) {
		rc = status_json(dp, &v) == 0 ? EXIT_OK : EXIT_ERROR;
	} else {
		status_text(c, dp, &v);
		rc = EXIT_OK;
	}
	steer_view_free(&v);
	return rc;
}

/* ---- explain, text --------------------------------------------------------------- */

/* Where a backend's queued tokens come from. The daemon estimates them in two
 * cases: the engine reports waiting requests but no token count (a snapshot),
 * or there is no load report at all (estimate and dark modes). */
static const char *queued_source(const struct steer_bk_info *info)
{
	if (!info->queued_estimated)
		return "report";
	return info->mode == STEER_MODE_SNAPSHOT ? "waiting_requests" : "live_connections";
}

static const char *queued_note(const struct steer_bk_info *info)
{
	const char *src = queued_source(info);

	if (!strcmp(src, "waiting_requests"))
		return " (estimated from waiting requests x mean prefill)";
	if (!strcmp(src, "live_connections"))
		return " (no load report: estimated from live connections x mean prefill)";
	return "";
}

/* The daemon's inputs to the base wait: queue, throughput, work and KV terms. */
static void explain_inputs_text(const struct steer_bk_info *info)
{
	char t[32];

	if (info->mode == STEER_MODE_NONE && info->updated_ns == 0) {
		/* Published by something that keeps no per-backend record. */
		printf("    (no record from smg-steerd for this backend: only the published costs "
		       "are known)\n");
		return;
	}
	printf("    mode:           %s (last poll: %s, %u DP ranks)\n", mode_name(info->mode),
	       poll_name(info->last_poll), info->dp_ranks);
	printf("    load source:    %s\n", steer_source_name((enum steer_source)info->source));
	printf("    queued tokens:  %llu%s\n", (unsigned long long)info->queued_tokens,
	       queued_note(info));
	printf("    throughput:     %.1f tokens/s\n", (double)info->throughput_mtps / 1000.0);
	printf("    work term:      %s (queued / throughput)\n",
	       fmt_ms(info->work_ns, t, sizeof(t)));
	printf("    KV usage:       %.2f %% -> KV barrier term %s\n", (double)info->kv_ppm / 1e4,
	       fmt_ms(info->barrier_ns, t, sizeof(t)));
	if (info->phase_ns)
		printf("    phase:          %s (random anti-herding offset, --peer-routers > 1)\n",
		       fmt_ms(info->phase_ns, t, sizeof(t)));
}

static void explain_backend_text(const struct steer_dp *dp, const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	char a[STEER_ADDR_STRLEN], h[32], t1[32], t2[32], t3[32];
	uint64_t inflight_ns, score;

	health_text(b, info, h, sizeof(h));
	printf("  %s  slot %u, %s, ", steer_addr_format(&b->addr, a, sizeof(a)), b->slot, h);
	if (b->rank < 0) {
		printf("not in the table: not a candidate\n");
		return;
	}
	printf("rank %d%s\n", b->rank, b->drained ? " (drained: skipped)" : "");
	explain_inputs_text(info);
	printf("    base wait:      %s (published: work + barrier + phase)\n",
	       fmt_ms(b->base_wait_ns, t1, sizeof(t1)));
	inflight_ns = steer_sat_mul(b->ctr.inflight_tokens, b->ns_per_token);
	printf("    in-flight term: %llu tokens x %llu ns/token = %s\n",
	       (unsigned long long)b->ctr.inflight_tokens, (unsigned long long)b->ns_per_token,
	       fmt_ms(inflight_ns, t2, sizeof(t2)));
	score = steer_score(b->base_wait_ns, b->ctr.inflight_tokens, b->ns_per_token);
	printf("    score:          %s (= %s + %s)\n", fmt_ms(score, t3, sizeof(t3)),
	       fmt_ms(b->base_wait_ns, t1, sizeof(t1)), fmt_ms(inflight_ns, t2, sizeof(t2)));
}

static void explain_scan_text(const struct decision *d)
{
	uint32_t n = d->table->n;
	char t[32];

	if (d->pick.scanned < n)
		printf("; scan stopped after %u of %u entries (early exit: the next entry's base "
		       "wait %s already reaches the best score)\n",
		       d->pick.scanned, n,
		       fmt_ms(d->table->e[d->pick.scanned].base_wait_ns, t, sizeof(t)));
	else
		printf("; scanned all %u entries\n", n);
}

static void explain_pick_text(const struct decision *d)
{
	char a[STEER_ADDR_STRLEN], b[STEER_ADDR_STRLEN], t1[32], t2[32];

	printf("next connection -> %s: lowest expected wait %s",
	       entry_addr(d->table, d->pick.pos, a, sizeof(a)),
	       fmt_ms(d->pick.score, t1, sizeof(t1)));
	if (d->has_next_best) {
		printf(" (next best %s at %s%s)",
		       entry_addr(d->table, d->next_best_pos, b, sizeof(b)),
		       fmt_ms(d->next_best_score, t2, sizeof(t2)),
		       d->next_best_score == d->pick.score ? ", a tie: the earlier rank wins" : "");
	} else {
		printf(" (the only eligible backend)");
	}
	explain_scan_text(d);
}

static void explain_decision_text(const struct steer_view *v, const struct steer_view_service *s,
				  const struct decision *d)
{
	char a[STEER_ADDR_STRLEN];
	uint32_t drained = d->table ? d->table->n - d->eligible : 0;

	switch (d->kind) {
	case DECIDE_PASSTHROUGH:
		printf("next connection -> %s itself: no table is published for it, so the "
		       "kernel does not steer it\n",
		       steer_addr_format(&s->vip, a, sizeof(a)));
		break;
	case DECIDE_SCORE:
		explain_pick_text(d);
		break;
	case DECIDE_ROUND_ROBIN:
		printf("next connection -> %s: round robin, the table EXPIRED %.1f s ago "
		       "(cursor %llu -> rank %u of %u; scores are not used)\n",
		       entry_addr(d->table, d->rr_pos, a, sizeof(a)),
		       ns_to_s(mono_diff(v->now_ns, s->expires_ns)),
		       (unsigned long long)s->stats.rr_cursor, d->rr_pos, d->table->n);
		break;
	case DECIDE_REFUSED:
		printf("next connection: refused (ECONNREFUSED): no eligible backend (%u in the "
		       "table, %u of them drained)\n",
		       d->table->n, drained);
		break;
	}
}

static void explain_text(const struct steer_dp *dp, const struct steer_view *v,
			 const struct steer_view_service *s, const struct decision *d)
{
	char vip[STEER_ADDR_STRLEN];
	size_t i;

	printf("service %s\n", steer_addr_format(&s->vip, vip, sizeof(vip)));
	print_table_state(v, s);
	printf("  score = base wait (queued work + KV barrier) + in-flight tokens x ns per "
	       "token\n\n");
	for (i = 0; i < s->n_backends; i++)
		explain_backend_text(dp, &s->backends[i]);
	if (s->n_backends == 0)
		printf("  (no configured backends)\n");
	printf("\n");
	explain_decision_text(v, s, d);
}

/* ---- explain, JSON ---------------------------------------------------------------- */

static struct json_object *json_backend_explain(const struct steer_dp *dp,
						const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	struct json_object *o = json_backend_status(dp, b);
	bool ranked = b->rank >= 0;
	uint64_t inflight_ns = steer_sat_mul(b->ctr.inflight_tokens, b->ns_per_token);

	jadd_u64(o, "queued_tokens", info->queued_tokens);
	jadd_bool(o, "queued_estimated", info->queued_estimated != 0);
	jadd_str(o, "queued_from", queued_source(info));
	jadd_double(o, "throughput_tokens_per_s", (double)info->throughput_mtps / 1000.0);
	jadd_u64(o, "work_ns", info->work_ns);
	jadd_u64(o, "kv_ppm", info->kv_ppm);
	jadd_u64(o, "barrier_ns", info->barrier_ns);
	jadd_u64(o, "phase_ns", info->phase_ns);
	jadd_u64(o, "dp_ranks", info->dp_ranks);
	jadd(o, "inflight_ns", ranked ? json_object_new_uint64(inflight_ns) : NULL);
	jadd(o, "score_ns",
	     ranked ? json_object_new_uint64(
			      steer_score(b->base_wait_ns, b->ctr.inflight_tokens, b->ns_per_token))
		    : NULL);
	return o;
}

static void json_entry_ref(struct json_object *o, const char *prefix, const struct decision *d,
			   uint32_t pos)
{
	char key[64], a[STEER_ADDR_STRLEN];

	snprintf(key, sizeof(key), "%sbackend", prefix);
	jadd_str(o, key, entry_addr(d->table, pos, a, sizeof(a)));
	snprintf(key, sizeof(key), "%srank", prefix);
	jadd_u64(o, key, pos);
	snprintf(key, sizeof(key), "%sslot", prefix);
	jadd_u64(o, key, d->table->e[pos].slot);
}

static struct json_object *json_decision(const struct steer_view_service *s,
					 const struct decision *d)
{
	struct json_object *o = json_object_new_object();
	uint32_t pos = decision_pos(d);

	jadd_str(o, "kind", decision_kind_name(d->kind));
	if (pos != STEER_NO_PICK)
		json_entry_ref(o, "", d, pos);
	else
		jadd(o, "backend", NULL);
	if (d->kind == DECIDE_SCORE) {
		jadd_u64(o, "score_ns", d->pick.score);
		jadd_u64(o, "scanned", d->pick.scanned);
		jadd_bool(o, "early_exit", d->pick.scanned < d->table->n);
	}
	if (d->kind == DECIDE_ROUND_ROBIN)
		jadd_u64(o, "rr_cursor", s->stats.rr_cursor);
	if (d->kind == DECIDE_SCORE && d->has_next_best) {
		json_entry_ref(o, "next_best_", d, d->next_best_pos);
		jadd_u64(o, "next_best_score_ns", d->next_best_score);
	}
	if (d->table) {
		jadd_u64(o, "entries", d->table->n);
		jadd_u64(o, "eligible", d->eligible);
	}
	if (d->kind == DECIDE_REFUSED)
		jadd_str(o, "error", "ECONNREFUSED");
	return o;
}

static int explain_json(const struct steer_dp *dp, const struct steer_view *v,
			const struct steer_view_service *s, const struct decision *d)
{
	struct json_object *root = json_object_new_object(), *bks = json_object_new_array();
	size_t i;

	jadd_addr(root, "vip", &s->vip);
	jadd_u64(root, "svc_id", s->svc_id);
	json_table_state(root, v, s);
	jadd_u64(root, "rr_cursor", s->stats.rr_cursor);
	for (i = 0; i < s->n_backends; i++)
		json_object_array_add(bks, json_backend_explain(dp, &s->backends[i]));
	jadd(root, "backends", bks);
	jadd(root, "next_connection", json_decision(s, d));
	return json_print_and_free(root);
}

static void print_known_services(const struct steer_view *v)
{
	char a[STEER_ADDR_STRLEN];
	size_t i;

	if (v->n_services == 0) {
		fprintf(stderr, "%s: no service is configured\n", prog);
		return;
	}
	fprintf(stderr, "%s: configured services:", prog);
	for (i = 0; i < v->n_services; i++)
		fprintf(stderr, " %s", steer_addr_format(&v->services[i].vip, a, sizeof(a)));
	fprintf(stderr, "\n");
}

static int explain_service(const struct ctl *c, const struct steer_dp *dp,
			   const struct steer_view *v, struct steer_view_service *s)
{
	struct decision d;
	int rc = EXIT_OK;

	if (decide(v, s, &d) != 0) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return EXIT_ERROR;
	}
	if (c->output == OUTPUT_JSON)
		rc = explain_json(dp, v, s, &d) == 0 ? EXIT_OK : EXIT_ERROR;
	else
		explain_text(dp, v, s, &d);
	decision_free(&d);
	return rc;
}

static int cmd_explain(const struct ctl *c, struct steer_dp *dp)
{
	struct steer_view_service *s;
	struct steer_view v;
	int rc;

	if (read_view(dp, &v) != 0)
		return EXIT_ERROR;
	s = find_service(&v, &c->target);
	if (!s) {
		fprintf(stderr, "%s: %s is not a virtual address of any service at %s\n", prog,
			c->target_str, steer_dp_pin_dir(dp));
		print_known_services(&v);
		rc = EXIT_ERROR;
	} else {
		rc = explain_service(c, dp, &v, s);
	}
	steer_view_free(&v);
	return rc;
}

/* ---- drain and undrain ------------------------------------------------------------- */

/* Services in which addr is a configured backend, as a JSON array of VIPs. */
static struct json_object *services_with_backend(const struct steer_view *v,
						 const struct steer_addr *addr)
{
	struct json_object *a = json_object_new_array();
	size_t i, k;

	for (i = 0; i < v->n_services; i++)
		for (k = 0; k < v->services[i].n_backends; k++)
			if (steer_addr_equal(&v->services[i].backends[k].addr, addr)) {
				char buf[STEER_ADDR_STRLEN];

				json_object_array_add(
					a, json_object_new_string(steer_addr_format(
						   &v->services[i].vip, buf, sizeof(buf))));
				break;
			}
	return a;
}

static void drain_report_text(const struct ctl *c, bool drain, bool was_drained,
			      struct json_object *svcs)
{
	size_t n = json_object_array_length(svcs), i;

	if (drain)
		printf("drained %s%s", c->target_str, was_drained ? " (it already was)" : "");
	else
		printf("undrained %s%s", c->target_str, was_drained ? "" : " (it was not drained)");
	if (n == 0) {
		printf(": not a configured backend of any service; the %s is recorded and "
		       "applies when a service configures it\n",
		       drain ? "drain" : "change");
		return;
	}
	printf(": a configured backend in %zu service%s (", n, n == 1 ? "" : "s");
	for (i = 0; i < n; i++)
		printf("%s%s", i ? ", " : "",
		       json_object_get_string(json_object_array_get_idx(svcs, i)));
	printf("); %s\n", drain ? "new connections avoid it from now on, existing ones stay"
				: "it is eligible for new connections again");
}

static int drain_report_json(const struct ctl *c, bool drain, bool was_drained,
			     struct json_object *svcs)
{
	struct json_object *root = json_object_new_object();

	jadd_str(root, "action", drain ? "drain" : "undrain");
	jadd_str(root, "backend", c->target_str);
	jadd_bool(root, "was_drained", was_drained);
	jadd_bool(root, "drained", drain);
	jadd_u64(root, "services_configured", json_object_array_length(svcs));
	jadd(root, "services", json_object_get(svcs));
	return json_print_and_free(root);
}

static int cmd_drain(const struct ctl *c, struct steer_dp *dp, bool drain)
{
	struct json_object *svcs;
	struct steer_view v;
	bool was_drained;
	char err[512];
	int rc = EXIT_OK;

	was_drained = steer_dp_is_drained(dp, &c->target);
	if (steer_dp_set_drained(dp, &c->target, drain, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s %s: %s\n", prog, drain ? "drain" : "undrain", c->target_str,
			err);
		return EXIT_ERROR;
	}
	if (read_view(dp, &v) != 0)
		return EXIT_ERROR;
	svcs = services_with_backend(&v, &c->target);
	if (c->output == OUTPUT_JSON)
		rc = drain_report_json(c, drain, was_drained, svcs) == 0 ? EXIT_OK : EXIT_ERROR;
	else
		drain_report_text(c, drain, was_drained, svcs);
	json_object_put(svcs);
	steer_view_free(&v);
	return rc;
}

/* ---- uninstall ------------------------------------------------------------------ */

/* Needs no data plane: it works on whatever layout is pinned (uninstall.h). */
static int cmd_uninstall(const struct ctl *c)
{
	struct steer_uninstall_report rep;
	char err[512];

	if (steer_uninstall(c->pin_dir, stdout, &rep, err, sizeof(err)) != 0) {
		fflush(stdout);
		fprintf(stderr, "%s: uninstall: %s\n", prog, err);
		return EXIT_ERROR;
	}
	if (!rep.nothing_pinned)
		printf("uninstalled: %u link(s) detached, %u pin(s) and %u directory(ies) "
		       "removed\n",
		       rep.links_detached, rep.pins_removed, rep.dirs_removed);
	return EXIT_OK;
}

/* ---- main ------------------------------------------------------------------------- */

static int run_command(const struct ctl *c, struct steer_dp *dp)
{
	switch (c->cmd) {
	case CMD_STATUS:
		return cmd_status(c, dp);
	case CMD_EXPLAIN:
		return cmd_explain(c, dp);
	case CMD_DRAIN:
		return cmd_drain(c, dp, true);
	case CMD_UNDRAIN:
		return cmd_drain(c, dp, false);
	default:
		return EXIT_USAGE;
	}
}

int main(int argc, char *argv[])
{
	struct ctl c = { .pin_dir = STEER_DEFAULT_PIN_DIR, .output = OUTPUT_TEXT };
	struct steer_dp *dp = NULL;
	int rc;

	/* The backends' decap has arguments of its own and needs no data plane. */
	if (argc > 1 && !strcmp(argv[1], "decap"))
		return steer_decap_cli(argc - 1, argv + 1, prog);
	rc = parse_args(&c, argc, argv);
	if (rc >= 0)
		return rc;
	/* Before touching anything: without root every map access fails obscurely. */
	if (require_root() != 0)
		return EXIT_ERROR;
	if (c.cmd == CMD_UNINSTALL)
		return cmd_uninstall(&c) == EXIT_OK && fflush(stdout) == 0 ? EXIT_OK : EXIT_ERROR;
	if (open_dataplane(&c, &dp) != 0)
		return EXIT_ERROR;
	/* The maps are open: nothing below needs more than CAP_BPF. */
	if (drop_privileges() != 0) {
		steer_dp_close(dp);
		return EXIT_ERROR;
	}
	rc = run_command(&c, dp);
	steer_dp_close(dp);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "%s: cannot write the output: %s\n", prog, strerror(errno));
		rc = EXIT_ERROR;
	}
	return rc;
}
