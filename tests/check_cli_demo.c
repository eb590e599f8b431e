/* SPDX-License-Identifier: MIT */
/* tests/check_cli_demo.c: wsnorm demo: its run, what its last line claims, and a closed stdout. */
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

START_TEST(test_demo)
{
	struct tu_proc p;
	json_error_t je;
	json_t *j, *runs;

	RUN(&p, "run", "--demo", "--device", "cpu");
	ck_assert_msg(p.status == 0, "demo exit %d: %s\n%s", p.status, p.err, p.out);
	ck_assert_ptr_nonnull(strstr(p.out, "demo result: PASS"));
	for (int op = 0; op < WSN_OP_COUNT; op++)
		ck_assert_ptr_nonnull(strstr(p.out, wsn_op_name((enum wsn_op)op)));
	ck_assert_ptr_nonnull(strstr(p.out, "compute"));
	ck_assert_ptr_nonnull(strstr(p.out, "read"));
	tu_proc_free(&p);
	RUN(&p, "run", "--demo", "--device", "cpu", "--json");
	ck_assert_int_eq(p.status, 0);
	j = json_loads(p.out, 0, &je);
	ck_assert_msg(j != NULL, "demo --json: %s", je.text);
	runs = json_object_get(j, "runs");
	ck_assert_int_eq(json_array_size(runs), 4);
	for (size_t i = 0; i < 4; i++) {
		json_t *r = json_array_get(runs, i);
		ck_assert_str_eq(json_string_value(json_object_get(r, "result")), "pass");
		ck_assert(json_real_value(json_object_get(json_object_get(json_object_get(r, "stages"), "compute"),
							  "gbs")) > 0);
	}
	ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "pass");
	json_decref(j);
	tu_proc_free(&p);
}
END_TEST

/* The demo's last line says what was checked: not PASS when nothing was verified. */
START_TEST(test_demo_not_verified)
{
	struct tu_proc p;
	json_error_t je;
	json_t *j;

	RUN(&p, "run", "--demo", "--device", "cpu", "--no-verify");
	ck_assert_msg(p.status == 0, "demo exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, "demo result: done (not verified)\n") != NULL, "%s", p.out);
	ck_assert_ptr_null(strstr(p.out, "demo result: PASS"));
	tu_proc_free(&p);
	RUN(&p, "run", "--demo", "--device", "cpu", "--no-verify", "--json");
	ck_assert_int_eq(p.status, 0);
	ck_assert_msg((j = json_loads(p.out, 0, &je)) != NULL, "%s", je.text);
	ck_assert(json_is_false(json_object_get(j, "verified")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "ops_completed")), 4);
	ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "unverified");
	for (size_t i = 0; i < 4; i++) {
		json_t *r = json_array_get(json_object_get(j, "runs"), i);

		ck_assert_msg(r != NULL, "demo run %zu missing", i);
		ck_assert_str_eq(json_string_value(json_object_get(r, "result")), "unverified");
		ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r, "devices"), 0),
								   "result")), "unverified");
	}
	json_decref(j);
	tu_proc_free(&p);
	/* a threshold missed, nothing mismatched: the demo's result says threshold, as its runs do */
	RUN(&p, "run", "--demo", "--device", "cpu", "--min-read-gbs", "1e6", "--json");
	ck_assert_int_eq(p.status, 1);
	ck_assert_msg((j = json_loads(p.out, 0, &je)) != NULL, "%s", je.text);
	ck_assert(json_is_true(json_object_get(j, "verified")));
	ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "threshold");
	for (size_t i = 0; i < 4; i++)
		ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(j, "runs"), i), "result")),
				 "threshold");
	json_decref(j);
	tu_proc_free(&p);
}
END_TEST

/* A report nobody reads is not a pass, and the demo still removes its inputs: stdout a pipe whose reader
 * has gone. */
START_TEST(test_stdout_closed)
{
	char *dir = tu_tmpdir(), *cmd, *status;
	struct tu_proc p;
	DIR *d;
	struct dirent *e;
	int left = 0;

	ck_assert(asprintf(&status, "%s/status", dir) > 0);
	ck_assert(asprintf(&cmd, "{ TMPDIR='%s' '%s' run --demo --device cpu; echo $? > '%s'; } | true", dir,
			   tu_wsnorm_bin(), status) > 0);
	{
		char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
		tu_run(argv, 120, &p);
	}
	ck_assert_msg(p.status == 0, "sh: %d %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "cannot write to standard output") != NULL, "stderr: %s", p.err);
	tu_proc_free(&p);
	{
		FILE *fp = fopen(status, "r");
		int st = -1;
		ck_assert_ptr_nonnull(fp);
		ck_assert_int_eq(fscanf(fp, "%d", &st), 1);
		fclose(fp);
		ck_assert_int_eq(st, 3);
	}
	ck_assert_ptr_nonnull(d = opendir(dir));
	while ((e = readdir(d)))
		left += !strncmp(e->d_name, "wsnorm-demo-", 12);
	closedir(d);
	ck_assert_msg(!left, "the demo's temporary directory is still in %s", dir);
	/* help and version too: a full device is a failed write, whichever command printed */
	if (access("/dev/full", W_OK) == 0) {
		static const char *const what[] = { "--help", "--version", "plan --help" };

		for (int i = 0; i < 3; i++) {
			free(cmd);
			ck_assert(asprintf(&cmd, "'%s' %s > /dev/full", tu_wsnorm_bin(), what[i]) > 0);
			{
				char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
				tu_run(argv, 60, &p);
			}
			ck_assert_msg(p.status == 3 && strstr(p.err, "cannot write to standard output"), "%s: exit %d: %s",
				      what[i], p.status, p.err);
			tu_proc_free(&p);
		}
	}
	tu_rmtree(dir);
	free(cmd);
	free(status);
	free(dir);
}
END_TEST

Suite *suite_cli_demo(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_demo, 1 },
				{ test_demo_not_verified, 1 },
				{ test_stdout_closed, 1 }) });
}
