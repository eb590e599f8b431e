/* SPDX-License-Identifier: MIT */
/* placeholder */
#include <stdio.h>
#include "cli.h"
int main(void) { printf("wsnorm %s\n", wsn_version()); return 0; }
