/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "testutil.h"
Suite *suite_io(void) { return suite_create("io"); }
