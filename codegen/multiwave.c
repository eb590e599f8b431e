/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "internal.h"
typedef int wsn__placeholder_codegen_multiwave_c;
