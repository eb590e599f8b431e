/* SPDX-License-Identifier: MIT */
/* tests/async_util.h: what the check_async_*.c tests share: a small kernel builder and ptxas. */
#ifndef WSN_TESTS_ASYNC_UTIL_H
#define WSN_TESTS_ASYNC_UTIL_H

#include "testutil.h"

#include "ptx/async.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MMA_WAIT "wgmma.wait_group.sync.aligned"

#define BULK_WAIT "cp.async.bulk.wait_group.read"

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

/* ptxas accepts the module for sm_<arch>a without warnings and without injecting a wgmma fence
 * (warpgroup.arrive) or wait (warpgroup.wait) of its own: the pass put every one that is needed. */
void async_ptxas_check(const char *text, const char *entry, int arch);

size_t async_count(const char *text, const char *what);

void async_tk_desc(struct tk *t, const char *desc, const char *saddr);

void async_tk_begin(struct tk *t, const char *name, int arch, int attach);

/* D_set = A * B (+ D_set when scale is true) */
void async_tk_mma(struct tk *t, int set);

/* sum += every element of D_set */
void async_tk_use(struct tk *t, int set);

/* Write 16 bytes a thread of buffer sbuf (in region, or untagged when region < -1): from thread 0,
 * which issues the stores, or from every thread when t->all_write. */
void async_tk_write(struct tk *t, const char *sbuf, int region);

/* Thread 0 stores 2048 bytes of sbuf (region) to out + off, after the writes are fenced and met. */
void async_tk_store(struct tk *t, const char *sbuf, int region, long long off, int commit);

/* Store the sum, return, end the kernel: the module text (caller frees). */
char *async_tk_end(struct tk *t);

/* async_tk_end, then ck_assert that the text holds want of what. */
char *async_tk_end_expect(struct tk *t, const char *what, size_t want);

/* End t's kernel: its text holds one wait (what) in all, between a and the next b after it, and
 * ptxas for sm_<arch>a accepts it. */
void async_tk_end_one_wait(struct tk *t, int arch, const char *wait, const char *a, const char *b);

/* Close a loop opened with ptx_loop_begin: i += 1, back to the top while i < 4. */
void async_tk_loop_end(struct tk *t, struct ptx_loop *lp);

/* async_ptxas_check of t's module text for sm_<arch>a, then free the text. */
void async_tk_accept(struct tk *t, char *text, int arch);

/* The first a in text comes before the first b. */
void async_in_order(const char *text, const char *a, const char *b);

/* The text between the first occurrence of a and the next occurrence of b after it (malloc'd). */
char *async_between(const char *text, const char *a, const char *b);
/* ck_assert that the text between a and b (as async_between) holds what want times. */
void async_expect_between(const char *text, const char *a, const char *b, const char *what, size_t want);

#endif /* WSN_TESTS_ASYNC_UTIL_H */
