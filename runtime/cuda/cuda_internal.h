/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_internal.h: what the CUDA backend's files share: the driver table, errors, devices, modules, TMA. */
#ifndef WSN_CUDA_INTERNAL_H
#define WSN_CUDA_INTERNAL_H

#ifndef WSN_LAYER_RUNTIME
#error "runtime/cuda/cuda_internal.h is private to the runtime (docs/DESIGN.md, Layers)"
#endif

#include "backend.h"
#include "core/params.h"
#include "core/util.h"
#include "codegen.h"
#include "cuda_abi.h"

#include <pthread.h>

/* CUresult names for when the driver cannot be asked (not loaded, or it does not know the code). */
#define WSN_CU_ERRORS(X)                                                              \
	X(CUDA_SUCCESS, "no error")                                                   \
	X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                               \
	X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                  \
	X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                         \
	X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                           \
	X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                 \
	X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                        \
	X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                 \
	X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                       \
	X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device") \
	X(CUDA_ERROR_INVALID_PTX, "a PTX JIT compilation failed")                     \
	X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "the provided PTX was compiled with an unsupported toolchain") \
	X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, "PTX JIT compiler library not found")    \
	X(CUDA_ERROR_JIT_COMPILATION_DISABLED, "PTX JIT compilation was disabled")    \
	X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                       \
	X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                             \
	X(CUDA_ERROR_NOT_READY, "device not ready")                                   \
	X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")     \
	X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch") \
	X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")       \
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
	X(CUDA_ERROR_HARDWARE_STACK_ERROR, "hardware stack error")                    \
	X(CUDA_ERROR_ILLEGAL_INSTRUCTION, "an illegal instruction was encountered")   \
	X(CUDA_ERROR_MISALIGNED_ADDRESS, "misaligned address")                        \
	X(CUDA_ERROR_INVALID_ADDRESS_SPACE, "operation not supported on global/shared address space") \
	X(CUDA_ERROR_INVALID_PC, "invalid program counter")                           \
	X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                     \
	X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch") \
	X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                        \
	X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                        \
	X(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized")                  \
	X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination") \
	X(CUDA_ERROR_UNKNOWN, "unknown error")

/* One entry of that table: static const struct wsn__cu_error_entry t[] = { WSN_CU_ERRORS(WSN_CU_ERROR_ENTRY) }; */
struct wsn__cu_error_entry {
	CUresult code;
	const char *name, *text;
};
#define WSN_CU_ERROR_ENTRY(e, text) { e, #e, text },

/* The driver table: one member per WSN_CU_FUNCS entry, typed by cuda_abi.h (the variant resolved). */
struct wsn__cu_api {
	void *lib; /* dlopen handle, never closed once loaded */
	int driver_version;
#define WSN__CU_MEMBER(name, version, params) wsn__cu_pfn_##name name;
	WSN_CU_FUNCS(WSN__CU_MEMBER)
#undef WSN__CU_MEMBER
};

/* The process-wide table, valid after wsn__cu_load() returned 0. */
extern struct wsn__cu_api wsn__cu;

/* Name of the driver library dlopen'ed by wsn__cu_load(). */
#define WSN_CU_LIBRARY "libcuda.so.1"

/*
 * Load the driver once per process: dlopen WSN_CU_LIBRARY, resolve every WSN_CU_FUNCS entry
 * through cuGetProcAddress_v2, cuInit(0), cuDriverGetVersion. Thread-safe; later calls return the
 * first result again (and re-record its message). Returns 0, WSN_ENODRIVER ("no NVIDIA driver: ..."
 * when the library is missing or too old, or names the missing entry point) or the cuInit error
 * (WSN_ENODEV for CUDA_ERROR_NO_DEVICE, WSN_EDRIVER otherwise).
 */
int wsn__cu_load(void);
/*
 * Open `path` and resolve every entry point into *api without touching the process-wide table or
 * calling cuInit (what wsn__cu_load uses; tests call it with a library that is not a driver).
 * Returns 0 or WSN_ENODRIVER naming the library or the missing entry point; nothing is left open.
 */
int wsn__cu_open_library(const char *path, struct wsn__cu_api *api);

/* ---- errors: the one boundary where a CUresult becomes a WSN_E* code ---- */

/* WSN_E* code for a CUresult: 0, WSN_ENOMEM, WSN_ELAUNCH, WSN_EJIT, WSN_ENODEV or WSN_EDRIVER. */
int wsn__cu_code(CUresult r);
/* The driver's name for r ("CUDA_ERROR_ILLEGAL_ADDRESS"), from the driver when loaded, else a built-in table. */
const char *wsn__cu_error_name(CUresult r);
/*
 * Translate r: 0 when r is CUDA_SUCCESS; otherwise record "call(): NAME (n): description, while
 * <what>" (what formatted from fmt) with the raw code and name (wsn_last_driver_status) and return
 * wsn__cu_code(r).
 */
int wsn__cu_result(CUresult r, const char *call, const char *fmt, ...) WSN_PRINTF(3, 4);
/* As wsn__cu_result, but any failure other than out-of-memory is reported as err (e.g. WSN_ELAUNCH). */
int wsn__cu_result_as(int err, CUresult r, const char *call, const char *fmt, ...) WSN_PRINTF(4, 5);

/* Call driver function fn with the parenthesised args and translate its result. */
#define WSN_CU(fn, args, ...) wsn__cu_result(wsn__cu.fn args, #fn, __VA_ARGS__)

/* ---- devices ---- */

struct wsn__cu_hold; /* the stream-hold kernel (cuda_backend.c) */

/* An open device: what device_open returns as the backend's ctx. */
struct wsn__cu_device {
	int index;
	CUdevice dev;
	CUcontext ctx;        /* the retained primary context */
	int cc_major, cc_minor;
	int arch;             /* 90 (sm_90a) or 100 (sm_100a); 0: no kernels for this device */
	char name[128];
	struct wsn__gpu_props props;
	pthread_mutex_t lock; /* guards host and hold */
	struct wsn__host_map *host; /* pinned host allocations: pages registered with the driver */
	struct wsn__cu_hold *hold; /* the stream-hold kernel, loaded at its first use */
};

/*
 * Every entry point works in its device's context and gives the calling thread back the context it
 * had (an application's own stays current across libwsnorm calls): it declares WSN_CU_SCOPE(name)
 * with its locals and calls wsn__cu_enter(d, &name) first; the cleanup attribute restores the
 * caller's context on every return after that (raw calls, which keep the last error message).
 */
struct wsn__cu_scope {
	int saved;
	CUcontext prev;
};
void wsn__cu_scope_end(struct wsn__cu_scope *s);
#define WSN_CU_SCOPE(name) struct wsn__cu_scope name __attribute__((cleanup(wsn__cu_scope_end))) = { 0, NULL }
/* Make d's context current for the rest of the scope. 0 or an error. */
int wsn__cu_enter(struct wsn__cu_device *d, struct wsn__cu_scope *s);
/* The same with raw calls whose failures are ignored, for releases that must finish whatever the driver
 * says and leave the caller's last error message as it was. */
void wsn__cu_enter_quiet(struct wsn__cu_device *d, struct wsn__cu_scope *s);

/* ---- modules and kernels (module.c) ---- */

struct wsn__cu_module {
	CUmodule mod;
	double jit_ms;        /* wall time of cuModuleLoadDataEx measured here */
	float jit_driver_ms;  /* CU_JIT_WALL_TIME as the driver reports it; < 0: not reported */
	char *info_log;       /* malloc'd, NUL-terminated ("" when empty) */
	char *error_log;
	size_t ptx_bytes;
};

/*
 * JIT-compile NUL-terminated PTX text in the current context (cuModuleLoadDataEx with the info
 * and error log buffers and the wall time). what names the module in messages. On success m holds
 * the module and both logs. On failure m->mod is NULL, m keeps the logs (free them with
 * wsn__cu_module_unload) and the result is WSN_EJIT with the error log in the message (or another
 * driver error, e.g. WSN_ENOMEM).
 */
int wsn__cu_module_load(struct wsn__cu_module *m, const char *ptx, const char *what);
/* Unload the module (if any) and free the logs; m may be zeroed or half-loaded. */
void wsn__cu_module_unload(struct wsn__cu_module *m);

/* A kernel of a loaded module, with the attributes the driver reports for it. */
struct wsn__cu_kernel {
	CUfunction fn;
	char name[64];
	int regs;          /* registers per thread */
	int local_bytes;   /* local memory per thread: spills (and local arrays) */
	int static_smem;   /* static shared memory per CTA */
	int const_bytes;
	int max_threads;   /* most threads per CTA this kernel can launch with */
	int ptx_version, binary_version;
	unsigned block;    /* threads per CTA the plan launches with */
	unsigned dyn_smem; /* dynamic shared memory per CTA the plan launches with */
	int ctas_per_sm;   /* measured occupancy at (block, dyn_smem) */
	int pdl;           /* launch as a programmatic dependent of the stream's previous kernel: the
			    * kernel runs griddepcontrol.wait before touching global memory (0 after
			    * wsn__cu_kernel_get; see wsn__cu_pdl_allowed) */
};

/*
 * Look up entry `name` in m, read its attributes, raise its dynamic shared memory limit when
 * static + dyn_smem exceeds 48 KiB, and measure how many CTAs of `block` threads fit on one SM.
 * Returns 0, WSN_ELAUNCH (the kernel cannot run with that block/shared memory: the message says
 * why) or a driver error naming the kernel.
 */
int wsn__cu_kernel_get(const struct wsn__cu_module *m, const char *name, unsigned block, unsigned dyn_smem,
		       struct wsn__cu_kernel *k);
/*
 * Launch k with cuLaunchKernelEx: grid x 1 x 1 CTAs of k->block threads, k->dyn_smem bytes of
 * dynamic shared memory, on stream s (NULL: the context's default stream), params per the kernel's
 * parameter list. cluster > 1 adds a cluster-dimension attribute (grid must be a multiple);
 * k->pdl the programmatic-stream-serialization attribute (dependent launch).
 * Returns 0, WSN_EINVAL or WSN_ELAUNCH naming the kernel and the driver's error.
 */
int wsn__cu_launch(const struct wsn__cu_kernel *k, unsigned grid, unsigned cluster, CUstream s, void **params);
/* How many clusters of `cluster` CTAs of k can be resident at once on the device (*n, 0 when none). */
int wsn__cu_max_clusters(const struct wsn__cu_kernel *k, unsigned cluster, int *n);
/* Whether generated kernels launch as programmatic dependents: yes unless WSNORM_PDL is 0. */
int wsn__cu_pdl_allowed(void);

/* ---- TMA descriptors (tma.c) ---- */

/* The arguments of cuTensorMapEncodeTiled, dimension 0 innermost. */
struct wsn__tma_desc {
	CUtensorMapDataType dtype;
	unsigned rank;            /* 1..5 */
	const void *global;       /* device address of element 0 */
	uint64_t dims[5];         /* elements per dimension */
	uint64_t strides[4];      /* bytes between consecutive indices of dimensions 1..rank-1 */
	uint32_t box[5];          /* elements per dimension of the box copied */
	uint32_t elem_strides[5]; /* traversal step per dimension (1 = dense) */
	CUtensorMapInterleave interleave;
	CUtensorMapSwizzle swizzle;
	CUtensorMapL2promotion l2;
	CUtensorMapFloatOOBfill oob;
};

/* Bytes per element of a TMA data type; 0 for types this wrapper does not support (packed sub-byte ones). */
size_t wsn__tma_elem_size(CUtensorMapDataType dt);
/*
 * Check d against the rules of cuTensorMapEncodeTiled without calling the driver. Returns 0 or
 * WSN_ETMA with a message naming the rule and the offending dimension and value.
 */
int wsn__tma_check(const struct wsn__tma_desc *d);
/*
 * wsn__tma_check, then cuTensorMapEncodeTiled into *map (64-byte aligned) in the current context.
 * Returns 0, WSN_ETMA (a rule, checked first, even with no driver loaded), WSN_EINVAL (map
 * misaligned), WSN_ENODRIVER, or the driver's error.
 */
int wsn__tma_encode(CUtensorMap *map, const struct wsn__tma_desc *d);

/* ---- plans: the backend ops (cuda_plan.c, cuda_describe.c, cuda_launch.c; cuda_plan.h) ---- */

int wsn__cuda_plan_create(void *ctx, const struct wsn__plan_params *p, void **out);
void wsn__cuda_plan_destroy(void *ctx, void *plan);
int wsn__cuda_plan_describe(void *ctx, const void *plan, char *buf, size_t len);
int wsn__cuda_plan_json(void *ctx, const void *plan, void *obj);
int wsn__cuda_execute(void *ctx, void *plan, const struct wsn__exec *ex, void *stream);

#endif
