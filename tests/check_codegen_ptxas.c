/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_ptxas.c: every generated kernel through ptxas, per dtype, and the wide-row loop. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"
#include "ptx/emitter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

struct gen_set {
	struct ptx_buf module;   /* all kernels of one dtype and arch in one module */
	struct wsn__kernel_plan plans[WSN_ARRAY_SIZE(all_ops) * WSN_ARRAY_SIZE(hidden_sizes)];
	int nplans;
};

/* Append a generated module to a combined one (one header, one extern shared declaration). */
static void append_module(struct ptx_buf *dst, const char *src)
{
	const char *body = src;

	if (dst->len) {
		/* skip .version/.target/.address_size and the extern declaration */
		for (int i = 0; i < 3; i++)
			body = strchr(body, '\n') + 1;
		const char *ext = strstr(body, ".extern .shared");
		if (ext) {
			ptx_buf_printf(dst, "%.*s", (int)(ext - body), body);
			body = strchr(ext, '\n') + 1;
		}
	}
	ptx_buf_printf(dst, "%s", body);
}

static void generate_set(struct gen_set *s, enum wsn_dtype dt, int arch)
{
	struct wsn__gpu_props g;

	memset(s, 0, sizeof(*s));
	if (arch == 100)
		wsn__gpu_props_b200(&g);
	else
		wsn__gpu_props_h100(&g);
	for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
		for (size_t i = 0; i < WSN_ARRAY_SIZE(hidden_sizes); i++) {
			struct wsn__plan_params p;
			struct wsn__kernel_plan *kp = &s->plans[s->nplans++];
			char *text;

			codegen_params_init(&p, all_ops[o], dt, hidden_sizes[i]);
			ck_assert_msg(wsn__plan_kernel(&g, &p, kp) == 0, "%s", wsn_last_error());
			ck_assert_msg(wsn__generate_ptx(kp, &text) == 0, "%s", wsn_last_error());
			ck_assert_ptr_nonnull(strstr(text, kp->entry));
			append_module(&s->module, text);
			free(text);
		}
	ck_assert(!s->module.oom);
}

static void check_set(struct gen_set *s, const char *log, int arch)
{
	for (int i = 0; i < s->nplans; i++) {
		const struct wsn__kernel_plan *kp = &s->plans[i];
		struct tu_fn_info fi = tu_ptxas_info(log, kp->entry);
		/* ptxas's cap: 16384 registers per sub-partition, warps spread over 4 of them */
		unsigned warps = kp->ctas_per_sm * ((kp->block_threads + 31) / 32);
		unsigned cap = 16384 / (32 * ((warps + 3) / 4)) / 8 * 8;
		int strict = kp->dtype == WSN_BF16 && kp->hidden <= 16384;

		if (cap > 255)
			cap = 255;
		ck_assert_msg(fi.found, "ptxas -v said nothing about %s", kp->entry);
		printf("ptxas sm_%da %-34s bdimx %4u bdimy %2u nvec %2u est %3u regs %3d (cap %3u) spill %d/%d\n",
		       arch, kp->entry, kp->bdimx, kp->bdimy, kp->nvec, kp->est_regs, fi.regs, cap, fi.spill_st,
		       fi.spill_ld);
		/* the planned occupancy holds */
		ck_assert_msg((unsigned)fi.regs <= cap, "%s: %d registers > %u", kp->entry, fi.regs, cap);
		if (strict)
			ck_assert_msg(fi.spill_st == 0 && fi.spill_ld == 0, "%s sm_%da spills %d/%d bytes", kp->entry,
				      arch, fi.spill_st, fi.spill_ld);
		/* The estimate sets the occupancy (ctas_per_sm) and so the cap ptxas is held to
		 * (.maxntid x .minnctapersm); ptxas fills registers up to the cap, so "used" is not
		 * "needed": the estimate was good enough when the kernel fits the cap without spills. */
		ck_assert_msg(kp->est_regs <= cap + 8, "%s: estimate %u above its own cap %u", kp->entry, kp->est_regs,
			      cap);
		if (kp->finish_entry[0]) {
			fi = tu_ptxas_info(log, kp->finish_entry);
			ck_assert_msg(fi.found && fi.spill_st == 0 && fi.spill_ld == 0, "%s", kp->finish_entry);
		}
	}
}

/* Generate every op x hidden for one dtype, for sm_90a and sm_100a, and compile both at once. */
static void ptxas_dtype(enum wsn_dtype dt)
{
	const char *ptxas = tu_ptxas("the generated kernels");
	static struct gen_set sets[2];
	int archs[2] = { 90, 100 };
	struct tu_ptxas_job jobs[2];
	char *dir = NULL, path[2][512];

	for (int a = 0; a < 2; a++)
		generate_set(&sets[a], dt, archs[a]);
	if (!ptxas) {
		for (int a = 0; a < 2; a++)
			ptx_buf_free(&sets[a].module);
		return;
	}
	dir = tu_tmpdir();
	for (int a = 0; a < 2; a++) {
		snprintf(path[a], sizeof(path[a]), "%s/%s_sm%d.ptx", dir, wsn_dtype_name(dt), archs[a]);
		tu_write_file(path[a], sets[a].module.s, sets[a].module.len);
		tu_ptxas_start(&jobs[a], ptxas, path[a], archs[a]);
	}
	for (int a = 0; a < 2; a++) {
		char *log;
		int st = tu_ptxas_wait(&jobs[a], &log);
		ck_assert_msg(st == 0, "ptxas sm_%da failed on %s:\n%.4000s", archs[a], path[a], log);
		check_set(&sets[a], log, archs[a]);
		free(log);
		ptx_buf_free(&sets[a].module);
	}
	tu_rmtree(dir);
	free(dir);
}

START_TEST(test_kernels_ptxas_bf16)
{
	ptxas_dtype(WSN_BF16);
}
END_TEST

START_TEST(test_kernels_ptxas_f16)
{
	ptxas_dtype(WSN_F16);
}
END_TEST

START_TEST(test_kernels_ptxas_f32)
{
	ptxas_dtype(WSN_F32);
}
END_TEST

/*
 * Rows too wide for the registers are re-read from global memory, pass after pass. Each pass over the
 * slices every thread holds whole must be a loop of a few slices a round: unrolled, ptxas issued all
 * of a pass's loads before the first use and spilled 0.5-7 KB a thread; and as every pass reads the
 * row from memory again, LayerNorm's forward takes its mean and M2 in one. Every op and dtype, at the
 * first widths whose rows go to global memory and at one with a partial last vector: the loop is
 * there, the kernel is the one planned, and ptxas (when present) finds no spill on sm_90a or sm_100a.
 */
START_TEST(test_wide_rows_loop)
{
	static const int64_t wide[][2] = { { 65536, 131072 }, { 131073, 262144 } }; /* [dtype is 16-bit][i] */
	const char *ptxas = tu_ptxas("the wide-row kernels");
	struct ptx_buf mod[2] = { 0 };
	char entries[WSN_ARRAY_SIZE(all_ops) * WSN_ARRAY_SIZE(all_dtypes) * 3][sizeof(((struct wsn__kernel_plan *)0)->entry)];
	int n = 0, archs[2] = { 90, 100 };

	for (int a = 0; a < 2; a++) {
		struct wsn__gpu_props g;

		if (archs[a] == 100)
			wsn__gpu_props_b200(&g);
		else
			wsn__gpu_props_h100(&g);
		for (size_t o = 0; o < WSN_ARRAY_SIZE(all_ops); o++)
			for (size_t d = 0; d < WSN_ARRAY_SIZE(all_dtypes); d++)
				for (int i = 0; i < 3; i++) {
					int int16 = all_dtypes[d] != WSN_F32;
					int64_t h = i < 2 ? wide[i][int16] : int16 ? 131080 + 3 : 65537;
					struct wsn__plan_params p;
					struct wsn__kernel_plan kp;
					const char *at;
					char *text;
					int rounds = 0;

					codegen_params_init(&p, all_ops[o], all_dtypes[d], h);
					ck_assert_msg(wsn__plan_kernel(&g, &p, &kp) == 0, "%s", wsn_last_error());
					ck_assert_msg(kp.row_store == WSN_STORE_GLOBAL, "%s: rows not in global memory", kp.entry);
					ck_assert_msg(wsn__generate_ptx(&kp, &text) == 0, "%s", wsn_last_error());
					for (at = text; (at = strstr(at, ".pragma \"nounroll\"")); at++)
						rounds++;
					/* two passes on both the vector and the element path: forward, the
					 * statistics (LayerNorm's mean and M2 in one pass) and the output;
					 * backward, the sums and dx */
					ck_assert_msg(rounds == 4, "%s: %d round loops", kp.entry, rounds);
					append_module(&mod[a], text);
					if (!a)
						snprintf(entries[n++], sizeof(entries[0]), "%s", kp.entry);
					free(text);
				}
		ck_assert(!mod[a].oom);
	}
	if (ptxas) {
		char *dir = tu_tmpdir(), path[2][512];
		struct tu_ptxas_job jobs[2];

		for (int a = 0; a < 2; a++) {
			snprintf(path[a], sizeof(path[a]), "%s/wide_sm%d.ptx", dir, archs[a]);
			tu_write_file(path[a], mod[a].s, mod[a].len);
			tu_ptxas_start(&jobs[a], ptxas, path[a], archs[a]);
		}
		for (int a = 0; a < 2; a++) {
			char *log;
			int st = tu_ptxas_wait(&jobs[a], &log);

			ck_assert_msg(st == 0, "ptxas sm_%da failed on %s:\n%.4000s", archs[a], path[a], log);
			for (int e = 0; e < n; e++) {
				struct tu_fn_info fi = tu_ptxas_info(log, entries[e]);

				printf("ptxas sm_%da %-40s regs %3d spill %d/%d\n", archs[a], entries[e], fi.regs,
				       fi.spill_st, fi.spill_ld);
				ck_assert_msg(fi.found && fi.spill_st == 0 && fi.spill_ld == 0, "%s sm_%da spills %d/%d bytes",
					      entries[e], archs[a], fi.spill_st, fi.spill_ld);
			}
			free(log);
		}
		tu_rmtree(dir);
		free(dir);
	}
	for (int a = 0; a < 2; a++)
		ptx_buf_free(&mod[a]);
}
END_TEST

Suite *suite_codegen_ptxas(void)
{
	return TU_SUITE("codegen", { "ptxas", 600, NULL, NULL, TU_TESTS({ test_kernels_ptxas_bf16, 1 }, { test_kernels_ptxas_f16, 1 },
				{ test_kernels_ptxas_f32, 1 }, { test_wide_rows_loop, 1 }) });
}
