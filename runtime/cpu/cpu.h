/* SPDX-License-Identifier: MIT */
/* runtime/cpu/cpu.h: the CPU backend's internals. */
#ifndef WSN_CPU_H
#define WSN_CPU_H
#include "internal.h"
#endif
