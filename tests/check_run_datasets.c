/* SPDX-License-Identifier: MIT */
/* tests/check_run_datasets.c: wsnorm run over datasets: shards, dtypes, corrupt or replaced shards, raw and block-device inputs. */
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
 * Write the safetensors file src again as dst with tensor name of dtype and shape (JSON text): a name
 * src does not have gets nbytes bytes after the data, one it has keeps its bytes under the new dtype.
 */
static void put_tensor(const char *src, const char *dst, const char *name, const char *dtype, const char *shape,
		       size_t nbytes)
{
	size_t len, hlen = 0, data, tlen, padded;
	char *file = tu_slurp(src, &len), *text, *out;
	json_t *hdr, *e, *sh;
	json_error_t je;

	for (int i = 7; i >= 0; i--)
		hlen = hlen << 8 | (unsigned char)file[i];
	ck_assert_uint_le(8 + hlen, len);
	data = len - 8 - hlen;
	ck_assert_msg((hdr = json_loadb(file + 8, hlen, 0, &je)) != NULL, "%s: %s", src, je.text);
	ck_assert_msg((sh = json_loads(shape, JSON_DECODE_ANY, &je)) != NULL, "shape %s: %s", shape, je.text);
	if ((e = json_object_get(hdr, name))) {
		ck_assert_int_eq(json_object_set_new(e, "dtype", json_string(dtype)), 0);
		ck_assert_int_eq(json_object_set_new(e, "shape", sh), 0);
		nbytes = 0;
	} else {
		e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", dtype, "shape", sh, "data_offsets", (json_int_t)data,
			      (json_int_t)(data + nbytes));
		ck_assert_int_eq(json_object_set_new(hdr, name, e), 0);
	}
	ck_assert_ptr_nonnull(text = json_dumps(hdr, JSON_COMPACT));
	tlen = strlen(text);
	padded = (tlen + 7) / 8 * 8;
	out = tu_xmalloc(8 + padded + data + nbytes);
	for (int i = 0; i < 8; i++)
		out[i] = (char)((uint64_t)padded >> (8 * i));
	memset(out + 8, ' ', padded);
	memcpy(out + 8, text, tlen);
	memcpy(out + 8 + padded, file + 8 + hlen, data);
	memset(out + 8 + padded + data, 0x5a, nbytes);
	tu_write_file(dst, out, 8 + padded + data + nbytes);
	free(out);
	free(text);
	json_decref(hdr);
	free(file);
}

/*
 * A multi-shard dataset on tmpfs and on disk, O_DIRECT auto/on/off, several queue depths and batch
 * sizes (shards split into batches): every configuration passes, counts every row once, reads
 * straight into the ring, and writes outputs identical to those of the whole-shard run.
 */
START_TEST(test_datasets)
{
	const char *bases[2] = { run_tmpfs_dir(), run_disk_dir() };
	static const struct {
		const char *direct, *qd, *bs, *batch;
	} cfgs[] = {
		{ "auto", "1", "4K", "37" }, { "on", "4", "64K", "100" }, { "off", "64", "1M", "1000" },
		{ "auto", "16", "8K", "1" },
	};

	for (int b = 0; b < 2; b++) {
		char *dir = run_dir_under(bases[b]), *ds = run_path_in(dir, "ds"), *ref = run_path_in(dir, "ref");
		struct tu_proc p;
		json_t *j;

		run_gen("layernorm-bwd", "bf16", "300", "96", "3", ds);
		RUN(&p, "run", "--input", ds, "--device", "cpu", "--output", ref, "--copy-size", "64K", "--json");
		ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
		j = run_parse(&p);
		ck_assert_int_eq(run_jint(j, "rows"), 300);
		ck_assert_int_eq(run_jint(j, "batches"), 3);
		json_decref(j);
		tu_proc_free(&p);
		for (size_t c = 0; c < sizeof(cfgs) / sizeof(cfgs[0]); c++) {
			char *out = run_path_in(dir, "out");
			int64_t br = atoi(cfgs[c].batch), want_batches = 3 * ((100 + br - 1) / br);

			RUN(&p, "run", "--input", ds, "--device", "cpu", "--direct", (char *)cfgs[c].direct, "--qd",
			    (char *)cfgs[c].qd, "--bs", (char *)cfgs[c].bs, "--batch-rows", (char *)cfgs[c].batch, "--ring",
			    "3", "--output", out, "--copy-size", "64K", "--json");
			if (p.status == 3 && !strcmp(cfgs[c].direct, "on") && strstr(p.err, "ENOTSUP")) {
				printf("pipeline: O_DIRECT refused under %s: skipped\n", dir);
				tu_proc_free(&p);
				free(out);
				continue;
			}
			ck_assert_msg(p.status == 0, "%s direct=%s qd=%s: exit %d: %s", dir, cfgs[c].direct, cfgs[c].qd,
				      p.status, p.err);
			j = run_parse(&p);
			ck_assert_str_eq(run_jstr(j, "result"), "pass");
			ck_assert_int_eq(run_jint(j, "rows"), 300);
			ck_assert_int_eq(run_jint(j, "batches"), want_batches);
			ck_assert_int_eq(run_jint(j, "verify.batches"), want_batches);
			ck_assert_int_eq(run_jint(j, "verify.mismatched_batches"), 0);
			ck_assert_int_eq(run_jint(j, "stages.read.rows"), 300);
			/* with O_DIRECT only whole aligned blocks go straight in: batches of one row have none */
			if (br >= 37 || !strcmp(cfgs[c].direct, "off"))
				ck_assert_msg(run_jint(j, "io.straight_bytes") > 0, "nothing read straight into the ring");
			if (!strcmp(cfgs[c].direct, "off"))
				ck_assert_int_eq(run_jint(j, "io.direct_files"), 0);
			if (!strcmp(cfgs[c].direct, "on"))
				ck_assert_int_eq(run_jint(j, "io.buffered_files"), 0);
			json_decref(j);
			tu_proc_free(&p);
			/* same dx as the whole-shard run; dweight summed over batches, so only close */
			for (int s = 0; s < 3; s++) {
				char name[64], *a, *bpath;
				const struct wsn_st_entry *ea, *eb;
				struct wsn_st_file *fa, *fb;
				void *ta, *tb;
				struct wsn_tensor t1, t2;
				struct wsn_compare cmp;

				snprintf(name, sizeof(name), "shard-%05d-of-00003.safetensors", s);
				a = run_path_in(ref, name);
				bpath = run_path_in(out, name);
				ta = run_read_tensor(a, "dx", &ea, &fa);
				tb = run_read_tensor(bpath, "dx", &eb, &fb);
				ck_assert_uint_eq(ea->nbytes, eb->nbytes);
				ck_assert_msg(!memcmp(ta, tb, ea->nbytes), "%s: dx differs from the whole-shard run", bpath);
				free(ta);
				free(tb);
				wsn_st_close(fa);
				wsn_st_close(fb);
				ta = run_read_tensor(a, "dweight", &ea, &fa);
				tb = run_read_tensor(bpath, "dweight", &eb, &fb);
				wsn_tensor_1d(&t1, tb, WSN_BF16, WSN_MEM_HOST, 96);
				wsn_tensor_1d(&t2, ta, WSN_BF16, WSN_MEM_HOST, 96);
				ck_assert_int_eq(wsn_tensor_compare(&t1, &t2, &cmp), 0);
				ck_assert_msg(cmp.rel_l2 < 2e-2 && !cmp.nonfinite, "%s: dweight rel %g", bpath, cmp.rel_l2);
				free(ta);
				free(tb);
				wsn_st_close(fa);
				wsn_st_close(fb);
				free(a);
				free(bpath);
			}
			ck_assert_int_eq(run_dir_count(out, NULL, 0), 3);
			tu_rmtree(out);
			free(out);
		}
		tu_rmtree(dir);
		free(ref);
		free(ds);
		free(dir);
	}
}
END_TEST

/*
 * A shard whose header is corrupt, in the middle of the dataset: the pipeline reaches it after
 * the first shards, stops with an error naming it (exit 3), and leaves no output at all.
 */
START_TEST(test_corrupt_shard)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *out = run_path_in(dir, "out");
	char *bad = run_path_in(ds, "shard-00002-of-00004.safetensors"), names[512];
	struct tu_proc p;
	json_t *j;
	int fd;

	run_gen("layernorm-fwd", "bf16", "400", "64", "4", ds);
	fd = open(bad, O_WRONLY);
	ck_assert(fd >= 0);
	ck_assert_int_eq(pwrite(fd, "{\"x\": garbage", 13, 8), 13);
	close(fd);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--output", out, "--json", "--copy-size", "64K",
	    "--batch-rows", "50", "--ring", "2");
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, bad) != NULL, "the error does not name the shard: %s", p.err);
	ck_assert_msg(strstr(p.err, "EFORMAT") != NULL, "%s", p.err);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "error");
	ck_assert_msg(run_jint(j, "rows") <= 200, "the run went past the bad shard: %lld rows", (long long)run_jint(j, "rows"));
	ck_assert(strstr(run_jstr(j, "error"), bad) != NULL);
	ck_assert(json_is_false(json_object_get(json_object_get(j, "output"), "written")));
	json_decref(j);
	ck_assert_msg(run_dir_count(out, names, sizeof(names)) <= 0, "output left behind: %s", names);
	ck_assert_int_eq(run_dir_count(dir, names, sizeof(names)), 1); /* ds only: no temporary file */
	tu_proc_free(&p);
	run_rmtree_free(dir, bad, ds, out, NULL);
}
END_TEST

/*
 * A checkpoint dump holds tensors of dtypes wsnorm does not compute with (a step counter, a mask): run
 * names them in the warning every tensor it does not read gets, and goes on; a tensor it reads of such a
 * dtype is an error naming the file, the tensor and the dtype (exit 3).
 */
START_TEST(test_other_dtypes)
{
	static const struct {
		const char *name, *dtype, *shape; /* as many bytes as the f32 tensor's */
	} retyped[] = {
		{ "x", "I64", "[48, 16]" }, { "dy", "F64", "[48, 16]" },      { "weight", "I32", "[32]" },
		{ "bias", "U8", "[128]" },  { "mean", "F8_E4M3", "[192]" },   { "rstd", "BOOL", "[192]" },
	};
	char *dir = tu_tmpdir(), *in = run_path_in(dir, "in.safetensors"), *step = run_path_in(dir, "step.safetensors");
	char *extra = run_path_in(dir, "extra.safetensors"), *bad = run_path_in(dir, "bad.safetensors"), want[128];
	char *rms = run_path_in(dir, "rms.safetensors");
	struct tu_proc p;
	json_t *j;

	run_gen("layernorm-bwd", "f32", "48", "32", "1", in);
	put_tensor(in, step, "step", "I64", "[]", 8);
	put_tensor(step, extra, "mask", "BOOL", "[48]", 48);
	RUN(&p, "run", "--input", extra, "--device", "cpu", "--json", "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "tensors 'step', 'mask' are not ones that run reads"), "%s", p.err);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "pass");
	ck_assert_int_eq(run_jint(j, "rows"), 48);
	json_decref(j);
	tu_proc_free(&p);
	for (size_t i = 0; i < sizeof(retyped) / sizeof(retyped[0]); i++) {
		put_tensor(in, bad, retyped[i].name, retyped[i].dtype, retyped[i].shape, 0);
		RUN(&p, "run", "--input", bad, "--device", "cpu", "--copy-size", "64K");
		ck_assert_msg(p.status == 3, "%s: exit %d: %s", retyped[i].name, p.status, p.err);
		snprintf(want, sizeof(want), "tensor '%s' is %s; wsnorm computes with F32, F16 and BF16", retyped[i].name,
			 retyped[i].dtype);
		ck_assert_msg(strstr(p.err, want) && strstr(p.err, bad), "%s", p.err);
		tu_proc_free(&p);
	}
	/* RMSNorm reads no bias: one of any dtype in its file is ignored */
	run_gen("rmsnorm-fwd", "f32", "48", "32", "1", rms);
	put_tensor(rms, bad, "bias", "I64", "[32]", 256);
	RUN(&p, "run", "--input", bad, "--device", "cpu", "--json", "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	j = run_parse(&p);
	ck_assert_str_eq(run_jstr(j, "result"), "pass");
	json_decref(j);
	tu_proc_free(&p);
	run_rmtree_free(dir, in, step, extra, bad, rms, NULL);
}
END_TEST

/*
 * An input replaced while a long run reads it (another file renamed over it, as gen writes, and
 * then one rewritten in place): every batch opens the file by name again, so the run must notice
 * and stop with a runtime error that names the file, leaving no output, rather than read the new
 * file at the old header's offsets and pass.
 */
START_TEST(test_input_replaced)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "in.safetensors"), *other = run_path_in(dir, "other.safetensors");
	char *out = run_path_in(dir, "out.safetensors"), *so = run_path_in(dir, "stdout"), *se = run_path_in(dir, "stderr"), names[512];
	char *argv[] = { (char *)tu_wsnorm_bin(), "run", "--input", ds, "--device", "cpu", "--output", out,
			 "--duration", "60s", "--batch-rows", "16", "--kernel-loops", "2000", "--ring", "2",
			 "--copy-size", "64K", "--threads", "1", NULL };

	for (int how = 0; how < 2; how++) {
		pid_t pid;
		int status;
		char *err;

		run_gen("rmsnorm-fwd", "f32", "256", "256", "1", ds);
		run_gen("layernorm-bwd", "f32", "256", "128", "1", other);
		pid = run_spawn(argv, so, se);
		run_sleep_ms(700); /* the run is under way: its first batches are read */
		if (how == 0) {
			ck_assert_int_eq(rename(other, ds), 0);
		} else { /* the same inode, its bytes rewritten */
			int fd = open(ds, O_WRONLY);
			ck_assert_int_ge(fd, 0);
			ck_assert_int_eq(pwrite(fd, "\0\0\0\0", 4, 4096), 4);
			close(fd);
			unlink(other);
		}
		status = run_reap(pid);
		err = tu_slurp(se, NULL);
		ck_assert_msg(status == 3, "%s: exit %d after the input changed: %s", how ? "rewritten" : "replaced", status,
			      err);
		ck_assert_msg(strstr(err, "changed during the run") && strstr(err, ds), "%s", err);
		ck_assert_msg(strstr(err, how ? "it was written to" : "another file now has its name"), "%s", err);
		ck_assert_msg(run_dir_count(dir, names, sizeof(names)) == 3, "files left: %s", names); /* in, stdout, stderr */
		free(err);
		unlink(ds);
	}
	run_rmtree_free(dir, ds, other, out, so, se, NULL);
}
END_TEST

/* Comma-separated lists, raw files with --shape, --read-only and --standalone. */
START_TEST(test_lists_raw_modes)
{
	char *dir = tu_tmpdir(), *a = run_path_in(dir, "a.safetensors"), *b = run_path_in(dir, "b.safetensors");
	char *r1 = run_path_in(dir, "r1.bin"), *r2 = run_path_in(dir, "r2.bin"), list[8300], *out = run_path_in(dir, "out");
	float *x = tu_xmalloc(30 * 20 * sizeof(float));
	struct wsn_tensor t;
	struct tu_proc p;
	json_t *j;

	run_gen("rmsnorm-bwd", "bf16", "90", "40", "1", a);
	run_gen("rmsnorm-bwd", "bf16", "70", "40", "1", b);
	snprintf(list, sizeof(list), "%s,%s", a, b);
	RUN(&p, "run", "--input", list, "--device", "cpu", "--json", "--copy-size", "64K", "--standalone");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 160);
	ck_assert_int_eq(run_jint(j, "shards"), 2);
	ck_assert(run_jreal(j, "stages.read.alone_rows_per_s") > 0);
	ck_assert(run_jreal(j, "stages.compute.alone_rows_per_s") > 0);
	ck_assert(run_jreal(j, "end_to_end.ratio") > 0);
	json_decref(j);
	tu_proc_free(&p);
	/* a ring of 64 batches of 2 rows, 3 reads each: more than the reader queues at once */
	RUN(&p, "run", "--input", a, "--device", "cpu", "--json", "--copy-size", "64K", "--standalone", "--ring", "64",
	    "--batch-rows", "2");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 90);
	ck_assert(run_jreal(j, "stages.read.alone_rows_per_s") > 0);
	json_decref(j);
	tu_proc_free(&p);
	RUN(&p, "run", "--input", list, "--device", "cpu", "--read-only", "--iterations", "5", "--json");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 800);
	ck_assert_int_eq(run_jint(j, "kernel_rows"), 0);
	ck_assert(json_is_false(json_object_get(json_object_get(json_object_get(j, "stages"), "compute"), "active")));
	ck_assert(run_jint(j, "stages.read.bytes") > 5 * 160 * 40 * 2 * 2);
	json_decref(j);
	tu_proc_free(&p);
	/* raw x only: a list of two 30 x 20 files, batches of 7 rows */
	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 30, 20);
	wsn_tensor_fill_random(&t, tu_case_seed("pl_raw"), 0.5f, 2.0f);
	tu_write_file(r1, x, 30 * 20 * sizeof(float));
	tu_write_file(r2, x, 30 * 20 * sizeof(float));
	snprintf(list, sizeof(list), "%s,%s", r1, r2);
	RUN(&p, "run", "--input", list, "--shape", "30x20", "--dtype", "f32", "--op", "layernorm-fwd", "--device", "cpu",
	    "--batch-rows", "7", "--output", out, "--json", "--copy-size", "64K");
	ck_assert_msg(p.status == 0, "%s", p.err);
	j = run_parse(&p);
	ck_assert_int_eq(run_jint(j, "rows"), 60);
	ck_assert_int_eq(run_jint(j, "batches"), 10);
	json_decref(j);
	tu_proc_free(&p);
	ck_assert_int_eq(run_dir_count(out, NULL, 0), 2);
	run_rmtree_free(dir, a, b, r1, r2, out, x, NULL);
}
END_TEST

/*
 * A loop device over backing (root and /dev/loop-control needed): its path in dev and an open
 * descriptor that loop_detach releases, or -1 with the reason in why.
 */
static int loop_attach(const char *backing, char *dev, size_t n, char *why, size_t wn)
{
	for (int tries = 0; tries < 8; tries++) {
		int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), num, lfd, bfd;

		if (ctl < 0 || (num = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			snprintf(why, wn, "/dev/loop-control: %s", strerror(errno));
			if (ctl >= 0)
				close(ctl);
			return -1;
		}
		close(ctl);
		snprintf(dev, n, "/dev/loop%d", num);
		if ((lfd = open(dev, O_RDWR | O_CLOEXEC)) < 0) {
			snprintf(why, wn, "%s: %s", dev, strerror(errno));
			return -1;
		}
		ck_assert_int_ge(bfd = open(backing, O_RDWR | O_CLOEXEC), 0);
		if (ioctl(lfd, LOOP_SET_FD, bfd) == 0) {
			struct loop_info64 li;

			close(bfd);
			/* detached when the last descriptor closes, so a failed assertion leaves none behind */
			memset(&li, 0, sizeof(li));
			li.lo_flags = LO_FLAGS_AUTOCLEAR;
			if (ioctl(lfd, LOOP_SET_STATUS64, &li) < 0) {
				snprintf(why, wn, "%s: LOOP_SET_STATUS64: %s", dev, strerror(errno));
				ioctl(lfd, LOOP_CLR_FD, 0);
				close(lfd);
				return -1;
			}
			return lfd;
		}
		snprintf(why, wn, "%s: LOOP_SET_FD: %s", dev, strerror(errno));
		close(bfd);
		close(lfd);
		if (errno != EBUSY) /* EBUSY: another process took that device first */
			return -1;
	}
	return -1;
}

static void loop_detach(int lfd)
{
	close(lfd); /* autoclear detaches it */
}

/* A raw input may be a block device holding the tensor in its first bytes; one too small for the shape
 * is an error naming the device and both sizes. Needs a loop device: skipped (and says so) without one. */
START_TEST(test_raw_block_device)
{
	char *dir = tu_tmpdir(), *file = run_path_in(dir, "x.bin"), *big = run_path_in(dir, "big.img");
	char *small = run_path_in(dir, "small.img"), *o1 = run_path_in(dir, "dev.safetensors");
	char *o2 = run_path_in(dir, "file.safetensors"), dev[64], sdev[64], why[256];
	const size_t xb = 40 * 33 * sizeof(float), bb = 64 * 1024;
	unsigned char *img = tu_xmalloc(bb);
	float *x = tu_xmalloc(xb);
	struct wsn_tensor t;
	struct tu_proc p;
	size_t n1, n2;
	char *a, *b;
	int lfd, sfd;

	wsn_tensor_2d(&t, x, WSN_F32, WSN_MEM_HOST, 40, 33);
	wsn_tensor_fill_random(&t, tu_case_seed("pl_blk"), 0.5f, 2.0f);
	tu_write_file(file, x, xb);
	memset(img, 0x7f, bb); /* bytes past the tensor: NaN-like garbage that must not be read */
	memcpy(img, x, xb);
	tu_write_file(big, img, bb);
	tu_write_file(small, img, 4096); /* 4096 < 5280 bytes */
	if ((lfd = loop_attach(big, dev, sizeof(dev), why, sizeof(why))) < 0) {
		fprintf(stderr, "test_raw_block_device: skipped, no loop device (%s)\n", why);
		goto out;
	}
	EXPECT_RUN(0, "PASS", NULL, "run", "--input", dev, "--shape", "40x33", "--dtype", "f32", "--op", "rmsnorm-fwd",
		   "--device", "cpu", "--batch-rows", "7", "--output", o1);
	EXPECT_RUN(0, NULL, NULL, "run", "--input", file, "--shape", "40x33", "--dtype", "f32", "--op", "rmsnorm-fwd",
		   "--device", "cpu", "--batch-rows", "7", "--output", o2);
	a = tu_slurp(o1, &n1);
	b = tu_slurp(o2, &n2);
	ck_assert_uint_eq(n1, n2);
	ck_assert_msg(memcmp(a, b, n1) == 0, "the block device's output differs from the file's");
	free(a);
	free(b);
	if ((sfd = loop_attach(small, sdev, sizeof(sdev), why, sizeof(why))) >= 0) {
		RUN(&p, "run", "--input", sdev, "--shape", "40x33", "--dtype", "f32", "--op", "rmsnorm-fwd", "--device",
		    "cpu");
		ck_assert_int_eq(p.status, 3);
		ck_assert_msg(strstr(p.err, sdev) && strstr(p.err, "block device has 4096 bytes") &&
			      strstr(p.err, "needs 5280"), "%s", p.err);
		tu_proc_free(&p);
		loop_detach(sfd);
	}
	loop_detach(lfd);
out:
	run_rmtree_free(dir, file, big, small, o1, o2, img, x, NULL);
}
END_TEST

/* A link to shard in set directory ds under name makes run fail (exit 3) with want in its message;
 * the link is removed again. */
static void extra_shard_fails(char *ds, const char *shard, const char *name, const char *want)
{
	char *extra = run_path_in(ds, name);
	struct tu_proc p;

	ck_assert_int_eq(link(shard, extra), 0);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--copy-size", "64K");
	ck_assert_msg(p.status == 3, "%s: exit %d: %s", name, p.status, p.err);
	ck_assert_msg(strstr(p.err, want), "%s: %s", name, p.err);
	tu_proc_free(&p);
	ck_assert_int_eq(unlink(extra), 0);
	free(extra);
}

/* A directory whose shard names say how many there are: a missing or misnumbered shard is an error,
 * sets numbered from 0 (wsnorm gen) or from 1 both run. */
START_TEST(test_shard_set)
{
	char *dir = tu_tmpdir(), *ds = run_path_in(dir, "ds"), *held = run_path_in(dir, "held.safetensors");
	char *s1 = run_path_in(ds, "shard-00001-of-00003.safetensors");
	static const char *const one_based[] = { "part-1-of-3.safetensors", "part-2-of-3.safetensors",
						 "part-3-of-3.safetensors" };
	static const char *const zero_based[] = { "shard-00000-of-00003.safetensors", "shard-00001-of-00003.safetensors",
						  "shard-00002-of-00003.safetensors" };
	struct tu_proc p;

	run_gen("rmsnorm-fwd", "bf16", "9", "8", "3", ds);
	ck_assert_int_eq(rename(s1, held), 0);
	RUN(&p, "run", "--input", ds, "--device", "cpu", "--copy-size", "64K");
	ck_assert_msg(p.status == 3, "exit %d: %s", p.status, p.err);
	ck_assert_msg(strstr(p.err, "shard-00001-of-00003.safetensors of 3 is missing"), "%s", p.err);
	ck_assert_str_eq(p.out, "");
	tu_proc_free(&p);
	ck_assert_int_eq(rename(held, s1), 0);
	/* a shard outside the count; one number twice, padded two ways (named as such, not as outside the
	 * range); a count too large for 64 bits (still a set's name, and an error saying so) */
	extra_shard_fails(ds, s1, "shard-00007-of-00003.safetensors", "numbered outside 0..2");
	extra_shard_fails(ds, s1, "shard-0001-of-00003.safetensors",
			  "two shards named shard-*-of-00003.safetensors have the number 1");
	extra_shard_fails(ds, s1, "big-00000-of-99999999999999999999.safetensors",
			  "shards named big-*-of-99999999999999999999.safetensors say the set has more shards than wsnorm "
			  "can count (the count overflows)");
	for (int i = 0; i < 3; i++) { /* renumber from 1 */
		char *from = run_path_in(ds, zero_based[i]), *to = run_path_in(ds, one_based[i]);
		ck_assert_int_eq(rename(from, to), 0);
		free(from);
		free(to);
	}
	EXPECT_RUN(0, "9 rows x 8, 3 shards", NULL, "run", "--input", ds, "--device", "cpu", "--copy-size", "64K");
	run_rmtree_free(dir, ds, held, s1, NULL);
}
END_TEST

Suite *suite_run_datasets(void)
{
	return TU_SUITE("pipeline", { "pipeline", 300, NULL, NULL, TU_TESTS({ test_datasets, 1 }, { test_corrupt_shard, 1 },
				{ test_other_dtypes, 1 }, { test_input_replaced, 1 }, { test_lists_raw_modes, 1 },
				{ test_raw_block_device, 1 }, { test_shard_set, 1 }) });
}
