/* SPDX-License-Identifier: MIT */
/* tests/check_run_limits.c: wsnorm run and its inputs at their limits: files changed behind its back, sizes,
 * time bounds, header memory. */
#include "testutil.h"

#include "core/hostmem.h" /* wsn__host_limit */

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "run_util.h"

/*
 * An input rewritten in place during a run, its size kept and its modification time set back to
 * what it was: the status-change time still differs, so the run stops with a runtime error that
 * names the file rather than mix the old header's offsets with the new bytes.
 */
START_TEST(test_input_rewritten_mtime_restored)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "in.safetensors"), *out = run_path_in(dir, "out.safetensors");
	char *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), *err;
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--duration", "60s", "--batch-rows", "16", "--kernel-loops", "2000", "--ring", "2",
			 "--copy-size", "64K", "--threads", "1", NULL };
	struct timespec times[2];
	struct stat before, after;
	pid_t pid;
	int fd, status;

	run_gen("rmsnorm-fwd", "f32", "256", "256", "1", ds);
	pid = run_spawn(argv, so, se);
	run_sleep_ms(700); /* the run is under way: its first batches are read */
	fd = open(ds, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &before), 0);
	ck_assert_int_eq(pwrite(fd, "\1\2\3\4", 4, 4096), 4);
	times[0] = before.st_atim;
	times[1] = before.st_mtim;
	ck_assert_int_eq(futimens(fd, times), 0);
	ck_assert_int_eq(fstat(fd, &after), 0);
	close(fd);
	ck_assert(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
	ck_assert(after.st_size == before.st_size);
	status = run_reap(pid);
	err = tu_slurp(se, NULL);
	ck_assert_msg(status == 3, "exit %d after the input was rewritten with its mtime restored: %s", status, err);
	ck_assert_msg(strstr(err, "changed during the run") && strstr(err, ds), "%s", err);
	ck_assert_int_eq(access(out, F_OK), -1);
	free(err);
	run_rmtree_free(dir, ds, out, so, se, NULL);
}
END_TEST

/*
 * --read-only does not plan, so nothing but the ring's own sizing stands between a huge
 * --batch-rows and a region size that wraps: 2^40 rows of a 16 MiB row is 2^64 bytes. The second
 * input is a FIFO, whose size says nothing of its rows, so the batch is not bounded by the files.
 * The run must refuse with a runtime error that names the option, the tensor and the overflow,
 * not size the region from the wrapped product.
 */
START_TEST(test_read_only_batch_overflow)
{
	char *dir = tu_tmpdir(), *x = run_path_in(dir, "x.safetensors"), *fifo = run_path_in(dir, "fifo");
	char list[4200];
	struct tu_proc p;

	run_gen("rmsnorm-fwd", "f32", "1", "4194304", "1", x);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	snprintf(list, sizeof(list), "%s,%s", x, fifo);
	RUN(&p, "run", "--device", "cpu", "--read-only", "--op", "rmsnorm-fwd", "--input", list, "--batch-rows",
	    "1099511627776");
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "--batch-rows 1099511627776") && strstr(p.err, "tensor 'x'") &&
		      strstr(p.err, "does not fit in the address space: EOVERFLOW"), "%s", p.err);
	tu_proc_free(&p);
	run_rmtree_free(dir, x, fifo, NULL);
}
END_TEST

/*
 * A --batch-rows far beyond every file's rows: no batch spans two files, so the ring is sized for
 * what the files can fill, not for --batch-rows, and the run passes where it was refused for lack of
 * memory. The same with the two files of the overflow case above: 1 row each.
 */
START_TEST(test_batch_rows_beyond_files)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *x = run_path_in(dir, "x.safetensors"), list[4200];
	struct tu_proc p;
	json_t *j;

	run_gen("rmsnorm-fwd", "f32", "96", "256", "3", ds);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--json", "--copy-size", "64K", "--batch-rows", "1G");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "pass");
	ck_assert_int_eq(run_jint(j, "rows"), 96);
	ck_assert_int_eq(run_jint(j, "shards"), 3);
	json_decref(j);
	tu_proc_free(&p);
	run_gen("rmsnorm-fwd", "f32", "1", "4194304", "1", x);
	snprintf(list, sizeof(list), "%s,%s", x, x);
	RUN(&p, "run", "--device", "cpu", "--read-only", "--op", "rmsnorm-fwd", "--input", list, "--batch-rows",
	    "1099511627776", "--json");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 2);
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, ds, x, NULL);
}
END_TEST

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A batch of 64 rows of 1024 f32 and the most kernel loops there are: a minute or more a batch. */
#define LONG_BATCH_ARGS "--batch-rows", "64", "--kernel-loops", "1000000", "--threads", "1", "--copy-size", "64K"

/*
 * --duration bounds the run even when one batch's kernel loops would take far longer: the loops
 * stop once the duration is over (the first always runs, so the batch is still verified) and the
 * report is complete, not interrupted, counting only the launches that ran.
 */
START_TEST(test_duration_cuts_kernel_loops)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds");
	struct tu_proc p;
	double t0, took;
	json_t *j;

	run_gen("rmsnorm-fwd", "f32", "64", "1024", "1", ds);
	t0 = now_s();
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--json", "--duration", "1s", LONG_BATCH_ARGS);
	took = now_s() - t0;
	ck_assert_msg(took < 8, "--duration 1s ran %.1f s", took);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	ck_assert(json_is_false(json_object_get(j, "interrupted")));
	ck_assert_str_eq(run_jstr(j, "result"), "pass");
	ck_assert_int_ge(run_jint(j, "verify.batches"), 1);
	ck_assert_int_ge(run_jint(j, "rows"), 64);
	ck_assert(run_jint(j, "kernel_rows") >= 64 && run_jint(j, "kernel_rows") < 64 * 1000000LL);
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, ds, NULL);
}
END_TEST

/*
 * SIGINT while the first batch's kernel loops run: the batch ends within a bounded time, and the
 * partial report follows, marked interrupted and unverified, with exit status 0 (nothing failed).
 */
START_TEST(test_sigint_mid_batch)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *so = run_path_in(dir, "stdout");
	char *se = run_path_in(dir, "stderr"), *text, *err;
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--json", "--duration", "60s",
			 LONG_BATCH_ARGS, NULL };
	double t0, took;
	json_error_t je;
	pid_t pid;
	int status;
	json_t *j;

	run_gen("rmsnorm-fwd", "f32", "64", "1024", "1", ds);
	pid = run_spawn(argv, so, se);
	run_sleep_ms(1500); /* set up and into the first batch's loops */
	t0 = now_s();
	kill(pid, SIGINT);
	status = run_reap(pid);
	took = now_s() - t0;
	text = tu_slurp(so, NULL);
	err = tu_slurp(se, NULL);
	ck_assert_msg(took < 8, "the run ended %.1f s after SIGINT", took);
	ck_assert_msg(status == 0, "exit %d after SIGINT: %s", status, err);
	ck_assert_msg(strstr(err, "SIGINT") != NULL, "%s", err);
	j = json_loads(text, 0, &je);
	ck_assert_msg(j != NULL, "partial report is not JSON: %s\n%s", je.text, text);
	ck_assert(json_is_true(json_object_get(j, "interrupted")));
	ck_assert_str_eq(run_jstr(j, "result"), "unverified");
	ck_assert_int_eq(run_jint(j, "verify.batches"), 0);
	json_decref(j);
	free(text);
	free(err);
	run_rmtree_free(dir, ds, so, se, NULL);
}
END_TEST

/* A valid safetensors file of n one-element F32 tensors (t0000000, t0000001, ...); its JSON header's length. */
static size_t write_many_tensors(const char *path, int n)
{
	size_t cap = (size_t)n * 80 + 16, len = 0;
	char *json = tu_xmalloc(cap);

	json[len++] = '{';
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(json + len, cap - len, "%s\"t%07d\":{\"dtype\":\"F32\",\"shape\":[1],"
					"\"data_offsets\":[%d,%d]}", i ? "," : "", i, 4 * i, 4 * i + 4);
	json[len++] = '}';
	json[len] = 0;
	cli_write_st(path, json, (size_t)n * 4);
	free(json);
	return len;
}

/*
 * Parsing a header takes memory many times its length (a JSON value per field) and an entry per
 * tensor: opening a file counts that against the memory available, as the reader's buffers are,
 * and refuses one whose header would not fit with an error naming the file and its header, rather
 * than parse it into an OOM kill. With the machine's memory the same file opens.
 */
START_TEST(test_header_parse_memory)
{
	char *dir = tu_tmpdir(), *path = run_path_in(dir, "many.safetensors");
	struct wsn_st_file *f = NULL;
	size_t hlen = write_many_tensors(path, 20000);
	struct wsn_reader_options ro;
	struct wsn_reader *rd;
	const char *msg;
	int err;

	wsn_reader_options_init(&ro); /* a reader of few small buffers: the limit is the header's */
	ro.queue_depth = 2;
	ro.block_size = 64 << 10;
	ck_assert_int_eq(wsn_reader_create(&ro, &rd), 0);
	wsn__host_limit(8u << 20);
	err = wsn_st_open(path, rd, &f);
	msg = wsn_last_error();
	ck_assert_msg(err == WSN_ENOMEM, "a %zu-byte header of 20000 tensors opened within 8 MiB: %d %s", hlen, err, msg);
	ck_assert(f == NULL);
	ck_assert_msg(strstr(msg, path) && strstr(msg, "JSON header"), "%s", msg);
	wsn__host_limit(0);
	ck_assert_int_eq(wsn_st_open(path, rd, &f), 0);
	ck_assert_int_eq(wsn_st_count(f), 20000);
	wsn_st_close(f);
	wsn_reader_destroy(rd);
	run_rmtree_free(dir, path, NULL);
}
END_TEST

Suite *suite_run_limits(void)
{
	return TU_SUITE("pipeline", { "limits", 300, NULL, NULL,
				      TU_TESTS({ test_input_rewritten_mtime_restored, 1 }, { test_read_only_batch_overflow, 1 },
					       { test_batch_rows_beyond_files, 1 }, { test_duration_cuts_kernel_loops, 1 },
					       { test_sigint_mid_batch, 1 }, { test_header_parse_memory, 1 }) });
}
