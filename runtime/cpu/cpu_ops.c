/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "internal.h"
typedef int wsn__placeholder_runtime_cpu_cpu_ops_c;
