/* SPDX-License-Identifier: MIT */
/* runtime/tunecache.c: the autotune cache: one small file per (GPU, driver, op, dtype, hidden, rows class), written whole then named. */
#include "tunecache.h"
#include "core/error.h"
#include "core/op.h"
#include "core/params.h"
#include "io/io_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Layout: $XDG_CACHE_HOME/wsnorm/tune/<key>, else $HOME/.cache/wsnorm/tune/<key>, with <key> the
 * wsnorm version (its kernels and rules change between versions), the GPU name, compute capability
 * and SM count, the driver version, op, dtype, hidden size, the affine flags and the rows class (the
 * power of two at or above the plan's rows, at most 16384), squeezed to [A-Za-z0-9._-]. Each entry is one line:
 *   wsnorm-tune 3 approach=<multiwave|ws> shape=<c>,<bx>,<by>,<u>,<s> ws_us=<f> shape_us=<f> multiwave_us=<f>
 *     shapes=<n> rows=<n>
 * (shape: the winning ws shape's cluster, bdimx, bdimy, unroll and stages where it is not the
 * planner's own, else 0,0,0,0,0; times in microseconds per launch over rows rows of the planner's ws
 * shape, the fastest of the `shapes` other ws shapes and multi-wave; 0 and rows=0 when nothing was
 * timed). Entries of versions 1 and 2 (no shapes) are misses. Writers write an unnamed file in the same directory (a
 * temporary one where the file system has none) and give it the entry's name when it is whole
 * (wsn_out_commit), so a reader sees a whole old entry or a whole new one and concurrent writers
 * never interleave; the last one wins. A malformed entry is a miss.
 */

#define TUNE_MAGIC "wsnorm-tune 3"

static int cache_dir(char *buf, size_t len)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;

	if (xdg && xdg[0] == '/')
		n = snprintf(buf, len, "%s/wsnorm/tune", xdg);
	else if (home && home[0] == '/')
		n = snprintf(buf, len, "%s/.cache/wsnorm/tune", home);
	else
		return wsn__error(WSN_ENOENT, "autotune cache: neither XDG_CACHE_HOME nor HOME is an absolute path");
	if (n < 0 || (size_t)n >= len)
		return wsn__error(WSN_ERANGE, "autotune cache: directory path too long");
	return 0;
}

int64_t wsn__tune_rows_class(int64_t rows)
{
	int64_t c = 1;

	while (c < rows && c < WSN__TUNE_MAX_ROWS)
		c *= 2;
	return c;
}

int wsn__tune_key(const struct wsn__tune_id *id, char *buf, size_t len)
{
	char raw[256];
	size_t i, o = 0;
	int n;

	n = snprintf(raw, sizeof(raw), "wsnorm%s_%s_cc%d%d_%dsm_drv%d_%s_%s_h%lld_w%d_b%d_r%lld", WSN_VERSION_STRING,
		     id->gpu, id->cc_major, id->cc_minor, id->sms, id->driver,
		     wsn_op_name(id->op) ? wsn_op_name(id->op) : "op",
		     wsn_dtype_name(id->dtype) ? wsn_dtype_name(id->dtype) : "dt", (long long)id->hidden,
		     id->has_weight, id->has_bias, (long long)id->rows_class);
	if (n < 0 || (size_t)n >= sizeof(raw))
		return wsn__error(WSN_ERANGE, "autotune cache: key too long");
	for (i = 0; raw[i] && o + 1 < len; i++) {
		char c = raw[i];
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
			 c == '_' || c == '-';
		buf[o++] = ok ? c : '-';
	}
	if (raw[i])
		return wsn__error(WSN_ERANGE, "autotune cache: key too long");
	buf[o] = '\0';
	return 0;
}

static int entry_path(const struct wsn__tune_id *id, char *dir, size_t dlen, char *path, size_t plen)
{
	char key[256];
	int err;

	if ((err = cache_dir(dir, dlen)) < 0 || (err = wsn__tune_key(id, key, sizeof(key))) < 0)
		return err;
	if ((size_t)snprintf(path, plen, "%s/%s", dir, key) >= plen)
		return wsn__error(WSN_ERANGE, "autotune cache: path too long");
	return 0;
}

int wsn__tune_path(const struct wsn__tune_id *id, char *buf, size_t len)
{
	char dir[4096];

	return entry_path(id, dir, sizeof(dir), buf, len);
}

static int time_ok(double us)
{
	return us >= 0 && us < 1e12; /* also false for NaN */
}

/*
 * The entry's one line, read without blocking or following a link: a FIFO, a device or a link at the
 * path is not an entry (a FIFO would block the open, a terminal the read). 0, WSN_ENOENT when there
 * is none, WSN_EFORMAT for something other than a small regular file, or the open's error.
 */
static int read_entry(const char *path, char *line, size_t len)
{
	struct stat st;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			return wsn__error(WSN_ENOENT, "autotune cache: no entry %s", path);
		if (errno == ELOOP)
			return wsn__error(WSN_EFORMAT, "autotune cache: %s is a symbolic link, not an entry (ignored)", path);
		return wsn__error(-errno, "autotune cache: cannot open %s: %s (ignored)", path, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size >= (off_t)len) {
		close(fd);
		return wsn__error(WSN_EFORMAT, "autotune cache: %s is not an entry (not a one-line file; ignored)", path);
	}
	n = read(fd, line, len - 1);
	close(fd);
	if (n < 0)
		return wsn__error(WSN_EIO, "autotune cache: cannot read %s (ignored)", path);
	line[n] = '\0';
	return 0;
}

/*
 * Whether e is an entry: a winner, times and counts in range, and a shape that is all 0 or (for a ws
 * winner) one the ws kernels could take: cluster 1, 2, 4 or 8, 32 to 1024 threads a row group, 1
 * to 16 groups, 1 to 8 rows a stage and 1 to 32 stages (the planner checks the rest when it plans it).
 */
static int entry_ok(const struct wsn__tune_entry *e)
{
	const struct wsn__ws_shape *s = &e->shape;
	int none = !s->cluster && !s->bdimx && !s->bdimy && !s->unroll && !s->stages;

	if (e->approach != WSN_APPROACH_MULTIWAVE && e->approach != WSN_APPROACH_WS)
		return 0;
	if (!time_ok(e->ws_us) || !time_ok(e->shape_us) || !time_ok(e->multiwave_us) || e->shapes < 0 ||
	    e->shapes > 1000 || e->rows < 0 || e->rows == INT64_MAX)
		return 0;
	return none || (e->approach == WSN_APPROACH_WS && s->cluster <= 8 && !(s->cluster & (s->cluster - 1)) &&
			s->cluster && s->bdimx >= 32 && s->bdimx <= 1024 && s->bdimy >= 1 && s->bdimy <= 16 &&
			s->unroll >= 1 && s->unroll <= 8 && s->stages >= 1 && s->stages <= 32);
}

int wsn__tune_lookup(const struct wsn__tune_id *id, struct wsn__tune_entry *out)
{
	char dir[4096], path[4608], line[256], appr[32];
	struct wsn__ws_shape *s = &out->shape;
	long long rows = -1;
	int err, end = 0;

	memset(out, 0, sizeof(*out));
	if ((err = entry_path(id, dir, sizeof(dir), path, sizeof(path))) < 0)
		return err;
	if ((err = read_entry(path, line, sizeof(line))) < 0)
		return err;
	/* exactly the line wsn__tune_store writes: every field, a newline, nothing after it */
	if (strncmp(line, TUNE_MAGIC " ", sizeof(TUNE_MAGIC)) ||
	    sscanf(line + sizeof(TUNE_MAGIC),
		   "approach=%31s shape=%u,%u,%u,%u,%u ws_us=%lf shape_us=%lf multiwave_us=%lf shapes=%d rows=%lld%n", appr,
		   &s->cluster, &s->bdimx, &s->bdimy, &s->unroll, &s->stages, &out->ws_us, &out->shape_us,
		   &out->multiwave_us, &out->shapes, &rows, &end) != 11 ||
	    strcmp(line + sizeof(TUNE_MAGIC) + end, "\n") || wsn_approach_parse(appr, &out->approach) < 0 ||
	    rows < 0 || rows == LLONG_MAX || !((out->rows = (int64_t)rows), entry_ok(out))) {
		memset(out, 0, sizeof(*out));
		if (!strncmp(line, "wsnorm-tune ", 12) && strncmp(line, TUNE_MAGIC " ", sizeof(TUNE_MAGIC)))
			return wsn__error(WSN_EFORMAT, "autotune cache: %s is another version's entry (ignored)", path);
		return wsn__error(WSN_EFORMAT, "autotune cache: malformed entry %s (ignored)", path);
	}
	return 0;
}

/* mkdir -p for the cache directory. */
static int make_dirs(char *dir)
{
	for (char *p = dir + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
			int e = errno;
			*p = '/';
			return wsn__error(-e, "autotune cache: cannot create %s: %s", dir, strerror(e));
		}
		*p = '/';
	}
	if (mkdir(dir, 0777) < 0 && errno != EEXIST)
		return wsn__error(-errno, "autotune cache: cannot create %s: %s", dir, strerror(errno));
	return 0;
}

/* The text after the last occurrence of tag in name that is followed by a digit; NULL: none. */
static const char *after_last(const char *name, const char *tag)
{
	const char *last = NULL;
	size_t n = strlen(tag);

	for (const char *p = strstr(name, tag); p; p = strstr(p + 1, tag))
		if (p[n] >= '0' && p[n] <= '9')
			last = p + n;
	return last;
}

/*
 * A temporary file of a writer killed before its rename: the name the library's writer gives one
 * next to an entry (<key>.XXXXXX where the file system has no unnamed files, <key>.<pid>-<n> for
 * the moment between link and rename; every key ends in _r<rows class>, an older wsnorm's in _b0 or
 * _b1), or an older wsnorm's .tmp-*.
 */
static int is_temporary(const char *name)
{
	const char *r = after_last(name, "_r"), *b = after_last(name, "_b");

	if (!strncmp(name, ".tmp-", 5))
		return 1;
	if (strncmp(name, "wsnorm", 6))
		return 0;
	if (r) {
		while (*r >= '0' && *r <= '9')
			r++;
		if (*r == '.')
			return 1;
	}
	return b && (b[0] == '0' || b[0] == '1') && b[1] == '.';
}

/* Temporary files of killed writers: gone after 10 minutes (a live writer holds one for
 * microseconds). Best effort. */
static void sweep_stale(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st;
	time_t old = time(NULL) - 600;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (is_temporary(de->d_name) && !fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(st.st_mode) && st.st_mtime < old)
			unlinkat(dirfd(d), de->d_name, 0);
	closedir(d);
}

int wsn__tune_store(const struct wsn__tune_id *id, const struct wsn__tune_entry *e)
{
	char dir[4096], path[4608], line[256];
	struct wsn_out_file o;
	int err, n;

	if (e->approach != WSN_APPROACH_MULTIWAVE && e->approach != WSN_APPROACH_WS)
		return wsn__error(WSN_EINVAL, "autotune cache: an entry names multiwave or ws, not %s",
				  wsn_approach_name(e->approach) ? wsn_approach_name(e->approach) : "an invalid approach");
	if (!entry_ok(e))
		return wsn__error(WSN_EINVAL, "autotune cache: shape %u,%u,%u,%u,%u, times %g, %g and %g us (%d shapes) over "
				  "%lld rows are not an entry", e->shape.cluster, e->shape.bdimx, e->shape.bdimy,
				  e->shape.unroll, e->shape.stages, e->ws_us, e->shape_us, e->multiwave_us, e->shapes,
				  (long long)e->rows);
	if ((err = entry_path(id, dir, sizeof(dir), path, sizeof(path))) < 0)
		return err;
	if ((err = make_dirs(dir)) < 0)
		return err;
	n = snprintf(line, sizeof(line),
		     TUNE_MAGIC " approach=%s shape=%u,%u,%u,%u,%u ws_us=%.3f shape_us=%.3f multiwave_us=%.3f shapes=%d "
		     "rows=%lld\n", wsn_approach_name(e->approach), e->shape.cluster, e->shape.bdimx, e->shape.bdimy,
		     e->shape.unroll, e->shape.stages, e->ws_us, e->shape_us, e->multiwave_us, e->shapes,
		     (long long)e->rows);
	if (n < 0 || (size_t)n >= sizeof(line))
		return wsn__error(WSN_EINVAL, "autotune cache: the entry does not fit %zu bytes", sizeof(line));
	/* written where no reader sees it until it is whole, then given the entry's name at once */
	if ((err = wsn_out_open(&o, path)) < 0)
		return wsn__error_context(err, "autotune cache");
	if ((err = wsn__out_write(&o, line, (size_t)n)) < 0 || (err = wsn_out_commit(&o, true)) < 0) {
		wsn_out_abort(&o);
		return wsn__error_context(err, "autotune cache");
	}
	sweep_stale(dir);
	return 0;
}
