/* SPDX-License-Identifier: MIT */
/* codegen/plan_ws.c: warp-specialised plans: register and shared-memory budgets, the heuristic search, its verdict, and the auto rule. */
#include "planner.h"
#include "tables.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define WS_PRODUCER_THREADS 128 /* one warpgroup: setmaxnreg acts on whole warpgroups */
#define WS_PRODUCER_REGS 24     /* the producer's setmaxnreg.dec, the least allowed (ptxas: no spills) */
#define WS_MAX_THREADS 1024
#define WS_MAX_REGS 248         /* per thread, a multiple of 8 a thread can address */
#define WS_MAX_UNROLL 8         /* ptx/ws.h MAXU */
#define WS_MAX_NVEC 16          /* vectors per thread per row the search considers */
#define WS_MAX_STAGES 32
#define WS_FILL_STAGES_BWD 16   /* leftover shared memory adds backward stages up to this (see NOTES v6) */
#define WS_FILL_RING_BWD (132u * 1024) /* and past WS_FILL_RING_MIN stages only while the ring stays
				 * within this: deeper rings ran no faster (see NOTES v15) */
#define WS_FILL_RING_MIN 4      /* stages a backward ring may take past WS_FILL_RING_BWD (see NOTES v15) */
#define WS_MAX_CLUSTER 8         /* CTAs sharing a row: the portable cluster size */
#define WS_MAX_GROUPS 14        /* row groups of several warps: named barriers 1..14 (15 joins them all) */
#define WS_GOOD_FREE_REGS 8     /* is_good: bdimy 1 with direct loads needs this many registers spare
				 * over the estimate (which has its own margin); fewer than nvFuser's 64
				 * (see NOTES, "Planner constants") */
#define WS_STR_(x) #x
#define WS_STR(x) WS_STR_(x)
#define WS_TAIL_MAX 0.02        /* unroll doubles only while the busiest CTA does <= 2 % above the mean */


/* Whether every row group of a grid of CTAs in clusters of `cluster` gets a block of unroll rows. */
static int groups_have_rows(const struct wsn__gpu_props *g, int64_t rows, unsigned cluster, unsigned bdimy,
			    unsigned unroll)
{
	return rows / unroll >= (int64_t)(g->sms / cluster) * bdimy;
}

/* Whether hidden splits into cluster parts of whole 16-byte vectors (kp->vec elements). */
static int splits_whole(const struct wsn__kernel_plan *kp, int64_t hidden, unsigned cluster)
{
	return hidden % ((int64_t)cluster * kp->vec) == 0;
}

/* The first row of the ws shape table for p after row `after` (NULL: from the start); NULL: none. A
 * row holds for its architecture (0: any), its GPU model (NULL: any), its dtypes (0: any) and its
 * range of rows per SM (0: unbounded). */
static const struct wsn__ws_shape_row *measured_split(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp,
						      const struct wsn__plan_params *p,
						      const struct wsn__ws_shape_row *after)
{
	int64_t bytes = p->hidden * (int64_t)wsn_dtype_size(p->dtype), per_sm = p->rows / (g->sms > 0 ? g->sms : 1);

	for (size_t i = after ? (size_t)(after - wsn__ws_shape_table) + 1 : 0; i < wsn__ws_shape_table_len; i++) {
		const struct wsn__ws_shape_row *row = &wsn__ws_shape_table[i];

		if (row->op == p->op && bytes >= row->min_bytes && bytes <= row->max_bytes &&
		    splits_whole(kp, p->hidden, row->cluster) && (!row->arch || row->arch == kp->arch) &&
		    (!row->dtypes || (row->dtypes & WSN_DTYPE_BIT(p->dtype))) &&
		    (!row->max_rows_per_sm || per_sm <= row->max_rows_per_sm) && per_sm >= row->min_rows_per_sm &&
		    (!row->gpu || (g->model && !strcmp(row->gpu, g->model))))
			return row;
	}
	return NULL;
}

/* A table row as the plan names it: its NOTES section, op, row bytes, dtypes and rows per SM. */
static void row_name(const struct wsn__ws_shape_row *row, const struct wsn__kernel_plan *kp, char *buf, size_t len)
{
	int n = snprintf(buf, len, "NOTES %s: %s rows of %lld-%lld bytes", row->note, wsn_op_name(row->op),
			 (long long)row->min_bytes, (long long)row->max_bytes);

	if (row->dtypes && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, " in %s", wsn_dtype_name(kp->dtype));
	if (row->max_rows_per_sm && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", up to %lld rows per SM", (long long)row->max_rows_per_sm);
	if (row->min_rows_per_sm && n > 0 && (size_t)n < len)
		n += snprintf(buf + n, len - (size_t)n, ", from %lld rows per SM", (long long)row->min_rows_per_sm);
	if (row->gpu && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " on the %s", row->gpu);
}


/* One point of the search. */
struct cfg {
	unsigned bdimx, bdimy, unroll, stages;
	int cache;   /* the circular buffer copied into registers (stage released early) */
	int direct;  /* non-circular tensors (weight, bias) loaded straight from global into registers */
	int dw_smem, db_smem; /* dweight / dbias sums in shared memory (bdimy 1 only) */
	/* derived by eval() */
	unsigned nvec, threads, r_entry, r_compute, est, smem;
	unsigned xregs; /* of est: the cluster exchange's, live after the row's loads (not spare for them) */
};

/* What a search step or fallback recorded, for the plan's explanation. */
struct trace {
	char *buf;
	size_t len, n;
};

static void tr(struct trace *t, const char *fmt, ...) WSN_PRINTF(2, 3);
static void tr(struct trace *t, const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(t->n < t->len ? t->buf + t->n : NULL, t->n < t->len ? t->len - t->n : 0, fmt, ap);
	va_end(ap);
	if (k > 0)
		t->n += (size_t)k;
}

static unsigned round_down8(unsigned v)
{
	return v / 8 * 8;
}

/* The plan fields wsn__ws_layout reads, from c. */
static void apply(struct wsn__kernel_plan *kp, const struct cfg *c)
{
	int bwd = wsn_op_is_backward(kp->op);
	unsigned E = (unsigned)wsn_dtype_size(kp->dtype), nt = bwd ? 2 : 1;
	unsigned nvtot = (unsigned)((wsn__kernel_cols(kp) + kp->vec - 1) / kp->vec);

	kp->bdimx = c->bdimx;
	kp->bdimy = kp->groups = c->bdimy;
	kp->nvec = (nvtot + c->bdimx - 1) / c->bdimx;
	kp->per_thread = kp->nvec * kp->vec;
	kp->unroll = c->unroll;
	kp->stages = c->stages;
	kp->producer_threads = WS_PRODUCER_THREADS;
	kp->block_threads = WS_PRODUCER_THREADS + c->bdimx * c->bdimy;
	kp->row_bytes = (unsigned)((wsn__kernel_cols(kp) * E + 15) / 16 * 16) + 16;
	kp->stage_bytes = c->unroll * nt * kp->row_bytes + wsn__ws_stats_bytes(kp);
	kp->cache_rows = c->cache;
	kp->param_store = c->direct ? WSN_STORE_REG : WSN_STORE_SMEM;
	kp->row_store = WSN_STORE_SMEM;
	kp->dw_store = c->dw_smem ? WSN_STORE_SMEM : WSN_STORE_REG;
	kp->db_store = c->db_smem ? WSN_STORE_SMEM : WSN_STORE_REG;
}

/*
 * Registers a row-group thread needs: a least-squares fit (coefficients in hundredths) to the
 * smallest setmaxnreg.inc at which ptxas (sm_90a) compiles the generated row-group code without
 * spills over kernels of each storage switch (see NOTES, "Planner constants"), plus WS_REG_MARGIN + 4 per row of a stage for the
 * fit's under-estimates, and the dtypes' own costs (below). Terms: the dweight/dbias sums, the
 * weight (shared-memory copies cost more than registers: ptxas hoists their loads), the rows of
 * the stage (cached or re-read; both stay live), LayerNorm forward's unpacked row, and the
 * reduction's loads (warps x values).
 */
#define WS_REG_MARGIN 12
#define WS_CLUSTER_REGS 12
static unsigned ws_reg_margin(unsigned unroll)
{
	return WS_REG_MARGIN + 4 * unroll;
}

static unsigned cluster_regs(const struct wsn__kernel_plan *kp, unsigned unroll)
{
	if (kp->cluster < 2 || !wsn_op_is_backward(kp->op))
		return 0;
	return WS_CLUSTER_REGS + unroll * (wsn_op_is_layernorm(kp->op) ? 2 : 1) * kp->cluster / 2;
}

static unsigned estimate_regs(const struct wsn__kernel_plan *kp, const struct cfg *c)
{
	int bwd = wsn_op_is_backward(kp->op), ln = wsn_op_is_layernorm(kp->op);
	unsigned nv = c->nvec, vec = kp->vec, U = c->unroll, nw = c->bdimx / 32, r;

	if (bwd) {
		unsigned acc = vec * ((kp->has_weight && !c->dw_smem) + (ln && kp->has_bias && !c->db_smem));
		unsigned wregs = kp->has_weight ? (c->direct ? 4 : 12) : 0, nred = U * (ln ? 2 : 1);
		r = 3347 + 93 * nv * acc + 78 * nv * wregs + (c->cache ? 132 : 111) * nv * 8 * U + 111 * nw * nred;
	} else {
		unsigned np = (unsigned)(kp->has_weight + (ln && kp->has_bias)), nred = U * (ln ? 4 : 1);
		r = 3561 + 27 * nv * (c->direct ? 4 * np : 0) + (c->cache ? 203 : 143) * nv * 4 * U +
		    (ln ? 66 * nv * vec : 0) + 27 * nw * nred;
	}
	/* the fit under-estimates more with more rows; f16 unpacks through cvt with 16-bit temporaries
	 * that ptxas keeps live across a vector (backward: up to 10 registers per vector and row) */
	r = (r + 99) / 100 + ws_reg_margin(U);
	/* a row split over a cluster: the exchange's addresses and barrier stay live beside the row, and
	 * ptxas loads every CTA's parts at once */
	r += cluster_regs(kp, U);
	if (kp->dtype == WSN_F16)
		r += bwd ? 10 * nv * U : 8;
	else if (kp->dtype == WSN_F32 && bwd)
		r += 8;
	return r;
}

/* Registers, threads and shared memory of c; returns 1 when c fits the device. */
static int eval(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, struct cfg *c)
{
	unsigned C = c->bdimx * c->bdimy, pool;
	struct wsn__ws_layout l;

	apply(kp, c);
	c->nvec = kp->nvec;
	c->threads = WS_PRODUCER_THREADS + C;
	c->r_entry = round_down8((unsigned)g->regs_per_block / c->threads);
	if (c->r_entry > WS_MAX_REGS)
		c->r_entry = WS_MAX_REGS;
	pool = c->r_entry * c->threads;
	c->r_compute = pool > WS_PRODUCER_THREADS * WS_PRODUCER_REGS
		       ? round_down8((pool - WS_PRODUCER_THREADS * WS_PRODUCER_REGS) / C) : 0;
	if (c->r_compute > WS_MAX_REGS)
		c->r_compute = WS_MAX_REGS;
	c->est = estimate_regs(kp, c);
	c->xregs = cluster_regs(kp, c->unroll);
	wsn__ws_layout(kp, &l);
	c->smem = l.total;
	return c->threads <= WS_MAX_THREADS && C % 128 == 0 && (c->bdimx == 32 || c->bdimy <= WS_MAX_GROUPS) &&
	       c->r_entry >= 24 && c->est <= c->r_compute &&
	       c->smem <= (unsigned)g->smem_per_block_optin && c->nvec <= WS_MAX_NVEC;
}

/* Shared memory alone fits (registers may not): what stages and unroll are bounded by. */
static int smem_fits(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, struct cfg *c)
{
	eval(g, kp, c);
	return c->smem <= (unsigned)g->smem_per_block_optin;
}

/*
 * The busiest CTA's rows over the mean with blocks of unroll rows: the last wave's imbalance. With
 * fewer blocks than row owners (the CTAs, or the clusters where `cluster` CTAs share each row) the
 * owners left without one count in the mean: 132 rows in blocks of 4 keep three SMs in four idle.
 * Otherwise over the CTAs that get a block, as the measured plans were chosen.
 */
static double tail_excess(const struct wsn__gpu_props *g, int64_t rows, unsigned unroll, unsigned cluster)
{
	int64_t blocks = (rows + unroll - 1) / unroll, units = g->sms / (cluster > 1 ? cluster : 1);
	int64_t ctas = blocks < g->sms ? blocks : g->sms;
	double mean = (double)rows / (double)ctas;

	if (units > 0 && blocks < units)
		return (double)unroll / ((double)rows / (double)units) - 1.0;
	return (double)((blocks + ctas - 1) / ctas * unroll) / mean - 1.0;
}

/* is_good's register rule alone: one row group loading its parameters directly needs spare registers. */
static int regs_good(const struct cfg *c)
{
	return !(c->bdimy == 1 && c->direct && c->est - c->xregs + WS_GOOD_FREE_REGS > c->r_compute);
}

/* Forced parameters (0: free). */
struct forced {
	unsigned bdimx, bdimy, unroll, stages;
};

/*
 * The search from bdimx 128, bdimy 1, unroll 1, stages 1 with the given fallback switches, until
 * nothing changes: stages double up to 2 if shared memory fits; bdimy doubles if registers and
 * shared memory fit; unroll doubles if they fit, the rows divide and the tail stays within
 * WS_TAIL_MAX; with bdimy 1, bdimx grows by 128 when that avoids spills, frees registers (the
 * estimate falls by more than the budget) or splits hidden more evenly. Returns whether the
 * result fits.
 */
static int search_from(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *f,
		       int64_t rows, struct cfg *c, struct trace *t, unsigned bdimx);

static int search(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *f, int64_t rows,
		  struct cfg *c, struct trace *t)
{
	unsigned nvtot = (unsigned)((wsn__kernel_cols(kp) + kp->vec - 1) / kp->vec), bx0 = 128;
	struct cfg c0 = *c;

	/* ours: a short row starts narrower, a warp or two per row (row sums without a barrier), so
	 * that each thread holds at most 2 (backward) or 4 (forward) vectors; the row groups of a
	 * warpgroup then start at 128 threads together */
	if (!f->bdimx)
		for (unsigned bx = 32; bx < 128; bx *= 2)
			if ((nvtot + bx - 1) / bx <= (wsn_op_is_backward(kp->op) ? 2u : 4u) &&
			    (!f->bdimy || (bx * f->bdimy) % 128 == 0)) {
				bx0 = bx;
				break;
			}
	if (f->bdimx)
		bx0 = f->bdimx;
	if (search_from(g, kp, f, rows, c, t, bx0) || bx0 >= 128 || f->bdimx)
		return eval(g, kp, c);
	/* the narrow start did not fit (a forced unroll or group count on it): from 128 threads a row */
	*c = c0;
	tr(t, "not with %u threads a row: from 128, ", bx0);
	return search_from(g, kp, f, rows, c, t, 128);
}

static int search_from(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *f,
		       int64_t rows, struct cfg *c, struct trace *t, unsigned bdimx)
{
	unsigned nvtot = (unsigned)((wsn__kernel_cols(kp) + kp->vec - 1) / kp->vec);
	int changed, steps = 0;

	c->bdimx = bdimx;
	c->bdimy = f->bdimy ? f->bdimy : c->bdimx < 128 ? 128 / c->bdimx : 1;
	c->unroll = f->unroll ? f->unroll : 1;
	c->stages = f->stages ? f->stages : 1;
	do {
		struct cfg n;
		changed = 0;
		if (!f->stages && c->stages < 2) {
			n = *c;
			n.stages *= 2;
			if (smem_fits(g, kp, &n)) {
				*c = n;
				changed = 1;
				tr(t, "stages %u, ", c->stages);
			}
		}
		if (!f->bdimy && 2 * c->bdimy * c->bdimx <= WS_MAX_THREADS - WS_PRODUCER_THREADS &&
		    (c->bdimx == 32 || 2 * c->bdimy <= WS_MAX_GROUPS)) {
			n = *c;
			n.bdimy *= 2;
			if (!c->dw_smem && !c->db_smem && eval(g, kp, &n) &&
			    (rows + c->unroll - 1) / c->unroll >= (int64_t)g->sms * n.bdimy) {
				*c = n;
				changed = 1;
				tr(t, "bdimy %u, ", c->bdimy);
			}
		}
		if (!f->unroll && c->unroll < WS_MAX_UNROLL && rows % (2 * c->unroll) == 0 &&
		    tail_excess(g, rows, 2 * c->unroll, kp->cluster) <= WS_TAIL_MAX &&
		    rows / (2 * c->unroll) >= (int64_t)g->sms / kp->cluster * c->bdimy) { /* no group idle */
			n = *c;
			n.unroll *= 2;
			if (eval(g, kp, &n)) {
				*c = n;
				changed = 1;
				tr(t, "unroll %u, ", c->unroll);
			}
		}
		if (!f->bdimx && c->bdimy == 1 && c->bdimx + 128 <= WS_MAX_THREADS - WS_PRODUCER_THREADS &&
		    c->bdimx < nvtot) {
			struct cfg o = *c;
			int fit_o = eval(g, kp, &o), fit_n;
			n = *c;
			n.bdimx += 128;
			fit_n = eval(g, kp, &n);
			/* spilling: keep growing until a width fits; fitting: grow while the wider group
			 * still fits and holds fewer vectors per thread without padding more of the row,
			 * and not into a width whose registers is_good rejects */
			if (!fit_o || (fit_n && n.nvec < o.nvec && n.nvec * n.bdimx <= o.nvec * o.bdimx &&
				       (regs_good(&n) || !regs_good(&o)))) {
				*c = n;
				changed = 1;
				if (fit_n) /* widths that still spill are passed over silently */
					tr(t, "bdimx %u (%s), ", c->bdimx, !fit_o ? "avoids spills" :
					   n.nvec * n.bdimx < o.nvec * o.bdimx ? "splits hidden more evenly" :
					   "fewer vectors per thread");
			}
		}
	} while (changed && ++steps < 64);
	return eval(g, kp, c);
}

/* Leftover shared memory: one more stage at a time while it fits (a backward ring past WS_FILL_RING_MIN
 * stages also within WS_FILL_RING_BWD). Returns whether that cap stopped it. */
static int more_stages(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, struct cfg *c)
{
	unsigned most = wsn_op_is_backward(kp->op) ? WS_FILL_STAGES_BWD : WS_MAX_STAGES;
	int capped = 0;

	while (c->stages < most) {
		struct cfg n = *c;
		n.stages++;
		if (!smem_fits(g, kp, &n))
			break;
		if (wsn_op_is_backward(kp->op) && n.stages > WS_FILL_RING_MIN &&
		    (uint64_t)n.stages * kp->stage_bytes > WS_FILL_RING_BWD) {
			capped = 1;
			break;
		}
		*c = n;
	}
	eval(g, kp, c);
	return capped;
}

/*
 * Every stage belongs to one row group: slot s of the ring carries iterations s, s + stages, ..., and
 * group ty takes iterations ty, ty + bdimy, ..., so with stages a multiple of bdimy all of a slot's
 * iterations are one group's, and it waits on the slot's phases in order. A slot two groups share
 * lets one of them wait for a phase while the one before it is still incomplete, and mbarrier parity
 * cannot tell those two apart: the wait passes at once on a stage not yet filled (see NOTES v15,
 * "A ring slot shared by two row groups"). Stages forced: the groups come down to a divisor of them (unless forced too);
 * free: a multiple of the groups, at least one stage each.
 */
static int own_stages(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *f,
		      struct cfg *c, struct trace *t, const char *opname, const char *dtname, int64_t hidden)
{
	unsigned y = c->bdimy;
	struct cfg n;

	if (c->stages % c->bdimy == 0)
		return 0;
	if (!f->stages && c->stages > c->bdimy) {
		c->stages -= c->stages % c->bdimy;
		eval(g, kp, c);
		return 0;
	}
	if (!f->bdimy) {
		/* the largest that divides the stages, in whole warpgroups of row-group threads */
		unsigned m = c->bdimx < 128 ? 128 / c->bdimx : 1, x = c->bdimx; /* bdimx: 32, 64 or k x 128 */
		for (c->bdimy -= c->bdimy % m; c->bdimy && c->stages % c->bdimy; c->bdimy -= m)
			;
		if (!c->bdimy && !f->bdimx && x < 128) {
			/* short rows got 32 or 64 threads, so groups come in fours or twos: 128 threads a
			 * row instead, at most the threads the groups had, in any count that divides */
			c->bdimx = 128;
			for (c->bdimy = y * x / 128 ? y * x / 128 : 1; c->stages % c->bdimy; c->bdimy--)
				;
			tr(t, "bdimx 128, not %u: ", x);
			m = 1;
		}
		if (!c->bdimy)
			return wsn__error(f->stages ? WSN_EINVAL : WSN_ESHAPE, "plan: ws %s %s hidden %lld: %s%u stage%s: "
					  "rows of %u threads come in row groups of %u (whole warpgroups) and each stage "
					  "belongs to one group, so the stages must be a multiple of %u", opname, dtname,
					  (long long)hidden, f->stages ? "forced: " : "shared memory holds ", c->stages,
					  c->stages > 1 ? "s" : "", c->bdimx, m, m);
		tr(t, "%u row group%s, not %u: each of the %u stages belongs to one; ", c->bdimy, c->bdimy > 1 ? "s" : "",
		   y, c->stages);
		eval(g, kp, c);
		return 0;
	}
	n = *c;
	n.stages = n.bdimy;
	if (!f->stages && smem_fits(g, kp, &n)) {
		*c = n;
		return 0;
	}
	if (f->stages)
		return wsn__error(WSN_EINVAL, "plan: ws %s %s hidden %lld: forced: %u stages for %u row groups: each "
				  "stage belongs to one row group, so the stages must be a multiple of the groups", opname,
				  dtname, (long long)hidden, c->stages, c->bdimy);
	return wsn__error(WSN_EINVAL, "plan: ws %s %s hidden %lld: forced: %u row groups need %u stages (each stage "
			  "belongs to one row group); shared memory holds %u", opname, dtname, (long long)hidden,
			  c->bdimy, c->bdimy, c->stages);
}

/* is_good_ws_heuristic: a ring of one stage cannot overlap copies with compute; one row group
 * that loads its parameters into registers needs spare registers to hide the copies' latency. */
static int is_good(const struct cfg *c, const char **why)
{
	if (c->stages < 2) {
		*why = "one stage: copies cannot overlap the compute";
		return 0;
	}
	if (c->est > c->r_compute) {
		*why = "the row groups' registers are over budget: the kernel spills";
		return 0;
	}
	if (!regs_good(c)) {
		*why = "one row group with direct loads and fewer than " WS_STR(WS_GOOD_FREE_REGS) " registers spare";
		return 0;
	}
	*why = "ring of 2+ stages with room to overlap";
	return 1;
}

/* One search with the fallback switches; the trace gets its label and steps. */
static int try_search(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *f, int64_t rows,
		      struct cfg *c, int cache, int direct, int dw_smem, int db_smem, struct trace *t, const char *label)
{
	int fit;

	memset(c, 0, sizeof(*c));
	c->cache = cache;
	c->direct = direct;
	c->dw_smem = dw_smem;
	c->db_smem = db_smem;
	tr(t, "%s", label);
	fit = search(g, kp, f, rows, c, t);
	tr(t, "%s; ", fit ? (c->stages < 2 ? "fits, one stage" : "fits") : "does not fit");
	return fit;
}

/*
 * The search, then the fallbacks in order while the result spills or has one stage, for the plan's
 * cluster (kp->cluster). Returns whether *c fits; *spill_ok when fallback 3 kept a ring of 2+ stages
 * over the register budget.
 */
static int search_all(const struct wsn__gpu_props *g, struct wsn__kernel_plan *kp, const struct forced *fp,
		      int64_t rows, struct cfg *c, struct trace *t, int *spill_ok)
{
	int bwd = wsn_op_is_backward(kp->op), fit;
	struct forced f = *fp;
	struct cfg alt;

	*spill_ok = 0;
	fit = try_search(g, kp, &f, rows, c, 1, 1, 0, 0, t, "search: ");
	if (!fit || c->stages < 2) {
		int fa = try_search(g, kp, &f, rows, &alt, 0, 1, 0, 0, t,
				    "fallback 1, stage not cached in registers: ");
		if (fa || !fit) {
			*c = alt;
			fit = fa;
		}
	}
	if ((!fit || c->stages < 2) && (kp->has_weight || (!bwd && kp->has_bias))) {
		int fb = try_search(g, kp, &f, rows, &alt, 0, 0, 0, 0, t,
				    "fallback 2, weight/bias through shared memory: ");
		if (fb && (alt.stages >= 2 || !fit)) {
			*c = alt;
			fit = 1;
			if (c->stages < 2 && !f.stages) {
				/* the copies of weight/bias took the ring's room: direct loads back on, for
				 * a ring of 2+ stages even if the registers then spill a little */
				alt = *c;
				alt.direct = 1;
				more_stages(g, kp, &alt);
				if (alt.stages >= 2 || eval(g, kp, &alt)) {
					tr(t, "fallback 3, still one stage: direct loads back on (%u stages%s); ",
					   alt.stages, eval(g, kp, &alt) ? "" : ", registers over budget");
					*c = alt;
					*spill_ok = 1;
				}
			}
		}
	}
	if (!fit && bwd && (kp->has_weight || kp->has_bias) && f.bdimy <= 1) {
		/* ours: with one row group, the sums that registers cannot hold go to shared memory */
		struct forced ff = f;
		ff.bdimy = 1;
		for (int step = 0; step < 2 && !fit; step++) {
			int dbs = kp->has_bias, dws = step || !kp->has_bias ? kp->has_weight : 0;
			char what[128];
			for (int direct = 1; direct >= 0 && !fit; direct--) {
				snprintf(what, sizeof(what), "fallback %d, %s sums in shared memory%s: ", 4 + step,
					 dws && dbs ? "dweight and dbias" : dbs ? "dbias" : "dweight",
					 direct ? "" : ", weight too");
				if (try_search(g, kp, &ff, rows, &alt, 0, direct, dws, dbs, t, what)) {
					*c = alt;
					fit = 1;
				}
			}
		}
	}
	return fit;
}

#define WHY(...) tr(&why, __VA_ARGS__)

int wsn__ws_plan(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, struct wsn__kernel_plan *kp)
{
	const char *opname = wsn_op_name(p->op), *dtname = wsn_dtype_name(p->dtype), *verdict;
	int bwd = wsn_op_is_backward(p->op), ln = wsn_op_is_layernorm(p->op), fit, err;
	struct forced f = { 0 };
	struct cfg c;
	int spill_ok = 0; /* fallback 3 keeps a ring of 2+ stages over the register budget */
	unsigned cluster = 1, one_stage = 0; /* one_stage: the first cluster that fitted with one stage */
	const struct wsn__ws_shape_row *split;
	struct forced shape = { 0 }; /* a measured split's shape, where it fitted */
	const char *passed = NULL;   /* why a measured shape was passed over */
	int forced; /* a parameter or the cluster given: no split of the planner's own */
	char steps[2048], name[128];
	struct trace t = { steps, sizeof(steps), 0 }, why;

	if ((err = wsn__plan_begin(g, p, WSN_APPROACH_WS, kp)) < 0)
		return err;

	/* forced parameters: checked here, honoured by the search, budgets checked at the end */
	if (p->opts.block_threads > 0) {
		f.bdimx = (unsigned)p->opts.block_threads;
		if ((f.bdimx % 128 && f.bdimx != 32 && f.bdimx != 64) || f.bdimx > WS_MAX_THREADS - WS_PRODUCER_THREADS)
			return wsn__error(WSN_EINVAL, "plan: ws block_threads (bdimx) %u must be 32, 64 or a multiple of 128 "
					  "up to %d", f.bdimx, WS_MAX_THREADS - WS_PRODUCER_THREADS);
	}
	if (p->opts.groups > 0)
		f.bdimy = (unsigned)p->opts.groups;
	if (f.bdimx && f.bdimy && (f.bdimx * f.bdimy) % 128)
		return wsn__error(WSN_EINVAL, "plan: ws groups %u x bdimx %u: the row groups must fill whole warpgroups "
				  "(a multiple of 128 threads: setmaxnreg)", f.bdimy, f.bdimx);
	if (p->opts.unroll > 0) {
		f.unroll = (unsigned)p->opts.unroll;
		if (f.unroll > WS_MAX_UNROLL)
			return wsn__error(WSN_EINVAL, "plan: ws unroll %u: at most %d rows per stage", f.unroll,
					  WS_MAX_UNROLL);
	}
	if (p->opts.stages > 0) {
		f.stages = (unsigned)p->opts.stages;
		if (f.stages > WS_MAX_STAGES)
			return wsn__error(WSN_EINVAL, "plan: ws stages %u: at most %d", f.stages, WS_MAX_STAGES);
	}
	if (f.bdimy && (f.bdimx ? f.bdimx : 128) * f.bdimy + WS_PRODUCER_THREADS > WS_MAX_THREADS)
		return wsn__error(WSN_EINVAL, "plan: ws groups %u x bdimx %u + %d producer threads exceeds %d threads per "
				  "CTA (threads budget)", f.bdimy, f.bdimx ? f.bdimx : 128, WS_PRODUCER_THREADS,
				  WS_MAX_THREADS);

	if (p->opts.cluster > 0) {
		cluster = (unsigned)p->opts.cluster;
		if (cluster > WS_MAX_CLUSTER || (cluster & (cluster - 1)))
			return wsn__error(WSN_EINVAL, "plan: ws cluster %u: 1, 2, 4 or 8 CTAs per row", cluster);
		if (cluster > 1 && !bwd)
			return wsn__error(WSN_EINVAL, "plan: ws cluster %u: only the backward splits a row over a cluster",
					  cluster);
		if (!splits_whole(kp, p->hidden, cluster))
			return wsn__error(WSN_EINVAL, "plan: ws cluster %u: hidden %lld does not split into %u parts of whole "
					  "16-byte vectors (%u elements)", cluster, (long long)p->hidden, cluster, kp->vec);
	}
	/* nothing forced and a measured split for this shape: that cluster (with its measured shape, if it has
	 * one), if it fits with a ring; a shape that does not fit passes to the next entry that matches */
	forced = p->opts.cluster > 0 || f.bdimx || f.bdimy || f.unroll || f.stages;
	for (split = forced ? NULL : measured_split(g, kp, p, NULL); split; split = measured_split(g, kp, p, split)) {
		t.n = 0;
		steps[0] = 0;
		if (passed)
			tr(&t, "measured shape passed over (%s); ", passed);
		kp->cluster = split->cluster;
		if (split->bdimx) {
			if (!groups_have_rows(g, p->rows, split->cluster, split->bdimy, split->unroll)) {
				passed = "too few rows for its row groups";
				continue;
			}
			/* its measured shape, held like forced parameters from here on */
			shape.bdimx = split->bdimx;
			shape.bdimy = split->bdimy;
			shape.unroll = split->unroll;
			shape.stages = split->stages;
			kp->stats_ring = split->stats_ring;
			row_name(split, kp, name, sizeof(name));
			tr(&t, "measured shape (%s): ", name);
			if (split->cluster > 1)
				tr(&t, "over a cluster of %u CTAs (%lld columns each), ", split->cluster,
				   (long long)(p->hidden / split->cluster));
			tr(&t, "%u row groups of %u threads, %u row%s a stage, %u stages%s; ", shape.bdimy, shape.bdimx,
			   shape.unroll, shape.unroll > 1 ? "s" : "", shape.stages,
			   split->stats_ring ? ", the statistics copied into each stage" : "");
			fit = search_all(g, kp, &shape, p->rows, &c, &t, &spill_ok);
			if (fit && !spill_ok && c.stages == shape.stages && c.stages % c.bdimy == 0)
				goto planned;
			memset(&shape, 0, sizeof(shape));
			kp->stats_ring = 0;
			passed = "it does not fit the budgets here";
			continue;
		}
		row_name(split, kp, name, sizeof(name));
		tr(&t, "measured split (%s): the row over a cluster of %u CTAs, %lld columns each; ", name, split->cluster,
		   (long long)(p->hidden / split->cluster));
		fit = search_all(g, kp, &f, p->rows, &c, &t, &spill_ok);
		if (fit && !spill_ok && c.stages >= 2)
			goto planned;
		break;
	}
	t.n = 0;
	steps[0] = 0;
	if (passed && !split)
		tr(&t, "measured shape passed over (%s); ", passed);
	/* a whole row per CTA; where nothing fits (the backward's sums and a ring of two rows of dy and
	 * x) and no parameter is forced, the row split over a cluster of 2, 4 or 8 CTAs, each covering
	 * whole 16-byte vectors */
	for (;;) {
		int wider, ring;

		kp->cluster = cluster;
		fit = search_all(g, kp, &f, p->rows, &c, &t, &spill_ok);
		ring = spill_ok || (fit && c.stages >= 2);
		wider = !forced && bwd && cluster < WS_MAX_CLUSTER && splits_whole(kp, p->hidden, 2 * cluster);
		if (ring || (!wider && (fit || !one_stage)))
			break;
		if (!wider) {
			/* no wider split fits: back to the first that fitted, with its one stage */
			cluster = one_stage;
			kp->cluster = cluster;
			t.n = 0;
			steps[0] = 0;
			tr(&t, "no wider split fits: %u CTA%s per row, one stage; ", cluster, cluster > 1 ? "s" : "");
			fit = search_all(g, kp, &f, p->rows, &c, &t, &spill_ok);
			break;
		}
		if (fit && !one_stage)
			one_stage = cluster; /* a ring of one stage: a wider split leaves each CTA room for more */
		cluster *= 2;
		t.n = 0;
		steps[0] = 0;
		tr(&t, "%s with %u CTA%s per row: the row split over a cluster of %u CTAs, %lld columns each; ",
		   fit ? "one stage" : "no fit", cluster / 2, cluster > 2 ? "s" : "", cluster,
		   (long long)(p->hidden / cluster));
	}
planned:
	if (!fit && !spill_ok) {
		eval(g, kp, &c);
		if (c.smem > (unsigned)g->smem_per_block_optin)
			return wsn__error(f.stages || f.unroll || f.bdimy || p->opts.cluster > 0 ? WSN_EINVAL : WSN_ESHAPE,
					  "plan: ws %s %s hidden %lld: %s%u stage%s of %u row%s need %u bytes of shared memory, "
					  "the device allows %d per CTA (shared-memory budget: stages x unroll x %u-byte rows "
					  "+ barriers + reduction + parameters)", opname, dtname, (long long)p->hidden,
					  f.stages || f.unroll ? "forced: " : "", c.stages, c.stages > 1 ? "s" : "", c.unroll,
					  c.unroll > 1 ? "s" : "", c.smem, g->smem_per_block_optin,
					  kp->row_bytes * (bwd ? 2 : 1));
		if (c.threads > WS_MAX_THREADS)
			return wsn__error(WSN_EINVAL, "plan: ws %s %s: %u threads per CTA exceed %d (threads budget)", opname,
					  dtname, c.threads, WS_MAX_THREADS);
		if (c.nvec > WS_MAX_NVEC)
			return wsn__error(f.bdimx ? WSN_EINVAL : WSN_ESHAPE, "plan: ws %s %s hidden %lld: %s%u threads a row "
					  "hold %u vectors of 16 bytes each per row, more than the %d the kernels take (more "
					  "threads a row, or a row split over a cluster)", opname, dtname, (long long)p->hidden,
					  f.bdimx ? "forced: " : "", c.bdimx, c.nvec, WS_MAX_NVEC);
		return wsn__error(f.bdimx || f.bdimy || f.unroll || p->opts.cluster > 0 ? WSN_EINVAL : WSN_ESHAPE,
				  "plan: ws %s %s hidden %lld: %s%u x %u row-group threads need ~%u registers each, the "
				  "register budget leaves %u (65536 per CTA less %d producer threads at %d)", opname, dtname,
				  (long long)p->hidden, f.bdimx || f.bdimy || f.unroll ? "forced parameters: " : "",
				  c.bdimy, c.bdimx, c.est, c.r_compute, WS_PRODUCER_THREADS, WS_PRODUCER_REGS);
	}
	{
		unsigned s0 = c.stages;
		int capped = f.stages || shape.stages ? 0 : more_stages(g, kp, &c);
		if ((err = own_stages(g, kp, &f, &c, &t, opname, dtname, p->hidden)))
			return err;
		if (c.stages > s0)
			tr(&t, capped ? "leftover shared memory: stages %u (a backward ring grows past %u stages only "
			   "up to %u KB); " : "leftover shared memory: stages %u; ", c.stages, WS_FILL_RING_MIN,
			   WS_FILL_RING_BWD / 1024);
	}
	eval(g, kp, &c);
	apply(kp, &c);
	kp->est_regs = c.est;
	kp->regs_entry = c.r_entry;
	kp->regs_producer = WS_PRODUCER_REGS;
	kp->regs_compute = c.r_compute;
	kp->smem_bytes = c.smem;
	kp->ctas_per_sm = 1;
	kp->max_grid = (unsigned)g->sms / kp->cluster * kp->cluster;
	kp->ws_forced = p->opts.approach == WSN_APPROACH_WS;
	kp->ws_good = is_good(&c, &verdict);
	kp->ws_shape = shape.bdimx != 0;
	snprintf(kp->entry, sizeof(kp->entry), "wsn_ws_%s_%s_h%lld%s", bwd ? (ln ? "layernorm_bwd" : "rmsnorm_bwd")
		 : (ln ? "layernorm_fwd" : "rmsnorm_fwd"), dtname, (long long)p->hidden,
		 kp->cluster == 2 ? "_c2" : kp->cluster == 4 ? "_c4" : kp->cluster == 8 ? "_c8" : "");
	if (bwd && (kp->has_weight || kp->has_bias)) {
		wsn__finish_plan(g, kp, kp->max_grid / kp->cluster); /* a partial row per cluster */
	}

	why.buf = kp->why;
	why.len = sizeof(kp->why);
	why.n = 0;
	WHY("%s%s", !(f.bdimx || f.bdimy || f.unroll || f.stages) ? "" : p->tuned ? "autotune's shape kept; " :
	    "forced parameters kept; ", steps);
	WHY("budgets: shared memory %u of %d bytes (ring %u x %u); registers: ~%u of %u per row-group thread (%d spare); ",
	    kp->smem_bytes, g->smem_per_block_optin, kp->stages, kp->stage_bytes, kp->est_regs, kp->regs_compute,
	    (int)kp->regs_compute - (int)kp->est_regs);
	WHY("heuristic: %s (%s)", kp->ws_good ? "good" : "not good", verdict);
	if (kp->ws_forced && !kp->ws_good)
		WHY("; ws forced: runs anyway, expect it to be slower than multi-wave");
	return 0;
}

int wsn__ws_plan_shape(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		       const struct wsn__ws_shape *s, struct wsn__kernel_plan *kp)
{
	struct wsn__plan_params q = *p;

	q.opts.approach = WSN_APPROACH_AUTO;
	q.opts.cluster = (int)s->cluster;
	q.opts.block_threads = (int)s->bdimx;
	q.opts.groups = (int)s->bdimy;
	q.opts.unroll = (int)s->unroll;
	q.opts.stages = (int)s->stages;
	q.tuned = 1;
	return wsn__ws_plan(g, &q, kp);
}

/*
 * Autotune's shapes (see NOTES v25 and v26). Between the widths the shape table covers no rule
 * predicted the best shape, so autotune times the candidates on the GPU: every cluster that splits the
 * row into whole vectors, row groups of 32, 64, 128 or 256 threads filling one to three
 * warpgroups, and 1 or 2 rows a stage, where the threads' vector slots are at least WS_TUNE_FILL
 * full (emptier shapes never came near the winners).
 */
#define WS_TUNE_FILL 0.7
#define WS_TUNE_ALL 96 /* shapes enumerated at most (4 clusters x 10 group shapes x 2 unrolls) */

int wsn__ws_tune_shapes(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
			const struct wsn__kernel_plan *own, struct wsn__ws_shape *out, int max)
{
	static const unsigned threads[] = { 32, 64, 128, 256 };
	struct {
		struct wsn__ws_shape s;
		double fill;
	} all[WS_TUNE_ALL];
	const struct wsn_plan_options *o = &p->opts;
	struct wsn__ws_shape os = { 0 };
	struct wsn__kernel_plan kp;
	int n = 0, m = 0;

	if (!wsn_op_is_backward(p->op) || o->cluster || o->block_threads || o->groups || o->unroll || o->stages ||
	    wsn__plan_begin(g, p, WSN_APPROACH_WS, &kp) < 0)
		return 0;
	if (own)
		wsn__ws_shape_of(own, &os);
	/* the shapes in order, by fill (whole vectors first), then fewer rows a stage */
	for (unsigned cl = 1; cl <= WS_MAX_CLUSTER; cl *= 2) {
		int64_t nv;
		if (!splits_whole(&kp, p->hidden, cl))
			continue;
		nv = (p->hidden / cl + kp.vec - 1) / kp.vec; /* vectors of a CTA's part of a row */
		for (size_t i = 0; i < WSN_ARRAY_SIZE(threads); i++) {
			unsigned bx = threads[i];
			int64_t slots = (nv + bx - 1) / bx * bx;
			double fill = (double)nv / (double)slots;
			if (slots / bx > WS_MAX_NVEC || fill < WS_TUNE_FILL)
				continue;
			for (unsigned by = 1; by * bx <= 3 * WS_PRODUCER_THREADS && by <= WS_MAX_GROUPS; by++) {
				if ((by * bx) % WS_PRODUCER_THREADS)
					continue;
				for (unsigned u = 1; u <= 2 && n < WS_TUNE_ALL; u++) {
					int j;
					if (!groups_have_rows(g, p->rows, cl, by, u) ||
					    (os.cluster == cl && os.bdimx == bx && os.bdimy == by && os.unroll == u))
						continue;
					for (j = n++; j > 0 && (all[j - 1].fill < fill ||
								(all[j - 1].fill == fill && all[j - 1].s.unroll > u)); j--)
						all[j] = all[j - 1];
					all[j].s = (struct wsn__ws_shape){ cl, bx, by, u, 0 };
					all[j].fill = fill;
				}
			}
		}
	}
	/* the first max of them that plan with a ring and a good verdict, with the stages they plan */
	for (int i = 0; i < n && m < max; i++) {
		if (wsn__ws_plan_shape(g, p, &all[i].s, &kp) < 0 || !kp.ws_good || kp.stages < 2)
			continue;
		out[m] = all[i].s;
		out[m++].stages = kp.stages;
	}
	return m;
}

int wsn__ws_auto_pick(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *ws, char *buf, size_t len)
{
	int64_t per_sm = ws->rows / (g->sms > 0 ? g->sms : 1);

	for (size_t i = 0; i < wsn__auto_rules_len; i++) {
		const struct wsn__auto_rule *r = &wsn__auto_rules[i];
		char range[48];
		if (r->op != ws->op || ws->hidden < r->min_hidden || ws->hidden > r->max_hidden ||
		    (r->shape_only && !ws->ws_shape) || (r->dtypes && !(r->dtypes & WSN_DTYPE_BIT(ws->dtype))) ||
		    (r->arch && r->arch != ws->arch))
			continue;
		if (r->max_hidden == INT64_MAX)
			snprintf(range, sizeof(range), "%lld and up", (long long)r->min_hidden);
		else
			snprintf(range, sizeof(range), "%lld-%lld", (long long)r->min_hidden, (long long)r->max_hidden);
		if (r->dtypes) /* which dtypes the rule is for */
			snprintf(range + strlen(range), sizeof(range) - strlen(range), ", %s", wsn_dtype_name(ws->dtype));
		if (!ws->ws_good) {
			snprintf(buf, len, "auto: multi-wave, the ws heuristic is not good here");
			return 0;
		}
		if (r->min_rows_per_sm > 0 && per_sm <= r->min_rows_per_sm) { /* 0: any row count */
			snprintf(buf, len, "auto: multi-wave (rule for %s hidden %s, NOTES %s): %lld rows per SM <= %lld",
				 wsn_op_name(r->op), range, r->note, (long long)per_sm, (long long)r->min_rows_per_sm);
			return 0;
		}
		snprintf(buf, len, "auto: ws (rule for %s hidden %s, NOTES %s): heuristic good and %lld rows per SM > %lld",
			 wsn_op_name(r->op), range, r->note, (long long)per_sm, (long long)r->min_rows_per_sm);
		return 1;
	}
	snprintf(buf, len, "auto: multi-wave, no ws rule for %s at hidden %lld", wsn_op_name(ws->op),
		 (long long)ws->hidden);
	return 0;
}

