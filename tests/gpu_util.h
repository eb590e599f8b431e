/* SPDX-License-Identifier: MIT */
/* tests/gpu_util.h: what the check_gpu_*.c tests share: devices, buffers and runs checked against the CPU backend. */
#ifndef WSN_TESTS_GPU_UTIL_H
#define WSN_TESTS_GPU_UTIL_H

#include "config.h"
#include <stdio.h>

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define OK(call)                                                                                    \
	do {                                                                                        \
		int e_ = (call);                                                                    \
		ck_assert_msg(e_ == 0, "%s: %s: %s", #call, wsn_err_name(e_), wsn_last_error()); \
	} while (0)

static const enum wsn_dtype dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };

static const enum wsn_op ops[] = { WSN_LAYERNORM_FWD, WSN_RMSNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };

/* One (dtype, hidden, layout): inputs in host and device memory, output buffers of both backends. */
struct setup {
	enum wsn_dtype dt;
	int64_t hidden, rows; /* rows: the most any run uses */
	int64_t ld, off;      /* x and dy: row stride and offset in elements (ld > hidden, off > 0: unaligned) */
	int stats2d;          /* mean/rstd as [rows, 1]; 2: backward mean [rows] with rstd [rows, 1] */
	size_t es, in_elems;
	void *hx, *hdy, *hw, *hb;           /* host inputs */
	void *x, *dy, *w, *b;               /* device inputs */
	float *hmean, *hrstd_ln, *hrstd_rms; /* CPU forward statistics: the backward inputs */
	void *mean_in, *rstd_ln_in, *rstd_rms_in;
	/* outputs: CPU (c*), GPU device (d*), GPU read back (g*) */
	void *cy, *cdx, *cdw, *cdb, *gy, *gdx, *gdw, *gdb, *gy2, *gdx2, *gdw2, *gdb2;
	float *cmean, *crstd, *gmean, *grstd;
	void *dyo, *ddx, *ddw, *ddb, *dmean, *drstd;
};

/* Inputs for hidden h and rows r (row stride ld >= h, offset off elements), all dtypes share them. */
struct inputs {
	float *x, *dy, *w, *b;
};

extern struct wsn_device *gpu_dev, *cpu_dev;

void gpu_setup(void);

void gpu_teardown(void);

void *gpu_dalloc(size_t bytes);

void gpu_upload(void *d, const void *h, size_t n);

void gpu_download(void *h, const void *d, size_t n);

/* 0xFF bytes are NaN in f32, f16 and bf16: an element the kernel does not write fails the compare. */
void gpu_poison(void *d, size_t n);

/* [rows, hidden] with row stride ld, starting off elements into base. */
struct wsn_tensor gpu_mat(void *base, enum wsn_dtype dt, enum wsn_mem mem, int64_t rows, int64_t hidden,
			     int64_t ld, int64_t off);

struct wsn_tensor gpu_vec(void *p, enum wsn_dtype dt, enum wsn_mem mem, int64_t n);

/* mean/rstd: f32 [rows], or [rows, 1] */
struct wsn_tensor gpu_stats(void *p, enum wsn_mem mem, int64_t rows, int two_d);

double gpu_tolerance(enum wsn_dtype dt);

void *gpu_xcalloc(size_t n);

/* Random inputs from f32 (mean 0.5 so the statistics are not near zero), converted to dt. */
void gpu_setup_init(struct setup *s, enum wsn_dtype dt, int64_t hidden, int64_t rows, int64_t ld, int64_t off,
		       int stats2d, const float *x32, const float *dy32, const float *w32, const float *b32);

void gpu_setup_free(struct setup *s);

/* The arguments of op over the first r rows, in host (CPU) or device (GPU) memory. */
struct wsn_args gpu_args_of(const struct setup *s, enum wsn_op op, int64_t r, int on_gpu);

double gpu_elem(const void *p, enum wsn_dtype dt, int64_t i);

/*
 * The size of the terms dx is made of, ||rstd * dy * w|| over the first r rows. On ordinary rows
 * it is about ||dx||; where the terms cancel (hidden 1 RMSNorm: xhat^2 = x^2 / (x^2 + eps) ~ 1)
 * dx is far smaller than its terms, and f32 rounding of the terms is all that is left of it.
 */
double gpu_dx_scale(const struct setup *s, enum wsn_op op, int64_t r);

/*
 * Compare one output; prints and returns 1 on a mismatch. The error is relative to the larger of
 * ||ref|| and scale (0: ||ref|| alone).
 */
int gpu_check_out(const char *what, const char *name, enum wsn_dtype dt, const void *got, const void *ref, int64_t n,
		     double tol, double scale, double *worst);

/* Run op over r rows on both backends and compare; backward runs twice to check determinism. */
int gpu_run_rows(struct setup *s, enum wsn_op op, struct wsn_plan *gp, struct wsn_plan *cp, int64_t r,
		    double *worst);

extern int gpu_run_op_skips;

/* One op over every row count in rows[] with GPU plan options po (NULL: defaults); returns the
 * failures. A forced plan that does not fit (WSN_EINVAL/WSN_ESHAPE) is skipped when may_skip
 * (counted in run_op_skips). */
int gpu_run_op(struct setup *s, enum wsn_op op, const struct wsn_plan_options *po, const char *label,
		  const int64_t *rows, int nrows, int may_skip);

float *gpu_random_f32(size_t n, const char *tag, float mean, float stddev);

void gpu_inputs_make(struct inputs *in, const char *tag, int64_t h, int64_t r, int64_t ld, int64_t off);

void gpu_inputs_free(struct inputs *in);

/* Whether the ws planner gives a plan for op/dt/hidden/rows on this GPU with default options (what
 * autotune asks first); the CTAs that share a row in *cluster (1: a CTA per row; cluster may be NULL). */
/* The ws plan for this shape on the GPU, into *out when not NULL; whether there is one. */
int gpu_ws_plan_get(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, struct wsn__kernel_plan *out);

int gpu_ws_plans(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows, unsigned *cluster);

#endif /* WSN_TESTS_GPU_UTIL_H */
