/* SPDX-License-Identifier: MIT */
/*
 * tests/no_link.c: preloaded into a wsnorm run. With $WSNORM_NO_LINK_LOG set, link(2) fails with
 * EPERM, as it does for another user's file under fs.protected_hardlinks or on a file system without
 * hard links; each call is counted as a line in that file. The run must then keep an old output aside
 * by renaming it (launcher/output.c keep_aside). With $WSNORM_FAIL_LINKAT set, linkat(2) of an
 * unnamed file (from /proc/self/fd) to a name holding that text fails with EIO: an output whose
 * commit fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((visibility("default"))) int link(const char *from, const char *to);
__attribute__((visibility("default"))) int linkat(int fromdir, const char *from, int todir, const char *to, int flags);

int linkat(int fromdir, const char *from, int todir, const char *to, int flags)
{
	const char *fail = getenv("WSNORM_FAIL_LINKAT");

	if (fail && *fail && !strncmp(from, "/proc/self/fd/", 14) && strstr(to, fail)) {
		errno = EIO;
		return -1;
	}
	return (int)syscall(SYS_linkat, fromdir, from, todir, to, flags);
}

int link(const char *from, const char *to)
{
	const char *log = getenv("WSNORM_NO_LINK_LOG");

	if (!log)
		return linkat(AT_FDCWD, from, AT_FDCWD, to, 0);
	{
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
