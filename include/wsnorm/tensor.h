/* SPDX-License-Identifier: MIT */
/* wsnorm/tensor.h: tensor descriptors (shape, strides, dtype, memory) and host-side helpers. */
#ifndef WSNORM_TENSOR_H
#define WSNORM_TENSOR_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WSN_MAX_DIMS 4

/* Where a tensor's data lives. */
enum wsn_mem {
	WSN_MEM_HOST = 0,   /* ordinary or pinned host memory */
	WSN_MEM_DEVICE = 1, /* memory of the device the plan runs on */
};

/*
 * A tensor descriptor. Strides are in elements; the innermost dimension is last.
 * A descriptor with data == NULL means "absent" (e.g. no bias).
 */
struct wsn_tensor {
	void *data;
	enum wsn_dtype dtype;
	enum wsn_mem mem;
	int ndim;
	int64_t shape[WSN_MAX_DIMS];
	int64_t stride[WSN_MAX_DIMS];
};

/*
 * Describe a contiguous tensor of ndim dims (1..WSN_MAX_DIMS).
 * Returns 0, WSN_EINVAL, WSN_EDTYPE, WSN_ESHAPE (negative dimension) or WSN_EOVERFLOW.
 */
WSN_API int wsn_tensor_init(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			    int ndim, const int64_t *shape);
/* Shorthands for contiguous [rows, cols] and [n] tensors. */
WSN_API int wsn_tensor_2d(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			  int64_t rows, int64_t cols);
WSN_API int wsn_tensor_1d(struct wsn_tensor *t, void *data, enum wsn_dtype dt, enum wsn_mem mem,
			  int64_t n);
/* Number of elements (product of the shape); 0 for an absent tensor. */
WSN_API int64_t wsn_tensor_numel(const struct wsn_tensor *t);
/* Bytes spanned by a contiguous tensor: numel * dtype size. */
WSN_API size_t wsn_tensor_nbytes(const struct wsn_tensor *t);

/*
 * Fill a host tensor with seeded pseudo-random normal values mean + stddev * N(0,1)
 * (same seed, same values on every machine). Returns 0 or WSN_EINVAL.
 */
WSN_API int wsn_tensor_fill_random(const struct wsn_tensor *t, uint64_t seed, float mean, float stddev);
/* Fill a host tensor with NaN (poison before a kernel runs). Returns 0 or WSN_EINVAL. */
WSN_API int wsn_tensor_fill_nan(const struct wsn_tensor *t);

/* Result of comparing a tensor against a reference. */
struct wsn_compare {
	double rel_l2;   /* ||got - ref|| / ||ref|| (or ||got - ref|| if ||ref|| == 0) */
	double max_abs;  /* max |got - ref| */
	int64_t worst;   /* flat index of max |got - ref| */
	int64_t nonfinite; /* elements of got that are NaN or Inf where ref is finite */
	int64_t count;   /* elements compared */
};
/*
 * Compare two host tensors with the same number of elements (any dtypes, any shapes: elements are
 * paired in row-major order) in float64. Returns 0 or WSN_ESHAPE (counts differ)/WSN_EINVAL.
 */
WSN_API int wsn_tensor_compare(const struct wsn_tensor *got, const struct wsn_tensor *ref,
			       struct wsn_compare *out);

#ifdef __cplusplus
}
#endif
#endif
