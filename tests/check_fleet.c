/* SPDX-License-Identifier: MIT */
/* tests/check_fleet.c: wsnorm-mpi's fleet report from made-up rank reports: the slowest GPU and node per stage, the others' median, the spread, ranks left out, the verdict. */
#include "testutil.h"
#include "../launcher/fleet.h"
#include "../launcher/cli.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64, for the figures */
static uint64_t rng_state;
static double rng_unit(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) / 9007199254740992.0;
}

/* A rank's report as `run --json` writes it: devices with read and kernel (compute) GB/s, rows and wall time. */
static json_t *report(const char *result, int interrupted, int ndev, const double *read, const double *kernel,
		      const double *rows_s)
{
	json_t *r = json_object(), *devs = json_array();

	for (int d = 0; d < ndev; d++) {
		json_t *dev = json_object(), *st = json_object(), *rd = json_object(), *k = json_object(), *h = json_object();
		char name[32];
		snprintf(name, sizeof(name), "cuda:%d", d % 100);
		json_object_set_new(rd, "gbs", json_real(read[d]));
		json_object_set_new(rd, "active", json_true());
		json_object_set_new(k, "gbs", json_real(kernel[d]));
		json_object_set_new(k, "active", json_true());
		json_object_set_new(h, "gbs", json_real(5));
		json_object_set_new(h, "active", json_false()); /* an inactive stage is not compared */
		json_object_set_new(st, "read", rd);
		json_object_set_new(st, "compute", k);
		json_object_set_new(st, "h2d", h);
		json_object_set_new(dev, "device", json_string(name));
		json_object_set_new(dev, "stages", st);
		json_object_set_new(dev, "rows", json_real(rows_s[d] * 2));
		json_object_set_new(dev, "wall_seconds", json_real(2));
		json_array_append_new(devs, dev);
	}
	json_object_set_new(r, "devices", devs);
	json_object_set_new(r, "result", json_string(result));
	json_object_set_new(r, "interrupted", json_boolean(interrupted));
	return r;
}

static double at(json_t *j, const char *stage, const char *key)
{
	json_t *v = json_object_get(json_object_get(json_object_get(json_object_get(j, "fleet"), "stages"), stage), key);
	ck_assert_msg(json_is_number(v), "%s.%s is not a number", stage, key);
	return json_number_value(v);
}

static json_t *slowest(json_t *j, const char *stage, const char *what)
{
	return json_object_get(json_object_get(json_object_get(json_object_get(j, "fleet"), "stages"), stage), what);
}

/* Random figures around a base, one GPU made slow by a known factor: it and its node are named, the
 * spread and the others' median are the ones computed here. */
START_TEST(test_fleet_slowest)
{
	uint64_t seed = tu_case_seed("fleet_slowest") + (uint64_t)_i;
	double read[4][2], kernel[4][2], rows[4][2], others[7];
	int slow_rank = (int)(seed % 4), slow_dev = (int)((seed * 0x9e3779b97f4a7c15ULL) >> 63), m = 0;
	double lo = 1e30, hi = 0;
	struct fleet_rank r[4];
	struct fleet_info fi = { .prog = "wsnorm-mpi", .ranks = 4, .nodes = 2, .per_node = 2, .library = "MPI x" };
	const char *nodes[2] = { "n0", "n1" };
	json_t *j = NULL;
	int st;

	rng_state = seed;
	printf("fleet_slowest: case %d, slow rank %d device %d\n", _i, slow_rank, slow_dev);
	for (int i = 0; i < 4; i++)
		for (int d = 0; d < 2; d++) {
			read[i][d] = 10 + rng_unit();
			kernel[i][d] = 100 + 10 * rng_unit();
			rows[i][d] = 1000 + 100 * rng_unit();
		}
	kernel[slow_rank][slow_dev] /= 2;
	for (int i = 0; i < 4; i++)
		for (int d = 0; d < 2; d++) {
			if (kernel[i][d] < lo)
				lo = kernel[i][d];
			if (kernel[i][d] > hi)
				hi = kernel[i][d];
			if (i != slow_rank || d != slow_dev)
				others[m++] = kernel[i][d];
		}
	for (int a = 0; a < m; a++) /* sort: the median of 7 is the 4th */
		for (int b = a + 1; b < m; b++)
			if (others[b] < others[a]) {
				double t = others[a];
				others[a] = others[b];
				others[b] = t;
			}
	for (int i = 0; i < 4; i++) {
		r[i] = (struct fleet_rank){ .rank = i, .local_rank = i % 2, .node = nodes[i / 2], .status = EXIT_PASS,
					    .report = report("pass", 0, 2, read[i], kernel[i], rows[i]) };
	}
	st = fleet_report(&fi, r, 4, &j, NULL, NULL);
	ck_assert_int_eq(st, EXIT_PASS);
	ck_assert_int_eq(json_integer_value(slowest(j, "kernel", "gpus")), 8);
	ck_assert_int_eq(json_integer_value(json_object_get(slowest(j, "kernel", "slowest_gpu"), "rank")), slow_rank);
	ck_assert_str_eq(json_string_value(json_object_get(slowest(j, "kernel", "slowest_gpu"), "device")),
			 slow_dev ? "cuda:1" : "cuda:0");
	ck_assert_str_eq(json_string_value(json_object_get(slowest(j, "kernel", "slowest_node"), "node")), nodes[slow_rank / 2]);
	ck_assert_double_eq_tol(at(j, "kernel", "spread"), hi / lo, 1e-9);
	ck_assert_double_eq_tol(at(j, "kernel", "median_of_others"), others[3], 1e-9);
	ck_assert_ptr_eq(slowest(j, "h2d", "gpus"), NULL); /* inactive everywhere: no comparison */
	ck_assert(json_is_null(json_object_get(json_object_get(json_object_get(j, "fleet"), "stages"), "h2d")));
	json_decref(j);

	/* the same fleet under --max-spread just below and above the kernel's spread */
	fi.max_spread = hi / lo * 0.99;
	ck_assert_int_eq(fleet_report(&fi, r, 4, NULL, NULL, NULL), EXIT_MISMATCH);
	fi.max_spread = hi / lo * 1.01 > 1.2 ? hi / lo * 1.01 : 1.2; /* read and end to end spread less than 1.2 */
	ck_assert_int_eq(fleet_report(&fi, r, 4, NULL, NULL, NULL), EXIT_PASS);
	for (int i = 0; i < 4; i++)
		json_decref(r[i].report);
}
END_TEST

/* A rank that errored and one that was interrupted are left out and named; the worst status wins. */
START_TEST(test_fleet_left_out)
{
	double read[1] = { 10 }, kernel[1] = { 100 }, rows[1] = { 1000 }, slow[1] = { 1 };
	struct fleet_rank r[3] = {
		{ .rank = 0, .node = "a", .status = EXIT_PASS, .report = report("pass", 0, 1, read, kernel, rows) },
		{ .rank = 1, .node = "a", .status = EXIT_RUNTIME, .report = report("error", 0, 1, slow, slow, slow) },
		{ .rank = 2, .node = "b", .status = EXIT_PASS, .report = report("pass", 1, 1, slow, slow, slow) },
	};
	struct fleet_info fi = { .prog = "wsnorm-mpi", .ranks = 3, .nodes = 2, .per_node = 2, .max_spread = 1.5 };
	json_t *j = NULL, *ex;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fleet_report(&fi, r, 3, &j, f, NULL), EXIT_RUNTIME);
	fclose(f);
	ex = json_object_get(json_object_get(j, "fleet"), "excluded");
	ck_assert_int_eq(json_array_size(ex), 2);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(ex, 0), "rank")), 1);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ex, 0), "why")), "error");
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(ex, 1), "why")), "interrupted");
	/* one GPU left: no spread, so --max-spread cannot fail the rest */
	ck_assert_int_eq(json_integer_value(slowest(j, "kernel", "gpus")), 1);
	ck_assert_double_eq(at(j, "kernel", "spread"), 1);
	ck_assert(json_is_true(json_object_get(json_object_get(j, "fleet"), "interrupted")));
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "fleet"), "result")), "error");
	ck_assert_ptr_nonnull(strstr(text, "left out: rank 1 on a: error"));
	ck_assert_ptr_nonnull(strstr(text, "left out: rank 2 on b: interrupted"));
	ck_assert_ptr_nonnull(strstr(text, "result   ERROR (interrupted)"));
	free(text);
	json_decref(j);
	for (int i = 0; i < 3; i++)
		json_decref(r[i].report);
}
END_TEST

Suite *suite_fleet(void)
{
	return TU_SUITE("fleet", { "report", 0, NULL, NULL, TU_TESTS({ test_fleet_slowest, 4 }, { test_fleet_left_out, 1 }) });
}
