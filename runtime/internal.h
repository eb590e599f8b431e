/* SPDX-License-Identifier: MIT */
/* runtime/internal.h: codegen's include, replaced when codegen includes core/ only. */
#ifndef WSN_INTERNAL_H
#define WSN_INTERNAL_H

#include "core/dtype.h"
#include "core/error.h"
#include "core/json.h"
#include "core/op.h"
#include "core/params.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdbool.h>

#endif
