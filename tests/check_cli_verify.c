/* SPDX-License-Identifier: MIT */
/* tests/check_cli_verify.c: verification from the command line: injected mismatches and non-finite inputs. */
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

/* Inputs holding NaN or infinity: rows whose reference is not finite still check that the output
 * is not finite there either, so a wrong value written into them fails the batch. */
START_TEST(test_mismatch_nonfinite_input)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in.safetensors");
	static const char *const meta[] = { "wsnorm.op", "rmsnorm-fwd", NULL };
	float *x = tu_xmalloc(4 * 16 * sizeof(float));
	struct wsn_tensor tx;
	struct wsn_named_tensor nt[1] = { { "x", &tx } };
	struct tu_proc p;

	ck_assert_int_eq(wsn_tensor_2d(&tx, x, WSN_F32, WSN_MEM_HOST, 4, 16), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&tx, tu_case_seed("nonfinite"), 0, 3), 0);
	x[3] = INFINITY; /* row 0 */
	x[2 * 16 + 5] = NAN; /* row 2 */
	ck_assert_msg(wsn_st_write(in, nt, 1, meta) == 0, "%s", wsn_last_error());
	RUN(&p, "run", "--input", in, "--device", "cpu");
	ck_assert_msg(p.status == 0, "exit %d: %s%s", p.status, p.out, p.err);
	ck_assert_ptr_nonnull(strstr(p.out, "PASS"));
	tu_proc_free(&p);
	/* every row's reference is NaN: the injected finite value is still caught */
	for (int i = 0; i < 4 * 16; i++)
		x[i] = NAN;
	ck_assert_msg(wsn_st_write(in, nt, 1, meta) == 0, "%s", wsn_last_error());
	RUN(&p, "run", "--input", in, "--device", "cpu", "--inject-mismatch");
	ck_assert_msg(p.status == 1, "exit %d: %s%s", p.status, p.out, p.err);
	ck_assert_ptr_nonnull(strstr(p.out, "FAIL"));
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(x);
	free(in);
	free(dir);
}
END_TEST

/* An injected wrong output is caught: exit 1 and FAIL. */
START_TEST(test_mismatch_exit)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in.safetensors");

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-fwd", "--rows", "50", "--hidden", "96", "--out", in);
	EXPECT_RUN(1, "FAIL", NULL, "run", "--input", in, "--device", "cpu", "--inject-mismatch");
	EXPECT_RUN(0, "not verified", NULL, "run", "--input", in, "--device", "cpu", "--inject-mismatch",
		   "--no-verify");
	tu_rmtree(dir);
	free(in);
	free(dir);
}
END_TEST

Suite *suite_cli_verify(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_mismatch_exit, 1 }, { test_mismatch_nonfinite_input, 1 }) });
}
