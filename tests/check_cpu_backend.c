/* SPDX-License-Identifier: MIT */
/* tests/check_cpu_backend.c: the CPU backend's ops table. */
#include "cpu/cpu.h"

#include "reference.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu_util.h"

/* The ops table beyond execute: device info, memory, copies, streams, events, threads. */
START_TEST(test_backend_table)
{
	struct wsn_backend_info bi;
	struct wsn_device_info di;
	struct wsn_device *dev;
	struct wsn_stream *s;
	struct wsn_event *e0, *e1, *e2;
	struct utsname u;
	void *p, *q, *big;
	char src[300];
	float ms = -1;

	ck_assert_int_eq(wsn_backend_info(0, &bi), 0);
	ck_assert_str_eq(bi.name, "cpu");
	ck_assert_ptr_nonnull(strstr(bi.note, "hardware thread"));
	ck_assert_int_eq(wsn_device_open("cpu", &dev), 0);
	ck_assert_int_eq(wsn_device_info(dev, &di), 0);
	ck_assert_str_eq(di.backend, "cpu");
	ck_assert(di.name[0] != '\0');
	ck_assert_int_eq(uname(&u), 0);
	ck_assert_int_eq(strncmp(di.arch, u.machine, sizeof(di.arch) - 1), 0);
	ck_assert_int_ge(di.multiprocessors, 1);
	ck_assert_int_gt(di.total_mem, 0);

	ck_assert_int_eq(wsn_mem_alloc(dev, 1000, &p), 0);
	ck_assert_uint_eq((uintptr_t)p % 64, 0);
	ck_assert_int_eq(wsn_mem_set(dev, p, 0xab, 1000, NULL), 0);
	ck_assert_uint_eq(((unsigned char *)p)[999], 0xab);
	for (int i = 0; i < 300; i++)
		src[i] = (char)i;
	ck_assert_int_eq(wsn_memcpy(dev, p, src, 300, WSN_COPY_H2D, NULL), 0);
	ck_assert_int_eq(wsn_host_alloc(dev, 300, &q), 0);
	ck_assert_int_eq(wsn_memcpy(dev, q, p, 300, WSN_COPY_D2H, NULL), 0);
	ck_assert_mem_eq(q, src, 300);
	ck_assert_int_eq(wsn_host_alloc(dev, (size_t)5 << 20, &big), 0); /* huge-page advised */
	ck_assert_uint_eq((uintptr_t)big % 4096, 0);
	memset(big, 1, (size_t)5 << 20);
	ck_assert_int_eq(wsn_host_free(dev, big), 0);
	ck_assert_int_eq(wsn_host_free(dev, big), WSN_EINVAL); /* already freed */
	ck_assert_int_eq(wsn_host_free(dev, src), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "host"));
	ck_assert_int_eq(wsn_host_free(dev, q), 0);
	ck_assert_int_eq(wsn_mem_free(dev, p), 0);
	ck_assert_int_eq(wsn_host_alloc(dev, 10, &q), 0); /* left for device close to unmap */

	ck_assert_int_eq(wsn_stream_create(dev, &s), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e0), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e1), 0);
	ck_assert_int_eq(wsn_event_create(dev, &e2), 0);
	ck_assert_int_eq(wsn_event_elapsed(e0, e1, &ms), WSN_EINVAL); /* not recorded yet */
	ck_assert_int_eq(wsn_event_record(e0, s), 0);
	usleep(20000);
	ck_assert_int_eq(wsn_event_record(e1, s), 0);
	ck_assert_int_eq(wsn_event_sync(e1), 0);
	ck_assert_int_eq(wsn_stream_wait_event(s, e1), 0);
	ck_assert_int_eq(wsn_stream_sync(dev, s), 0);
	ck_assert_int_eq(wsn_stream_sync(dev, NULL), 0);
	ck_assert_int_eq(wsn_event_elapsed(e0, e1, &ms), 0);
	ck_assert_msg(ms >= 15.0f && ms < 5000.0f, "elapsed %g ms over a 20 ms sleep", (double)ms);
	ck_assert_int_eq(wsn_event_elapsed(e0, e2, &ms), WSN_EINVAL);
	/* the CPU runs work as it is submitted: every event is done, and there is no stream to hold */
	ck_assert_int_eq(wsn_event_query(e1), 1);
	ck_assert_int_eq(wsn_event_query(e2), 1); /* never recorded */
	ck_assert_int_eq(wsn_event_query(NULL), WSN_EINVAL);
	ck_assert_int_eq(wsn_stream_hold(s, 1000), WSN_ENOTSUP);
	ck_assert_msg(strstr(wsn_last_error(), "stream hold") && strstr(wsn_last_error(), "cpu"), "%s", wsn_last_error());
	ck_assert_int_eq(wsn_stream_hold(NULL, 1000), WSN_EINVAL);
	ck_assert_int_eq(wsn_stream_hold(s, WSN_HOLD_MAX_NS + 1), WSN_EINVAL);
	ck_assert_msg(strstr(wsn_last_error(), "longer than the most"), "%s", wsn_last_error());
	ck_assert_int_eq(wsn_event_destroy(e0), 0);
	ck_assert_int_eq(wsn_event_destroy(e1), 0);
	ck_assert_int_eq(wsn_event_destroy(e2), 0);
	ck_assert_int_eq(wsn_stream_destroy(s), 0);

	ck_assert_int_eq(wsn_device_set_threads(dev, 2), 0);
	ck_assert_int_eq(wsn_device_set_threads(dev, 1 << 20), WSN_EINVAL);
	ck_assert_ptr_nonnull(strstr(wsn_last_error(), "thread"));
	wsn_device_close(dev);
}
END_TEST

Suite *suite_cpu_backend(void)
{
	return TU_SUITE("cpu", { "cpu", 120, NULL, NULL, TU_TESTS({ test_backend_table, 1 }) });
}
