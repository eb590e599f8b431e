/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "internal.h"
typedef int wsn__placeholder_runtime_cuda_cuda_backend_c;
const struct wsn__backend_ops wsn__cuda_ops = { .name = "cuda" };
