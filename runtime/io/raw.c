/* SPDX-License-Identifier: MIT */
/* runtime/io/raw.c: raw binary tensor files, and the write-to-temporary-then-rename helper. */
#include "io/io_internal.h"
#include "core/error.h"

#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- files written under a temporary name ---- */

/* Testing aid: take the named temporary file even where an unnamed one can be made. */
static bool force_named;

void wsn__out_force_named(bool on)
{
	force_named = on;
}

char *wsn_out_sibling(const char *path, const char *suffix)
{
	const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
	char *name;

	if (strlen(base) + strlen(suffix) <= NAME_MAX)
		return asprintf(&name, "%s%s", path, suffix) < 0 ? NULL : name;
	return asprintf(&name, "%.*s.wsnorm%s", (int)(base - path), path, suffix) < 0 ? NULL : name;
}

/* The magic link of fd under /proc, through which an unnamed file is given a name. */
static void fd_link(int fd, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d", fd);
}

/*
 * An unnamed file (O_TMPFILE) in path's directory: nothing of it has a name until commit links
 * it, so a process killed while writing leaves nothing behind. Its mode is keep when replacing
 * (the permissions of the file it replaces), else what creat(2) gives: 0666 less the umask. Returns
 * the descriptor, or -1 where the file system or the kernel has none, or /proc is not there to
 * link it by.
 */
static int open_unnamed(const char *path, bool replacing, mode_t keep)
{
	char *copy, lnk[64];
	struct stat st;
	int fd;

	if (force_named || !(copy = strdup(path)))
		return -1;
	fd = open(dirname(copy), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
	free(copy);
	if (fd < 0)
		return -1;
	fd_link(fd, lnk, sizeof(lnk));
	if (stat(lnk, &st) < 0 || (replacing && fchmod(fd, keep) < 0)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A named temporary file next to path (see wsn_out_sibling()), created with mode 0666 so that the umask
 * applies as it does to a new file (mkstemp would give 0600). o->tmp gets its name. The
 * descriptor, or -1 with errno set.
 */
static int open_named(struct wsn_out_file *o, const char *path)
{
	static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	struct timespec ts;
	uint64_t r;
	int fd = -1;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid() << 32 ^ (uint64_t)ts.tv_sec;
	for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
		char *x;

		free(o->tmp);
		if (!(o->tmp = wsn_out_sibling(path, ".XXXXXX"))) {
			errno = ENOMEM;
			return -1;
		}
		x = o->tmp + strlen(o->tmp) - 6;
		for (int i = 0; i < 6; i++) {
			r = r * 6364136223846793005ull + 1442695040888963407ull;
			x[i] = letters[(r >> 33) % (sizeof(letters) - 1)];
		}
		fd = open(o->tmp, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		int e = errno;

		free(o->tmp);
		o->tmp = NULL;
		errno = e;
	}
	return fd;
}

WSN_API int wsn_out_open(struct wsn_out_file *o, const char *path)
{
	struct stat st;
	bool replacing = false;
	mode_t keep = 0;
	int e;

	o->fd = -1;
	o->tmp = NULL;
	o->path = path;
	if (!path || !path[0])
		return wsn__error(WSN_EINVAL, "write: no path");
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return wsn__error(WSN_EISDIR, "%s: is a directory, not a file", path);
		if (!S_ISREG(st.st_mode))
			return wsn__error(WSN_EINVAL, "%s: exists and is not a regular file", path);
		replacing = true;
		keep = st.st_mode & 07777; /* replacing a file keeps its permissions */
	}
	if ((o->fd = open_unnamed(path, replacing, keep)) >= 0)
		return 0;
	if ((o->fd = open_named(o, path)) < 0) {
		e = errno;
		return wsn__error(wsn__errno_code(e), "%s: cannot create a temporary file next to it: %s",
				  path, strerror(e));
	}
	if (replacing && fchmod(o->fd, keep) < 0) {
		e = errno;
		wsn_out_abort(o);
		return wsn__error(wsn__errno_code(e), "%s: fchmod of the temporary file failed: %s", path,
				  strerror(e));
	}
	return 0;
}

int wsn__out_write(struct wsn_out_file *o, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	while (n > 0) {
		ssize_t w = write(o->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return wsn__error(wsn__errno_code(errno), "%s: write failed: %s", o->path,
					  strerror(errno));
		if (w == 0)
			return wsn__error(WSN_EIO, "%s: write made no progress", o->path);
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* fsync the directory holding path so the rename itself is durable; best effort. */
static void sync_dir(const char *path)
{
	char *copy = strdup(path);
	int fd;

	if (!copy)
		return;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

/*
 * Give the unnamed file o->fd the name o->path: linked there directly when nothing has that name
 * (atomic, and no other name ever exists), else linked under a fresh temporary name and renamed
 * over the old file. 0 or -errno.
 */
static int link_unnamed(struct wsn_out_file *o)
{
	char lnk[64];
	int e;

	fd_link(o->fd, lnk, sizeof(lnk));
	if (linkat(AT_FDCWD, lnk, AT_FDCWD, o->path, AT_SYMLINK_FOLLOW) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	for (unsigned n = 0;; n++) {
		char suffix[48];

		free(o->tmp);
		snprintf(suffix, sizeof(suffix), ".%ld-%u", (long)getpid(), n);
		if (!(o->tmp = wsn_out_sibling(o->path, suffix)))
			return -ENOMEM;
		if (linkat(AT_FDCWD, lnk, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0)
			break;
		if (errno != EEXIST || n == 99) {
			e = errno;
			free(o->tmp);
			o->tmp = NULL;
			return -e;
		}
	}
	if (rename(o->tmp, o->path) < 0)
		return -errno; /* the caller's abort removes o->tmp */
	free(o->tmp);
	o->tmp = NULL;
	return 0;
}

WSN_API int wsn_out_commit(struct wsn_out_file *o, int durable)
{
	int e, err;

	if (durable && o->fd >= 0 && fsync(o->fd) < 0) {
		e = errno;
		err = wsn__error(wsn__errno_code(e), "%s: fsync failed: %s", o->path, strerror(e));
		goto err;
	}
	if (!o->tmp) { /* unnamed: linked while open, then closed (its data is on disk when durable) */
		if ((e = -link_unnamed(o)) != 0) {
			err = wsn__error(wsn__errno_code(e), "%s: cannot link the written file there: %s", o->path,
					 strerror(e));
			goto err;
		}
		close(o->fd);
		o->fd = -1;
		goto done;
	}
	e = o->fd >= 0 ? close(o->fd) : 0; /* a caller may have closed a named file already */
	o->fd = -1;
	if (e < 0) {
		e = errno;
		err = wsn__error(wsn__errno_code(e), "%s: close failed: %s", o->path, strerror(e));
		goto err;
	}
	if (rename(o->tmp, o->path) < 0) {
		e = errno;
		err = wsn__error(wsn__errno_code(e), "%s: rename from %s failed: %s", o->path, o->tmp,
				 strerror(e));
		goto err;
	}
	free(o->tmp);
	o->tmp = NULL;
done:
	if (durable)
		sync_dir(o->path);
	return 0;

err:
	wsn_out_abort(o);
	return err;
}

WSN_API void wsn_out_abort(struct wsn_out_file *o)
{
	if (o->fd >= 0)
		close(o->fd);
	o->fd = -1;
	if (o->tmp) {
		unlink(o->tmp);
		free(o->tmp);
		o->tmp = NULL;
	}
}

/* ---- tensor checks ---- */

uint64_t wsn__tensor_bytes(const struct wsn_tensor *t)
{
	uint64_t n;

	if (!t || t->ndim < 1 || t->ndim > WSN_MAX_DIMS || !wsn_dtype_size(t->dtype))
		return 0;
	n = wsn_dtype_size(t->dtype);
	for (int i = 0; i < t->ndim; i++) {
		if (t->shape[i] < 0)
			return 0;
		if (__builtin_mul_overflow(n, (uint64_t)t->shape[i], &n))
			return 0;
	}
	return n;
}

int wsn__check_host_contiguous(const struct wsn_tensor *t, const char *what)
{
	int64_t expect = 1;
	uint64_t bytes;

	if (!t)
		return wsn__error(WSN_EINVAL, "%s: no tensor", what);
	if (t->ndim < 1 || t->ndim > WSN_MAX_DIMS)
		return wsn__error(WSN_EINVAL, "%s: %d dimensions (expected 1..%d)", what, t->ndim,
				  WSN_MAX_DIMS);
	if (!wsn_dtype_size(t->dtype))
		return wsn__error(WSN_EDTYPE, "%s: invalid dtype %d", what, (int)t->dtype);
	if (t->mem != WSN_MEM_HOST)
		return wsn__error(WSN_EINVAL, "%s: tensor is not in host memory", what);
	for (int i = 0; i < t->ndim; i++)
		if (t->shape[i] < 0)
			return wsn__error(WSN_ESHAPE, "%s: negative dimension %lld", what,
					  (long long)t->shape[i]);
	bytes = wsn__tensor_bytes(t);
	if (!bytes) {
		for (int i = 0; i < t->ndim; i++)
			if (t->shape[i] == 0)
				return 0; /* no elements: no data needed */
		return wsn__error(WSN_EOVERFLOW, "%s: shape product overflows", what);
	}
	if (bytes > (uint64_t)INT64_MAX)
		return wsn__error(WSN_EOVERFLOW, "%s: %llu bytes is too large", what,
				  (unsigned long long)bytes);
	if (!t->data)
		return wsn__error(WSN_EINVAL, "%s: tensor has no data", what);
	for (int i = t->ndim - 1; i >= 0; i--) {
		if (t->shape[i] != 1 && t->stride[i] != expect)
			return wsn__error(WSN_EINVAL, "%s: tensor is not contiguous (stride %lld of dimension "
					  "%d, expected %lld)", what, (long long)t->stride[i], i,
					  (long long)expect);
		expect *= t->shape[i];
	}
	return 0;
}

/* ---- raw files ---- */

/*
 * Read a raw tensor file into the contiguous host tensor dst: the file must hold exactly offset
 * + nbytes(dst) bytes. r NULL: a private reader for this call. Returns 0, WSN_ETRUNC (too short),
 * WSN_ESHAPE (longer than the shape and dtype need; both sizes named), WSN_EINVAL, or a read error.
 */
WSN_API int wsn_raw_read(const char *path, struct wsn_reader *r, uint64_t offset,
			 const struct wsn_tensor *dst)
{
	struct wsn_reader *own = NULL;
	uint64_t size, want;
	char what[1024];
	int err;

	if (!path)
		return wsn__error(WSN_EINVAL, "raw read: no path");
	snprintf(what, sizeof(what), "%s: destination", path);
	err = wsn__check_host_contiguous(dst, what);
	if (err)
		return err;
	want = wsn__tensor_bytes(dst);
	err = wsn__file_size(path, &size);
	if (err)
		return err;
	if (offset > size || size - offset < want) {
		if (size == 0)
			return wsn__error(WSN_ETRUNC, "%s: empty file, expected %llu bytes of %s data "
					  "at offset %llu", path, (unsigned long long)want,
					  wsn_dtype_name(dst->dtype), (unsigned long long)offset);
		return wsn__error(WSN_ETRUNC, "%s: file of %llu bytes is too short: expected %llu bytes "
				  "of %s data at offset %llu", path, (unsigned long long)size,
				  (unsigned long long)want, wsn_dtype_name(dst->dtype),
				  (unsigned long long)offset);
	}
	if (size - offset != want)
		return wsn__error(WSN_ESHAPE, "%s: holds %llu bytes after offset %llu, but the shape and "
				  "dtype (%s) expect %llu bytes", path,
				  (unsigned long long)(size - offset), (unsigned long long)offset,
				  wsn_dtype_name(dst->dtype), (unsigned long long)want);
	if (!want)
		return 0;
	if (!r) {
		err = wsn_reader_create(NULL, &own);
		if (err)
			return err;
		r = own;
	}
	err = wsn_reader_read(r, path, offset, want, dst->data);
	wsn_reader_destroy(own);
	return err;
}

/*
 * Write a contiguous host tensor's bytes to path through a temporary file in the same directory,
 * synced and renamed into place; on failure path is untouched. Returns 0 or WSN_EINVAL,
 * WSN_EISDIR, WSN_ENOENT, WSN_ENOSPC, ... naming the file.
 */
WSN_API int wsn_raw_write(const char *path, const struct wsn_tensor *t)
{
	struct wsn_out_file o;
	char what[1024];
	int err;

	if (!path)
		return wsn__error(WSN_EINVAL, "raw write: no path");
	snprintf(what, sizeof(what), "%s: tensor", path);
	err = wsn__check_host_contiguous(t, what);
	if (err)
		return err;
	err = wsn_out_open(&o, path);
	if (err)
		return err;
	err = wsn__out_write(&o, t->data, (size_t)wsn__tensor_bytes(t));
	if (err)
		goto err;
	return wsn_out_commit(&o, true);

err:
	wsn_out_abort(&o);
	return err;
}
