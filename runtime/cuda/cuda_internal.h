/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_internal.h: the CUDA backend's internals. */
#ifndef WSN_CUDA_INTERNAL_H
#define WSN_CUDA_INTERNAL_H
#include "internal.h"
#endif
