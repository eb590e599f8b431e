/* SPDX-License-Identifier: MIT */
/* launcher/bench_copy.c: `wsnorm bench --h2d`: host-to-device and device-to-host copy bandwidth. */
#include "bench.h"
#include "pipeline.h" /* PL_DEFAULT_RING: copies from a ring like the pipeline's */

#include <string.h>

/*
 * --h2d: copies between a ring of pinned host buffers (as `run` reads into) and one device
 * buffer, queued back to back on one stream, each way.
 */
int bench_h2d(const struct bench_opts *o, struct timer *t, const struct wsn_device_info *di)
{
	void *host[PL_DEFAULT_RING] = { 0 }, *dbuf = NULL;
	double h2d = 0, d2h = 0;
	int err = 0, ret = EXIT_PASS;
	char sz[32];

	for (int i = 0; i < PL_DEFAULT_RING && !err; i++)
		if ((err = wsn_host_alloc(t->dev, o->copy_bytes, &host[i])) == 0)
			memset(host[i], 0x5a + i, o->copy_bytes);
	if (!err)
		err = wsn_mem_alloc(t->dev, o->copy_bytes, &dbuf);
	if (!err)
		err = cli_xfer_bandwidth(t->dev, t->s, host, PL_DEFAULT_RING, dbuf, o->copy_bytes, WSN_COPY_H2D, o->iters,
					 &h2d);
	if (!err)
		err = cli_xfer_bandwidth(t->dev, t->s, host, PL_DEFAULT_RING, dbuf, o->copy_bytes, WSN_COPY_D2H, o->iters,
					 &d2h);
	if (err < 0)
		ret = cli_fail(err, "bench --h2d: %llu-byte copies on %s", (unsigned long long)o->copy_bytes, di->spec);
	if (o->json) { /* after an error too, with the error's message in place of the rates */
		bench_h2d_json(o, di, h2d, d2h, ret ? cli_last_error() : NULL);
	} else if (!ret) {
		printf("device %s (%s)%s: %d copies of %s each way from a ring of %d pinned buffers\n", di->spec, di->name,
		       di->exec_mem == WSN_MEM_HOST ? " (host memory: copies are memcpy)" : "", o->iters,
		       bench_size_text(o->copy_bytes, sz, sizeof(sz)), PL_DEFAULT_RING);
		printf("h2d %8.2f GB/s\nd2h %8.2f GB/s\n", h2d / 1e9, d2h / 1e9);
	}
	wsn_mem_free(t->dev, dbuf);
	for (int i = 0; i < PL_DEFAULT_RING; i++)
		if (host[i])
			wsn_host_free(t->dev, host[i]);
	return ret;
}
