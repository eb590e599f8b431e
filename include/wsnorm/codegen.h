/* SPDX-License-Identifier: MIT */
/* wsnorm/codegen.h: generate a kernel's PTX text without a GPU (what `wsnorm emit` prints). */
#ifndef WSNORM_CODEGEN_H
#define WSNORM_CODEGEN_H

#include "common.h"
#include "ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Generate the PTX module a GPU plan for (op, dtype, hidden) would use, for arch 90 (sm_90a)
 * or 100 (sm_100a), with the given options (approach, forced parameters; NULL: defaults).
 * *ptx receives a malloc'd NUL-terminated string the caller frees; *plan_text, if not NULL,
 * the plan description (malloc'd). Planning assumes an H100-like device (132 SMs, 227 KB).
 * Returns 0, WSN_EINVAL, WSN_ESHAPE, WSN_EDTYPE, WSN_ENOTSUP (approach not available).
 */
WSN_API int wsn_emit_ptx(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
			 const struct wsn_plan_options *opts, char **ptx, char **plan_text);
/*
 * Plan (op, dtype, hidden) for the same modelled device without generating the PTX: *text receives
 * the description wsn_emit_ptx gives, *json the plan as one JSON object on one line (the keys of
 * wsn_plan_describe_json(3)); either may be NULL, not both. Both malloc'd, for the caller to free.
 * Returns 0, WSN_EINVAL, WSN_ESHAPE, WSN_EDTYPE, WSN_ENOTSUP or WSN_ENOMEM.
 */
WSN_API int wsn_emit_plan(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
			  const struct wsn_plan_options *opts, char **text, char **json);

#ifdef __cplusplus
}
#endif
#endif
