/* SPDX-License-Identifier: MIT */
/* tests/check_run_signals.c: signals during wsnorm run, gen and demo. */
#include "testutil.h"

#include "io/io_internal.h" /* wsn__reader_inject_short_reads */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/loop.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run_util.h"

/*
 * A long --duration run with --output, stopped by a signal during its first pass: it ends within
 * moments with a partial report marked interrupted, exit status 0 (everything so far passed), and
 * no output and no temporary file anywhere.
 */
static void interrupt_run(int sig, const char *loops, int settle_ms)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out");
	char *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), names[512];
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--duration", "60s", "--batch-rows", "16", "--kernel-loops", (char *)loops, "--ring", "2",
			 "--copy-size", "64K", "--threads", "1", "--json", NULL };
	double t0;
	pid_t pid;
	int status;
	json_t *j;
	json_error_t je;
	char *text, *err;

	run_gen("rmsnorm-fwd", "f32", "256", "256", "4", ds);
	pid = run_spawn(argv, so, se);
	/* the run is under way once it has its first output open (an unnamed file in the output directory) */
	for (int i = 0; i < 1000 && !run_has_open_in(pid, out); i++)
		run_sleep_ms(10);
	ck_assert_msg(run_has_open_in(pid, out), "the run did not start");
	run_sleep_ms(settle_ms);
	t0 = (double)clock();
	kill(pid, sig);
	status = run_reap(pid);
	(void)t0;
	text = tu_slurp(so, NULL);
	err = tu_slurp(se, NULL);
	ck_assert_msg(status == 0, "exit %d after signal %d: %s", status, sig, err);
	ck_assert_msg(strstr(err, sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP") != NULL, "%s", err);
	j = json_loads(text, 0, &je);
	ck_assert_msg(j != NULL, "partial report is not JSON: %s\n%s", je.text, text);
	ck_assert(json_is_true(json_object_get(j, "interrupted")));
	/* PASS only where a batch was verified before the signal: the batches in flight are not */
	ck_assert_str_eq(run_jstr(j, "result"), run_jint(j, "verify.batches") > 0 ? "pass" : "unverified");
	if (!settle_ms)
		ck_assert_int_eq(run_jint(j, "verify.batches"), 0);
	ck_assert(run_jint(j, "rows") < 1024); /* the first pass was not over */
	ck_assert(json_is_false(json_object_get(json_object_get(j, "output"), "written")));
	json_decref(j);
	ck_assert_msg(run_dir_count(out, names, sizeof(names)) <= 0, "output left behind: %s", names);
	ck_assert_msg(run_dir_count(dir, names, sizeof(names)) == 3, "stray files: %s", names); /* ds stdout stderr */
	free(text);
	free(err);
	run_rmtree_free(dir, ds, out, so, se, NULL);
}

START_TEST(test_sigint)
{
	interrupt_run(SIGINT, "20000", 300);
}
END_TEST

START_TEST(test_sigterm)
{
	setenv("WSNORM_RUN_COPIES", "1", 1); /* and through the GPU path */
	interrupt_run(SIGTERM, "20000", 300);
	unsetenv("WSNORM_RUN_COPIES");
}
END_TEST

/* Wait up to 20 s for text to appear in file path; 1 when it did. */
static int wait_for_text(const char *path, const char *text)
{
	for (int i = 0; i < 2000; i++) {
		char *t = tu_slurp(path, NULL);
		int found = t && strstr(t, text);

		free(t);
		if (found)
			return 1;
		run_sleep_ms(10);
	}
	return 0;
}

/*
 * Start argv (stderr to se) and, once dir holds something, signal it twice: the second only once the
 * first was taken. It must then end by sig.
 */
static void signal_twice(char *const argv[], const char *dir, const char *so, const char *se, int sig)
{
	pid_t pid = run_spawn(argv, so, se);
	int status;
	char *err;

	/* under way once dir holds something (gen's staged shards) or the process has a file open there (run's
	 * unnamed outputs) */
	for (int i = 0; i < 2000 && run_dir_count(dir, NULL, 0) <= 0 && !run_has_open_in(pid, dir); i++)
		run_sleep_ms(10);
	ck_assert_msg(run_dir_count(dir, NULL, 0) > 0 || run_has_open_in(pid, dir), "%s %s did not start", argv[1],
		      argv[2]);
	run_sleep_ms(200);
	kill(pid, sig);
	ck_assert_msg(wait_for_text(se, "again to quit at once"), "the first signal was not taken");
	kill(pid, sig);
	status = run_reap(pid);
	err = tu_slurp(se, NULL);
	ck_assert_msg(status == 128 + sig, "exit %d after the second signal %d: %s", status, sig, err);
	free(err);
}

/*
 * A second signal ends the process at once, by that signal, but first removes what the run had made
 * and not finished: the temporary output files and the output directory it created (a run with
 * --output), the demo's directory and inputs (run --demo).
 */
START_TEST(test_second_signal)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out"), *so = run_path_in(dir, "stdout");
	char *se = run_path_in(dir, "stderr"), *tmpd = run_path_in(dir, "tmp"), names[512];
	/* --standalone: the stages measured alone, which a stop does not cut short, keep the run busy
	 * after the first signal (a batch in flight ends within one kernel launch) */
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--duration", "60s", "--batch-rows", "16", "--kernel-loops", "200000", "--ring", "2",
			 "--copy-size", "64K", "--threads", "1", "--standalone", NULL };
	char *demo[] = { (char *)tu_wsnorm_bin(), "run", "--demo", "--device", "cpu", "--kernel-loops", "2000",
			 "--threads", "1", NULL };
	run_gen("rmsnorm-fwd", "f32", "256", "256", "4", ds);
	signal_twice(argv, out, so, se, SIGINT);
	ck_assert_msg(access(out, F_OK) < 0, "the output directory the run made is still there: %s",
		      run_dir_count(out, names, sizeof(names)) >= 0 ? names : "");

	ck_assert_int_eq(mkdir(tmpd, 0755), 0);
	setenv("TMPDIR", tmpd, 1); /* the demo's directory goes there */
	signal_twice(demo, tmpd, so, se, SIGTERM);
	unsetenv("TMPDIR");
	ck_assert_msg(run_dir_count(tmpd, names, sizeof(names)) == 0, "the demo left: %s", names);
	run_rmtree_free(dir, ds, out, so, se, tmpd, NULL);
}
END_TEST

/* a hang-up (the terminal or ssh session gone) stops a run the same way */
START_TEST(test_sighup)
{
	interrupt_run(SIGHUP, "20000", 300);
}
END_TEST

/*
 * gen --shards stopped by SIGINT, SIGTERM or SIGHUP after its first shard: it ends by that signal
 * and leaves no shard, no temporary file, and no directory it made (one that was there stays, empty).
 */
START_TEST(test_gen_signal)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	static const char *names[] = { "SIGINT", "SIGTERM", "SIGHUP" };
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr");
	char *first = run_path_in(ds, "shard-00000-of-00004.safetensors"), left[512], staged[4096];
	/* 64 MB shards: each takes a good part of a second to make, so the signal lands mid-set */
	char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "128K",
			 "--hidden", "512", "--shards", "4", "--out", ds, NULL };

	for (int i = 0; i < 3; i++) {
		int made = i != 1, status, waited = 0;
		char *err;
		pid_t pid;

		if (!made)
			ck_assert_int_eq(mkdir(ds, 0755), 0);
		pid = run_spawn(argv, so, se);
		/* shards are written under hidden names first, renamed into place when all are written */
		snprintf(staged, sizeof(staged), "%s/.shard-00000-of-00004.safetensors.gen-%ld", ds, (long)pid);
		while (access(staged, F_OK) < 0 && waited++ < 30000)
			run_sleep_ms(1);
		ck_assert_msg(access(staged, F_OK) == 0, "gen wrote no shard in 30 s");
		ck_assert_msg(access(first, F_OK) < 0, "shard 0 has its name before the set is written");
		kill(pid, sigs[i]);
		status = run_reap(pid);
		err = tu_slurp(se, NULL);
		ck_assert_msg(status == 128 + sigs[i], "%s: exit %d, expected death by the signal: %s", names[i], status,
			      err);
		ck_assert_msg(strstr(err, names[i]) && strstr(err, "removed the"), "%s: %s", names[i], err);
		if (made) {
			ck_assert_msg(access(ds, F_OK) < 0, "%s: the directory gen made is still there", names[i]);
		} else {
			ck_assert_msg(run_dir_count(ds, left, sizeof(left)) == 0, "%s: left behind: %s", names[i], left);
			ck_assert_int_eq(rmdir(ds), 0);
		}
		free(err);
	}
	tu_rmtree(dir);
	free(dir), free(ds), free(so), free(se), free(first);
}
END_TEST

/*
 * gen killed (SIGKILL: nothing can clean up) while it writes its file leaves nothing: the file
 * being written has no name until it is complete. On a file system without unnamed files the
 * documented fallback is a temporary name next to the output, which then stays.
 */
START_TEST(test_gen_kill_mid_write)
{
	char *dir = tu_tmpdir(), *sub = run_path_in(dir, "out"), *out = run_path_in(sub, "x.safetensors");
	char *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), left[512];
	char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", "rmsnorm-fwd", "--dtype", "f32", "--rows", "64K",
			 "--hidden", "512", "--out", out, NULL };
	int fd, unnamed, status, waited = 0;
	pid_t pid;

	ck_assert_int_eq(mkdir(sub, 0755), 0);
	fd = open(sub, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	unnamed = fd >= 0 && access("/proc/self/fd", X_OK) == 0;
	if (fd >= 0)
		close(fd);
	if (!unnamed)
		printf("gen_kill_mid_write: %s holds no unnamed files: checking the named fallback\n", sub);
	pid = run_spawn(argv, so, se);
	/* until the output is being written: an open unnamed file there, or a temporary name */
	while (waited++ < 60000 &&
	       !(unnamed ? run_has_open_marked(pid, sub, "(deleted)") : run_dir_count(sub, NULL, 0) > 0)) {
		ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "gen ended before it was caught writing");
		run_sleep_ms(1);
	}
	ck_assert_msg(waited < 60000, "gen did not start writing in 60 s");
	kill(pid, SIGKILL);
	ck_assert_int_eq(run_reap(pid), 128 + SIGKILL);
	if (unnamed) {
		ck_assert_msg(run_dir_count(sub, left, sizeof(left)) == 0, "left behind: %s", left);
	} else {
		ck_assert_int_eq(run_dir_count(sub, left, sizeof(left)), 1);
		ck_assert_msg(!strncmp(left, "x.safetensors.", 14), "left behind: %s", left);
	}
	ck_assert_int_eq(access(out, F_OK), -1);
	tu_rmtree(dir);
	free(dir), free(sub), free(out), free(so), free(se);
}
END_TEST

/* Stopped as its first batch starts (half a second a batch in an optimised build, several under a
 * sanitizer): nothing was verified, so the result is "unverified", not "pass" (the helper checks it
 * against verify.batches == 0). */
START_TEST(test_signal_before_verify)
{
	interrupt_run(SIGTERM, "60000", 0);
}
END_TEST

/* A demo stopped as its first op's first batch starts: nothing was verified, so neither the JSON
 * object nor the text's last line may read as a pass, and the demo's temporary inputs are gone. */
START_TEST(test_demo_signal_before_verify)
{
	char *dir = tu_tmpdir(), *tmp = run_path_in(dir, "tmp"), *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr");
	const char *old = getenv("TMPDIR");
	char *saved = old ? strdup(old) : NULL, names[512];

	ck_assert_int_eq(mkdir(tmp, 0755), 0);
	for (int json = 0; json < 2; json++) {
		char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--demo", "--device", "cpu", "--batch-rows", "16",
				 "--kernel-loops", "20000", "--threads", "1", json ? "--json" : NULL, NULL };
		char demo[4300] = "";
		char *text, *err;
		pid_t pid;
		int status;

		setenv("TMPDIR", tmp, 1);
		pid = run_spawn(argv, so, se);
		/* under way once the demo's directory holds its first generated input */
		for (int i = 0; i < 1000 && !demo[0]; i++) {
			DIR *d = opendir(tmp);
			struct dirent *e;

			while (d && (e = readdir(d)))
				if (!strncmp(e->d_name, "wsnorm-demo-", 12))
					snprintf(demo, sizeof(demo), "%s/%s", tmp, e->d_name);
			if (d)
				closedir(d);
			if (demo[0] && run_dir_count(demo, NULL, 0) <= 0)
				demo[0] = '\0';
			if (!demo[0])
				run_sleep_ms(10);
		}
		if (saved)
			setenv("TMPDIR", saved, 1);
		else
			unsetenv("TMPDIR");
		ck_assert_msg(demo[0], "the demo did not start");
		kill(pid, SIGTERM);
		status = run_reap(pid);
		text = tu_slurp(so, NULL);
		err = tu_slurp(se, NULL);
		ck_assert_msg(status == 0, "exit %d: %s", status, err);
		if (json) {
			json_error_t je;
			json_t *j = json_loads(text, 0, &je), *r;

			ck_assert_msg(j != NULL, "not JSON: %s\n%s", je.text, text);
			ck_assert(json_is_true(json_object_get(j, "interrupted")));
			ck_assert(json_is_false(json_object_get(j, "verified")));
			ck_assert_int_eq(run_jint(j, "ops_completed"), 0);
			ck_assert_str_eq(run_jstr(j, "result"), "unverified");
			r = json_array_get(json_object_get(j, "runs"), 0);
			ck_assert_msg(r != NULL, "no run in %s", text);
			ck_assert_int_eq(run_jint(r, "verify.batches"), 0);
			ck_assert_str_eq(run_jstr(r, "result"), "unverified");
			json_decref(j);
		} else {
			ck_assert_msg(strstr(text, "demo result: INTERRUPTED after 0 of 4 ops (not verified)\n") != NULL,
				      "%s", text);
			ck_assert_ptr_null(strstr(text, "PASS"));
		}
		ck_assert_msg(run_dir_count(tmp, names, sizeof(names)) == 0, "left behind: %s", names);
		free(text);
		free(err);
	}
	free(saved); /* NULL where TMPDIR was unset: not in the list, which NULL ends */
	run_rmtree_free(dir, tmp, so, se, NULL);
}
END_TEST

Suite *suite_run_signals(void)
{
	return TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_sigint, 1 }, { test_sigterm, 1 }, { test_sighup, 1 },
				{ test_second_signal, 1 }, { test_gen_signal, 1 }, { test_gen_kill_mid_write, 1 },
				{ test_signal_before_verify, 1 }, { test_demo_signal_before_verify, 1 }) });
}
