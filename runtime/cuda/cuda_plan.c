/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_plan.c: CUDA plans created and destroyed: plan a kernel (or autotune) and compile it for the device. */
#include "cuda/cuda_plan.h"
#include "core/error.h"
#include "core/params.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>

/* What the planner needs to know about d; WSN_ENOTSUP for devices wsnorm has no kernels for. */
static int gpu_props(const struct wsn__cu_device *d, const struct wsn__plan_params *p, struct wsn__gpu_props *g)
{
	if (!d->arch)
		return wsn__error(WSN_ENOTSUP,
				  "cuda:%d (%s) has compute capability %d.%d: wsnorm generates kernels for sm_90a (9.0) and sm_100a (10.0) only",
				  d->index, d->name, d->cc_major, d->cc_minor);
	if (p->opts.arch && p->opts.arch != d->arch)
		return wsn__error(WSN_ENOTSUP, "kernels for sm_%da were asked for, but cuda:%d (%s) is sm_%d%d", p->opts.arch,
				  d->index, d->name, d->cc_major, d->cc_minor);
	*g = d->props;
	return 0;
}

int wsn__cuda_plan_create(void *ctx, const struct wsn__plan_params *p, void **out)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__gpu_props g;
	struct wsn__kernel_plan *kp = NULL;
	struct wsn__cu_plan *cp = NULL;
	char forced[160];
	int err;
	WSN_CU_SCOPE(scope);

	*out = NULL;
	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if ((err = gpu_props(d, p, &g)) < 0)
		return err;
	if (p->opts.autotune && !wsn__cu_tune_forced_by(p, forced, sizeof(forced))) {
		err = wsn__cu_autotune(d, &g, p, &cp);
	} else if (!(kp = malloc(sizeof(*kp)))) {
		err = wsn__error(WSN_ENOMEM, "plan: out of memory");
	} else if (!(err = wsn__plan_kernel(&g, p, kp)) && !(err = wsn__cu_plan_compile(&g, p, kp, &cp)) &&
		   p->opts.autotune) {
		snprintf(cp->tune, sizeof(cp->tune), "ignored: forced %s (the cache is neither read nor written)", forced);
	}
	free(kp);
	if (err < 0)
		return wsn__error_context(err, "plan %s %s rows=%lld hidden=%lld on cuda:%d", wsn_op_name(p->op),
					  wsn_dtype_name(p->dtype), (long long)p->rows, (long long)p->hidden, d->index);
	*out = cp;
	return 0;
}

void wsn__cuda_plan_destroy(void *ctx, void *plan)
{
	struct wsn__cu_device *d = ctx;
	WSN_CU_SCOPE(scope);

	if (!plan)
		return;
	wsn__cu_enter_quiet(d, &scope); /* keeps the caller's last error message */
	wsn__cu_plan_free(plan);
}
