/* SPDX-License-Identifier: MIT */
/* runtime/backend.c: what backends share: the list of mappings their host_alloc made. */
#include "backend.h"

#include <pthread.h>

void wsn__host_map_add(pthread_mutex_t *lock, struct wsn__host_map **list, struct wsn__host_map *m)
{
	pthread_mutex_lock(lock);
	m->next = *list;
	*list = m;
	pthread_mutex_unlock(lock);
}

struct wsn__host_map *wsn__host_map_take(pthread_mutex_t *lock, struct wsn__host_map **list, const void *ptr)
{
	struct wsn__host_map **pp, *m = NULL;

	pthread_mutex_lock(lock);
	for (pp = list; *pp; pp = &(*pp)->next) {
		if ((*pp)->ptr == ptr) {
			m = *pp;
			*pp = m->next;
			break;
		}
	}
	pthread_mutex_unlock(lock);
	return m;
}
