/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_autotune.c: autotune on a real GPU: measure then hit, corrupt and stale entries, forced plans, shapes. */
#include "config.h"
#include <stdio.h>

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

static char *tune_home;

static void setup_tune(void)
{
	tune_home = tu_tmpdir();
	setenv("XDG_CACHE_HOME", tune_home, 1);
	gpu_setup();
}

static void teardown_tune(void)
{
	gpu_teardown();
	unsetenv("XDG_CACHE_HOME");
	tu_rmtree(tune_home);
	free(tune_home);
	tune_home = NULL;
}

/*
 * The entries under $XDG_CACHE_HOME/wsnorm/tune (no temporary file may be left); with needle, the
 * path of the one entry whose name holds it in *path (malloc'd; NULL if none).
 */
static int tune_entries(const char *needle, char **path)
{
	char dir[4096];
	struct dirent *de;
	DIR *d;
	int n = 0;

	if (path)
		*path = NULL;
	snprintf(dir, sizeof(dir), "%s/wsnorm/tune", tune_home);
	if (!(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.') {
			ck_assert_msg(strncmp(de->d_name, ".tmp-", 5), "temporary file left: %s", de->d_name);
			continue;
		}
		n++;
		if (needle && path && strstr(de->d_name, needle)) {
			ck_assert_msg(*path == NULL, "two entries hold '%s'", needle);
			ck_assert(asprintf(path, "%s/%s", dir, de->d_name) > 0);
		}
	}
	closedir(d);
	return n;
}

/* The first line of a file, malloc'd ("" when empty). */
static char *first_line(const char *path)
{
	char *line = gpu_xcalloc(512);
	FILE *f = fopen(path, "r");

	ck_assert_msg(f != NULL, "cannot open %s", path);
	if (!fgets(line, 512, f))
		line[0] = '\0';
	fclose(f);
	return line;
}

/* The plan's description, malloc'd. */
static char *describe(const struct wsn_plan *p)
{
	int n = wsn_plan_describe(p, NULL, 0);
	char *text;

	ck_assert_int_gt(n, 0);
	text = gpu_xcalloc((size_t)n + 1);
	ck_assert_int_eq(wsn_plan_describe(p, text, (size_t)n + 1), n);
	return text;
}

/* The kernel family of a description's "approach:" line. */
static enum wsn_approach approach_of(const char *desc)
{
	const char *a = strstr(desc, "\napproach:");
	char word[16] = "";

	ck_assert_msg(a && sscanf(a + 10, " %15[a-z]", word) == 1, "no approach line in:\n%s", desc);
	return !strcmp(word, "ws") ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE;
}

/* An autotune plan of op for s (options as wsn_plan_options_init, autotune on, plus po's approach and groups). */
static struct wsn_plan *tune_plan(const struct setup *s, enum wsn_op op, const struct wsn_plan_options *po,
				  char **desc)
{
	struct wsn_plan_options o;
	struct wsn_plan *p = NULL;
	double t0 = wsn__now();

	wsn_plan_options_init(&o, op);
	o.autotune = 1;
	if (po) {
		o.approach = po->approach;
		o.groups = po->groups;
	}
	OK(wsn_plan_create(gpu_dev, op, s->rows, s->hidden, s->dt, &o, &p));
	*desc = describe(p);
	printf("%s %s hidden=%lld rows=%lld autotune plan in %.2f s: %.*s\n", wsn_op_name(op), wsn_dtype_name(s->dt),
	       (long long)s->hidden, (long long)s->rows, wsn__now() - t0,
	       (int)strcspn(strstr(*desc, "autotune:") ? strstr(*desc, "autotune:") : "(no autotune line)", "\n"),
	       strstr(*desc, "autotune:") ? strstr(*desc, "autotune:") : "(no autotune line)");
	fflush(stdout);
	return p;
}

/*
 * (a) The first autotune plan of each op (bf16, hidden 4096, 4096 rows) times both families and
 * writes exactly one entry naming the approach the plan runs; its results match the CPU reference.
 * (b) A second plan hits the cache: same approach, no new entry, the entry unchanged.
 */
START_TEST(test_autotune_measure_then_hit)
{
	static const int64_t rows[] = { 1, 1000, 4096 };
	int64_t h = 4096, r = 4096;
	struct inputs in;
	struct setup s;
	int fails = 0;

	gpu_inputs_make(&in, "autotune", h, r, h, 0);
	gpu_setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	ck_assert_int_eq(tune_entries(NULL, NULL), 0);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
		enum wsn_op op = ops[o];
		struct wsn_plan *gp, *cp;
		char *desc, *desc2, *path, *line, *line2, needle[96], want[160];
		enum wsn_approach a;
		double worst = 0;
		int before = tune_entries(NULL, NULL), two = gpu_ws_plans(op, s.dt, h, r, NULL);

		gp = tune_plan(&s, op, NULL, &desc);
		a = approach_of(desc);
		ck_assert_msg(strstr(desc, two ? "\nautotune:      measured now (no entry): ws " :
						 "\nautotune:      one candidate (no entry): multiwave"),
			      "%s: first autotune plan:\n%s", wsn_op_name(op), desc);
		snprintf(needle, sizeof(needle), "_%s_bf16_h4096_", wsn_op_name(op));
		ck_assert_int_eq(tune_entries(needle, &path), before + 1);
		ck_assert_msg(path != NULL, "no entry holds '%s'", needle);
		ck_assert_msg(strstr(desc, path), "the description does not name the entry %s:\n%s", path, desc);
		line = first_line(path);
		snprintf(want, sizeof(want), "wsnorm-tune 3 approach=%s shape=", wsn_approach_name(a));
		ck_assert_msg(!strncmp(line, want, strlen(want)), "entry '%s', the plan runs %s", line,
			      wsn_approach_name(a));
		ck_assert_msg(!two || strstr(line, " rows=4096\n"), "entry '%s': timed on 4096 rows expected", line);
		OK(wsn_plan_create(cpu_dev, op, s.rows, s.hidden, s.dt, NULL, &cp));
		for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
			fails += gpu_run_rows(&s, op, gp, cp, rows[i], &worst);
		wsn_plan_destroy(gp);

		gp = tune_plan(&s, op, NULL, &desc2);
		ck_assert_msg(strstr(desc2, "\nautotune:      cache hit ("), "%s: second autotune plan:\n%s", wsn_op_name(op),
			      desc2);
		ck_assert_int_eq(approach_of(desc2), a);
		ck_assert_int_eq(tune_entries(needle, NULL), before + 1);
		line2 = first_line(path);
		ck_assert_str_eq(line2, line);
		fails += gpu_run_rows(&s, op, gp, cp, r, &worst);
		printf("%s %s autotune %s: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", wsn_op_name(op), wsn_approach_name(a),
		       worst);
		wsn_plan_destroy(gp);
		wsn_plan_destroy(cp);
		free(desc);
		free(desc2);
		free(path);
		free(line);
		free(line2);
	}
	gpu_setup_free(&s);
	gpu_inputs_free(&in);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* (c) Garbage in the entry is a miss: measured again and rewritten as a whole entry. */
START_TEST(test_autotune_corrupt_entry)
{
	static const char garbage[] = "\x01\x02 not an entry \xff\n";
	int64_t h = 4096, r = 2048;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp;
	char *desc, *path, *line;

	gpu_inputs_make(&in, "autotune-corrupt", h, r, h, 0);
	gpu_setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
	gp = tune_plan(&s, WSN_RMSNORM_FWD, NULL, &desc);
	wsn_plan_destroy(gp);
	free(desc);
	ck_assert_int_eq(tune_entries("_rmsnorm-fwd_bf16_h4096_", &path), 1);
	ck_assert(path != NULL);
	tu_write_file(path, garbage, sizeof(garbage) - 1);
	gp = tune_plan(&s, WSN_RMSNORM_FWD, NULL, &desc);
	ck_assert_msg(strstr(desc, "\nautotune:      measured now (malformed entry): ") ||
			      strstr(desc, "\nautotune:      one candidate (malformed entry): "),
		      "after garbage in the entry:\n%s", desc);
	ck_assert_int_eq(tune_entries(NULL, NULL), 1);
	line = first_line(path);
	ck_assert_msg(!strncmp(line, "wsnorm-tune 3 approach=", 23) && strstr(line, " rows="), "rewritten entry '%s'",
		      line);
	ck_assert_msg(strstr(line, wsn_approach_name(approach_of(desc))), "entry '%s' does not name the plan's approach",
		      line);
	wsn_plan_destroy(gp);
	free(desc);
	free(line);
	free(path);
	gpu_setup_free(&s);
	gpu_inputs_free(&in);
}
END_TEST

/*
 * (d) An entry naming ws for a shape ws cannot plan (LayerNorm backward f32, hidden 32769: a row of
 * dy and x is over the shared-memory budget and an odd row does not split over a cluster) is not used: the plan falls back to deciding anew (multi-wave,
 * the one candidate) and the entry is rewritten.
 */
START_TEST(test_autotune_stale_ws_entry)
{
	static const struct { enum wsn_dtype dt; int64_t h; } shapes[] = { { WSN_F32, 32769 }, { WSN_BF16, 65537 } };
	int64_t r = 1024;
	struct setup s;
	struct wsn_plan *gp;
	char *desc, *path, *line, needle[96];
	const char *stale =
		"wsnorm-tune 3 approach=ws shape=0,0,0,0,0 ws_us=1.000 shape_us=0.000 multiwave_us=2.000 shapes=0 rows=1024\n";
	const char *mw = "wsnorm-tune 3 approach=multiwave shape=0,0,0,0,0 ws_us=0.000 shape_us=0.000 multiwave_us=0.000 "
			 "shapes=0 rows=0\n";
	size_t i;

	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!gpu_ws_plans(WSN_LAYERNORM_BWD, shapes[i].dt, shapes[i].h, r, NULL))
			break;
	ck_assert_msg(i < sizeof(shapes) / sizeof(shapes[0]),
		      "the ws planner plans every LayerNorm backward shape this test knows: give it one it cannot");
	memset(&s, 0, sizeof(s)); /* tune_plan reads the shape only */
	s.dt = shapes[i].dt;
	s.hidden = shapes[i].h;
	s.rows = r;
	snprintf(needle, sizeof(needle), "_layernorm-bwd_%s_h%lld_", wsn_dtype_name(s.dt), (long long)s.hidden);
	gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
	ck_assert_msg(strstr(desc, "\nautotune:      one candidate (no entry): multiwave, ws does not plan ("),
		      "no ws plan:\n%s", desc);
	wsn_plan_destroy(gp);
	free(desc);
	ck_assert_int_eq(tune_entries(needle, &path), 1);
	ck_assert(path != NULL);
	line = first_line(path);
	ck_assert_str_eq(line, mw);
	free(line);
	tu_write_file(path, stale, strlen(stale));
	gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
	ck_assert_msg(!strstr(desc, "cache hit"), "a ws entry for a shape ws cannot plan was used:\n%s", desc);
	ck_assert_msg(strstr(desc, "\nautotune:      one candidate (the cached ws no longer plans): multiwave"),
		      "stale ws entry:\n%s", desc);
	ck_assert_int_eq(approach_of(desc), WSN_APPROACH_MULTIWAVE);
	line = first_line(path);
	ck_assert_str_eq(line, mw);
	wsn_plan_destroy(gp);
	free(desc);
	free(line);
	free(path);
}
END_TEST

/*
 * (f) The backward's other ws shapes. LayerNorm bwd bf16 hidden 3584 (no measured shape there):
 * the first plan times multi-wave, the planner's ws and the other shapes, and the entry counts them;
 * whatever won runs and matches the CPU, and a second plan hits with the same shape. An entry
 * naming a shape (over 4, 8 groups of 32, a row a stage, 16 stages) is taken as it stands: the plan
 * runs that shape, described as autotune's and not as forced, and matches the CPU. At hidden 3592
 * (no cluster splits it into whole vectors) an entry naming a cluster of 8 no longer plans: a miss,
 * measured again and rewritten.
 */
START_TEST(test_autotune_shapes)
{
	const char *given = "wsnorm-tune 3 approach=ws shape=4,32,8,1,16 ws_us=2.000 shape_us=1.000 multiwave_us=3.000 "
			    "shapes=5 rows=16384\n";
	int64_t r = 16384;
	struct inputs in;
	struct setup s;
	struct wsn_plan *gp, *cp;
	char *desc, *desc2, *path, *line, *line2;
	double worst = 0;
	int fails = 0, shapes = -1;
	unsigned sh[5];

	gpu_inputs_make(&in, "autotune-shapes", 3592, r, 3592, 0);
	for (int w = 0; w < 2; w++) {
		int64_t h = w ? 3592 : 3584;
		char needle[96];

		gpu_setup_init(&s, WSN_BF16, h, r, h, 0, 0, in.x, in.dy, in.w, in.b);
		snprintf(needle, sizeof(needle), "_layernorm-bwd_bf16_h%lld_", (long long)h);
		gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
		ck_assert_msg(strstr(desc, "\nautotune:      measured now (no entry): ws ") &&
				      strstr(desc, " other ws shapes (the fastest "),
			      "first autotune plan:\n%s", desc);
		ck_assert_int_eq(tune_entries(needle, &path), w + 1);
		line = first_line(path);
		ck_assert_msg(sscanf(line, "wsnorm-tune 3 approach=%*s shape=%u,%u,%u,%u,%u ws_us=%*f shape_us=%*f "
					   "multiwave_us=%*f shapes=%d rows=16384", &sh[0], &sh[1], &sh[2], &sh[3], &sh[4],
				     &shapes) == 6 && shapes > 0,
			      "entry '%s'", line);
		/* the shape in the entry is the one the description names and runs */
		ck_assert_int_eq(!!sh[0], !!strstr(desc, " -> ws in that shape; "));
		ck_assert_int_eq(!!sh[0], !!strstr(desc, "autotune's shape kept; "));
		ck_assert_ptr_null(strstr(desc, "forced"));
		OK(wsn_plan_create(cpu_dev, WSN_LAYERNORM_BWD, s.rows, s.hidden, s.dt, NULL, &cp));
		fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
		fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, 777, &worst);
		wsn_plan_destroy(gp);
		gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc2);
		ck_assert_msg(strstr(desc2, "\nautotune:      cache hit (") && strstr(desc2, " other ws shapes (the fastest "),
			      "second plan:\n%s", desc2);
		ck_assert_int_eq(!!sh[0], !!strstr(desc2, " in autotune's shape (cluster "));
		line2 = first_line(path);
		ck_assert_str_eq(line2, line);
		fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
		wsn_plan_destroy(gp);
		free(desc);
		free(desc2);
		free(line2);
		free(line);

		if (!w) { /* an entry naming a shape: taken as it stands */
			tu_write_file(path, given, strlen(given));
			gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
			ck_assert_msg(strstr(desc, " -> ws in autotune's shape (cluster 4, 8 row groups of 32 threads, 1 row a "
						   "stage, 16 stages)") &&
					      strstr(desc, "\nblock:         384 threads = producer 128 + bdimy 8 row groups x bdimx 32;") &&
					      strstr(desc, "\ncluster:       4 CTAs per row") &&
					      strstr(desc, "\npipeline:      16 stages x 1 row (unroll)") &&
					      strstr(desc, "autotune's shape kept; ") && !strstr(desc, "forced"),
				      "given shape:\n%s", desc);
			fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
			fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, 5, &worst);
			wsn_plan_destroy(gp);
			free(desc);
		} else { /* a shape that no longer plans: measured again */
			const char *stale = "wsnorm-tune 3 approach=ws shape=8,32,8,1,16 ws_us=2.000 shape_us=1.000 "
					    "multiwave_us=3.000 shapes=5 rows=16384\n";
			tu_write_file(path, stale, strlen(stale));
			gp = tune_plan(&s, WSN_LAYERNORM_BWD, NULL, &desc);
			ck_assert_msg(strstr(desc, "measured now (the cached ws shape (cluster 8, 8 row groups of 32 threads, 1 "
						   "row a stage, 16 stages) no longer plans): ws "),
				      "stale shape:\n%s", desc);
			line = first_line(path);
			ck_assert_msg(strcmp(line, stale) && !strncmp(line, "wsnorm-tune 3 approach=", 23), "entry '%s'", line);
			fails += gpu_run_rows(&s, WSN_LAYERNORM_BWD, gp, cp, r, &worst);
			wsn_plan_destroy(gp);
			free(desc);
			free(line);
		}
		wsn_plan_destroy(cp);
		free(path);
		gpu_setup_free(&s);
	}
	gpu_inputs_free(&in);
	printf("%s autotune shapes: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", worst);
	ck_assert_msg(fails == 0, "%d mismatches (see FAIL lines above)", fails);
}
END_TEST

/* (e) autotune with a forced approach or a forced parameter: the force wins, the cache is not touched. */
START_TEST(test_autotune_forced)
{
	struct wsn_plan_options po[3];
	struct setup s;
	static const char *const want[3] = { "forced approach ws", "forced approach multiwave", "forced groups 1" };

	memset(po, 0, sizeof(po));
	po[0].approach = WSN_APPROACH_WS;
	po[1].approach = WSN_APPROACH_MULTIWAVE;
	po[2].approach = WSN_APPROACH_AUTO;
	po[2].groups = 1;
	memset(&s, 0, sizeof(s));
	s.dt = WSN_BF16;
	s.hidden = 4096;
	s.rows = 4096;
	for (int i = 0; i < 3; i++) {
		char *desc, line[160];
		struct wsn_plan *gp = tune_plan(&s, WSN_LAYERNORM_FWD, &po[i], &desc);

		snprintf(line, sizeof(line), "\nautotune:      ignored: %s (the cache is neither read nor written)\n", want[i]);
		ck_assert_msg(strstr(desc, line), "want '%s' in:\n%s", line + 1, desc);
		if (i < 2)
			ck_assert_int_eq(approach_of(desc), po[i].approach);
		wsn_plan_destroy(gp);
		free(desc);
	}
	ck_assert_int_eq(tune_entries(NULL, NULL), 0);
}
END_TEST

Suite *suite_gpu_autotune(void)
{
	return TU_SUITE("gpu", { "autotune", 300, setup_tune, teardown_tune, TU_TESTS({ test_autotune_measure_then_hit, 1 },
				{ test_autotune_corrupt_entry, 1 }, { test_autotune_stale_ws_entry, 1 }, { test_autotune_forced, 1 },
				{ test_autotune_shapes, 1 }) });
}
