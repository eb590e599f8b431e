/* SPDX-License-Identifier: MIT */
/* runtime/device.c: the backend registry, device enumeration and the calls every backend serves. */
#include "backend.h"
#include "core/error.h"
#include "core/util.h"
#include "overlap.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct wsn__backend_ops *const backends[] = {
	&wsn__cpu_ops,
#ifdef WSN_HAVE_CUDA
	&wsn__cuda_ops,
#endif
#ifdef WSN_HAVE_AMD
	&wsn__amd_ops,
#endif
};

/* Backends this library knows of, built or not, so `wsnorm devices` can say which are missing. */
static const char *const known[] = { "cpu", "cuda", "amd" };

static struct wsn_backend_info infos[WSN_ARRAY_SIZE(known)];
/* Why an unavailable backend is: WSN_ENODEV for a driver that found no device, else WSN_ENODRIVER. */
static int unavailable_err[WSN_ARRAY_SIZE(known)];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static const struct wsn__backend_ops *built(const char *name)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

static void init_all(void)
{
	struct wsn__error_saved caller;

	wsn__error_save(&caller); /* the probes' failures are notes, not the caller's last error */
	for (size_t i = 0; i < WSN_ARRAY_SIZE(known); i++) {
		const struct wsn__backend_ops *ops = built(known[i]);
		struct wsn_backend_info *bi = &infos[i];

		memset(bi, 0, sizeof(*bi));
		snprintf(bi->name, sizeof(bi->name), "%s", known[i]);
		if (!ops) {
			snprintf(bi->note, sizeof(bi->note), "not built into this library");
			continue;
		}
		bi->built = 1;
		if (!ops->init) {
			snprintf(bi->note, sizeof(bi->note), "no initialisation");
			continue;
		}
		int err = ops->init(bi);

		if (err < 0 || bi->device_count <= 0) {
			unavailable_err[i] = err == WSN_ENODEV || (!err && bi->device_count <= 0) ? WSN_ENODEV :
					     WSN_ENODRIVER;
			bi->available = 0;
			bi->device_count = 0;
			if (!bi->note[0])
				snprintf(bi->note, sizeof(bi->note), "%s", wsn_last_error());
		} else {
			bi->available = 1;
		}
	}
	wsn__error_restore(&caller);
}

WSN_API int wsn_backend_count(void)
{
	return (int)WSN_ARRAY_SIZE(known);
}

WSN_API int wsn_backend_info(int i, struct wsn_backend_info *out)
{
	if (!out)
		return wsn__error(WSN_EINVAL, "backend info: the output pointer is NULL");
	if (i < 0 || i >= wsn_backend_count())
		return wsn__error(WSN_EINVAL, "backend index %d out of range (0..%d)", i, wsn_backend_count() - 1);
	pthread_once(&init_once, init_all);
	*out = infos[i];
	return 0;
}

WSN_API int wsn_device_count(void)
{
	int n = 0;

	pthread_once(&init_once, init_all);
	for (size_t i = 0; i < WSN_ARRAY_SIZE(known); i++)
		if (infos[i].available)
			n += infos[i].device_count;
	return n;
}

/* Map flat index i to (backend, index within it). */
static int locate(int i, const struct wsn__backend_ops **ops, int *index)
{
	pthread_once(&init_once, init_all);
	for (size_t b = 0; b < WSN_ARRAY_SIZE(known); b++) {
		if (!infos[b].available)
			continue;
		if (i < infos[b].device_count) {
			*ops = built(known[b]);
			*index = i;
			return 0;
		}
		i -= infos[b].device_count;
	}
	return wsn__error(WSN_ENODEV, "device index out of range");
}

static int fill_info(const struct wsn__backend_ops *ops, int index, struct wsn_device_info *out)
{
	int err;

	memset(out, 0, sizeof(*out));
	if (ops->device_info && (err = ops->device_info(index, out)) < 0)
		return err;
	snprintf(out->backend, sizeof(out->backend), "%s", ops->name);
	out->index = index;
	out->exec_mem = ops->exec_mem;
	if (!strcmp(ops->name, "cpu"))
		snprintf(out->spec, sizeof(out->spec), "cpu");
	else
		snprintf(out->spec, sizeof(out->spec), "%s:%d", ops->name, index);
	return 0;
}

WSN_API int wsn_device_info_at(int i, struct wsn_device_info *out)
{
	const struct wsn__backend_ops *ops = NULL;
	int index = 0, err;

	if (!out)
		return wsn__error(WSN_EINVAL, "device info: no output given");
	if ((err = locate(i, &ops, &index)) < 0)
		return err;
	return fill_info(ops, index, out);
}

static struct wsn_backend_info *info_of(const char *name)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(known); i++)
		if (!strcmp(known[i], name))
			return &infos[i];
	return NULL;
}

WSN_API int wsn_device_spec_parse(const char *spec, char *backend, int *index)
{
	const char *colon;
	size_t len, b, b2, digits;
	long n = 0;

	if (!spec)
		return wsn__error(WSN_EINVAL, "device: no spec given (spec is NULL)");
	if (!strcmp(spec, "auto")) {
		if (backend)
			snprintf(backend, 16, "auto");
		if (index)
			*index = -1;
		return 0;
	}
	colon = strchr(spec, ':');
	len = colon ? (size_t)(colon - spec) : strlen(spec);
	if (len == 4 && !strncmp(spec, "auto", 4))
		return wsn__error(WSN_EINVAL, "device '%s': auto takes no index", spec);
	for (b = 0; b < WSN_ARRAY_SIZE(known); b++)
		if (len == strlen(known[b]) && !strncmp(spec, known[b], len))
			break;
	if (b == WSN_ARRAY_SIZE(known))
		return wsn__error(WSN_EINVAL, "device '%s': unknown backend '%.*s' (expected auto, cpu, cuda[:N] or amd[:N])",
				  spec, (int)(len < 32 ? len : 32), spec);
	if (colon) {
		digits = strspn(colon + 1, "0123456789");
		if (digits)
			for (n = 0, b2 = 0; b2 < digits && n <= 1L << 20; b2++)
				n = n * 10 + (colon[1 + b2] - '0');
		if (!digits || colon[1 + digits] || n > 1L << 20)
			return wsn__error(WSN_EINVAL, "device '%s': bad device index '%s' (decimal digits, at most %ld)",
					  spec, colon + 1, 1L << 20);
	}
	if (backend)
		snprintf(backend, 16, "%s", known[b]);
	if (index)
		*index = (int)n;
	return 0;
}

WSN_API int wsn_device_open(const char *spec, struct wsn_device **out)
{
	const struct wsn__backend_ops *ops = NULL;
	struct wsn_backend_info *bi;
	struct wsn_device *dev;
	char name[16];
	int index = 0;
	int err;

	if (!spec || !out)
		return wsn__error(WSN_EINVAL, "device: %s is NULL", !spec ? "the spec" : "the output pointer");
	*out = NULL;
	if ((err = wsn_device_spec_parse(spec, name, &index)) < 0)
		return err;
	pthread_once(&init_once, init_all);
	if (!strcmp(name, "auto")) {
		/* the first available GPU backend, else the CPU */
		for (size_t b = 1; b < WSN_ARRAY_SIZE(known); b++) {
			const struct wsn__backend_ops *bo = built(known[b]);
			if (infos[b].available && infos[b].device_count > 0 && bo && bo->plan_create) {
				char s[32];
				snprintf(s, sizeof(s), "%s:0", known[b]);
				return wsn_device_open(s, out);
			}
		}
		return wsn_device_open("cpu", out);
	}
	bi = info_of(name); /* a parsed name is always a known backend */
	if (!bi->built)
		return wsn__error(WSN_EBACKEND, "device '%s': the %s backend is not built into this library",
				  spec, name);
	if (!bi->available)
		return wsn__error(!strcmp(name, "cpu") ? WSN_EBACKEND : unavailable_err[bi - infos], "device '%s': %s",
				  spec, bi->note);
	if (index >= bi->device_count)
		return wsn__error(WSN_ENODEV, "device '%s': the %s backend has %d device%s", spec, name,
				  bi->device_count, bi->device_count == 1 ? "" : "s");
	ops = built(name);
	if (!(dev = calloc(1, sizeof(*dev))))
		return wsn__error(WSN_ENOMEM, "device '%s': out of memory", spec);
	dev->ops = ops;
	if ((err = fill_info(ops, (int)index, &dev->info)) < 0)
		goto err;
	if (!ops->device_open) {
		err = wsn__error(WSN_ENOTSUP, "device '%s': backend cannot open devices", spec);
		goto err;
	}
	if ((err = ops->device_open((int)index, &dev->ctx)) < 0) {
		wsn__error_context(err, "device '%s'", spec);
		goto err;
	}
	*out = dev;
	return 0;
err:
	free(dev);
	return err;
}

WSN_API void wsn_device_close(struct wsn_device *dev)
{
	if (!dev)
		return;
	if (dev->ops->device_close)
		dev->ops->device_close(dev->ctx);
	free(dev);
}

WSN_API int wsn_device_info(const struct wsn_device *dev, struct wsn_device_info *out)
{
	if (!dev || !out)
		return wsn__error(WSN_EINVAL, "device info: bad arguments");
	*out = dev->info;
	return 0;
}

static int unsupported(const struct wsn_device *dev, const char *what)
{
	return wsn__error(WSN_ENOTSUP, "%s: not supported by the %s backend", what, dev->ops->name);
}

#define NEED(dev, fn, what)                                                   \
	do {                                                                  \
		if (!(dev))                                                   \
			return wsn__error(WSN_EINVAL, "%s: no device", what); \
		if (!(dev)->ops->fn)                                          \
			return unsupported(dev, what);                        \
	} while (0)

WSN_API int wsn_device_set_threads(struct wsn_device *dev, int threads)
{
	if (!dev)
		return wsn__error(WSN_EINVAL, "threads: no device");
	if (threads < 0)
		return wsn__error(WSN_EINVAL, "threads: negative thread count %d", threads);
	return dev->ops->set_threads ? dev->ops->set_threads(dev->ctx, threads) : 0;
}

WSN_API int wsn_mem_alloc(struct wsn_device *dev, size_t bytes, void **out)
{
	NEED(dev, mem_alloc, "device memory allocation");
	if (!out)
		return wsn__error(WSN_EINVAL, "device memory allocation: no output");
	*out = NULL;
	return dev->ops->mem_alloc(dev->ctx, bytes ? bytes : 1, out);
}

WSN_API int wsn_mem_free(struct wsn_device *dev, void *ptr)
{
	NEED(dev, mem_free, "device memory free");
	return ptr ? dev->ops->mem_free(dev->ctx, ptr) : 0;
}

/* Work other than an op queued on s: the calls after it wait at their start (runtime/overlap.c). */
static void stream_other_work(struct wsn_stream *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	wsn__ovl_reset(&s->ovl, 0);
	pthread_mutex_unlock(&s->lock);
}

WSN_API int wsn_mem_set(struct wsn_device *dev, void *ptr, int value, size_t bytes, struct wsn_stream *s)
{
	NEED(dev, mem_set, "device memset");
	stream_other_work(s);
	return dev->ops->mem_set(dev->ctx, ptr, value, bytes, s ? s->impl : NULL);
}

WSN_API int wsn_host_alloc(struct wsn_device *dev, size_t bytes, void **out)
{
	NEED(dev, host_alloc, "pinned host allocation");
	if (!out)
		return wsn__error(WSN_EINVAL, "pinned host allocation: no output");
	*out = NULL;
	return dev->ops->host_alloc(dev->ctx, bytes ? bytes : 1, out);
}

WSN_API int wsn_host_free(struct wsn_device *dev, void *ptr)
{
	NEED(dev, host_free, "pinned host free");
	return ptr ? dev->ops->host_free(dev->ctx, ptr) : 0;
}

WSN_API int wsn_memcpy(struct wsn_device *dev, void *dst, const void *src, size_t bytes,
		       enum wsn_copy_kind kind, struct wsn_stream *s)
{
	NEED(dev, memcpy, "memcpy");
	if ((unsigned)kind > WSN_COPY_H2H)
		return wsn__error(WSN_EINVAL, "memcpy: bad copy kind %d", (int)kind);
	if (!bytes)
		return 0;
	if (!dst || !src)
		return wsn__error(WSN_EINVAL, "memcpy: NULL pointer");
	stream_other_work(s);
	return dev->ops->memcpy(dev->ctx, dst, src, bytes, kind, s ? s->impl : NULL);
}

/* A wsn_stream of dev around impl (wrapped: the application's, never destroyed here). */
static int stream_new(struct wsn_device *dev, void *impl, int wrapped, void *done, struct wsn_stream **out)
{
	struct wsn_stream *s;

	if (!(s = calloc(1, sizeof(*s))))
		return wsn__error(WSN_ENOMEM, "stream: out of memory");
	s->dev = dev;
	s->impl = impl;
	s->wrapped = wrapped;
	s->done = done;
	pthread_mutex_init(&s->lock, NULL);
	wsn__ovl_reset(&s->ovl, 1);
	*out = s;
	return 0;
}

WSN_API int wsn_stream_create(struct wsn_device *dev, struct wsn_stream **out)
{
	void *impl = NULL, *done = NULL;
	int err;

	NEED(dev, stream_create, "stream");
	if (!out)
		return wsn__error(WSN_EINVAL, "stream: no output");
	if ((err = dev->ops->stream_create(dev->ctx, &impl)) < 0)
		return err;
	/* on a GPU, the word the finish kernels store their call's number into (runtime/overlap.c),
	 * zeroed on the stream before any kernel there reads it; none with WSNORM_OVERLAP=0 */
	if ((dev->ops->exec_mem == WSN_MEM_DEVICE && dev->ops->mem_alloc && dev->ops->mem_set && dev->ops->mem_free &&
	     wsn__ovl_enabled() &&
	     ((err = dev->ops->mem_alloc(dev->ctx, sizeof(uint64_t), &done)) < 0 ||
	      (err = dev->ops->mem_set(dev->ctx, done, 0, sizeof(uint64_t), impl)) < 0)) ||
	    (err = stream_new(dev, impl, 0, done, out)) < 0) {
		if (done)
			dev->ops->mem_free(dev->ctx, done);
		dev->ops->stream_destroy(dev->ctx, impl);
		return err;
	}
	return 0;
}

/*
 * The application's stream as a wsn_stream. No call on it starts early (s->done stays NULL): work
 * the application queues between calls is unknown here, and a kernel of wsnorm's must wait for it.
 */
WSN_API int wsn_stream_wrap(struct wsn_device *dev, void *native, struct wsn_stream **out)
{
	NEED(dev, stream_create, "stream wrap");
	if (!out)
		return wsn__error(WSN_EINVAL, "stream wrap: no output");
	return stream_new(dev, native, 1, NULL, out);
}

WSN_API int wsn_stream_destroy(struct wsn_stream *s)
{
	int err = 0;

	if (!s)
		return 0;
	if (!s->wrapped && s->dev->ops->stream_destroy)
		err = s->dev->ops->stream_destroy(s->dev->ctx, s->impl);
	if (s->done) {
		/* after the stream: a free waits for the work still queued, which may store into it */
		int ferr = s->dev->ops->mem_free(s->dev->ctx, s->done);
		if (!err)
			err = ferr;
	}
	pthread_mutex_destroy(&s->lock);
	free(s);
	return err;
}

WSN_API int wsn_stream_sync(struct wsn_device *dev, struct wsn_stream *s)
{
	int err;

	if (!dev && s)
		dev = s->dev;
	NEED(dev, stream_sync, "stream sync");
	if ((err = dev->ops->stream_sync(dev->ctx, s ? s->impl : NULL)) < 0 || !s)
		return err;
	pthread_mutex_lock(&s->lock);
	wsn__ovl_reset(&s->ovl, 1); /* nothing runs ahead now */
	pthread_mutex_unlock(&s->lock);
	return 0;
}

WSN_API int wsn_stream_wait_event(struct wsn_stream *s, struct wsn_event *e)
{
	if (!s || !e)
		return wsn__error(WSN_EINVAL, "stream wait: bad arguments");
	NEED(s->dev, stream_wait_event, "stream wait");
	stream_other_work(s);
	return s->dev->ops->stream_wait_event(s->dev->ctx, s->impl, e->impl);
}

WSN_API int wsn_event_create(struct wsn_device *dev, struct wsn_event **out)
{
	struct wsn_event *e;
	int err;

	NEED(dev, event_create, "event");
	if (!out)
		return wsn__error(WSN_EINVAL, "event: no output");
	if (!(e = calloc(1, sizeof(*e))))
		return wsn__error(WSN_ENOMEM, "event: out of memory");
	e->dev = dev;
	if ((err = dev->ops->event_create(dev->ctx, &e->impl)) < 0) {
		free(e);
		return err;
	}
	*out = e;
	return 0;
}

WSN_API int wsn_event_destroy(struct wsn_event *e)
{
	int err = 0;

	if (!e)
		return 0;
	if (e->dev->ops->event_destroy)
		err = e->dev->ops->event_destroy(e->dev->ctx, e->impl);
	free(e);
	return err;
}

WSN_API int wsn_event_record(struct wsn_event *e, struct wsn_stream *s)
{
	if (!e)
		return wsn__error(WSN_EINVAL, "event record: no event");
	NEED(e->dev, event_record, "event record");
	return e->dev->ops->event_record(e->dev->ctx, e->impl, s ? s->impl : NULL);
}

WSN_API int wsn_event_query(struct wsn_event *e)
{
	if (!e)
		return wsn__error(WSN_EINVAL, "event query: no event");
	NEED(e->dev, event_query, "event query");
	return e->dev->ops->event_query(e->dev->ctx, e->impl);
}

WSN_API int wsn_stream_hold(struct wsn_stream *s, uint64_t ns)
{
	if (!s)
		return wsn__error(WSN_EINVAL, "stream hold: no stream");
	if (ns > WSN_HOLD_MAX_NS)
		return wsn__error(WSN_EINVAL, "stream hold: %llu ns is longer than the most, %llu ns (10 s)",
				  (unsigned long long)ns, (unsigned long long)WSN_HOLD_MAX_NS);
	NEED(s->dev, stream_hold, "stream hold");
	stream_other_work(s);
	return s->dev->ops->stream_hold(s->dev->ctx, s->impl, ns);
}

WSN_API int wsn_event_sync(struct wsn_event *e)
{
	if (!e)
		return wsn__error(WSN_EINVAL, "event sync: no event");
	NEED(e->dev, event_sync, "event sync");
	return e->dev->ops->event_sync(e->dev->ctx, e->impl);
}

WSN_API int wsn_event_elapsed(struct wsn_event *start, struct wsn_event *end, float *ms)
{
	if (!start || !end || !ms)
		return wsn__error(WSN_EINVAL, "event elapsed: %s is NULL",
				  !start ? "the start event" : !end ? "the end event" : "the output pointer");
	if (start->dev != end->dev)
		return wsn__error(WSN_EINVAL, "event elapsed: the two events belong to different devices");
	NEED(start->dev, event_elapsed, "event elapsed");
	return start->dev->ops->event_elapsed(start->dev->ctx, start->impl, end->impl, ms);
}
