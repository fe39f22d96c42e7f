/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * affmap.c - the cache affinity table on its own: BPF time per operation on
 * an array of steer_affin's shape (STEER_AFFINITY_SETS sets of 4 ways, one
 * 64-byte line each, 16 MiB), by the kernel's own insert and lookup
 * (tools/bench/bpf/affmap.bpf.c), each program one operation per run, by
 * BPF_PROG_TEST_RUN with a repeat count.
 *
 *   affmap OBJ [ROUNDS [REPEAT]]     (make bench-affmap; ROUNDS 9, REPEAT 1e6)
 *
 * Each round loads the object afresh (the table empty) and runs:
 *   empty      the floor (also at the round's end; the floor is their mean);
 *   key        the key alone (counter, mix, steer_aff_hash), nothing stored;
 *   fill       inserts of new clients into the empty table, up to 3/4 of
 *              STEER_AFFINITY_KEYS;
 *   full       inserts of new clients once it is full (each overwrites its
 *              set's way least recently connected), after 2 x
 *              STEER_AFFINITY_KEYS inserts not measured;
 *   hit        lookups of one of the last 262,144 clients inserted (each
 *              renews the client's last_ns);
 *   miss       lookups of clients never inserted;
 *   new        a new client as a connect meets it, the table full: the
 *              lookup (a miss), then the insert of the same key;
 *   touch      the key, then one read of a random set's line: the least a
 *              lookup of a client out of the cache costs in a table this large;
 * and between full and hit, not timed, the share of the last 65,536 / 262,144
 * / 1,048,576 clients inserted that the table still has, read from user space
 * set by set with the contract's functions (steer_common.h), as smg-steerctl
 * reads steer_affin. Figures: the median over rounds of ns per run less the
 * round's floor, with the quartiles.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "steer_common.h"

#define KEYS STEER_AFFINITY_KEYS
#define FILL (KEYS / 4 * 3)
#define HIT_WINDOW (KEYS / 4)

/* affmap.bpf.c's struct affm_globals: the table's, then the key's. */
struct globals {
	uint64_t seed, ins, look, window, hits, sink;
};
enum {
	G_TAB,
	G_KEY
};

enum meas {
	M_EMPTY,
	M_KEY,
	M_FILL,
	M_FULL,
	M_HIT,
	M_MISS,
	M_NEW,
	M_TOUCH,
	M_N
};
static const char *const meas_names[M_N] = {
	"empty program (floor, absolute)",
	"key alone (counter, mix, hash)",
	"insert, filling (to 3/4)",
	"insert, full",
	"lookup, hit",
	"lookup, miss",
	"new client (miss + insert), full",
	"one read of a random set (16 MiB)",
};

#define MAX_ROUNDS 64
#define RET_W 3
static const uint32_t ret_windows[RET_W] = { KEYS / 16, KEYS / 4, KEYS };

struct bench {
	struct bpf_object *obj;
	struct globals *g;
	size_t g_size;
	int map, empty, key, ins, hit, miss, new_, touch;
};

static int prog_fd(struct bpf_object *obj, const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(obj, name);

	return p ? bpf_program__fd(p) : -1;
}

static int bench_load(struct bench *b, const char *path, uint64_t seed)
{
	struct bpf_map *m;
	size_t sz = 0;
	void *p;
	int i;

	memset(b, 0, sizeof(*b));
	b->obj = bpf_object__open_file(path, NULL);
	if (!b->obj || bpf_object__load(b->obj)) {
		fprintf(stderr, "affmap: cannot load %s: %s\n", path, strerror(errno));
		return -1;
	}
	bpf_object__for_each_map(m, b->obj)
	{
		const char *n = bpf_map__name(m);
		size_t l = strlen(n);

		if (l > 4 && !strcmp(n + l - 4, ".bss")) {
			/* the live map (bpf_map__initial_value is libbpf's copy
			 * outside a skeleton) */
			sz = bpf_map__value_size(m);
			p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
			b->g = p == MAP_FAILED ? NULL : p;
			b->g_size = sz;
		}
	}
	if (!b->g || sz < 2 * sizeof(struct globals)) {
		fprintf(stderr, "affmap: no mmapped .bss in %s\n", path);
		return -1;
	}
	for (i = 0; i < 2; i++)
		b->g[i].seed = seed + (uint64_t)i * 0x100000000ULL;
	b->map = bpf_object__find_map_fd_by_name(b->obj, "affm_affin");
	b->empty = prog_fd(b->obj, "affm_empty");
	b->key = prog_fd(b->obj, "affm_keyonly");
	b->ins = prog_fd(b->obj, "affm_insert");
	b->hit = prog_fd(b->obj, "affm_hit");
	b->miss = prog_fd(b->obj, "affm_miss");
	b->new_ = prog_fd(b->obj, "affm_new_client");
	b->touch = prog_fd(b->obj, "affm_touch");
	if (b->map < 0 || b->empty < 0 || b->key < 0 || b->ins < 0 || b->hit < 0 || b->miss < 0 ||
	    b->new_ < 0 || b->touch < 0) {
		fprintf(stderr, "affmap: a program or the map is missing from %s\n", path);
		return -1;
	}
	return 0;
}

/* ns per run of fd over repeat runs, or -1. */
static double run(int fd, uint32_t repeat)
{
	unsigned char pkt[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (bpf_prog_test_run_opts(fd, &o)) {
		fprintf(stderr, "affmap: test run: %s\n", strerror(errno));
		return -1;
	}
	return (double)o.duration;
}

/* The share of the last n clients of g inserted that the table tab (every
 * set, as read) still has. */
static double retained(const struct steer_aff_set *tab, const struct globals *g, uint32_t n)
{
	struct steer_aff_key k = { .svc_id = 7, .kind = STEER_AFF_SOCKOPT };
	uint64_t i, found = 0;
	__u64 hash;

	for (i = g->ins - n; i < g->ins; i++) {
		k.client = steer_aff_mix(g->seed + i);
		hash = steer_aff_hash(&k);
		found += steer_aff_way_of(&tab[steer_aff_set_of(hash)], steer_aff_tag(hash)) <
			 STEER_AFFINITY_WAYS;
	}
	return (double)found / n;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double quantile(double *v, int n, double q)
{
	double pos = q * (n - 1);
	int i = (int)pos;

	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return i + 1 < n ? v[i] + (pos - i) * (v[i + 1] - v[i]) : v[i];
}

int main(int argc, char **argv)
{
	static double res[M_N][MAX_ROUNDS], ret[RET_W][MAX_ROUNDS], hitrate[MAX_ROUNDS];
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	uint32_t repeat = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1000000;
	struct steer_aff_set *tab;
	struct bench b;
	__u32 set;
	int r, k, w;

	if (argc < 2 || rounds < 1 || rounds > MAX_ROUNDS || repeat < 1000) {
		fprintf(stderr, "usage: affmap OBJ [ROUNDS (1..%d) [REPEAT (>= 1000)]]\n",
			MAX_ROUNDS);
		return 2;
	}
	tab = calloc(STEER_AFFINITY_SETS, sizeof(*tab));
	if (!tab) {
		fprintf(stderr, "affmap: out of memory\n");
		return 1;
	}
	libbpf_set_print(NULL);
	printf("affmap: %d rounds, %u runs per measurement, %u ways (%u sets x %u ways, %zu-byte "
	       "sets)\n",
	       rounds, repeat, KEYS, STEER_AFFINITY_SETS, STEER_AFFINITY_WAYS,
	       sizeof(struct steer_aff_set));
	for (r = 0; r < rounds; r++) {
		double e0, e1, v[M_N];

		if (bench_load(&b, argv[1],
			       (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL + (uint64_t)r))
			return 1;
		e0 = run(b.empty, repeat);
		v[M_KEY] = run(b.key, repeat);
		v[M_FILL] = run(b.ins, FILL);
		if (run(b.ins, 2 * KEYS) < 0)
			return 1;
		v[M_FULL] = run(b.ins, repeat);
		/* what the table still has of its last clients (not timed, and
		 * renewing nothing) */
		for (set = 0; set < STEER_AFFINITY_SETS; set++)
			if (bpf_map_lookup_elem(b.map, &set, &tab[set])) {
				fprintf(stderr, "affmap: reading set %u: %s\n", set,
					strerror(errno));
				return 1;
			}
		for (w = 0; w < RET_W; w++)
			ret[w][r] = retained(tab, &b.g[G_TAB], ret_windows[w]);
		b.g[G_TAB].window = HIT_WINDOW;
		b.g[G_TAB].look = 0;
		b.g[G_TAB].hits = 0;
		v[M_HIT] = run(b.hit, repeat);
		hitrate[r] = (double)b.g[G_TAB].hits / repeat;
		b.g[G_TAB].look = 0;
		b.g[G_TAB].hits = 0;
		v[M_MISS] = run(b.miss, repeat);
		if (b.g[G_TAB].hits)
			fprintf(stderr, "affmap: round %d: %llu misses found a client\n", r + 1,
				(unsigned long long)b.g[G_TAB].hits);
		v[M_NEW] = run(b.new_, repeat);
		v[M_TOUCH] = run(b.touch, repeat);
		e1 = run(b.empty, repeat);
		v[M_EMPTY] = (e0 + e1) / 2;
		for (k = 0; k < M_N; k++) {
			if (v[k] < 0)
				return 1;
			res[k][r] = k == M_EMPTY ? v[k] : v[k] - v[M_EMPTY];
		}
		printf("round %2d:", r + 1);
		for (k = 0; k < M_N; k++)
			printf(" %6.1f", res[k][r]);
		printf("\n");
		fflush(stdout);
		munmap(b.g, b.g_size);
		bpf_object__close(b.obj);
	}
	printf("\nns of BPF per operation, less the empty program (median [quartiles] of %d "
	       "rounds):\n",
	       rounds);
	for (k = 0; k < M_N; k++) {
		double q1 = quantile(res[k], rounds, 0.25), q3 = quantile(res[k], rounds, 0.75);

		printf("  %-34s %7.1f  [%.1f, %.1f]\n", meas_names[k],
		       quantile(res[k], rounds, 0.5), q1, q3);
	}
	printf("\nhit lookups that found their client: %.4f (median)\n",
	       quantile(hitrate, rounds, 0.5));
	printf("share of the last N clients still found, after %u inserts (medians):\n",
	       FILL + 2 * KEYS + repeat);
	for (w = 0; w < RET_W; w++)
		printf("  N = %7u   %.4f\n", ret_windows[w], quantile(ret[w], rounds, 0.5));
	free(tab);
	return 0;
}
