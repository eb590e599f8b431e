/* SPDX-License-Identifier: MIT */
/* runtime/core/json.h: text as a JSON string, for the plan's JSON (the runtime's and the kernel planner's parts). */
#ifndef WSN_CORE_JSON_H
#define WSN_CORE_JSON_H

/* A JSON string (json_t *) of text: as it is where it is valid UTF-8, else escaped as
 * wsn_text_escape() does (a path from the environment, text cut inside a character); NULL only
 * when out of memory. */
void *wsn__json_text(const char *s);

#endif
