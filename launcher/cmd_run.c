/* SPDX-License-Identifier: MIT */
/* launcher/cmd_run.c: `wsnorm run`: options, the run's setup and signals, pass/fail and the report. */
#include "pipeline.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

struct run_opts {
	enum wsn_op op;
	int have_op;
	enum wsn_dtype dt;
	int have_dt;
	const char *device, *devices;
	const char *input;
	int json;
	int64_t raw_rows, raw_hidden; /* --shape for raw input */
	float eps;
	int have_eps;
	int have_batch_rows;
	double min_read_gbs, min_h2d_gbs, min_kernel_frac; /* 0: no threshold */
	struct pl_config cfg;
};

/* A threshold and what was measured against it. */
struct threshold {
	const char *option, *unit;
	char what[96];
	double limit, value;
	int measured, pass;
};

/* The signals that stop a run, read from a signalfd by the thread that waits for the devices. */
static int sig_fd = -1;
static sigset_t sig_set;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s run --input PATH [OPTIONS]\n"
		"       %s run --demo [--device SPEC] [--dtype DT] [--json]\n"
		"Stream a dataset through io_uring into a ring of pinned buffers, copy each batch to the\n"
		"device, run the op, verify sampled rows against the CPU reference, optionally write the\n"
		"outputs, and report each stage, with all stages overlapped.\n\n"
		"Input and op:\n"
		"  --input PATH      a safetensors file, a comma-separated list of files, a directory of\n"
		"                    *.safetensors shards, or raw files with --shape\n"
		"  --op OP           layernorm-fwd, layernorm-bwd, rmsnorm-fwd, rmsnorm-bwd (default: from\n"
		"                    the file's metadata)\n"
		"  --dtype DT        f32, f16, bf16: the dtype the input must have (default: the file's)\n"
		"  --shape RxH       each input is a raw file of R x H elements of --dtype, or a block\n"
		"                    device holding them first (forward ops)\n"
		"  --eps E           epsilon (default: the file's metadata, else %g)\n"
		"  --output PATH     write the outputs (y, mean, rstd / dx, dweight, dbias) as safetensors;\n"
		"                    a directory when the input has several files\n"
		"Devices:\n"
		"  --device SPEC     auto, cpu, cuda[:N] or amd[:N] (default auto: the first GPU, else the CPU)\n"
		"  --devices LIST    one pipeline per device: all, or a comma-separated list of GPU numbers\n"
		"                    and specs (e.g. 0,1 or cpu,cpu)\n"
		"  --approach A      GPU kernel family: auto, multiwave or ws (default auto)\n"
		"  --autotune        with approach auto: time multiwave and ws (the backward's ws in its\n"
		"                    shapes that fit) on each GPU once and cache the winner (see FILES in\n"
		"                    wsnorm(1)); nothing to tune on the CPU\n"
		"  --threads N       CPU threads (default: all)\n"
		"Pipeline:\n"
		"  --ring N          pinned buffers per device (default %d, at most %d)\n"
		"  --batch-rows N    rows per batch; larger shards are split (default: %llu MiB of x, at\n"
		"                    most the first shard's rows)\n"
		"  --qd N            io_uring queue depth (default %d)\n"
		"  --bs SIZE         io_uring read size (default %u; K/M suffixes)\n"
		"  --direct MODE     O_DIRECT: auto, on or off (default auto)\n"
		"  --sqpoll          ask for a kernel submission thread (IORING_SETUP_SQPOLL)\n"
		"  --read-only       the read stage alone: read the dataset into the ring and discard it\n"
		"Stress:\n"
		"  --iterations N    passes over the dataset (default 1; unlimited with --duration)\n"
		"  --duration T      run for T seconds (s, m, h suffixes: 90s, 5m, 1h)\n"
		"  --kernel-loops K  launches of the kernel on each device-resident batch (default %d)\n"
		"  --standalone      first measure each stage alone, to compare the pipeline with its\n"
		"                    slowest stage\n"
		"  --copy-size SIZE  device copy buffer for the roofline (default %lluM; %lluM on the CPU)\n"
		"Verification and pass/fail:\n"
		"  --verify-rows N   rows sampled per verified batch (default %d; 0 disables verification)\n"
		"  --no-verify       same as --verify-rows 0\n"
		"  --verify-every N  verify every Nth batch (default %d)\n"
		"  --min-read-gbs X  fail (exit 1) if the read stage is slower than X GB/s\n"
		"  --min-h2d-gbs X   fail if a device's host-to-device copies are slower than X GB/s\n"
		"  --min-kernel-frac F  fail if a device's kernel reaches less than F of its copy bandwidth\n"
		"  --inject-mismatch corrupt one output element of each verified batch (exit status 1)\n"
		"  --inject-fault I  make device I's first kernel launch fail (a self-test, exit status 3)\n"
		"Other:\n"
		"  --demo            generate a small input set in a temporary directory, run all four\n"
		"                    ops on the best device present, report, and remove the files\n"
		"  --json            machine-readable report on stdout\n"
		"  -h, --help        show this help\n"
		"\nSIGINT, SIGTERM or SIGHUP stops the run with a partial report; outputs appear only when complete.\n"
		"Exit status: 0 pass, 1 verification mismatch or threshold missed, 2 usage error,\n"
		"3 runtime error.\n",
		cli_prog, cli_prog, (double)WSN_DEFAULT_EPS, PL_DEFAULT_RING, PL_MAX_RING,
		(unsigned long long)(PL_DEFAULT_BATCH_BYTES >> 20), WSN_READER_DEFAULT_QD, WSN_READER_DEFAULT_BS,
		PL_DEFAULT_KERNEL_LOOPS, (unsigned long long)(PL_DEFAULT_COPY_GPU >> 20),
		(unsigned long long)(PL_DEFAULT_COPY_CPU >> 20), CLI_DEFAULT_VERIFY_ROWS, PL_DEFAULT_VERIFY_EVERY);
}

/* ---- setup ---- */

/*
 * The outputs' places, checked before anything is read or written: one file, or, when the input is a
 * directory or several files, a directory (made if missing) of files named as their inputs.
 */
static int output_setup(struct run_opts *o, struct pl_dataset *ds)
{
	char msg[PL_ERRLEN];
	struct stat st;
	int err, exists;

	o->cfg.output_dir = ds->n > 1 || ds->from_dir;
	if (!o->cfg.output)
		return 0;
	exists = stat(o->cfg.output, &st) == 0;
	if (o->cfg.output_dir) {
		for (int i = 0; i < ds->n; i++) { /* each output takes its input's name: two alike would clash */
			const char *a = strrchr(ds->shards[i].path, '/');
			a = a ? a + 1 : ds->shards[i].path;
			for (int k = 0; k < i; k++) {
				const char *b = strrchr(ds->shards[k].path, '/');
				if (!strcmp(a, b ? b + 1 : ds->shards[k].path))
					return cli_error("run: inputs '%s' and '%s' would both write '%s/%s'",
							 ds->shards[k].path, ds->shards[i].path, o->cfg.output, a);
			}
		}
		if (exists && !S_ISDIR(st.st_mode))
			return cli_error("run: output '%s' must be a directory: the input is %s", o->cfg.output,
					 ds->from_dir ? "a directory" : "several files");
	}
	if ((err = pl_out_check(ds, &o->cfg, msg, sizeof(msg))) < 0)
		return cli_error("%s", msg);
	if (!o->cfg.output_dir || exists)
		return 0;
	if (mkdir(o->cfg.output, 0777) < 0)
		return cli_error("run: cannot create output directory '%s': %s", o->cfg.output, strerror(errno));
	ds->outdir_created = 1;
	ds->outdir_cleanup = cli_cleanup_add(o->cfg.output, 1) + 1;
	return 0;
}

/*
 * List the dataset and open its first shard: it decides op, eps, dtype, hidden and the batch
 * rows; the others are opened when the pipeline reaches them. Prints its errors.
 */
static int dataset_setup(struct run_opts *o, struct pl_dataset *ds)
{
	struct pl_config *cfg = &o->cfg;
	struct pl_shard *sh;
	struct wsn_reader_options ro;
	struct wsn_reader *rd = NULL;
	char msg[PL_ERRLEN];
	int64_t rows0 = 1;
	size_t row_bytes = 0;
	int ret, err;

	if ((ret = pl_dataset_list(ds, o->input, o->raw_rows > 0)) || (ret = output_setup(o, ds)))
		return ret;
	ds->cfg = cfg;
	ds->shape.eps = o->have_eps ? o->eps : WSN_DEFAULT_EPS;
	ds->op_given = o->have_op;
	ds->eps_given = o->have_eps;
	sh = &ds->shards[0];
	if (o->raw_rows) { /* --op (forward) and --dtype come with --shape: the options check it */
		pl_shape_init(&ds->shape, o->op, o->dt, o->raw_hidden, 0, 0, ds->shape.eps);
		for (int i = 0; i < ds->n; i++)
			ds->shards[i].rows = o->raw_rows;
		rows0 = o->raw_rows;
		row_bytes = (size_t)o->raw_hidden * wsn_dtype_size(o->dt);
	} else {
		const struct wsn_st_entry *x;
		const char *meta_op;

		/* a small reader for the first header; the devices' readers open the rest */
		wsn_reader_options_init(&ro);
		ro.queue_depth = 2;
		ro.block_size = 64 << 10;
		ro.direct = 0;
		if ((err = wsn_reader_create(&ro, &rd)) < 0)
			return cli_fail(err, "run: cannot set up the io_uring reader");
		if (pl_shard_identify(sh, msg, sizeof(msg))) {
			wsn_reader_destroy(rd);
			cli_error("%s", msg);
			return EXIT_RUNTIME;
		}
		err = wsn_st_open(sh->path, rd, &sh->st);
		wsn_reader_destroy(rd); /* the file keeps no use for it: reads go through the devices' readers */
		if (err < 0)
			return cli_fail(err, "run: cannot read '%s'", sh->path);
		meta_op = wsn_st_metadata(sh->st, "wsnorm.op");
		if (o->have_op) {
			ds->shape.op = o->op;
		} else if (meta_op) {
			if (wsn_op_parse(meta_op, &ds->shape.op) < 0) {
				cli_error("run: %s: metadata names an unknown op '%s'", sh->path, meta_op);
				return EXIT_RUNTIME;
			}
		} else {
			cli_error("run: %s: the file does not say which op it is for: give --op", sh->path);
			return EXIT_RUNTIME;
		}
		if (!o->have_eps) {
			const char *e = wsn_st_metadata(sh->st, "wsnorm.eps");
			if (e && cli_parse_eps(e, &ds->shape.eps)) {
				cli_error("run: %s: metadata 'wsnorm.eps' is '%s', not a number with 0 < eps <= 1 (--eps "
					  "overrides it)", sh->path, e);
				return EXIT_RUNTIME;
			}
		}
		if ((x = wsn_st_find(sh->st, "x")) && x->ndim >= 1) {
			rows0 = pl_entry_rows(x);
			row_bytes = (size_t)x->shape[x->ndim - 1] * wsn_dtype_size(x->dtype);
		}
	}
	if (!o->have_batch_rows) {
		int64_t fit = row_bytes ? (int64_t)(PL_DEFAULT_BATCH_BYTES / row_bytes) : 1;
		if (fit < 1)
			fit = 1;
		cfg->batch_rows = rows0 > 0 && rows0 < fit ? rows0 : fit;
	} else if ((ds->n == 1 || o->raw_rows) && rows0 > 0 && cfg->batch_rows > rows0) {
		cfg->batch_rows = rows0; /* no batch can hold more rows than a file has: the ring needs no more */
	}
	if ((err = pl_shard_open(ds, 0, NULL, 1, msg, sizeof(msg)))) {
		cli_error("%s", msg);
		return EXIT_RUNTIME;
	}
	if (!o->raw_rows && o->have_dt && o->dt != ds->shape.dt) {
		cli_error("run: %s: tensor 'x' is %s, --dtype asks for %s", sh->path,
			wsn_dtype_name(ds->shape.dt), wsn_dtype_name(o->dt));
		return EXIT_RUNTIME;
	}
	return 0;
}

/* ---- signals ---- */

/* Block SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) in this thread and every thread
 * it starts; they are read from sig_fd. */
static void signals_block(void)
{
	if (sig_fd >= 0)
		return;
	sigemptyset(&sig_set);
	sigaddset(&sig_set, SIGINT);
	sigaddset(&sig_set, SIGTERM);
	sigaddset(&sig_set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sig_set, NULL);
	sig_fd = signalfd(-1, &sig_set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static const char *signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

/* After the first signal: a second one ends the process at once, removing the temporary files first. */
static void signals_release(void)
{
	cli_cleanup_arm(SIGINT);
	cli_cleanup_arm(SIGTERM);
	cli_cleanup_arm(SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &sig_set, NULL);
}

/* Wait for every device, stopping them on a signal and drawing the progress line. */
static void wait_run(struct pl_run *run, int *interrupted_by)
{
	struct cli_progress prog;
	int done = 0;

	cli_progress_start(&prog);
	while (done < run->ndev) {
		struct pollfd p[2] = { { run->donefd, POLLIN, 0 }, { sig_fd, POLLIN, 0 } };
		int r = poll(p, sig_fd >= 0 && !*interrupted_by ? 2 : 1, prog.active ? 500 : -1);

		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;
			if (read(run->donefd, &v, sizeof(v)) == sizeof(v))
				done += (int)v;
		}
		if (r > 0 && !*interrupted_by && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
				*interrupted_by = (int)si.ssi_signo;
				cli_progress_end(&prog);
				fprintf(stderr, "%s: run: %s: stopping after the batches in flight (again to quit at once)\n",
					cli_prog, signal_name((int)si.ssi_signo));
				pl_run_stop(run, 1);
				signals_release();
			}
		}
		if (prog.active) {
			long long rows = 0, bytes = 0;
			double since = 0;

			for (int i = 0; i < run->ndev; i++) {
				rows += atomic_load(&run->res[i].live_rows);
				bytes += atomic_load(&run->res[i].live_read_bytes);
			}
			pthread_mutex_lock(&run->mu);
			if (run->go)
				since = cli_now() - run->t_start;
			pthread_mutex_unlock(&run->mu);
			cli_progress_update(&prog, "%.0f s: %lld rows, %.2f GB read", since, rows, (double)bytes / 1e9);
		}
	}
	cli_progress_end(&prog);
}

/* ---- measurements ---- */

static double rate(double bytes, double s)
{
	return s > 0 ? bytes / s / 1e9 : 0;
}

/* The stages of all devices together: bytes and rows summed, rates summed (the devices run side by side). */
static void aggregate(const struct pl_run *run, struct pl_stage *agg, double *rates)
{
	memset(agg, 0, sizeof(*agg) * ST_N);
	memset(rates, 0, sizeof(*rates) * ST_N);
	for (int i = 0; i < run->ndev; i++)
		for (int s = 0; s < ST_N; s++) {
			const struct pl_stage *st = &run->res[i].st[s];
			agg[s].bytes += st->bytes;
			if (st->busy > agg[s].busy)
				agg[s].busy = st->busy;
			agg[s].batches += st->batches;
			agg[s].rows += st->rows;
			pl_hist_merge(&agg[s].lat, &st->lat);
			agg[s].alone_rows_s += st->alone_rows_s;
			agg[s].alone_gbs += st->alone_gbs;
			rates[s] += rate(st->bytes, st->busy);
		}
}

/* Which stages a run has: no copies on a host-memory device, no device stages with --read-only. */
static int stage_active(const struct run_opts *o, const struct pl_devres *r, int s)
{
	switch (s) {
	case ST_H2D: case ST_D2H: return !r->host_mem && !o->cfg.read_only;
	case ST_KERNEL: return !o->cfg.read_only;
	case ST_VERIFY: return pl_verifies(&o->cfg);
	case ST_WRITE: return o->cfg.output != NULL && !o->cfg.read_only;
	default: return 1;
	}
}

/* The end-to-end rate over the slowest stage measured alone (rows/s). */
static double e2e_ratio(const struct run_opts *o, const struct pl_run *run, const struct pl_stage *agg, double e2e,
			int *slowest)
{
	double best = 0;

	*slowest = -1;
	for (int s = 0; s < ST_N; s++) {
		if (!stage_active(o, &run->res[0], s) || agg[s].alone_rows_s <= 0)
			continue;
		if (*slowest < 0 || agg[s].alone_rows_s < best) {
			best = agg[s].alone_rows_s;
			*slowest = s;
		}
	}
	return best > 0 ? e2e / best : 0;
}

static int check_thresholds(const struct run_opts *o, const struct pl_run *run, const double *rates,
			    struct threshold *t, int max)
{
	int n = 0;

	if (o->min_read_gbs > 0 && n < max) {
		struct threshold *x = &t[n++];
		x->option = "--min-read-gbs";
		x->unit = "GB/s";
		snprintf(x->what, sizeof(x->what), "read");
		x->limit = o->min_read_gbs;
		x->value = rates[ST_READ];
		x->measured = run->res[0].st[ST_READ].batches > 0 || run->ndev > 1;
		x->pass = x->measured && x->value >= x->limit;
	}
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		if (o->min_h2d_gbs > 0 && n < max) {
			struct threshold *x = &t[n++];
			x->option = "--min-h2d-gbs";
			x->unit = "GB/s";
			snprintf(x->what, sizeof(x->what), "h2d on %s", r->spec);
			x->limit = o->min_h2d_gbs;
			x->value = rate(r->st[ST_H2D].bytes, r->st[ST_H2D].busy);
			x->measured = r->st[ST_H2D].batches > 0;
			x->pass = x->measured && x->value >= x->limit;
		}
		if (o->min_kernel_frac > 0 && n < max) {
			struct threshold *x = &t[n++];
			x->option = "--min-kernel-frac";
			x->unit = "of the copy bandwidth";
			snprintf(x->what, sizeof(x->what), "kernel on %s", r->spec);
			x->limit = o->min_kernel_frac;
			x->value = r->copy_bps > 0 && r->st[ST_KERNEL].busy > 0 ?
					   r->st[ST_KERNEL].bytes / r->st[ST_KERNEL].busy / r->copy_bps : 0;
			x->measured = r->st[ST_KERNEL].batches > 0 && r->copy_bps > 0;
			x->pass = x->measured && x->value >= x->limit;
		}
	}
	return n;
}

/* ---- the report ---- */

/* Rows stage s counts per dataset row: the kernel's loops for compute (each launch counts), else 1. Its
 * rate alone, measured in dataset rows, is reported times this, in the rows its own rate counts. */
static int stage_rows_per_row(const struct run_opts *o, int s)
{
	return s == ST_KERNEL ? o->cfg.kernel_loops : 1;
}

/* A stage's numbers; per: stage_rows_per_row(). */
static json_t *stage_json(const struct pl_stage *st, double gbs, int per)
{
	json_t *o = json_object();

	json_object_set_new(o, "bytes", json_integer((json_int_t)st->bytes));
	json_object_set_new(o, "seconds", cli_json_real(st->busy));
	json_object_set_new(o, "gbs", cli_json_real(gbs));
	json_object_set_new(o, "batches", json_integer(st->batches));
	json_object_set_new(o, "rows", json_integer(st->rows));
	json_object_set_new(o, "rows_per_s", cli_json_real(st->busy > 0 ? (double)st->rows / st->busy : 0));
	json_object_set_new(o, "p50_ms", cli_json_real(pl_hist_quantile(&st->lat, 0.5) * 1e3));
	json_object_set_new(o, "p99_ms", cli_json_real(pl_hist_quantile(&st->lat, 0.99) * 1e3));
	if (st->alone_rows_s > 0) {
		json_object_set_new(o, "alone_rows_per_s", cli_json_real(st->alone_rows_s * per));
		json_object_set_new(o, "alone_gbs", cli_json_real(st->alone_gbs));
	}
	return o;
}

static json_t *stages_json(const struct run_opts *o, const struct pl_devres *r0, const struct pl_stage *st,
			   const double *rates, double copy_bps)
{
	json_t *j = json_object();

	for (int s = 0; s < ST_N; s++) {
		json_t *x = stage_json(&st[s], rates[s], stage_rows_per_row(o, s));
		if (s == ST_KERNEL) {
			double tbs = rates[s] / 1e3;
			json_object_set_new(x, "tbs", cli_json_real(tbs));
			json_object_set_new(x, "copy_tbs", cli_json_real(copy_bps / 1e12));
			json_object_set_new(x, "fraction_of_copy", cli_json_real(copy_bps > 0 ? tbs * 1e12 / copy_bps : 0));
		}
		json_object_set_new(x, "active", json_boolean(stage_active(o, r0, s)));
		json_object_set_new(j, pl_stage_names[s], x);
	}
	return j;
}

static json_t *verify_json(const struct run_opts *o, const struct pl_verdict *vd, int nv, int64_t batches,
			   int64_t bad, int64_t rows, const char *first)
{
	json_t *v = json_object(), *vt = json_object();

	json_object_set_new(v, "enabled", json_boolean(pl_verifies(&o->cfg)));
	json_object_set_new(v, "rows", json_integer(rows));
	json_object_set_new(v, "batches", json_integer(batches));
	json_object_set_new(v, "mismatched_batches", json_integer(bad));
	for (int i = 0; i < nv; i++) {
		json_t *t = json_object();
		json_object_set_new(t, "rel_l2", cli_json_real(vd[i].rel));
		json_object_set_new(t, "max_abs", cli_json_real(vd[i].max_abs));
		json_object_set_new(t, "tolerance", json_real(vd[i].tol));
		json_object_set_new(t, "nonfinite", json_integer(vd[i].nonfinite));
		json_object_set_new(t, "pass", json_boolean(vd[i].pass));
		json_object_set_new(vt, vd[i].name, t);
	}
	json_object_set_new(v, "tensors", vt);
	json_object_set_new(v, "pass", json_boolean(bad == 0));
	if (first && first[0])
		json_object_set_new(v, "first_mismatch", json_string(first));
	return v;
}

/* A reader's counters: one device's, or every device's summed. */
struct io_view {
	const char *ring_mode;
	struct wsn_read_stats rs;
	struct wsn_reader_buffer_stats bs;
};

static void io_of(const struct pl_devres *r, struct io_view *v)
{
	v->ring_mode = r->ring_mode;
	v->rs = r->rs;
	v->bs = r->bs;
}

static void io_sum(const struct pl_run *run, struct io_view *v)
{
	memset(v, 0, sizeof(*v));
	v->ring_mode = run->res[0].ring_mode;
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		if (!v->ring_mode[0])
			v->ring_mode = r->ring_mode;
		v->rs.bytes += r->rs.bytes;
		v->rs.reads += r->rs.reads;
		v->rs.short_reads += r->rs.short_reads;
		v->rs.direct_files += r->rs.direct_files;
		v->rs.buffered_files += r->rs.buffered_files;
		v->rs.seconds += r->rs.seconds;
		v->bs.registered += r->bs.registered;
		v->bs.fixed += r->bs.fixed;
		v->bs.straight_bytes += r->bs.straight_bytes;
		v->bs.bounce_bytes += r->bs.bounce_bytes;
	}
}

static json_t *io_json(const struct io_view *r)
{
	json_t *io = json_object();

	json_object_set_new(io, "ring_mode", json_string(r->ring_mode));
	json_object_set_new(io, "reads", json_integer((json_int_t)r->rs.reads));
	json_object_set_new(io, "short_reads", json_integer((json_int_t)r->rs.short_reads));
	json_object_set_new(io, "direct_files", json_integer((json_int_t)r->rs.direct_files));
	json_object_set_new(io, "buffered_files", json_integer((json_int_t)r->rs.buffered_files));
	json_object_set_new(io, "straight_bytes", json_integer((json_int_t)r->bs.straight_bytes));
	json_object_set_new(io, "bounce_bytes", json_integer((json_int_t)r->bs.bounce_bytes));
	json_object_set_new(io, "fixed_ring_buffers", json_integer(r->bs.fixed));
	return io;
}

/* Was any of a run's output checked: verification on and a batch verified (none is when a signal
 * stops the run inside its first batch)? Else a pass reads "done (not verified)" / "unverified". */
static int checked(const struct run_opts *o, int64_t verified_batches)
{
	return pl_verifies(&o->cfg) && verified_batches > 0;
}

/* A run's JSON result: a wrong output outranks a missed threshold, as in the text report. */
static const char *status_name(int status, int verified, int threshold_missed, int64_t mismatched)
{
	return status == EXIT_PASS ? (verified ? "pass" : "unverified") : status == EXIT_RUNTIME ? "error" :
	       threshold_missed && !mismatched ? "threshold" : "mismatch";
}

/* Passes over the dataset begun: the whole ones and, when the cursor stopped inside one, that one. */
static unsigned long long passes_begun(const struct pl_dataset *ds)
{
	return (unsigned long long)ds->pass + (ds->cur > 0 || ds->cur_row > 0);
}

/* Everything the report needs beyond the run itself. */
struct summary {
	const struct pl_dataset *ds;
	int status, interrupted_by, output_written, threshold_missed;
	struct threshold t[1 + 2 * PL_MAX_DEVICES];
	int nt;
	struct pl_stage agg[ST_N];
	double rates[ST_N];
	double wall, e2e_rows_s, ratio, copy_bps;
	int slowest;
	int64_t rows, batches, vb, vbad, vrows;
	struct pl_verdict v[8]; /* each tensor's worst over the devices */
	int nv;
	const char *first_mismatch;
	const char *error;
};

/* Fold one device's verdicts into the run's: per tensor the error nearest its tolerance (with that tolerance),
 * the largest difference, the non-finite values summed, a pass only where every device passed. */
static void merge_verdicts(struct summary *sm, const struct pl_devres *r)
{
	for (int i = 0; i < r->nv; i++) {
		const struct pl_verdict *d = &r->v[i];
		struct pl_verdict *m = NULL;

		for (int k = 0; k < sm->nv && !m; k++)
			if (!strcmp(sm->v[k].name, d->name))
				m = &sm->v[k];
		if (!m) {
			if (sm->nv == (int)(sizeof(sm->v) / sizeof(sm->v[0])))
				continue;
			sm->v[sm->nv++] = *d;
			continue;
		}
		if (isnan(d->rel) || (!isnan(m->rel) && d->rel * m->tol > m->rel * d->tol)) { /* closer to its limit */
			m->rel = d->rel;
			m->tol = d->tol;
		}
		if (d->max_abs > m->max_abs || isnan(d->max_abs))
			m->max_abs = d->max_abs;
		m->nonfinite += d->nonfinite;
		m->pass = m->pass && d->pass;
	}
}

static json_t *report_json(const struct run_opts *o, const struct pl_run *run, const struct summary *sm)
{
	const struct pl_dataset *ds = sm->ds;
	const struct pl_devres *r0 = &run->res[0];
	json_t *j = json_object(), *devs = json_array(), *th = json_array();
	char devlist[PL_MAX_DEVICES * 33] = "";
	struct io_view io;
	int64_t kr = 0;

	for (int i = 0; i < run->ndev; i++) {
		size_t n = strlen(devlist);
		snprintf(devlist + n, sizeof(devlist) - n, "%s%s", i ? "," : "", run->res[i].spec);
		kr += run->res[i].kernel_rows;
	}
	json_object_set_new(j, "op", json_string(wsn_op_name(ds->shape.op)));
	json_object_set_new(j, "dtype", json_string(wsn_dtype_name(ds->shape.dt)));
	json_object_set_new(j, "rows", json_integer(sm->rows));
	json_object_set_new(j, "hidden", json_integer(ds->shape.hidden));
	json_object_set_new(j, "shards", json_integer(ds->n));
	json_object_set_new(j, "device", json_string(devlist));
	json_object_set_new(j, "device_name", json_string(r0->name));
	json_object_set_new(j, "batches", json_integer(sm->batches));
	json_object_set_new(j, "batch_rows", json_integer(o->cfg.batch_rows));
	json_object_set_new(j, "ring", json_integer(o->cfg.ring));
	json_object_set_new(j, "kernel_loops", json_integer(o->cfg.kernel_loops));
	json_object_set_new(j, "kernel_rows", json_integer(kr));
	json_object_set_new(j, "passes", json_integer((json_int_t)passes_begun(ds)));
	json_object_set_new(j, "wall_seconds", cli_json_real(sm->wall));
	json_object_set_new(j, "rows_per_s", cli_json_real(sm->e2e_rows_s));
	json_object_set_new(j, "interrupted", json_boolean(sm->interrupted_by != 0));
	if (sm->interrupted_by)
		json_object_set_new(j, "signal", json_string(signal_name(sm->interrupted_by)));
	json_object_set_new(j, "stages", stages_json(o, r0, sm->agg, sm->rates, sm->copy_bps));
	io_sum(run, &io);
	json_object_set_new(j, "io", io_json(&io));
	json_object_set_new(j, "verify", verify_json(o, sm->v, sm->nv, sm->vb, sm->vbad, sm->vrows,
						     sm->first_mismatch));
	if (o->cfg.standalone) {
		json_t *e = json_object();
		json_object_set_new(e, "rows_per_s", cli_json_real(sm->e2e_rows_s));
		json_object_set_new(e, "slowest_stage", sm->slowest >= 0 ? json_string(pl_stage_names[sm->slowest]) :
									     json_null());
		json_object_set_new(e, "slowest_alone_rows_per_s",
				    cli_json_real(sm->slowest >= 0 ? sm->agg[sm->slowest].alone_rows_s : 0));
		json_object_set_new(e, "ratio", cli_json_real(sm->ratio));
		json_object_set_new(j, "end_to_end", e);
	}
	for (int i = 0; i < sm->nt; i++) {
		json_t *x = json_object();
		json_object_set_new(x, "option", json_string(sm->t[i].option));
		json_object_set_new(x, "what", json_string(sm->t[i].what));
		json_object_set_new(x, "limit", cli_json_real(sm->t[i].limit));
		json_object_set_new(x, "value", cli_json_real(sm->t[i].value));
		json_object_set_new(x, "measured", json_boolean(sm->t[i].measured));
		json_object_set_new(x, "pass", json_boolean(sm->t[i].pass));
		json_array_append_new(th, x);
	}
	json_object_set_new(j, "thresholds", th);
	if (o->cfg.output) {
		json_t *x = json_object();
		json_object_set_new(x, "path", cli_json_text(o->cfg.output));
		json_object_set_new(x, "written", json_boolean(sm->output_written));
		json_object_set_new(j, "output", x);
	}
	json_object_set_new(j, "plan", json_string(r0->plan));
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		json_t *d = json_object();
		double rates[ST_N];

		for (int s = 0; s < ST_N; s++)
			rates[s] = rate(r->st[s].bytes, r->st[s].busy);
		json_object_set_new(d, "index", json_integer(r->index));
		json_object_set_new(d, "device", json_string(r->spec));
		json_object_set_new(d, "device_name", json_string(r->name));
		json_object_set_new(d, "result", json_string(status_name(r->status, checked(o, r->verified_batches), 0,
									 r->mismatched_batches)));
		if (r->status == EXIT_RUNTIME)
			json_object_set_new(d, "error", json_string(r->errmsg));
		json_object_set_new(d, "rows", json_integer(r->rows));
		json_object_set_new(d, "batches", json_integer(r->batches));
		json_object_set_new(d, "kernel_rows", json_integer(r->kernel_rows));
		json_object_set_new(d, "wall_seconds", cli_json_real(r->wall));
		json_object_set_new(d, "copy_tbs", cli_json_real(r->copy_bps / 1e12));
		json_object_set_new(d, "stages", stages_json(o, r, r->st, rates, r->copy_bps));
		io_of(r, &io);
		json_object_set_new(d, "io", io_json(&io));
		json_object_set_new(d, "verify", verify_json(o, r->v, r->nv, r->verified_batches, r->mismatched_batches,
							     r->verified_rows, r->first_mismatch));
		json_array_append_new(devs, d);
	}
	json_object_set_new(j, "devices", devs);
	if (sm->error)
		json_object_set_new(j, "error", json_string(sm->error));
	json_object_set_new(j, "result", json_string(status_name(sm->status, checked(o, sm->vb), sm->threshold_missed,
								 sm->vbad)));
	return j;
}

/* "  name  X MB in Y ms  Z GB/s  p50 .. p99 ..": one stage line. */
static void stage_line(const char *name, const struct pl_stage *st, double gbs, const char *tail)
{
	printf("  %-8s %10.1f MB in %9.3f ms  %7.2f GB/s  p50 %.3g ms  p99 %.3g ms%s%s\n", name, st->bytes / 1e6,
	       st->busy * 1e3, gbs, pl_hist_quantile(&st->lat, 0.5) * 1e3, pl_hist_quantile(&st->lat, 0.99) * 1e3,
	       tail ? "  " : "", tail ? tail : "");
}

static void alone_note(char *buf, size_t len, const struct pl_stage *st, int standalone, int per)
{
	size_t n = strlen(buf);
	if (standalone && st->alone_rows_s > 0)
		snprintf(buf + n, len - n, "%salone %.3g rows/s", n ? "; " : "", st->alone_rows_s * per);
}

static void stages_text(const struct run_opts *o, const struct pl_devres *r0, const struct io_view *io,
			const struct pl_stage *st, const double *rates, double copy_bps)
{
	char tail[512];

	for (int s = 0; s < ST_N; s++) {
		if (!stage_active(o, r0, s) && !(s == ST_VERIFY && !o->cfg.read_only))
			continue;
		tail[0] = '\0';
		switch (s) {
		case ST_READ:
			snprintf(tail, sizeof(tail), "(io_uring %s; %llu read%s; %s; %s)", io->ring_mode,
				 (unsigned long long)io->rs.reads, io->rs.reads == 1 ? "" : "s",
				 !io->rs.buffered_files ? "O_DIRECT" : !io->rs.direct_files ? "buffered" :
				 "O_DIRECT and buffered",
				 !io->bs.straight_bytes ? "through bounce buffers" :
				 io->bs.bounce_bytes ? "mostly straight into the ring" :
				 io->bs.fixed ? "straight into the ring's fixed buffers" : "straight into the ring");
			break;
		case ST_KERNEL:
			snprintf(tail, sizeof(tail), "%.3g rows/s  %.3f TB/s = %.2f of copy (%.3f TB/s)",
				 st[s].busy > 0 ? (double)st[s].rows / st[s].busy : 0.0, rates[s] / 1e3,
				 copy_bps > 0 ? rates[s] * 1e9 / copy_bps : 0.0, copy_bps / 1e12);
			break;
		case ST_VERIFY:
			if (o->cfg.verify_rows <= 0) {
				printf("  verify   skipped\n");
				continue;
			}
			break;
		default:
			break;
		}
		alone_note(tail, sizeof(tail), &st[s], o->cfg.standalone, stage_rows_per_row(o, s));
		if (s == ST_VERIFY) {
			printf("  verify   %lld batch%s, p50 %.3g ms  p99 %.3g ms%s%s\n", (long long)st[s].batches,
			       st[s].batches == 1 ? "" : "es",
			       pl_hist_quantile(&st[s].lat, 0.5) * 1e3, pl_hist_quantile(&st[s].lat, 0.99) * 1e3,
			       tail[0] ? "  " : "", tail);
			continue;
		}
		stage_line(pl_stage_names[s], &st[s], rates[s], tail[0] ? tail : NULL);
	}
}

static void verify_text(const struct run_opts *o, const struct pl_verdict *vd, int nv, int64_t vb, int64_t bad,
			int64_t rows, const char *first)
{
	if (o->cfg.verify_rows <= 0 || o->cfg.read_only)
		return;
	printf("  checked  %lld batch%s verified, %lld mismatched, %lld sampled rows against the CPU reference",
	       (long long)vb, vb == 1 ? "" : "es", (long long)bad, (long long)rows);
	if (nv) {
		printf(":");
		for (int i = 0; i < nv; i++)
			printf(" %s %.2g%s", vd[i].name, vd[i].rel, vd[i].pass ? "" : " (FAIL)");
	}
	printf("\n");
	if (first && first[0])
		printf("           first mismatch: %s\n", first);
}

/* The plan's autotune line (cache hit, measured, ignored), when the plan has one. */
static void autotune_text(const struct pl_devres *r, int name_device)
{
	const char *a = strstr(r->plan, "\nautotune:");
	int n;

	if (!a)
		return;
	a += strlen("\nautotune:");
	a += strspn(a, " ");
	n = (int)strcspn(a, "\n");
	printf("  autotune %.*s%s%s\n", n, a, name_device ? " on " : "", name_device ? r->spec : "");
}

static void report_text(const struct run_opts *o, const struct pl_run *run, const struct summary *sm)
{
	const struct pl_dataset *ds = sm->ds;
	const struct pl_devres *r0 = &run->res[0];
	struct io_view io;

	printf("%s %s: %lld rows x %lld, %d shard%s, on ", wsn_op_name(ds->shape.op), wsn_dtype_name(ds->shape.dt),
	       (long long)sm->rows, (long long)ds->shape.hidden, ds->n, ds->n == 1 ? "" : "s");
	if (run->ndev == 1)
		printf("%s (%s)\n", r0->spec, r0->name[0] ? r0->name : "not opened");
	else
		printf("%d devices\n", run->ndev);
	printf("  pipeline %lld batch%s of up to %lld rows, ring %d, %llu pass%s, kernel x%d, %.3f s, %.3g rows/s%s\n",
	       (long long)sm->batches, sm->batches == 1 ? "" : "es", (long long)o->cfg.batch_rows, o->cfg.ring,
	       passes_begun(ds), passes_begun(ds) == 1 ? "" : "es",
	       o->cfg.kernel_loops, sm->wall, sm->e2e_rows_s, sm->interrupted_by ? " (interrupted)" : "");
	if (cli_verbose > 0 && r0->plan[0])
		printf("%s", r0->plan);
	else if (o->cfg.autotune)
		for (int i = 0; i < run->ndev; i++)
			autotune_text(&run->res[i], run->ndev > 1);
	for (int i = 0; run->ndev > 1 && i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		double rates[ST_N];

		for (int s = 0; s < ST_N; s++)
			rates[s] = rate(r->st[s].bytes, r->st[s].busy);
		printf(" device %d: %s (%s): %s, %lld rows in %lld batches\n", r->index, r->spec,
		       r->name[0] ? r->name : "not opened",
		       r->status == EXIT_RUNTIME ? "ERROR" : r->status == EXIT_MISMATCH ? "FAIL" : "ok", (long long)r->rows,
		       (long long)r->batches);
		if (r->status == EXIT_RUNTIME) {
			printf("  error    %s\n", r->errmsg);
			continue;
		}
		io_of(r, &io);
		stages_text(o, r, &io, r->st, rates, r->copy_bps);
		verify_text(o, r->v, r->nv, r->verified_batches, r->mismatched_batches, r->verified_rows, r->first_mismatch);
	}
	if (run->ndev > 1)
		printf(" all devices:\n");
	io_sum(run, &io);
	stages_text(o, r0, &io, sm->agg, sm->rates, sm->copy_bps);
	verify_text(o, sm->v, sm->nv, sm->vb, sm->vbad, sm->vrows, sm->first_mismatch);
	if (o->cfg.standalone && sm->slowest >= 0)
		printf("  overall  %.3g rows/s end to end = %.2f x the slowest stage alone (%s, %.3g rows/s)\n",
		       sm->e2e_rows_s, sm->ratio, pl_stage_names[sm->slowest], sm->agg[sm->slowest].alone_rows_s);
	for (int i = 0; i < sm->nt; i++)
		printf("  limit    %s %g: %s %.4g %s%s\n", sm->t[i].option, sm->t[i].limit, sm->t[i].what, sm->t[i].value,
		       sm->t[i].unit, sm->t[i].pass ? "" : sm->t[i].measured ? " (MISSED)" : " (not measured: MISSED)");
	if (o->cfg.output)
		printf("  output   %s%s\n", o->cfg.output, sm->output_written ? "" : " not written");
	if (run->ndev == 1 && r0->status == EXIT_RUNTIME)
		printf("  error    %s\n", r0->errmsg);
	else if (sm->error)
		printf("  error    %s\n", sm->error);
	printf("  result   %s%s\n",
	       sm->status == EXIT_PASS ? (checked(o, sm->vb) ? "PASS" : "done (not verified)") :
	       sm->status == EXIT_RUNTIME ? "ERROR" :
	       sm->vbad ? "FAIL: verification mismatch" : "FAIL: threshold missed",
	       sm->interrupted_by ? " (interrupted)" : "");
}

/* ---- one run ---- */

/* Run one dataset and report it (into collect when given, else printed); *interrupted says whether a
 * signal stopped it, and the batches it verified are added to *verified_batches (unless NULL). */
static int run_one(struct run_opts *o, json_t *collect, int *interrupted, int64_t *verified_batches)
{
	struct pl_dataset ds;
	struct pl_run run;
	struct summary *sm = calloc(1, sizeof(*sm));
	char specs[PL_MAX_DEVICES][32], msg[PL_ERRLEN] = "";
	int ndev, ret, err, missed = 0, runtime = 0, reported = 0;

	memset(&ds, 0, sizeof(ds));
	memset(&run, 0, sizeof(run));
	run.donefd = -1;
	pthread_mutex_init(&ds.lock, NULL);
	if (!sm) {
		cli_error("run: out of memory");
		ret = EXIT_RUNTIME;
		goto out;
	}
	if (o->devices) { /* first: a misspelt list is a usage error whatever the input */
		if ((ndev = pl_devices_parse(o->devices, specs, PL_MAX_DEVICES)) < 0) {
			ret = -ndev;
			goto out;
		}
	} else {
		ndev = 1;
		if (strlen(o->device) >= sizeof(specs[0])) {
			ret = cli_usage_error("run", "bad --device '%s'", o->device);
			goto out;
		}
		snprintf(specs[0], sizeof(specs[0]), "%s", o->device);
	}
	if (o->cfg.inject_fault >= ndev) {
		ret = cli_usage_error("run", "--inject-fault %d: the devices are numbered 0..%d", o->cfg.inject_fault, ndev - 1);
		goto out;
	}
	if ((ret = dataset_setup(o, &ds)))
		goto out;
	run.cfg = &o->cfg;
	run.ds = &ds;
	run.ndev = ndev;
	if (!(run.res = calloc((size_t)ndev, sizeof(*run.res)))) {
		cli_error("run: out of memory");
		ret = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < ndev; i++) {
		run.res[i].index = i;
		snprintf(run.res[i].spec, sizeof(run.res[i].spec), "%.31s", specs[i]);
	}
	if ((ret = pl_run_start(&run)))
		goto out;
	wait_run(&run, &sm->interrupted_by);
	pl_run_join(&run);
	*interrupted = sm->interrupted_by;

	/* a single device that could not even be opened: an error, not a report */
	if (ndev == 1 && !run.res[0].name[0] && run.res[0].status == EXIT_RUNTIME) {
		pl_out_finish(&ds, 0, msg, sizeof(msg));
		cli_error("%s", run.res[0].errmsg);
		ret = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < ndev; i++) {
		if (run.res[i].status == EXIT_RUNTIME) {
			cli_error("%s", run.res[i].errmsg);
			runtime = 1;
		}
		sm->rows += run.res[i].rows;
		sm->batches += run.res[i].batches;
		sm->vb += run.res[i].verified_batches;
		sm->vbad += run.res[i].mismatched_batches;
		sm->vrows += run.res[i].verified_rows;
		sm->copy_bps += run.res[i].copy_bps;
		if (!sm->first_mismatch && run.res[i].first_mismatch[0])
			sm->first_mismatch = run.res[i].first_mismatch;
		merge_verdicts(sm, &run.res[i]);
	}
	if (ds.err) {
		cli_error("%s", ds.errmsg);
		sm->error = ds.errmsg;
		runtime = 1;
	}
	/* outputs: all of them, complete, or none */
	if (o->cfg.output) {
		int commit = !runtime && pl_out_complete(&ds);
		if ((err = pl_out_finish(&ds, commit, msg, sizeof(msg))) < 0) {
			cli_error("%s", msg);
			wsn_text_escape(msg, sizeof(msg), cli_last_error()); /* as printed: escaped, whole characters */
			sm->error = msg;
			runtime = 1;
		} else {
			sm->output_written = commit;
			if (!commit && !runtime) /* a warning, not a note: -q does not hide it */
				cli_warn("run: output '%s' not written: the first pass over the dataset did not complete",
					 o->cfg.output);
		}
	}
	sm->ds = &ds;
	sm->wall = run.t_end - run.t_start;
	sm->e2e_rows_s = sm->wall > 0 ? (double)sm->rows / sm->wall : 0;
	aggregate(&run, sm->agg, sm->rates);
	sm->ratio = e2e_ratio(o, &run, sm->agg, sm->e2e_rows_s, &sm->slowest);
	sm->nt = check_thresholds(o, &run, sm->rates, sm->t, (int)(sizeof(sm->t) / sizeof(sm->t[0])));
	for (int i = 0; i < sm->nt; i++)
		if (!sm->t[i].pass) {
			missed = 1;
			if (sm->t[i].measured)
				fprintf(stderr, "%s: run: threshold missed: %s %g: %s %.4g %s\n", cli_prog, sm->t[i].option,
					sm->t[i].limit, sm->t[i].what, sm->t[i].value, sm->t[i].unit);
			else
				fprintf(stderr, "%s: run: threshold missed: %s %g: %s was not measured\n", cli_prog,
					sm->t[i].option, sm->t[i].limit, sm->t[i].what);
		}
	sm->threshold_missed = missed;
	sm->status = runtime ? EXIT_RUNTIME : (sm->vbad || missed) ? EXIT_MISMATCH : EXIT_PASS;
	if (verified_batches)
		*verified_batches += sm->vb;
	if (collect)
		json_array_append_new(collect, report_json(o, &run, sm));
	else if (o->json)
		cli_json_print(report_json(o, &run, sm));
	else
		report_text(o, &run, sm);
	fflush(stdout);
	ret = sm->status;
	reported = 1;
out:
	if (ret == EXIT_RUNTIME && !reported && (collect || o->json)) {
		/* no report to carry the error: --json still gets an object, with the message printed on stderr */
		json_t *j = json_object();
		json_object_set_new(j, "input", o->input ? cli_json_text(o->input) : json_null());
		json_object_set_new(j, "result", json_string("error"));
		json_object_set_new(j, "error", json_string(cli_last_error()));
		if (collect)
			json_array_append_new(collect, j);
		else
			cli_json_print(j);
	}
	if (ds.n)
		pl_out_finish(&ds, 0, msg, sizeof(msg)); /* whatever is left was not committed */
	pl_run_free(&run);
	free(run.res);
	pl_dataset_free(&ds);
	pthread_mutex_destroy(&ds.lock);
	free(sm);
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

/* The demo's --json object: the runs so far, and after a runtime error its message. Takes runs. */
static void demo_json(json_t *runs, int interrupted, int verified, int ran, int ret)
{
	const char *res = ret == EXIT_PASS ? (verified ? "pass" : "unverified") : ret == EXIT_MISMATCH ? "mismatch" : "error";
	json_t *root = json_object(), *r;
	size_t i;

	if (ret == EXIT_MISMATCH) { /* as the runs say: a threshold missed where no batch mismatched */
		res = "threshold";
		json_array_foreach(runs, i, r) {
			const char *one = json_string_value(json_object_get(r, "result"));
			if (one && !strcmp(one, "mismatch"))
				res = "mismatch";
		}
	}
	json_object_set_new(root, "demo", json_true());
	json_object_set_new(root, "runs", runs);
	json_object_set_new(root, "interrupted", json_boolean(interrupted));
	json_object_set_new(root, "verified", json_boolean(verified));
	json_object_set_new(root, "ops_completed", json_integer(ran));
	json_object_set_new(root, "result", json_string(res));
	if (ret == EXIT_RUNTIME && cli_last_error()[0])
		json_object_set_new(root, "error", json_string(cli_last_error()));
	cli_json_print(root);
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
	int ret = EXIT_PASS, r, verbose = cli_verbose, interrupted = 0, ran = 0, verified;
	int64_t vb = 0;
	enum wsn_dtype dt = o->have_dt ? o->dt : WSN_BF16;
	int slots[WSN_OP_COUNT + 1], nslots = 0; /* what a second signal removes: the directory, the inputs */

	if ((r = cli_open_device("run", o->device, o->cfg.threads, &dev))) {
		if (o->json && r == EXIT_RUNTIME)
			demo_json(runs, 0, 0, 0, r);
		else
			json_decref(runs);
		return r;
	}
	wsn_device_info(dev, &di);
	wsn_device_close(dev);
	/* a GPU gets an input big enough to fill it; the CPU one that finishes in a moment */
	rows = di.exec_mem == WSN_MEM_HOST ? 2048 : 16384;
	hidden = di.exec_mem == WSN_MEM_HOST ? 1024 : 4096;
	snprintf(dir, sizeof(dir), "%s/wsnorm-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		cli_error("run --demo: cannot create a temporary directory in %s: %s", tmp && *tmp ? tmp : "/tmp",
			  strerror(errno));
		if (o->json)
			demo_json(runs, 0, 0, 0, EXIT_RUNTIME);
		return EXIT_RUNTIME;
	}
	slots[nslots++] = cli_cleanup_add(dir, 1);
	if (!o->json && cli_verbose >= 0) /* informational: -q leaves the results alone */
		printf("wsnorm demo: %lld x %lld %s inputs in %s, device %s (%s)\n\n", (long long)rows,
		       (long long)hidden, wsn_dtype_name(dt), dir, di.spec, di.name);
	for (int op = 0; op < WSN_OP_COUNT && !interrupted; op++) {
		struct run_opts one = *o;

		snprintf(path, sizeof(path), "%s/%s.safetensors", dir, wsn_op_name((enum wsn_op)op));
		slots[nslots++] = cli_cleanup_add(path, 0);
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
		one.have_dt = 0;
		r = run_one(&one, runs, &interrupted, &vb);
		ran += !interrupted && r != EXIT_RUNTIME; /* ran to its end, whatever it found */
		if (!o->json)
			printf("\n");
		if (r > ret)
			ret = r;
		if (r == EXIT_RUNTIME)
			break;
	}
	rm_tree(dir);
	while (nslots > 0)
		cli_cleanup_drop(slots[--nslots]);
	verified = checked(o, vb); /* a signal in the first op's first batch leaves nothing verified */
	if (o->json) {
		demo_json(runs, interrupted, verified, ran, ret);
	} else if (ret == EXIT_PASS && interrupted) {
		/* PASS would say the node is good: it says only that what ran did not fail */
		printf("demo result: INTERRUPTED after %d of %d ops (%s)\n", ran, WSN_OP_COUNT,
		       verified ? "no failure in those" : "not verified");
	} else if (ret == EXIT_PASS && !verified) {
		printf("demo result: done (not verified)\n");
	} else {
		printf("demo result: %s\n", ret == EXIT_PASS ? "PASS" : ret == EXIT_MISMATCH ? "FAIL" : "ERROR");
	}
	return ret;
}

/* ---- options ---- */

enum {
	OPT_INPUT = 256, OPT_OP, OPT_DTYPE, OPT_DEVICE, OPT_DEVICES, OPT_OUTPUT, OPT_JSON, OPT_THREADS,
	OPT_VERIFY_ROWS, OPT_NO_VERIFY, OPT_VERIFY_EVERY, OPT_QD, OPT_BS, OPT_DIRECT, OPT_SQPOLL, OPT_APPROACH,
	OPT_SHAPE, OPT_EPS, OPT_DEMO, OPT_INJECT_MISMATCH, OPT_INJECT_FAULT, OPT_RING, OPT_BATCH_ROWS,
	OPT_ITERATIONS, OPT_DURATION, OPT_KERNEL_LOOPS, OPT_MIN_READ, OPT_MIN_H2D, OPT_MIN_KFRAC, OPT_COPY_SIZE,
	OPT_STANDALONE, OPT_READ_ONLY, OPT_AUTOTUNE,
};

static int parse_threshold(const char *opt, const char *arg, double *out)
{
	float v;

	if (cli_parse_f32(arg, FLT_MAX, &v) || !(v > 0))
		return cli_usage_error("run", "bad %s '%s' (expected a positive number up to %g)", opt, arg, (double)FLT_MAX);
	*out = v;
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, OPT_INPUT },
		{ "op", required_argument, NULL, OPT_OP },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "devices", required_argument, NULL, OPT_DEVICES },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "verify-rows", required_argument, NULL, OPT_VERIFY_ROWS },
		{ "no-verify", no_argument, NULL, OPT_NO_VERIFY },
		{ "verify-every", required_argument, NULL, OPT_VERIFY_EVERY },
		{ "qd", required_argument, NULL, OPT_QD },
		{ "bs", required_argument, NULL, OPT_BS },
		{ "direct", required_argument, NULL, OPT_DIRECT },
		{ "sqpoll", no_argument, NULL, OPT_SQPOLL },
		{ "approach", required_argument, NULL, OPT_APPROACH },
		{ "autotune", no_argument, NULL, OPT_AUTOTUNE },
		{ "shape", required_argument, NULL, OPT_SHAPE },
		{ "eps", required_argument, NULL, OPT_EPS },
		{ "demo", no_argument, NULL, OPT_DEMO },
		{ "inject-mismatch", no_argument, NULL, OPT_INJECT_MISMATCH },
		{ "inject-fault", required_argument, NULL, OPT_INJECT_FAULT },
		{ "ring", required_argument, NULL, OPT_RING },
		{ "batch-rows", required_argument, NULL, OPT_BATCH_ROWS },
		{ "iterations", required_argument, NULL, OPT_ITERATIONS },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "kernel-loops", required_argument, NULL, OPT_KERNEL_LOOPS },
		{ "min-read-gbs", required_argument, NULL, OPT_MIN_READ },
		{ "min-h2d-gbs", required_argument, NULL, OPT_MIN_H2D },
		{ "min-kernel-frac", required_argument, NULL, OPT_MIN_KFRAC },
		{ "copy-size", required_argument, NULL, OPT_COPY_SIZE },
		{ "standalone", no_argument, NULL, OPT_STANDALONE },
		{ "read-only", no_argument, NULL, OPT_READ_ONLY },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o;
	int demo = 0, have_device = 0, c, ret, interrupted = 0;
	const char *device_opt = NULL; /* the last option that only a device stage uses */
	int64_t v;
	uint64_t u;

	memset(&o, 0, sizeof(o));
	o.device = "auto";
	o.cfg.verify_rows = CLI_DEFAULT_VERIFY_ROWS;
	o.cfg.verify_every = PL_DEFAULT_VERIFY_EVERY;
	o.cfg.ring = PL_DEFAULT_RING;
	o.cfg.kernel_loops = PL_DEFAULT_KERNEL_LOOPS;
	o.cfg.inject_fault = -1;
	wsn_reader_options_init(&o.cfg.rd);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_INPUT:
			if (!*optarg)
				return cli_usage_error("run", "--input needs a path (got an empty one)");
			if (o.input) /* the last would win, and the files before it would silently not run */
				return cli_usage_error("run", "--input given twice ('%s', '%s'): name several files as "
						       "one comma-separated list", o.input, optarg);
			o.input = optarg;
			break;
		case OPT_OP:
			if (wsn_op_parse(optarg, &o.op) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_op = 1;
			break;
		case OPT_DTYPE:
			if (wsn_dtype_parse(optarg, &o.dt) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_dt = 1;
			break;
		case OPT_DEVICE:
			if (wsn_device_spec_parse(optarg, NULL, NULL) < 0)
				return cli_usage_error("run", "bad --device '%s' (expected auto, cpu, cuda[:N] or amd[:N])",
						       optarg);
			o.device = optarg;
			have_device = 1;
			break;
		case OPT_DEVICES:
			if (o.devices)
				return cli_usage_error("run", "--devices given twice ('%s', '%s'): name them as one "
						       "comma-separated list", o.devices, optarg);
			o.devices = optarg;
			break;
		case OPT_OUTPUT:
			if (!*optarg)
				return cli_usage_error("run", "--output needs a path (got an empty one)");
			o.cfg.output = optarg;
			break;
		case OPT_JSON: o.json = 1; break;
		case OPT_THREADS:
			if (cli_parse_count(optarg, 1, CLI_MAX_THREADS, &v))
				return cli_usage_error("run", "bad --threads '%s' (expected 1..%d)", optarg, CLI_MAX_THREADS);
			o.cfg.threads = (int)v;
			break;
		case OPT_VERIFY_ROWS:
			if (cli_parse_i64(optarg, 0, 1 << 20, &o.cfg.verify_rows))
				return cli_usage_error("run", "bad --verify-rows '%s' (expected 0..%d)", optarg, 1 << 20);
			device_opt = "--verify-rows";
			break;
		case OPT_NO_VERIFY:
			o.cfg.verify_rows = 0;
			device_opt = "--no-verify";
			break;
		case OPT_VERIFY_EVERY:
			if (cli_parse_count(optarg, 1, INT64_MAX, &o.cfg.verify_every))
				return cli_usage_error("run", "bad --verify-every '%s' (expected a positive count)", optarg);
			device_opt = "--verify-every";
			break;
		case OPT_QD:
			if (cli_parse_count(optarg, 1, 4096, &v))
				return cli_usage_error("run", "bad --qd '%s' (expected 1..4096)", optarg);
			o.cfg.rd.queue_depth = (unsigned)v;
			break;
		case OPT_BS:
			if (cli_parse_size(optarg, &u) || u < 4096 || u > (64u << 20) || u % 4096)
				return cli_usage_error("run", "bad --bs '%s' (expected 4K..64M, a multiple of 4K)", optarg);
			o.cfg.rd.block_size = (size_t)u;
			break;
		case OPT_DIRECT:
			if (!strcmp(optarg, "auto"))
				o.cfg.rd.direct = -1;
			else if (!strcmp(optarg, "on"))
				o.cfg.rd.direct = 1;
			else if (!strcmp(optarg, "off"))
				o.cfg.rd.direct = 0;
			else
				return cli_usage_error("run", "bad --direct '%s' (expected auto, on or off)", optarg);
			break;
		case OPT_SQPOLL: o.cfg.rd.sqpoll = 1; break;
		case OPT_APPROACH:
			if (wsn_approach_parse(optarg, &o.cfg.approach) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			device_opt = "--approach";
			break;
		case OPT_AUTOTUNE:
			o.cfg.autotune = 1;
			device_opt = "--autotune";
			break;
		case OPT_SHAPE: {
			char *xp = strchr(optarg, 'x');
			if (!xp)
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN)", optarg);
			*xp = '\0';
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o.raw_rows) ||
			    cli_parse_i64(xp + 1, 1, CLI_MAX_HIDDEN, &o.raw_hidden)) {
				*xp = 'x';
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN: rows 1..2^40, hidden "
						       "1..%d)", optarg, CLI_MAX_HIDDEN);
			}
			*xp = 'x';
			break;
		}
		case OPT_EPS:
			if (cli_parse_eps(optarg, &o.eps))
				return cli_usage_error("run", "bad --eps '%s' (expected 0 < eps <= 1, from 1.4e-45, the least positive float)", optarg);
			o.have_eps = 1;
			break;
		case OPT_DEMO: demo = 1; break;
		case OPT_INJECT_MISMATCH: o.cfg.inject_mismatch = 1; break;
		case OPT_INJECT_FAULT:
			if (cli_parse_count(optarg, 0, PL_MAX_DEVICES - 1, &v))
				return cli_usage_error("run", "bad --inject-fault '%s' (expected a device index)", optarg);
			o.cfg.inject_fault = (int)v;
			break;
		case OPT_RING:
			if (cli_parse_count(optarg, 1, PL_MAX_RING, &v))
				return cli_usage_error("run", "bad --ring '%s' (expected 1..%d)", optarg, PL_MAX_RING);
			o.cfg.ring = (int)v;
			break;
		case OPT_BATCH_ROWS:
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o.cfg.batch_rows))
				return cli_usage_error("run", "bad --batch-rows '%s' (expected 1..%lld)", optarg,
						       (long long)CLI_MAX_ROWS);
			o.have_batch_rows = 1;
			break;
		case OPT_ITERATIONS:
			if (cli_parse_count(optarg, 1, INT64_MAX, &v))
				return cli_usage_error("run", "bad --iterations '%s' (expected a positive count)", optarg);
			o.cfg.iterations = (uint64_t)v;
			break;
		case OPT_DURATION:
			if (cli_parse_duration(optarg, &o.cfg.duration))
				return cli_usage_error("run", "bad --duration '%s' (expected e.g. 90, 90s, 5m or 1h)", optarg);
			break;
		case OPT_KERNEL_LOOPS:
			if (cli_parse_count(optarg, 1, 1000000, &v))
				return cli_usage_error("run", "bad --kernel-loops '%s' (expected 1..1000000)", optarg);
			o.cfg.kernel_loops = (int)v;
			device_opt = "--kernel-loops";
			break;
		case OPT_MIN_READ:
			if ((ret = parse_threshold("--min-read-gbs", optarg, &o.min_read_gbs)))
				return ret;
			break;
		case OPT_MIN_H2D:
			if ((ret = parse_threshold("--min-h2d-gbs", optarg, &o.min_h2d_gbs)))
				return ret;
			break;
		case OPT_MIN_KFRAC: {
			float f;
			/* above 1 (90 meant as a percentage) could never pass */
			if (cli_parse_f32(optarg, FLT_MAX, &f) || !(f > 0) || f > 1)
				return cli_usage_error("run", "bad --min-kernel-frac '%s' (expected a fraction of the copy "
						       "bandwidth, 0 < f <= 1: 0.9 for 90 %%)", optarg);
			o.min_kernel_frac = f;
			break;
		}
		case OPT_COPY_SIZE:
			if (cli_parse_size(optarg, &o.cfg.copy_bytes) || o.cfg.copy_bytes < 4096)
				return cli_usage_error("run", "bad --copy-size '%s' (expected at least 4K)", optarg);
			break;
		case OPT_STANDALONE: o.cfg.standalone = 1; break;
		case OPT_READ_ONLY: o.cfg.read_only = 1; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("run", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
	if (o.devices && have_device)
		return cli_usage_error("run", "--device and --devices exclude each other");
	if (demo && (o.input || o.cfg.output || o.raw_rows || o.devices))
		return cli_usage_error("run", "--demo makes its own input: drop --input, --output, --shape and --devices");
	if (o.raw_rows && (!o.have_op || wsn_op_is_backward(o.op)))
		return cli_usage_error("run", "--shape reads raw files that hold only x: give a forward --op");
	if (o.raw_rows && !o.have_dt)
		return cli_usage_error("run", "--shape needs --dtype");
	if (o.cfg.read_only && (o.cfg.output || o.cfg.inject_mismatch || o.cfg.inject_fault >= 0 ||
				o.min_h2d_gbs > 0 || o.min_kernel_frac > 0 || device_opt))
		return cli_usage_error("run", "--read-only runs no device stage: drop %s", device_opt ? device_opt :
				       "--output, --inject-*, --min-h2d-gbs and --min-kernel-frac");
	if (o.cfg.duration == 0 && o.cfg.iterations == 0)
		o.cfg.iterations = 1;
	signals_block();
	if (demo) {
		if (o.have_op)
			return cli_usage_error("run", "--demo runs each of the four ops: drop --op");
		return run_demo(&o);
	}
	if (!o.input)
		return cli_usage_error("run", "--input is required (or --demo)");
	ret = run_one(&o, NULL, &interrupted, NULL);
	return ret;
}
