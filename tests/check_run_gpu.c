/* SPDX-License-Identifier: MIT */
/* tests/check_run_gpu.c: wsnorm run on the GPU path: on the CPU, and on a CUDA device when one is present. */
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

static void same_output(const char *a, const char *b, const char *name, enum wsn_dtype dt, double tol);

/* Shard s of count, by wsnorm's shard names, under dir_a and under dir_b: two malloc'd paths. */
static void shard_pair(const char *dir_a, const char *dir_b, int s, int count, char **a, char **b)
{
	char name[64];

	snprintf(name, sizeof(name), "shard-%05d-of-%05d.safetensors", s, count);
	*a = run_path_in(dir_a, name);
	*b = run_path_in(dir_b, name);
}

/*
 * WSNORM_RUN_COPIES=1 runs the GPU path on the CPU: device buffers, copies in and out on their
 * streams, poisoning through the device, copies back only for batches verified or written. The
 * outputs are the host path's, bit for bit.
 */
START_TEST(test_gpu_path_on_cpu)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *oh = run_path_in(dir, "out-host"), *oc = run_path_in(dir, "out-copies");
	struct tu_proc p;
	json_t *j;

	run_gen("layernorm-bwd", "f16", "450", "80", "3", ds);
	EXPECT_RUN(0, NULL, NULL, "run", "--input", ds, "--device", "cpu", "--batch-rows", "40", "--output", oh,
		   "--copy-size", "64K");
	setenv("WSNORM_RUN_COPIES", "1", 1);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--batch-rows", "40", "--output", oc, "--copy-size", "64K",
	    "--kernel-loops", "2", "--json", "--standalone");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "batches"), 12);
	ck_assert_int_eq(run_jint(j, "stages.h2d.batches"), 12);
	ck_assert_int_eq(run_jint(j, "stages.d2h.batches"), 12);
	ck_assert(json_is_true(json_object_get(json_object_get(json_object_get(j, "stages"), "h2d"), "active")));
	ck_assert(run_jreal(j, "stages.h2d.alone_rows_per_s") > 0);
	ck_assert(run_jreal(j, "stages.d2h.alone_rows_per_s") > 0);
	json_decref(j);
	tu_proc_free(&p);
	for (int s = 0; s < 3; s++) {
		char *a, *b;

		shard_pair(oh, oc, s, 3, &a, &b);
		same_output(a, b, "dx", WSN_F16, 0);
		same_output(a, b, "dweight", WSN_F16, 0);
		same_output(a, b, "dbias", WSN_F16, 0);
		free(a);
		free(b);
	}
	/* no output: only the verified batches come back */
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--batch-rows", "40", "--verify-every", "5", "--json",
	    "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "stages.h2d.batches"), 12);
	ck_assert_int_eq(run_jint(j, "verify.batches"), 3);
	ck_assert_int_eq(run_jint(j, "stages.d2h.batches"), 3);
	json_decref(j);
	tu_proc_free(&p);
	/* a mismatch is caught on this path too, and a failing device among two */
	EXPECT_RUN(1, NULL, NULL, "run", "--input", ds, "--device", "cpu", "--inject-mismatch", "--copy-size", "64K");
	EXPECT_RUN(3, "device 1: cpu", NULL, "run", "--input", ds, "--devices", "cpu,cpu", "--inject-fault", "0",
		   "--batch-rows", "10", "--copy-size", "64K", "--threads", "1");
	unsetenv("WSNORM_RUN_COPIES");
	run_rmtree_free(dir, ds, oh, oc, NULL);
}
END_TEST

/* CUDA devices `wsnorm devices --json` lists; 0 when none (or the command fails). */
static int cuda_devices(void)
{
	char cmd[4200];
	json_error_t je;
	json_t *j, *b;
	FILE *f;
	int n = 0;

	snprintf(cmd, sizeof(cmd), "'%s' devices --json 2>/dev/null", tu_wsnorm_bin());
	if (!(f = popen(cmd, "r")))
		return 0;
	j = json_loadf(f, 0, &je);
	pclose(f);
	b = json_object_get(j, "backends");
	for (size_t i = 0; i < json_array_size(b); i++) {
		json_t *e = json_array_get(b, i);
		const char *name = json_string_value(json_object_get(e, "name"));

		if (name && !strcmp(name, "cuda") && json_is_true(json_object_get(e, "available")))
			n = (int)json_array_size(json_object_get(e, "devices"));
	}
	json_decref(j);
	return n;
}

/* Compare tensor `name` of two output files within a relative L2 tolerance. */
static void same_output(const char *a, const char *b, const char *name, enum wsn_dtype dt, double tol)
{
	const struct wsn_st_entry *ea, *eb;
	struct wsn_st_file *fa, *fb;
	void *ta = run_read_tensor(a, name, &ea, &fa), *tb = run_read_tensor(b, name, &eb, &fb);
	struct wsn_tensor t1, t2;
	struct wsn_compare c;

	ck_assert_uint_eq(ea->nbytes, eb->nbytes);
	wsn_tensor_1d(&t1, tb, dt, WSN_MEM_HOST, (int64_t)(eb->nbytes / wsn_dtype_size(dt)));
	wsn_tensor_1d(&t2, ta, dt, WSN_MEM_HOST, (int64_t)(ea->nbytes / wsn_dtype_size(dt)));
	ck_assert_int_eq(wsn_tensor_compare(&t1, &t2, &c), 0);
	ck_assert_msg(c.rel_l2 <= tol && !c.nonfinite, "%s: '%s' differs from %s: rel %g, %lld non-finite", b, name, a,
		      c.rel_l2, (long long)c.nonfinite);
	free(ta);
	free(tb);
	wsn_st_close(fa);
	wsn_st_close(fb);
}

/*
 * Every op on cuda:0 through the whole pipeline (shards split into batches, copies both ways,
 * kernel loops, every batch verified), outputs matching the CPU's.
 */
START_TEST(test_gpu_ops)
{
	static const char *ops[] = { "layernorm-fwd", "layernorm-bwd", "rmsnorm-fwd", "rmsnorm-bwd" };
	char *dir = tu_tmpdir();

	for (int i = 0; i < 4; i++) {
		char *ds = run_path_in(dir, ops[i]), *og = run_path_in(dir, "out-gpu"), *oc = run_path_in(dir, "out-cpu");
		int bwd = i % 2;
		struct tu_proc p;
		json_t *j;

		run_gen(ops[i], "bf16", "4000", "1024", "2", ds);
		RUN(&p, "run", "--input", ds, "--device", "cuda:0", "--batch-rows", "1000", "--kernel-loops", "2",
		    "--output", og, "--json");
		ck_assert_msg(p.status == 0, "%s on cuda:0: exit %d: %s", ops[i], p.status, p.err);
		j = run_parse(&p);
		ck_assert_str_eq(run_jstr(j, "result"), "pass");
		ck_assert_int_eq(run_jint(j, "rows"), 4000);
		ck_assert_int_eq(run_jint(j, "kernel_rows"), 8000);
		ck_assert_int_eq(run_jint(j, "verify.batches"), 4);
		ck_assert_int_eq(run_jint(j, "stages.h2d.batches"), 4);
		ck_assert_int_eq(run_jint(j, "stages.d2h.batches"), 4);
		ck_assert(run_jreal(j, "stages.h2d.gbs") > 0);
		ck_assert(run_jreal(j, "stages.compute.tbs") > 0);
		ck_assert(run_jreal(j, "stages.compute.fraction_of_copy") > 0);
		printf("gpu %s: read %.2f GB/s, h2d %.2f GB/s, kernel %.3f TB/s (%.2f of copy), d2h %.2f GB/s\n", ops[i],
		       run_jreal(j, "stages.read.gbs"), run_jreal(j, "stages.h2d.gbs"), run_jreal(j, "stages.compute.tbs"),
		       run_jreal(j, "stages.compute.fraction_of_copy"), run_jreal(j, "stages.d2h.gbs"));
		json_decref(j);
		tu_proc_free(&p);
		RUN(&p, "run", "--input", ds, "--device", "cpu", "--batch-rows", "1000", "--output", oc, "--no-verify");
		ck_assert_msg(p.status == 0, "%s on the CPU: %s", ops[i], p.err);
		tu_proc_free(&p);
		for (int s = 0; s < 2; s++) {
			char *a, *b;

			shard_pair(oc, og, s, 2, &a, &b);
			same_output(a, b, bwd ? "dx" : "y", WSN_BF16, 1e-2);
			same_output(a, b, bwd ? "dweight" : "rstd", bwd ? WSN_BF16 : WSN_F32, bwd ? 2e-2 : 1e-5);
			free(a);
			free(b);
		}
		tu_rmtree(og);
		tu_rmtree(oc);
		tu_rmtree(ds);
		free(og);
		free(oc);
		free(ds);
	}
	run_rmtree_free(dir, NULL);
}
END_TEST

/* --devices all: one pipeline per GPU over one dataset, each verified, the rows shared out. */
START_TEST(test_gpu_all)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds");
	int n = cuda_devices();
	struct tu_proc p;
	json_t *j, *devs;
	json_int_t sum = 0;

	run_gen("layernorm-bwd", "bf16", "64K", "2048", "8", ds);
	RUN(&p, "run", "--input", ds, "--devices", "all", "--batch-rows", "2048", "--iterations", "2", "--json");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	devs = json_object_get(j, "devices");
	ck_assert_int_eq(json_array_size(devs), n);
	for (int i = 0; i < n; i++) {
		json_t *d = json_array_get(devs, i);
		ck_assert_str_eq(run_jstr(d, "result"), "pass");
		ck_assert_int_eq(run_jint(d, "verify.mismatched_batches"), 0);
		sum += run_jint(d, "rows");
		printf("gpu all: %s: %lld rows, h2d %.2f GB/s, kernel %.3f TB/s\n", run_jstr(d, "device"),
		       (long long)run_jint(d, "rows"), run_jreal(d, "stages.h2d.gbs"), run_jreal(d, "stages.compute.tbs"));
	}
	ck_assert_int_eq(sum, 2 * 65536);
	ck_assert_int_eq(run_jint(j, "rows"), 2 * 65536);
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, ds, NULL);
}
END_TEST

/* On a GPU: an injected mismatch fails (1), copies meet a trivial threshold, stages alone are measured. */
START_TEST(test_gpu_checks)
{
	char *dir, *in;
	struct tu_proc p;
	json_t *j;

	in = run_gen_input(&dir, "rmsnorm-bwd", "bf16", "16K", "4096");
	EXPECT_RUN(1, NULL, NULL, "run", "--input", in, "--device", "cuda:0", "--inject-mismatch", "--batch-rows",
		   "4096");
	RUN(&p, "run", "--input", in, "--device", "cuda:0", "--standalone", "--min-h2d-gbs", "0.001",
	    "--min-kernel-frac", "0.0001", "--batch-rows", "4096", "--json");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	ck_assert(run_jreal(j, "stages.h2d.alone_rows_per_s") > 0);
	ck_assert(run_jreal(j, "stages.compute.alone_rows_per_s") > 0);
	ck_assert(run_jreal(j, "end_to_end.ratio") > 0);
	printf("gpu standalone: end to end %.2f x the slowest stage alone (%s)\n", run_jreal(j, "end_to_end.ratio"),
	       json_string_value(json_object_get(json_object_get(j, "end_to_end"), "slowest_stage")));
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, in, NULL);
}
END_TEST

Suite *suite_run_gpu(void)
{
	Suite *s = TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_gpu_path_on_cpu, 1 }) });

	if (cuda_devices() > 0)
		TU_SUITE_ADD(s, { "pipeline_gpu", 600, NULL, NULL,
				  TU_TESTS({ test_gpu_ops, 1 }, { test_gpu_all, 1 }, { test_gpu_checks, 1 }) });
	else
		printf("pipeline: no CUDA device: the GPU pipeline cases (pipeline_gpu) do not run\n");
	return s;
}
