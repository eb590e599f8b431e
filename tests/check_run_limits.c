/* SPDX-License-Identifier: MIT */
/* tests/check_run_limits.c: wsnorm run at its limits: inputs changed behind its back, sizes, time bounds. */
#include "testutil.h"

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "run_util.h"

/*
 * An input rewritten in place during a run, its size kept and its modification time set back to
 * what it was: the status-change time still differs, so the run stops with a runtime error that
 * names the file rather than mix the old header's offsets with the new bytes.
 */
START_TEST(test_input_rewritten_mtime_restored)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "in.safetensors"), *out = run_path_in(dir, "out.safetensors");
	char *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), *err;
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--duration", "60s", "--batch-rows", "16", "--kernel-loops", "2000", "--ring", "2",
			 "--copy-size", "64K", "--threads", "1", NULL };
	struct timespec times[2];
	struct stat before, after;
	pid_t pid;
	int fd, status;

	run_gen("rmsnorm-fwd", "f32", "256", "256", "1", ds);
	pid = run_spawn(argv, so, se);
	run_sleep_ms(700); /* the run is under way: its first batches are read */
	fd = open(ds, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &before), 0);
	ck_assert_int_eq(pwrite(fd, "\1\2\3\4", 4, 4096), 4);
	times[0] = before.st_atim;
	times[1] = before.st_mtim;
	ck_assert_int_eq(futimens(fd, times), 0);
	ck_assert_int_eq(fstat(fd, &after), 0);
	close(fd);
	ck_assert(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	ck_assert(after.st_size == before.st_size);
	status = run_reap(pid);
	err = tu_slurp(se, NULL);
	ck_assert_msg(status == 3, "exit %d after the input was rewritten with its mtime restored: %s", status, err);
	ck_assert_msg(strstr(err, "changed during the run") && strstr(err, ds), "%s", err);
	ck_assert_int_eq(access(out, F_OK), -1);
	free(err);
	tu_rmtree(dir);
	free(ds);
	free(out);
	free(so);
	free(se);
	free(dir);
}
END_TEST

/*
 * --read-only does not plan, so nothing but the ring's own sizing stands between a huge
 * --batch-rows and a region size that wraps: 2^40 rows of a 16 MiB row is 2^64 bytes. The run must
 * refuse with a runtime error that names the option, the tensor and the overflow, not size the
 * region from the wrapped product.
 */
START_TEST(test_read_only_batch_overflow)
{
	char *dir = tu_tmpdir(), *x = run_path_in(dir, "x.safetensors"), list[4200];
	struct tu_proc p;

	run_gen("rmsnorm-fwd", "f32", "1", "4194304", "1", x);
	snprintf(list, sizeof(list), "%s,%s", x, x);
	RUN(&p, "run", "--device", "cpu", "--read-only", "--op", "rmsnorm-fwd", "--input", list, "--batch-rows",
	    "1099511627776");
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "--batch-rows 1099511627776") && strstr(p.err, "tensor 'x'") &&
		      strstr(p.err, "does not fit in the address space: EOVERFLOW"), "%s", p.err);
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(x);
	free(dir);
}
END_TEST

Suite *suite_run_limits(void)
{
	Suite *s = suite_create("run_limits");
	TCase *tc = tcase_create("run_limits");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_input_rewritten_mtime_restored);
	tcase_add_test(tc, test_read_only_batch_overflow);
	suite_add_tcase(s, tc);
	return s;
}
