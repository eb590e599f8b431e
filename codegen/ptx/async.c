/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async.c: the async-group pass: an IR over the finished body, a dataflow over its branches, the waits. */
#include "async.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ALL_REGIONS 0xffffffffu

/* ---------------------------------------------------------------- the tracker */

/* Facts the generator gives while it writes the kernel, each at a position in the body. */
enum ann_type {
	ANN_REGION_BEGIN, /* shared-memory writes from here touch region only */
	ANN_REGION_END,   /* ... and from here any region again */
	ANN_REUSE,        /* a consumer point for region */
	ANN_STORE,        /* the statement starting here is a bulk store reading region */
};

struct ann {
	size_t off;
	enum ann_type type;
	int region;
};

struct ptx_async {
	struct ptx_kernel *k;
	struct ptx_async_stats *stats;
	enum ptx_async_policy policy[PTX_ASYNC_KINDS];
	struct ann *ann;
	size_t nann, capann;
	int in_region;
};

static uint32_t region_mask(int region)
{
	return region == PTX_ASYNC_ANY ? ALL_REGIONS : 1u << region;
}

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

/* ---------------------------------------------------------------- the IR */

enum item_type {
	IT_TEXT,  /* comment, blank line, directive: copied */
	IT_LABEL,
	IT_STMT,  /* one instruction */
	IT_REUSE, /* a ptx_async_reuse point: no text */
};

enum op {
	OP_OTHER, OP_BRA, OP_BRX, OP_EXIT, OP_TRAP, OP_CALL,
	OP_MMA, OP_MMA_COMMIT, OP_MMA_WAIT, OP_MMA_FENCE,
	OP_BULK_STORE, OP_BULK_COMMIT, OP_BULK_WAIT,
};

struct item {
	enum item_type type;
	enum op op;
	const char *s;        /* LABEL: its name; STMT: the statement, guard included, no ';' */
	size_t n;
	const char *line;     /* the text written out for it; NULL for a STMT: "\t<s>;\n" */
	size_t nline;
	int guarded;
	int semi;             /* a STMT written back on its own ends with ';' */
	int count;            /* wait_group N */
	uint32_t regions;     /* OTHER: shared-memory regions written; BULK_STORE: read; REUSE */
	/* tracked registers (indices into pass.ids): OP_MMA: a = accumulators, b = A fragments;
	 * other statements: a = named, b = written */
	size_t a, na, b, nb;
};

/* String keys (pointer, length into the body) to ints, open addressing. */
struct strtab {
	const char **key;
	size_t *len;
	int *val;
	size_t cap, count;
};

struct block {
	size_t first, last;    /* items */
	size_t succ[2];
	int nsucc;
	int brx;               /* also every label's block */
	int falls_off;         /* runs off the end of the body */
};

struct pass {
	struct ptx_kernel *k;
	struct ptx_async *a;
	const char *body;
	size_t len;
	struct item *it;
	size_t nit, capit;
	int *ids;
	size_t nids, capids;
	struct strtab regs;    /* registers a wgmma touches: the tracked ones, ids 0..nregs-1 */
	struct strtab labels;  /* label -> item */
	size_t nregs;
	struct block *bl;
	size_t nbl;
	size_t *blk_of;        /* item -> block */
	/* a state is width bytes: ages of nres resources, then a dirty flag per tracked register.
	 * Resources: [0, nregs) accumulators, [nregs, 2 nregs) A fragments, then the regions. */
	size_t nres, width;
	int *scratch;          /* room for the longest a + b list */
	size_t maxlist;
	struct ptx_async_stats st;
	int err;
};

/* Ages: not pending, issued but not committed, or committed with that many groups after it. */
#define AGE_NONE 127
#define AGE_OPEN (-1)
#define AGE_MAX 100

static int fail(struct pass *p, int err, const char *fmt, ...) WSN_PRINTF(3, 4);
static int fail(struct pass *p, int err, const char *fmt, ...)
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

static void strtab_free(struct strtab *t)
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
			fail(p, WSN_ENOMEM, "out of memory");
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
			return fail(p, WSN_ENOMEM, "out of memory");
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
				return fail(p, WSN_ENOMEM, "out of memory");
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
			return fail(p, WSN_EINVAL, "a bulk store helper did not emit a bulk store");
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
				return fail(p, WSN_EINVAL, "label %.*s placed twice", (int)i, t);
			if (strtab_add(&p->labels, t, i, (int)p->nit))
				return fail(p, WSN_ENOMEM, "out of memory");
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
					return fail(p, WSN_ENOTSUP, "more than %zu statements on one line", ns);
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

static int build_ir(struct pass *p)
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
		return fail(p, WSN_EINVAL, "a bulk store helper did not emit a bulk store");
	return 0;
}

/* Track the registers of every wgmma, then give each statement its tracked-register lists. */
static int collect_registers(struct pass *p)
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
					return fail(p, WSN_EINVAL, "wgmma without a {accumulator} list: %.*s",
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

static int is_terminator(const struct item *it)
{
	return it->type == IT_STMT && (it->op == OP_BRA || it->op == OP_BRX || it->op == OP_EXIT ||
				       it->op == OP_TRAP);
}

static int build_blocks(struct pass *p)
{
	if (!(p->bl = calloc(p->nit, sizeof(*p->bl))) || !(p->blk_of = calloc(p->nit, sizeof(*p->blk_of))))
		return fail(p, WSN_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->nit; i++) {
		if (!i || p->it[i].type == IT_LABEL || is_terminator(&p->it[i - 1]))
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
				return fail(p, WSN_EINVAL, "branch to a label not in the kernel: %.*s", (int)it->n,
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

		if (i == bl->last && is_terminator(it)) {
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

static int analyse_and_write(struct pass *p, struct ptx_buf *out)
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
		err = fail(p, WSN_ENOMEM, "out of memory");
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
		err = fail(p, WSN_ENOMEM, "out of memory");
out:
	free(in), free(cur), free(queue), free(queued), free(reached);
	return err;
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
	if ((err = build_ir(&p)))
		goto out;
	if (!p.st.async_ops[PTX_ASYNC_BULK] && !p.st.async_ops[PTX_ASYNC_WGMMA])
		goto out; /* nothing to track: the body stays as written */
	if ((err = collect_registers(&p)) || (err = build_blocks(&p)) || (err = analyse_and_write(&p, &out)))
		goto out;
	ptx_buf_free(body);
	*body = out;
	memset(&out, 0, sizeof(out));
out:
	if (!err && a->stats)
		*a->stats = p.st;
	ptx_buf_free(&out);
	free(p.it), free(p.ids), free(p.bl), free(p.blk_of), free(p.scratch);
	strtab_free(&p.regs);
	strtab_free(&p.labels);
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
