/* SPDX-License-Identifier: MIT */
/* launcher/output.c: `wsnorm run` outputs: per-shard safetensors written through io_uring, named only when committed. */
#include "pipeline.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITER_QD 16
#define WRITE_CHUNK ((size_t)1 << 30) /* at most this many bytes per write request */
#define MAX_PIECES PL_NOUT

/* Descriptors a run needs besides its outputs': devices, readers, rings, the inputs being read. */
#define OTHER_FDS 256

/*
 * One shard's output file: an unnamed file (wsn_out_open) until the commit gives every output its
 * name, so that a process killed by any signal leaves nothing named behind. Batches from any
 * device write their rows at their offsets; the one that completes the shard writes
 * dweight/dbias, summed over the batches in double precision.
 */
struct pl_out {
	char *path;
	struct wsn_out_file file; /* file.fd stays open until the commit: an unnamed file has no other handle */
	int cleanup;              /* file.tmp's cli_cleanup slot, where the file system has no unnamed files (-1: none) */
	uint64_t off[PL_NOUT];    /* absolute file offsets of the output tensors */
	int64_t rows, nbatches;
	pthread_mutex_t lock;
	int64_t written;          /* batches of the first pass written */
	double *acc[2];           /* dweight, dbias sums */
	int complete;
};

struct pl_writer {
	struct io_uring ring;
};

/* A contiguous write. */
struct piece {
	const unsigned char *buf;
	size_t len;
	uint64_t off;
	int inflight;
};

/* Output tensors in file order: the forward ops' y, mean, rstd; the backward ops' dx, dweight, dbias. */
static const int out_order[PL_NOUT] = { PL_OUT_Y, PL_OUT_MEAN, PL_OUT_RSTD, PL_OUT_DX, PL_OUT_DW, PL_OUT_DB };

/*
 * The header, from wsn_st_header(): metadata first, then the outputs with their data packed in
 * order; o->off gets each output's absolute offset. y and dx take x's shape (a [2, 5, 64] x gives a
 * [2, 5, 64] y), or [rows, hidden] for raw input (x NULL). 0 or a WSN_E* code.
 */
static int build_header(const struct pl_shape *sh, const struct wsn_st_entry *x, int64_t rows, struct pl_out *o,
			unsigned char **hdr, size_t *hlen)
{
	const char *meta[] = { "wsnorm.op", wsn_op_name(sh->op), NULL };
	struct wsn_st_tensor_info info[PL_NOUT];
	uint64_t off[PL_NOUT];
	int which[PL_NOUT], n = 0, err;

	for (int k = 0; k < PL_NOUT; k++) {
		int i = out_order[k];
		struct wsn_st_tensor_info *t = &info[n];

		if (!sh->out[i])
			continue;
		*t = (struct wsn_st_tensor_info){ .name = pl_out_names[i],
			.dtype = i == PL_OUT_MEAN || i == PL_OUT_RSTD ? WSN_F32 : sh->dt };
		if ((i == PL_OUT_Y || i == PL_OUT_DX) && x) {
			t->ndim = x->ndim;
			memcpy(t->shape, x->shape, sizeof(t->shape));
		} else if (i == PL_OUT_Y || i == PL_OUT_DX) {
			t->ndim = 2;
			t->shape[0] = rows;
			t->shape[1] = sh->hidden;
		} else {
			t->ndim = 1;
			t->shape[0] = sh->out_row[i] ? rows : sh->hidden;
		}
		which[n++] = i;
	}
	if ((err = wsn_st_header(info, n, meta, hdr, hlen, off)))
		return err;
	for (int i = 0; i < PL_NOUT; i++)
		o->off[i] = *hlen;
	for (int k = 0; k < n; k++)
		o->off[which[k]] = off[k];
	return 0;
}

static void out_free(struct pl_out *o)
{
	if (!o)
		return;
	cli_cleanup_drop(o->cleanup);
	wsn_out_abort(&o->file); /* closes and discards the file unless it was committed */
	free(o->path);
	free(o->acc[0]);
	free(o->acc[1]);
	pthread_mutex_destroy(&o->lock);
	free(o);
}

/* Shard i's output path (malloc'd; NULL when out of memory). */
static char *out_path(const struct pl_dataset *ds, const struct pl_config *cfg, int i)
{
	const char *in = ds->shards[i].path, *base = strrchr(in, '/');
	char *path = NULL;

	if (!cfg->output_dir)
		return strdup(cfg->output);
	if (asprintf(&path, "%s/%s", cfg->output, base ? base + 1 : in) < 0)
		return NULL;
	return path;
}

/*
 * May path take shard i's outputs? Not when it is a directory, a FIFO or a device (the rename at the end
 * would replace the node with a regular file), or one of the inputs under any name; nor, when it does
 * not exist, when no file can be made there (cli_check_new_file; dir_made_later: its directory is made
 * before the outputs are written). 0 or a WSN_E* code with msg set.
 */
static int out_path_ok(const struct pl_dataset *ds, const char *path, int dir_made_later, char *msg, size_t len)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		char why[PL_ERRLEN];
		int err = cli_check_new_file(path, errno, dir_made_later, why, sizeof(why));

		if (err)
			snprintf(msg, len, "run: %s", why);
		return err;
	}
	if (S_ISDIR(st.st_mode)) {
		snprintf(msg, len, "run: cannot write '%s': EISDIR: is a directory, not a file", path);
		return WSN_EISDIR;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(msg, len, "run: cannot write '%s': EEXIST: it exists and is not a regular file (outputs are "
			 "written to a new file that replaces it)", path);
		return WSN_EEXIST;
	}
	for (int k = 0; k < ds->n; k++) /* the rename at the end would replace an input with its outputs */
		if (st.st_dev == ds->shards[k].dev && st.st_ino == ds->shards[k].ino) {
			snprintf(msg, len, "run: cannot write '%s': EEXIST: it is the input '%s', which the outputs "
				 "would replace: give --output another path", path, ds->shards[k].path);
			return WSN_EEXIST;
		}
	{ /* a file the commit could not replace, nor its kept-aside link remove (a sticky directory) */
		char why[PL_ERRLEN];
		int err = cli_check_replace(path, &st, why, sizeof(why));

		if (err)
			snprintf(msg, len, "run: %s; no output was written", why);
		return err;
	}
}

/*
 * Whether this run's complete outputs are parked (see park()): set by pl_out_check when the limit on
 * open files has no room for every output to stay open until the commit.
 */
static int park_complete;

/*
 * Every output's descriptor stays open until the commit: raise the soft limit on open files to the
 * hard one; whether that leaves room for all of them with what the run needs besides (under a small
 * limit, half of it for the rest).
 */
static int out_fd_room(int outputs)
{
	struct rlimit rl;
	rlim_t reserve;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return 1;
	if (rl.rlim_cur < rl.rlim_max && rl.rlim_cur < (rlim_t)outputs + OTHER_FDS) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		return 1;
	reserve = rl.rlim_cur / 2 < OTHER_FDS ? rl.rlim_cur / 2 : OTHER_FDS;
	return rl.rlim_cur >= (rlim_t)outputs + reserve;
}

/*
 * Park the complete output o where descriptors are short: give its unnamed file a temporary name
 * next to its destination (path.<pid>-part, see wsn_out_sibling()), registered for the second-signal
 * clean-up, and close it; the commit renames it into place. 0 or -errno.
 */
static int park(struct pl_out *o)
{
	char lnk[64], suffix[48];

	if (!o->file.tmp) {
		snprintf(lnk, sizeof(lnk), "/proc/self/fd/%d", o->file.fd);
		snprintf(suffix, sizeof(suffix), ".%ld-part", (long)getpid());
		if (!(o->file.tmp = wsn_out_sibling(o->path, suffix)))
			return -ENOMEM;
		if (linkat(AT_FDCWD, lnk, AT_FDCWD, o->file.tmp, AT_SYMLINK_FOLLOW) < 0) {
			int e = errno;

			free(o->file.tmp);
			o->file.tmp = NULL;
			return -e;
		}
		o->cleanup = cli_cleanup_add(o->file.tmp, 0);
	}
	close(o->file.fd);
	o->file.fd = -1;
	return 0;
}

int pl_out_check(const struct pl_dataset *ds, const struct pl_config *cfg, char *msg, size_t len)
{
	struct stat st;
	int err = 0, dir_made_later = 0;

	park_complete = !out_fd_room(ds->n);
	if (cfg->output_dir && stat(cfg->output, &st) < 0) { /* the directory is made after this check */
		char why[PL_ERRLEN];

		if ((err = cli_check_new_file(cfg->output, errno, 0, why, sizeof(why)))) {
			snprintf(msg, len, "run: output directory: %s", why);
			return err;
		}
		dir_made_later = 1;
	}
	for (int i = 0; i < ds->n && !err; i++) {
		char *path = out_path(ds, cfg, i);
		if (!path) {
			snprintf(msg, len, "run: ENOMEM: out of memory");
			return WSN_ENOMEM;
		}
		err = out_path_ok(ds, path, dir_made_later, msg, len);
		free(path);
	}
	return err;
}

int pl_out_create(struct pl_dataset *ds, int i, char *msg, size_t len)
{
	const struct pl_config *cfg = ds->cfg;
	const struct pl_shape *sh = &ds->shape;
	struct pl_shard *shard = &ds->shards[i];
	struct pl_out *o = calloc(1, sizeof(*o));
	unsigned char *hdr = NULL;
	size_t hlen = 0, done = 0;
	uint64_t total;
	int e;

	if (!o)
		goto oom;
	o->file.fd = -1;
	o->cleanup = -1;
	pthread_mutex_init(&o->lock, NULL);
	o->rows = shard->rows;
	o->nbatches = shard->nbatches;
	if (!(o->path = out_path(ds, cfg, i)))
		goto oom;
	for (int k = 0; k < ds->n; k++) /* two inputs of one name would write one output */
		if (k != i && ds->shards[k].out && !strcmp(ds->shards[k].out->path, o->path)) {
			snprintf(msg, len, "run: output '%s' would be written for two inputs ('%s' and '%s')", o->path,
				 ds->shards[k].path, shard->path);
			out_free(o);
			return WSN_EEXIST;
		}
	if ((e = out_path_ok(ds, o->path, 0, msg, len))) { /* pl_out_check said yes; the node may have changed */
		out_free(o);
		return e;
	}
	for (int k = PL_OUT_DW; k <= PL_OUT_DB; k++)
		if (sh->out[k] && !(o->acc[k - PL_OUT_DW] = calloc((size_t)sh->hidden, sizeof(double))))
			goto oom;
	if ((e = build_header(sh, shard->st ? wsn_st_find(shard->st, "x") : NULL, shard->rows, o, &hdr, &hlen))) {
		if (e == WSN_ENOMEM)
			goto oom;
		snprintf(msg, len, "run: output for '%s': %s: %s", shard->path, wsn_err_name(e), wsn_last_error());
		out_free(o);
		return e;
	}
	if ((e = wsn_out_open(&o->file, o->path)) < 0) {
		snprintf(msg, len, "run: cannot write '%s': %s: %s", o->path, wsn_err_name(e), wsn_last_error());
		out_free(o);
		free(hdr);
		return e;
	}
	if (o->file.tmp)
		o->cleanup = cli_cleanup_add(o->file.tmp, 0);
	total = o->off[PL_NOUT - 1];
	for (int k = 0; k < PL_NOUT; k++)
		if (sh->out[k] && o->off[k] + pl_out_bytes(sh, k, shard->rows) > total)
			total = o->off[k] + pl_out_bytes(sh, k, shard->rows);
	if (ftruncate(o->file.fd, (off_t)total) < 0)
		goto io_err;
	while (done < hlen) {
		ssize_t w = pwrite(o->file.fd, hdr + done, hlen - done, (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto io_err;
		done += (size_t)w;
	}
	free(hdr);
	shard->out = o;
	return 0;
io_err:
	e = errno ? errno : EIO;
	snprintf(msg, len, "run: cannot write '%s': %s: %s", o->path, wsn_err_name(-e), strerror(e));
	out_free(o);
	free(hdr);
	return -e;
oom:
	snprintf(msg, len, "run: output for '%s': ENOMEM: out of memory", shard->path);
	out_free(o);
	free(hdr);
	return WSN_ENOMEM;
}

int pl_out_complete(const struct pl_dataset *ds)
{
	for (int i = 0; i < ds->n; i++)
		if (!ds->shards[i].out || !ds->shards[i].out->complete)
			return 0;
	return ds->n > 0;
}

/* An old file at an output's destination, kept aside while the outputs are renamed into place. */
struct aside {
	char *name;   /* path.<pid>-old<n> (see wsn_out_sibling()); NULL when the destination was new */
	int moved;    /* renamed aside (the destination is empty meanwhile), not linked */
};

/*
 * Keep the file at path aside as a->name: linked there, or where a link cannot be made (another
 * user's file under protected_hardlinks, a file system without hard links, the link limit) renamed
 * there. 0, or -errno of what stopped it.
 */
static int keep_aside(const char *path, struct aside *a)
{
	int e = 0;

	for (unsigned n = 0; n < 100; n++) {
		char suffix[48];

		free(a->name);
		snprintf(suffix, sizeof(suffix), ".%ld-old%u", (long)getpid(), n);
		if (!(a->name = wsn_out_sibling(path, suffix)))
			return -ENOMEM;
		if (link(path, a->name) == 0)
			return 0;
		e = errno;
		if (e == EEXIST)
			continue;
		if (e != EPERM && e != EMLINK && e != ENOTSUP && e != EOPNOTSUPP && e != ENOSYS)
			break;
		if (access(a->name, F_OK) == 0)
			continue; /* taken: try the next name */
		if (rename(path, a->name) == 0) {
			a->moved = 1;
			return 0;
		}
		e = errno;
		break;
	}
	free(a->name);
	a->name = NULL;
	return -e;
}

/*
 * Undo the commit of outputs [0, to) and the keeping aside of [0, ds->n): an output renamed in (i <
 * renamed) is removed or its old file put back; an old file whose output was not renamed in is
 * unlinked (linked aside) or moved back (moved aside). Where something cannot be undone, fail (set
 * the first time) names it. Frees every name.
 */
static void undo(struct pl_dataset *ds, struct aside *old, int renamed, char *fail, size_t len)
{
	for (int i = 0; i < ds->n; i++) {
		const char *path = ds->shards[i].out->path;
		int bad = 0;

		if (i < renamed || (old[i].name && old[i].moved)) {
			if (i < renamed)
				bad = old[i].name ? rename(old[i].name, path) < 0 : unlink(path) < 0;
			else
				bad = rename(old[i].name, path) < 0;
			if (bad && !fail[0])
				snprintf(fail, len, "; '%s' could not be restored (%s)%s%s%s", path, strerror(errno),
					 old[i].name ? ": its old file is '" : "", old[i].name ? old[i].name : "",
					 old[i].name ? "'" : "");
		} else if (old[i].name && unlink(old[i].name) < 0 && !fail[0]) {
			/* the old file is still in place: only the second name kept aside for it stays */
			snprintf(fail, len, "; '%s' is intact, but the second name '%s' kept aside for it could not be "
				 "removed (%s)", path, old[i].name, strerror(errno));
		}
		free(old[i].name);
		old[i].name = NULL;
	}
}

/*
 * Rename every complete output into place, all or none: each old file at a destination is first
 * kept aside (path.<pid>-old<n>, linked, or renamed where it cannot be linked), so that when a rename
 * fails part way the outputs renamed before it are taken back and the old files put back. A
 * destination that cannot be kept aside (another user's file in a sticky directory, say) stops the
 * commit before anything is renamed. 0 or a WSN_E* code with msg set.
 */
static int commit_all(struct pl_dataset *ds, char *msg, size_t len)
{
	struct aside *old = calloc((size_t)ds->n, sizeof(*old));
	char fail[512] = "";
	struct stat st;
	int err = 0, k;

	if (!old) {
		snprintf(msg, len, "run: ENOMEM: out of memory");
		return WSN_ENOMEM;
	}
	for (k = 0; k < ds->n && !err; k++) {
		struct pl_out *o = ds->shards[k].out;

		if (lstat(o->path, &st) == 0 && (err = keep_aside(o->path, &old[k]))) {
			undo(ds, old, 0, fail, sizeof(fail));
			snprintf(msg, len, "run: cannot replace '%s': %s: it cannot be kept aside while the outputs are "
				 "renamed into place (%s); no output was written%s", o->path, wsn_err_name(err),
				 strerror(-err), fail);
		}
	}
	for (k = 0; k < ds->n && !err; k++) {
		struct pl_out *o = ds->shards[k].out;

		if ((err = wsn_out_commit(&o->file, 0)) < 0) {
			char why[PL_ERRLEN];

			snprintf(why, sizeof(why), "%s", wsn_last_error());
			undo(ds, old, k, fail, sizeof(fail));
			snprintf(msg, len, "run: cannot put '%s' in place: %s: %s; %s%s", o->path, wsn_err_name(err), why,
				 fail[0] ? "the outputs renamed before it were taken back as far as they could be"
				 : k ? "the outputs renamed before it were taken back and no output was written" :
				 "no output was written", fail);
			break;
		}
		cli_cleanup_drop(o->cleanup);
		o->cleanup = -1;
	}
	for (k = 0; k < ds->n && !err; k++) { /* every output in place: the old files can go */
		if (old[k].name)
			unlink(old[k].name);
	}
	for (k = 0; k < ds->n; k++)
		free(old[k].name);
	free(old);
	return err;
}

int pl_out_finish(struct pl_dataset *ds, int commit, char *msg, size_t len)
{
	int err = 0;

	commit = commit && pl_out_complete(ds);
	/* a complete output was synced when its last batch was written */
	if (commit)
		err = commit_all(ds, msg, len);
	for (int i = 0; i < ds->n; i++) {
		out_free(ds->shards[i].out); /* closes and discards the file when it was not committed */
		ds->shards[i].out = NULL;
	}
	if ((!commit || err) && ds->outdir_created)
		rmdir(ds->cfg->output); /* only when empty: a directory this run made and filled with nothing */
	cli_cleanup_drop(ds->outdir_cleanup - 1);
	ds->outdir_cleanup = 0;
	return err;
}

int pl_writer_create(struct pl_writer **out, char *msg, size_t len)
{
	struct pl_writer *w = calloc(1, sizeof(*w));
	int ret;

	if (!w) {
		snprintf(msg, len, "run: output writer: ENOMEM: out of memory");
		return WSN_ENOMEM;
	}
	if ((ret = io_uring_queue_init(WRITER_QD, &w->ring, 0)) < 0) {
		snprintf(msg, len, "run: output writer: io_uring_setup failed: %s", strerror(-ret));
		free(w);
		return ret;
	}
	*out = w;
	return 0;
}

void pl_writer_destroy(struct pl_writer *w)
{
	if (!w)
		return;
	io_uring_queue_exit(&w->ring);
	free(w);
}

/* Write every piece at its offset through the ring, completing short writes. */
static int ring_write(struct pl_writer *w, int fd, struct piece *p, int n, const char *path, char *msg, size_t len)
{
	int left = 0, inflight = 0, retries = 0;

	for (int i = 0; i < n; i++)
		left += p[i].len > 0;
	while (left > 0) {
		struct io_uring_cqe *cqe;
		int ret;

		for (int i = 0; i < n; i++) {
			struct io_uring_sqe *sqe;

			if (!p[i].len || p[i].inflight || !(sqe = io_uring_get_sqe(&w->ring)))
				continue;
			io_uring_prep_write(sqe, fd, p[i].buf, (unsigned)(p[i].len < WRITE_CHUNK ? p[i].len : WRITE_CHUNK),
					    p[i].off);
			sqe->user_data = (uint64_t)i + 1;
			p[i].inflight = 1;
			inflight++;
		}
		ret = io_uring_submit_and_wait(&w->ring, 1);
		if (ret == -EINTR)
			continue;
		if (ret < 0) {
			snprintf(msg, len, "run: cannot write '%s': %s: io_uring_enter failed: %s", path,
				 wsn_err_name(ret), strerror(-ret));
			goto drain;
		}
		while (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
			uint64_t ud = cqe->user_data;
			int res = cqe->res;
			struct piece *q;

			io_uring_cqe_seen(&w->ring, cqe);
			if (!ud || ud > (uint64_t)n)
				continue;
			q = &p[ud - 1];
			q->inflight = 0;
			inflight--;
			if ((res == -EINTR || res == -EAGAIN) && retries++ < 16)
				continue;
			if (res <= 0) {
				int e = res < 0 ? res : -EIO;
				snprintf(msg, len, "run: cannot write '%s': %s: write of %zu bytes at offset %llu: %s", path,
					 wsn_err_name(e), q->len, (unsigned long long)q->off,
					 res < 0 ? strerror(-res) : "nothing written");
				goto drain;
			}
			q->buf += res;
			q->len -= (size_t)res;
			q->off += (uint64_t)res;
			if (!q->len)
				left--;
		}
	}
	return 0;
drain:
	/* the buffers stay the caller's only when nothing is in flight */
	while (inflight > 0) {
		struct io_uring_cqe *cqe;
		if (io_uring_wait_cqe(&w->ring, &cqe) < 0)
			break;
		io_uring_cqe_seen(&w->ring, cqe);
		inflight--;
	}
	return WSN_EIO;
}

int pl_out_write_batch(struct pl_dataset *ds, struct pl_writer *w, const struct pl_batch *b,
		       void *const host[PL_NOUT], char *msg, size_t len)
{
	const struct pl_shape *sh = &ds->shape;
	struct pl_out *o = ds->shards[b->shard].out;
	struct piece p[MAX_PIECES];
	unsigned char *vec[2] = { NULL, NULL };
	float *tmp = NULL;
	int n = 0, last, err = 0;

	if (!o) {
		snprintf(msg, len, "run: no output file for '%s'", ds->shards[b->shard].path);
		return WSN_EINVAL;
	}
	for (int i = 0; i < PL_NOUT; i++)
		if (sh->out[i] && sh->out_row[i])
			p[n++] = (struct piece){ host[i], pl_out_bytes(sh, i, b->rows),
						 o->off[i] + (uint64_t)b->row0 * sh->out_unit[i], 0 };
	if ((err = ring_write(w, o->file.fd, p, n, o->path, msg, len)) < 0)
		return err;
	if ((sh->out[PL_OUT_DW] || sh->out[PL_OUT_DB]) && !(tmp = malloc(sizeof(float) * (size_t)sh->hidden))) {
		snprintf(msg, len, "run: output '%s': ENOMEM: out of memory", o->path);
		return WSN_ENOMEM;
	}
	pthread_mutex_lock(&o->lock);
	for (int k = 0; k < 2; k++) {
		if (!sh->out[PL_OUT_DW + k])
			continue;
		wsn_dtype_convert(tmp, WSN_F32, host[PL_OUT_DW + k], sh->dt, (size_t)sh->hidden);
		for (int64_t j = 0; j < sh->hidden; j++)
			o->acc[k][j] += tmp[j];
	}
	last = ++o->written == o->nbatches;
	pthread_mutex_unlock(&o->lock);
	if (!last) {
		free(tmp);
		return 0;
	}
	/* every batch is in: the summed parameter gradients, in the dtype */
	n = 0;
	for (int k = 0; k < 2; k++) {
		if (!sh->out[PL_OUT_DW + k])
			continue;
		if (!(vec[k] = malloc(sh->out_unit[PL_OUT_DW + k]))) {
			snprintf(msg, len, "run: output '%s': ENOMEM: out of memory", o->path);
			err = WSN_ENOMEM;
			goto out;
		}
		for (int64_t j = 0; j < sh->hidden; j++)
			tmp[j] = (float)o->acc[k][j];
		wsn_dtype_convert(vec[k], sh->dt, tmp, WSN_F32, (size_t)sh->hidden);
		p[n++] = (struct piece){ vec[k], sh->out_unit[PL_OUT_DW + k], o->off[PL_OUT_DW + k], 0 };
	}
	if (n && (err = ring_write(w, o->file.fd, p, n, o->path, msg, len)) < 0)
		goto out;
	/* the file is whole: to disk now, and its sums freed (and, where descriptors are short, the file
	 * parked), so that a run over thousands of shards holds only what the outputs still written need */
	if (fdatasync(o->file.fd) < 0) {
		err = -errno;
		snprintf(msg, len, "run: cannot write '%s': %s: %s", o->path, wsn_err_name(err), strerror(-err));
		goto out;
	}
	pthread_mutex_lock(&o->lock);
	free(o->acc[0]);
	free(o->acc[1]);
	o->acc[0] = o->acc[1] = NULL;
	if (park_complete && (err = park(o)) < 0)
		snprintf(msg, len, "run: cannot write '%s': %s: cannot give the complete file a temporary name: %s",
			 o->path, wsn_err_name(err), strerror(-err));
	o->complete = !err;
	pthread_mutex_unlock(&o->lock);
out:
	free(vec[0]);
	free(vec[1]);
	free(tmp);
	return err;
}
