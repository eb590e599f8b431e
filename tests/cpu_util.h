/* SPDX-License-Identifier: MIT */
/* tests/cpu_util.h: what the check_cpu_*.c tests share: buffers, tolerances and the reference run. */
#ifndef WSN_TESTS_CPU_UTIL_H
#define WSN_TESTS_CPU_UTIL_H

#include "cpu/cpu.h"

#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

/* Byte that fills every buffer before a run: padding between rows must still hold it afterwards. */
#define SENTINEL 0x5a

#define TOL_F32 1e-6

#define TOL_HALF 1e-2

/* A host tensor and the buffer under it. */
struct buf {
	struct wsn_tensor t;
	void *mem;
	size_t slots; /* elements the buffer holds, padding included */
};

void cpu_buf_alloc(struct buf *b, enum wsn_dtype dt, size_t slots);

/* [rows, cols] with row stride ld >= cols. */
void cpu_buf_matrix(struct buf *b, enum wsn_dtype dt, int64_t rows, int64_t cols, int64_t ld);

void cpu_buf_vector(struct buf *b, enum wsn_dtype dt, int64_t n);

/* mean/rstd: f32 [rows] or [rows, 1], ld elements apart. */
void cpu_buf_stats(struct buf *b, int64_t rows, int two_d, int64_t ld);

void cpu_buf_free(struct buf *b);

/* The buffers of a backward op's arguments: x, dy and dx [rows, hidden] with row stride ld, weight
 * and dweight [hidden], rstd f32 [rows]; for LayerNorm also dbias [hidden] and mean f32 [rows]. */
struct bwd_bufs {
	struct buf x, dy, dx, w, dw, db, mean, rstd;
};

/* Allocate b for op and point a (zeroed first) at them. */
void cpu_bwd_bufs(struct bwd_bufs *b, struct wsn_args *a, enum wsn_op op, enum wsn_dtype dt, int64_t rows,
		  int64_t hidden, int64_t ld);

void cpu_bwd_bufs_free(struct bwd_bufs *b);

/* x's forward statistics in float64 (LayerNorm: mean and rstd; RMSNorm: rstd), stored into mean
 * (NULL for RMSNorm) and rstd: what a forward pass hands its backward. */
void cpu_store_fwd_stats(enum wsn_op op, const struct wsn_tensor *x, double eps, const struct wsn_tensor *mean,
			 const struct wsn_tensor *rstd);

/* v rounded to dt and back, as an output of dtype dt holds it. */
double cpu_round_to(enum wsn_dtype dt, double v);

/* Plan op for rows x hidden of dt (opts may be NULL) on dev and run it on a: ck_asserts both. */
void cpu_execute(struct wsn_device *dev, enum wsn_op op, int64_t rows, int64_t hidden, enum wsn_dtype dt,
		 const struct wsn_plan_options *opts, const struct wsn_args *a);
/*
 * got against the float64 reference: ||got - ref|| <= tol * ||ref||, and no element of got may
 * be NaN or Inf (outputs were poisoned with NaN, so an unwritten one fails here). f16 and bf16
 * outputs are compared with the reference rounded to their dtype (not f32 ones: there the double
 * reference itself is the target). scale, when given, is the size of the terms that cancel into
 * each element; the bound is then tol * max(||ref||, ||scale||): f32 arithmetic cannot promise a
 * small error relative to a result that is a near-total cancellation, only relative to the terms.
 */
void cpu_expect_close(const char *tag, const char *what, const struct wsn_tensor *got, const double *ref,
			 const double *scale, double tol);

#endif /* WSN_TESTS_CPU_UTIL_H */
