/* SPDX-License-Identifier: MIT */
/* runtime/core/clock.c: the monotonic clock. */
#include "core/clock.h"

#include <time.h>

double wsn__now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
