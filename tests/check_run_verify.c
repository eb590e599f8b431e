/* SPDX-License-Identifier: MIT */
/* tests/check_run_verify.c: wsnorm run's verification: injected mismatches, thresholds and faults. */
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

/* An injected wrong output fails verification of every verified batch: exit 1, counted per batch. */
START_TEST(test_injected_mismatch)
{
	char *dir, *in;
	struct tu_proc p;
	json_t *j;

	in = run_gen_input(&dir, "layernorm-bwd", "f32", "120", "48");
	RUN(&p, "run", "--input", in, "--device", "cpu", "--inject-mismatch", "--batch-rows", "40", "--json",
	    "--copy-size", "64K");
	ck_assert_int_eq(p.status, 1);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "mismatch");
	ck_assert_int_eq(run_jint(j, "verify.batches"), 3);
	ck_assert_int_eq(run_jint(j, "verify.mismatched_batches"), 3);
	ck_assert(json_is_false(json_object_get(json_object_get(j, "verify"), "pass")));
	ck_assert(json_is_false(json_object_get(json_object_get(json_object_get(j, "verify"), "tensors"), "dx") ?
				json_object_get(json_object_get(json_object_get(json_object_get(j, "verify"), "tensors"),
								"dx"), "pass") : json_true()));
	ck_assert_ptr_nonnull(strstr(run_jstr(json_object_get(j, "verify"), "first_mismatch"), "batch 0"));
	json_decref(j);
	tu_proc_free(&p);
	EXPECT_RUN(1, "FAIL: verification mismatch", NULL, "run", "--input", in, "--device", "cpu", "--inject-mismatch",
		   "--batch-rows", "40", "--copy-size", "64K");
	run_rmtree_free(dir, in, NULL);
}
END_TEST

/* Thresholds: an impossible one gives exit 1 naming it; a trivial one passes. */
START_TEST(test_thresholds)
{
	char *dir, *in;
	struct tu_proc p;
	json_t *j;

	in = run_gen_input(&dir, "rmsnorm-fwd", "bf16", "64", "128");
	EXPECT_RUN(1, "FAIL: threshold missed", "threshold missed: --min-read-gbs", "run", "--input", in, "--device",
		   "cpu", "--min-read-gbs", "1000000", "--copy-size", "64K");
	RUN(&p, "run", "--input", in, "--device", "cpu", "--min-kernel-frac", "1", "--json", "--copy-size", "64K");
	ck_assert_int_eq(p.status, 1);
	ck_assert_msg(strstr(p.err, "--min-kernel-frac") != NULL, "%s", p.err);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "threshold");
	ck_assert(json_is_false(json_object_get(json_array_get(json_object_get(j, "thresholds"), 0), "pass")));
	json_decref(j);
	tu_proc_free(&p);
	/* a CPU has no host-to-device copies: the threshold cannot be met */
	EXPECT_RUN(1, NULL, "--min-h2d-gbs 1: h2d on cpu was not measured", "run", "--input", in, "--device", "cpu",
		   "--min-h2d-gbs", "1", "--copy-size", "64K");
	EXPECT_RUN(0, NULL, NULL, "run", "--input", in, "--device", "cpu", "--min-read-gbs", "0.000001",
		   "--min-kernel-frac", "1e-9", "--copy-size", "64K");
	/* a wrong output and a missed threshold: the result is the mismatch, in the JSON as in the text */
	for (int k = 0; k < 2; k++) {
		RUN(&p, "run", "--input", in, "--device", "cpu", "--inject-mismatch", "--min-read-gbs", "1000000",
		    "--copy-size", "64K", k ? "--json" : NULL);
		ck_assert_int_eq(p.status, 1);
		if (k) {
			j = run_parse(&p);
			ck_assert_str_eq(run_jstr(j, "result"), "mismatch");
			json_decref(j);
		} else {
			ck_assert_msg(strstr(p.out, "FAIL: verification mismatch"), "%s", p.out);
		}
		tu_proc_free(&p);
	}
	run_rmtree_free(dir, in, NULL);
}
END_TEST

/* --inject-fault on a device that gets no batch (one batch, two devices): the run still fails, every time. */
START_TEST(test_fault_without_batch)
{
	char *dir, *in;
	struct tu_proc p;

	in = run_gen_input(&dir, "rmsnorm-fwd", "bf16", "20", "32");
	for (int i = 0; i < 16; i++) { /* which device takes the batch is a race: try both ways often */
		RUN(&p, "run", "--input", in, "--devices", "cpu,cpu", "--inject-fault", i % 2 ? "1" : "0", "--copy-size",
		    "64K");
		ck_assert_msg(p.status == 3, "try %d: exit %d: %s", i, p.status, p.err);
		ck_assert_msg(strstr(p.err, "injected fault"), "%s", p.err);
		ck_assert_msg(strstr(p.out, "result   ERROR"), "%s", p.out);
		tu_proc_free(&p);
	}
	run_rmtree_free(dir, in, NULL);
}
END_TEST

Suite *suite_run_verify(void)
{
	return TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_injected_mismatch, 1 },
				{ test_thresholds, 1 }, { test_fault_without_batch, 1 }) });
}
