/* SPDX-License-Identifier: MIT */
/* runtime/tunecache.h: the autotune cache: one file per shape and device, holding the shape autotune chose. */
#ifndef WSN_TUNECACHE_H
#define WSN_TUNECACHE_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/tunecache.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "core/params.h"

#include <stddef.h>

/* What an autotune result is keyed by. */
struct wsn__tune_id {
	char gpu[128];
	int cc_major, cc_minor, sms, driver;
	enum wsn_op op;
	enum wsn_dtype dtype;
	int64_t hidden;
	int has_weight, has_bias;
	int64_t rows_class; /* wsn__tune_rows_class of the plan's rows */
};
/* Rows autotune times on, at most (more rows weigh the ring's fill and drain no less). */
#define WSN__TUNE_MAX_ROWS 16384
/* The class of a plan's rows an entry holds: the power of two at or above them, capped at
 * WSN__TUNE_MAX_ROWS (the best shape moves with the rows each SM gets: NOTES v26-v27). */
int64_t wsn__tune_rows_class(int64_t rows);
struct wsn__tune_entry {
	enum wsn_approach approach; /* the winner: multiwave or ws */
	struct wsn__ws_shape shape; /* ws: the winning shape when it is not the planner's own (else all 0) */
	/* microseconds per launch (0: not measured): the planner's ws shape, the fastest other ws shape
	 * timed (of `shapes`), multi-wave */
	double ws_us, shape_us, multiwave_us;
	int shapes;
	int64_t rows;               /* rows the launches were timed on (0: nothing was timed) */
};
/* The file name of an id (letters, digits, '.', '_', '-'). 0 or WSN_ERANGE. */
int wsn__tune_key(const struct wsn__tune_id *id, char *buf, size_t len);
/* The entry's full path (see tunecache.c for the directory). 0, WSN_ENOENT (no cache directory) or WSN_ERANGE. */
int wsn__tune_path(const struct wsn__tune_id *id, char *buf, size_t len);
/*
 * 0 with *out filled on a hit. A miss: WSN_ENOENT (no entry, or no cache directory), WSN_EFORMAT (an
 * entry that is not a whole version-3 line: an older version's entry, a torn or garbage file; to be
 * rewritten) or WSN_ERANGE (the path is too long).
 */
int wsn__tune_lookup(const struct wsn__tune_id *id, struct wsn__tune_entry *out);
/* Write an entry atomically (temporary file + rename). 0, WSN_EINVAL (not an entry) or an error naming the path. */
int wsn__tune_store(const struct wsn__tune_id *id, const struct wsn__tune_entry *e);

#endif
