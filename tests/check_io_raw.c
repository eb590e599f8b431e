/* SPDX-License-Identifier: MIT */
/* tests/check_io_raw.c: raw files and the output file writer. */
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

START_TEST(test_raw_roundtrip)
{
	uint64_t seed = tu_case_seed("raw");
	char *path = io_pjoin(io_tdir, "x.raw"), *pre = io_pjoin(io_tdir, "pre.raw");
	uint16_t x[15], back[15], wide[16];
	unsigned char buf[16 + sizeof(x)];
	struct wsn_tensor t, tb, small, big;
	struct wsn_reader *r = io_small_reader(2, 4096, -1);

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
	io_expect_err(wsn_raw_read(path, r, 0, &small), WSN_ESHAPE, path, "30 bytes");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "20 bytes"));
	io_expect_err(wsn_raw_read(pre, r, 8, &tb), WSN_ESHAPE, pre, "38 bytes");
	/* the file holds less: ETRUNC */
	wsn_tensor_1d(&big, wide, WSN_F16, WSN_MEM_HOST, 16);
	io_expect_err(wsn_raw_read(path, r, 0, &big), WSN_ETRUNC, path, "32 bytes");
	io_expect_err(wsn_raw_read(path, r, 31, &tb), WSN_ETRUNC, path, NULL);
	/* the same shape as a wider dtype needs more bytes than the file has */
	wsn_tensor_2d(&small, back, WSN_F32, WSN_MEM_HOST, 3, 5);
	io_expect_err(wsn_raw_read(path, r, 0, &small), WSN_ETRUNC, path, NULL);
	io_expect_err(wsn_raw_read(io_tdir, r, 0, &tb), WSN_EISDIR, io_tdir, NULL);
	wsn_reader_destroy(r);
	free(path);
	free(pre);
}
END_TEST

START_TEST(test_raw_write_errors)
{
	char *path = io_pjoin(io_tdir, "bad.raw");
	float x[12] = { 0 };
	struct wsn_tensor t;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 3, 4);
	t.stride[0] = 8; /* rows with gaps */
	io_expect_err(wsn_raw_write(path, &t), WSN_EINVAL, path, "contiguous");
	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_DEVICE, 3, 4);
	io_expect_err(wsn_raw_write(path, &t), WSN_EINVAL, path, "host");
	io_expect_err(wsn_raw_write(path, NULL), WSN_EINVAL, path, NULL);
	ck_assert_int_eq(access(path, F_OK), -1);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 0);
	free(path);
}
END_TEST

/* Can dir hold an unnamed file (O_TMPFILE)? Not every file system can. */
static int unnamed_supported(const char *dir)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	if (fd < 0)
		return 0;
	close(fd);
	return access("/proc/self/fd", X_OK) == 0;
}

/* Write `text` to path through wsn_out_*: while it is being written, dir shows `during` entries. */
static void out_roundtrip(const char *dir, const char *path, const char *text, int during)
{
	struct wsn_out_file o;
	char *got;
	size_t len;

	ck_assert_msg(wsn_out_open(&o, path) == 0, "%s", wsn_last_error());
	ck_assert_int_eq(wsn__out_write(&o, text, strlen(text)), 0);
	ck_assert_int_eq(io_count_dir_entries(dir), during);
	ck_assert_msg(wsn_out_commit(&o, true) == 0, "%s", wsn_last_error());
	ck_assert_ptr_null(o.tmp);
	ck_assert_int_eq(o.fd, -1);
	got = tu_slurp(path, &len);
	ck_assert_uint_eq(len, strlen(text));
	ck_assert_mem_eq(got, text, len);
	free(got);
	wsn_out_abort(&o); /* after a commit: does nothing */
	ck_assert_int_eq(access(path, F_OK), 0);
}

/*
 * A file being written has no name in its directory where the file system can make an unnamed
 * one (so a kill leaves nothing), else one temporary name next to it; either way the finished file
 * appears whole, replaces an old one keeping its permissions, and an abort leaves nothing.
 */
static void out_file_case(int force_named)
{
	char *path = io_pjoin(io_tdir, "o.bin");
	int unnamed = !force_named && unnamed_supported(io_tdir);
	struct wsn_out_file o;
	struct stat st;

	wsn__out_force_named(force_named);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 0);
	/* a new file; then the same name again, over a file with other permissions */
	out_roundtrip(io_tdir, path, "first contents", unnamed ? 0 : 1);
	ck_assert_int_eq(chmod(path, 0600), 0);
	out_roundtrip(io_tdir, path, "the second, longer contents", unnamed ? 1 : 2);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 1);
	/* abandoned half way: the old file as it was, nothing else */
	ck_assert_int_eq(wsn_out_open(&o, path), 0);
	ck_assert_int_eq(wsn__out_write(&o, "junk", 4), 0);
	ck_assert(unnamed ? o.tmp == NULL : o.tmp != NULL);
	wsn_out_abort(&o);
	ck_assert_int_eq(io_count_dir_entries(io_tdir), 1);
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
	char *path = io_pjoin(io_tdir, "o.bin");

	if (!unnamed_supported(io_tdir))
		printf("out_file: %s holds no unnamed files; the named path is tested twice\n", io_tdir);
	out_file_case(0);
	ck_assert_int_eq(unlink(path), 0);
	out_file_case(1);
	free(path);
}
END_TEST

/*
 * wsn_out_sibling: path plus the suffix while that fits a directory entry; past NAME_MAX,
 * ".wsnorm" plus the suffix in the same directory (with or without a directory part).
 */
START_TEST(test_out_sibling)
{
	char longname[NAME_MAX + 1], *full, *name;
	const char *suffix = ".123-old0";
	size_t fit = NAME_MAX - strlen(suffix);

	name = wsn_out_sibling("d/out.bin", ".XXXXXX");
	ck_assert_str_eq(name, "d/out.bin.XXXXXX");
	free(name);
	memset(longname, 'n', fit);
	longname[fit] = 0; /* the longest name that still takes the suffix */
	ck_assert(asprintf(&full, "dir/%s", longname) > 0);
	name = wsn_out_sibling(full, suffix);
	ck_assert_uint_eq(strlen(strrchr(name, '/') + 1), NAME_MAX);
	ck_assert(strncmp(name, full, strlen(full)) == 0 && strcmp(name + strlen(full), suffix) == 0);
	free(name);
	free(full);
	longname[fit] = 'n', longname[fit + 1] = 0; /* one more: too long with the suffix */
	ck_assert(asprintf(&full, "dir/sub/%s", longname) > 0);
	name = wsn_out_sibling(full, suffix);
	ck_assert_str_eq(name, "dir/sub/.wsnorm.123-old0");
	free(name);
	free(full);
	name = wsn_out_sibling(longname, suffix);
	ck_assert_str_eq(name, ".wsnorm.123-old0");
	free(name);
}
END_TEST

Suite *suite_io_raw(void)
{
	return TU_SUITE("io", { "safetensors", 120, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_out_file, 1 }) },
			{ "raw", 0, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_raw_roundtrip, 1 }, { test_raw_write_errors, 1 },
										   { test_out_sibling, 1 }) });
}
