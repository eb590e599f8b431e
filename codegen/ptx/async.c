/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async.c: the async-group pass's tracker (what the generator says while it writes) and its driver at kernel end. */
#include "async_pass.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the tracker */

static int region_ok(struct ptx_async *a, int region, const char *what)
{
	if (region == PTX_ASYNC_ANY || (region >= 0 && region < PTX_ASYNC_REGIONS))
		return 1;
	ptx_kernel_fail(a->k, WSN_EINVAL, "async: %s: region %d is not in 0..%d or PTX_ASYNC_ANY", what,
			region, PTX_ASYNC_REGIONS - 1);
	return 0;
}

static void annotate(struct ptx_async *a, enum ann_type type, int region)
{
	if (a->nann == a->capann) {
		size_t cap = a->capann ? 2 * a->capann : 32;
		struct ann *n = realloc(a->ann, cap * sizeof(*n));

		if (!n) {
			ptx_kernel_fail(a->k, WSN_ENOMEM, "async: out of memory");
			return;
		}
		a->ann = n;
		a->capann = cap;
	}
	a->ann[a->nann++] = (struct ann){ ptx_kernel_body(a->k)->len, type, region };
}

static void tracker_free(struct ptx_async *a)
{
	free(a->ann);
	free(a);
}

static int async_end(struct ptx_kernel *k, void *ctx, int err);

struct ptx_async *ptx_async_attach(struct ptx_kernel *k, struct ptx_async_stats *stats)
{
	struct ptx_async *a = calloc(1, sizeof(*a));

	if (!a) {
		ptx_kernel_fail(k, WSN_ENOMEM, "async: out of memory");
		return NULL;
	}
	a->k = k;
	a->stats = stats;
	if (stats)
		memset(stats, 0, sizeof(*stats));
	if (ptx_kernel_on_end(k, async_end, a)) {
		ptx_kernel_fail(k, WSN_EBUSY, "async: the kernel has an end pass already");
		tracker_free(a);
		return NULL;
	}
	return a;
}

void ptx_async_policy(struct ptx_async *a, enum ptx_async_kind kind, enum ptx_async_policy policy)
{
	if (!a)
		return;
	if ((unsigned)kind >= PTX_ASYNC_KINDS ||
	    (policy != PTX_ASYNC_FLUSH && policy != PTX_ASYNC_KEEP_NEWER)) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: bad policy %d for kind %d", (int)policy, (int)kind);
		return;
	}
	a->policy[kind] = policy;
}

void ptx_async_region_begin(struct ptx_async *a, int region)
{
	if (!a || !region_ok(a, region, "region_begin"))
		return;
	if (a->in_region) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: region_begin(%d) inside an open region", region);
		return;
	}
	a->in_region = 1;
	annotate(a, ANN_REGION_BEGIN, region);
}

void ptx_async_region_end(struct ptx_async *a)
{
	if (!a)
		return;
	if (!a->in_region) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: region_end without region_begin");
		return;
	}
	a->in_region = 0;
	annotate(a, ANN_REGION_END, PTX_ASYNC_ANY);
}

void ptx_async_reuse(struct ptx_async *a, int region)
{
	if (a && region_ok(a, region, "reuse"))
		annotate(a, ANN_REUSE, region);
}

void ptx_async_bulk_store(struct ptx_async *a, const char *gdst, const char *ssrc, const char *bytes,
			  int region)
{
	if (!a || !region_ok(a, region, "bulk_store"))
		return;
	annotate(a, ANN_STORE, region);
	ptx_ins(a->k, "cp.async.bulk.global.shared::cta.bulk_group [%s], [%s], %s", gdst, ssrc, bytes);
}

void ptx_async_bulk_tensor_store(struct ptx_async *a, int dims, const char *tmap,
				 const char *const coords[], const char *ssrc, int region)
{
	char c[256] = "";
	size_t n = 0;

	if (!a || !region_ok(a, region, "bulk_tensor_store"))
		return;
	if (dims < 1 || dims > 5) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: a bulk tensor store needs 1..5 dimensions, not %d", dims);
		return;
	}
	for (int i = 0; i < dims && n < sizeof(c); i++)
		n += (size_t)snprintf(c + n, sizeof(c) - n, "%s%s", i ? ", " : "", coords[i]);
	if (n >= sizeof(c)) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: bulk tensor store coordinates too long");
		return;
	}
	annotate(a, ANN_STORE, region);
	ptx_ins(a->k, "cp.async.bulk.tensor.%dd.global.shared::cta.tile.bulk_group [%s, {%s}], [%s]", dims, tmap,
		c, ssrc);
}

void ptx_async_wgmma(struct ptx_async *a, const char *shape, const char *const d[], int nd,
		     const char *adesc, const char *bdesc, const char *scale_d)
{
	struct ptx_buf list = { 0 };

	if (!a)
		return;
	if (nd < 1 || nd > 256) {
		ptx_kernel_fail(a->k, WSN_EINVAL, "async: wgmma with %d accumulator registers", nd);
		return;
	}
	for (int i = 0; i < nd; i++)
		ptx_buf_printf(&list, "%s%s", i ? ", " : "{", d[i]);
	ptx_buf_printf(&list, "}");
	if (list.oom)
		ptx_kernel_fail(a->k, WSN_ENOMEM, "async: out of memory");
	else
		ptx_ins(a->k, "wgmma.mma_async.sync.aligned.%s %s, %s, %s, %s, 1, 1, 0, 0", shape, list.s, adesc,
			bdesc, scale_d);
	ptx_buf_free(&list);
}

/* ---------------------------------------------------------------- the pass */

static int run_pass(struct ptx_kernel *k, struct ptx_async *a)
{
	struct ptx_buf *body = ptx_kernel_body(k), out = { 0 };
	struct pass p = { .k = k, .a = a };
	int err = 0;

	if (body->oom)
		return ptx_kernel_fail(k, WSN_ENOMEM, "out of memory");
	p.body = body->s ? body->s : "";
	p.len = body->len;
	if ((err = wsn__async_build_ir(&p)))
		goto out;
	if (!p.st.async_ops[PTX_ASYNC_BULK] && !p.st.async_ops[PTX_ASYNC_WGMMA])
		goto out; /* nothing to track: the body stays as written */
	if ((err = wsn__async_collect_registers(&p)) || (err = wsn__async_build_blocks(&p)) || (err = wsn__async_analyse_and_write(&p, &out)))
		goto out;
	ptx_buf_free(body);
	*body = out;
	memset(&out, 0, sizeof(out));
out:
	if (!err && a->stats)
		*a->stats = p.st;
	ptx_buf_free(&out);
	free(p.it), free(p.ids), free(p.bl), free(p.blk_of), free(p.scratch);
	wsn__async_strtab_free(&p.regs);
	wsn__async_strtab_free(&p.labels);
	return err;
}

static int async_end(struct ptx_kernel *k, void *ctx, int err)
{
	struct ptx_async *a = ctx;

	if (!err && a->in_region)
		err = ptx_kernel_fail(k, WSN_EINVAL, "async: region_begin without region_end");
	if (!err)
		err = run_pass(k, a);
	tracker_free(a);
	return err;
}
