/* SPDX-License-Identifier: MIT */
/* runtime/overlap.c: which backward calls may start before the calls ahead of them on their stream end. */
#include "overlap.h"
#include "core/op.h"
#include "core/params.h"

#include <stdlib.h>
#include <string.h>

/*
 * A backward call may start on the SMs the calls ahead of it leave, without waiting for them to end
 * (its kernel skips the dependent-launch wait, and waits before it writes its workspace and exits
 * instead). Grids launch in stream order, each only once every CTA of the one before has started, so
 * when an early call starts, any call since the last one that waited at its start may still run:
 * its main grid and its finish kernel. The early call must therefore not read what they write, nor
 * write while it runs (dx) what they read or write. Its own dweight and dbias are written after its
 * wait, by its finish kernel, once every call ahead of it is done, so they are not part of the check.
 *
 * One exception keeps calls that reuse the buffers of an older call early: each finish kernel, once
 * its main grid is done, stores the call's number into the stream's word `done`; a call that
 * shares memory only with the main grids of calls older than the one right before it starts early
 * and waits at its start until `done` has reached the newest of them (ex->wait_seq). That call's
 * finish kernel may still run, so what it writes is still checked.
 *
 * Other work queued on the stream (copies, fills, holds, waits on events) makes what runs ahead
 * unknown, and the next call waits. So does the default stream, where work queued outside
 * libwsnorm is not seen.
 */

static int disjoint(const struct wsn__span *a, const struct wsn__span *b)
{
	return a->hi <= b->lo || b->hi <= a->lo;
}

/* Bytes a tensor's elements span, from its lowest to past its highest element (empty if absent). */
static struct wsn__span tensor_span(const struct wsn_tensor *t)
{
	struct wsn__span s = { 0, 0 };
	int64_t lo = 0, hi = 0;
	size_t es;

	if (!t->data || t->ndim < 1 || t->ndim > WSN_MAX_DIMS || !(es = wsn_dtype_size(t->dtype)))
		return s;
	for (int i = 0; i < t->ndim; i++) {
		int64_t d;
		if (t->shape[i] < 1)
			return s;
		d = (t->shape[i] - 1) * t->stride[i];
		if (d < 0)
			lo += d;
		else
			hi += d;
	}
	s.lo = (uintptr_t)t->data + (uintptr_t)(lo * (int64_t)es);
	s.hi = (uintptr_t)t->data + (uintptr_t)((hi + 1) * (int64_t)es);
	return s;
}

static void add(struct wsn__span *v, int *n, const struct wsn_tensor *t)
{
	struct wsn__span s = tensor_span(t);

	if (s.hi > s.lo)
		v[(*n)++] = s;
}

void wsn__ovl_call_of(const struct wsn__plan_params *pp, const struct wsn_args *a, struct wsn__ovl_call *c)
{
	int ln = wsn_op_is_layernorm(pp->op);

	/* the tensors wsn_plan_execute checked: the ones the plan uses, and the optional outputs given */
	memset(c, 0, sizeof(*c));
	add(c->rd, &c->nrd, &a->x);
	if (pp->opts.has_weight)
		add(c->rd, &c->nrd, &a->weight);
	if (wsn_op_is_backward(pp->op)) {
		add(c->rd, &c->nrd, &a->dy);
		if (ln)
			add(c->rd, &c->nrd, &a->mean);
		add(c->rd, &c->nrd, &a->rstd);
		add(c->wr, &c->nwr, &a->dx);
		add(c->fin, &c->nfin, &a->dweight);
		add(c->fin, &c->nfin, &a->dbias);
		c->publishes = c->nfin > 0; /* its finish kernel stores the call's number into done */
	} else {
		if (pp->opts.has_bias)
			add(c->rd, &c->nrd, &a->bias);
		add(c->wr, &c->nwr, &a->y);
		if (ln)
			add(c->wr, &c->nwr, &a->mean);
		add(c->wr, &c->nwr, &a->rstd);
	}
}

static int overlaps(const struct wsn__span *a, int na, const struct wsn__span *b, int nb)
{
	for (int i = 0; i < na; i++)
		for (int j = 0; j < nb; j++)
			if (!disjoint(&a[i], &b[j]))
				return 1;
	return 0;
}

/* Does c, running beside spans rd/wr of an earlier call, read what they write or write what they touch? */
static int conflicts(const struct wsn__ovl_call *c, const struct wsn__span *rd, int nrd, const struct wsn__span *wr,
		     int nwr)
{
	return overlaps(c->rd, c->nrd, wr, nwr) || overlaps(c->wr, c->nwr, wr, nwr) || overlaps(c->wr, c->nwr, rd, nrd);
}

int wsn__ovl_may_start_early(const struct wsn__ovl *o, const struct wsn__ovl_call *c, uint64_t *wait_seq)
{
	uint64_t w = 0;

	*wait_seq = 0;
	if (!o->known || o->n >= WSN__OVL_DEPTH)
		return 0;
	for (int i = 0; i < o->n; i++) {
		const struct wsn__ovl_call *p = &o->c[i];
		if (conflicts(c, NULL, 0, p->fin, p->nfin))
			return 0;
		if (p->main_done || !conflicts(c, p->rd, p->nrd, p->wr, p->nwr))
			continue;
		/* its main grid: wait for its finish kernel's word, unless it is the call right before */
		if (i == o->n - 1 || !p->publishes)
			return 0;
		if (p->seq > w)
			w = p->seq;
	}
	*wait_seq = w;
	return 1;
}

void wsn__ovl_record(struct wsn__ovl *o, const struct wsn__ovl_call *c, int early, uint64_t wait_seq)
{
	int k = 0;

	if (early) { /* wsn__ovl_may_start_early said so: o is known and has room */
		/* past wait_seq's main grid every earlier call is done: calls up to it end their main
		 * grids before it ends, and their finish kernels before the next main grid's end. A later
		 * call starts only once this call's CTAs have all seen that (their kernel lets the next grid
		 * launch after its wait for the word), so the record keeps only the calls from it on */
		for (int i = 0; i < o->n; i++) {
			if (o->c[i].seq < wait_seq)
				continue;
			o->c[k] = o->c[i];
			if (o->c[k].seq == wait_seq)
				o->c[k].main_done = 1;
			k++;
		}
	}
	o->known = 1;
	o->n = k;
	o->c[o->n++] = *c;
}

void wsn__ovl_reset(struct wsn__ovl *o, int known)
{
	o->known = known;
	o->n = 0;
}

int wsn__ovl_enabled(void)
{
	const char *e = getenv("WSNORM_OVERLAP");

	return !(e && !strcmp(e, "0"));
}
