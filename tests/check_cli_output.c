/* SPDX-License-Identifier: MIT */
/* tests/check_cli_output.c: output files from the command line: names, directories, paths, many shards and shapes. */
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

/* An output name of 250 bytes (its temporary and kept-aside names would pass NAME_MAX): written, then
 * replaced by a second run, with nothing else left in the directory. */
START_TEST(test_output_long_name)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in.safetensors"), name[251], *out;
	struct tu_proc p;
	struct stat st;
	DIR *d;
	struct dirent *de;
	int n = 0;

	memset(name, 'o', 250);
	name[250] = 0;
	out = cli_path_in(dir, name);
	EXPECT_RUN(0, NULL, NULL, "-q", "gen", "--op", "rmsnorm-fwd", "--rows", "8", "--hidden", "64", "--out", in);
	for (int i = 0; i < 2; i++) {
		RUN(&p, "-q", "run", "--input", in, "--device", "cpu", "--output", out);
		ck_assert_msg(p.status == 0, "run %d: exit %d: %s", i, p.status, p.err);
		tu_proc_free(&p);
		ck_assert_msg(stat(out, &st) == 0 && st.st_size > 8 * 64 * 2, "run %d: no output", i);
	}
	ck_assert_ptr_nonnull(d = opendir(dir));
	while ((de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	ck_assert_int_eq(n, 2); /* the input and the output */
	tu_rmtree(dir);
	free(out);
	free(in);
	free(dir);
}
END_TEST

/* A directory input of one file writes a directory of outputs, like one of several; an explicit
 * --batch-rows larger than the file runs as one batch of the file's rows. */
START_TEST(test_output_dir_one_shard)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds"), *out = cli_path_in(dir, "out"), *f, *one;
	struct tu_proc p;
	struct stat st;
	json_t *j;

	ck_assert_int_eq(mkdir(ds, 0777), 0);
	ck_assert(asprintf(&one, "%s/one.safetensors", ds) > 0);
	ck_assert(asprintf(&f, "%s/one.safetensors", out) > 0);
	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-fwd", "--rows", "40", "--hidden", "96", "--out", one);
	EXPECT_RUN(0, NULL, NULL, "-q", "run", "--input", ds, "--device", "cpu", "--output", out);
	ck_assert_msg(stat(out, &st) == 0 && S_ISDIR(st.st_mode), "%s is not a directory", out);
	ck_assert_msg(stat(f, &st) == 0 && S_ISREG(st.st_mode), "%s was not written", f);
	RUN(&p, "-q", "run", "--input", one, "--device", "cpu", "--batch-rows", "1G", "--json");
	j = cli_out_json(&p, 0);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "batch_rows")), 40);
	ck_assert_int_eq(json_integer_value(json_object_get(j, "batches")), 1);
	json_decref(j);
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(f);
	free(one);
	free(out);
	free(ds);
	free(dir);
}
END_TEST

/* Output paths are checked before the run: a FIFO (or device) is not replaced by a file, and an output
 * that would replace a later input stops the run before its first batch. */
START_TEST(test_output_paths)
{
	char *dir = tu_tmpdir(), *a = cli_path_in(dir, "a.safetensors"), *fifo = cli_path_in(dir, "fifo");
	char *d2 = cli_path_in(dir, "d2"), *b = cli_path_in(dir, "d2/b.safetensors"), *list;
	struct tu_proc p;
	struct stat st;

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "rmsnorm-fwd", "--rows", "8", "--hidden", "16", "--out", a);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	RUN(&p, "run", "--input", a, "--device", "cpu", "--output", fifo);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "not a regular file") && strstr(p.err, fifo), "%s", p.err);
	ck_assert_str_eq(p.out, "");
	tu_proc_free(&p);
	ck_assert(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));

	ck_assert_int_eq(mkdir(d2, 0777), 0);
	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "8", "--hidden", "16", "--out", b);
	tu_proc_free(&p);
	ck_assert(asprintf(&list, "%s,%s", a, b) > 0);
	RUN(&p, "run", "--input", list, "--device", "cpu", "--output", d2);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "it is the input") && strstr(p.err, b), "%s", p.err);
	ck_assert_str_eq(p.out, ""); /* no batch ran */
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(list);
	free(b);
	free(d2);
	free(fifo);
	free(a);
	free(dir);
}
END_TEST

/* A run with outputs holds a file descriptor only for outputs still being written: more shards than the
 * descriptor limit still complete. */
START_TEST(test_output_many_shards)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds"), *out = cli_path_in(dir, "out"), *cmd;
	struct tu_proc p;
	DIR *d;
	struct dirent *e;
	int files = 0;

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-bwd", "--rows", "120", "--hidden", "8", "--shards", "120",
		   "--out", ds);
	ck_assert(asprintf(&cmd, "ulimit -n 64 && exec '%s' -q run --input '%s' --device cpu --output '%s'",
			   tu_wsnorm_bin(), ds, out) > 0);
	{
		char *argv[] = { (char *)"/bin/sh", (char *)"-c", cmd, NULL };
		tu_run(argv, 120, &p);
	}
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	tu_proc_free(&p);
	ck_assert_ptr_nonnull(d = opendir(out));
	while ((e = readdir(d)))
		files += strstr(e->d_name, ".safetensors") != NULL;
	closedir(d);
	ck_assert_int_eq(files, 120);
	tu_rmtree(dir);
	free(cmd);
	free(out);
	free(ds);
	free(dir);
}
END_TEST

/* y keeps the shape of x: [2, 5, 16] in, [2, 5, 16] out; the statistics stay one per row. */
START_TEST(test_output_keeps_shape)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in.safetensors"), *out = cli_path_in(dir, "out.safetensors");
	static const int64_t xs[3] = { 2, 5, 16 };
	static const char *const meta[] = { "wsnorm.op", "rmsnorm-fwd", NULL };
	float *x = tu_xmalloc(10 * 16 * sizeof(float)), *w = tu_xmalloc(16 * sizeof(float));
	struct wsn_tensor tx, tw;
	struct wsn_named_tensor nt[2] = { { "x", &tx }, { "weight", &tw } };
	uint64_t seed = tu_case_seed("keeps-shape");
	struct wsn_st_file *f;
	const struct wsn_st_entry *e;

	ck_assert_int_eq(wsn_tensor_init(&tx, x, WSN_F32, WSN_MEM_HOST, 3, xs), 0);
	ck_assert_int_eq(wsn_tensor_1d(&tw, w, WSN_F32, WSN_MEM_HOST, 16), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&tx, seed, 0, 3), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&tw, seed + 1, 0, 3), 0);
	ck_assert_msg(wsn_st_write(in, nt, 2, meta) == 0, "%s", wsn_last_error());
	EXPECT_RUN(0, NULL, NULL, "run", "--input", in, "--output", out, "--device", "cpu");
	ck_assert_msg(wsn_st_open(out, NULL, &f) == 0, "%s", wsn_last_error());
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "y"));
	ck_assert_int_eq(e->ndim, 3);
	for (int d = 0; d < 3; d++)
		ck_assert_int_eq(e->shape[d], xs[d]);
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "rstd"));
	ck_assert_int_eq(e->ndim, 1);
	ck_assert_int_eq(e->shape[0], 10);
	wsn_st_close(f);
	tu_rmtree(dir);
	free(x);
	free(w);
	free(in);
	free(out);
	free(dir);
}
END_TEST

Suite *suite_cli_output(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_output_long_name, 1 },
				{ test_output_dir_one_shard, 1 },
				{ test_output_paths, 1 },
				{ test_output_many_shards, 1 },
				{ test_output_keeps_shape, 1 }) });
}
