/* SPDX-License-Identifier: MIT */
/* tests/check_cli_run.c: wsnorm run inputs: single files, shard directories, raw input and mixed metadata. */
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

/* gen then run on the CPU for each op: exit 0, a verified PASS, and --json that parses. */
START_TEST(test_gen_run_json)
{
	static const char *ops[] = { "layernorm-fwd", "layernorm-bwd", "rmsnorm-fwd", "rmsnorm-bwd" };
	char *dir = tu_tmpdir();

	for (int i = 0; i < 4; i++) {
		char *in = cli_path_in(dir, "in.safetensors"), *out = cli_path_in(dir, "out.safetensors");
		char seed[32];
		struct tu_proc p;
		json_error_t je;
		json_t *j;

		snprintf(seed, sizeof(seed), "%llu", (unsigned long long)(tu_case_seed(ops[i]) & 0xffffffff));
		RUN(&p, "gen", "--op", (char *)ops[i], "--dtype", "bf16", "--rows", "300", "--hidden", "257", "--seed",
		    seed, "--out", in);
		ck_assert_msg(p.status == 0, "gen %s: %s", ops[i], p.err);
		tu_proc_free(&p);
		RUN(&p, "-q", "run", "--input", in, "--device", "cpu", "--json", "--output", out);
		ck_assert_msg(p.status == 0, "run %s: exit %d: %s", ops[i], p.status, p.err);
		j = json_loads(p.out, 0, &je);
		ck_assert_msg(j != NULL, "run --json is not JSON: %s\n%s", je.text, p.out);
		ck_assert_str_eq(json_string_value(json_object_get(j, "op")), ops[i]);
		ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "pass");
		ck_assert_int_eq(json_integer_value(json_object_get(j, "rows")), 300);
		ck_assert(json_is_true(json_object_get(json_object_get(j, "verify"), "pass")));
		ck_assert(json_integer_value(json_object_get(json_object_get(j, "verify"), "rows")) > 0);
		ck_assert(json_integer_value(json_object_get(json_object_get(json_object_get(j, "stages"), "read"),
							     "bytes")) > 300 * 257 * 2);
		json_decref(j);
		tu_proc_free(&p);
		/* the outputs were written, and read back they hold what the op names */
		{
			struct wsn_st_file *f;
			ck_assert_int_eq(wsn_st_open(out, NULL, &f), 0);
			ck_assert_ptr_nonnull(wsn_st_find(f, i % 2 ? "dx" : "y"));
			ck_assert_ptr_nonnull(wsn_st_find(f, i % 2 ? "dweight" : "rstd"));
			wsn_st_close(f);
		}
		free(in);
		free(out);
	}
	tu_rmtree(dir);
	free(dir);
}
END_TEST

/* A directory of shards runs as one dataset. */
START_TEST(test_shards)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds");
	struct tu_proc p;

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "rmsnorm-bwd", "--dtype", "f32", "--rows", "100", "--hidden", "64",
		   "--shards", "3", "--out", ds);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--qd", "2", "--bs", "4K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_ptr_nonnull(strstr(p.out, "100 rows x 64, 3 shards"));
	ck_assert_ptr_nonnull(strstr(p.out, "PASS"));
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(ds);
	free(dir);
}
END_TEST

/* Raw input with an explicit shape. */
START_TEST(test_raw_input)
{
	char *dir = tu_tmpdir(), *raw = cli_path_in(dir, "x.bin");
	float *x = tu_xmalloc(40 * 33 * sizeof(float));
	struct wsn_tensor t;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 40, 33);
	wsn_tensor_fill_random(&t, tu_case_seed("raw"), 0.0f, 1.0f);
	tu_write_file(raw, x, 40 * 33 * sizeof(float));
	EXPECT_RUN(0, "PASS", NULL, "run", "--input", raw, "--shape", "40x33", "--dtype", "f32", "--op", "rmsnorm-fwd",
		   "--device", "cpu");
	EXPECT_RUN(3, NULL, "raw file has", "run", "--input", raw, "--shape", "41x33", "--dtype", "f32", "--op",
		   "rmsnorm-fwd", "--device", "cpu");
	tu_rmtree(dir);
	free(raw);
	free(dir);
	free(x);
}
END_TEST

/* Files listed together whose metadata disagree with the first (op, eps) run as the first says, with a
 * warning naming the file, shown under -q too. */
START_TEST(test_mixed_metadata_warns)
{
	char *dir = tu_tmpdir(), *a = cli_path_in(dir, "a.safetensors"), *b = cli_path_in(dir, "b.safetensors"), *list;
	struct tu_proc p;

	EXPECT_RUN(0, NULL, NULL, "-q", "gen", "--op", "layernorm-fwd", "--rows", "16", "--hidden", "64", "--out", a);
	EXPECT_RUN(0, NULL, NULL, "-q", "gen", "--op", "layernorm-bwd", "--rows", "16", "--hidden", "64", "--eps",
		   "1e-3", "--out", b);
	ck_assert(asprintf(&list, "%s,%s", a, b) > 0);
	RUN(&p, "-q", "run", "--input", list, "--device", "cpu");
	ck_assert_msg(p.status == 0, "%s", p.err);
	ck_assert_msg(strstr(p.err, "b.safetensors' says it is for layernorm-bwd, the first file for layernorm-fwd: it runs "
			      "as layernorm-fwd"), "%s", p.err);
	ck_assert_msg(strstr(p.err, "b.safetensors' says eps 0.00100000005"), "%s", p.err);
	tu_proc_free(&p);
	free(list);
	{ /* an eps that is no number: an error in a later file as in the first, unless --eps overrides it */
		char *junk = cli_path_in(dir, "junk.safetensors");

		cli_write_st(junk, "{\"__metadata__\":{\"wsnorm.op\":\"layernorm-fwd\",\"wsnorm.eps\":\"abc\"},\"x\":{\"dtype\":"
			 "\"BF16\",\"shape\":[2,64],\"data_offsets\":[0,256]},\"weight\":{\"dtype\":\"BF16\",\"shape\":[64],"
			 "\"data_offsets\":[256,384]},\"bias\":{\"dtype\":\"BF16\",\"shape\":[64],\"data_offsets\":[384,512]}}",
			 512);
		for (int first = 0; first < 2; first++) {
			ck_assert(asprintf(&list, first ? "%s,%s" : "%s,%s", first ? junk : a, first ? a : junk) > 0);
			RUN(&p, "-q", "run", "--input", list, "--device", "cpu");
			ck_assert_msg(p.status == 3 && strstr(p.err, "junk.safetensors: metadata 'wsnorm.eps' is 'abc'"),
				      "junk %s: exit %d: %s", first ? "first" : "second", p.status, p.err);
			tu_proc_free(&p);
			RUN(&p, "-q", "run", "--input", list, "--device", "cpu", "--eps", "1e-4");
			ck_assert_msg(p.status == 0, "--eps with junk %s: exit %d: %s", first ? "first" : "second", p.status,
				      p.err);
			tu_proc_free(&p);
			free(list);
		}
		free(junk);
	}
	{ /* a first file that names no eps runs with the default: a later one naming another is warned of */
		char *noeps = cli_path_in(dir, "noeps.safetensors");

		cli_write_st(noeps, "{\"__metadata__\":{\"wsnorm.op\":\"layernorm-fwd\"},\"x\":{\"dtype\":\"BF16\",\"shape\":"
			 "[2,64],\"data_offsets\":[0,256]},\"weight\":{\"dtype\":\"BF16\",\"shape\":[64],\"data_offsets\":"
			 "[256,384]},\"bias\":{\"dtype\":\"BF16\",\"shape\":[64],\"data_offsets\":[384,512]}}", 512);
		ck_assert(asprintf(&list, "%s,%s", noeps, b) > 0);
		RUN(&p, "-q", "run", "--input", list, "--device", "cpu");
		ck_assert_msg(p.status == 0, "%s", p.err);
		ck_assert_msg(strstr(p.err, "b.safetensors' says eps 0.00100000005, the first file names none: it runs "
				      "with 1e-05"), "%s", p.err);
		tu_proc_free(&p);
		/* --op given: no file's op is read, so none is warned of; the eps still is */
		RUN(&p, "-q", "run", "--input", list, "--device", "cpu", "--op", "layernorm-fwd");
		ck_assert_msg(p.status == 0, "%s", p.err);
		ck_assert_msg(!strstr(p.err, "says it is for") && strstr(p.err, "says eps 0.00100000005"), "%s", p.err);
		tu_proc_free(&p);
		free(list);
		free(noeps);
	}
	{ /* a tensor of a name run does not read: named, the run goes on without it */
		char *typo = cli_path_in(dir, "typo.safetensors");

		cli_write_st(typo, "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2,4],"
			 "\"data_offsets\":[0,32]},\"weights\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[32,48]}}", 48);
		EXPECT_RUN(0, NULL, "tensor 'weights' is not one that run reads", "-q", "run", "--input", typo,
			   "--device", "cpu", "--json");
		/* each unknown tensor is named */
		cli_write_st(typo, "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2,4],"
			 "\"data_offsets\":[0,32]},\"weights\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[32,48]},"
			 "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[48,56]}}", 56);
		RUN(&p, "-q", "run", "--input", typo, "--device", "cpu");
		ck_assert_msg(p.status == 0, "%s", p.err);
		ck_assert_msg(strstr(p.err, "tensors 'step', 'weights' are not ones that run reads") ||
			      strstr(p.err, "tensors 'weights', 'step' are not ones that run reads"), "%s", p.err);
		tu_proc_free(&p);
		free(typo);
	}
	ck_assert(asprintf(&list, "%s,%s", a, a) > 0); /* agreeing files: nothing said */
	RUN(&p, "-q", "run", "--input", list, "--device", "cpu");
	ck_assert_msg(p.status == 0 && !strstr(p.err, "warning"), "%s", p.err);
	tu_proc_free(&p);
	RUN(&p, "-q", "run", "--demo", "--device", "cpu"); /* -q: results only, not where the demo's inputs are */
	ck_assert_msg(p.status == 0 && !strstr(p.out, "wsnorm demo:") && strstr(p.out, "demo result: PASS"), "%s", p.out);
	tu_proc_free(&p);
	free(list);
	tu_rmtree(dir);
	free(a);
	free(b);
	free(dir);
}
END_TEST

/* Hidden files in an input directory (macOS ._ copies, a gen in progress) are not shards. */
START_TEST(test_run_skips_hidden_files)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds"), *junk = cli_path_in(ds, "._shard-00000-of-00002.safetensors");

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-fwd", "--rows", "6", "--hidden", "16", "--shards", "2",
		   "--out", ds);
	tu_write_file(junk, "\0\5\26\7junk", 8);
	EXPECT_RUN(0, "PASS", NULL, "run", "--input", ds, "--device", "cpu");
	tu_rmtree(dir);
	free(junk);
	free(ds);
	free(dir);
}
END_TEST

/*
 * gen --shards k into a directory that holds a set of another count refuses and leaves the directory
 * as it was (run would read both sets as one dataset); run refuses a directory with two such sets.
 */
START_TEST(test_stale_shard_set)
{
	char *dir = tu_tmpdir(), *ds = cli_path_in(dir, "ds");
	char *a = cli_path_in(ds, "shard-00000-of-00003.safetensors"), *b = cli_path_in(ds, "shard-00000-of-00002.safetensors");
	char *c = cli_path_in(ds, "shard-00001-of-00002.safetensors");
	struct tu_proc p;
	struct stat st;
	size_t len;
	char *bytes;

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-bwd", "--rows", "10", "--hidden", "16", "--shards", "3",
		   "--out", ds);
	/* the same set again is fine: it writes over itself */
	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-bwd", "--rows", "10", "--hidden", "16", "--shards", "3",
		   "--out", ds);
	RUN(&p, "gen", "--op", "layernorm-bwd", "--rows", "10", "--hidden", "16", "--shards", "2", "--out", ds);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_ptr_nonnull(strstr(p.err, "a shard of another set"));
	ck_assert_ptr_nonnull(strstr(p.err, "-of-00003.safetensors"));
	tu_proc_free(&p);
	ck_assert_int_ne(stat(b, &st), 0);
	/* a second set put there by hand: run names both and reads neither */
	bytes = tu_slurp(a, &len);
	tu_write_file(b, bytes, len);
	tu_write_file(c, bytes, len);
	free(bytes);
	RUN(&p, "run", "--input", ds, "--device", "cpu");
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_ptr_nonnull(strstr(p.err, "two sets of shards named shard-*"));
	ck_assert_ptr_null(strstr(p.out, "PASS"));
	tu_proc_free(&p);
	tu_rmtree(dir);
	free(ds);
	free(a);
	free(b);
	free(c);
	free(dir);
}
END_TEST

Suite *suite_cli_run(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_gen_run_json, 1 }, { test_shards, 1 }, { test_raw_input, 1 },
				{ test_run_skips_hidden_files, 1 }, { test_mixed_metadata_warns, 1 }, { test_stale_shard_set, 1 }) });
}
