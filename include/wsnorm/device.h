/* SPDX-License-Identifier: MIT */
/* wsnorm/device.h: backends, devices, memory, copies, streams and events. */
#ifndef WSNORM_DEVICE_H
#define WSNORM_DEVICE_H

#include "common.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

struct wsn_device;
struct wsn_stream;
struct wsn_event;

/* What a backend reports about itself. */
struct wsn_backend_info {
	char name[16];      /* "cpu", "cuda", "amd" */
	int built;          /* compiled into this library */
	int available;      /* its driver was found and initialised */
	int device_count;   /* devices it can open */
	char note[256];     /* why not available ("no NVIDIA driver: ..."), or the driver version */
};

/* Properties of one device. Fields a backend does not know are 0 or "". */
struct wsn_device_info {
	char spec[32];          /* what wsn_device_open() takes: "cpu", "cuda:0" */
	char backend[16];
	int index;              /* index within its backend */
	enum wsn_mem exec_mem;  /* memory its ops read and write: WSN_MEM_HOST (cpu) or WSN_MEM_DEVICE */
	char name[128];
	char arch[16];          /* "x86_64", "sm_90", "gfx942" */
	int cc_major, cc_minor; /* compute capability (CUDA) */
	int multiprocessors;    /* SMs / CUs; CPU: hardware threads */
	int64_t total_mem;      /* bytes */
	int smem_per_block_optin;   /* bytes of shared memory a block may opt into */
	int smem_per_sm;            /* bytes */
	int regs_per_sm;
	int regs_per_block;
	int max_threads_per_sm;
	int64_t l2_bytes;
	int mem_clock_khz;
	int mem_bus_width;      /* bits */
	double mem_peak_gbs;    /* from clock and bus width (datasheet-style) */
	int pcie_gen, pcie_width;
	char pci_bus_id[32];
	int cluster_launch;     /* supports thread-block clusters */
	int driver_version;     /* e.g. 13000 */
};

/* Number of backends known to this library (built or not). */
WSN_API int wsn_backend_count(void);
/* Information on backend i (0 <= i < wsn_backend_count()). Initialises it on first use. 0 or WSN_EINVAL. */
WSN_API int wsn_backend_info(int i, struct wsn_backend_info *out);

/* Total devices over every available backend. The CPU is always device 0 of its backend. */
WSN_API int wsn_device_count(void);
/* Information on device i of the flat list (0 <= i < wsn_device_count()). 0, WSN_EINVAL or WSN_ENODEV. */
WSN_API int wsn_device_info_at(int i, struct wsn_device_info *out);

/*
 * Check a device spec without opening anything: "auto", or cpu, cuda or amd with an optional ":N" of
 * decimal digits (N <= 2^20). On success, when not NULL, backend (16 bytes) gets the backend's name
 * ("auto" for auto) and *index the device index (0 without ":N", -1 for auto). Returns 0, or
 * WSN_EINVAL with a message naming the fault.
 */
WSN_API int wsn_device_spec_parse(const char *spec, char *backend, int *index);
/*
 * Open a device by spec: "cpu", "cuda", "cuda:N", "amd:N", or "auto" (the first GPU whose backend
 * can run ops, else the CPU).
 * Returns 0, WSN_EINVAL (bad spec), WSN_EBACKEND (backend not built), WSN_ENODRIVER,
 * WSN_ENODEV (no such index) or a driver error.
 */
WSN_API int wsn_device_open(const char *spec, struct wsn_device **out);
/* Close a device opened with wsn_device_open(); NULL is ignored. */
WSN_API void wsn_device_close(struct wsn_device *dev);
/* Properties of an open device. */
WSN_API int wsn_device_info(const struct wsn_device *dev, struct wsn_device_info *out);
/* Set the CPU thread count used by the CPU backend (0 = all hardware threads). Others ignore it. */
WSN_API int wsn_device_set_threads(struct wsn_device *dev, int threads);

/* Device memory. */
WSN_API int wsn_mem_alloc(struct wsn_device *dev, size_t bytes, void **out);
WSN_API int wsn_mem_free(struct wsn_device *dev, void *ptr);
/* Set bytes of device memory to a byte value, ordered on stream (NULL: the default stream). */
WSN_API int wsn_mem_set(struct wsn_device *dev, void *ptr, int value, size_t bytes,
			struct wsn_stream *stream);
/*
 * Pinned host memory the device can copy from asynchronously: anonymous mmap (huge pages when
 * available) registered with the driver, so the same pages can be registered with io_uring.
 */
WSN_API int wsn_host_alloc(struct wsn_device *dev, size_t bytes, void **out);
WSN_API int wsn_host_free(struct wsn_device *dev, void *ptr);

enum wsn_copy_kind {
	WSN_COPY_H2D = 0,
	WSN_COPY_D2H = 1,
	WSN_COPY_D2D = 2,
	WSN_COPY_H2H = 3,
};
/* Copy bytes. stream == NULL: synchronous. Otherwise ordered on the stream (host memory must be pinned). */
WSN_API int wsn_memcpy(struct wsn_device *dev, void *dst, const void *src, size_t bytes,
		       enum wsn_copy_kind kind, struct wsn_stream *stream);

/* Streams order work on a device; events mark points in them and time them. */
WSN_API int wsn_stream_create(struct wsn_device *dev, struct wsn_stream **out);
WSN_API int wsn_stream_destroy(struct wsn_stream *s);
/* Use an application's own stream (a CUstream of the device's primary context on CUDA; NULL: its
 * default stream): work queued through *out goes on native; wsn_stream_destroy frees the wrapper,
 * never native. */
WSN_API int wsn_stream_wrap(struct wsn_device *dev, void *native, struct wsn_stream **out);
/* Wait for all work on the stream (NULL: the device's default stream and all of its work). */
WSN_API int wsn_stream_sync(struct wsn_device *dev, struct wsn_stream *s);
WSN_API int wsn_event_create(struct wsn_device *dev, struct wsn_event **out);
WSN_API int wsn_event_destroy(struct wsn_event *e);
WSN_API int wsn_event_record(struct wsn_event *e, struct wsn_stream *s);
WSN_API int wsn_event_sync(struct wsn_event *e);
/* Make stream s wait for event e (GPU-side ordering). */
WSN_API int wsn_stream_wait_event(struct wsn_stream *s, struct wsn_event *e);
/* Hold stream s on the device for ns nanoseconds: work queued behind the hold starts once it ends
 * (GPUs only). For timing work back to back without timing the host's submission of it. */
WSN_API int wsn_stream_hold(struct wsn_stream *s, uint64_t ns);
#define WSN_HOLD_MAX_NS 10000000000ull
/* 1 when the work recorded before e is done (or e was never recorded), 0 while it is not. */
WSN_API int wsn_event_query(struct wsn_event *e);
/* Milliseconds between two recorded, completed events. */
WSN_API int wsn_event_elapsed(struct wsn_event *start, struct wsn_event *end, float *ms);

#ifdef __cplusplus
}
#endif
#endif
