/* SPDX-License-Identifier: MIT */
/*
 * tests/no_link.c: preloaded into a wsnorm run, link(2) fails with EPERM, as it does for another
 * user's file under fs.protected_hardlinks or on a file system without hard links; each call is
 * counted as a line in $WSNORM_NO_LINK_LOG. The run must then keep an old output aside by renaming
 * it (launcher/output.c keep_aside).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((visibility("default"))) int link(const char *from, const char *to);

int link(const char *from, const char *to)
{
	const char *log = getenv("WSNORM_NO_LINK_LOG");

	(void)from;
	(void)to;
	if (log) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			if (write(fd, "link\n", 5) != 5) {
				/* the count is short: the test that reads it fails */
			}
			close(fd);
		}
	}
	errno = EPERM;
	return -1;
}
