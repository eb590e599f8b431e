/* SPDX-License-Identifier: MIT */
/* tests/reference.h: float64 reference implementations of the four ops, the oracle of the tests. */
#ifndef WSN_REFERENCE_H
#define WSN_REFERENCE_H

#include "wsnorm.h"

/*
 * Every function here reads host tensors (struct wsn_tensor, any dtype, any strides, mem ==
 * WSN_MEM_HOST) by logical index and computes in double with plain loops. Rows are the product of
 * all dimensions but the last; hidden is the last dimension of x. A tensor pointer that is NULL or
 * has data == NULL is absent: weight 1, bias 0. Outputs are dense row-major arrays of double
 * ([rows * hidden] for y and dx, [rows] for mean and rstd, [hidden] for dweight and dbias); an
 * output pointer that is NULL is not computed. Functions return 0, WSN_EINVAL (absent x or dy,
 * tensor not in host memory) or WSN_ESHAPE (shapes disagree).
 */

/* LayerNorm forward: mean, rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * w + b. */
int ref_layernorm_fwd(const struct wsn_tensor *x, const struct wsn_tensor *weight,
		      const struct wsn_tensor *bias, double eps, double *y, double *mean, double *rstd);
/* RMSNorm forward: rstd = 1/sqrt(mean(x^2) + eps), y = x * rstd * w. */
int ref_rmsnorm_fwd(const struct wsn_tensor *x, const struct wsn_tensor *weight, double eps, double *y,
		    double *rstd);
/*
 * LayerNorm backward from the given mean and rstd (f32 [rows] or [rows, 1]): xhat = (x - mean) * rstd,
 * g = dy * w, dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dweight = sum over rows of
 * dy * xhat, dbias = sum over rows of dy.
 */
int ref_layernorm_bwd(const struct wsn_tensor *dy, const struct wsn_tensor *x, const struct wsn_tensor *weight,
		      const struct wsn_tensor *mean, const struct wsn_tensor *rstd, double *dx, double *dweight,
		      double *dbias);
/* RMSNorm backward: xhat = x * rstd, g = dy * w, dx = rstd * (g - xhat * mean(g * xhat)), dweight = sum dy * xhat. */
int ref_rmsnorm_bwd(const struct wsn_tensor *dy, const struct wsn_tensor *x, const struct wsn_tensor *weight,
		    const struct wsn_tensor *rstd, double *dx, double *dweight);

/* The outputs of one op (NULL where the op has none), from ref_run(). */
struct ref_out {
	int64_t rows, hidden;
	double *y, *dx;          /* [rows * hidden] */
	double *mean, *rstd;     /* [rows]; forward ops only */
	double *dweight, *dbias; /* [hidden]; backward ops only */
};

/*
 * Run op on the inputs in a (the same struct wsn_args a plan executes, in host memory; weight and
 * bias are used when present) and allocate every output the op has into out, whether or not a
 * holds a tensor for it. Free with ref_out_free(). Returns 0, WSN_EINVAL, WSN_ESHAPE or WSN_ENOMEM.
 */
int ref_run(enum wsn_op op, const struct wsn_args *a, double eps, struct ref_out *out);
void ref_out_free(struct ref_out *out);

/* Offset in elements of flat (row-major logical) index i of a tensor with any strides. */
int64_t ref_offset_of(const struct wsn_tensor *t, int64_t i);
/* A dense double copy of a host tensor in logical (row-major) order; NULL if absent or out of memory. */
double *ref_load(const struct wsn_tensor *t);
/*
 * Write numel(dst) doubles into a host tensor of any dtype and strides, rounded to nearest even
 * (through f32 for f16 and bf16). Returns 0 or WSN_EINVAL.
 */
int ref_store(const double *src, const struct wsn_tensor *dst);
/*
 * Compare a host tensor against dense doubles, as wsn_tensor_compare() does: rel_l2 is
 * ||got - ref|| / ||ref|| (or ||got - ref|| when ref is all zero) and is infinite when an element
 * of got is NaN or Inf. Returns 0 or WSN_EINVAL.
 */
int ref_compare(const struct wsn_tensor *got, const double *ref, struct wsn_compare *out);

#endif
