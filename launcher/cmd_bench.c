/* SPDX-License-Identifier: MIT */
/* launcher/cmd_bench.c: `wsnorm bench`: kernel time on device-resident data against the copy bandwidth. */
#include "pipeline.h" /* PL_DEFAULT_RING: --h2d copies from a ring like the pipeline's */

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 32
#define CPU_DEFAULT_ROWS 1024
#define CPU_DEFAULT_ITERS 3

struct bench_opts {
	const char *device;
	enum wsn_op ops[WSN_OP_COUNT];
	int nops;
	enum wsn_dtype dts[WSN_DTYPE_COUNT];
	int ndts;
	int64_t hidden[MAX_LIST];
	int nhidden;
	int64_t rows;
	int iters, warmup;
	int batch;     /* launches per timed sample; 0: enough for BATCH_MS (GPU) or one per set (CPU) */
	enum wsn_approach approach;
	int autotune;  /* plans time multiwave and ws (and the backward's ws shapes) once and cache the winner */
	int force[CLI_KP_COUNT]; /* --block-threads, --groups, --unroll, --stages, --cluster; 0 = the planner's */
	int weight, bias; /* affine weight, and bias for LayerNorm (--no-weight, --no-bias clear them) */
	uint64_t copy_bytes;
	int h2d;   /* host<->device copies from a ring of pinned buffers instead of kernels */
	int verify; /* compare each point's outputs with the CPU reference once (--no-verify clears it) */
	int inject_mismatch; /* corrupt one element of what the check reads (a self-test of the check) */
	int json;
	int have_rows, have_iters;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s bench [OPTIONS]\n"
		"Time each op on device-resident inputs, rotated over enough input sets to exceed the L2\n"
		"cache, with events around batches of back-to-back launches after a warm-up (on a GPU each\n"
		"batch queued behind a hold of the stream, so the host's launch rate is not what is timed);\n"
		"report the median time per launch, the throughput over the fewest bytes the op must move,\n"
		"and its fraction of the device-to-device copy bandwidth measured in the same run; then check\n"
		"each op's outputs once against the CPU reference (exit status 1 if any is out of tolerance).\n\n"
		"  --device SPEC    auto, cpu, cuda[:N] or amd[:N] (default auto)\n"
		"  --op LIST        ops, comma-separated (default %s)\n"
		"  --dtype LIST     dtypes, comma-separated (default bf16)\n"
		"  --hidden LIST    hidden sizes, comma-separated, K suffix allowed (default %s)\n"
		"                   (each of these three given again adds to its list)\n"
		"  --rows N         rows (default %d; %d on the CPU)\n"
		"  --iters N        timed batches, the median is reported (default %d; %d on the CPU)\n"
		"  --batch N        launches per timed batch (default: a multiple of the sets that runs\n"
		"                   at least %d ms on a GPU, so the host's time to submit the first\n"
		"                   launch is not counted; one launch per set on the CPU)\n"
		"  --warmup N       untimed launches first (default %d)\n"
		"  --approach A     auto, multiwave or ws (default auto; the CPU ignores it)\n"
		"  --autotune       with approach auto: time multiwave and ws (the backward's ws in its\n"
		"                   shapes that fit) once per shape on the GPU and cache the winner, as\n"
		"                   for run (the approach column says tuned+)\n"
		"  --block-threads N, --groups N, --unroll N, --stages N, --cluster N\n"
		"                   force a plan parameter, as for plan (default: the planner's; GPU only:\n"
		"                   not with the CPU device)\n"
		"  --no-weight      no affine weight (and no dweight)\n"
		"  --no-bias        no affine bias (and no dbias; LayerNorm)\n"
		"  --no-verify      do not check the outputs (the check column says off)\n"
		"  --inject-mismatch corrupt one output element before the check (a self-test, exit status 1)\n"
		"  --copy-size SIZE bytes of the copy-bandwidth buffer (default 1G; 256M on the CPU), or\n"
		"                   with --h2d of each copy (default 256M; 64M on the CPU)\n"
		"  --h2d            instead of kernels, time host-to-device and device-to-host copies\n"
		"                   from a ring of %d pinned host buffers, --iters copies each way\n"
		"  --json           machine-readable output\n"
		"  -h, --help       show this help\n",
		cli_prog, CLI_DEFAULT_BENCH_OPS, CLI_DEFAULT_BENCH_HIDDEN, CLI_DEFAULT_BENCH_ROWS, CPU_DEFAULT_ROWS,
		CLI_DEFAULT_BENCH_ITERS, CPU_DEFAULT_ITERS, (int)CLI_BATCH_MS, CLI_DEFAULT_BENCH_WARMUP,
		PL_DEFAULT_RING);
}

/* Events and the stream the kernels are timed with. */
struct timer {
	struct wsn_device *dev;
	struct wsn_stream *s;
	struct wsn_event *e0, *e1;
};

#define H2D_DEFAULT_BYTES (256ull << 20)
#define H2D_CPU_BYTES (64ull << 20)

/* bytes as "1 GiB", "1000 KiB" or "4097 bytes": the largest unit that divides it exactly. */
static const char *size_text(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = { "bytes", "KiB", "MiB", "GiB" };
	int u = 0;

	while (u < 3 && bytes && !(bytes & 1023))
		bytes >>= 10, u++;
	snprintf(buf, len, "%llu %s", (unsigned long long)bytes, units[u]);
	return buf;
}

/* A device's name, or null where none is known (the device could not be opened). */
static json_t *name_json(const char *name)
{
	return name && name[0] ? cli_json_text(name) : json_null();
}

/* --h2d --json: the rates, or after an error (err_msg) nulls and the error. di->spec names the device
 * asked for, and di->name is empty when it could not be opened. */
static void h2d_json(const struct bench_opts *o, const struct wsn_device_info *di, double h2d, double d2h,
		     const char *err_msg)
{
	json_t *root = json_object();

	json_object_set_new(root, "device", json_string(di->spec));
	json_object_set_new(root, "device_name", name_json(di->name));
	json_object_set_new(root, "copy_bytes", json_integer((json_int_t)o->copy_bytes));
	json_object_set_new(root, "ring", json_integer(PL_DEFAULT_RING));
	json_object_set_new(root, "iters", json_integer(o->iters));
	json_object_set_new(root, "h2d_gbs", err_msg ? json_null() : cli_json_real(h2d / 1e9));
	json_object_set_new(root, "d2h_gbs", err_msg ? json_null() : cli_json_real(d2h / 1e9));
	if (di->pcie_gen)
		json_object_set_new(root, "pcie", json_sprintf("gen%d x%d", di->pcie_gen, di->pcie_width));
	if (err_msg)
		json_object_set_new(root, "error", json_string(err_msg));
	cli_json_print(root);
}

/*
 * bench --json without --h2d: the points measured (jres, taken); after a runtime error those before
 * it and the error's message. di->name is empty when the device could not be opened.
 */
static void table_json(const struct bench_opts *o, const struct wsn_device_info *di, double copy_bps, json_t *jres,
		       int ret)
{
	json_t *root = json_object();

	json_object_set_new(root, "device", json_string(di->spec));
	json_object_set_new(root, "device_name", name_json(di->name));
	json_object_set_new(root, "copy_tbs", copy_bps > 0 ? cli_json_real(copy_bps / 1e12) : json_null());
	json_object_set_new(root, "copy_bytes", json_integer((json_int_t)o->copy_bytes));
	json_object_set_new(root, "iters", json_integer(o->iters));
	json_object_set_new(root, "results", jres);
	if (ret == EXIT_RUNTIME && cli_last_error()[0]) /* not after a shape with no plan alone */
		json_object_set_new(root, "error", json_string(cli_last_error()));
	cli_json_print(root);
}

/*
 * --h2d: copies between a ring of pinned host buffers (as `run` reads into) and one device
 * buffer, queued back to back on one stream, each way.
 */
static int bench_h2d(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di)
{
	void *host[PL_DEFAULT_RING] = { 0 }, *dbuf = NULL;
	double h2d = 0, d2h = 0;
	int err = 0, ret = EXIT_PASS;
	char sz[32];

	for (int i = 0; i < PL_DEFAULT_RING && !err; i++)
		if ((err = wsn_host_alloc(t->dev, o->copy_bytes, &host[i])) == 0)
			memset(host[i], 0x5a + i, o->copy_bytes);
	if (!err)
		err = wsn_mem_alloc(t->dev, o->copy_bytes, &dbuf);
	if (!err)
		err = cli_xfer_bandwidth(t->dev, t->s, host, PL_DEFAULT_RING, dbuf, o->copy_bytes, WSN_COPY_H2D, o->iters,
					 &h2d);
	if (!err)
		err = cli_xfer_bandwidth(t->dev, t->s, host, PL_DEFAULT_RING, dbuf, o->copy_bytes, WSN_COPY_D2H, o->iters,
					 &d2h);
	if (err < 0)
		ret = cli_fail(err, "bench --h2d: %llu-byte copies on %s", (unsigned long long)o->copy_bytes, di->spec);
	if (o->json) { /* after an error too, with the error's message in place of the rates */
		h2d_json(o, di, h2d, d2h, ret ? cli_last_error() : NULL);
	} else if (!ret) {
		printf("device %s (%s)%s: %d copies of %s each way from a ring of %d pinned buffers\n", di->spec, di->name,
		       di->exec_mem == WSN_MEM_HOST ? " (host memory: copies are memcpy)" : "", o->iters,
		       size_text(o->copy_bytes, sz, sizeof(sz)), PL_DEFAULT_RING);
		printf("h2d %8.2f GB/s\nd2h %8.2f GB/s\n", h2d / 1e9, d2h / 1e9);
	}
	wsn_mem_free(t->dev, dbuf);
	for (int i = 0; i < PL_DEFAULT_RING; i++)
		if (host[i])
			wsn_host_free(t->dev, host[i]);
	return ret;
}

/* One input/output set: its tensors' places in the point's one device allocation. */
struct set {
	void *x, *dy, *y, *mean, *rstd;
};

struct point {
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t hidden, rows;
	int weight, bias; /* affine weight; bias (LayerNorm only) */
	double ms, bytes, tbs, frac;
	int sets;
	int l2_resident;   /* the sets together fit twice in L2 (more would pass MAX_SETS) */
	int batch;         /* launches per timed batch */
	char approach[24]; /* "tuned+multiwave" */
	char noplan[512];  /* not "": the shape has no plan with these options (why) */
	int checked;       /* the outputs were compared with the CPU reference: */
	int pass;          /* ... and were within tolerance */
	double worst;      /* the largest rel_l2 over the compared outputs */
	char why[256];     /* the first output out of tolerance */
};

/*
 * The kernel family the plan runs: the description's "approach:" line, with "auto+" in front when
 * the planner chose it (auto+ws) or "tuned+" when autotune measured or cached it; "cpu" on the host.
 */
static void plan_approach(const struct wsn_plan *plan, enum wsn_approach asked, int host, char *out, size_t len)
{
	char desc[4096], word[16] = "";
	const char *a, *t;
	int tuned = 0;

	if (host) {
		snprintf(out, len, "cpu");
		return;
	}
	if (wsn_plan_describe(plan, desc, sizeof(desc)) >= 0 && (a = strstr(desc, "approach:")) &&
	    sscanf(a + 9, " %15[a-z]", word) == 1 && asked == WSN_APPROACH_AUTO) {
		if ((t = strstr(desc, "\nautotune:"))) {
			t += strlen("\nautotune:");
			tuned = strncmp(t + strspn(t, " "), "ignored", 7) != 0;
		}
		snprintf(out, len, "%s+%s", tuned ? "tuned" : "auto", word);
	} else {
		snprintf(out, len, "%s", word[0] ? word : wsn_approach_name(asked));
	}
}

/* Kernel time the warm-up runs for at least (milliseconds). */
#define WARM_MS 100.0f
/* Most launches in one timed batch (--batch and the automatic choice). */
#define MAX_BATCH 100000
/* Most input sets: a rotation of smaller sets than 2 x L2 / MAX_SETS stays in L2 (pt->l2_resident). */
#define MAX_SETS 4096
/* Rows of y or dx compared with the CPU reference (evenly spaced, the first and the last). */
#define VERIFY_ROWS 64

/* The random inputs: seed, mean and spread, the same for the timed sets and the reference. */
enum bench_in { IN_X, IN_DY, IN_MEAN, IN_RSTD, IN_W, IN_B };

static void fill_input(enum bench_in k, const struct wsn_tensor *t)
{
	static const struct {
		uint64_t seed;
		float mean, spread;
	} p[] = { [IN_X] = { 11, 0.25f, 1.0f },   [IN_DY] = { 12, 0.0f, 1.0f }, [IN_MEAN] = { 13, 0.25f, 0.1f },
		  [IN_RSTD] = { 14, 1.0f, 0.05f }, [IN_W] = { 15, 1.0f, 0.25f }, [IN_B] = { 16, 0.0f, 0.1f } };

	wsn_tensor_fill_random(t, p[k].seed, p[k].mean, p[k].spread);
}

/* The arguments of one launch of pt's op over `rows` rows of the given tensors in memory mem. */
static void point_args(const struct point *pt, enum wsn_mem mem, int64_t rows, const struct set *st, void *w,
		       void *b, void *dw, void *db, struct wsn_args *a)
{
	int ln = wsn_op_is_layernorm(pt->op);

	memset(a, 0, sizeof(*a));
	wsn_tensor_2d(&a->x, st->x, pt->dt, mem, rows, pt->hidden);
	if (pt->weight)
		wsn_tensor_1d(&a->weight, w, pt->dt, mem, pt->hidden);
	if (pt->bias)
		wsn_tensor_1d(&a->bias, b, pt->dt, mem, pt->hidden);
	wsn_tensor_1d(&a->rstd, st->rstd, WSN_F32, mem, rows);
	if (ln)
		wsn_tensor_1d(&a->mean, st->mean, WSN_F32, mem, rows);
	if (wsn_op_is_backward(pt->op)) {
		wsn_tensor_2d(&a->dy, st->dy, pt->dt, mem, rows, pt->hidden);
		wsn_tensor_2d(&a->dx, st->y, pt->dt, mem, rows, pt->hidden);
		if (pt->weight && dw)
			wsn_tensor_1d(&a->dweight, dw, pt->dt, mem, pt->hidden);
		if (pt->bias && db)
			wsn_tensor_1d(&a->dbias, db, pt->dt, mem, pt->hidden);
	} else {
		wsn_tensor_2d(&a->y, st->y, pt->dt, mem, rows, pt->hidden);
	}
}

/* A point's plan and buffers, launched going round its input sets. */
struct launcher {
	struct wsn_plan *plan;
	const struct point *pt;
	const struct wsn_device_info *di;
	void *w, *b, *dw, *db; /* weight, bias, dweight, dbias */
	const struct set *sets;
	int nsets, seq; /* the next launch takes sets[seq % nsets] */
	struct timer *t;
	int hold;         /* hold the stream before each timed batch (GPUs; 0 where unsupported) */
	uint64_t hold_ns; /* the next hold: 20 us a launch or more, doubled after one that ended too early */
};

/* Stream holds: at least HOLD_NS_PER_LAUNCH a launch (the host submits a backward call in 7-9 us
 * on the H100 machine, NOTES v28), doubled after a hold that ended too early, up to HOLD_MAX_NS. */
#define HOLD_NS_PER_LAUNCH 20000ull
#define HOLD_MIN_NS 200000ull
#define HOLD_MAX_NS 2000000000ull
#define HOLD_TRIES 8

/* Launch the plan once on the next set. */
static int bench_launch(struct launcher *l)
{
	struct wsn_args a;

	point_args(l->pt, l->di->exec_mem, l->pt->rows, &l->sets[l->seq++ % l->nsets], l->w, l->b, l->dw, l->db, &a);
	return wsn_plan_execute(l->plan, &a, l->t->s);
}

/*
 * n launches back to back between the timer's two events; *ms: their time. A call of a few
 * microseconds takes the host about as long to submit as the GPU to run, so on a GPU the stream is
 * first held (wsn_stream_hold) while the host queues all n behind the hold: the events then time
 * the GPU, not the host. If the hold was over before the last launch was queued (the start event
 * already done), the batch runs again behind a hold twice as long.
 */
static int timed_launches(struct launcher *l, int n, float *ms)
{
	uint64_t want = (uint64_t)n * HOLD_NS_PER_LAUNCH;
	int err, early = 0;

	if (l->hold_ns < want)
		l->hold_ns = want < HOLD_MIN_NS ? HOLD_MIN_NS : want > HOLD_MAX_NS ? HOLD_MAX_NS : want;
	for (int tries = 0;; tries++) {
		if (l->hold && (err = wsn_stream_hold(l->t->s, l->hold_ns)) < 0) {
			if (err != WSN_ENOTSUP)
				return err;
			l->hold = 0; /* a backend without holds: time the launches as they come */
		}
		if ((err = wsn_event_record(l->t->e0, l->t->s)) < 0)
			return err;
		for (int k = 0; k < n; k++)
			if ((err = bench_launch(l)) < 0)
				return err;
		if ((err = wsn_event_record(l->t->e1, l->t->s)) < 0)
			return err;
		if (l->hold && (early = wsn_event_query(l->t->e0)) < 0)
			return early;
		if ((err = wsn_event_sync(l->t->e1)) < 0 || (err = wsn_event_elapsed(l->t->e0, l->t->e1, ms)) < 0)
			return err;
		if (!l->hold || !early || tries + 1 >= HOLD_TRIES || l->hold_ns >= HOLD_MAX_NS)
			return 0;
		l->hold_ns = 2 * l->hold_ns > HOLD_MAX_NS ? HOLD_MAX_NS : 2 * l->hold_ns;
	}
}

/* Compare n elements of dtype dt; fold the verdict into pt (name: the output). */
static void check_output(struct point *pt, const char *name, const void *got, const void *ref, enum wsn_dtype dt,
			 int64_t n)
{
	struct wsn_tensor tg, tr;
	struct wsn_compare c;
	double tol = pl_tolerance(dt);

	wsn_tensor_1d(&tg, (void *)got, dt, WSN_MEM_HOST, n);
	wsn_tensor_1d(&tr, (void *)ref, dt, WSN_MEM_HOST, n);
	wsn_tensor_compare(&tg, &tr, &c);
	if (c.rel_l2 > pt->worst || isnan(c.rel_l2))
		pt->worst = c.rel_l2;
	if (c.nonfinite == 0 && c.rel_l2 <= tol)
		return;
	if (pt->pass)
		snprintf(pt->why, sizeof(pt->why),
			 "%s rel_l2 %.3g (tolerance %.0e), %lld finite/non-finite disagreements of %lld", name, c.rel_l2,
			 tol, (long long)c.nonfinite, (long long)c.count);
	pt->pass = 0;
}

/* Copy rows idx[0..n) of row_bytes each from the device matrix src into the host's dst. */
static int d2h_rows(struct wsn_device *dev, void *dst, const void *src, const int64_t *idx, int n, size_t row_bytes)
{
	int err = 0;

	for (int i = 0; i < n && !err; i++)
		err = wsn_memcpy(dev, (char *)dst + (size_t)i * row_bytes, (const char *)src + (size_t)idx[i] * row_bytes,
				 row_bytes, WSN_COPY_D2H, NULL);
	return err;
}

/*
 * After the timing, check what the plan computes: poison set 0's outputs, launch once on it, and
 * compare VERIFY_ROWS rows of y or dx (and the forward's mean and rstd) with the CPU reference on
 * those rows, and dweight/dbias with the CPU reference over every row. Sets pt->checked, pass,
 * worst and why; a runtime error is returned.
 */
static int bench_verify(struct launcher *l, struct wsn_device *cpu, int inject, struct point *pt)
{
	struct wsn_device *dev = l->t->dev;
	const struct set *s0 = &l->sets[0];
	int bwd = wsn_op_is_backward(pt->op), ln = wsn_op_is_layernorm(pt->op);
	int sums = bwd && (pt->weight || pt->bias);
	size_t es = wsn_dtype_size(pt->dt), rb = (size_t)pt->hidden * es, vec = rb;
	size_t mat = (size_t)pt->rows * rb, stats = (size_t)pt->rows * 4;
	int n = pt->rows < VERIFY_ROWS ? (int)pt->rows : VERIFY_ROWS;
	int64_t idx[VERIFY_ROWS];
	struct set full = { 0 }, rs = { 0 }, ref = { 0 }, got = { 0 };
	void *w = NULL, *b = NULL, *rdw = NULL, *rdb = NULL, *gdw = NULL, *gdb = NULL;
	struct wsn_plan_options po;
	struct wsn_plan *plan = NULL;
	struct wsn_args a;
	int err = 0;

	/* the launch on set 0 must write every output it is checked on */
	if ((err = wsn_mem_set(dev, s0->y, 0xff, mat, l->t->s)) < 0 ||
	    (!bwd && (err = wsn_mem_set(dev, s0->rstd, 0xff, stats, l->t->s)) < 0) ||
	    (!bwd && ln && (err = wsn_mem_set(dev, s0->mean, 0xff, stats, l->t->s)) < 0) ||
	    (bwd && pt->weight && (err = wsn_mem_set(dev, l->dw, 0xff, vec, l->t->s)) < 0) ||
	    (bwd && pt->bias && (err = wsn_mem_set(dev, l->db, 0xff, vec, l->t->s)) < 0))
		goto out;
	l->seq = 0;
	if ((err = bench_launch(l)) < 0 || (err = wsn_stream_sync(dev, l->t->s)) < 0)
		goto out;

	/* the inputs as the launch read them, from set 0: the rows checked, and every row for the sums */
	if (!(w = malloc(vec)) || !(b = malloc(vec)) || !(rs.x = malloc((size_t)n * rb)) ||
	    !(ref.y = malloc((size_t)n * rb)) || !(got.y = malloc((size_t)n * rb)) || !(rs.mean = malloc((size_t)n * 4)) ||
	    !(rs.rstd = malloc((size_t)n * 4)) || !(got.mean = malloc((size_t)n * 4)) || !(got.rstd = malloc((size_t)n * 4)))
		goto oom;
	if ((pt->weight && (err = wsn_memcpy(dev, w, l->w, vec, WSN_COPY_D2H, NULL)) < 0) ||
	    (pt->bias && (err = wsn_memcpy(dev, b, l->b, vec, WSN_COPY_D2H, NULL)) < 0))
		goto out;
	if (bwd && !(rs.dy = malloc((size_t)n * rb)))
		goto oom;
	if (sums) {
		if (!(full.x = malloc(mat)) || !(full.dy = malloc(mat)) || !(full.mean = malloc(stats)) ||
		    !(full.rstd = malloc(stats)))
			goto oom;
		if ((err = wsn_memcpy(dev, full.x, s0->x, mat, WSN_COPY_D2H, NULL)) < 0 ||
		    (err = wsn_memcpy(dev, full.dy, s0->dy, mat, WSN_COPY_D2H, NULL)) < 0 ||
		    (err = wsn_memcpy(dev, full.rstd, s0->rstd, stats, WSN_COPY_D2H, NULL)) < 0 ||
		    (ln && (err = wsn_memcpy(dev, full.mean, s0->mean, stats, WSN_COPY_D2H, NULL)) < 0))
			goto out;
	}
	if (bwd) /* the backward reads the sampled stats; the forward writes its own */
		ref.mean = rs.mean, ref.rstd = rs.rstd;
	else if (!(ref.mean = malloc((size_t)n * 4)) || !(ref.rstd = malloc((size_t)n * 4)))
		goto oom;
	ref.x = rs.x, ref.dy = rs.dy;
	/* the sampled input rows: from the host copies where the sums needed every row, else the device */
	pl_sample_rows(pt->rows, n, idx);
	if (sums) {
		pl_gather(rs.x, full.x, idx, n, rb);
		pl_gather(rs.dy, full.dy, idx, n, rb);
		pl_gather(rs.rstd, full.rstd, idx, n, 4);
		if (ln)
			pl_gather(rs.mean, full.mean, idx, n, 4);
	} else if ((err = d2h_rows(dev, rs.x, s0->x, idx, n, rb)) < 0 ||
		   (bwd && (err = d2h_rows(dev, rs.dy, s0->dy, idx, n, rb)) < 0) ||
		   (bwd && (err = d2h_rows(dev, rs.rstd, s0->rstd, idx, n, 4)) < 0) ||
		   (bwd && ln && (err = d2h_rows(dev, rs.mean, s0->mean, idx, n, 4)) < 0)) {
		goto out;
	}
	/* and the outputs on those rows */
	if ((err = d2h_rows(dev, got.y, s0->y, idx, n, rb)) < 0 ||
	    (!bwd && (err = d2h_rows(dev, got.rstd, s0->rstd, idx, n, 4)) < 0) ||
	    (!bwd && ln && (err = d2h_rows(dev, got.mean, s0->mean, idx, n, 4)) < 0))
		goto out;

	wsn_plan_options_init(&po, pt->op);
	po.has_weight = pt->weight;
	po.has_bias = pt->bias;
	if ((err = wsn_plan_create(cpu, pt->op, n, pt->hidden, pt->dt, &po, &plan)) < 0)
		goto out;
	point_args(pt, WSN_MEM_HOST, n, &ref, w, b, NULL, NULL, &a);
	if ((err = wsn_plan_execute(plan, &a, NULL)) < 0)
		goto out;
	if (inject) { /* the first element read back, far from any reference value */
		float far = 60000.0f;
		wsn_dtype_convert(got.y, pt->dt, &far, WSN_F32, 1);
	}
	pt->checked = pt->pass = 1;
	pt->worst = 0;
	check_output(pt, bwd ? "dx" : "y", got.y, ref.y, pt->dt, n * pt->hidden);
	if (!bwd) {
		if (ln)
			check_output(pt, "mean", got.mean, ref.mean, WSN_F32, n);
		check_output(pt, "rstd", got.rstd, ref.rstd, WSN_F32, n);
	}
	if (sums) { /* dweight/dbias: every row */
		wsn_plan_destroy(plan);
		plan = NULL;
		free(ref.y);
		if (!(ref.y = malloc(mat)) || !(rdw = malloc(vec)) || !(rdb = malloc(vec)) || !(gdw = malloc(vec)) ||
		    !(gdb = malloc(vec)))
			goto oom;
		full.y = ref.y;
		if ((err = wsn_plan_create(cpu, pt->op, pt->rows, pt->hidden, pt->dt, &po, &plan)) < 0)
			goto out;
		point_args(pt, WSN_MEM_HOST, pt->rows, &full, w, b, rdw, rdb, &a);
		if ((err = wsn_plan_execute(plan, &a, NULL)) < 0 ||
		    (pt->weight && (err = wsn_memcpy(dev, gdw, l->dw, vec, WSN_COPY_D2H, NULL)) < 0) ||
		    (pt->bias && (err = wsn_memcpy(dev, gdb, l->db, vec, WSN_COPY_D2H, NULL)) < 0))
			goto out;
		if (pt->weight)
			check_output(pt, "dweight", gdw, rdw, pt->dt, pt->hidden);
		if (pt->bias)
			check_output(pt, "dbias", gdb, rdb, pt->dt, pt->hidden);
	}
	goto out;
oom:
	err = WSN_ENOMEM;
	cli_error("bench: checking %s %s hidden %lld: ENOMEM: out of memory for the CPU reference over %lld rows",
		  wsn_op_name(pt->op), wsn_dtype_name(pt->dt), (long long)pt->hidden, (long long)pt->rows);
	goto done;
out:
	if (err < 0)
		cli_fail(err, "bench: checking %s %s hidden %lld against the CPU reference", wsn_op_name(pt->op),
			 wsn_dtype_name(pt->dt), (long long)pt->hidden);
done:
	wsn_plan_destroy(plan);
	free(full.x), free(full.dy), free(full.mean), free(full.rstd);
	free(rs.x), free(rs.dy), free(rs.mean), free(rs.rstd);
	free(ref.y);
	if (!bwd)
		free(ref.mean), free(ref.rstd);
	free(got.y), free(got.mean), free(got.rstd);
	free(w), free(b), free(rdw), free(rdb), free(gdw), free(gdb);
	return err;
}

/*
 * Measure one point (and check it, with cpu). A runtime error is reported (its message is then
 * cli_last_error(), for --json) and returns EXIT_RUNTIME; a shape with no plan is not an error
 * (pt->noplan says why). 0 otherwise.
 */
static int bench_point(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di,
		       struct wsn_device *cpu, double copy_bps, struct point *pt)
{
	size_t es = wsn_dtype_size(pt->dt), mat = (size_t)pt->rows * (size_t)pt->hidden * es;
	size_t stats = (size_t)pt->rows * 4, vec = (size_t)pt->hidden * es, set_bytes, stride, amat, astats, hb;
	int bwd = wsn_op_is_backward(pt->op);
	int nsets, err = 0, host = di->exec_mem == WSN_MEM_HOST;
	struct set *sets = NULL;
	void *base = NULL, *w = NULL, *b = NULL, *dw = NULL, *db = NULL, *hbuf = NULL;
	struct wsn_plan *plan = NULL;
	struct wsn_plan_options po;
	float *ms = NULL, m = 0;
	struct launcher l;

	/* the plan first: a shape without one needs no memory */
	wsn_plan_options_init(&po, pt->op);
	po.approach = o->approach;
	po.autotune = o->autotune;
	cli_kparam_apply(o->force, &po);
	po.has_weight = pt->weight;
	po.has_bias = pt->bias;
	if ((err = wsn_plan_create(t->dev, pt->op, pt->rows, pt->hidden, pt->dt, &po, &plan)) < 0) {
		if (err != WSN_ESHAPE && err != WSN_EINVAL)
			goto fail;
		/* this shape has no plan with these options (a forced family or parameter that does not
		 * fit): report it and go on with the other points */
		snprintf(pt->noplan, sizeof(pt->noplan), "%s", wsn_last_error());
		err = 0;
		goto out;
	}
	plan_approach(plan, o->approach, host, pt->approach, sizeof(pt->approach));

	/* enough sets in one allocation that a pass over all of them does not fit in L2 (twice over) */
	amat = (mat + 255) & ~(size_t)255;
	astats = (stats + 255) & ~(size_t)255;
	set_bytes = mat * (bwd ? 3 : 2) + stats * 2;
	stride = amat * (bwd ? 3 : 2) + astats * 2;
	nsets = (int)((2 * (uint64_t)di->l2_bytes + set_bytes - 1) / set_bytes) + 1;
	if (nsets < 2)
		nsets = 2;
	if (nsets > MAX_SETS)
		nsets = MAX_SETS;
	pt->sets = nsets;
	pt->l2_resident = (uint64_t)nsets * set_bytes < 2 * (uint64_t)di->l2_bytes;
	if (!(sets = calloc((size_t)nsets, sizeof(*sets))) || !(ms = calloc((size_t)o->iters, sizeof(float))))
		goto oom;
	/* the host buffer (for the largest tensor) first: pinned memory is mapped, so an absurd size
	 * fails there cleanly */
	hb = mat > stats ? mat : stats;
	if ((err = wsn_host_alloc(t->dev, hb > vec ? hb : vec, &hbuf)) < 0 ||
	    (err = wsn_mem_alloc(t->dev, stride * (size_t)nsets, &base)) < 0)
		goto fail;
	for (int k = 0; k < nsets; k++) {
		char *p = (char *)base + stride * (size_t)k;

		sets[k].x = p, p += amat;
		sets[k].y = p, p += amat;
		if (bwd)
			sets[k].dy = p, p += amat;
		sets[k].mean = p, p += astats;
		sets[k].rstd = p;
	}
	/* random inputs, made once on the host and copied into every set */
	{
		struct wsn_tensor ht;

		wsn_tensor_2d(&ht, hbuf, pt->dt, WSN_MEM_HOST, pt->rows, pt->hidden);
		fill_input(IN_X, &ht);
		for (int k = 0; k < nsets && !err; k++)
			err = wsn_memcpy(t->dev, sets[k].x, hbuf, mat, WSN_COPY_H2D, NULL);
		if (bwd) {
			fill_input(IN_DY, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].dy, hbuf, mat, WSN_COPY_H2D, NULL);
			wsn_tensor_1d(&ht, hbuf, WSN_F32, WSN_MEM_HOST, pt->rows);
			fill_input(IN_MEAN, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].mean, hbuf, stats, WSN_COPY_H2D, NULL);
			fill_input(IN_RSTD, &ht);
			for (int k = 0; k < nsets && !err; k++)
				err = wsn_memcpy(t->dev, sets[k].rstd, hbuf, stats, WSN_COPY_H2D, NULL);
		}
		if (!err && (err = wsn_mem_alloc(t->dev, vec, &w)) >= 0 && (err = wsn_mem_alloc(t->dev, vec, &b)) >= 0 &&
		    (err = wsn_mem_alloc(t->dev, vec, &dw)) >= 0 && (err = wsn_mem_alloc(t->dev, vec, &db)) >= 0) {
			wsn_tensor_1d(&ht, hbuf, pt->dt, WSN_MEM_HOST, pt->hidden);
			fill_input(IN_W, &ht);
			err = wsn_memcpy(t->dev, w, hbuf, vec, WSN_COPY_H2D, NULL);
			fill_input(IN_B, &ht);
			if (!err)
				err = wsn_memcpy(t->dev, b, hbuf, vec, WSN_COPY_H2D, NULL);
		}
		if (err < 0)
			goto fail;
	}
	l = (struct launcher){ .plan = plan, .pt = pt, .di = di, .w = w, .b = b, .dw = dw, .db = db, .sets = sets,
			       .nsets = nsets, .t = t, .hold = !host };
	/*
	 * Warm-up: whole passes over the sets until about WARM_MS of kernel time, so the clocks have
	 * ramped up again after the host-side set-up (a GPU idle for a few hundred milliseconds drops
	 * its clocks, and the first batches would then read low); the --warmup launches come after.
	 */
	for (float warm = 0; !host && warm < WARM_MS; warm += m > 0.001f ? m : 0.001f)
		if ((err = timed_launches(&l, nsets, &m)) < 0)
			goto fail;
	/*
	 * Launches per timed batch. The first launch of a batch reaches an idle GPU some microseconds
	 * after the start event (the host's time to submit it), and the launches after it queue behind
	 * it; a batch of a few launches would count that time in every call (2-4 % of a 40 us call).
	 * So a batch runs at least CLI_BATCH_MS, a whole number of passes over the sets.
	 */
	pt->batch = o->batch ? o->batch : nsets;
	if (!o->batch && !host && m > 0) {
		double passes = ceil(CLI_BATCH_MS / m), most = MAX_BATCH / nsets;
		pt->batch = nsets * (int)(passes < 1 ? 1 : passes > most ? most : passes);
	}
	for (int i = 0; i < o->warmup; i++)
		if ((err = bench_launch(&l)) < 0)
			goto fail;
	for (int it = 0; it < o->iters; it++) {
		if ((err = timed_launches(&l, pt->batch, &m)) < 0)
			goto fail;
		ms[it] = m / (float)pt->batch;
	}
	if ((err = wsn_stream_sync(t->dev, t->s)) < 0)
		goto fail;
	pt->ms = cli_median(ms, o->iters);
	pt->bytes = (double)wsn_op_min_bytes(pt->op, pt->rows, pt->hidden, pt->dt, pt->weight, pt->bias);
	pt->tbs = pt->ms > 0 ? pt->bytes / (pt->ms * 1e-3) / 1e12 : 0;
	pt->frac = copy_bps > 0 ? pt->tbs * 1e12 / copy_bps : 0;
	if (cpu && (err = bench_verify(&l, cpu, o->inject_mismatch, pt)) < 0)
		goto out; /* reported */
	goto out;
oom:
	err = WSN_ENOMEM;
	cli_error("bench: %s %s hidden %lld on %s: ENOMEM: out of memory", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
		  (long long)pt->hidden, di->spec);
	goto out;
fail:
	cli_fail(err, "bench: %s %s hidden %lld on %s", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
		 (long long)pt->hidden, di->spec);
out:
	wsn_plan_destroy(plan);
	wsn_mem_free(t->dev, base);
	wsn_mem_free(t->dev, w);
	wsn_mem_free(t->dev, b);
	wsn_mem_free(t->dev, dw);
	wsn_mem_free(t->dev, db);
	if (hbuf)
		wsn_host_free(t->dev, hbuf);
	free(sets);
	free(ms);
	return err < 0 ? EXIT_RUNTIME : 0;
}

static int parse_list(const char *s, int (*one)(const char *, int *), int *out, int max)
{
	char buf[512], *save = NULL, *tok;
	int n = 0;

	if (strlen(s) >= sizeof(buf) || cli_list_has_empty(s))
		return -1;
	strcpy(buf, s);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n >= max || one(tok, &out[n]))
			return -1;
		n++;
	}
	return n ? n : -1;
}

static int one_op(const char *s, int *v)
{
	enum wsn_op op;
	if (wsn_op_parse(s, &op) < 0)
		return -1;
	*v = (int)op;
	return 0;
}

static int one_dt(const char *s, int *v)
{
	enum wsn_dtype dt;
	if (wsn_dtype_parse(s, &dt) < 0)
		return -1;
	*v = (int)dt;
	return 0;
}

/* Does a list repeat a value? The index of its second naming, or -1; *first: the first's. */
static int repeated(const int64_t *v, int n, int *first)
{
	for (int i = 1; i < n; i++)
		for (int k = 0; k < i; k++)
			if (v[k] == v[i]) {
				*first = k;
				return i;
			}
	return -1;
}

static int repeated_int(const int *v, int n, int *first)
{
	int64_t w[MAX_LIST];

	for (int i = 0; i < n && i < MAX_LIST; i++)
		w[i] = v[i];
	return repeated(w, n < MAX_LIST ? n : MAX_LIST, first);
}

/*
 * A value named twice in a list option's values so far: first is the index of its first naming, base
 * the index where this option's own values start.
 */
static int list_repeat(const char *opt, const char *arg, const char *value, int first, int base)
{
	if (first < base)
		return cli_usage_error("bench", "%s '%s' names %s, which an earlier %s named", opt, arg, value, opt);
	return cli_usage_error("bench", "%s '%s' names %s twice", opt, arg, value);
}

/* A point as a JSON object. */
static json_t *point_json(const struct point *pt)
{
	json_t *p = json_object();

	json_object_set_new(p, "op", json_string(wsn_op_name(pt->op)));
	json_object_set_new(p, "dtype", json_string(wsn_dtype_name(pt->dt)));
	json_object_set_new(p, "hidden", json_integer(pt->hidden));
	json_object_set_new(p, "rows", json_integer(pt->rows));
	if (pt->noplan[0]) {
		json_object_set_new(p, "error", json_string(pt->noplan));
		return p;
	}
	json_object_set_new(p, "time_us", cli_json_real(pt->ms * 1e3));
	json_object_set_new(p, "bytes", json_integer((json_int_t)pt->bytes));
	json_object_set_new(p, "tbs", pt->tbs > 0 ? cli_json_real(pt->tbs) : json_null());
	json_object_set_new(p, "fraction_of_copy", pt->frac > 0 ? cli_json_real(pt->frac) : json_null());
	json_object_set_new(p, "sets", json_integer(pt->sets));
	json_object_set_new(p, "l2_resident", json_boolean(pt->l2_resident));
	json_object_set_new(p, "batch", json_integer(pt->batch));
	json_object_set_new(p, "approach", json_string(pt->approach));
	json_object_set_new(p, "weight", json_boolean(pt->weight));
	json_object_set_new(p, "bias", json_boolean(pt->bias));
	json_object_set_new(p, "check", json_string(!pt->checked ? "off" : pt->pass ? "pass" : "mismatch"));
	json_object_set_new(p, "check_rel_l2", pt->checked ? cli_json_real(pt->worst) : json_null());
	if (pt->checked && !pt->pass)
		json_object_set_new(p, "check_error", json_string(pt->why));
	return p;
}

/* A point as a line of the table (and what it says on stderr: no plan, a mismatch, L2). */
static void point_text(const struct point *pt)
{
	char tbs[16] = "-", frac[16] = "-";

	if (pt->noplan[0]) {
		printf("%-14s %-5s %7lld %7lld %10s %8s %7s %5s %5s %-5s %s\n", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
		       (long long)pt->hidden, (long long)pt->rows, "-", "-", "-", "-", "-", "-", "no plan");
		fflush(stdout);
		return;
	}
	if (pt->tbs > 0)
		snprintf(tbs, sizeof(tbs), "%.3f", pt->tbs);
	if (pt->frac > 0)
		snprintf(frac, sizeof(frac), "%.3f", pt->frac);
	printf("%-14s %-5s %7lld %7lld %10.2f %8s %7s %5d %5d %-5s %s\n", wsn_op_name(pt->op), wsn_dtype_name(pt->dt),
	       (long long)pt->hidden, (long long)pt->rows, pt->ms * 1e3, tbs, frac, pt->sets, pt->batch,
	       !pt->checked ? "off" : pt->pass ? "ok" : "FAIL", pt->approach);
	fflush(stdout);
}

int cmd_bench(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'D' },  { "op", required_argument, NULL, 'o' },
		{ "dtype", required_argument, NULL, 'd' },   { "hidden", required_argument, NULL, 'H' },
		{ "rows", required_argument, NULL, 'r' },    { "iters", required_argument, NULL, 'i' },
		{ "warmup", required_argument, NULL, 'w' },  { "approach", required_argument, NULL, 'a' },
		{ "copy-size", required_argument, NULL, 'c' }, { "json", no_argument, NULL, 'j' },
		{ "h2d", no_argument, NULL, 'T' },            { "autotune", no_argument, NULL, 'A' },
		CLI_KPARAM_OPTIONS,                          { "no-weight", no_argument, NULL, 'W' },
		{ "no-bias", no_argument, NULL, 'B' },       { "batch", required_argument, NULL, 'b' },
		{ "no-verify", no_argument, NULL, 'V' },     { "inject-mismatch", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct bench_opts o;
	struct wsn_device_info di;
	struct wsn_device *cpu = NULL;
	struct timer t = { 0 };
	int ops[MAX_LIST], dts[MAX_LIST], c, ret = EXIT_PASS, err, k; /* room for repeats, reported as such */
	int given = 0, base, n, first; /* given: --op 1, --dtype 2, --hidden 4 (a later one adds to the list) */
	int have_copy = 0, noplan = 0, mismatch = 0, any_bias = 0;
	const char *kernel_opt = NULL; /* the last option that only the kernels' table uses */
	double copy_bps = 0;
	int64_t v;
	json_t *jres = NULL;
	char sz[32];

	memset(&o, 0, sizeof(o));
	o.device = "auto";
	o.nops = parse_list(CLI_DEFAULT_BENCH_OPS, one_op, ops, WSN_OP_COUNT);
	o.ndts = 1;
	dts[0] = WSN_BF16;
	o.nhidden = cli_parse_i64_list(CLI_DEFAULT_BENCH_HIDDEN, 1, CLI_MAX_HIDDEN, o.hidden, MAX_LIST);
	o.rows = CLI_DEFAULT_BENCH_ROWS;
	o.iters = CLI_DEFAULT_BENCH_ITERS;
	o.warmup = CLI_DEFAULT_BENCH_WARMUP;
	o.copy_bytes = 1ull << 30;
	o.weight = o.bias = 1;
	o.verify = 1;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case 'D':
			if (wsn_device_spec_parse(optarg, NULL, NULL) < 0)
				return cli_usage_error("bench", "bad --device '%s' (expected auto, cpu, cuda[:N] or amd[:N])",
						       optarg);
			o.device = optarg;
			break;
		case 'o':
			/* a list option given again adds to the list, as a longer list would */
			base = given & 1 ? o.nops : 0;
			if ((n = parse_list(optarg, one_op, ops + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --op '%s' (expected %s, comma-separated)", optarg,
						       "layernorm-fwd, layernorm-bwd, rmsnorm-fwd or rmsnorm-bwd");
			o.nops = base + n;
			if ((k = repeated_int(ops, o.nops, &first)) >= 0)
				return list_repeat("--op", optarg, wsn_op_name((enum wsn_op)ops[k]), first, base);
			given |= 1;
			kernel_opt = "--op";
			break;
		case 'd':
			base = given & 2 ? o.ndts : 0;
			if ((n = parse_list(optarg, one_dt, dts + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --dtype '%s' (expected f32, f16 or bf16, comma-separated)",
						       optarg);
			o.ndts = base + n;
			if ((k = repeated_int(dts, o.ndts, &first)) >= 0)
				return list_repeat("--dtype", optarg, wsn_dtype_name((enum wsn_dtype)dts[k]), first, base);
			given |= 2;
			kernel_opt = "--dtype";
			break;
		case 'H':
			base = given & 4 ? o.nhidden : 0;
			if ((n = cli_parse_i64_list(optarg, 1, CLI_MAX_HIDDEN, o.hidden + base, MAX_LIST - base)) < 0)
				return cli_usage_error("bench", "bad --hidden '%s' (expected up to %d sizes 1..%d in all, "
						       "comma-separated)", optarg, MAX_LIST, CLI_MAX_HIDDEN);
			o.nhidden = base + n;
			if ((k = repeated(o.hidden, o.nhidden, &first)) >= 0) {
				snprintf(sz, sizeof(sz), "%lld", (long long)o.hidden[k]);
				return list_repeat("--hidden", optarg, sz, first, base);
			}
			given |= 4;
			kernel_opt = "--hidden";
			break;
		case 'r':
			if (cli_parse_i64(optarg, 1, 1LL << 31, &o.rows))
				return cli_usage_error("bench", "bad --rows '%s' (expected 1..2^31)", optarg);
			o.have_rows = 1;
			kernel_opt = "--rows";
			break;
		case 'i': case 'w':
			if (cli_parse_count(optarg, c == 'i' ? 1 : 0, 100000, &v))
				return cli_usage_error("bench", "bad %s '%s' (expected %d..100000)", c == 'i' ? "--iters" : "--warmup",
						       optarg, c == 'i' ? 1 : 0);
			if (c == 'i') {
				o.iters = (int)v, o.have_iters = 1;
			} else {
				o.warmup = (int)v;
				kernel_opt = "--warmup";
			}
			break;
		case 'b':
			if (cli_parse_count(optarg, 1, MAX_BATCH, &v))
				return cli_usage_error("bench", "bad --batch '%s' (expected 1..%d)", optarg, MAX_BATCH);
			o.batch = (int)v;
			kernel_opt = "--batch";
			break;
		case 'a':
			if (wsn_approach_parse(optarg, &o.approach) < 0)
				return cli_usage_error("bench", "%s", wsn_last_error());
			kernel_opt = "--approach";
			break;
		case 'c':
			if (cli_parse_size(optarg, &o.copy_bytes) || o.copy_bytes < 4096)
				return cli_usage_error("bench", "bad --copy-size '%s' (expected 4096 bytes or more, below 2^63)",
						       optarg);
			have_copy = 1;
			break;
		CLI_KPARAM_CASES:
			if ((ret = cli_parse_kparam("bench", c - CLI_OPT_KPARAM, optarg, o.force)))
				return ret;
			kernel_opt = cli_kparam_forced(o.force);
			break;
		case 'j': o.json = 1; break;
		case 'T': o.h2d = 1; break;
		case 'A': o.autotune = 1, kernel_opt = "--autotune"; break;
		case 'W': o.weight = 0, kernel_opt = "--no-weight"; break;
		case 'B': o.bias = 0, kernel_opt = "--no-bias"; break;
		case 'V': o.verify = 0, kernel_opt = "--no-verify"; break;
		case 'I': o.inject_mismatch = 1, kernel_opt = "--inject-mismatch"; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("bench", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("bench", "unexpected argument '%s'", argv[optind]);
	if (o.h2d && kernel_opt)
		return cli_usage_error("bench", "--h2d times copies, not kernels: drop %s", kernel_opt);
	if (o.inject_mismatch && !o.verify)
		return cli_usage_error("bench", "--inject-mismatch tests the check that --no-verify turns off: drop one");
	if ((ret = cli_open_device("bench", o.device, 0, &t.dev))) {
		if (o.json && ret == EXIT_RUNTIME) { /* the document still comes, the same keys, no device */
			memset(&di, 0, sizeof(di));
			snprintf(di.spec, sizeof(di.spec), "%s", o.device);
			if (o.h2d && !have_copy)
				o.copy_bytes = H2D_DEFAULT_BYTES; /* what a GPU would have been given */
			if (o.h2d)
				h2d_json(&o, &di, 0, 0, cli_last_error());
			else
				table_json(&o, &di, 0, json_array(), ret);
		}
		return ret;
	}
	wsn_device_info(t.dev, &di);
	/* with --json, the document is printed at the end, also after a runtime error */
	if (o.json && !o.h2d)
		jres = json_array();
	if ((ret = cli_kparam_gpu_only("bench", o.device, &di, o.force, 0))) {
		json_decref(jres); /* a usage error: no document */
		jres = NULL;
		goto out;
	}
	if (di.exec_mem == WSN_MEM_HOST) {
		if (!o.have_rows)
			o.rows = CPU_DEFAULT_ROWS;
		if (!o.have_iters)
			o.iters = CPU_DEFAULT_ITERS;
		if (!have_copy)
			o.copy_bytes = 256u << 20;
	}
	if (o.h2d && !have_copy)
		o.copy_bytes = di.exec_mem == WSN_MEM_HOST ? H2D_CPU_BYTES : H2D_DEFAULT_BYTES;
	if ((err = wsn_stream_create(t.dev, &t.s)) < 0 || (err = wsn_event_create(t.dev, &t.e0)) < 0 ||
	    (err = wsn_event_create(t.dev, &t.e1)) < 0) {
		ret = cli_fail(err, "bench: streams and events on %s", di.spec);
		if (o.json && o.h2d)
			h2d_json(&o, &di, 0, 0, cli_last_error());
		goto out;
	}
	if (o.h2d) {
		ret = bench_h2d(&o, &t, &di);
		goto out;
	}
	if (o.verify && (ret = cli_open_device("bench", "cpu", 0, &cpu)))
		goto out;
	if ((err = cli_copy_bandwidth(t.dev, t.s, o.copy_bytes, 10, &copy_bps)) < 0) {
		ret = cli_fail(err, "bench: copy bandwidth on %s", di.spec);
		goto out;
	}
	for (int i = 0; i < o.nops; i++)
		any_bias |= wsn_op_is_layernorm(ops[i]);
	if (!o.json) {
		printf("device %s (%s); device-to-device copy %.3f TB/s (read + write, %s)%s%s\n", di.spec, di.name,
		       copy_bps / 1e12, size_text(o.copy_bytes, sz, sizeof(sz)), o.weight ? "" : "; no weight",
		       o.bias || !any_bias ? "" : "; no bias");
		printf("%-14s %-5s %7s %7s %10s %8s %7s %5s %5s %-5s %s\n", "op", "dtype", "hidden", "rows", "time_us", "TB/s",
		       "of_copy", "sets", "batch", "check", "approach");
	}
	for (int i = 0; i < o.nops; i++) {
		for (int d = 0; d < o.ndts; d++) {
			for (int h = 0; h < o.nhidden; h++) {
				struct point pt = { .op = (enum wsn_op)ops[i], .dt = (enum wsn_dtype)dts[d],
						    .hidden = o.hidden[h], .rows = o.rows, .weight = o.weight };
				const char *name = wsn_op_name(pt.op), *dtn = wsn_dtype_name(pt.dt);

				pt.bias = o.bias && wsn_op_is_layernorm(pt.op);
				if ((ret = bench_point(&o, &t, &di, cpu, copy_bps, &pt)))
					goto out;
				if (pt.noplan[0]) {
					fprintf(stderr, "%s: bench: %s %s hidden %lld: no plan: %s\n", cli_prog, name, dtn,
						(long long)pt.hidden, pt.noplan);
					noplan++;
				}
				if (pt.checked && !pt.pass) {
					fprintf(stderr, "%s: bench: %s %s hidden %lld: the outputs differ from the CPU reference: %s\n",
						cli_prog, name, dtn, (long long)pt.hidden, pt.why);
					mismatch++;
				}
				if (pt.l2_resident)
					cli_note("%s: bench: note: %s %s hidden %lld: all %d input sets fit twice in the L2 "
						 "cache, so the time includes L2 hits\n", cli_prog, name, dtn, (long long)pt.hidden,
						 pt.sets);
				if (o.json)
					json_array_append_new(jres, point_json(&pt));
				else
					point_text(&pt);
			}
		}
	}
	if (noplan)
		ret = EXIT_RUNTIME; /* the table is whole, but not every point ran */
	else if (mismatch)
		ret = EXIT_MISMATCH;
out:
	if (jres)
		table_json(&o, &di, copy_bps, jres, ret);
	wsn_device_close(cpu);
	wsn_event_destroy(t.e0);
	wsn_event_destroy(t.e1);
	wsn_stream_destroy(t.s);
	wsn_device_close(t.dev);
	return ret;
}
