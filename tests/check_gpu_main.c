/* SPDX-License-Identifier: MIT */
/* tests/check_gpu_main.c: the runner of the CUDA backend's tests on a real GPU; exits 77 when no CUDA device is usable. */
#include "config.h"

#include <stdio.h>

#ifndef WSN_HAVE_CUDA
int main(void)
{
	printf("no CUDA device: the CUDA backend is not built into this library (it is built on Linux only)\n");
	return 77;
}
#else

#include "testutil.h"
#include "cuda/cuda_internal.h"
#include "core/clock.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_util.h"

Suite *suite_gpu_device(void);
Suite *suite_gpu_ops(void);
Suite *suite_gpu_ws(void);
Suite *suite_gpu_overlap(void);
Suite *suite_gpu_autotune(void);
Suite *suite_gpu_fault(void);

/*
 * Whether cuda:0 opens, asked in a child process: CUDA cannot be used across fork(), and the tests
 * run in forked children, so this process must not initialise the driver itself.
 */
static int probe(char *why, size_t len)
{
	int fds[2], status = 0;
	ssize_t n;
	pid_t pid;

	why[0] = '\0';
	if (pipe(fds) < 0 || (pid = fork()) < 0) {
		snprintf(why, len, "cannot fork a probe");
		return WSN_EIO;
	}
	if (pid == 0) {
		struct wsn_device *d;
		int e = wsn_device_open("cuda:0", &d);

		close(fds[0]);
		if (write(fds[1], wsn_last_error(), strlen(wsn_last_error())) < 0)
			_exit(127);
		_exit(e == 0 ? 0 : e == WSN_ENODRIVER ? 1 : e == WSN_ENODEV ? 2 : e == WSN_EBACKEND ? 3 : 4);
	}
	close(fds[1]);
	n = read(fds[0], why, len - 1);
	why[n > 0 ? n : 0] = '\0';
	close(fds[0]);
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status))
		return WSN_EIO;
	switch (WEXITSTATUS(status)) {
	case 0: return 0;
	case 1: return WSN_ENODRIVER;
	case 2: return WSN_ENODEV;
	case 3: return WSN_EBACKEND;
	default: return WSN_EIO;
	}
}

int main(void)
{
	char why[1024];
	SRunner *sr;
	int e, failed;

	e = probe(why, sizeof(why));
	if (e == WSN_ENODRIVER || e == WSN_ENODEV || e == WSN_EBACKEND) {
		printf("no CUDA device: %s\n", why[0] ? why : wsn_strerror(e));
		return 77;
	}
	if (e < 0) {
		printf("cuda:0 does not open: %s\n", why);
		return 1;
	}
	printf("wsnorm GPU tests, WSNORM_SEED=0x%llx\n", (unsigned long long)tu_seed());
	sr = srunner_create(suite_gpu_device());
	srunner_add_suite(sr, suite_gpu_ops());
	srunner_add_suite(sr, suite_gpu_ws());
	srunner_add_suite(sr, suite_gpu_overlap());
	srunner_add_suite(sr, suite_gpu_autotune());
	srunner_add_suite(sr, suite_gpu_fault());
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}

#endif /* WSN_HAVE_CUDA */
