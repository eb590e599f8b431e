/* SPDX-License-Identifier: MIT */
/* runtime/core/json.c: text as a JSON string. */
#include "core/json.h"
#include "core/util.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

void *wsn__json_text(const char *s)
{
	size_t cap = strlen(s) * 4 + 1;
	json_t *j = json_string(s);
	char *t;

	if (j || !(t = malloc(cap)))
		return j;
	wsn_text_escape(t, cap, s);
	j = json_string(t);
	free(t);
	return j;
}
