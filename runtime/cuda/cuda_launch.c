/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_launch.c: a CUDA plan launched: its grid, and its kernels' arguments filled per the kernel ABI. */
#include "cuda/cuda_plan.h"
#include "core/error.h"
#include "core/op.h"
#include "core/util.h"

#include <stdint.h>

static CUdeviceptr dptr(const struct wsn_tensor *t)
{
	return (CUdeviceptr)(uintptr_t)t->data;
}

static int launch_forward(struct wsn__cu_plan *cp, const struct wsn__exec *ex, unsigned grid, CUstream s)
{
	const struct wsn_args *a = ex->args;
	CUdeviceptr x = dptr(&a->x), y = dptr(&a->y);
	CUdeviceptr w = cp->p.opts.has_weight ? dptr(&a->weight) : 0;
	CUdeviceptr b = cp->p.opts.has_bias ? dptr(&a->bias) : 0;
	CUdeviceptr mean = cp->p.op == WSN_LAYERNORM_FWD ? dptr(&a->mean) : 0;
	CUdeviceptr rstd = dptr(&a->rstd);
	uint64_t rows = (uint64_t)ex->rows, x_ld = (uint64_t)ex->x_ld, y_ld = (uint64_t)ex->y_ld;
	float eps = cp->p.opts.eps;
	void *params[WSN_ABI_FWD_COUNT];

	params[WSN_ABI_FWD_x] = &x;
	params[WSN_ABI_FWD_weight] = &w;
	params[WSN_ABI_FWD_bias] = &b;
	params[WSN_ABI_FWD_y] = &y;
	params[WSN_ABI_FWD_mean] = &mean;
	params[WSN_ABI_FWD_rstd] = &rstd;
	params[WSN_ABI_FWD_rows] = &rows;
	params[WSN_ABI_FWD_x_ld] = &x_ld;
	params[WSN_ABI_FWD_y_ld] = &y_ld;
	params[WSN_ABI_FWD_eps] = &eps;

	/* the forward ABI writes mean/rstd at consecutive floats */
	if ((mean || rstd) && ex->rows > 1 && ex->stats_ld != 1)
		return wsn__error(WSN_ESHAPE, "tensors 'mean'/'rstd': row stride %lld, the CUDA forward kernels write them contiguously",
				  (long long)ex->stats_ld);
	return wsn__cu_launch(&cp->main, grid, 1, s, params);
}

static int launch_backward(struct wsn__cu_plan *cp, const struct wsn__exec *ex, unsigned grid, CUstream s)
{
	const struct wsn_args *a = ex->args;
	CUdeviceptr dy = dptr(&a->dy), x = dptr(&a->x), dx = dptr(&a->dx), partials = cp->partials;
	CUdeviceptr w = cp->p.opts.has_weight ? dptr(&a->weight) : 0;
	CUdeviceptr mean = cp->p.op == WSN_LAYERNORM_BWD ? dptr(&a->mean) : 0;
	CUdeviceptr rstd = dptr(&a->rstd);
	CUdeviceptr dw = dptr(&a->dweight), db = dptr(&a->dbias);
	uint64_t rows = (uint64_t)ex->rows, dy_ld = (uint64_t)ex->dy_ld, x_ld = (uint64_t)ex->x_ld;
	uint64_t dx_ld = (uint64_t)ex->dx_ld, stats_ld = (uint64_t)ex->stats_ld;
	unsigned cluster = cp->kp.cluster > 1 ? cp->kp.cluster : 1;
	uint32_t nparts = grid / cluster; /* a cluster writes one partial row */
	/* bit 0: start without waiting for the grid ahead (runtime/overlap.c found the call independent
	 * of the calls still running; without a dependent launch there is nothing to gain) */
	uint32_t flags = ex->early && cp->main.pdl && wsn__kernel_early_start(&cp->kp);
	CUdeviceptr done = (CUdeviceptr)(uintptr_t)ex->done;
	uint64_t wait_seq = flags ? ex->wait_seq : 0, seq = ex->seq;
	void *params[WSN_ABI_BWD_COUNT], *fparams[WSN_ABI_FIN_COUNT];
	int err;

	params[WSN_ABI_BWD_dy] = &dy;
	params[WSN_ABI_BWD_x] = &x;
	params[WSN_ABI_BWD_weight] = &w;
	params[WSN_ABI_BWD_mean] = &mean;
	params[WSN_ABI_BWD_rstd] = &rstd;
	params[WSN_ABI_BWD_dx] = &dx;
	params[WSN_ABI_BWD_partials] = &partials;
	params[WSN_ABI_BWD_rows] = &rows;
	params[WSN_ABI_BWD_dy_ld] = &dy_ld;
	params[WSN_ABI_BWD_x_ld] = &x_ld;
	params[WSN_ABI_BWD_dx_ld] = &dx_ld;
	params[WSN_ABI_BWD_stats_ld] = &stats_ld;
	params[WSN_ABI_BWD_flags] = &flags;
	params[WSN_ABI_BWD_done] = &done;
	params[WSN_ABI_BWD_wait_seq] = &wait_seq;
	fparams[WSN_ABI_FIN_partials] = &partials;
	fparams[WSN_ABI_FIN_dweight] = &dw;
	fparams[WSN_ABI_FIN_dbias] = &db;
	fparams[WSN_ABI_FIN_nparts] = &nparts;
	fparams[WSN_ABI_FIN_done] = &done;
	fparams[WSN_ABI_FIN_seq] = &seq;
	if (dw && !cp->p.opts.has_weight)
		return wsn__error(WSN_EINVAL, "tensor 'dweight' given, but the plan was made without a weight");
	if (db && !cp->p.opts.has_bias)
		return wsn__error(WSN_EINVAL, "tensor 'dbias' given, but the plan was made without a bias");
	if ((dw || db) && (!cp->has_finish || !cp->partials))
		return wsn__error(WSN_ENOTSUP, "dweight/dbias: the kernel plan has no finish kernel or workspace");
	if ((err = wsn__cu_launch(&cp->main, grid, cluster, s, params)) < 0)
		return err;
	if (!dw && !db)
		return 0;
	return wsn__cu_launch(&cp->finish, cp->kp.finish_grid ? cp->kp.finish_grid : 1, 1, s, fparams);
}

int wsn__cuda_execute(void *ctx, void *plan, const struct wsn__exec *ex, void *stream)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__cu_plan *cp = plan;
	CUstream s = (CUstream)stream; /* NULL: the context's default stream */
	unsigned grid;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if (ex->rows < 1)
		return 0;
	grid = wsn__kernel_grid(&cp->kp, ex->rows);
	if (grid < 1)
		grid = 1;
	if (!cp->kp.block_grid && grid > cp->kp.max_grid) /* the workspace holds max_grid partial rows */
		grid = cp->kp.max_grid;
	if (wsn_op_is_backward(cp->p.op))
		err = launch_backward(cp, ex, grid, s);
	else
		err = launch_forward(cp, ex, grid, s);
	if (err < 0)
		wsn__error_context(err, "%s on cuda:%d", wsn_op_name(cp->p.op), d->index);
	return err;
}
