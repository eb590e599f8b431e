/* SPDX-License-Identifier: MIT */
/* tests/check_cli_inputs_bad.c: bad and hostile inputs: exit 3 with the file and the problem named. */
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

/* Bad inputs are runtime errors (exit 3) that name the file and the problem. */
START_TEST(test_bad_inputs)
{
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "in.safetensors"), *junk = cli_path_in(dir, "junk.safetensors");
	struct tu_proc p;
	struct stat st;

	EXPECT_RUN(3, NULL, "/nonexistent/input.safetensors", "run", "--input", "/nonexistent/input.safetensors");

	EXPECT_RUN(0, NULL, NULL, "gen", "--op", "layernorm-bwd", "--dtype", "f16", "--rows", "64", "--hidden", "128",
		   "--out", in);
	ck_assert_int_eq(stat(in, &st), 0);
	ck_assert_int_eq(truncate(in, st.st_size - 100), 0);
	RUN(&p, "run", "--input", in, "--device", "cpu");
	ck_assert_int_eq(p.status, 3);
	ck_assert_msg(strstr(p.err, in) != NULL, "error does not name the file: %s", p.err);
	ck_assert_msg(strstr(p.err, "ETRUNC") || strstr(p.err, "EFORMAT"), "%s", p.err);
	ck_assert_str_eq(p.out, "");
	tu_proc_free(&p);

	tu_write_file(junk, "\x10\x00\x00\x00\x00\x00\x00\x00{\"x\": [1, 2]}   ", 24);
	RUN(&p, "run", "--input", junk, "--device", "cpu");
	ck_assert_int_eq(p.status, 3);
	ck_assert_ptr_nonnull(strstr(p.err, junk));
	tu_proc_free(&p);

	/* op given on the command line that the file's tensors cannot serve */
	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "8", "--hidden", "16", "--out", in);
	tu_proc_free(&p);
	EXPECT_RUN(3, NULL, "'dy'", "run", "--input", in, "--op", "rmsnorm-bwd", "--device", "cpu");

	/* the device does not exist: a runtime error, named with the command */
	EXPECT_RUN(3, NULL, "run: cannot open device 'cpu:3'", "run", "--input", in, "--device", "cpu:3");
	EXPECT_RUN(3, NULL, "wsnorm: plan: cannot open device 'cpu:3'", "plan", "--op", "rmsnorm-fwd", "--hidden", "64",
		   "--device", "cpu:3");
	EXPECT_RUN(3, NULL, "wsnorm: bench: cannot open device 'cpu:3'", "bench", "--op", "rmsnorm-fwd", "--hidden",
		   "64", "--device", "cpu:3");
	tu_rmtree(dir);
	free(in);
	free(junk);
	free(dir);
}
END_TEST

/* The peak resident set of the children reaped so far (a fork starts this process's count at zero). */
static long children_maxrss_kb(void)
{
	struct rusage ru;

	ck_assert(getrusage(RUSAGE_CHILDREN, &ru) == 0);
	return ru.ru_maxrss;
}

/*
 * A set of shards holds one later header at a time beside the first, however many there are: 24
 * shards whose headers each carry 100000 metadata keys (about 15 MB a header once parsed) peak at
 * about the resident set of one of them, where holding them all took 23 headers more.
 */
START_TEST(test_shard_headers_released)
{
	enum { NSHARD = 24, NKEY = 100000 };
	char *dir = tu_tmpdir(), *sub = cli_path_in(dir, "set"), *one = cli_path_in(dir, "one.safetensors");
	char *small = cli_path_in(dir, "small.safetensors"), *json, *link_name;
	size_t cap = (size_t)NKEY * 16 + 512, n;
	long rss0, rss1, rssn;
	const char *x = "\"x\":{\"dtype\":\"F32\",\"shape\":[4,64],\"data_offsets\":[0,1024]}}";

	json = tu_xmalloc(cap);
	n = (size_t)snprintf(json, cap, "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"},%s", x);
	cli_write_st(small, json, 1024);
	n = (size_t)snprintf(json, cap, "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"");
	for (int k = 0; k < NKEY; k++)
		n += (size_t)snprintf(json + n, cap - n, ",\"k%x\":\"a\"", k);
	snprintf(json + n, cap - n, "},%s", x);
	cli_write_st(one, json, 1024);
	ck_assert(mkdir(sub, 0755) == 0);
	{ /* a sanitizer build keeps freed memory aside for a while: here it would count as held */
		const char *a = getenv("ASAN_OPTIONS");
		char *opts;

		ck_assert(asprintf(&opts, "%s%squarantine_size_mb=0:thread_local_quarantine_size_kb=0", a ? a : "",
				   a && *a ? ":" : "") > 0);
		setenv("ASAN_OPTIONS", opts, 1);
		free(opts);
	}
	for (int i = 0; i < NSHARD; i++) {
		ck_assert(asprintf(&link_name, "%s/s%02d.safetensors", sub, i) > 0);
		ck_assert_msg(link(one, link_name) == 0, "link %s: %s", link_name, strerror(errno));
		free(link_name);
	}
	EXPECT_RUN(0, NULL, NULL, "-q", "run", "--input", small, "--device", "cpu");
	rss0 = children_maxrss_kb();
	EXPECT_RUN(0, NULL, NULL, "-q", "run", "--input", one, "--device", "cpu");
	rss1 = children_maxrss_kb();
	EXPECT_RUN(0, NULL, NULL, "-q", "run", "--input", sub, "--device", "cpu");
	rssn = children_maxrss_kb();
	fprintf(stderr, "shard headers: peak %ld KB small, %ld KB one header, %ld KB %d shards\n", rss0, rss1, rssn,
		NSHARD);
	/* one header costs rss1 - rss0; all held would cost NSHARD - 1 more of them */
	ck_assert_msg(rss1 - rss0 > 2000, "a header of %d keys cost only %ld KB: the test measures nothing", NKEY,
		      rss1 - rss0);
	ck_assert_msg(rssn - rss1 < 3 * (rss1 - rss0), "%d shards peaked %ld KB above one (a header is %ld KB)", NSHARD,
		      rssn - rss1, rss1 - rss0);
	tu_rmtree(dir);
	free(json);
	free(small);
	free(one);
	free(sub);
	free(dir);
}
END_TEST

/* Shapes that are valid JSON but wrong for the op, and names that carry terminal escapes: exit 3, named. */
START_TEST(test_hostile_headers)
{
	static const struct {
		const char *json;
		size_t data;
		int status;
		const char *err;
	} cases[] = {
		/* rows overflow int64 next to a zero dimension (no element, so no byte count catches it) */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"layernorm-fwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4,0],"
		  "\"data_offsets\":[0,0]}}", 0, 3, "tensor 'x'" },
		/* a weight with the right element count but not [hidden] */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[0,512]},"
		  "\"weight\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[512,576]}}", 576, 3, "tensor 'weight' is [4, 4] F32; it must be 16 f32 values" },
		/* per-row stats: [rows, 2] is not one value per row ... */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-bwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[0,512]},"
		  "\"dy\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[512,1024]},"
		  "\"rstd\":{\"dtype\":\"F32\",\"shape\":[4,2],\"data_offsets\":[1024,1056]}}", 1056, 3, "tensor 'rstd' is [4, 2] F32; it must be f32" },
		/* dy transposed against x: both shapes named */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-bwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[0,512]},"
		  "\"dy\":{\"dtype\":\"F32\",\"shape\":[16,8],\"data_offsets\":[512,1024]},"
		  "\"rstd\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[1024,1056]}}", 1056, 3,
		  "tensor 'dy' is [16, 8] F32, but 'x' is [8, 16] F32" },
		/* ... [rows, 1] is: it enters without its broadcast */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-bwd\"},\"x\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[0,512]},"
		  "\"dy\":{\"dtype\":\"F32\",\"shape\":[8,16],\"data_offsets\":[512,1024]},"
		  "\"rstd\":{\"dtype\":\"F32\",\"shape\":[8,1],\"data_offsets\":[1024,1056]}}", 1056, 0, NULL },
		/* an escape sequence in a name reaches stderr escaped */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\"},\"x\\u001b[31m\":{\"dtype\":\"F32\",\"shape\":[2,4],"
		  "\"data_offsets\":[0,31]}}", 32, 3, "x\\x1b[31m" },
		/* ... and in metadata the launcher quotes (the op, epsilon) */
		{ "{\"__metadata__\":{\"wsnorm.op\":\"\\u001b]0;T\\u0007\\u001b[2J\"},\"x\":{\"dtype\":\"F32\",\"shape\":[2,4],"
		  "\"data_offsets\":[0,32]}}", 32, 3, "unknown op '\\x1b]0;T\\x07\\x1b[2J'" },
		{ "{\"__metadata__\":{\"wsnorm.op\":\"rmsnorm-fwd\",\"wsnorm.eps\":\"1e-5\\u001b[2J\"},\"x\":{\"dtype\":\"F32\","
		  "\"shape\":[2,4],\"data_offsets\":[0,32]}}", 32, 3, "1e-5\\x1b[2J" },
	};
	char *dir = tu_tmpdir(), *in = cli_path_in(dir, "h.safetensors");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tu_proc p;

		cli_write_st(in, cases[i].json, cases[i].data);
		RUN(&p, "-q", "run", "--input", in, "--device", "cpu");
		ck_assert_msg(p.status == cases[i].status, "case %zu: exit %d: %s", i, p.status, p.err);
		if (cases[i].err)
			ck_assert_msg(strstr(p.err, cases[i].err) && strstr(p.err, in), "case %zu: %s", i, p.err);
		ck_assert_msg(!strchr(p.err, '\x1b') && !strchr(p.err, '\x07'), "case %zu: a control byte reached stderr: %s",
			      i, p.err);
		tu_proc_free(&p);
	}
	/* a file name that is not UTF-8: --json still has its input and error, escaped */
	{
		char *bad = cli_path_in(dir, "bad\xff.safetensors");
		json_t *j;
		struct tu_proc p;

		cli_write_st(bad, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,32]}}", 8);
		RUN(&p, "run", "--input", bad, "--device", "cpu", "--json");
		j = cli_out_json(&p, 3);
		ck_assert_str_eq(json_string_value(json_object_get(j, "result")), "error");
		ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "input")), "bad\\xff.safetensors"));
		ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "error")), "bad\\xff.safetensors"));
		json_decref(j);
		tu_proc_free(&p);
		free(bad);
	}
	tu_rmtree(dir);
	free(in);
	free(dir);
}
END_TEST

Suite *suite_cli_inputs_bad(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_bad_inputs, 1 },
				{ test_shard_headers_released, 1 }, { test_hostile_headers, 1 }) });
}
