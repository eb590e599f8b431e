/* SPDX-License-Identifier: MIT */
/* tests/check_run_output.c: wsnorm run's outputs: content, rollback and an output onto an input. */
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

/* The written outputs hold what the CPU reference computes, rows in place across batches. */
START_TEST(test_output_content)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *out = run_path_in(dir, "out.safetensors");
	const struct wsn_st_entry *ex, *ew, *eb, *ey, *er;
	struct wsn_st_file *fx, *fw, *fb, *fy, *fr;
	struct wsn_device *cpu;
	struct wsn_plan *plan;
	struct wsn_plan_options po;
	struct wsn_args a;
	float *x, *w, *b, *y, *rstd, *ry, *rm, *rr;

	run_gen("layernorm-fwd", "f32", "203", "40", "1", in);
	EXPECT_RUN(0, "406 rows x 40", NULL, "run", "--input", in, "--device", "cpu", "--batch-rows", "17", "--ring",
		   "2", "--output", out, "--iterations", "2", "--copy-size", "64K");
	x = run_read_tensor(in, "x", &ex, &fx);
	w = run_read_tensor(in, "weight", &ew, &fw);
	b = run_read_tensor(in, "bias", &eb, &fb);
	y = run_read_tensor(out, "y", &ey, &fy);
	rstd = run_read_tensor(out, "rstd", &er, &fr);
	ck_assert_int_eq(ey->shape[0], 203);
	ck_assert_int_eq(ey->shape[1], 40);
	ck_assert_int_eq(er->shape[0], 203);
	ck_assert_ptr_nonnull(wsn_st_find(fy, "mean"));
	ck_assert_str_eq(wsn_st_metadata(fy, "wsnorm.op"), "layernorm-fwd");
	ry = tu_xmalloc(203 * 40 * 4);
	rm = tu_xmalloc(203 * 4);
	rr = tu_xmalloc(203 * 4);
	ck_assert_int_eq(wsn_device_open("cpu", &cpu), 0);
	wsn_plan_options_init(&po, WSN_LAYERNORM_FWD);
	ck_assert_int_eq(wsn_plan_create(cpu, WSN_LAYERNORM_FWD, 203, 40, WSN_F32, &po, &plan), 0);
	memset(&a, 0, sizeof(a));
	wsn_tensor_2d(&a.x, x, WSN_F32, WSN_MEM_HOST, 203, 40);
	wsn_tensor_1d(&a.weight, w, WSN_F32, WSN_MEM_HOST, 40);
	wsn_tensor_1d(&a.bias, b, WSN_F32, WSN_MEM_HOST, 40);
	wsn_tensor_2d(&a.y, ry, WSN_F32, WSN_MEM_HOST, 203, 40);
	wsn_tensor_1d(&a.mean, rm, WSN_F32, WSN_MEM_HOST, 203);
	wsn_tensor_1d(&a.rstd, rr, WSN_F32, WSN_MEM_HOST, 203);
	ck_assert_int_eq(wsn_plan_execute(plan, &a, NULL), 0);
	ck_assert_msg(!memcmp(y, ry, 203 * 40 * 4), "y differs from the CPU reference");
	ck_assert_msg(!memcmp(rstd, rr, 203 * 4), "rstd differs from the CPU reference");
	wsn_plan_destroy(plan);
	wsn_device_close(cpu);
	wsn_st_close(fx), wsn_st_close(fw), wsn_st_close(fb), wsn_st_close(fy), wsn_st_close(fr);
	free(x), free(w), free(b), free(y), free(rstd), free(ry), free(rm), free(rr);
	run_rmtree_free(dir, in, out, NULL);
}
END_TEST

/* Lines in file path (0 when there is none). */
static int count_lines(const char *path)
{
	size_t len = 0;
	char *t = tu_slurp(path, &len);
	int n = 0;

	for (size_t i = 0; t && i < len; i++)
		n += t[i] == '\n';
	free(t);
	return n;
}

/*
 * Outputs are all or none even when a commit fails part way: a run over two shards whose second
 * output cannot be linked into place (tests/no_link.c fails that linkat with EIO) puts the first
 * output in, fails on the second, and must take the first back, putting the file that was there
 * before back in place; the error says so.
 * no_link: every link(2) of the runs fails too, so the old outputs are kept aside by renaming them:
 * the same outcome, then a run that succeeds over them leaves no old file.
 */
static void output_rollback(int no_link)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out");
	char *first = NULL, *second = NULL, names[1024], *old1, *now1;
	char *log = run_path_in(dir, "links"), *env[5] = { NULL };
	const char *lib = getenv("WSNORM_NO_LINK_LIB"), *ao = getenv("ASAN_OPTIONS");
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--batch-rows", "16", "--copy-size", "64K", "--threads", "1", NULL };
	struct dirent **list;
	size_t len0 = 0, len1 = 0, lenb = 0;
	char *back;
	struct tu_proc p;
	int n;

	run_gen("rmsnorm-fwd", "f32", "64", "256", "2", ds);
	RUN(&p, "-q", "run", "--input", ds, "--device", "cpu", "--output", out);
	ck_assert_msg(p.status == 0, "first run: %s", p.err);
	tu_proc_free(&p);
	ck_assert_int_eq(n = scandir(out, &list, NULL, alphasort), 4); /* . .. and the two outputs */
	ck_assert(asprintf(&first, "%s/%s", out, list[2]->d_name) > 0);
	ck_assert(asprintf(&second, "%s/%s", out, list[3]->d_name) > 0);
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
	tu_write_file(first, "the old first output", 20); /* what must be there again after the failure */
	old1 = tu_slurp(second, &len1);

	/* the runs' environment only (an ASan build's runtime then is not first: allowed) */
	ck_assert_msg(lib && access(lib, R_OK) == 0, "WSNORM_NO_LINK_LIB '%s' (make check builds it)", lib ? lib : "");
	ck_assert(asprintf(&env[0], "LD_PRELOAD=%s", lib) > 0);
	ck_assert(asprintf(&env[1], "ASAN_OPTIONS=%s%sverify_asan_link_order=0", ao ? ao : "", ao && *ao ? ":" : "") > 0);
	ck_assert(asprintf(&env[2], "WSNORM_FAIL_LINKAT=%s", strrchr(second, '/') + 1) > 0);
	if (no_link)
		ck_assert(asprintf(&env[3], "WSNORM_NO_LINK_LOG=%s", log) > 0);
	tu_run_env(argv, env, 120, &p);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "cannot put") && strstr(p.err, "the outputs renamed before it were taken back and no output was written"),
		      "%s", p.err);
	tu_proc_free(&p);
	back = tu_slurp(first, &len0);
	ck_assert_msg(len0 == 20 && !memcmp(back, "the old first output", 20), "the first output was not put back");
	now1 = tu_slurp(second, &lenb);
	ck_assert_msg(lenb == len1 && !memcmp(now1, old1, len1), "the second output changed");
	ck_assert_msg(run_dir_count(out, names, sizeof(names)) == 2, "files in the output directory: %s", names);
	if (no_link) {
		char *again[] = { (char *)tu_wsnorm_bin(), "-q", "run", "--input", ds, "--device", "cpu", "--output", out, NULL };
		struct tu_proc q;

		/* both old outputs were kept aside by rename (one failed link each) and put back */
		ck_assert_int_eq(count_lines(log), 2);
		free(env[2]);
		env[2] = env[3];
		env[3] = NULL;
		tu_run_env(again, env, 120, &q);
		ck_assert_msg(q.status == 0, "a run over the old outputs: exit %d: %s", q.status, q.err);
		tu_proc_free(&q);
		ck_assert_int_eq(count_lines(log), 4);
		ck_assert_msg(run_dir_count(out, names, sizeof(names)) == 2, "files in the output directory: %s", names);
		free(back);
		back = tu_slurp(first, &len0);
		ck_assert_msg(back && (len0 != 20 || memcmp(back, "the old first output", 20)), "the first output was not replaced");
	}
	for (int i = 0; env[i]; i++)
		free(env[i]);
	free(back);
	free(now1);
	free(old1);
	run_rmtree_free(dir, first, second, log, ds, out, NULL);
}

/* output_rollback(no_link) where the linkat-failing library is there to preload; a note where not. */
static void output_rollback_if_preloadable(int no_link, const char *what)
{
	if (!getenv("WSNORM_NO_LINK_LIB")) {
		printf("note: WSNORM_NO_LINK_LIB unset (make check sets it): %s not run\n", what);
		return;
	}
	output_rollback(no_link);
}

START_TEST(test_output_rollback)
{
	output_rollback_if_preloadable(0, "the rollback of a failed commit");
}
END_TEST

START_TEST(test_output_rollback_renamed_aside)
{
	output_rollback_if_preloadable(1, "the rename-aside commit");
}
END_TEST

/* --output naming the input (a file, a symlink to it, a directory of shards): refused before anything
 * is written, the input intact, no temporary file left. */
START_TEST(test_output_onto_input)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *ln = run_path_in(dir, "link.safetensors");
	char *ds = run_path_in(dir, "ds"), *shard = run_path_in(ds, "shard-00001-of-00002.safetensors"), names[512];
	char *before, *after;
	size_t nb, na;
	struct tu_proc p;

	run_gen("layernorm-bwd", "bf16", "40", "64", "1", in);
	before = tu_slurp(in, &nb);
	ck_assert_int_eq(symlink(in, ln), 0);
	for (int k = 0; k < 2; k++) {
		RUN(&p, "run", "--input", in, "--device", "cpu", "--output", k ? ln : in, "--copy-size", "64K");
		ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
		ck_assert_msg(strstr(p.err, "EEXIST") && strstr(p.err, in), "%s", p.err);
		tu_proc_free(&p);
		after = tu_slurp(in, &na);
		ck_assert_msg(na == nb && !memcmp(before, after, nb), "the input changed (output %s)", k ? ln : in);
		free(after);
	}
	ck_assert_int_eq(run_dir_count(dir, names, sizeof(names)), 2); /* in and link: no temporary file */
	free(before);

	run_gen("rmsnorm-fwd", "f32", "30", "16", "2", ds);
	before = tu_slurp(shard, &nb);
	EXPECT_RUN(3, NULL, "it is the input", "run", "--input", ds, "--device", "cpu", "--output", ds, "--copy-size",
		   "64K");
	after = tu_slurp(shard, &na);
	ck_assert_msg(na == nb && !memcmp(before, after, nb), "a shard changed");
	ck_assert_int_eq(run_dir_count(ds, names, sizeof(names)), 2);
	free(before);
	free(after);
	run_rmtree_free(dir, in, ln, shard, ds, NULL);
}
END_TEST

Suite *suite_run_output(void)
{
	return TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_output_content, 1 }, { test_output_rollback, 1 },
				{ test_output_rollback_renamed_aside, 1 }, { test_output_onto_input, 1 }) });
}
