/* SPDX-License-Identifier: MIT */
/* codegen/tables.c: the measured ws shapes and the auto-selection rules, as data (H100 rows; see bench/NOTES.md). */
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
	/* note arch op    dtypes  bytes from - to  rows/SM cluster bdimx bdimy unroll stages stats */
	{ "v27", 90, LN_BWD,  DT16,  2048,  2303, 16, 1,  64, 4, 2, 16, 0,
	  "LayerNorm bwd 1K at 2048 rows (15 per SM): 1.30 with 4 groups of 64 threads and 2 rows a stage vs " "multi-wave's 1.22 and 1.25 with the shape for more rows (bf16, f16)" },
	{ "v27", 90, LN_BWD,  DT16,  4096,  4607, 16, 4,  32, 8, 1, 16, 0,
	  "LayerNorm bwd 2K at 2048 rows (15 per SM): 1.67-1.69 over 4 with 8 groups of 32 threads and a row a stage " "vs 1.54 whole with 4 groups of 64, 1.64 over 2 and multi-wave's 1.21-1.22 (f16 1.74-1.78 vs 1.57)" },
	{ "v27", 90, RMS_BWD, BF16,  4096,  4607, 16, 4,  32, 8, 1, 16, 0,
	  "RMSNorm bwd bf16 2K at 2048 rows (15 per SM): 1.80-1.85 over 4 with 8 groups of 32 threads and a row a " "stage vs 1.74 whole with 4 groups of 64, 1.78-1.82 over 2 and multi-wave's 1.65" },
	{ "v27", 90, LN_BWD,  DT16,  8192,  9215, 92, 4,  64, 6, 1, 12, 0,
	  "LayerNorm bwd 4K at 2048/4096/8192 rows (15/31/62 per SM): 2.11/2.44/2.66 over 4 with 6 groups of 64 " "threads and a row a stage vs 2.00/2.25/2.37 with the search's shape over 8 (f16 +3-7 %); level at 93 per " "SM" },
	{ "v27", 90, RMS_BWD, DT16,  8192,  9215, 92, 4,  64, 6, 1, 12, 0,
	  "RMSNorm bwd 4K at 2048/4096/8192 rows (15/31/62 per SM): 2.23/2.51/2.71 over 4 with 6 groups of 64 " "threads and a row a stage vs 2.16/2.33/2.50 with the search's shape over 8 (f16 +3-4 %); level at 93 per " "SM" },
	{ "v27", 90, RMS_BWD, DT16, 16384, 18431, 62, 8,  64, 6, 1, 12, 0,
	  "RMSNorm bwd 8K at 2048/4096/8192 rows (15/31/62 per SM): 2.53/2.72/2.80 over 8 with 6 groups of 64 " "threads and a row a stage vs 2.39/2.64/2.73 with the search's shape (f16 the same)" },
	{ "v27", 90, LN_BWD,  DT16, 65536, 73727, 62, 8, 128, 2, 1,  8, 0,
	  "LayerNorm bwd 32K at 2048/4096/8192 rows (15/31/62 per SM): 2.63/2.70/2.74 over 8 with 2 groups of 128 " "threads and a row a stage vs 2.12/2.47/2.67 with the search's shape (f16 2.64/2.71/2.74 vs " "2.34/2.55/2.61)" },
	{ "v27", 90, RMS_BWD, F16,   32768, 36863, 31, 8,  64, 4, 1, 16, 0,
	  "RMSNorm bwd f16 16K at 4096 rows (31 per SM): 2.78 over 8 with 4 groups of 64 threads and a row a stage " "vs 2.62 over 2 with the search's shape (bf16 2.75-2.77 there already)" },
	{ "v27", 90, RMS_BWD, DT16, 65536, 73727, 31, 8, 128, 2, 1,  8, 0,
	  "RMSNorm bwd 32K at 2048/4096 rows (15/31 per SM): 2.71/2.74 over 8 with 2 groups of 128 threads and a " "row a stage vs 2.41/2.65 with the search's shape (f16 2.71/2.74 vs 2.50/2.63)" },
	{ "v30", 90, LN_BWD,  DT16,  4096,  4607,  0, 2,  64, 4, 2, 12, 1,
	  "LayerNorm bwd 2K: 2.82-2.85 over 2 with 4 groups of 64 threads, 2 rows a stage, 12 stages and the " "statistics copied into each stage vs 2.69-2.73 over 4 with 8 groups of 32 (f16 2.83-2.85 vs 2.75-2.77), " "each call starting on the SMs the one before leaves; 2.60-2.62 vs 2.69-2.70 where each call waits for " "the one before" },
	{ "v25", 90, LN_BWD,  BF16,  4608,  5119,  0, 4,  32, 8, 2, 16, 0,
	  "LayerNorm bwd bf16 2304: 2.68 over 4 with 8 groups of 32 threads and 2 rows a stage vs 2.19 with the " "search's 4 groups of 64 (too many registers in f16)" },
	{ "v25", 90, LN_BWD,  BF16,  5120,  5759,  0, 2,  32, 4, 1, 16, 0,
	  "LayerNorm bwd bf16 2560: 2.71 over 2 with 4 groups of 32 threads (5 vectors each) and a row a stage vs " "2.40 over 4 with the search's 4 groups of 64 and 2 rows a stage" },
	{ "v25", 90, LN_BWD,  F16,    5120,  5759,  0, 2,  64, 4, 1, 16, 0,
	  "LayerNorm bwd f16 2560: 2.72 over 2 with 4 groups of 64 threads and a row a stage (bf16's second shape, " "2.69 there; its first needs more registers in f16)" },
	{ "v25", 90, LN_BWD,  DT16,  6144,  6911,  0, 4,  32, 8, 1, 16, 0,
	  "LayerNorm bwd 3072: 2.79/2.79 (bf16/f16) over 4 with 8 groups of 32 threads and a row a stage vs " "2.32/2.55 over 8 with the search's 2 rows a stage" },
	{ "v25", 90, LN_BWD,  BF16,  9216, 10239,  0, 8,  32, 8, 2, 16, 0,
	  "LayerNorm bwd bf16 4608: 2.79 over 8 with 8 groups of 32 threads and 2 rows a stage vs 2.13 with the " "search's 4 groups of 64 (too many registers in f16)" },
	{ "v25", 90, LN_BWD,  BF16, 10240, 11519,  0, 2,  64, 2, 1, 12, 0,
	  "LayerNorm bwd bf16 5120: 2.82 over 2 with 2 groups of 64 threads (5 vectors each) and a row a stage vs " "2.35 over 8 with the search's 4 groups of 64 and 2 rows a stage" },
	{ "v25", 90, LN_BWD,  F16,   10240, 11519,  0, 4,  64, 4, 1, 16, 0,
	  "LayerNorm bwd f16 5120: 2.80 over 4 with 4 groups of 64 threads and a row a stage vs 2.38 over 8 with the " "search's 2 rows a stage (bf16's second shape; its first needs more registers in f16)" },
	{ "v25", 90, LN_BWD,  BF16, 20480, 23039,  0, 8,  32, 8, 1, 16, 0,
	  "LayerNorm bwd bf16 10240: 2.85 over 8 with 8 groups of 32 threads (5 vectors each) and a row a stage vs " "2.39 with the search's 2 groups of 128 and 2 rows a stage" },
	{ "v25", 90, LN_BWD,  F16,   20480, 23039,  0, 8,  64, 4, 1, 16, 0,
	  "LayerNorm bwd f16 10240: 2.84 over 8 with 4 groups of 64 threads and a row a stage (bf16's third shape, " "2.83 there; its first two need more registers in f16)" },
	{ "v19", 90, LN_BWD,  0   , 16384, 18431,  0, 8,  32, 8, 1, 16, 0,
	  "LayerNorm bwd 8K: 2.81-2.82 over 8 with 8 groups of 32 threads and a row a stage vs 2.79-2.80 with " "the search's 4 groups of 64 and 2 rows a stage" },
	{ "v26", 90, LN_BWD,  BF16,  2048,  2303,  0, 1,  64, 6, 1, 12, 0,
	  "LayerNorm bwd bf16 1K: 2.50 with 6 groups of 64 threads and a row a stage vs 2.43-2.44 with the search's " "2 rows a stage (f16 level)" },
	{ "v26", 90, LN_BWD,  DT16,  3072,  3455,  0, 2,  32, 8, 1, 16, 0,
	  "LayerNorm bwd 1536: 2.55-2.63 (bf16, f16) over 2 with 8 groups of 32 threads and a row a stage vs 2.47-2.49 " "whole with the search's shape" },
	{ "v26", 90, LN_BWD,  F16,    4608,  5119,  0, 2,  64, 4, 1, 16, 0,
	  "LayerNorm bwd f16 2304: 2.62-2.67 over 2 with 4 groups of 64 threads and a row a stage vs 2.21 over 4 " "with the search's 2 rows a stage" },
	{ "v26", 90, LN_BWD,  BF16,  7168,  8063,  0, 2, 128, 3, 1, 15, 0,
	  "LayerNorm bwd bf16 3584: 2.75-2.78 over 2 with 3 groups of 128 threads and a row a stage vs 2.66 over 8 " "with the search's 2 rows a stage" },
	{ "v26", 90, LN_BWD,  F16,    9216, 10239,  0, 2, 128, 2, 1, 14, 0,
	  "LayerNorm bwd f16 4608: 2.75 over 2 with 2 groups of 128 threads and a row a stage vs 2.15 over 8 with " "the search's 2 rows a stage" },
	{ "v26", 90, LN_BWD,  DT16, 14336, 16127,  0, 4, 128, 3, 1, 15, 0,
	  "LayerNorm bwd 7168: 2.85-2.87 (bf16, f16) over 4 with 3 groups of 128 threads and a row a stage vs " "2.78-2.79 over 8 with the search's 2 rows a stage" },
	{ "v26", 90, LN_BWD,  BF16, 24576, 27647,  0, 8,  64, 2, 2, 10, 0,
	  "LayerNorm bwd bf16 12288: 2.90-2.91 over 8 with 2 groups of 64 threads and 2 rows a stage vs 2.75-2.76 " "over 2 with the search's shape" },
	{ "v26", 90, LN_BWD,  F16,   24576, 27647,  0, 8, 128, 2, 2, 10, 0,
	  "LayerNorm bwd f16 12288: 2.86 over 8 with 2 groups of 128 threads and 2 rows a stage vs 2.78-2.79 over 2 " "with the search's shape" },
	{ "v26", 90, LN_BWD,  DT16, 32768, 36863,  0, 8, 128, 3, 1, 15, 0,
	  "LayerNorm bwd 16K: 2.84 over 8 with 3 groups of 128 threads and a row a stage vs 2.77-2.78 over 2 " "with the search's shape (f16 2.85 vs 2.77-2.78; at 4096 rows 2.74 vs 2.40)" },
	{ "v26", 90, RMS_BWD, BF16,  4608,  5119,  0, 2,  32, 4, 1, 16, 0,
	  "RMSNorm bwd bf16 2304: 2.68 over 2 with 4 groups of 32 threads and a row a stage vs multi-wave's 2.61" },
	{ "v26", 90, RMS_BWD, BF16,  7168,  8063,  0, 4,  64, 6, 1, 12, 0,
	  "RMSNorm bwd bf16 3584: 2.74 over 4 with 6 groups of 64 threads and a row a stage vs multi-wave's 2.67" },
	{ "v26", 90, RMS_BWD, BF16,  9216, 10239,  0, 4,  64, 4, 1, 16, 0,
	  "RMSNorm bwd bf16 4608: 2.85 over 4 with 4 groups of 64 threads and a row a stage vs 2.62 over 8 with " "the search's shape" },
	{ "v19", 90, RMS_BWD, 0   ,  2048,  2303,  0, 1,  64, 4, 1, 12, 0,
	  "RMSNorm bwd 1K: 2.53-2.55 with 4 groups of 64 threads, a row a stage and 12 stages vs 2.51-2.52 with " "the search's 2 rows a stage and 16 stages" },
	{ "v19", 90, RMS_BWD, 0   ,  4096,  4607,  0, 2,  64, 4, 1, 12, 0,
	  "RMSNorm bwd 2K: 2.75 over 2 with 4 groups of 64 threads, a row a stage and 12 stages vs 2.64-2.65 " "whole with 2 groups of 128 and 2 rows a stage (f16 2.74-2.76 vs 2.63-2.65, f32 1K 2.78 vs 2.70-2.73)" },
	{ "v25", 90, RMS_BWD, DT16,  5120,  5759,  0, 2,  32, 4, 1, 16, 0,
	  "RMSNorm bwd bf16 2560: 2.76 over 2 with 4 groups of 32 threads (5 vectors each) and a row a stage vs " "multi-wave's 2.64" },
	{ "v25", 90, RMS_BWD, DT16,  6144,  6911,  0, 4,  32, 8, 1, 16, 0,
	  "RMSNorm bwd bf16 3072: 2.77 over 4 with 8 groups of 32 threads and a row a stage vs multi-wave's 2.67" },
	{ "v5",  0, LN_BWD,  0   ,  4096,  6143,  0, 4,   0, 0, 0,  0, 0,
	  "LayerNorm bwd 2K: 2.44 split over 4 vs 2.39 whole" },
	{ "v5",  0, LN_BWD,  0   ,  6144, 24575,  0, 8,   0, 0, 0,  0, 0,
	  "LayerNorm bwd 4K/8K: 2.62-2.65/2.71-2.72 split over 8 vs 2.50-2.54/2.60 whole" },
	{ "v5",  0, LN_BWD,  0   , 24576, 49151,  0, 2,   0, 0, 0,  0, 0,
	  "LayerNorm bwd 16K: 2.74-2.75 split over 2 vs 2.69 whole" },
	{ "v8",  0, RMS_BWD, 0   ,  6144, 12287,  0, 8,   0, 0, 0,  0, 0,
	  "RMSNorm bwd 4K: 2.73-2.76 split over 8 vs 2.68-2.70 whole" },
	{ "v5",  0, RMS_BWD, 0   , 12288, 49151,  0, 2,   0, 0, 0,  0, 0,
	  "RMSNorm bwd 8K/16K: 2.77-2.80/2.83 split over 2 vs 2.70-2.73/2.77 whole" },
};
const size_t wsn__ws_shape_table_len = WSN_ARRAY_SIZE(wsn__ws_shape_table);

/*
 * The auto-selection rules (ws or multi-wave when the approach is auto). Below a rule's rows per SM
 * the ring's fill and drain are not covered; past 16K the ws kernels split each row over a cluster
 * while multi-wave re-reads it, so ws at any row count. The forward has no row: multi-wave.
 */
const struct wsn__auto_rule wsn__auto_rules[] = {
	/* note arch op    dtypes hidden from - to  rows/SM shape_only */
	{ "v28", 0, LN_BWD,  F32,      1,  2048, 12, 0,
	  "ws 1.83-1.88/1.77-1.79/2.15-2.17 vs 1.92/1.99/2.08 TB/s at 1K/1536/2K x 2048 rows, 1.25-1.28/0.93-1.30 " "vs 1.46/1.55 at 1K/1536 x 1024" },
	{ "v28", 0, RMS_BWD, F32,      1,  2048, 12, 0,
	  "ws 1.94-1.97/1.90-1.92/2.23-2.25 vs 2.01/2.10/2.22 TB/s at 1K/1536/2K x 2048 rows, 1.40/1.65-1.67 vs " "1.67/1.85 at 1536/2K x 1024" },
	{ "v28", 0, LN_BWD,  0  ,  4096, 16384,  0, 0,
	  "ws 2.52/2.61/2.67 vs 2.41/2.32/2.61 TB/s at 4K/8K/16K x 16384 rows; 0.42/0.77/1.14 vs 0.26/0.19/0.21 at " "128 rows, 1.76/2.11/2.31 vs 0.93/1.00/1.06 at 1024" },
	{ "v28", 0, LN_BWD,  0  , 16385,   ANY,  0, 0,
	  "ws split over a cluster 2.78-2.81/2.74 vs 1.88/0.28 TB/s at 32K/64K x 16384 rows; 32K x 1024 rows 1.61 vs 0.88" },
	{ "v28", 0, LN_BWD,  0  ,  2049,  4095,  0, 0,
	  "ws 2.79/2.70 vs 2.18 TB/s at 3072/2560 x 16384 rows in the measured shapes; at 3072 0.22-0.35/1.55/2.35 vs " "0.12/0.47/1.24 at 128/1024/4096 rows, 2560 and 3584 ahead by 1.3-2.3x at 1024-8192 rows" },
	{ "v28", 0, LN_BWD,  0  ,  1025,  2048,  0, 0,
	  "ws 1.67-1.69/2.21/2.51 vs 1.21/1.70/2.12 TB/s at 2K x 2048/4096/8192 rows, 0.29/0.50/0.85/1.29 vs " "0.19/0.34/0.45/0.79 at 128/256/512/1024 (bf16; f16 1.30/1.74-1.78 vs 1.21/1.20 at 2048 rows)" },
	{ "v28", 0, LN_BWD,  0  ,     1,  1024,  0, 0,
	  "ws 1.30/1.82/2.18/2.38 vs 1.22/1.70/2.10/2.26 TB/s at 1K x 2048/4096/8192/12288 rows, 0.17/0.31/0.54/0.89 " "vs 0.14/0.27/0.50/0.82 at 128/256/512/1024" },
	{ "v28", 0, RMS_BWD, 0  ,  4096, 16384,  0, 0,
	  "ws 2.66/2.73/2.76 vs 2.59/2.70/2.75 TB/s at 4K/8K/16K x 16384 rows; 0.39-0.42/0.79-0.89/0.57-0.58 vs " "0.35/0.43/0.37 at 128 rows" },
	{ "v28", 0, RMS_BWD, 0  , 16385,   ANY,  0, 0,
	  "ws split over a cluster 2.85/2.78 vs 2.68/0.60 TB/s at 32K/64K x 16384 rows; 32K x 1024 rows 1.95 vs 1.53" },
	{ "v28", 0, RMS_BWD, 0  ,  2049,  4095,  1, 1,
	  "ws 2.76/2.77 vs 2.64/2.67 TB/s at 2560/3072 x 16384 rows in their measured shapes, 1.91-2.19 vs 1.67-1.76 at " "2048 rows; 3072 ahead from 256 rows (0.64-0.67 vs 0.54-0.56), 2560 behind at 1024 (0.93 vs 1.15); elsewhere " "the search's shapes measured behind (3072: 2.61 vs 2.67)" },
	{ "v28", 0, RMS_BWD, 0  ,  1025,  2048,  1, 0,
	  "ws 1.80-1.85/2.24/2.55/2.67 vs 1.65/2.03/2.37/2.52 TB/s at 2K x 2048/4096/8192/12288 rows, 0.91/1.39 vs " "0.79/1.16 at 512/1024 (bf16; f16 1.25-1.27 vs 1.21-1.22 at 1024); multi-wave ahead at 128/256 (0.24/0.46 vs " "0.19/0.36)" },
	{ "v28", 0, RMS_BWD, 0  ,     1,  1024,  0, 0,
	  "ws 1.40/1.90/2.25/2.44 vs 1.39/1.87/2.21/2.38 TB/s at 1K x 2048/4096/8192/12288 rows, 0.19/0.35/0.60/0.99 " "vs 0.17/0.33/0.60/0.97 at 128/256/512/1024" },
};
const size_t wsn__auto_rules_len = WSN_ARRAY_SIZE(wsn__auto_rules);
