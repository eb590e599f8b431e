/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
#include "testutil.h"
Suite *suite_cli(void) { return suite_create("cli"); }
