/* SPDX-License-Identifier: MIT */
/* codegen/plan_multiwave.c: the multi-wave planner: the search over row splits, row groups and storage. */
#include "planner.h"

#include <stdio.h>
#include <string.h>

/* Largest number of 16-byte vectors per thread the generator unrolls. */
#define MAX_NVEC 64
/* Shared memory the hardware reserves per CTA (sm_90/sm_100). */
#define SMEM_RESERVED_PER_CTA 1024
/* Below this many bytes in flight per SM a candidate ranks after every one above it. */
#define MLP_MIN (32 * 1024)
/* Register cap that lets a forward CTA share its SM with a second one (see fits()). */
#define FWD_SQUEEZE_REGS 64

/* One storage arrangement the search tries, in order of preference. */
struct arrangement {
	int row, param, dw, db;
};

/* forward: weight/bias re-read per row (L1 hits, loaded at their use) cost no registers across the
 * reductions; registers for them only pay off when nothing else fits */
static const struct arrangement fwd_arr[] = {
	{ WSN_STORE_REG, WSN_STORE_GLOBAL, 0, 0 },
	{ WSN_STORE_REG, WSN_STORE_REG, 0, 0 },
	{ WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, 0, 0 },
};
static const struct arrangement bwd_arr[] = {
	{ WSN_STORE_REG, WSN_STORE_REG, WSN_STORE_REG, WSN_STORE_REG },
	{ WSN_STORE_REG, WSN_STORE_SMEM, WSN_STORE_REG, WSN_STORE_REG },
	{ WSN_STORE_REG, WSN_STORE_SMEM, WSN_STORE_REG, WSN_STORE_SMEM },
	{ WSN_STORE_REG, WSN_STORE_SMEM, WSN_STORE_SMEM, WSN_STORE_SMEM },
	{ WSN_STORE_REG, WSN_STORE_GLOBAL, WSN_STORE_REG, WSN_STORE_SMEM },
	{ WSN_STORE_GLOBAL, WSN_STORE_SMEM, WSN_STORE_REG, WSN_STORE_SMEM },
	{ WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, WSN_STORE_REG, WSN_STORE_SMEM },
	{ WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, WSN_STORE_SMEM, WSN_STORE_SMEM },
	{ WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, WSN_STORE_REG, WSN_STORE_GLOBAL },
	{ WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, WSN_STORE_GLOBAL, WSN_STORE_GLOBAL },
};

/* How a candidate ranks (see better()). */
struct kp_score {
	int tier;
	int lone; /* forward: one CTA per SM */
	long mlp;
	unsigned threads, ctas;
	int nvdist;
};

/* A candidate being scored. */
struct cand {
	struct arrangement a;
	unsigned bdimx, bdimy, nvec, regs, ctas, smem;
	long mlp;
	char why[160]; /* set by fits() when it fails: the limit the candidate passes */
};

static unsigned round_up(unsigned v, unsigned m)
{
	return (v + m - 1) / m * m;
}

/* Register estimate per thread, calibrated against ptxas -v for sm_90a. */
static unsigned estimate_regs(const struct wsn__kernel_plan *kp, const struct arrangement *a, unsigned nv,
			      unsigned bdimx)
{
	int bwd = wsn_op_is_backward(kp->op), ln = wsn_op_is_layernorm(kp->op);
	unsigned r, vec = kp->vec;
	unsigned nparams = (unsigned)(kp->has_weight + (ln && kp->has_bias && !bwd));
	unsigned stage = nv < 4 ? nv : 4;

	if (!bwd) {
		r = 40;
		r += a->row == WSN_STORE_REG ? 4 * nv : 4 * stage + 8;
		if (nv >= 8 && bdimx == 32) /* measured: a warp per row with 8+ vectors needs more */
			r += 8;
		if (nparams)
			r += a->param == WSN_STORE_REG ? 4 * nv * nparams : 8;
		return r;
	}
	r = 40;
	r += a->row == WSN_STORE_REG ? 8 * nv : 8 * (nv < 2 ? nv : 2) + 8;
	if (kp->has_weight) {
		r += a->param == WSN_STORE_REG ? 4 * nv : 4;
		if (a->dw == WSN_STORE_REG)
			r += vec * nv;
	}
	if (ln && kp->has_bias && a->db == WSN_STORE_REG)
		r += vec * nv + 8 * nv; /* measured: LayerNorm's extra live values per vector */
	if ((kp->has_weight && a->dw != WSN_STORE_REG) || (ln && kp->has_bias && a->db != WSN_STORE_REG))
		r += 8;
	return r;
}

/* Dynamic shared memory of a candidate; must match multiwave.c's layout. */
static unsigned smem_bytes(const struct wsn__kernel_plan *kp, const struct arrangement *a, unsigned bdimx,
			   unsigned bdimy, unsigned nv)
{
	int bwd = wsn_op_is_backward(kp->op), ln = wsn_op_is_layernorm(kp->op);
	unsigned nw = bdimx / 32, padded = nv * bdimx; /* vectors covered by the block row */
	unsigned s = 0;

	if (nw > 1)
		s += bdimy * 2 * nw * 16; /* two alternating buffers of (warps x 4 floats) per group */
	if (!bwd)
		return s;
	if (kp->has_weight && a->param == WSN_STORE_SMEM)
		s += padded * 16;
	if (kp->has_weight && a->dw == WSN_STORE_SMEM)
		s += padded * kp->vec * 4;
	if (ln && kp->has_bias && a->db == WSN_STORE_SMEM)
		s += padded * kp->vec * 4;
	if (bdimy > 1)
		s += padded * kp->vec * 4; /* cross-group reduction buffer at the end */
	return s;
}

/* Bytes of loads each thread has in flight before its first use of the row. */
static unsigned inflight_per_thread(const struct wsn__kernel_plan *kp, const struct arrangement *a, unsigned nv)
{
	unsigned tensors = wsn_op_is_backward(kp->op) ? 2 : 1;

	if (a->row == WSN_STORE_REG)
		return 16 * nv * tensors;
	return 16 * (nv < 4 ? nv : 4) * tensors;
}

/* CTAs of bt threads at r8 registers each that fit an SM: the register file is split over 4
 * sub-partitions and a warp's registers live in one, so count warps per sub-partition. */
static unsigned ctas_by_regs(const struct wsn__gpu_props *g, unsigned r8, unsigned bt)
{
	unsigned wpc = (bt + 31) / 32, per_part = (unsigned)g->regs_per_sm / 4, c = 0;

	while (c < 32 && ((c + 1) * wpc + 3) / 4 * 32 * r8 <= per_part)
		c++;
	return c;
}

static int fits(const struct wsn__gpu_props *g, const struct wsn__kernel_plan *kp, struct cand *c)
{
	unsigned bt = c->bdimx * c->bdimy, r8;
	unsigned by_threads, by_regs, by_smem;
	int bwd = wsn_op_is_backward(kp->op);

	c->regs = estimate_regs(kp, &c->a, c->nvec, c->bdimx);
	c->smem = smem_bytes(kp, &c->a, c->bdimx, c->bdimy, c->nvec);
	if (bt > 1024) {
		snprintf(c->why, sizeof(c->why), "%u threads a CTA, more than 1024", bt);
		return 0;
	}
	if (c->regs > 255) {
		snprintf(c->why, sizeof(c->why), "~%u registers a thread (%u vectors each), more than 255", c->regs,
			 c->nvec);
		return 0;
	}
	/* accumulators outside registers are per CTA, not per row group */
	if (bwd && c->bdimy > 1 && (c->a.dw != WSN_STORE_REG || c->a.db != WSN_STORE_REG)) {
		snprintf(c->why, sizeof(c->why), "dweight/dbias sums that do not fit in registers allow one row "
			 "group a CTA");
		return 0;
	}
	if (c->smem > (unsigned)g->smem_per_block_optin) {
		snprintf(c->why, sizeof(c->why), "%u bytes of shared memory a CTA, more than %d", c->smem,
			 g->smem_per_block_optin);
		return 0;
	}
	r8 = round_up(c->regs, 8);
	by_threads = (unsigned)g->max_threads_per_sm / bt;
	by_regs = ctas_by_regs(g, r8, bt);
	by_smem = c->smem ? (unsigned)g->smem_per_sm / (c->smem + SMEM_RESERVED_PER_CTA) : 32;
	c->ctas = by_threads < by_regs ? by_threads : by_regs;
	if (by_smem < c->ctas)
		c->ctas = by_smem;
	/* forward: never a lone CTA per SM when two fit at 64 registers (the row's 4 x nvec plus 32): a
	 * CTA of a one-CTA-per-block grid leaves its SM idle between blocks; ptxas keeps such rows in 64
	 * registers */
	if (!bwd && c->ctas == 1 && by_threads >= 2 && by_smem >= 2 && r8 > FWD_SQUEEZE_REGS &&
	    4 * c->nvec + 32 <= FWD_SQUEEZE_REGS && ctas_by_regs(g, FWD_SQUEEZE_REGS, bt) >= 2) {
		c->regs = FWD_SQUEEZE_REGS;
		c->ctas = 2;
	}
	if (c->ctas > 32)
		c->ctas = 32;
	if (!c->ctas) {
		snprintf(c->why, sizeof(c->why), "%u threads x ~%u registers, more than the SM's %d", bt, r8,
			 g->regs_per_sm);
		return 0;
	}
	c->mlp = (long)c->ctas * bt * inflight_per_thread(kp, &c->a, c->nvec);
	return 1;
}

/*
 * Is a better than b? Measured on the H100 (bf16, 16384 rows, 1K..32K):
 * - candidates with enough bytes in flight (MLP_MIN) come first, by arrangement (registers before
 *   shared memory before re-reading global memory);
 * - forward: then two or more CTAs per SM before one (a lone CTA leaves its SM idle between blocks);
 * - forward: then bytes of loads in flight per SM, up to 64 KB;
 * - then resident threads per SM (latency hiding for the reductions and the compute phases), up to
 *   512;
 * - backward: then fewer CTAs per SM, since every CTA writes a partial dweight/dbias row that the
 *   epilogue and the finish kernel must move (one CTA with several row groups beats several CTAs),
 *   then bytes in flight;
 * - then vectors per thread nearest 8 (forward: longer runs of loads per thread) or 2 (backward).
 */
static int better(const struct kp_score *a, const struct kp_score *b, int bwd)
{
	if (a->tier != b->tier)
		return a->tier < b->tier;
	if (a->lone != b->lone)
		return a->lone < b->lone;
	if (!bwd && a->mlp != b->mlp)
		return a->mlp > b->mlp;
	if (a->threads != b->threads)
		return a->threads > b->threads;
	if (a->ctas != b->ctas)
		return a->ctas < b->ctas;
	if (a->mlp != b->mlp)
		return a->mlp > b->mlp;
	return a->nvdist < b->nvdist;
}

/* RMSNorm forward rows of 32 KB and more: 4 vectors per thread and 1024 threads per SM beat 8 vectors
 * and 512-768 threads (see NOTES v13); LayerNorm's longer reduction loses with more warps per row. */
static int rms_long_row(const struct wsn__kernel_plan *kp)
{
	return !wsn_op_is_backward(kp->op) && !wsn_op_is_layernorm(kp->op) &&
	       kp->hidden * (int64_t)wsn_dtype_size(kp->dtype) >= 32768;
}

/* LayerNorm forward rows of 64 KB and more: 16 vectors per thread beat 8 (fewer warps to merge the
 * statistics over; NOTES v35). */
static int ln_long_row(const struct wsn__kernel_plan *kp)
{
	return !wsn_op_is_backward(kp->op) && wsn_op_is_layernorm(kp->op) &&
	       kp->hidden * (int64_t)wsn_dtype_size(kp->dtype) >= 65536;
}

static void score(const struct wsn__kernel_plan *kp, const struct cand *c, int ai, struct kp_score *s)
{
	int bwd = wsn_op_is_backward(kp->op), rms_long = rms_long_row(kp);
	unsigned t = c->ctas * c->bdimx * c->bdimy, tcap = rms_long ? 1024 : 512;
	long mcap = bwd ? 48 * 1024 : 64 * 1024;
	int target = bwd ? 2 : rms_long ? 4 : ln_long_row(kp) ? 16 : 8;

	s->tier = ai + (c->mlp >= MLP_MIN ? 0 : 100);
	s->lone = !bwd && c->ctas == 1;
	s->mlp = c->mlp < mcap ? c->mlp : mcap;
	s->threads = t < tcap ? t : tcap;
	s->ctas = bwd ? c->ctas : 0;
	s->nvdist = (int)c->nvec > target ? (int)c->nvec - target : target - (int)c->nvec;
}

/* Forward row groups per CTA: CTAs of 128 threads for a warp per row, else of about 256. */
static unsigned fwd_bdimy(unsigned bdimx)
{
	return bdimx == 32 ? 4 : bdimx >= 256 ? 1 : 256 / bdimx;
}

#define WHY(...) (n += snprintf(kp->why + n, n < sizeof(kp->why) ? sizeof(kp->why) - n : 0, __VA_ARGS__))

int wsn__multiwave_plan(const struct wsn__gpu_props *g, const struct wsn__plan_params *p, struct wsn__kernel_plan *kp)
{
	const char *opname = wsn_op_name(p->op), *dtname = wsn_dtype_name(p->dtype);
	int bwd = wsn_op_is_backward(p->op), ln = wsn_op_is_layernorm(p->op);
	const struct arrangement *arr = bwd ? bwd_arr : fwd_arr;
	int narr = bwd ? (int)WSN_ARRAY_SIZE(bwd_arr) : (int)WSN_ARRAY_SIZE(fwd_arr);
	unsigned fbx = (unsigned)(p->opts.block_threads > 0 ? p->opts.block_threads : 0);
	unsigned fby = (unsigned)(p->opts.groups > 0 ? p->opts.groups : 0);
	struct cand best = { 0 };
	struct kp_score sc, bestsc = { 0 };
	/* why the first shape tried (the fewest vectors a thread) did not fit: its first and last arrangement */
	char why[160] = "", why0[160] = "";
	int shapes = 0;
	int besti = -1, err;
	unsigned nvtot, nvmax;
	size_t n = 0;

	if ((err = wsn__plan_begin(g, p, WSN_APPROACH_MULTIWAVE, kp)) < 0)
		return err;
	if (p->opts.stages > 1 || p->opts.unroll > 1 || p->opts.cluster > 1)
		return wsn__error(WSN_EINVAL, "plan: %s applies to the ws approach only; multi-wave %s kernels process one row "
				  "per group at a time in one CTA", p->opts.stages > 1 ? "stages" : p->opts.unroll > 1 ? "unroll"
				  : "cluster", opname);
	nvtot = (unsigned)((p->hidden + kp->vec - 1) / kp->vec);
	nvmax = (nvtot + 1023) / 1024;
	if (p->hidden > (int64_t)MAX_NVEC * 1024 * kp->vec)
		return wsn__error(WSN_ESHAPE, "plan: hidden %lld is beyond the multi-wave %s %s kernels (a row in one "
				  "CTA of at most 1024 threads, %d vectors each; less fits once the registers are counted)",
				  (long long)p->hidden, opname, dtname, MAX_NVEC);

	if (fbx && (fbx % 32 || fbx > 1024))
		return wsn__error(WSN_EINVAL, "plan: block_threads %u must be a multiple of 32 up to 1024 "
				  "(threads per row)", fbx);
	if (fbx && (nvtot + fbx - 1) / fbx > MAX_NVEC)
		return wsn__error(WSN_EINVAL, "plan: block_threads %u leaves %u vectors per thread for hidden %lld "
				  "(at most %d)", fbx, (nvtot + fbx - 1) / fbx, (long long)p->hidden, MAX_NVEC);
	if (fby && (fby > 32 || (fbx ? fbx : 32) * fby > 1024))
		return wsn__error(WSN_EINVAL, "plan: groups %u x block_threads %u exceeds 1024 threads per CTA",
				  fby, fbx ? fbx : 32);

	/* Candidates: every even split of the row's vectors over 32..1024 threads (or the forced
	 * bdimx), times the row groups per CTA (backward: 1, 2, 4, 8; forward: fwd_bdimy). */
	for (unsigned nv = nvmax ? nvmax : 1; nv <= MAX_NVEC && nv <= nvtot; nv++) {
		unsigned bdimx = round_up((nvtot + nv - 1) / nv, 32);
		if (fbx) {
			if (nv != (nvtot + fbx - 1) / fbx)
				continue;
			bdimx = fbx;
		} else if (bdimx > 1024 || (nv > 1 && (nvtot + bdimx - 1) / bdimx != nv)) {
			continue;
		}
		for (unsigned by = 1; by <= 8; by *= 2) {
			unsigned bdimy = fby ? fby : bwd ? by : fwd_bdimy(bdimx);
			if ((fby || !bwd) && by > 1)
				break;
			if (bdimx * bdimy > 1024 || (bdimx > 32 && bdimy > 15)) {
				/* one named barrier per row group, ids 1..15 */
				if (!shapes++)
					snprintf(why, sizeof(why), bdimx * bdimy > 1024 ? "%u threads a CTA, more than 1024" :
					 "%u row groups of several warps each, more than 15 (one named barrier each)",
						 bdimx * bdimy > 1024 ? bdimx * bdimy : bdimy);
				continue;
			}
			for (int ai = 0; ai < narr; ai++) {
				struct cand c = { .a = arr[ai], .bdimx = bdimx, .bdimy = bdimy, .nvec = nv };
				if (!fits(g, kp, &c)) {
					if (!shapes)
						memcpy(ai ? why : why0, c.why, sizeof(why));
					continue;
				}
				score(kp, &c, ai, &sc);
				if (besti < 0 || better(&sc, &bestsc, bwd)) {
					best = c;
					bestsc = sc;
					besti = ai;
				}
				break; /* first arrangement that fits this shape */
			}
			shapes++;
		}
	}
	if (besti < 0) {
		if (fbx || fby) {
			char forced[64];

			if (fbx && fby)
				snprintf(forced, sizeof(forced), "block_threads %u and groups %u", fbx, fby);
			else
				snprintf(forced, sizeof(forced), fbx ? "block_threads %u" : "groups %u", fbx ? fbx : fby);
			if (why0[0] && why[0] && strcmp(why0, why))
				return wsn__error(WSN_EINVAL, "plan: multi-wave %s %s hidden %lld: forced %s does not fit: "
						  "%s (all in registers); %s (the least in registers)", opname, dtname,
						  (long long)p->hidden, forced, why0, why);
			return wsn__error(WSN_EINVAL, "plan: multi-wave %s %s hidden %lld: forced %s does not fit: %s",
					  opname, dtname, (long long)p->hidden, forced,
					  why[0] ? why : why0[0] ? why0 : "no arrangement fits");
		}
		return wsn__error(WSN_ESHAPE, "plan: no multi-wave %s %s kernel fits hidden %lld", opname, dtname,
				  (long long)p->hidden);
	}

	kp->bdimx = best.bdimx;
	kp->bdimy = best.bdimy;
	kp->nvec = best.nvec;
	kp->per_thread = best.nvec * kp->vec;
	kp->block_threads = best.bdimx * best.bdimy;
	kp->ctas_per_sm = best.ctas;
	kp->max_grid = best.ctas * (unsigned)g->sms;
	kp->block_grid = !bwd;
	kp->smem_bytes = best.smem;
	kp->est_regs = best.regs;
	kp->row_store = best.a.row;
	kp->param_store = best.a.param;
	kp->dw_store = bwd && kp->has_weight ? best.a.dw : WSN_STORE_REG;
	kp->db_store = bwd && kp->has_bias ? best.a.db : WSN_STORE_REG;
	kp->row_in_smem = kp->row_store == WSN_STORE_SMEM;
	kp->stages = 1;
	kp->unroll = 1;
	kp->groups = kp->bdimy;
	snprintf(kp->entry, sizeof(kp->entry), "wsn_%s_%s_h%lld", bwd ? (ln ? "layernorm_bwd" : "rmsnorm_bwd")
		 : (ln ? "layernorm_fwd" : "rmsnorm_fwd"), dtname, (long long)p->hidden);
	if (bwd && (kp->has_weight || kp->has_bias)) {
		wsn__finish_plan(g, kp, kp->max_grid);
	}

	WHY("bdimx=%u: %u threads share a row so each holds %u vectors of 16 bytes (%u elements)%s; ",
	    kp->bdimx, kp->bdimx, kp->nvec, kp->per_thread, fbx ? " (forced)" : "");
	if (rms_long_row(kp) && !fbx)
		WHY("rows of 32 KB or more: about 4 vectors per thread and up to 1024 threads per SM (NOTES v13); ");
	if (ln_long_row(kp) && !fbx)
		WHY("rows of 64 KB or more: about 16 vectors per thread, fewer warps to merge the statistics over "
		    "(NOTES v35); ");
	WHY("bdimy=%u: %s; ", kp->bdimy, fby ? "forced" : bwd ? (kp->bdimy > 1 ?
	    "row groups share a CTA so fewer CTAs write dweight/dbias partials" :
	    "one row group per CTA (more did not fit registers/threads)") : kp->bdimy > 1 ?
	    "several rows per CTA keep CTAs near 128-256 threads" : "one row per CTA (a row spans 256+ threads)");
	WHY("row in %s%s; ", wsn__store_name(kp->row_store), kp->row_store == WSN_STORE_REG
	    ? " (all loads of a row issued before the first use)" : " (re-read from L2: registers cannot hold it)");
	if (kp->has_weight || kp->has_bias)
		WHY("weight%s in %s; ", kp->has_bias && !bwd ? "/bias" : "", wsn__store_name(kp->param_store));
	if (bwd && kp->has_weight)
		WHY("dweight sums in %s; ", wsn__store_name(kp->dw_store));
	if (bwd && kp->has_bias)
		WHY("dbias sums in %s; ", wsn__store_name(kp->db_store));
	WHY("~%u registers and %u B shared memory per thread/CTA allow %u CTAs per SM with %ld KB of loads in flight; ",
	    kp->est_regs, kp->smem_bytes, kp->ctas_per_sm, best.mlp / 1024);
	if (kp->block_grid)
		WHY("grid: one CTA per row block, started by the hardware as others finish (%u resident: %u per SM x "
		    "%d SMs), so the SMs stay busy to the last rows (NOTES v4)", kp->max_grid, kp->ctas_per_sm, g->sms);
	else
		WHY("grid: persistent, %u CTAs (%u per SM x %d SMs) striding over row blocks, each CTA keeping its "
		    "dweight/dbias partial sums", kp->max_grid, kp->ctas_per_sm, g->sms);
	return 0;
}

