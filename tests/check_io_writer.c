/* SPDX-License-Identifier: MIT */
/* tests/check_io_writer.c: wsn_st_header(), the safetensors header for data written elsewhere. */
#include "testutil.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static uint64_t rng_next(uint64_t *state)
{
	uint64_t x = (*state += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Assert the return code and that the detail mentions needle (when not NULL). */
static void expect_err(int got, int want, const char *needle)
{
	const char *detail = wsn_last_error();

	ck_assert_msg(got == want, "got %s (%d), want %s: %s", wsn_err_name(got), got, wsn_err_name(want),
		      detail);
	if (needle)
		ck_assert_msg(strstr(detail, needle) != NULL, "'%s' not in the error: %s", needle, detail);
}

/*
 * Random tensors: the header, followed by random data at the offsets it gives, opens with
 * wsn_st_open with every name, dtype, shape and offset as described, and is byte for byte the
 * header wsn_st_write writes for the same tensors.
 */
START_TEST(test_header_random)
{
	static const enum wsn_dtype dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };
	uint64_t seed = tu_case_seed("io_writer_header"), state = seed;
	const char *meta[] = { "wsnorm.op", "rmsnorm-fwd", "k", "v", NULL };
	char *path, *via_write;

	ck_assert(asprintf(&path, "%s/h.safetensors", tdir) >= 0);
	ck_assert(asprintf(&via_write, "%s/w.safetensors", tdir) >= 0);
	for (int round = 0; round < 20; round++) {
		struct wsn_st_tensor_info info[6];
		struct wsn_tensor tensors[6];
		struct wsn_named_tensor named[6];
		char names[6][32];
		uint64_t off[6], total;
		unsigned char *hdr, *file, *written;
		size_t hlen, written_len;
		int n = 1 + (int)(rng_next(&state) % 6);
		struct wsn_st_file *f;

		for (int i = 0; i < n; i++) {
			struct wsn_st_tensor_info *t = &info[i];

			snprintf(names[i], sizeof(names[i]), "t%d.%u", i, (unsigned)(rng_next(&state) % 1000));
			t->name = names[i];
			t->dtype = dtypes[rng_next(&state) % 3];
			t->ndim = 1 + (int)(rng_next(&state) % 4);
			for (int d = 0; d < t->ndim; d++)
				t->shape[d] = (int64_t)(rng_next(&state) % 5);
		}
		ck_assert_msg(wsn_st_header(info, n, meta, &hdr, &hlen, off) == 0, "seed 0x%016llx: %s",
			      (unsigned long long)seed, wsn_last_error());
		ck_assert_uint_eq(hlen % 8, 0);
		ck_assert_uint_eq(hlen, 8 + (hdr[0] | (size_t)hdr[1] << 8 | (size_t)hdr[2] << 16));
		total = hlen;
		for (int i = 0; i < n; i++) {
			uint64_t bytes = wsn_dtype_size(info[i].dtype);

			for (int d = 0; d < info[i].ndim; d++)
				bytes *= (uint64_t)info[i].shape[d];
			ck_assert_uint_eq(off[i], total);
			total += bytes;
		}
		file = tu_xmalloc(total + 1);
		memcpy(file, hdr, hlen);
		for (uint64_t b = hlen; b < total; b++)
			file[b] = (unsigned char)rng_next(&state);
		tu_write_file(path, file, total);
		ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "seed 0x%016llx: %s", (unsigned long long)seed,
			      wsn_last_error());
		ck_assert_int_eq(wsn_st_count(f), n);
		ck_assert_str_eq(wsn_st_metadata(f, "wsnorm.op"), "rmsnorm-fwd");
		ck_assert_str_eq(wsn_st_metadata(f, "k"), "v");
		for (int i = 0; i < n; i++) {
			const struct wsn_st_entry *e = wsn_st_find(f, info[i].name);

			ck_assert_ptr_nonnull(e);
			ck_assert_int_eq(e->dtype, info[i].dtype);
			ck_assert_int_eq(e->ndim, info[i].ndim);
			for (int d = 0; d < e->ndim; d++)
				ck_assert_int_eq(e->shape[d], info[i].shape[d]);
			ck_assert_uint_eq(e->offset, off[i]);
			ck_assert_uint_eq(e->offset + e->nbytes, i + 1 < n ? off[i + 1] : total);
			/* the same layout through wsn_st_write, with this file's data */
			memset(&tensors[i], 0, sizeof(tensors[i]));
			tensors[i].dtype = info[i].dtype;
			tensors[i].mem = WSN_MEM_HOST;
			tensors[i].ndim = info[i].ndim;
			tensors[i].data = file + off[i];
			for (int d = info[i].ndim - 1; d >= 0; d--) {
				tensors[i].shape[d] = info[i].shape[d];
				tensors[i].stride[d] = d == info[i].ndim - 1 ? 1 :
						       tensors[i].stride[d + 1] * (info[i].shape[d + 1] ? info[i].shape[d + 1] : 1);
			}
			named[i] = (struct wsn_named_tensor){ info[i].name, &tensors[i] };
		}
		wsn_st_close(f);
		ck_assert_msg(wsn_st_write(via_write, named, n, meta) == 0, "%s", wsn_last_error());
		written = (unsigned char *)tu_slurp(via_write, &written_len);
		ck_assert_uint_eq(written_len, total);
		ck_assert_mem_eq(written, file, total);
		free(written);
		free(file);
		free(hdr);
	}
	free(path);
	free(via_write);
}
END_TEST

/* Data that would take offsets past INT64_MAX is refused, one tensor's or all of them together. */
START_TEST(test_header_overflow)
{
	struct wsn_st_tensor_info big[2] = {
		{ "big", WSN_F32, 2, { (int64_t)1 << 40, (int64_t)1 << 40 } },
	};
	struct wsn_st_tensor_info halves[2] = {
		{ "first", WSN_F16, 1, { (int64_t)1 << 61 } },
		{ "second", WSN_F16, 1, { (int64_t)1 << 61 } },
	};
	unsigned char *hdr = (unsigned char *)"poison";
	size_t hlen = 1;
	uint64_t off[2];

	expect_err(wsn_st_header(big, 1, NULL, &hdr, &hlen, off), WSN_EOVERFLOW, "'big'");
	ck_assert_ptr_null(hdr);
	ck_assert_uint_eq(hlen, 0);
	expect_err(wsn_st_header(halves, 2, NULL, &hdr, &hlen, off), WSN_EOVERFLOW, "offset range");
	ck_assert_ptr_null(hdr);
	/* one of them alone fits */
	ck_assert_int_eq(wsn_st_header(halves, 1, NULL, &hdr, &hlen, off), 0);
	ck_assert_uint_eq(off[0], hlen);
	free(hdr);
}
END_TEST

/* Each bad name, dtype or shape is refused with its code, naming the tensor. */
START_TEST(test_header_errors)
{
	char long_name[WSN_ST_MAX_NAME + 1];
	struct wsn_st_tensor_info list[2] = { { "a", WSN_F32, 1, { 4 } }, { "b", WSN_F32, 1, { 4 } } };
	const char *odd_meta[] = { "lonely", NULL };
	unsigned char *hdr;
	size_t hlen;

	list[1].name = "a";
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_EINVAL, "'a'");
	list[1].name = "__metadata__";
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_EINVAL, "'__metadata__'");
	list[1].name = "";
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_EINVAL, "tensor 1");
	memset(long_name, 'n', WSN_ST_MAX_NAME);
	long_name[WSN_ST_MAX_NAME] = 0;
	list[1].name = long_name;
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_ERANGE, "nnnn");
	list[1].name = "b";
	list[1].dtype = WSN_DTYPE_COUNT;
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_EDTYPE, "'b'");
	list[1].dtype = WSN_BF16;
	list[1].shape[0] = -3;
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_ESHAPE, "'b'");
	list[1].shape[0] = 4;
	list[1].ndim = WSN_MAX_DIMS + 1;
	expect_err(wsn_st_header(list, 2, NULL, &hdr, &hlen, NULL), WSN_EINVAL, "'b'");
	list[1].ndim = 1;
	expect_err(wsn_st_header(list, 2, odd_meta, &hdr, &hlen, NULL), WSN_EINVAL, "lonely");
	expect_err(wsn_st_header(list, -1, NULL, &hdr, &hlen, NULL), WSN_EINVAL, NULL);
	expect_err(wsn_st_header(list, 2, NULL, NULL, &hlen, NULL), WSN_EINVAL, NULL);
	/* zero tensors: a header of "{}" padded to 8 bytes */
	ck_assert_int_eq(wsn_st_header(NULL, 0, NULL, &hdr, &hlen, NULL), 0);
	ck_assert_uint_eq(hlen, 16);
	ck_assert_mem_eq(hdr + 8, "{}      ", 8);
	free(hdr);
}
END_TEST

Suite *suite_io_writer(void)
{
	return TU_SUITE("io_writer", { "header", 0, setup_tmp, teardown_tmp, TU_TESTS({ test_header_random, 1 },
				{ test_header_overflow, 1 }, { test_header_errors, 1 }) });
}
