/* SPDX-License-Identifier: MIT */
/* runtime/io/io_internal.h: shared by the reader and the tensor-file code. */
#ifndef WSN_IO_INTERNAL_H
#define WSN_IO_INTERNAL_H
#include "internal.h"
#endif
