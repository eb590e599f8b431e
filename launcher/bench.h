/* SPDX-License-Identifier: MIT */
/* launcher/bench.h: what the pieces of `wsnorm bench` share: its options, a measured point, the timer. */
#ifndef WSN_BENCH_H
#define WSN_BENCH_H

#include "cli.h"

#define MAX_LIST 32
#define CPU_DEFAULT_ROWS 1024
#define CPU_DEFAULT_ITERS 3
/* Most launches in one timed batch (--batch and the automatic choice). */
#define MAX_BATCH 100000
/* Most input sets: a rotation of smaller sets than 2 x L2 / MAX_SETS stays in L2 (pt->l2_resident). */
#define MAX_SETS 4096
#define H2D_DEFAULT_BYTES (256ull << 20)
/* Single calls timed per point by default (--calls). */
#define SINGLE_CALLS 100
#define MAX_CALLS 10000
#define CPU_SINGLE_CALLS 3
/* The L2 flush before each single call writes this many times the L2, and at least FLUSH_MIN_BYTES. */
#define FLUSH_L2_TIMES 4
#define FLUSH_MIN_BYTES (64ull << 20)

/* What bench times (--timing): batches of launches back to back, each call alone, or both. */
enum bench_timing { TIMING_BATCH = 1, TIMING_SINGLE = 2, TIMING_BOTH = 3 };
#define H2D_CPU_BYTES (64ull << 20)

struct bench_opts {
	const char *device;
	int ops[MAX_LIST]; /* enum wsn_op; room for repeats, reported as such */
	int nops;
	int dts[MAX_LIST]; /* enum wsn_dtype */
	int ndts;
	int64_t hidden[MAX_LIST];
	int nhidden;
	int64_t rows;
	int iters, warmup;
	enum bench_timing timing;
	int calls;     /* single calls timed per point */
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
	int have_rows, have_iters, have_copy, have_calls;
};

/* Events and the stream the kernels are timed with; for single calls, a pair of events a call and
 * the buffer written before each to flush the L2. */
struct timer {
	struct wsn_device *dev;
	struct wsn_stream *s;
	struct wsn_event *e0, *e1;
	struct wsn_event **call_ev; /* 2 * calls: the start and end of call i at 2i and 2i + 1 */
	int calls;
	void *flush;
	size_t flush_bytes;
};

/* One input/output set: its tensors' places in the point's one device allocation. */
struct set {
	void *x, *dy, *y, *mean, *rstd;
};

struct point {
	enum wsn_op op;
	enum wsn_dtype dt;
	int64_t hidden, rows;
	int weight, bias; /* affine weight; bias (LayerNorm only) */
	double ms, bytes, tbs, frac; /* back to back (ms 0: not timed) */
	double single_ms, single_tbs, single_frac; /* each call alone after an L2 flush (0: not timed) */
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

/* bench_options.c */
/*
 * Parse bench's command line into o (defaults first). Returns -1 to go on, or the exit status to
 * return now (0 after --help, EXIT_USAGE after a usage error, reported).
 */
int bench_parse_options(int argc, char **argv, struct bench_opts *o);

/* bench_point.c */
/*
 * Measure one point (and check it, with cpu). A runtime error is reported (its message is then
 * cli_last_error(), for --json) and returns EXIT_RUNTIME; a shape with no plan is not an error
 * (pt->noplan says why). 0 otherwise.
 */
int bench_point(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di,
		struct wsn_device *cpu, double copy_bps, struct point *pt);

/* Events and the flush buffer for single calls on t's device (timing without single: none). */
int bench_timer_single(struct timer *t, const struct bench_opts *o, const struct wsn_device_info *di);
/* Free what bench_timer_single made. */
void bench_timer_single_free(struct timer *t);

/* bench_copy.c */
/*
 * --h2d: copies between a ring of pinned host buffers (as `run` reads into) and one device
 * buffer, queued back to back on one stream, each way; the rates as text or JSON.
 */
int bench_h2d(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di);

/* bench_report.c */
/* bytes as "1 GiB", "1000 KiB" or "4097 bytes": the largest unit that divides it exactly. */
const char *bench_size_text(uint64_t bytes, char *buf, size_t len);
/* --h2d --json: the rates, or after an error (err_msg) nulls and the error. di->spec names the device
 * asked for, and di->name is empty when it could not be opened. */
void bench_h2d_json(const struct bench_opts *o, const struct wsn_device_info *di, double h2d, double d2h,
		    const char *err_msg);
/*
 * bench --json without --h2d: the points measured (jres, taken); after a runtime error those before
 * it and the error's message. di->name is empty when the device could not be opened.
 */
void bench_table_json(const struct bench_opts *o, const struct wsn_device_info *di, double copy_bps, json_t *jres,
		      int ret);
/* A point as a JSON object. */
json_t *bench_point_json(const struct point *pt);
/* The text table's first line, the column names. */
void bench_table_head(void);
/* A point as a line of the table. */
void bench_point_text(const struct point *pt);

#endif
