/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/*
 * affmap.c - the cache affinity map on its own: BPF time per operation of the
 * LRU hash declared as steer_affin against a 4-way set-associative table in an
 * array (tools/bench/bpf/affmap.bpf.c), each program one operation per run,
 * by BPF_PROG_TEST_RUN with a repeat count.
 *
 *   affmap OBJ [ROUNDS [REPEAT]]     (make bench-affmap; ROUNDS 9, REPEAT 1e6)
 *
 * Each round loads the object afresh (both tables empty) and runs, the two
 * designs alternating first and second from round to round:
 *   empty      the floor (also at the round's end; the floor is their mean);
 *   key        the key alone (counter, mix), nothing stored;
 *   fill       inserts of new clients into the empty table, up to 3/4 full;
 *   full       inserts of new clients once it is full (LRU: one eviction
 *              each; set: one overwrite of the set's oldest way), after
 *              2 x capacity inserts not measured;
 *   hit        lookups of one of the last 131,072 clients inserted;
 *   miss       lookups of clients never inserted;
 *   new        a new client as a connect meets it, the table full: the
 *              lookup (a miss), then the insert of the same key;
 *   touch      one read of a random bucket of the set-associative array: the
 *              least a client out of the cache costs any table this large;
 * and between full and hit, not timed, the share of the last 65,536 / 131,072
 * / 262,144 clients each design still finds. Figures: the median over rounds of ns per run less
 * the round's floor, with the quartiles.
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

#define KEYS (1u << 18) /* STEER_AFFINITY_KEYS */
#define FILL (KEYS / 4 * 3)
#define HIT_WINDOW (KEYS / 2)

/* affmap.bpf.c's struct affm_globals, one per design and one for the key. */
struct globals {
	uint64_t seed, ins, look, window, hits, sink;
};
enum {
	G_LRU,
	G_SET,
	G_KEY
};

enum meas {
	M_EMPTY,
	M_KEY,
	M_LRU_FILL,
	M_SET_FILL,
	M_LRU_FULL,
	M_SET_FULL,
	M_LRU_HIT,
	M_SET_HIT,
	M_LRU_MISS,
	M_SET_MISS,
	M_LRU_NEW,
	M_SET_NEW,
	M_TOUCH,
	M_N
};
static const char *const meas_names[M_N] = {
	"empty program (floor, absolute)",
	"key alone (counter, mix)",
	"LRU insert, filling",
	"set-assoc insert, filling",
	"LRU insert, full (evicting)",
	"set-assoc insert, full",
	"LRU lookup, hit",
	"set-assoc lookup, hit",
	"LRU lookup, miss",
	"set-assoc lookup, miss",
	"LRU new client (miss + insert), full",
	"set-assoc new client, full",
	"one read of a random bucket (8 MiB)",
};

#define MAX_ROUNDS 64
#define RET_W 3
static const uint32_t ret_windows[RET_W] = { KEYS / 4, KEYS / 2, KEYS };

struct bench {
	struct bpf_object *obj;
	struct globals *g;
	size_t g_size;
	int empty, key, touch, ins[2], hit[2], miss[2], new_[2];
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
	if (!b->g || sz < 3 * sizeof(struct globals)) {
		fprintf(stderr, "affmap: no mmapped .bss in %s\n", path);
		return -1;
	}
	for (i = 0; i < 3; i++)
		b->g[i].seed = seed + (uint64_t)i * 0x100000000ULL;
	b->empty = prog_fd(b->obj, "affm_empty");
	b->key = prog_fd(b->obj, "affm_keyonly");
	b->touch = prog_fd(b->obj, "affm_set_touch");
	b->ins[G_LRU] = prog_fd(b->obj, "affm_lru_insert");
	b->ins[G_SET] = prog_fd(b->obj, "affm_set_insert");
	b->hit[G_LRU] = prog_fd(b->obj, "affm_lru_hit");
	b->hit[G_SET] = prog_fd(b->obj, "affm_set_hit");
	b->miss[G_LRU] = prog_fd(b->obj, "affm_lru_miss");
	b->miss[G_SET] = prog_fd(b->obj, "affm_set_miss");
	b->new_[G_LRU] = prog_fd(b->obj, "affm_lru_new");
	b->new_[G_SET] = prog_fd(b->obj, "affm_set_new");
	if (b->empty < 0 || b->key < 0 || b->ins[0] < 0 || b->ins[1] < 0 || b->hit[0] < 0 ||
	    b->hit[1] < 0 || b->miss[0] < 0 || b->miss[1] < 0 || b->new_[0] < 0 || b->new_[1] < 0 ||
	    b->touch < 0) {
		fprintf(stderr, "affmap: a program is missing from %s\n", path);
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
	static double res[M_N][MAX_ROUNDS], ret[2][RET_W][MAX_ROUNDS], hitrate[2][MAX_ROUNDS];
	int rounds = argc > 2 ? atoi(argv[2]) : 9;
	uint32_t repeat = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1000000;
	struct bench b;
	int r, k, d, w;

	if (argc < 2 || rounds < 1 || rounds > MAX_ROUNDS || repeat < 1000) {
		fprintf(stderr, "usage: affmap OBJ [ROUNDS (1..%d) [REPEAT (>= 1000)]]\n",
			MAX_ROUNDS);
		return 2;
	}
	libbpf_set_print(NULL);
	printf("affmap: %d rounds, %u runs per measurement, %u entries (%u sets x 4 ways)\n",
	       rounds, repeat, KEYS, KEYS / 4);
	for (r = 0; r < rounds; r++) {
		double e0, e1, v[M_N];

		if (bench_load(&b, argv[1],
			       (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ULL + (uint64_t)r))
			return 1;
		e0 = run(b.empty, repeat);
		v[M_KEY] = run(b.key, repeat);
		for (k = 0; k < 2; k++) {
			d = (r + k) & 1; /* the designs take turns going first */
			v[M_LRU_FILL + d] = run(b.ins[d], FILL);
		}
		for (k = 0; k < 2; k++) {
			d = (r + k) & 1;
			if (run(b.ins[d], 2 * KEYS) < 0)
				return 1;
			v[M_LRU_FULL + d] = run(b.ins[d], repeat);
		}
		/* what each still remembers of its last clients (not timed):
		 * the lookups renew only clients among the last inserted */
		for (d = 0; d < 2; d++)
			for (w = 0; w < RET_W; w++) {
				b.g[d].window = ret_windows[w];
				b.g[d].look = 0;
				b.g[d].hits = 0;
				if (run(b.hit[d], ret_windows[w]) < 0)
					return 1;
				ret[d][w][r] = (double)b.g[d].hits / ret_windows[w];
			}
		for (k = 0; k < 2; k++) {
			d = (r + k) & 1;
			b.g[d].window = HIT_WINDOW;
			b.g[d].look = 0;
			b.g[d].hits = 0;
			v[M_LRU_HIT + d] = run(b.hit[d], repeat);
			hitrate[d][r] = (double)b.g[d].hits / repeat;
		}
		for (k = 0; k < 2; k++) {
			d = (r + k) & 1;
			b.g[d].look = 0;
			v[M_LRU_MISS + d] = run(b.miss[d], repeat);
		}
		for (k = 0; k < 2; k++) {
			d = (r + k) & 1;
			v[M_LRU_NEW + d] = run(b.new_[d], repeat);
		}
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
	printf("\nhit lookups that found their client: LRU %.4f, set-assoc %.4f (medians)\n",
	       quantile(hitrate[G_LRU], rounds, 0.5), quantile(hitrate[G_SET], rounds, 0.5));
	printf("share of the last N clients still found, after %u inserts (medians):\n",
	       FILL + 2 * KEYS + repeat);
	for (w = 0; w < RET_W; w++)
		printf("  N = %7u   LRU %.4f   set-assoc %.4f\n", ret_windows[w],
		       quantile(ret[G_LRU][w], rounds, 0.5), quantile(ret[G_SET][w], rounds, 0.5));
	return 0;
}
