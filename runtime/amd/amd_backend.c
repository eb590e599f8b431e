/* SPDX-License-Identifier: MIT */
/* placeholder, being written: the AMD backend's ops table. */
#include "internal.h"
const struct wsn__backend_ops wsn__amd_ops = { .name = "amd" };
