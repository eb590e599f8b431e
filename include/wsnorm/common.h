/* SPDX-License-Identifier: MIT */
/* wsnorm/common.h: version, export macro, error codes and dtypes shared by the whole API. */
#ifndef WSNORM_COMMON_H
#define WSNORM_COMMON_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(WSN_BUILDING) && defined(__GNUC__)
#define WSN_API __attribute__((visibility("default")))
#else
#define WSN_API
#endif

#define WSN_VERSION_MAJOR 0
#define WSN_VERSION_MINOR 1
#define WSN_VERSION_PATCH 0
#define WSN_VERSION_STRING "0.1.0"
#define WSN_VERSION_HEX ((WSN_VERSION_MAJOR << 16) | (WSN_VERSION_MINOR << 8) | WSN_VERSION_PATCH)

/* Version of the library loaded at run time, "MAJOR.MINOR.PATCH". */
WSN_API const char *wsn_version(void);

/*
 * Error codes: negative errno values plus wsnorm's own, all from this one table.
 * XX(name, value, message)
 */
#define WSN_ERRNO_MAP(XX)                                                   \
	XX(EPERM, -EPERM, "operation not permitted")                        \
	XX(ENOENT, -ENOENT, "no such file or directory")                    \
	XX(EINTR, -EINTR, "interrupted")                                    \
	XX(EIO, -EIO, "input/output error")                                 \
	XX(ENXIO, -ENXIO, "no such device or address")                      \
	XX(EBADF, -EBADF, "bad file descriptor")                            \
	XX(EAGAIN, -EAGAIN, "resource temporarily unavailable")             \
	XX(ENOMEM, -ENOMEM, "out of memory")                                \
	XX(EACCES, -EACCES, "permission denied")                            \
	XX(EFAULT, -EFAULT, "bad address")                                  \
	XX(EBUSY, -EBUSY, "device or resource busy")                        \
	XX(EEXIST, -EEXIST, "file exists")                                  \
	XX(ENODEV, -ENODEV, "no such device")                               \
	XX(ENOTDIR, -ENOTDIR, "not a directory")                            \
	XX(EISDIR, -EISDIR, "is a directory")                               \
	XX(EINVAL, -EINVAL, "invalid argument")                             \
	XX(EMFILE, -EMFILE, "too many open files")                          \
	XX(EFBIG, -EFBIG, "file too large")                                 \
	XX(ENOSPC, -ENOSPC, "no space left on device")                      \
	XX(EROFS, -EROFS, "read-only file system")                          \
	XX(EPIPE, -EPIPE, "broken pipe")                                    \
	XX(ERANGE, -ERANGE, "result out of range")                          \
	XX(ENAMETOOLONG, -ENAMETOOLONG, "file name too long")               \
	XX(ENOSYS, -ENOSYS, "function not implemented")                     \
	XX(ELOOP, -ELOOP, "too many levels of symbolic links")              \
	XX(EOVERFLOW, -EOVERFLOW, "value too large for its type")           \
	XX(ENOTSUP, -ENOTSUP, "operation not supported")                    \
	XX(ETIMEDOUT, -ETIMEDOUT, "timed out")                              \
	XX(EDQUOT, -EDQUOT, "disk quota exceeded")                          \
	XX(ECANCELED, -ECANCELED, "operation canceled")                     \
	XX(EFORMAT, -4001, "malformed tensor file")                         \
	XX(ETRUNC, -4002, "truncated file")                                 \
	XX(EDTYPE, -4003, "unsupported or mismatched dtype")                \
	XX(ESHAPE, -4004, "impossible or mismatched shape")                 \
	XX(ENOTENSOR, -4005, "tensor not found")                            \
	XX(ENODRIVER, -4006, "GPU driver not found")                        \
	XX(EDRIVER, -4007, "GPU driver call failed")                        \
	XX(EJIT, -4008, "kernel compilation failed")                        \
	XX(ELAUNCH, -4009, "kernel launch failed")                          \
	XX(ETMA, -4010, "TMA descriptor rule violated")                     \
	XX(EVERIFY, -4011, "verification mismatch")                         \
	XX(EBACKEND, -4012, "backend not built or not available")           \
	XX(EUSAGE, -4013, "bad usage")

enum wsn_errno {
#define WSN__ERR_ENUM(name, val, msg) WSN_##name = (val),
	WSN_ERRNO_MAP(WSN__ERR_ENUM)
#undef WSN__ERR_ENUM
	WSN_ERRNO_MAX = -4100
};

/* Short message for an error code ("invalid argument"); never NULL. */
WSN_API const char *wsn_strerror(int err);
/* Symbolic name of an error code ("EINVAL", "EFORMAT"); "UNKNOWN" if none. */
WSN_API const char *wsn_err_name(int err);
/*
 * The detailed message of the last failure in the calling thread: it names the file,
 * tensor, kernel or driver call and what was wrong with it. Empty string if none.
 */
WSN_API const char *wsn_last_error(void);
/*
 * Copy src into dst (cap bytes, NUL included) as wsn_last_error() writes its messages: control
 * bytes and bytes that are not valid UTF-8 become \xNN, and a character or escape that does not
 * fit is left out whole, so the result is always valid UTF-8 for a terminal or JSON. Returns its length.
 */
WSN_API size_t wsn_text_escape(char *dst, size_t cap, const char *src);
/*
 * The raw driver status behind the last WSN_EDRIVER/WSN_EJIT/WSN_ELAUNCH in this thread
 * (a CUresult) and its name; returns 0 if there was one, WSN_ENOENT if not.
 */
WSN_API int wsn_last_driver_status(int *code, const char **name);

/* Element types. */
enum wsn_dtype {
	WSN_F32 = 0,
	WSN_F16 = 1,
	WSN_BF16 = 2,
	WSN_DTYPE_COUNT
};

/* Bytes per element (4, 2, 2); 0 for an invalid dtype. */
WSN_API size_t wsn_dtype_size(enum wsn_dtype dt);
/* Short name: "f32", "f16", "bf16"; NULL for an invalid dtype. */
WSN_API const char *wsn_dtype_name(enum wsn_dtype dt);
/* Parse "f32|f16|bf16" (also "float32", "float16", "bfloat16", safetensors "F32", "F16", "BF16"). 0 or WSN_EDTYPE. */
WSN_API int wsn_dtype_parse(const char *s, enum wsn_dtype *out);
/*
 * Convert n elements between dtypes (round to nearest even on narrowing). dst and src must
 * not overlap unless identical dtype. Returns 0 or WSN_EINVAL.
 */
WSN_API int wsn_dtype_convert(void *dst, enum wsn_dtype dst_dt, const void *src,
			      enum wsn_dtype src_dt, size_t n);

#ifdef __cplusplus
}
#endif
#endif
