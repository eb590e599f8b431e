/* SPDX-License-Identifier: MIT */
/* codegen/ptx/async_pass.h: the async-group pass's internals shared by async.c (tracker, driver), async_ir.c and async_analysis.c. */
#ifndef WSN_ASYNC_PASS_H
#define WSN_ASYNC_PASS_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/ptx/async_pass.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "async.h"

#include <stddef.h>
#include <stdint.h>

#define ALL_REGIONS 0xffffffffu

/* ---- the tracker's record (async.c) ---- */

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

/* The region's bit, or every region's for PTX_ASYNC_ANY. */
static inline uint32_t region_mask(int region)
{
	return region == PTX_ASYNC_ANY ? ALL_REGIONS : 1u << region;
}

/* ---- the IR (async_ir.c) ---- */

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

/* Record the pass's first error as the kernel's ("async: ..."); returns the pass's error. */
int wsn__async_fail(struct pass *p, int err, const char *fmt, ...) WSN_PRINTF(3, 4);
/* Free a string table's arrays. */
void wsn__async_strtab_free(struct strtab *t);
/* Read the body into items (text, labels, statements with the tracker's annotations). 0 or an error. */
int wsn__async_build_ir(struct pass *p);
/* Track the registers of every wgmma, then give each statement its tracked-register lists. */
int wsn__async_collect_registers(struct pass *p);
/* Does the item end a block: a branch, exit or trap? */
int wsn__async_is_terminator(const struct item *it);
/* Split the items into basic blocks and link each to its successors. 0 or an error. */
int wsn__async_build_blocks(struct pass *p);

/* ---- the analysis (async_analysis.c) ---- */
/* Simulate the pending groups over the blocks to a fixed point, then write the body to out with the
 * waits inserted. 0 or an error. */
int wsn__async_analyse_and_write(struct pass *p, struct ptx_buf *out);

#endif
