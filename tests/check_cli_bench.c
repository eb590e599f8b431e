/* SPDX-License-Identifier: MIT */
/* tests/check_cli_bench.c: wsnorm bench: its check, list options and JSON errors. */
#include "testutil.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"

/* The JSON of a bench run (in *j) that exited with status; its first result, whose check must say check. */
static json_t *bench_result(const struct tu_proc *p, int status, const char *check, json_t **j)
{
	json_t *r;

	*j = cli_out_json(p, status);
	r = json_array_get(json_object_get(*j, "results"), 0);
	ck_assert_str_eq(json_string_value(json_object_get(r, "check")), check);
	return r;
}

/*
 * bench checks each point's outputs against the CPU reference once: "ok" and exit 0 when they
 * agree; --inject-mismatch (one element read back made wrong) gives FAIL, the output and its error
 * on stderr, "mismatch" in --json and exit 1; --no-verify says off. The copy size is printed exactly,
 * "; no bias" only where an op has a bias, and lists may not repeat an entry.
 */
START_TEST(test_bench_check)
{
	struct tu_proc p;
	json_t *j, *r;

	RUN(&p, "bench", "--device", "cpu", "--op", "layernorm-bwd,rmsnorm-fwd", "--hidden", "96,257", "--rows", "70",
	    "--iters", "1", "--copy-size", "1000K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, "(read + write, 1000 KiB)\n"), "%s", p.out);
	ck_assert_msg(strstr(p.out, " sets batch check approach\n"), "%s", p.out);
	for (const char *l = strchr(p.out, '\n') + 1; (l = strchr(l, '\n')) && l[1]; l++)
		ck_assert_msg(!strncmp(l + 1, "layernorm-bwd", 13) || !strncmp(l + 1, "rmsnorm-fwd", 11), "%s", p.out);
	{
		int ok = 0;
		for (const char *q = p.out; (q = strstr(q, " ok    cpu\n")); q++)
			ok++;
		ck_assert_msg(ok == 4, "%d points checked ok:\n%s", ok, p.out);
	}
	tu_proc_free(&p);

	RUN(&p, "bench", "--device", "cpu", "--op", "layernorm-bwd,rmsnorm-fwd", "--hidden", "96", "--rows", "70",
	    "--iters", "1", "--copy-size", "64K", "--inject-mismatch");
	ck_assert_msg(p.status == 1, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, " FAIL  cpu\n"), "%s", p.out);
	ck_assert_msg(strstr(p.err, "wsnorm: bench: layernorm-bwd bf16 hidden 96: the outputs differ from the CPU "
				    "reference: dx rel_l2 "), "%s", p.err);
	ck_assert_msg(strstr(p.err, "rmsnorm-fwd bf16 hidden 96: the outputs differ from the CPU reference: y rel_l2 "),
		      "%s", p.err);
	tu_proc_free(&p);

	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-bwd", "--dtype", "f32", "--hidden", "33", "--rows", "5",
	    "--iters", "1", "--copy-size", "64K", "--inject-mismatch", "--json");
	r = bench_result(&p, 1, "mismatch", &j);
	ck_assert(json_real_value(json_object_get(r, "check_rel_l2")) > 1e-5);
	ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(r, "check_error")), "dx rel_l2"));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "copy_bytes")), 65536);
	ck_assert(!json_is_true(json_object_get(r, "l2_resident")));
	json_decref(j);
	tu_proc_free(&p);

	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-bwd", "--dtype", "f16", "--hidden", "33", "--rows", "5",
	    "--iters", "1", "--copy-size", "64K", "--json");
	r = bench_result(&p, 0, "pass", &j);
	ck_assert(json_real_value(json_object_get(r, "check_rel_l2")) <= 5e-3);
	ck_assert_ptr_null(json_object_get(r, "check_error"));
	json_decref(j);
	tu_proc_free(&p);

	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-bwd", "--hidden", "33", "--rows", "5", "--iters", "1",
	    "--copy-size", "64K", "--no-verify", "--no-bias", "--json");
	r = bench_result(&p, 0, "off", &j);
	ck_assert(json_is_null(json_object_get(r, "check_rel_l2")));
	json_decref(j);
	tu_proc_free(&p);
	/* RMSNorm has no bias to drop: the header does not say so */
	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-bwd", "--hidden", "33", "--rows", "5", "--iters", "1",
	    "--copy-size", "64K", "--no-verify", "--no-bias");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_ptr_null(strstr(p.out, "no bias"));
	ck_assert_msg(strstr(p.out, " off   cpu\n"), "%s", p.out);
	tu_proc_free(&p);

	{
		static const struct {
			const char *args[8];
			const char *msg;
		} bad[] = {
			{ { "bench", "--op", "rmsnorm-fwd,layernorm-bwd,rmsnorm-fwd", NULL },
			  "--op 'rmsnorm-fwd,layernorm-bwd,rmsnorm-fwd' names rmsnorm-fwd twice" },
			{ { "bench", "--dtype", "f16,bf16,f16", NULL }, "--dtype 'f16,bf16,f16' names f16 twice" },
			{ { "bench", "--hidden", "1k,2048,1024", NULL }, "--hidden '1k,2048,1024' names 1024 twice" },
			{ { "bench", "--op", "rmsnorm-fwd", "--op", "layernorm-bwd,rmsnorm-fwd", NULL },
			  "--op 'layernorm-bwd,rmsnorm-fwd' names rmsnorm-fwd, which an earlier --op named" },
			{ { "bench", "--dtype", "f16", "--dtype", "f16", NULL }, "--dtype 'f16' names f16, which an earlier" },
			{ { "bench", "--hidden", "2k", "--hidden", "64,2048", NULL },
			  "--hidden '64,2048' names 2048, which an earlier --hidden named" },
			{ { "run", "--input", "a.safetensors", "--input", "b.safetensors", NULL },
			  "--input given twice ('a.safetensors', 'b.safetensors'): name several files as one" },
			{ { "run", "--devices", "0", "--devices", "1", NULL }, "--devices given twice ('0', '1')" },
			{ { "bench", "--no-verify", "--inject-mismatch", NULL },
			  "--inject-mismatch tests the check that --no-verify turns off" },
			{ { "bench", "--h2d", "--no-verify", NULL }, "--h2d times copies, not kernels: drop --no-verify" },
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char *argv[10] = { (char *)tu_wsnorm_bin() };
			for (int k = 0; bad[i].args[k]; k++)
				argv[k + 1] = (char *)bad[i].args[k];
			tu_run(argv, 60, &p);
			ck_assert_msg(p.status == 2, "%s: exit %d", bad[i].msg, p.status);
			ck_assert_msg(strstr(p.err, bad[i].msg), "want '%s' in: %s", bad[i].msg, p.err);
			ck_assert_str_eq(p.out, "");
			tu_proc_free(&p);
		}
	}
}
END_TEST

/* bench's list options given again add to their lists: two --op and two --hidden time four points. */
START_TEST(test_bench_lists_add)
{
	static const char *const want_op[] = { "layernorm-fwd", "layernorm-fwd", "rmsnorm-fwd", "rmsnorm-fwd" };
	static const int want_hidden[] = { 64, 128, 64, 128 };
	struct tu_proc p;
	json_t *j, *res;

	RUN(&p, "bench", "--device", "cpu", "--op", "layernorm-fwd", "--hidden", "64", "--dtype", "f32", "--op",
	    "rmsnorm-fwd", "--hidden", "128", "--rows", "8", "--iters", "1", "--warmup", "0", "--copy-size", "64K",
	    "--json");
	j = cli_out_json(&p, 0);
	res = json_object_get(j, "results");
	ck_assert_int_eq(json_array_size(res), 4);
	for (int i = 0; i < 4; i++) {
		json_t *pt = json_array_get(res, (size_t)i);
		ck_assert_str_eq(json_string_value(json_object_get(pt, "op")), want_op[i]);
		ck_assert_int_eq(json_integer_value(json_object_get(pt, "hidden")), want_hidden[i]);
		ck_assert_str_eq(json_string_value(json_object_get(pt, "dtype")), "f32");
	}
	json_decref(j);
	tu_proc_free(&p);
}
END_TEST

/*
 * bench --json after a runtime error: the document still comes, with the points measured before
 * it and the error's message, and the exit status is 3. Hidden 16M over 2M f32 rows needs a
 * 128 TiB buffer, which no mapping gets (at once, with no memory used); hidden 1 comes first.
 */
START_TEST(test_bench_json_error)
{
	struct tu_proc p;
	json_t *j, *res, *e;

	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-fwd", "--dtype", "f32", "--hidden", "1,16M", "--rows", "2M",
	    "--iters", "1", "--warmup", "0", "--batch", "1", "--copy-size", "64K", "--json");
	j = cli_out_json(&p, 3);
	res = json_object_get(j, "results");
	ck_assert_int_eq(json_array_size(res), 1);
	ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(res, 0), "hidden")), 1);
	ck_assert(json_real_value(json_object_get(json_array_get(res, 0), "tbs")) > 0);
	ck_assert(json_real_value(json_object_get(j, "copy_tbs")) > 0);
	e = json_object_get(j, "error");
	ck_assert_msg(json_is_string(e), "no error member: %s", p.out);
	ck_assert_ptr_nonnull(strstr(json_string_value(e), "hidden 16777216"));
	/* the same message as on stderr, after "wsnorm: " */
	{
		char *line;
		ck_assert(asprintf(&line, "wsnorm: %s\n", json_string_value(e)) > 0);
		ck_assert_msg(strstr(p.err, line) != NULL, "stderr %s\njson error %s", p.err, json_string_value(e));
		free(line);
	}
	json_decref(j);
	tu_proc_free(&p);
	/* the text table has the same row before the error */
	RUN(&p, "bench", "--device", "cpu", "--op", "rmsnorm-fwd", "--dtype", "f32", "--hidden", "1,16M", "--rows", "2M",
	    "--iters", "1", "--warmup", "0", "--batch", "1", "--copy-size", "64K");
	ck_assert_int_eq(p.status, 3);
	ck_assert_ptr_nonnull(strstr(p.out, "rmsnorm-fwd    f32         1 2097152"));
	ck_assert_ptr_null(strstr(p.out, "16777216"));
	tu_proc_free(&p);
}
END_TEST

/*
 * Both timings by default: back to back (time_us, tbs, fraction_of_copy, batch) and single calls
 * after an L2 flush (single_*), each point's pair of columns in the table; --timing single or batch
 * leaves the other's out (null in JSON, "-" in the table); --calls is reported.
 */
START_TEST(test_bench_timings)
{
	static const struct {
		const char *timing;
		int batch, single;
	} cases[] = { { NULL, 1, 1 }, { "both", 1, 1 }, { "batch", 1, 0 }, { "single", 0, 1 } };
	struct tu_proc p;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[20] = { (char *)tu_wsnorm_bin(), "bench", "--device", "cpu", "--op", "rmsnorm-bwd", "--hidden",
				   "200", "--rows", "33", "--iters", "2", "--copy-size", "64K" };
		int n = 14;
		json_t *j, *r;

		if (cases[i].timing)
			argv[n++] = "--timing", argv[n++] = (char *)cases[i].timing;
		if (cases[i].single)
			argv[n++] = "--calls", argv[n++] = "3";
		argv[n] = "--json";
		tu_run(argv, 120, &p);
		r = bench_result(&p, 0, "pass", &j);
		ck_assert_str_eq(json_string_value(json_object_get(j, "timing")), cases[i].timing ? cases[i].timing : "both");
		ck_assert_int_eq(json_integer_value(json_object_get(j, "calls")), cases[i].single ? 3 : 0);
		ck_assert_msg(json_is_null(json_object_get(j, "calls")) == !cases[i].single, "%s", p.out);
		for (int k = 0; k < 3; k++) {
			static const char *const batch_keys[] = { "time_us", "tbs", "fraction_of_copy" };
			static const char *const single_keys[] = { "single_time_us", "single_tbs", "single_fraction_of_copy" };

			ck_assert_msg((json_real_value(json_object_get(r, batch_keys[k])) > 0) == cases[i].batch, "%s: %s",
				      batch_keys[k], p.out);
			ck_assert_msg((json_real_value(json_object_get(r, single_keys[k])) > 0) == cases[i].single, "%s: %s",
				      single_keys[k], p.out);
		}
		ck_assert_msg((json_integer_value(json_object_get(r, "batch")) > 0) == cases[i].batch, "%s", p.out);
		json_decref(j);
		tu_proc_free(&p);

		argv[n] = NULL; /* the table: without --json */
		tu_run(argv, 120, &p);
		ck_assert_msg(p.status == 0 && strstr(p.out, " time_us     TB/s of_copy   1call_us 1call_TB 1c_copy "),
			      "exit %d: %s%s", p.status, p.out, p.err);
		{
			const char *line = strstr(p.out, "\nrmsnorm-bwd");
			char t[4][16];

			ck_assert_msg(line && sscanf(line, " rmsnorm-bwd bf16 200 33 %15s %*s %*s %15s %*s %*s %*s %15s %15s", t[0],
						     t[1], t[2], t[3]) == 4, "%s", p.out);
			ck_assert_msg(!strcmp(t[0], "-") == !cases[i].batch && !strcmp(t[1], "-") == !cases[i].single &&
				      !strcmp(t[2], "-") == !cases[i].batch && !strcmp(t[3], "ok"), "%s", line);
		}
		tu_proc_free(&p);
	}
}
END_TEST

Suite *suite_cli_bench(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_bench_json_error, 1 }, { test_bench_lists_add, 1 },
				{ test_bench_check, 1 }, { test_bench_timings, 1 }) });
}
