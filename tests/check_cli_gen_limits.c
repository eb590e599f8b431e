/* SPDX-License-Identifier: MIT */
/* tests/check_cli_gen_limits.c: wsnorm gen refusing what it cannot do before it does any work. */
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"

/*
 * gen --out naming a file that cannot be made is refused before the shard is generated, with the
 * reason: a missing directory, a name longer than a directory entry holds, a file where the
 * directory should be.
 */
START_TEST(test_gen_destination_checked)
{
	char *dir = tu_tmpdir(), *file = cli_path_in(dir, "file"), *missing = cli_path_in(dir, "missing/x.safetensors");
	char *under_file = cli_path_in(dir, "file/x.safetensors"), longname[300], *toolong;
	const char *want[] = { "does not exist", "ENAMETOOLONG", "ENOTDIR" };
	char *outs[3];
	struct tu_proc p;

	memset(longname, 'n', sizeof(longname));
	strcpy(longname + sizeof(longname) - 13, ".safetensors");
	toolong = cli_path_in(dir, longname);
	tu_write_file(file, "x", 1);
	outs[0] = missing, outs[1] = toolong, outs[2] = under_file;
	for (int i = 0; i < 3; i++) {
		RUN(&p, "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "4", "--hidden", "64", "--out", outs[i]);
		ck_assert_msg(p.status == 3, "%s: exit %d: %s", want[i], p.status, p.err);
		ck_assert_msg(strstr(p.err, want[i]) && strstr(p.err, "gen: cannot write"), "no '%s' in: %s", want[i],
			      p.err);
		tu_proc_free(&p);
	}
	tu_rmtree(dir);
	free(toolong), free(under_file), free(missing), free(file), free(dir);
}
END_TEST

/* gen with env writes out (exit 0); then dir and the two paths are freed. */
static void expect_gen_written(char *const argv[], char *const env[], char *out, char *dir)
{
	struct tu_proc p;
	struct stat st;

	tu_run_env(argv, env, 120, &p);
	ck_assert_msg(p.status == 0, "%s: exit %d: %s", env[0], p.status, p.err);
	ck_assert_int_eq(stat(out, &st), 0);
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(out);
	free(dir);
}

/*
 * A shard larger than the memory available is refused with a named error and exit status 3 before
 * anything is allocated, instead of the out-of-memory killer ending gen (status 137, no message) in
 * a small memory cgroup. WSNORM_MEMORY_LIMIT stands for the cgroup's limit: it lowers what the
 * accounting takes as available.
 */
START_TEST(test_gen_memory_refused)
{
	char *dir = tu_tmpdir(), *out = cli_path_in(dir, "big.safetensors");
	char *env[] = { "WSNORM_MEMORY_LIMIT=64M", NULL };
	char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", "layernorm-bwd", "--dtype", "f32", "--rows", "32K",
			 "--hidden", "1K", "--out", out, NULL };
	struct tu_proc p;
	struct stat st;

	tu_run_env(argv, env, 120, &p);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "ENOMEM") && strstr(p.err, "memory available (WSNORM_MEMORY_LIMIT)") &&
		      strstr(p.err, "--shards splits"), "%s", p.err);
	ck_assert_int_ne(stat(out, &st), 0);
	tu_proc_free(&p);
	/* a quarter of the hidden size fits: about 96 MiB at once, under a 128 MiB limit */
	env[0] = "WSNORM_MEMORY_LIMIT=128M";
	argv[9] = "256";
	expect_gen_written(argv, env, out, dir);
}
END_TEST

/*
 * A WSNORM_MEMORY_LIMIT that is not a size fails gen with the variable and its value named
 * (a typo such as "64MB" would otherwise leave no limit at all); empty counts as unset.
 */
START_TEST(test_gen_memory_limit_bad)
{
	static const char *const bad[] = { "64MB", "abc", "1x", "-5", "99999999999999999999T", "16E" };
	char *dir = tu_tmpdir(), *out = cli_path_in(dir, "small.safetensors");
	char env0[64], *env[] = { env0, NULL };
	char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", "rmsnorm-fwd", "--rows", "64", "--hidden", "128",
			 "--out", out, NULL };
	struct tu_proc p;
	struct stat st;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[96];

		snprintf(env0, sizeof(env0), "WSNORM_MEMORY_LIMIT=%s", bad[i]);
		snprintf(want, sizeof(want), "WSNORM_MEMORY_LIMIT '%s' is not a size", bad[i]);
		tu_run_env(argv, env, 60, &p);
		ck_assert_msg(p.status == 3 && strstr(p.err, "EINVAL") && strstr(p.err, want), "%s: exit %d: %s",
			      bad[i], p.status, p.err);
		ck_assert_int_ne(stat(out, &st), 0);
		tu_proc_free(&p);
	}
	snprintf(env0, sizeof(env0), "WSNORM_MEMORY_LIMIT=");
	expect_gen_written(argv, env, out, dir);
}
END_TEST

Suite *suite_cli_gen_limits(void)
{
	return TU_SUITE("cli", { "gen_limits", 300, NULL, NULL, TU_TESTS({ test_gen_destination_checked, 1 }, { test_gen_memory_refused, 1 },
					  { test_gen_memory_limit_bad, 1 }) });
}
