/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_plan.c: CUDA plans: plan and generate a kernel, JIT it, size its grid, and launch it per the kernel ABI. */
#include "cuda_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_plan {
	struct wsn__plan_params p;
	struct wsn__kernel_plan kp;  /* kp.max_grid capped by the measured occupancy */
	unsigned planned_grid;       /* the planner's max_grid */
	int sms;
	struct wsn__cu_module mod;
	struct wsn__cu_kernel main, finish;
	int has_finish;
	CUdeviceptr ws;              /* f32 partial sums of the backward ops */
	size_t ws_bytes;
};

static CUdeviceptr dptr(const struct wsn_tensor *t)
{
	return (CUdeviceptr)(uintptr_t)t->data;
}

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

static void plan_free(struct cuda_plan *cp)
{
	if (cp->ws)
		wsn__cu.cuMemFree(cp->ws);
	wsn__cu_module_unload(&cp->mod);
	free(cp);
}

int wsn__cuda_plan_create(void *ctx, const struct wsn__plan_params *p, void **out)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__gpu_props g;
	struct cuda_plan *cp;
	char what[160], *ptx = NULL;
	unsigned cap;
	int err;

	*out = NULL;
	if ((err = wsn__cu_set_current(d)) < 0)
		return err;
	if ((err = gpu_props(d, p, &g)) < 0)
		return err;
	if (!(cp = calloc(1, sizeof(*cp))))
		return wsn__error(WSN_ENOMEM, "plan: out of memory");
	cp->p = *p;
	cp->sms = g.sms;
	if ((err = wsn__plan_kernel(&g, p, &cp->kp)) < 0)
		goto err;
	if (!cp->kp.entry[0] || cp->kp.block_threads < 1 || cp->kp.max_grid < 1) {
		err = wsn__error(WSN_EINVAL, "the kernel plan has no entry, block size or grid");
		goto err;
	}
	cp->planned_grid = cp->kp.max_grid;
	if ((err = wsn__generate_ptx(&cp->kp, &ptx)) < 0)
		goto err;
	snprintf(what, sizeof(what), "the %s %s hidden=%lld module (%s)", wsn_op_name(p->op), wsn_dtype_name(p->dtype),
		 (long long)p->hidden, cp->kp.entry);
	err = wsn__cu_module_load(&cp->mod, ptx, what);
	free(ptx);
	ptx = NULL;
	if (err < 0)
		goto err;
	if ((err = wsn__cu_kernel_get(&cp->mod, cp->kp.entry, cp->kp.block_threads, cp->kp.smem_bytes, &cp->main)) < 0)
		goto err;
	if (cp->kp.finish_entry[0]) {
		if ((err = wsn__cu_kernel_get(&cp->mod, cp->kp.finish_entry, cp->kp.finish_threads, 0, &cp->finish)) < 0)
			goto err;
		cp->has_finish = 1;
	}
	/* persistent grid: no more CTAs than the SMs hold at once with the registers the JIT really used */
	cap = (unsigned)cp->main.ctas_per_sm * (unsigned)(g.sms > 0 ? g.sms : 1);
	if (cp->kp.max_grid > cap)
		cp->kp.max_grid = cap;
	if (cp->kp.ws_bytes) {
		cp->ws_bytes = cp->kp.ws_bytes;
		if ((err = WSN_CU(cuMemAlloc, (&cp->ws, cp->ws_bytes), "allocating the %zu-byte backward workspace",
				  cp->ws_bytes)) < 0)
			goto err;
	}
	*out = cp;
	return 0;
err:
	free(ptx);
	wsn__error_context(err, "plan %s %s rows=%lld hidden=%lld on cuda:%d", wsn_op_name(p->op),
			   wsn_dtype_name(p->dtype), (long long)p->rows, (long long)p->hidden, d->index);
	plan_free(cp);
	return err;
}

void wsn__cuda_plan_destroy(void *ctx, void *plan)
{
	struct wsn__cu_device *d = ctx;

	if (!plan)
		return;
	wsn__cu.cuCtxSetCurrent(d->ctx); /* raw: keeps the caller's last error message */
	plan_free(plan);
}

/* snprintf that appends at *off (like snprintf, the total needed keeps growing past len). */
static void appendf(char *buf, size_t len, size_t *off, const char *fmt, ...) WSN_PRINTF(4, 5);
static void appendf(char *buf, size_t len, size_t *off, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(*off < len ? buf + *off : NULL, *off < len ? len - *off : 0, fmt, ap);
	va_end(ap);
	if (n > 0)
		*off += (size_t)n;
}

static void describe_kernel(char *buf, size_t len, size_t *off, const struct wsn__cu_kernel *k)
{
	appendf(buf, len, off,
		"kernel %s: %d registers, %d bytes local (spills), %d bytes static shared, %u bytes dynamic shared, "
		"%u threads, %d CTAs/SM resident (PTX %d.%d, SASS sm_%d)\n",
		k->name, k->regs, k->local_bytes, k->static_smem, k->dyn_smem, k->block, k->ctas_per_sm,
		k->ptx_version / 10, k->ptx_version % 10, k->binary_version);
}

int wsn__cuda_plan_describe(void *ctx, const void *plan, char *buf, size_t len)
{
	const struct cuda_plan *cp = plan;
	size_t off = 0;
	int n;

	char *text;

	(void)ctx;
	/* the planner's text, rendered apart so the length never depends on the caller's buffer */
	if ((n = wsn__describe_kernel_plan(&cp->kp, NULL, 0)) < 0)
		return n;
	if (!(text = malloc((size_t)n + 1)))
		return wsn__error(WSN_ENOMEM, "plan describe: out of memory");
	wsn__describe_kernel_plan(&cp->kp, text, (size_t)n + 1);
	appendf(buf, len, &off, "%s%s", text, n > 0 && text[n - 1] != '\n' ? "\n" : "");
	free(text);
	appendf(buf, len, &off, "JIT: %.1f ms wall", cp->mod.jit_ms);
	if (cp->mod.jit_driver_ms >= 0)
		appendf(buf, len, &off, " (compiler: %.1f ms)", (double)cp->mod.jit_driver_ms);
	appendf(buf, len, &off, ", %zu bytes of PTX\n", cp->mod.ptx_bytes);
	describe_kernel(buf, len, &off, &cp->main);
	if (cp->has_finish)
		describe_kernel(buf, len, &off, &cp->finish);
	if (cp->kp.block_grid)
		appendf(buf, len, &off, "grid: one CTA per row block, %u resident at once (planner %u; %d CTAs/SM x %d SMs measured)\n",
			cp->kp.max_grid, cp->planned_grid, cp->main.ctas_per_sm, cp->sms);
	else
		appendf(buf, len, &off, "grid: up to %u CTAs (planner %u; %d CTAs/SM x %d SMs measured)\n", cp->kp.max_grid,
			cp->planned_grid, cp->main.ctas_per_sm, cp->sms);
	if (cp->ws_bytes)
		appendf(buf, len, &off, "workspace: %zu bytes of f32 partial sums\n", cp->ws_bytes);
	return (int)off;
}

static int launch_forward(struct cuda_plan *cp, const struct wsn__exec *ex, unsigned grid, CUstream s)
{
	const struct wsn_args *a = ex->args;
	CUdeviceptr x = dptr(&a->x), y = dptr(&a->y);
	CUdeviceptr w = cp->p.opts.has_weight ? dptr(&a->weight) : 0;
	CUdeviceptr b = cp->p.opts.has_bias ? dptr(&a->bias) : 0;
	CUdeviceptr mean = cp->p.op == WSN_LAYERNORM_FWD ? dptr(&a->mean) : 0;
	CUdeviceptr rstd = dptr(&a->rstd);
	uint64_t rows = (uint64_t)ex->rows, x_ld = (uint64_t)ex->x_ld, y_ld = (uint64_t)ex->y_ld;
	float eps = cp->p.opts.eps;
	void *params[] = { &x, &w, &b, &y, &mean, &rstd, &rows, &x_ld, &y_ld, &eps };

	/* the forward ABI writes mean/rstd at consecutive floats */
	if ((mean || rstd) && ex->rows > 1 && ex->stats_ld != 1)
		return wsn__error(WSN_ESHAPE, "tensors 'mean'/'rstd': row stride %lld, the CUDA forward kernels write them contiguously",
				  (long long)ex->stats_ld);
	return wsn__cu_launch(&cp->main, grid, 1, s, params);
}

static int launch_backward(struct cuda_plan *cp, const struct wsn__exec *ex, unsigned grid, CUstream s)
{
	const struct wsn_args *a = ex->args;
	CUdeviceptr dy = dptr(&a->dy), x = dptr(&a->x), dx = dptr(&a->dx), ws = cp->ws;
	CUdeviceptr w = cp->p.opts.has_weight ? dptr(&a->weight) : 0;
	CUdeviceptr mean = cp->p.op == WSN_LAYERNORM_BWD ? dptr(&a->mean) : 0;
	CUdeviceptr rstd = dptr(&a->rstd);
	CUdeviceptr dw = dptr(&a->dweight), db = dptr(&a->dbias);
	uint64_t rows = (uint64_t)ex->rows, dy_ld = (uint64_t)ex->dy_ld, x_ld = (uint64_t)ex->x_ld;
	uint64_t dx_ld = (uint64_t)ex->dx_ld, stats_ld = (uint64_t)ex->stats_ld;
	uint32_t nparts = grid;
	void *params[] = { &dy, &x, &w, &mean, &rstd, &dx, &ws, &rows, &dy_ld, &x_ld, &dx_ld, &stats_ld };
	void *fparams[] = { &ws, &dw, &db, &nparts };
	int err;

	if (dw && !cp->p.opts.has_weight)
		return wsn__error(WSN_EINVAL, "tensor 'dweight' given, but the plan was made without a weight");
	if (db && !cp->p.opts.has_bias)
		return wsn__error(WSN_EINVAL, "tensor 'dbias' given, but the plan was made without a bias");
	if ((dw || db) && (!cp->has_finish || !cp->ws))
		return wsn__error(WSN_ENOTSUP, "dweight/dbias: the kernel plan has no finish kernel or workspace");
	if ((err = wsn__cu_launch(&cp->main, grid, 1, s, params)) < 0)
		return err;
	if (!dw && !db)
		return 0;
	return wsn__cu_launch(&cp->finish, cp->kp.finish_grid ? cp->kp.finish_grid : 1, 1, s, fparams);
}

int wsn__cuda_execute(void *ctx, void *plan, const struct wsn__exec *ex, void *stream)
{
	struct wsn__cu_device *d = ctx;
	struct cuda_plan *cp = plan;
	CUstream s = (CUstream)stream; /* NULL: the context's default stream */
	unsigned grid;
	int err;

	if ((err = wsn__cu_set_current(d)) < 0)
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
