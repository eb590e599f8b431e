/* SPDX-License-Identifier: MIT */
/* runtime/io/reader_open.c: opening a file for the reader: its type, size and the alignment direct reads need. */
#include "io/reader_internal.h"
#include "core/error.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

static int open_error(const char *path, int e)
{
	if (e == ENOENT)
		return wsn__error(WSN_ENOENT, "%s: no such file", path);
	return wsn__error(wsn__errno_code(e), "%s: cannot open: %s", path, strerror(e));
}

/* Type, size and alignment of an open file; rejects directories and anything unseekable. */
static int classify(int fd, const char *path, struct file_info *fi)
{
	unsigned mask = STATX_TYPE | STATX_SIZE;
	struct statx stx;
	uint32_t lbs;

	memset(fi, 0, sizeof(*fi));
#ifdef STATX_DIOALIGN
	mask |= STATX_DIOALIGN;
#endif
	memset(&stx, 0, sizeof(stx));
	if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_SYNC_AS_STAT, mask, &stx) < 0)
		return wsn__error(wsn__errno_code(errno), "%s: statx failed: %s", path, strerror(errno));
	if (S_ISDIR(stx.stx_mode))
		return wsn__error(WSN_EISDIR, "%s: is a directory, not a file", path);
	if (S_ISBLK(stx.stx_mode)) {
		uint64_t bytes = 0;
		int ssz = 0;

		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
			return wsn__error(wsn__errno_code(errno), "%s: BLKGETSIZE64 failed: %s", path,
					  strerror(errno));
		if (ioctl(fd, BLKSSZGET, &ssz) < 0)
			ssz = 0;
		fi->size = bytes;
		lbs = ssz > 0 ? (uint32_t)ssz : 0;
	} else if (S_ISREG(stx.stx_mode)) {
		fi->size = stx.stx_size;
		lbs = stx.stx_blksize;
	} else {
		return wsn__error(WSN_EINVAL, "%s: not a regular file or block device", path);
	}
	fi->lbs = lbs > MIN_ALIGN ? lbs : MIN_ALIGN;
#ifdef STATX_DIOALIGN
	if (stx.stx_mask & STATX_DIOALIGN) {
		fi->dio_known = true;
		fi->dio_mem = stx.stx_dio_mem_align;
		fi->dio_off = stx.stx_dio_offset_align;
	}
#endif
	return 0;
}

static bool pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/*
 * The alignment direct reads of this file need, or 0 with a reason when the reader's buffers
 * cannot serve them (no direct I/O on this file, or alignment the buffers do not meet).
 */
static uint64_t dio_align(const struct wsn_reader *r, const struct file_info *fi, char *why,
			  size_t n)
{
	uint64_t mem = fi->lbs, off = fi->lbs, a;
	long page = sysconf(_SC_PAGESIZE);

	if (fi->dio_known) {
		if (!fi->dio_off || !fi->dio_mem) {
			snprintf(why, n, "the file system reports no direct I/O for it");
			return 0;
		}
		mem = fi->dio_mem;
		off = fi->dio_off;
	}
	a = mem > off ? mem : off;
	if (!pow2(mem) || !pow2(off) || mem > (uint64_t)(page > 0 ? page : 4096) ||
	    a > r->opt.block_size || r->opt.block_size % a) {
		snprintf(why, n, "its direct I/O alignment (memory %llu, offset %llu) does not fit "
			 "%zu-byte page-aligned buffers", (unsigned long long)mem,
			 (unsigned long long)off, r->opt.block_size);
		return 0;
	}
	return a;
}

/*
 * Open path for reading per the reader's direct option. O_NONBLOCK keeps open() from waiting on
 * a FIFO; it is cleared (with O_DIRECT when direct reads are refused) once the file is known to
 * be a regular file or block device, so io_uring does not return EAGAIN for uncached pages.
 */
int wsn__reader_open_file(struct wsn_reader *r, struct job *j, struct file_info *fi)
{
	const int base = O_RDONLY | O_CLOEXEC | O_NONBLOCK;
	char why[160] = "";
	int fd = -1, fl, err;

	if (r->opt.direct != 0) {
		fd = open(j->path, base | O_DIRECT);
		if (fd < 0 && errno != EINVAL)
			return open_error(j->path, errno);
		if (fd < 0)
			snprintf(why, sizeof(why), "open(O_DIRECT) was refused (EINVAL)");
	}
	if (fd < 0) {
		fd = open(j->path, base);
		if (fd < 0)
			return open_error(j->path, errno);
	}
	err = classify(fd, j->path, fi);
	if (err)
		goto err;
	j->align = 1;
	if (r->opt.direct != 0 && !why[0])
		j->align = dio_align(r, fi, why, sizeof(why));
	if (why[0]) {
		j->align = 1;
		if (r->opt.direct == 1) {
			err = wsn__error(WSN_ENOTSUP, "%s: direct I/O is required but %s", j->path, why);
			goto err;
		}
	}
	j->direct = !why[0] && r->opt.direct != 0;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~(O_NONBLOCK | (j->direct ? 0 : O_DIRECT))) < 0) {
		err = wsn__error(wsn__errno_code(errno), "%s: fcntl(F_SETFL) failed: %s", j->path,
				 strerror(errno));
		goto err;
	}
	if (j->direct)
		r->stats.direct_files++;
	else
		r->stats.buffered_files++;
	j->fd = fd;
	return 0;

err:
	close(fd);
	return err;
}

int wsn__file_size(const char *path, uint64_t *size)
{
	struct file_info fi;
	int fd, err;

	if (!path || !size)
		return wsn__error(WSN_EINVAL, "file size: no path");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return open_error(path, errno);
	err = classify(fd, path, &fi);
	close(fd);
	if (!err)
		*size = fi.size;
	return err;
}
