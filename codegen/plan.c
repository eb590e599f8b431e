/* SPDX-License-Identifier: MIT */
/* codegen/plan.c: the modelled GPUs and the kernel plan's layout helpers that planners and generators share. */
#include "plan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *wsn__store_name(int s)
{
	return s == WSN_STORE_REG ? "registers" : s == WSN_STORE_SMEM ? "shared memory" : "global";
}

static unsigned align_up(unsigned v, unsigned a)
{
	return (v + a - 1) / a * a;
}

/* The modelled devices: an H100 SXM and a B200-like sm_100, each with 228 KB of shared memory per
 * SM of which a CTA may opt in to 227 KB. */
static const struct wsn__gpu_props gpu_h100 = {
	.arch = 90, .sms = 132, .smem_per_block_optin = 232448, .smem_per_sm = 233472, .regs_per_sm = 65536,
	.regs_per_block = 65536, .max_threads_per_sm = 2048, .l2_bytes = 50ll << 20, .model = "H100",
};
static const struct wsn__gpu_props gpu_b200 = {
	.arch = 100, .sms = 148, .smem_per_block_optin = 232448, .smem_per_sm = 233472, .regs_per_sm = 65536,
	.regs_per_block = 65536, .max_threads_per_sm = 2048, .l2_bytes = 126ll << 20,
};

void wsn__gpu_props_h100(struct wsn__gpu_props *g)
{
	*g = gpu_h100;
}

void wsn__gpu_props_b200(struct wsn__gpu_props *g)
{
	*g = gpu_b200;
}

const char *wsn__gpu_model(const char *name)
{
	static const char *const models[] = { "H100", "H200" };

	for (size_t i = 0; name && i < WSN_ARRAY_SIZE(models); i++)
		if (strstr(name, models[i]))
			return models[i];
	return NULL;
}

int wsn__plan_begin(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, enum wsn_approach approach,
		    struct wsn__kernel_plan *kp)
{
	const char *opname = wsn_op_name(p->op), *dtname = wsn_dtype_name(p->dtype);
	int arch;

	memset(kp, 0, sizeof(*kp));
	if (!opname || !dtname || !wsn_dtype_size(p->dtype))
		return wsn__error(WSN_EINVAL, "plan: invalid op %d or dtype %d", (int)p->op, (int)p->dtype);
	if (p->hidden < 1 || p->rows < 1)
		return wsn__error(WSN_ESHAPE, "plan: %s needs rows and hidden >= 1 (got %lld x %lld)", opname,
				  (long long)p->rows, (long long)p->hidden);
	arch = p->opts.arch ? p->opts.arch : g->arch;
	if (arch != 90 && arch != 100)
		return wsn__error(WSN_ENOTSUP, "plan: %s kernels target sm_90a and sm_100a, not arch %d",
				  opname, arch);
	kp->approach = approach;
	kp->op = p->op;
	kp->dtype = p->dtype;
	kp->hidden = p->hidden;
	kp->rows = p->rows;
	kp->has_weight = p->opts.has_weight ? 1 : 0;
	kp->has_bias = wsn_op_is_layernorm(p->op) && p->opts.has_bias ? 1 : 0;
	kp->arch = arch;
	kp->vec = 16 / (unsigned)wsn_dtype_size(p->dtype);
	kp->smem_limit = g->smem_per_block_optin > 0 ? (unsigned)g->smem_per_block_optin : 0;
	return 0;
}

void wsn__finish_plan(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, unsigned nparts)
{
	snprintf(kp->finish_entry, sizeof(kp->finish_entry), "%.48s_finish", kp->entry);
	kp->finish_threads = WSN_FINISH_COLS * wsn__finish_slices(g, kp->hidden);
	kp->finish_grid = (unsigned)((kp->hidden + WSN_FINISH_COLS - 1) / WSN_FINISH_COLS);
	kp->partials_bytes = (size_t)(kp->has_bias ? 2 : 1) * nparts * (size_t)kp->hidden * 4;
}

unsigned wsn__finish_slices(const struct wsn__gpu_props *g, int64_t hidden)
{
	int64_t grid = (hidden + WSN_FINISH_COLS - 1) / WSN_FINISH_COLS;

	return grid * 4 <= g->sms ? 32 : 8;
}

unsigned wsn__ws_stats_bytes(const struct wsn__kernel_plan *kp)
{
	return kp->stats_ring && wsn_op_is_backward(kp->op) ? align_up(kp->unroll * 4 * (wsn_op_is_layernorm(kp->op) ? 2 : 1), 16) : 0;
}

void wsn__ws_layout(const struct wsn__kernel_plan *kp, struct wsn__ws_layout *l)
{
	int bwd = wsn_op_is_backward(kp->op), ln = wsn_op_is_layernorm(kp->op);
	unsigned nw = kp->bdimx / 32, padded = kp->nvec * kp->bdimx, U = kp->unroll, off, nred;
	uint64_t end;
	unsigned C = kp->cluster > 1 ? kp->cluster : 1;

	memset(l, 0, sizeof(*l));
	/* values per grouped reduction: backward (sum g, sum g*xhat) or sum g*xhat per row; forward
	 * the sum, then M2 (LayerNorm), or the sum of squares, per row */
	nred = bwd ? U * (ln ? 2 : 1) : U;
	l->red_slot = 16 * ((nred + 3) / 4);
	l->bars = 0;
	l->xbar = 16 * kp->stages;
	off = align_up(l->xbar + (C > 1 ? 16 * kp->bdimy : 0), 128);
	l->red = off;
	off += kp->bdimy * 2 * nw * l->red_slot;
	l->xch = off;
	if (C > 1)
		off += kp->bdimy * 2 * C * l->red_slot;
	l->w = l->b = off;
	if (kp->param_store == WSN_STORE_SMEM) {
		if (kp->has_weight)
			off += padded * 16;
		l->b = off;
		if (!bwd && kp->has_bias)
			off += padded * 16;
	}
	l->dw = off;
	if (bwd && kp->has_weight && kp->dw_store == WSN_STORE_SMEM)
		off += padded * kp->vec * 4;
	l->db = off;
	if (bwd && kp->has_bias && kp->db_store == WSN_STORE_SMEM)
		off += padded * kp->vec * 4;
	off = align_up(off, 128);
	l->stages = l->xg = off;
	end = off + (uint64_t)kp->stages * kp->stage_bytes; /* 64 bits: a forced ring of huge rows passes 4 GB */
	if (bwd && kp->bdimy > 1 && (kp->has_weight || kp->has_bias) && off + (uint64_t)padded * kp->vec * 4 > end)
		end = off + (uint64_t)padded * kp->vec * 4;
	l->xg_slots = (unsigned)((end - off) / ((uint64_t)padded * kp->vec * 4));
	l->total = end > UINT32_MAX ? UINT32_MAX : (unsigned)end; /* past any device's budget either way */
}

void wsn__ws_shape_of(const struct wsn__kernel_plan *kp, struct wsn__ws_shape *s)
{
	s->cluster = kp->cluster > 1 ? kp->cluster : 1;
	s->bdimx = kp->bdimx;
	s->bdimy = kp->bdimy;
	s->unroll = kp->unroll;
	s->stages = kp->stages;
}

int64_t wsn__kernel_cols(const struct wsn__kernel_plan *kp)
{
	return kp->cluster > 1 ? kp->hidden / kp->cluster : kp->hidden;
}

unsigned wsn__kernel_grid(const struct wsn__kernel_plan *kp, int64_t rows)
{
	int64_t need;

	if (rows < 1 || !kp->bdimy)
		return 1;
	if (kp->approach == WSN_APPROACH_WS) /* every CTA (cluster) takes whole blocks of unroll rows */
		need = (rows + kp->unroll - 1) / (kp->unroll ? kp->unroll : 1) * (kp->cluster > 1 ? kp->cluster : 1);
	else
		need = (rows + kp->bdimy - 1) / kp->bdimy;
	if (kp->block_grid) /* one CTA per row block, as many as a launch takes */
		return need < 0x7fffffff ? (unsigned)need : 0x7fffffffu;
	return need < (int64_t)kp->max_grid ? (unsigned)need : kp->max_grid;
}

int wsn__kernel_early_start(const struct wsn__kernel_plan *kp)
{
	if (!wsn_op_is_backward(kp->op))
		return 0;
	return !(kp->has_weight && kp->dw_store == WSN_STORE_GLOBAL) && !(kp->has_bias && kp->db_store == WSN_STORE_GLOBAL);
}
