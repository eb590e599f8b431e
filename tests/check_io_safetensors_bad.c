/* SPDX-License-Identifier: MIT */
/* tests/check_io_safetensors_bad.c: safetensors files that are short, malformed or hostile, each refused with an error that names it. */
#include "testutil.h"
#include "io/io_internal.h" /* wsn__reader_fixed_buffers */

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io_util.h"

/* A header that open refuses: the error, what its message says and the tensor it names (NULL: none). */
struct bad_header {
	const char *json;
	size_t data_len;
	int want;
	const char *needle, *tensor;
	const char *also; /* one more thing the message says, or NULL */
};

static void bad_headers(const struct bad_header *cases, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		io_bad_header(cases[i].json, cases[i].data_len, cases[i].want, cases[i].needle, cases[i].tensor);
		if (cases[i].also)
			ck_assert_msg(strstr(wsn_last_error(), cases[i].also) != NULL, "%s not said: %s", cases[i].also,
				      wsn_last_error());
	}
}

/* Write len bytes as name in the case's directory: opening it fails with want, the message naming the
 * file and saying needle. */
static void refused_file(const char *name, const void *bytes, size_t len, int want, const char *needle)
{
	char *path = io_pjoin(io_tdir, name);
	struct wsn_st_file *f;

	tu_write_file(path, bytes, len);
	io_expect_err(wsn_st_open(path, NULL, &f), want, path, needle);
	free(path);
}

START_TEST(test_st_bad_short_file)
{
	refused_file("short.safetensors", "\x10\0\0\0\0", 5, WSN_ETRUNC, "5 bytes");
}
END_TEST

START_TEST(test_st_bad_empty_file)
{
	refused_file("empty.safetensors", "", 0, WSN_ETRUNC, "empty");
}
END_TEST

START_TEST(test_st_bad_directory)
{
	struct wsn_st_file *f;

	io_expect_err(wsn_st_open(io_tdir, NULL, &f), WSN_EISDIR, io_tdir, "directory");
}
END_TEST

START_TEST(test_st_bad_missing)
{
	char *path = io_pjoin(io_tdir, "absent.safetensors");
	struct wsn_st_file *f;

	io_expect_err(wsn_st_open(path, NULL, &f), WSN_ENOENT, path, NULL);
	free(path);
}
END_TEST

/* errno values the table names keep their name: a symlink loop is ELOOP, a long name ENAMETOOLONG */
START_TEST(test_st_bad_errno_names)
{
	char *a = io_pjoin(io_tdir, "loop-a"), *b = io_pjoin(io_tdir, "loop-b"), *lng;
	struct wsn_st_file *f;
	size_t n = strlen(io_tdir) + 1 + 300;

	ck_assert_int_eq(symlink(b, a), 0);
	ck_assert_int_eq(symlink(a, b), 0);
	io_expect_err(wsn_st_open(a, NULL, &f), WSN_ELOOP, a, NULL);
	ck_assert_str_eq(wsn_err_name(WSN_ELOOP), "ELOOP");
	lng = malloc(n + 1);
	ck_assert_ptr_nonnull(lng);
	snprintf(lng, n + 1, "%s/", io_tdir);
	memset(lng + strlen(lng), 'n', n - strlen(lng));
	lng[n] = '\0';
	io_expect_err(wsn_st_open(lng, NULL, &f), WSN_ENAMETOOLONG, NULL, NULL);
	ck_assert_str_eq(wsn_strerror(WSN_ENAMETOOLONG), "file name too long");
	unlink(a);
	unlink(b);
	free(lng);
	free(a);
	free(b);
}
END_TEST

START_TEST(test_st_bad_header_past_eof)
{
	unsigned char buf[64] = { 0 };

	buf[0] = 200; /* 200-byte header in a 64-byte file */
	memcpy(buf + 8, "{}", 2);
	refused_file("long.safetensors", buf, sizeof(buf), WSN_ETRUNC, "200");
}
END_TEST

START_TEST(test_st_bad_header_absurd)
{
	unsigned char buf[16] = { 0 };

	memset(buf, 0xff, 8);
	refused_file("absurd.safetensors", buf, sizeof(buf), WSN_EFORMAT, "100 MiB");
	memset(buf, 0, 8);
	buf[3] = 0x08; /* 128 MiB */
	refused_file("absurd.safetensors", buf, sizeof(buf), WSN_EFORMAT, "134217728");
}
END_TEST

START_TEST(test_st_bad_header_zero)
{
	io_bad_header("", 4, WSN_EFORMAT, "header length is 0", NULL);
}
END_TEST

START_TEST(test_st_bad_json)
{
	static const struct bad_header cases[] = {
		{ "{\"x\": {\"dtype\": \"F32\", ", 0, WSN_EFORMAT, "JSON", NULL, NULL },
		{ "{\"x\": 1} trailing", 0, WSN_EFORMAT, "JSON", NULL, NULL },
		/* duplicate keys */
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		  "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, WSN_EFORMAT, "JSON",
		  NULL, NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

/* A NUL inside the header ends nothing: the length bounds the parse and NUL is not JSON. */
START_TEST(test_st_bad_json_nul)
{
	char *path = io_pjoin(io_tdir, "nul.safetensors");
	const char json[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	unsigned char buf[8 + sizeof(json) + 7 + 4] = { 0 };
	struct wsn_st_file *f;

	buf[0] = (unsigned char)(sizeof(json) + 7); /* header = json, NUL, 7 spaces */
	memcpy(buf + 8, json, sizeof(json));
	memset(buf + 8 + sizeof(json), ' ', 7);
	tu_write_file(path, buf, sizeof(buf));
	io_expect_err(wsn_st_open(path, NULL, &f), WSN_EFORMAT, path, "NUL byte at byte 54");
	free(path);
}
END_TEST

START_TEST(test_st_bad_not_object)
{
	static const struct bad_header cases[] = {
		{ "[1, 2, 3]", 0, WSN_EFORMAT, "not an object", NULL, NULL },
		{ "\"string\"", 0, WSN_EFORMAT, NULL, NULL, NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_entry_not_object)
{
	io_bad_header("{\"weight\": [1, 2]}", 0, WSN_EFORMAT, "'weight'", "weight");
}
END_TEST

START_TEST(test_st_bad_dtype)
{
	static const struct bad_header cases[] = {
		/* a name that is no safetensors dtype (a GGML one, a wider integer, a bare "F8", lower case) */
		{ "{\"idx\":{\"dtype\":\"Q4_0\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, WSN_EDTYPE,
		  "\"Q4_0\"", "idx", NULL },
		{ "{\"idx\":{\"dtype\":\"I128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16, WSN_EDTYPE,
		  "\"I128\"", "idx", NULL },
		{ "{\"idx\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, WSN_EDTYPE,
		  "\"F8\"", "idx", NULL },
		{ "{\"idx\":{\"dtype\":\"i64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, WSN_EDTYPE,
		  "\"i64\"", "idx", NULL },
		{ "{\"idx\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EDTYPE,
		  "'idx'", "idx", NULL },
		{ "{\"idx\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EFORMAT,
		  "'idx'", "idx", NULL },
		{ "{\"idx\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EFORMAT, "dtype", "idx", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

/* The size checks hold for the dtypes wsnorm does not compute with, each with its own element size. */
START_TEST(test_st_bad_other_dtypes)
{
	static const struct bad_header cases[] = {
		{ "{\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, WSN_ESHAPE,
		  "16 bytes", "n", NULL },
		{ "{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,4]}}", 4, WSN_ESHAPE,
		  "3 bytes", "m", NULL },
		{ "{\"s\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 12, WSN_ETRUNC,
		  "'s'", "s", NULL },
		{ "{\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
		  "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[6,8]}}", 8, WSN_EFORMAT,
		  "overlap", "n", "'m'" },
		/* 2^61 elements fit, their 2^64 bytes do not */
		{ "{\"n\":{\"dtype\":\"U64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,8]}}", 8,
		  WSN_EOVERFLOW, "'n'", "n", NULL },
		/* three 4-bit elements end inside a byte */
		{ "{\"q\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, WSN_ESHAPE,
		  "not a whole number of bytes", "q", NULL },
		{ "{\"q\":{\"dtype\":\"F6_E2M3\",\"shape\":[2,3],\"data_offsets\":[0,5]}}", 5, WSN_ESHAPE,
		  "6 elements of 6 bits", "q", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_shape)
{
	static const struct bad_header cases[] = {
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, WSN_EFORMAT,
		  "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", 16,
		  WSN_ESHAPE, "negative", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2.0],\"data_offsets\":[0,16]}}", 16,
		  WSN_EFORMAT, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
		  WSN_EFORMAT, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,16]}}", 16,
		  WSN_ESHAPE, "5 dimensions", "x", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_shape_overflow)
{
	static const struct bad_header cases[] = {
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
		  "\"data_offsets\":[0,16]}}", 16, WSN_EOVERFLOW, "'x'", "x", NULL },
		/* fits int64 elements but not bytes */
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
		  "\"data_offsets\":[0,16]}}", 16, WSN_EOVERFLOW, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
		  "\"data_offsets\":[0,16]}}", 16, WSN_EFORMAT, NULL, NULL, NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_shape_mismatch)
{
	io_bad_header("{\"x\":{\"dtype\":\"BF16\",\"shape\":[3,3],\"data_offsets\":[0,16]}}", 16,
		   WSN_ESHAPE, "'x'", "x");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "18 bytes"));
}
END_TEST

START_TEST(test_st_bad_offsets)
{
	static const struct bad_header cases[] = {
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
		  WSN_EFORMAT, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 8, WSN_EFORMAT,
		  "data_offsets", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", 8,
		  WSN_EFORMAT, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 8, WSN_EFORMAT, "data_offsets", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
		  WSN_EFORMAT, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, WSN_EFORMAT,
		  "'x'", "x", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_offsets_past_eof)
{
	static const struct bad_header cases[] = {
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
		  WSN_ETRUNC, "'x'", "x", NULL },
		{ "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,"
		  "9223372036854775804]}}", 12, WSN_ETRUNC, "'x'", "x", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_overlap)
{
	static const struct bad_header cases[] = {
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, WSN_EFORMAT,
		  "overlap", "a", "'b'" },
		/* contained in a larger, earlier range */
		{ "{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
		  "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
		  "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}", 32, WSN_EFORMAT,
		  "overlap", "a", NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_metadata)
{
	static const struct bad_header cases[] = {
		{ "{\"__metadata__\":{\"k\":1}}", 0, WSN_EFORMAT, "'k'", NULL, NULL },
		{ "{\"__metadata__\":{\"k\":\"v\",\"n\":null}}", 0, WSN_EFORMAT, "'n'", NULL, NULL },
		{ "{\"__metadata__\":[\"k\"]}", 0, WSN_EFORMAT, "__metadata__", NULL, NULL },
	};

	bad_headers(cases, sizeof(cases) / sizeof(cases[0]));
}
END_TEST

START_TEST(test_st_bad_long_name)
{
	char json[512], name[WSN_ST_MAX_NAME + 1];

	memset(name, 'n', WSN_ST_MAX_NAME);
	name[WSN_ST_MAX_NAME] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		 name);
	io_bad_header(json, 4, WSN_ERANGE, "nnnnnnnn", NULL);
	/* one byte shorter is fine */
	name[WSN_ST_MAX_NAME - 1] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		 name);
	{
		char *path = io_pjoin(io_tdir, "name.safetensors");
		struct wsn_st_file *f;

		io_write_raw_st(path, json, 4);
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s", wsn_last_error());
		ck_assert_ptr_nonnull(wsn_st_find(f, name));
		wsn_st_close(f);
		free(path);
	}
}
END_TEST

/* Write t to path as the file's one tensor, "x", and open the file. */
static struct wsn_st_file *write_x_and_open(const char *path, struct wsn_tensor *t)
{
	struct wsn_named_tensor nt = { "x", t };
	struct wsn_st_file *f;

	ck_assert_int_eq(wsn_st_write(path, &nt, 1, NULL), 0);
	ck_assert_int_eq(wsn_st_open(path, NULL, &f), 0);
	return f;
}

START_TEST(test_st_missing_tensor_and_small_buffer)
{
	char *path = io_pjoin(io_tdir, "two.safetensors");
	float x[6] = { 0 };
	struct wsn_tensor t;
	struct wsn_st_file *f;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 2, 3);
	f = write_x_and_open(path, &t);
	io_expect_err(wsn_st_read(f, "dy", x, sizeof(x)), WSN_ENOTENSOR, path, "'dy'");
	io_expect_err(wsn_st_read(f, "x", x, sizeof(x) - 1), WSN_ERANGE, path, "'x'");
	ck_assert_int_eq(wsn_st_read(f, "x", x, sizeof(x)), 0);
	wsn_st_close(f);
	free(path);
}
END_TEST

/* The file shrinks after it was opened: the read names the tensor and the file. */
START_TEST(test_st_truncated_after_open)
{
	char *path = io_pjoin(io_tdir, "shrink.safetensors");
	float x[1024] = { 0 };
	struct wsn_tensor t;
	struct wsn_st_file *f;

	wsn_tensor_1d(&t, x, WSN_F32, WSN_MEM_HOST, 1024);
	f = write_x_and_open(path, &t);
	ck_assert_int_eq(truncate(path, 1000), 0);
	io_expect_err(wsn_st_read(f, "x", x, sizeof(x)), WSN_ETRUNC, path, "'x'");
	wsn_st_close(f);
	free(path);
}
END_TEST

Suite *suite_io_safetensors_bad(void)
{
	return TU_SUITE("io", { "safetensors-bad-input", 0, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_st_bad_short_file, 1 },
				{ test_st_bad_empty_file, 1 }, { test_st_bad_directory, 1 }, { test_st_bad_missing, 1 },
				{ test_st_bad_errno_names, 1 }, { test_st_bad_header_past_eof, 1 }, { test_st_bad_header_absurd, 1 },
				{ test_st_bad_header_zero, 1 }, { test_st_bad_json, 1 }, { test_st_bad_json_nul, 1 },
				{ test_st_bad_not_object, 1 }, { test_st_bad_entry_not_object, 1 }, { test_st_bad_dtype, 1 },
				{ test_st_bad_other_dtypes, 1 }, { test_st_bad_shape, 1 }, { test_st_bad_shape_overflow, 1 },
				{ test_st_bad_shape_mismatch, 1 }, { test_st_bad_offsets, 1 }, { test_st_bad_offsets_past_eof, 1 },
				{ test_st_bad_overlap, 1 }, { test_st_bad_metadata, 1 }, { test_st_bad_long_name, 1 },
				{ test_st_missing_tensor_and_small_buffer, 1 }, { test_st_truncated_after_open, 1 }) });
}
