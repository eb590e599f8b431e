/* SPDX-License-Identifier: MIT */
/* tests/cli_util.c: what the check_cli_*.c tests share: running wsnorm, its JSON and test files. */
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

#include "cli_util.h"

json_t *cli_out_json(const struct tu_proc *p, int status)
{
	json_error_t je;
	json_t *j;

	ck_assert_msg(p->status == status, "exit %d, expected %d: %s", p->status, status, p->err);
	ck_assert_msg((j = json_loads(p->out, 0, &je)) != NULL, "not JSON: %s\n%s", je.text, p->out);
	return j;
}

char *cli_path_in(const char *dir, const char *name)
{
	char *p;
	ck_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

int cli_same_file(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int ca, cb, same = fa && fb;

	while (same && (ca = getc(fa)) == (cb = getc(fb)) && ca != EOF)
		;
	if (same)
		same = ca == cb;
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

void cli_write_st(const char *path, const char *json, size_t data_len)
{
	size_t h = (strlen(json) + 7) / 8 * 8, n = 8 + h + data_len;
	unsigned char *buf = tu_xmalloc(n);

	memset(buf, 0, n);
	for (int i = 0; i < 8; i++)
		buf[i] = (unsigned char)((uint64_t)h >> (8 * i));
	memset(buf + 8, ' ', h);
	memcpy(buf + 8, json, strlen(json));
	tu_write_file(path, buf, n);
	free(buf);
}
