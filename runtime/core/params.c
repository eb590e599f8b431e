/* SPDX-License-Identifier: MIT */
/* runtime/core/params.c: the planner's inputs: default plan options and the checks every planner entry shares. */
#include "core/params.h"
#include "core/error.h"
#include "core/op.h"

#include <string.h>

/* Largest hidden size any backend accepts: keeps rows * hidden and every byte count in range. */
#define WSN_MAX_HIDDEN (1 << 24)

WSN_API void wsn_plan_options_init(struct wsn_plan_options *o, enum wsn_op op)
{
	if (!o)
		return;
	memset(o, 0, sizeof(*o));
	o->eps = WSN_DEFAULT_EPS;
	o->has_weight = 1;
	o->has_bias = wsn_op_is_layernorm(op);
	o->approach = WSN_APPROACH_AUTO;
	o->autotune = 0;
}

/* What every planner entry checks before a backend or the GPU planner sees p. */
int wsn__plan_check(const char *what, const struct wsn__plan_params *p)
{
	const struct wsn_plan_options *o = &p->opts;
	const struct {
		const char *name;
		int v;
	} forced[] = { { "block_threads", o->block_threads }, { "groups", o->groups }, { "unroll", o->unroll },
		       { "stages", o->stages }, { "cluster", o->cluster } };

	if (!wsn_op_name(p->op))
		return wsn__error(WSN_EINVAL, "%s: invalid op %d", what, (int)p->op);
	if (!wsn_dtype_name(p->dtype) || !wsn_dtype_size(p->dtype))
		return wsn__error(WSN_EDTYPE, "%s: invalid dtype %d", what, (int)p->dtype);
	if (p->rows < 1 || p->hidden < 1)
		return wsn__error(WSN_ESHAPE, "%s: impossible shape %lld x %lld (rows and hidden must be >= 1)", what,
				  (long long)p->rows, (long long)p->hidden);
	if (p->hidden > WSN_MAX_HIDDEN)
		return wsn__error(WSN_ESHAPE, "%s: hidden %lld is too large (at most %d)", what, (long long)p->hidden,
				  WSN_MAX_HIDDEN);
	if (p->rows > INT64_MAX / 8 / p->hidden)
		return wsn__error(WSN_ESHAPE, "%s: shape %lld x %lld is too large (rows x hidden must stay below 2^60)",
				  what, (long long)p->rows, (long long)p->hidden);
	if (!(o->eps > 0.0f) || o->eps > 1.0f) /* NaN included */
		return wsn__error(WSN_EINVAL, "%s: eps %g is outside (0, 1]", what, (double)o->eps);
	if ((unsigned)o->approach > WSN_APPROACH_WS)
		return wsn__error(WSN_EINVAL, "%s: invalid approach %d", what, (int)o->approach);
	if (o->threads < 0)
		return wsn__error(WSN_EINVAL, "%s: negative thread count %d", what, o->threads);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(forced); i++)
		if (forced[i].v < 0)
			return wsn__error(WSN_EINVAL, "%s: forced %s %d is negative (0 lets the planner choose)", what,
					  forced[i].name, forced[i].v);
	if (o->cluster > 8 || (o->cluster & (o->cluster - 1)))
		return wsn__error(WSN_EINVAL, "%s: cluster %d (expected 0, 1, 2, 4 or 8)", what, o->cluster);
	return 0;
}
