/* SPDX-License-Identifier: MIT */
/* placeholder */
#include "reference.h"
typedef int ref_placeholder;
