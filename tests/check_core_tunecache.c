/* SPDX-License-Identifier: MIT */
/* tests/check_core_tunecache.c: the autotune cache: row classes, its file format and concurrent writers. */
#include "testutil.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/params.h"
#include "overlap.h"
#include "tunecache.h"
#include "io/io_internal.h"
#include "cpu/cpu.h"

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static struct wsn__tune_id tune_id(int64_t hidden)
{
	struct wsn__tune_id id;

	memset(&id, 0, sizeof(id));
	snprintf(id.gpu, sizeof(id.gpu), "NVIDIA H100 80GB/HBM3 (test)");
	id.cc_major = 9, id.sms = 132, id.driver = 13000;
	id.op = WSN_RMSNORM_BWD, id.dtype = WSN_BF16, id.hidden = hidden, id.has_weight = 1;
	id.rows_class = wsn__tune_rows_class(16384);
	return id;
}

START_TEST(test_tune_rows_class)
{
	/* the power of two at or above the rows, at most the rows autotune times on */
	static const int64_t rows[][2] = { { 1, 1 },	   { 2, 2 },	     { 3, 4 },		{ 1000, 1024 },
					   { 1024, 1024 }, { 1025, 2048 },   { 4096, 4096 },	{ 9000, 16384 },
					   { 16384, 16384 }, { 16385, 16384 }, { INT64_MAX, 16384 } };

	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		ck_assert_msg(wsn__tune_rows_class(rows[i][0]) == rows[i][1], "rows %lld: class %lld, want %lld",
			      (long long)rows[i][0], (long long)wsn__tune_rows_class(rows[i][0]), (long long)rows[i][1]);
}
END_TEST

START_TEST(test_tune_cache_roundtrip)
{
	char *dir = tu_tmpdir(), key[256];
	struct wsn__tune_id id = tune_id(4096);
	struct wsn__tune_entry e = { .approach = WSN_APPROACH_WS, .ws_us = 101.5, .multiwave_us = 130.25, .rows = 16384 },
			       got;

	setenv("XDG_CACHE_HOME", dir, 1);
	ck_assert_int_eq(wsn__tune_key(&id, key, sizeof(key)), 0);
	ck_assert_ptr_null(strpbrk(key, " /()")); /* squeezed to a file name */
	ck_assert_ptr_nonnull(strstr(key, "rmsnorm-bwd_bf16_h4096"));
	ck_assert_msg(strstr(key, "_r16384"), "%s", key);
	/* a new wsnorm version (new kernels, new rules) tunes afresh */
	ck_assert_msg(!strncmp(key, "wsnorm" WSN_VERSION_STRING "_", strlen("wsnorm" WSN_VERSION_STRING "_")), "%s", key);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert_int_eq(got.approach, WSN_APPROACH_WS);
	ck_assert(got.ws_us == 101.5 && got.multiwave_us == 130.25 && got.rows == 16384);
	ck_assert(!got.shape.cluster && !got.shapes && got.shape_us == 0);
	{ /* another ws shape won: its shape, count and time come back */
		struct wsn__tune_entry t = e;
		t.shape = (struct wsn__ws_shape){ 2, 32, 4, 1, 16 };
		t.shapes = 14;
		t.shape_us = 97.25;
		ck_assert_int_eq(wsn__tune_store(&id, &t), 0);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert(got.shape.cluster == 2 && got.shape.bdimx == 32 && got.shape.bdimy == 4 && got.shape.unroll == 1 &&
			  got.shape.stages == 16 && got.shapes == 14 && got.shape_us == 97.25 && got.ws_us == 101.5);
		/* a shape only with a ws winner, and only one the kernels could take */
		t.approach = WSN_APPROACH_MULTIWAVE;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		t.approach = WSN_APPROACH_WS;
		t.shape.cluster = 3;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		t.shape.cluster = 2;
		t.shape.stages = 0;
		ck_assert_int_eq(wsn__tune_store(&id, &t), WSN_EINVAL);
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	}
	{ /* the path names the key under $XDG_CACHE_HOME/wsnorm/tune */
		char path[4096], want[4096];
		snprintf(want, sizeof(want), "%s/wsnorm/tune/%s", dir, key);
		ck_assert_int_eq(wsn__tune_path(&id, path, sizeof(path)), 0);
		ck_assert_str_eq(path, want);
	}
	/* not entries: nothing is written */
	e.approach = WSN_APPROACH_AUTO;
	ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_EINVAL);
	e.approach = WSN_APPROACH_MULTIWAVE;
	e.rows = -1;
	ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_EINVAL);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert_int_eq(got.approach, WSN_APPROACH_WS);
	/* one candidate: nothing timed, rows 0 */
	e.rows = 0;
	e.ws_us = e.multiwave_us = 0;
	ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	ck_assert(got.approach == WSN_APPROACH_MULTIWAVE && got.rows == 0 && got.ws_us == 0);
	/* another hidden size, driver or GPU is another entry */
	id.hidden = 8192;
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	id = tune_id(4096);
	id.driver = 12080;
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	/* so is another rows class (the best shape moves with the rows each SM gets), but not more rows
	 * past the rows autotune times on */
	id = tune_id(4096);
	id.rows_class = wsn__tune_rows_class(4096);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
	id.rows_class = wsn__tune_rows_class(1 << 20);
	ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
	/* a malformed entry is a miss (WSN_EFORMAT), not a crash; so is an older version's entry */
	{
#define V3 "wsnorm-tune 3 approach=ws shape="
#define T3 " ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=4096"
		static const char *const older[] = {
			"wsnorm-tune 1 approach=fastest ws_us=x\n",
			"wsnorm-tune 1 approach=ws ws_us=10.000 multiwave_us=12.000\n",
			"wsnorm-tune 1 approach=ws ws_us=10.000 multiwave_us=12.000 rows=4096\n",
			"wsnorm-tune 2 approach=ws ws_us=10.000 multiwave_us=12.000 rows=4096\n",
		};
		static const char *const bad[] = {
			V3 "0,0,0,0,0 ws_us=10.000 multiwave_us=12.000 rows=4096\n",
			"wsnorm-tune 3 approach=auto shape=0,0,0,0,0" T3 "\n",
			V3 "0,0,0,0,0 ws_us=nan shape_us=9.000 multiwave_us=12.000 shapes=3 rows=4096\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=-1 shapes=3 rows=4096\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=-5\n",
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=-1 rows=4096\n",
			/* shapes no kernel takes, or a shape beside a multi-wave winner */
			V3 "3,32,4,1,16" T3 "\n",
			V3 "2,16,4,1,16" T3 "\n",
			V3 "2,32,0,1,16" T3 "\n",
			V3 "2,32,4,9,16" T3 "\n",
			V3 "2,32,4,1,33" T3 "\n",
			V3 "2,32,4,1" T3 "\n",
			V3 "2,32,4,1,-16" T3 "\n",
			V3 "0,32,0,0,0" T3 "\n",
			"wsnorm-tune 3 approach=multiwave shape=2,32,4,1,16" T3 "\n",
			"\x7f\x45\x4c\x46 garbage",
			"",
			/* the whole line or nothing: no trailing text, no line cut short, no saturated count */
			V3 "0,0,0,0,0" T3 " extra\n",
			V3 "0,0,0,0,0" T3,
			V3 "0,0,0,0,0 ws_us=10.000 shape_us=9.000 multiwave_us=12.000 shapes=3 rows=99999999999999999999\n",
		};
		char path[4096];
		id = tune_id(4096);
		ck_assert_int_eq(wsn__tune_path(&id, path, sizeof(path)), 0);
		for (size_t i = 0; i < sizeof(older) / sizeof(older[0]); i++) {
			tu_write_file(path, older[i], strlen(older[i]));
			ck_assert_msg(wsn__tune_lookup(&id, &got) == WSN_EFORMAT, "entry %zu '%s' is not a miss", i, older[i]);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "another version's entry"));
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), path));
		}
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			tu_write_file(path, bad[i], strlen(bad[i]));
			ck_assert_msg(wsn__tune_lookup(&id, &got) == WSN_EFORMAT, "entry %zu '%s' is not a miss", i, bad[i]);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "malformed"));
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), path));
		}
		/* the good lines these spoil */
		{
			static const char *const good[] = { V3 "0,0,0,0,0" T3 "\n", V3 "8,256,1,2,4" T3 "\n",
							    "wsnorm-tune 3 approach=multiwave shape=0,0,0,0,0" T3 "\n" };
			for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
				tu_write_file(path, good[i], strlen(good[i]));
				ck_assert_msg(wsn__tune_lookup(&id, &got) == 0, "entry '%s': %s", good[i], wsn_last_error());
				ck_assert(got.shapes == 3 && got.shape_us == 9 && got.rows == 4096);
			}
			ck_assert(got.approach == WSN_APPROACH_MULTIWAVE && !got.shape.cluster);
		}
#undef V3
#undef T3
		/*
		 * not a regular file: a FIFO (an open that would block for ever), a directory, a link (even to
		 * a good entry) are misses, at once
		 */
		{
			char good[4200];
			const char *line = "wsnorm-tune 3 approach=ws shape=0,0,0,0,0 ws_us=10.000 shape_us=0.000 "
					   "multiwave_us=12.000 shapes=0 rows=4096\n";

			snprintf(good, sizeof(good), "%s.good", path);
			tu_write_file(good, line, strlen(line));
			ck_assert_int_eq(unlink(path), 0);
			ck_assert_int_eq(mkfifo(path, 0644), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "not an entry"));
			ck_assert_int_eq(unlink(path), 0);
			ck_assert_int_eq(mkdir(path, 0755), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_int_eq(rmdir(path), 0);
			ck_assert_int_eq(symlink(good, path), 0);
			ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_EFORMAT);
			ck_assert_ptr_nonnull(strstr(wsn_last_error(), "symbolic link"));
			unlink(good);
		}
		/* and a store replaces it */
		e = (struct wsn__tune_entry){ .approach = WSN_APPROACH_WS, .ws_us = 10, .multiwave_us = 12, .rows = 4096 };
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert(got.approach == WSN_APPROACH_WS && got.rows == 4096);
	}
	/*
	 * temporary files killed writers left (the writer's named fallback, its link-then-rename name,
	 * an older wsnorm's .tmp-): swept by the next store once 10 minutes old; younger ones, entries
	 * and other files stay
	 */
	{
		static const char *const temps[] = { ".tmp-AAAAAA", ".aB3dE9", ".4242-0" };
		char stale[4400], fresh[4400], key[256], other[4400], tdir2[4096];
		struct timespec t[2] = { { .tv_sec = time(NULL) - 3600 }, { .tv_sec = time(NULL) - 3600 } };
		struct stat st;

		snprintf(tdir2, sizeof(tdir2), "%s/wsnorm/tune", dir);
		ck_assert_int_eq(wsn__tune_key(&id, key, sizeof(key)), 0);
		snprintf(other, sizeof(other), "%s/notes.txt", tdir2);
		tu_write_file(other, "x", 1);
		ck_assert_int_eq(utimensat(AT_FDCWD, other, t, 0), 0);
		for (int i = 0; i < 3; i++) {
			snprintf(stale, sizeof(stale), "%s/%s%s", tdir2, i ? key : "", temps[i]);
			snprintf(fresh, sizeof(fresh), "%s/%s%sx", tdir2, i ? key : "", temps[i]);
			tu_write_file(stale, "x", 1);
			tu_write_file(fresh, "x", 1);
			ck_assert_int_eq(utimensat(AT_FDCWD, stale, t, 0), 0);
			ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
			ck_assert_msg(stat(stale, &st) != 0, "%s was not swept", stale);
			ck_assert_int_eq(stat(fresh, &st), 0); /* perhaps a writer at work */
			unlink(fresh);
		}
		{ /* an older wsnorm's key ended in _b0/_b1; an entry with a dot elsewhere is no temporary file */
			char old[4400], keep[4400];
			snprintf(old, sizeof(old), "%s/wsnorm0.0.9_GPU_cc90_132sm_drv1_rmsnorm-bwd_bf16_h64_w1_b1.aB3dE9", tdir2);
			snprintf(keep, sizeof(keep), "%s/wsnorm0.0.9_GPU_cc90_132sm_drv1_rmsnorm-bwd_bf16_h64_w1_b1_r64", tdir2);
			tu_write_file(old, "x", 1);
			tu_write_file(keep, "x", 1);
			ck_assert_int_eq(utimensat(AT_FDCWD, old, t, 0), 0);
			ck_assert_int_eq(utimensat(AT_FDCWD, keep, t, 0), 0);
			ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
			ck_assert_msg(stat(old, &st) != 0, "%s was not swept", old);
			ck_assert_msg(stat(keep, &st) == 0, "the entry %s was swept", keep);
			unlink(keep);
		}
		ck_assert_int_eq(stat(other, &st), 0);
		unlink(other);
		snprintf(stale, sizeof(stale), "%s/%s", tdir2, key);
		ck_assert_int_eq(utimensat(AT_FDCWD, stale, t, 0), 0); /* an old entry is not a temporary file */
		wsn__out_force_named(true); /* and where the file system has no unnamed files */
		e.rows = 8192;
		ck_assert_int_eq(wsn__tune_store(&id, &e), 0);
		wsn__out_force_named(false);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), 0);
		ck_assert_int_eq(got.rows, 8192);
	}
	/* no usable cache directory: a miss, and a store that says why */
	unsetenv("XDG_CACHE_HOME");
	{
		char *home = getenv("HOME") ? strdup(getenv("HOME")) : NULL;
		setenv("HOME", "relative/home", 1);
		ck_assert_int_eq(wsn__tune_lookup(&id, &got), WSN_ENOENT);
		ck_assert_int_eq(wsn__tune_store(&id, &e), WSN_ENOENT);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), "XDG_CACHE_HOME"));
		if (home)
			setenv("HOME", home, 1);
		else
			unsetenv("HOME");
		free(home);
	}
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* Writers racing on one entry: a reader only ever sees a whole entry, and no temporary file stays. */
START_TEST(test_tune_cache_concurrent)
{
	char *dir = tu_tmpdir(), tdir[4096];
	struct wsn__tune_id id = tune_id(2048);
	pid_t kids[4];
	int hits = 0, reads = 0;
	DIR *d;
	struct dirent *de;

	setenv("XDG_CACHE_HOME", dir, 1);
	for (int k = 0; k < 4; k++) {
		kids[k] = fork();
		ck_assert(kids[k] >= 0);
		if (kids[k] == 0) {
			struct wsn__tune_entry e = { .approach = k % 2 ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE,
						     .ws_us = 100 + k, .multiwave_us = 200 + k, .rows = 1000 + k };
			for (int i = 0; i < 200; i++)
				if (wsn__tune_store(&id, &e) < 0)
					_exit(1);
			_exit(0);
		}
	}
	/* read for as long as any writer runs (and at least 400 times) */
	for (int i = 0, running = 4; running || i < 400; i++) {
		struct wsn__tune_entry got;
		int r = wsn__tune_lookup(&id, &got);

		reads++;
		for (int k = 0; k < 4; k++) {
			int st;
			if (kids[k] > 0 && waitpid(kids[k], &st, WNOHANG) == kids[k]) {
				ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
				kids[k] = 0;
				running--;
			}
		}
		if (r == 0) {
			hits++;
			ck_assert(got.ws_us >= 100 && got.ws_us <= 103);
			ck_assert(got.multiwave_us == got.ws_us + 100); /* never a mix of two writers */
			ck_assert(got.rows == (int64_t)got.ws_us + 900);
			ck_assert(got.approach == (((int)got.ws_us - 100) % 2 ? WSN_APPROACH_WS : WSN_APPROACH_MULTIWAVE));
		} else {
			ck_assert_msg(r == WSN_ENOENT && !strstr(wsn_last_error(), "malformed"), "torn entry: %s",
				      wsn_last_error());
		}
	}
	printf("tune cache: %d of %d reads hit during the writes\n", hits, reads);
	ck_assert_msg(hits > 0, "no read saw an entry while the writers ran: the check above checked nothing");
	snprintf(tdir, sizeof(tdir), "%s/wsnorm/tune", dir);
	ck_assert((d = opendir(tdir)) != NULL);
	while ((de = readdir(d))) { /* only entries: names that end in _r<rows class> */
		size_t l = strlen(de->d_name), k = l;

		while (k > 0 && de->d_name[k - 1] >= '0' && de->d_name[k - 1] <= '9')
			k--;
		ck_assert_msg(de->d_name[0] == '.' ? !strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") :
			      k < l && k > 2 && !strncmp(de->d_name + k - 2, "_r", 2),
			      "temporary file left: %s", de->d_name);
	}
	closedir(d);
	unsetenv("XDG_CACHE_HOME");
	tu_rmtree(dir);
	free(dir);
}
END_TEST

Suite *suite_core_tunecache(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_tune_rows_class, 1 }, { test_tune_cache_roundtrip, 1 },
				{ test_tune_cache_concurrent, 1 }) });
}
