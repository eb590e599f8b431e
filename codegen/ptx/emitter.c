/* SPDX-License-Identifier: MIT */
/* codegen/ptx/emitter.c: the PTX emitter's core: text buffers, modules, kernels with declared registers, labels, raw instructions. */
#include "emitter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const type_names[PTX_TYPE_COUNT] = {
	[PTX_PRED] = ".pred", [PTX_B16] = ".b16", [PTX_B32] = ".b32", [PTX_B64] = ".b64",
	[PTX_U16] = ".u16", [PTX_U32] = ".u32", [PTX_U64] = ".u64", [PTX_S32] = ".s32",
	[PTX_S64] = ".s64", [PTX_F32] = ".f32",
};

const char *ptx_type_name(enum ptx_type t)
{
	return (unsigned)t < PTX_TYPE_COUNT ? type_names[t] : ".b32";
}

/* ---------------------------------------------------------------- buffers */

void ptx_buf_vprintf(struct ptx_buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	int n;

	if (b->oom)
		return;
	va_copy(aq, ap);
	n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, aq);
	va_end(aq);
	if (n < 0) {
		b->oom = 1;
		return;
	}
	if (!b->s || b->len + (size_t)n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *s;

		while (cap < b->len + (size_t)n + 1)
			cap *= 2;
		if (!(s = realloc(b->s, cap))) {
			b->oom = 1;
			return;
		}
		b->s = s;
		b->cap = cap;
		vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
	}
	b->len += (size_t)n;
}

void ptx_buf_printf(struct ptx_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ptx_buf_vprintf(b, fmt, ap);
	va_end(ap);
}

void ptx_buf_free(struct ptx_buf *b)
{
	free(b->s);
	memset(b, 0, sizeof(*b));
}

/* ---------------------------------------------------------------- modules */

int ptx_module_init(struct ptx_module *m, int arch)
{
	memset(m, 0, sizeof(*m));
	if (arch != 90 && arch != 100)
		return m->err = wsn__error(WSN_EINVAL, "ptx: unsupported arch %d (expected 90 or 100)", arch);
	m->arch = arch;
	/* sm_90a needs PTX 8.0+ (setmaxnreg, elect.sync); 8.3 is accepted by every CUDA 12.3+ driver.
	 * sm_100a needs PTX 8.6. */
	ptx_buf_printf(&m->text, ".version %s\n.target %s\n.address_size 64\n\n",
		       arch == 100 ? "8.6" : "8.3", arch == 100 ? "sm_100a" : "sm_90a");
	return 0;
}

/* A "//" comment line of b, after indent. */
static void buf_comment(struct ptx_buf *b, const char *indent, const char *fmt, va_list ap)
{
	ptx_buf_printf(b, "%s// ", indent);
	ptx_buf_vprintf(b, fmt, ap);
	ptx_buf_printf(b, "\n");
}

void ptx_module_comment(struct ptx_module *m, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_comment(&m->text, "", fmt, ap);
	va_end(ap);
}

void ptx_module_clauses(struct ptx_module *m, const char *text)
{
	while (*text) {
		const char *end = strstr(text, "; ");
		int n = end ? (int)(end - text) : (int)strlen(text);

		ptx_module_comment(m, "  %.*s", n, text);
		text += n + (end ? 2 : 0);
	}
	ptx_buf_printf(&m->text, "\n");
}

void ptx_module_extern_smem(struct ptx_module *m, const char *name, int align)
{
	ptx_buf_printf(&m->text, ".extern .shared .align %d .b8 %s[];\n\n", align, name);
}

int ptx_module_take(struct ptx_module *m, char **out)
{
	int err = m->err;

	*out = NULL;
	if (!err && m->text.oom)
		err = wsn__error(WSN_ENOMEM, "ptx: out of memory writing the module");
	if (err) {
		ptx_module_free(m);
		return err;
	}
	*out = m->text.s;
	memset(m, 0, sizeof(*m));
	return 0;
}

void ptx_module_free(struct ptx_module *m)
{
	ptx_buf_free(&m->text);
	memset(m, 0, sizeof(*m));
}

/* ---------------------------------------------------------------- kernels */

struct reg {
	char *name; /* "%name" */
	enum ptx_type type;
};

struct ptx_kernel {
	struct ptx_module *m;
	char name[128];
	struct ptx_buf params, directives, shared, body;
	int nparams;
	struct reg *regs;       /* in creation order */
	size_t nregs, capregs;
	size_t *hash;           /* open addressing: index + 1 into regs, 0 empty */
	size_t hashcap;
	char **strings;         /* labels and other interned names */
	size_t nstrings, capstrings;
	unsigned seq;
	char guard[80];
	int err;
	ptx_end_hook end_fn;    /* a pass run by ptx_kernel_end (ptx_kernel_on_end) */
	void *end_ctx;
};

static int kerr(struct ptx_kernel *k, int err, const char *msg, const char *what)
{
	if (!k->err)
		k->err = wsn__error(err, "ptx: kernel %s: %s%s%s", k->name, msg, what ? " " : "",
				    what ? what : "");
	return k->err;
}

static char *intern(struct ptx_kernel *k, const char *s)
{
	char *c;

	if (k->nstrings == k->capstrings) {
		size_t cap = k->capstrings ? 2 * k->capstrings : 64;
		char **n = realloc(k->strings, cap * sizeof(*n));
		if (!n) {
			kerr(k, WSN_ENOMEM, "out of memory", NULL);
			return NULL;
		}
		k->strings = n;
		k->capstrings = cap;
	}
	if (!(c = strdup(s))) {
		kerr(k, WSN_ENOMEM, "out of memory", NULL);
		return NULL;
	}
	k->strings[k->nstrings++] = c;
	return c;
}

struct ptx_kernel *ptx_kernel_begin(struct ptx_module *m, const char *name)
{
	struct ptx_kernel *k = calloc(1, sizeof(*k));

	if (!k) {
		if (!m->err)
			m->err = wsn__error(WSN_ENOMEM, "ptx: out of memory starting kernel %s", name);
		return NULL;
	}
	k->m = m;
	snprintf(k->name, sizeof(k->name), "%s", name);
	return k;
}

void ptx_param(struct ptx_kernel *k, enum ptx_type t, const char *name)
{
	ptx_buf_printf(&k->params, "%s\t.param %s %s", k->nparams ? ",\n" : "", type_names[t], name);
	k->nparams++;
}

void ptx_param_tensormap(struct ptx_kernel *k, const char *name)
{
	ptx_buf_printf(&k->params, "%s\t.param .align 64 .b8 %s[128]", k->nparams ? ",\n" : "", name);
	k->nparams++;
}

void ptx_kernel_shared(struct ptx_kernel *k, const char *name, unsigned bytes, int align)
{
	ptx_buf_printf(&k->shared, "\t.shared .align %d .b8 %s[%u];\n", align, name, bytes);
}

void ptx_kernel_maxnreg(struct ptx_kernel *k, unsigned n)
{
	ptx_buf_printf(&k->directives, ".maxnreg %u\n", n);
}

void ptx_kernel_launch_bounds(struct ptx_kernel *k, unsigned maxntid, unsigned minctas)
{
	if (maxntid)
		ptx_buf_printf(&k->directives, ".maxntid %u, 1, 1\n", maxntid);
	if (minctas)
		ptx_buf_printf(&k->directives, ".minnctapersm %u\n", minctas);
}

static void kernel_free(struct ptx_kernel *k)
{
	for (size_t i = 0; i < k->nregs; i++)
		free(k->regs[i].name);
	for (size_t i = 0; i < k->nstrings; i++)
		free(k->strings[i]);
	free(k->regs);
	free(k->hash);
	free(k->strings);
	ptx_buf_free(&k->params);
	ptx_buf_free(&k->directives);
	ptx_buf_free(&k->shared);
	ptx_buf_free(&k->body);
	free(k);
}

int ptx_kernel_end(struct ptx_kernel *k)
{
	struct ptx_module *m = k->m;
	struct ptx_buf *t = &m->text;
	int err;

	if (k->end_fn) {
		ptx_end_hook fn = k->end_fn;
		int e;

		k->end_fn = NULL;
		e = fn(k, k->end_ctx, k->err);
		if (e < 0 && !k->err)
			k->err = e;
	}
	err = k->err;
	if (!err && (k->params.oom || k->directives.oom || k->shared.oom || k->body.oom))
		err = kerr(k, WSN_ENOMEM, "out of memory", NULL);
	if (err) {
		if (!m->err)
			m->err = err;
		kernel_free(k);
		return err;
	}
	ptx_buf_printf(t, ".visible .entry %s(\n%s\n)\n%s{\n", k->name, k->params.s ? k->params.s : "",
		       k->directives.s ? k->directives.s : "");
	/* declarations grouped by type, eight to a line */
	for (int ty = 0; ty < PTX_TYPE_COUNT; ty++) {
		int n = 0;
		for (size_t i = 0; i < k->nregs; i++) {
			if (k->regs[i].type != (enum ptx_type)ty)
				continue;
			if (n % 8)
				ptx_buf_printf(t, ", %s", k->regs[i].name);
			else
				ptx_buf_printf(t, "\t.reg %s %s", type_names[ty], k->regs[i].name);
			if (++n % 8 == 0)
				ptx_buf_printf(t, ";\n");
		}
		if (n % 8)
			ptx_buf_printf(t, ";\n");
	}
	ptx_buf_printf(t, "%s\n%s}\n\n", k->shared.s ? k->shared.s : "", k->body.s ? k->body.s : "");
	kernel_free(k);
	if (t->oom && !m->err)
		m->err = wsn__error(WSN_ENOMEM, "ptx: out of memory writing the module");
	return m->err;
}

const char *ptx_kernel_name(const struct ptx_kernel *k)
{
	return k->name;
}

struct ptx_buf *ptx_kernel_body(struct ptx_kernel *k)
{
	return &k->body;
}

int ptx_kernel_fail(struct ptx_kernel *k, int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (k->err)
		return k->err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return kerr(k, err, msg, NULL);
}

int ptx_kernel_on_end(struct ptx_kernel *k, ptx_end_hook fn, void *ctx)
{
	if (k->end_fn)
		return WSN_EBUSY;
	k->end_fn = fn;
	k->end_ctx = ctx;
	return 0;
}

/* ---------------------------------------------------------------- registers and labels */

static size_t hash_str(const char *s)
{
	size_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

static int hash_grow(struct ptx_kernel *k)
{
	size_t cap = k->hashcap ? 2 * k->hashcap : 256;
	size_t *h = calloc(cap, sizeof(*h));

	if (!h)
		return kerr(k, WSN_ENOMEM, "out of memory", NULL);
	for (size_t i = 0; i < k->nregs; i++) {
		size_t j = hash_str(k->regs[i].name) & (cap - 1);
		while (h[j])
			j = (j + 1) & (cap - 1);
		h[j] = i + 1;
	}
	free(k->hash);
	k->hash = h;
	k->hashcap = cap;
	return 0;
}

static const char *const special_regs[] = {
	"%tid", "%ntid", "%laneid", "%warpid", "%nwarpid", "%ctaid", "%nctaid", "%smid", "%nsmid",
	"%gridid", "%clock", "%clock64", "%globaltimer", "%pm0", "%envreg0", "%lanemask_eq",
	"%dynamic_smem_size", "%total_smem_size", "%clusterid", "%cluster_ctaid", "%cluster_ctarank",
	"%cluster_nctarank", "%nclusterid", "%is_explicit_cluster", "%aggr_smem_size",
};

static const char *reg_named(struct ptx_kernel *k, enum ptx_type t, const char *name)
{
	char full[96];
	size_t j;

	if (k->err)
		return "%err";
	if (snprintf(full, sizeof(full), "%%%s", name) >= (int)sizeof(full)) {
		kerr(k, WSN_EINVAL, "register name too long:", name);
		return "%err";
	}
	for (size_t i = 0; i < WSN_ARRAY_SIZE(special_regs); i++)
		if (!strcmp(full, special_regs[i])) {
			kerr(k, WSN_EINVAL, "register name clashes with a special register:", full);
			return "%err";
		}
	if (2 * (k->nregs + 1) > k->hashcap && hash_grow(k))
		return "%err";
	for (j = hash_str(full) & (k->hashcap - 1); k->hash[j]; j = (j + 1) & (k->hashcap - 1)) {
		struct reg *r = &k->regs[k->hash[j] - 1];
		if (!strcmp(r->name, full)) {
			if (r->type != t) {
				kerr(k, WSN_EINVAL, "register redeclared with another type:", full);
				return "%err";
			}
			return r->name;
		}
	}
	if (k->nregs == k->capregs) {
		size_t cap = k->capregs ? 2 * k->capregs : 256;
		struct reg *n = realloc(k->regs, cap * sizeof(*n));
		if (!n) {
			kerr(k, WSN_ENOMEM, "out of memory", NULL);
			return "%err";
		}
		k->regs = n;
		k->capregs = cap;
	}
	if (!(k->regs[k->nregs].name = strdup(full))) {
		kerr(k, WSN_ENOMEM, "out of memory", NULL);
		return "%err";
	}
	k->regs[k->nregs].type = t;
	k->hash[j] = ++k->nregs;
	return k->regs[k->nregs - 1].name;
}

const char *ptx_reg(struct ptx_kernel *k, enum ptx_type t, const char *fmt, ...)
{
	char name[96];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return reg_named(k, t, name);
}

const char *ptx_tmp(struct ptx_kernel *k, enum ptx_type t)
{
	static const char *const stem[PTX_TYPE_COUNT] = {
		[PTX_PRED] = "tp", [PTX_B16] = "th", [PTX_B32] = "tb", [PTX_B64] = "tq",
		[PTX_U16] = "tus", [PTX_U32] = "tu", [PTX_U64] = "tul", [PTX_S32] = "ts",
		[PTX_S64] = "tsl", [PTX_F32] = "tf",
	};
	return ptx_reg(k, t, "%s%u", stem[t], k->seq++);
}

const char *ptx_label_new(struct ptx_kernel *k, const char *stem)
{
	char name[96];
	const char *s;

	snprintf(name, sizeof(name), "$L%s_%u", stem, k->seq++);
	s = intern(k, name);
	return s ? s : "$Lerr";
}

void ptx_label(struct ptx_kernel *k, const char *label)
{
	ptx_buf_printf(&k->body, "%s:\n", label);
}

/* ---------------------------------------------------------------- comments and raw instructions */

void ptx_comment(struct ptx_kernel *k, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_comment(&k->body, "\t", fmt, ap);
	va_end(ap);
}

void ptx_blank(struct ptx_kernel *k)
{
	ptx_buf_printf(&k->body, "\n");
}

void ptx_guard(struct ptx_kernel *k, const char *pred, int neg)
{
	snprintf(k->guard, sizeof(k->guard), "@%s%s ", neg ? "!" : "", pred);
}

void ptx_ins(struct ptx_kernel *k, const char *fmt, ...)
{
	va_list ap;

	ptx_buf_printf(&k->body, "\t%s", k->guard);
	k->guard[0] = 0;
	va_start(ap, fmt);
	ptx_buf_vprintf(&k->body, fmt, ap);
	va_end(ap);
	ptx_buf_printf(&k->body, ";\n");
}
