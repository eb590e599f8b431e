/* SPDX-License-Identifier: MIT */
/* tests/fake_cuda_memory.c: the fake driver's memory, copies, streams and events. */
#include "fake_cuda.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

/* ---- memory ---- */

CUresult fake_cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
	struct context *c;
	struct object *o;
	void *m;
	CUresult r;

	BEGIN(cuMemAlloc);
	if ((r = fake__need_context("cuMemAlloc", &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!p || !bytes)
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	if (bytes > TOTAL_MEM - fake__mem_used[c->dev])
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	/* pages only touched when copied to: large buffers cost nothing until used */
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (!(o = fake__add(K_MEM, c->dev))) {
		munmap(m, bytes);
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	}
	o->addr = (uintptr_t)m;
	o->bytes = bytes;
	fake__mem_used[c->dev] += bytes;
	*p = (CUdeviceptr)o->addr;
	return fake__leave(CUDA_SUCCESS);
}

/* With unified addressing the driver finds the allocation by its address: any context or none may be current. */
CUresult fake_cuMemFree(CUdeviceptr p)
{
	CUresult r = fake__enter(E_cuMemFree);
	struct object *o;

	if (!(o = fake__find(K_MEM, (uintptr_t)p))) {
		fake__bug("cuMemFree of %#llx, which is not a live allocation", (unsigned long long)p);
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	if (r == CUDA_SUCCESS)
		r = fake__fault_of(o->dev);
	fake__drop(o);
	return fake__leave(r);
}

CUresult fake_cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
	struct context *c;
	CUresult r;

	BEGIN(cuMemsetD8Async);
	if ((r = fake__need_stream("cuMemsetD8Async", s, &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!fake__find_range((uintptr_t)p, n)) {
		fake__bug("cuMemsetD8Async of %zu bytes at %#llx, outside every allocation", n, (unsigned long long)p);
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	memset((void *)(uintptr_t)p, v, n);
	fake__advance(OP_NS + (double)n / DEV_BYTES_PER_NS);
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuMemHostRegister(void *p, size_t n, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuMemHostRegister);
	(void)flags;
	if ((r = fake__need_context("cuMemHostRegister", &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!p || !n)
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	for (o = fake__objects; o; o = o->next)
		if (o->kind == K_HOST && (uintptr_t)p < o->addr + o->bytes && o->addr < (uintptr_t)p + n)
			return fake__leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	if (!(o = fake__add(K_HOST, c->dev)))
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	o->addr = (uintptr_t)p;
	o->bytes = n;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuMemHostUnregister(void *p)
{
	CUresult r = fake__enter(E_cuMemHostUnregister);
	struct object *o;

	if (!(o = fake__find(K_HOST, (uintptr_t)p))) {
		fake__bug("cuMemHostUnregister of %p, which is not the start of a pinned range", p);
		return fake__leave(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	}
	if (r == CUDA_SUCCESS && fake__current && fake__current->primary)
		r = fake__current->fault;
	fake__drop(o);
	return fake__leave(r);
}

/* A copy of n bytes in the current context on stream s; dst_dev, src_dev: that side is device memory. */
static CUresult copy(enum entry e, void *dst, int dst_dev, const void *src, int src_dev, size_t n, CUstream s)
{
	struct context *c;
	CUresult r;

	BEGIN_ENTRY(e);
	if ((r = fake__need_stream(fake__entry_names[e], s, &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if ((dst_dev && !fake__find_range((uintptr_t)dst, n)) || (src_dev && !fake__find_range((uintptr_t)src, n))) {
		fake__bug("%s of %zu bytes from %p to %p, outside every allocation", fake__entry_names[e], n, src, dst);
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	}
	if (n && (!dst || !src))
		return fake__leave(CUDA_ERROR_INVALID_VALUE);
	memmove(dst, src, n);
	fake__advance(OP_NS + (double)n / (dst_dev && src_dev ? DEV_BYTES_PER_NS : H2D_BYTES_PER_NS));
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyHtoDAsync, (void *)(uintptr_t)dst, 1, src, 0, n, s);
}

CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyDtoHAsync, dst, 0, (const void *)(uintptr_t)src, 1, n, s);
}

CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyDtoDAsync, (void *)(uintptr_t)dst, 1, (const void *)(uintptr_t)src, 1, n, s);
}

/* ---- streams and events ---- */

CUresult fake_cuStreamCreate(CUstream *s, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuStreamCreate);
	(void)flags;
	if ((r = fake__need_context("cuStreamCreate", &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!(o = fake__add(K_STREAM, c->dev)))
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	*s = (CUstream)o;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuStreamDestroy(CUstream s)
{
	return fake__release(E_cuStreamDestroy, K_STREAM, s);
}

CUresult fake_cuStreamSynchronize(CUstream s)
{
	struct context *c;
	struct object *o;

	BEGIN(cuStreamSynchronize);
	if (!s)
		return fake__leave(fake__need_context("cuStreamSynchronize on the default stream", &c));
	if (!(o = fake__find(K_STREAM, (uintptr_t)s))) {
		fake__bug("cuStreamSynchronize of unknown stream %p", (void *)s);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return fake__leave(fake__fault_of(o->dev));
}

CUresult fake_cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuStreamWaitEvent);
	(void)flags;
	if ((r = fake__need_stream("cuStreamWaitEvent", s, &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!(o = fake__find(K_EVENT, (uintptr_t)e))) {
		fake__bug("cuStreamWaitEvent on unknown event %p", (void *)e);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return fake__leave(fake__fault_of(o->dev));
}

CUresult fake_cuEventCreate(CUevent *e, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuEventCreate);
	if ((r = fake__need_context("cuEventCreate", &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!(o = fake__add(K_EVENT, c->dev)))
		return fake__leave(CUDA_ERROR_OUT_OF_MEMORY);
	o->timing = !(flags & CU_EVENT_DISABLE_TIMING);
	*e = (CUevent)o;
	return fake__leave(CUDA_SUCCESS);
}

CUresult fake_cuEventDestroy(CUevent e)
{
	return fake__release(E_cuEventDestroy, K_EVENT, e);
}

CUresult fake_cuEventRecord(CUevent e, CUstream s)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuEventRecord);
	if ((r = fake__need_stream("cuEventRecord", s, &c)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!(o = fake__find(K_EVENT, (uintptr_t)e))) {
		fake__bug("cuEventRecord of unknown event %p", (void *)e);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (o->dev != c->dev) {
		fake__bug("cuEventRecord of an event of device %d in the context of device %d", o->dev, c->dev);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	fake__advance(RECORD_NS);
	o->recorded = 1;
	o->stamp_ns = fake__clock_ns;
	return fake__leave(CUDA_SUCCESS);
}

/* Work on the fake GPU is done when it is submitted: waiting for a known event, or asking whether it is
 * done, returns at once with its device's fault (if any). Called after BEGIN, under the lock. */
static CUresult event_done(const char *call, CUevent e)
{
	struct object *o;

	if (!(o = fake__find(K_EVENT, (uintptr_t)e))) {
		fake__bug("%s of unknown event %p", call, (void *)e);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return fake__leave(fake__fault_of(o->dev));
}

CUresult fake_cuEventSynchronize(CUevent e)
{
	BEGIN(cuEventSynchronize);
	return event_done("cuEventSynchronize", e);
}

CUresult fake_cuEventQuery(CUevent e)
{
	BEGIN(cuEventQuery);
	return event_done("cuEventQuery", e);
}

CUresult fake_cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	struct object *a, *b;
	CUresult r;

	BEGIN(cuEventElapsedTime);
	if (!(a = fake__find(K_EVENT, (uintptr_t)start)) || !(b = fake__find(K_EVENT, (uintptr_t)end))) {
		fake__bug("cuEventElapsedTime of unknown event %p or %p", (void *)start, (void *)end);
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((r = fake__fault_of(a->dev)) != CUDA_SUCCESS || (r = fake__fault_of(b->dev)) != CUDA_SUCCESS)
		return fake__leave(r);
	if (!a->recorded || !b->recorded || !a->timing || !b->timing) {
		fake__bug("cuEventElapsedTime of an event never recorded or created without timing");
		return fake__leave(CUDA_ERROR_INVALID_HANDLE);
	}
	*ms = (float)((b->stamp_ns - a->stamp_ns) / 1e6);
	return fake__leave(CUDA_SUCCESS);
}

