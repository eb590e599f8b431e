/* SPDX-License-Identifier: MIT */
/* tests/run_util.c: what the check_run_*.c tests share: running wsnorm, its JSON, datasets and child processes. */
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

#include <stdarg.h>

char *run_path_in(const char *dir, const char *name)
{
	char *p;
	ck_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

char *run_dir_under(const char *base)
{
	char *p;

	if (!base)
		return tu_tmpdir();
	ck_assert(asprintf(&p, "%s/wsnorm-pl-XXXXXX", base) > 0);
	ck_assert_msg(mkdtemp(p) != NULL, "mkdtemp %s: %s", p, strerror(errno));
	return p;
}

const char *run_tmpfs_dir(void)
{
	struct stat st;

	if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	printf("pipeline: no writable /dev/shm: the tmpfs cases run on $TMPDIR instead\n");
	return NULL;
}

const char *run_disk_dir(void)
{
	static char cwd[4096];
	ck_assert(getcwd(cwd, sizeof(cwd)) != NULL);
	return cwd;
}

json_t *run_parse(const struct tu_proc *p)
{
	json_error_t je;
	json_t *j = json_loads(p->out, 0, &je);

	ck_assert_msg(j != NULL, "--json output is not JSON (%s): exit %d\n%s\nstderr:\n%s", je.text, p->status,
		      p->out, p->err);
	return j;
}

/* The value at a dotted path of objects ("stages.compute.gbs"), or NULL. */
static json_t *json_at(json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	json_t *v = o;

	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && v; tok = strtok_r(NULL, ".", &save))
		v = json_object_get(v, tok);
	return v;
}

json_int_t run_jint(json_t *o, const char *path)
{
	json_t *v = json_at(o, path);

	ck_assert_msg(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

double run_jreal(json_t *o, const char *path)
{
	json_t *v = json_at(o, path);

	ck_assert_msg(json_is_number(v), "%s is not a number", path);
	return json_number_value(v);
}

const char *run_jstr(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	ck_assert_msg(json_is_string(v), "%s is not a string", key);
	return json_string_value(v);
}

void run_gen(const char *op, const char *dt, const char *rows, const char *hidden, const char *shards,
		const char *out)
{
	struct tu_proc p;

	RUN(&p, "gen", "--op", (char *)op, "--dtype", (char *)dt, "--rows", (char *)rows, "--hidden", (char *)hidden,
	    "--shards", (char *)shards, "--out", (char *)out);
	ck_assert_msg(p.status == 0, "gen: %s", p.err);
	tu_proc_free(&p);
}

void run_rmtree_free(char *dir, ...)
{
	va_list ap;
	char *path;

	tu_rmtree(dir);
	va_start(ap, dir);
	while ((path = va_arg(ap, char *)))
		free(path);
	va_end(ap);
	free(dir);
}

char *run_gen_input(char **dir, const char *op, const char *dt, const char *rows, const char *hidden)
{
	char *path;

	*dir = tu_tmpdir();
	path = run_path_in(*dir, "in.safetensors");
	run_gen(op, dt, rows, hidden, "1", path);
	return path;
}

int run_dir_count(const char *dir, char *names, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (names && len)
		names[0] = '\0';
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		n++;
		if (names && strlen(names) + strlen(e->d_name) + 2 < len) {
			strcat(names, e->d_name);
			strcat(names, " ");
		}
	}
	closedir(d);
	return n;
}

void *run_read_tensor(const char *path, const char *name, const struct wsn_st_entry **ent,
			 struct wsn_st_file **keep)
{
	struct wsn_st_file *f;
	const struct wsn_st_entry *e;
	void *buf;

	ck_assert_msg(wsn_st_open(path, NULL, &f) == 0, "%s: %s", path, wsn_last_error());
	e = wsn_st_find(f, name);
	ck_assert_msg(e != NULL, "%s: no tensor '%s'", path, name);
	buf = tu_xmalloc(e->nbytes);
	ck_assert_int_eq(wsn_st_read(f, name, buf, e->nbytes), 0);
	*ent = e;
	*keep = f;
	return buf;
}

pid_t run_spawn_with(char *const argv[], const char *out, const char *err, int (*prepare)(void *), void *arg)
{
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		int o = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), e = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int n = open("/dev/null", O_RDONLY);
		dup2(n, 0);
		dup2(o, 1);
		dup2(e, 2);
		if (prepare && prepare(arg) != 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

/* run_spawn_with's prepare for run_spawn_env: add the "NAME=value" strings of env. */
static int add_env(void *arg)
{
	char *const *env = arg;

	for (int i = 0; env && env[i]; i++)
		putenv(env[i]);
	return 0;
}

pid_t run_spawn_env(char *const argv[], const char *out, const char *err, char *const env[])
{
	return run_spawn_with(argv, out, err, add_env, (void *)env);
}

pid_t run_spawn(char *const argv[], const char *out, const char *err)
{
	return run_spawn_env(argv, out, err, NULL);
}

void run_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int run_reap(pid_t pid)
{
	int st = 0;

	for (int i = 0; i < 3000; i++) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		run_sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	ck_abort_msg("wsnorm did not stop within 30 s of the signal");
	return -1;
}

int run_has_open_marked(pid_t pid, const char *dir, const char *mark)
{
	char fddir[64], link[4200], target[4200];
	struct dirent *e;
	DIR *d;
	int found = 0;

	snprintf(fddir, sizeof(fddir), "/proc/%d/fd", (int)pid);
	if (!(d = opendir(fddir)))
		return 0;
	while (!found && (e = readdir(d))) {
		ssize_t n;

		snprintf(link, sizeof(link), "%s/%s", fddir, e->d_name);
		if ((n = readlink(link, target, sizeof(target) - 1)) <= 0)
			continue;
		target[n] = '\0';
		found = !strncmp(target, dir, strlen(dir)) && target[strlen(dir)] == '/' && (!mark || strstr(target, mark));
	}
	closedir(d);
	return found;
}

int run_has_open_in(pid_t pid, const char *dir)
{
	return run_has_open_marked(pid, dir, NULL);
}
