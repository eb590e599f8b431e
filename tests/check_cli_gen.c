/* SPDX-License-Identifier: MIT */
/* tests/check_cli_gen.c: wsnorm gen --shards: replacing and cleaning up shard sets. */
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

/* The wsnorm.seed metadata of a safetensors file (a malloc'd string), or NULL. */
static char *seed_of(const char *path)
{
	struct wsn_st_file *f;
	const char *v;
	char *out = NULL;

	if (wsn_st_open(path, NULL, &f))
		return NULL;
	if ((v = wsn_st_metadata(f, "wsnorm.seed")))
		out = strdup(v);
	wsn_st_close(f);
	return out;
}

/*
 * gen --shards over a set of the same count writes the new shards under hidden names first: killed
 * half way (here by its file-size limit) it leaves the old set whole, and run reads the old set and
 * none of the hidden files. A set of the same count under other names, or a name taken by a
 * directory, is refused before anything is written.
 */
START_TEST(test_gen_shards_replace)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds"), *s0 = cli_path_in(ds, "shard-00000-of-00002.safetensors");
	char *s1 = cli_path_in(ds, "shard-00001-of-00002.safetensors"), *probe = cli_path_in(dir, "probe");
	char *pad = cli_path_in(dir, "pad"), *cmd, *seed;
	struct tu_proc p;
	struct stat a, b;
	long unit, lim;

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "3", "--hidden", "4096",
		   "--shards", "2", "--out", ds);
	ck_assert_int_eq(stat(s0, &a), 0);
	ck_assert_int_eq(stat(s1, &b), 0);
	ck_assert_int_lt(a.st_size, b.st_size); /* 1 row and 2 rows */
	/* the shell's ulimit -f unit: 512 bytes (POSIX) or 1024 */
	ck_assert(asprintf(&cmd, "ulimit -f 1; head -c 700 /dev/zero > '%s'", probe) > 0);
	{
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };
		tu_run(argv, 30, &p);
	}
	unit = p.status == 0 ? 1024 : 512;
	tu_proc_free(&p);
	free(cmd);
	lim = (a.st_size + b.st_size) / 2 / unit;
	ck_assert(asprintf(&cmd, "ulimit -f %ld; exec '%s' gen --op rmsnorm-fwd --dtype f32 --rows 3 --hidden 4096 "
				 "--shards 2 --seed 7 --out '%s'", lim, tu_wsnorm_bin(), ds) > 0);
	{
		char *argv[] = { "/bin/sh", "-c", cmd, NULL };
		tu_run(argv, 60, &p);
	}
	ck_assert_msg(p.status != 0, "gen was not stopped: %s", p.err);
	tu_proc_free(&p);
	free(cmd);
	/* both shards are the first set's */
	ck_assert_ptr_nonnull(seed = seed_of(s0));
	ck_assert_str_eq(seed, "1");
	free(seed);
	ck_assert_ptr_nonnull(seed = seed_of(s1));
	ck_assert_str_eq(seed, "1");
	free(seed);
	EXPECT_RUN(0, "3 rows", NULL, "run", "--input", ds, "--device", "cpu");
	/* without the limit the new set replaces the old one */
	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "3", "--hidden", "4096",
		   "--shards", "2", "--seed", "7", "--out", ds);
	ck_assert_ptr_nonnull(seed = seed_of(s1));
	ck_assert_str_eq(seed, "7");
	free(seed);

	/* two shards of 2 with other zero padding: gen refuses, naming one */
	ck_assert_int_eq(mkdir(pad, 0777), 0);
	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "4", "--hidden", "8", "--out", (cmd = cli_path_in(pad, "shard-0-of-2.safetensors")));
	free(cmd);
	ck_assert_int_eq(p.status, 0);
	tu_proc_free(&p);
	EXPECT_RUN(3, NULL, "shard-0-of-2.safetensors", "gen", "--op", "rmsnorm-fwd", "--rows", "4", "--hidden", "8",
		   "--shards", "2", "--out", pad);
	ck_assert_int_ne(stat((cmd = cli_path_in(pad, "shard-00000-of-00002.safetensors")), &a), 0);
	free(cmd);
	tu_rmtree(dir);
	free(ds);
	free(s0);
	free(s1);
	free(probe);
	free(pad);
	free(dir);
}
END_TEST

/* A gen --shards that fails leaves none of the shards it wrote, nor a directory it made. */
START_TEST(test_gen_shards_cleanup)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "D"), *blocker = cli_path_in(ds, "shard-00001-of-00003.safetensors");
	struct tu_proc p;
	struct stat st;
	int n = 0;

	ck_assert_int_eq(mkdir(ds, 0777), 0);
	ck_assert_int_eq(mkdir(blocker, 0777), 0);
	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "9", "--hidden", "8", "--shards", "3", "--out", ds);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_ptr_nonnull(strstr(p.err, "shard-00001-of-00003.safetensors"));
	ck_assert_str_eq(p.out, "");
	tu_proc_free(&p);
	/* only the directory that was in the way is left */
	{
		DIR *d = opendir(ds);
		struct dirent *e;

		ck_assert_ptr_nonnull(d);
		while ((e = readdir(d)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
				ck_assert_msg(!strcmp(e->d_name, "shard-00001-of-00003.safetensors"), "left behind: %s",
					      e->d_name);
				n++;
			}
		closedir(d);
	}
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(stat(blocker, &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	/* with the way clear the same command writes all three */
	ck_assert_int_eq(rmdir(blocker), 0);
	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "rmsnorm-fwd", "--rows", "9", "--hidden", "8", "--shards", "3", "--out",
		   ds);
	ck_assert_int_eq(stat(blocker, &st), 0);
	ck_assert(S_ISREG(st.st_mode));
	tu_rmtree(dir);
	free(ds);
	free(blocker);
	free(dir);
}
END_TEST

Suite *suite_cli_gen(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_gen_shards_cleanup, 1 }, { test_gen_shards_replace, 1 }) });
}
