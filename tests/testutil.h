/* SPDX-License-Identifier: MIT */
/* tests/testutil.h: what the test suites share: seeds, temp dirs, the subprocess runner. */
#ifndef WSN_TESTUTIL_H
#define WSN_TESTUTIL_H

#include "config.h"

#include <check.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wsnorm.h"

/*
 * A feature file's suite as a table of tcases, built by one call:
 *
 *	Suite *suite_io_raw(void)
 *	{
 *		return TU_SUITE("io", { "raw", 120, io_setup_tmp, io_teardown_tmp,
 *					TU_TESTS({ test_raw_round_trip, 1 }, { test_raw_sizes, 4 }) },
 *				{ "raw-bad-input", 0, NULL, NULL, TU_TESTS({ test_raw_bad, 1 }) });
 *	}
 *
 * A row is the tcase's name, its timeout in seconds (0 keeps Check's default), a checked fixture's
 * setup and teardown (NULL for none) and its tests in order. A test { test, n } runs for
 * _i = 0 .. n - 1 (tcase_add_loop_test); n is 1 for a plain test. The table is built where the
 * suite is, as START_TEST's test pointers are variables, not constants. TU_SUITE_ADD adds rows to a
 * suite that exists, for tcases that run only under a condition.
 */
struct tu_test {
	const TTest *test;
	int loops;
};
struct tu_tcase {
	const char *name;
	int timeout_s;
	SFun setup, teardown;
	const struct tu_test *tests;
};
#define TU_TESTS(...) ((const struct tu_test[]){ __VA_ARGS__, { NULL, 0 } })
#define TU_TCASES(...) ((const struct tu_tcase[]){ __VA_ARGS__, { NULL, 0, NULL, NULL, NULL } })
#define TU_SUITE(name, ...) tu_suite_build((name), TU_TCASES(__VA_ARGS__))
#define TU_SUITE_ADD(suite, ...) tu_suite_add((suite), TU_TCASES(__VA_ARGS__))
/* The suite of that name with a tcase for each row, up to the row whose name is NULL. */
Suite *tu_suite_build(const char *name, const struct tu_tcase *rows);
void tu_suite_add(Suite *suite, const struct tu_tcase *rows);

/* The run's base seed: $WSNORM_SEED or the time; printed once by the runner. */
uint64_t tu_seed(void);
/* A seed for one case, derived from the base seed and a tag, printed with the tag. */
uint64_t tu_case_seed(const char *tag);
/* A fresh temporary directory (removed by tu_rmtree). Returns a malloc'd path. */
char *tu_tmpdir(void);
void tu_rmtree(const char *path);
/* Write bytes to a file; ck_assert on failure. */
void tu_write_file(const char *path, const void *data, size_t len);
/* Host buffer helpers that ck_assert on failure. */
void *tu_xmalloc(size_t n);

/* Result of running a command. */
struct tu_proc {
	int status;      /* exit status, or 128 + signal */
	char *out;       /* stdout, NUL-terminated, malloc'd */
	char *err;       /* stderr */
};
/* Run argv (argv[0] resolved by PATH unless it has a slash) with a timeout in seconds. */
void tu_run(char *const argv[], int timeout_s, struct tu_proc *p);
/* tu_run with env ("NAME=value" strings, NULL-terminated; NULL for none) added to the child's
 * environment, each replacing a variable of that name. */
void tu_run_env(char *const argv[], char *const env[], int timeout_s, struct tu_proc *p);
void tu_proc_free(struct tu_proc *p);
/* Run the wsnorm binary under test with the given arguments (strings) into *p, 120 s at most. */
#define RUN(p, ...)                                                          \
	do {                                                                 \
		char *argv_[] = { (char *)tu_wsnorm_bin(), __VA_ARGS__, NULL }; \
		tu_run(argv_, 120, (p));                                     \
	} while (0)
/* Run wsnorm with the given arguments (strings, at most 30) and ck_assert its exit status and, where
 * not NULL, that its stdout holds out_has and its stderr err_has. */
void tu_expect_wsnorm(const char *const *args, int status, const char *out_has, const char *err_has);
#define EXPECT_RUN(status, out_has, err_has, ...) \
	tu_expect_wsnorm((const char *const[]){ __VA_ARGS__, NULL }, (status), (out_has), (err_has))
/* A file's bytes, NUL-terminated and malloc'd; their count in *len unless len is NULL. */
char *tu_slurp(const char *path, size_t *len);
/* The contents of tests/golden/<name> in the source tree ($WSNORM_SRCDIR), malloc'd. */
char *tu_golden(const char *name);
/* ck_assert that got equals tests/golden/<name>, showing both when they differ. */
void tu_assert_golden(const char *got, const char *name);
/* Run wsnorm with args (NULL-terminated, at most 14) and ck_assert a usage error: exit status 2, nothing
 * on stdout, the message on stderr equal to tests/golden/<golden>. */
void tu_assert_usage_golden(const char *const *args, const char *golden);
/* ck_assert that text holds each of the strings (EXPECT_HAS) or none of them (EXPECT_LACKS), naming
 * the first that is not so. */
void tu_expect_has(const char *text, const char *const *needles);
void tu_expect_lacks(const char *text, const char *const *needles);
#define EXPECT_HAS(text, ...) tu_expect_has((text), (const char *const[]){ __VA_ARGS__, NULL })
#define EXPECT_LACKS(text, ...) tu_expect_lacks((text), (const char *const[]){ __VA_ARGS__, NULL })
/* ck_assert that a plan's reasoning has no empty clause ("; ;" or ";;"); who names the kernel. */
void tu_assert_why_clauses(const char *who, const char *why);
/* The wsnorm binary under test ($WSNORM_BIN). */
const char *tu_wsnorm_bin(void);

/* ptxas for the offline checks: $WSNORM_PTXAS, else the one configure found; NULL when there is
 * none, with a printed note saying that `skipped` is not compiled offline. */
const char *tu_ptxas(const char *skipped);
/* ptxas -v -arch=sm_<arch>a on a PTX file, in the background: its log (stdout and stderr) goes to
 * <ptx>.<arch>.log, its cubin to <ptx>.<arch>.cubin. */
struct tu_ptxas_job {
	pid_t pid;
	char log[600], cubin[600];
};
void tu_ptxas_start(struct tu_ptxas_job *j, const char *ptxas, const char *ptx_path, int arch);
/* Wait for it; its exit status (128 + signal when killed) and its log in *log (malloc'd). */
int tu_ptxas_wait(struct tu_ptxas_job *j, char **log);
/* What ptxas -v said about one entry: found only when its registers and spills were both there. */
struct tu_fn_info {
	int found, regs, spill_st, spill_ld;
};
struct tu_fn_info tu_ptxas_info(const char *log, const char *entry);

#endif
