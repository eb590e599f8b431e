/* SPDX-License-Identifier: MIT */
/* tests/check_cli_json.c: --json reports: early errors and real paths. */
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

/* With --json a runtime error before any report still prints one object, holding the message stderr has. */
START_TEST(test_json_early_error)
{
	char *dir = tu_tmpdir(), *missing = cli_path_in(dir, "missing.safetensors"), *line;
	struct tu_proc p;
	json_t *j;

	RUN(&p, "run", "--input", missing, "--device", "cpu", "--json");
	j = cli_out_json(&p, 3);
	ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "error");
	ck_assert_str_eq(json_string_value(json_object_get(j, "input")), missing);
	ck_assert(asprintf(&line, "wsnorm: %s\n", json_string_value(json_object_get(j, "error"))) > 0);
	ck_assert_msg(strstr(p.err, line) != NULL && strstr(line, missing), "stderr %s\njson %s", p.err, line);
	free(line);
	json_decref(j);
	tu_proc_free(&p);
	/* a device that no node has: well formed, so a runtime error */
	RUN(&p, "bench", "--device", "cuda:999", "--json");
	j = cli_out_json(&p, 3);
	ck_assert_int_eq(json_array_size(json_object_get(j, "results")), 0);
	ck_assert_msg(strstr(json_string_value(json_object_get(j, "error")), "cuda:999") != NULL, "%s", p.out);
	/* every key of the document, nulls where nothing was measured or named */
	ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:999");
	ck_assert(json_is_null(json_object_get(j, "device_name")) && json_is_null(json_object_get(j, "copy_tbs")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "copy_bytes")), 1 << 30);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "iters")), 50);
	json_decref(j);
	tu_proc_free(&p);
	/* with --h2d, its own document: the rates null */
	RUN(&p, "bench", "--device", "cuda:999", "--h2d", "--json");
	j = cli_out_json(&p, 3);
	ck_assert_ptr_null(json_object_get(j, "results"));
	ck_assert(json_is_null(json_object_get(j, "h2d_gbs")) && json_is_null(json_object_get(j, "d2h_gbs")));
	ck_assert(json_is_null(json_object_get(j, "device_name")));
	ck_assert_int_eq(json_integer_value(json_object_get(j, "copy_bytes")), 256 << 20);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "ring")), 4);
	ck_assert_msg(strstr(json_string_value(json_object_get(j, "error")), "cuda:999") != NULL, "%s", p.out);
	json_decref(j);
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(missing);
	free(dir);
}
END_TEST

/*
 * Paths in --json are the paths themselves (JSON escapes their control characters), so a script can
 * open them; the text on a terminal escapes them (gen's note) so a name cannot drive the terminal.
 */
START_TEST(test_json_real_paths)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in\nput\x1b[2J.safetensors"), *out = cli_path_in(dir, "o\tut.safetensors");
	struct tu_proc p;
	struct stat st;
	json_error_t je;
	json_t *j;

	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "16", "--hidden", "64", "--out", in);
	ck_assert_msg(p.status == 0, "%s", p.err);
	ck_assert_msg(strstr(p.err, "in\\x0aput\\x1b[2J.safetensors") && !strchr(p.err, '\x1b'), "gen's note: %s", p.err);
	tu_proc_free(&p);
	RUN(&p, "-q", "run", "--input", in, "--device", "cpu", "--output", out, "--json");
	j = cli_out_json(&p, 0);
	ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "output"), "path")), out);
	ck_assert_int_eq(stat(json_string_value(json_object_get(json_object_get(j, "output"), "path")), &st), 0);
	json_decref(j);
	tu_proc_free(&p);
	unlink(out);
	unlink(in);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--json"); /* gone now: the error object names it */
	ck_assert_int_eq(p.status, 3);
	ck_assert_msg((j = json_loads(p.out, 0, &je)) != NULL, "%s", je.text);
	ck_assert_str_eq(json_string_value(json_object_get(j, "input")), in);
	json_decref(j);
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(in);
	free(out);
	free(dir);
}
END_TEST

Suite *suite_cli_json(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_json_early_error, 1 }, { test_json_real_paths, 1 }) });
}
