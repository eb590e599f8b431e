/* SPDX-License-Identifier: MIT */
/*
 * runtime/backend.h: how a backend plugs in (its ops table), one execution's checked tensors, the
 * helpers backends share, and the public objects.
 */
#ifndef WSN_BACKEND_H
#define WSN_BACKEND_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/backend.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "core/params.h"
#include "overlap.h"

#include <pthread.h>

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

/* ---- what backends share (backend.c) ---- */

/* One mapping a backend's host_alloc made, kept so that host_free and device_close know its length. */
struct wsn__host_map {
	void *ptr;
	size_t len;
	struct wsn__host_map *next;
};

/* Add m to the device's *list of mappings, under the device's lock. */
void wsn__host_map_add(pthread_mutex_t *lock, struct wsn__host_map **list, struct wsn__host_map *m);
/* Remove and return the mapping of *list that starts at ptr, under lock; NULL when there is none. */
struct wsn__host_map *wsn__host_map_take(pthread_mutex_t *lock, struct wsn__host_map **list, const void *ptr);

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
struct wsn_stream {
	struct wsn_device *dev;
	void *impl;
	pthread_mutex_t lock; /* guards ovl */
	struct wsn__ovl ovl;
	void *done; /* device word: the number of the last call whose main grid is done (NULL: none, and
		     * no call starts early: on the CPU, a wrapped stream, or WSNORM_OVERLAP=0 when it was made) */
	int wrapped; /* impl is the application's (wsn_stream_wrap): never destroyed here */
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

#endif
