/* SPDX-License-Identifier: MIT */
/* tests/io_util.c: what the check_io_*.c tests share: temporary directories, raw safetensors files and readers. */
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

uint64_t io_rng_next(uint64_t *s)
{
	uint64_t x = (*s += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

void io_fill_bytes(unsigned char *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(io_rng_next(&seed) >> 56);
}

char *io_pjoin(const char *dir, const char *name)
{
	char *p;

	ck_assert(asprintf(&p, "%s/%s", dir, name) >= 0);
	return p;
}

void io_expect_err(int got, int want, const char *needle, const char *needle2)
{
	const char *d = wsn_last_error();

	ck_assert_msg(got == want, "got %s (%d), want %s: %s", wsn_err_name(got), got,
		      wsn_err_name(want), d);
	if (needle)
		ck_assert_msg(strstr(d, needle) != NULL, "'%s' not in the error: %s", needle, d);
	if (needle2)
		ck_assert_msg(strstr(d, needle2) != NULL, "'%s' not in the error: %s", needle2, d);
}

void io_write_raw_st(const char *path, const char *json, size_t data_len)
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

int io_count_dir_entries(const char *dir)
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

struct wsn_reader *io_small_reader(unsigned qd, size_t bs, int direct)
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

char *io_tdir;

void io_setup_tmp(void)
{
	io_tdir = tu_tmpdir();
}

void io_teardown_tmp(void)
{
	tu_rmtree(io_tdir);
	free(io_tdir);
	io_tdir = NULL;
}

void io_bad_header(const char *json, size_t data_len, int want, const char *needle,
		       const char *tensor)
{
	char *path = io_pjoin(io_tdir, "bad.safetensors"), quoted[WSN_ST_MAX_NAME + 2];
	struct wsn_st_file *f = (struct wsn_st_file *)&f;

	io_write_raw_st(path, json, data_len);
	io_expect_err(wsn_st_open(path, NULL, &f), want, path, needle);
	ck_assert_ptr_null(f);
	if (tensor) {
		snprintf(quoted, sizeof(quoted), "'%s'", tensor);
		ck_assert_msg(strstr(wsn_last_error(), quoted) != NULL, "tensor %s not named: %s",
			      quoted, wsn_last_error());
	}
	free(path);
}
