/* SPDX-License-Identifier: MIT */
/* launcher/devices.c: parsing the --devices list into device specs. */
#include "pipeline.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- devices ---- */

/* The backend "auto" picks: "cuda", "amd" or "cpu", and its device count. */
static int auto_backend(char *name, size_t len, int *count)
{
	struct wsn_device *dev = NULL;
	struct wsn_device_info di;
	int err;

	if ((err = wsn_device_open("auto", &dev)) < 0) {
		cli_fail(err, "run: cannot open a device");
		return -1;
	}
	wsn_device_info(dev, &di);
	wsn_device_close(dev);
	snprintf(name, len, "%s", di.backend);
	*count = 1;
	for (int b = 0; b < wsn_backend_count(); b++) {
		struct wsn_backend_info bi;
		if (wsn_backend_info(b, &bi) == 0 && !strcmp(bi.name, di.backend))
			*count = bi.device_count > 0 ? bi.device_count : 1;
	}
	return 0;
}

int pl_devices_parse(const char *list, char specs[][32], int max)
{
	char buf[1024], be[16] = "", *save = NULL, *tok;
	int n = 0, count = 0;

	if (!strcmp(list, "all")) {
		if (auto_backend(be, sizeof(be), &count))
			return -EXIT_RUNTIME;
		if (!strcmp(be, "cpu")) {
			snprintf(specs[0], 32, "cpu");
			return 1;
		}
		for (int i = 0; i < count && i < max; i++)
			snprintf(specs[n++], 32, "%s:%d", be, i);
		return n;
	}
	if (!strcmp(list, "local")) { /* wsnorm-mpi replaces it with the rank's GPU before here */
		cli_usage_error("run", "--devices local gives each rank of wsnorm-mpi its own GPU; give wsnorm all or a "
				"list of devices");
		return -EXIT_USAGE;
	}
	if (strlen(list) >= sizeof(buf)) {
		cli_usage_error("run", "--devices list too long");
		return -EXIT_USAGE;
	}
	if (cli_list_has_empty(list)) {
		cli_usage_error("run", "--devices '%s' has an empty entry", list);
		return -EXIT_USAGE;
	}
	strcpy(buf, list);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int64_t idx;

		if (n == max) {
			cli_usage_error("run", "--devices names more than %d devices", max);
			return -EXIT_USAGE;
		}
		if (!cli_parse_count(tok, 0, 4095, &idx)) {
			/* a bare number: that GPU of the backend "auto" picks */
			if (!be[0] && auto_backend(be, sizeof(be), &count))
				return -EXIT_RUNTIME;
			if (!strcmp(be, "cpu")) {
				cli_error("run: --devices %s: there is no GPU to number", list);
				return -EXIT_RUNTIME;
			}
			snprintf(specs[n++], 32, "%s:%lld", be, (long long)idx);
		} else if (!wsn_device_spec_parse(tok, NULL, NULL)) {
			snprintf(specs[n++], 32, "%s", tok);
		} else {
			cli_usage_error("run", "bad device '%s' in --devices (expected a GPU number, cpu, cuda[:N] or amd[:N])",
					tok);
			return -EXIT_USAGE;
		}
	}
	if (!n) {
		cli_usage_error("run", "--devices names no device");
		return -EXIT_USAGE;
	}
	return n;
}

