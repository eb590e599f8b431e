/* SPDX-License-Identifier: MIT */
/* tests/run_util.h: what the check_run_*.c tests share: running wsnorm, its JSON, datasets and child processes. */
#ifndef WSN_TESTS_RUN_UTIL_H
#define WSN_TESTS_RUN_UTIL_H

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

char *run_path_in(const char *dir, const char *name);

/* A fresh directory under base (NULL: $TMPDIR or /tmp). */
char *run_dir_under(const char *base);

/* The tmpfs to test on, or NULL (and a note) when there is none. */
const char *run_tmpfs_dir(void);

/* The build directory (the tests' working directory): a disk file system, usually. */
const char *run_disk_dir(void);

json_t *run_parse(const struct tu_proc *p);

json_int_t run_jint(json_t *o, const char *path);

double run_jreal(json_t *o, const char *path);

const char *run_jstr(json_t *o, const char *key);

/* Write a dataset with `wsnorm gen`. */
void run_gen(const char *op, const char *dt, const char *rows, const char *hidden, const char *shards,
		const char *out);

/* A fresh directory (its path in *dir) holding in.safetensors, one file written by `wsnorm gen`; the
 * file's path. Both are malloc'd: run_rmtree_free(*dir, path, NULL) removes and frees them. */
char *run_gen_input(char **dir, const char *op, const char *dt, const char *rows, const char *hidden);

/* Remove the test directory dir and all in it, then free dir and each path listed after it (NULL ends
 * the list, so a path that may be NULL is freed apart). */
void run_rmtree_free(char *dir, ...) __attribute__((sentinel));

/* Entries of a directory other than . and ..; -1 if it does not exist. */
int run_dir_count(const char *dir, char *names, size_t len);

/* Read a whole tensor of a safetensors file into malloc'd memory. */
void *run_read_tensor(const char *path, const char *name, const struct wsn_st_entry **ent,
			 struct wsn_st_file **keep);

/*
 * argv in the background, stdin from /dev/null, stdout and stderr to files; in the child prepare(arg)
 * runs just before the exec (NULL: nothing; non-zero: the child exits 126). Returns its pid.
 */
pid_t run_spawn_with(char *const argv[], const char *out, const char *err, int (*prepare)(void *), void *arg);

/* argv in the background, stdout and stderr to files; env (NULL: none): "NAME=value" strings added
 * to the child's environment only. */
pid_t run_spawn_env(char *const argv[], const char *out, const char *err, char *const env[]);

pid_t run_spawn(char *const argv[], const char *out, const char *err);

void run_sleep_ms(int ms);

/* Wait (up to 30 s) for the child to exit; its exit status. */
int run_reap(pid_t pid);

/*
 * Whether process pid has a file in directory dir open: named, or unnamed ("dir/#ino (deleted)"),
 * as a run's outputs are until it commits them.
 */
int run_has_open_in(pid_t pid, const char *dir);

/* Like run_has_open_in, for an open file whose /proc link also contains mark (NULL: any file). */
int run_has_open_marked(pid_t pid, const char *dir, const char *mark);

#endif /* WSN_TESTS_RUN_UTIL_H */
