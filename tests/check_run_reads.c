/* SPDX-License-Identifier: MIT */
/* tests/check_run_reads.c: reads straight into registered buffers, on tmpfs and on disk. */
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

static void fill_file(const char *path, size_t len, uint64_t seed, unsigned char **out)
{
	unsigned char *b = tu_xmalloc(len);

	for (size_t i = 0; i < len; i++) {
		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		b[i] = (unsigned char)(seed >> 56);
	}
	tu_write_file(path, b, len);
	*out = b;
}

/* The first index in [from, to) whose byte is not the 0xa5 fill, or to. (No check call per byte.) */
static size_t untouched(const unsigned char *b, size_t from, size_t to)
{
	for (size_t k = from; k < to; k++)
		if (b[k] != 0xa5)
			return k;
	return to;
}

/*
 * Read ranges of a file into a registered, page-aligned buffer at destinations aligned like
 * their offsets (straight) and not (bounce); the bytes around each range must stay untouched.
 */
static void straight_reads(const char *dir, int direct, unsigned qd, int shorts)
{
	static const uint64_t ranges[][2] = {
		{ 0, 1 << 20 }, { 4096, 65536 }, { 100, 200000 }, { 12345, 3 }, { 8191, 4098 }, { 0, 1 },
		{ (1 << 20) - 5000, 5000 }, { 511, 700001 },
	};
	const size_t flen = 1 << 20, blen = (2 << 20) + 8192;
	char *path = run_path_in(dir, "straight.bin");
	unsigned char *ref, *buf;
	struct wsn_reader_options o;
	struct wsn_reader_buffer_stats bs;
	struct wsn_reader *r;

	fill_file(path, flen, tu_case_seed("straight") + qd, &ref);
	wsn_reader_options_init(&o);
	o.queue_depth = qd;
	o.block_size = 64 << 10;
	o.direct = direct;
	ck_assert_msg(wsn_reader_create(&o, &r) == 0, "%s", wsn_last_error());
	if (shorts)
		wsn__reader_inject_short_reads(r, true);
	buf = mmap(NULL, blen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert(buf != MAP_FAILED);
	ck_assert_int_eq(wsn_reader_register(r, buf, blen), 0);
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		for (int aligned = 0; aligned < 2; aligned++) {
			uint64_t off = ranges[i][0], n = ranges[i][1];
			size_t at = 4096 + (aligned ? off % 4096 : (off + 8) % 4096);
			int rc;

			memset(buf, 0xa5, blen);
			rc = wsn_reader_read(r, path, off, n, buf + at);
			ck_assert_msg(rc == 0, "direct=%d qd=%u [%llu, +%llu) at %zu: %s", direct, qd,
				      (unsigned long long)off, (unsigned long long)n, at, wsn_last_error());
			ck_assert_msg(!memcmp(buf + at, ref + off, n), "direct=%d qd=%u [%llu, +%llu): wrong bytes", direct,
				      qd, (unsigned long long)off, (unsigned long long)n);
			ck_assert_msg(untouched(buf, 0, at) == at, "byte %zu before the range was written",
				      untouched(buf, 0, at));
			ck_assert_msg(untouched(buf, at + n, blen) == blen, "byte %zu after the range was written",
				      untouched(buf, at + n, blen));
		}
	}
	wsn_reader_buffer_stats(r, &bs);
	printf("straight reads on %s: direct=%d qd=%u shorts=%d: %llu bytes straight, %llu bounced, %u of %u fixed\n",
	       dir, direct, qd, shorts, (unsigned long long)bs.straight_bytes, (unsigned long long)bs.bounce_bytes,
	       bs.fixed, bs.registered);
	ck_assert_uint_eq(bs.registered, 1);
	ck_assert_msg(bs.straight_bytes > (1u << 20), "only %llu bytes went straight in",
		      (unsigned long long)bs.straight_bytes);
	ck_assert(!bs.unusable);
	/* overlapping registrations are refused; unregistering twice is an error */
	ck_assert_int_eq(wsn_reader_register(r, buf + 4096, 100), WSN_EEXIST);
	ck_assert_int_eq(wsn_reader_unregister(r, buf), 0);
	ck_assert_int_eq(wsn_reader_unregister(r, buf), WSN_ENOENT);
	/* unregistered: back to bounce buffers, same bytes */
	memset(buf, 0, blen);
	ck_assert_int_eq(wsn_reader_read(r, path, 100, 200000, buf + 100), 0);
	ck_assert(!memcmp(buf + 100, ref + 100, 200000));
	{
		struct wsn_reader_buffer_stats b2;
		wsn_reader_buffer_stats(r, &b2);
		ck_assert_uint_eq(b2.straight_bytes, bs.straight_bytes);
		ck_assert_uint_eq(b2.registered, 0);
	}
	wsn_reader_destroy(r);
	munmap(buf, blen);
	unlink(path);
	free(path);
	free(ref);
}

START_TEST(test_straight_reads_tmpfs)
{
	const char *base = run_tmpfs_dir();
	char *dir = run_dir_under(base);
	static const unsigned qds[] = { 1, 4, 64 };

	for (size_t q = 0; q < sizeof(qds) / sizeof(qds[0]); q++)
		for (int direct = -1; direct <= 1; direct++) {
			struct wsn_reader_options o;
			struct wsn_reader *r;
			unsigned char probe[1];
			char *p = run_path_in(dir, "probe");
			int rc;

			/* O_DIRECT on: skip where the file system refuses it, and say so */
			tu_write_file(p, "x", 1);
			wsn_reader_options_init(&o);
			o.direct = direct;
			ck_assert_int_eq(wsn_reader_create(&o, &r), 0);
			rc = wsn_reader_read(r, p, 0, 1, probe);
			wsn_reader_destroy(r);
			unlink(p);
			free(p);
			if (rc == WSN_ENOTSUP) {
				printf("straight reads: O_DIRECT refused on %s: skipped\n", dir);
				continue;
			}
			straight_reads(dir, direct, qds[q], 0);
		}
	straight_reads(dir, -1, 4, 1);
	run_rmtree_free(dir, NULL);
}
END_TEST

START_TEST(test_straight_reads_disk)
{
	char *dir = run_dir_under(run_disk_dir());

	straight_reads(dir, 0, 8, 0);
	straight_reads(dir, -1, 8, 0);
	straight_reads(dir, -1, 2, 1);
	straight_reads(dir, 0, 3, 1);
	run_rmtree_free(dir, NULL);
}
END_TEST

START_TEST(test_register_errors)
{
	struct wsn_reader *r;
	static char a[8192];

	ck_assert_int_eq(wsn_reader_create(NULL, &r), 0);
	ck_assert_int_eq(wsn_reader_register(NULL, a, 10), WSN_EINVAL);
	ck_assert_int_eq(wsn_reader_register(r, NULL, 10), WSN_EINVAL);
	ck_assert_int_eq(wsn_reader_register(r, a, 0), WSN_EINVAL);
	ck_assert_int_eq(wsn_reader_unregister(r, a), WSN_ENOENT);
	ck_assert_int_eq(wsn_reader_register(r, a, 4096), 0);
	ck_assert_int_eq(wsn_reader_register(r, a + 4095, 10), WSN_EEXIST);
	ck_assert_int_eq(wsn_reader_register(r, a + 4096, 4096), 0); /* adjacent is fine */
	{
		struct wsn_reader_buffer_stats bs;
		wsn_reader_buffer_stats(r, &bs);
		ck_assert_uint_eq(bs.registered, 2);
		printf("register: %u of 2 buffers in the fixed table\n", bs.fixed);
		wsn_reader_buffer_stats(NULL, &bs);
		ck_assert_uint_eq(bs.registered, 0);
	}
	wsn_reader_destroy(r); /* with buffers still registered */
}
END_TEST

/* Reads queued with submit and waited for in any order; errors at submit queue nothing. */
START_TEST(test_submit_wait)
{
	char *dir = tu_tmpdir(), *path = run_path_in(dir, "q.bin"), *missing = run_path_in(dir, "missing.bin");
	const size_t flen = 3 << 20;
	unsigned char *ref, *buf = tu_xmalloc(flen);
	struct wsn_reader_options o;
	struct wsn_reader *r;
	uint64_t ids[8], extra[64];
	int n = 0;

	fill_file(path, flen, tu_case_seed("submit_wait"), &ref);
	for (int direct = 0; direct < 2; direct++) {
		wsn_reader_options_init(&o);
		o.queue_depth = 6;
		o.block_size = 64 << 10;
		o.direct = direct ? -1 : 0;
		ck_assert_int_eq(wsn_reader_create(&o, &r), 0);
		if (direct)
			wsn__reader_inject_short_reads(r, true);
		memset(buf, 0, flen);
		/* eight ranges (some unaligned), queued at once, waited for backwards */
		for (int i = 0; i < 8; i++) {
			uint64_t off = (uint64_t)i * (flen / 8) + (i % 3) * 7, len = flen / 8 - (i % 3) * 7 - (i == 5 ? 1000 : 0);
			ck_assert_msg(wsn_reader_submit(r, path, off, len, buf + off, &ids[i]) == 0, "%s", wsn_last_error());
		}
		for (int i = 7; i >= 0; i--)
			ck_assert_msg(wsn_reader_wait(r, ids[i]) == 0, "%s", wsn_last_error());
		for (int i = 0; i < 8; i++) {
			uint64_t off = (uint64_t)i * (flen / 8) + (i % 3) * 7, len = flen / 8 - (i % 3) * 7 - (i == 5 ? 1000 : 0);
			ck_assert_msg(!memcmp(buf + off, ref + off, len), "direct=%d range %d differs", direct, i);
		}
		ck_assert_int_eq(wsn_reader_wait(r, ids[3]), WSN_EINVAL); /* waited for already */
		/* an error at submit queues nothing */
		ck_assert_int_eq(wsn_reader_submit(r, missing, 0, 10, buf, &ids[0]), WSN_ENOENT);
		ck_assert_ptr_nonnull(strstr(wsn_last_error(), missing));
		ck_assert_int_eq(wsn_reader_submit(r, path, flen - 10, 11, buf, &ids[0]), WSN_ETRUNC);
		/* at most 64 queued; the 65th is refused, and a reader destroyed with reads queued frees them */
		for (n = 0; n < 64; n++)
			ck_assert_int_eq(wsn_reader_submit(r, path, 0, 4096, buf + (size_t)n * 4096, &extra[n]), 0);
		ck_assert_int_eq(wsn_reader_submit(r, path, 0, 4096, buf, &ids[0]), WSN_EBUSY);
		ck_assert_int_eq(wsn_reader_wait(r, extra[10]), 0);
		ck_assert(!memcmp(buf + 10 * 4096, ref, 4096));
		wsn_reader_destroy(r);
	}
	free(ref);
	free(buf);
	run_rmtree_free(dir, path, missing, NULL);
}
END_TEST

Suite *suite_run_reads(void)
{
	return TU_SUITE("pipeline", { "straight_reads", 120, NULL, NULL, TU_TESTS({ test_straight_reads_tmpfs, 1 },
				{ test_straight_reads_disk, 1 }, { test_register_errors, 1 }, { test_submit_wait, 1 }) });
}
