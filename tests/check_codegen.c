/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "testutil.h"
Suite *suite_codegen(void) { return suite_create("codegen"); }
