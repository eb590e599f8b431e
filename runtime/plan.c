/* SPDX-License-Identifier: MIT */
/* runtime/plan.c: plan creation, description and execution, with every tensor checked once here. */
#include "backend.h"
#include "core/error.h"
#include "core/json.h"
#include "core/op.h"
#include "core/params.h"
#include "overlap.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

WSN_API int wsn_plan_create(struct wsn_device *dev, enum wsn_op op, int64_t rows, int64_t hidden,
			    enum wsn_dtype dt, const struct wsn_plan_options *opts,
			    struct wsn_plan **out)
{
	struct wsn__plan_params pp = { .op = op, .rows = rows, .hidden = hidden, .dtype = dt };
	struct wsn_plan *p;
	int err;

	if (!dev || !out)
		return wsn__error(WSN_EINVAL, "plan: no device or output given");
	*out = NULL;
	if (opts)
		pp.opts = *opts;
	else
		wsn_plan_options_init(&pp.opts, op);
	if ((err = wsn__plan_check("plan", &pp)) < 0)
		return err;
	if (!wsn_op_is_layernorm(op))
		pp.opts.has_bias = 0;
	if (!dev->ops->plan_create || !dev->ops->execute)
		return wsn__error(WSN_ENOTSUP, "plan: normalization kernels are not implemented for %s devices (%s)",
				  dev->ops->name, dev->info.name);
	if (!(p = calloc(1, sizeof(*p))))
		return wsn__error(WSN_ENOMEM, "plan: out of memory");
	p->dev = dev;
	p->p = pp;
	if ((err = dev->ops->plan_create(dev->ctx, &p->p, &p->impl)) < 0) {
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

WSN_API void wsn_plan_destroy(struct wsn_plan *p)
{
	if (!p)
		return;
	if (p->dev->ops->plan_destroy)
		p->dev->ops->plan_destroy(p->dev->ctx, p->impl);
	free(p);
}

WSN_API int wsn_plan_describe(const struct wsn_plan *p, char *buf, size_t len)
{
	int n, m = 0;

	if (!p || (!buf && len))
		return wsn__error(WSN_EINVAL, "plan describe: bad arguments");
	n = snprintf(buf, len, "%s %s rows=%lld hidden=%lld eps=%g weight=%s bias=%s device=%s (%s)\n",
		     wsn_op_name(p->p.op), wsn_dtype_name(p->p.dtype), (long long)p->p.rows,
		     (long long)p->p.hidden, (double)p->p.opts.eps, p->p.opts.has_weight ? "yes" : "no",
		     p->p.opts.has_bias ? "yes" : "no", p->dev->info.spec, p->dev->info.name);
	if (n < 0)
		return WSN_EINVAL;
	if (p->dev->ops->plan_describe) {
		size_t off = (size_t)n < len ? (size_t)n : len;
		m = p->dev->ops->plan_describe(p->dev->ctx, p->impl, buf ? buf + off : NULL, len - off);
		if (m < 0)
			return m;
	}
	return n + m;
}

WSN_API int wsn_plan_describe_json(const struct wsn_plan *p, char *buf, size_t len)
{
	json_t *o;
	char *text = NULL;
	int err = 0, n = 0;

	if (!p || (!buf && len))
		return wsn__error(WSN_EINVAL, "plan describe: bad arguments");
	if (!(o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:b, s:b, s:s, s:o, s:s}", "op", wsn_op_name(p->p.op),
			    "dtype", wsn_dtype_name(p->p.dtype), "rows", (json_int_t)p->p.rows, "hidden",
			    (json_int_t)p->p.hidden, "eps", (double)p->p.opts.eps, "weight", p->p.opts.has_weight != 0,
			    "bias", p->p.opts.has_bias != 0, "device", p->dev->info.spec, "device_name",
			    (json_t *)wsn__json_text(p->dev->info.name), "backend", p->dev->ops->name)))
		return wsn__error(WSN_ENOMEM, "plan describe: out of memory");
	if (p->dev->ops->plan_json)
		err = p->dev->ops->plan_json(p->dev->ctx, p->impl, o);
	if (!err && !(text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
		err = wsn__error(WSN_ENOMEM, "plan describe: out of memory");
	if (!err)
		n = snprintf(buf, len, "%s", text);
	free(text);
	json_decref(o);
	return err ? err : n;
}

/* Check one tensor of an execution; returns its row stride in *ld for 2-D-like tensors. */
struct want {
	const char *name;
	enum wsn_dtype dtype;
	enum wsn_mem mem;
	int64_t rows, hidden;
};

static int check_present(const struct wsn_tensor *t, const struct want *w)
{
	if (!t->data)
		return wsn__error(WSN_EINVAL, "tensor '%s' is required by this op but absent", w->name);
	if (t->ndim < 1 || t->ndim > WSN_MAX_DIMS)
		return wsn__error(WSN_ESHAPE, "tensor '%s': %d dimensions (expected 1..%d)", w->name, t->ndim,
				  WSN_MAX_DIMS);
	if (t->dtype != w->dtype)
		return wsn__error(WSN_EDTYPE, "tensor '%s' is %s, expected %s", w->name,
				  wsn_dtype_name(t->dtype) ? wsn_dtype_name(t->dtype) : "invalid",
				  wsn_dtype_name(w->dtype));
	if (t->mem != WSN_MEM_HOST && t->mem != WSN_MEM_DEVICE)
		return wsn__error(WSN_EINVAL, "tensor '%s': invalid memory kind %d", w->name, (int)t->mem);
	if (t->mem != w->mem)
		return wsn__error(WSN_EINVAL, "tensor '%s' is in %s memory, this device needs %s memory", w->name,
				  t->mem == WSN_MEM_HOST ? "host" : "device", w->mem == WSN_MEM_HOST ? "host" : "device");
	for (int d = 0; d < t->ndim; d++)
		if (t->shape[d] < 0)
			return wsn__error(WSN_ESHAPE, "tensor '%s': negative dimension", w->name);
	return 0;
}

/* Row-major [rows, hidden] (leading dims flattened when contiguous); returns the row stride. */
static int check_matrix(const struct wsn_tensor *t, const struct want *w, int64_t *rows, int64_t *ld)
{
	int err = check_present(t, w);
	int64_t r = 1;
	int nd = t->ndim;

	if (err)
		return err;
	if (t->shape[nd - 1] != w->hidden)
		return wsn__error(WSN_ESHAPE, "tensor '%s': last dimension %lld, the plan's hidden size is %lld",
				  w->name, (long long)t->shape[nd - 1], (long long)w->hidden);
	if (t->stride[nd - 1] != 1 && w->hidden > 1)
		return wsn__error(WSN_ESHAPE, "tensor '%s': last dimension is not contiguous (stride %lld)",
				  w->name, (long long)t->stride[nd - 1]);
	for (int d = 0; d < nd - 1; d++)
		if (__builtin_mul_overflow(r, t->shape[d], &r))
			return wsn__error(WSN_EOVERFLOW, "tensor '%s': the leading dimensions' product overflows 64 bits",
					  w->name);
	/* dimensions of size 1 have no step: the row stride is the innermost other leading dimension's,
	 * and each outer one must step over exactly the dimensions inside it */
	*ld = w->hidden;
	for (int d = nd - 2, in = -1; d >= 0; d--) {
		int64_t span;
		if (t->shape[d] <= 1)
			continue;
		if (in < 0)
			*ld = t->stride[d];
		else if (__builtin_mul_overflow(t->stride[in], t->shape[in], &span) || t->stride[d] != span)
			return wsn__error(WSN_ESHAPE, "tensor '%s': leading dimensions cannot be flattened into rows "
					  "(dimension %d's stride %lld, expected %lld x %lld)", w->name, d,
					  (long long)t->stride[d], (long long)t->stride[in], (long long)t->shape[in]);
		in = d;
	}
	if (r > 1 && *ld < w->hidden)
		return wsn__error(WSN_ESHAPE, "tensor '%s': row stride %lld is below the hidden size %lld", w->name,
				  (long long)*ld, (long long)w->hidden);
	if (w->rows >= 0 && r != w->rows)
		return wsn__error(WSN_ESHAPE, "tensor '%s' has %lld rows, x has %lld", w->name, (long long)r,
				  (long long)w->rows);
	*rows = r;
	return 0;
}

static int check_vector(const struct wsn_tensor *t, const struct want *w)
{
	int err = check_present(t, w);

	if (err)
		return err;
	if (wsn_tensor_numel(t) != w->hidden)
		return wsn__error(WSN_ESHAPE, "tensor '%s' has %lld elements, expected hidden = %lld", w->name,
				  (long long)wsn_tensor_numel(t), (long long)w->hidden);
	if (t->stride[t->ndim - 1] != 1 && w->hidden > 1)
		return wsn__error(WSN_ESHAPE, "tensor '%s' is not contiguous", w->name);
	return 0;
}

/* mean/rstd: f32 [rows] or [rows, 1]; returns the stride between rows. */
static int check_stats(const struct wsn_tensor *t, const char *name, enum wsn_mem mem, int64_t rows,
		       int64_t *ld)
{
	struct want w = { name, WSN_F32, mem, rows, 1 };
	int err = check_present(t, &w);

	if (err)
		return err;
	if (!(t->ndim == 1 || (t->ndim == 2 && t->shape[1] == 1)) || t->shape[0] != rows)
		return wsn__error(WSN_ESHAPE, "tensor '%s' must be [%lld] or [%lld, 1] f32", name, (long long)rows,
				  (long long)rows);
	*ld = rows > 1 ? t->stride[0] : 1;
	if (*ld < 1)
		return wsn__error(WSN_ESHAPE, "tensor '%s': row stride %lld", name, (long long)*ld);
	return 0;
}

WSN_API int wsn_plan_execute(struct wsn_plan *p, const struct wsn_args *a, struct wsn_stream *s)
{
	const struct wsn__plan_params *pp;
	struct wsn__exec ex;
	struct want w;
	int64_t r, ld = 1;
	int err, bwd;

	if (!p || !a)
		return wsn__error(WSN_EINVAL, "execute: no plan or arguments");
	if (s && s->dev != p->dev)
		return wsn__error(WSN_EINVAL, "execute: the stream belongs to another device");
	pp = &p->p;
	bwd = wsn_op_is_backward(pp->op);
	memset(&ex, 0, sizeof(ex));
	ex.hidden = pp->hidden;
	ex.args = a;
	ex.stats_ld = 1;
	w = (struct want){ "x", pp->dtype, p->dev->ops->exec_mem, -1, pp->hidden };
	if ((err = check_matrix(&a->x, &w, &ex.rows, &ex.x_ld)) < 0)
		return err;
	if (ex.rows > pp->rows)
		return wsn__error(WSN_ESHAPE, "tensor 'x' has %lld rows, the plan was made for at most %lld",
				  (long long)ex.rows, (long long)pp->rows);
	w.rows = ex.rows;
	if (pp->opts.has_weight) {
		w.name = "weight";
		if ((err = check_vector(&a->weight, &w)) < 0)
			return err;
	}
	if (!bwd) {
		w.name = "y";
		if ((err = check_matrix(&a->y, &w, &r, &ex.y_ld)) < 0)
			return err;
		if (pp->opts.has_bias) {
			w.name = "bias";
			if ((err = check_vector(&a->bias, &w)) < 0)
				return err;
		}
		if (a->mean.data) {
			if (pp->op != WSN_LAYERNORM_FWD)
				return wsn__error(WSN_EINVAL, "tensor 'mean': RMSNorm has no mean output");
			if ((err = check_stats(&a->mean, "mean", w.mem, ex.rows, &ld)) < 0)
				return err;
		}
		if (a->rstd.data && (err = check_stats(&a->rstd, "rstd", w.mem, ex.rows, &ld)) < 0)
			return err;
		if (a->mean.data && a->rstd.data && a->mean.ndim && ex.rows > 1 &&
		    a->mean.stride[0] != a->rstd.stride[0])
			return wsn__error(WSN_ESHAPE, "tensors 'mean' and 'rstd' have different row strides");
		ex.stats_ld = ld;
	} else {
		int64_t ld2 = 1;

		w.name = "dy";
		if ((err = check_matrix(&a->dy, &w, &r, &ex.dy_ld)) < 0)
			return err;
		w.name = "dx";
		if ((err = check_matrix(&a->dx, &w, &r, &ex.dx_ld)) < 0)
			return err;
		if ((err = check_stats(&a->rstd, "rstd", w.mem, ex.rows, &ld)) < 0)
			return err;
		if (pp->op == WSN_LAYERNORM_BWD) {
			if ((err = check_stats(&a->mean, "mean", w.mem, ex.rows, &ld2)) < 0)
				return err;
			if (ld2 != ld)
				return wsn__error(WSN_ESHAPE, "tensors 'mean' and 'rstd' have different row strides");
		}
		ex.stats_ld = ld;
		if (a->dweight.data && !pp->opts.has_weight)
			return wsn__error(WSN_EINVAL, "tensor 'dweight' given but the plan has no weight");
		if (a->dbias.data && !pp->opts.has_bias)
			return wsn__error(WSN_EINVAL, "tensor 'dbias' given but the plan has no bias");
		if (a->dweight.data) {
			w.name = "dweight";
			if ((err = check_vector(&a->dweight, &w)) < 0)
				return err;
		}
		if (a->dbias.data) {
			if (pp->op != WSN_LAYERNORM_BWD)
				return wsn__error(WSN_EINVAL, "tensor 'dbias': RMSNorm has no bias");
			w.name = "dbias";
			if ((err = check_vector(&a->dbias, &w)) < 0)
				return err;
		}
	}
	if (ex.rows == 0)
		return 0;
	if (!s)
		return p->dev->ops->execute(p->dev->ctx, p->impl, &ex, NULL);
	/* the calls still running ahead on s: may this one start beside them (runtime/overlap.c)? */
	struct wsn__ovl_call call;
	wsn__ovl_call_of(pp, a, &call);
	pthread_mutex_lock(&s->lock);
	ex.early = bwd && s->done && wsn__ovl_may_start_early(&s->ovl, &call, &ex.wait_seq);
	ex.seq = call.seq = ++s->ovl.seq;
	ex.done = s->done;
	if ((err = p->dev->ops->execute(p->dev->ctx, p->impl, &ex, s->impl)) < 0)
		wsn__ovl_reset(&s->ovl, 0);
	else
		wsn__ovl_record(&s->ovl, &call, ex.early, ex.wait_seq);
	pthread_mutex_unlock(&s->lock);
	return err;
}
