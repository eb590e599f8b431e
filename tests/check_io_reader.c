/* SPDX-License-Identifier: MIT */
/* tests/check_io_reader.c: the io_uring reader: big files, queue depths, short reads, errors, threads and options. */
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

/* A temporary directory on the disk file system of the build tree (the current directory). */
static char *disk_tmpdir(void)
{
	char tmpl[] = "io-test-XXXXXX", *abs;

	ck_assert_msg(mkdtemp(tmpl) != NULL, "mkdtemp in the current directory");
	abs = realpath(tmpl, NULL);
	ck_assert(abs != NULL);
	return abs;
}

#define BIG_LEN ((size_t)(3u << 20) + 123)

/* A file of random bytes in a fresh directory on disk, and the bytes it holds. */
struct disk_file {
	uint64_t seed;
	char *dir, *path;
	unsigned char *ref;
};

/* Write len bytes drawn from the case's seed (tu_case_seed(tag), which prints it) to dir/name. */
static void disk_file_create(struct disk_file *df, const char *tag, const char *name, size_t len)
{
	df->seed = tu_case_seed(tag);
	df->dir = disk_tmpdir();
	df->path = io_pjoin(df->dir, name);
	df->ref = tu_xmalloc(len);
	io_fill_bytes(df->ref, len, df->seed);
	tu_write_file(df->path, df->ref, len);
}

static void disk_file_remove(struct disk_file *df)
{
	free(df->ref);
	tu_rmtree(df->dir);
	free(df->path);
	free(df->dir);
}

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
		uint64_t off = io_rng_next(&seed) % len, n = io_rng_next(&seed) % (len - off + 1);

		ck_assert_msg(wsn_reader_read(r, path, off, n, got) == 0, "%s", wsn_last_error());
		ck_assert_msg(!memcmp(got, ref + off, n), "random range [%llu, +%llu) differs",
			      (unsigned long long)off, (unsigned long long)n);
	}
	free(got);
}

/* Buffered and direct reads of a file much larger than qd * bs, on the build tree's disk. */
START_TEST(test_reader_big_file)
{
	struct disk_file df;
	static const int modes[] = { 0, -1, 1 };

	disk_file_create(&df, "reader_big", "big.bin", BIG_LEN);
	for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
		struct wsn_reader *r = io_small_reader(4, 64 << 10, modes[m]);
		struct wsn_read_stats st;
		unsigned char probe[16];
		int rc;

		rc = wsn_reader_read(r, df.path, 0, sizeof(probe), probe);
		if (modes[m] == 1 && rc == WSN_ENOTSUP) {
			/* the disk file system refused O_DIRECT: the error must say so, naming the file */
			io_expect_err(rc, WSN_ENOTSUP, df.path, "direct");
			printf("reader_big: O_DIRECT refused on %s: %s\n", df.dir, wsn_last_error());
			wsn_reader_destroy(r);
			continue;
		}
		ck_assert_msg(rc == 0, "%s", wsn_last_error());
		check_reads(r, df.path, df.ref, BIG_LEN, df.seed + m);
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
	disk_file_remove(&df);
}
END_TEST

/* Queue depths 1, 2 and 32 (with 4 KiB blocks, so every depth is exercised), direct and not. */
START_TEST(test_reader_queue_depths)
{
	size_t len = (size_t)(1u << 20) + 4097;
	unsigned char *got = tu_xmalloc(len);
	static const unsigned qds[] = { 1, 2, 32 };
	struct disk_file df;

	disk_file_create(&df, "reader_qd", "qd.bin", len);
	for (size_t i = 0; i < 3; i++)
		for (int direct = -1; direct <= 0; direct++) {
			struct wsn_reader *r = io_small_reader(qds[i], 4096, direct);
			uint64_t s = df.seed + i;

			memset(got, 0, len);
			ck_assert_msg(wsn_reader_read(r, df.path, 0, len, got) == 0, "%s", wsn_last_error());
			ck_assert_mem_eq(got, df.ref, len);
			for (int k = 0; k < 10; k++) {
				uint64_t off = io_rng_next(&s) % len, n = io_rng_next(&s) % (len - off + 1);

				ck_assert_int_eq(wsn_reader_read(r, df.path, off, n, got), 0);
				ck_assert_msg(!memcmp(got, df.ref + off, n), "qd %u direct %d [%llu, +%llu)",
					      qds[i], direct, (unsigned long long)off,
					      (unsigned long long)n);
			}
			wsn_reader_destroy(r);
		}
	free(got);
	disk_file_remove(&df);
}
END_TEST

/* Short reads are resubmitted for the rest (simulated: each buffer's first completion is cut). */
START_TEST(test_reader_short_reads)
{
	struct disk_file df;

	disk_file_create(&df, "reader_short", "short.bin", BIG_LEN);
	for (int direct = -1; direct <= 0; direct++) {
		struct wsn_reader *r = io_small_reader(4, 64 << 10, direct);
		struct wsn_read_stats st;

		wsn__reader_inject_short_reads(r, true);
		check_reads(r, df.path, df.ref, BIG_LEN, df.seed + 7);
		wsn_reader_stats(r, &st);
		printf("reader_short: direct=%d: %llu reads, %llu short, %llu direct files\n", direct,
		       (unsigned long long)st.reads, (unsigned long long)st.short_reads,
		       (unsigned long long)st.direct_files);
		ck_assert_uint_gt(st.short_reads, BIG_LEN / (64 << 10));
		ck_assert_uint_gt(st.reads, st.short_reads);
		wsn_reader_destroy(r);
	}
	disk_file_remove(&df);
}
END_TEST

START_TEST(test_reader_errors)
{
	char *path = io_pjoin(io_tdir, "small.bin"), *empty = io_pjoin(io_tdir, "empty.bin");
	char *missing = io_pjoin(io_tdir, "missing.bin");
	struct wsn_reader *r = io_small_reader(2, 4096, -1);
	unsigned char buf[64], data[100];

	memset(data, 7, sizeof(data));
	tu_write_file(path, data, sizeof(data));
	tu_write_file(empty, "", 0);
	io_expect_err(wsn_reader_read(r, path, 50, 51, buf), WSN_ETRUNC, path, "100 bytes");
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "offset 50"));
	io_expect_err(wsn_reader_read(r, path, 101, 0, buf), WSN_ETRUNC, path, NULL);
	io_expect_err(wsn_reader_read(r, path, UINT64_MAX, 2, buf), WSN_ETRUNC, path, NULL);
	ck_assert_int_eq(wsn_reader_read(r, path, 100, 0, buf), 0);
	ck_assert_int_eq(wsn_reader_read(r, path, 36, 64, buf), 0);
	ck_assert_mem_eq(buf, data, 64);
	io_expect_err(wsn_reader_read(r, empty, 0, 1, buf), WSN_ETRUNC, empty, "empty");
	ck_assert_int_eq(wsn_reader_read(r, empty, 0, 0, buf), 0);
	io_expect_err(wsn_reader_read(r, io_tdir, 0, 1, buf), WSN_EISDIR, io_tdir, NULL);
	io_expect_err(wsn_reader_read(r, missing, 0, 1, buf), WSN_ENOENT, missing, NULL);
	io_expect_err(wsn_reader_read(r, path, 0, 1, NULL), WSN_EINVAL, path, NULL);
	io_expect_err(wsn_reader_read(NULL, path, 0, 1, buf), WSN_EINVAL, NULL, NULL);
	/* a FIFO is refused without waiting for a writer */
	{
		char *fifo = io_pjoin(io_tdir, "fifo");

		ck_assert_int_eq(mkfifo(fifo, 0600), 0);
		io_expect_err(wsn_reader_read(r, fifo, 0, 1, buf), WSN_EINVAL, fifo, "regular");
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
	char *path = io_pjoin(io_tdir, "data.bin");
	struct wsn_reader *r = io_small_reader(4, 64 << 10, -1);
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
	struct wsn_reader *r = io_small_reader(2, 4096, -1);
	struct wsn_read_stats st;

	ck_assert_msg(wsn_reader_read(r, path, 0, 0, NULL) == 0, "%s", wsn_last_error());
	wsn_reader_stats(r, &st);
	ck_assert_uint_eq(st.buffered_files, 1);
	ck_assert_uint_eq(st.direct_files, 0);
	wsn_reader_destroy(r);
	r = io_small_reader(2, 4096, 1);
	io_expect_err(wsn_reader_read(r, path, 0, 0, NULL), WSN_ENOTSUP, path, "direct");
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
	io_expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "queue depth", NULL);
	ck_assert_ptr_null(r);
	o.queue_depth = 4097;
	io_expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "queue depth", NULL);
	wsn_reader_options_init(&o);
	o.block_size = 1000;
	io_expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "block size", NULL);
	o.block_size = (size_t)128 << 20;
	io_expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "block size", NULL);
	wsn_reader_options_init(&o);
	o.direct = 2;
	io_expect_err(wsn_reader_create(&o, &r), WSN_EINVAL, "direct", NULL);
	io_expect_err(wsn_reader_create(NULL, NULL), WSN_EINVAL, NULL, NULL);

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
	char *path = io_pjoin(io_tdir, "sq.bin");
	size_t len = 300000;
	unsigned char *ref = tu_xmalloc(len), *got = tu_xmalloc(len);
	struct wsn_reader_options o;
	struct wsn_reader *r;
	const char *mode;

	io_fill_bytes(ref, len, seed);
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

Suite *suite_io_reader(void)
{
	return TU_SUITE("io", { "reader", 300, io_setup_tmp, io_teardown_tmp, TU_TESTS({ test_reader_big_file, 1 },
				{ test_reader_queue_depths, 1 },
				{ test_reader_short_reads, 1 },
				{ test_reader_errors, 1 },
				{ test_reader_thread_and_unregister, 1 },
				{ test_reader_direct_refused, 1 },
				{ test_reader_options, 1 },
				{ test_reader_sqpoll, 1 }) });
}
