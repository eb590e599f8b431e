/* SPDX-License-Identifier: MIT */
/* runtime/core/util.h: what every wsnorm source file starts from: the configuration, the public API, small macros. */
#ifndef WSN_CORE_UTIL_H
#define WSN_CORE_UTIL_H

#include "config.h"
#include "wsnorm.h"

#define WSN_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define WSN_PRINTF(a, b) __attribute__((format(printf, a, b)))

#endif
