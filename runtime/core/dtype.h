/* SPDX-License-Identifier: MIT */
/* runtime/core/dtype.h: f32 <-> f16/bf16 conversion and element access by dtype, inline for the CPU kernels. */
#ifndef WSN_CORE_DTYPE_H
#define WSN_CORE_DTYPE_H

#include "core/util.h"

#include <stdint.h>

static inline float wsn__bf16_to_f32(uint16_t h)
{
	union { uint32_t u; float f; } v = { .u = (uint32_t)h << 16 };
	return v.f;
}
static inline uint16_t wsn__f32_to_bf16(float f)
{
	union { uint32_t u; float f; } v = { .f = f };
	if ((v.u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
		return (uint16_t)((v.u >> 16) | 0x40u);
	uint32_t rounding = 0x7fffu + ((v.u >> 16) & 1u);
	return (uint16_t)((v.u + rounding) >> 16);
}
float wsn__f16_to_f32(uint16_t h);
uint16_t wsn__f32_to_f16(float f);

/* Load element i of a buffer of dtype dt as f32; store f32 as dt. */
static inline float wsn__load(const void *p, enum wsn_dtype dt, int64_t i)
{
	switch (dt) {
	case WSN_F32: return ((const float *)p)[i];
	case WSN_F16: return wsn__f16_to_f32(((const uint16_t *)p)[i]);
	default: return wsn__bf16_to_f32(((const uint16_t *)p)[i]);
	}
}
static inline void wsn__store(void *p, enum wsn_dtype dt, int64_t i, float v)
{
	switch (dt) {
	case WSN_F32: ((float *)p)[i] = v; break;
	case WSN_F16: ((uint16_t *)p)[i] = wsn__f32_to_f16(v); break;
	default: ((uint16_t *)p)[i] = wsn__f32_to_bf16(v); break;
	}
}

#endif
