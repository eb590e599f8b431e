/* SPDX-License-Identifier: MIT */
/* tests/check_run_options.c: wsnorm run's options: iterations, kernel loops, duration, devices, usage and bench transfers. */
#include "testutil.h"

#include "io/io_internal.h" /* wsn__reader_inject_short_reads */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_util.h"

/* --iterations N and --kernel-loops K count every row N times through the pipeline, N*K through the kernel. */
START_TEST(test_iterations_kernel_loops)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds");
	struct tu_proc p;
	json_t *j;
	double bytes1;

	run_gen("rmsnorm-fwd", "f16", "250", "64", "2", ds);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--json", "--copy-size", "64K", "--batch-rows", "50");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 250);
	ck_assert_int_eq(run_jint(j, "kernel_rows"), 250);
	bytes1 = run_jreal(j, "stages.compute.bytes");
	json_decref(j);
	tu_proc_free(&p);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--json", "--copy-size", "64K", "--batch-rows", "50",
	    "--iterations", "3", "--kernel-loops", "4", "--verify-every", "2");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 750);
	ck_assert_int_eq(run_jint(j, "passes"), 3);
	ck_assert_int_eq(run_jint(j, "kernel_loops"), 4);
	ck_assert_int_eq(run_jint(j, "kernel_rows"), 3000);
	ck_assert_int_eq(run_jint(j, "stages.compute.rows"), 3000);
	ck_assert_int_eq(run_jint(j, "stages.read.rows"), 750);
	ck_assert_int_eq(run_jint(j, "batches"), 3 * (3 + 3)); /* 125 rows a shard: batches of 50, 50, 25 */
	ck_assert_int_eq(run_jint(j, "verify.batches"), 9);    /* every second of 18 */
	ck_assert(run_jreal(j, "stages.compute.bytes") == 12 * bytes1);
	ck_assert(run_jreal(j, "stages.compute.tbs") > 0);
	ck_assert(run_jreal(j, "stages.compute.fraction_of_copy") > 0);
	ck_assert(run_jreal(j, "stages.read.p99_ms") >= run_jreal(j, "stages.read.p50_ms"));
	ck_assert(json_is_false(json_object_get(j, "interrupted")));
	json_decref(j);
	tu_proc_free(&p);
	/* the kernel alone is rated in the rows its own rate counts, each launch counted: of the order of
	 * that rate (other suites running at once move it by a few times), not 1/64 of it */
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--json", "--copy-size", "64K", "--batch-rows", "50",
	    "--kernel-loops", "64", "--standalone", "--threads", "2");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	{
		double ratio = run_jreal(j, "stages.compute.alone_rows_per_s") / run_jreal(j, "stages.compute.rows_per_s");
		ck_assert_msg(ratio > 0.1, "compute alone / in the pipeline = %g", ratio);
	}
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, ds, NULL);
}
END_TEST

/* --duration loops over the dataset until the time is up. */
/* --inject-slow F: each batch's device work takes F times as long: the device's wall time is at least
 * F times its kernel time; a factor of 1 or less is a usage error. */
START_TEST(test_inject_slow)
{
	char *dir, *in;
	struct tu_proc p;
	json_t *j, *d;
	double wall, kern;

	in = run_gen_input(&dir, "layernorm-fwd", "f32", "256", "512");
	RUN(&p, "run", "--input", in, "--device", "cpu", "--json", "--copy-size", "64K", "--batch-rows", "32",
	    "--threads", "1", "--inject-slow", "4");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	d = json_array_get(json_object_get(j, "devices"), 0);
	wall = run_jreal(d, "wall_seconds");
	kern = run_jreal(d, "stages.compute.seconds");
	ck_assert_msg(kern > 0 && wall >= 4 * kern, "wall %g s, kernel %g s", wall, kern);
	json_decref(j);
	tu_proc_free(&p);
	static const char *const bad[] = { "1", "0.5", "-2", "1001", "x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		RUN(&p, "run", "--input", in, "--device", "cpu", "--inject-slow", (char *)bad[i]);
		ck_assert_msg(p.status == 2 && strstr(p.err, "bad --inject-slow"), "'%s': %d %s", bad[i], p.status, p.err);
		tu_proc_free(&p);
	}
	run_rmtree_free(dir, in, NULL);
}
END_TEST

/* --html: one chart of a bar per device and one of a bar per node for each stage that ran, the
 * slowest marked once in each, a line per device over the run; a page that cannot be written is a
 * runtime error that leaves nothing behind. */
static int count(const char *text, const char *what)
{
	int n = 0;

	for (const char *q = text; (q = strstr(q, what)); q++)
		n++;
	return n;
}

START_TEST(test_html)
{
	char *dir, *in, *text, page[4096], bad[4096];
	struct tu_proc p;
	int charts;

	in = run_gen_input(&dir, "layernorm-fwd", "f32", "2048", "256");
	snprintf(page, sizeof(page), "%s/run.html", dir);
	RUN(&p, "run", "--input", in, "--devices", "cpu,cpu", "--threads", "1", "--batch-rows", "64", "--copy-size",
	    "64K", "--duration", "1.6s", "--html", page);
	ck_assert_msg(p.status == 0, "%s", p.err);
	tu_proc_free(&p);
	text = tu_slurp(page, NULL);
	charts = count(text, "<svg class=\"chart\"");
	/* read, compute and end to end ran on the CPU (no copies): 3 stages x (a device chart, a node chart) */
	ck_assert_int_eq(charts, 6);
	ck_assert_int_eq(count(text, "<rect class=\"bar gpu"), 3 * 2);
	ck_assert_int_eq(count(text, "<rect class=\"bar node"), 3 * 1);
	ck_assert_int_eq(count(text, " straggler\""), charts);
	ck_assert_int_eq(count(text, "<polyline class=\"line\""), 2);
	ck_assert_ptr_nonnull(strstr(text, "</html>"));
	free(text);
	/* a directory that does not exist: exit 3, named, no page and no temporary file */
	snprintf(bad, sizeof(bad), "%s/no/such/dir.html", dir);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--threads", "1", "--copy-size", "64K", "--html", bad);
	ck_assert_msg(p.status == 3 && strstr(p.err, "--html") && strstr(p.err, "no/such"), "%d %s", p.status, p.err);
	tu_proc_free(&p);
	ck_assert_int_eq(run_dir_count(dir, NULL, 0), 2); /* the input and run.html */
	run_rmtree_free(dir, in, NULL);
}
END_TEST

START_TEST(test_duration)
{
	char *dir, *in;
	struct tu_proc p;
	json_t *j;

	in = run_gen_input(&dir, "rmsnorm-bwd", "f32", "64", "32");
	RUN(&p, "run", "--input", in, "--device", "cpu", "--json", "--copy-size", "64K", "--duration", "0.7s",
	    "--batch-rows", "16", "--verify-every", "8");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert(run_jreal(j, "wall_seconds") >= 0.6);
	ck_assert(run_jint(j, "passes") >= 2);
	ck_assert(run_jint(j, "rows") >= 128);
	ck_assert_int_eq(run_jint(j, "rows") % 16, 0);
	/* passes begun: the last one counts when the deadline stopped the cursor inside it */
	ck_assert_int_eq(run_jint(j, "passes"), (run_jint(j, "rows") + 63) / 64);
	json_decref(j);
	tu_proc_free(&p);
	/* a duration shorter than a batch still takes the first batch and verifies it */
	RUN(&p, "run", "--input", in, "--device", "cpu", "--json", "--copy-size", "64K", "--duration", "0.0000001");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert(run_jint(j, "rows") >= 1);
	ck_assert(run_jint(j, "verify.batches") >= 1);
	ck_assert_int_eq(run_jint(j, "passes"), 1);
	json_decref(j);
	tu_proc_free(&p);
	/* decimal digits, one point, s, m or h: nothing else */
	static const char *const bad[] = { " 5", "+5", "1e3s", "0x10", "5 ", ".", "s", "5ms", "inf", "nan" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		RUN(&p, "run", "--input", in, "--device", "cpu", "--duration", (char *)bad[i]);
		ck_assert_msg(p.status == 2 && strstr(p.err, "bad --duration"), "--duration '%s': exit %d: %s", bad[i],
			      p.status, p.err);
		tu_proc_free(&p);
	}
	run_rmtree_free(dir, in, NULL);
}
END_TEST

/* Two CPU pipelines share the dataset; a failing one is reported by index and name, the other finishes. */
START_TEST(test_devices)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out");
	struct tu_proc p;
	json_t *j, *devs;

	run_gen("layernorm-fwd", "bf16", "600", "64", "3", ds);
	RUN(&p, "run", "--input", ds, "--devices", "cpu,cpu", "--batch-rows", "25", "--json", "--copy-size", "64K",
	    "--iterations", "2", "--output", out, "--threads", "1");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	devs = json_object_get(j, "devices");
	ck_assert_int_eq(json_array_size(devs), 2);
	ck_assert_int_eq(run_jint(j, "rows"), 1200);
	ck_assert_int_eq(run_jint(json_array_get(devs, 0), "rows") + run_jint(json_array_get(devs, 1), "rows"), 1200);
	ck_assert_int_eq(run_jint(j, "batches"), 48);
	ck_assert_str_eq(run_jstr(j, "device"), "cpu,cpu");
	ck_assert(json_is_true(json_object_get(json_object_get(j, "output"), "written")));
	/* the run's verdict per tensor: the worst of the two devices' */
	for (int t = 0; t < 3; t++) {
		static const char *const tn[] = { "y", "mean", "rstd" };
		char path[64];
		double all, d0, d1;

		snprintf(path, sizeof(path), "verify.tensors.%s.rel_l2", tn[t]);
		all = run_jreal(j, path);
		d0 = run_jreal(json_array_get(devs, 0), path);
		d1 = run_jreal(json_array_get(devs, 1), path);
		ck_assert_msg(all == (d0 > d1 ? d0 : d1), "%s: run %g, devices %g and %g", tn[t], all, d0, d1);
		snprintf(path, sizeof(path), "verify.tensors.%s.tolerance", tn[t]);
		ck_assert(run_jreal(j, path) > 0);
	}
	ck_assert(json_is_true(json_object_get(
		json_object_get(json_object_get(json_object_get(j, "verify"), "tensors"), "y"), "pass")));
	json_decref(j);
	tu_proc_free(&p);
	ck_assert_int_eq(run_dir_count(out, NULL, 0), 3);
	tu_rmtree(out);

	/* device 1 fails at its first launch: exit 3, named; device 0 carries the dataset */
	RUN(&p, "run", "--input", ds, "--devices", "cpu,cpu", "--batch-rows", "25", "--json", "--copy-size", "64K",
	    "--inject-fault", "1", "--output", out, "--threads", "1");
	ck_assert_int_eq(p.status, 3);
	ck_assert_msg(strstr(p.err, "injected fault") != NULL, "%s", p.err);
	j = run_parse(&p);
	devs = json_object_get(j, "devices");
	ck_assert_str_eq(run_jstr(json_array_get(devs, 1), "result"), "error");
	ck_assert_int_eq(run_jint(json_array_get(devs, 1), "index"), 1);
	ck_assert_str_eq(run_jstr(json_array_get(devs, 1), "device"), "cpu");
	ck_assert(strstr(run_jstr(json_array_get(devs, 1), "error"), "cpu") != NULL);
	ck_assert_str_eq(run_jstr(json_array_get(devs, 0), "result"), "pass");
	/* the batches the failed device held (at most a ring's worth and one) are lost, no more */
	ck_assert_int_eq(run_jint(json_array_get(devs, 1), "rows"), 0);
	ck_assert(run_jint(json_array_get(devs, 0), "rows") >= 600 - 5 * 25);
	ck_assert(run_jint(json_array_get(devs, 0), "rows") <= 600);
	ck_assert_str_eq(run_jstr(j, "result"), "error");
	json_decref(j);
	tu_proc_free(&p);
	ck_assert_msg(run_dir_count(out, NULL, 0) <= 0, "output written by a failed run");

	/* a device that does not exist: named by index and spec, the other one runs */
	EXPECT_RUN(3, "device 0: cpu", "device 1 'cpu:7'", "run", "--input", ds, "--devices", "cpu,cpu:7", "--copy-size",
		   "64K");
	run_rmtree_free(dir, ds, out, NULL);
}
END_TEST

/* Misuse of the pipeline options: exit 2 and the golden message. */
START_TEST(test_usage_golden)
{
	static const struct {
		const char *args[10];
		const char *golden;
	} cases[] = {
		{ { "run", "--input", "x", "--duration", "5x", NULL }, "err-run-duration.txt" },
		{ { "run", "--input", "x", "--ring", "0", NULL }, "err-run-ring.txt" },
		{ { "run", "--input", "x", "--kernel-loops", "0", NULL }, "err-run-kernel-loops.txt" },
		{ { "run", "--input", "x", "--min-read-gbs", "-1", NULL }, "err-run-min-read.txt" },
		{ { "run", "--device", "cpu", "--devices", "cpu", NULL }, "err-run-devices.txt" },
		{ { "run", "--device", "auto", "--devices", "cpu", NULL }, "err-run-devices.txt" },
		{ { "run", "--input", "x", "--device", "cuda:x", NULL }, "err-run-device-spec.txt" },
		{ { "run", "--input", "x", "--devices", "cpu,gpu0", NULL }, "err-run-devices-spec.txt" },
		{ { "run", "--input", "x", "--devices", "cpu,,cpu", NULL }, "err-run-devices-empty.txt" },
		{ { "run", "--input", "x", "--devices", "local", NULL }, "err-run-devices-local.txt" },
		{ { "run", "--input", "x", "--shape", "4x4", "--op", "layernorm-fwd", NULL }, "err-run-shape-dtype.txt" },
		{ { "run", "--input", "x", "--shape", "4x4", "--dtype", "f32", "--op", "rmsnorm-bwd", NULL },
		  "err-run-shape-op.txt" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tu_assert_usage_golden(cases[i].args, cases[i].golden);
}
END_TEST

/* bench --h2d on the CPU: copies through the same pinned ring the pipeline uses. */
START_TEST(test_bench_h2d)
{
	struct tu_proc p;
	json_t *j;

	RUN(&p, "bench", "--h2d", "--device", "cpu", "--copy-size", "1M", "--iters", "4", "--json");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert(run_jreal(j, "h2d_gbs") > 0);
	ck_assert(run_jreal(j, "d2h_gbs") > 0);
	ck_assert_int_eq(run_jint(j, "ring"), 4);
	json_decref(j);
	tu_proc_free(&p);
}
END_TEST

Suite *suite_run_options(void)
{
	return TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_iterations_kernel_loops, 1 }, { test_duration, 1 },
				{ test_devices, 1 }, { test_usage_golden, 1 }, { test_bench_h2d, 1 },
				{ test_inject_slow, 1 }, { test_html, 1 }) });
}
