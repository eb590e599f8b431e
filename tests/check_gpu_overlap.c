/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_overlap.c: overlapped calls on a real GPU. */
#include "config.h"
#include <stdio.h>

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

enum { OV_SETS = 3, OV_CALLS = 5 };

/* host and device copies of one bf16 [rows, hidden] matrix or f32 [rows] vector */
struct ov_buf {
	void *h, *d;
	size_t bytes;
};

static void ov_buf_make(struct ov_buf *b, size_t bytes)
{
	b->bytes = bytes;
	b->h = gpu_xcalloc(bytes);
	b->d = gpu_dalloc(bytes);
}

static void ov_buf_random(struct ov_buf *b, enum wsn_dtype dt, const char *tag, float mean, float sd)
{
	size_t n = b->bytes / wsn_dtype_size(dt);
	float *f = gpu_random_f32(n, tag, mean, sd);

	OK(wsn_dtype_convert(b->h, dt, f, WSN_F32, n));
	free(f);
	gpu_upload(b->d, b->h, b->bytes);
}

/*
 * Five backward calls queued on one stream without a sync: three on sets of their own (they may start
 * beside each other), one whose dy is the first call's dx (it starts early and waits for that call's
 * finish word), and one whose dy is the call right before's dx (it waits at its start); dweight and
 * dbias are shared, so the last call's are what is left. Every dx and the last sums are checked
 * against the CPU run in the same order; the stream's record of the calls (which started early, which
 * waited) is checked against what the runtime must have decided; and the same calls with
 * WSNORM_OVERLAP=0 give the same bits. 4096 rows fill the GPU; 128 rows leave room for several grids at once.
 */
START_TEST(test_overlap)
{
	static const int64_t rowss[] = { 4096, 128 };
	static const enum wsn_op bops[] = { WSN_LAYERNORM_BWD, WSN_RMSNORM_BWD };
	/* call k: x set, dy (< OV_SETS: a set's dy, else dx of call dy - OV_SETS), dx buffer */
	static const int cx[OV_CALLS] = { 0, 1, 2, 1, 2 }, cdy[OV_CALLS] = { 0, 1, 2, OV_SETS + 0, OV_SETS + 3 };
	const int64_t rows = rowss[_i / 2], hidden = 2048;
	const enum wsn_op op = bops[_i % 2];
	const enum wsn_dtype dt = WSN_BF16;
	const int ln = op == WSN_LAYERNORM_BWD;
	const size_t es = wsn_dtype_size(dt), mb = (size_t)(rows * hidden) * es, vb = (size_t)hidden * es;
	struct ov_buf x[OV_SETS], dy[OV_SETS], mean[OV_SETS], rstd[OV_SETS], dx[OV_CALLS], w, b, dw, db;
	void *cdx[OV_CALLS], *cdw = gpu_xcalloc(vb), *cdb = gpu_xcalloc(vb), *bits[2][OV_CALLS + 2];
	struct wsn_plan *gp = NULL, *cp = NULL;
	struct wsn_stream *s = NULL;
	double worst = 0;
	int fails = 0;
	char what[128], tag[32];

	for (int k = 0; k < OV_SETS; k++) {
		ov_buf_make(&x[k], mb);
		ov_buf_make(&dy[k], mb);
		ov_buf_make(&mean[k], (size_t)rows * 4);
		ov_buf_make(&rstd[k], (size_t)rows * 4);
		snprintf(tag, sizeof(tag), "ov-x%d", k);
		ov_buf_random(&x[k], dt, tag, 0.5f, 1.0f);
		snprintf(tag, sizeof(tag), "ov-dy%d", k);
		ov_buf_random(&dy[k], dt, tag, 0.0f, 1.0f);
		snprintf(tag, sizeof(tag), "ov-mean%d", k);
		ov_buf_random(&mean[k], WSN_F32, tag, 0.5f, 0.1f);
		snprintf(tag, sizeof(tag), "ov-rstd%d", k);
		ov_buf_random(&rstd[k], WSN_F32, tag, 1.0f, 0.05f);
	}
	for (int c = 0; c < OV_CALLS; c++) {
		ov_buf_make(&dx[c], mb);
		cdx[c] = gpu_xcalloc(mb);
	}
	ov_buf_make(&w, vb);
	ov_buf_make(&b, vb);
	ov_buf_make(&dw, vb);
	ov_buf_make(&db, vb);
	ov_buf_random(&w, dt, "ov-w", 1.0f, 0.25f);
	ov_buf_random(&b, dt, "ov-b", 0.0f, 0.25f);

	/* the CPU, call by call in the same order */
	OK(wsn_plan_create(cpu_dev, op, rows, hidden, dt, NULL, &cp));
	OK(wsn_plan_create(gpu_dev, op, rows, hidden, dt, NULL, &gp));
	for (int c = 0; c < OV_CALLS; c++) {
		struct wsn_args a;
		memset(&a, 0, sizeof(a));
		a.x = gpu_mat(x[cx[c]].h, dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.dy = gpu_mat(cdy[c] < OV_SETS ? dy[cdy[c]].h : cdx[cdy[c] - OV_SETS], dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.weight = gpu_vec(w.h, dt, WSN_MEM_HOST, hidden);
		if (ln)
			a.mean = gpu_stats(mean[cx[c]].h, WSN_MEM_HOST, rows, 0);
		a.rstd = gpu_stats(rstd[cx[c]].h, WSN_MEM_HOST, rows, 0);
		a.dx = gpu_mat(cdx[c], dt, WSN_MEM_HOST, rows, hidden, hidden, 0);
		a.dweight = gpu_vec(cdw, dt, WSN_MEM_HOST, hidden);
		if (ln)
			a.dbias = gpu_vec(cdb, dt, WSN_MEM_HOST, hidden);
		OK(wsn_plan_execute(cp, &a, NULL));
	}

	for (int run = 0; run < 2; run++) {
		setenv("WSNORM_OVERLAP", run ? "0" : "1", 1);
		OK(wsn_stream_create(gpu_dev, &s));
		for (int c = 0; c < OV_CALLS; c++)
			gpu_poison(dx[c].d, mb);
		gpu_poison(dw.d, vb);
		gpu_poison(db.d, vb);
		OK(wsn_stream_sync(gpu_dev, NULL));
		/* the record of the calls that may still run after each call (runtime/overlap.c) */
		static const int early_n[OV_CALLS] = { 1, 2, 3, 4, 1 };
		for (int c = 0; c < OV_CALLS; c++) {
			struct wsn_args a;
			memset(&a, 0, sizeof(a));
			a.x = gpu_mat(x[cx[c]].d, dt, WSN_MEM_DEVICE, rows, hidden, hidden, 0);
			a.dy = gpu_mat(cdy[c] < OV_SETS ? dy[cdy[c]].d : dx[cdy[c] - OV_SETS].d, dt, WSN_MEM_DEVICE, rows, hidden,
				   hidden, 0);
			a.weight = gpu_vec(w.d, dt, WSN_MEM_DEVICE, hidden);
			if (ln)
				a.mean = gpu_stats(mean[cx[c]].d, WSN_MEM_DEVICE, rows, 0);
			a.rstd = gpu_stats(rstd[cx[c]].d, WSN_MEM_DEVICE, rows, 0);
			a.dx = gpu_mat(dx[c].d, dt, WSN_MEM_DEVICE, rows, hidden, hidden, 0);
			a.dweight = gpu_vec(dw.d, dt, WSN_MEM_DEVICE, hidden);
			if (ln)
				a.dbias = gpu_vec(db.d, dt, WSN_MEM_DEVICE, hidden);
			OK(wsn_plan_execute(gp, &a, s));
			ck_assert_msg(s->ovl.seq == (uint64_t)c + 1, "call %d numbered %llu", c, (unsigned long long)s->ovl.seq);
			ck_assert_msg(s->ovl.n == (run ? 1 : early_n[c]), "%s rows %lld, overlap %s: after call %d the stream "
				      "records %d calls that may still run, expected %d", wsn_op_name(op), (long long)rows,
				      run ? "off" : "on", c, s->ovl.n, run ? 1 : early_n[c]);
		}
		if (!run)
			ck_assert_msg(s->ovl.c[0].seq == OV_CALLS && s->ovl.n == 1,
				      "the call reading the dx of the call right before it waits at its start");
		OK(wsn_stream_sync(gpu_dev, s));
		for (int c = 0; c < OV_CALLS; c++) {
			bits[run][c] = gpu_xcalloc(mb);
			gpu_download(bits[run][c], dx[c].d, mb);
		}
		bits[run][OV_CALLS] = gpu_xcalloc(vb);
		bits[run][OV_CALLS + 1] = gpu_xcalloc(vb);
		gpu_download(bits[run][OV_CALLS], dw.d, vb);
		gpu_download(bits[run][OV_CALLS + 1], db.d, vb);
		OK(wsn_stream_destroy(s));
		s = NULL;
		for (int c = 0; c < OV_CALLS; c++) {
			snprintf(what, sizeof(what), "%s rows %lld overlap %s call %d", wsn_op_name(op), (long long)rows,
				 run ? "off" : "on", c);
			fails += gpu_check_out(what, "dx", dt, bits[run][c], cdx[c], rows * hidden, gpu_tolerance(dt), 0, &worst);
		}
		fails += gpu_check_out(what, "dweight (last call)", dt, bits[run][OV_CALLS], cdw, hidden, gpu_tolerance(dt), 0, &worst);
		if (ln)
			fails += gpu_check_out(what, "dbias (last call)", dt, bits[run][OV_CALLS + 1], cdb, hidden, gpu_tolerance(dt), 0,
					   &worst);
	}
	unsetenv("WSNORM_OVERLAP");
	for (int c = 0; c < OV_CALLS + 2; c++) {
		size_t n = c < OV_CALLS ? mb : vb;
		if (c == OV_CALLS + 1 && !ln)
			continue;
		if (memcmp(bits[0][c], bits[1][c], n)) {
			printf("FAIL %s rows %lld: %s %d differs between overlap on and off\n", wsn_op_name(op), (long long)rows,
			       c < OV_CALLS ? "dx of call" : "sums", c);
			fails++;
		}
		free(bits[0][c]);
		free(bits[1][c]);
	}
	printf("%s overlap %s rows %lld: worst rel_l2 %.2e\n", fails ? "FAIL" : "ok", wsn_op_name(op), (long long)rows, worst);
	wsn_plan_destroy(gp);
	wsn_plan_destroy(cp);
	for (int k = 0; k < OV_SETS; k++) {
		struct ov_buf *bs[] = { &x[k], &dy[k], &mean[k], &rstd[k] };
		for (int i = 0; i < 4; i++) {
			free(bs[i]->h);
			OK(wsn_mem_free(gpu_dev, bs[i]->d));
		}
	}
	for (int c = 0; c < OV_CALLS; c++) {
		free(dx[c].h);
		free(cdx[c]);
		OK(wsn_mem_free(gpu_dev, dx[c].d));
	}
	{
		struct ov_buf *bs[] = { &w, &b, &dw, &db };
		for (int i = 0; i < 4; i++) {
			free(bs[i]->h);
			OK(wsn_mem_free(gpu_dev, bs[i]->d));
		}
	}
	free(cdw);
	free(cdb);
	ck_assert_int_eq(fails, 0);
}
END_TEST

Suite *suite_gpu_overlap(void)
{
	/* test_overlap: LayerNorm, RMSNorm x 4096, 128 rows */
	return TU_SUITE("gpu", { "overlap", 300, gpu_setup, gpu_teardown, TU_TESTS({ test_overlap, 4 }) });
}
