/* SPDX-License-Identifier: MIT */
/* placeholder, being written: the CPU backend's ops table. */
#include "cpu.h"
static int cpu_init(struct wsn_backend_info *info) { info->device_count = 1; info->available = 1; return 0; }
const struct wsn__backend_ops wsn__cpu_ops = { .name = "cpu", .init = cpu_init };
