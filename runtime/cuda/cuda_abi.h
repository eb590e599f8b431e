/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_abi.h: the part of the CUDA driver API that wsnorm uses, declared from NVIDIA's documentation. */
#ifndef WSN_CUDA_ABI_H
#define WSN_CUDA_ABI_H

/*
 * wsnorm loads libcuda.so.1 at run time and never needs a CUDA toolkit, so it declares the driver
 * ABI it relies on itself: the names are the driver API's documented ones, the values and layouts
 * those of its reference (CUDA 12.0 and later; the 128-byte-aligned CUtensorMap of CUDA 13). Every
 * value, type, member and prototype is written once, in a table below; the declarations are built
 * from the tables. tests/check_cuda_abi.c includes a toolkit's cuda.h and this header with
 * WSN_CU_ABI_TABLES_ONLY defined (the tables without the declarations) and checks each entry
 * against cuda.h with _Static_assert, so a drift fails the build of make check.
 */

#include <stddef.h>
#include <stdint.h>

/* ---- scalar and handle types: X(name, type) ---- */
#define WSN_CU_TYPES(X)                          \
	X(cuuint32_t, uint32_t)                  \
	X(cuuint64_t, uint64_t)                  \
	X(CUdevice, int)                         \
	X(CUdeviceptr, unsigned long long)       \
	X(CUcontext, struct CUctx_st *)          \
	X(CUmodule, struct CUmod_st *)           \
	X(CUfunction, struct CUfunc_st *)        \
	X(CUstream, struct CUstream_st *)        \
	X(CUevent, struct CUevent_st *)

/* ---- enumerations: X(name, value); each table is one enum type (WSN_CU_ENUMS) ---- */

/* CUresult: what every entry point returns */
#define WSN_CU_RESULT_VALUES(X)                               \
	X(CUDA_SUCCESS, 0)                                    \
	X(CUDA_ERROR_INVALID_VALUE, 1)                        \
	X(CUDA_ERROR_OUT_OF_MEMORY, 2)                        \
	X(CUDA_ERROR_NOT_INITIALIZED, 3)                      \
	X(CUDA_ERROR_DEINITIALIZED, 4)                        \
	X(CUDA_ERROR_NO_DEVICE, 100)                          \
	X(CUDA_ERROR_INVALID_DEVICE, 101)                     \
	X(CUDA_ERROR_INVALID_IMAGE, 200)                      \
	X(CUDA_ERROR_INVALID_CONTEXT, 201)                    \
	X(CUDA_ERROR_NO_BINARY_FOR_GPU, 209)                  \
	X(CUDA_ERROR_INVALID_PTX, 218)                        \
	X(CUDA_ERROR_JIT_COMPILER_NOT_FOUND, 221)             \
	X(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222)            \
	X(CUDA_ERROR_JIT_COMPILATION_DISABLED, 223)           \
	X(CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND, 302)     \
	X(CUDA_ERROR_SHARED_OBJECT_INIT_FAILED, 303)          \
	X(CUDA_ERROR_INVALID_HANDLE, 400)                     \
	X(CUDA_ERROR_NOT_FOUND, 500)                          \
	X(CUDA_ERROR_NOT_READY, 600)                          \
	X(CUDA_ERROR_ILLEGAL_ADDRESS, 700)                    \
	X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, 701)            \
	X(CUDA_ERROR_LAUNCH_TIMEOUT, 702)                     \
	X(CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING, 703)      \
	X(CUDA_ERROR_ASSERT, 710)                             \
	X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, 712)     \
	X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, 713)         \
	X(CUDA_ERROR_HARDWARE_STACK_ERROR, 714)               \
	X(CUDA_ERROR_ILLEGAL_INSTRUCTION, 715)                \
	X(CUDA_ERROR_MISALIGNED_ADDRESS, 716)                 \
	X(CUDA_ERROR_INVALID_ADDRESS_SPACE, 717)              \
	X(CUDA_ERROR_INVALID_PC, 718)                         \
	X(CUDA_ERROR_LAUNCH_FAILED, 719)                      \
	X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, 720)       \
	X(CUDA_ERROR_NOT_PERMITTED, 800)                      \
	X(CUDA_ERROR_NOT_SUPPORTED, 801)                      \
	X(CUDA_ERROR_SYSTEM_NOT_READY, 802)                   \
	X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, 803)             \
	X(CUDA_ERROR_UNKNOWN, 999)

/* CUdevice_attribute: what cuDeviceGetAttribute is asked */
#define WSN_CU_DEVICE_ATTRIBUTE_VALUES(X)                             \
	X(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 12)            \
	X(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 16)               \
	X(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 36)                  \
	X(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 37)            \
	X(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 38)                      \
	X(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 39)     \
	X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 75)           \
	X(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 76)           \
	X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 81) \
	X(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 82)   \
	X(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 97)  \
	X(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 120)

/* CUfunction_attribute: what cuFuncGetAttribute reads and cuFuncSetAttribute sets */
#define WSN_CU_FUNCTION_ATTRIBUTE_VALUES(X)                   \
	X(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0)         \
	X(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, 1)             \
	X(CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, 2)              \
	X(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, 3)              \
	X(CU_FUNC_ATTRIBUTE_NUM_REGS, 4)                      \
	X(CU_FUNC_ATTRIBUTE_PTX_VERSION, 5)                   \
	X(CU_FUNC_ATTRIBUTE_BINARY_VERSION, 6)                \
	X(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 8)

/* CUjit_option: the options cuModuleLoadDataEx is given */
#define WSN_CU_JIT_OPTION_VALUES(X)                   \
	X(CU_JIT_WALL_TIME, 2)                        \
	X(CU_JIT_INFO_LOG_BUFFER, 3)                  \
	X(CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, 4)       \
	X(CU_JIT_ERROR_LOG_BUFFER, 5)                 \
	X(CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, 6)      \
	X(CU_JIT_LOG_VERBOSE, 12)

/* CUlaunchAttributeID: the attributes of cuLaunchKernelEx used (cluster size, dependent launch) */
#define WSN_CU_LAUNCH_ATTRIBUTE_VALUES(X)                             \
	X(CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, 4)                   \
	X(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 6)

/* CUdriverProcAddressQueryResult: what cuGetProcAddress_v2 says about a symbol */
#define WSN_CU_PROC_ADDRESS_STATUS_VALUES(X)                  \
	X(CU_GET_PROC_ADDRESS_SUCCESS, 0)                     \
	X(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, 1)            \
	X(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, 2)

/* CUtensorMapDataType: element types of a TMA descriptor */
#define WSN_CU_TENSOR_MAP_DATA_TYPE_VALUES(X)                 \
	X(CU_TENSOR_MAP_DATA_TYPE_UINT8, 0)                   \
	X(CU_TENSOR_MAP_DATA_TYPE_UINT16, 1)                  \
	X(CU_TENSOR_MAP_DATA_TYPE_UINT32, 2)                  \
	X(CU_TENSOR_MAP_DATA_TYPE_INT32, 3)                   \
	X(CU_TENSOR_MAP_DATA_TYPE_UINT64, 4)                  \
	X(CU_TENSOR_MAP_DATA_TYPE_INT64, 5)                   \
	X(CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 6)                 \
	X(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 7)                 \
	X(CU_TENSOR_MAP_DATA_TYPE_FLOAT64, 8)                 \
	X(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 9)                \
	X(CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ, 10)            \
	X(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32, 11)               \
	X(CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ, 12)

/* CUtensorMapInterleave */
#define WSN_CU_TENSOR_MAP_INTERLEAVE_VALUES(X)        \
	X(CU_TENSOR_MAP_INTERLEAVE_NONE, 0)           \
	X(CU_TENSOR_MAP_INTERLEAVE_16B, 1)            \
	X(CU_TENSOR_MAP_INTERLEAVE_32B, 2)

/* CUtensorMapSwizzle (the three 128B_ATOM modes are CUDA 12.8's; tma.c only names their span) */
#define WSN_CU_TENSOR_MAP_SWIZZLE_VALUES(X)                   \
	X(CU_TENSOR_MAP_SWIZZLE_NONE, 0)                      \
	X(CU_TENSOR_MAP_SWIZZLE_32B, 1)                       \
	X(CU_TENSOR_MAP_SWIZZLE_64B, 2)                       \
	X(CU_TENSOR_MAP_SWIZZLE_128B, 3)                      \
	X(CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B, 4)             \
	X(CU_TENSOR_MAP_SWIZZLE_128B_ATOM_32B_FLIP_8B, 5)     \
	X(CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B, 6)

/* CUtensorMapL2promotion */
#define WSN_CU_TENSOR_MAP_L2_PROMOTION_VALUES(X)      \
	X(CU_TENSOR_MAP_L2_PROMOTION_NONE, 0)         \
	X(CU_TENSOR_MAP_L2_PROMOTION_L2_64B, 1)       \
	X(CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 2)      \
	X(CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 3)

/* CUtensorMapFloatOOBfill */
#define WSN_CU_TENSOR_MAP_OOB_FILL_VALUES(X)                  \
	X(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE, 0)               \
	X(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA, 1)

/* The enum types: X(type name, its values table) */
#define WSN_CU_ENUMS(X)                                                       \
	X(CUresult, WSN_CU_RESULT_VALUES)                                     \
	X(CUdevice_attribute, WSN_CU_DEVICE_ATTRIBUTE_VALUES)                 \
	X(CUfunction_attribute, WSN_CU_FUNCTION_ATTRIBUTE_VALUES)             \
	X(CUjit_option, WSN_CU_JIT_OPTION_VALUES)                             \
	X(CUlaunchAttributeID, WSN_CU_LAUNCH_ATTRIBUTE_VALUES)                \
	X(CUdriverProcAddressQueryResult, WSN_CU_PROC_ADDRESS_STATUS_VALUES)  \
	X(CUtensorMapDataType, WSN_CU_TENSOR_MAP_DATA_TYPE_VALUES)            \
	X(CUtensorMapInterleave, WSN_CU_TENSOR_MAP_INTERLEAVE_VALUES)         \
	X(CUtensorMapSwizzle, WSN_CU_TENSOR_MAP_SWIZZLE_VALUES)               \
	X(CUtensorMapL2promotion, WSN_CU_TENSOR_MAP_L2_PROMOTION_VALUES)      \
	X(CUtensorMapFloatOOBfill, WSN_CU_TENSOR_MAP_OOB_FILL_VALUES)

/* Flags passed as unsigned int or cuuint64_t arguments, not as an enum type: X(name, value) */
#define WSN_CU_FLAG_VALUES(X)                         \
	X(CU_EVENT_DEFAULT, 0)                        \
	X(CU_EVENT_BLOCKING_SYNC, 1)                  \
	X(CU_EVENT_DISABLE_TIMING, 2)                 \
	X(CU_STREAM_NON_BLOCKING, 1)                  \
	X(CU_MEMHOSTREGISTER_PORTABLE, 1)             \
	X(CU_GET_PROC_ADDRESS_DEFAULT, 0)

/* ---- structures: each one's members once, and X(member) for every member whose offset matters ---- */

/* CUtensorMap: an opaque 128-byte TMA descriptor, passed to kernels by value */
#define WSN_CU_TENSOR_MAP_MEMBERS _Alignas(128) cuuint64_t opaque[16];
#define WSN_CU_TENSOR_MAP_FIELDS(X) X(opaque)

/*
 * CUlaunchAttributeValue: a 64-byte union; wsnorm sets only the cluster shape and the dependent
 * launch flag. Members it does not use hold pointers, hence the pointer alignment.
 */
#define WSN_CU_LAUNCH_ATTRIBUTE_VALUE_MEMBERS            \
	_Alignas(void *) char pad[64];                   \
	struct {                                         \
		unsigned int x;                          \
		unsigned int y;                          \
		unsigned int z;                          \
	} clusterDim;                                    \
	int programmaticStreamSerializationAllowed;
#define WSN_CU_LAUNCH_ATTRIBUTE_VALUE_FIELDS(X) \
	X(pad) X(clusterDim) X(clusterDim.x) X(clusterDim.y) X(clusterDim.z) \
	X(programmaticStreamSerializationAllowed)

/* CUlaunchAttribute: an id, padded to 8 bytes, then its value */
#define WSN_CU_LAUNCH_ATTRIBUTE_MEMBERS      \
	CUlaunchAttributeID id;              \
	char pad[8 - sizeof(CUlaunchAttributeID)]; \
	CUlaunchAttributeValue value;
#define WSN_CU_LAUNCH_ATTRIBUTE_FIELDS(X) X(id) X(pad) X(value)

/* CUlaunchConfig: what cuLaunchKernelEx and cuOccupancyMaxActiveClusters take */
#define WSN_CU_LAUNCH_CONFIG_MEMBERS        \
	unsigned int gridDimX;              \
	unsigned int gridDimY;              \
	unsigned int gridDimZ;              \
	unsigned int blockDimX;             \
	unsigned int blockDimY;             \
	unsigned int blockDimZ;             \
	unsigned int sharedMemBytes;        \
	CUstream hStream;                   \
	CUlaunchAttribute *attrs;           \
	unsigned int numAttrs;
#define WSN_CU_LAUNCH_CONFIG_FIELDS(X)                                                        \
	X(gridDimX) X(gridDimY) X(gridDimZ) X(blockDimX) X(blockDimY) X(blockDimZ) X(sharedMemBytes) \
	X(hStream) X(attrs) X(numAttrs)

/* ---- entry points ---- */

/*
 * Every driver entry point wsnorm calls: X(name, cuda_version, parameters). Each returns CUresult.
 * The loader asks cuGetProcAddress_v2 for the base name at cuda_version, which returns the newest
 * variant of the name that is not newer than that version; the parameters are that variant's. So
 * the version is part of the ABI: 12000 gives cuMemAlloc_v2, cuMemFree_v2, cuStreamDestroy_v2,
 * cuEventDestroy_v2, cuMemHostRegister_v2, cuDevicePrimaryCtxRelease_v2, cuDeviceTotalMem_v2 and
 * cuMemcpy{HtoD,DtoH,DtoD}Async_v2, cuCtxSynchronize(void) (13000 would give the variant taking a CUcontext) and
 * cuEventElapsedTime (the same parameters as its later _v2). Functions whose CUDA 13 parameters
 * differ from every variant a CUDA 12.0 driver has (cuCtxCreate_v4, cuMemAdvise_v2,
 * cuMemPrefetchAsync_v2, cuCtxGetDevice_v2, ...) are deliberately not used.
 */
#define WSN_CU_FUNCS(X)                                                                                  \
	X(cuGetErrorName, 12000, (CUresult error, const char **name))                                    \
	X(cuGetErrorString, 12000, (CUresult error, const char **text))                                  \
	X(cuInit, 12000, (unsigned int flags))                                                           \
	X(cuDriverGetVersion, 12000, (int *version))                                                     \
	X(cuDeviceGetCount, 12000, (int *count))                                                         \
	X(cuDeviceGet, 12000, (CUdevice *device, int ordinal))                                           \
	X(cuDeviceGetName, 12000, (char *name, int len, CUdevice device))                                \
	X(cuDeviceGetAttribute, 12000, (int *value, CUdevice_attribute attribute, CUdevice device))      \
	X(cuDeviceTotalMem, 12000, (size_t *bytes, CUdevice device))                                     \
	X(cuDeviceGetPCIBusId, 12000, (char *bus_id, int len, CUdevice device))                          \
	X(cuDevicePrimaryCtxRetain, 12000, (CUcontext *context, CUdevice device))                        \
	X(cuDevicePrimaryCtxRelease, 12000, (CUdevice device))                                           \
	X(cuCtxGetCurrent, 12000, (CUcontext *context))                                                  \
	X(cuCtxSetCurrent, 12000, (CUcontext context))                                                   \
	X(cuCtxSynchronize, 12000, (void))                                                               \
	X(cuMemAlloc, 12000, (CUdeviceptr *ptr, size_t bytes))                                           \
	X(cuMemFree, 12000, (CUdeviceptr ptr))                                                           \
	X(cuMemsetD8Async, 12000, (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream)) \
	X(cuMemHostRegister, 12000, (void *host, size_t bytes, unsigned int flags))                      \
	X(cuMemHostUnregister, 12000, (void *host))                                                      \
	X(cuMemcpyHtoDAsync, 12000, (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))   \
	X(cuMemcpyDtoHAsync, 12000, (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))         \
	X(cuMemcpyDtoDAsync, 12000, (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))   \
	X(cuStreamCreate, 12000, (CUstream *stream, unsigned int flags))                                 \
	X(cuStreamDestroy, 12000, (CUstream stream))                                                     \
	X(cuStreamSynchronize, 12000, (CUstream stream))                                                 \
	X(cuStreamWaitEvent, 12000, (CUstream stream, CUevent event, unsigned int flags))                \
	X(cuEventCreate, 12000, (CUevent *event, unsigned int flags))                                    \
	X(cuEventDestroy, 12000, (CUevent event))                                                        \
	X(cuEventRecord, 12000, (CUevent event, CUstream stream))                                        \
	X(cuEventSynchronize, 12000, (CUevent event))                                                    \
	X(cuEventQuery, 12000, (CUevent event))                                                          \
	X(cuEventElapsedTime, 12000, (float *ms, CUevent start, CUevent end))                            \
	X(cuModuleLoadDataEx, 12000, (CUmodule *module, const void *image, unsigned int num_options,     \
				      CUjit_option *options, void **option_values))                      \
	X(cuModuleUnload, 12000, (CUmodule module))                                                      \
	X(cuModuleGetFunction, 12000, (CUfunction *function, CUmodule module, const char *name))         \
	X(cuFuncGetAttribute, 12000, (int *value, CUfunction_attribute attribute, CUfunction function))  \
	X(cuFuncSetAttribute, 12000, (CUfunction function, CUfunction_attribute attribute, int value))   \
	X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 12000,                                            \
	  (int *blocks, CUfunction function, int block_size, size_t dynamic_smem_bytes))                 \
	X(cuLaunchKernelEx, 12000, (const CUlaunchConfig *config, CUfunction function, void **params,    \
				    void **extra))                                                       \
	X(cuOccupancyMaxActiveClusters, 12000, (int *clusters, CUfunction function,                      \
						const CUlaunchConfig *config))                           \
	X(cuTensorMapEncodeTiled, 12000,                                                                 \
	  (CUtensorMap *map, CUtensorMapDataType type, cuuint32_t rank, void *global,                    \
	   const cuuint64_t *dims, const cuuint64_t *strides, const cuuint32_t *box,                     \
	   const cuuint32_t *element_strides, CUtensorMapInterleave interleave,                          \
	   CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2_promotion,                              \
	   CUtensorMapFloatOOBfill oob_fill))

/* cuGetProcAddress_v2, the one symbol looked up with dlsym (by that versioned name): it resolves the others. */
#define WSN_CU_GET_PROC_ADDRESS_PARAMS \
	(const char *symbol, void **function, int cuda_version, cuuint64_t flags, \
	 CUdriverProcAddressQueryResult *status)

/* ---- the declarations, built from the tables ---- */
#ifndef WSN_CU_ABI_TABLES_ONLY

#define WSN__CU_TYPEDEF(name, type) typedef type name;
WSN_CU_TYPES(WSN__CU_TYPEDEF)
#undef WSN__CU_TYPEDEF

#define WSN__CU_ENUMERATOR(name, value) name = value,
#define WSN__CU_ENUM(name, values) typedef enum { values(WSN__CU_ENUMERATOR) } name;
WSN_CU_ENUMS(WSN__CU_ENUM)
enum { WSN_CU_FLAG_VALUES(WSN__CU_ENUMERATOR) };
#undef WSN__CU_ENUM
#undef WSN__CU_ENUMERATOR

typedef struct CUtensorMap_st { WSN_CU_TENSOR_MAP_MEMBERS } CUtensorMap;
typedef union CUlaunchAttributeValue_union { WSN_CU_LAUNCH_ATTRIBUTE_VALUE_MEMBERS } CUlaunchAttributeValue;
typedef struct CUlaunchAttribute_st { WSN_CU_LAUNCH_ATTRIBUTE_MEMBERS } CUlaunchAttribute;
typedef struct CUlaunchConfig_st { WSN_CU_LAUNCH_CONFIG_MEMBERS } CUlaunchConfig;

/* One function-pointer type per entry point: wsn__cu_pfn_cuMemAlloc etc. */
#define WSN__CU_PFN(name, version, params) typedef CUresult (*wsn__cu_pfn_##name) params;
WSN_CU_FUNCS(WSN__CU_PFN)
#undef WSN__CU_PFN
typedef CUresult (*wsn__cu_pfn_cuGetProcAddress) WSN_CU_GET_PROC_ADDRESS_PARAMS;

#endif /* WSN_CU_ABI_TABLES_ONLY */

#endif
