/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_backend.c: the CUDA backend's ops table: devices, memory, copies, streams and events. */
#include "cuda/cuda_internal.h"
#include "backend.h"
#include "core/error.h"
#include "core/util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_PAGE (2u << 20)

static CUstream stream_of(void *s)
{
	return (CUstream)s; /* NULL: the context's default stream (CUstream 0) */
}

static CUdeviceptr dptr(const void *p)
{
	return (CUdeviceptr)(uintptr_t)p;
}

/* ---- backend and devices ---- */

/* "580.159.04" from the kernel module, when it says. */
static void kernel_module_version(char *buf, size_t len)
{
	FILE *f = fopen("/sys/module/nvidia/version", "r");

	buf[0] = '\0';
	if (!f)
		return;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
}

static int cuda_init(struct wsn_backend_info *info)
{
	char kmod[64];
	int err, n = 0;

	if ((err = wsn__cu_load()) < 0) {
		snprintf(info->note, sizeof(info->note), "%s", wsn_last_error());
		return err;
	}
	if ((err = WSN_CU(cuDeviceGetCount, (&n), "counting CUDA devices")) < 0) {
		snprintf(info->note, sizeof(info->note), "%s", wsn_last_error());
		return err;
	}
	kernel_module_version(kmod, sizeof(kmod));
	info->device_count = n;
	snprintf(info->note, sizeof(info->note), "%sCUDA %d.%d driver%s%s%s", n ? "" : "no NVIDIA GPU: ",
		 wsn__cu.driver_version / 1000, wsn__cu.driver_version % 1000 / 10, kmod[0] ? " (NVIDIA " : "", kmod,
		 kmod[0] ? ")" : "");
	if (!n)
		return wsn__error(WSN_ENODEV, "%s reports no devices", info->note);
	return 0;
}

static int attr(CUdevice dev, CUdevice_attribute a, const char *what, int *out)
{
	*out = 0;
	return WSN_CU(cuDeviceGetAttribute, (out, a, dev), "reading %s of device %d", what, (int)dev);
}

/* "32.0 GT/s PCIe" -> 5; 0 when unknown. */
static int pcie_gen_of(double gts)
{
	static const double speeds[] = { 2.5, 5.0, 8.0, 16.0, 32.0, 64.0, 128.0 };

	for (size_t i = 0; i < WSN_ARRAY_SIZE(speeds); i++)
		if (gts > speeds[i] * 0.9 && gts < speeds[i] * 1.1)
			return (int)i + 1;
	return 0;
}

static int read_sysfs(const char *bus_id, const char *file, char *buf, size_t len)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bus_id, file);
	if (!(f = fopen(path, "r")))
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	return 0;
}

/* PCIe link from sysfs; the driver's bus id "00000000:18:00.0" is "0000:18:00.0" there. */
static void pcie_link(struct wsn_device_info *out)
{
	unsigned dom, bus, slot, fn;
	char id[32], buf[64];

	if (sscanf(out->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4)
		return;
	snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", dom, bus, slot, fn);
	if (!read_sysfs(id, "current_link_speed", buf, sizeof(buf)))
		out->pcie_gen = pcie_gen_of(strtod(buf, NULL));
	if (!read_sysfs(id, "current_link_width", buf, sizeof(buf)))
		out->pcie_width = atoi(buf);
}

static int cuda_device_info(int index, struct wsn_device_info *out)
{
	size_t total = 0;
	CUdevice dev;
	int err, v;

	if ((err = wsn__cu_load()) < 0)
		return err;
	if ((err = WSN_CU(cuDeviceGet, (&dev, index), "opening CUDA device %d", index)) < 0)
		return err;
	if ((err = WSN_CU(cuDeviceGetName, (out->name, (int)sizeof(out->name), dev), "reading the name of device %d",
			  index)) < 0)
		return err;
	if ((err = WSN_CU(cuDeviceTotalMem, (&total, dev), "reading the memory size of device %d", index)) < 0)
		return err;
	out->total_mem = (int64_t)total;
#define A(field, a, what)                                      \
	do {                                                   \
		if ((err = attr(dev, a, what, &v)) < 0)        \
			return err;                            \
		field = v;                                     \
	} while (0)
	A(out->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "the compute capability");
	A(out->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "the compute capability");
	A(out->multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "the SM count");
	A(out->smem_per_block_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory");
	A(out->smem_per_sm, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "shared memory per SM");
	A(out->regs_per_sm, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "registers per SM");
	A(out->regs_per_block, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block");
	A(out->max_threads_per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "threads per SM");
	A(out->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "the L2 size");
	A(out->mem_bus_width, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, "the memory bus width");
#undef A
	/* optional: not every driver reports these */
	if (wsn__cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev) == CUDA_SUCCESS)
		out->mem_clock_khz = v;
	if (wsn__cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, dev) == CUDA_SUCCESS)
		out->cluster_launch = v;
	/* double data rate: two transfers per clock over bus_width bits */
	out->mem_peak_gbs = 2.0 * out->mem_clock_khz * 1e3 * (out->mem_bus_width / 8.0) / 1e9;
	snprintf(out->arch, sizeof(out->arch), "sm_%d%d", out->cc_major, out->cc_minor);
	if (wsn__cu.cuDeviceGetPCIBusId(out->pci_bus_id, (int)sizeof(out->pci_bus_id), dev) == CUDA_SUCCESS) {
		for (char *c = out->pci_bus_id; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		pcie_link(out);
	}
	out->driver_version = wsn__cu.driver_version;
	return 0;
}

static int cuda_device_open(int index, void **ctxp)
{
	struct wsn_device_info info;
	struct wsn__cu_device *d;
	int err;
	WSN_CU_SCOPE(scope);

	*ctxp = NULL;
	memset(&info, 0, sizeof(info));
	if ((err = cuda_device_info(index, &info)) < 0)
		return err;
	if (!(d = calloc(1, sizeof(*d))))
		return wsn__error(WSN_ENOMEM, "cuda:%d: out of memory", index);
	pthread_mutex_init(&d->lock, NULL);
	d->index = index;
	d->cc_major = info.cc_major;
	d->cc_minor = info.cc_minor;
	snprintf(d->name, sizeof(d->name), "%s", info.name);
	/* sm_90a PTX runs on cc 9.0 only, sm_100a on cc 10.0 only: arch-specific targets do not carry over */
	if (info.cc_major == 9 && info.cc_minor == 0)
		d->arch = 90;
	else if (info.cc_major == 10 && info.cc_minor == 0)
		d->arch = 100;
	d->props.arch = d->arch;
	d->props.sms = info.multiprocessors;
	d->props.smem_per_block_optin = info.smem_per_block_optin;
	d->props.smem_per_sm = info.smem_per_sm;
	d->props.regs_per_sm = info.regs_per_sm;
	d->props.regs_per_block = info.regs_per_block;
	d->props.max_threads_per_sm = info.max_threads_per_sm;
	d->props.l2_bytes = info.l2_bytes;
	d->props.model = wsn__gpu_model(d->name);
	if ((err = WSN_CU(cuDeviceGet, (&d->dev, index), "opening CUDA device %d", index)) < 0)
		goto err;
	if ((err = WSN_CU(cuDevicePrimaryCtxRetain, (&d->ctx, d->dev), "retaining the primary context of cuda:%d",
			  index)) < 0)
		goto err;
	if ((err = wsn__cu_enter(d, &scope)) < 0) {
		wsn__cu.cuDevicePrimaryCtxRelease(d->dev);
		goto err;
	}
	*ctxp = d;
	return 0;
err:
	pthread_mutex_destroy(&d->lock);
	free(d);
	return err;
}

static void host_block_release(struct wsn__host_map *b)
{
	wsn__cu.cuMemHostUnregister(b->ptr);
	munmap(b->ptr, b->len);
	free(b);
}

/*
 * Stream hold: one warp of one CTA sleeps until the global timer has advanced ns nanoseconds.
 * PTX for sm_70 (%globaltimer, nanosleep), JIT-compiled for whatever GPU this is on first use.
 */
struct wsn__cu_hold {
	struct wsn__cu_module mod;
	struct wsn__cu_kernel k;
};

static const char hold_ptx[] =
	"// wsnorm stream hold: sleep until %globaltimer has advanced ns nanoseconds\n"
	".version 7.0\n"
	".target sm_70\n"
	".address_size 64\n"
	".visible .entry wsn_stream_hold(.param .u64 ns)\n"
	"{\n"
	"\t.reg .u64 %end, %now;\n"
	"\t.reg .pred %wait;\n"
	"\tld.param.u64 %end, [ns];\n"
	"\tmov.u64 %now, %globaltimer;\n"
	"\tadd.u64 %end, %end, %now;\n"
	"$Lsleep:\n"
	"\tnanosleep.u32 2000;\n"
	"\tmov.u64 %now, %globaltimer;\n"
	"\tsetp.lt.u64 %wait, %now, %end;\n"
	"\t@%wait bra $Lsleep;\n"
	"\tret;\n"
	"}\n";

static void hold_free(struct wsn__cu_hold *h)
{
	if (!h)
		return;
	wsn__cu_module_unload(&h->mod);
	free(h);
}

static int cuda_stream_hold(void *ctx, void *s, uint64_t ns)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__cu_hold *h;
	void *params[] = { &ns };
	int err = 0;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	pthread_mutex_lock(&d->lock);
	if (!(h = d->hold)) {
		if (!(h = calloc(1, sizeof(*h))))
			err = wsn__error(WSN_ENOMEM, "stream hold on cuda:%d: out of memory", d->index);
		else if ((err = wsn__cu_module_load(&h->mod, hold_ptx, "the stream-hold kernel")) == 0)
			err = wsn__cu_kernel_get(&h->mod, "wsn_stream_hold", 32, 0, &h->k);
		if (err < 0)
			hold_free(h);
		else
			d->hold = h;
	}
	pthread_mutex_unlock(&d->lock);
	if (err < 0)
		return err;
	return wsn__cu_launch(&h->k, 1, 1, stream_of(s), params);
}

static void cuda_device_close(void *ctx)
{
	struct wsn__cu_device *d = ctx;

	if (!d)
		return;
	/*
	 * Raw calls, results ignored: after a sticky fault every call fails and closing must still
	 * finish, without overwriting the caller's last error message. The caller's context is current
	 * again before the device's is released.
	 */
	{
		WSN_CU_SCOPE(scope);

		wsn__cu_enter_quiet(d, &scope);
		hold_free(d->hold);
		while (d->host) {
			struct wsn__host_map *b = d->host;
			d->host = b->next;
			host_block_release(b);
		}
	}
	wsn__cu.cuDevicePrimaryCtxRelease(d->dev);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

/* ---- memory ---- */

static int cuda_mem_alloc(void *ctx, size_t bytes, void **out)
{
	struct wsn__cu_device *d = ctx;
	CUdeviceptr p = 0;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if ((err = WSN_CU(cuMemAlloc, (&p, bytes), "allocating %zu bytes on cuda:%d", bytes, d->index)) < 0)
		return err;
	*out = (void *)(uintptr_t)p;
	return 0;
}

static int cuda_mem_free(void *ctx, void *ptr)
{
	struct wsn__cu_device *d = ctx;
	int err, ferr;
	WSN_CU_SCOPE(scope);

	/* freed even when the context cannot be made current (the driver finds the allocation by its
	 * address): the caller's handle is gone either way */
	err = wsn__cu_enter(d, &scope);
	ferr = WSN_CU(cuMemFree, (dptr(ptr)), "freeing device memory %p on cuda:%d", ptr, d->index);
	return err < 0 ? err : ferr;
}

static int cuda_mem_set(void *ctx, void *ptr, int value, size_t bytes, void *stream)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	return WSN_CU(cuMemsetD8Async, (dptr(ptr), (unsigned char)value, bytes, stream_of(stream)),
		      "setting %zu bytes at %p on cuda:%d", bytes, ptr, d->index);
}

/* Anonymous pages, huge when the size is worth it and the system has them. */
static void *map_pages(size_t *bytes)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len;
	void *p;

	if (*bytes >= HUGE_PAGE) {
		len = (*bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1);
#ifdef MAP_HUGETLB
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
		if (p != MAP_FAILED) {
			*bytes = len;
			return p;
		}
#endif
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
#ifdef MADV_HUGEPAGE
		madvise(p, len, MADV_HUGEPAGE); /* a hint: transparent huge pages when enabled */
#endif
		*bytes = len;
		return p;
	}
	len = (*bytes + (size_t)page - 1) & ~(size_t)(page - 1);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	*bytes = len;
	return p;
}

static int cuda_host_alloc(void *ctx, size_t bytes, void **out)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__host_map *b;
	size_t len = bytes;
	int err;
	void *p;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if (!(b = calloc(1, sizeof(*b))))
		return wsn__error(WSN_ENOMEM, "pinned host allocation of %zu bytes: out of memory", bytes);
	if (!(p = map_pages(&len))) {
		free(b);
		return wsn__error(WSN_ENOMEM, "pinned host allocation: mmap of %zu bytes failed", bytes);
	}
	/* PORTABLE: pinned for every context, so pipelines on other devices can copy from it too */
	if ((err = WSN_CU(cuMemHostRegister, (p, len, CU_MEMHOSTREGISTER_PORTABLE),
			  "pinning %zu bytes of host memory for cuda:%d", len, d->index)) < 0) {
		munmap(p, len);
		free(b);
		return err;
	}
	b->ptr = p;
	b->len = len;
	wsn__host_map_add(&d->lock, &d->host, b);
	*out = p;
	return 0;
}

static int cuda_host_free(void *ctx, void *ptr)
{
	struct wsn__cu_device *d = ctx;
	struct wsn__host_map *b = wsn__host_map_take(&d->lock, &d->host, ptr);
	int err, uerr;
	WSN_CU_SCOPE(scope);

	if (!b)
		return wsn__error(WSN_EINVAL, "pinned host free: %p was not allocated by wsn_host_alloc on cuda:%d", ptr,
				  d->index);
	/* unpin and unmap even when the context is broken, so the pages never outlive the call */
	err = wsn__cu_enter(d, &scope);
	uerr = WSN_CU(cuMemHostUnregister, (b->ptr), "unpinning %zu bytes of host memory", b->len);
	munmap(b->ptr, b->len);
	free(b);
	return err < 0 ? err : uerr;
}

static const char *const copy_names[] = { "host to device", "device to host", "device to device",
					   "host to host" };

/*
 * Copies are issued on the stream; with no stream they go on the default stream and are waited for,
 * so "synchronous" means the bytes are in place (cuMemcpyHtoD alone may return before its DMA ends).
 */
static int cuda_memcpy(void *ctx, void *dst, const void *src, size_t bytes, enum wsn_copy_kind kind, void *stream)
{
	struct wsn__cu_device *d = ctx;
	CUstream s = stream_of(stream);
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	switch (kind) {
	case WSN_COPY_H2D:
		err = WSN_CU(cuMemcpyHtoDAsync, (dptr(dst), src, bytes, s), "copying %zu bytes %s on cuda:%d", bytes,
			     copy_names[kind], d->index);
		break;
	case WSN_COPY_D2H:
		err = WSN_CU(cuMemcpyDtoHAsync, (dst, dptr(src), bytes, s), "copying %zu bytes %s on cuda:%d", bytes,
			     copy_names[kind], d->index);
		break;
	case WSN_COPY_D2D:
		err = WSN_CU(cuMemcpyDtoDAsync, (dptr(dst), dptr(src), bytes, s), "copying %zu bytes %s on cuda:%d",
			     bytes, copy_names[kind], d->index);
		break;
	case WSN_COPY_H2H:
		/* ordered after the stream's earlier work, then done by the CPU */
		err = WSN_CU(cuStreamSynchronize, (s), "waiting for a stream before a host to host copy on cuda:%d",
			     d->index);
		if (!err)
			memmove(dst, src, bytes);
		return err;
	default:
		return wsn__error(WSN_EINVAL, "memcpy: bad copy kind %d", (int)kind);
	}
	if (err || stream)
		return err;
	return WSN_CU(cuStreamSynchronize, (s), "waiting for a %zu-byte %s copy on cuda:%d", bytes, copy_names[kind],
		      d->index);
}

/* ---- streams and events ---- */

static int cuda_stream_create(void *ctx, void **out)
{
	struct wsn__cu_device *d = ctx;
	CUstream s = NULL;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	/* non-blocking: does not serialise with the legacy default stream */
	if ((err = WSN_CU(cuStreamCreate, (&s, CU_STREAM_NON_BLOCKING), "creating a stream on cuda:%d", d->index)) < 0)
		return err;
	*out = s;
	return 0;
}

static int cuda_stream_destroy(void *ctx, void *s)
{
	struct wsn__cu_device *d = ctx;
	int err, derr;
	WSN_CU_SCOPE(scope);

	/* destroyed even when the context cannot be made current, as wsn_stream_destroy frees the handle */
	err = wsn__cu_enter(d, &scope);
	derr = WSN_CU(cuStreamDestroy, (stream_of(s)), "destroying a stream on cuda:%d", d->index);
	return err < 0 ? err : derr;
}

static int cuda_stream_sync(void *ctx, void *s)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if (!s)
		return WSN_CU(cuCtxSynchronize, (), "waiting for all work on cuda:%d", d->index);
	return WSN_CU(cuStreamSynchronize, (stream_of(s)), "waiting for a stream on cuda:%d", d->index);
}

static int cuda_stream_wait_event(void *ctx, void *s, void *e)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	return WSN_CU(cuStreamWaitEvent, (stream_of(s), (CUevent)e, 0), "making a stream wait for an event on cuda:%d",
		      d->index);
}

static int cuda_event_create(void *ctx, void **out)
{
	struct wsn__cu_device *d = ctx;
	CUevent e = NULL;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	/* the event records time stamps; blocking sync: a thread waiting for it sleeps instead of
	 * spinning a core */
	if ((err = WSN_CU(cuEventCreate, (&e, CU_EVENT_BLOCKING_SYNC), "creating an event on cuda:%d", d->index)) < 0)
		return err;
	*out = e;
	return 0;
}

static int cuda_event_destroy(void *ctx, void *e)
{
	struct wsn__cu_device *d = ctx;
	int err, derr;
	WSN_CU_SCOPE(scope);

	/* destroyed even when the context cannot be made current, as wsn_event_destroy frees the handle */
	err = wsn__cu_enter(d, &scope);
	derr = WSN_CU(cuEventDestroy, ((CUevent)e), "destroying an event on cuda:%d", d->index);
	return err < 0 ? err : derr;
}

static int cuda_event_record(void *ctx, void *e, void *s)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	return WSN_CU(cuEventRecord, ((CUevent)e, stream_of(s)), "recording an event on cuda:%d", d->index);
}

static int cuda_event_sync(void *ctx, void *e)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	return WSN_CU(cuEventSynchronize, ((CUevent)e), "waiting for an event on cuda:%d", d->index);
}

static int cuda_event_query(void *ctx, void *e)
{
	struct wsn__cu_device *d = ctx;
	CUresult r;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	if ((r = wsn__cu.cuEventQuery((CUevent)e)) == CUDA_ERROR_NOT_READY)
		return 0;
	if ((err = wsn__cu_result(r, "cuEventQuery", "asking whether an event is done on cuda:%d", d->index)) < 0)
		return err;
	return 1;
}

static int cuda_event_elapsed(void *ctx, void *start, void *end, float *ms)
{
	struct wsn__cu_device *d = ctx;
	int err;
	WSN_CU_SCOPE(scope);

	if ((err = wsn__cu_enter(d, &scope)) < 0)
		return err;
	return WSN_CU(cuEventElapsedTime, (ms, (CUevent)start, (CUevent)end),
		      "measuring the time between two events on cuda:%d", d->index);
}

const struct wsn__backend_ops wsn__cuda_ops = {
	.name = "cuda",
	.exec_mem = WSN_MEM_DEVICE,
	.init = cuda_init,
	.device_info = cuda_device_info,
	.device_open = cuda_device_open,
	.device_close = cuda_device_close,
	.set_threads = NULL, /* the CPU thread count does not apply */
	.mem_alloc = cuda_mem_alloc,
	.mem_free = cuda_mem_free,
	.mem_set = cuda_mem_set,
	.host_alloc = cuda_host_alloc,
	.host_free = cuda_host_free,
	.memcpy = cuda_memcpy,
	.stream_create = cuda_stream_create,
	.stream_destroy = cuda_stream_destroy,
	.stream_sync = cuda_stream_sync,
	.stream_wait_event = cuda_stream_wait_event,
	.stream_hold = cuda_stream_hold,
	.event_create = cuda_event_create,
	.event_destroy = cuda_event_destroy,
	.event_record = cuda_event_record,
	.event_sync = cuda_event_sync,
	.event_query = cuda_event_query,
	.event_elapsed = cuda_event_elapsed,
	.plan_create = wsn__cuda_plan_create,
	.plan_destroy = wsn__cuda_plan_destroy,
	.plan_describe = wsn__cuda_plan_describe,
	.plan_json = wsn__cuda_plan_json,
	.execute = wsn__cuda_execute,
};
