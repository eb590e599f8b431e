/* SPDX-License-Identifier: MIT */
/* tests/testutil.c: seeds, temporary directories and a subprocess runner for the suites. */
#define _GNU_SOURCE
#include "testutil.h"

#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void tu_suite_add(Suite *suite, const struct tu_tcase *rows)
{
	for (const struct tu_tcase *row = rows; row->name; row++) {
		TCase *tc = tcase_create(row->name);

		if (row->setup || row->teardown)
			tcase_add_checked_fixture(tc, row->setup, row->teardown);
		if (row->timeout_s > 0)
			tcase_set_timeout(tc, row->timeout_s);
		for (const struct tu_test *t = row->tests; t->test; t++)
			tcase_add_loop_test(tc, t->test, 0, t->loops);
		suite_add_tcase(suite, tc);
	}
}

Suite *tu_suite_build(const char *name, const struct tu_tcase *rows)
{
	Suite *suite = suite_create(name);

	tu_suite_add(suite, rows);
	return suite;
}

uint64_t tu_seed(void)
{
	static uint64_t seed;
	static int have;

	if (!have) {
		const char *s = getenv("WSNORM_SEED");
		seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
		have = 1;
	}
	return seed;
}

uint64_t tu_case_seed(const char *tag)
{
	uint64_t h = tu_seed() ^ 0xcbf29ce484222325ull;

	for (const char *c = tag; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
	printf("seed %s = 0x%016llx (WSNORM_SEED=0x%llx)\n", tag, (unsigned long long)h,
	       (unsigned long long)tu_seed());
	return h;
}

char *tu_tmpdir(void)
{
	const char *base = getenv("TMPDIR");
	char *p;

	if (asprintf(&p, "%s/wsnorm-test-XXXXXX", base ? base : "/tmp") < 0)
		ck_abort_msg("asprintf");
	ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s", p);
	return p;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

void tu_rmtree(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void tu_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	ck_assert_msg(f != NULL, "open %s", path);
	ck_assert_uint_eq(fwrite(data, 1, len, f), len);
	ck_assert_int_eq(fclose(f), 0);
}

void *tu_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	ck_assert_msg(p != NULL, "malloc %zu", n);
	return p;
}

char *tu_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "cannot open %s", path);
	ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	ck_assert_int_ge(n, 0);
	rewind(f);
	buf = tu_xmalloc((size_t)n + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return buf;
}

char *tu_golden(const char *name)
{
	const char *src = getenv("WSNORM_SRCDIR");
	char path[4096];

	snprintf(path, sizeof(path), "%s/tests/golden/%s", src ? src : ".", name);
	return tu_slurp(path, NULL);
}

void tu_assert_golden(const char *got, const char *name)
{
	char *want = tu_golden(name);

	ck_assert_msg(!strcmp(got, want), "output differs from tests/golden/%s:\n--- got ---\n%s--- want ---\n%s",
		      name, got, want);
	free(want);
}

void tu_assert_usage_golden(const char *const *args, const char *golden)
{
	char *argv[16] = { (char *)tu_wsnorm_bin() };
	struct tu_proc p;
	int n = 1;

	for (int k = 0; args[k]; k++) {
		ck_assert_int_lt(n, 15);
		argv[n++] = (char *)args[k];
	}
	argv[n] = NULL;
	tu_run(argv, 60, &p);
	ck_assert_msg(p.status == 2, "%s: exit %d, stderr %s", golden, p.status, p.err);
	ck_assert_str_eq(p.out, "");
	tu_assert_golden(p.err, golden);
	tu_proc_free(&p);
}

void tu_expect_has(const char *text, const char *const *needles)
{
	for (; *needles; needles++)
		ck_assert_msg(strstr(text, *needles) != NULL, "'%s' is not in:\n%s", *needles, text);
}

void tu_expect_lacks(const char *text, const char *const *needles)
{
	for (; *needles; needles++)
		ck_assert_msg(strstr(text, *needles) == NULL, "'%s' should not be in:\n%s", *needles, text);
}

void tu_assert_why_clauses(const char *who, const char *why)
{
	ck_assert_msg(!strstr(why, "; ;") && !strstr(why, ";;"), "%s: empty clause in '%s'", who, why);
}

const char *tu_wsnorm_bin(void)
{
	const char *b = getenv("WSNORM_BIN");
	return b ? b : "./wsnorm";
}

static void drain(int fd, char **buf, size_t *len, size_t *cap, int *open_)
{
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n <= 0) {
		*open_ = 0;
		return;
	}
	if (*len + (size_t)n + 1 > *cap) {
		*cap = (*len + (size_t)n + 1) * 2;
		*buf = realloc(*buf, *cap);
		ck_assert(*buf != NULL);
	}
	memcpy(*buf + *len, tmp, (size_t)n);
	*len += (size_t)n;
	(*buf)[*len] = '\0';
}

void tu_run(char *const argv[], int timeout_s, struct tu_proc *p)
{
	tu_run_env(argv, NULL, timeout_s, p);
}

void tu_run_env(char *const argv[], char *const env[], int timeout_s, struct tu_proc *p)
{
	int out[2], err[2], st = 0;
	size_t ol = 0, oc = 1, el = 0, ec = 1;
	int oo = 1, eo = 1;
	double deadline;
	struct timespec ts;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->out = calloc(1, 1);
	p->err = calloc(1, 1);
	ck_assert(pipe(out) == 0 && pipe(err) == 0);
	pid = fork();
	ck_assert(pid >= 0);
	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		close(out[0]), close(err[0]), close(out[1]), close(err[1]);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execvp(argv[0], argv);
		fprintf(stderr, "exec %s failed\n", argv[0]);
		_exit(127);
	}
	close(out[1]), close(err[1]);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	deadline = (double)ts.tv_sec + timeout_s;
	while (oo || eo) {
		struct pollfd fds[2] = { { oo ? out[0] : -1, POLLIN, 0 }, { eo ? err[0] : -1, POLLIN, 0 } };
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if ((double)ts.tv_sec > deadline) {
			kill(pid, SIGKILL);
			ck_abort_msg("%s timed out after %d s", argv[0], timeout_s);
		}
		if (poll(fds, 2, 500) < 0)
			continue;
		if (fds[0].revents)
			drain(out[0], &p->out, &ol, &oc, &oo);
		if (fds[1].revents)
			drain(err[0], &p->err, &el, &ec, &eo);
	}
	close(out[0]), close(err[0]);
	ck_assert(waitpid(pid, &st, 0) == pid);
	p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void tu_expect_wsnorm(const char *const *args, int status, const char *out_has, const char *err_has)
{
	char *argv[32] = { (char *)tu_wsnorm_bin() };
	struct tu_proc p;
	int n = 0;

	for (; args[n]; n++) {
		ck_assert_int_lt(n, 30);
		argv[n + 1] = (char *)args[n];
	}
	argv[n + 1] = NULL;
	tu_run(argv, 120, &p);
	ck_assert_msg(p.status == status, "wsnorm %s: exit %d, want %d: %s", args[0], p.status, status, p.err);
	if (out_has)
		ck_assert_msg(strstr(p.out, out_has) != NULL, "wsnorm %s: stdout lacks '%s': %s", args[0], out_has, p.out);
	if (err_has)
		ck_assert_msg(strstr(p.err, err_has) != NULL, "wsnorm %s: stderr lacks '%s': %s", args[0], err_has, p.err);
	tu_proc_free(&p);
}

void tu_proc_free(struct tu_proc *p)
{
	free(p->out);
	free(p->err);
	p->out = p->err = NULL;
}

const char *tu_ptxas(const char *skipped)
{
	const char *p = getenv("WSNORM_PTXAS");

	if (!p || !*p)
		p = WSN_PTXAS;
	if (!p || !*p || access(p, X_OK)) {
		printf("note: ptxas not found (set WSNORM_PTXAS): %s not compiled offline\n", skipped);
		return NULL;
	}
	return p;
}

void tu_ptxas_start(struct tu_ptxas_job *j, const char *ptxas, const char *ptx_path, int arch)
{
	char archopt[32];

	snprintf(archopt, sizeof(archopt), "-arch=sm_%da", arch);
	ck_assert((size_t)snprintf(j->log, sizeof(j->log), "%s.%d.log", ptx_path, arch) < sizeof(j->log));
	ck_assert((size_t)snprintf(j->cubin, sizeof(j->cubin), "%s.%d.cubin", ptx_path, arch) < sizeof(j->cubin));
	j->pid = fork();
	ck_assert_int_ge(j->pid, 0);
	if (j->pid == 0) {
		int fd = open(j->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			_exit(126);
		dup2(fd, 1);
		dup2(fd, 2);
		execl(ptxas, ptxas, archopt, "-v", "-o", j->cubin, ptx_path, (char *)NULL);
		_exit(127);
	}
}

int tu_ptxas_wait(struct tu_ptxas_job *j, char **log)
{
	int st = 0;

	ck_assert_int_eq(waitpid(j->pid, &st, 0), j->pid);
	st = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	ck_assert_msg(access(j->log, R_OK) == 0, "ptxas exited %d without a log at %s", st, j->log);
	*log = tu_slurp(j->log, NULL);
	return st;
}

struct tu_fn_info tu_ptxas_info(const char *log, const char *entry)
{
	struct tu_fn_info fi = { 0, -1, -1, -1 };
	char key[160];
	const char *p, *q;

	snprintf(key, sizeof(key), "Function properties for %s\n", entry);
	if (!(p = strstr(log, key)))
		return fi;
	p += strlen(key);
	if (sscanf(p, " %*d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &fi.spill_st,
		   &fi.spill_ld) != 2)
		return fi;
	if (!(q = strstr(p, "Used ")) || sscanf(q, "Used %d registers", &fi.regs) != 1)
		return fi;
	fi.found = 1;
	return fi;
}
