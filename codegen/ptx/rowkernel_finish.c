/* SPDX-License-Identifier: MIT */
/* codegen/ptx/rowkernel_finish.c: the backward's end: the per-CTA dweight/dbias epilogue and the finish kernel that sums the partial rows. */
#include "rowkernel.h"

/* Global address of column 0 of this CTA's partial row of accumulator a (0 dweight, 1 dbias). */
static const char *partial_row(struct rk_gen *g, int a, const char *cta, const char *nc, const char *partp)
{
	struct ptx_kernel *k = g->k;
	const char *part = ptx_tmp(k, PTX_U32), *ga = ptx_reg(k, PTX_U64, "part_row%d", a);

	if (a)
		ptx_ins(k, "add.u32 %s, %s, %s", part, nc, cta);
	else
		ptx_mov(k, PTX_U32, part, cta);
	ptx_ins(k, "mul.wide.u32 %s, %s, %lld", ga, part, (long long)g->kp->hidden * 4);
	ptx_ins(k, "add.u64 %s, %s, %s", ga, ga, partp);
	if (g->rank) {
		const char *rank = ptx_tmp(k, PTX_U32), *col = ptx_tmp(k, PTX_U64);
		ptx_sreg(k, rank, "%cluster_ctarank");
		ptx_ins(k, "mul.wide.u32 %s, %s, %lld", col, rank, g->cols * 4);
		ptx_ins(k, "add.u64 %s, %s, %s", ga, ga, col);
	}
	return ga;
}

/*
 * The fold when sm_xg has a slot per row group and sum: once every group is past the row loop (the
 * slots alias the ring), every group stores its sums (column c of the slot: vector c / vec of the row,
 * as the groups hold them), one more barrier, then the CTA's threads take 4 columns at a time and add
 * the groups' values in the serial fold's order, group bdimy - 1 first, each thread storing its own
 * columns of the partial row. Two barriers on the last CTA's path instead of one per group and sum.
 */
static void fold_parallel(struct rk_gen *g, struct rk_acc *accs[2], const char *partp, const char *cta,
			  const char *nc)
{
	struct ptx_kernel *k = g->k;
	const unsigned slot = (unsigned)(g->vectors * g->bdimx * g->vec) * 4;
	const int B = g->bdimy, T = g->bdimy * g->bdimx, NC4 = g->vectors * g->bdimx * g->vec / 4;
	const int v4 = g->cols % 4 == 0 && g->kp->hidden % 4 == 0;
	const char *xs = ptx_reg(k, PTX_U32, "xg_s"), *gi = ptx_reg(k, PTX_U32, "xg_id");
	int n = 0;

	ptx_comment(k, "every group's sums into its own slot, then all threads add them in group order");
	ptx_bar_sync(k, g->all_bar, g->all_bar_count); /* the slots alias stages other groups may still read */
	ptx_ins(k, "mad.lo.u32 %s, %s, %u, %s", xs, g->tid_y, slot, g->smem);
	ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", xs, g->tid_x, g->vec * 4, xs);
	ptx_ins(k, "add.u32 %s, %s, %u", xs, xs, g->sm_xg);
	for (int a = 0; a < 2; a++) {
		struct rk_acc *ac = accs[a];
		if (!ac)
			continue;
		for (int j = 0; j < g->vectors; j++)
			for (int q = 0; q < g->vec / 4; q++)
				ptx_st_shared_v4(k, xs, (long long)n * B * slot + ((long long)j * g->bdimx * g->vec + 4 * q) * 4,
						 ac->r[j] + 4 * q);
		n++;
	}
	ptx_bar_sync(k, g->all_bar, g->all_bar_count);
	ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", gi, g->tid_y, g->bdimx, g->tid_x);
	n = 0;
	for (int a = 0; a < 2; a++) {
		if (!accs[a])
			continue;
		const char *ga = partial_row(g, a, cta, nc, partp), *u = ptx_reg(k, PTX_U32, "xg_u%d", a);
		const char *sa = ptx_tmp(k, PTX_U32), *c0 = ptx_tmp(k, PTX_U32), *ad = ptx_tmp(k, PTX_U64);
		const char *pout = ptx_tmp(k, PTX_PRED), *pin = ptx_tmp(k, PTX_PRED);
		const char *v[8][4], *sum[4];
		struct ptx_loop lp;
		/* a loop, not unrolled rounds: ptxas would hoist every round's loads */
		ptx_mov(k, PTX_U32, u, gi);
		ptx_loop_begin(k, &lp, "xg_cols");
		ptx_ins(k, "setp.ge.u32 %s, %s, %d", pout, u, NC4);
		ptx_loop_break_if(k, &lp, pout, 0);
		ptx_ins(k, "shl.b32 %s, %s, 2", c0, u);
		ptx_ins(k, "mad.lo.u32 %s, %s, 16, %s", sa, u, g->smem);
		for (int t = 0; t < B; t++) {
			for (int i = 0; i < 4; i++)
				v[t][i] = ptx_tmp(k, PTX_F32);
			ptx_ld_shared_v4(k, v[t], sa, g->sm_xg + ((long long)n * B + t) * slot);
		}
		for (int i = 0; i < 4; i++) {
			sum[i] = v[B - 1][i];
			for (int t = B - 2; t >= 0; t--) {
				const char *d = ptx_tmp(k, PTX_F32);
				ptx_add_f32(k, d, v[t][i], sum[i]);
				sum[i] = d;
			}
		}
		ptx_ins(k, "mul.wide.u32 %s, %s, 16", ad, u);
		ptx_ins(k, "add.u64 %s, %s, %s", ad, ad, ga);
		if (v4) {
			ptx_ins(k, "setp.lt.u32 %s, %s, %lld", pin, c0, g->cols);
			ptx_guard(k, pin, 0);
			ptx_st_global_v4(k, PTX_CACHE_DEFAULT, ad, 0, sum);
		} else {
			for (int i = 0; i < 4; i++) {
				const char *ci = ptx_tmp(k, PTX_U32);
				ptx_ins(k, "add.u32 %s, %s, %d", ci, c0, i);
				ptx_ins(k, "setp.lt.u32 %s, %s, %lld", pin, ci, g->cols);
				ptx_guard(k, pin, 0);
				ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ad, 4LL * i, sum[i]);
			}
		}
		ptx_ins(k, "add.u32 %s, %s, %d", u, u, T);
		ptx_loop_end(k, &lp, NULL, 0);
		n++;
	}
}

void wsn__rk_bwd_epilogue(struct rk_gen *g, struct rk_acc *accs[2], const char *partp)
{
	struct ptx_kernel *k = g->k;
	const char *cta = ptx_tmp(k, PTX_U32), *nc = ptx_tmp(k, PTX_U32);
	int nacc = (accs[0] != NULL) + (accs[1] != NULL);

	ptx_comment(k, "---- per-CTA partial column sums -> workspace ----");
	ptx_sreg(k, cta, g->rank ? "%clusterid.x" : "%ctaid.x");
	ptx_sreg(k, nc, g->rank ? "%nclusterid.x" : "%nctaid.x");
	/* the parallel fold where the groups can hold their sums at once; not with a partial last vector,
	 * whose element code together with the fold makes ptxas spill past the register estimate */
	if (g->bdimy > 1 && g->bdimy <= 8 && g->tail == 0 && g->xg_slots >= (unsigned)(nacc * g->bdimy) &&
	    (!accs[0] || accs[0]->store == WSN_STORE_REG) && (!accs[1] || accs[1]->store == WSN_STORE_REG)) {
		fold_parallel(g, accs, partp, cta, nc);
		return;
	}
	if (g->bdimy > 1) {
		const char *xs = ptx_reg(k, PTX_U32, "xg_s"), *p = ptx_tmp(k, PTX_PRED);
		ptx_ins(k, "mad.lo.u32 %s, %s, %d, %s", xs, g->tid_x, g->vec * 4, g->smem);
		ptx_ins(k, "add.u32 %s, %s, %u", xs, xs, g->sm_xg);
		for (int a = 0; a < 2; a++) {
			struct rk_acc *ac = accs[a];
			if (!ac)
				continue;
			ptx_bar_sync(k, g->all_bar, g->all_bar_count);
			for (int t = g->bdimy - 1; t >= 0; t--) {
				const char *skip = ptx_label_new(k, "fold_skip");
				ptx_ins(k, "setp.ne.u32 %s, %s, %d", p, g->tid_y, t);
				ptx_guard(k, p, 0);
				ptx_bra(k, skip);
				for (int j = 0; j < g->vectors; j++) {
					for (int q = 0; q < g->vec / 4; q++) {
						const char *const *r = ac->r[j] + 4 * q;
						long long off = ((long long)j * g->bdimx * g->vec + 4 * q) * 4;
						if (t < g->bdimy - 1) {
							const char *s[4];
							for (int i = 0; i < 4; i++)
								s[i] = ptx_tmp(k, PTX_F32);
							ptx_ld_shared_v4(k, s, xs, off);
							for (int i = 0; i < 4; i++)
								ptx_add_f32(k, r[i], r[i], s[i]);
						}
						if (t > 0)
							ptx_st_shared_v4(k, xs, off, r);
					}
				}
				ptx_label(k, skip);
				if (t > 0)
					ptx_bar_sync(k, g->all_bar, g->all_bar_count);
			}
		}
	}
	/* group 0 writes: dweight partial at partials[cta][.], dbias partial at partials[nctaid + cta][.] */
	const char *skipw = ptx_label_new(k, "part_done"), *p0 = ptx_tmp(k, PTX_PRED);
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p0, g->tid_y);
	ptx_guard(k, p0, 0);
	ptx_bra(k, skipw);
	for (int a = 0; a < 2; a++) {
		struct rk_acc *ac = accs[a];
		if (!ac || ac->store == WSN_STORE_GLOBAL)
			continue;
		const char *ga = partial_row(g, a, cta, nc, partp), *col = ptx_tmp(k, PTX_U64);
		ptx_ins(k, "mul.wide.u32 %s, %s, %d", col, g->tid_x, g->vec * 4);
		ptx_ins(k, "add.u64 %s, %s, %s", ga, ga, col);
		for (int j = 0; j < g->vectors; j++) {
			const char *f[8];
			wsn__rk_acc_get(g, ac, j, f);
			for (int e = 0; e < g->vec; e++) {
				const char *pe = wsn__rk_elem_pred(g, j, e);
				if (pe)
					ptx_guard(k, pe, 0);
				ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, ga, ((long long)j * g->bdimx * g->vec + e) * 4,
					      f[e]);
			}
		}
	}
	ptx_label(k, skipw);
}

/* Finish: column c of dweight (dbias) = sum over parts p = 0..nparts-1 of partials[p][c] ([nparts + p][c]), in a
 * fixed order: slice s (one warp of finish_threads / 32) adds parts s, s + slices, ... in turn, then the
 * slices are added in turn. */
int wsn__rk_gen_finish(struct ptx_module *m, const struct wsn__kernel_plan *kp)
{
	struct ptx_kernel *k = ptx_kernel_begin(m, kp->finish_entry);
	int E = (int)wsn_dtype_size(kp->dtype), nacc = kp->has_bias ? 2 : 1;
	long long H = kp->hidden;
	const int SL = (int)kp->finish_threads / 32;
	/* loads in flight per pass: all of a slice's parts at once (one round trip), up to 32 */
	const int P = (int)(kp->max_grid / (kp->cluster > 1 ? kp->cluster : 1)), R = (P + SL - 1) / SL;
	const int UNR = R < 1 ? 1 : R > 32 ? 32 : R;

	if (!k)
		return m->err;
	const struct wsn__abi_param *pa = wsn__abi_finish.params;
	const char *fin[WSN_ABI_FIN_COUNT];
	for (int i = 0; i < WSN_ABI_FIN_COUNT; i++)
		ptx_param(k, wsn__rk_abi_ptx_type(pa[i].type), pa[i].name);
	ptx_kernel_launch_bounds(k, kp->finish_threads, 0);
	ptx_kernel_shared(k, "fin_red", (unsigned)(2 * SL * 32 * 4), 16);
	for (int i = 0; i < WSN_ABI_FIN_COUNT; i++) { /* "p_" names an address */
		const int address = pa[i].role == WSN_ABI_ptr || i == WSN_ABI_FIN_done;
		fin[i] = ptx_reg(k, wsn__rk_abi_ptx_type(pa[i].type), address ? "p_%s" : "%s", pa[i].name);
	}
	for (int i = 0; i < WSN_ABI_FIN_COUNT; i++)
		ptx_ld_param(k, wsn__rk_abi_ptx_type(pa[i].type), fin[i], pa[i].name);
	const char *partp = fin[WSN_ABI_FIN_partials], *dwp = fin[WSN_ABI_FIN_dweight], *dbp = fin[WSN_ABI_FIN_dbias];
	const char *np = fin[WSN_ABI_FIN_nparts], *donep = fin[WSN_ABI_FIN_done], *seq = fin[WSN_ABI_FIN_seq];
	const char *tid = ptx_reg(k, PTX_U32, "thread"), *cx = ptx_reg(k, PTX_U32, "cx"), *sy = ptx_reg(k, PTX_U32, "sy");
	const char *col = ptx_reg(k, PTX_U32, "col"), *pcol = ptx_reg(k, PTX_PRED, "p_col");
	ptx_sreg(k, tid, "%tid.x");
	ptx_ins(k, "and.b32 %s, %s, 31", cx, tid);
	ptx_ins(k, "shr.u32 %s, %s, 5", sy, tid);
	ptx_sreg(k, col, "%ctaid.x");
	ptx_ins(k, "mad.lo.u32 %s, %s, 32, %s", col, col, cx);
	ptx_ins(k, "setp.lt.u32 %s, %s, %lld", pcol, col, H);
	/* dbias parts start nparts * H floats in */
	const char *sum[2], *base[2];
	for (int a = 0; a < nacc; a++) {
		sum[a] = ptx_reg(k, PTX_F32, "sum%d", a);
		base[a] = ptx_reg(k, PTX_U64, "base%d", a);
		ptx_mov_f32(k, sum[a], 0.0f);
		ptx_ins(k, "mul.wide.u32 %s, %s, 4", base[a], col);
		ptx_ins(k, "add.u64 %s, %s, %s", base[a], base[a], partp);
		if (a) {
			const char *off = ptx_tmp(k, PTX_U64);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", off, np, H * 4);
			ptx_ins(k, "add.u64 %s, %s, %s", base[a], base[a], off);
		}
	}
	/* slice 0 of a column stores it: the output's address and whether it was asked for, per sum */
	const char *p0 = ptx_reg(k, PTX_PRED, "p_not_out"), *oa[2], *pz[2];
	ptx_ins(k, "setp.ne.u32 %s, %s, 0", p0, sy);
	ptx_ins(k, "or.pred %s, %s, !%s", p0, p0, pcol);
	for (int a = 0; a < nacc; a++) {
		const char *dst = a ? dbp : dwp;
		oa[a] = ptx_reg(k, PTX_U64, "out_addr%d", a);
		pz[a] = ptx_reg(k, PTX_PRED, "p_out%d", a);
		ptx_ins(k, "setp.ne.u64 %s, %s, 0", pz[a], dst);
		ptx_ins(k, "mad.wide.u32 %s, %s, %d, %s", oa[a], col, E, dst);
	}
	{
		/* slice 0: the translations and lines of its columns of part 0 and of dweight/dbias while
		 * the main grid drains (a prefetch reads no value, so it may precede the wait) */
		const char *done = ptx_label_new(k, "pf_done");
		ptx_guard(k, p0, 0);
		ptx_bra_div(k, done);
		for (int a = 0; a < nacc; a++) {
			ptx_ins(k, "prefetch.global.L2 [%s]", base[a]);
			ptx_guard(k, pz[a], 0);
			ptx_ins(k, "prefetch.global.L2 [%s]", oa[a]);
		}
		ptx_label(k, done);
	}
	/*
	 * The next grid may launch at once: every kernel waits for this one at its start except a
	 * backward that started early, which the runtime lets start only when its tensors are not
	 * dweight/dbias or anything else the calls still running use, and which waits for this grid
	 * before its exit (wsn__rk_griddep_end); its CTAs then take the SMs as the main grid leaves them.
	 */
	ptx_comment(k, "dependent launch: the next grid may start now; the main grid's sums are visible past the wait");
	ptx_griddep_launch_dependents(k);
	ptx_griddep_wait(k);
	{
		/* the main grid is done: its call's number into the stream's word, for calls that reuse
		 * its buffers and start early (runtime/overlap.c) */
		const char *pub = ptx_tmp(k, PTX_PRED), *c0 = ptx_tmp(k, PTX_U32), *t = ptx_tmp(k, PTX_U32);
		ptx_sreg(k, c0, "%ctaid.x");
		ptx_ins(k, "or.b32 %s, %s, %s", t, c0, tid);
		ptx_ins(k, "setp.eq.u32 %s, %s, 0", pub, t);
		ptx_ins(k, "setp.ne.and.u64 %s, %s, 0, %s", pub, donep, pub);
		ptx_guard(k, pub, 0);
		ptx_ins(k, "st.release.gpu.global.u64 [%s], %s", donep, seq);
	}
	const char *pp = ptx_reg(k, PTX_U32, "part"), *p = ptx_reg(k, PTX_PRED, "p_more");
	const char *addr = ptx_reg(k, PTX_U64, "addr"), *po = ptx_tmp(k, PTX_U64);
	struct ptx_loop lp;
	ptx_mov(k, PTX_U32, pp, sy);
	ptx_ins(k, "setp.lt.u32 %s, %s, %s", p, pp, np);
	ptx_ins(k, "and.pred %s, %s, %s", p, p, pcol);
	ptx_loop_begin(k, &lp, "parts");
	ptx_loop_break_if(k, &lp, p, 1);
	{
		/* the loads of both sums first, then the adds in part order */
		const char *v[2][32], *pu[32];
		for (int u = 0; u < UNR; u++) {
			const char *pi = ptx_tmp(k, PTX_U32);
			pu[u] = ptx_tmp(k, PTX_PRED);
			ptx_ins(k, "add.u32 %s, %s, %d", pi, pp, u * SL);
			ptx_ins(k, "setp.lt.u32 %s, %s, %s", pu[u], pi, np);
			ptx_ins(k, "mul.wide.u32 %s, %s, %lld", po, pi, H * 4);
			for (int a = 0; a < nacc; a++) {
				v[a][u] = ptx_tmp(k, PTX_F32);
				ptx_ins(k, "add.u64 %s, %s, %s", addr, base[a], po);
				ptx_mov_f32(k, v[a][u], 0.0f);
				ptx_guard(k, pu[u], 0);
				ptx_ld_global(k, PTX_CACHE_LAST, PTX_F32, v[a][u], addr, 0);
			}
		}
		for (int a = 0; a < nacc; a++)
			for (int u = 0; u < UNR; u++) {
				ptx_guard(k, pu[u], 0);
				ptx_add_f32(k, sum[a], sum[a], v[a][u]);
			}
	}
	ptx_ins(k, "add.u32 %s, %s, %d", pp, pp, UNR * SL);
	ptx_ins(k, "setp.lt.u32 %s, %s, %s", p, pp, np);
	ptx_ins(k, "and.pred %s, %s, %s", p, p, pcol);
	ptx_loop_end(k, &lp, NULL, 0);
	/* slices -> shared -> slice 0 adds them in order */
	const char *sa = ptx_reg(k, PTX_U32, "fin_slot"), *ra = ptx_reg(k, PTX_U32, "fin_col");
	ptx_smem_addr(k, ra, "fin_red", 0);
	ptx_ins(k, "mad.lo.u32 %s, %s, 4, %s", ra, cx, ra);
	ptx_ins(k, "mad.lo.u32 %s, %s, 128, %s", sa, sy, ra);
	for (int a = 0; a < nacc; a++)
		ptx_st_shared(k, PTX_F32, sa, a * SL * 128, sum[a]);
	ptx_bar_sync(k, 0, 0);
	const char *out = ptx_label_new(k, "out");
	ptx_guard(k, p0, 0);
	ptx_bra_div(k, out); /* col < H differs across a warp's lanes */
	for (int a = 0; a < nacc; a++) {
		for (int s = 0; s < SL; s++) {
			const char *v = ptx_tmp(k, PTX_F32);
			ptx_ld_shared(k, PTX_F32, v, ra, a * SL * 128 + s * 128);
			if (s == 0)
				ptx_mov(k, PTX_F32, sum[a], v);
			else
				ptx_add_f32(k, sum[a], sum[a], v);
		}
		if (E == 4) {
			ptx_guard(k, pz[a], 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_F32, oa[a], 0, sum[a]);
		} else {
			const char *h = ptx_tmp(k, PTX_B16);
			if (kp->dtype == WSN_BF16)
				ptx_cvt_bf16_f32(k, h, sum[a]);
			else
				ptx_cvt_f16_f32(k, h, sum[a]);
			ptx_guard(k, pz[a], 0);
			ptx_st_global(k, PTX_CACHE_DEFAULT, PTX_B16, oa[a], 0, h);
		}
	}
	ptx_label(k, out);
	ptx_ret(k);
	return ptx_kernel_end(k);
}
