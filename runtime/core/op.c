/* SPDX-License-Identifier: MIT */
/* runtime/core/op.c: op and approach names, what each op is, and the bytes it moves at least. */
#include "core/op.h"
#include "core/error.h"

#include <string.h>

static const char *const op_names[WSN_OP_COUNT] = {
	[WSN_LAYERNORM_FWD] = "layernorm-fwd",
	[WSN_LAYERNORM_BWD] = "layernorm-bwd",
	[WSN_RMSNORM_FWD] = "rmsnorm-fwd",
	[WSN_RMSNORM_BWD] = "rmsnorm-bwd",
};

static const char *const approach_names[] = { "auto", "multiwave", "ws" };

WSN_API const char *wsn_op_name(enum wsn_op op)
{
	return (unsigned)op < WSN_OP_COUNT ? op_names[op] : NULL;
}

WSN_API int wsn_op_parse(const char *s, enum wsn_op *out)
{
	if (!out)
		return wsn__error(WSN_EINVAL, "op: the output pointer is NULL");
	for (int i = 0; s && out && i < WSN_OP_COUNT; i++) {
		if (!strcmp(s, op_names[i])) {
			*out = (enum wsn_op)i;
			return 0;
		}
	}
	return wsn__error(WSN_EINVAL,
			  "unknown op '%s' (expected layernorm-fwd, layernorm-bwd, rmsnorm-fwd or rmsnorm-bwd)",
			  s ? s : "");
}

WSN_API int wsn_op_is_backward(enum wsn_op op)
{
	return op == WSN_LAYERNORM_BWD || op == WSN_RMSNORM_BWD;
}

WSN_API int wsn_op_is_layernorm(enum wsn_op op)
{
	return op == WSN_LAYERNORM_FWD || op == WSN_LAYERNORM_BWD;
}

WSN_API const char *wsn_approach_name(enum wsn_approach a)
{
	return (unsigned)a < WSN_ARRAY_SIZE(approach_names) ? approach_names[a] : NULL;
}

WSN_API int wsn_approach_parse(const char *s, enum wsn_approach *out)
{
	if (!out)
		return wsn__error(WSN_EINVAL, "approach: the output pointer is NULL");
	for (size_t i = 0; s && out && i < WSN_ARRAY_SIZE(approach_names); i++) {
		if (!strcmp(s, approach_names[i])) {
			*out = (enum wsn_approach)i;
			return 0;
		}
	}
	return wsn__error(WSN_EINVAL, "unknown approach '%s' (expected auto, multiwave or ws)", s ? s : "");
}

WSN_API int64_t wsn_op_min_bytes(enum wsn_op op, int64_t rows, int64_t hidden, enum wsn_dtype dt,
				 int has_weight, int has_bias)
{
	int64_t s = (int64_t)wsn_dtype_size(dt), rh, stats, param, total;
	int np, bwd = wsn_op_is_backward(op);

	if (!wsn_op_name(op) || !s || rows < 0 || hidden < 0)
		return 0;
	/* backward: read dy, x, stats, weight; write dx, dweight, dbias. forward: read x, weight, bias;
	 * write y, stats */
	np = (has_weight ? 1 + bwd : 0) + (has_bias && wsn_op_is_layernorm(op) ? 1 : 0);
	if (__builtin_mul_overflow(rows, hidden, &rh) || __builtin_mul_overflow(rh, s * (bwd ? 3 : 2), &total) ||
	    __builtin_mul_overflow(rows, (int64_t)(wsn_op_is_layernorm(op) ? 8 : 4), &stats) ||
	    __builtin_mul_overflow(hidden, s * np, &param) || __builtin_add_overflow(total, stats, &total) ||
	    __builtin_add_overflow(total, param, &total))
		return -1;
	return total;
}
