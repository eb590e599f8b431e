/* SPDX-License-Identifier: MIT */
/* codegen/ptx/emitter.c: the PTX emitter: text buffers, modules, kernels with declared registers, instructions. */
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

void ptx_module_comment(struct ptx_module *m, const char *fmt, ...)
{
	va_list ap;

	ptx_buf_printf(&m->text, "// ");
	va_start(ap, fmt);
	ptx_buf_vprintf(&m->text, fmt, ap);
	va_end(ap);
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

/* ---------------------------------------------------------------- instructions */

void ptx_comment(struct ptx_kernel *k, const char *fmt, ...)
{
	va_list ap;

	ptx_buf_printf(&k->body, "\t// ");
	va_start(ap, fmt);
	ptx_buf_vprintf(&k->body, fmt, ap);
	va_end(ap);
	ptx_buf_printf(&k->body, "\n");
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

/* "[addr]" or "[addr+off]" into buf. */
static const char *addr_str(char *buf, size_t n, const char *addr, long long off)
{
	if (off)
		snprintf(buf, n, "[%s%+lld]", addr, off);
	else
		snprintf(buf, n, "[%s]", addr);
	return buf;
}

void ptx_bra(struct ptx_kernel *k, const char *label)
{
	ptx_ins(k, "bra.uni %s", label);
}

void ptx_bra_div(struct ptx_kernel *k, const char *label)
{
	ptx_ins(k, "bra %s", label);
}

void ptx_ret(struct ptx_kernel *k)
{
	ptx_ins(k, "ret");
}

void ptx_loop_begin(struct ptx_kernel *k, struct ptx_loop *lp, const char *stem)
{
	char s[64];

	lp->head = ptx_label_new(k, stem);
	snprintf(s, sizeof(s), "%s_end", stem);
	lp->exit = ptx_label_new(k, s);
	ptx_label(k, lp->head);
}

void ptx_loop_break_if(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg)
{
	ptx_guard(k, pred, neg);
	ptx_ins(k, "bra %s", lp->exit);
}

void ptx_loop_end(struct ptx_kernel *k, struct ptx_loop *lp, const char *pred, int neg)
{
	if (pred) {
		ptx_guard(k, pred, neg);
		ptx_ins(k, "bra %s", lp->head);
	} else {
		ptx_bra(k, lp->head);
	}
	ptx_label(k, lp->exit);
}

void ptx_exit(struct ptx_kernel *k)
{
	ptx_ins(k, "exit");
}

void ptx_ld_param(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *param)
{
	ptx_ins(k, "ld.param%s %s, [%s]", type_names[t], dst, param);
}

void ptx_mov(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *src)
{
	ptx_ins(k, "mov%s %s, %s", type_names[t], dst, src);
}

void ptx_mov_imm(struct ptx_kernel *k, enum ptx_type t, const char *dst, long long v)
{
	ptx_ins(k, "mov%s %s, %lld", type_names[t], dst, v);
}

void ptx_mov_f32(struct ptx_kernel *k, const char *dst, float v)
{
	union { float f; uint32_t u; } c = { .f = v };

	ptx_ins(k, "mov.f32 %s, 0f%08X", dst, (unsigned)c.u);
}

void ptx_sreg(struct ptx_kernel *k, const char *dst, const char *sreg)
{
	ptx_ins(k, "mov.u32 %s, %s", dst, sreg);
}

void ptx_param_addr(struct ptx_kernel *k, const char *dst64, const char *param)
{
	ptx_ins(k, "mov.u64 %s, %s", dst64, param);
	ptx_ins(k, "cvta.param.u64 %s, %s", dst64, dst64);
}

void ptx_smem_addr(struct ptx_kernel *k, const char *dst32, const char *sym, long long off)
{
	if (off)
		ptx_ins(k, "mov.u32 %s, %s%+lld", dst32, sym, off);
	else
		ptx_ins(k, "mov.u32 %s, %s", dst32, sym);
}

static const char *ld_hint(enum ptx_cache c)
{
	switch (c) {
	case PTX_CACHE_STREAM: return ".L1::no_allocate.L2::256B";
	case PTX_CACHE_READONLY: return ".nc";
	case PTX_CACHE_LAST: return ".L1::no_allocate";
	default: return "";
	}
}

static const char *st_hint(enum ptx_cache c)
{
	return c == PTX_CACHE_STREAM ? ".cs" : "";
}

void ptx_ld_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *const r[4], const char *addr,
		      long long off)
{
	char a[128];

	ptx_ins(k, "ld.global%s.v4.b32 {%s, %s, %s, %s}, %s", ld_hint(c), r[0], r[1], r[2], r[3],
		addr_str(a, sizeof(a), addr, off));
}

void ptx_st_global_v4(struct ptx_kernel *k, enum ptx_cache c, const char *addr, long long off,
		      const char *const r[4])
{
	char a[128];

	ptx_ins(k, "st.global%s.v4.b32 %s, {%s, %s, %s, %s}", st_hint(c), addr_str(a, sizeof(a), addr, off),
		r[0], r[1], r[2], r[3]);
}

void ptx_ld_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *dst,
		   const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.global%s%s %s, %s", ld_hint(c), type_names[t], dst, addr_str(a, sizeof(a), addr, off));
}

void ptx_st_global(struct ptx_kernel *k, enum ptx_cache c, enum ptx_type t, const char *addr,
		   long long off, const char *src)
{
	char a[128];

	ptx_ins(k, "st.global%s%s %s, %s", st_hint(c), type_names[t], addr_str(a, sizeof(a), addr, off), src);
}

void ptx_ld_shared_v4(struct ptx_kernel *k, const char *const r[4], const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.shared.v4.b32 {%s, %s, %s, %s}, %s", r[0], r[1], r[2], r[3],
		addr_str(a, sizeof(a), addr, off));
}

void ptx_st_shared_v4(struct ptx_kernel *k, const char *addr, long long off, const char *const r[4])
{
	char a[128];

	ptx_ins(k, "st.shared.v4.b32 %s, {%s, %s, %s, %s}", addr_str(a, sizeof(a), addr, off), r[0], r[1],
		r[2], r[3]);
}

void ptx_ld_shared(struct ptx_kernel *k, enum ptx_type t, const char *dst, const char *addr, long long off)
{
	char a[128];

	ptx_ins(k, "ld.shared%s %s, %s", type_names[t], dst, addr_str(a, sizeof(a), addr, off));
}

void ptx_st_shared(struct ptx_kernel *k, enum ptx_type t, const char *addr, long long off, const char *src)
{
	char a[128];

	ptx_ins(k, "st.shared%s %s, %s", type_names[t], addr_str(a, sizeof(a), addr, off), src);
}

void ptx_cp_async_16(struct ptx_kernel *k, const char *saddr, long long soff, const char *gaddr,
		     long long goff)
{
	char a[128], b[128];

	ptx_ins(k, "cp.async.cg.shared.global %s, %s, 16", addr_str(a, sizeof(a), saddr, soff),
		addr_str(b, sizeof(b), gaddr, goff));
}

void ptx_cp_async_commit(struct ptx_kernel *k)
{
	ptx_ins(k, "cp.async.commit_group");
}

void ptx_cp_async_wait_group(struct ptx_kernel *k, int n)
{
	ptx_ins(k, "cp.async.wait_group %d", n);
}

void ptx_shfl_bfly(struct ptx_kernel *k, const char *dst, const char *src, int lanemask)
{
	ptx_ins(k, "shfl.sync.bfly.b32 %s, %s, %d, 0x1f, 0xffffffff", dst, src, lanemask);
}

void ptx_bar_sync(struct ptx_kernel *k, int id, unsigned count)
{
	if (count)
		ptx_ins(k, "bar.sync %d, %u", id, count);
	else
		ptx_ins(k, "bar.sync %d", id);
}

void ptx_bar_sync_reg(struct ptx_kernel *k, const char *id, unsigned count)
{
	ptx_ins(k, "bar.sync %s, %u", id, count);
}

void ptx_bar_warp_sync(struct ptx_kernel *k)
{
	ptx_ins(k, "bar.warp.sync 0xffffffff");
}

void ptx_elect_sync(struct ptx_kernel *k, const char *pred, const char *lane)
{
	ptx_ins(k, "elect.sync %s|%s, 0xffffffff", lane ? lane : "_", pred);
}

void ptx_unpack_bf16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed)
{
	/* a bf16 is the top half of an f32: shift the low element up, mask the high one */
	if (lo)
		ptx_ins(k, "shl.b32 %s, %s, 16", lo, packed);
	if (hi)
		ptx_ins(k, "and.b32 %s, %s, 0xffff0000", hi, packed);
}

void ptx_pack_bf16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi)
{
	/* the first source lands in the upper half */
	ptx_ins(k, "cvt.rn.bf16x2.f32 %s, %s, %s", packed, hi, lo);
}

void ptx_unpack_f16x2(struct ptx_kernel *k, const char *lo, const char *hi, const char *packed)
{
	const char *h0 = ptx_tmp(k, PTX_B16), *h1 = ptx_tmp(k, PTX_B16);

	ptx_ins(k, "mov.b32 {%s, %s}, %s", h0, h1, packed);
	if (lo)
		ptx_ins(k, "cvt.f32.f16 %s, %s", lo, h0);
	if (hi)
		ptx_ins(k, "cvt.f32.f16 %s, %s", hi, h1);
}

void ptx_pack_f16x2(struct ptx_kernel *k, const char *packed, const char *lo, const char *hi)
{
	ptx_ins(k, "cvt.rn.f16x2.f32 %s, %s, %s", packed, hi, lo);
}

void ptx_cvt_f32_bf16(struct ptx_kernel *k, const char *dst, const char *h)
{
	ptx_ins(k, "cvt.f32.bf16 %s, %s", dst, h);
}

void ptx_cvt_bf16_f32(struct ptx_kernel *k, const char *h, const char *src)
{
	ptx_ins(k, "cvt.rn.bf16.f32 %s, %s", h, src);
}

void ptx_cvt_f32_f16(struct ptx_kernel *k, const char *dst, const char *h)
{
	ptx_ins(k, "cvt.f32.f16 %s, %s", dst, h);
}

void ptx_cvt_f16_f32(struct ptx_kernel *k, const char *h, const char *src)
{
	ptx_ins(k, "cvt.rn.f16.f32 %s, %s", h, src);
}

void ptx_add_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "add.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_sub_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "sub.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_mul_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "mul.rn.f32 %s, %s, %s", d, a, b);
}

void ptx_fma_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b, const char *c)
{
	ptx_ins(k, "fma.rn.f32 %s, %s, %s, %s", d, a, b, c);
}

void ptx_rsqrt_f32(struct ptx_kernel *k, const char *d, const char *a)
{
	ptx_ins(k, "rsqrt.approx.f32 %s, %s", d, a);
}

void ptx_sqrt_rn_f32(struct ptx_kernel *k, const char *d, const char *a)
{
	ptx_ins(k, "sqrt.rn.f32 %s, %s", d, a);
}

void ptx_div_rn_f32(struct ptx_kernel *k, const char *d, const char *a, const char *b)
{
	ptx_ins(k, "div.rn.f32 %s, %s, %s", d, a, b);
}

/* ---------------------------------------------------------------- async */

void ptx_mbarrier_init(struct ptx_kernel *k, const char *bar, long long off, unsigned count)
{
	char a[128];

	ptx_ins(k, "mbarrier.init.shared::cta.b64 %s, %u", addr_str(a, sizeof(a), bar, off), count);
}

void ptx_mbarrier_arrive(struct ptx_kernel *k, const char *bar, long long off)
{
	char a[128];

	ptx_ins(k, "mbarrier.arrive.shared::cta.b64 _, %s", addr_str(a, sizeof(a), bar, off));
}

void ptx_mbarrier_arrive_expect_tx(struct ptx_kernel *k, const char *bar, long long off, unsigned bytes)
{
	char a[128];

	ptx_ins(k, "mbarrier.arrive.expect_tx.shared::cta.b64 _, %s, %u", addr_str(a, sizeof(a), bar, off),
		bytes);
}

void ptx_mbarrier_wait_parity(struct ptx_kernel *k, const char *bar, long long off, const char *parity)
{
	const char *p = ptx_tmp(k, PTX_PRED), *retry = ptx_label_new(k, "mbar_wait");
	char a[128];

	ptx_label(k, retry);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p,
		addr_str(a, sizeof(a), bar, off), parity);
	ptx_guard(k, p, 1);
	ptx_ins(k, "bra %s", retry);
}

void ptx_mbarrier_wait_parity_bounded(struct ptx_kernel *k, const char *bar, long long off, const char *parity,
				      unsigned long long timeout_ns)
{
	const char *p = ptx_tmp(k, PTX_PRED), *more = ptx_tmp(k, PTX_PRED);
	const char *t0 = ptx_tmp(k, PTX_U64), *t1 = ptx_tmp(k, PTX_U64);
	const char *retry = ptx_label_new(k, "mbar_wait"), *done = ptx_label_new(k, "mbar_done");
	char a[128];

	addr_str(a, sizeof(a), bar, off);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p, a, parity);
	ptx_guard(k, p, 0);
	ptx_ins(k, "bra %s", done);
	ptx_ins(k, "mov.u64 %s, %%globaltimer", t0);
	ptx_label(k, retry);
	ptx_ins(k, "mbarrier.try_wait.parity.shared::cta.b64 %s, %s, %s", p, a, parity);
	ptx_guard(k, p, 0);
	ptx_ins(k, "bra %s", done);
	ptx_ins(k, "mov.u64 %s, %%globaltimer", t1);
	ptx_ins(k, "sub.u64 %s, %s, %s", t1, t1, t0);
	ptx_ins(k, "setp.lt.u64 %s, %s, %llu", more, t1, timeout_ns);
	ptx_guard(k, more, 0);
	ptx_ins(k, "bra %s", retry);
	ptx_ins(k, "trap");
	ptx_label(k, done);
}

void ptx_mbarrier_expect_tx(struct ptx_kernel *k, const char *bar, long long off, const char *bytes)
{
	char a[128];

	ptx_ins(k, "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 %s, %s", addr_str(a, sizeof(a), bar, off), bytes);
}

void ptx_fence_proxy_async(struct ptx_kernel *k)
{
	ptx_ins(k, "fence.proxy.async.shared::cta");
}

void ptx_fence_mbarrier_init(struct ptx_kernel *k)
{
	ptx_ins(k, "fence.mbarrier_init.release.cluster");
}

void ptx_cp_async_bulk_g2s(struct ptx_kernel *k, const char *sdst, const char *gsrc, const char *bytes,
			   const char *bar)
{
	ptx_ins(k, "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%s], [%s], %s, [%s]",
		sdst, gsrc, bytes, bar);
}

void ptx_cp_async_ca(struct ptx_kernel *k, const char *sdst, const char *gsrc, int bytes)
{
	ptx_ins(k, "cp.async.ca.shared.global [%s], [%s], %d", sdst, gsrc, bytes);
}

void ptx_cp_async_mbarrier_arrive(struct ptx_kernel *k, const char *bar)
{
	ptx_ins(k, "cp.async.mbarrier.arrive.shared.b64 [%s]", bar);
}

void ptx_cp_async_bulk_s2g(struct ptx_kernel *k, const char *gdst, const char *ssrc, const char *bytes)
{
	ptx_ins(k, "cp.async.bulk.global.shared::cta.bulk_group [%s], [%s], %s", gdst, ssrc, bytes);
}

void ptx_cp_async_bulk_tensor_g2s(struct ptx_kernel *k, int dims, const char *sdst, const char *tmap,
				  const char *const coords[], const char *bar)
{
	char c[256] = "";
	size_t n = 0;

	if (dims < 1 || dims > 5) {
		kerr(k, WSN_EINVAL, "cp.async.bulk.tensor needs 1..5 dimensions", NULL);
		return;
	}
	for (int i = 0; i < dims; i++)
		n += (size_t)snprintf(c + n, sizeof(c) - n, "%s%s", i ? ", " : "", coords[i]);
	ptx_ins(k, "cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
		"[%s], [%s, {%s}], [%s]", dims, sdst, tmap, c, bar);
}

void ptx_bulk_commit_group(struct ptx_kernel *k)
{
	ptx_ins(k, "cp.async.bulk.commit_group");
}

void ptx_bulk_wait_group_read(struct ptx_kernel *k, int n)
{
	ptx_ins(k, "cp.async.bulk.wait_group.read %d", n);
}

void ptx_setmaxnreg(struct ptx_kernel *k, int inc, unsigned n)
{
	if (n % 8 || n < 24 || n > 256) {
		kerr(k, WSN_EINVAL, "setmaxnreg needs a multiple of 8 in 24..256", NULL);
		return;
	}
	ptx_ins(k, "setmaxnreg.%s.sync.aligned.u32 %u", inc ? "inc" : "dec", n);
}

void ptx_griddep_wait(struct ptx_kernel *k)
{
	ptx_ins(k, "griddepcontrol.wait");
}

void ptx_griddep_launch_dependents(struct ptx_kernel *k)
{
	ptx_ins(k, "griddepcontrol.launch_dependents");
}

void ptx_cluster_sync(struct ptx_kernel *k)
{
	ptx_ins(k, "barrier.cluster.arrive.release.aligned");
	ptx_ins(k, "barrier.cluster.wait.acquire.aligned");
}

void ptx_mapa(struct ptx_kernel *k, const char *dst, const char *src, const char *rank)
{
	ptx_ins(k, "mapa.shared::cluster.u32 %s, %s, %s", dst, src, rank);
}

void ptx_st_async_f32(struct ptx_kernel *k, const char *addr, long long off, int n, const char *const r[],
		      const char *rbar)
{
	char a[128];

	addr_str(a, sizeof(a), addr, off);
	if (n == 4)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 %s, {%s, %s, %s, %s}, [%s]", a,
			r[0], r[1], r[2], r[3], rbar);
	else if (n == 2)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 %s, {%s, %s}, [%s]", a, r[0], r[1],
			rbar);
	else if (n == 1)
		ptx_ins(k, "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 %s, %s, [%s]", a, r[0], rbar);
	else
		kerr(k, WSN_EINVAL, "st.async takes 1, 2 or 4 values", NULL);
}
