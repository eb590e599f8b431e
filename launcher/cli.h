/* SPDX-License-Identifier: MIT */
/* launcher/cli.h: what the wsnorm subcommands share. */
#ifndef WSN_CLI_H
#define WSN_CLI_H
#include "wsnorm.h"
#endif
