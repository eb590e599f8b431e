/* SPDX-License-Identifier: MIT */
/* tests/fake_cuda_tma.c: the fake driver's tensor-map encoding, checked against the allocations. */
#include "fake_cuda.h"

#include <string.h>

/* ---- tensor maps ---- */

/* Bytes per element of a TMA data type (the packed sub-byte ones aside). */
static size_t tma_elem_size(CUtensorMapDataType dt)
{
	switch (dt) {
	case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
	case CU_TENSOR_MAP_DATA_TYPE_UINT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
	case CU_TENSOR_MAP_DATA_TYPE_UINT64:
	case CU_TENSOR_MAP_DATA_TYPE_INT64:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
	case CU_TENSOR_MAP_DATA_TYPE_UINT32:
	case CU_TENSOR_MAP_DATA_TYPE_INT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
	default: return 0;
	}
}

CUresult fake_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank, void *global,
					    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
					    const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
					    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
					    CUtensorMapFloatOOBfill oob)
{
	size_t es = tma_elem_size(dt), extent;

	BEGIN(cuTensorMapEncodeTiled);
	(void)box, (void)elem_strides, (void)interleave, (void)swizzle, (void)l2, (void)oob;
	if (!map || !es || rank < 1 || rank > 5 || !dims)
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	/* the last byte the descriptor reaches must lie in the allocation of its first */
	extent = (size_t)(dims[0] * es);
	for (cuuint32_t i = 1; i < rank; i++)
		extent += (size_t)((dims[i] - 1) * strides[i - 1]);
	if (!fake__find_range((uintptr_t)global, extent)) {
		fake__bug("cuTensorMapEncodeTiled over %zu bytes at %p, outside every allocation", extent, global);
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	memset(map, 0, sizeof(*map));
	return fake__leave(CUDA_SUCCESS);
}

