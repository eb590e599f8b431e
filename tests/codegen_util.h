/* SPDX-License-Identifier: MIT */
/* tests/codegen_util.h: what the check_codegen_*.c tests share: shapes, ops, dtypes and plan parameters. */
#ifndef WSN_TESTS_CODEGEN_UTIL_H
#define WSN_TESTS_CODEGEN_UTIL_H

#include "testutil.h"

#include "codegen.h"
#include "ptx/emitter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t hidden_sizes[] = { 1, 3, 64, 1000, 1024, 2048, 4097, 8192, 12288, 16384, 32768 };

static const enum wsn_op all_ops[] = { WSN_LAYERNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_FWD, WSN_RMSNORM_BWD };

static const enum wsn_dtype all_dtypes[] = { WSN_F32, WSN_F16, WSN_BF16 };

void codegen_params_init(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden);

#endif /* WSN_TESTS_CODEGEN_UTIL_H */
