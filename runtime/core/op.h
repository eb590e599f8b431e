/* SPDX-License-Identifier: MIT */
/*
 * runtime/core/op.h: the ops and approaches: their names and parsing, wsn_op_is_backward,
 * wsn_op_is_layernorm and wsn_op_min_bytes (public, declared in wsnorm/ops.h; defined in op.c).
 */
#ifndef WSN_CORE_OP_H
#define WSN_CORE_OP_H

#include "core/util.h"

#endif
