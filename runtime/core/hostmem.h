/* SPDX-License-Identifier: MIT */
/* runtime/core/hostmem.h: host memory held for wsnorm, counted against what the machine has available. */
#ifndef WSN_CORE_HOSTMEM_H
#define WSN_CORE_HOSTMEM_H

#include <stddef.h>
#include <stdint.h>

/*
 * Host memory this process holds for wsnorm (CPU device memory, reader buffers), counted against
 * what the machine (or the memory cgroup) has available: 0, or WSN_ENOMEM naming what (the
 * request, what is held, what is available). Give back what was held with wsn__host_release.
 */
int wsn__host_hold(uint64_t bytes, const char *what);
void wsn__host_release(uint64_t bytes);

/*
 * Allocate bytes from the heap aligned to align (posix_memalign), held as what the allocator gives
 * (malloc_usable_size). 0, or WSN_ENOMEM / WSN_EINVAL with a message starting with what; *out is
 * NULL on failure. Free with wsn__host_heap_free.
 */
int wsn__host_heap_alloc(void **out, size_t align, size_t bytes, const char *what);
/* Free (and give back) what wsn__host_heap_alloc gave; NULL is ignored. */
void wsn__host_heap_free(void *ptr);

/* Testing aid: hold memory to bytes instead of what the machine has available (0: the machine again). */
void wsn__host_limit(uint64_t bytes);

#endif
