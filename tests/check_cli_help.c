/* SPDX-License-Identifier: MIT */
/* tests/check_cli_help.c: the wsnorm command's help, version, usage errors and top level against golden output. */
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

START_TEST(test_help_golden)
{
	struct tu_proc p;

	RUN(&p, "--help");
	ck_assert_int_eq(p.status, 0);
	ck_assert_str_eq(p.err, "");
	tu_assert_golden(p.out, "help.txt");
	tu_proc_free(&p);
}
END_TEST

START_TEST(test_subcommand_help)
{
	static const char *cmds[] = { "devices", "gen", "run", "bench", "plan", "emit" };

	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct tu_proc p;
		char want[64];

		RUN(&p, (char *)cmds[i], "--help");
		ck_assert_msg(p.status == 0, "%s --help exit %d", cmds[i], p.status);
		snprintf(want, sizeof(want), "Usage: wsnorm %s", cmds[i]);
		ck_assert_msg(strstr(p.out, want) != NULL, "%s --help: %s", cmds[i], p.out);
		ck_assert_str_eq(p.err, "");
		tu_proc_free(&p);
	}
}
END_TEST

START_TEST(test_version)
{
	struct tu_proc p;
	char want[64];

	RUN(&p, "--version");
	ck_assert_int_eq(p.status, 0);
	snprintf(want, sizeof(want), "wsnorm %s (libwsnorm %s)\n", WSN_VERSION_STRING, WSN_VERSION_STRING);
	ck_assert_str_eq(p.out, want);
	tu_proc_free(&p);
}
END_TEST

/* Misuse: exit 2, a message on stderr naming the problem, nothing on stdout. */
START_TEST(test_usage_errors)
{
	static const struct {
		const char *args[10];
		const char *golden;
	} cases[] = {
		{ { NULL }, "err-no-command.txt" },
		{ { "frobnicate", NULL }, "err-unknown-command.txt" },
		{ { "run", "--bogus", NULL }, "err-run-bogus.txt" },
		{ { "run", NULL }, "err-run-no-input.txt" },
		{ { "gen", "--op", "layernorm-fwd", "--rows", "0", NULL }, "err-gen-rows.txt" },
		{ { "gen", "--op", "groupnorm-fwd", NULL }, "err-gen-op.txt" },
		{ { "run", "--input", "x", "--dtype", "f64", NULL }, "err-run-dtype.txt" },
		{ { "run", "--input", "x", "--qd", "0", NULL }, "err-run-qd.txt" },
		{ { "emit", "--op", "rmsnorm-fwd", NULL }, "err-emit-hidden.txt" },
		{ { "bench", "--hidden", "1024,abc", NULL }, "err-bench-hidden.txt" },
		{ { "bench", "--groups", "0", NULL }, "err-bench-groups.txt" },
		{ { "bench", "--batch", "0", NULL }, "err-bench-batch.txt" },
		{ { "bench", "--timing", "fast", NULL }, "err-bench-timing.txt" },
		{ { "bench", "--calls", "0", NULL }, "err-bench-calls.txt" },
		/* an option for the timing left out */
		{ { "bench", "--timing", "batch", "--calls", "5", NULL }, "err-bench-calls-batch.txt" },
		{ { "bench", "--timing", "single", "--batch", "4", NULL }, "err-bench-batch-single.txt" },
		{ { "plan", "--op", "rmsnorm-fwd", "--hidden", "4096", "--autotune", NULL }, "err-plan-autotune.txt" },
		/* an option without its value is named as such, not as unknown */
		{ { "gen", "--op", "layernorm-fwd", "--rows", NULL }, "err-gen-rows-value.txt" },
		{ { "plan", "--op", NULL }, "err-plan-op-value.txt" },
		{ { "bench", "--device", NULL }, "err-bench-device-value.txt" },
		/* an unknown short option is named by its letter, inside a cluster too */
		{ { "gen", "-xq", NULL }, "err-gen-short.txt" },
		{ { "gen", "--no-weight", "-xq", NULL }, "err-gen-short.txt" },
		{ { "gen", "--op", "rmsnorm-fwd", "-qx", NULL }, "err-gen-short-q.txt" },
		{ { "devices", "--bogus", NULL }, "err-devices-bogus.txt" },
		/* bad values name their option, in either form */
		{ { "bench", "--iters", "abc", NULL }, "err-bench-iters.txt" },
		{ { "bench", "--iters=abc", NULL }, "err-bench-iters.txt" },
		{ { "bench", "--warmup=-1", NULL }, "err-bench-warmup.txt" },
		/* --seed: decimal, or 0x and hex digits; nothing else */
		{ { "gen", "--op", "rmsnorm-fwd", "--seed", " -1", NULL }, "err-gen-seed-space.txt" },
		{ { "gen", "--op", "rmsnorm-fwd", "--seed", "0x", NULL }, "err-gen-seed-0x.txt" },
		/* sizes: digits and exactly the suffixes wsnorm(1) lists */
		{ { "gen", "--op", "rmsnorm-fwd", "--rows", "1KBB", NULL }, "err-gen-rows-kbb.txt" },
		{ { "gen", "--op", "rmsnorm-fwd", "--rows", " 16", NULL }, "err-gen-rows-space.txt" },
		{ { "gen", "--op", "rmsnorm-fwd", "--rows", "+16", NULL }, "err-gen-rows-plus.txt" },
		/* forced GPU kernel parameters: outside their documented ranges on every device ... */
		{ { "plan", "--op", "layernorm-fwd", "--hidden", "4096", "--cluster", "3", NULL }, "err-plan-cluster.txt" },
		{ { "plan", "--op", "layernorm-fwd", "--hidden", "4096", "--device", "cpu", "--cluster", "3", NULL },
		  "err-plan-cluster.txt" },
		{ { "bench", "--device", "cpu", "--cluster", "3", NULL }, "err-bench-cluster.txt" },
		{ { "bench", "--device", "cpu", "--groups", "33", NULL }, "err-bench-groups-33.txt" },
		{ { "emit", "--op", "layernorm-bwd", "--hidden", "4096", "--block-threads", "48", NULL },
		  "err-emit-block-threads.txt" },
		/* ... and on the CPU device, which has no GPU kernels, at all; --arch too */
		{ { "plan", "--op", "layernorm-fwd", "--hidden", "4096", "--device", "cpu", "--cluster", "2", NULL },
		  "err-plan-cpu-cluster.txt" },
		{ { "plan", "--op", "layernorm-fwd", "--hidden", "4096", "--device", "cpu", "--arch", "sm_100a", NULL },
		  "err-plan-cpu-arch.txt" },
		{ { "bench", "--device", "cpu", "--cluster", "2", NULL }, "err-bench-cpu-cluster.txt" },
		{ { "bench", "--device", "cpu", "--op", "rmsnorm-fwd", "--groups", "1", NULL }, "err-bench-cpu-groups.txt" },
		/* emit takes none of plan's device options */
		{ { "emit", "--op", "rmsnorm-fwd", "--hidden", "4096", "--device", "cpu", NULL }, "err-emit-device.txt" },
		/* an empty path is a usage error before any work, not a failed rename at the end */
		{ { "run", "--input", "x", "--output", "", NULL }, "err-run-output-empty.txt" },
		{ { "run", "--input", "", NULL }, "err-run-input-empty.txt" },
		{ { "gen", "--op", "rmsnorm-fwd", "--rows", "4", "--hidden", "4", "--out", "", NULL }, "err-gen-out-empty.txt" },
		/* a prefix of two long options names both; a bad value names its range */
		{ { "run", "--dev", "cpu", NULL }, "err-run-ambiguous.txt" },
		{ { "run", "--dev=cpu", NULL }, "err-run-ambiguous.txt" },
		{ { "run", "--input", "x", "--verify-rows", "2M", NULL }, "err-run-verify-rows.txt" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		tu_assert_usage_golden(cases[i].args, cases[i].golden);
}
END_TEST

START_TEST(test_devices_json)
{
	struct tu_proc p;
	json_error_t je;
	json_t *j, *b;

	RUN(&p, "devices", "--json");
	ck_assert_int_eq(p.status, 0);
	j = json_loads(p.out, 0, &je);
	ck_assert_msg(j != NULL, "devices --json is not JSON: %s\n%s", je.text, p.out);
	b = json_object_get(j, "backends");
	ck_assert(json_is_array(b) && json_array_size(b) >= 3);
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(b, 0), "name")), "cpu");
	ck_assert(json_is_true(json_object_get(json_array_get(b, 0), "available")));
	ck_assert_int_eq(json_array_size(json_object_get(json_array_get(b, 0), "devices")), 1);
	json_decref(j);
	tu_proc_free(&p);
	EXPECT_RUN(0, "cpu: available", NULL, "devices");
}
END_TEST

/* emit's help lists only what emit takes: no --device, --autotune or --json (those are plan's). */
START_TEST(test_emit_help)
{
	struct tu_proc p;

	RUN(&p, "emit", "--help");
	ck_assert_int_eq(p.status, 0);
	ck_assert_str_eq(p.err, "");
	tu_assert_golden(p.out, "help-emit.txt");
	ck_assert_ptr_null(strstr(p.out, "--device"));
	tu_proc_free(&p);
	RUN(&p, "plan", "--help");
	ck_assert_ptr_nonnull(strstr(p.out, "--device SPEC"));
	ck_assert_ptr_nonnull(strstr(p.out, "--arch ARCH        sm_90a or sm_100a (default sm_90a; with --device"));
	tu_proc_free(&p);
}
END_TEST

/* The top level: "--" ends its options; a bad command is quoted escaped; a command's failure says its
 * name once even where the library's message starts with it. */
START_TEST(test_top_level_edges)
{
	struct tu_proc p;

	RUN(&p, "-q", "--", "devices", "--json");
	json_decref(cli_out_json(&p, 0));
	tu_proc_free(&p);
	RUN(&p, "bo\x1b[31mgus");
	ck_assert_int_eq(p.status, 2);
	ck_assert_msg(strstr(p.err, "unknown command 'bo\\x1b[31mgus'") && !strchr(p.err, '\x1b'), "%s", p.err);
	tu_proc_free(&p);
	RUN(&p, "plan", "--op", "layernorm-fwd", "--hidden", "16M");
	ck_assert_int_eq(p.status, 3);
	ck_assert_msg(strstr(p.err, "wsnorm: plan: layernorm-fwd bf16 hidden 16777216: ESHAPE: no kernel fits: ") &&
		      !strstr(p.err, "ESHAPE: plan:"), "%s", p.err);
	tu_proc_free(&p);
}
END_TEST

Suite *suite_cli_help(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_help_golden, 1 }, { test_subcommand_help, 1 }, { test_version, 1 },
				{ test_usage_errors, 1 }, { test_devices_json, 1 }, { test_emit_help, 1 }, { test_top_level_edges, 1 }) });
}
