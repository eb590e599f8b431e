/* SPDX-License-Identifier: MIT */
/* tests/io_util.h: what the check_io_*.c tests share: temporary directories, raw safetensors files and readers. */
#ifndef WSN_TESTS_IO_UTIL_H
#define WSN_TESTS_IO_UTIL_H

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

uint64_t io_rng_next(uint64_t *s);

void io_fill_bytes(unsigned char *p, size_t n, uint64_t seed);

char *io_pjoin(const char *dir, const char *name);

/* Assert the return code and that the detail mentions each given needle. */
void io_expect_err(int got, int want, const char *needle, const char *needle2);

/* Write a safetensors file by hand: the header text as given, then data_len bytes of data. */
void io_write_raw_st(const char *path, const char *json, size_t data_len);

int io_count_dir_entries(const char *dir);

/* A small reader for tests that open many files. */
struct wsn_reader *io_small_reader(unsigned qd, size_t bs, int direct);

/* The case's temporary directory, on /tmp (or $TMPDIR), removed at teardown. */
extern char *io_tdir;

void io_setup_tmp(void);

void io_teardown_tmp(void);

/* Write json as a safetensors header with data_len data bytes and expect open to fail. */
void io_bad_header(const char *json, size_t data_len, int want, const char *needle,
		       const char *tensor);

#endif /* WSN_TESTS_IO_UTIL_H */
