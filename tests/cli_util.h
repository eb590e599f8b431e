/* SPDX-License-Identifier: MIT */
/* tests/cli_util.h: what the check_cli_*.c tests share: running wsnorm, its JSON and test files. */
#ifndef WSN_TESTS_CLI_UTIL_H
#define WSN_TESTS_CLI_UTIL_H

#include "testutil.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* p's standard output as one JSON object, once its exit status is checked; the caller decrefs it. */
json_t *cli_out_json(const struct tu_proc *p, int status);

char *cli_path_in(const char *dir, const char *name);

/* The same bytes in two files. */
int cli_same_file(const char *a, const char *b);

/* A safetensors file of the given header JSON (padded to 8 bytes) and data_len zero bytes of data. */
void cli_write_st(const char *path, const char *json, size_t data_len);

#endif /* WSN_TESTS_CLI_UTIL_H */
