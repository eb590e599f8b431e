/* SPDX-License-Identifier: MIT */
/* runtime/cuda/tma.c: TMA descriptors: the rules of cuTensorMapEncodeTiled checked first, each violation named. */
#include "cuda/cuda_internal.h"
#include "core/error.h"

#include <inttypes.h>
#include <string.h>

size_t wsn__tma_elem_size(CUtensorMapDataType dt)
{
	switch (dt) {
	case CU_TENSOR_MAP_DATA_TYPE_UINT8:
		return 1;
	case CU_TENSOR_MAP_DATA_TYPE_UINT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
		return 2;
	case CU_TENSOR_MAP_DATA_TYPE_UINT32:
	case CU_TENSOR_MAP_DATA_TYPE_INT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
		return 4;
	case CU_TENSOR_MAP_DATA_TYPE_UINT64:
	case CU_TENSOR_MAP_DATA_TYPE_INT64:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
		return 8;
	default:
		return 0; /* the packed 4/6-bit types have their own rules; not used here */
	}
}

static int is_float(CUtensorMapDataType dt)
{
	switch (dt) {
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
		return 1;
	default:
		return 0;
	}
}

/* Bytes of the swizzle pattern's span; 0 for no swizzle, -1 for an unknown mode. */
static int swizzle_span(CUtensorMapSwizzle s)
{
	switch (s) {
	case CU_TENSOR_MAP_SWIZZLE_NONE: return 0;
	case CU_TENSOR_MAP_SWIZZLE_32B: return 32;
	case CU_TENSOR_MAP_SWIZZLE_64B: return 64;
	case CU_TENSOR_MAP_SWIZZLE_128B: return 128;
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B:
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B:
	case CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B:
		return 128;
	default: return -1;
	}
}

#define RULE(...) wsn__error(WSN_ETMA, "TMA descriptor: " __VA_ARGS__)

int wsn__tma_check(const struct wsn__tma_desc *d)
{
	size_t es;
	uint64_t inner;
	int span;

	if (!d)
		return RULE("no descriptor given");
	if (!(es = wsn__tma_elem_size(d->dtype)))
		return RULE("data type %d is not supported (rule: dtype is one of the 1/2/4/8-byte CUtensorMapDataType values)",
			    (int)d->dtype);
	if (d->rank < 1 || d->rank > 5)
		return RULE("rank %u (rule: rank 1..5)", d->rank);
	if ((unsigned)d->interleave > CU_TENSOR_MAP_INTERLEAVE_32B)
		return RULE("interleave %d is not a CUtensorMapInterleave value", (int)d->interleave);
	if (d->interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && d->rank < 3)
		return RULE("rank %u with interleave (rule: interleaved layouts need rank >= 3)", d->rank);
	if (!d->global)
		return RULE("global address is NULL");
	if ((uintptr_t)d->global % 16)
		return RULE("global address %p is not 16-byte aligned (rule: global address 16-byte aligned)", d->global);
	if (d->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && (uintptr_t)d->global % 32)
		return RULE("global address %p is not 32-byte aligned (rule: 32-byte aligned with 32B interleave)",
			    d->global);
	for (unsigned i = 0; i < d->rank; i++)
		if (d->dims[i] < 1 || d->dims[i] > (UINT64_C(1) << 32))
			return RULE("global dimension %u is %" PRIu64 " (rule: each global dimension 1..2^32)", i, d->dims[i]);
	for (unsigned i = 0; i + 1 < d->rank; i++) {
		uint64_t s = d->strides[i];

		if (s % 16)
			return RULE("stride of dimension %u is %" PRIu64 " bytes (rule: strides are multiples of 16 bytes)",
				    i + 1, s);
		if (d->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && s % 32)
			return RULE("stride of dimension %u is %" PRIu64
				    " bytes (rule: strides are multiples of 32 bytes with 32B interleave)", i + 1, s);
		if (s >= (UINT64_C(1) << 40))
			return RULE("stride of dimension %u is %" PRIu64 " bytes (rule: strides below 2^40 bytes)", i + 1, s);
	}
	for (unsigned i = 0; i < d->rank; i++)
		if (d->box[i] < 1 || d->box[i] > 256)
			return RULE("box dimension %u is %u (rule: box dimensions 1..256)", i, d->box[i]);
	inner = (uint64_t)d->box[0] * es;
	if (d->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner % 16)
		return RULE("inner box is %" PRIu64 " bytes (%u elements of %zu bytes) (rule: inner box bytes a multiple of 16)",
			    inner, d->box[0], es);
	for (unsigned i = 0; i < d->rank; i++)
		if (d->elem_strides[i] < 1 || d->elem_strides[i] > 8)
			return RULE("element stride of dimension %u is %u (rule: element strides 1..8)", i, d->elem_strides[i]);
	if ((span = swizzle_span(d->swizzle)) < 0)
		return RULE("swizzle %d is not a CUtensorMapSwizzle value", (int)d->swizzle);
	if (d->interleave == CU_TENSOR_MAP_INTERLEAVE_32B && d->swizzle != CU_TENSOR_MAP_SWIZZLE_32B)
		return RULE("32B interleave with swizzle %d (rule: 32B interleave requires 32B swizzle)", (int)d->swizzle);
	if (d->interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && span > 0 && inner > (uint64_t)span)
		return RULE("inner box is %" PRIu64 " bytes, the swizzle spans %d (rule: inner box bytes <= swizzle span)",
			    inner, span);
	if ((unsigned)d->l2 > CU_TENSOR_MAP_L2_PROMOTION_L2_256B)
		return RULE("L2 promotion %d is not a CUtensorMapL2promotion value", (int)d->l2);
	if ((unsigned)d->oob > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
		return RULE("out-of-bounds fill %d is not a CUtensorMapFloatOOBfill value", (int)d->oob);
	if (d->oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !is_float(d->dtype))
		return RULE("NaN out-of-bounds fill with integer data type %d (rule: NaN fill needs a floating-point type)",
			    (int)d->dtype);
	return 0;
}

int wsn__tma_encode(CUtensorMap *map, const struct wsn__tma_desc *d)
{
	cuuint64_t dims[5], strides[4];
	cuuint32_t box[5], es[5];
	int err;

	if ((err = wsn__tma_check(d)) < 0)
		return err;
	if (!map || (uintptr_t)map % 64)
		return wsn__error(WSN_EINVAL, "TMA descriptor: the CUtensorMap at %p is not 64-byte aligned", (void *)map);
	if (!wsn__cu.cuTensorMapEncodeTiled)
		return wsn__error(WSN_ENODRIVER, "TMA descriptor: the NVIDIA driver is not loaded");
	memset(strides, 0, sizeof(strides));
	for (unsigned i = 0; i < d->rank; i++) {
		dims[i] = d->dims[i];
		box[i] = d->box[i];
		es[i] = d->elem_strides[i];
		if (i + 1 < d->rank)
			strides[i] = d->strides[i];
	}
	/* arguments past our checks that the driver still refuses break a rule this file does not know */
	return wsn__cu_result_as(WSN_ETMA,
				 wsn__cu.cuTensorMapEncodeTiled(map, d->dtype, d->rank, (void *)(uintptr_t)d->global, dims,
								 strides, box, es, d->interleave, d->swizzle, d->l2,
								 d->oob),
				 "cuTensorMapEncodeTiled", "encoding a rank-%u TMA descriptor for %p (box %u x %u)",
				 d->rank, d->global, d->box[0], d->rank > 1 ? d->box[1] : 1);
}
