/* SPDX-License-Identifier: MIT */
/* tests/check_io.c: the io_uring reader, safetensors and raw files, and their bad-input errors. */
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

/* ---- helpers ---- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill_bytes(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(rng_next(&seed) >> 56);
}

static char *pjoin(const char *dir, const char *name)
{
	char *p;

	ck_assert(asprintf(&p, "%s/%s", dir, name) >= 0);
	return p;
}

/* A temporary directory on the disk file system of the build tree (the current directory). */
static char *disk_tmpdir(void)
{
	char tmpl[] = "io-test-XXXXXX", *abs;

	ck_assert_msg(mkdtemp(tmpl) != NULL, "mkdtemp in the current directory");
	abs = realpath(tmpl, NULL);
	ck_assert(abs != NULL);
	return abs;
}

/* Assert the return code and that the detail mentions each given needle. */
static void expect_err(int got, int want, const char *needle, const char *needle2)
{
	const char *d = wsn_last_error();

	ck_assert_msg(got == want, "got %s (%d), want %s: %s", wsn_err_name(got), got,
		      wsn_err_name(want), d);
	if (needle)
		ck_assert_msg(strstr(d, needle) != NULL, "'%s' not in the error: %s", needle, d);
	if (needle2)
		ck_assert_msg(strstr(d, needle2) != NULL, "'%s' not in the error: %s", needle2, d);
}


/* Write a safetensors file by hand: the header text as given, then data_len bytes of data. */
static void write_raw_st(const char *path, const char *json, size_t data_len)
{
	size_t jl = strlen(json), n = 8 + jl + data_len;
	unsigned char *buf = calloc(1, n);

	ck_assert(buf != NULL);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)jl >> (8 * i));
	memcpy(buf + 8, json, jl);
	tu_write_file(path, buf, n);
	free(buf);
}

static int count_dir_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	ck_assert(d != NULL);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* A small reader for tests that open many files. */
static struct wsn_reader *small_reader(unsigned qd, size_t bs, int direct)
{
	struct wsn_reader_options o;
	struct wsn_reader *r;

	wsn_reader_options_init(&o);
	o.queue_depth = qd;
	o.block_size = bs;
	o.direct = direct;
	ck_assert_msg(wsn_reader_create(&o, &r) == 0, "reader: %s", wsn_last_error());
	return r;
}

/* The case's temporary directory, on /tmp (or $TMPDIR), removed at teardown. */
static char *tdir;

static void setup_tmp(void)
{
	tdir = tu_tmpdir();
}

static void teardown_tmp(void)
{
	tu_rmtree(tdir);
	free(tdir);
	tdir = NULL;
}

/* ---- safetensors round trips ---- */

START_TEST(test_st_roundtrip)
{
	static const int64_t shapes[][4] = {
		{ 1 }, { 7 }, { 3, 5 }, { 2, 3, 4 }, { 2, 1, 3, 5 }, { 33, 129 }, { 0, 4 },
	};
	static const int ndims[] = { 1, 1, 2, 3, 4, 2, 2 };
	const int ns = (int)(sizeof(ndims) / sizeof(ndims[0]));
	uint64_t seed = tu_case_seed("st_roundtrip");
	char *path = pjoin(tdir, "rt.safetensors");

	for (int dt = 0; dt < WSN_DTYPE_COUNT; dt++) {
		struct wsn_named_tensor nt[8];
		struct wsn_tensor t[8];
		void *data[8];
		char names[8][16];
		struct wsn_st_file *f;
		uint64_t prev_end = 0;

		for (int i = 0; i < ns; i++) {
			size_t sz = wsn_dtype_size((enum wsn_dtype)dt);
			int64_t numel = 1;

			for (int d = 0; d < ndims[i]; d++)
				numel *= shapes[i][d];
			data[i] = tu_xmalloc((size_t)numel * sz);
			ck_assert_int_eq(wsn_tensor_init(&t[i], data[i], (enum wsn_dtype)dt, WSN_MEM_HOST,
							 ndims[i], shapes[i]), 0);
			if (numel)
				ck_assert_int_eq(wsn_tensor_fill_random(&t[i], seed + (uint64_t)i, 0, 3), 0);
			/* names out of alphabetical order, so file order and name order differ */
			snprintf(names[i], sizeof(names[i]), "%c.t%d", 'z' - i, i);
			nt[i].name = names[i];
			nt[i].t = &t[i];
		}
		ck_assert_msg(wsn_st_write(path, nt, ns, NULL) == 0, "%s", wsn_last_error());
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s", wsn_last_error());
		ck_assert_str_eq(wsn_st_path(f), path);
		ck_assert_int_eq(wsn_st_count(f), ns);
		ck_assert_ptr_null(wsn_st_entry_at(f, ns));
		ck_assert_ptr_null(wsn_st_entry_at(f, -1));
		for (int i = 0; i < ns; i++) {
			/* written in the given order and packed: file order is the given order */
			const struct wsn_st_entry *e = wsn_st_entry_at(f, i);
			size_t nb = wsn_tensor_nbytes(&t[i]);
			void *back = tu_xmalloc(nb + 1);

			ck_assert_ptr_nonnull(e);
			ck_assert_str_eq(e->name, names[i]);
			ck_assert_ptr_eq(wsn_st_find(f, names[i]), e);
			ck_assert_int_eq(e->dtype, dt);
			ck_assert_int_eq(e->ndim, ndims[i]);
			for (int d = 0; d < ndims[i]; d++)
				ck_assert_int_eq(e->shape[d], shapes[i][d]);
			ck_assert_uint_eq(e->nbytes, nb);
			if (i)
				ck_assert_uint_eq(e->offset, prev_end);
			else
				ck_assert_uint_eq(e->offset % 8, 0);
			prev_end = e->offset + e->nbytes;
			ck_assert_msg(wsn_st_read(f, names[i], back, nb + 1) == 0, "%s", wsn_last_error());
			if (nb)
				ck_assert_mem_eq(back, data[i], nb);
			free(back);
		}
		ck_assert_ptr_null(wsn_st_find(f, "nope"));
		ck_assert_ptr_null(wsn_st_metadata(f, "anything"));
		wsn_st_close(f);
		for (int i = 0; i < ns; i++)
			free(data[i]);
	}
	free(path);
}
END_TEST

START_TEST(test_st_metadata_roundtrip)
{
	const char *meta[] = { "format", "pt", "op", "layernorm-fwd", "seed", "0x1234", "empty", "",
			       "utf8", "h\xc3\xa9llo \"quoted\"\n", NULL };
	const char *odd[] = { "lonely", NULL };
	char *path = pjoin(tdir, "meta.safetensors");
	float w[4] = { 1, 2, 3, 4 };
	struct wsn_tensor t;
	struct wsn_named_tensor nt = { "weight", &t };
	struct wsn_st_file *f;
	struct wsn_reader *r = small_reader(2, 64 << 10, -1);
	struct wsn_read_stats st;
	unsigned char *raw;
	size_t len;
	uint64_t hlen = 0;

	wsn_tensor_1d(&t, w, WSN_F32, WSN_MEM_HOST, 4);
	ck_assert_msg(wsn_st_write(path, &nt, 1, meta) == 0, "%s", wsn_last_error());
	ck_assert_msg(wsn_st_open(path, r, &f) == 0, "%s", wsn_last_error());
	for (int i = 0; meta[i]; i += 2)
		ck_assert_str_eq(wsn_st_metadata(f, meta[i]), meta[i + 1]);
	ck_assert_ptr_null(wsn_st_metadata(f, "missing"));
	ck_assert_ptr_null(wsn_st_find(f, "__metadata__"));
	ck_assert_int_eq(wsn_st_count(f), 1);
	wsn_st_close(f);
	/* the header went through the caller's reader */
	wsn_reader_stats(r, &st);
	ck_assert_uint_ge(st.bytes, 8);
	ck_assert_uint_ge(st.reads, 2);
	wsn_reader_destroy(r);

	/* the header is padded with spaces to a multiple of 8 and names the metadata first */
	raw = (unsigned char *)tu_slurp(path, &len);
	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | raw[i];
	ck_assert_uint_eq(hlen % 8, 0);
	ck_assert_uint_eq(len, 8 + hlen + sizeof(w));
	ck_assert_int_eq(raw[8], '{');
	ck_assert(memmem(raw + 8, hlen, "\"__metadata__\"", 14) != NULL);
	ck_assert(memmem(raw + 8, hlen, "__metadata__", 12) < memmem(raw + 8, hlen, "weight", 6));
	for (size_t i = 8 + hlen - 1; raw[i] != '}'; i--)
		ck_assert_int_eq(raw[i], ' ');
	ck_assert_mem_eq(raw + 8 + hlen, w, sizeof(w));
	free(raw);

	expect_err(wsn_st_write(path, &nt, 1, odd), WSN_EINVAL, path, "lonely");
	free(path);
}
END_TEST

/* Entries come back sorted by offset whatever the header's order; holes are allowed. */
START_TEST(test_st_sorted_by_offset)
{
	char *path = pjoin(tdir, "order.safetensors");
	struct wsn_st_file *f;
	float back[3];

	write_raw_st(path, "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]},"
		     "\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
		     "\"e\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[8,8]},"
		     "\"b\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}", 24);
	ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn_st_count(f), 4);
	ck_assert_str_eq(wsn_st_entry_at(f, 0)->name, "b");
	ck_assert_int_eq(wsn_st_entry_at(f, 0)->ndim, 0);
	ck_assert_str_eq(wsn_st_entry_at(f, 1)->name, "a");
	ck_assert_str_eq(wsn_st_entry_at(f, 2)->name, "e");
	ck_assert_str_eq(wsn_st_entry_at(f, 3)->name, "c");
	ck_assert_int_eq(wsn_st_entry_at(f, 1)->dtype, WSN_BF16);
	ck_assert_int_eq(wsn_st_read(f, "e", NULL, 0), 0);
	ck_assert_int_eq(wsn_st_read(f, "c", back, sizeof(back)), 0);
	wsn_st_close(f);
	free(path);
}
END_TEST

/*
 * A checkpoint's extra tensors (a step counter, a mask, f64 statistics, f8 scales) do not stop the
 * file from opening; their data is not what wsnorm computes with, so wsn_st_read refuses it.
 */
START_TEST(test_st_other_dtypes)
{
	char *path = pjoin(tdir, "extra.safetensors");
	const struct wsn_st_entry *e;
	struct wsn_st_file *f;
	unsigned char buf[64];

	write_raw_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
		     "\"step\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[8,16]},"
		     "\"mask\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[16,19]},"
		     "\"scale\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[19,21]},"
		     "\"stats\":{\"dtype\":\"F64\",\"shape\":[1,2],\"data_offsets\":[24,40]}}", 40);
	ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn_st_count(f), 5);
	ck_assert_str_eq(wsn_st_entry_at(f, 1)->name, "step");
	ck_assert_str_eq(wsn_st_entry_at(f, 4)->name, "stats");
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "step"));
	ck_assert_str_eq(e->st_dtype, "I64");
	ck_assert_int_eq(e->dtype, WSN_DTYPE_COUNT);
	ck_assert_uint_eq(wsn_dtype_size(e->dtype), 0);
	ck_assert_int_eq(e->ndim, 0);
	ck_assert_uint_eq(e->nbytes, 8);
	ck_assert_uint_eq(e->offset, wsn_st_find(f, "x")->offset + 8);
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "mask"));
	ck_assert_str_eq(e->st_dtype, "BOOL");
	ck_assert_uint_eq(e->nbytes, 3);
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "scale"));
	ck_assert_str_eq(e->st_dtype, "F8_E4M3");
	ck_assert_uint_eq(e->nbytes, 2);
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "stats"));
	ck_assert_str_eq(e->st_dtype, "F64");
	ck_assert_int_eq(e->ndim, 2);
	ck_assert_uint_eq(e->nbytes, 16);
	ck_assert_ptr_nonnull(e = wsn_st_find(f, "x"));
	ck_assert_str_eq(e->st_dtype, "F32");
	ck_assert_int_eq(e->dtype, WSN_F32);
	ck_assert_int_eq(wsn_st_read(f, "x", buf, sizeof(buf)), 0);
	expect_err(wsn_st_read(f, "step", buf, sizeof(buf)), WSN_EDTYPE, path,
		   "tensor 'step' is I64; wsnorm computes with F32, F16 and BF16");
	expect_err(wsn_st_read(f, "mask", buf, sizeof(buf)), WSN_EDTYPE, path, "'mask' is BOOL");
	wsn_st_close(f);
	free(path);
}
END_TEST

/* ---- safetensors bad input: each case its named error, naming the file (and tensor) ---- */

/* Write json as a safetensors header with data_len data bytes and expect open to fail. */
static void bad_header(const char *json, size_t data_len, int want, const char *needle,
		       const char *tensor)
{
	char *path = pjoin(tdir, "bad.safetensors"), quoted[WSN_ST_MAX_NAME + 2];
	struct wsn_st_file *f = (struct wsn_st_file *)&f;

	write_raw_st(path, json, data_len);
	expect_err(wsn_st_open(path, NULL, &f), want, path, needle);
	ck_assert_ptr_null(f);
	if (tensor) {
		snprintf(quoted, sizeof(quoted), "'%s'", tensor);
		ck_assert_msg(strstr(wsn_last_error(), quoted) != NULL, "tensor %s not named: %s",
			      quoted, wsn_last_error());
	}
	free(path);
}

START_TEST(test_st_bad_short_file)
{
	char *path = pjoin(tdir, "short.safetensors");
	struct wsn_st_file *f;

	tu_write_file(path, "\x10\0\0\0\0", 5);
	expect_err(wsn_st_open(path, NULL, &f), WSN_ETRUNC, path, "5 bytes");
	free(path);
}
END_TEST

START_TEST(test_st_bad_empty_file)
{
	char *path = pjoin(tdir, "empty.safetensors");
	struct wsn_st_file *f;

	tu_write_file(path, "", 0);
	expect_err(wsn_st_open(path, NULL, &f), WSN_ETRUNC, path, "empty");
	free(path);
}
END_TEST

START_TEST(test_st_bad_directory)
{
	struct wsn_st_file *f;

	expect_err(wsn_st_open(tdir, NULL, &f), WSN_EISDIR, tdir, "directory");
}
END_TEST

START_TEST(test_st_bad_missing)
{
	char *path = pjoin(tdir, "absent.safetensors");
	struct wsn_st_file *f;

	expect_err(wsn_st_open(path, NULL, &f), WSN_ENOENT, path, NULL);
	free(path);
}
END_TEST

/* errno values the table names keep their name: a symlink loop is ELOOP, a long name ENAMETOOLONG */
START_TEST(test_st_bad_errno_names)
{
	char *a = pjoin(tdir, "loop-a"), *b = pjoin(tdir, "loop-b"), *lng;
	struct wsn_st_file *f;
	size_t n = strlen(tdir) + 1 + 300;

	ck_assert_int_eq(symlink(b, a), 0);
	ck_assert_int_eq(symlink(a, b), 0);
	expect_err(wsn_st_open(a, NULL, &f), WSN_ELOOP, a, NULL);
	ck_assert_str_eq(wsn_err_name(WSN_ELOOP), "ELOOP");
	lng = malloc(n + 1);
	ck_assert_ptr_nonnull(lng);
	snprintf(lng, n + 1, "%s/", tdir);
	memset(lng + strlen(lng), 'n', n - strlen(lng));
	lng[n] = '\0';
	expect_err(wsn_st_open(lng, NULL, &f), WSN_ENAMETOOLONG, NULL, NULL);
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
	char *path = pjoin(tdir, "long.safetensors");
	unsigned char buf[64] = { 0 };
	struct wsn_st_file *f;

	buf[0] = 200; /* 200-byte header in a 64-byte file */
	memcpy(buf + 8, "{}", 2);
	tu_write_file(path, buf, sizeof(buf));
	expect_err(wsn_st_open(path, NULL, &f), WSN_ETRUNC, path, "200");
	free(path);
}
END_TEST

START_TEST(test_st_bad_header_absurd)
{
	char *path = pjoin(tdir, "absurd.safetensors");
	unsigned char buf[16] = { 0 };
	struct wsn_st_file *f;

	memset(buf, 0xff, 8);
	tu_write_file(path, buf, sizeof(buf));
	expect_err(wsn_st_open(path, NULL, &f), WSN_EFORMAT, path, "100 MiB");
	memset(buf, 0, 8);
	buf[3] = 0x08; /* 128 MiB */
	tu_write_file(path, buf, sizeof(buf));
	expect_err(wsn_st_open(path, NULL, &f), WSN_EFORMAT, path, "134217728");
	free(path);
}
END_TEST

START_TEST(test_st_bad_header_zero)
{
	bad_header("", 4, WSN_EFORMAT, "header length is 0", NULL);
}
END_TEST

START_TEST(test_st_bad_json)
{
	bad_header("{\"x\": {\"dtype\": \"F32\", ", 0, WSN_EFORMAT, "JSON", NULL);
	bad_header("{\"x\": 1} trailing", 0, WSN_EFORMAT, "JSON", NULL);
	/* duplicate keys */
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
		   "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, WSN_EFORMAT, "JSON",
		   NULL);
}
END_TEST

/* A NUL inside the header ends nothing: the length bounds the parse and NUL is not JSON. */
START_TEST(test_st_bad_json_nul)
{
	char *path = pjoin(tdir, "nul.safetensors");
	const char json[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
	unsigned char buf[8 + sizeof(json) + 7 + 4] = { 0 };
	struct wsn_st_file *f;

	buf[0] = (unsigned char)(sizeof(json) + 7); /* header = json, NUL, 7 spaces */
	memcpy(buf + 8, json, sizeof(json));
	memset(buf + 8 + sizeof(json), ' ', 7);
	tu_write_file(path, buf, sizeof(buf));
	expect_err(wsn_st_open(path, NULL, &f), WSN_EFORMAT, path, "NUL byte at byte 54");
	free(path);
}
END_TEST

START_TEST(test_st_bad_not_object)
{
	bad_header("[1, 2, 3]", 0, WSN_EFORMAT, "not an object", NULL);
	bad_header("\"string\"", 0, WSN_EFORMAT, NULL, NULL);
}
END_TEST

START_TEST(test_st_bad_entry_not_object)
{
	bad_header("{\"weight\": [1, 2]}", 0, WSN_EFORMAT, "'weight'", "weight");
}
END_TEST

START_TEST(test_st_bad_dtype)
{
	/* a name that is no safetensors dtype (a GGML one, a wider integer, a bare "F8", lower case) */
	bad_header("{\"idx\":{\"dtype\":\"Q4_0\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, WSN_EDTYPE,
		   "\"Q4_0\"", "idx");
	bad_header("{\"idx\":{\"dtype\":\"I128\",\"shape\":[1],\"data_offsets\":[0,16]}}", 16, WSN_EDTYPE,
		   "\"I128\"", "idx");
	bad_header("{\"idx\":{\"dtype\":\"F8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, WSN_EDTYPE,
		   "\"F8\"", "idx");
	bad_header("{\"idx\":{\"dtype\":\"i64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8, WSN_EDTYPE,
		   "\"i64\"", "idx");
	bad_header("{\"idx\":{\"dtype\":\"f32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EDTYPE,
		   "'idx'", "idx");
	bad_header("{\"idx\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EFORMAT,
		   "'idx'", "idx");
	bad_header("{\"idx\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, WSN_EFORMAT, "dtype", "idx");
}
END_TEST

/*
 * Every dtype the safetensors format defines opens, with its own element size (F4 and F6 pack
 * elements smaller than a byte): 8 elements of b bits are b bytes, and one byte more is a shape
 * that does not match. Only F32, F16 and BF16 map to an enum wsn_dtype.
 */
START_TEST(test_st_all_dtypes)
{
	static const struct {
		const char *name;
		unsigned bits;
		int dt;
	} types[] = {
		{ "BOOL", 8, WSN_DTYPE_COUNT },     { "F4", 4, WSN_DTYPE_COUNT },
		{ "F6_E2M3", 6, WSN_DTYPE_COUNT },  { "F6_E3M2", 6, WSN_DTYPE_COUNT },
		{ "U8", 8, WSN_DTYPE_COUNT },       { "I8", 8, WSN_DTYPE_COUNT },
		{ "F8_E5M2", 8, WSN_DTYPE_COUNT },  { "F8_E4M3", 8, WSN_DTYPE_COUNT },
		{ "F8_E8M0", 8, WSN_DTYPE_COUNT },  { "F8_E4M3FNUZ", 8, WSN_DTYPE_COUNT },
		{ "F8_E5M2FNUZ", 8, WSN_DTYPE_COUNT }, { "I16", 16, WSN_DTYPE_COUNT },
		{ "U16", 16, WSN_DTYPE_COUNT },     { "F16", 16, WSN_F16 },
		{ "BF16", 16, WSN_BF16 },           { "I32", 32, WSN_DTYPE_COUNT },
		{ "U32", 32, WSN_DTYPE_COUNT },     { "F32", 32, WSN_F32 },
		{ "C64", 64, WSN_DTYPE_COUNT },     { "F64", 64, WSN_DTYPE_COUNT },
		{ "I64", 64, WSN_DTYPE_COUNT },     { "U64", 64, WSN_DTYPE_COUNT },
	};
	char *path = pjoin(tdir, "types.safetensors"), json[256];

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const struct wsn_st_entry *e;
		struct wsn_st_file *f;

		snprintf(json, sizeof(json), "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%u]}}",
			 types[i].name, types[i].bits);
		write_raw_st(path, json, types[i].bits);
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s: %s", types[i].name, wsn_last_error());
		ck_assert_ptr_nonnull(e = wsn_st_find(f, "t"));
		ck_assert_str_eq(e->st_dtype, types[i].name);
		ck_assert_int_eq(e->dtype, types[i].dt);
		ck_assert_uint_eq(e->nbytes, types[i].bits);
		wsn_st_close(f);
		snprintf(json, sizeof(json), "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%u]}}",
			 types[i].name, types[i].bits + 1);
		bad_header(json, types[i].bits + 1, WSN_ESHAPE, types[i].name, "t");
	}
	free(path);
}
END_TEST

/* The size checks hold for the dtypes wsnorm does not compute with, each with its own element size. */
START_TEST(test_st_bad_other_dtypes)
{
	bad_header("{\"n\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, WSN_ESHAPE,
		   "16 bytes", "n");
	bad_header("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,4]}}", 4, WSN_ESHAPE,
		   "3 bytes", "m");
	bad_header("{\"s\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]}}", 12, WSN_ETRUNC,
		   "'s'", "s");
	bad_header("{\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
		   "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2],\"data_offsets\":[6,8]}}", 8, WSN_EFORMAT,
		   "overlap", "n");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'m'"));
	/* 2^61 elements fit, their 2^64 bytes do not */
	bad_header("{\"n\":{\"dtype\":\"U64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,8]}}", 8,
		   WSN_EOVERFLOW, "'n'", "n");
	/* three 4-bit elements end inside a byte */
	bad_header("{\"q\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 2, WSN_ESHAPE,
		   "not a whole number of bytes", "q");
	bad_header("{\"q\":{\"dtype\":\"F6_E2M3\",\"shape\":[2,3],\"data_offsets\":[0,5]}}", 5, WSN_ESHAPE,
		   "6 elements of 6 bits", "q");
}
END_TEST

START_TEST(test_st_bad_shape)
{
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 16, WSN_EFORMAT,
		   "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,-2],\"data_offsets\":[0,16]}}", 16,
		   WSN_ESHAPE, "negative", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[2,2.0],\"data_offsets\":[0,16]}}", 16,
		   WSN_EFORMAT, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 8,
		   WSN_EFORMAT, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,4],\"data_offsets\":[0,16]}}", 16,
		   WSN_ESHAPE, "5 dimensions", "x");
}
END_TEST

START_TEST(test_st_bad_shape_overflow)
{
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
		   "\"data_offsets\":[0,16]}}", 16, WSN_EOVERFLOW, "'x'", "x");
	/* fits int64 elements but not bytes */
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],"
		   "\"data_offsets\":[0,16]}}", 16, WSN_EOVERFLOW, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],"
		   "\"data_offsets\":[0,16]}}", 16, WSN_EFORMAT, NULL, NULL);
}
END_TEST

START_TEST(test_st_bad_shape_mismatch)
{
	bad_header("{\"x\":{\"dtype\":\"BF16\",\"shape\":[3,3],\"data_offsets\":[0,16]}}", 16,
		   WSN_ESHAPE, "'x'", "x");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "18 bytes"));
}
END_TEST

START_TEST(test_st_bad_offsets)
{
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
		   WSN_EFORMAT, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 8, WSN_EFORMAT,
		   "data_offsets", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[\"0\",4]}}", 8,
		   WSN_EFORMAT, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1]}}", 8, WSN_EFORMAT, "data_offsets", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 8,
		   WSN_EFORMAT, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8, WSN_EFORMAT,
		   "'x'", "x");
}
END_TEST

START_TEST(test_st_bad_offsets_past_eof)
{
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12,
		   WSN_ETRUNC, "'x'", "x");
	bad_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[9223372036854775800,"
		   "9223372036854775804]}}", 12, WSN_ETRUNC, "'x'", "x");
}
END_TEST

START_TEST(test_st_bad_overlap)
{
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}", 20, WSN_EFORMAT,
		   "overlap", "a");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'a'"));
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'b'"));
	/* contained in a larger, earlier range */
	bad_header("{\"a\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
		   "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
		   "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}", 32, WSN_EFORMAT,
		   "overlap", "a");
}
END_TEST

START_TEST(test_st_bad_metadata)
{
	bad_header("{\"__metadata__\":{\"k\":1}}", 0, WSN_EFORMAT, "'k'", NULL);
	bad_header("{\"__metadata__\":{\"k\":\"v\",\"n\":null}}", 0, WSN_EFORMAT, "'n'", NULL);
	bad_header("{\"__metadata__\":[\"k\"]}", 0, WSN_EFORMAT, "__metadata__", NULL);
}
END_TEST

START_TEST(test_st_bad_long_name)
{
	char json[512], name[WSN_ST_MAX_NAME + 1];

	memset(name, 'n', WSN_ST_MAX_NAME);
	name[WSN_ST_MAX_NAME] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		 name);
	bad_header(json, 4, WSN_ERANGE, "nnnnnnnn", NULL);
	/* one byte shorter is fine */
	name[WSN_ST_MAX_NAME - 1] = '\0';
	snprintf(json, sizeof(json), "{\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
		 name);
	{
		char *path = pjoin(tdir, "name.safetensors");
		struct wsn_st_file *f;

		write_raw_st(path, json, 4);
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s", wsn_last_error());
		ck_assert_ptr_nonnull(wsn_st_find(f, name));
		wsn_st_close(f);
		free(path);
	}
}
END_TEST

START_TEST(test_st_missing_tensor_and_small_buffer)
{
	char *path = pjoin(tdir, "two.safetensors");
	float x[6] = { 0 };
	struct wsn_tensor t;
	struct wsn_named_tensor nt = { "x", &t };
	struct wsn_st_file *f;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 2, 3);
	ck_assert_int_eq(wsn_st_write(path, &nt, 1, NULL), 0);
	ck_assert_int_eq(wsn_st_open(path, NULL, &f), 0);
	expect_err(wsn_st_read(f, "dy", x, sizeof(x)), WSN_ENOTENSOR, path, "'dy'");
	expect_err(wsn_st_read(f, "x", x, sizeof(x) - 1), WSN_ERANGE, path, "'x'");
	ck_assert_int_eq(wsn_st_read(f, "x", x, sizeof(x)), 0);
	wsn_st_close(f);
	free(path);
}
END_TEST

/* The file shrinks after it was opened: the read names the tensor and the file. */
START_TEST(test_st_truncated_after_open)
{
	char *path = pjoin(tdir, "shrink.safetensors");
	float x[1024] = { 0 };
	struct wsn_tensor t;
	struct wsn_named_tensor nt = { "x", &t };
	struct wsn_st_file *f;

	wsn_tensor_1d(&t, x, WSN_F32, WSN_MEM_HOST, 1024);
	ck_assert_int_eq(wsn_st_write(path, &nt, 1, NULL), 0);
	ck_assert_int_eq(wsn_st_open(path, NULL, &f), 0);
	ck_assert_int_eq(truncate(path, 1000), 0);
	expect_err(wsn_st_read(f, "x", x, sizeof(x)), WSN_ETRUNC, path, "'x'");
	wsn_st_close(f);
	free(path);
}
END_TEST

/* ---- safetensors writing errors ---- */

START_TEST(test_st_write_errors)
{
	char *path = pjoin(tdir, "w.safetensors"), *nodir = pjoin(tdir, "no/such/dir/w.safetensors");
	float x[12] = { 0 }, y[4] = { 1, 2, 3, 4 };
	struct wsn_tensor t, tt, dev;
	struct wsn_named_tensor good = { "x", &t }, list[2];
	unsigned char *before, *after;
	size_t lb, la;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 3, 4);
	/* a transposed view is not contiguous */
	tt = t;
	tt.shape[0] = 4, tt.shape[1] = 3, tt.stride[0] = 1, tt.stride[1] = 4;
	wsn_tensor_1d(&dev, y, WSN_F32, WSN_MEM_DEVICE, 4);

	ck_assert_int_eq(wsn_st_write(path, &good, 1, NULL), 0);
	before = (unsigned char *)tu_slurp(path, &lb);
	list[0] = good;
	list[1] = (struct wsn_named_tensor){ "xt", &tt };
	expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "contiguous");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'xt'"));
	list[1] = (struct wsn_named_tensor){ "dev", &dev };
	expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'dev'");
	list[1] = (struct wsn_named_tensor){ "x", &t };
	expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'x'");
	list[1] = (struct wsn_named_tensor){ "__metadata__", &t };
	expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, NULL);
	list[1] = (struct wsn_named_tensor){ "nodata", &t };
	list[1].t = NULL;
	expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'nodata'");
	/* the destination is untouched and no temporary file is left */
	after = (unsigned char *)tu_slurp(path, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	ck_assert_int_eq(count_dir_entries(tdir), 1);
	free(after);

	expect_err(wsn_st_write(nodir, &good, 1, NULL), WSN_ENOENT, nodir, NULL);
	expect_err(wsn_st_write(tdir, &good, 1, NULL), WSN_EISDIR, tdir, NULL);
	ck_assert_int_eq(count_dir_entries(tdir), 1);
	/* zero tensors is a valid file */
	ck_assert_int_eq(wsn_st_write(path, NULL, 0, NULL), 0);
	{
		struct wsn_st_file *f;

		ck_assert_int_eq(wsn_st_open(path, NULL, &f), 0);
		ck_assert_int_eq(wsn_st_count(f), 0);
		wsn_st_close(f);
	}
	free(before);
	free(path);
	free(nodir);
}
END_TEST

/* ---- fuzz: truncations and corruptions never crash, read out of bounds or hang ---- */

START_TEST(test_st_fuzz)
{
	uint64_t seed = tu_case_seed("st_fuzz"), s = seed;
	const char *meta[] = { "k", "v", NULL };
	char *path = pjoin(tdir, "good.safetensors"), *bad = pjoin(tdir, "fuzz.safetensors");
	unsigned char *good, *buf;
	float a[5], b[3];
	uint16_t c[7];
	struct wsn_tensor ta, tb, tc;
	struct wsn_named_tensor nt[3] = { { "a", &ta }, { "bb", &tb }, { "ccc", &tc } };
	struct wsn_reader *r = small_reader(2, 64 << 10, -1);
	unsigned char dst[64];
	size_t len, hend;
	int ok = 0, failed = 0;

	wsn_tensor_1d(&ta, a, WSN_F32, WSN_MEM_HOST, 5);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, 3);
	wsn_tensor_1d(&tc, c, WSN_BF16, WSN_MEM_HOST, 7);
	fill_bytes((unsigned char *)a, sizeof(a), seed);
	fill_bytes((unsigned char *)b, sizeof(b), seed + 1);
	fill_bytes((unsigned char *)c, sizeof(c), seed + 2);
	ck_assert_int_eq(wsn_st_write(path, nt, 3, meta), 0);
	good = (unsigned char *)tu_slurp(path, &len);
	hend = 8 + (size_t)good[0] + ((size_t)good[1] << 8);
	ck_assert_uint_lt(hend, len);
	buf = tu_xmalloc(len);

	/* every truncation */
	for (size_t cut = 0; cut < len; cut++) {
		struct wsn_st_file *f;
		int rc;

		tu_write_file(bad, good, cut);
		rc = wsn_st_open(bad, r, &f);
		ck_assert_int_lt(rc, 0);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), bad));
	}
	/* random corruptions of the length and header bytes */
	for (int it = 0; it < 3000; it++) {
		struct wsn_st_file *f;
		int nflip = 1 + (int)(rng_next(&s) % 4), rc;
		static const char special[] = "{}[]\",:-09eE. \\";

		memcpy(buf, good, len);
		for (int k = 0; k < nflip; k++) {
			size_t at = (size_t)(rng_next(&s) % hend);
			uint64_t how = rng_next(&s);

			if (how % 3 == 0)
				buf[at] = (unsigned char)(how >> 8);
			else if (how % 3 == 1)
				buf[at] = (unsigned char)special[(how >> 8) % (sizeof(special) - 1)];
			else
				buf[at] ^= (unsigned char)(1u << ((how >> 8) % 8));
		}
		tu_write_file(bad, buf, (rng_next(&s) % 8) ? len : (size_t)(rng_next(&s) % (len + 1)));
		rc = wsn_st_open(bad, r, &f);
		if (rc < 0) {
			ck_assert_msg(strstr(wsn_last_error(), bad) != NULL, "%s", wsn_last_error());
			failed++;
			continue;
		}
		ck_assert_int_eq(rc, 0);
		ok++;
		for (int i = 0; i < wsn_st_count(f); i++) {
			const struct wsn_st_entry *e = wsn_st_entry_at(f, i);

			rc = wsn_st_read(f, e->name, dst, sizeof(dst));
			ck_assert_int_le(rc, 0);
		}
		wsn_st_close(f);
	}
	printf("st_fuzz: %d corrupt headers opened, %d refused\n", ok, failed);
	ck_assert_int_gt(failed, 0);
	wsn_reader_destroy(r);
	free(buf);
	free(good);
	free(path);
	free(bad);
}
END_TEST

/* ---- the reader ---- */

#define BIG_LEN ((size_t)(3u << 20) + 123)

/* Read the whole file and a set of unaligned ranges, comparing against the bytes written. */
static void check_reads(struct wsn_reader *r, const char *path, const unsigned char *ref,
			size_t len, uint64_t seed)
{
	static const uint64_t fixed[][2] = {
		{ 0, 1 }, { 1, 1 }, { 511, 2 }, { 4095, 4098 }, { 65535, 65537 }, { 65536, 65536 },
		{ 100, 300000 }, { 12345, 1u << 20 }, { BIG_LEN - 1, 1 }, { BIG_LEN - 123, 123 },
		{ BIG_LEN - 70000, 70000 }, { BIG_LEN, 0 }, { 0, BIG_LEN },
	};
	unsigned char *got = tu_xmalloc(len);

	memset(got, 0xa5, len);
	ck_assert_msg(wsn_reader_read(r, path, 0, len, got) == 0, "%s", wsn_last_error());
	ck_assert_mem_eq(got, ref, len);
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		uint64_t off = fixed[i][0], n = fixed[i][1];

		if (off + n > len)
			continue;
		memset(got, 0x5a, len);
		ck_assert_msg(wsn_reader_read(r, path, off, n, got) == 0, "[%llu, +%llu): %s",
			      (unsigned long long)off, (unsigned long long)n, wsn_last_error());
		ck_assert_msg(!memcmp(got, ref + off, n), "range [%llu, +%llu) differs",
			      (unsigned long long)off, (unsigned long long)n);
		/* nothing written past the range */
		if (n < len)
			ck_assert_int_eq(got[n], 0x5a);
	}
	for (int i = 0; i < 20; i++) {
		uint64_t off = rng_next(&seed) % len, n = rng_next(&seed) % (len - off + 1);

		ck_assert_msg(wsn_reader_read(r, path, off, n, got) == 0, "%s", wsn_last_error());
		ck_assert_msg(!memcmp(got, ref + off, n), "random range [%llu, +%llu) differs",
			      (unsigned long long)off, (unsigned long long)n);
	}
	free(got);
}

/* Buffered and direct reads of a file much larger than qd * bs, on the build tree's disk. */
START_TEST(test_reader_big_file)
{
	uint64_t seed = tu_case_seed("reader_big");
	char *dir = disk_tmpdir(), *path = pjoin(dir, "big.bin");
	unsigned char *ref = tu_xmalloc(BIG_LEN);
	static const int modes[] = { 0, -1, 1 };

	fill_bytes(ref, BIG_LEN, seed);
	tu_write_file(path, ref, BIG_LEN);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct wsn_reader *r = small_reader(4, 64 << 10, modes[m]);
		struct wsn_read_stats st;
		unsigned char probe[16];
		int rc;

		rc = wsn_reader_read(r, path, 0, sizeof(probe), probe);
		if (modes[m] == 1 && rc == WSN_ENOTSUP) {
			/* the disk file system refused O_DIRECT: the error must say so, naming the file */
			expect_err(rc, WSN_ENOTSUP, path, "direct");
			printf("reader_big: O_DIRECT refused on %s: %s\n", dir, wsn_last_error());
			wsn_reader_destroy(r);
			continue;
		}
		ck_assert_msg(rc == 0, "%s", wsn_last_error());
		check_reads(r, path, ref, BIG_LEN, seed + m);
		wsn_reader_stats(r, &st);
		printf("reader_big: direct=%d mode=%s fixed=%s: %llu reads, %llu short, %llu direct files, "
		       "%llu buffered files\n", modes[m], wsn_reader_ring_mode(r),
		       wsn__reader_fixed_buffers(r) ? "yes" : "no", (unsigned long long)st.reads,
		       (unsigned long long)st.short_reads,
		       (unsigned long long)st.direct_files, (unsigned long long)st.buffered_files);
		ck_assert_uint_ge(st.bytes, BIG_LEN);
		/* the whole file alone takes more reads than the ring has buffers */
		ck_assert_uint_ge(st.reads, BIG_LEN / (64 << 10));
		ck_assert(st.seconds > 0);
		if (modes[m] == 0)
			ck_assert_uint_eq(st.direct_files, 0);
		if (modes[m] == 1)
			ck_assert_uint_eq(st.buffered_files, 0);
		ck_assert_uint_gt(st.direct_files + st.buffered_files, 30);
		wsn_reader_destroy(r);
	}
	free(ref);
	unlink(path);
	tu_rmtree(dir);
	free(path);
	free(dir);
}
END_TEST

/* Queue depths 1, 2 and 32 (with 4 KiB blocks, so every depth is exercised), direct and not. */
START_TEST(test_reader_queue_depths)
{
	uint64_t seed = tu_case_seed("reader_qd");
	char *dir = disk_tmpdir(), *path = pjoin(dir, "qd.bin");
	size_t len = (size_t)(1u << 20) + 4097;
	unsigned char *ref = tu_xmalloc(len), *got = tu_xmalloc(len);
	static const unsigned qds[] = { 1, 2, 32 };

	fill_bytes(ref, len, seed);
	tu_write_file(path, ref, len);
	for (size_t i = 0; i < 3; i++)
		for (int direct = -1; direct <= 0; direct++) {
			struct wsn_reader *r = small_reader(qds[i], 4096, direct);
			uint64_t s = seed + i;

			memset(got, 0, len);
			ck_assert_msg(wsn_reader_read(r, path, 0, len, got) == 0, "%s", wsn_last_error());
			ck_assert_mem_eq(got, ref, len);
			for (int k = 0; k < 10; k++) {
				uint64_t off = rng_next(&s) % len, n = rng_next(&s) % (len - off + 1);

				ck_assert_int_eq(wsn_reader_read(r, path, off, n, got), 0);
				ck_assert_msg(!memcmp(got, ref + off, n), "qd %u direct %d [%llu, +%llu)",
					      qds[i], direct, (unsigned long long)off,
					      (unsigned long long)n);
			}
			wsn_reader_destroy(r);
		}
	free(ref);
	free(got);
	tu_rmtree(dir);
	free(path);
	free(dir);
}
END_TEST

/* Short reads are resubmitted for the rest (simulated: each buffer's first completion is cut). */
START_TEST(test_reader_short_reads)
{
	uint64_t seed = tu_case_seed("reader_short");
	char *dir = disk_tmpdir(), *path = pjoin(dir, "short.bin");
	unsigned char *ref = tu_xmalloc(BIG_LEN);

	fill_bytes(ref, BIG_LEN, seed);
	tu_write_file(path, ref, BIG_LEN);
	for (int direct = -1; direct <= 0; direct++) {
		struct wsn_reader *r = small_reader(4, 64 << 10, direct);
		struct wsn_read_stats st;

		wsn__reader_inject_short_reads(r, true);
		check_reads(r, path, ref, BIG_LEN, seed + 7);
		wsn_reader_stats(r, &st);
		printf("reader_short: direct=%d: %llu reads, %llu short, %llu direct files\n", direct,
		       (unsigned long long)st.reads, (unsigned long long)st.short_reads,
		       (unsigned long long)st.direct_files);
		ck_assert_uint_gt(st.short_reads, BIG_LEN / (64 << 10));
		ck_assert_uint_gt(st.reads, st.short_reads);
		wsn_reader_destroy(r);
	}
	free(ref);
	tu_rmtree(dir);
	free(path);
	free(dir);
}
END_TEST

START_TEST(test_reader_errors)
{
	char *path = pjoin(tdir, "small.bin"), *empty = pjoin(tdir, "empty.bin");
	char *missing = pjoin(tdir, "missing.bin");
	struct wsn_reader *r = small_reader(2, 4096, -1);
	unsigned char buf[64], data[100];

	memset(data, 7, sizeof(data));
	tu_write_file(path, data, sizeof(data));
	tu_write_file(empty, "", 0);
	expect_err(wsn_reader_read(r, path, 50, 51, buf), WSN_ETRUNC, path, "100 bytes");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "offset 50"));
	expect_err(wsn_reader_read(r, path, 101, 0, buf), WSN_ETRUNC, path, NULL);
	expect_err(wsn_reader_read(r, path, UINT64_MAX, 2, buf), WSN_ETRUNC, path, NULL);
	ck_assert_int_eq(wsn_reader_read(r, path, 100, 0, buf), 0);
	ck_assert_int_eq(wsn_reader_read(r, path, 36, 64, buf), 0);
	ck_assert_mem_eq(buf, data, 64);
	expect_err(wsn_reader_read(r, empty, 0, 1, buf), WSN_ETRUNC, empty, "empty");
	ck_assert_int_eq(wsn_reader_read(r, empty, 0, 0, buf), 0);
	expect_err(wsn_reader_read(r, tdir, 0, 1, buf), WSN_EISDIR, tdir, NULL);
	expect_err(wsn_reader_read(r, missing, 0, 1, buf), WSN_ENOENT, missing, NULL);
	expect_err(wsn_reader_read(r, path, 0, 1, NULL), WSN_EINVAL, path, NULL);
	expect_err(wsn_reader_read(NULL, path, 0, 1, buf), WSN_EINVAL, NULL, NULL);
	/* a FIFO is refused without waiting for a writer */
	{
		char *fifo = pjoin(tdir, "fifo");

		ck_assert_int_eq(mkfifo(fifo, 0600), 0);
		expect_err(wsn_reader_read(r, fifo, 0, 1, buf), WSN_EINVAL, fifo, "regular");
		free(fifo);
	}
	/* the reader still works after errors */
	ck_assert_int_eq(wsn_reader_read(r, path, 0, 64, buf), 0);
	wsn_reader_destroy(r);
	free(path);
	free(empty);
	free(missing);
}
END_TEST

struct other_thread_read {
	struct wsn_reader *r;
	const char *path;
	unsigned char *buf;
	int ret;
	char msg[256];
};

static void *read_from_other_thread(void *arg)
{
	struct other_thread_read *o = arg;

	o->ret = wsn_reader_read(o->r, o->path, 0, 64, o->buf);
	snprintf(o->msg, sizeof(o->msg), "%s", wsn_last_error());
	return NULL;
}

/* A SINGLE_ISSUER reader used from another thread says so and stays usable for its owner; a
 * registered buffer with a read still running cannot be unregistered. */
START_TEST(test_reader_thread_and_unregister)
{
	enum { N = 256 << 10 };
	char *path = pjoin(tdir, "data.bin");
	struct wsn_reader *r = small_reader(4, 64 << 10, -1);
	unsigned char *data = malloc(N), *buf = aligned_alloc(4096, N), small[64];
	uint64_t seed = tu_case_seed("reader-thread"), id;
	struct other_thread_read o = { r, path, small, 1, "" };
	pthread_t th;

	for (size_t i = 0; i < N; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		data[i] = (unsigned char)(seed >> 56);
	}
	tu_write_file(path, data, N);
	ck_assert_int_eq(pthread_create(&th, NULL, read_from_other_thread, &o), 0);
	ck_assert_int_eq(pthread_join(th, NULL), 0);
	if (strstr(wsn_reader_ring_mode(r), "SINGLE_ISSUER")) {
		ck_assert_int_eq(o.ret, WSN_EINVAL);
		ck_assert_msg(strstr(o.msg, "other than the one that created it"), "%s", o.msg);
	} else {
		ck_assert_int_eq(o.ret, 0);
	}
	memset(small, 0, sizeof(small));
	ck_assert_msg(wsn_reader_read(r, path, 64, 64, small) == 0, "%s", wsn_last_error());
	ck_assert_mem_eq(small, data + 64, 64);

	memset(buf, 0, N);
	ck_assert_int_eq(wsn_reader_register(r, buf, N), 0);
	ck_assert_msg(wsn_reader_submit(r, path, 0, N, buf, &id) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn_reader_unregister(r, buf), WSN_EBUSY);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "still queued"));
	ck_assert_msg(wsn_reader_wait(r, id) == 0, "%s", wsn_last_error());
	ck_assert(memcmp(buf, data, N) == 0);
	ck_assert_int_eq(wsn_reader_unregister(r, buf), 0);
	wsn_reader_destroy(r);
	free(buf);
	free(data);
	free(path);
}
END_TEST

/* A file system that refuses O_DIRECT (procfs): auto falls back and counts it; required fails. */
START_TEST(test_reader_direct_refused)
{
	const char *path = "/proc/self/stat";
	struct wsn_reader *r = small_reader(2, 4096, -1);
	struct wsn_read_stats st;

	ck_assert_msg(wsn_reader_read(r, path, 0, 0, NULL) == 0, "%s", wsn_last_error());
	wsn_reader_stats(r, &st);
	ck_assert_uint_eq(st.buffered_files, 1);
	ck_assert_uint_eq(st.direct_files, 0);
	wsn_reader_destroy(r);
	r = small_reader(2, 4096, 1);
	expect_err(wsn_reader_read(r, path, 0, 0, NULL), WSN_ENOTSUP, path, "direct");
	wsn_reader_destroy(r);
}
END_TEST

START_TEST(test_reader_options)
{
	struct wsn_reader_options o;
	struct wsn_reader *r = (struct wsn_reader *)&o;
	const char *mode;

	wsn_reader_options_init(&o);
	ck_assert_uint_eq(o.queue_depth, WSN_READER_DEFAULT_QD);
	ck_assert_uint_eq(o.block_size, WSN_READER_DEFAULT_BS);
	ck_assert_int_eq(o.direct, -1);
	ck_assert_int_eq(o.sqpoll, 0);
	o.queue_depth = 0;
	expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "queue depth", NULL);
	ck_assert_ptr_null(r);
	o.queue_depth = 4097;
	expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "queue depth", NULL);
	wsn_reader_options_init(&o);
	o.block_size = 1000;
	expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "block size", NULL);
	o.block_size = (size_t)128 << 20;
	expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "block size", NULL);
	wsn_reader_options_init(&o);
	o.direct = 2;
	expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "direct", NULL);
	expect_err(wsn_reader_create(NULL, NULL), WSN_EINVAL, NULL, NULL);

	/* defaults, and the accepted ring flags are one of the probed sets */
	ck_assert_msg(wsn_reader_create(NULL, &r) == 0, "%s", wsn_last_error());
	mode = wsn_reader_ring_mode(r);
	printf("reader: ring mode %s\n", mode);
	ck_assert_msg(!strcmp(mode, "DEFER_TASKRUN|SINGLE_ISSUER") || !strcmp(mode, "COOP_TASKRUN") ||
		      !strcmp(mode, "none"), "ring mode '%s'", mode);
	wsn_reader_destroy(r);
	wsn_reader_destroy(NULL);
	ck_assert_str_eq(wsn_reader_ring_mode(NULL), "");
}
END_TEST

/* SQPOLL when asked: accepted, or refused with the fallback noted in the mode. */
START_TEST(test_reader_sqpoll)
{
	uint64_t seed = tu_case_seed("reader_sqpoll");
	char *path = pjoin(tdir, "sq.bin");
	size_t len = 300000;
	unsigned char *ref = tu_xmalloc(len), *got = tu_xmalloc(len);
	struct wsn_reader_options o;
	struct wsn_reader *r;
	const char *mode;

	fill_bytes(ref, len, seed);
	tu_write_file(path, ref, len);
	wsn_reader_options_init(&o);
	o.queue_depth = 4;
	o.block_size = 16384;
	o.sqpoll = 1;
	ck_assert_msg(wsn_reader_create(&o, &r) == 0, "%s", wsn_last_error());
	mode = wsn_reader_ring_mode(r);
	printf("reader: SQPOLL asked, ring mode %s\n", mode);
	ck_assert_msg(!strncmp(mode, "SQPOLL", 6) || strstr(mode, "(SQPOLL refused:"), "%s", mode);
	ck_assert_msg(wsn_reader_read(r, path, 0, len, got) == 0, "%s", wsn_last_error());
	ck_assert_mem_eq(got, ref, len);
	ck_assert_int_eq(wsn_reader_read(r, path, 777, len - 1000, got), 0);
	ck_assert_mem_eq(got, ref + 777, len - 1000);
	wsn_reader_destroy(r);
	free(ref);
	free(got);
	free(path);
}
END_TEST

/* ---- raw files ---- */

START_TEST(test_raw_roundtrip)
{
	uint64_t seed = tu_case_seed("raw");
	char *path = pjoin(tdir, "x.raw"), *pre = pjoin(tdir, "pre.raw");
	uint16_t x[15], back[15], wide[16];
	unsigned char buf[16 + sizeof(x)];
	struct wsn_tensor t, tb, small, big;
	struct wsn_reader *r = small_reader(2, 4096, -1);

	ck_assert_int_eq(wsn_tensor_2d(&t, x, WSN_F16, WSN_MEM_HOST, 3, 5), 0);
	ck_assert_int_eq(wsn_tensor_fill_random(&t, seed, 0, 1), 0);
	ck_assert_msg(wsn_raw_write(path, &t) == 0, "%s", wsn_last_error());
	wsn_tensor_2d(&tb, back, WSN_F16, WSN_MEM_HOST, 3, 5);
	memset(back, 0, sizeof(back));
	ck_assert_msg(wsn_raw_read(path, r, 0, &tb) == 0, "%s", wsn_last_error());
	ck_assert_mem_eq(back, x, sizeof(x));
	memset(back, 0, sizeof(back));
	ck_assert_msg(wsn_raw_read(path, NULL, 0, &tb) == 0, "%s", wsn_last_error());
	ck_assert_mem_eq(back, x, sizeof(x));

	/* data after an offset */
	memset(buf, 0xee, 16);
	memcpy(buf + 16, x, sizeof(x));
	tu_write_file(pre, buf, sizeof(buf));
	memset(back, 0, sizeof(back));
	ck_assert_int_eq(wsn_raw_read(pre, r, 16, &tb), 0);
	ck_assert_mem_eq(back, x, sizeof(x));

	/* the file holds more than the shape: ESHAPE with both sizes */
	wsn_tensor_2d(&small, back, WSN_F16, WSN_MEM_HOST, 2, 5);
	expect_err(wsn_raw_read(path, r, 0, &small), WSN_ESHAPE, path, "30 bytes");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "20 bytes"));
	expect_err(wsn_raw_read(pre, r, 8, &tb), WSN_ESHAPE, pre, "38 bytes");
	/* the file holds less: ETRUNC */
	wsn_tensor_1d(&big, wide, WSN_F16, WSN_MEM_HOST, 16);
	expect_err(wsn_raw_read(path, r, 0, &big), WSN_ETRUNC, path, "32 bytes");
	expect_err(wsn_raw_read(path, r, 31, &tb), WSN_ETRUNC, path, NULL);
	/* the same shape as a wider dtype needs more bytes than the file has */
	wsn_tensor_2d(&small, back, WSN_F32, WSN_MEM_HOST, 3, 5);
	expect_err(wsn_raw_read(path, r, 0, &small), WSN_ETRUNC, path, NULL);
	expect_err(wsn_raw_read(tdir, r, 0, &tb), WSN_EISDIR, tdir, NULL);
	wsn_reader_destroy(r);
	free(path);
	free(pre);
}
END_TEST

START_TEST(test_raw_write_errors)
{
	char *path = pjoin(tdir, "bad.raw");
	float x[12] = { 0 };
	struct wsn_tensor t;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 3, 4);
	t.stride[0] = 8; /* rows with gaps */
	expect_err(wsn_raw_write(path, &t), WSN_EINVAL, path, "contiguous");
	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_DEVICE, 3, 4);
	expect_err(wsn_raw_write(path, &t), WSN_EINVAL, path, "host");
	expect_err(wsn_raw_write(path, NULL), WSN_EINVAL, path, NULL);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(count_dir_entries(tdir), 0);
	free(path);
}
END_TEST

/* ---- files written out of sight and then named ---- */

/* Can dir hold an unnamed file (O_TMPFILE)? Not every file system can. */
static int unnamed_supported(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	if (fd < 0)
		return 0;
	close(fd);
	return access("/proc/self/fd", X_OK) == 0;
}

/* Write `text` to path through wsn__out_*: while it is being written, dir shows `during` entries. */
static void out_roundtrip(const char *dir, const char *path, const char *text, int during)
{
	struct wsn__out_file o;
	char *got;
	size_t len;

	ck_assert_msg(wsn__out_open(&o, path) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn__out_write(&o, text, strlen(text)), 0);
	ck_assert_int_eq(count_dir_entries(dir), during);
	ck_assert_msg(wsn__out_commit(&o, true) == 0, "%s", wsn_last_error());
	ck_assert_ptr_null(o.tmp);
	ck_assert_int_eq(o.fd, -1);
	got = tu_slurp(path, &len);
	ck_assert_uint_eq(len, strlen(text));
	ck_assert_mem_eq(got, text, len);
	free(got);
	wsn__out_abort(&o); /* after a commit: does nothing */
	ck_assert_int_eq(access(path, F_OK), 0);
}

/*
 * A file being written has no name in its directory where the file system can make an unnamed
 * one (so a kill leaves nothing), else one temporary name next to it; either way the finished file
 * appears whole, replaces an old one keeping its permissions, and an abort leaves nothing.
 */
static void out_file_case(int force_named)
{
	char *path = pjoin(tdir, "o.bin");
	int unnamed = !force_named && unnamed_supported(tdir);
	struct wsn__out_file o;
	struct stat st;

	wsn__out_force_named(force_named);
	ck_assert_int_eq(count_dir_entries(tdir), 0);
	/* a new file; then the same name again, over a file with other permissions */
	out_roundtrip(tdir, path, "first contents", unnamed ? 0 : 1);
	ck_assert_int_eq(chmod(path, 0600), 0);
	out_roundtrip(tdir, path, "the second, longer contents", unnamed ? 1 : 2);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(count_dir_entries(tdir), 1);
	/* abandoned half way: the old file as it was, nothing else */
	ck_assert_int_eq(wsn__out_open(&o, path), 0);
	ck_assert_int_eq(wsn__out_write(&o, "junk", 4), 0);
	ck_assert(unnamed ? o.tmp == NULL : o.tmp != NULL);
	wsn__out_abort(&o);
	ck_assert_int_eq(count_dir_entries(tdir), 1);
	{
		char *got = tu_slurp(path, NULL);
		ck_assert_str_eq(got, "the second, longer contents");
		free(got);
	}
	wsn__out_force_named(false);
	free(path);
}

START_TEST(test_out_file)
{
	char *path = pjoin(tdir, "o.bin");

	if (!unnamed_supported(tdir))
		printf("out_file: %s holds no unnamed files; the named path is tested twice\n", tdir);
	out_file_case(0);
	ck_assert_int_eq(unlink(path), 0);
	out_file_case(1);
	free(path);
}
END_TEST

Suite *suite_io(void)
{
	Suite *s = suite_create("io");
	TCase *st = tcase_create("safetensors");
	TCase *bad = tcase_create("safetensors-bad-input");
	TCase *rd = tcase_create("reader");
	TCase *raw = tcase_create("raw");

	tcase_add_checked_fixture(st, setup_tmp, teardown_tmp);
	tcase_set_timeout(st, 120);
	tcase_add_test(st, test_st_roundtrip);
	tcase_add_test(st, test_st_metadata_roundtrip);
	tcase_add_test(st, test_st_sorted_by_offset);
	tcase_add_test(st, test_st_other_dtypes);
	tcase_add_test(st, test_st_write_errors);
	tcase_add_test(st, test_out_file);
	tcase_add_test(st, test_st_fuzz);
	suite_add_tcase(s, st);

	tcase_add_checked_fixture(bad, setup_tmp, teardown_tmp);
	tcase_add_test(bad, test_st_bad_short_file);
	tcase_add_test(bad, test_st_bad_empty_file);
	tcase_add_test(bad, test_st_bad_directory);
	tcase_add_test(bad, test_st_bad_missing);
	tcase_add_test(bad, test_st_bad_errno_names);
	tcase_add_test(bad, test_st_bad_header_past_eof);
	tcase_add_test(bad, test_st_bad_header_absurd);
	tcase_add_test(bad, test_st_bad_header_zero);
	tcase_add_test(bad, test_st_bad_json);
	tcase_add_test(bad, test_st_bad_json_nul);
	tcase_add_test(bad, test_st_bad_not_object);
	tcase_add_test(bad, test_st_bad_entry_not_object);
	tcase_add_test(bad, test_st_bad_dtype);
	tcase_add_test(bad, test_st_all_dtypes);
	tcase_add_test(bad, test_st_bad_other_dtypes);
	tcase_add_test(bad, test_st_bad_shape);
	tcase_add_test(bad, test_st_bad_shape_overflow);
	tcase_add_test(bad, test_st_bad_shape_mismatch);
	tcase_add_test(bad, test_st_bad_offsets);
	tcase_add_test(bad, test_st_bad_offsets_past_eof);
	tcase_add_test(bad, test_st_bad_overlap);
	tcase_add_test(bad, test_st_bad_metadata);
	tcase_add_test(bad, test_st_bad_long_name);
	tcase_add_test(bad, test_st_missing_tensor_and_small_buffer);
	tcase_add_test(bad, test_st_truncated_after_open);
	suite_add_tcase(s, bad);

	tcase_add_checked_fixture(rd, setup_tmp, teardown_tmp);
	tcase_set_timeout(rd, 300);
	tcase_add_test(rd, test_reader_big_file);
	tcase_add_test(rd, test_reader_queue_depths);
	tcase_add_test(rd, test_reader_short_reads);
	tcase_add_test(rd, test_reader_errors);
	tcase_add_test(rd, test_reader_thread_and_unregister);
	tcase_add_test(rd, test_reader_direct_refused);
	tcase_add_test(rd, test_reader_options);
	tcase_add_test(rd, test_reader_sqpoll);
	suite_add_tcase(s, rd);

	tcase_add_checked_fixture(raw, setup_tmp, teardown_tmp);
	tcase_add_test(raw, test_raw_roundtrip);
	tcase_add_test(raw, test_raw_write_errors);
	suite_add_tcase(s, raw);
	return s;
}
