/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async_analysis.c: the async-group pass's analysis: pending groups simulated over the blocks to a fixed point, the fewest waits written in. */
#include "async_pass.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- the analysis */

static void range_of(const struct pass *p, int kind, size_t *lo, size_t *hi)
{
	*lo = kind == PTX_ASYNC_WGMMA ? 0 : 2 * p->nregs;
	*hi = kind == PTX_ASYNC_WGMMA ? 2 * p->nregs : p->nres;
}

static int any_age(const struct pass *p, const int8_t *s, int kind, int open_only)
{
	size_t lo, hi;

	range_of(p, kind, &lo, &hi);
	for (size_t r = lo; r < hi; r++)
		if (open_only ? s[r] == AGE_OPEN : s[r] != AGE_NONE)
			return 1;
	return 0;
}

static void commit(const struct pass *p, int8_t *s, int kind)
{
	size_t lo, hi;

	range_of(p, kind, &lo, &hi);
	for (size_t r = lo; r < hi; r++)
		if (s[r] == AGE_OPEN)
			s[r] = 0;
		else if (s[r] != AGE_NONE && s[r] < AGE_MAX)
			s[r]++;
}

/* wait_group n: every group but the newest n is done (uncommitted ops are not waited for). */
static void retire(const struct pass *p, int8_t *s, int kind, int n)
{
	size_t lo, hi;

	range_of(p, kind, &lo, &hi);
	for (size_t r = lo; r < hi; r++)
		if (s[r] != AGE_NONE && s[r] != AGE_OPEN && s[r] >= n)
			s[r] = AGE_NONE;
}

static void emit(struct ptx_buf *out, const char *ins, int n, const char *why)
{
	if (!out)
		return;
	if (n >= 0)
		ptx_buf_printf(out, "\t%s %d;\t// async pass: %s\n", ins, n, why);
	else
		ptx_buf_printf(out, "\t%s;\t// async pass: %s\n", ins, why);
}

static void insert_commit(struct pass *p, int8_t *s, struct ptx_buf *out, int kind)
{
	emit(out, kind == PTX_ASYNC_WGMMA ? "wgmma.commit_group.sync.aligned" : "cp.async.bulk.commit_group",
	     -1, "group the pending ops");
	if (out)
		p->st.commits[kind]++;
	commit(p, s, kind);
}

static void insert_wait(struct pass *p, int8_t *s, struct ptx_buf *out, int kind, int n, const char *why)
{
	emit(out, kind == PTX_ASYNC_WGMMA ? "wgmma.wait_group.sync.aligned" : "cp.async.bulk.wait_group.read",
	     n, why);
	if (out)
		p->st.waits[kind]++;
	retire(p, s, kind, n);
}

/* Make the resources ids[0..n) (all of one kind) not pending, with one wait if any is. */
static void need(struct pass *p, int8_t *s, struct ptx_buf *out, int kind, const int *ids, size_t n,
		 const char *why)
{
	int pending = 0, open = 0, age = AGE_NONE;

	for (size_t i = 0; i < n; i++) {
		int8_t a = s[ids[i]];
		if (a == AGE_NONE)
			continue;
		pending = 1;
		if (a == AGE_OPEN)
			open = 1;
		else if (a < age)
			age = a;
	}
	if (!pending)
		return;
	if (p->a->policy[kind] == PTX_ASYNC_FLUSH) {
		if (any_age(p, s, kind, 1))
			insert_commit(p, s, out, kind);
		insert_wait(p, s, out, kind, 0, why);
		return;
	}
	if (open) {
		insert_commit(p, s, out, kind);
		age = 0;
	}
	insert_wait(p, s, out, kind, age, why);
}

static void need_regions(struct pass *p, int8_t *s, struct ptx_buf *out, uint32_t regions, const char *what)
{
	int ids[PTX_ASYNC_REGIONS];
	size_t n = 0;
	char why[80];

	for (int r = 0; r < PTX_ASYNC_REGIONS; r++)
		if (regions & (1u << r))
			ids[n++] = (int)(2 * p->nregs) + r;
	if (regions == ALL_REGIONS)
		snprintf(why, sizeof(why), "%s shared memory", what);
	else
		snprintf(why, sizeof(why), "%s region %d", what, __builtin_ctz(regions));
	need(p, s, out, PTX_ASYNC_BULK, ids, n, why);
}

static void flush_all(struct pass *p, int8_t *s, struct ptx_buf *out, const char *why)
{
	for (int kind = 0; kind < PTX_ASYNC_KINDS; kind++) {
		if (!any_age(p, s, kind, 0))
			continue;
		if (any_age(p, s, kind, 1))
			insert_commit(p, s, out, kind);
		insert_wait(p, s, out, kind, 0, why);
	}
}

/* The name of tracked register id, for comments. */
static void reg_name(const struct pass *p, int id, char *buf, size_t n)
{
	for (size_t j = 0; j < p->regs.cap; j++)
		if (p->regs.key[j] && p->regs.val[j] == id) {
			snprintf(buf, n, "%.*s", (int)p->regs.len[j], p->regs.key[j]);
			return;
		}
	snprintf(buf, n, "a register");
}

/* A statement that is not an async op: wait for what it consumes, mark what it touches. */
static void sim_other(struct pass *p, int8_t *s, struct ptx_buf *out, const struct item *it)
{
	const int *a = p->ids + it->a, *b = p->ids + it->b;
	int *ids = p->scratch;
	size_t n = 0;
	int first = -1;

	for (size_t i = 0; i < it->na; i++) {
		ids[n++] = a[i];
		if (first < 0 && s[a[i]] != AGE_NONE)
			first = a[i];
		s[p->nres + (size_t)a[i]] = 1; /* touched since the last wgmma.fence */
	}
	for (size_t i = 0; i < it->nb; i++) {
		ids[n++] = (int)p->nregs + b[i];
		if (first < 0 && s[p->nregs + (size_t)b[i]] != AGE_NONE)
			first = b[i];
	}
	if (n && first >= 0) {
		char name[64], why[96];
		reg_name(p, first, name, sizeof(name));
		snprintf(why, sizeof(why), "before the use of %s", name);
		need(p, s, out, PTX_ASYNC_WGMMA, ids, n, why);
	}
	if (it->regions)
		need_regions(p, s, out, it->regions, "before a write to");
}

static void sim_mma(struct pass *p, int8_t *s, struct ptx_buf *out, const struct item *it)
{
	const int *acc = p->ids + it->a, *fa = p->ids + it->b;
	int *ids = p->scratch;
	size_t n = 0;
	int dirty = 0;

	/* its A fragments must not be pending accumulators; its accumulators not pending A reads */
	for (size_t i = 0; i < it->nb; i++)
		ids[n++] = fa[i];
	for (size_t i = 0; i < it->na; i++)
		ids[n++] = (int)p->nregs + acc[i];
	need(p, s, out, PTX_ASYNC_WGMMA, ids, n, "before a wgmma reads an A fragment in flight");
	for (size_t i = 0; i < it->na; i++)
		dirty |= s[p->nres + (size_t)acc[i]];
	for (size_t i = 0; i < it->nb; i++)
		dirty |= s[p->nres + (size_t)fa[i]];
	if (dirty) {
		emit(out, "wgmma.fence.sync.aligned", -1, "registers touched since the last fence");
		if (out)
			p->st.fences++;
		memset(s + p->nres, 0, p->nregs);
	}
	for (size_t i = 0; i < it->na; i++)
		s[acc[i]] = AGE_OPEN;
	for (size_t i = 0; i < it->nb; i++)
		s[p->nregs + (size_t)fa[i]] = AGE_OPEN;
}

static void write_item(struct ptx_buf *out, const struct item *it)
{
	if (!out || it->type == IT_REUSE)
		return;
	if (it->line)
		ptx_buf_printf(out, "%.*s", (int)it->nline, it->line);
	else
		ptx_buf_printf(out, "\t%.*s%s\n", (int)it->n, it->s, it->semi ? ";" : "");
}

/* Groups close by the end of the block that opened them: a commit then sits after its async ops on
 * every path (ptxas expects a wgmma.commit_group to end a fence ... wgmma run, not to stand alone
 * at a loop head where the entry path issued nothing). */
static void close_groups(struct pass *p, int8_t *s, struct ptx_buf *out)
{
	for (int kind = 0; kind < PTX_ASYNC_KINDS; kind++)
		if (any_age(p, s, kind, 1))
			insert_commit(p, s, out, kind);
}

/* Run block b from state s (updated to its end); with out, write it with the inserted lines. */
static void sim_block(struct pass *p, size_t b, int8_t *s, struct ptx_buf *out)
{
	const struct block *bl = &p->bl[b];
	int closed = 0;

	for (size_t i = bl->first; i <= bl->last; i++) {
		const struct item *it = &p->it[i];

		if (i == bl->last && wsn__async_is_terminator(it)) {
			close_groups(p, s, out);
			closed = 1;
		}
		if (it->type == IT_REUSE)
			need_regions(p, s, out, it->regions, "before a reuse of");
		if (it->type != IT_STMT) {
			write_item(out, it);
			continue;
		}
		switch (it->op) {
		case OP_MMA:
			sim_mma(p, s, out, it);
			break;
		case OP_MMA_COMMIT:
			if (!it->guarded)
				commit(p, s, PTX_ASYNC_WGMMA);
			break;
		case OP_MMA_WAIT:
			if (!it->guarded)
				retire(p, s, PTX_ASYNC_WGMMA, it->count);
			break;
		case OP_MMA_FENCE:
			if (!it->guarded)
				memset(s + p->nres, 0, p->nregs);
			break;
		case OP_BULK_STORE:
			for (int r = 0; r < PTX_ASYNC_REGIONS; r++)
				if (it->regions & (1u << r))
					s[2 * p->nregs + (size_t)r] = AGE_OPEN;
			break;
		case OP_BULK_COMMIT:
			if (!it->guarded)
				commit(p, s, PTX_ASYNC_BULK);
			break;
		case OP_BULK_WAIT:
			if (!it->guarded)
				retire(p, s, PTX_ASYNC_BULK, it->count);
			break;
		case OP_EXIT:
		case OP_CALL:
			flush_all(p, s, out, it->op == OP_EXIT ? "before exit" : "before a call");
			break;
		default:
			sim_other(p, s, out, it);
			break;
		}
		write_item(out, it);
	}
	if (!closed)
		close_groups(p, s, out);
	if (bl->falls_off)
		flush_all(p, s, out, "before the end of the kernel");
}

/* dst = the join of dst and src (may be pending: the youngest age; fence needed: either). */
static int join(const struct pass *p, int8_t *dst, const int8_t *src)
{
	int changed = 0;

	for (size_t r = 0; r < p->width; r++) {
		int8_t lo = src[r] < dst[r] ? src[r] : dst[r], hi = src[r] > dst[r] ? src[r] : dst[r];
		int8_t v = r < p->nres ? lo : hi;
		if (v != dst[r])
			dst[r] = v, changed = 1;
	}
	return changed;
}

/* Simulate the pending groups over the blocks to a fixed point, then write the body to out with the
 * waits inserted. 0 or an error. */
int wsn__async_analyse_and_write(struct pass *p, struct ptx_buf *out)
{
	int8_t *in = NULL, *cur = NULL;
	size_t *queue = NULL, qh = 0, qn = 0;
	char *queued = NULL, *reached = NULL;
	int err = 0;

	p->nres = 2 * p->nregs + PTX_ASYNC_REGIONS;
	p->width = p->nres + p->nregs;
	in = malloc(p->nbl * p->width);
	cur = malloc(p->width);
	queue = malloc(p->nbl * sizeof(*queue));
	queued = calloc(p->nbl, 1);
	reached = calloc(p->nbl, 1);
	p->scratch = malloc((p->maxlist + 1) * sizeof(*p->scratch));
	if (!in || !cur || !queue || !queued || !reached || !p->scratch) {
		err = wsn__async_fail(p, WSN_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t b = 0; b < p->nbl; b++) {
		memset(in + b * p->width, AGE_NONE, p->nres);
		memset(in + b * p->width + p->nres, 0, p->nregs);
	}
	memset(in + p->nres, 1, p->nregs); /* the entry: no wgmma.fence yet */
	queue[qn++] = 0;
	queued[0] = reached[0] = 1;
	/* states only grow (ages down, flags up) over a finite lattice: this ends */
	while (qn) {
		size_t b = queue[qh];
		qh = (qh + 1) % p->nbl;
		qn--;
		queued[b] = 0;
		memcpy(cur, in + b * p->width, p->width);
		sim_block(p, b, cur, NULL);
		for (size_t j = 0, ns = p->bl[b].nsucc + (p->bl[b].brx ? p->labels.cap : 0); j < ns; j++) {
			size_t t;
			if (j < (size_t)p->bl[b].nsucc) {
				t = p->bl[b].succ[j];
			} else {
				size_t slot = j - (size_t)p->bl[b].nsucc;
				if (!p->labels.key[slot])
					continue;
				t = p->blk_of[p->labels.val[slot]];
			}
			if ((join(p, in + t * p->width, cur) || !reached[t]) && !queued[t]) {
				queue[(qh + qn++) % p->nbl] = t;
				queued[t] = 1;
			}
			reached[t] = 1;
		}
	}
	for (size_t b = 0; b < p->nbl; b++) {
		memcpy(cur, in + b * p->width, p->width);
		sim_block(p, b, cur, out);
	}
	if (out->oom)
		err = wsn__async_fail(p, WSN_ENOMEM, "out of memory");
out:
	free(in), free(cur), free(queue), free(queued), free(reached);
	return err;
}
