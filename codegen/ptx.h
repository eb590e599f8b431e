/* SPDX-License-Identifier: MIT */
/* codegen/ptx.h: the PTX emitter. */
#ifndef WSN_PTX_H
#define WSN_PTX_H
#include "internal.h"
#endif
