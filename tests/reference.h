/* SPDX-License-Identifier: MIT */
/* tests/reference.h: float64 reference implementations of the four ops, the oracle of the tests. */
#ifndef WSN_REFERENCE_H
#define WSN_REFERENCE_H
#include "wsnorm.h"
#endif
