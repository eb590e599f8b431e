/* SPDX-License-Identifier: MIT */
/* wsnorm.h: the umbrella header of libwsnorm (LayerNorm/RMSNorm on GPUs, tensors through io_uring). */
#ifndef WSNORM_H
#define WSNORM_H

#include "wsnorm/common.h"
#include "wsnorm/tensor.h"
#include "wsnorm/device.h"
#include "wsnorm/ops.h"
#include "wsnorm/io.h"
#include "wsnorm/codegen.h"

#endif
