/* SPDX-License-Identifier: MIT */
/* launcher/cmd_run.c: `wsnorm run`: read a dataset through io_uring, run an op on a device, verify, report. */
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SHARDS CLI_MAX_SHARDS

struct run_opts {
	enum wsn_op op;
	int have_op;
	enum wsn_dtype dt;
	int have_dt;
	const char *device;
	const char *input;
	const char *output;
	int json;
	int threads;
	int64_t verify_rows; /* 0: no verification */
	struct wsn_reader_options rd;
	enum wsn_approach approach;
	int64_t raw_rows, raw_hidden; /* --shape for raw input */
	float eps;
	int have_eps;
	int inject_mismatch; /* corrupt one output element before verification (self-test) */
};

/* One input file and what it holds. */
struct shard {
	char *path;
	struct wsn_st_file *st; /* NULL for raw input */
	int64_t rows;
};

/* The dataset after its headers were read and checked against each other. */
struct dataset {
	struct shard *shards;
	int n;
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t hidden, max_rows, total_rows;
	int has_weight, has_bias;
	float eps;
};

/* Host (and, for GPUs, device) buffers for one batch of at most max_rows rows. */
struct buf {
	void *h, *d;  /* host and device copies; d == h on a host-memory device */
	size_t bytes;
};
struct buffers {
	struct buf x, dy, w, b, mean, rstd;     /* inputs (mean/rstd are outputs for forward ops) */
	struct buf y, dx, dw, db;               /* outputs */
};

/* What one run measured. */
struct stage {
	double bytes, seconds;
};
struct verdict {
	const char *name;
	double rel, max_abs, tol;
	int64_t nonfinite;
	int pass;
};
struct result {
	struct stage read, h2d, compute, d2h, write;
	int64_t rows;
	int verified_rows;
	struct verdict v[8];
	int nv;
	int pass;
	char ring_mode[64];
	struct wsn_read_stats rs;
	char plan[4096];
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s run --input PATH [OPTIONS]\n"
		"       %s run --demo [--device SPEC] [--dtype DT] [--json]\n"
		"Read the input tensors through io_uring, run the op on a device, verify sampled rows\n"
		"against the CPU reference, and report each stage's throughput.\n\n"
		"  --input PATH      a safetensors file, a directory of *.safetensors shards, or a raw\n"
		"                    file with --shape\n"
		"  --op OP           layernorm-fwd, layernorm-bwd, rmsnorm-fwd, rmsnorm-bwd (default: from\n"
		"                    the file's metadata)\n"
		"  --dtype DT        f32, f16, bf16: the dtype the input must have (default: the file's)\n"
		"  --device SPEC     cpu, cuda:N, amd:N or auto (default auto: the first GPU, else the CPU)\n"
		"  --output PATH     write the outputs (y, mean, rstd / dx, dweight, dbias) as safetensors;\n"
		"                    a directory when the input has several shards\n"
		"  --shape RxH       the input is a raw file of R x H elements of --dtype (forward ops)\n"
		"  --eps E           epsilon (default: the file's metadata, else %g)\n"
		"  --approach A      GPU kernel family: auto, multiwave or ws (default auto)\n"
		"  --threads N       CPU threads (default: all)\n"
		"  --verify-rows N   rows sampled for verification (default %d; 0 disables verification)\n"
		"  --no-verify       same as --verify-rows 0\n"
		"  --qd N            io_uring queue depth (default %d)\n"
		"  --bs SIZE         io_uring read size (default %u; K/M suffixes)\n"
		"  --direct MODE     O_DIRECT: auto, on or off (default auto)\n"
		"  --demo            generate a small input set in a temporary directory, run all four\n"
		"                    ops on the best device present, report, and remove the files\n"
		"  --inject-mismatch corrupt one output element before verification, to check that a\n"
		"                    mismatch is caught (exit status 1)\n"
		"  --json            machine-readable report on stdout\n"
		"  -h, --help        show this help\n"
		"\nExit status: 0 pass, 1 verification mismatch, 2 usage error, 3 runtime error.\n",
		cli_prog, cli_prog, (double)WSN_DEFAULT_EPS, CLI_DEFAULT_VERIFY_ROWS, WSN_READER_DEFAULT_QD,
		WSN_READER_DEFAULT_BS);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);
	return n >= m && !strcmp(s + n - m, suffix);
}

/* Expand the input path into a sorted list of files. */
static int list_inputs(const char *path, char ***out, int *n)
{
	struct stat st;
	char **names = NULL;
	int count = 0;
	DIR *d;
	struct dirent *e;

	if (stat(path, &st) < 0) {
		fprintf(stderr, "%s: run: cannot open input '%s': %s\n", cli_prog, path, strerror(errno));
		return EXIT_RUNTIME;
	}
	if (!S_ISDIR(st.st_mode)) {
		names = malloc(sizeof(*names));
		if (!names || !(names[0] = strdup(path)))
			goto oom;
		*out = names;
		*n = 1;
		return 0;
	}
	if (!(d = opendir(path))) {
		fprintf(stderr, "%s: run: cannot read directory '%s': %s\n", cli_prog, path, strerror(errno));
		return EXIT_RUNTIME;
	}
	while ((e = readdir(d))) {
		char **nn;
		if (!ends_with(e->d_name, ".safetensors"))
			continue;
		if (count == MAX_SHARDS) {
			fprintf(stderr, "%s: run: directory '%s' has more than %d shards\n", cli_prog, path, MAX_SHARDS);
			closedir(d);
			goto err;
		}
		if (!(nn = realloc(names, sizeof(*names) * (size_t)(count + 1))))
			break;
		names = nn;
		if (asprintf(&names[count], "%s/%s", path, e->d_name) < 0)
			break;
		count++;
	}
	closedir(d);
	if (!count) {
		fprintf(stderr, "%s: run: directory '%s' holds no *.safetensors files\n", cli_prog, path);
		goto err;
	}
	qsort(names, (size_t)count, sizeof(*names), cmp_str);
	*out = names;
	*n = count;
	return 0;
oom:
	fprintf(stderr, "%s: run: out of memory\n", cli_prog);
err:
	for (int i = 0; i < count; i++)
		free(names[i]);
	free(names);
	return EXIT_RUNTIME;
}

static void dataset_free(struct dataset *ds)
{
	for (int i = 0; i < ds->n; i++) {
		wsn_st_close(ds->shards[i].st);
		free(ds->shards[i].path);
	}
	free(ds->shards);
	memset(ds, 0, sizeof(*ds));
}

/* Rows of a [rows, hidden] (or [..., hidden]) entry. */
static int64_t entry_rows(const struct wsn_st_entry *e)
{
	int64_t r = 1;
	for (int d = 0; d + 1 < e->ndim; d++)
		r *= e->shape[d];
	return r;
}

static int bad_input(const char *path, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad_input(const char *path, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: run: %s: ", cli_prog, path);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_RUNTIME;
}

/* Check one shard's tensors against the op; fills rows, and the dataset's shape on the first shard. */
static int check_shard(struct dataset *ds, struct shard *sh, int first)
{
	const struct wsn_st_entry *x = wsn_st_find(sh->st, "x"), *e;
	struct cli_op_io io;
	int64_t hidden;

	if (!x)
		return bad_input(sh->path, "no tensor named 'x'");
	if (x->ndim < 1)
		return bad_input(sh->path, "tensor 'x' is a scalar");
	hidden = x->shape[x->ndim - 1];
	sh->rows = entry_rows(x);
	if (hidden < 1 || sh->rows < 1)
		return bad_input(sh->path, "tensor 'x' is empty");
	if (first) {
		ds->hidden = hidden;
		ds->dt = x->dtype;
		ds->has_weight = wsn_st_find(sh->st, "weight") != NULL;
		ds->has_bias = wsn_st_find(sh->st, "bias") != NULL;
	} else if (hidden != ds->hidden || x->dtype != ds->dt) {
		return bad_input(sh->path, "tensor 'x' is %lld wide %s, the first shard's is %lld wide %s",
				 (long long)hidden, wsn_dtype_name(x->dtype), (long long)ds->hidden,
				 wsn_dtype_name(ds->dt));
	}
	cli_op_io(ds->op, &io);
	if (io.dy) {
		if (!(e = wsn_st_find(sh->st, "dy")))
			return bad_input(sh->path, "%s needs a tensor named 'dy'", wsn_op_name(ds->op));
		if (e->dtype != ds->dt || e->ndim < 1 || e->shape[e->ndim - 1] != hidden || entry_rows(e) != sh->rows)
			return bad_input(sh->path, "tensor 'dy' does not match 'x' in shape or dtype");
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "rstd" : "mean";
		if (!io.stats_in || (!k && !io.mean))
			continue;
		if (!(e = wsn_st_find(sh->st, name)))
			return bad_input(sh->path, "%s needs a tensor named '%s'", wsn_op_name(ds->op), name);
		if (e->dtype != WSN_F32 || entry_rows(e) * (e->ndim ? e->shape[e->ndim - 1] : 1) != sh->rows)
			return bad_input(sh->path, "tensor '%s' must be f32 with one value per row of 'x' (%lld)", name,
					 (long long)sh->rows);
	}
	for (int k = 0; k < 2; k++) {
		const char *name = k ? "bias" : "weight";
		int want = k ? ds->has_bias : ds->has_weight;
		e = wsn_st_find(sh->st, name);
		if (!!e != want)
			return bad_input(sh->path, "tensor '%s' is %s here but %s in the first shard", name,
					 e ? "present" : "absent", want ? "present" : "absent");
		if (e && (e->dtype != ds->dt || entry_rows(e) * e->shape[e->ndim - 1] != hidden))
			return bad_input(sh->path, "tensor '%s' must be %lld %s values", name, (long long)hidden,
					 wsn_dtype_name(ds->dt));
	}
	return 0;
}

/* Open every shard's header and decide op, dtype and shape. */
static int dataset_open(const struct run_opts *o, struct wsn_reader *rd, struct dataset *ds)
{
	char **names = NULL;
	int n = 0, ret, err;

	memset(ds, 0, sizeof(*ds));
	if ((ret = list_inputs(o->input, &names, &n)))
		return ret;
	if (!(ds->shards = calloc((size_t)n, sizeof(*ds->shards)))) {
		for (int i = 0; i < n; i++)
			free(names[i]);
		free(names);
		fprintf(stderr, "%s: run: out of memory\n", cli_prog);
		return EXIT_RUNTIME;
	}
	ds->n = n;
	for (int i = 0; i < n; i++)
		ds->shards[i].path = names[i];
	free(names);
	ds->eps = o->have_eps ? o->eps : WSN_DEFAULT_EPS;
	if (o->raw_rows) {
		struct stat st;
		if (ds->n != 1)
			return bad_input(o->input, "--shape takes one raw file, not a directory");
		if (!o->have_op || wsn_op_is_backward(o->op))
			return bad_input(o->input, "raw input holds only x: give a forward --op");
		if (!o->have_dt)
			return bad_input(o->input, "raw input needs --dtype");
		if (stat(ds->shards[0].path, &st) == 0 &&
		    (uint64_t)st.st_size != (uint64_t)o->raw_rows * (uint64_t)o->raw_hidden * wsn_dtype_size(o->dt))
			return bad_input(o->input, "raw file has %lld bytes, --shape %lldx%lld of %s needs %llu",
					 (long long)st.st_size, (long long)o->raw_rows, (long long)o->raw_hidden,
					 wsn_dtype_name(o->dt),
					 (unsigned long long)o->raw_rows * (unsigned long long)o->raw_hidden *
						 wsn_dtype_size(o->dt));
		ds->op = o->op;
		ds->dt = o->dt;
		ds->hidden = o->raw_hidden;
		ds->shards[0].rows = ds->max_rows = ds->total_rows = o->raw_rows;
		return 0;
	}
	for (int i = 0; i < ds->n; i++) {
		struct shard *sh = &ds->shards[i];
		const char *meta_op;

		if ((err = wsn_st_open(sh->path, rd, &sh->st)) < 0)
			return cli_fail(err, "run: cannot read '%s'", sh->path);
		meta_op = wsn_st_metadata(sh->st, "wsnorm.op");
		if (i == 0) {
			if (o->have_op) {
				ds->op = o->op;
			} else if (meta_op) {
				if (wsn_op_parse(meta_op, &ds->op) < 0)
					return bad_input(sh->path, "metadata names an unknown op '%s'", meta_op);
			} else {
				return bad_input(sh->path, "the file does not say which op it is for: give --op");
			}
			if (!o->have_eps) {
				const char *e = wsn_st_metadata(sh->st, "wsnorm.eps");
				if (e && (cli_parse_f32(e, &ds->eps) || !(ds->eps > 0) || ds->eps > 1))
					return bad_input(sh->path, "metadata has a bad eps '%s'", e);
			}
		}
		if ((ret = check_shard(ds, sh, i == 0)))
			return ret;
		if (i == 0 && o->have_dt && o->dt != ds->dt)
			return bad_input(sh->path, "tensor 'x' is %s, --dtype asks for %s", wsn_dtype_name(ds->dt),
					 wsn_dtype_name(o->dt));
		if (sh->rows > ds->max_rows)
			ds->max_rows = sh->rows;
		ds->total_rows += sh->rows;
	}
	return 0;
}

static int buf_alloc(struct wsn_device *dev, int host_only, struct buf *b, size_t bytes)
{
	int err;

	b->bytes = bytes;
	if ((err = wsn_host_alloc(dev, bytes, &b->h)) < 0)
		return cli_fail(err, "run: cannot allocate %zu bytes of pinned host memory", bytes);
	if (host_only) {
		b->d = b->h;
		return 0;
	}
	if ((err = wsn_mem_alloc(dev, bytes, &b->d)) < 0)
		return cli_fail(err, "run: cannot allocate %zu bytes of device memory", bytes);
	return 0;
}

static void buf_free(struct wsn_device *dev, int host_only, struct buf *b)
{
	if (b->d && !host_only)
		wsn_mem_free(dev, b->d);
	if (b->h)
		wsn_host_free(dev, b->h);
	b->h = b->d = NULL;
}

#define ALL_BUFS(bs) { &(bs)->x, &(bs)->dy, &(bs)->w, &(bs)->b, &(bs)->mean, &(bs)->rstd, \
		       &(bs)->y, &(bs)->dx, &(bs)->dw, &(bs)->db }

static int buffers_alloc(struct wsn_device *dev, int host_only, const struct dataset *ds, struct buffers *bs)
{
	size_t es = wsn_dtype_size(ds->dt), mat = (size_t)ds->max_rows * (size_t)ds->hidden * es;
	size_t vec = (size_t)ds->hidden * es, stats = (size_t)ds->max_rows * 4;
	struct cli_op_io io;
	int ret = 0;

	cli_op_io(ds->op, &io);
	memset(bs, 0, sizeof(*bs));
	ret = buf_alloc(dev, host_only, &bs->x, mat);
	if (!ret && io.dy)
		ret = buf_alloc(dev, host_only, &bs->dy, mat);
	if (!ret && ds->has_weight)
		ret = buf_alloc(dev, host_only, &bs->w, vec);
	if (!ret && ds->has_bias && io.mean)
		ret = buf_alloc(dev, host_only, &bs->b, vec);
	if (!ret && io.mean)
		ret = buf_alloc(dev, host_only, &bs->mean, stats);
	if (!ret)
		ret = buf_alloc(dev, host_only, &bs->rstd, stats);
	if (!ret && !io.dy)
		ret = buf_alloc(dev, host_only, &bs->y, mat);
	if (!ret && io.dy)
		ret = buf_alloc(dev, host_only, &bs->dx, mat);
	if (!ret && io.dy && ds->has_weight)
		ret = buf_alloc(dev, host_only, &bs->dw, vec);
	if (!ret && io.dy && ds->has_bias && io.mean)
		ret = buf_alloc(dev, host_only, &bs->db, vec);
	return ret;
}

static void buffers_free(struct wsn_device *dev, int host_only, struct buffers *bs)
{
	struct buf *all[] = ALL_BUFS(bs);
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		buf_free(dev, host_only, all[i]);
}

/* Build the op's arguments over buffer pointers (host side when host != 0). */
static void make_args(const struct dataset *ds, const struct buffers *bs, int64_t rows, int host,
		      enum wsn_mem mem, struct wsn_args *a)
{
	struct cli_op_io io;
#define P(b) (host ? (b).h : (b).d)
	cli_op_io(ds->op, &io);
	memset(a, 0, sizeof(*a));
	wsn_tensor_2d(&a->x, P(bs->x), ds->dt, mem, rows, ds->hidden);
	if (bs->w.h)
		wsn_tensor_1d(&a->weight, P(bs->w), ds->dt, mem, ds->hidden);
	if (bs->b.h)
		wsn_tensor_1d(&a->bias, P(bs->b), ds->dt, mem, ds->hidden);
	if (bs->mean.h)
		wsn_tensor_1d(&a->mean, P(bs->mean), WSN_F32, mem, rows);
	wsn_tensor_1d(&a->rstd, P(bs->rstd), WSN_F32, mem, rows);
	if (io.dy) {
		wsn_tensor_2d(&a->dy, P(bs->dy), ds->dt, mem, rows, ds->hidden);
		wsn_tensor_2d(&a->dx, P(bs->dx), ds->dt, mem, rows, ds->hidden);
		if (bs->dw.h)
			wsn_tensor_1d(&a->dweight, P(bs->dw), ds->dt, mem, ds->hidden);
		if (bs->db.h)
			wsn_tensor_1d(&a->dbias, P(bs->db), ds->dt, mem, ds->hidden);
	} else {
		wsn_tensor_2d(&a->y, P(bs->y), ds->dt, mem, rows, ds->hidden);
	}
#undef P
}

/* Read the shard's inputs into the host buffers. */
static int read_shard(const struct dataset *ds, struct shard *sh, struct wsn_reader *rd,
		      const struct buffers *bs, struct result *res)
{
	static const char *const names[] = { "x", "dy", "weight", "bias", "mean", "rstd" };
	const struct buf *bufs[] = { &bs->x, &bs->dy, &bs->w, &bs->b, &bs->mean, &bs->rstd };
	struct cli_op_io io;
	double t0 = cli_now();
	int err;

	cli_op_io(ds->op, &io);
	if (!sh->st) { /* raw: x only */
		struct wsn_tensor t;
		wsn_tensor_2d(&t, bs->x.h, ds->dt, WSN_MEM_HOST, sh->rows, ds->hidden);
		if ((err = wsn_raw_read(sh->path, rd, 0, &t)) < 0)
			return cli_fail(err, "run: cannot read '%s'", sh->path);
		res->read.bytes += (double)wsn_tensor_nbytes(&t);
		res->read.seconds += cli_now() - t0;
		return 0;
	}
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct wsn_st_entry *e;
		if (!bufs[i]->h)
			continue;
		if (i >= 4 && !io.stats_in)
			continue; /* mean/rstd are outputs of forward ops */
		if (!(e = wsn_st_find(sh->st, names[i])))
			continue;
		if ((err = wsn_st_read(sh->st, names[i], bufs[i]->h, bufs[i]->bytes)) < 0)
			return cli_fail(err, "run: cannot read tensor '%s' of '%s'", names[i], sh->path);
		res->read.bytes += (double)e->nbytes;
	}
	res->read.seconds += cli_now() - t0;
	return 0;
}

/* Copy the shard's inputs host -> device (no-op on a host-memory device); events time it. */
static int copy_inputs(struct wsn_device *dev, int host_only, const struct dataset *ds, const struct buffers *bs,
		       int64_t rows, struct wsn_stream *s, struct wsn_event *e0, struct wsn_event *e1,
		       struct result *res)
{
	struct cli_op_io io;
	const struct buf *in[6];
	size_t sz[6], es = wsn_dtype_size(ds->dt);
	int n = 0, err;
	float ms = 0;
	double bytes = 0;

	if (host_only)
		return 0;
	cli_op_io(ds->op, &io);
	in[n] = &bs->x, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
	if (io.dy)
		in[n] = &bs->dy, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
	if (bs->w.h)
		in[n] = &bs->w, sz[n++] = bs->w.bytes;
	if (bs->b.h)
		in[n] = &bs->b, sz[n++] = bs->b.bytes;
	if (io.stats_in) {
		if (bs->mean.h)
			in[n] = &bs->mean, sz[n++] = (size_t)rows * 4;
		in[n] = &bs->rstd, sz[n++] = (size_t)rows * 4;
	}
	if ((err = wsn_event_record(e0, s)) < 0)
		return cli_fail(err, "run: event");
	for (int i = 0; i < n; i++) {
		if ((err = wsn_memcpy(dev, in[i]->d, in[i]->h, sz[i], WSN_COPY_H2D, s)) < 0)
			return cli_fail(err, "run: host-to-device copy");
		bytes += (double)sz[i];
	}
	if ((err = wsn_event_record(e1, s)) < 0 || (err = wsn_event_sync(e1)) < 0 ||
	    (err = wsn_event_elapsed(e0, e1, &ms)) < 0)
		return cli_fail(err, "run: host-to-device copy");
	res->h2d.bytes += bytes;
	res->h2d.seconds += ms * 1e-3;
	return 0;
}

/* Poison the outputs so an element the kernel does not write fails verification. */
static int poison_outputs(struct wsn_device *dev, int host_only, const struct dataset *ds, const struct buffers *bs,
			  int64_t rows, struct wsn_stream *s)
{
	struct cli_op_io io;
	const struct buf *out[5];
	size_t sz[5], es = wsn_dtype_size(ds->dt);
	int n = 0, err;

	cli_op_io(ds->op, &io);
	if (!io.dy) {
		out[n] = &bs->y, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
		if (bs->mean.h)
			out[n] = &bs->mean, sz[n++] = (size_t)rows * 4;
		out[n] = &bs->rstd, sz[n++] = (size_t)rows * 4;
	} else {
		out[n] = &bs->dx, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
		if (bs->dw.h)
			out[n] = &bs->dw, sz[n++] = bs->dw.bytes;
		if (bs->db.h)
			out[n] = &bs->db, sz[n++] = bs->db.bytes;
	}
	for (int i = 0; i < n; i++) {
		if (host_only)
			memset(out[i]->h, 0xff, sz[i]); /* all-ones bits: NaN in f32, f16 and bf16 */
		else if ((err = wsn_mem_set(dev, out[i]->d, 0xff, sz[i], s)) < 0)
			return cli_fail(err, "run: poisoning the outputs");
	}
	return 0;
}

static int copy_outputs(struct wsn_device *dev, int host_only, const struct dataset *ds, const struct buffers *bs,
			int64_t rows, struct wsn_stream *s, struct result *res)
{
	struct cli_op_io io;
	const struct buf *out[5];
	size_t sz[5], es = wsn_dtype_size(ds->dt);
	int n = 0, err;
	double t0 = cli_now(), bytes = 0;

	if (host_only)
		return 0;
	cli_op_io(ds->op, &io);
	if (!io.dy) {
		out[n] = &bs->y, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
		if (bs->mean.h)
			out[n] = &bs->mean, sz[n++] = (size_t)rows * 4;
		out[n] = &bs->rstd, sz[n++] = (size_t)rows * 4;
	} else {
		out[n] = &bs->dx, sz[n++] = (size_t)rows * (size_t)ds->hidden * es;
		if (bs->dw.h)
			out[n] = &bs->dw, sz[n++] = bs->dw.bytes;
		if (bs->db.h)
			out[n] = &bs->db, sz[n++] = bs->db.bytes;
	}
	for (int i = 0; i < n; i++) {
		if ((err = wsn_memcpy(dev, out[i]->h, out[i]->d, sz[i], WSN_COPY_D2H, s)) < 0)
			return cli_fail(err, "run: device-to-host copy");
		bytes += (double)sz[i];
	}
	if ((err = wsn_stream_sync(dev, s)) < 0)
		return cli_fail(err, "run: device-to-host copy");
	res->d2h.bytes += bytes;
	res->d2h.seconds += cli_now() - t0;
	return 0;
}

/* Relative-error tolerance for outputs of dtype dt against the CPU reference. */
static double tolerance(enum wsn_dtype dt)
{
	return dt == WSN_F32 ? 1e-5 : dt == WSN_F16 ? 5e-3 : 1e-2;
}

static void add_verdict(struct result *res, const char *name, const struct wsn_compare *c, double tol)
{
	struct verdict *v;

	if (res->nv >= (int)(sizeof(res->v) / sizeof(res->v[0])))
		return;
	v = &res->v[res->nv++];
	v->name = name;
	v->rel = c->rel_l2;
	v->max_abs = c->max_abs;
	v->nonfinite = c->nonfinite;
	v->tol = tol;
	v->pass = c->nonfinite == 0 && c->rel_l2 <= tol;
	if (!v->pass)
		res->pass = 0;
}

/* Copy rows idx[0..n) of a [rows, width] host matrix of element size es into dst. */
static void gather(void *dst, const void *src, const int64_t *idx, int n, int64_t width, size_t es)
{
	for (int i = 0; i < n; i++)
		memcpy((char *)dst + (size_t)i * (size_t)width * es,
		       (const char *)src + (size_t)idx[i] * (size_t)width * es, (size_t)width * es);
}

/*
 * Verify: sampled rows of y/dx (and the stats) against the CPU reference computed on those rows
 * alone; dweight/dbias, which depend on every row, against the CPU reference over all rows.
 */
static int verify_shard(const struct run_opts *o, const struct dataset *ds, const struct buffers *bs,
			int64_t rows, struct result *res)
{
	struct wsn_device *cpu = NULL;
	struct wsn_plan *plan = NULL;
	struct wsn_plan_options po;
	struct cli_op_io io;
	size_t es = wsn_dtype_size(ds->dt);
	int n = (int)(o->verify_rows < rows ? o->verify_rows : rows), ret = EXIT_RUNTIME, err;
	int64_t *idx = NULL;
	struct buffers ref, got;
	struct wsn_args a;

	memset(&ref, 0, sizeof(ref));
	memset(&got, 0, sizeof(got));
	cli_op_io(ds->op, &io);
	if ((ret = cli_open_device("cpu", o->threads, &cpu)))
		return ret;
	ret = EXIT_RUNTIME;
	wsn_plan_options_init(&po, ds->op);
	po.eps = ds->eps;
	po.has_weight = ds->has_weight;
	po.has_bias = ds->has_bias;
	if (!(idx = malloc(sizeof(*idx) * (size_t)n)))
		goto oom;
	for (int i = 0; i < n; i++) /* evenly spaced, first and last included */
		idx[i] = n == 1 ? 0 : (int64_t)((double)i * (double)(rows - 1) / (double)(n - 1) + 0.5);

	/* sampled rows: gather inputs, run the reference, gather the device outputs */
	{
		struct dataset sub = *ds;
		sub.max_rows = n;
		if (buffers_alloc(cpu, 1, &sub, &ref) || buffers_alloc(cpu, 1, &sub, &got))
			goto out;
	}
	gather(ref.x.h, bs->x.h, idx, n, ds->hidden, es);
	if (io.dy)
		gather(ref.dy.h, bs->dy.h, idx, n, ds->hidden, es);
	if (io.stats_in) {
		if (io.mean)
			gather(ref.mean.h, bs->mean.h, idx, n, 1, 4);
		gather(ref.rstd.h, bs->rstd.h, idx, n, 1, 4);
	}
	if (ref.w.h)
		memcpy(ref.w.h, bs->w.h, ref.w.bytes);
	if (ref.b.h)
		memcpy(ref.b.h, bs->b.h, ref.b.bytes);
	if ((err = wsn_plan_create(cpu, ds->op, n, ds->hidden, ds->dt, &po, &plan)) < 0) {
		cli_fail(err, "run: verification plan");
		goto out;
	}
	make_args(ds, &ref, n, 1, WSN_MEM_HOST, &a);
	a.dweight.data = a.dbias.data = NULL; /* over sampled rows they mean nothing */
	if ((err = wsn_plan_execute(plan, &a, NULL)) < 0) {
		cli_fail(err, "run: CPU reference");
		goto out;
	}
	{
		struct wsn_tensor tg, tr;
		struct wsn_compare c;
		if (!io.dy) {
			gather(got.y.h, bs->y.h, idx, n, ds->hidden, es);
			wsn_tensor_2d(&tg, got.y.h, ds->dt, WSN_MEM_HOST, n, ds->hidden);
			wsn_tensor_2d(&tr, ref.y.h, ds->dt, WSN_MEM_HOST, n, ds->hidden);
			wsn_tensor_compare(&tg, &tr, &c);
			add_verdict(res, "y", &c, tolerance(ds->dt));
			for (int k = 0; k < 2; k++) {
				const struct buf *gb = k ? &bs->rstd : &bs->mean, *rb = k ? &ref.rstd : &ref.mean;
				if (!gb->h)
					continue;
				gather(k ? got.rstd.h : got.mean.h, gb->h, idx, n, 1, 4);
				wsn_tensor_1d(&tg, k ? got.rstd.h : got.mean.h, WSN_F32, WSN_MEM_HOST, n);
				wsn_tensor_1d(&tr, rb->h, WSN_F32, WSN_MEM_HOST, n);
				wsn_tensor_compare(&tg, &tr, &c);
				add_verdict(res, k ? "rstd" : "mean", &c, 1e-5);
			}
		} else {
			gather(got.dx.h, bs->dx.h, idx, n, ds->hidden, es);
			wsn_tensor_2d(&tg, got.dx.h, ds->dt, WSN_MEM_HOST, n, ds->hidden);
			wsn_tensor_2d(&tr, ref.dx.h, ds->dt, WSN_MEM_HOST, n, ds->hidden);
			wsn_tensor_compare(&tg, &tr, &c);
			add_verdict(res, "dx", &c, tolerance(ds->dt));
		}
	}
	res->verified_rows += n;

	/* parameter gradients over all rows */
	if (io.dy && (bs->dw.h || bs->db.h)) {
		struct wsn_plan *full = NULL;
		struct buffers fo;

		memset(&fo, 0, sizeof(fo));
		if ((err = wsn_plan_create(cpu, ds->op, rows, ds->hidden, ds->dt, &po, &full)) < 0) {
			cli_fail(err, "run: verification plan");
			goto out;
		}
		if (buf_alloc(cpu, 1, &fo.dx, (size_t)rows * (size_t)ds->hidden * es) ||
		    (bs->dw.h && buf_alloc(cpu, 1, &fo.dw, bs->dw.bytes)) ||
		    (bs->db.h && buf_alloc(cpu, 1, &fo.db, bs->db.bytes))) {
			buffers_free(cpu, 1, &fo);
			wsn_plan_destroy(full);
			goto out;
		}
		make_args(ds, bs, rows, 1, WSN_MEM_HOST, &a);
		wsn_tensor_2d(&a.dx, fo.dx.h, ds->dt, WSN_MEM_HOST, rows, ds->hidden);
		if (fo.dw.h)
			wsn_tensor_1d(&a.dweight, fo.dw.h, ds->dt, WSN_MEM_HOST, ds->hidden);
		if (fo.db.h)
			wsn_tensor_1d(&a.dbias, fo.db.h, ds->dt, WSN_MEM_HOST, ds->hidden);
		err = wsn_plan_execute(full, &a, NULL);
		if (err >= 0) {
			struct wsn_tensor tg, tr;
			struct wsn_compare c;
			for (int k = 0; k < 2; k++) {
				const struct buf *gb = k ? &bs->db : &bs->dw, *rb = k ? &fo.db : &fo.dw;
				if (!gb->h)
					continue;
				wsn_tensor_1d(&tg, gb->h, ds->dt, WSN_MEM_HOST, ds->hidden);
				wsn_tensor_1d(&tr, rb->h, ds->dt, WSN_MEM_HOST, ds->hidden);
				wsn_tensor_compare(&tg, &tr, &c);
				add_verdict(res, k ? "dbias" : "dweight", &c, tolerance(ds->dt));
			}
		}
		buffers_free(cpu, 1, &fo);
		wsn_plan_destroy(full);
		if (err < 0) {
			cli_fail(err, "run: CPU reference");
			goto out;
		}
	}
	ret = 0;
	goto out;
oom:
	fprintf(stderr, "%s: run: out of memory\n", cli_prog);
out:
	buffers_free(cpu, 1, &ref);
	buffers_free(cpu, 1, &got);
	free(idx);
	wsn_plan_destroy(plan);
	wsn_device_close(cpu);
	return ret;
}

/* Write the shard's outputs as safetensors (temporary name + rename inside wsn_st_write). */
static int write_outputs(const struct run_opts *o, const struct dataset *ds, const struct shard *sh,
			 const struct buffers *bs, int64_t rows, struct result *res)
{
	struct wsn_tensor t[4];
	struct wsn_named_tensor list[4];
	struct cli_op_io io;
	char path[4096];
	const char *meta[] = { "wsnorm.op", wsn_op_name(ds->op), NULL };
	double t0 = cli_now();
	int n = 0, err;

	cli_op_io(ds->op, &io);
	if (ds->n > 1) {
		const char *base = strrchr(sh->path, '/');
		if (mkdir(o->output, 0777) < 0 && errno != EEXIST) {
			fprintf(stderr, "%s: run: cannot create output directory '%s': %s\n", cli_prog, o->output,
				strerror(errno));
			return EXIT_RUNTIME;
		}
		if (snprintf(path, sizeof(path), "%s/%s", o->output, base ? base + 1 : sh->path) >= (int)sizeof(path))
			return bad_input(o->output, "output path too long");
	} else {
		snprintf(path, sizeof(path), "%s", o->output);
	}
	if (!io.dy) {
		wsn_tensor_2d(&t[n], bs->y.h, ds->dt, WSN_MEM_HOST, rows, ds->hidden);
		list[n] = (struct wsn_named_tensor){ "y", &t[n] }, n++;
		if (bs->mean.h) {
			wsn_tensor_1d(&t[n], bs->mean.h, WSN_F32, WSN_MEM_HOST, rows);
			list[n] = (struct wsn_named_tensor){ "mean", &t[n] }, n++;
		}
		wsn_tensor_1d(&t[n], bs->rstd.h, WSN_F32, WSN_MEM_HOST, rows);
		list[n] = (struct wsn_named_tensor){ "rstd", &t[n] }, n++;
	} else {
		wsn_tensor_2d(&t[n], bs->dx.h, ds->dt, WSN_MEM_HOST, rows, ds->hidden);
		list[n] = (struct wsn_named_tensor){ "dx", &t[n] }, n++;
		if (bs->dw.h) {
			wsn_tensor_1d(&t[n], bs->dw.h, ds->dt, WSN_MEM_HOST, ds->hidden);
			list[n] = (struct wsn_named_tensor){ "dweight", &t[n] }, n++;
		}
		if (bs->db.h) {
			wsn_tensor_1d(&t[n], bs->db.h, ds->dt, WSN_MEM_HOST, ds->hidden);
			list[n] = (struct wsn_named_tensor){ "dbias", &t[n] }, n++;
		}
	}
	if ((err = wsn_st_write(path, list, n, meta)) < 0)
		return cli_fail(err, "run: cannot write '%s'", path);
	for (int i = 0; i < n; i++)
		res->write.bytes += (double)wsn_tensor_nbytes(&t[i]);
	res->write.seconds += cli_now() - t0;
	return 0;
}

/* Run the whole dataset on dev. */
static int run_dataset(const struct run_opts *o, struct wsn_device *dev, struct wsn_reader *rd,
		       struct dataset *ds, struct result *res)
{
	struct wsn_device_info di;
	struct wsn_plan_options po;
	struct wsn_plan *plan = NULL;
	struct wsn_stream *s = NULL;
	struct wsn_event *e0 = NULL, *e1 = NULL;
	struct buffers bs;
	struct cli_progress prog;
	int host_only, ret = EXIT_RUNTIME, err;

	memset(&bs, 0, sizeof(bs));
	wsn_device_info(dev, &di);
	host_only = di.exec_mem == WSN_MEM_HOST;
	res->pass = 1;
	wsn_plan_options_init(&po, ds->op);
	po.eps = ds->eps;
	po.has_weight = ds->has_weight;
	po.has_bias = ds->has_bias;
	po.approach = o->approach;
	po.threads = o->threads;
	if ((err = wsn_plan_create(dev, ds->op, ds->max_rows, ds->hidden, ds->dt, &po, &plan)) < 0) {
		cli_fail(err, "run: cannot plan %s %s hidden %lld on %s", wsn_op_name(ds->op), wsn_dtype_name(ds->dt),
			 (long long)ds->hidden, di.spec);
		goto out;
	}
	wsn_plan_describe(plan, res->plan, sizeof(res->plan));
	if ((err = wsn_stream_create(dev, &s)) < 0 || (err = wsn_event_create(dev, &e0)) < 0 ||
	    (err = wsn_event_create(dev, &e1)) < 0) {
		cli_fail(err, "run: streams and events on %s", di.spec);
		goto out;
	}
	if ((ret = buffers_alloc(dev, host_only, ds, &bs)))
		goto out;
	ret = EXIT_RUNTIME;
	cli_progress_start(&prog);
	for (int i = 0; i < ds->n; i++) {
		struct shard *sh = &ds->shards[i];
		struct wsn_args a;
		float ms = 0;

		cli_progress_update(&prog, "shard %d/%d: %lld rows so far", i + 1, ds->n, (long long)res->rows);
		if ((ret = read_shard(ds, sh, rd, &bs, res)) ||
		    (ret = copy_inputs(dev, host_only, ds, &bs, sh->rows, s, e0, e1, res)) ||
		    (ret = poison_outputs(dev, host_only, ds, &bs, sh->rows, s)))
			goto out;
		ret = EXIT_RUNTIME;
		make_args(ds, &bs, sh->rows, 0, di.exec_mem, &a);
		if ((err = wsn_event_record(e0, s)) < 0 || (err = wsn_plan_execute(plan, &a, s)) < 0 ||
		    (err = wsn_event_record(e1, s)) < 0 || (err = wsn_event_sync(e1)) < 0 ||
		    (err = wsn_event_elapsed(e0, e1, &ms)) < 0) {
			cli_fail(err, "run: %s on %s, shard '%s'", wsn_op_name(ds->op), di.spec, sh->path);
			goto out;
		}
		res->compute.seconds += ms * 1e-3;
		res->compute.bytes += (double)wsn_op_min_bytes(ds->op, sh->rows, ds->hidden, ds->dt, ds->has_weight,
								ds->has_bias);
		if ((ret = copy_outputs(dev, host_only, ds, &bs, sh->rows, s, res)))
			goto out;
		if (o->inject_mismatch) {
			/* the first row is always sampled: make its first output element wrong */
			float bad = 1000.0f;
			wsn_dtype_convert(wsn_op_is_backward(ds->op) ? bs.dx.h : bs.y.h, ds->dt, &bad, WSN_F32, 1);
		}
		if (o->verify_rows > 0 && (ret = verify_shard(o, ds, &bs, sh->rows, res)))
			goto out;
		if (o->output && (ret = write_outputs(o, ds, sh, &bs, sh->rows, res)))
			goto out;
		res->rows += sh->rows;
	}
	cli_progress_end(&prog);
	snprintf(res->ring_mode, sizeof(res->ring_mode), "%s", wsn_reader_ring_mode(rd));
	wsn_reader_stats(rd, &res->rs);
	ret = o->verify_rows > 0 && !res->pass ? EXIT_MISMATCH : EXIT_PASS;
out:
	buffers_free(dev, host_only, &bs);
	wsn_event_destroy(e0);
	wsn_event_destroy(e1);
	wsn_stream_destroy(s);
	wsn_plan_destroy(plan);
	return ret;
}

static json_t *stage_json(const struct stage *st)
{
	json_t *o = json_object();
	json_object_set_new(o, "bytes", json_integer((json_int_t)st->bytes));
	json_object_set_new(o, "seconds", cli_json_real(st->seconds));
	json_object_set_new(o, "gbs", cli_json_real(st->seconds > 0 ? st->bytes / st->seconds / 1e9 : 0));
	return o;
}

static json_t *result_json(const struct dataset *ds, const struct wsn_device_info *di, const struct result *r,
			   int verified, int status)
{
	json_t *o = json_object(), *st = json_object(), *v = json_object(), *vt = json_object();

	json_object_set_new(o, "op", json_string(wsn_op_name(ds->op)));
	json_object_set_new(o, "dtype", json_string(wsn_dtype_name(ds->dt)));
	json_object_set_new(o, "rows", json_integer(r->rows));
	json_object_set_new(o, "hidden", json_integer(ds->hidden));
	json_object_set_new(o, "shards", json_integer(ds->n));
	json_object_set_new(o, "device", json_string(di->spec));
	json_object_set_new(o, "device_name", json_string(di->name));
	json_object_set_new(st, "read", stage_json(&r->read));
	json_object_set_new(st, "h2d", stage_json(&r->h2d));
	{
		json_t *c = stage_json(&r->compute);
		json_object_set_new(c, "rows_per_s", cli_json_real(r->compute.seconds > 0 ? (double)r->rows /
									   r->compute.seconds : 0));
		json_object_set_new(st, "compute", c);
	}
	json_object_set_new(st, "d2h", stage_json(&r->d2h));
	json_object_set_new(st, "write", stage_json(&r->write));
	json_object_set_new(o, "stages", st);
	{
		json_t *io = json_object();
		json_object_set_new(io, "ring_mode", json_string(r->ring_mode));
		json_object_set_new(io, "reads", json_integer((json_int_t)r->rs.reads));
		json_object_set_new(io, "short_reads", json_integer((json_int_t)r->rs.short_reads));
		json_object_set_new(io, "direct_files", json_integer((json_int_t)r->rs.direct_files));
		json_object_set_new(io, "buffered_files", json_integer((json_int_t)r->rs.buffered_files));
		json_object_set_new(o, "io", io);
	}
	json_object_set_new(v, "enabled", json_boolean(verified));
	json_object_set_new(v, "rows", json_integer(r->verified_rows));
	for (int i = 0; i < r->nv; i++) {
		json_t *t = json_object();
		json_object_set_new(t, "rel_l2", cli_json_real(r->v[i].rel));
		json_object_set_new(t, "max_abs", cli_json_real(r->v[i].max_abs));
		json_object_set_new(t, "tolerance", json_real(r->v[i].tol));
		json_object_set_new(t, "nonfinite", json_integer(r->v[i].nonfinite));
		json_object_set_new(t, "pass", json_boolean(r->v[i].pass));
		json_object_set_new(vt, r->v[i].name, t);
	}
	json_object_set_new(v, "tensors", vt);
	json_object_set_new(v, "pass", json_boolean(r->pass));
	json_object_set_new(o, "verify", v);
	json_object_set_new(o, "plan", json_string(r->plan));
	json_object_set_new(o, "result", json_string(status == EXIT_PASS ? "pass" : status == EXIT_MISMATCH ?
									   "mismatch" : "error"));
	return o;
}

static void result_text(const struct dataset *ds, const struct wsn_device_info *di, const struct result *r,
			int verified, int status)
{
	char b1[64];

	printf("%s %s: %lld rows x %lld, %d shard%s, on %s (%s)\n", wsn_op_name(ds->op), wsn_dtype_name(ds->dt),
	       (long long)r->rows, (long long)ds->hidden, ds->n, ds->n == 1 ? "" : "s", di->spec, di->name);
	if (cli_verbose > 0)
		printf("%s", r->plan);
	printf("  read     %10.1f MB in %8.3f ms  %s  (io_uring %s; %llu reads; %s)\n", r->read.bytes / 1e6,
	       r->read.seconds * 1e3, cli_rate(r->read.bytes, r->read.seconds, b1, sizeof(b1)), r->ring_mode,
	       (unsigned long long)r->rs.reads,
	       !r->rs.buffered_files ? "O_DIRECT" : !r->rs.direct_files ? "buffered" : "O_DIRECT and buffered");
	if (r->h2d.bytes > 0)
		printf("  h2d      %10.1f MB in %8.3f ms  %s\n", r->h2d.bytes / 1e6, r->h2d.seconds * 1e3,
		       cli_rate(r->h2d.bytes, r->h2d.seconds, b1, sizeof(b1)));
	printf("  compute  %10.1f MB in %8.3f ms  %s  %.3g rows/s\n", r->compute.bytes / 1e6, r->compute.seconds * 1e3,
	       cli_rate(r->compute.bytes, r->compute.seconds, b1, sizeof(b1)),
	       r->compute.seconds > 0 ? (double)r->rows / r->compute.seconds : 0.0);
	if (r->d2h.bytes > 0)
		printf("  d2h      %10.1f MB in %8.3f ms  %s\n", r->d2h.bytes / 1e6, r->d2h.seconds * 1e3,
		       cli_rate(r->d2h.bytes, r->d2h.seconds, b1, sizeof(b1)));
	if (r->write.bytes > 0)
		printf("  write    %10.1f MB in %8.3f ms  %s\n", r->write.bytes / 1e6, r->write.seconds * 1e3,
		       cli_rate(r->write.bytes, r->write.seconds, b1, sizeof(b1)));
	if (verified) {
		printf("  verify   %d sampled rows against the CPU reference:", r->verified_rows);
		for (int i = 0; i < r->nv; i++)
			printf(" %s %.2g%s", r->v[i].name, r->v[i].rel, r->v[i].pass ? "" : " (FAIL)");
		printf("\n");
	} else {
		printf("  verify   skipped\n");
	}
	printf("  result   %s\n", status == EXIT_PASS ? (verified ? "PASS" : "done (not verified)") :
			       status == EXIT_MISMATCH ? "FAIL: verification mismatch" : "ERROR");
}

/* One run over an input path; prints its report unless out_json collects it. */
static int run_one(const struct run_opts *o, json_t *collect)
{
	struct wsn_reader *rd = NULL;
	struct wsn_device *dev = NULL;
	struct wsn_device_info di;
	struct dataset ds;
	struct result *res = calloc(1, sizeof(*res));
	int ret, err;

	memset(&ds, 0, sizeof(ds));
	if (!res) {
		fprintf(stderr, "%s: run: out of memory\n", cli_prog);
		return EXIT_RUNTIME;
	}
	if ((err = wsn_reader_create(&o->rd, &rd)) < 0) {
		ret = cli_fail(err, "run: cannot set up the io_uring reader");
		goto out;
	}
	if ((ret = dataset_open(o, rd, &ds)))
		goto out;
	if ((ret = cli_open_device(o->device, o->threads, &dev)))
		goto out;
	wsn_device_info(dev, &di);
	ret = run_dataset(o, dev, rd, &ds, res);
	if (ret == EXIT_PASS || ret == EXIT_MISMATCH) {
		if (collect)
			json_array_append_new(collect, result_json(&ds, &di, res, o->verify_rows > 0, ret));
		else if (o->json)
			cli_json_print(result_json(&ds, &di, res, o->verify_rows > 0, ret));
		else
			result_text(&ds, &di, res, o->verify_rows > 0, ret);
	}
out:
	dataset_free(&ds);
	wsn_device_close(dev);
	wsn_reader_destroy(rd);
	free(res);
	return ret;
}

static int rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4096];

	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) < (int)sizeof(p))
				unlink(p);
		}
		closedir(d);
	}
	return rmdir(dir);
}

/* The demo: all four ops on a small generated input set, on the best device present. */
static int run_demo(struct run_opts *o)
{
	const char *tmp = getenv("TMPDIR");
	struct wsn_device *dev = NULL;
	struct wsn_device_info di;
	char dir[4096], path[4200];
	json_t *runs = o->json ? json_array() : NULL;
	int64_t rows, hidden;
	int ret = EXIT_PASS, r, verbose = cli_verbose;
	enum wsn_dtype dt = o->have_dt ? o->dt : WSN_BF16;

	if ((r = cli_open_device(o->device, o->threads, &dev)))
		return r;
	wsn_device_info(dev, &di);
	wsn_device_close(dev);
	/* a GPU gets an input big enough to fill it; the CPU one that finishes in a moment */
	rows = di.exec_mem == WSN_MEM_HOST ? 2048 : 16384;
	hidden = di.exec_mem == WSN_MEM_HOST ? 1024 : 4096;
	snprintf(dir, sizeof(dir), "%s/wsnorm-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		fprintf(stderr, "%s: run --demo: cannot create a temporary directory in %s: %s\n", cli_prog,
			tmp && *tmp ? tmp : "/tmp", strerror(errno));
		json_decref(runs);
		return EXIT_RUNTIME;
	}
	if (!o->json)
		printf("wsnorm demo: %lld x %lld %s inputs in %s, device %s (%s)\n\n", (long long)rows,
		       (long long)hidden, wsn_dtype_name(dt), dir, di.spec, di.name);
	for (int op = 0; op < WSN_OP_COUNT; op++) {
		struct run_opts one = *o;

		snprintf(path, sizeof(path), "%s/%s.safetensors", dir, wsn_op_name((enum wsn_op)op));
		cli_verbose = -1; /* the generator's notes are not the demo's business */
		r = cli_gen_file((enum wsn_op)op, dt, rows, hidden, CLI_DEFAULT_SEED + (uint64_t)op, path);
		cli_verbose = verbose;
		if (r) {
			ret = r;
			break;
		}
		one.input = path;
		one.op = (enum wsn_op)op;
		one.have_op = 1;
		r = run_one(&one, runs);
		if (!o->json)
			printf("\n");
		if (r > ret)
			ret = r;
		if (r == EXIT_RUNTIME)
			break;
	}
	rm_tree(dir);
	if (o->json) {
		json_t *root = json_object();
		json_object_set_new(root, "demo", json_true());
		json_object_set_new(root, "runs", runs);
		json_object_set_new(root, "result", json_string(ret == EXIT_PASS ? "pass" : ret == EXIT_MISMATCH ?
										   "mismatch" : "error"));
		cli_json_print(root);
	} else {
		printf("demo result: %s\n", ret == EXIT_PASS ? "PASS" : ret == EXIT_MISMATCH ? "FAIL" : "ERROR");
	}
	return ret;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, 'i' },   { "op", required_argument, NULL, 'o' },
		{ "dtype", required_argument, NULL, 'd' },   { "device", required_argument, NULL, 'D' },
		{ "output", required_argument, NULL, 'O' },  { "json", no_argument, NULL, 'j' },
		{ "threads", required_argument, NULL, 't' }, { "verify-rows", required_argument, NULL, 'V' },
		{ "no-verify", no_argument, NULL, 'N' },     { "qd", required_argument, NULL, 'q' },
		{ "bs", required_argument, NULL, 'b' },      { "direct", required_argument, NULL, 'x' },
		{ "approach", required_argument, NULL, 'a' }, { "shape", required_argument, NULL, 's' },
		{ "eps", required_argument, NULL, 'e' },     { "demo", no_argument, NULL, 'M' },
		{ "inject-mismatch", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },          { NULL, 0, NULL, 0 },
	};
	struct run_opts o;
	int demo = 0, c;
	int64_t v;
	uint64_t u;

	memset(&o, 0, sizeof(o));
	o.device = "auto";
	o.verify_rows = CLI_DEFAULT_VERIFY_ROWS;
	wsn_reader_options_init(&o.rd);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
		switch (c) {
		case 'i': o.input = optarg; break;
		case 'o':
			if (wsn_op_parse(optarg, &o.op) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_op = 1;
			break;
		case 'd':
			if (wsn_dtype_parse(optarg, &o.dt) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_dt = 1;
			break;
		case 'D': o.device = optarg; break;
		case 'O': o.output = optarg; break;
		case 'j': o.json = 1; break;
		case 't':
			if (cli_parse_i64(optarg, 1, CLI_MAX_THREADS, &v))
				return cli_usage_error("run", "bad --threads '%s' (expected 1..%d)", optarg, CLI_MAX_THREADS);
			o.threads = (int)v;
			break;
		case 'V':
			if (cli_parse_i64(optarg, 0, 1 << 20, &o.verify_rows))
				return cli_usage_error("run", "bad --verify-rows '%s'", optarg);
			break;
		case 'N': o.verify_rows = 0; break;
		case 'q':
			if (cli_parse_i64(optarg, 1, 4096, &v))
				return cli_usage_error("run", "bad --qd '%s' (expected 1..4096)", optarg);
			o.rd.queue_depth = (unsigned)v;
			break;
		case 'b':
			if (cli_parse_size(optarg, &u) || u < 4096 || u > (64u << 20) || u % 4096)
				return cli_usage_error("run", "bad --bs '%s' (expected 4K..64M, a multiple of 4K)", optarg);
			o.rd.block_size = (size_t)u;
			break;
		case 'x':
			if (!strcmp(optarg, "auto"))
				o.rd.direct = -1;
			else if (!strcmp(optarg, "on"))
				o.rd.direct = 1;
			else if (!strcmp(optarg, "off"))
				o.rd.direct = 0;
			else
				return cli_usage_error("run", "bad --direct '%s' (expected auto, on or off)", optarg);
			break;
		case 'a':
			if (wsn_approach_parse(optarg, &o.approach) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			break;
		case 's': {
			char *xp = strchr(optarg, 'x');
			if (!xp)
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN)", optarg);
			*xp = '\0';
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o.raw_rows) ||
			    cli_parse_i64(xp + 1, 1, CLI_MAX_HIDDEN, &o.raw_hidden)) {
				*xp = 'x';
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN)", optarg);
			}
			*xp = 'x';
			break;
		}
		case 'e':
			if (cli_parse_f32(optarg, &o.eps) || !(o.eps > 0) || o.eps > 1)
				return cli_usage_error("run", "bad --eps '%s' (expected 0 < eps <= 1)", optarg);
			o.have_eps = 1;
			break;
		case 'M': demo = 1; break;
		case 'I': o.inject_mismatch = 1; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':': return cli_usage_error("run", "option '%s' needs a value", argv[optind - 1]);
		default: return cli_usage_error("run", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
	if (demo) {
		if (o.input || o.output || o.raw_rows)
			return cli_usage_error("run", "--demo makes its own input: drop --input, --output and --shape");
		return run_demo(&o);
	}
	if (!o.input)
		return cli_usage_error("run", "--input is required (or --demo)");
	return run_one(&o, NULL);
}
