/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async_ir.c: the async-group pass's IR: the finished body read into statements, labels, tracked registers and basic blocks. */
#include "async_pass.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int wsn__async_fail(struct pass *p, int err, const char *fmt, ...)
{
	char msg[200];
	va_list ap;

	if (p->err)
		return p->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return p->err = ptx_kernel_fail(p->k, err, "async: %s", msg);
}

static size_t hash_mem(const char *s, size_t n)
{
	size_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int strtab_find(const struct strtab *t, const char *s, size_t n)
{
	if (!t->cap)
		return -1;
	for (size_t j = hash_mem(s, n) & (t->cap - 1); t->key[j]; j = (j + 1) & (t->cap - 1))
		if (t->len[j] == n && !memcmp(t->key[j], s, n))
			return t->val[j];
	return -1;
}

/* Insert (s, n) -> val unless present. Returns 0, or WSN_ENOMEM. */
static int strtab_add(struct strtab *t, const char *s, size_t n, int val)
{
	size_t j;

	if (2 * (t->count + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct strtab g = { calloc(cap, sizeof(*g.key)), calloc(cap, sizeof(*g.len)),
				    calloc(cap, sizeof(*g.val)), cap, t->count };

		if (!g.key || !g.len || !g.val) {
			free(g.key), free(g.len), free(g.val);
			return WSN_ENOMEM;
		}
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->key[i])
				continue;
			for (j = hash_mem(t->key[i], t->len[i]) & (cap - 1); g.key[j]; j = (j + 1) & (cap - 1))
				;
			g.key[j] = t->key[i], g.len[j] = t->len[i], g.val[j] = t->val[i];
		}
		free(t->key), free(t->len), free(t->val);
		*t = g;
	}
	for (j = hash_mem(s, n) & (t->cap - 1); t->key[j]; j = (j + 1) & (t->cap - 1))
		if (t->len[j] == n && !memcmp(t->key[j], s, n))
			return 0;
	t->key[j] = s, t->len[j] = n, t->val[j] = val;
	t->count++;
	return 0;
}

void wsn__async_strtab_free(struct strtab *t)
{
	free(t->key), free(t->len), free(t->val);
	memset(t, 0, sizeof(*t));
}

static struct item *item_new(struct pass *p, enum item_type type)
{
	if (p->nit == p->capit) {
		size_t cap = p->capit ? 2 * p->capit : 256;
		struct item *n = realloc(p->it, cap * sizeof(*n));

		if (!n) {
			wsn__async_fail(p, WSN_ENOMEM, "out of memory");
			return NULL;
		}
		p->it = n;
		p->capit = cap;
	}
	memset(&p->it[p->nit], 0, sizeof(p->it[0]));
	p->it[p->nit].type = type;
	return &p->it[p->nit++];
}

static int id_push(struct pass *p, int id)
{
	if (p->nids == p->capids) {
		size_t cap = p->capids ? 2 * p->capids : 256;
		int *n = realloc(p->ids, cap * sizeof(*n));

		if (!n)
			return wsn__async_fail(p, WSN_ENOMEM, "out of memory");
		p->ids = n;
		p->capids = cap;
	}
	p->ids[p->nids++] = id;
	return 0;
}

/* ---------------------------------------------------------------- reading statements */

static int is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '$';
}

static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

static void trim(const char **s, size_t *n)
{
	while (*n && is_space(**s))
		(*s)++, (*n)--;
	while (*n && is_space((*s)[*n - 1]))
		(*n)--;
}

/* An opcode split at its dots: "cp.async.bulk.global.shared::cta.bulk_group". */
struct opc {
	const char *c[16];
	size_t n[16];
	int nc;
};

static void opc_split(struct opc *o, const char *s, size_t n)
{
	size_t i = 0;

	o->nc = 0;
	while (i <= n && o->nc < 16) {
		size_t j = i;
		while (j < n && s[j] != '.')
			j++;
		o->c[o->nc] = s + i;
		o->n[o->nc++] = j - i;
		i = j + 1;
	}
}

/* Component i is w, or w followed by "::" (".shared::cta" is "shared"). */
static int opc_is(const struct opc *o, int i, const char *w)
{
	size_t n = strlen(w);

	if (i >= o->nc || o->n[i] < n || memcmp(o->c[i], w, n))
		return 0;
	return o->n[i] == n || (o->n[i] > n + 1 && o->c[i][n] == ':' && o->c[i][n + 1] == ':');
}

static int opc_has(const struct opc *o, const char *w)
{
	for (int i = 1; i < o->nc; i++)
		if (opc_is(o, i, w))
			return 1;
	return 0;
}

/* The first state space named in the opcode: 'g'lobal, 's'hared, 'l'ocal, 'p'aram, 'c'onst, or 0. */
static char first_space(const struct opc *o)
{
	static const char *const sp[] = { "global", "shared", "local", "param", "const" };

	for (int i = 1; i < o->nc; i++)
		for (size_t j = 0; j < WSN_ARRAY_SIZE(sp); j++)
			if (opc_is(o, i, sp[j]))
				return sp[j][0];
	return 0;
}

/* Operand i (0-based) of an operand list; commas inside {} and [] do not split. 0 if there is none. */
static int operand(const char *s, size_t n, int i, const char **os, size_t *on)
{
	int depth = 0, k = 0;
	size_t start = 0;

	for (size_t j = 0; j <= n; j++) {
		char c = j < n ? s[j] : ',';
		if (c == '{' || c == '[')
			depth++;
		else if (c == '}' || c == ']')
			depth--;
		else if (c == ',' && depth <= 0) {
			if (k++ == i) {
				*os = s + start;
				*on = j - start;
				trim(os, on);
				return *on > 0;
			}
			start = j + 1;
		}
	}
	return 0;
}

/* Opcodes whose first operand is not a register they write. */
static int no_reg_dest(const struct opc *o)
{
	static const char *const base[] = {
		"st", "red", "cp", "bar", "barrier", "bra", "brx", "ret", "exit", "trap", "membar", "fence",
		"prefetch", "prefetchu", "stmatrix", "setmaxnreg", "griddepcontrol", "nanosleep", "pmevent",
		"wgmma", "discard", "applypriority", "tensormap",
	};

	for (size_t i = 0; i < WSN_ARRAY_SIZE(base); i++)
		if (opc_is(o, 0, base[i]))
			return 1;
	if (opc_is(o, 0, "mbarrier"))
		return opc_is(o, 1, "init") || opc_is(o, 1, "expect_tx") || opc_is(o, 1, "complete_tx") ||
		       opc_is(o, 1, "inval");
	if (opc_is(o, 0, "multimem"))
		return opc_is(o, 1, "st") || opc_is(o, 1, "red");
	return 0;
}

/* What a statement is, and whether it writes shared memory. */
static enum op classify(const struct opc *o, int *smem_write)
{
	char sp = first_space(o);

	*smem_write = 0;
	if (opc_is(o, 0, "wgmma")) {
		if (opc_is(o, 1, "mma_async"))
			return OP_MMA;
		if (opc_is(o, 1, "commit_group"))
			return OP_MMA_COMMIT;
		if (opc_is(o, 1, "wait_group"))
			return OP_MMA_WAIT;
		if (opc_is(o, 1, "fence"))
			return OP_MMA_FENCE;
		return OP_OTHER;
	}
	if (opc_is(o, 0, "cp")) {
		if (opc_is(o, 1, "async") && opc_is(o, 2, "bulk") && opc_is(o, 3, "commit_group"))
			return OP_BULK_COMMIT;
		if (opc_is(o, 1, "async") && opc_is(o, 2, "bulk") && opc_is(o, 3, "wait_group"))
			return OP_BULK_WAIT;
		if (opc_has(o, "bulk_group") && sp == 'g')
			return OP_BULK_STORE;
		*smem_write = sp == 's';
		return OP_OTHER;
	}
	if (opc_is(o, 0, "st") || opc_is(o, 0, "atom") || opc_is(o, 0, "red")) {
		/* generic addresses may point into shared memory */
		*smem_write = sp != 'g' && sp != 'l' && sp != 'p';
		return OP_OTHER;
	}
	if (opc_is(o, 0, "stmatrix")) {
		*smem_write = 1;
		return OP_OTHER;
	}
	if (opc_is(o, 0, "bra"))
		return OP_BRA;
	if (opc_is(o, 0, "brx"))
		return OP_BRX;
	if (opc_is(o, 0, "ret") || opc_is(o, 0, "exit"))
		return OP_EXIT;
	if (opc_is(o, 0, "trap"))
		return OP_TRAP;
	if (opc_is(o, 0, "call"))
		return OP_CALL;
	return OP_OTHER;
}

/* Push the ids of the registers named in s[0..n) ("%name"); add: track the untracked ones. */
static int scan_regs(struct pass *p, const char *s, size_t n, int add, size_t *count)
{
	*count = 0;
	for (size_t i = 0; i < n; i++) {
		size_t j = i + 1;
		int id;

		if (s[i] != '%')
			continue;
		while (j < n && is_ident(s[j]))
			j++;
		if (j == i + 1)
			continue;
		id = strtab_find(&p->regs, s + i, j - i);
		if (id < 0 && add) {
			id = (int)p->regs.count;
			if (strtab_add(&p->regs, s + i, j - i, id))
				return wsn__async_fail(p, WSN_ENOMEM, "out of memory");
		}
		if (id >= 0) {
			if (id_push(p, id))
				return p->err;
			(*count)++;
		}
		i = j - 1;
	}
	return 0;
}

/* Split a statement into guard, opcode and operands. */
static void stmt_parts(const struct item *it, const char **op, size_t *nop, const char **args, size_t *nargs)
{
	const char *s = it->s, *e = it->s + it->n;

	if (s < e && *s == '@') {
		while (s < e && !is_space(*s))
			s++;
		while (s < e && is_space(*s))
			s++;
	}
	*op = s;
	while (s < e && !is_space(*s))
		s++;
	*nop = (size_t)(s - *op);
	*args = s;
	*nargs = (size_t)(e - s);
	trim(args, nargs);
}

/* ---------------------------------------------------------------- building the IR */

struct parse {
	size_t ann;           /* next annotation */
	uint32_t writes;      /* regions the current shared-memory writes touch */
	size_t store_off;     /* body position of a pending ANN_STORE, or SIZE_MAX */
	uint32_t store_regions;
};

/* Apply the annotations at or before body position off. */
static int apply_annotations(struct pass *p, struct parse *ps, size_t off)
{
	for (; ps->ann < p->a->nann && p->a->ann[ps->ann].off <= off; ps->ann++) {
		const struct ann *an = &p->a->ann[ps->ann];
		struct item *it;

		switch (an->type) {
		case ANN_REGION_BEGIN:
			ps->writes = region_mask(an->region);
			break;
		case ANN_REGION_END:
			ps->writes = ALL_REGIONS;
			break;
		case ANN_REUSE:
			if (!(it = item_new(p, IT_REUSE)))
				return p->err;
			it->regions = region_mask(an->region);
			break;
		case ANN_STORE:
			ps->store_off = an->off;
			ps->store_regions = region_mask(an->region);
			break;
		}
	}
	return 0;
}

static int add_stmt(struct pass *p, struct parse *ps, const char *s, size_t n, int semi, size_t line_off,
		    const char *line, size_t nline)
{
	struct item *it = item_new(p, IT_STMT);
	const char *op, *args;
	size_t nop, nargs;
	struct opc o;
	int smem;

	if (!it)
		return p->err;
	it->s = s;
	it->n = n;
	it->line = line;
	it->nline = nline;
	it->guarded = *s == '@';
	it->semi = semi;
	stmt_parts(it, &op, &nop, &args, &nargs);
	opc_split(&o, op, nop);
	it->op = classify(&o, &smem);
	it->regions = smem ? ps->writes : 0;
	if (it->op == OP_MMA_WAIT || it->op == OP_BULK_WAIT) {
		const char *v;
		size_t nv;
		char buf[16];
		char *end;
		long c = -1;

		if (operand(args, nargs, 0, &v, &nv) && nv < sizeof(buf)) {
			memcpy(buf, v, nv);
			buf[nv] = 0;
			c = strtol(buf, &end, 0);
			if (*end)
				c = -1;
		}
		it->count = c >= 0 && c < INT_MAX ? (int)c : INT_MAX; /* unknown: retires nothing */
	}
	if (ps->store_off == line_off) {
		if (it->op != OP_BULK_STORE)
			return wsn__async_fail(p, WSN_EINVAL, "a bulk store helper did not emit a bulk store");
		it->regions = ps->store_regions;
		ps->store_off = SIZE_MAX;
	} else if (it->op == OP_BULK_STORE) {
		it->regions = ALL_REGIONS; /* the source buffer is not known */
	}
	if (it->op == OP_MMA)
		p->st.async_ops[PTX_ASYNC_WGMMA]++;
	else if (it->op == OP_BULK_STORE)
		p->st.async_ops[PTX_ASYNC_BULK]++;
	return 0;
}

/* One line of the body: a label, text to copy, or statements split at ';'. */
static int add_line(struct pass *p, struct parse *ps, size_t off, size_t end, size_t next)
{
	const char *s = p->body + off, *t = s, *e = p->body + end;
	const char *stmt[64];
	size_t nstmt[64], ns = 0, n = (size_t)(e - s);
	int semi[64];
	struct item *it;

	trim(&t, &n);
	if (!n || (n >= 2 && t[0] == '/' && t[1] == '/') || *t == '.' || ((*t == '{' || *t == '}') && n == 1)) {
		if (!(it = item_new(p, IT_TEXT)))
			return p->err;
		it->line = s;
		it->nline = next - off;
		return 0;
	}
	if (t[n - 1] == ':') {
		size_t i = 0;
		while (i < n - 1 && is_ident(t[i]))
			i++;
		if (i == n - 1 && i > 0) {
			if (strtab_find(&p->labels, t, i) >= 0)
				return wsn__async_fail(p, WSN_EINVAL, "label %.*s placed twice", (int)i, t);
			if (strtab_add(&p->labels, t, i, (int)p->nit))
				return wsn__async_fail(p, WSN_ENOMEM, "out of memory");
			if (!(it = item_new(p, IT_LABEL)))
				return p->err;
			it->s = t;
			it->n = i;
			it->line = s;
			it->nline = next - off;
			return 0;
		}
	}
	/* statements end at ';'; a "//" comment ends the line */
	for (const char *c = t, *st = t; c <= t + n; c++) {
		if (c == t + n || *c == ';' || (c + 1 < t + n && c[0] == '/' && c[1] == '/')) {
			const char *ss = st;
			size_t sn = (size_t)(c - st);
			trim(&ss, &sn);
			if (sn) {
				if (ns == WSN_ARRAY_SIZE(stmt))
					return wsn__async_fail(p, WSN_ENOTSUP, "more than %zu statements on one line", ns);
				stmt[ns] = ss;
				semi[ns] = c < t + n && *c == ';';
				nstmt[ns++] = sn;
			}
			if (c == t + n || *c != ';')
				break;
			st = c + 1;
		}
	}
	for (size_t i = 0; i < ns; i++)
		if (add_stmt(p, ps, stmt[i], nstmt[i], semi[i], i ? SIZE_MAX - 1 : off, ns == 1 ? s : NULL,
			     ns == 1 ? next - off : 0))
			return p->err;
	return 0;
}

/* Read the body into items (text, labels, statements with the tracker's annotations). 0 or an error. */
int wsn__async_build_ir(struct pass *p)
{
	struct parse ps = { 0, ALL_REGIONS, SIZE_MAX, 0 };
	size_t off = 0;

	while (off < p->len) {
		const char *nl = memchr(p->body + off, '\n', p->len - off);
		size_t end = nl ? (size_t)(nl - p->body) : p->len, next = nl ? end + 1 : p->len;

		if (apply_annotations(p, &ps, off) || add_line(p, &ps, off, end, next))
			return p->err;
		off = next;
	}
	if (apply_annotations(p, &ps, p->len))
		return p->err;
	if (ps.store_off != SIZE_MAX)
		return wsn__async_fail(p, WSN_EINVAL, "a bulk store helper did not emit a bulk store");
	return 0;
}

/* Track the registers of every wgmma, then give each statement its tracked-register lists. */
int wsn__async_collect_registers(struct pass *p)
{
	for (int round = 0; round < 2; round++) {
		for (size_t i = 0; i < p->nit; i++) {
			struct item *it = &p->it[i];
			const char *op, *args, *o0, *o1;
			size_t nop, nargs, n0 = 0, n1 = 0;
			struct opc o;

			if (it->type != IT_STMT || (round == 0) != (it->op == OP_MMA))
				continue;
			stmt_parts(it, &op, &nop, &args, &nargs);
			if (!operand(args, nargs, 0, &o0, &n0))
				n0 = 0;
			if (it->op == OP_MMA) {
				if (!n0 || *o0 != '{')
					return wsn__async_fail(p, WSN_EINVAL, "wgmma without a {accumulator} list: %.*s",
						    (int)it->n, it->s);
				if (!operand(args, nargs, 1, &o1, &n1) || *o1 != '{')
					n1 = 0; /* A from a descriptor */
				it->a = p->nids;
				if (scan_regs(p, o0, n0, round == 0, &it->na))
					return p->err;
				it->b = p->nids;
				if (scan_regs(p, o1, n1, round == 0, &it->nb))
					return p->err;
				if (it->na + it->nb > p->maxlist)
					p->maxlist = it->na + it->nb;
				continue;
			}
			if (!p->regs.count)
				continue;
			it->a = p->nids;
			if (scan_regs(p, it->s, it->n, 0, &it->na))
				return p->err;
			opc_split(&o, op, nop);
			it->b = p->nids;
			if (!no_reg_dest(&o) && n0 && scan_regs(p, o0, n0, 0, &it->nb))
				return p->err;
			if (it->na + it->nb > p->maxlist)
				p->maxlist = it->na + it->nb;
		}
		if (round == 0)
			p->nregs = p->regs.count;
	}
	return 0;
}

/* Does the item end a block: a branch, exit or trap? */
int wsn__async_is_terminator(const struct item *it)
{
	return it->type == IT_STMT && (it->op == OP_BRA || it->op == OP_BRX || it->op == OP_EXIT ||
				       it->op == OP_TRAP);
}

/* Split the items into basic blocks and link each to its successors. 0 or an error. */
int wsn__async_build_blocks(struct pass *p)
{
	if (!(p->bl = calloc(p->nit, sizeof(*p->bl))) || !(p->blk_of = calloc(p->nit, sizeof(*p->blk_of))))
		return wsn__async_fail(p, WSN_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nit; i++) {
		if (!i || p->it[i].type == IT_LABEL || wsn__async_is_terminator(&p->it[i - 1]))
			p->bl[p->nbl++].first = i;
		p->bl[p->nbl - 1].last = i;
		p->blk_of[i] = p->nbl - 1;
	}
	for (size_t b = 0; b < p->nbl; b++) {
		struct block *bl = &p->bl[b];
		const struct item *it = &p->it[bl->last];
		int next = 1;

		if (it->type == IT_STMT && it->op == OP_BRA) {
			const char *op, *args, *t;
			size_t nop, nargs, nt;
			int li;

			stmt_parts(it, &op, &nop, &args, &nargs);
			if (!operand(args, nargs, 0, &t, &nt) || (li = strtab_find(&p->labels, t, nt)) < 0)
				return wsn__async_fail(p, WSN_EINVAL, "branch to a label not in the kernel: %.*s", (int)it->n,
					    it->s);
			bl->succ[bl->nsucc++] = p->blk_of[li];
			next = it->guarded;
		} else if (it->type == IT_STMT && it->op == OP_BRX) {
			bl->brx = 1;
			next = it->guarded;
		} else if (it->type == IT_STMT && (it->op == OP_EXIT || it->op == OP_TRAP)) {
			next = it->guarded;
		}
		if (next && b + 1 < p->nbl)
			bl->succ[bl->nsucc++] = b + 1;
		else if (next)
			bl->falls_off = 1;
	}
	return 0;
}
