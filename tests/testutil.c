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

char *tu_golden(const char *name)
{
	const char *src = getenv("WSNORM_SRCDIR");
	char path[4096];
	FILE *f;
	char *buf;
	long n;

	snprintf(path, sizeof(path), "%s/tests/golden/%s", src ? src : ".", name);
	f = fopen(path, "rb");
	ck_assert_msg(f != NULL, "golden file %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = tu_xmalloc((size_t)n + 1);
	ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	return buf;
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

void tu_proc_free(struct tu_proc *p)
{
	free(p->out);
	free(p->err);
	p->out = p->err = NULL;
}
