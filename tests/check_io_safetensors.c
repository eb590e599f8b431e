/* SPDX-License-Identifier: MIT */
/* tests/check_io_safetensors.c: safetensors files written and read back: tensors, metadata, dtypes, write errors and fuzzed headers. */
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

START_TEST(test_st_roundtrip)
{
	static const int64_t shapes[][4] = {
		{ 1 }, { 7 }, { 3, 5 }, { 2, 3, 4 }, { 2, 1, 3, 5 }, { 33, 129 }, { 0, 4 },
	};
	static const int ndims[] = { 1, 1, 2, 3, 4, 2, 2 };
	const int ns = (int)(sizeof(ndims) / sizeof(ndims[0]));
	uint64_t seed = tu_case_seed("st_roundtrip");
	char *path = io_pjoin(io_tdir, "rt.safetensors");

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
	char *path = io_pjoin(io_tdir, "meta.safetensors");
	float w[4] = { 1, 2, 3, 4 };
	struct wsn_tensor t;
	struct wsn_named_tensor nt = { "weight", &t };
	struct wsn_st_file *f;
	struct wsn_reader *r = io_small_reader(2, 64 << 10, -1);
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

	io_expect_err(wsn_st_write(path, &nt, 1, odd), WSN_EINVAL, path, "lonely");
	free(path);
}
END_TEST

/* Entries come back sorted by offset whatever the header's order; holes are allowed. */
START_TEST(test_st_sorted_by_offset)
{
	char *path = io_pjoin(io_tdir, "order.safetensors");
	struct wsn_st_file *f;
	float back[3];

	io_write_raw_st(path, "{\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]},"
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
	char *path = io_pjoin(io_tdir, "extra.safetensors");
	const struct wsn_st_entry *e;
	struct wsn_st_file *f;
	unsigned char buf[64];

	io_write_raw_st(path, "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
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
	io_expect_err(wsn_st_read(f, "step", buf, sizeof(buf)), WSN_EDTYPE, path,
		   "tensor 'step' is I64; wsnorm computes with F32, F16 and BF16");
	io_expect_err(wsn_st_read(f, "mask", buf, sizeof(buf)), WSN_EDTYPE, path, "'mask' is BOOL");
	wsn_st_close(f);
	free(path);
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
	char *path = io_pjoin(io_tdir, "types.safetensors"), json[256];

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		const struct wsn_st_entry *e;
		struct wsn_st_file *f;

		snprintf(json, sizeof(json), "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%u]}}",
			 types[i].name, types[i].bits);
		io_write_raw_st(path, json, types[i].bits);
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s: %s", types[i].name, wsn_last_error());
		ck_assert_ptr_nonnull(e = wsn_st_find(f, "t"));
		ck_assert_str_eq(e->st_dtype, types[i].name);
		ck_assert_int_eq(e->dtype, types[i].dt);
		ck_assert_uint_eq(e->nbytes, types[i].bits);
		wsn_st_close(f);
		snprintf(json, sizeof(json), "{\"t\":{\"dtype\":\"%s\",\"shape\":[2,4],\"data_offsets\":[0,%u]}}",
			 types[i].name, types[i].bits + 1);
		io_bad_header(json, types[i].bits + 1, WSN_ESHAPE, types[i].name, "t");
	}
	free(path);
}
END_TEST

START_TEST(test_st_write_errors)
{
	char *path = io_pjoin(io_tdir, "w.safetensors"), *nodir = io_pjoin(io_tdir, "no/such/dir/w.safetensors");
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
	io_expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "contiguous");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "'xt'"));
	list[1] = (struct wsn_named_tensor){ "dev", &dev };
	io_expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'dev'");
	list[1] = (struct wsn_named_tensor){ "x", &t };
	io_expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'x'");
	list[1] = (struct wsn_named_tensor){ "__metadata__", &t };
	io_expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, NULL);
	list[1] = (struct wsn_named_tensor){ "nodata", &t };
	list[1].t = NULL;
	io_expect_err(wsn_st_write(path, list, 2, NULL), WSN_EINVAL, path, "'nodata'");
	/* the destination is untouched and no temporary file is left */
	after = (unsigned char *)tu_slurp(path, &la);
	ck_assert_uint_eq(la, lb);
	ck_assert_mem_eq(after, before, lb);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 1);
	free(after);

	io_expect_err(wsn_st_write(nodir, &good, 1, NULL), WSN_ENOENT, nodir, NULL);
	io_expect_err(wsn_st_write(io_tdir, &good, 1, NULL), WSN_EISDIR, io_tdir, NULL);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 1);
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

START_TEST(test_st_fuzz)
{
	uint64_t seed = tu_case_seed("st_fuzz"), s = seed;
	const char *meta[] = { "k", "v", NULL };
	char *path = io_pjoin(io_tdir, "good.safetensors"), *bad = io_pjoin(io_tdir, "fuzz.safetensors");
	unsigned char *good, *buf;
	float a[5], b[3];
	uint16_t c[7];
	struct wsn_tensor ta, tb, tc;
	struct wsn_named_tensor nt[3] = { { "a", &ta }, { "bb", &tb }, { "ccc", &tc } };
	struct wsn_reader *r = io_small_reader(2, 64 << 10, -1);
	unsigned char dst[64];
	size_t len, hend;
	int ok = 0, failed = 0;

	wsn_tensor_1d(&ta, a, WSN_F32, WSN_MEM_HOST, 5);
	wsn_tensor_1d(&tb, b, WSN_F32, WSN_MEM_HOST, 3);
	wsn_tensor_1d(&tc, c, WSN_BF16, WSN_MEM_HOST, 7);
	io_fill_bytes((unsigned char *)a, sizeof(a), seed);
	io_fill_bytes((unsigned char *)b, sizeof(b), seed + 1);
	io_fill_bytes((unsigned char *)c, sizeof(c), seed + 2);
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
		int nflip = 1 + (int)(io_rng_next(&s) % 4), rc;
		static const char special[] = "{}[]\",:-09eE. \\";

		memcpy(buf, good, len);
		for (int k = 0; k < nflip; k++) {
			size_t at = (size_t)(io_rng_next(&s) % hend);
			uint64_t how = io_rng_next(&s);

			if (how % 3 == 0)
				buf[at] = (unsigned char)(how >> 8);
			else if (how % 3 == 1)
				buf[at] = (unsigned char)special[(how >> 8) % (sizeof(special) - 1)];
			else
				buf[at] ^= (unsigned char)(1u << ((how >> 8) % 8));
		}
		tu_write_file(bad, buf, (io_rng_next(&s) % 8) ? len : (size_t)(io_rng_next(&s) % (len + 1)));
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

Suite *suite_io_safetensors(void)
{
	return TU_SUITE("io", { "safetensors", 120, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_st_roundtrip, 1 },
				{ test_st_metadata_roundtrip, 1 }, { test_st_sorted_by_offset, 1 }, { test_st_other_dtypes, 1 },
				{ test_st_write_errors, 1 }, { test_st_fuzz, 1 }) },
			{ "safetensors-bad-input", 0, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_st_all_dtypes, 1 }) });
}
