/* SPDX-License-Identifier: MIT */
/* codegen/ptx/rowkernel_reduce.c: sums and (count, mean, M2) merges over a row group: warp shuffles, then the warps through shared memory. */
#include "rowkernel.h"

/* Sum n f32 values over the bdimx threads of a row group; every thread gets the same totals. */
void wsn__rk_reduce_row(struct rk_gen *g, const char *const v[], int n)
{
	struct ptx_kernel *k = g->k;
	int lanes = g->bdimx < 32 ? g->bdimx : 32, slot = (int)wsn__rk_red_slot(g);

	ptx_comment(k, "row reduction of %d value%s over %d threads", n, n > 1 ? "s" : "", g->bdimx);
	for (int off = lanes / 2; off >= 1; off /= 2) {
		for (int i = 0; i < n; i++) {
			const char *t = ptx_tmp(k, PTX_F32);
			ptx_shfl_bfly(k, t, v[i], off);
			ptx_add_f32(k, v[i], v[i], t);
		}
	}
	if (g->warps <= 1)
		return;
	/* lane 0 of each warp writes, the group's named barrier, everyone sums the warps in order */
	const char *wa = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32);
	ptx_ins(k, "add.u32 %s, %s, %s", wa, g->red_w, g->red_par);
	ptx_ins(k, "add.u32 %s, %s, %s", ra, g->red_r, g->red_par);
	for (int i = 0; i < n; i++) {
		ptx_guard(k, g->p_lane0, 0);
		ptx_st_shared(k, PTX_F32, wa, 4 * i, v[i]);
	}
	ptx_bar_sync_reg(k, g->bar_id, (unsigned)g->bdimx);
	if (n > 2) {
		/* four values per load, warps in order */
		for (int w = 0; w < g->warps; w++) {
			for (int c = 0; c < n; c += 4) {
				const char *x[4];
				for (int i = 0; i < 4; i++)
					x[i] = ptx_tmp(k, PTX_F32);
				ptx_ins(k, "ld.shared.v4.f32 {%s, %s, %s, %s}, [%s+%d]", x[0], x[1], x[2], x[3], ra,
					slot * w + 4 * c);
				for (int i = 0; i < 4 && c + i < n; i++) {
					if (w == 0)
						ptx_mov(k, PTX_F32, v[c + i], x[i]);
					else
						ptx_add_f32(k, v[c + i], v[c + i], x[i]);
				}
			}
		}
		ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, slot * g->warps);
		return;
	}
	for (int w = 0; w < g->warps; w++) {
		const char *a = ptx_tmp(k, PTX_F32), *b = ptx_tmp(k, PTX_F32);
		ptx_ins(k, "ld.shared.v2.f32 {%s, %s}, [%s+%d]", a, b, ra, slot * w);
		if (w == 0) {
			ptx_mov(k, PTX_F32, v[0], a);
			if (n > 1)
				ptx_mov(k, PTX_F32, v[1], b);
		} else {
			ptx_add_f32(k, v[0], v[0], a);
			if (n > 1)
				ptx_add_f32(k, v[1], v[1], b);
		}
	}
	ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, slot * g->warps);
}

/* (n, mean, M2) of a and b -> a: Chan, Golub and LeVeque's pairwise update (see rowkernel.h). */
void wsn__rk_chan_combine(struct rk_gen *g, const char *n, const char *m, const char *m2, const char *nb,
			  const char *mb, const char *m2b)
{
	struct ptx_kernel *k = g->k;
	const char *nn = ptx_tmp(k, PTX_F32), *d = ptx_tmp(k, PTX_F32), *f = ptx_tmp(k, PTX_F32);
	const char *t = ptx_tmp(k, PTX_F32), *u = ptx_tmp(k, PTX_F32), *pz = ptx_tmp(k, PTX_PRED);

	ptx_add_f32(k, nn, n, nb);
	ptx_sub_f32(k, d, mb, m);
	ptx_ins(k, "div.full.f32 %s, %s, %s", f, nb, nn); /* 2 ulp, no slow path: the weight of b */
	ptx_ins(k, "setp.eq.f32 %s, %s, 0f00000000", pz, nn);
	ptx_ins(k, "selp.f32 %s, 0f00000000, %s, %s", f, f, pz);
	ptx_mul_f32(k, t, d, f);            /* delta * nb / n */
	ptx_fma_f32(k, m, d, f, m);         /* mean_a + delta * nb / n */
	ptx_mul_f32(k, u, t, n);            /* delta * na * nb / n */
	ptx_add_f32(k, m2, m2, m2b);
	ptx_fma_f32(k, m2, u, d, m2);       /* M2_a + M2_b + delta^2 * na * nb / n */
	ptx_mov(k, PTX_F32, n, nn);
}

/* Elements each thread of the row group owns when all own the same number (every slice full), else 0. */
static int uniform_count(const struct rk_gen *g)
{
	for (int j = 0; j < g->vectors; j++)
		if (g->slice_kind[j] != RK_J_ALL)
			return 0;
	return g->vectors * g->vec;
}

/* (mean, M2) of a and b, n elements each, -> a: the pairwise update with the weights known, no
 * division. Symmetric in a and b to the bit (sums commute, (-d)^2 = d^2), so both lanes of a
 * butterfly pair compute the same result. */
static void equal_combine(struct rk_gen *g, const char *m, const char *m2, const char *mb, const char *m2b, double n)
{
	struct ptx_kernel *k = g->k;
	const char *d = ptx_tmp(k, PTX_F32), *t = ptx_tmp(k, PTX_F32), *h = ptx_tmp(k, PTX_F32);

	ptx_sub_f32(k, d, mb, m);
	ptx_add_f32(k, m2, m2, m2b);
	ptx_mov_f32(k, h, (float)(n / 2));
	ptx_mul_f32(k, t, d, h);
	ptx_fma_f32(k, m2, t, d, m2);       /* M2_a + M2_b + delta^2 * n / 2 */
	ptx_add_f32(k, m, m, mb);
	ptx_mov_f32(k, h, 0.5f);
	ptx_mul_f32(k, m, m, h);
}

/* (mean, M2) of a, na elements, and b, nb elements, -> a, the weights constants. */
static void merge_weighted(struct rk_gen *g, const char *m, const char *m2, const char *mb, const char *m2b, double na,
			   double nb)
{
	struct ptx_kernel *k = g->k;
	const char *d = ptx_tmp(k, PTX_F32), *t = ptx_tmp(k, PTX_F32), *h = ptx_tmp(k, PTX_F32);

	ptx_sub_f32(k, d, mb, m);
	ptx_add_f32(k, m2, m2, m2b);
	ptx_mov_f32(k, h, (float)(na * nb / (na + nb)));
	ptx_mul_f32(k, t, d, h);
	ptx_fma_f32(k, m2, t, d, m2);       /* M2_a + M2_b + delta^2 * na * nb / n */
	ptx_mov_f32(k, h, (float)(nb / (na + nb)));
	ptx_fma_f32(k, m, d, h, m);         /* mean_a + delta * nb / n */
}

/* wsn__rk_reduce_welford for threads that own c elements each: butterflies, then the warps through
 * shared memory in chunks, every weight a constant. */
static void reduce_welford_uniform(struct rk_gen *g, int nsets, const char *const n[], const char *const m[],
				   const char *const m2[], int c)
{
	struct ptx_kernel *k = g->k;
	int slot = (int)wsn__rk_red_slot(g), nw = g->warps > 1 ? g->warps : 1;
	double have = c;

	ptx_comment(k, "row reduction of (mean, M2) over %d threads of %d elements each%s", g->bdimx, c,
		    nsets > 1 ? ", per row" : "");
	for (int off = 16; off >= 1; off /= 2, have *= 2) {
		for (int s = 0; s < nsets; s++) {
			const char *om = ptx_tmp(k, PTX_F32), *om2 = ptx_tmp(k, PTX_F32);
			ptx_shfl_bfly(k, om, m[s], off);
			ptx_shfl_bfly(k, om2, m2[s], off);
			equal_combine(g, m[s], m2[s], om, om2, have);
		}
	}
	if (nw > 1) {
		const char *wa = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32);
		ptx_ins(k, "add.u32 %s, %s, %s", wa, g->red_w, g->red_par);
		ptx_ins(k, "add.u32 %s, %s, %s", ra, g->red_r, g->red_par);
		for (int s = 0; s < nsets; s++) {
			ptx_guard(k, g->p_lane0, 0);
			ptx_ins(k, "st.shared.v2.f32 [%s+%d], {%s, %s}", wa, 16 * s, m[s], m2[s]);
		}
		ptx_bar_sync_reg(k, g->bar_id, (unsigned)g->bdimx);
		/* chunks of q warps (4 when the warps are a power of two, else 1): each a tree of equal
		 * halves, then merged into the warps before it with constant weights; few values live */
		int q = nw & (nw - 1) ? 1 : nw < 4 ? nw : 4;
		for (int s = 0; s < nsets; s++) {
			for (int b = 0; b < nw; b += q) {
				const char *wm[4], *wm2[4];
				for (int w = 0; w < q; w++) {
					wm[w] = b + w ? ptx_tmp(k, PTX_F32) : m[s];
					wm2[w] = b + w ? ptx_tmp(k, PTX_F32) : m2[s];
					ptx_ins(k, "ld.shared.v2.f32 {%s, %s}, [%s+%d]", wm[w], wm2[w], ra,
						slot * (b + w) + 16 * s);
				}
				for (int step = 1; step < q; step *= 2)
					for (int w = 0; w + step < q; w += 2 * step)
						equal_combine(g, wm[w], wm2[w], wm[w + step], wm2[w + step], have * step);
				if (b)
					merge_weighted(g, m[s], m2[s], wm[0], wm2[0], have * b, have * q);
			}
		}
		ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, slot * g->warps);
	}
	for (int s = 0; s < nsets; s++)
		ptx_mov_f32(k, n[s], (float)(have * nw));
}

/* Merge every thread's (count, mean, M2) over the row group, in an order every thread repeats
 * exactly (the lower lane of a butterfly pair is always the first operand; warps in order), so
 * the whole row sees bit-identical statistics: one reduction for LayerNorm's mean and variance.
 * nsets independent rows share the shuffles' latency and one barrier. */
void wsn__rk_reduce_welford(struct rk_gen *g, int nsets, const char *const n[], const char *const m[],
			    const char *const m2[])
{
	struct ptx_kernel *k = g->k;
	const char *lane;
	int slot = (int)wsn__rk_red_slot(g), c = uniform_count(g);

	if (c && g->bdimx >= 32 && g->warps <= 32) {
		reduce_welford_uniform(g, nsets, n, m, m2, c);
		return;
	}
	lane = ptx_tmp(k, PTX_U32);
	ptx_comment(k, "row reduction of (count, mean, M2) over %d threads%s", g->bdimx, nsets > 1 ? ", per row" : "");
	ptx_ins(k, "and.b32 %s, %s, 31", lane, g->tid_x);
	for (int off = 16; off >= 1; off /= 2) {
		const char *hi = ptx_tmp(k, PTX_PRED), *bit = ptx_tmp(k, PTX_U32);
		ptx_ins(k, "and.b32 %s, %s, %d", bit, lane, off);
		ptx_ins(k, "setp.ne.u32 %s, %s, 0", hi, bit);
		for (int s = 0; s < nsets; s++) {
			const char *o[3], *a[3], *b[3], *v[3] = { n[s], m[s], m2[s] };
			for (int i = 0; i < 3; i++) {
				o[i] = ptx_tmp(k, PTX_F32);
				ptx_shfl_bfly(k, o[i], v[i], off);
			}
			for (int i = 0; i < 3; i++) {
				a[i] = ptx_tmp(k, PTX_F32);
				b[i] = ptx_tmp(k, PTX_F32);
				ptx_ins(k, "selp.f32 %s, %s, %s, %s", a[i], o[i], v[i], hi);
				ptx_ins(k, "selp.f32 %s, %s, %s, %s", b[i], v[i], o[i], hi);
			}
			wsn__rk_chan_combine(g, a[0], a[1], a[2], b[0], b[1], b[2]);
			for (int i = 0; i < 3; i++)
				ptx_mov(k, PTX_F32, v[i], a[i]);
		}
	}
	if (g->warps <= 1)
		return;
	const char *wa = ptx_tmp(k, PTX_U32), *ra = ptx_tmp(k, PTX_U32);
	ptx_ins(k, "add.u32 %s, %s, %s", wa, g->red_w, g->red_par);
	ptx_ins(k, "add.u32 %s, %s, %s", ra, g->red_r, g->red_par);
	for (int s = 0; s < nsets; s++) {
		ptx_guard(k, g->p_lane0, 0);
		if (s)
			ptx_ins(k, "st.shared.v4.f32 [%s+%d], {%s, %s, %s, %s}", wa, 16 * s, n[s], m[s], m2[s], m2[s]);
		else
			ptx_ins(k, "st.shared.v4.f32 [%s], {%s, %s, %s, %s}", wa, n[s], m[s], m2[s], m2[s]);
	}
	ptx_bar_sync_reg(k, g->bar_id, (unsigned)g->bdimx);
	for (int w = 0; w < g->warps; w++) {
		for (int s = 0; s < nsets; s++) {
			const char *x[4];
			for (int i = 0; i < 4; i++)
				x[i] = ptx_tmp(k, PTX_F32);
			ptx_ins(k, "ld.shared.v4.f32 {%s, %s, %s, %s}, [%s+%d]", x[0], x[1], x[2], x[3], ra,
				slot * w + 16 * s);
			if (w == 0) {
				ptx_mov(k, PTX_F32, n[s], x[0]);
				ptx_mov(k, PTX_F32, m[s], x[1]);
				ptx_mov(k, PTX_F32, m2[s], x[2]);
			} else {
				wsn__rk_chan_combine(g, n[s], m[s], m2[s], x[0], x[1], x[2]);
			}
		}
	}
	ptx_ins(k, "xor.b32 %s, %s, %d", g->red_par, g->red_par, slot * g->warps);
}
