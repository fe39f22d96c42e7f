// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * main.c - steer-sim's command line: run one scenario under one or more
 * policies and print one CSV row per policy.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define MAX_RUNS 32

/* One policy to run: the steer policy twice, with its own peer count. */
struct run_spec {
	enum sim_policy policy;
	uint32_t peer_routers; /* 0: --peer-routers; UINT32_MAX: --routers */
	int estimator;	       /* -1: --estimator; else enum sim_estimator */
	int cadence;	       /* -1: --step-cadence; else enum sim_step_cadence */
	enum sim_admission admission;
	double slack_s; /* affinity's slack, s (< 0: none) */
	bool hrw;	/* affinity's first placement by rendezvous hash */
	bool ctx;	/* affinity's slack grows by the key's context (--aff-ctx) */
	char label[64];
};

struct options {
	struct sim_config c;
	struct run_spec runs[MAX_RUNS];
	size_t nruns;
	const char *scenario;
	bool header;
	bool verbose;
	bool warmup_set;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: steer-sim [options]\n"
		"Simulates an LLM fleet behind routers; prints one CSV row per policy.\n"
		"  --policies LIST      comma-separated: rr random jsq p2c reqcount steer\n"
		"                       steer-peers oracle, or all (default: all, which\n"
		"                       adds steer=flat and steer-peers=flat); steer=EST\n"
		"                       and steer-peers=EST run that estimator, and a\n"
		"                       suffix :CAD that step cadence (steer:max); a last\n"
		"                       suffix +bound (steer, steer-peers, oracle) refuses\n"
		"                       a connection whose pick waits over --wait-bound,\n"
		"                       +shed (steer, steer-peers, jsq) leaves out the\n"
		"                       workers smg's overload protection calls overloaded;\n"
		"                       a suffix @S (before +) gives steer affinity with a\n"
		"                       slack of S seconds (or inf), @hrwS the same with a\n"
		"                       new key's first worker by rendezvous hash, @ctxS\n"
		"                       a slack of S plus the prefill of the key's last\n"
		"                       connection's tokens (both: @hrwctxS);\n"
		"                       cache-aware, chbl and oracle-cache read the key\n"
		"  --workers N          workers, 1..32 (default 16)\n"
		"  --load X             offered load, fraction of fleet prefill capacity (0.8)\n"
		"  --poll S             snapshot interval, seconds (1)\n"
		"  --stagger            poll each worker at its own phase (default: all at once)\n"
		"  --routers N          independent routers, 1..64 (1)\n"
		"  --peer-routers N     smg-steer's peer_routers for 'steer' (1);\n"
		"                       'steer-peers' always uses --routers\n"
		"  --dist D             bimodal, lognormal or uniform (bimodal)\n"
		"  --requests N         measured requests (200000)\n"
		"  --warmup N           requests before measuring (requests / 10)\n"
		"  --seed N             random seed (1)\n"
		"  --tput MODE          gen_throughput reported: nominal or measured (nominal)\n"
		"  --mean-prefill N     smg-steer's least-load-mean-prefill-tokens (1024)\n"
		"  --kv-weight S        least-load-kv-pressure-weight, seconds (0.15)\n"
		"  --scenario NAME      label of the CSV rows (default)\n"
		"  --engine E           worker model: fifo (one prefill at a time) or batch\n"
		"                       (continuous batching, smg's mock worker) (fifo)\n"
		"  --response R         first response byte: stream (at the first token) or\n"
		"                       full (with the last token) (stream)\n"
		"  --keepalive K        requests per client connection (1)\n"
		"  --mean-output N      mean output tokens (256)\n"
		"  --estimator EST      smg-steer's in-flight work (docs/simulator.md):\n"
		"                       fluid (default: sends drained at the published\n"
		"                       throughput, capped by the pending ones, in place of\n"
		"                       this router's share of the snapshot), pending (sent\n"
		"                       and unanswered, same combination), sum (snapshot +\n"
		"                       pending), pending-peers, credit (real size at send,\n"
		"                       drained at the poll), flat (one credit per connection)\n"
		"  --wait-bound S       +bound: the longest expected wait admitted, seconds\n"
		"  --shed-kv K          +shed: a worker is overloaded at KV usage >= K (0.9)\n"
		"  --shed-waiting N     ... or at N waiting requests or more, 0: never (8)\n"
		"  --burst-load X       bursts: X (fraction of capacity) for --burst-on\n"
		"                       seconds, then --load for --burst-off seconds (off)\n"
		"  --burst-on S         length of a burst, seconds (20)\n"
		"  --burst-off S        length of the time between bursts, seconds (20)\n"
		"  --turns T            conversations of T turns on average (geometric), each\n"
		"                       turn a new connection; 0: single requests (0)\n"
		"  --think S            mean think time between turns, seconds (10)\n"
		"  --turn-router-any    each turn through a random router (default: the\n"
		"                       conversation's first)\n"
		"  --keys N             single requests: affinity keys drawn from N clients\n"
		"                       (0: one key per request) (0)\n"
		"  --cache-tokens N     prefix cache per worker, tokens (524288: smg's mock\n"
		"                       worker's KV; 0: none)\n"
		"  --aff-keys N         keys in each router's affinity table (65536)\n"
		"  --wire-uncached      ablation: the kernel counts only the prompt tokens\n"
		"                       the worker prefills (its cache's misses)\n"
		"  --step-cadence C     what fluid adds for the engine's step under way, from\n"
		"                       the response packets (docs/simulator.md): off, max\n"
		"                       (busy until the predicted step end), sum, periodic\n"
		"                       (off)\n"
		"Ablations and proposed fixes (docs/simulator.md), off by default:\n"
		"  --report-running-prefill  snapshots count the request in prefill too\n"
		"  --steer-credit-actual     same as --estimator credit\n"
		"  --share-wire              every router sees all routers' wire counters\n"
		"  --share-delay S           ... S seconds late (0)\n"
		"  --share-delay-samples F   ... each event as late as a delay drawn from F\n"
		"                            (seconds, one per line; # comments)\n"
		"  --phase-tokens N          random water-fill phase of N tokens per router\n"
		"                            (default: smg-steerd's, credit x peers if > 1)\n"
		"  --peer-guess-mean         other routers' sends guessed as (peers-1) x mean\n"
		"                            prefill per own send, not (peers-1) x its size\n"
		"  --peer-fill               other routers' sends predicted from this one's\n"
		"                            rate, water-filled over the fleet (fluid only)\n"
		"  --wire-token-scale X      the kernel counts X x each request's tokens\n"
		"                            (a wrong bytes-per-token; default 1)\n"
		"  --oracle-blind-step       batching: the oracle ignores the step under way\n"
		"  --step-sparse             step cadence: the step length also from gaps\n"
		"                            that may span many steps (lower envelope)\n"
		"  --step-ewma A             step cadence: the step length as an EWMA of\n"
		"                            one-step gaps with weight A (1: the last gap)\n"
		"  --clock-tick S            step cadence: packets and connects read a coarse\n"
		"                            clock of S seconds (0: exact)\n"
		"  --step-probe              batching: every router keeps a streaming probe\n"
		"                            request decoding on every worker (sees every\n"
		"                            step end; costs a decoding request each)\n"
		"  --step-probe-one          the same with one probe per worker for the whole\n"
		"                            fleet, its step ends shared with every router\n"
		"                            at once\n"
		"  --share-steps             with --step-probe-one --share-wire: worker w's\n"
		"                            probe is router w %% routers's, its step ends\n"
		"                            reach the others as late as a shared send\n"
		"  --share-steps-backdated   ... and they date them when they happened\n"
		"  --busy-resync             fluid: at every answer, the busy time is set to\n"
		"                            the pending work (not only capped by it)\n"
		"  --running-cap N           steer: a backend with N live connections of the\n"
		"                            router is full, never chosen (0: off)\n"
		"  --kv-tokens N             FIFO engine: KV capacity per worker, tokens\n"
		"                            (49152)\n"
		"  --steer-jitter            force the random water-fill phase even at\n"
		"                            --peer-routers 1 (smg-steerd adds it when > 1)\n"
		"Output:\n"
		"  --csv-header         print the CSV header and exit\n"
		"  --no-header          omit the CSV header\n"
		"  --verbose            per-worker detail on stderr\n"
		"  --help\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (!*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_u32(const char *s, uint32_t *out)
{
	uint64_t v;

	if (parse_u64(s, &v) || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_double(const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || !*s || *end || !isfinite(v))
		return -1;
	*out = v;
	return 0;
}

#define MAX_DELAY_SAMPLES 10000000

/* --share-delay-samples FILE: one delay in seconds per line, in [0, 3600];
 * blank lines and lines starting with # are skipped. The samples live until
 * exit (every run of the invocation draws from them). */
static int load_delays(const char *path, struct sim_config *c)
{
	FILE *f = fopen(path, "r");
	double *v = NULL, x;
	size_t n = 0, cap = 0;
	char line[256];
	int no = 0;

	if (!f) {
		fprintf(stderr, "steer-sim: --share-delay-samples %s: %s\n", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\r\n")] = 0;
		no++;
		if (!line[0] || line[0] == '#')
			continue;
		if (parse_double(line, &x) || !(x >= 0 && x <= 3600) || n == MAX_DELAY_SAMPLES) {
			fprintf(stderr,
				"steer-sim: --share-delay-samples %s:%d: '%s' is not a delay in "
				"seconds from 0 to 3600 (or more than %d samples)\n",
				path, no, line, MAX_DELAY_SAMPLES);
			goto fail;
		}
		if (n == cap) {
			double *g = realloc(v, (cap = cap ? cap * 2 : 1024) * sizeof(*v));

			if (!g)
				goto fail;
			v = g;
		}
		v[n++] = x;
	}
	fclose(f);
	if (!n) {
		fprintf(stderr, "steer-sim: --share-delay-samples %s: no samples\n", path);
		free(v);
		return -1;
	}
	free((void *)c->share_delays);
	c->share_delays = v;
	c->n_share_delays = (uint32_t)n;
	return 0;
fail:
	fclose(f);
	free(v);
	return -1;
}

/* The policy name of a spec, its first len characters, is name. */
static bool base_is(const char *spec, size_t len, const char *name)
{
	return strlen(name) == len && strncmp(spec, name, len) == 0;
}

/* The admission suffix of a policy spec, +bound or +shed, cut off spec;
 * -1 when it names none or one the policy cannot have. */
static int parse_admission(char *spec, struct run_spec *r)
{
	char *plus = strchr(spec, '+');
	bool bound_ok, shed_ok;
	size_t len;

	r->admission = SIM_ADMIT_ALL;
	if (!plus)
		return 0;
	if (sim_admission_parse(plus + 1, &r->admission) || r->admission == SIM_ADMIT_ALL)
		return -1;
	*plus = 0;
	len = strcspn(spec, "=:@");
	bound_ok = base_is(spec, len, "steer") || base_is(spec, len, "steer-peers") ||
		   base_is(spec, len, "oracle");
	shed_ok = base_is(spec, len, "steer") || base_is(spec, len, "steer-peers") ||
		  base_is(spec, len, "jsq");
	if (!(r->admission == SIM_ADMIT_BOUND ? bound_ok : shed_ok))
		return -1;
	return 0;
}

/* The affinity suffix of a policy spec, @S (S seconds or inf) with hrw
 * and ctx before S for those variants, cut off spec; -1 when it is not one.
 * The label keeps it. */
static int parse_affinity(char *spec, struct run_spec *r)
{
	char *at = strchr(spec, '@');
	const char *v;

	r->slack_s = -1;
	r->hrw = r->ctx = false;
	if (!at)
		return 0;
	*at = 0;
	for (v = at + 1;; v += 3) {
		if (strncmp(v, "hrw", 3) == 0)
			r->hrw = true;
		else if (strncmp(v, "ctx", 3) == 0)
			r->ctx = true;
		else
			break;
	}
	if (strcmp(v, "inf") == 0) {
		r->slack_s = INFINITY;
		return 0;
	}
	return parse_double(v, &r->slack_s) || r->slack_s < 0 ? -1 : 0;
}

/* NAME[=EST][:CAD][@AFF][+ADM]: EST, CAD and AFF for steer and steer-peers
 * only. */
static int add_run(struct options *o, const char *spec)
{
	struct run_spec r = { .estimator = -1, .cadence = -1 };
	char base[32], buf[64], aff[24] = "", *colon, *at;
	const char *name = buf, *eq;
	enum sim_estimator est;
	enum sim_step_cadence cad;

	if (o->nruns == MAX_RUNS || strlen(spec) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", spec);
	if (parse_admission(buf, &r))
		return -1;
	at = strchr(buf, '@');
	if (at)
		snprintf(aff, sizeof(aff), "%s", at);
	if (parse_affinity(buf, &r))
		return -1;
	colon = strchr(buf, ':');
	if (colon) {
		*colon = 0;
		if (sim_cadence_parse(colon + 1, &cad))
			return -1;
		r.cadence = (int)cad;
	}
	eq = strchr(name, '=');
	snprintf(base, sizeof(base), "%.*s", eq ? (int)(eq - name) : (int)strlen(name), name);
	if ((eq || colon || at) && strcmp(base, "steer") != 0 && strcmp(base, "steer-peers") != 0)
		return -1;
	if (eq) {
		if (sim_estimator_parse(eq + 1, &est))
			return -1;
		r.estimator = (int)est;
	}
	name = base;
	if (strcmp(name, "steer-peers") == 0) {
		r.policy = SIM_POL_STEER;
		r.peer_routers = UINT32_MAX;
	} else if (sim_policy_parse(name, &r.policy)) {
		return -1;
	}
	snprintf(r.label, sizeof(r.label), "%s%s%s%s", base, aff, r.admission ? "+" : "",
		 r.admission ? sim_admission_name(r.admission) : "");
	o->runs[o->nruns++] = r;
	return 0;
}

static int parse_policies(struct options *o, const char *list)
{
	/* smg-steer as it is (the fluid wire estimator) and with its request
	 * accounting off (one flat credit per connection). */
	static const char *const all[] = {
		"rr",	      "random",		  "jsq",   "p2c",	  "reqcount",
		"steer=flat", "steer-peers=flat", "steer", "steer-peers", "oracle"
	};
	char buf[256], *save = NULL, *tok;
	size_t i;

	o->nruns = 0;
	if (strcmp(list, "all") == 0) {
		for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			add_run(o, all[i]);
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s", list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if (add_run(o, tok))
			return -1;
	return o->nruns ? 0 : -1;
}

enum {
	OPT_POLICIES = 256,
	OPT_WORKERS,
	OPT_LOAD,
	OPT_POLL,
	OPT_STAGGER,
	OPT_ROUTERS,
	OPT_PEERS,
	OPT_DIST,
	OPT_REQUESTS,
	OPT_WARMUP,
	OPT_SEED,
	OPT_TPUT,
	OPT_PREFILL,
	OPT_KVW,
	OPT_SCENARIO,
	OPT_NOHEADER,
	OPT_VERBOSE,
	OPT_HELP,
	OPT_REPORT_RUNNING,
	OPT_JITTER,
	OPT_CREDIT_ACTUAL,
	OPT_CSV_HEADER,
	OPT_ENGINE,
	OPT_RESPONSE,
	OPT_KEEPALIVE,
	OPT_MEAN_OUTPUT,
	OPT_ESTIMATOR,
	OPT_SHARE_WIRE,
	OPT_SHARE_DELAY,
	OPT_SHARE_DELAY_SAMPLES,
	OPT_PHASE_TOKENS,
	OPT_PEER_GUESS_MEAN,
	OPT_PEER_FILL,
	OPT_WIRE_SCALE,
	OPT_ORACLE_BLIND_STEP,
	OPT_STEP_CADENCE,
	OPT_STEP_SPARSE,
	OPT_STEP_EWMA,
	OPT_CLOCK_TICK,
	OPT_STEP_PROBE,
	OPT_STEP_PROBE_ONE,
	OPT_SHARE_STEPS,
	OPT_SHARE_STEPS_BACKDATED,
	OPT_WAIT_BOUND,
	OPT_SHED_KV,
	OPT_SHED_WAITING,
	OPT_BURST_LOAD,
	OPT_BURST_ON,
	OPT_BURST_OFF,
	OPT_BUSY_RESYNC,
	OPT_RUNNING_CAP,
	OPT_KV_TOKENS,
	OPT_TURNS,
	OPT_THINK,
	OPT_TURN_ROUTER_ANY,
	OPT_KEYS,
	OPT_CACHE_TOKENS,
	OPT_AFF_KEYS,
	OPT_WIRE_UNCACHED,
};

static const struct option long_opts[] = {
	{ "policies", required_argument, 0, OPT_POLICIES },
	{ "workers", required_argument, 0, OPT_WORKERS },
	{ "load", required_argument, 0, OPT_LOAD },
	{ "poll", required_argument, 0, OPT_POLL },
	{ "stagger", no_argument, 0, OPT_STAGGER },
	{ "routers", required_argument, 0, OPT_ROUTERS },
	{ "peer-routers", required_argument, 0, OPT_PEERS },
	{ "dist", required_argument, 0, OPT_DIST },
	{ "requests", required_argument, 0, OPT_REQUESTS },
	{ "warmup", required_argument, 0, OPT_WARMUP },
	{ "seed", required_argument, 0, OPT_SEED },
	{ "tput", required_argument, 0, OPT_TPUT },
	{ "mean-prefill", required_argument, 0, OPT_PREFILL },
	{ "kv-weight", required_argument, 0, OPT_KVW },
	{ "scenario", required_argument, 0, OPT_SCENARIO },
	{ "no-header", no_argument, 0, OPT_NOHEADER },
	{ "verbose", no_argument, 0, OPT_VERBOSE },
	{ "help", no_argument, 0, OPT_HELP },
	{ "report-running-prefill", no_argument, 0, OPT_REPORT_RUNNING },
	{ "steer-jitter", no_argument, 0, OPT_JITTER },
	{ "steer-credit-actual", no_argument, 0, OPT_CREDIT_ACTUAL },
	{ "csv-header", no_argument, 0, OPT_CSV_HEADER },
	{ "engine", required_argument, 0, OPT_ENGINE },
	{ "response", required_argument, 0, OPT_RESPONSE },
	{ "keepalive", required_argument, 0, OPT_KEEPALIVE },
	{ "mean-output", required_argument, 0, OPT_MEAN_OUTPUT },
	{ "estimator", required_argument, 0, OPT_ESTIMATOR },
	{ "share-wire", no_argument, 0, OPT_SHARE_WIRE },
	{ "share-delay", required_argument, 0, OPT_SHARE_DELAY },
	{ "share-delay-samples", required_argument, 0, OPT_SHARE_DELAY_SAMPLES },
	{ "phase-tokens", required_argument, 0, OPT_PHASE_TOKENS },
	{ "peer-guess-mean", no_argument, 0, OPT_PEER_GUESS_MEAN },
	{ "peer-fill", no_argument, 0, OPT_PEER_FILL },
	{ "wire-token-scale", required_argument, 0, OPT_WIRE_SCALE },
	{ "oracle-blind-step", no_argument, 0, OPT_ORACLE_BLIND_STEP },
	{ "step-cadence", required_argument, 0, OPT_STEP_CADENCE },
	{ "step-sparse", no_argument, 0, OPT_STEP_SPARSE },
	{ "step-ewma", required_argument, 0, OPT_STEP_EWMA },
	{ "clock-tick", required_argument, 0, OPT_CLOCK_TICK },
	{ "step-probe", no_argument, 0, OPT_STEP_PROBE },
	{ "step-probe-one", no_argument, 0, OPT_STEP_PROBE_ONE },
	{ "share-steps", no_argument, 0, OPT_SHARE_STEPS },
	{ "share-steps-backdated", no_argument, 0, OPT_SHARE_STEPS_BACKDATED },
	{ "wait-bound", required_argument, 0, OPT_WAIT_BOUND },
	{ "shed-kv", required_argument, 0, OPT_SHED_KV },
	{ "shed-waiting", required_argument, 0, OPT_SHED_WAITING },
	{ "burst-load", required_argument, 0, OPT_BURST_LOAD },
	{ "burst-on", required_argument, 0, OPT_BURST_ON },
	{ "burst-off", required_argument, 0, OPT_BURST_OFF },
	{ "busy-resync", no_argument, 0, OPT_BUSY_RESYNC },
	{ "running-cap", required_argument, 0, OPT_RUNNING_CAP },
	{ "kv-tokens", required_argument, 0, OPT_KV_TOKENS },
	{ "turns", required_argument, 0, OPT_TURNS },
	{ "think", required_argument, 0, OPT_THINK },
	{ "turn-router-any", no_argument, 0, OPT_TURN_ROUTER_ANY },
	{ "keys", required_argument, 0, OPT_KEYS },
	{ "cache-tokens", required_argument, 0, OPT_CACHE_TOKENS },
	{ "aff-keys", required_argument, 0, OPT_AFF_KEYS },
	{ "wire-uncached", no_argument, 0, OPT_WIRE_UNCACHED },
	{ 0, 0, 0, 0 },
};

static int parse_tput(const char *s, enum sim_tput_report *out)
{
	if (strcmp(s, "nominal") == 0)
		*out = SIM_TPUT_NOMINAL;
	else if (strcmp(s, "measured") == 0)
		*out = SIM_TPUT_MEASURED;
	else
		return -1;
	return 0;
}

/* Admission control, bursts and their ablations (docs/simulator.md,
 * "Overload"); -1 when the value is invalid. */
static int apply_overload_option(struct sim_config *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_WAIT_BOUND:
		return parse_double(arg, &c->wait_bound_s);
	case OPT_SHED_KV:
		return parse_double(arg, &c->shed_kv);
	case OPT_SHED_WAITING:
		return parse_u32(arg, &c->shed_waiting);
	case OPT_BURST_LOAD:
		return parse_double(arg, &c->burst_load);
	case OPT_BURST_ON:
		return parse_double(arg, &c->burst_on_s);
	case OPT_BURST_OFF:
		return parse_double(arg, &c->burst_off_s);
	case OPT_BUSY_RESYNC:
		c->busy_resync = true;
		return 0;
	case OPT_RUNNING_CAP:
		return parse_u32(arg, &c->running_cap);
	case OPT_KV_TOKENS:
		return parse_u32(arg, &c->kv_tokens);
	default:
		return -1;
	}
}

/* Conversations, keys and the prefix cache (docs/simulator.md, "Cache
 * affinity"); -1 when the value is invalid. */
static int apply_affinity_option(struct sim_config *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_TURNS:
		return parse_double(arg, &c->turns);
	case OPT_THINK:
		return parse_double(arg, &c->think_s);
	case OPT_TURN_ROUTER_ANY:
		c->turn_router_any = true;
		return 0;
	case OPT_KEYS:
		return parse_u32(arg, &c->keys);
	case OPT_CACHE_TOKENS:
		return parse_u32(arg, &c->cache_tokens);
	case OPT_AFF_KEYS:
		return parse_u32(arg, &c->aff_keys);
	case OPT_WIRE_UNCACHED:
		c->wire_uncached = true;
		return 0;
	default:
		return apply_overload_option(c, opt, arg);
	}
}

/* One option; -1 when its value is invalid. */
static int apply_option(struct options *o, int opt, const char *arg)
{
	struct sim_config *c = &o->c;

	switch (opt) {
	case OPT_POLICIES:
		return parse_policies(o, arg);
	case OPT_WORKERS:
		return parse_u32(arg, &c->workers);
	case OPT_LOAD:
		return parse_double(arg, &c->load);
	case OPT_POLL:
		return parse_double(arg, &c->poll_s);
	case OPT_STAGGER:
		c->stagger = true;
		return 0;
	case OPT_ROUTERS:
		return parse_u32(arg, &c->routers);
	case OPT_PEERS:
		return parse_u32(arg, &c->knobs.peer_routers);
	case OPT_DIST:
		return sim_dist_parse(arg, &c->dist);
	case OPT_REQUESTS:
		return parse_u64(arg, &c->requests);
	case OPT_WARMUP:
		o->warmup_set = true;
		return parse_u64(arg, &c->warmup);
	case OPT_SEED:
		return parse_u64(arg, &c->seed);
	case OPT_TPUT:
		return parse_tput(arg, &c->tput);
	case OPT_PREFILL:
		return parse_u32(arg, &c->knobs.mean_prefill_tokens);
	case OPT_KVW:
		return parse_double(arg, &c->knobs.kv_pressure_weight);
	case OPT_SCENARIO:
		o->scenario = arg;
		return 0;
	case OPT_NOHEADER:
		o->header = false;
		return 0;
	case OPT_VERBOSE:
		o->verbose = true;
		return 0;
	case OPT_REPORT_RUNNING:
		c->report_running_prefill = true;
		return 0;
	case OPT_JITTER:
		c->steer_jitter = true;
		return 0;
	case OPT_CREDIT_ACTUAL:
		c->estimator = SIM_EST_CREDIT;
		return 0;
	case OPT_ENGINE:
		return sim_engine_parse(arg, &c->engine);
	case OPT_RESPONSE:
		return sim_response_parse(arg, &c->response);
	case OPT_KEEPALIVE:
		return parse_u32(arg, &c->keepalive);
	case OPT_MEAN_OUTPUT:
		return parse_double(arg, &c->mean_output);
	case OPT_ESTIMATOR:
		return sim_estimator_parse(arg, &c->estimator);
	case OPT_SHARE_WIRE:
		c->share_wire = true;
		return 0;
	case OPT_SHARE_DELAY:
		return parse_double(arg, &c->share_delay_s);
	case OPT_SHARE_DELAY_SAMPLES:
		return load_delays(arg, c);
	case OPT_PHASE_TOKENS: {
		uint32_t v;

		if (parse_u32(arg, &v))
			return -1;
		c->phase_tokens = v;
		return 0;
	}
	case OPT_PEER_GUESS_MEAN:
		c->peer_guess_mean = true;
		return 0;
	case OPT_PEER_FILL:
		c->peer_fill = true;
		return 0;
	case OPT_WIRE_SCALE:
		return parse_double(arg, &c->wire_scale);
	case OPT_ORACLE_BLIND_STEP:
		c->oracle_blind_step = true;
		return 0;
	case OPT_STEP_CADENCE:
		return sim_cadence_parse(arg, &c->step_cadence);
	case OPT_STEP_SPARSE:
		c->step_sparse = true;
		return 0;
	case OPT_STEP_EWMA:
		return parse_double(arg, &c->step_ewma);
	case OPT_CLOCK_TICK:
		return parse_double(arg, &c->clock_tick_s);
	case OPT_STEP_PROBE:
		c->step_probe = true;
		return 0;
	case OPT_STEP_PROBE_ONE:
		c->step_probe = c->step_probe_one = true;
		return 0;
	case OPT_SHARE_STEPS:
		c->share_steps = true;
		return 0;
	case OPT_SHARE_STEPS_BACKDATED:
		c->share_steps = c->share_steps_backdated = true;
		return 0;
	default:
		return apply_affinity_option(c, opt, arg);
	}
}

/* 0 to run, 1 to exit 0 (--help), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct options *o)
{
	int opt;

	memset(o, 0, sizeof(*o));
	sim_config_defaults(&o->c);
	o->scenario = "default";
	o->header = true;
	parse_policies(o, "all");
	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		if (opt == OPT_HELP) {
			usage(stdout);
			return 1;
		}
		if (opt == OPT_CSV_HEADER) {
			printf("%s\n", sim_csv_header());
			return 1;
		}
		if (apply_option(o, opt, optarg)) {
			if (opt != '?')
				fprintf(stderr, "steer-sim: invalid value for --%s: '%s'\n",
					long_opts[opt - OPT_POLICIES].name, optarg ? optarg : "");
			fprintf(stderr, "steer-sim: see --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "steer-sim: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	if (!o->warmup_set)
		o->c.warmup = o->c.requests / 10;
	return 0;
}

static void print_workers(const struct run_spec *run, const struct sim_result *r)
{
	uint32_t i;

	fprintf(stderr, "# %s: picks %llu, end %.1f s, preemptions %llu\n", run->label,
		(unsigned long long)r->routers.picks, r->end_s, (unsigned long long)r->preemptions);
	for (i = 0; i < r->workers; i++)
		fprintf(stderr, "#   worker %2u speed %.2f dispatched %8llu backlog %8.3f s\n", i,
			r->w[i].speed, (unsigned long long)r->w[i].dispatched, r->w[i].backlog_s);
}

static int run_one(const struct options *o, const struct run_spec *run)
{
	struct sim_config c = o->c;
	struct sim_result r;
	char why[160], row[1024];

	c.policy = run->policy;
	c.admission = run->admission;
	if (run->peer_routers == UINT32_MAX)
		c.knobs.peer_routers = c.routers;
	if (run->estimator >= 0)
		c.estimator = (enum sim_estimator)run->estimator;
	if (run->cadence >= 0)
		c.step_cadence = (enum sim_step_cadence)run->cadence;
	c.slack_s = run->slack_s;
	c.aff_hrw = run->hrw;
	c.aff_ctx = run->ctx;
	if (sim_run(&c, &r, why, sizeof(why))) {
		fprintf(stderr, "steer-sim: %s\n", why);
		return -1;
	}
	sim_csv_row(row, sizeof(row), o->scenario, run->label, &c, &r);
	printf("%s\n", row);
	fflush(stdout);
	if (o->verbose)
		print_workers(run, &r);
	return 0;
}

int main(int argc, char **argv)
{
	struct options o;
	char why[160];
	size_t i;
	int rc = parse_args(argc, argv, &o);

	if (rc)
		return rc == 1 ? 0 : 2;
	if (sim_config_check(&o.c, why, sizeof(why))) {
		fprintf(stderr, "steer-sim: %s\n", why);
		return 2;
	}
	if (o.header)
		printf("%s\n", sim_csv_header());
	for (i = 0; i < o.nruns; i++)
		if (run_one(&o, &o.runs[i])) {
			rc = 1;
			break;
		}
	free((void *)o.c.share_delays);
	return rc;
}
