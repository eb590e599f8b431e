/* SPDX-License-Identifier: MIT */
/*
 * tests/fake_cuda.c: a fake NVIDIA driver, built as a module that make check installs as
 * libcuda.so.1 in a temporary directory, so that the CUDA backend's host side runs on a machine
 * without a GPU.
 *
 * It serves every entry point of WSN_CU_FUNCS through cuGetProcAddress_v2 and models H100-like
 * devices: primary contexts and a current context per thread, device memory (host memory, so
 * copies and memsets really move bytes, bounds checked), pinned ranges, modules whose kernels are
 * the .entry names of their PTX, streams and events (with a modelled clock, so timings are
 * positive). Kernels are not executed: launches are checked and counted. What a real driver would
 * refuse is refused with its CUresult; what only a broken caller does (a call that needs a context
 * made with none of the device's primary contexts current, or with another device's stream or
 * kernel; an unknown or released handle; a copy outside an allocation) is also printed as
 * "fake-cuda: BUG: ..." and counted.
 *
 * Environment:
 *   WSNORM_FAKE_CUDA_DEVICES=N       devices (default 1, at most 8)
 *   WSNORM_FAKE_CUDA_FAIL=NAME:NTH:CODE[,...]
 *                                    the NTH call of entry point NAME (counted from 1 over the
 *                                    process; 0: every call) returns CODE (a CUresult name or number)
 *   WSNORM_FAKE_CUDA_STICKY=N[:CODE] the Nth kernel launch faults: it returns CUDA_SUCCESS, then
 *                                    every call in its device's context fails with CODE (default
 *                                    CUDA_ERROR_ILLEGAL_ADDRESS) until the primary context is released
 *   WSNORM_FAKE_CUDA_MISSING=NAME    cuGetProcAddress_v2 does not find NAME
 *   WSNORM_FAKE_CUDA_TRACE=1         at exit, also list how often each entry point was called
 *
 * A program that loads it (dlopen of libcuda.so.1 finds the same object) can also call
 * fake_cuda_app_context (a context of its own to make current), fake_cuda_fail_next and
 * fake_cuda_live.
 *
 * A call that releases something (cuMemFree, cuStreamDestroy, ...) releases it even when it fails,
 * by injection or after a fault: the caller cannot do anything else with the handle, and the counts
 * then show what it never tried to release. At exit one line on stderr reports what is still live:
 *   fake-cuda: at exit: A allocations, P pinned ranges, M modules, S streams, E events,
 *   C context retains live; L launches, B bugs
 */
#include "cuda/cuda_internal.h"

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

#define MAX_DEVICES 8
#define MAX_FAILS 16
#define MAX_ENTRIES 16
#define SMS 132
#define TOTAL_MEM ((size_t)80 << 30)
#define SMEM_PER_SM 233472
#define SMEM_OPTIN 232448
#define SMEM_DEFAULT (48 << 10)
#define REGS_PER_KERNEL 32
/* the modelled clock: every copy, memset and launch takes OP_NS more than its bytes need, so that
 * loops timed by events (warm-ups of 100 ms) end after a few rounds */
#define OP_NS 10e6
#define H2D_BYTES_PER_NS 25.0   /* copies over PCIe */
#define DEV_BYTES_PER_NS 2000.0 /* device-to-device copies and memsets */
#define RECORD_NS 1000.0

/* ---- the entry points and their call counts ---- */

enum entry {
#define ENTRY_ID(name, version, params) E_##name,
	WSN_CU_FUNCS(ENTRY_ID)
#undef ENTRY_ID
	E_N
};

static const char *const entry_names[E_N] = {
#define ENTRY_NAME(name, version, params) #name,
	WSN_CU_FUNCS(ENTRY_NAME)
#undef ENTRY_NAME
};

/* ---- CUresult names (the library's own table: cuda_internal.h) ---- */

static const struct wsn__cu_error_entry errors[] = { WSN_CU_ERRORS(WSN_CU_ERROR_ENTRY) };

/* ---- state ---- */

enum kind { K_MEM, K_HOST, K_MODULE, K_STREAM, K_EVENT, K_N };
static const char *const kind_names[K_N] = { "allocations", "pinned ranges", "modules", "streams", "events" };

struct entry_fn {
	char name[128];
	int max_threads;
	int max_dyn_smem; /* raised by cuFuncSetAttribute */
};

/* One live object. Handles given out are the object's address; they are looked up in the list
 * before use, so an unknown or stale handle is found, never dereferenced. */
struct object {
	enum kind kind;
	int dev;
	uintptr_t addr;     /* K_MEM: device address; K_HOST: the pinned range */
	size_t bytes;
	int recorded;       /* K_EVENT */
	int timing;         /* K_EVENT: created without CU_EVENT_DISABLE_TIMING */
	double stamp_ns;    /* K_EVENT: the clock when recorded */
	int ptx_version;    /* K_MODULE */
	int nfn;
	struct entry_fn fn[MAX_ENTRIES];
	struct object *next;
};

/* A context: the primary one of each device, and one that belongs to "the application". */
struct context {
	int dev;
	int primary;
	long retains;
	CUresult fault; /* sticky: set by a faulting launch, cleared when the context is destroyed */
};

struct fail {
	char name[64];
	long nth;
	CUresult code;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int ndev = 1, initialised, trace;
static struct fail fails[MAX_FAILS];
static int nfails;
static struct fail next_fail; /* fake_cuda_fail_next: the next call of one entry point fails */
static long sticky_after = -1;
static CUresult sticky_code = CUDA_ERROR_ILLEGAL_ADDRESS;
static char missing[64];
static struct context contexts[MAX_DEVICES];
static struct context app_context = { .dev = 0, .primary = 0 };
static struct object *objects, *released; /* released objects are kept, so their handles are never reused */
static long live[K_N], launches, bugs, calls[E_N];
static size_t mem_used[MAX_DEVICES];
static double clock_ns;
static __thread struct context *current;

static void bug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void bug(const char *fmt, ...)
{
	va_list ap;

	bugs++;
	fprintf(stderr, "fake-cuda: BUG: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int parse_code(const char *s, CUresult *out)
{
	char *end;
	long v;

	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (!strcmp(s, errors[i].name)) {
			*out = errors[i].code;
			return 0;
		}
	v = strtol(s, &end, 0);
	if (end == s || *end || v <= 0)
		return -1;
	*out = (CUresult)v;
	return 0;
}

static void read_env(void)
{
	const char *s;
	char *list, *save = NULL;

	if ((s = getenv("WSNORM_FAKE_CUDA_DEVICES")) && (ndev = atoi(s)) > MAX_DEVICES)
		ndev = MAX_DEVICES;
	if (ndev < 0)
		ndev = 0;
	for (int i = 0; i < MAX_DEVICES; i++) {
		contexts[i].dev = i;
		contexts[i].primary = 1;
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_FAIL")) && (list = strdup(s))) {
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			struct fail *f = &fails[nfails];
			char code[64];

			if (nfails == MAX_FAILS || sscanf(t, "%63[^:]:%ld:%63s", f->name, &f->nth, code) != 3 ||
			    f->nth < 0 || parse_code(code, &f->code) < 0) {
				fprintf(stderr, "fake-cuda: bad WSNORM_FAKE_CUDA_FAIL entry '%s' (NAME:NTH:CODE)\n", t);
				abort();
			}
			nfails++;
		}
		free(list);
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_STICKY"))) {
		char code[64] = "";

		if (sscanf(s, "%ld:%63s", &sticky_after, code) < 1 || sticky_after < 1 ||
		    (code[0] && parse_code(code, &sticky_code) < 0)) {
			fprintf(stderr, "fake-cuda: bad WSNORM_FAKE_CUDA_STICKY '%s' (N[:CODE], N >= 1)\n", s);
			abort();
		}
	}
	if ((s = getenv("WSNORM_FAKE_CUDA_MISSING")))
		snprintf(missing, sizeof(missing), "%s", s);
	trace = (s = getenv("WSNORM_FAKE_CUDA_TRACE")) && *s && strcmp(s, "0");
}

static const char *error_name(CUresult r)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (errors[i].code == r)
			return errors[i].name;
	return "CUDA_ERROR_UNRECOGNIZED";
}

/* Count a call of e and return the failure injected into it, if any. Takes the lock; leave() drops it. */
static CUresult enter(enum entry e)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&lock);
	calls[e]++;
	if (next_fail.name[0] && !strcmp(next_fail.name, entry_names[e])) {
		r = next_fail.code;
		next_fail.name[0] = '\0';
		fprintf(stderr, "fake-cuda: failing %s call %ld with %s\n", entry_names[e], calls[e], error_name(r));
	}
	for (int i = 0; i < nfails && !r; i++)
		if (!strcmp(fails[i].name, entry_names[e]) && (!fails[i].nth || fails[i].nth == calls[e])) {
			r = fails[i].code;
			fprintf(stderr, "fake-cuda: failing %s call %ld with %s\n", entry_names[e], calls[e], error_name(r));
		}
	return r;
}

static CUresult leave(CUresult r)
{
	pthread_mutex_unlock(&lock);
	return r;
}

/* Begin an entry point: count it, then return an injected failure or, before cuInit, NOT_INITIALIZED. */
#define BEGIN(name)                                                \
	do {                                                       \
		CUresult r_ = enter(E_##name);                     \
		if (r_ != CUDA_SUCCESS)                            \
			return leave(r_);                          \
		if (!initialised)                                  \
			return leave(CUDA_ERROR_NOT_INITIALIZED);  \
	} while (0)

static struct object *find(enum kind k, uintptr_t handle)
{
	for (struct object *o = objects; o; o = o->next)
		if (o->kind == k && (k == K_MEM || k == K_HOST ? o->addr : (uintptr_t)o) == handle)
			return o;
	return NULL;
}

/* The allocation holding [addr, addr + bytes), or NULL. */
static struct object *find_range(uintptr_t addr, size_t bytes)
{
	for (struct object *o = objects; o; o = o->next)
		if (o->kind == K_MEM && addr >= o->addr && addr - o->addr <= o->bytes && bytes <= o->bytes - (addr - o->addr))
			return o;
	return NULL;
}

static struct object *add(enum kind k, int dev)
{
	struct object *o = calloc(1, sizeof(*o));

	if (!o)
		return NULL;
	o->kind = k;
	o->dev = dev;
	o->next = objects;
	objects = o;
	live[k]++;
	return o;
}

static void drop(struct object *o)
{
	for (struct object **pp = &objects; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	live[o->kind]--;
	if (o->kind == K_MEM) {
		mem_used[o->dev] -= o->bytes;
		munmap((void *)o->addr, o->bytes);
	}
	o->next = released;
	released = o;
}

/*
 * The current context for a call that needs one (what): a primary context the caller retained.
 * Anything else is a caller's bug: no context, the application's, or a released one.
 */
static CUresult need_context(const char *what, struct context **out)
{
	struct context *c = current;

	*out = c;
	if (!c) {
		bug("%s with no context current", what);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (!c->primary) {
		bug("%s in the application's context, not a device's primary context", what);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	if (c->retains < 1) {
		bug("%s in the primary context of device %d, which is not retained", what, c->dev);
		return CUDA_ERROR_INVALID_CONTEXT;
	}
	return c->fault;
}

/* A stream argument (NULL: the context's default stream) of a call made in context c. */
static CUresult check_stream(const char *what, struct context *c, CUstream s)
{
	struct object *o;

	if (!s)
		return CUDA_SUCCESS;
	if (!(o = find(K_STREAM, (uintptr_t)s))) {
		bug("%s on unknown stream %p", what, (void *)s);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	if (o->dev != c->dev) {
		bug("%s on a stream of device %d in the context of device %d", what, o->dev, c->dev);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	return CUDA_SUCCESS;
}

/* The sticky fault of the device an object belongs to. */
static CUresult fault_of(int dev)
{
	return dev >= 0 && dev < MAX_DEVICES ? contexts[dev].fault : CUDA_SUCCESS;
}

static void advance(double ns)
{
	clock_ns += ns;
}

/* ---- errors, initialisation, devices ---- */

static CUresult fake_cuGetErrorName(CUresult e, const char **s)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (errors[i].code == e) {
			*s = errors[i].name;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_cuGetErrorString(CUresult e, const char **s)
{
	for (size_t i = 0; i < WSN_ARRAY_SIZE(errors); i++)
		if (errors[i].code == e) {
			*s = errors[i].text;
			return CUDA_SUCCESS;
		}
	*s = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_cuInit(unsigned flags)
{
	CUresult r = enter(E_cuInit);

	if (r != CUDA_SUCCESS)
		return leave(r);
	if (flags)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!ndev)
		return leave(CUDA_ERROR_NO_DEVICE);
	initialised = 1;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDriverGetVersion(int *v)
{
	CUresult r = enter(E_cuDriverGetVersion);

	if (r != CUDA_SUCCESS)
		return leave(r);
	*v = 13000;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceGetCount(int *n)
{
	BEGIN(cuDeviceGetCount);
	*n = ndev;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceGet(CUdevice *d, int i)
{
	BEGIN(cuDeviceGet);
	if (i < 0 || i >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	*d = i;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceGetName(char *buf, int len, CUdevice d)
{
	BEGIN(cuDeviceGetName);
	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	if (!buf || len < 1)
		return leave(CUDA_ERROR_INVALID_VALUE);
	snprintf(buf, (size_t)len, "NVIDIA H100 80GB HBM3 (fake)");
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d)
{
	BEGIN(cuDeviceGetAttribute);
	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = SMS; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = SMEM_OPTIN; break;
	case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: *v = SMEM_PER_SM; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *v = 65536; break;
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *v = 2048; break;
	case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *v = 50 << 20; break;
	case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 5120; break;
	case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
	case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = 1; break;
	default: return leave(CUDA_ERROR_INVALID_VALUE);
	}
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice d)
{
	BEGIN(cuDeviceTotalMem);
	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	*bytes = TOTAL_MEM;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDeviceGetPCIBusId(char *buf, int len, CUdevice d)
{
	BEGIN(cuDeviceGetPCIBusId);
	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	snprintf(buf, (size_t)len, "00000000:%02X:00.0", 0xf0 + d); /* no such bus here: no sysfs link found */
	return leave(CUDA_SUCCESS);
}

/* ---- contexts ---- */

static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
	BEGIN(cuDevicePrimaryCtxRetain);
	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	contexts[d].retains++;
	*c = (CUcontext)&contexts[d];
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d)
{
	CUresult r = enter(E_cuDevicePrimaryCtxRelease);

	if (d < 0 || d >= ndev)
		return leave(CUDA_ERROR_INVALID_DEVICE);
	if (contexts[d].retains < 1) {
		bug("cuDevicePrimaryCtxRelease of device %d, which is not retained", d);
		return leave(CUDA_ERROR_INVALID_CONTEXT);
	}
	if (!--contexts[d].retains)
		contexts[d].fault = CUDA_SUCCESS; /* the context is destroyed; a retain makes a fresh one */
	return leave(r);
}

static CUresult fake_cuCtxGetCurrent(CUcontext *c)
{
	BEGIN(cuCtxGetCurrent);
	*c = (CUcontext)current;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuCtxSetCurrent(CUcontext c)
{
	struct context *k = (struct context *)c;
	int known = !k || k == &app_context;

	BEGIN(cuCtxSetCurrent);
	for (int i = 0; i < ndev && !known; i++)
		known = k == &contexts[i];
	if (!known) {
		bug("cuCtxSetCurrent of unknown context %p", (void *)c);
		return leave(CUDA_ERROR_INVALID_CONTEXT);
	}
	current = k;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuCtxSynchronize(void)
{
	struct context *c;
	CUresult r;

	BEGIN(cuCtxSynchronize);
	r = need_context("cuCtxSynchronize", &c);
	return leave(r);
}

/* ---- memory ---- */

static CUresult fake_cuMemAlloc(CUdeviceptr *p, size_t bytes)
{
	struct context *c;
	struct object *o;
	void *m;
	CUresult r;

	BEGIN(cuMemAlloc);
	if ((r = need_context("cuMemAlloc", &c)) != CUDA_SUCCESS)
		return leave(r);
	if (!p || !bytes)
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (bytes > TOTAL_MEM - mem_used[c->dev])
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	/* pages only touched when copied to: large buffers cost nothing until used */
	m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	if (!(o = add(K_MEM, c->dev))) {
		munmap(m, bytes);
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	}
	o->addr = (uintptr_t)m;
	o->bytes = bytes;
	mem_used[c->dev] += bytes;
	*p = (CUdeviceptr)o->addr;
	return leave(CUDA_SUCCESS);
}

/* With unified addressing the driver finds the allocation by its address: any context or none may be current. */
static CUresult fake_cuMemFree(CUdeviceptr p)
{
	CUresult r = enter(E_cuMemFree);
	struct object *o;

	if (!(o = find(K_MEM, (uintptr_t)p))) {
		bug("cuMemFree of %#llx, which is not a live allocation", (unsigned long long)p);
		return leave(CUDA_ERROR_INVALID_VALUE);
	}
	if (r == CUDA_SUCCESS)
		r = fault_of(o->dev);
	drop(o);
	return leave(r);
}

static CUresult fake_cuMemsetD8Async(CUdeviceptr p, unsigned char v, size_t n, CUstream s)
{
	struct context *c;
	CUresult r;

	BEGIN(cuMemsetD8Async);
	if ((r = need_context("cuMemsetD8Async", &c)) != CUDA_SUCCESS ||
	    (r = check_stream("cuMemsetD8Async", c, s)) != CUDA_SUCCESS)
		return leave(r);
	if (!find_range((uintptr_t)p, n)) {
		bug("cuMemsetD8Async of %zu bytes at %#llx, outside every allocation", n, (unsigned long long)p);
		return leave(CUDA_ERROR_INVALID_VALUE);
	}
	memset((void *)(uintptr_t)p, v, n);
	advance(OP_NS + (double)n / DEV_BYTES_PER_NS);
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuMemHostRegister(void *p, size_t n, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuMemHostRegister);
	(void)flags;
	if ((r = need_context("cuMemHostRegister", &c)) != CUDA_SUCCESS)
		return leave(r);
	if (!p || !n)
		return leave(CUDA_ERROR_INVALID_VALUE);
	for (o = objects; o; o = o->next)
		if (o->kind == K_HOST && (uintptr_t)p < o->addr + o->bytes && o->addr < (uintptr_t)p + n)
			return leave(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
	if (!(o = add(K_HOST, c->dev)))
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	o->addr = (uintptr_t)p;
	o->bytes = n;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuMemHostUnregister(void *p)
{
	CUresult r = enter(E_cuMemHostUnregister);
	struct object *o;

	if (!(o = find(K_HOST, (uintptr_t)p))) {
		bug("cuMemHostUnregister of %p, which is not the start of a pinned range", p);
		return leave(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
	}
	if (r == CUDA_SUCCESS && current && current->primary)
		r = current->fault;
	drop(o);
	return leave(r);
}

/* A copy of n bytes in the current context on stream s; dst_dev, src_dev: that side is device memory. */
static CUresult copy(enum entry e, void *dst, int dst_dev, const void *src, int src_dev, size_t n, CUstream s)
{
	struct context *c;
	CUresult r;

	if ((r = enter(e)) != CUDA_SUCCESS)
		return leave(r);
	if (!initialised)
		return leave(CUDA_ERROR_NOT_INITIALIZED);
	if ((r = need_context(entry_names[e], &c)) != CUDA_SUCCESS || (r = check_stream(entry_names[e], c, s)) != CUDA_SUCCESS)
		return leave(r);
	if ((dst_dev && !find_range((uintptr_t)dst, n)) || (src_dev && !find_range((uintptr_t)src, n))) {
		bug("%s of %zu bytes from %p to %p, outside every allocation", entry_names[e], n, src, dst);
		return leave(CUDA_ERROR_INVALID_VALUE);
	}
	if (n && (!dst || !src))
		return leave(CUDA_ERROR_INVALID_VALUE);
	memmove(dst, src, n);
	advance(OP_NS + (double)n / (dst_dev && src_dev ? DEV_BYTES_PER_NS : H2D_BYTES_PER_NS));
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyHtoDAsync, (void *)(uintptr_t)dst, 1, src, 0, n, s);
}

static CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyDtoHAsync, dst, 0, (const void *)(uintptr_t)src, 1, n, s);
}

static CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
	return copy(E_cuMemcpyDtoDAsync, (void *)(uintptr_t)dst, 1, (const void *)(uintptr_t)src, 1, n, s);
}

/* ---- streams and events ---- */

static CUresult fake_cuStreamCreate(CUstream *s, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuStreamCreate);
	(void)flags;
	if ((r = need_context("cuStreamCreate", &c)) != CUDA_SUCCESS)
		return leave(r);
	if (!(o = add(K_STREAM, c->dev)))
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	*s = (CUstream)o;
	return leave(CUDA_SUCCESS);
}

/* Release a stream or event (K): found, or a caller's bug; released even when the call fails. */
static CUresult destroy(enum entry e, enum kind k, void *handle)
{
	CUresult r = enter(e);
	struct object *o;

	if (!(o = find(k, (uintptr_t)handle))) {
		bug("%s of %p, which is not a live %s", entry_names[e], handle, k == K_STREAM ? "stream" : "event");
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (r == CUDA_SUCCESS)
		r = fault_of(o->dev);
	drop(o);
	return leave(r);
}

static CUresult fake_cuStreamDestroy(CUstream s)
{
	return destroy(E_cuStreamDestroy, K_STREAM, s);
}

static CUresult fake_cuStreamSynchronize(CUstream s)
{
	struct context *c;
	struct object *o;

	BEGIN(cuStreamSynchronize);
	if (!s)
		return leave(need_context("cuStreamSynchronize on the default stream", &c));
	if (!(o = find(K_STREAM, (uintptr_t)s))) {
		bug("cuStreamSynchronize of unknown stream %p", (void *)s);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return leave(fault_of(o->dev));
}

static CUresult fake_cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuStreamWaitEvent);
	(void)flags;
	if ((r = need_context("cuStreamWaitEvent", &c)) != CUDA_SUCCESS ||
	    (r = check_stream("cuStreamWaitEvent", c, s)) != CUDA_SUCCESS)
		return leave(r);
	if (!(o = find(K_EVENT, (uintptr_t)e))) {
		bug("cuStreamWaitEvent on unknown event %p", (void *)e);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return leave(fault_of(o->dev));
}

static CUresult fake_cuEventCreate(CUevent *e, unsigned flags)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuEventCreate);
	if ((r = need_context("cuEventCreate", &c)) != CUDA_SUCCESS)
		return leave(r);
	if (!(o = add(K_EVENT, c->dev)))
		return leave(CUDA_ERROR_OUT_OF_MEMORY);
	o->timing = !(flags & CU_EVENT_DISABLE_TIMING);
	*e = (CUevent)o;
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuEventDestroy(CUevent e)
{
	return destroy(E_cuEventDestroy, K_EVENT, e);
}

static CUresult fake_cuEventRecord(CUevent e, CUstream s)
{
	struct context *c;
	struct object *o;
	CUresult r;

	BEGIN(cuEventRecord);
	if ((r = need_context("cuEventRecord", &c)) != CUDA_SUCCESS ||
	    (r = check_stream("cuEventRecord", c, s)) != CUDA_SUCCESS)
		return leave(r);
	if (!(o = find(K_EVENT, (uintptr_t)e))) {
		bug("cuEventRecord of unknown event %p", (void *)e);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (o->dev != c->dev) {
		bug("cuEventRecord of an event of device %d in the context of device %d", o->dev, c->dev);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	advance(RECORD_NS);
	o->recorded = 1;
	o->stamp_ns = clock_ns;
	return leave(CUDA_SUCCESS);
}

/* Work on the fake GPU is done when it is submitted: waiting for a known event, or asking whether it is
 * done, returns at once with its device's fault (if any). Called after BEGIN, under the lock. */
static CUresult event_done(const char *call, CUevent e)
{
	struct object *o;

	if (!(o = find(K_EVENT, (uintptr_t)e))) {
		bug("%s of unknown event %p", call, (void *)e);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	return leave(fault_of(o->dev));
}

static CUresult fake_cuEventSynchronize(CUevent e)
{
	BEGIN(cuEventSynchronize);
	return event_done("cuEventSynchronize", e);
}

static CUresult fake_cuEventQuery(CUevent e)
{
	BEGIN(cuEventQuery);
	return event_done("cuEventQuery", e);
}

static CUresult fake_cuEventElapsedTime(float *ms, CUevent start, CUevent end)
{
	struct object *a, *b;
	CUresult r;

	BEGIN(cuEventElapsedTime);
	if (!(a = find(K_EVENT, (uintptr_t)start)) || !(b = find(K_EVENT, (uintptr_t)end))) {
		bug("cuEventElapsedTime of unknown event %p or %p", (void *)start, (void *)end);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if ((r = fault_of(a->dev)) != CUDA_SUCCESS || (r = fault_of(b->dev)) != CUDA_SUCCESS)
		return leave(r);
	if (!a->recorded || !b->recorded || !a->timing || !b->timing) {
		bug("cuEventElapsedTime of an event never recorded or created without timing");
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	*ms = (float)((b->stamp_ns - a->stamp_ns) / 1e6);
	return leave(CUDA_SUCCESS);
}

/* ---- modules and kernels ---- */

/* Read the .version and each .entry (with its .maxntid) of NUL-terminated PTX into module o. */
static void parse_ptx(struct object *o, const char *ptx)
{
	unsigned major = 0, minor = 0;
	const char *p;

	if ((p = strstr(ptx, ".version ")) && sscanf(p, ".version %u.%u", &major, &minor) == 2)
		o->ptx_version = (int)(major * 10 + minor);
	for (p = ptx; (p = strstr(p, ".entry ")) && o->nfn < MAX_ENTRIES; p++) {
		struct entry_fn *f = &o->fn[o->nfn];
		const char *body = strchr(p, '{'), *nt = strstr(p, ".maxntid ");
		unsigned x = 1, y = 1, z = 1;

		if (sscanf(p, ".entry %127[A-Za-z0-9_$]", f->name) != 1)
			continue;
		f->max_threads = 1024;
		if (nt && (!body || nt < body) && sscanf(nt, ".maxntid %u, %u, %u", &x, &y, &z) >= 1 && x * y * z <= 1024)
			f->max_threads = (int)(x * y * z);
		f->max_dyn_smem = SMEM_DEFAULT;
		o->nfn++;
	}
}

static CUresult fake_cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, CUjit_option *opts, void **vals)
{
	CUresult r = enter(E_cuModuleLoadDataEx);
	char *info = NULL, *error = NULL, msg[256];
	size_t info_size = 0, error_size = 0;
	float wall_ms = 1.5f;
	struct context *c;
	struct object *o;

	if (r == CUDA_SUCCESS && !initialised)
		r = CUDA_ERROR_NOT_INITIALIZED;
	if (r == CUDA_SUCCESS)
		r = need_context("cuModuleLoadDataEx", &c);
	if (r == CUDA_SUCCESS && !image)
		r = CUDA_ERROR_INVALID_VALUE;
	for (unsigned i = 0; i < n; i++) {
		switch (opts[i]) {
		case CU_JIT_INFO_LOG_BUFFER: info = vals[i]; break;
		case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES: info_size = (size_t)(uintptr_t)vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER: error = vals[i]; break;
		case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES: error_size = (size_t)(uintptr_t)vals[i]; break;
		default: break;
		}
	}
	/* the logs the JIT writes, their lengths (terminator included) written back into the size slots,
	 * and the compile time written over its slot as a float */
	if (r == CUDA_SUCCESS) {
		if (!(o = add(K_MODULE, c->dev))) {
			r = CUDA_ERROR_OUT_OF_MEMORY;
		} else {
			parse_ptx(o, image);
			*m = (CUmodule)o;
			snprintf(msg, sizeof(msg), "fake-cuda: %d kernel%s, PTX %d.%d, not compiled", o->nfn,
				 o->nfn == 1 ? "" : "s", o->ptx_version / 10, o->ptx_version % 10);
		}
	}
	if (r != CUDA_SUCCESS)
		snprintf(msg, sizeof(msg), "fake-cuda: the JIT failed with %s", error_name(r));
	for (unsigned i = 0; i < n; i++) {
		char *buf = opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ? info :
			    opts[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES ? error : NULL;
		size_t size = opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES ? info_size : error_size;
		int is_log = (opts[i] == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES) == (r == CUDA_SUCCESS);

		if (buf && size) {
			snprintf(buf, size, "%s", is_log ? msg : "");
			vals[i] = (void *)(uintptr_t)(strlen(buf) + 1);
		} else if (opts[i] == CU_JIT_WALL_TIME) {
			memcpy(&vals[i], &wall_ms, sizeof(wall_ms));
		}
	}
	return leave(r);
}

static CUresult fake_cuModuleUnload(CUmodule m)
{
	CUresult r = enter(E_cuModuleUnload);
	struct object *o;

	if (!(o = find(K_MODULE, (uintptr_t)m))) {
		bug("cuModuleUnload of %p, which is not a live module", (void *)m);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (r == CUDA_SUCCESS)
		r = fault_of(o->dev);
	drop(o);
	return leave(r);
}

/* The kernel behind handle f and its module, or NULL. */
static struct entry_fn *find_fn(CUfunction f, struct object **mod)
{
	for (struct object *o = objects; o; o = o->next)
		if (o->kind == K_MODULE && (uintptr_t)f >= (uintptr_t)o->fn && (uintptr_t)f < (uintptr_t)(o->fn + o->nfn)) {
			*mod = o;
			return &o->fn[((uintptr_t)f - (uintptr_t)o->fn) / sizeof(o->fn[0])];
		}
	return NULL;
}

#define NEED_FN(call, f, fn, mod)                                                       \
	do {                                                                            \
		if (!((fn) = find_fn((f), &(mod)))) {                                   \
			bug("%s of %p, which is not a kernel of a live module", call, (void *)(f)); \
			return leave(CUDA_ERROR_INVALID_HANDLE);                        \
		}                                                                       \
		if (fault_of((mod)->dev) != CUDA_SUCCESS)                               \
			return leave(fault_of((mod)->dev));                             \
	} while (0)

static CUresult fake_cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
	struct object *o;

	BEGIN(cuModuleGetFunction);
	if (!(o = find(K_MODULE, (uintptr_t)m))) {
		bug("cuModuleGetFunction in %p, which is not a live module", (void *)m);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	if (fault_of(o->dev) != CUDA_SUCCESS)
		return leave(fault_of(o->dev));
	for (int i = 0; i < o->nfn; i++)
		if (!strcmp(o->fn[i].name, name)) {
			*f = (CUfunction)&o->fn[i];
			return leave(CUDA_SUCCESS);
		}
	return leave(CUDA_ERROR_NOT_FOUND);
}

static CUresult fake_cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuFuncGetAttribute);
	NEED_FN("cuFuncGetAttribute", f, fn, mod);
	switch (a) {
	case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = REGS_PER_KERNEL; break;
	case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: *v = 0; break;
	case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = fn->max_threads; break;
	case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = mod->ptx_version; break;
	case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
	case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = fn->max_dyn_smem; break;
	default: return leave(CUDA_ERROR_INVALID_VALUE);
	}
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuFuncSetAttribute);
	NEED_FN("cuFuncSetAttribute", f, fn, mod);
	if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
		if (v < 0 || v > SMEM_OPTIN)
			return leave(CUDA_ERROR_INVALID_VALUE);
		fn->max_dyn_smem = v;
	}
	return leave(CUDA_SUCCESS);
}

/* CTAs of block threads and dyn bytes of dynamic shared memory that fit on one SM at once. */
static int ctas_per_sm(const struct entry_fn *fn, int block, size_t dyn)
{
	int warps = (block + 31) / 32, n = 32;

	if (block < 1 || block > fn->max_threads || dyn > (size_t)fn->max_dyn_smem)
		return 0;
	if (2048 / (warps * 32) < n)
		n = 2048 / (warps * 32);
	if (65536 / (warps * 32 * REGS_PER_KERNEL) < n)
		n = 65536 / (warps * 32 * REGS_PER_KERNEL);
	if ((int)(SMEM_PER_SM / (dyn + 1024)) < n)
		n = (int)(SMEM_PER_SM / (dyn + 1024));
	return n;
}

static CUresult fake_cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int block, size_t dyn)
{
	struct entry_fn *fn;
	struct object *mod;

	BEGIN(cuOccupancyMaxActiveBlocksPerMultiprocessor);
	NEED_FN("cuOccupancyMaxActiveBlocksPerMultiprocessor", f, fn, mod);
	*n = ctas_per_sm(fn, block, dyn);
	return leave(CUDA_SUCCESS);
}

/* The cluster size a launch configuration asks for (1 without the attribute). */
static unsigned cluster_of(const CUlaunchConfig *cfg)
{
	for (unsigned i = 0; i < cfg->numAttrs; i++)
		if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
			return cfg->attrs[i].value.clusterDim.x * cfg->attrs[i].value.clusterDim.y *
			       cfg->attrs[i].value.clusterDim.z;
	return 1;
}

static CUresult fake_cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *cfg)
{
	struct entry_fn *fn;
	struct object *mod;
	unsigned cluster;
	int per_sm;

	BEGIN(cuOccupancyMaxActiveClusters);
	NEED_FN("cuOccupancyMaxActiveClusters", f, fn, mod);
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return leave(CUDA_ERROR_INVALID_VALUE);
	cluster = cluster_of(cfg);
	per_sm = ctas_per_sm(fn, (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ), cfg->sharedMemBytes);
	/* 8 GPCs of 16 SMs; a cluster's CTAs share one GPC */
	*n = cluster < 1 || cluster > 8 ? 0 : 8 * (16 * per_sm / (int)cluster);
	return leave(CUDA_SUCCESS);
}

static CUresult fake_cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
	struct entry_fn *fn;
	struct object *mod;
	struct context *c;
	unsigned cluster;
	CUresult r;

	BEGIN(cuLaunchKernelEx);
	if ((r = need_context("cuLaunchKernelEx", &c)) != CUDA_SUCCESS)
		return leave(r);
	if (!cfg || (cfg->numAttrs && !cfg->attrs))
		return leave(CUDA_ERROR_INVALID_VALUE);
	if ((r = check_stream("cuLaunchKernelEx", c, cfg->hStream)) != CUDA_SUCCESS)
		return leave(r);
	NEED_FN("cuLaunchKernelEx", f, fn, mod);
	if (mod->dev != c->dev) {
		bug("cuLaunchKernelEx of kernel %s of device %d in the context of device %d", fn->name, mod->dev, c->dev);
		return leave(CUDA_ERROR_INVALID_HANDLE);
	}
	cluster = cluster_of(cfg);
	if (!cfg->gridDimX || !cfg->gridDimY || !cfg->gridDimZ || !cfg->blockDimX || !cfg->blockDimY ||
	    !cfg->blockDimZ || cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ > (unsigned)fn->max_threads ||
	    cfg->sharedMemBytes > (unsigned)fn->max_dyn_smem || cfg->gridDimX % cluster || (!params && !extra))
		return leave(CUDA_ERROR_INVALID_VALUE);
	if (!strcmp(fn->name, "wsn_stream_hold")) /* its one parameter: nanoseconds */
		advance((double)*(const uint64_t *)params[0]);
	else
		advance(OP_NS);
	if (++launches == sticky_after) {
		c->fault = sticky_code;
		fprintf(stderr, "fake-cuda: launch %ld (%s) faults device %d with %s\n", launches, fn->name, c->dev,
			error_name(sticky_code));
	}
	return leave(CUDA_SUCCESS);
}

/* Bytes per element of a TMA data type (the packed sub-byte ones aside). */
static size_t tma_elem_size(CUtensorMapDataType dt)
{
	switch (dt) {
	case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
	case CU_TENSOR_MAP_DATA_TYPE_UINT16:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
	case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
	case CU_TENSOR_MAP_DATA_TYPE_UINT64:
	case CU_TENSOR_MAP_DATA_TYPE_INT64:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
	case CU_TENSOR_MAP_DATA_TYPE_UINT32:
	case CU_TENSOR_MAP_DATA_TYPE_INT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
	case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
	default: return 0;
	}
}

static CUresult fake_cuTensorMapEncodeTiled(CUtensorMap *map, CUtensorMapDataType dt, cuuint32_t rank, void *global,
					    const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,
					    const cuuint32_t *elem_strides, CUtensorMapInterleave interleave,
					    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
					    CUtensorMapFloatOOBfill oob)
{
	size_t es = tma_elem_size(dt), extent;

	BEGIN(cuTensorMapEncodeTiled);
	(void)box, (void)elem_strides, (void)interleave, (void)swizzle, (void)l2, (void)oob;
	if (!map || !es || rank < 1 || rank > 5 || !dims)
		return leave(CUDA_ERROR_INVALID_VALUE);
	/* the last byte the descriptor reaches must lie in the allocation of its first */
	extent = (size_t)(dims[0] * es);
	for (cuuint32_t i = 1; i < rank; i++)
		extent += (size_t)((dims[i] - 1) * strides[i - 1]);
	if (!find_range((uintptr_t)global, extent)) {
		bug("cuTensorMapEncodeTiled over %zu bytes at %p, outside every allocation", extent, global);
		return leave(CUDA_ERROR_INVALID_VALUE);
	}
	memset(map, 0, sizeof(*map));
	return leave(CUDA_SUCCESS);
}

/* ---- what the library looks up ---- */

/* The fakes in the library's own driver table, so each is checked against the prototype cuda_abi.h
 * gives the variant the backend asks for. */
static const struct wsn__cu_api fakes = {
#define FAKE(name, version, params) .name = fake_##name,
	WSN_CU_FUNCS(FAKE)
#undef FAKE
};

static const struct {
	const char *name;
	size_t offset;
} table[] = {
#define ENTRY(name, version, params) { #name, offsetof(struct wsn__cu_api, name) },
	WSN_CU_FUNCS(ENTRY)
#undef ENTRY
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status);
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
					 CUdriverProcAddressQueryResult *status)
{
	pthread_once(&env_once, read_env);
	(void)flags;
	if (!symbol || !pfn)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	if (strcmp(symbol, missing))
		for (size_t i = 0; i < WSN_ARRAY_SIZE(table); i++)
			if (!strcmp(table[i].name, symbol)) {
				if (version < 12000) {
					if (status)
						*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
					return CUDA_ERROR_NOT_FOUND;
				}
				memcpy(pfn, (const char *)&fakes + table[i].offset, sizeof(*pfn));
				if (status)
					*status = CU_GET_PROC_ADDRESS_SUCCESS;
				return CUDA_SUCCESS;
			}
	return CUDA_ERROR_NOT_FOUND;
}

/* Make the next call of entry point name fail with code (for a program that tests one call). */
FAKE_EXPORT void fake_cuda_fail_next(const char *name, CUresult code);
FAKE_EXPORT void fake_cuda_fail_next(const char *name, CUresult code)
{
	pthread_mutex_lock(&lock);
	snprintf(next_fail.name, sizeof(next_fail.name), "%s", name);
	next_fail.code = code;
	pthread_mutex_unlock(&lock);
}

/* Driver objects live now: allocations, pinned ranges, modules, streams and events. */
FAKE_EXPORT long fake_cuda_live(void);
FAKE_EXPORT long fake_cuda_live(void)
{
	long n = 0;

	pthread_mutex_lock(&lock);
	for (int k = 0; k < K_N; k++)
		n += live[k];
	pthread_mutex_unlock(&lock);
	return n;
}

/* A context that belongs to the application, not to any library: for tests that check it stays current. */
FAKE_EXPORT CUcontext fake_cuda_app_context(void);
FAKE_EXPORT CUcontext fake_cuda_app_context(void)
{
	return (CUcontext)&app_context;
}

__attribute__((destructor)) static void report(void)
{
	long retains = 0;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_DEVICES; i++)
		retains += contexts[i].retains;
	fprintf(stderr, "fake-cuda: at exit: %ld %s, %ld %s, %ld %s, %ld %s, %ld %s, %ld context retains live; "
		"%ld launches, %ld bugs\n", live[K_MEM], kind_names[K_MEM], live[K_HOST], kind_names[K_HOST],
		live[K_MODULE], kind_names[K_MODULE], live[K_STREAM], kind_names[K_STREAM], live[K_EVENT],
		kind_names[K_EVENT], retains, launches, bugs);
	if (trace) {
		fprintf(stderr, "fake-cuda: calls:");
		for (int e = 0; e < E_N; e++)
			if (calls[e])
				fprintf(stderr, " %s %ld", entry_names[e], calls[e]);
		fputc('\n', stderr);
	}
	pthread_mutex_unlock(&lock);
}
