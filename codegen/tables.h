/* SPDX-License-Identifier: MIT */
/* codegen/tables.h: measured data the planners read: the ws shape table and the auto-selection rules. */
#ifndef WSN_CODEGEN_TABLES_H
#define WSN_CODEGEN_TABLES_H

#ifndef WSN_LAYER_CODEGEN
#error "codegen/tables.h is private to codegen (docs/DESIGN.md, Layers)"
#endif

#include "core/params.h"

/* A dtype mask of a table row: WSN_DTYPE_BIT(WSN_BF16) | ...; 0 in a row: any dtype. */
#define WSN_DTYPE_BIT(d) (1 << (d))

/*
 * A row of the ws shape table: for the op and row bytes (hidden x element size), and where it names
 * one, the GPU model and a range of rows per SM, split the row over
 * `cluster` CTAs and, where bdimx is set, plan the shape (bdimx, bdimy, unroll, stages) as if forced.
 * Rows are tried in order, the first that matches and fits is taken (plan_ws.c says how).
 */
struct wsn__ws_shape_row {
	const char *note;             /* the bench/NOTES.md section that justifies the row ("v30") */
	int arch;                     /* the architecture the row was measured on (90: H100); 0: any */
	enum wsn_op op;
	int dtypes;                   /* WSN_DTYPE_BIT() mask of the dtypes it holds for; 0: any */
	int64_t min_bytes, max_bytes; /* row bytes, inclusive */
	int64_t max_rows_per_sm;      /* only up to these rows per SM (rows / SMs); 0: any */
	unsigned cluster;             /* CTAs a row is split over (1: whole rows) */
	unsigned bdimx, bdimy, unroll, stages; /* the shape; 0: the search's */
	int stats_ring;               /* with the shape: the rows' statistics copied into each stage */
	const char *gpu;              /* the GPU model it holds for ("H200"); NULL: any of its architecture */
	int64_t min_rows_per_sm;      /* only from these rows per SM; 0: any */
};

/*
 * A row of the auto-selection rules: for the op, dtypes and hidden range, ws is picked when its
 * heuristic calls the plan good and each SM gets more than min_rows_per_sm rows; else multi-wave.
 * The first row that matches decides; no row: multi-wave.
 */
struct wsn__auto_rule {
	const char *note;             /* the bench/NOTES.md section that justifies the row */
	int arch;                     /* the architecture it was measured on; 0: any */
	enum wsn_op op;
	int dtypes;                   /* WSN_DTYPE_BIT() mask; 0: any */
	int64_t min_hidden, max_hidden; /* inclusive */
	int64_t min_rows_per_sm;      /* ws only above these rows per SM */
	int shape_only;               /* only where the ws plan took a row of the shape table */
};

extern const struct wsn__ws_shape_row wsn__ws_shape_table[];
extern const size_t wsn__ws_shape_table_len;
extern const struct wsn__auto_rule wsn__auto_rules[];
extern const size_t wsn__auto_rules_len;

#endif
