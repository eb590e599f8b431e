/* SPDX-License-Identifier: MIT */
/* runtime/core/clock.h: the monotonic clock timings are taken with. */
#ifndef WSN_CORE_CLOCK_H
#define WSN_CORE_CLOCK_H

/* Monotonic seconds since an arbitrary start. */
double wsn__now(void);

#endif
