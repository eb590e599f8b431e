/* SPDX-License-Identifier: MIT */
/* codegen/tables.c: the measured ws shapes and the auto-selection rules, as data (H100 and H200 rows; see bench/NOTES.md). */
#include "tables.h"

#define LN_BWD WSN_LAYERNORM_BWD
#define RMS_BWD WSN_RMSNORM_BWD
#define BF16 WSN_DTYPE_BIT(WSN_BF16)
#define F16 WSN_DTYPE_BIT(WSN_F16)
#define F32 WSN_DTYPE_BIT(WSN_F32)
#define DT16 (BF16 | F16)
#define ANY INT64_MAX

/*
 * The ws shape table. A row either splits a row that one CTA could hold over a cluster (bdimx 0:
 * the search picks the shape) or also gives the shape measured best there. Shape rows hold for the
 * architecture they were measured on, cover row bytes up to an eighth past the measured width, and
 * may hold only for some dtypes (f16 needs more registers per vector than bf16) or only up to a
 * number of rows per SM; the rows for fewer rows per SM come first. A shape that does not fit the
 * budgets, or leaves a row group without rows, passes to the next row that matches.
 */
const struct wsn__ws_shape_row wsn__ws_shape_table[] = {
	/* note  arch op      dtypes  row bytes  max rows/SM cluster bdimx bdimy unroll stages stats_ring gpu min rows/SM */
	/* the H200 at many rows: autotune's winners there, ahead of the rows measured on the H100 */
	{ "v33", 90, LN_BWD,  BF16,  6144,  6911,  0, 4,  32, 8, 2, 16, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16,  8192,  9215,  0, 2, 128, 3, 1, 15, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 12288, 13823,  0, 2, 128, 2, 1, 10, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 16384, 18431,  0, 4,  64, 4, 1, 16, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 24576, 27647,  0, 2, 128, 2, 1,  4, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 32768, 36863,  0, 4, 128, 2, 1,  8, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 49152, 55295,  0, 8, 128, 3, 1,  9, 0, "H200", 64 },
	{ "v33", 90, LN_BWD,  BF16, 65536, 73727,  0, 8, 128, 2, 1,  8, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16,  2048,  2303,  0, 1,  64, 6, 1, 12, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16,  4096,  4607,  0, 2,  64, 6, 1, 12, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16,  6144,  6911,  0, 2,  32, 4, 1, 16, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16,  8192,  9215,  0, 4,  64, 6, 1, 12, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16, 32768, 36863,  0, 8,  32, 8, 1, 16, 0, "H200", 64 },
	{ "v33", 90, RMS_BWD, BF16, 49152, 55295,  0, 8, 128, 2, 1, 10, 0, "H200", 64 },
	{ "v27", 90, LN_BWD,  DT16,  2048,  2303, 16, 1,  64, 4, 2, 16, 0, NULL, 0 },
	{ "v27", 90, LN_BWD,  DT16,  4096,  4607, 16, 4,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v27", 90, RMS_BWD, BF16,  4096,  4607, 16, 4,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v27", 90, LN_BWD,  DT16,  8192,  9215, 92, 4,  64, 6, 1, 12, 0, NULL, 0 },
	{ "v27", 90, RMS_BWD, DT16,  8192,  9215, 92, 4,  64, 6, 1, 12, 0, NULL, 0 },
	{ "v27", 90, RMS_BWD, DT16, 16384, 18431, 62, 8,  64, 6, 1, 12, 0, NULL, 0 },
	{ "v27", 90, LN_BWD,  DT16, 65536, 73727, 62, 8, 128, 2, 1,  8, 0, NULL, 0 },
	{ "v27", 90, RMS_BWD, F16,  32768, 36863, 31, 8,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v27", 90, RMS_BWD, DT16, 65536, 73727, 31, 8, 128, 2, 1,  8, 0, NULL, 0 },
	{ "v30", 90, LN_BWD,  DT16,  4096,  4607,  0, 2,  64, 4, 2, 12, 1, NULL, 0 },
	{ "v25", 90, LN_BWD,  BF16,  4608,  5119,  0, 4,  32, 8, 2, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  BF16,  5120,  5759,  0, 2,  32, 4, 1, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  F16,   5120,  5759,  0, 2,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  DT16,  6144,  6911,  0, 4,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  BF16,  9216, 10239,  0, 8,  32, 8, 2, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  BF16, 10240, 11519,  0, 2,  64, 2, 1, 12, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  F16,  10240, 11519,  0, 4,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  BF16, 20480, 23039,  0, 8,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v25", 90, LN_BWD,  F16,  20480, 23039,  0, 8,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v19", 90, LN_BWD,  0,    16384, 18431,  0, 8,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  BF16,  2048,  2303,  0, 1,  64, 6, 1, 12, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  DT16,  3072,  3455,  0, 2,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  F16,   4608,  5119,  0, 2,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  BF16,  7168,  8063,  0, 2, 128, 3, 1, 15, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  F16,   9216, 10239,  0, 2, 128, 2, 1, 14, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  DT16, 14336, 16127,  0, 4, 128, 3, 1, 15, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  BF16, 24576, 27647,  0, 8,  64, 2, 2, 10, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  F16,  24576, 27647,  0, 8, 128, 2, 2, 10, 0, NULL, 0 },
	{ "v26", 90, LN_BWD,  DT16, 32768, 36863,  0, 8, 128, 3, 1, 15, 0, NULL, 0 },
	{ "v26", 90, RMS_BWD, BF16,  4608,  5119,  0, 2,  32, 4, 1, 16, 0, NULL, 0 },
	{ "v26", 90, RMS_BWD, BF16,  7168,  8063,  0, 4,  64, 6, 1, 12, 0, NULL, 0 },
	{ "v26", 90, RMS_BWD, BF16,  9216, 10239,  0, 4,  64, 4, 1, 16, 0, NULL, 0 },
	{ "v19", 90, RMS_BWD, 0,     2048,  2303,  0, 1,  64, 4, 1, 12, 0, NULL, 0 },
	{ "v19", 90, RMS_BWD, 0,     4096,  4607,  0, 2,  64, 4, 1, 12, 0, NULL, 0 },
	{ "v25", 90, RMS_BWD, DT16,  5120,  5759,  0, 2,  32, 4, 1, 16, 0, NULL, 0 },
	{ "v25", 90, RMS_BWD, DT16,  6144,  6911,  0, 4,  32, 8, 1, 16, 0, NULL, 0 },
	{ "v5",   0, LN_BWD,  0,     4096,  6143,  0, 4,   0, 0, 0,  0, 0, NULL, 0 },
	{ "v5",   0, LN_BWD,  0,     6144, 24575,  0, 8,   0, 0, 0,  0, 0, NULL, 0 },
	{ "v5",   0, LN_BWD,  0,    24576, 49151,  0, 2,   0, 0, 0,  0, 0, NULL, 0 },
	{ "v8",   0, RMS_BWD, 0,     6144, 12287,  0, 8,   0, 0, 0,  0, 0, NULL, 0 },
	{ "v5",   0, RMS_BWD, 0,    12288, 49151,  0, 2,   0, 0, 0,  0, 0, NULL, 0 },
};
const size_t wsn__ws_shape_table_len = WSN_ARRAY_SIZE(wsn__ws_shape_table);

/*
 * The auto-selection rules (ws or multi-wave when the approach is auto). Below a rule's rows per SM
 * the ring's fill and drain are not covered; past 16K the ws kernels split each row over a cluster
 * while multi-wave re-reads it, so ws at any row count. The forward has no row: multi-wave.
 */
const struct wsn__auto_rule wsn__auto_rules[] = {
	/* note arch op      dtypes   hidden     rows/SM shape_only */
	{ "v28", 0, LN_BWD,  F32,     1,  2048, 12, 0 },
	{ "v28", 0, RMS_BWD, F32,     1,  2048, 12, 0 },
	{ "v28", 0, LN_BWD,  0,    4096, 16384,  0, 0 },
	{ "v28", 0, LN_BWD,  0,   16385,   ANY,  0, 0 },
	{ "v28", 0, LN_BWD,  0,    2049,  4095,  0, 0 },
	{ "v28", 0, LN_BWD,  0,    1025,  2048,  0, 0 },
	{ "v28", 0, LN_BWD,  0,       1,  1024,  0, 0 },
	{ "v28", 0, RMS_BWD, 0,    4096, 16384,  0, 0 },
	{ "v28", 0, RMS_BWD, 0,   16385,   ANY,  0, 0 },
	{ "v28", 0, RMS_BWD, 0,    2049,  4095,  1, 1 },
	{ "v28", 0, RMS_BWD, 0,    1025,  2048,  1, 0 },
	{ "v28", 0, RMS_BWD, 0,       1,  1024,  0, 0 },
};
const size_t wsn__auto_rules_len = WSN_ARRAY_SIZE(wsn__auto_rules);
