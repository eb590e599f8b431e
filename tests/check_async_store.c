/* SPDX-License-Identifier: MIT */
/* tests/check_async_store.c: the async-group sync pass on bulk and tensor stores. */
#define _GNU_SOURCE
#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "async_util.h"

#define BULK_COMMIT "cp.async.bulk.commit_group"

/* store from A; overwrite A: 1 wait.read, before the overwrite */
START_TEST(test_store_then_overwrite)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		char *text;

		async_tk_begin(&t, "store_overwrite", arch, 1);
		async_tk_write(&t, t.sa, REG_A);
		async_tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "overwrite A");
		async_tk_write(&t, t.sa, REG_A);
		text = async_tk_end_expect(&t, BULK_WAIT, 1);
		ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 1);
		ck_assert_uint_eq(t.st.commits[PTX_ASYNC_BULK], 0);
		ck_assert_uint_eq(t.st.async_ops[PTX_ASYNC_BULK], 1);
		async_expect_between(text, "// overwrite A", "st.shared.v4.b32", BULK_WAIT " 0;", 1);
		async_tk_accept(&t, text, arch);
	}
}
END_TEST

/* store from A; store from B; overwrite A: flush: 1 wait. Keep-newer: the overwrite waits for A
 * only (wait.read 1); B at exit (wait.read 0) */
START_TEST(test_two_stores_overwrite_first)
{
	for (int keep = 0; keep < 2; keep++) {
		struct tk t;
		char *text;

		async_tk_begin(&t, keep ? "store_keep_newer" : "two_stores", 90, 1);
		if (keep)
			ptx_async_policy(t.a, PTX_ASYNC_BULK, PTX_ASYNC_KEEP_NEWER);
		async_tk_write(&t, t.sa, REG_A);
		async_tk_write(&t, t.sb, REG_B);
		async_tk_store(&t, t.sa, REG_A, 0, 1);
		async_tk_store(&t, t.sb, REG_B, 2048, 1);
		ptx_comment(t.k, "overwrite A");
		async_tk_write(&t, t.sa, REG_A);
		text = async_tk_end_expect(&t, BULK_WAIT, keep ? 2 : 1);
		if (keep) {
			async_expect_between(text, "// overwrite A", "st.shared.v4.b32", BULK_WAIT " 1;", 1);
			async_expect_between(text, "// overwrite A", "\tret;", BULK_WAIT " 0;", 1);
		} else {
			async_expect_between(text, "// overwrite A", "st.shared.v4.b32", BULK_WAIT, 1);
		}
		async_tk_accept(&t, text, 90);
	}
}
END_TEST

/* store from A; write B (another region: no wait); overwrite A: 1 wait, after the write of B.
 * Untagged, the write of B may touch A: the wait moves up to it. */
START_TEST(test_store_regions)
{
	for (int tagged = 0; tagged < 2; tagged++) {
		struct tk t;

		async_tk_begin(&t, tagged ? "store_regions" : "store_untagged", 90, 1);
		async_tk_write(&t, t.sa, REG_A);
		async_tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "write B");
		async_tk_write(&t, t.sb, tagged ? REG_B : -2);
		ptx_comment(t.k, "overwrite A");
		async_tk_write(&t, t.sa, REG_A);
		async_tk_end_one_wait(&t, 90, BULK_WAIT, tagged ? "// overwrite A" : "// write B", "st.shared.v4.b32");
	}
}
END_TEST

/* A store emitted without the helper reads an unknown buffer: any shared-memory write waits */
START_TEST(test_store_unknown_source)
{
	struct tk t;
	const char *g, *bytes;

	async_tk_begin(&t, "store_unknown", 90, 1);
	bytes = ptx_reg(t.k, PTX_U32, "bytes");
	g = ptx_reg(t.k, PTX_U64, "g");
	ptx_mov_imm(t.k, PTX_U32, bytes, 1024);
	ptx_ins(t.k, "add.u64 %s, %s, 64", g, t.out);
	async_tk_write(&t, t.sa, REG_A);
	ptx_fence_proxy_async(t.k);
	ptx_guard(t.k, t.t0, 0);
	ptx_cp_async_bulk_s2g(t.k, g, t.sa, bytes);
	ptx_bulk_commit_group(t.k);
	ptx_comment(t.k, "write B");
	async_tk_write(&t, t.sb, REG_B);
	async_tk_end_one_wait(&t, 90, BULK_WAIT, "// write B", "st.shared.v4.b32");
}
END_TEST

/* An uncommitted store is committed by the pass before its wait; a kernel's own wait counts. */
START_TEST(test_store_commit_and_explicit_wait)
{
	struct tk t;
	char *text, *s;

	async_tk_begin(&t, "store_autocommit", 90, 1);
	async_tk_write(&t, t.sa, REG_A);
	async_tk_store(&t, t.sa, REG_A, 0, 0);
	ptx_comment(t.k, "overwrite A");
	async_tk_write(&t, t.sa, REG_A);
	text = async_tk_end(&t);
	ck_assert_uint_eq(t.st.commits[PTX_ASYNC_BULK], 1);
	s = async_between(text, "// overwrite A", "st.shared.v4.b32");
	ck_assert_uint_eq(async_count(s, BULK_COMMIT), 1);
	ck_assert_uint_eq(async_count(s, BULK_WAIT), 1);
	async_in_order(s, BULK_COMMIT, BULK_WAIT);
	free(s);
	async_tk_accept(&t, text, 90);

	async_tk_begin(&t, "store_explicit_wait", 90, 1);
	async_tk_write(&t, t.sa, REG_A);
	async_tk_store(&t, t.sa, REG_A, 0, 1);
	ptx_bulk_wait_group_read(t.k, 0);
	async_tk_write(&t, t.sa, REG_A);
	text = async_tk_end_expect(&t, BULK_WAIT, 1);
	ck_assert_uint_eq(t.st.waits[PTX_ASYNC_BULK], 0);
	free(text);
}
END_TEST

/* A store still reading shared memory when the kernel ends: a wait before ret */
START_TEST(test_store_before_exit)
{
	struct tk t;

	async_tk_begin(&t, "store_exit", 90, 1);
	async_tk_write(&t, t.sa, REG_A);
	async_tk_store(&t, t.sa, REG_A, 0, 1);
	async_tk_end_one_wait(&t, 90, BULK_WAIT, "cp.async.bulk.global.shared::cta.bulk_group", "\tret;");
}
END_TEST

/* for i < 4: write A; store A: the wait belongs inside the body, before the write (the previous
 * iteration's store reads A), plus one before exit for the last store */
START_TEST(test_store_loop)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		struct ptx_loop lp;
		char *text;

		async_tk_begin(&t, "store_loop", arch, 1);
		ptx_loop_begin(t.k, &lp, "rows");
		async_tk_write(&t, t.sa, REG_A);
		async_tk_store(&t, t.sa, REG_A, 0, 1);
		async_tk_loop_end(&t, &lp);
		text = async_tk_end_expect(&t, BULK_WAIT, 2);
		async_expect_between(text, "$Lrows_", "st.shared.v4.b32", BULK_WAIT, 1);
		async_expect_between(text, "st.shared.v4.b32", "bra $Lrows_", BULK_WAIT, 0);
		async_expect_between(text, "$Lrows_end", "\tret;", BULK_WAIT, 1);
		async_tk_accept(&t, text, arch);
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
		char *text;

		async_tk_begin(&t, keep ? "store_double_keep" : "store_double_flush", 90, 1);
		if (keep)
			ptx_async_policy(t.a, PTX_ASYNC_BULK, PTX_ASYNC_KEEP_NEWER);
		ptx_loop_begin(t.k, &lp, "rows");
		ptx_comment(t.k, "buffer A");
		async_tk_write(&t, t.sa, REG_A);
		async_tk_store(&t, t.sa, REG_A, 0, 1);
		ptx_comment(t.k, "buffer B");
		async_tk_write(&t, t.sb, REG_B);
		async_tk_store(&t, t.sb, REG_B, 2048, 1);
		async_tk_loop_end(&t, &lp);
		text = async_tk_end_expect(&t, BULK_WAIT, keep ? 3 : 2);
		async_expect_between(text, "// buffer A", "st.shared.v4.b32", keep ? BULK_WAIT " 1;" : BULK_WAIT " 0;", 1);
		async_expect_between(text, "// buffer B", "st.shared.v4.b32", BULK_WAIT " 1;", keep ? 1 : 0);
		async_tk_accept(&t, text, 90);
	}
}
END_TEST

/* Other threads overwrite A after a barrier: the reuse point before that barrier gets the wait,
 * the writes after it none */
START_TEST(test_store_reuse_point)
{
	struct tk t;

	async_tk_begin(&t, "store_reuse", 90, 1);
	t.all_write = 1;
	async_tk_write(&t, t.sa, REG_A);
	async_tk_store(&t, t.sa, REG_A, 0, 1);
	ptx_comment(t.k, "A free again");
	ptx_async_reuse(t.a, REG_A);
	ptx_bar_sync(t.k, 2, 128);
	async_tk_write(&t, t.sa, REG_A);
	async_tk_end_one_wait(&t, 90, BULK_WAIT, "// A free again", "bar.sync 2, 128");
}
END_TEST

/* The tensor-map store helper: tracked like the plain one */
START_TEST(test_tensor_store)
{
	for (int arch = 90; arch <= 100; arch += 10) {
		struct tk t;
		const char *tmap, *c[2];
		char *text;

		async_tk_begin(&t, "tensor_store", arch, 1);
		ptx_param_tensormap(t.k, "tmap");
		tmap = ptx_reg(t.k, PTX_U64, "tmapp");
		c[0] = ptx_reg(t.k, PTX_S32, "c0");
		c[1] = ptx_reg(t.k, PTX_S32, "c1");
		ptx_param_addr(t.k, tmap, "tmap");
		ptx_mov_imm(t.k, PTX_S32, c[0], 0);
		ptx_mov_imm(t.k, PTX_S32, c[1], 0);
		async_tk_write(&t, t.sa, REG_A);
		ptx_fence_proxy_async(t.k);
		ptx_bar_sync(t.k, 1, 128);
		ptx_guard(t.k, t.t0, 0);
		ptx_async_bulk_tensor_store(t.a, 2, tmap, c, t.sa, REG_A);
		ptx_comment(t.k, "overwrite A");
		async_tk_write(&t, t.sa, REG_A);
		text = async_tk_end(&t);
		ck_assert_ptr_nonnull(strstr(text, "@%thread0 cp.async.bulk.tensor.2d.global.shared::cta.tile."
						   "bulk_group [%tmapp, {%c0, %c1}], [%sa];"));
		async_expect_between(text, "// overwrite A", "st.shared.v4.b32", BULK_COMMIT, 1);
		async_expect_between(text, "// overwrite A", "st.shared.v4.b32", BULK_WAIT, 1);
		async_tk_accept(&t, text, arch);
	}
}
END_TEST

Suite *suite_async_store(void)
{
	return TU_SUITE("async", { "bulk", 120, NULL, NULL, TU_TESTS({ test_store_then_overwrite, 1 },
				{ test_two_stores_overwrite_first, 1 },
				{ test_store_regions, 1 },
				{ test_store_unknown_source, 1 },
				{ test_store_commit_and_explicit_wait, 1 },
				{ test_store_before_exit, 1 },
				{ test_store_loop, 1 },
				{ test_store_loop_double_buffer, 1 },
				{ test_store_reuse_point, 1 },
				{ test_tensor_store, 1 }) });
}
