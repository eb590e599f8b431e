/* SPDX-License-Identifier: MIT */
/*
 * tests/cuda_context.c: an application with its own CUDA context current calls every CUDA entry
 * point of libwsnorm on two devices and checks after each that its context is still current, and
 * that a release whose switch to the device's context fails still releases; and a plan executed on
 * the application's own stream (wsn_stream_wrap). Run by the cuda_fake
 * suite under the fake driver (tests/fake_cuda.c, two devices), which provides the application's
 * context; exits 0 when every check holds, 1 otherwise, 77 without the fake.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_abi.h"
#include "wsnorm.h"

#define ROWS 64
#define HIDDEN 1024

static wsn__cu_pfn_cuCtxGetCurrent get_current;
static wsn__cu_pfn_cuCtxSetCurrent set_current;
static void (*fail_next)(const char *name, CUresult code);
static long (*live)(void);
static CUcontext app;
static int failures;
/* For a stream of the application's own in a device's primary context (wsn_stream_wrap). */
static wsn__cu_pfn_cuDeviceGet device_get;
static wsn__cu_pfn_cuDevicePrimaryCtxRetain primary_retain;
static wsn__cu_pfn_cuDevicePrimaryCtxRelease primary_release;
static wsn__cu_pfn_cuStreamCreate stream_create;
static wsn__cu_pfn_cuStreamDestroy stream_destroy;

/* The driver's entry point `name` (ABI of CUDA 12.0), or NULL. */
static void *proc(wsn__cu_pfn_cuGetProcAddress get_proc, const char *name)
{
	CUdriverProcAddressQueryResult st;
	void *fn = NULL;

	if (get_proc(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)
		return NULL;
	return fn;
}

/* After `what` (which returned err, expected: want), the application's context must be current. */
static void check(const char *what, int err, int want)
{
	CUcontext cur = NULL;

	if (err != want) {
		printf("FAIL: %s returned %s, expected %s: %s\n", what, wsn_err_name(err), wsn_err_name(want),
		       wsn_last_error());
		failures++;
	}
	if (get_current(&cur) != CUDA_SUCCESS || cur != app) {
		printf("FAIL: after %s the current context is %p, not the application's %p\n", what, (void *)cur,
		       (void *)app);
		failures++;
		set_current(app); /* so the next check is about the next call */
	}
}

#define CHECK(call) check(#call, (call), 0)

/* A release whose switch to the device's context fails (err: what it returned) still released its n objects. */
static void check_released(const char *what, int err, long before, long n)
{
	check(what, err, WSN_EDRIVER);
	if (live() != before - n) {
		printf("FAIL: %s: %ld driver objects live before, %ld after\n", what, before, live());
		failures++;
	}
}

#define CHECK_RELEASED(call, n)                                          \
	do {                                                             \
		long before_ = live();                                   \
		fail_next("cuCtxSetCurrent", CUDA_ERROR_UNKNOWN);        \
		check_released(#call " (context switch failing)", (call), before_, n); \
	} while (0)

/*
 * A stream the application makes itself in the primary context of device ordinal (as the CUDA
 * runtime does), or destroys (create 0); the application's context is current again after either.
 */
static CUstream app_stream(int ordinal, int create, CUstream s)
{
	CUdevice dev;
	CUcontext primary = NULL;
	int ok;

	ok = device_get(&dev, ordinal) == CUDA_SUCCESS && primary_retain(&primary, dev) == CUDA_SUCCESS &&
	     set_current(primary) == CUDA_SUCCESS;
	if (ok)
		ok = create ? stream_create(&s, 0) == CUDA_SUCCESS : stream_destroy(s) == CUDA_SUCCESS;
	if (primary)
		primary_release(dev);
	set_current(app);
	if (!ok) {
		printf("FAIL: the application could not %s its stream on cuda:%d\n", create ? "create" : "destroy", ordinal);
		failures++;
		return NULL;
	}
	return s;
}

/*
 * A plan executed on the application's own stream through wsn_stream_wrap: the launch goes on it
 * (the fake refuses a stream it does not know), the wrapper's destruction leaves it to the
 * application (destroying it there is then the first and only release); NULL wraps the default stream.
 */
static void exercise_wrap(struct wsn_device *d, int ordinal, struct wsn_plan *plan, const struct wsn_args *a)
{
	struct wsn_stream *ws = NULL;
	CUstream native = app_stream(ordinal, 1, NULL);
	long before;

	if (!native)
		return;
	check("wsn_stream_wrap(no output)", wsn_stream_wrap(d, native, NULL), WSN_EINVAL);
	before = live();
	CHECK(wsn_stream_wrap(d, native, &ws));
	CHECK(wsn_plan_execute(plan, a, ws));
	CHECK(wsn_stream_sync(d, ws));
	CHECK(wsn_stream_destroy(ws));
	/* NULL: the default stream, as PyTorch's current stream usually is */
	CHECK(wsn_stream_wrap(d, NULL, &ws));
	CHECK(wsn_plan_execute(plan, a, ws));
	CHECK(wsn_stream_sync(d, ws));
	CHECK(wsn_stream_destroy(ws));
	if (live() != before) {
		printf("FAIL: wsn_stream_wrap and wsn_stream_destroy of the wrapper: %ld driver objects live before, "
		       "%ld after\n", before, live());
		failures++;
	}
	app_stream(ordinal, 0, native);
}

/* Every entry point on one open device (ordinal: its CUDA ordinal); other is a second open device
 * whose calls are interleaved. */
static void exercise(struct wsn_device *d, int ordinal, struct wsn_device *other)
{
	struct wsn_plan_options o;
	struct wsn_stream *s = NULL;
	struct wsn_event *e0 = NULL, *e1 = NULL;
	struct wsn_plan *plan = NULL;
	struct wsn_args a;
	void *x = NULL, *w = NULL, *y = NULL, *rstd = NULL, *h = NULL, *h2 = NULL, *big = NULL, *o_mem = NULL;
	size_t xb = (size_t)ROWS * HIDDEN * 2;
	char text[4096];
	float ms = 0;

	CHECK(wsn_mem_alloc(d, xb, &x));
	CHECK(wsn_mem_alloc(d, HIDDEN * 2, &w));
	CHECK(wsn_mem_alloc(other, 4096, &o_mem)); /* the other device in between */
	CHECK(wsn_mem_alloc(d, xb, &y));
	CHECK(wsn_mem_alloc(d, ROWS * 4, &rstd));
	check("wsn_mem_alloc(200 GiB)", wsn_mem_alloc(d, (size_t)200 << 30, &big), WSN_ENOMEM);
	CHECK(wsn_host_alloc(d, xb, &h));
	CHECK(wsn_host_alloc(d, xb, &h2));
	memset(h, 0x3c, xb);
	CHECK(wsn_stream_create(d, &s));
	CHECK(wsn_event_create(d, &e0));
	CHECK(wsn_event_create(d, &e1));
	CHECK(wsn_mem_set(d, y, 0xff, xb, s));
	CHECK(wsn_mem_set(d, w, 0, HIDDEN * 2, NULL));
	CHECK(wsn_event_record(e0, s));
	CHECK(wsn_memcpy(d, x, h, xb, WSN_COPY_H2D, s));
	CHECK(wsn_memcpy(other, o_mem, h, 4096, WSN_COPY_H2D, NULL));
	CHECK(wsn_memcpy(d, y, x, xb, WSN_COPY_D2D, NULL));
	CHECK(wsn_memcpy(d, h2, y, xb, WSN_COPY_D2H, s));
	CHECK(wsn_memcpy(d, h2, h, 64, WSN_COPY_H2H, s));
	CHECK(wsn_stream_wait_event(s, e0));
	CHECK(wsn_event_record(e1, s));
	CHECK(wsn_event_sync(e1));
	CHECK(wsn_event_elapsed(e0, e1, &ms));
	CHECK(wsn_stream_sync(d, s));
	CHECK(wsn_stream_sync(d, NULL));

	wsn_plan_options_init(&o, WSN_RMSNORM_FWD);
	CHECK(wsn_plan_create(d, WSN_RMSNORM_FWD, ROWS, HIDDEN, WSN_BF16, &o, &plan));
	if (plan) {
		check("wsn_plan_describe", wsn_plan_describe(plan, text, sizeof(text)) > 0 ? 0 : -1, 0);
		memset(&a, 0, sizeof(a));
		wsn_tensor_2d(&a.x, x, WSN_BF16, WSN_MEM_DEVICE, ROWS, HIDDEN);
		wsn_tensor_1d(&a.weight, w, WSN_BF16, WSN_MEM_DEVICE, HIDDEN);
		wsn_tensor_2d(&a.y, y, WSN_BF16, WSN_MEM_DEVICE, ROWS, HIDDEN);
		wsn_tensor_1d(&a.rstd, rstd, WSN_F32, WSN_MEM_DEVICE, ROWS);
		CHECK(wsn_plan_execute(plan, &a, s));
		CHECK(wsn_plan_execute(plan, &a, NULL));
		exercise_wrap(d, ordinal, plan, &a);
		/* refused before any driver call, and still nothing switched */
		a.y.data = NULL;
		check("wsn_plan_execute(no y)", wsn_plan_execute(plan, &a, s), WSN_EINVAL);
		wsn_plan_destroy(plan);
		check("wsn_plan_destroy", 0, 0);
	}
	CHECK(wsn_stream_sync(d, s));
	CHECK(wsn_event_destroy(e1));
	CHECK_RELEASED(wsn_event_destroy(e0), 1);
	CHECK_RELEASED(wsn_stream_destroy(s), 2); /* the stream and its done word */
	CHECK(wsn_host_free(d, h2));
	CHECK_RELEASED(wsn_host_free(d, h), 1);
	CHECK(wsn_mem_free(other, o_mem));
	CHECK(wsn_mem_free(d, rstd));
	CHECK(wsn_mem_free(d, y));
	CHECK_RELEASED(wsn_mem_free(d, w), 1);
	CHECK(wsn_mem_free(d, x));
}

/* Function pointer fn from an address the fake driver must provide; main fails here without it. */
#define NEED(fn, addr, name)                                              \
	do {                                                              \
		void *a_ = (addr);                                        \
		if (!a_) {                                                \
			printf("FAIL: the fake driver has no %s\n", name); \
			return 1;                                         \
		}                                                         \
		memcpy(&(fn), &a_, sizeof(a_));                           \
	} while (0)

int main(void)
{
	wsn__cu_pfn_cuGetProcAddress get_proc;
	CUcontext (*app_context)(void);
	struct wsn_device *d0 = NULL, *d1 = NULL;
	void *lib, *p;

	/* the library wsnorm loads: the same object, so the same current context */
	if (!(lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) || !(p = dlsym(lib, "fake_cuda_app_context"))) {
		printf("skip: the fake driver is not the libcuda.so.1 found here (%s)\n", lib ? "no fake_cuda_app_context" : dlerror());
		return 77;
	}
	memcpy(&app_context, &p, sizeof(p));
	NEED(fail_next, dlsym(lib, "fake_cuda_fail_next"), "fake_cuda_fail_next");
	NEED(live, dlsym(lib, "fake_cuda_live"), "fake_cuda_live");
	NEED(get_proc, dlsym(lib, "cuGetProcAddress_v2"), "cuGetProcAddress_v2");
	NEED(get_current, proc(get_proc, "cuCtxGetCurrent"), "cuCtxGetCurrent");
	NEED(set_current, proc(get_proc, "cuCtxSetCurrent"), "cuCtxSetCurrent");
	NEED(device_get, proc(get_proc, "cuDeviceGet"), "cuDeviceGet");
	NEED(primary_retain, proc(get_proc, "cuDevicePrimaryCtxRetain"), "cuDevicePrimaryCtxRetain");
	NEED(primary_release, proc(get_proc, "cuDevicePrimaryCtxRelease"), "cuDevicePrimaryCtxRelease");
	NEED(stream_create, proc(get_proc, "cuStreamCreate"), "cuStreamCreate");
	NEED(stream_destroy, proc(get_proc, "cuStreamDestroy"), "cuStreamDestroy");
	/* as an application does before it makes a context of its own current */
	if (!(p = proc(get_proc, "cuInit")) || ((wsn__cu_pfn_cuInit)p)(0) != CUDA_SUCCESS) {
		printf("FAIL: cuInit of the fake driver\n");
		return 1;
	}
	app = app_context();
	if (set_current(app) != CUDA_SUCCESS) {
		printf("FAIL: cannot make the application's context current\n");
		return 1;
	}

	check("wsn_device_count", wsn_device_count() >= 3 ? 0 : WSN_ENODEV, 0); /* cpu, cuda:0, cuda:1 */
	CHECK(wsn_device_open("cuda:0", &d0));
	CHECK(wsn_device_open("cuda:1", &d1));
	check("wsn_device_open(cuda:2)", wsn_device_open("cuda:2", &(struct wsn_device *){ NULL }), WSN_ENODEV);
	if (!d0 || !d1)
		return 1;
	exercise(d0, 0, d1);
	exercise(d1, 1, d0);
	wsn_device_close(d1);
	check("wsn_device_close(cuda:1)", 0, 0);
	wsn_device_close(d0);
	check("wsn_device_close(cuda:0)", 0, 0);
	if (failures) {
		printf("%d check%s failed\n", failures, failures == 1 ? "" : "s");
		return 1;
	}
	printf("ok: the application's context stayed current across every call\n");
	return 0;
}
