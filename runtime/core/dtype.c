/* SPDX-License-Identifier: MIT */
/* runtime/core/dtype.c: dtype names, sizes, parsing, and f32 <-> f16/bf16 conversion. */
#include "core/dtype.h"
#include "core/error.h"

#include <string.h>
#include <strings.h>

static const struct {
	const char *name;
	size_t size;
	const char *aliases[4];
} dtypes[WSN_DTYPE_COUNT] = {
	[WSN_F32] = { "f32", 4, { "float32", "F32", "float", NULL } },
	[WSN_F16] = { "f16", 2, { "float16", "F16", "half", NULL } },
	[WSN_BF16] = { "bf16", 2, { "bfloat16", "BF16", NULL, NULL } },
};

static int valid(enum wsn_dtype dt)
{
	return (unsigned)dt < WSN_DTYPE_COUNT;
}

WSN_API size_t wsn_dtype_size(enum wsn_dtype dt)
{
	return valid(dt) ? dtypes[dt].size : 0;
}

WSN_API const char *wsn_dtype_name(enum wsn_dtype dt)
{
	return valid(dt) ? dtypes[dt].name : NULL;
}

WSN_API int wsn_dtype_parse(const char *s, enum wsn_dtype *out)
{
	if (!s || !out)
		return wsn__error(WSN_EINVAL, "dtype: %s is NULL", !s ? "the string" : "the output pointer");
	for (int i = 0; i < WSN_DTYPE_COUNT; i++) {
		if (!strcasecmp(s, dtypes[i].name)) {
			*out = (enum wsn_dtype)i;
			return 0;
		}
		for (int j = 0; dtypes[i].aliases[j]; j++) {
			if (!strcasecmp(s, dtypes[i].aliases[j])) {
				*out = (enum wsn_dtype)i;
				return 0;
			}
		}
	}
	return wsn__error(WSN_EDTYPE, "unknown dtype '%s' (expected f32, f16 or bf16)", s);
}

float wsn__f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
	uint32_t exp = (h >> 10) & 0x1fu;
	uint32_t man = h & 0x3ffu;
	union { uint32_t u; float f; } v;

	if (exp == 0) {
		if (man == 0) {
			v.u = sign;
		} else { /* subnormal: renormalise */
			int e = -1;
			do {
				e++;
				man <<= 1;
			} while (!(man & 0x400u));
			v.u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
		}
	} else if (exp == 0x1f) {
		v.u = sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0);
	} else {
		v.u = sign | ((exp + 127 - 15) << 23) | (man << 13);
	}
	return v.f;
}

uint16_t wsn__f32_to_f16(float f)
{
	union { uint32_t u; float f; } v = { .f = f };
	uint32_t sign = (v.u >> 16) & 0x8000u;
	uint32_t absu = v.u & 0x7fffffffu;

	if (absu > 0x7f800000u)
		return (uint16_t)(sign | 0x7e00u); /* NaN */
	if (absu >= 0x477ff000u)                  /* rounds to >= 65520: inf */
		return (uint16_t)(sign | 0x7c00u);
	if (absu < 0x38800000u) { /* below the smallest normal half: subnormal or zero */
		if (absu < 0x33000000u) /* < 2^-25 rounds to zero */
			return (uint16_t)sign;
		uint32_t e = absu >> 23;
		uint32_t m = (absu & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126 - e; /* 14 + (112 - e) ... total shift from 24-bit mantissa */
		/* value = m * 2^(e-150); half subnormal unit = 2^-24 -> q = m >> (126 - e) */
		uint32_t q = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1);
		uint32_t half = 1u << (shift - 1);
		if (rem > half || (rem == half && (q & 1)))
			q++;
		return (uint16_t)(sign | q);
	}
	uint32_t r = absu - 0x38000000u; /* rebias exponent 127 -> 15 */
	uint32_t q = r >> 13;
	uint32_t rem = r & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
		q++;
	return (uint16_t)(sign | q);
}

WSN_API int wsn_dtype_convert(void *dst, enum wsn_dtype dst_dt, const void *src,
			      enum wsn_dtype src_dt, size_t n)
{
	if (!valid(dst_dt) || !valid(src_dt))
		return wsn__error(WSN_EINVAL, "dtype conversion: invalid %s dtype %d", !valid(dst_dt) ? "destination" : "source",
				  (int)(!valid(dst_dt) ? dst_dt : src_dt));
	if (n && (!dst || !src))
		return wsn__error(WSN_EINVAL, "dtype conversion: the %s buffer is NULL", !dst ? "destination" : "source");
	if (n > (size_t)INT64_MAX / 4)
		return wsn__error(WSN_EOVERFLOW, "dtype conversion: %zu elements overflow the byte count", n);
	if (dst_dt == src_dt) {
		if (dst != src)
			memmove(dst, src, n * dtypes[dst_dt].size);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		wsn__store(dst, dst_dt, (int64_t)i, wsn__load(src, src_dt, (int64_t)i));
	return 0;
}
