/* SPDX-License-Identifier: MIT */
/* tests/check_cli_values.c: option values: seeds, size suffixes, strict and decimal numbers, raw shapes. */
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

/* gen into path with the given --seed; returns the exit status. */
static int gen_seed(const char *seed, const char *path)
{
	struct tu_proc p;
	int st;

	RUN(&p, "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "4", "--hidden", "8", "--seed", (char *)seed,
	    "--out", (char *)path);
	st = p.status;
	ck_assert_msg(st == 0 || p.out[0] == 0, "gen --seed '%s' wrote to stdout: %s", seed, p.out);
	tu_proc_free(&p);
	return st;
}

/* --seed is decimal (a leading 0 is no octal) or 0x and hex digits. */
START_TEST(test_seed_syntax)
{
	char *dir = tu_tmpdir(), *a = cli_path_in(dir, "a.safetensors"), *b = cli_path_in(dir, "b.safetensors");

	/* pairs that must give the same bytes: decimal without octal, hex either case, the largest value */
	static const char *const same[][2] = { { "010", "10" }, { "09", "9" }, { "0x10", "16" }, { "0XfF", "255" },
					       { "18446744073709551615", "0xffffffffffffffff" } };
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		ck_assert_int_eq(gen_seed(same[i][0], a), 0);
		ck_assert_int_eq(gen_seed(same[i][1], b), 0);
		ck_assert_msg(cli_same_file(a, b), "--seed %s and --seed %s differ", same[i][0], same[i][1]);
	}
	ck_assert_int_eq(gen_seed("010", a), 0);
	ck_assert_int_eq(gen_seed("8", b), 0);
	ck_assert_msg(!cli_same_file(a, b), "--seed 010 is --seed 8 (octal)");
	/* no sign, no space, no overflow, no empty digits */
	static const char *const bad[] = { " -1", "-1", "+1", " 1", "1 ", "0x", "0x-1", "18446744073709551616",
					   "0x10000000000000000", "1e3", "", "0b1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(gen_seed(bad[i], a) == 2, "--seed '%s' was accepted", bad[i]);
	tu_rmtree(dir);
	free(a);
	free(b);
	free(dir);
}
END_TEST

/* Size suffixes: K, Ki, KiB and KB (all x1024), likewise M and G; nothing else. */
START_TEST(test_size_suffixes)
{
	static const struct {
		const char *rows;
		int64_t want; /* 0: a usage error */
	} cases[] = {
		{ "1KiB", 1024 }, { "1K", 1024 }, { "1Ki", 1024 }, { "1KB", 1024 }, { "2", 2 }, { "010", 10 },
		{ "1k", 1024 },   { "1m", 1 << 20 }, { "1kiB", 1024 },
		{ "1KBB", 0 },    { "1KiBB", 0 }, { "1KiK", 0 },   { "1Bi", 0 },    { "1B", 0 }, { "1kb", 0 },
		{ " 16", 0 },     { "+16", 0 },   { "-16", 0 },    { "16 ", 0 },    { "K", 0 },  { "0x10", 0 },
	};
	char *dir = tu_tmpdir(), *out = cli_path_in(dir, "x.safetensors");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tu_proc p;

		unlink(out);
		RUN(&p, "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", (char *)cases[i].rows, "--hidden", "4",
		    "--out", out);
		if (!cases[i].want) {
			ck_assert_msg(p.status == 2, "--rows '%s': exit %d", cases[i].rows, p.status);
			ck_assert_msg(strstr(p.err, "bad --rows"), "--rows '%s': %s", cases[i].rows, p.err);
			ck_assert_str_eq(p.out, "");
		} else {
			struct wsn_st_file *f;
			const struct wsn_st_entry *e;

			ck_assert_msg(p.status == 0, "--rows '%s': exit %d: %s", cases[i].rows, p.status, p.err);
			ck_assert_int_eq(wsn_st_open(out, NULL, &f), 0);
			ck_assert_ptr_nonnull(e = wsn_st_find(f, "x"));
			ck_assert_msg(e->shape[0] == cases[i].want, "--rows '%s': %lld rows", cases[i].rows,
				      (long long)e->shape[0]);
			wsn_st_close(f);
		}
		tu_proc_free(&p);
	}
	/* the same parser serves every size: bench --copy-size, plan --hidden */
	EXPECT_RUN(2, NULL, "bad --copy-size '4KBB'", "bench", "--device", "cpu", "--copy-size", "4KBB");
	EXPECT_RUN(2, NULL, "bad --hidden ' 4096'", "plan", "--op", "rmsnorm-fwd", "--hidden", " 4096");
	EXPECT_RUN(0, "wsn_rmsnorm_fwd_bf16_h4096", NULL, "plan", "--op", "rmsnorm-fwd", "--hidden", "4KiB");
	tu_rmtree(dir);
	free(out);
	free(dir);
}
END_TEST

/* A raw --shape whose byte count overflows is an error that says so, not a wrapped size check. */
START_TEST(test_raw_shape_overflow)
{
	char *dir = tu_tmpdir(), *raw = cli_path_in(dir, "empty.bin");

	tu_write_file(raw, "", 0);
	EXPECT_RUN(3, NULL, "more bytes than a file can hold", "run", "--device", "cpu", "--op", "rmsnorm-fwd",
		   "--dtype", "f32", "--shape", "256Gx16M", "--input", raw);
	tu_rmtree(dir);
	free(raw);
	free(dir);
}
END_TEST

/*
 * Values the manual does not allow and options that would do nothing: a usage error (exit 2) naming
 * the option, or for an empty entry in an input list a runtime error (exit 3), and nothing on stdout.
 */
START_TEST(test_strict_values)
{
	static const struct {
		const char *args[12];
		int status;
		const char *msg;
	} cases[] = {
		/* counts take no size suffix (rows, hidden sizes and byte sizes do) */
		{ { "run", "--input", "x", "--threads", "1k", NULL }, 2, "bad --threads '1k'" },
		{ { "run", "--input", "x", "--qd", "4K", NULL }, 2, "bad --qd '4K'" },
		{ { "run", "--input", "x", "--iterations", "2k", NULL }, 2, "bad --iterations '2k'" },
		{ { "run", "--input", "x", "--kernel-loops", "1K", NULL }, 2, "bad --kernel-loops '1K'" },
		{ { "bench", "--iters", "1K", NULL }, 2, "bad --iters '1K'" },
		{ { "gen", "--op", "rmsnorm-fwd", "--rows", "8", "--hidden", "8", "--shards", "2k", "--out", "x", NULL }, 2,
		  "bad --shards '2k'" },
		{ { "plan", "--op", "rmsnorm-fwd", "--hidden", "4096", "--block-threads", "1K", NULL }, 2,
		  "bad --block-threads '1K'" },
		/* fractional values: decimal only, and the range checked before rounding to a float */
		{ { "run", "--input", "x", "--eps", "0x1p-4", NULL }, 2, "bad --eps '0x1p-4'" },
		{ { "run", "--input", "x", "--eps", " 1e-5", NULL }, 2, "bad --eps ' 1e-5'" },
		{ { "run", "--input", "x", "--eps", "+0.1", NULL }, 2, "bad --eps '+0.1'" },
		{ { "plan", "--op", "rmsnorm-fwd", "--hidden", "64", "--eps", "1.00000001", NULL }, 2,
		  "bad --eps '1.00000001'" },
		{ { "gen", "--op", "rmsnorm-fwd", "--eps", "nan", NULL }, 2, "bad --eps 'nan'" },
		{ { "gen", "--op", "rmsnorm-fwd", "--eps", "1e", NULL }, 2, "bad --eps '1e'" },
		{ { "run", "--input", "x", "--min-read-gbs", "1e39", NULL }, 2, "bad --min-read-gbs '1e39'" },
		{ { "run", "--input", "x", "--min-read-gbs", "0x10", NULL }, 2, "bad --min-read-gbs '0x10'" },
		{ { "run", "--input", "x", "--min-kernel-frac", "90", NULL }, 2, "0.9 for 90 %" },
		{ { "run", "--input", "x", "--min-kernel-frac", "0", NULL }, 2, "0 < f <= 1" },
		{ { "bench", "--device", "cpu", "--op", "layernorm-fwd,layernorm-bwd,rmsnorm-fwd,rmsnorm-bwd,layernorm-fwd",
		    NULL }, 2, "names layernorm-fwd twice" },
		{ { "bench", "--device", "cpu", "--dtype", "f32,f16,bf16,f32", NULL }, 2, "names f32 twice" },
		{ { "plan", "--op", "rmsnorm-fwd", "--hidden", "1048576", "--rows", "1024G", NULL }, 3,
		  "rows x hidden must stay below 2^60" },
		{ { "run", "--input", "x", "--batch-rows", "2T", NULL }, 2, "expected 1..1099511627776" },
		/* lists: no empty entry */
		{ { "bench", "--hidden", "64,,128", NULL }, 2, "bad --hidden '64,,128'" },
		{ { "bench", "--hidden", ",64", NULL }, 2, "bad --hidden ',64'" },
		{ { "bench", "--op", "layernorm-fwd,", NULL }, 2, "bad --op 'layernorm-fwd,'" },
		{ { "run", "--input", "nothing-a,,nothing-b", NULL }, 3, "has an empty entry" },
		/* options that nothing would use */
		{ { "run", "--demo", "--op", "layernorm-fwd", NULL }, 2, "drop --op" },
		{ { "run", "--input", "x", "--read-only", "--kernel-loops", "8", NULL }, 2, "drop --kernel-loops" },
		{ { "run", "--input", "x", "--autotune", "--read-only", NULL }, 2, "drop --autotune" },
		{ { "run", "--input", "x", "--read-only", "--verify-rows", "5", NULL }, 2, "drop --verify-rows" },
		{ { "bench", "--h2d", "--op", "rmsnorm-fwd", NULL }, 2, "--h2d times copies, not kernels: drop --op" },
		{ { "bench", "--hidden", "64", "--h2d", NULL }, 2, "drop --hidden" },
		{ { "devices", "--json=1", NULL }, 2, "option '--json' takes no value" },
		{ { "run", "--dem=yes", NULL }, 2, "option '--demo' takes no value" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[14] = { (char *)tu_wsnorm_bin() };
		struct tu_proc p;

		for (int a = 0; cases[i].args[a]; a++)
			argv[a + 1] = (char *)cases[i].args[a];
		tu_run(argv, 120, &p);
		ck_assert_msg(p.status == cases[i].status, "case %zu (%s %s): exit %d, want %d: %s", i, cases[i].args[0],
			      cases[i].args[1], p.status, cases[i].status, p.err);
		ck_assert_msg(strstr(p.err, cases[i].msg), "case %zu: '%s' not in: %s", i, cases[i].msg, p.err);
		ck_assert_str_eq(p.out, "");
		tu_proc_free(&p);
	}
}
END_TEST

/* The same fractional values in their allowed forms are taken, and mean what they say (gen keeps --eps). */
START_TEST(test_decimal_values)
{
	static const char *const ok[] = { "1e-5", "1E-05", "0.5", ".5", "1", "1.", "1e+0" };
	static const float want[] = { 1e-5f, 1e-5f, 0.5f, 0.5f, 1.0f, 1.0f, 1.0f };
	char *dir = tu_tmpdir(), *out = cli_path_in(dir, "e.safetensors");

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		struct wsn_st_file *f;
		struct tu_proc p;
		const char *eps;

		RUN(&p, "gen", "--op", "rmsnorm-fwd", "--rows", "2", "--hidden", "4", "--eps", (char *)ok[i], "--out", out);
		ck_assert_msg(p.status == 0, "--eps '%s': exit %d: %s", ok[i], p.status, p.err);
		tu_proc_free(&p);
		ck_assert_msg(wsn_st_open(out, NULL, &f) == 0, "%s", wsn_last_error());
		ck_assert_ptr_nonnull(eps = wsn_st_metadata(f, "wsnorm.eps"));
		ck_assert_msg(strtof(eps, NULL) == want[i], "--eps '%s': wsnorm.eps %s", ok[i], eps);
		wsn_st_close(f);
	}
	tu_rmtree(dir);
	free(out);
	free(dir);
}
END_TEST

Suite *suite_cli_values(void)
{
	return TU_SUITE("cli", { "cli", 300, NULL, NULL, TU_TESTS({ test_seed_syntax, 1 }, { test_size_suffixes, 1 },
				{ test_raw_shape_overflow, 1 }, { test_strict_values, 1 }, { test_decimal_values, 1 }) });
}
