/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "internal.h"
typedef int wsn__placeholder_runtime_cuda_tma_c;
