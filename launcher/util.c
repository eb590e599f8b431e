/* SPDX-License-Identifier: MIT */
/* placeholder */
#include "cli.h"
typedef int wsn_cli_placeholder_util;
