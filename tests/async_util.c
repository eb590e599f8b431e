/* SPDX-License-Identifier: MIT */
/* tests/async_util.c: what the check_async_*.c tests share: a small kernel builder and ptxas. */
#define _GNU_SOURCE
#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_util.h"

void async_ptxas_check(const char *text, const char *entry, int arch)
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

size_t async_count(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *p = text; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

void async_tk_desc(struct tk *t, const char *desc, const char *saddr)
{
	const char *w = ptx_tmp(t->k, PTX_U64);

	/* start address >> 4 in bits 0..13, leading byte offset 128 >> 4 at 16, stride 256 >> 4 at 32 */
	ptx_ins(t->k, "cvt.u64.u32 %s, %s", w, saddr);
	ptx_ins(t->k, "shr.u64 %s, %s, 4", w, w);
	ptx_ins(t->k, "and.b64 %s, %s, 0x3FFF", w, w);
	ptx_ins(t->k, "or.b64 %s, %s, 0x0000001000080000", desc, w);
}

void async_tk_begin(struct tk *t, const char *name, int arch, int attach)
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
	async_tk_desc(t, t->adesc, t->sa);
	async_tk_desc(t, t->bdesc, t->sb);
	ptx_mov_f32(t->k, t->sum, 0.0f);
	for (int s = 0; s < 3; s++)
		for (int j = 0; j < 4; j++)
			ptx_mov_f32(t->k, t->d[s][j], 0.0f);
	for (int j = 0; j < 4; j++)
		ptx_mov(t->k, PTX_B32, t->v[j], t->tid);
	ptx_mov_imm(t->k, PTX_U32, t->i, 0);
}

void async_tk_mma(struct tk *t, int set)
{
	ptx_async_wgmma(t->a, "m64n8k16.f32.bf16.bf16", t->d[set - 1], 4, t->adesc, t->bdesc, t->scale);
}

void async_tk_use(struct tk *t, int set)
{
	for (int j = 0; j < 4; j++)
		ptx_add_f32(t->k, t->sum, t->sum, t->d[set - 1][j]);
}

void async_tk_write(struct tk *t, const char *sbuf, int region)
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

void async_tk_store(struct tk *t, const char *sbuf, int region, long long off, int commit)
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

char *async_tk_end(struct tk *t)
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

char *async_tk_end_expect(struct tk *t, const char *what, size_t want)
{
	char *text = async_tk_end(t);
	size_t got = async_count(text, what);

	ck_assert_msg(got == want, "%zu of \"%s\" in %s, want %zu in\n%s", got, what, t->name, want, text);
	return text;
}

void async_tk_end_one_wait(struct tk *t, int arch, const char *wait, const char *a, const char *b)
{
	char *text = async_tk_end_expect(t, wait, 1);

	async_expect_between(text, a, b, wait, 1);
	async_tk_accept(t, text, arch);
}

void async_tk_loop_end(struct tk *t, struct ptx_loop *lp)
{
	ptx_ins(t->k, "add.u32 %s, %s, 1", t->i, t->i);
	ptx_ins(t->k, "setp.lt.u32 %s, %s, 4", t->more, t->i);
	ptx_loop_end(t->k, lp, t->more, 0);
}

void async_tk_accept(struct tk *t, char *text, int arch)
{
	async_ptxas_check(text, t->name, arch);
	free(text);
}

void async_in_order(const char *text, const char *a, const char *b)
{
	const char *p = strstr(text, a), *q = strstr(text, b);

	ck_assert_msg(p && q && p < q, "expected \"%s\" before \"%s\" in\n%s", a, b, text);
}

char *async_between(const char *text, const char *a, const char *b)
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

void async_expect_between(const char *text, const char *a, const char *b, const char *what, size_t want)
{
	char *s = async_between(text, a, b);
	size_t got = async_count(s, what);

	ck_assert_msg(got == want, "%zu of \"%s\" between \"%s\" and \"%s\", want %zu in\n%s", got, what, a, b, want,
		      text);
	free(s);
}
