/* SPDX-License-Identifier: MIT */
/* tests/check_async.c: the async-group pass: wait counts and places for wgmma and bulk stores, and ptxas. */
#define _GNU_SOURCE
#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- ptxas */

/* ptxas accepts the module for sm_<arch>a without warnings and without injecting a wgmma fence
 * (warpgroup.arrive) or wait (warpgroup.wait) of its own: the pass put every one that is needed. */
static void ptxas_check(const char *text, const char *entry, int arch)
{
	const char *ptxas = tu_ptxas(entry);
	struct tu_ptxas_job j;
	struct tu_fn_info fi;
	char *dir, path[512], *log;
	int st;

	if (!ptxas)
		return;
	dir = tu_tmpdir();
	snprintf(path, sizeof(path), "%s/%s.ptx", dir, entry);
	tu_write_file(path, text, strlen(text));
	tu_ptxas_start(&j, ptxas, path, arch);
	st = tu_ptxas_wait(&j, &log);
	ck_assert_msg(st == 0, "ptxas sm_%da rejected %s:\n%s\n%s", arch, entry, log, text);
	ck_assert_msg(!strstr(log, "is injected"), "ptxas sm_%da added a wgmma fence or wait to %s:\n%s\n%s", arch,
		      entry, log, text);
	ck_assert_msg(!strstr(log, "arning"), "ptxas sm_%da warned on %s:\n%s", arch, entry, log);
	fi = tu_ptxas_info(log, entry);
	printf("ptxas sm_%da %-28s accepted, %d registers, no fence or wait added\n", arch, entry, fi.regs);
	free(log);
	tu_rmtree(dir);
	free(dir);
}

/* ---------------------------------------------------------------- test kernels */

static size_t count(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

#define MMA_WAIT "wgmma.wait_group.sync.aligned"
#define MMA_FENCE "wgmma.fence.sync.aligned"
#define MMA_COMMIT "wgmma.commit_group.sync.aligned"
#define BULK_WAIT "cp.async.bulk.wait_group.read"
#define BULK_COMMIT "cp.async.bulk.commit_group"

/* One small kernel of 128 threads (one warp group): shared buffers A (smem+0) and B (smem+1024),
 * wgmma descriptors for them, three sets of m64n8k16 accumulators, and a sum stored at the end. */
struct tk {
	struct ptx_module m;
	struct ptx_kernel *k;
	struct ptx_async *a;
	struct ptx_async_stats st;
	char name[64];
	const char *out, *tid, *t0, *sa, *sb, *adesc, *bdesc, *scale, *sum, *i, *more;
	const char *d[3][4];
	const char *v[4];
	int all_write;   /* every thread writes the shared buffers (else thread 0, the store's issuer) */
};

enum { REG_A = 0, REG_B = 1 };

static void tk_desc(struct tk *t, const char *desc, const char *saddr)
{
	const char *w = ptx_tmp(t->k, PTX_U64);

	/* start address >> 4 in bits 0..13, leading byte offset 128 >> 4 at 16, stride 256 >> 4 at 32 */
	ptx_ins(t->k, "cvt.u64.u32 %s, %s", w, saddr);
	ptx_ins(t->k, "shr.u64 %s, %s, 4", w, w);
	ptx_ins(t->k, "and.b64 %s, %s, 0x3FFF", w, w);
	ptx_ins(t->k, "or.b64 %s, %s, 0x0000001000080000", desc, w);
}

static void tk_begin(struct tk *t, const char *name, int arch, int attach)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	ck_assert_int_eq(ptx_module_init(&t->m, arch), 0);
	ptx_module_extern_smem(&t->m, "smem", 1024);
	t->k = ptx_kernel_begin(&t->m, name);
	ck_assert_ptr_nonnull(t->k);
	ptx_param(t->k, PTX_U64, "out");
	ptx_kernel_launch_bounds(t->k, 128, 1);
	if (attach) {
		t->a = ptx_async_attach(t->k, &t->st);
		ck_assert_ptr_nonnull(t->a);
	}
	t->out = ptx_reg(t->k, PTX_U64, "outp");
	t->tid = ptx_reg(t->k, PTX_U32, "tx");
	t->t0 = ptx_reg(t->k, PTX_PRED, "thread0");
	t->sa = ptx_reg(t->k, PTX_U32, "sa");
	t->sb = ptx_reg(t->k, PTX_U32, "sb");
	t->adesc = ptx_reg(t->k, PTX_B64, "adesc");
	t->bdesc = ptx_reg(t->k, PTX_B64, "bdesc");
	t->scale = ptx_reg(t->k, PTX_PRED, "scale");
	t->sum = ptx_reg(t->k, PTX_F32, "sum");
	t->i = ptx_reg(t->k, PTX_U32, "i");
	t->more = ptx_reg(t->k, PTX_PRED, "more");
	for (int s = 0; s < 3; s++)
		for (int j = 0; j < 4; j++)
			t->d[s][j] = ptx_reg(t->k, PTX_F32, "d%d_%d", s + 1, j);
	for (int j = 0; j < 4; j++)
		t->v[j] = ptx_reg(t->k, PTX_B32, "v%d", j);
	ptx_ld_param(t->k, PTX_U64, t->out, "out");
	ptx_ins(t->k, "cvta.to.global.u64 %s, %s", t->out, t->out);
	ptx_sreg(t->k, t->tid, "%tid.x");
	ptx_ins(t->k, "setp.eq.u32 %s, %s, 0", t->t0, t->tid);
	ptx_ins(t->k, "setp.ne.u32 %s, %s, 77", t->scale, t->tid);
	ptx_smem_addr(t->k, t->sa, "smem", 0);
	ptx_smem_addr(t->k, t->sb, "smem", 1024);
	tk_desc(t, t->adesc, t->sa);
	tk_desc(t, t->bdesc, t->sb);
	ptx_mov_f32(t->k, t->sum, 0.0f);
	for (int s = 0; s < 3; s++)
		for (int j = 0; j < 4; j++)
			ptx_mov_f32(t->k, t->d[s][j], 0.0f);
	for (int j = 0; j < 4; j++)
		ptx_mov(t->k, PTX_B32, t->v[j], t->tid);
	ptx_mov_imm(t->k, PTX_U32, t->i, 0);
}

/* D_set = A * B (+ D_set when scale is true) */
static void tk_mma(struct tk *t, int set)
{
	ptx_async_wgmma(t->a, "m64n8k16.f32.bf16.bf16", t->d[set - 1], 4, t->adesc, t->bdesc, t->scale);
}

/* sum += every element of D_set */
static void tk_use(struct tk *t, int set)
{
	for (int j = 0; j < 4; j++)
		ptx_add_f32(t->k, t->sum, t->sum, t->d[set - 1][j]);
}

/* Write 16 bytes a thread of buffer sbuf (in region, or untagged when region < -1): from thread 0,
 * which issues the stores, or from every thread when t->all_write. */
static void tk_write(struct tk *t, const char *sbuf, int region)
{
	const char *p = ptx_tmp(t->k, PTX_U32);

	ptx_ins(t->k, "mad.lo.u32 %s, %s, 16, %s", p, t->tid, sbuf);
	if (region >= PTX_ASYNC_ANY)
		ptx_async_region_begin(t->a, region);
	if (!t->all_write)
		ptx_guard(t->k, t->t0, 0);
	ptx_st_shared_v4(t->k, p, 0, t->v);
	if (region >= PTX_ASYNC_ANY)
		ptx_async_region_end(t->a);
}

/* Thread 0 stores 2048 bytes of sbuf (region) to out + off, after the writes are fenced and met. */
static void tk_store(struct tk *t, const char *sbuf, int region, long long off, int commit)
{
	const char *g = ptx_tmp(t->k, PTX_U64), *bytes = ptx_tmp(t->k, PTX_U32);

	ptx_fence_proxy_async(t->k);
	ptx_bar_sync(t->k, 1, 128);
	ptx_ins(t->k, "add.u64 %s, %s, %lld", g, t->out, off);
	ptx_mov_imm(t->k, PTX_U32, bytes, 2048);
	ptx_guard(t->k, t->t0, 0);
	ptx_async_bulk_store(t->a, g, sbuf, bytes, region);
	if (commit)
		ptx_bulk_commit_group(t->k);
}

/* Store the sum, return, end the kernel: the module text (caller frees). */
static char *tk_end(struct tk *t)
{
	char *text;
	const char *g = ptx_tmp(t->k, PTX_U64), *w = ptx_tmp(t->k, PTX_U64);

	ptx_ins(t->k, "mul.wide.u32 %s, %s, 4", w, t->tid);
	ptx_ins(t->k, "add.u64 %s, %s, %s", g, t->out, w);
	ptx_st_global(t->k, PTX_CACHE_DEFAULT, PTX_F32, g, 0, t->sum);
	ptx_ret(t->k);
	ck_assert_int_eq(ptx_kernel_end(t->k), 0);
	ck_assert_int_eq(ptx_module_take(&t->m, &text), 0);
	return text;
}

/* The first a in text comes before the first b. */
static void in_order(const char *text, const char *a, const char *b)
{
	const char *p = strstr(text, a), *q = strstr(text, b);

	ck_assert_msg(p && q && p < q, "expected \"%s\" before \"%s\" in\n%s", a, b, text);
}

/* The text between the first occurrence of a and the next occurrence of b after it (malloc'd). */
static char *between(const char *text, const char *a, const char *b)
{
	const char *p = strstr(text, a), *q;
	char *s;

	ck_assert_msg(p != NULL, "no %s in\n%s", a, text);
	p += strlen(a);
	q = strstr(p, b);
	ck_assert_msg(q != NULL, "no %s after %s in\n%s", b, a, text);
	s = tu_xmalloc((size_t)(q - p) + 1);
	memcpy(s, p, (size_t)(q - p));
	s[q - p] = 0;
	return s;
}

/* ---------------------------------------------------------------- wgmma */

/* D1=mma; use D1; D2=mma; use D2: each use meets its own pending group: 2 waits */
START_TEST(test_mma_use_mma_use)
{
	struct tk t;
	char *text;

	tk_begin(&t, "mma_use_mma_use", 90, 1);
	tk_mma(&t, 1);
	tk_use(&t, 1);
	tk_mma(&t, 2);
	tk_use(&t, 2);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 2);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 2);
	ck_assert_uint_eq(t.st.commits[PTX_ASYNC_WGMMA], 2);
	ck_assert_uint_eq(t.st.async_ops[PTX_ASYNC_WGMMA], 2);
	/* one fence, before the first wgmma: D2 was not touched between the fence and its wgmma */
	ck_assert_uint_eq(count(text, MMA_FENCE), 1);
	in_order(text, MMA_FENCE, "wgmma.mma_async");
	/* the first wait sits between the first wgmma and the first add reading %d1_0 */
	{
		char *s = between(text, "wgmma.mma_async", "add.rn.f32 %sum, %sum, %d1_0");
		ck_assert_uint_eq(count(s, MMA_WAIT), 1);
		ck_assert_uint_eq(count(s, MMA_COMMIT), 1);
		free(s);
	}
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 0);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* D1=mma; D2=mma; use D1; use D2: one wait flushes both: 1 wait */
START_TEST(test_mma_mma_use_use)
{
	struct tk t;
	char *text;

	tk_begin(&t, "mma_mma_use_use", 90, 1);
	tk_mma(&t, 1);
	tk_mma(&t, 2);
	tk_use(&t, 1);
	tk_use(&t, 2);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 1);
	ck_assert_uint_eq(count(text, MMA_FENCE), 1);
	ck_assert_ptr_nonnull(strstr(text, MMA_WAIT " 0;"));
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* D1=mma; b=D1+bias; a=relu(b): only the first instruction reads D1: 1 wait */
START_TEST(test_mma_bias_relu)
{
	struct tk t;
	const char *b, *r, *bias;
	char *text;

	tk_begin(&t, "mma_bias_relu", 90, 1);
	b = ptx_reg(t.k, PTX_F32, "b");
	r = ptx_reg(t.k, PTX_F32, "relu");
	bias = ptx_reg(t.k, PTX_F32, "bias");
	ptx_mov_f32(t.k, bias, 0.5f);
	tk_mma(&t, 1);
	ptx_add_f32(t.k, b, t.d[0][0], bias);
	ptx_ins(t.k, "max.f32 %s, %s, 0f00000000", r, b);
	ptx_add_f32(t.k, t.sum, t.sum, r);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	{
		char *s = between(text, "wgmma.mma_async", "add.rn.f32 %b, %d1_0, %bias");
		ck_assert_uint_eq(count(s, MMA_WAIT), 1);
		free(s);
	}
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* D1=mma; D1+=mma (same registers, accumulation is ordered by the hardware); use D1: 1 wait, none
 * between the two wgmmas */
START_TEST(test_mma_accumulate_chain)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "mma_chain", 90, 1);
	tk_mma(&t, 1);
	tk_mma(&t, 1);
	tk_use(&t, 1);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	s = between(text, "wgmma.mma_async", "wgmma.mma_async");
	ck_assert_uint_eq(count(s, MMA_WAIT), 0);
	ck_assert_uint_eq(count(s, MMA_FENCE), 0);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* D1=mma; commit; D2=mma; commit; use D1; use D2: flush 1 wait; keep-newer: wait 1 then wait 0 */
START_TEST(test_mma_policies)
{
	for (int keep = 0; keep < 2; keep++) {
		struct tk t;
		char *text;

		tk_begin(&t, keep ? "mma_keep_newer" : "mma_flush", 90, 1);
		if (keep)
			ptx_async_policy(t.a, PTX_ASYNC_WGMMA, PTX_ASYNC_KEEP_NEWER);
		tk_mma(&t, 1);
		ptx_ins(t.k, MMA_COMMIT);
		tk_mma(&t, 2);
		ptx_ins(t.k, MMA_COMMIT);
		tk_use(&t, 1);
		tk_use(&t, 2);
		text = tk_end(&t);
		ck_assert_uint_eq(t.st.commits[PTX_ASYNC_WGMMA], 0); /* the kernel's own commits suffice */
		if (keep) {
			ck_assert_uint_eq(count(text, MMA_WAIT), 2);
			in_order(text, MMA_WAIT " 1;", MMA_WAIT " 0;");
			in_order(text, MMA_WAIT " 0;", "%sum, %d2_0");
			in_order(text, "%sum, %d1_3", MMA_WAIT " 0;");
		} else {
			ck_assert_uint_eq(count(text, MMA_WAIT), 1);
			ck_assert_ptr_nonnull(strstr(text, MMA_WAIT " 0;"));
		}
		ptxas_check(text, t.name, 90);
		free(text);
	}
}
END_TEST

/* A wgmma that is never read still completes before the kernel exits; a kernel's own wait counts */
START_TEST(test_mma_exit_and_explicit_wait)
{
	struct tk t;
	char *text;

	tk_begin(&t, "mma_exit", 90, 1);
	tk_mma(&t, 1);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	ck_assert_uint_eq(count(text, MMA_COMMIT), 1);
	in_order(text, MMA_WAIT, "\tret;");
	ptxas_check(text, t.name, 90);
	free(text);

	tk_begin(&t, "mma_explicit", 90, 1);
	tk_mma(&t, 1);
	ptx_ins(t.k, MMA_COMMIT);
	ptx_ins(t.k, MMA_WAIT " 0");
	tk_use(&t, 1);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_WGMMA], 0);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* A from registers: reading an A fragment in flight is fine, overwriting it waits */
START_TEST(test_mma_a_fragments)
{
	struct tk t;
	const char *x;
	char *text, *s;

	tk_begin(&t, "mma_afrag", 90, 1);
	x = ptx_reg(t.k, PTX_B32, "x");
	ptx_ins(t.k, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%s, %s, %s, %s}, "
		"{%s, %s, %s, %s}, %s, %s, 1, 1, 1", t.d[0][0], t.d[0][1], t.d[0][2], t.d[0][3], t.v[0], t.v[1], t.v[2], t.v[3], t.bdesc,
		t.scale);
	ptx_ins(t.k, "add.u32 %s, %s, 1", x, t.v[0]);  /* reads %v0: no wait */
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.v[1], x);  /* writes %v1: wait */
	tk_use(&t, 1);                                 /* flushed already */
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	s = between(text, "add.u32 %x, %v0, 1;", "add.u32 %v1, %x, 1;");
	ck_assert_uint_eq(count(s, MMA_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* for i < 4: D1 += mma; then use D1: the wait is after the loop, not in it */
START_TEST(test_mma_loop_accumulate)
{
	struct tk t;
	struct ptx_loop lp;
	char *text, *body, *after;

	tk_begin(&t, "mma_loop_acc", 90, 1);
	ptx_loop_begin(t.k, &lp, "kloop");
	tk_mma(&t, 1);
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
	ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
	ptx_loop_end(t.k, &lp, t.more, 0);
	tk_use(&t, 1);
	text = tk_end(&t);
	body = between(text, "$Lkloop_", "bra $Lkloop_");
	after = between(text, "$Lkloop_end", "\tret;");
	ck_assert_uint_eq(count(body, MMA_WAIT), 0);
	ck_assert_uint_eq(count(body, MMA_FENCE), 1); /* the first iteration needs one */
	ck_assert_uint_eq(count(after, MMA_WAIT), 1);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	free(body);
	free(after);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* for i < 4: use D1 (what the previous iteration issued); D1 = mma; then use D1: the wait at the top
 * of the body covers the back edge, a second one the loop exit */
START_TEST(test_mma_loop_carried)
{
	struct tk t;
	struct ptx_loop lp;
	char *text, *head, *after;

	tk_begin(&t, "mma_loop_carried", 90, 1);
	ptx_loop_begin(t.k, &lp, "kloop");
	tk_use(&t, 1);
	tk_mma(&t, 1);
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
	ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
	ptx_loop_end(t.k, &lp, t.more, 0);
	tk_use(&t, 1);
	text = tk_end(&t);
	head = between(text, "$Lkloop_", "add.rn.f32 %sum, %sum, %d1_0");
	after = between(text, "$Lkloop_end", "\tret;");
	ck_assert_uint_eq(count(head, MMA_WAIT), 1);
	ck_assert_uint_eq(count(after, MMA_WAIT), 1);
	ck_assert_uint_eq(count(text, MMA_WAIT), 2);
	free(head);
	free(after);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* Two statements on one line: the wait goes between them */
START_TEST(test_mma_statements_on_one_line)
{
	struct tk t;
	const char *x;
	char *text, *s;

	tk_begin(&t, "mma_one_line", 90, 1);
	x = ptx_reg(t.k, PTX_F32, "x");
	tk_mma(&t, 1);
	ptx_ins(t.k, "mov.f32 %s, 0f3F800000; add.rn.f32 %s, %s, %s", x, t.sum, x, t.d[0][2]);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	s = between(text, "mov.f32 %x, 0f3F800000;", "add.rn.f32 %sum, %x, %d1_2;");
	ck_assert_uint_eq(count(s, MMA_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* ---------------------------------------------------------------- bulk stores */

/* store from A; overwrite A: 1 wait.read, before the overwrite */
START_TEST(test_store_then_overwrite)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		char *text, *s;

		tk_begin(&t, "store_overwrite", arch, 1);
		tk_write(&t, t.sa, REG_A);
		tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "overwrite A");
		tk_write(&t, t.sa, REG_A);
		text = tk_end(&t);
		ck_assert_uint_eq(count(text, BULK_WAIT), 1);
		ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 1);
		ck_assert_uint_eq(t.st.commits[PTX_ASYNC_BULK], 0);
		ck_assert_uint_eq(t.st.async_ops[PTX_ASYNC_BULK], 1);
		s = between(text, "// overwrite A", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, BULK_WAIT " 0;"), 1);
		free(s);
		ptxas_check(text, t.name, arch);
		free(text);
	}
}
END_TEST

/* store from A; store from B; overwrite A: 1 wait */
START_TEST(test_two_stores_overwrite_first)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "two_stores", 90, 1);
	tk_write(&t, t.sa, REG_A);
	tk_write(&t, t.sb, REG_B);
	tk_store(&t, t.sa, REG_A, 0, 1);
	tk_store(&t, t.sb, REG_B, 2048, 1);
	ptx_comment(t.k, "overwrite A");
	tk_write(&t, t.sa, REG_A);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	s = between(text, "// overwrite A", "st.shared.v4.b32");
	ck_assert_uint_eq(count(s, BULK_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* store from A; write B (another region: no wait); overwrite A: 1 wait, after the write of B.
 * Untagged, the write of B may touch A: the wait moves up to it. */
START_TEST(test_store_regions)
{
	for (int tagged = 0; tagged < 2; tagged++) {
		struct tk t;
		char *text, *s;

		tk_begin(&t, tagged ? "store_regions" : "store_untagged", 90, 1);
		tk_write(&t, t.sa, REG_A);
		tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "write B");
		tk_write(&t, t.sb, tagged ? REG_B : -2);
		ptx_comment(t.k, "overwrite A");
		tk_write(&t, t.sa, REG_A);
		text = tk_end(&t);
		ck_assert_uint_eq(count(text, BULK_WAIT), 1);
		s = between(text, tagged ? "// overwrite A" : "// write B", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, BULK_WAIT), 1);
		free(s);
		ptxas_check(text, t.name, 90);
		free(text);
	}
}
END_TEST

/* A store emitted without the helper reads an unknown buffer: any shared-memory write waits */
START_TEST(test_store_unknown_source)
{
	struct tk t;
	const char *g, *bytes;
	char *text, *s;

	tk_begin(&t, "store_unknown", 90, 1);
	bytes = ptx_reg(t.k, PTX_U32, "bytes");
	g = ptx_reg(t.k, PTX_U64, "g");
	ptx_mov_imm(t.k, PTX_U32, bytes, 1024);
	ptx_ins(t.k, "add.u64 %s, %s, 64", g, t.out);
	tk_write(&t, t.sa, REG_A);
	ptx_fence_proxy_async(t.k);
	ptx_guard(t.k, t.t0, 0);
	ptx_cp_async_bulk_s2g(t.k, g, t.sa, bytes);
	ptx_bulk_commit_group(t.k);
	ptx_comment(t.k, "write B");
	tk_write(&t, t.sb, REG_B);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	s = between(text, "// write B", "st.shared.v4.b32");
	ck_assert_uint_eq(count(s, BULK_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* An uncommitted store is committed by the pass before its wait; a kernel's own wait counts. */
START_TEST(test_store_commit_and_explicit_wait)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "store_autocommit", 90, 1);
	tk_write(&t, t.sa, REG_A);
	tk_store(&t, t.sa, REG_A, 0, 0);
	ptx_comment(t.k, "overwrite A");
	tk_write(&t, t.sa, REG_A);
	text = tk_end(&t);
	ck_assert_uint_eq(t.st.commits[PTX_ASYNC_BULK], 1);
	s = between(text, "// overwrite A", "st.shared.v4.b32");
	ck_assert_uint_eq(count(s, BULK_COMMIT), 1);
	ck_assert_uint_eq(count(s, BULK_WAIT), 1);
	in_order(s, BULK_COMMIT, BULK_WAIT);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);

	tk_begin(&t, "store_explicit_wait", 90, 1);
	tk_write(&t, t.sa, REG_A);
	tk_store(&t, t.sa, REG_A, 0, 1);
	ptx_bulk_wait_group_read(t.k, 0);
	tk_write(&t, t.sa, REG_A);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 0);
	free(text);
}
END_TEST

/* A store still reading shared memory when the kernel ends: a wait before ret */
START_TEST(test_store_before_exit)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "store_exit", 90, 1);
	tk_write(&t, t.sa, REG_A);
	tk_store(&t, t.sa, REG_A, 0, 1);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	s = between(text, "cp.async.bulk.global.shared::cta.bulk_group", "\tret;");
	ck_assert_uint_eq(count(s, BULK_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* Keep-newer: store A, store B, overwrite A waits for A only (wait.read 1); B at exit (wait.read 0) */
START_TEST(test_store_keep_newer)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "store_keep_newer", 90, 1);
	ptx_async_policy(t.a, PTX_ASYNC_BULK, PTX_ASYNC_KEEP_NEWER);
	tk_write(&t, t.sa, REG_A);
	tk_write(&t, t.sb, REG_B);
	tk_store(&t, t.sa, REG_A, 0, 1);
	tk_store(&t, t.sb, REG_B, 2048, 1);
	ptx_comment(t.k, "overwrite A");
	tk_write(&t, t.sa, REG_A);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 2);
	s = between(text, "// overwrite A", "st.shared.v4.b32");
	ck_assert_uint_eq(count(s, BULK_WAIT " 1;"), 1);
	free(s);
	s = between(text, "// overwrite A", "\tret;");
	ck_assert_uint_eq(count(s, BULK_WAIT " 0;"), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* for i < 4: write A; store A: the wait belongs inside the body, before the write (the previous
 * iteration's store reads A), plus one before exit for the last store */
START_TEST(test_store_loop)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		struct ptx_loop lp;
		char *text, *s;

		tk_begin(&t, "store_loop", arch, 1);
		ptx_loop_begin(t.k, &lp, "rows");
		tk_write(&t, t.sa, REG_A);
		tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
		ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
		ptx_loop_end(t.k, &lp, t.more, 0);
		text = tk_end(&t);
		ck_assert_uint_eq(count(text, BULK_WAIT), 2);
		s = between(text, "$Lrows_", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, BULK_WAIT), 1);
		free(s);
		s = between(text, "st.shared.v4.b32", "bra $Lrows_");
		ck_assert_uint_eq(count(s, BULK_WAIT), 0);
		free(s);
		s = between(text, "$Lrows_end", "\tret;");
		ck_assert_uint_eq(count(s, BULK_WAIT), 1);
		free(s);
		ptxas_check(text, t.name, arch);
		free(text);
	}
}
END_TEST

/* Double buffering, the loop body emitted once per buffer: flush waits once per iteration (at A,
 * which retires B too); keep-newer waits at each buffer for its own previous store only. */
START_TEST(test_store_loop_double_buffer)
{
	for (int keep = 0; keep < 2; keep++) {
		struct tk t;
		struct ptx_loop lp;
		char *text, *s;

		tk_begin(&t, keep ? "store_double_keep" : "store_double_flush", 90, 1);
		if (keep)
			ptx_async_policy(t.a, PTX_ASYNC_BULK, PTX_ASYNC_KEEP_NEWER);
		ptx_loop_begin(t.k, &lp, "rows");
		ptx_comment(t.k, "buffer A");
		tk_write(&t, t.sa, REG_A);
		tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "buffer B");
		tk_write(&t, t.sb, REG_B);
		tk_store(&t, t.sb, REG_B, 2048, 1);
		ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
		ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
		ptx_loop_end(t.k, &lp, t.more, 0);
		text = tk_end(&t);
		s = between(text, "// buffer A", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, keep ? BULK_WAIT " 1;" : BULK_WAIT " 0;"), 1);
		free(s);
		s = between(text, "// buffer B", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, BULK_WAIT " 1;"), keep ? 1 : 0);
		free(s);
		ck_assert_uint_eq(count(text, BULK_WAIT), keep ? 3 : 2);
		ptxas_check(text, t.name, 90);
		free(text);
	}
}
END_TEST

/* Other threads overwrite A after a barrier: the reuse point before that barrier gets the wait,
 * the writes after it none */
START_TEST(test_store_reuse_point)
{
	struct tk t;
	char *text, *s;

	tk_begin(&t, "store_reuse", 90, 1);
	t.all_write = 1;
	tk_write(&t, t.sa, REG_A);
	tk_store(&t, t.sa, REG_A, 0, 1);
	ptx_comment(t.k, "A free again");
	ptx_async_reuse(t.a, REG_A);
	ptx_bar_sync(t.k, 2, 128);
	tk_write(&t, t.sa, REG_A);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	s = between(text, "// A free again", "bar.sync 2, 128");
	ck_assert_uint_eq(count(s, BULK_WAIT), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* The tensor-map store helper: tracked like the plain one */
START_TEST(test_tensor_store)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		const char *tmap, *c[2];
		char *text, *s;

		tk_begin(&t, "tensor_store", arch, 1);
		ptx_param_tensormap(t.k, "tmap");
		tmap = ptx_reg(t.k, PTX_U64, "tmapp");
		c[0] = ptx_reg(t.k, PTX_S32, "c0");
		c[1] = ptx_reg(t.k, PTX_S32, "c1");
		ptx_param_addr(t.k, tmap, "tmap");
		ptx_mov_imm(t.k, PTX_S32, c[0], 0);
		ptx_mov_imm(t.k, PTX_S32, c[1], 0);
		tk_write(&t, t.sa, REG_A);
		ptx_fence_proxy_async(t.k);
		ptx_bar_sync(t.k, 1, 128);
		ptx_guard(t.k, t.t0, 0);
		ptx_async_bulk_tensor_store(t.a, 2, tmap, c, t.sa, REG_A);
		ptx_comment(t.k, "overwrite A");
		tk_write(&t, t.sa, REG_A);
		text = tk_end(&t);
		ck_assert_ptr_nonnull(strstr(text, "@%thread0 cp.async.bulk.tensor.2d.global.shared::cta.tile."
						   "bulk_group [%tmapp, {%c0, %c1}], [%sa];"));
		s = between(text, "// overwrite A", "st.shared.v4.b32");
		ck_assert_uint_eq(count(s, BULK_COMMIT), 1);
		ck_assert_uint_eq(count(s, BULK_WAIT), 1);
		free(s);
		ptxas_check(text, t.name, arch);
		free(text);
	}
}
END_TEST

/* wgmma and bulk stores in one kernel are tracked apart */
START_TEST(test_mixed_kinds)
{
	struct tk t;
	char *text;

	tk_begin(&t, "mixed", 90, 1);
	tk_mma(&t, 1);
	tk_write(&t, t.sa, REG_A);          /* no wgmma register: no wait */
	tk_store(&t, t.sa, REG_A, 0, 1);
	tk_use(&t, 1);                      /* wgmma wait only */
	tk_write(&t, t.sa, REG_A);          /* bulk wait only */
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, MMA_WAIT), 1);
	ck_assert_uint_eq(count(text, BULK_WAIT), 1);
	in_order(text, MMA_WAIT, BULK_WAIT);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* The shape of a warp-specialised kernel: a producer warp copies rows into a stage with
 * cp.async.bulk and leaves with exit; compute warps wait on the mbarrier, reduce, stage their
 * result in OUT and store it with the helper. The previous row's store must have read OUT before
 * any compute thread writes it again: one wait at the reuse point in the loop, one before ret,
 * none on the producer's path. */
START_TEST(test_ws_shaped_kernel)
{
	enum { STAGE = 2, OUT = 3 };
	struct tk t;
	struct ptx_loop lp;
	const char *bar, *warp, *prod, *el, *par, *bytes, *x, *o, *compute;
	char *text, *s;

	tk_begin(&t, "ws_shape", 90, 1);
	t.all_write = 1;
	bar = ptx_reg(t.k, PTX_U32, "bar");
	warp = ptx_reg(t.k, PTX_U32, "warp");
	prod = ptx_reg(t.k, PTX_PRED, "producer");
	el = ptx_reg(t.k, PTX_PRED, "elected");
	par = ptx_reg(t.k, PTX_U32, "parity");
	bytes = ptx_reg(t.k, PTX_U32, "nbytes");
	x = ptx_reg(t.k, PTX_F32, "x");
	o = ptx_reg(t.k, PTX_U32, "o");
	compute = ptx_label_new(t.k, "compute");
	ptx_smem_addr(t.k, bar, "smem", 8192);
	ptx_mov_imm(t.k, PTX_U32, bytes, 1536);
	ptx_mov_imm(t.k, PTX_U32, par, 0);
	ptx_ins(t.k, "shr.u32 %s, %s, 5", warp, t.tid);
	ptx_ins(t.k, "setp.eq.u32 %s, %s, 3", prod, warp);
	ptx_guard(t.k, t.t0, 0);
	ptx_mbarrier_init(t.k, bar, 0, 1);
	ptx_fence_mbarrier_init(t.k);
	ptx_bar_sync(t.k, 0, 0);
	ptx_guard(t.k, prod, 1);
	ptx_bra(t.k, compute);
	ptx_comment(t.k, "producer");
	ptx_loop_begin(t.k, &lp, "prows");
	ptx_elect_sync(t.k, el, NULL);
	ptx_guard(t.k, el, 0);
	ptx_mbarrier_arrive_expect_tx(t.k, bar, 0, 1536);
	ptx_async_region_begin(t.a, STAGE);
	ptx_guard(t.k, el, 0);
	ptx_cp_async_bulk_g2s(t.k, t.sa, t.out, bytes, bar);
	ptx_async_region_end(t.a);
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
	ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
	ptx_loop_end(t.k, &lp, t.more, 0);
	ptx_ins(t.k, "exit");
	ptx_label(t.k, compute);
	ptx_loop_begin(t.k, &lp, "crows");
	ptx_mbarrier_wait_parity(t.k, bar, 0, par);
	ptx_ld_shared(t.k, PTX_F32, x, t.sa, 0);
	ptx_add_f32(t.k, t.sum, t.sum, x);
	ptx_comment(t.k, "OUT free again");
	ptx_async_reuse(t.a, OUT);
	ptx_bar_sync(t.k, 1, 96);
	ptx_ins(t.k, "mad.lo.u32 %s, %s, 16, %s", o, t.tid, t.sb);
	ptx_async_region_begin(t.a, OUT);
	ptx_st_shared_v4(t.k, o, 0, t.v);
	ptx_async_region_end(t.a);
	ptx_fence_proxy_async(t.k);
	ptx_bar_sync(t.k, 1, 96);
	ptx_guard(t.k, t.t0, 0);
	ptx_async_bulk_store(t.a, t.out, t.sb, bytes, OUT);
	ptx_bulk_commit_group(t.k);
	ptx_ins(t.k, "xor.b32 %s, %s, 1", par, par);
	ptx_ins(t.k, "add.u32 %s, %s, 1", t.i, t.i);
	ptx_ins(t.k, "setp.lt.u32 %s, %s, 4", t.more, t.i);
	ptx_loop_end(t.k, &lp, t.more, 0);
	text = tk_end(&t);
	ck_assert_uint_eq(count(text, BULK_WAIT), 2);
	s = between(text, "// producer", "\texit;");
	ck_assert_uint_eq(count(s, BULK_WAIT), 0);
	free(s);
	s = between(text, "// OUT free again", "bar.sync 1, 96;");
	ck_assert_uint_eq(count(s, BULK_WAIT " 0;"), 1);
	free(s);
	s = between(text, "$Lcrows_end", "\tret;");
	ck_assert_uint_eq(count(s, BULK_WAIT " 0;"), 1);
	free(s);
	ptxas_check(text, t.name, 90);
	free(text);
}
END_TEST

/* ---------------------------------------------------------------- contract */

/* A kernel without async ops comes out exactly as written, tracker or not */
START_TEST(test_no_async_ops_unchanged)
{
	char *text[2];

	for (int attach = 0; attach < 2; attach++) {
		struct tk t;
		struct ptx_loop lp;

		tk_begin(&t, "plain", 90, attach);
		ptx_loop_begin(t.k, &lp, "rows");
		tk_write(&t, t.sa, attach ? REG_A : -2);
		ptx_ins(t.k, "add.u32 %s, %s, 1; setp.lt.u32 %s, %s, 4", t.i, t.i, t.more, t.i);
		ptx_loop_end(t.k, &lp, t.more, 0);
		tk_use(&t, 1);
		text[attach] = tk_end(&t);
		if (attach)
			ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK] + t.st.waits[PTX_ASYNC_WGMMA], 0);
	}
	ck_assert_str_eq(text[0], text[1]);
	free(text[0]);
	free(text[1]);
}
END_TEST

static void expect_error(struct tk *t, int err, const char *msg)
{
	char *text;

	ck_assert_int_eq(ptx_kernel_end(t->k), err);
	ck_assert_msg(strstr(wsn_last_error(), msg) != NULL, "error \"%s\" does not say \"%s\"", wsn_last_error(),
		      msg);
	ck_assert_int_eq(ptx_module_take(&t->m, &text), err);
	ck_assert_ptr_null(text);
}

START_TEST(test_errors)
{
	struct tk t;

	tk_begin(&t, "nested", 90, 1);
	ptx_async_region_begin(t.a, 1);
	ptx_async_region_begin(t.a, 2);
	expect_error(&t, WSN_EINVAL, "inside an open region");

	tk_begin(&t, "unopened", 90, 1);
	ptx_async_region_end(t.a);
	expect_error(&t, WSN_EINVAL, "without region_begin");

	tk_begin(&t, "unclosed", 90, 1);
	ptx_async_region_begin(t.a, 1);
	expect_error(&t, WSN_EINVAL, "without region_end");

	tk_begin(&t, "range", 90, 1);
	ptx_async_reuse(t.a, PTX_ASYNC_REGIONS);
	expect_error(&t, WSN_EINVAL, "region 32");

	tk_begin(&t, "twice", 90, 1);
	ck_assert_ptr_null(ptx_async_attach(t.k, NULL));
	expect_error(&t, WSN_EBUSY, "end pass already");

	tk_begin(&t, "nd", 90, 1);
	ptx_async_wgmma(t.a, "m64n8k16.f32.bf16.bf16", t.d[0], 0, t.adesc, t.bdesc, t.scale);
	expect_error(&t, WSN_EINVAL, "0 accumulator");

	tk_begin(&t, "policy", 90, 1);
	ptx_async_policy(t.a, PTX_ASYNC_KINDS, PTX_ASYNC_FLUSH);
	expect_error(&t, WSN_EINVAL, "bad policy");

	tk_begin(&t, "nolabel", 90, 1);
	tk_mma(&t, 1);
	ptx_bra(t.k, "$Lnowhere");
	expect_error(&t, WSN_EINVAL, "$Lnowhere");

	tk_begin(&t, "nolist", 90, 1);
	ptx_ins(t.k, "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 %s, %s, %s, %s, 1, 1, 0, 0", t.d[0][0],
		t.adesc, t.bdesc, t.scale);
	expect_error(&t, WSN_EINVAL, "accumulator");
}
END_TEST

Suite *suite_async(void)
{
	Suite *s = suite_create("async");
	TCase *tc = tcase_create("wgmma");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_mma_use_mma_use);
	tcase_add_test(tc, test_mma_mma_use_use);
	tcase_add_test(tc, test_mma_bias_relu);
	tcase_add_test(tc, test_mma_accumulate_chain);
	tcase_add_test(tc, test_mma_policies);
	tcase_add_test(tc, test_mma_exit_and_explicit_wait);
	tcase_add_test(tc, test_mma_a_fragments);
	tcase_add_test(tc, test_mma_loop_accumulate);
	tcase_add_test(tc, test_mma_loop_carried);
	tcase_add_test(tc, test_mma_statements_on_one_line);
	suite_add_tcase(s, tc);
	tc = tcase_create("bulk");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_store_then_overwrite);
	tcase_add_test(tc, test_two_stores_overwrite_first);
	tcase_add_test(tc, test_store_regions);
	tcase_add_test(tc, test_store_unknown_source);
	tcase_add_test(tc, test_store_commit_and_explicit_wait);
	tcase_add_test(tc, test_store_before_exit);
	tcase_add_test(tc, test_store_keep_newer);
	tcase_add_test(tc, test_store_loop);
	tcase_add_test(tc, test_store_loop_double_buffer);
	tcase_add_test(tc, test_store_reuse_point);
	tcase_add_test(tc, test_tensor_store);
	tcase_add_test(tc, test_mixed_kinds);
	tcase_add_test(tc, test_ws_shaped_kernel);
	suite_add_tcase(s, tc);
	tc = tcase_create("contract");
	tcase_add_test(tc, test_no_async_ops_unchanged);
	tcase_add_test(tc, test_errors);
	suite_add_tcase(s, tc);
	return s;
}
