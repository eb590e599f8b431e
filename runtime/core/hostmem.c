/* SPDX-License-Identifier: MIT */
/* runtime/core/hostmem.c: host memory held for wsnorm, counted against what the machine or its memory cgroup leaves. */
#include "core/hostmem.h"
#include "core/error.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * The host memory of the process held for wsnorm: every CPU device's device and pinned host
 * allocations and the readers' buffers, against what the machine had available when the process
 * last held none. Memory on the CPU is plain virtual memory that the kernel grants beyond what
 * exists; without this a run too large for the machine is ended by the out-of-memory killer (no
 * message, no report) instead of failing with WSN_ENOMEM. The allocations are touched soon after
 * they are made, so they count in full.
 */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t held_bytes, held_limit;
static char held_source[96];

/* A "Name:   N kB" line of /proc/meminfo in bytes; 0 when absent. */
static uint64_t meminfo(const char *name)
{
	FILE *f = fopen("/proc/meminfo", "re");
	char line[256];
	size_t n = strlen(name);
	uint64_t kb = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, name, n) && line[n] == ':') {
			kb = strtoull(line + n + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kb <= UINT64_MAX / 1024 ? kb * 1024 : 0;
}

/* The first number in file dir/name, or after "key " in it when key is given; 0 when absent or "max". */
static uint64_t cg_number(const char *dir, const char *name, const char *key)
{
	char path[4400], line[256];
	size_t k = key ? strlen(key) : 0;
	uint64_t v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!(f = fopen(path, "re")))
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *num = line;

		if (key && (strncmp(line, key, k) || line[k] != ' '))
			continue;
		num += key ? k + 1 : 0;
		if (*num >= '0' && *num <= '9')
			v = strtoull(num, NULL, 10);
		break;
	}
	fclose(f);
	return v;
}

/*
 * What the memory cgroups let the process take: the least, over its cgroup v2 group and each group
 * above it that has a memory.max, of that limit less the memory charged there that is not page
 * cache (page cache the kernel reclaims before it kills); under cgroup v1, its memory group's
 * hierarchical limit the same way. 0: no limit found.
 */
static uint64_t cgroup_available(void)
{
	char line[4096], dir[4200];
	FILE *f = fopen("/proc/self/cgroup", "re");
	uint64_t best = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *rel, *ctl = strchr(line, ':');

		line[strcspn(line, "\n")] = '\0';
		if (!ctl || !(rel = strchr(ctl + 1, ':')))
			continue;
		*ctl++ = '\0'; /* line: the hierarchy; ctl: its controllers; rel: the group's path */
		*rel++ = '\0';
		if (!strcmp(line, "0") && ctl[0] == '\0') { /* v2: this group and those above it */
			for (;;) {
				uint64_t max, used, cache;

				snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", strcmp(rel, "/") ? rel : "");
				if (access(dir, F_OK) < 0) /* a container sees its own group at the root */
					snprintf(dir, sizeof(dir), "/sys/fs/cgroup");
				if ((max = cg_number(dir, "memory.max", NULL))) {
					used = cg_number(dir, "memory.current", NULL);
					cache = cg_number(dir, "memory.stat", "file");
					used = used > cache ? used - cache : 0;
					if (used < max && (!best || max - used < best))
						best = max - used;
					else if (used >= max)
						best = 1; /* nothing left: every allocation is refused */
				}
				if (!strrchr(rel, '/') || strrchr(rel, '/') == rel)
					break;
				*strrchr(rel, '/') = '\0';
			}
		} else if (strstr(ctl, "memory")) { /* v1: the memory controller's hierarchical limit */
			uint64_t max, used, cache;

			snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s", strcmp(rel, "/") ? rel : "");
			if (access(dir, F_OK) < 0) /* a container sees its own group at the root */
				snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory");
			max = cg_number(dir, "memory.stat", "hierarchical_memory_limit");
			if (max && max < ((uint64_t)1 << 62)) { /* a huge value is no limit */
				used = cg_number(dir, "memory.usage_in_bytes", NULL);
				cache = cg_number(dir, "memory.stat", "total_cache");
				used = used > cache ? used - cache : 0;
				if (!best || (used < max ? max - used : 1) < best)
					best = used < max ? max - used : 1;
			}
		}
	}
	fclose(f);
	return best;
}

/*
 * WSNORM_MEMORY_LIMIT in bytes: a decimal number with an optional K, M, G or T suffix (binary
 * multiples). *limit is 0 when it is unset or empty; WSN_EINVAL when it is set to anything else.
 */
static int env_limit(uint64_t *limit)
{
	const char *s = getenv("WSNORM_MEMORY_LIMIT");
	uint64_t v, mult = 1;
	char *end;

	*limit = 0;
	if (!s || !*s)
		return 0;
	if (*s < '0' || *s > '9')
		return WSN_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'K': mult = (uint64_t)1 << 10; end++; break;
	case 'M': mult = (uint64_t)1 << 20; end++; break;
	case 'G': mult = (uint64_t)1 << 30; end++; break;
	case 'T': mult = (uint64_t)1 << 40; end++; break;
	default: break;
	}
	if (errno || *end || v > UINT64_MAX / mult)
		return WSN_EINVAL;
	*limit = v * mult;
	return 0;
}

/*
 * What the process may take now: MemAvailable, or less where its memory cgroups or
 * WSNORM_MEMORY_LIMIT leave less. 0: unknown. Where err is given, WSN_EINVAL in *err when
 * WSNORM_MEMORY_LIMIT is not a size (the rest is still measured), else 0.
 */
static uint64_t mem_available(char *source, size_t len, int *err)
{
	uint64_t avail = meminfo("MemAvailable"), cg = cgroup_available(), env;
	int bad = env_limit(&env);

	if (err)
		*err = bad;
	snprintf(source, len, "MemAvailable in /proc/meminfo");
	if (cg && (!avail || cg < avail)) {
		avail = cg;
		snprintf(source, len, "what the memory cgroup's limit leaves, page cache counted as free");
	}
	if (env && (!avail || env < avail)) {
		avail = env;
		snprintf(source, len, "WSNORM_MEMORY_LIMIT");
	}
	return avail;
}

/* Testing aid: a limit in place of the machine's memory (0: the machine's again). */
static uint64_t forced_limit;

void wsn__host_limit(uint64_t bytes)
{
	pthread_mutex_lock(&held_lock);
	forced_limit = bytes;
	if (bytes) {
		held_limit = bytes;
		snprintf(held_source, sizeof(held_source), "a limit set for testing");
	} else {
		/* a bad WSNORM_MEMORY_LIMIT fails the next allocation made with none held */
		held_limit = mem_available(held_source, sizeof(held_source), NULL);
	}
	pthread_mutex_unlock(&held_lock);
}

/* Count bytes as held, or fail naming what is available. Called with held_lock held. */
static int held_take(uint64_t bytes, const char *what)
{
	if (!held_bytes && !forced_limit) {
		int err;

		held_limit = mem_available(held_source, sizeof(held_source), &err);
		if (err < 0)
			return wsn__error(err, "%s: WSNORM_MEMORY_LIMIT '%s' is not a size (bytes, with an optional K, M, "
					  "G or T suffix)", what, getenv("WSNORM_MEMORY_LIMIT"));
	}
	if (held_limit && (bytes > held_limit || held_bytes > held_limit - bytes))
		return wsn__error(WSN_ENOMEM,
				  "%s: %" PRIu64 " bytes, with the %" PRIu64 " this process holds in host memory already, are more "
				  "than the %" PRIu64 " bytes of memory available (%s)", what, bytes, held_bytes, held_limit,
				  held_source);
	held_bytes += bytes;
	return 0;
}

void wsn__host_release(uint64_t bytes)
{
	pthread_mutex_lock(&held_lock);
	held_bytes = bytes < held_bytes ? held_bytes - bytes : 0;
	pthread_mutex_unlock(&held_lock);
}

int wsn__host_hold(uint64_t bytes, const char *what)
{
	int rc;

	pthread_mutex_lock(&held_lock);
	rc = held_take(bytes, what);
	pthread_mutex_unlock(&held_lock);
	return rc;
}

int wsn__host_heap_alloc(void **out, size_t align, size_t bytes, const char *what)
{
	int rc;

	*out = NULL;
	pthread_mutex_lock(&held_lock);
	if ((rc = held_take(bytes, what)) == 0) {
		held_bytes -= bytes; /* counted as what the allocator gives, which free gives back */
		if ((rc = posix_memalign(out, align, bytes)) != 0) {
			*out = NULL;
			rc = wsn__error(rc == ENOMEM ? WSN_ENOMEM : WSN_EINVAL, "%s %zu bytes", what, bytes);
		} else {
			held_bytes += malloc_usable_size(*out);
		}
	}
	pthread_mutex_unlock(&held_lock);
	return rc;
}

void wsn__host_heap_free(void *ptr)
{
	if (ptr)
		wsn__host_release(malloc_usable_size(ptr));
	free(ptr);
}
