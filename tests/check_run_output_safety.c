/* SPDX-License-Identifier: MIT */
/* tests/check_run_output_safety.c: where wsnorm's outputs and reports may go, and what they leave behind. */
#include "testutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run_util.h"

/* argv with standard output a pipe whose reader has gone and stderr into err_path; its exit status. */
static int run_stdout_closed(char *const argv[], const char *env, const char *err_path)
{
	int fds[2], st = 0;
	pid_t pid;

	ck_assert_int_eq(pipe(fds), 0);
	close(fds[0]);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644), n = open("/dev/null", O_RDONLY);

		dup2(n, 0);
		dup2(fds[1], 1);
		dup2(e, 2);
		if (env)
			putenv((char *)env);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/*
 * A report written to a pipe nobody reads fails with the reason of the failed write (EPIPE), not
 * an errno left by what ran after it (a run writing a directory of outputs, whose clean-up after
 * the report meets a non-empty directory: "Directory not empty").
 */
START_TEST(test_stdout_closed_reason)
{
	char *dir = tu_tmpdir(), *err = run_path_in(dir, "err"), *ds = run_path_in(dir, "ds");
	char *out = run_path_in(dir, "out"), *text;
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out, NULL };
	char *help[] = { (char *)tu_wsnorm_bin(), "--help", NULL };
	int status;

	run_gen("rmsnorm-fwd", "f32", "64", "256", "2", ds);
	status = run_stdout_closed(argv, NULL, err);
	text = tu_slurp(err, NULL);
	ck_assert_msg(status == 3, "exit %d: %s", status, text);
	ck_assert_msg(strstr(text, "cannot write to standard output: Broken pipe"), "%s", text);
	free(text);
	status = run_stdout_closed(help, NULL, err);
	text = tu_slurp(err, NULL);
	ck_assert_msg(status == 3 && strstr(text, "cannot write to standard output: Broken pipe"), "exit %d: %s",
		      status, text);
	free(text);
	run_rmtree_free(dir, out, ds, err, NULL);
}
END_TEST

/*
 * The text report escapes the file names it prints ("first mismatch", "output") as stderr and
 * --json do: a name holding a newline or an escape byte reaches the terminal as \xNN.
 */
START_TEST(test_report_names_escaped)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in\n\033[2Jx.safetensors");
	char *out = run_path_in(dir, "out\n\033[2Jy.safetensors");
	struct tu_proc p;

	run_gen("rmsnorm-fwd", "f32", "40", "64", "1", in);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--inject-mismatch", "--copy-size", "64K");
	ck_assert_msg(p.status == 1, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, "first mismatch: ") && strstr(p.out, "in\\x0a\\x1b[2Jx.safetensors"), "%s", p.out);
	ck_assert_msg(!strchr(p.out, '\033'), "a raw escape byte in the report: %s", p.out);
	tu_proc_free(&p);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--output", out, "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.out, "  output   ") && strstr(p.out, "out\\x0a\\x1b[2Jy.safetensors"), "%s", p.out);
	ck_assert_msg(!strchr(p.out, '\033'), "a raw escape byte in the report: %s", p.out);
	tu_proc_free(&p);
	run_rmtree_free(dir, out, in, NULL);
}
END_TEST

/* A run with the arguments of argv (after "run") fails before its first batch with a message holding want. */
static void expect_refused(char *const args[], const char *want)
{
	char *argv[24] = { (char *)tu_wsnorm_bin() };
	struct tu_proc p;
	int n = 1;

	for (; args[n - 1] && n < 23; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	tu_run(argv, 120, &p);
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, want), "no '%s' in: %s", want, p.err);
	ck_assert_msg(!p.out[0], "a report, so the run did its work first: %s", p.out);
	tu_proc_free(&p);
}

/*
 * An output that cannot be made is refused before any work, with its reason: a name longer than a
 * directory entry holds, a missing directory, a file where the directory should be, and a missing
 * output directory's missing parent (several inputs).
 */
START_TEST(test_output_destination_checked)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *ds = run_path_in(dir, "ds");
	char *file = run_path_in(dir, "file"), *missing = run_path_in(dir, "missing/out.safetensors");
	char *under_file = run_path_in(dir, "file/out.safetensors"), *deep = run_path_in(dir, "missing/out");
	char longname[300], *toolong;
	int n;

	memset(longname, 'n', sizeof(longname));
	strcpy(longname + sizeof(longname) - 13, ".safetensors");
	toolong = run_path_in(dir, longname);
	run_gen("rmsnorm-fwd", "f32", "64", "128", "1", in);
	run_gen("rmsnorm-fwd", "f32", "64", "128", "2", ds);
	tu_write_file(file, "x", 1);
	{
		char *args[] = { "run", "--input", in, "--device", "cpu", "--output", toolong, NULL };
		expect_refused(args, "ENAMETOOLONG");
	}
	{
		char *args[] = { "run", "--input", in, "--device", "cpu", "--output", missing, NULL };
		expect_refused(args, "does not exist");
	}
	{
		char *args[] = { "run", "--input", in, "--device", "cpu", "--output", under_file, NULL };
		expect_refused(args, "ENOTDIR");
	}
	{
		char *args[] = { "run", "--input", ds, "--device", "cpu", "--output", deep, NULL };
		expect_refused(args, "does not exist");
	}
	n = run_dir_count(dir, NULL, 0);
	ck_assert_int_eq(n, 3); /* in, ds and file: nothing left behind */
	tu_rmtree(dir);
	free(toolong), free(deep), free(under_file), free(missing), free(file), free(ds), free(in), free(dir);
}
END_TEST

/*
 * An output has no name until the run commits it: while the run writes it, the output directory
 * holds no temporary file (no "out.safetensors.XXXXXX"), and a run killed by a signal it cannot
 * clean up after (SIGKILL here; SIGQUIT, SIGUSR1 and the like alike) leaves nothing behind.
 */
START_TEST(test_output_unnamed_until_commit)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *outdir = run_path_in(dir, "out");
	char *out = run_path_in(outdir, "out.safetensors"), *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr");
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", in, "--device", "cpu", "--output", out,
			 "--batch-rows", "16", "--kernel-loops", "20", "--copy-size", "64K", NULL };
	char names[512];
	int seen = 0, status;
	pid_t pid;

	run_gen("rmsnorm-fwd", "f32", "4096", "1024", "1", in);
	ck_assert_int_eq(mkdir(outdir, 0755), 0);
	{
		int fd = open(outdir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

		if (fd < 0) { /* the documented fallback there is a temporary name next to the output */
			printf("run_output_safety: %s holds no unnamed files: not checked\n", outdir);
			tu_rmtree(dir);
			free(se), free(so), free(out), free(outdir), free(in), free(dir);
			return;
		}
		close(fd);
	}
	pid = run_spawn(argv, so, se);
	for (int i = 0; i < 20000 && !seen; i++) {
		if (run_dir_count(outdir, names, sizeof(names)) > 0)
			ck_abort_msg("a named file in the output directory while the run writes: %s", names);
		seen = run_has_open_in(pid, outdir);
		if (!seen)
			run_sleep_ms(1);
	}
	ck_assert_msg(seen, "the run never had its output open");
	for (int i = 0; i < 20; i++) { /* a few batches more, then the kill */
		ck_assert_msg(run_dir_count(outdir, names, sizeof(names)) == 0,
			      "a named file in the output directory while the run writes: %s", names);
		run_sleep_ms(2);
	}
	kill(pid, SIGKILL);
	status = run_reap(pid);
	ck_assert_int_eq(status, 128 + SIGKILL);
	ck_assert_msg(run_dir_count(outdir, names, sizeof(names)) == 0, "left behind: %s", names);
	tu_rmtree(dir);
	free(se), free(so), free(out), free(outdir), free(in), free(dir);
}
END_TEST

/* The permission bits of path. */
static unsigned mode_of(const char *path)
{
	struct stat st;

	ck_assert_msg(stat(path, &st) == 0, "%s: %s", path, strerror(errno));
	return (unsigned)(st.st_mode & 07777);
}

/*
 * Outputs get the permissions a new file gets, 0666 less the umask (umask 077: 0600, not 0644), and
 * a replaced file keeps its own (a 0600 file stays 0600): run's outputs, gen's files, and the
 * library's writer on both of its paths (unnamed file, named temporary file).
 */
START_TEST(test_output_modes)
{
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *out = run_path_in(dir, "out.safetensors");
	char *raw = run_path_in(dir, "raw.bin");
	float data[4] = { 1, 2, 3, 4 };
	struct wsn_tensor t;
	struct tu_proc p;
	mode_t old = umask(077);

	run_gen("rmsnorm-fwd", "f32", "32", "64", "1", in);
	ck_assert_uint_eq(mode_of(in), 0600);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--output", out, "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	tu_proc_free(&p);
	ck_assert_uint_eq(mode_of(out), 0600);
	umask(022);
	ck_assert_int_eq(chmod(out, 0640), 0);
	ck_assert_int_eq(chmod(in, 0604), 0);
	RUN(&p, "run", "--input", in, "--device", "cpu", "--output", out, "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	tu_proc_free(&p);
	ck_assert_uint_eq(mode_of(out), 0640);
	run_gen("rmsnorm-fwd", "f32", "32", "64", "1", in);
	ck_assert_uint_eq(mode_of(in), 0604);
	wsn_tensor_1d(&t, data, WSN_F32, WSN_MEM_HOST, 4);
	for (int named = 0; named < 2; named++) {
		wsn__out_force_named(named);
		umask(027);
		unlink(raw);
		ck_assert_msg(wsn_raw_write(raw, &t) == 0, "%s", wsn_last_error());
		ck_assert_msg(mode_of(raw) == 0640, "named %d: mode %o", named, mode_of(raw));
		ck_assert_int_eq(chmod(raw, 0600), 0);
		ck_assert_msg(wsn_raw_write(raw, &t) == 0, "%s", wsn_last_error());
		ck_assert_msg(mode_of(raw) == 0600, "named %d: mode %o", named, mode_of(raw));
	}
	wsn__out_force_named(false);
	umask(old);
	tu_rmtree(dir);
	free(raw), free(out), free(in), free(dir);
}
END_TEST

/* run_spawn_with's prepare: become user and group 65534 (nobody). */
static int become_nobody(void *arg)
{
	(void)arg;
	return setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0;
}

/* The exit status of child pid, waited for as long as it runs. */
static int child_status(pid_t pid)
{
	int st = 0;

	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* argv run as nobody, stdout and stderr into files; its exit status. */
static int run_as_nobody(char *const argv[], const char *out_path, const char *err_path)
{
	return child_status(run_spawn_with(argv, out_path, err_path, become_nobody, NULL));
}

/*
 * In a sticky directory (1777, as /tmp) a file of another user, in a directory not ours, cannot be
 * replaced: run and gen refuse it before any work, naming why, and leave the file and the directory
 * as they were (no second name kept aside that no one but its owner could remove). A file of our own
 * there is replaced as usual. Needs root, to run wsnorm as another user.
 */
START_TEST(test_output_sticky_directory)
{
	char *dir = tu_tmpdir(), *sticky = run_path_in(dir, "sticky"), *in, *out, *mine, *so, *se, *text, names[512];
	int status;

	if (geteuid() != 0) {
		printf("run_output_safety: not root: the sticky-directory case (wsnorm run as another user) not run\n");
		tu_rmtree(dir);
		free(sticky), free(dir);
		return;
	}
	in = run_path_in(sticky, "in.safetensors"), out = run_path_in(sticky, "out.safetensors");
	mine = run_path_in(sticky, "mine.safetensors"), so = run_path_in(dir, "stdout"), se = run_path_in(dir, "stderr");
	ck_assert_int_eq(chmod(dir, 0755), 0);
	{ /* nobody must be able to run this build (setuid allowed, no private directory on the way) */
		char *argv[] = { (char *)tu_wsnorm_bin(), "--version", NULL };

		if ((status = run_as_nobody(argv, so, se)) != 0) {
			printf("run_output_safety: wsnorm --version as nobody exits %d: the sticky-directory case not run\n",
			       status);
			tu_rmtree(dir);
			free(se), free(so), free(mine), free(out), free(in), free(sticky), free(dir);
			return;
		}
	}
	ck_assert_int_eq(mkdir(sticky, 0755), 0);
	ck_assert_int_eq(chmod(sticky, 01777), 0);
	run_gen("rmsnorm-fwd", "f32", "32", "64", "1", in);
	ck_assert_int_eq(chmod(in, 0644), 0);
	tu_write_file(out, "old", 3);
	ck_assert_int_eq(chmod(out, 0666), 0); /* writable by all: only the sticky bit protects it */
	tu_write_file(mine, "mine", 4);
	ck_assert_int_eq(chown(mine, 65534, 65534), 0);
	{
		char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", in, "--device", "cpu", "--output", out,
				 "--copy-size", "64K", NULL };
		status = run_as_nobody(argv, so, se);
	}
	text = tu_slurp(se, NULL);
	ck_assert_msg(status == 3, "exit %d: %s", status, text);
	ck_assert_msg(strstr(text, "EPERM") && strstr(text, "sticky directory"), "%s", text);
	free(text);
	text = tu_slurp(so, NULL);
	ck_assert_msg(!text[0], "a report, so the run did its work first: %s", text);
	free(text);
	text = tu_slurp(out, NULL);
	ck_assert_str_eq(text, "old");
	free(text);
	ck_assert_msg(run_dir_count(sticky, names, sizeof(names)) == 3, "in the directory: %s", names);
	{
		char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", "rmsnorm-fwd", "--rows", "4", "--hidden", "64",
				 "--out", out, NULL };
		status = run_as_nobody(argv, so, se);
	}
	text = tu_slurp(se, NULL);
	ck_assert_msg(status == 3 && strstr(text, "EPERM") && strstr(text, "sticky directory"), "exit %d: %s", status, text);
	free(text);
	ck_assert_msg(run_dir_count(sticky, names, sizeof(names)) == 3, "in the directory: %s", names);
	{
		char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", in, "--device", "cpu", "--output", mine,
				 "--copy-size", "64K", NULL };
		status = run_as_nobody(argv, so, se);
	}
	text = tu_slurp(se, NULL);
	ck_assert_msg(status == 0, "our own file: exit %d: %s", status, text);
	free(text);
	ck_assert_msg(run_dir_count(sticky, names, sizeof(names)) == 3, "in the directory: %s", names);
	tu_rmtree(dir);
	free(se), free(so), free(mine), free(out), free(in), free(sticky), free(dir);
}
END_TEST

/* run_spawn_with's prepare: set the limit on open files (soft and hard) to *(rlim_t *)arg. */
static int limit_files(void *arg)
{
	struct rlimit rl = { *(rlim_t *)arg, *(rlim_t *)arg };

	return setrlimit(RLIMIT_NOFILE, &rl) < 0;
}

/* argv with its limit on open files set to nofile, stdout and stderr into files; its exit status. */
static int run_with_nofile(char *const argv[], rlim_t nofile, const char *out_path, const char *err_path)
{
	return child_status(run_spawn_with(argv, out_path, err_path, limit_files, &nofile));
}

/*
 * Each output stays open until the commit (an unnamed file has no other handle); where the limit on
 * open files has no room for them all, each complete output is parked under a temporary name and
 * closed instead, so a run with more outputs than the limit still completes them all and leaves no
 * temporary name behind.
 */
START_TEST(test_output_open_file_limit)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out");
	char *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), *text, names[4096];
	char *many[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--copy-size", "64K", NULL };
	int status;

	run_gen("rmsnorm-fwd", "f32", "80", "64", "80", ds);
	status = run_with_nofile(many, 64, so, se);
	text = tu_slurp(se, NULL);
	ck_assert_msg(status == 0, "exit %d: %s", status, text);
	free(text);
	ck_assert_msg(run_dir_count(out, names, sizeof(names)) == 80 && !strstr(names, "-part"), "%s", names);
	tu_rmtree(dir);
	free(se), free(so), free(out), free(ds), free(dir);
}
END_TEST

Suite *suite_run_output_safety(void)
{
	return TU_SUITE("pipeline", { "output_safety", 300, NULL, NULL,
				      TU_TESTS({ test_stdout_closed_reason, 1 }, { test_report_names_escaped, 1 },
					       { test_output_destination_checked, 1 }, { test_output_unnamed_until_commit, 1 },
					       { test_output_modes, 1 }, { test_output_sticky_directory, 1 },
					       { test_output_open_file_limit, 1 }) });
}
