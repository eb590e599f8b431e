/* SPDX-License-Identifier: MIT */
/* tests/check_core_errors.c: error names and messages, text escaping and op names. */
#include "testutil.h"
#include "core/error.h"
#include "core/hostmem.h"
#include "core/params.h"
#include "overlap.h"
#include "tunecache.h"
#include "io/io_internal.h"
#include "cpu/cpu.h"

#include <dirent.h>
#include <jansson.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Text for a terminal or JSON: controls and invalid UTF-8 escaped, whole characters or none at the end. */
START_TEST(test_text_escape)
{
	static const struct {
		const char *in;
		size_t cap;
		const char *out;
	} cases[] = {
		{ "plain", 64, "plain" },
		{ "a\x1b[2Jb\x07\n\x7f", 64, "a\\x1b[2Jb\\x07\\x0a\\x7f" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 64, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "bad\xff\xfe", 64, "bad\\xff\\xfe" },
		{ "\xc3", 64, "\\xc3" },                    /* a character cut short */
		{ "\xc0\xaf", 64, "\\xc0\\xaf" },           /* overlong */
		{ "\xed\xa0\x80", 64, "\\xed\\xa0\\x80" },   /* a surrogate */
		{ "\xf4\x90\x80\x80", 64, "\\xf4\\x90\\x80\\x80" }, /* past U+10FFFF */
		{ "ab\xc3\xa9", 4, "ab" },                  /* the character does not fit: left out whole */
		{ "ab\x01", 6, "ab" },                       /* nor does the escape */
		{ "ab\x01", 7, "ab\\x01" },
		{ "", 1, "" },
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = wsn_text_escape(buf, cases[i].cap, cases[i].in);
		ck_assert_msg(!strcmp(buf, cases[i].out), "case %zu: '%s'", i, buf);
		ck_assert_int_eq(n, strlen(cases[i].out));
	}
	ck_assert_int_eq(wsn_text_escape(buf, 0, "x"), 0);
	/* the library's own messages go through it */
	ck_assert_int_eq(wsn__error(WSN_EINVAL, "name '%s'", "a\x1b\xff"), WSN_EINVAL);
	ck_assert_str_eq(wsn_last_error(), "name 'a\\x1b\\xff'");
	/* a context names its step once: a detail that starts with the context's first word loses it */
	wsn__error(WSN_EINVAL, "plan: no kernel fits");
	ck_assert_int_eq(wsn__error_context(WSN_EINVAL, "plan %s on cuda:%d", "x", 0), WSN_EINVAL);
	ck_assert_str_eq(wsn_last_error(), "plan x on cuda:0: no kernel fits");
	wsn__error(WSN_EINVAL, "planner: no kernel fits");
	wsn__error_context(WSN_EINVAL, "plan %s", "x");
	ck_assert_str_eq(wsn_last_error(), "plan x: planner: no kernel fits");
}
END_TEST

START_TEST(test_error_table)
{
	ck_assert_str_eq(wsn_err_name(WSN_EINVAL), "EINVAL");
	ck_assert_str_eq(wsn_err_name(WSN_EFORMAT), "EFORMAT");
	ck_assert_str_eq(wsn_strerror(WSN_ETRUNC), "truncated file");
	ck_assert_int_eq(WSN_ENOENT, -ENOENT);
	ck_assert_str_eq(wsn_err_name(-99999), "UNKNOWN");
	ck_assert_str_eq(wsn_strerror(-99999), "unknown error");
	ck_assert_str_eq(wsn_version(), WSN_VERSION_STRING);
}
END_TEST

START_TEST(test_op_names)
{
	enum wsn_op op;
	enum wsn_approach a;

	for (int i = 0; i < WSN_OP_COUNT; i++) {
		ck_assert_int_eq(wsn_op_parse(wsn_op_name((enum wsn_op)i), &op), 0);
		ck_assert_int_eq(op, i);
	}
	ck_assert_int_eq(wsn_op_parse("batchnorm-fwd", &op), WSN_EINVAL);
	/* each op is exactly one of LayerNorm/RMSNorm and one of forward/backward */
	ck_assert(wsn_op_is_layernorm(WSN_LAYERNORM_FWD) && wsn_op_is_layernorm(WSN_LAYERNORM_BWD));
	ck_assert(!wsn_op_is_layernorm(WSN_RMSNORM_FWD) && !wsn_op_is_layernorm(WSN_RMSNORM_BWD));
	ck_assert(!wsn_op_is_backward(WSN_LAYERNORM_FWD) && wsn_op_is_backward(WSN_LAYERNORM_BWD));
	ck_assert(!wsn_op_is_backward(WSN_RMSNORM_FWD) && wsn_op_is_backward(WSN_RMSNORM_BWD));
	ck_assert_int_eq(wsn_approach_parse("ws", &a), 0);
	ck_assert_int_eq(a, WSN_APPROACH_WS);
	ck_assert_int_eq(wsn_approach_parse("fast", &a), WSN_EINVAL);
	/* fwd bf16 16384 x 4096: read x + write y + weight + bias + mean/rstd */
	ck_assert_int_eq(wsn_op_min_bytes(WSN_LAYERNORM_FWD, 16384, 4096, WSN_BF16, 1, 1),
			 2LL * 16384 * 4096 * 2 + 2 * 16384 * 4 + 2 * 4096 * 2);
}
END_TEST

Suite *suite_core_errors(void)
{
	return TU_SUITE("core", { "core", 0, NULL, NULL, TU_TESTS({ test_error_table, 1 }, { test_text_escape, 1 }, { test_op_names, 1 }) });
}
