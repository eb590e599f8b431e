/* SPDX-License-Identifier: MIT */
/* codegen/ptx/instructions.c: the emitter's typed instruction helpers: branches, loops, moves, loads and stores, arithmetic, barriers, async copies. */
#include "emitter.h"

#include <stdio.h>

/* ---------------------------------------------------------------- control flow, moves, memory, arithmetic */

/* "[addr]" or "[addr+off]" into buf. */
static const char *addr_str(char *buf, size_t n, const char *addr, long long off)
{
	if (off)
		snprintf(buf, n, "[%s%+lld]", addr, off);
	else
		snprintf(buf, n, "[%s]", addr);
	return buf;
}

void ptx_bra(struct ptx_kernel *k, const char *label)
{
	ptx_ins(k, "bra.uni %s", label);
}

void ptx_bra_div(struct ptx_kernel *k, const char *label)
{
	ptx_ins(k, "bra %s", label);
}

void ptx_ret(struct ptx_kernel *k)
{
	ptx_ins(k, "ret");
}

void ptx_loop_begin(struct ptx_kernel *k, struct ptx_loop *lp, const char *stem)
{
	char s[64];

	lp->head = ptx_label_new(k, stem);
	snprintf(s, sizeof(s), "%s_end", stem);
	lp->exit = ptx_label_new(k, s);
	ptx_label(k, lp->head);
}

void ptx_loop_break_if(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg)
{
	ptx_guard(k, pred, neg);
	ptx_ins(k, "bra %s", lp->exit);
}

void ptx_loop_end(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg)
{
	if (pred) {
		ptx_guard(k, pred, neg);
		ptx_ins(k, "bra %s", lp->head);
	} else {
		ptx_bra(k, lp->head);
	}
	ptx_label(k, lp->exit);
}

void ptx_exit(struct ptx_kernel *k)
{
	ptx_ins(k, "exit");
}

void ptx_ld_param(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *param)
{
	ptx_ins(k, "ld.param%s %s, [%s]", ptx_type_name(t), dst, param);
}

void ptx_mov(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *src)
{
	ptx_ins(k, "mov%s %s, %s", ptx_type_name(t), dst, src);
}

void ptx_mov_imm(struct ptx_kernel *k, enum ptx_type t, const char *dst, long long v)
{
	ptx_ins(k, "mov%s %s, %lld", ptx_type_name(t), dst, v);
}

void ptx_mov_f32(struct ptx_kernel *k, const char *dst, float v)
{
	union { float f; uint32_t u; } c = { .f = v };

	ptx_ins(k, "mov.f32 %s, 0f%08X", dst, (unsigned)c.u);
}

void ptx_sreg(struct ptx_kernel *k, const char *dst, const char *sreg)
{
	ptx_ins(k, "mov.u32 %s, %s", dst, sreg);
}

void ptx_param_addr(struct ptx_kernel *k, const char *dst64, const char *param)
{
	ptx_ins(k, "mov.u64 %s, %s", dst64, param);
	ptx_ins(k, "cvta.param.u64 %s, %s", dst64, dst64);
}

void ptx_smem_addr(struct ptx_kernel *k, const char *dst32, const char *sym, long long off)
{
	if (off)
		ptx_ins(k, "mov.u32 %s, %s%+lld", dst32, sym, off);
	else
		ptx_ins(k, "mov.u32 %s, %s", dst32, sym);
}

static const char *ld_hint(enum ptx_cache c)
{
	switch (c) {
	case PTX_CACHE_STREAM: return ".L1::no_allocate.L2::256B";
	case PTX_CACHE_READONLY: return ".nc";
	case PTX_CACHE_LAST: return ".L1::no_allocate";
	default: return "";
	}
}

static const char *st_hint(enum ptx_cache c)
{
	return c == PTX_CACHE_STREAM ? ".cs" : "";
}

void ptx_ld_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *const r[4], const char *addr,
		      long long off)
{
	char a[128];

	ptx_ins(k, "ld.global%s.v4.b32 {%s, %s, %s, %s}, %s", ld_hint(c), r[0], r[1], r[2], r[3],
		addr_str(a, sizeof(a), addr, off));
}

void ptx_st_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *addr, long long off,
		      const char *const r[4])
{
	char a[128];

	ptx_ins(k, "st.global%s.v4.b32 %s, {%s, %s, %s, %s}", st_hint(c), addr_str(a, sizeof(a), addr, off),
		r[0], r[1], r[2], r[3]);
}

void ptx_ld_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *dst,
		   const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.global%s%s %s, %s", ld_hint(c), ptx_type_name(t), dst, addr_str(a, sizeof(a), addr, off));
}

void ptx_st_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *addr,
		   long long off, const char *src)
{
	char a[128];

	ptx_ins(k, "st.global%s%s %s, %s", st_hint(c), ptx_type_name(t), addr_str(a, sizeof(a), addr, off), src);
}

void ptx_ld_shared_v4(struct ptx_kernel *k, const char *const r[4], const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.shared.v4.b32 {%s, %s, %s, %s}, %s", r[0], r[1], r[2], r[3],
		addr_str(a, sizeof(a), addr, off));
}

void ptx_st_shared_v4(struct ptx_kernel *k, const char *addr, long long off, const char *const r[4])
{
	char a[128];

	ptx_ins(k, "st.shared.v4.b32 %s, {%s, %s, %s, %s}", addr_str(a, sizeof(a), addr, off), r[0], r[1],
		r[2], r[3]);
}

void ptx_ld_shared(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.shared%s %s, %s", ptx_type_name(t), dst, addr_str(a, sizeof(a), addr, off));
}

void ptx_st_shared(struct ptx_kernel *k, enum ptx_type t, const char *addr, long long off, const char *src)
{
	char a[128];

	ptx_ins(k, "st.shared%s %s, %s", ptx_type_name(t), addr_str(a, sizeof(a), addr, off), src);
}

void ptx_cp_async_16(struct ptx_kernel *k, const char *saddr, long long soff, const char *gaddr,
		     long long goff)
{
	char a[128], b[128];

	ptx_ins(k, "cp.async.cg.shared.global %s, %s, 16", addr_str(a, sizeof(a), saddr, soff),
		addr_str(b, sizeof(b), gaddr, goff));
}

void ptx_cp_async_commit(struct ptx_kernel *k)
{
	ptx_ins(k, "cp.async.commit_group");
}

void ptx_cp_async_wait_group(struct ptx_kernel *k, int n)
{
	ptx_ins(k, "cp.async.wait_group %d", n);
}

void ptx_shfl_bfly(struct ptx_kernel *k, const char *dst, const char *src, int lanemask)
{
	ptx_ins(k, "shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff", dst, src, lanemask);
}

void ptx_bar_sync(struct ptx_kernel *k, int id, unsigned count)
{
	if (count)
		ptx_ins(k, "bar.sync %d, %u", id, count);
	else
		ptx_ins(k, "bar.sync %d", id);
}

void ptx_bar_sync_reg(struct ptx_kernel *k, const char *id, unsigned count)
{
	ptx_ins(k, "bar.sync %s, %u", id, count);
}

void ptx_bar_warp_sync(struct ptx_kernel *k)
{
	ptx_ins(k, "bar.warp.sync 0xffffffff");
}

void ptx_elect_sync(struct ptx_kernel *k, const char *pred, const char *lane)
{
	ptx_ins(k, "elect.sync %s|%s, 0xffffffff", lane ? lane : "_", pred);
}

void ptx_unpack_bf16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed)
{
	/* a bf16 is the top half of an f32: shift the low element up, mask the high one */
	if (lo)
		ptx_ins(k, "shl.b32 %s, %s, 16", lo, packed);
	if (hi)
		ptx_ins(k, "and.b32 %s, %s, 0xffff0000", hi, packed);
}

void ptx_pack_bf16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi)
{
	/* the first source lands in the upper half */
	ptx_ins(k, "cvt.rn.bf16x2.f32 %s, %s, %s", packed, hi, lo);
}

void ptx_unpack_f16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed)
{
	const char *h0 = ptx_tmp(k, PTX_B16), *h1 = ptx_tmp(k, PTX_B16);

	ptx_ins(k, "mov.b32 {%s, %s}, %s", h0, h1, packed);
	if (lo)
		ptx_ins(k, "cvt.f32.f16 %s, %s", lo, h0);
	if (hi)
		ptx_ins(k, "cvt.f32.f16 %s, %s", hi, h1);
}

void ptx_pack_f16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi)
{
	ptx_ins(k, "cvt.rn.f16x2.f32 %s, %s, %s", packed, hi, lo);
}

void ptx_cvt_f32_bf16(struct ptx_kernel *k, const char *dst, const char *h)
{
	ptx_ins(k, "cvt.f32.bf16 %s, %s", dst, h);
}

void ptx_cvt_bf16_f32(struct ptx_kernel *k, const char *h, const char *src)
{
	ptx_ins(k, "cvt.rn.bf16.f32 %s, %s", h, src);
}

void ptx_cvt_f32_f16(struct ptx_kernel *k, const char *dst, const char *h)
{
	ptx_ins(k, "cvt.f32.f16 %s, %s", dst, h);
}

void ptx_cvt_f16_f32(struct ptx_kernel *k, const char *h, const char *src)
{
	ptx_ins(k, "cvt.rn.f16.f32 %s, %s", h, src);
}

void ptx_add_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "add.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_sub_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "sub.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_mul_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "mul.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_fma_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b, const char *c)
{
	ptx_ins(k, "fma.rn.f32 %s, %s, %s, %s", d, a, b, c);
}

void ptx_rsqrt_f32(struct ptx_kernel *k, const char *d, const char *a)
{
	ptx_ins(k, "rsqrt.approx.f32 %s, %s", d, a);
}

void ptx_sqrt_rn_f32(struct ptx_kernel *k, const char *d, const char *a)
{
	ptx_ins(k, "sqrt.rn.f32 %s, %s", d, a);
}

void ptx_div_rn_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "div.rn.f32 %s, %s, %s", d, a, b);
}

/* ---------------------------------------------------------------- async */

void ptx_mbarrier_init(struct ptx_kernel *k, const char *bar, long long off, unsigned count)
{
	char a[128];

	ptx_ins(k, "mbarrier.init.shared::cta.b64 %s, %u", addr_str(a, sizeof(a), bar, off), count);
}

void ptx_mbarrier_arrive(struct ptx_kernel *k, const char *bar, long long off)
{
	char a[128];

	ptx_ins(k, "mbarrier.arrive.shared::cta.b64 _, %s", addr_str(a, sizeof(a), bar, off));
}

void ptx_mbarrier_arrive_expect_tx(struct ptx_kernel *k, const char *bar, long long off, unsigned bytes)
{
	char a[128];

	ptx_ins(k, "mbarrier.arrive.expect_tx.shared::cta.b64 _, %s, %u", addr_str(a, sizeof(a), bar, off),
		bytes);
}

void ptx_mbarrier_wait_parity(struct ptx_kernel *k, const char *bar, long long off, const char *parity)
{
	const char *p = ptx_tmp(k, PTX_PRED), *retry = ptx_label_new(k, "mbar_wait");
	char a[128];

	ptx_label(k, retry);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p,
		addr_str(a, sizeof(a), bar, off), parity);
	ptx_guard(k, p, 1);
	ptx_ins(k, "bra %s", retry);
}

void ptx_mbarrier_wait_parity_bounded(struct ptx_kernel *k, const char *bar, long long off, const char *parity,
				      unsigned long long timeout_ns)
{
	const char *p = ptx_tmp(k, PTX_PRED), *more = ptx_tmp(k, PTX_PRED);
	const char *t0 = ptx_tmp(k, PTX_U64), *t1 = ptx_tmp(k, PTX_U64);
	const char *retry = ptx_label_new(k, "mbar_wait"), *done = ptx_label_new(k, "mbar_done");
	char a[128];

	addr_str(a, sizeof(a), bar, off);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p, a, parity);
	ptx_guard(k, p, 0);
	ptx_ins(k, "bra %s", done);
	ptx_ins(k, "mov.u64 %s, %%globaltimer", t0);
	ptx_label(k, retry);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p, a, parity);
	ptx_guard(k, p, 0);
	ptx_ins(k, "bra %s", done);
	ptx_ins(k, "mov.u64 %s, %%globaltimer", t1);
	ptx_ins(k, "sub.u64 %s, %s, %s", t1, t1, t0);
	ptx_ins(k, "setp.lt.u64 %s, %s, %llu", more, t1, timeout_ns);
	ptx_guard(k, more, 0);
	ptx_ins(k, "bra %s", retry);
	ptx_ins(k, "trap");
	ptx_label(k, done);
}

void ptx_mbarrier_expect_tx(struct ptx_kernel *k, const char *bar, long long off, const char *bytes)
{
	char a[128];

	ptx_ins(k, "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 %s, %s", addr_str(a, sizeof(a), bar, off), bytes);
}

void ptx_fence_proxy_async(struct ptx_kernel *k)
{
	ptx_ins(k, "fence.proxy.async.shared::cta");
}

void ptx_fence_mbarrier_init(struct ptx_kernel *k)
{
	ptx_ins(k, "fence.mbarrier_init.release.cluster");
}

void ptx_cp_async_bulk_g2s(struct ptx_kernel *k, const char *sdst, const char *gsrc, const char *bytes,
			   const char *bar)
{
	ptx_ins(k, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %s, [%s]",
		sdst, gsrc, bytes, bar);
}

void ptx_cp_async_ca(struct ptx_kernel *k, const char *sdst, const char *gsrc, int bytes)
{
	ptx_ins(k, "cp.async.ca.shared.global [%s], [%s], %d", sdst, gsrc, bytes);
}

void ptx_cp_async_mbarrier_arrive(struct ptx_kernel *k, const char *bar)
{
	ptx_ins(k, "cp.async.mbarrier.arrive.shared.b64 [%s]", bar);
}

void ptx_cp_async_bulk_s2g(struct ptx_kernel *k, const char *gdst, const char *ssrc, const char *bytes)
{
	ptx_ins(k, "cp.async.bulk.global.shared::cta.bulk_group [%s], [%s], %s", gdst, ssrc, bytes);
}

void ptx_cp_async_bulk_tensor_g2s(struct ptx_kernel *k, int dims, const char *sdst, const char *tmap,
				  const char *const coords[], const char *bar)
{
	char c[256] = "";
	size_t n = 0;

	if (dims < 1 || dims > 5) {
		ptx_kernel_fail(k, WSN_EINVAL, "cp.async.bulk.tensor needs 1..5 dimensions");
		return;
	}
	for (int i = 0; i < dims; i++)
		n += (size_t)snprintf(c + n, sizeof(c) - n, "%s%s", i ? ", " : "", coords[i]);
	ptx_ins(k, "cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
		"[%s], [%s, {%s}], [%s]", dims, sdst, tmap, c, bar);
}

void ptx_bulk_commit_group(struct ptx_kernel *k)
{
	ptx_ins(k, "cp.async.bulk.commit_group");
}

void ptx_bulk_wait_group_read(struct ptx_kernel *k, int n)
{
	ptx_ins(k, "cp.async.bulk.wait_group.read %d", n);
}

void ptx_setmaxnreg(struct ptx_kernel *k, int inc, unsigned n)
{
	if (n % 8 || n < 24 || n > 256) {
		ptx_kernel_fail(k, WSN_EINVAL, "setmaxnreg needs a multiple of 8 in 24..256");
		return;
	}
	ptx_ins(k, "setmaxnreg.%s.sync.aligned.u32 %u", inc ? "inc" : "dec", n);
}

void ptx_griddep_wait(struct ptx_kernel *k)
{
	ptx_ins(k, "griddepcontrol.wait");
}

void ptx_griddep_launch_dependents(struct ptx_kernel *k)
{
	ptx_ins(k, "griddepcontrol.launch_dependents");
}

void ptx_cluster_sync(struct ptx_kernel *k)
{
	ptx_ins(k, "barrier.cluster.arrive.release.aligned");
	ptx_ins(k, "barrier.cluster.wait.acquire.aligned");
}

void ptx_mapa(struct ptx_kernel *k, const char *dst, const char *src, const char *rank)
{
	ptx_ins(k, "mapa.shared::cluster.u32 %s, %s, %s", dst, src, rank);
}

void ptx_st_async_f32(struct ptx_kernel *k, const char *addr, long long off, int n, const char *const r[],
		      const char *rbar)
{
	char a[128];

	addr_str(a, sizeof(a), addr, off);
	if (n == 4)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 %s, {%s, %s, %s, %s}, [%s]", a,
			r[0], r[1], r[2], r[3], rbar);
	else if (n == 2)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 %s, {%s, %s}, [%s]", a, r[0], r[1],
			rbar);
	else if (n == 1)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 %s, %s, [%s]", a, r[0], rbar);
	else
		ptx_kernel_fail(k, WSN_EINVAL, "st.async takes 1, 2 or 4 values");
}
