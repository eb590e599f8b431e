/* SPDX-License-Identifier: MIT */
/* runtime/core/error.h: recording a failure's details for the calling thread (wsn_last_error). */
#ifndef WSN_CORE_ERROR_H
#define WSN_CORE_ERROR_H

#include "core/util.h"

/* Record a detailed message for the calling thread and return err (a negative WSN_E* code). */
int wsn__error(int err, const char *fmt, ...) WSN_PRINTF(2, 3);
/* As wsn__error, and remember the raw driver status and its name. */
int wsn__driver_error(int err, int raw, const char *raw_name, const char *fmt, ...) WSN_PRINTF(4, 5);
/* Prefix the current detail with "prefix: " (context added on the way up). Returns err. */
int wsn__error_context(int err, const char *fmt, ...) WSN_PRINTF(2, 3);

/* The calling thread's failure details, kept across work whose own failures must not show. */
#define WSN__DETAIL_MAX 1024
struct wsn__error_saved {
	char detail[WSN__DETAIL_MAX];
	int code;
	const char *name;
	int valid;
};
void wsn__error_save(struct wsn__error_saved *s);
void wsn__error_restore(const struct wsn__error_saved *s);

#endif
