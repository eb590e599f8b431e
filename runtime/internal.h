/* SPDX-License-Identifier: MIT */
/* runtime/internal.h: what the runtime's files share: the backend ops table, errors, timing. */
#ifndef WSN_INTERNAL_H
#define WSN_INTERNAL_H

#include "config.h"
#include "wsnorm.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/json.h"
#include "core/op.h"
#include "core/params.h"

/* A host-side view of one execution's tensors, checked by shared code before a backend sees it. */
struct wsn__exec {
	int64_t rows;
	int64_t hidden;
	/* row strides in elements of the row-major tensors (x, dy, y, dx) */
	int64_t x_ld, dy_ld, y_ld, dx_ld;
	/* elements between consecutive rows' mean/rstd (1 for [rows] and contiguous [rows, 1]) */
	int64_t stats_ld;
	const struct wsn_args *args;
	/* backward on a stream (runtime/overlap.c): early: the call may start without waiting for the
	 * calls ahead of it, once the word done holds wait_seq or more (0: at once); a backend whose
	 * kernel cannot may ignore it. seq: the call's number, which its finish kernel stores into done
	 * once the main grid is done (done NULL: nothing stored). */
	int early;
	uint64_t seq, wait_seq;
	void *done;
};

/*
 * A backend: one const table. Every function gets the backend's device context (void *ctx)
 * created by device_open. Functions a backend lacks are NULL and reported as WSN_ENOTSUP.
 */
struct wsn__backend_ops {
	const char *name;
	enum wsn_mem exec_mem; /* where execute() wants its tensors */
	/* Load the driver and count devices; fills info (note on failure). Called once. */
	int (*init)(struct wsn_backend_info *info);
	int (*device_info)(int index, struct wsn_device_info *out);
	int (*device_open)(int index, void **ctx);
	void (*device_close)(void *ctx);
	int (*set_threads)(void *ctx, int threads);

	int (*mem_alloc)(void *ctx, size_t bytes, void **out);
	int (*mem_free)(void *ctx, void *ptr);
	int (*mem_set)(void *ctx, void *ptr, int value, size_t bytes, void *stream);
	int (*host_alloc)(void *ctx, size_t bytes, void **out);
	int (*host_free)(void *ctx, void *ptr);
	int (*memcpy)(void *ctx, void *dst, const void *src, size_t bytes, enum wsn_copy_kind kind,
		      void *stream);

	int (*stream_create)(void *ctx, void **out);
	int (*stream_destroy)(void *ctx, void *s);
	int (*stream_sync)(void *ctx, void *s); /* s NULL: whole device */
	int (*stream_wait_event)(void *ctx, void *s, void *e);
	/* Hold stream s on the device for ns nanoseconds (work queued behind it waits). */
	int (*stream_hold)(void *ctx, void *s, uint64_t ns);
	int (*event_create)(void *ctx, void **out);
	int (*event_destroy)(void *ctx, void *e);
	int (*event_record)(void *ctx, void *e, void *s);
	int (*event_sync)(void *ctx, void *e);
	/* 1 when the work before the event's last record is done (or it was never recorded), 0 when not. */
	int (*event_query)(void *ctx, void *e);
	int (*event_elapsed)(void *ctx, void *start, void *end, float *ms);

	int (*plan_create)(void *ctx, const struct wsn__plan_params *p, void **out);
	void (*plan_destroy)(void *ctx, void *plan);
	/* Append the backend's part of the description (like snprintf; returns length needed). */
	int (*plan_describe)(void *ctx, const void *plan, char *buf, size_t len);
	/* Add the backend's part of the plan to the JSON object obj (a json_t *); 0 or WSN_ENOMEM. */
	int (*plan_json)(void *ctx, const void *plan, void *obj);
	/* Tensors in ex were validated against the plan; memory kinds match the backend. */
	int (*execute)(void *ctx, void *plan, const struct wsn__exec *ex, void *stream);
};

extern const struct wsn__backend_ops wsn__cpu_ops;
#ifdef WSN_HAVE_CUDA
extern const struct wsn__backend_ops wsn__cuda_ops;
#endif
#ifdef WSN_HAVE_AMD
extern const struct wsn__backend_ops wsn__amd_ops;
#endif

/* Opaque public objects, defined once here. */
struct wsn_device {
	const struct wsn__backend_ops *ops;
	void *ctx;
	struct wsn_device_info info;
};
/* ---- consecutive calls on a stream (runtime/overlap.c) ---- */
struct wsn__span {
	uintptr_t lo, hi; /* bytes [lo, hi) */
};
/* What one call reads and writes: rd and wr while its kernel runs, fin (dweight, dbias) by its finish
 * kernel; seq its number on the stream. */
struct wsn__ovl_call {
	struct wsn__span rd[5], wr[3], fin[2];
	int nrd, nwr, nfin;
	int publishes; /* its finish kernel stores seq into the stream's done word */
	int main_done; /* its main grid is known to be done (its finish kernel may still run) */
	uint64_t seq;
};
#define WSN__OVL_DEPTH 8
/* The calls that may still run on a stream: since the last one that waited at its start. */
struct wsn__ovl {
	int known; /* 0: other work may run ahead (the next call waits) */
	int n;
	uint64_t seq; /* the last call's number */
	struct wsn__ovl_call c[WSN__OVL_DEPTH];
};
/* The tensors of a call wsn_plan_execute has checked. */
void wsn__ovl_call_of(const struct wsn__plan_params *pp, const struct wsn_args *a, struct wsn__ovl_call *c);
/* 1 when c may start beside the calls in o; *wait_seq: the call number the stream's done word must
 * reach first (0: none, and always when it returns 0). */
int wsn__ovl_may_start_early(const struct wsn__ovl *o, const struct wsn__ovl_call *c, uint64_t *wait_seq);
/* c (numbered c->seq = ++o->seq before it was queued) was queued: after the calls in o if it
 * started early (as wsn__ovl_may_start_early said, with wait_seq), else alone. */
void wsn__ovl_record(struct wsn__ovl *o, const struct wsn__ovl_call *c, int early, uint64_t wait_seq);
/* Other work was queued (known 0) or the stream is idle (known 1). */
void wsn__ovl_reset(struct wsn__ovl *o, int known);
/* 0 when WSNORM_OVERLAP=0. */
int wsn__ovl_enabled(void);

struct wsn_stream {
	struct wsn_device *dev;
	void *impl;
	pthread_mutex_t lock; /* guards ovl */
	struct wsn__ovl ovl;
	void *done; /* device word: the number of the last call whose main grid is done (NULL: none, and
		     * no call starts early: on the CPU, or with WSNORM_OVERLAP=0 when it was made) */
};
struct wsn_event {
	struct wsn_device *dev;
	void *impl;
};
struct wsn_plan {
	struct wsn_device *dev;
	struct wsn__plan_params p;
	void *impl;
};

/* ---- comparing against a reference (runtime/tensor.c), for wsn_tensor_compare and the tests' oracle ---- */
/* Start c; sums[] are the running ||got - ref||^2 and ||ref||^2. */
void wsn__compare_begin(struct wsn_compare *c, double sums[2]);
/* Element i: skipped where ref is not finite; a non-finite got counts and is the worst. */
void wsn__compare_add(struct wsn_compare *c, double sums[2], int64_t i, double got, double ref);
/* Finish over n elements: rel_l2 (infinite when any got was non-finite). */
void wsn__compare_end(struct wsn_compare *c, const double sums[2], int64_t n);

/* ---- the autotune cache (runtime/tunecache.c) ---- */
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
