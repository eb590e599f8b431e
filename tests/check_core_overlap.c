/* SPDX-License-Identifier: MIT */
/* tests/check_core_overlap.c: the overlap tracker's decisions between queued calls. */
#include "testutil.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/params.h"
#include "overlap.h"
#include "tunecache.h"
#include "io/io_internal.h"
#include "cpu/cpu.h"

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A bf16 backward call of LayerNorm on [rows, 64] tensors at fake addresses (nothing is read). */
static void ov_call(struct wsn__ovl_call *c, uintptr_t x, uintptr_t dy, uintptr_t dx, uintptr_t stats, uintptr_t w,
		    uintptr_t dw, int64_t rows)
{
	struct wsn__plan_params pp;
	struct wsn_args a;

	memset(&pp, 0, sizeof(pp));
	pp.op = WSN_LAYERNORM_BWD;
	pp.opts.has_weight = 1;
	memset(&a, 0, sizeof(a));
	ck_assert_int_eq(wsn_tensor_2d(&a.x, (void *)x, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_2d(&a.dy, (void *)dy, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_2d(&a.dx, (void *)dx, WSN_BF16, WSN_MEM_DEVICE, rows, 64), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.mean, (void *)stats, WSN_F32, WSN_MEM_DEVICE, rows), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.rstd, (void *)(stats + 4 * (uintptr_t)rows), WSN_F32, WSN_MEM_DEVICE, rows), 0);
	ck_assert_int_eq(wsn_tensor_1d(&a.weight, (void *)w, WSN_BF16, WSN_MEM_DEVICE, 64), 0);
	if (dw)
		ck_assert_int_eq(wsn_tensor_1d(&a.dweight, (void *)dw, WSN_BF16, WSN_MEM_DEVICE, 64), 0);
	wsn__ovl_call_of(&pp, &a, c);
}

/* Queue c: returns whether it starts early and the number it waits for. */
static int ov_queue(struct wsn__ovl *o, struct wsn__ovl_call *c, uint64_t *wait)
{
	int early = wsn__ovl_may_start_early(o, c, wait);

	c->seq = ++o->seq; /* as wsn_plan_execute numbers it */
	wsn__ovl_record(o, c, early, *wait);
	return early;
}

/*
 * Calls on buffer sets (x, dy, dx, stats 1 MB apart) with one weight and one dweight:
 * independent calls start early; a call reusing an older call's buffers waits for that call's done
 * word; one touching the call right before it, or that call's dweight, waits at its start; a byte of
 * overlap is enough; other work on the stream, a full record and a call without a finish kernel
 * (no done word to wait for) make the next conflicting call wait.
 */
START_TEST(test_overlap_decisions)
{
	const uintptr_t M = 1u << 20, W = 64 * M, DW = 65 * M;
	struct wsn__ovl o;
	struct wsn__ovl_call c;
	uint64_t wait;
#define SET(k) ((k) + 1) * 4 * M, ((k) + 1) * 4 * M + M, ((k) + 1) * 4 * M + 2 * M, ((k) + 1) * 4 * M + 3 * M

	memset(&o, 0, sizeof(o)); /* as a new stream's (calloc) */
	wsn__ovl_reset(&o, 1);
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 1 && c.seq == 1);
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 2);
	/* set 0 again: its dx is call 1's dx (not the call right before): wait for call 1's word */
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 1);
	ck_assert_msg(o.n == 3 && o.c[0].seq == 1 && o.c[0].main_done, "call 1 stays for its dweight only");
	/* set 1 again: waits for call 2; call 1 is then dropped */
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 2);
	ck_assert(o.n == 3 && o.c[0].seq == 2 && o.c[0].main_done && o.c[2].seq == 4);
	/* reads the dx of the call right before: waits at its start, alone in the record after */
	ov_call(&c, 300 * M, 10 * M, 301 * M, 302 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && wait == 0 && o.n == 1 && o.c[0].seq == 5);
	/* its dx over the last byte of the x of the call right before */
	ov_call(&c, SET(3), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0 && o.n == 2);
	ov_call(&c, 310 * M, 311 * M, 16 * M + 128 * 64 * 2 - 1, 312 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait));
	/* one byte short of it: independent */
	ov_call(&c, SET(6), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait));
	ov_call(&c, 330 * M, 331 * M, 28 * M - 128 * 64 * 2, 320 * M, W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait) && wait == 0);
	/* reading a dweight a call still running writes (its finish kernel): waits */
	ov_call(&c, 40 * M, 41 * M, 42 * M, 43 * M, DW, 0, 1);
	ck_assert(!ov_queue(&o, &c, &wait));
	/* a call without dweight/dbias has no finish kernel and stores no number: reusing its
	 * buffers two calls later waits at the start */
	wsn__ovl_reset(&o, 1);
	ov_call(&c, SET(0), W, 0, 128);
	ck_assert(ov_queue(&o, &c, &wait) && !c.publishes);
	ov_call(&c, SET(1), W, DW, 128);
	ck_assert(ov_queue(&o, &c, &wait));
	ov_call(&c, SET(0), W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.n == 1);
	/* other work queued: unknown, the next call waits */
	wsn__ovl_reset(&o, 0);
	ov_call(&c, SET(2), W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.known && o.n == 1);
	/* the record holds WSN__OVL_DEPTH calls at most */
	for (int k = 1; k < WSN__OVL_DEPTH; k++) {
		ov_call(&c, 100 * M + SET(k), W, DW, 128);
		ck_assert(ov_queue(&o, &c, &wait));
	}
	ck_assert_int_eq(o.n, WSN__OVL_DEPTH);
	ov_call(&c, 200 * M, 201 * M, 202 * M, 203 * M, W, DW, 128);
	ck_assert(!ov_queue(&o, &c, &wait) && o.n == 1);
#undef SET
}
END_TEST

Suite *suite_core_overlap(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_overlap_decisions, 1 }) });
}
