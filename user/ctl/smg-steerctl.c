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

#include "ctl.h"

#include "common/common.h"
#include "dataplane/dataplane.h"
#include "loads/loads.h"
#include "policy/policy.h"
#include "privs/privs.h"
#include "steer_common.h"
#include "xdp/xdp.h"

const char *prog = "smg-steerctl";

/* ---- usage and argument parsing ------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s [--pin-path DIR] [-o text|json] status\n"
		"       %s [--pin-path DIR] [-o text|json] explain VIP [--client KEY]\n"
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
		"                   --client KEY: and whether that client's next connection\n"
		"                   stays on the backend of its last (cache affinity), and why;\n"
		"                   KEY: cgroup:PATH (a cgroup v2 directory), netns:PATH\n"
		"                   (/proc/PID/ns/net, /run/netns/NAME), key:N (the\n"
		"                   application's key, decimal or 0x hex) or source:ADDR (XDP\n"
		"                   ingress: the client's address)\n"
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
		"  --client KEY         explain: a client of cache affinity (see explain)\n"
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
		{ "client", required_argument, NULL, 'C' },
		{ NULL, 0, NULL, 0 },
	};
	char err[256];
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
		case 'C':
			if (ctl_client_parse(optarg, &c->client, err, sizeof(err)) != 0)
				return usage_error("%s", err);
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
	if (rc == EXIT_OK && c->client.arg && c->cmd != CMD_EXPLAIN)
		return usage_error("--client is an option of explain");
	return rc == EXIT_OK ? -1 : rc;
}

/* ---- names and numbers ------------------------------------------------------ */

const char *health_name(uint8_t h)
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

const char *mode_name(uint8_t m)
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

const char *poll_name(uint8_t p)
{
	static const char *const names[STEER_POLL_KINDS] = {
		"none", "ok", "unimplemented", "unavailable", "deadline", "invalid", "error",
	};

	return p < STEER_POLL_KINDS ? names[p] : "?";
}

/* "12.345 ms", or "saturated" for the kernel's saturated maximum. */
const char *fmt_ms(uint64_t ns, char *buf, size_t len)
{
	if (ns == STEER_U64_MAX)
		snprintf(buf, len, "saturated");
	else
		snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
	return buf;
}

double ns_to_s(int64_t ns)
{
	return (double)ns / 1e9;
}

/* Signed difference a - b of two monotonic timestamps, clamped to int64. */
int64_t mono_diff(uint64_t a, uint64_t b)
{
	if (a >= b)
		return a - b > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)(a - b);
	return b - a > (uint64_t)INT64_MAX ? -INT64_MAX : -(int64_t)(b - a);
}

bool table_expired(const struct steer_view *v, const struct steer_view_service *s)
{
	/* The kernel's test, with bpf_ktime_get_ns() = CLOCK_MONOTONIC. */
	return v->now_ns > s->expires_ns;
}

const struct steer_bk_info *bk_info(const struct steer_dp *dp, const struct steer_view_backend *b)
{
	static const struct steer_bk_info none;
	const struct steer_bk_info *i = steer_dp_bk_info(dp, b->slot);

	return i ? i : &none;
}

struct steer_view_service *find_service(struct steer_view *v, const struct steer_addr *vip)
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

int read_view(const struct steer_dp *dp, struct steer_view *v)
{
	char err[512];
	int rc = steer_dp_view(dp, v, err, sizeof(err));

	if (rc)
		fprintf(stderr, "%s: cannot read the data plane: %s\n", prog, err);
	return rc;
}

/* ---- status, text ----------------------------------------------------------------- */

void print_table_state(const struct steer_view *v, const struct steer_view_service *s)
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
	printf("  fail-open: %s, credit: %u tokens per connection, %u request bytes per token\n",
	       (s->table_flags & STEER_TBL_FAIL_OPEN) ? "YES (every backend ejected)" : "no",
	       s->credit_tokens, s->bytes_per_token);
}

void health_text(const struct steer_view_backend *b, const struct steer_bk_info *info, char *buf,
		 size_t len)
{
	const char *over = (b->ctr.flags & STEER_SLOT_OVERLOADED) ? ",overloaded"
			   : (b->ctr.flags & STEER_SLOT_PUSHBACK) ? ",pushback"
			   : steer_at_max_live(&b->ctr, &b->wire) ? ",full"
								  : "";

	snprintf(buf, len, "%s%s%s", b->drained ? "drained," : "", health_name(info->health), over);
}

/* Seconds since the backend's last good GetLoads snapshot (info->snapshot_ns != 0). */
double snapshot_age_s(const struct steer_bk_info *info)
{
	uint64_t now = steer_monotonic_ns();

	return now > info->snapshot_ns ? (double)(now - info->snapshot_ns) / 1e9 : 0.0;
}

uint64_t backend_pending_tokens(const struct steer_view_service *s,
				const struct steer_view_backend *b)
{
	return b->pending_bytes / steer_bytes_per_token(s->bytes_per_token);
}

/*
 * The backends' table: where connections go now (health, rank, base wait,
 * the work each holds, how fresh its load is), each column as wide as its
 * widest cell: 8 IPv6 backends fit 120 columns. explain has every term of
 * the scores (ns per token, the load's source), -o json the counters by
 * backend (steered, fallbacks) too; the service's line has their totals.
 */
enum {
	COL_BACKEND,
	COL_HEALTH,
	COL_RANK,
	COL_BASE,
	COL_INFLIGHT,
	COL_PENDING,
	COL_LIVE,
	COL_AGE,
	COL_MODE,
	N_COLS
};

static const struct {
	const char *head;
	bool left; /* left-aligned (text); numbers are right-aligned */
} columns[N_COLS] = {
	[COL_BACKEND] = { "BACKEND", true },	[COL_HEALTH] = { "HEALTH", true },
	[COL_RANK] = { "RANK", false },		[COL_BASE] = { "BASE_MS", false },
	[COL_INFLIGHT] = { "INFLIGHT", false }, [COL_PENDING] = { "PENDING", false },
	[COL_LIVE] = { "LIVE", false },		[COL_AGE] = { "SNAP_AGE", false },
	[COL_MODE] = { "MODE", true },
};

#define CELL_LEN STEER_ADDR_STRLEN

static void backend_cells(const struct steer_dp *dp, const struct steer_view_service *s,
			  const struct steer_view_backend *b, char (*cell)[CELL_LEN])
{
	const struct steer_bk_info *info = bk_info(dp, b);

	steer_addr_format(&b->addr, cell[COL_BACKEND], CELL_LEN);
	health_text(b, info, cell[COL_HEALTH], CELL_LEN);
	snprintf(cell[COL_RANK], CELL_LEN, "-");
	snprintf(cell[COL_BASE], CELL_LEN, "-");
	if (b->rank >= 0) {
		snprintf(cell[COL_RANK], CELL_LEN, "%d", b->rank);
		snprintf(cell[COL_BASE], CELL_LEN, "%.3f", (double)b->base_wait_ns / 1e6);
	}
	snprintf(cell[COL_INFLIGHT], CELL_LEN, "%llu", (unsigned long long)b->ctr.inflight_tokens);
	snprintf(cell[COL_PENDING], CELL_LEN, "%llu",
		 (unsigned long long)backend_pending_tokens(s, b));
	snprintf(cell[COL_LIVE], CELL_LEN, "%lld", (long long)b->ctr.live);
	snprintf(cell[COL_AGE], CELL_LEN, "-");
	if (info->snapshot_ns)
		snprintf(cell[COL_AGE], CELL_LEN, "%.1f", snapshot_age_s(info));
	snprintf(cell[COL_MODE], CELL_LEN, "%s", mode_name(info->mode));
}

/* One row: two blanks before the table and after the address, one between
 * the other columns; no trailing blanks. */
static void print_row(char (*cell)[CELL_LEN], const int *w)
{
	int c;

	for (c = 0; c < N_COLS; c++) {
		printf("%s", c <= COL_HEALTH ? "  " : " ");
		if (!columns[c].left)
			printf("%*s", w[c], cell[c]);
		else if (c == N_COLS - 1)
			printf("%s", cell[c]);
		else
			printf("%-*s", w[c], cell[c]);
	}
	printf("\n");
}

static void print_backends_text(const struct steer_dp *dp, const struct steer_view_service *s)
{
	char(*cells)[N_COLS][CELL_LEN] = calloc(s->n_backends + 1, sizeof(*cells));
	int w[N_COLS] = { 0 };
	size_t i;
	int c;

	if (!cells) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return;
	}
	for (c = 0; c < N_COLS; c++)
		snprintf(cells[0][c], CELL_LEN, "%s", columns[c].head);
	for (i = 0; i < s->n_backends; i++)
		backend_cells(dp, s, &s->backends[i], cells[i + 1]);
	for (i = 0; i <= s->n_backends; i++)
		for (c = 0; c < N_COLS; c++)
			if ((int)strlen(cells[i][c]) > w[c])
				w[c] = (int)strlen(cells[i][c]);
	for (i = 0; i <= s->n_backends; i++)
		print_row(cells[i], w);
	free(cells);
}

/* Cache affinity, when on: the mode, its slack and timeout, then what
 * connects of clients with a key did; the counts go on a line of their own
 * when the whole would pass STATUS_COLUMNS. */
static void print_affinity_text(const struct steer_view_service *s)
{
	const __u64 *a = s->stats.affinity;
	char slack[32], idle[32], head[128], counts[256];

	if (s->affinity == STEER_AFF_OFF)
		return;
	snprintf(head, sizeof(head), "  affinity: %s, slack %s, timeout %s;",
		 steer_affinity_name(s->affinity),
		 steer_duration_text(s->affinity_slack_ns, slack, sizeof(slack)),
		 steer_duration_text(s->affinity_idle_ns, idle, sizeof(idle)));
	snprintf(counts, sizeof(counts),
		 "stayed %llu, new %llu, left %llu (slack %llu, gone %llu, overload %llu)",
		 (unsigned long long)a[STEER_AFF_STAY], (unsigned long long)a[STEER_AFF_NEW],
		 (unsigned long long)(a[STEER_AFF_LEFT_SLACK] + a[STEER_AFF_LEFT_GONE] +
				      a[STEER_AFF_LEFT_OVERLOAD]),
		 (unsigned long long)a[STEER_AFF_LEFT_SLACK],
		 (unsigned long long)a[STEER_AFF_LEFT_GONE],
		 (unsigned long long)a[STEER_AFF_LEFT_OVERLOAD]);
	if (strlen(head) + 1 + strlen(counts) > STATUS_COLUMNS)
		printf("%s\n    %s\n", head, counts);
	else
		printf("%s %s\n", head, counts);
}

static void print_service_text(const struct steer_dp *dp, const struct steer_view *v,
			       const struct steer_view_service *s)
{
	char vip[STEER_ADDR_STRLEN];

	printf("service %s\n", steer_addr_format(&s->vip, vip, sizeof(vip)));
	print_table_state(v, s);
	printf("  connections: steered %llu, fallbacks %llu, refused %llu\n",
	       (unsigned long long)s->stats.steered, (unsigned long long)s->stats.fallbacks,
	       (unsigned long long)s->stats.refused);
	if (s->table_flags & STEER_TBL_OVERLOAD)
		printf("  overload: when every backend is: %s; refused %llu (every backend "
		       "overloaded), %llu (wait over %.3f s); given to the least bad %llu\n",
		       (s->table_flags & STEER_TBL_OVERLOAD_LEAST) ? "least" : "refuse",
		       (unsigned long long)s->stats.overload_refused,
		       (unsigned long long)s->stats.wait_refused, (double)s->wait_bound_ns / 1e9,
		       (unsigned long long)s->stats.overload_admitted);
	print_affinity_text(s);
	printf("\n");
	if (s->n_backends == 0) {
		printf("  (no configured backends)\n");
		return;
	}
	print_backends_text(dp, s);
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

void jadd(struct json_object *o, const char *k, struct json_object *v)
{
	json_object_object_add(o, k, v);
}

void jadd_u64(struct json_object *o, const char *k, uint64_t v)
{
	jadd(o, k, json_object_new_uint64(v));
}

void jadd_i64(struct json_object *o, const char *k, int64_t v)
{
	jadd(o, k, json_object_new_int64(v));
}

void jadd_str(struct json_object *o, const char *k, const char *v)
{
	jadd(o, k, json_object_new_string(v));
}

void jadd_bool(struct json_object *o, const char *k, bool v)
{
	jadd(o, k, json_object_new_boolean(v));
}

void jadd_double(struct json_object *o, const char *k, double v)
{
	jadd(o, k, json_object_new_double(v));
}

void jadd_addr(struct json_object *o, const char *k, const struct steer_addr *a)
{
	char buf[STEER_ADDR_STRLEN];

	jadd_str(o, k, steer_addr_format(a, buf, sizeof(buf)));
}

int json_print_and_free(struct json_object *root)
{
	const char *s = json_object_to_json_string_ext(
		root,
		JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
	int rc = s && printf("%s\n", s) > 0 ? 0 : -1;

	json_object_put(root);
	return rc;
}

/* ---- status, JSON ------------------------------------------------------------------ */

void json_table_state(struct json_object *o, const struct steer_view *v,
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
	jadd_u64(o, "bytes_per_token", s->bytes_per_token);
}

struct json_object *json_backend_status(const struct steer_dp *dp,
					const struct steer_view_service *s,
					const struct steer_view_backend *b)
{
	const struct steer_bk_info *info = bk_info(dp, b);
	struct json_object *o = json_object_new_object();

	jadd_addr(o, "address", &b->addr);
	jadd_u64(o, "slot", b->slot);
	jadd_str(o, "health", health_name(info->health));
	jadd_bool(o, "drained", b->drained);
	/* Overload protection: why the backend is out, if it is. */
	jadd_str(o, "overload",
		 (b->ctr.flags & STEER_SLOT_OVERLOADED)
			 ? steer_overload_reason_name(info->overload == STEER_OVERLOAD_WAITING
							      ? STEER_OVERLOAD_WAITING
							      : STEER_OVERLOAD_KV)
		 : (b->ctr.flags & STEER_SLOT_PUSHBACK) ? "pushback"
		 : steer_at_max_live(&b->ctr, &b->wire) ? "connections"
							: "none");
	jadd_u64(o, "pushbacks", b->wire.pushbacks);
	jadd_u64(o, "server_errors", b->wire.server_errors);
	jadd(o, "rank", b->rank >= 0 ? json_object_new_int(b->rank) : NULL);
	jadd(o, "base_wait_ns", b->rank >= 0 ? json_object_new_uint64(b->base_wait_ns) : NULL);
	jadd(o, "ns_per_token", b->rank >= 0 ? json_object_new_uint64(b->ns_per_token) : NULL);
	jadd_u64(o, "inflight_tokens", b->ctr.inflight_tokens);
	/* Request bytes on this node's steered sockets (request accounting). */
	jadd_u64(o, "pending_bytes", b->pending_bytes);
	jadd_u64(o, "pending_tokens", backend_pending_tokens(s, b));
	jadd_u64(o, "sent_bytes", b->wire.sent_bytes);
	jadd_u64(o, "answered_bytes", b->wire.answered_bytes);
	jadd_u64(o, "requests", b->wire.requests);
	jadd_u64(o, "withdrawn_tokens", b->wire.withdrawn_tokens);
	jadd_u64(o, "answered_tokens", b->wire.answered_tokens);
	/* The other routers' (--peer), as their reports were applied here. */
	jadd_u64(o, "peer_pending_tokens", b->wire.peer_pending_tokens);
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

/* Cache affinity as published ("off" and zeros while off) and its
 * connects by verdict, each under its metrics label. */
static struct json_object *json_affinity(const struct steer_view_service *s)
{
	struct json_object *o = json_object_new_object();
	uint32_t k;

	jadd_str(o, "mode", steer_affinity_name(s->affinity));
	jadd_u64(o, "slack_ns", s->affinity_slack_ns);
	jadd_u64(o, "timeout_ns", s->affinity_idle_ns);
	for (k = 0; k < STEER_AFF_VERDICTS; k++)
		jadd_u64(o, steer_aff_verdict_name(k), s->stats.affinity[k]);
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
	jadd_u64(o, "overload_refused", s->stats.overload_refused);
	jadd_u64(o, "wait_refused", s->stats.wait_refused);
	jadd_u64(o, "overload_admitted", s->stats.overload_admitted);
	jadd_u64(o, "rr_cursor", s->stats.rr_cursor);
	jadd(o, "affinity", json_affinity(s));
	for (i = 0; i < s->n_backends; i++)
		json_object_array_add(bks, json_backend_status(dp, s, &s->backends[i]));
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
	char err[512];
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
	/* explain --client netns:PATH enters the namespace (CAP_SYS_ADMIN). */
	if (c.client.arg && ctl_client_resolve(&c.client, err, sizeof(err)) != 0) {
		fprintf(stderr, "%s: %s\n", prog, err);
		steer_dp_close(dp);
		return EXIT_ERROR;
	}
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
