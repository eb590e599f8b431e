/* SPDX-License-Identifier: MIT */
/* runtime/cuda/context.c: making a device's context current for a call and restoring the caller's after it. */
#include "cuda/cuda_internal.h"

int wsn__cu_enter(struct wsn__cu_device *d, struct wsn__cu_scope *s)
{
	if (!s->saved && wsn__cu.cuCtxGetCurrent(&s->prev) == CUDA_SUCCESS)
		s->saved = 1;
	if (s->saved && s->prev == d->ctx)
		return 0;
	return WSN_CU(cuCtxSetCurrent, (d->ctx), "making the context of cuda:%d current", d->index);
}

void wsn__cu_enter_quiet(struct wsn__cu_device *d, struct wsn__cu_scope *s)
{
	if (wsn__cu.cuCtxGetCurrent(&s->prev) != CUDA_SUCCESS)
		s->prev = NULL;
	s->saved = 1;
	wsn__cu.cuCtxSetCurrent(d->ctx);
}

void wsn__cu_scope_end(struct wsn__cu_scope *s)
{
	CUcontext cur;

	if (s->saved && (wsn__cu.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != s->prev))
		wsn__cu.cuCtxSetCurrent(s->prev);
}
