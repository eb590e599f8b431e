/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "testutil.h"
Suite *suite_cpu(void) { return suite_create("cpu"); }
