/* SPDX-License-Identifier: MIT */
/*
 * tests/check_cuda_fake.c: the CUDA backend's host side under the fake driver (tests/fake_cuda.c,
 * installed as libcuda.so.1 in a temporary directory): clean runs, every driver call of a run failing
 * in turn, sticky faults, an application's context kept current, no GPU and a missing entry point.
 * Kernels are not executed, so runs use --no-verify or are checked for exit status and messages.
 */
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RUN_TIMEOUT 60
#define FAKE_NAME "NVIDIA H100 80GB HBM3 (fake)"
#define FAKE_REGS 32 /* registers the fake reports for every kernel (REGS_PER_KERNEL in fake_cuda.h) */

/* A temporary directory holding libcuda.so.1 (a link to the fake) and the test's files. */
struct fake {
	char *dir;
	char *ld_path; /* "LD_LIBRARY_PATH=dir[:what the tests were given]" */
};

/* What the fake reports at exit. */
struct fake_report {
	long mem, host, modules, streams, events, retains, launches, bugs;
};

/* The last 2500 bytes of s: what a failure message shows of a process's output (Check refuses
 * messages of more than a few KiB). */
static const char *clip(const char *s)
{
	size_t n = strlen(s);

	return n > 2500 ? s + n - 2500 : s;
}

static const char *env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

/* Set up f; 0, or -1 (with a note saying why) when the fake driver was not built. */
static int fake_setup(struct fake *f)
{
	const char *want = env_or("WSNORM_FAKE_CUDA_LIB", "tests/.libs/fake_cuda.so"), *ld = getenv("LD_LIBRARY_PATH");
	char *lib, *link;

	memset(f, 0, sizeof(*f));
	if (!(lib = realpath(want, NULL))) {
		printf("note: the fake CUDA driver %s is not there (a build without shared libraries?): skipped\n", want);
		return -1;
	}
	f->dir = tu_tmpdir();
	ck_assert(asprintf(&link, "%s/libcuda.so.1", f->dir) > 0);
	ck_assert_msg(symlink(lib, link) == 0, "symlink %s -> %s", link, lib);
	free(link);
	free(lib);
	ck_assert(asprintf(&f->ld_path, "LD_LIBRARY_PATH=%s%s%s", f->dir, ld && *ld ? ":" : "", ld && *ld ? ld : "") > 0);
	return 0;
}

static void fake_teardown(struct fake *f)
{
	tu_rmtree(f->dir);
	free(f->dir);
	free(f->ld_path);
}

static char *fake_path(const struct fake *f, const char *name)
{
	char *p;

	ck_assert(asprintf(&p, "%s/%s", f->dir, name) > 0);
	return p;
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Run prog (the wsnorm binary when NULL) with args under the fake; env: more "NAME=value" entries or NULL. */
static void fake_exec(const struct fake *f, const char *prog, const char *const *env, const char *const *args,
		      struct tu_proc *p)
{
	char *argv[32] = { (char *)(prog ? prog : tu_wsnorm_bin()) }, *envv[8] = { f->ld_path };
	int n = 1, m = 1;

	for (int i = 0; args && args[i]; i++) {
		ck_assert_int_lt(n, 31);
		argv[n++] = (char *)args[i];
	}
	for (int i = 0; env && env[i]; i++) {
		ck_assert_int_lt(m, 7);
		envv[m++] = (char *)env[i];
	}
	tu_run_env(argv, envv, RUN_TIMEOUT, p);
}

#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* The fake's exit report in p's stderr; ck_assert'd there (the fake was loaded and the process ended by exit). */
static struct fake_report report_of(const struct tu_proc *p, const char *what)
{
	struct fake_report r;
	const char *s = strstr(p->err, "fake-cuda: at exit: ");

	ck_assert_msg(s != NULL, "%s: exit %d without the fake driver's report; stderr:\n%s", what, p->status, clip(p->err));
	ck_assert_msg(sscanf(s, "fake-cuda: at exit: %ld allocations, %ld pinned ranges, %ld modules, %ld streams, "
			     "%ld events, %ld context retains live; %ld launches, %ld bugs", &r.mem, &r.host, &r.modules,
			     &r.streams, &r.events, &r.retains, &r.launches, &r.bugs) == 8,
		      "%s: unreadable report: %s", what, clip(s));
	ck_assert_msg(!strstr(s + 1, "fake-cuda: at exit: "), "%s: the fake driver reported twice:\n%s", what, clip(p->err));
	return r;
}

/* p ended normally, released every driver resource it took, did nothing the fake calls a bug and
 * nothing a sanitizer reports (in a build with them). */
static struct fake_report assert_clean(const struct tu_proc *p, const char *what)
{
	struct fake_report r = report_of(p, what);

	ck_assert_msg(!strstr(p->err, "fake-cuda: BUG") && !r.bugs, "%s: misuse of the driver:\n%s", what, clip(p->err));
	ck_assert_msg(!strstr(p->err, "Sanitizer") && !strstr(p->err, "runtime error: "), "%s: a sanitizer's report:\n%s",
		      what, clip(p->err));
	ck_assert_msg(!r.mem && !r.host && !r.modules && !r.streams && !r.events && !r.retains,
		      "%s: left live: %ld allocations, %ld pinned ranges, %ld modules, %ld streams, %ld events, "
		      "%ld context retains\n%s", what, r.mem, r.host, r.modules, r.streams, r.events, r.retains, clip(p->err));
	return r;
}

/* wsnorm run of fwd on cuda:0 with env set: exit 3, an error holding want (and also, when not
 * NULL), and nothing left live or misused. */
static void expect_cuda_run_error(const struct fake *f, const char *env, const char *fwd, const char *what,
				  const char *want, const char *also)
{
	struct tu_proc p;

	fake_exec(f, NULL, ENV(env), ARGS("run", "--input", fwd, "--device", "cuda:0", "--no-verify"), &p);
	ck_assert_msg(p.status == 3 && strstr(p.err, want) && (!also || strstr(p.err, also)), "%s: exit %d: %s", what,
		      p.status, clip(p.err));
	assert_clean(&p, what);
	tu_proc_free(&p);
}

/* wsnorm gen of op (bf16, rows x hidden) into f's directory; returns the malloc'd path. */
static char *gen_input(const struct fake *f, const char *op, const char *rows, const char *hidden)
{
	char *path, name[64], seed[32];
	struct tu_proc p;

	snprintf(name, sizeof(name), "%s.safetensors", op);
	path = fake_path(f, name);
	snprintf(seed, sizeof(seed), "%llu", (unsigned long long)(tu_case_seed(op) & 0xffffffff));
	{
		char *argv[] = { (char *)tu_wsnorm_bin(), "gen", "--op", (char *)op, "--dtype", "bf16", "--rows", (char *)rows,
				 "--hidden", (char *)hidden, "--seed", seed, "--out", path, NULL };
		tu_run(argv, RUN_TIMEOUT, &p);
	}
	ck_assert_msg(p.status == 0, "gen %s: exit %d: %s", op, p.status, clip(p.err));
	tu_proc_free(&p);
	return path;
}

/* `devices` lists the fake device; runs on one and on two devices finish, releasing everything. */
START_TEST(test_fake_clean_runs)
{
	struct fake f;
	struct fake_report r;
	struct tu_proc p;
	char *fwd, *bwd, *out;
	const char *line;

	if (fake_setup(&f))
		return;
	fwd = gen_input(&f, "rmsnorm-fwd", "256", "1024");
	bwd = gen_input(&f, "layernorm-bwd", "256", "4096");
	out = fake_path(&f, "out.safetensors");

	fake_exec(&f, NULL, NULL, ARGS("devices"), &p);
	ck_assert_msg(p.status == 0, "devices: exit %d: %s", p.status, clip(p.err));
	line = strstr(p.out, "\n  cuda:0 ");
	ck_assert_msg(line && !strncmp(line + 10 + strspn(line + 10, " "), FAKE_NAME "\n", strlen(FAKE_NAME) + 1),
		      "devices does not list cuda:0 as the fake:\n%s", clip(p.out));
	ck_assert_msg(strstr(p.out, "cuda: available - CUDA 13.0 driver"), "%s", clip(p.out));
	assert_clean(&p, "devices");
	tu_proc_free(&p);

	/* forward, multi-wave */
	fake_exec(&f, NULL, NULL, ARGS("run", "--input", fwd, "--device", "cuda:0", "--no-verify", "--copy-size", "1M",
				       "--output", out), &p);
	ck_assert_msg(p.status == 0, "run: exit %d: %s", p.status, clip(p.err));
	ck_assert_msg(strstr(p.out, "on cuda:0 (" FAKE_NAME ")") && strstr(p.out, "result   done (not verified)"), "%s",
		      p.out);
	ck_assert_msg(exists(out), "run exited 0 without writing %s", out);
	r = assert_clean(&p, "run rmsnorm-fwd");
	ck_assert_int_eq(r.launches, 1);
	tu_proc_free(&p);
	unlink(out);

	/* backward, warp-specialised: clusters, opted-in shared memory, a finish kernel and a workspace */
	fake_exec(&f, NULL, NULL, ARGS("run", "--input", bwd, "--device", "cuda:0", "--approach", "ws", "--no-verify",
				       "--copy-size", "1M", "--output", out), &p);
	ck_assert_msg(p.status == 0, "run ws: exit %d: %s", p.status, clip(p.err));
	ck_assert_msg(exists(out), "run exited 0 without writing %s", out);
	r = assert_clean(&p, "run layernorm-bwd ws");
	ck_assert_int_eq(r.launches, 2);
	tu_proc_free(&p);
	unlink(out);

	/* two devices, eight batches between them: every call in the right device's context */
	fake_exec(&f, NULL, ENV("WSNORM_FAKE_CUDA_DEVICES=2"),
		  ARGS("run", "--input", fwd, "--devices", "cuda:0,cuda:1", "--batch-rows", "32", "--no-verify",
		       "--copy-size", "1M", "--output", out), &p);
	ck_assert_msg(p.status == 0, "run on 2 devices: exit %d: %s", p.status, clip(p.err));
	ck_assert_msg(strstr(p.out, " device 0: cuda:0 (" FAKE_NAME "): ok, ") &&
		      strstr(p.out, " device 1: cuda:1 (" FAKE_NAME "): ok, "), "%s", clip(p.out));
	ck_assert_msg(exists(out), "run exited 0 without writing %s", out);
	r = assert_clean(&p, "run on 2 devices");
	ck_assert_int_eq(r.launches, 8);
	tu_proc_free(&p);
	unlink(out);

	/* the kernels never ran: verification must see it */
	fake_exec(&f, NULL, NULL, ARGS("run", "--input", fwd, "--device", "cuda:0", "--copy-size", "1M"), &p);
	ck_assert_msg(p.status == 1 && strstr(p.out, "result   FAIL: verification mismatch"),
		      "verified run of kernels that never ran: exit %d\n%s%s", p.status, clip(p.out), clip(p.err));
	assert_clean(&p, "verified run");
	tu_proc_free(&p);

	free(fwd);
	free(bwd);
	free(out);
	fake_teardown(&f);
}
END_TEST

/*
 * Failures the backend ignores by design: releases (nothing else can be done with the handle, and
 * the fake releases it anyway), the optional PCI bus id, and cuCtxGetCurrent (the scope then just
 * makes the device's context current without remembering the caller's).
 */
static const char *const ignored_calls[] = { "cuDeviceGetPCIBusId", "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent",
					      "cuMemFree", "cuMemHostUnregister", "cuStreamDestroy", "cuEventDestroy",
					      "cuModuleUnload" };
/* Calls whose first failure is fatal but some later ones not: the optional device attributes read
 * after the required ones, and the scope restoring the caller's context on return. */
static const char *const first_fatal_calls[] = { "cuDeviceGetAttribute", "cuCtxSetCurrent" };

static int listed(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return 1;
	return 0;
}

/*
 * Run `args` (which write `out`) once with the calls traced, then once per failure: the first call
 * of each entry point the run makes, and with deep also the middle and the last one. A failure
 * must end the run with exit 3, a message naming the call and its CUresult and no output file, or
 * (where ignored by design) leave the run to finish; either way nothing leaks, crashes or hangs.
 * must_call: entry points the trace has to contain. Returns the number of runs.
 */
static int sweep(const struct fake *f, const char *what, const char *const *args, const char *out,
		 const char *const *must_call, int deep)
{
	struct tu_proc p;
	char *calls, *padded, *save = NULL, *tok;
	int runs = 0, ignored = 0;

	fake_exec(f, NULL, ENV("WSNORM_FAKE_CUDA_TRACE=1"), args, &p);
	ck_assert_msg(p.status == 0, "%s, traced: exit %d: %s", what, p.status, clip(p.err));
	assert_clean(&p, what);
	ck_assert_msg((tok = strstr(p.err, "fake-cuda: calls: ")), "%s: no call counts: %s", what, clip(p.err));
	calls = strdup(tok + strlen("fake-cuda: calls: "));
	calls[strcspn(calls, "\n")] = '\0';
	tu_proc_free(&p);
	unlink(out);
	ck_assert(asprintf(&padded, " %s ", clip(calls)) > 0);
	for (int i = 0; must_call[i]; i++) {
		char key[80];
		snprintf(key, sizeof(key), " %s ", must_call[i]);
		ck_assert_msg(strstr(padded, key), "%s: the run never calls %s: %s", what, must_call[i], clip(calls));
	}
	free(padded);

	for (tok = strtok_r(calls, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		const char *name = tok, *count_s = strtok_r(NULL, " ", &save);
		long count = count_s ? atol(count_s) : 0, nth[3];
		int nn = 0;

		ck_assert_msg(count > 0, "%s: bad call count for %s", what, name);
		nth[nn++] = 1;
		if (deep && count > 2)
			nth[nn++] = count / 2 + 1;
		if (deep && count > 1)
			nth[nn++] = count;
		for (int k = 0; k < nn; k++) {
			const char *code = k ? "CUDA_ERROR_UNKNOWN" : "CUDA_ERROR_OUT_OF_MEMORY";
			char fail[128], fired[160], named[160], label[256];
			int fatal = !listed(name, ignored_calls, sizeof(ignored_calls) / sizeof(ignored_calls[0])) &&
				    (nth[k] == 1 || !listed(name, first_fatal_calls, sizeof(first_fatal_calls) / sizeof(first_fatal_calls[0])));

			snprintf(fail, sizeof(fail), "WSNORM_FAKE_CUDA_FAIL=%s:%ld:%s", name, nth[k], code);
			snprintf(fired, sizeof(fired), "fake-cuda: failing %s call %ld with %s", name, nth[k], code);
			snprintf(named, sizeof(named), "%s(): %s", name, code);
			snprintf(label, sizeof(label), "%s, %s call %ld of %ld failing", what, name, nth[k], count);
			fake_exec(f, NULL, ENV(fail), args, &p);
			runs++;
			ck_assert_msg(strstr(p.err, fired), "%s: the failure was never injected (exit %d):\n%s", label,
				      p.status, clip(p.err));
			assert_clean(&p, label);
			if (p.status == 3) {
				ck_assert_msg(strstr(p.err, named), "%s: exit 3 without naming '%s':\n%s", label, named, clip(p.err));
				ck_assert_msg(!exists(out), "%s: exit 3, but %s was written", label, out);
			} else {
				ck_assert_msg(!fatal && p.status == 0, "%s: exit %d, expected 3%s:\n%s%s", label, p.status,
					      fatal ? "" : " or 0", clip(p.out), clip(p.err));
				ck_assert_msg(exists(out), "%s: exit 0 without writing %s", label, out);
				ignored++;
			}
			tu_proc_free(&p);
			unlink(out);
		}
	}
	printf("%s: %d runs with a driver call failing, %d of them finished (a failure ignored by design)\n", what, runs,
	       ignored);
	free(calls);
	return runs;
}

START_TEST(test_fake_fail_each_call)
{
	static const char *const must_ws[] = { "cuInit", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent", "cuMemAlloc",
					       "cuMemHostRegister", "cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync",
					       "cuStreamCreate", "cuEventCreate", "cuEventRecord", "cuModuleLoadDataEx",
					       "cuModuleGetFunction", "cuFuncSetAttribute", "cuOccupancyMaxActiveClusters",
					       "cuLaunchKernelEx", NULL };
	static const char *const must_fwd[] = { "cuLaunchKernelEx", "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL };
	struct fake f;
	char *fwd, *bwd, *out;

	if (fake_setup(&f))
		return;
	fwd = gen_input(&f, "rmsnorm-fwd", "256", "1024");
	bwd = gen_input(&f, "layernorm-bwd", "256", "4096");
	out = fake_path(&f, "out.safetensors");
	/* backward ws (every entry point the pipeline uses but cuCtxSynchronize): first, middle and last calls */
	sweep(&f, "run layernorm-bwd ws",
	      ARGS("run", "--input", bwd, "--device", "cuda:0", "--approach", "ws", "--no-verify", "--copy-size", "1M",
		   "--output", out), out, must_ws, 1);
	/* forward multi-wave: the first call of each */
	sweep(&f, "run rmsnorm-fwd",
	      ARGS("run", "--input", fwd, "--device", "cuda:0", "--no-verify", "--copy-size", "1M", "--output", out), out,
	      must_fwd, 0);
	free(fwd);
	free(bwd);
	free(out);
	fake_teardown(&f);
}
END_TEST

/* A kernel that faults (sticky CUDA_ERROR_ILLEGAL_ADDRESS) makes the run an ERROR, on one device of two too. */
START_TEST(test_fake_sticky_fault)
{
	static const char *const after[] = { "WSNORM_FAKE_CUDA_STICKY=1", "WSNORM_FAKE_CUDA_STICKY=3" };
	struct fake f;
	struct tu_proc p;
	char *fwd, *out;

	if (fake_setup(&f))
		return;
	fwd = gen_input(&f, "rmsnorm-fwd", "256", "1024");
	out = fake_path(&f, "out.safetensors");
	for (int i = 0; i < 2; i++) {
		/* one device */
		fake_exec(&f, NULL, ENV(after[i]),
			  ARGS("run", "--input", fwd, "--device", "cuda:0", "--batch-rows", "32", "--no-verify",
			       "--copy-size", "1M", "--output", out), &p);
		ck_assert_msg(p.status == 3, "%s: exit %d:\n%s%s", after[i], p.status, clip(p.out), clip(p.err));
		ck_assert_msg(strstr(p.err, "faults device 0 with CUDA_ERROR_ILLEGAL_ADDRESS"), "%s: no fault: %s", after[i],
			      p.err);
		ck_assert_msg(strstr(p.out, "result   ERROR") && strstr(p.out, "CUDA_ERROR_ILLEGAL_ADDRESS"), "%s:\n%s",
			      after[i], clip(p.out));
		ck_assert_msg(strstr(p.err, "wsnorm: run: ") && strstr(p.err, "CUDA_ERROR_ILLEGAL_ADDRESS (700)"), "%s",
			      p.err);
		ck_assert_msg(!exists(out), "%s: %s written after a fault", after[i], out);
		assert_clean(&p, after[i]);
		tu_proc_free(&p);

		/* two devices: the one that faulted is an ERROR, the other finishes its share and more */
		fake_exec(&f, NULL, ENV(after[i], "WSNORM_FAKE_CUDA_DEVICES=2"),
			  ARGS("run", "--input", fwd, "--devices", "cuda:0,cuda:1", "--batch-rows", "32", "--no-verify",
			       "--copy-size", "1M", "--output", out), &p);
		ck_assert_msg(p.status == 3, "%s, 2 devices: exit %d:\n%s%s", after[i], p.status, clip(p.out), clip(p.err));
		ck_assert_msg(strstr(p.out, "result   ERROR"), "%s, 2 devices:\n%s", after[i], clip(p.out));
		{
			static const char err_line[] = "(" FAKE_NAME "): ERROR, ", ok_line[] = "(" FAKE_NAME "): ok, ";
			const char *e = strstr(p.out, err_line), *ok = strstr(p.out, ok_line);

			ck_assert_msg(e && ok && !strstr(e + 1, err_line) && !strstr(ok + 1, ok_line),
				      "%s, 2 devices: expected one device ERROR and one ok:\n%s", after[i], clip(p.out));
		}
		ck_assert_msg(!exists(out), "%s, 2 devices: %s written after a fault", after[i], out);
		assert_clean(&p, "sticky fault on 2 devices");
		tu_proc_free(&p);
	}
	free(fwd);
	free(out);
	fake_teardown(&f);
}
END_TEST

/* An application's own context stays current across every CUDA entry point (tests/cuda_context.c). */
START_TEST(test_fake_app_context)
{
	const char *prog = env_or("WSNORM_CUDA_CONTEXT_TEST", "tests/cuda_context");
	struct fake f;
	struct tu_proc p;

	if (fake_setup(&f))
		return;
	fake_exec(&f, prog, ENV("WSNORM_FAKE_CUDA_DEVICES=2"), NULL, &p);
	ck_assert_msg(p.status == 0 && strstr(p.out, "ok: the application's context stayed current"),
		      "%s: exit %d:\n%s%s", prog, p.status, clip(p.out), clip(p.err));
	assert_clean(&p, prog);
	tu_proc_free(&p);
	fake_teardown(&f);
}
END_TEST

/* A driver with no GPU is ENODEV and says so (auto falls back to the CPU); a missing entry point is named. */
START_TEST(test_fake_no_device)
{
	static const char *const no_gpu[] = { "WSNORM_FAKE_CUDA_FAIL=cuInit:1:CUDA_ERROR_NO_DEVICE",
					      "WSNORM_FAKE_CUDA_DEVICES=0" };
	static const char *const missing[] = { "cuInit", "cuLaunchKernelEx", "cuTensorMapEncodeTiled" };
	struct fake f;
	struct tu_proc p;
	char *fwd;

	if (fake_setup(&f))
		return;
	fwd = gen_input(&f, "rmsnorm-fwd", "64", "1024");
	for (int i = 0; i < 2; i++) {
		expect_cuda_run_error(&f, no_gpu[i], fwd, no_gpu[i],
				      "ENODEV: device 'cuda:0': no NVIDIA GPU: cuInit(): CUDA_ERROR_NO_DEVICE", NULL);

		fake_exec(&f, NULL, ENV(no_gpu[i]), ARGS("devices"), &p);
		ck_assert_msg(p.status == 0 && strstr(p.out, "cuda: unavailable - no NVIDIA GPU: cuInit(): CUDA_ERROR_NO_DEVICE"),
			      "%s: devices: exit %d\n%s", no_gpu[i], p.status, clip(p.out));
		assert_clean(&p, no_gpu[i]);
		tu_proc_free(&p);

		fake_exec(&f, NULL, ENV(no_gpu[i]), ARGS("run", "--input", fwd, "--no-verify"), &p);
		ck_assert_msg(p.status == 0 && strstr(p.out, " on cpu ("), "%s: --device auto: exit %d\n%s%s", no_gpu[i],
			      p.status, clip(p.out), clip(p.err));
		tu_proc_free(&p);
	}
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		char env[96], want[160];

		snprintf(env, sizeof(env), "WSNORM_FAKE_CUDA_MISSING=%s", missing[i]);
		snprintf(want, sizeof(want), "ENODRIVER: device 'cuda:0': NVIDIA driver libcuda.so.1 lacks %s for CUDA 12.0",
			 missing[i]);
		expect_cuda_run_error(&f, env, fwd, env, want, NULL);
	}
	free(fwd);
	fake_teardown(&f);
}
END_TEST

/* A JIT failure is EJIT with the JIT's error log in the message; a kernel the module lacks is named. */
START_TEST(test_fake_jit_failure)
{
	struct fake f;
	char *fwd;

	if (fake_setup(&f))
		return;
	fwd = gen_input(&f, "rmsnorm-fwd", "64", "1024");
	expect_cuda_run_error(&f, "WSNORM_FAKE_CUDA_FAIL=cuModuleLoadDataEx:1:CUDA_ERROR_INVALID_PTX", fwd, "JIT failure",
			      ": EJIT: plan rmsnorm-fwd bf16 rows=64 hidden=1024 on cuda:0: cuModuleLoadDataEx(): "
			      "CUDA_ERROR_INVALID_PTX (218)",
			      "; JIT log: fake-cuda: the JIT failed with CUDA_ERROR_INVALID_PTX\n");
	expect_cuda_run_error(&f, "WSNORM_FAKE_CUDA_FAIL=cuModuleGetFunction:1:CUDA_ERROR_NOT_FOUND", fwd,
			      "kernel not found",
			      "cuModuleGetFunction(): CUDA_ERROR_NOT_FOUND (500): named symbol not found, while looking up "
			      "kernel wsn_rmsnorm_fwd_bf16_h1024 in its module",
			      NULL);
	free(fwd);
	fake_teardown(&f);
}
END_TEST

/* How many times the traced run called entry point name (its "fake-cuda: calls:" line). */
static long trace_calls(const char *err, const char *name)
{
	char want[96];
	const char *s = strstr(err, "fake-cuda: calls:");
	long n = 0;

	ck_assert_msg(s != NULL, "no call trace:\n%s", clip(err));
	snprintf(want, sizeof(want), " %s ", name);
	if ((s = strstr(s, want)))
		n = strtol(s + strlen(want), NULL, 10);
	return n;
}

/*
 * bench on the fake GPU, whose kernels never run: the check after the timing finds each point's
 * poisoned outputs (every element not finite), FAIL on every row and exit status 1, and nothing is
 * left live; a few rows of a short hidden size are marked L2-resident. With --no-verify, exit 0.
 */
START_TEST(test_fake_bench_check)
{
	struct fake f;
	struct tu_proc p;
	int fails = 0;

	if (fake_setup(&f))
		return;
	fake_exec(&f, NULL, NULL, ARGS("bench", "--device", "cuda:0", "--op", "rmsnorm-fwd,layernorm-bwd", "--hidden",
				       "64,4096", "--rows", "64", "--iters", "1", "--copy-size", "1M", "--json"), &p);
	ck_assert_msg(p.status == 1, "bench: exit %d: %s", p.status, clip(p.err));
	assert_clean(&p, "bench");
	{
		json_error_t je;
		json_t *j = json_loads(p.out, 0, &je), *res;

		ck_assert_msg(j != NULL, "bench --json: %s\n%s", je.text, clip(p.out));
		res = json_object_get(j, "results");
		ck_assert_int_eq(json_array_size(res), 4);
		for (size_t i = 0; i < 4; i++) {
			json_t *r = json_array_get(res, i);
			const char *err = json_string_value(json_object_get(r, "check_error"));
			int h = (int)json_integer_value(json_object_get(r, "hidden"));

			ck_assert_str_eq(json_string_value(json_object_get(r, "check")), "mismatch");
			ck_assert_msg(err && strstr(err, " finite/non-finite disagreements of "), "point %zu: %s", i, err ? err : "(none)");
			/* 64 x 64 bf16 sets: 4096 of them are far less than twice a 50 MB L2 */
			ck_assert_int_eq(json_is_true(json_object_get(r, "l2_resident")), h == 64);
			fails++;
		}
		json_decref(j);
	}
	ck_assert_int_eq(fails, 4);
	ck_assert_msg(strstr(p.err, "rmsnorm-fwd bf16 hidden 4096: the outputs differ from the CPU reference: y "),
		      "%s", clip(p.err));
	ck_assert_msg(strstr(p.err, "layernorm-bwd bf16 hidden 64: the outputs differ from the CPU reference: dx "),
		      "%s", clip(p.err));
	ck_assert_msg(strstr(p.err, "hidden 64: all 4096 input sets fit twice in the L2 cache"), "%s", clip(p.err));
	tu_proc_free(&p);

	/* -q: no informational lines (the L2 note among them); the mismatch is still reported */
	fake_exec(&f, NULL, NULL, ARGS("-q", "bench", "--device", "cuda:0", "--op", "rmsnorm-fwd", "--hidden", "64",
				       "--rows", "64", "--iters", "1", "--copy-size", "1M"), &p);
	ck_assert_msg(p.status == 1, "bench -q: exit %d: %s", p.status, clip(p.err));
	ck_assert_msg(!strstr(p.err, "L2 cache"), "%s", clip(p.err));
	ck_assert_msg(strstr(p.err, "the outputs differ from the CPU reference"), "%s", clip(p.err));
	tu_proc_free(&p);

	/* every timed batch queues behind a stream hold and asks whether the hold outlasted the host's
	 * submission; the fake's events are done at once, so the first batch is timed 8 times, behind
	 * holds twice as long each time (and later batches until the hold reaches its 2 s cap) */
	fake_exec(&f, NULL, ENV("WSNORM_FAKE_CUDA_TRACE=1"), ARGS("bench", "--device", "cuda:0", "--op", "layernorm-bwd",
				       "--hidden", "4096", "--rows", "64", "--iters", "1", "--copy-size", "1M", "--no-verify"), &p);
	ck_assert_msg(p.status == 0, "bench --no-verify: exit %d: %s", p.status, clip(p.err));
	ck_assert_msg(strstr(p.out, " off   auto+"), "%s", clip(p.out));
	{
		long q = trace_calls(p.err, "cuEventQuery");
		ck_assert_msg(q >= 8, "%ld event queries: %s", q, clip(p.err));
	}
	assert_clean(&p, "bench --no-verify");
	tu_proc_free(&p);
	fake_teardown(&f);
}
END_TEST

/*
 * plan --autotune on the fake GPU (its kernels never run; its events keep a modelled clock): the
 * candidates are compiled once each (one module each, all released), the entry is stored under the
 * plan's rows class and hit again; another rows class is measured afresh; a JIT failure of one
 * candidate fails the plan with the JIT's error and leaves nothing live.
 */
START_TEST(test_fake_autotune)
{
	struct fake f;
	struct tu_proc p;
	char *cache, xdg[4200], path[4300];
	const char *line;
	int cands = 0;

	if (fake_setup(&f))
		return;
	cache = fake_path(&f, "cache");
	snprintf(xdg, sizeof(xdg), "XDG_CACHE_HOME=%s", cache);
	fake_exec(&f, NULL, ENV(xdg, "WSNORM_FAKE_CUDA_TRACE=1"),
		  ARGS("plan", "--device", "cuda:0", "--op", "layernorm-bwd", "--hidden", "4096", "--rows", "3000",
		       "--autotune"), &p);
	ck_assert_msg(p.status == 0, "autotune: exit %d: %s", p.status, clip(p.err));
	assert_clean(&p, "autotune");
	line = strstr(p.out, "measured now (no entry): ws ");
	ck_assert_msg(line, "%s", clip(p.out));
	ck_assert_msg((line = strstr(line, " candidates compiled in ")), "%s", clip(p.out));
	while (line[-1] >= '0' && line[-1] <= '9')
		line--;
	ck_assert_msg(sscanf(line, "%d candidates compiled in", &cands) == 1, "%s", clip(line));
	/* multi-wave, the planner's ws and other ws shapes: one module each, compiled once */
	ck_assert_int_gt(cands, 2);
	ck_assert_int_eq(trace_calls(p.err, "cuModuleLoadDataEx"), cands);
	/* timed as bench times: 3000 rows (74 MB a set) in 3 sets taken in turn, more than twice the 50 MB L2 */
	ck_assert_msg(strstr(p.out, " at 3000 rows (3 input sets) -> "), "%s", clip(p.out));
	tu_proc_free(&p);

	/* the entry is the rows class's (4096): a plan of 2049-4096 rows hits it, one of 16384 does not */
	fake_exec(&f, NULL, ENV(xdg), ARGS("plan", "--device", "cuda:0", "--op", "layernorm-bwd", "--hidden", "4096",
					   "--rows", "2049", "--autotune"), &p);
	ck_assert_msg(p.status == 0 && strstr(p.out, "cache hit ("), "exit %d: %s%s", p.status, clip(p.out), clip(p.err));
	ck_assert_msg(strstr(p.out, "_r4096): "), "%s", clip(p.out));
	assert_clean(&p, "autotune hit");
	tu_proc_free(&p);
	fake_exec(&f, NULL, ENV(xdg), ARGS("plan", "--device", "cuda:0", "--op", "layernorm-bwd", "--hidden", "4096",
					   "--rows", "20000", "--autotune"), &p);
	ck_assert_msg(p.status == 0 && strstr(p.out, "measured now (no entry)") && strstr(p.out, " at 16384 rows (1 input set) -> "),
		      "exit %d: %s%s", p.status, clip(p.out), clip(p.err));
	assert_clean(&p, "autotune, another rows class");
	tu_proc_free(&p);

	/* the third module's JIT fails: the plan fails with it, naming the candidate, and every other module
	 * is released */
	snprintf(path, sizeof(path), "XDG_CACHE_HOME=%s/other", cache);
	fake_exec(&f, NULL, ENV(path, "WSNORM_FAKE_CUDA_FAIL=cuModuleLoadDataEx:3:CUDA_ERROR_INVALID_PTX"),
		  ARGS("plan", "--device", "cuda:0", "--op", "layernorm-bwd", "--hidden", "4096", "--rows", "3000",
		       "--autotune"), &p);
	ck_assert_msg(p.status == 3 && strstr(p.err, ": EJIT: ") && strstr(p.err, ": autotune: compiling the ") &&
		      strstr(p.err, " candidate") && strstr(p.err, "cuModuleLoadDataEx(): CUDA_ERROR_INVALID_PTX (218)"),
		      "exit %d: %s", p.status, clip(p.err));
	assert_clean(&p, "autotune, a JIT failure");
	tu_proc_free(&p);
	free(cache);
	fake_teardown(&f);
}
END_TEST

/*
 * plan --json on the (fake) GPU: the planner's fields, the compiled kernels as the driver reports
 * them (the fake's register count and SASS version), the measured grid, and the text alongside.
 */
START_TEST(test_fake_plan_json)
{
	struct fake f;
	struct tu_proc p;

	if (fake_setup(&f))
		return;
	fake_exec(&f, NULL, NULL, ARGS("plan", "--device", "cuda:0", "--op", "layernorm-bwd", "--hidden", "4096",
				       "--approach", "ws", "--json"), &p);
	ck_assert_msg(p.status == 0, "plan: exit %d: %s", p.status, clip(p.err));
	assert_clean(&p, "plan --json");
	{
		json_error_t je;
		json_t *j = json_loads(p.out, 0, &je), *c, *m, *fin, *g;
		char want[256];

		ck_assert_msg(j != NULL, "plan --json: %s\n%s", je.text, clip(p.out));
		ck_assert_str_eq(json_string_value(json_object_get(j, "device")), "cuda:0");
		ck_assert_str_eq(json_string_value(json_object_get(j, "device_name")), FAKE_NAME);
		ck_assert_str_eq(json_string_value(json_object_get(j, "backend")), "cuda");
		ck_assert_str_eq(json_string_value(json_object_get(j, "approach")), "ws");
		ck_assert_str_eq(json_string_value(json_object_get(j, "rule")), "forced: approach ws");
		ck_assert(json_is_null(json_object_get(j, "autotune")));
		c = json_object_get(j, "compiled");
		m = json_object_get(c, "main");
		fin = json_object_get(c, "finish");
		ck_assert_str_eq(json_string_value(json_object_get(m, "name")), json_string_value(json_object_get(j, "kernel")));
		ck_assert_str_eq(json_string_value(json_object_get(fin, "name")),
				 json_string_value(json_object_get(j, "finish_kernel")));
		ck_assert_int_eq(json_integer_value(json_object_get(m, "registers")), FAKE_REGS);
		ck_assert_int_eq(json_integer_value(json_object_get(m, "local_bytes")), 0);
		ck_assert_str_eq(json_string_value(json_object_get(m, "sass")), "sm_90");
		ck_assert_int_eq(json_integer_value(json_object_get(m, "threads")),
				 json_integer_value(json_object_get(j, "block_threads")));
		ck_assert_int_eq(json_integer_value(json_object_get(m, "dynamic_shared")),
				 json_integer_value(json_object_get(json_object_get(j, "shared_memory"), "bytes")));
		g = json_object_get(j, "grid");
		ck_assert_int_eq(json_integer_value(json_object_get(g, "sms")), 132);
		ck_assert_int_le(json_integer_value(json_object_get(g, "ctas")), json_integer_value(json_object_get(g, "planned_ctas")));
		ck_assert(json_real_value(json_object_get(j, "jit_ms")) >= 0);
		ck_assert_int_gt(json_integer_value(json_object_get(j, "ptx_bytes")), 0);
		snprintf(want, sizeof(want), "kernel %s: %d registers, 0 bytes local (spills)",
			 json_string_value(json_object_get(m, "name")), FAKE_REGS);
		ck_assert_msg(strstr(json_string_value(json_object_get(j, "text")), want), "'%s' not in the text", want);
		json_decref(j);
	}
	tu_proc_free(&p);
	fake_teardown(&f);
}
END_TEST

Suite *suite_cuda_fake(void)
{
	return TU_SUITE("cuda_fake", { "fake-driver", 300, NULL, NULL, TU_TESTS({ test_fake_clean_runs, 1 },
				{ test_fake_fail_each_call, 1 }, { test_fake_sticky_fault, 1 }, { test_fake_app_context, 1 },
				{ test_fake_no_device, 1 }, { test_fake_jit_failure, 1 }, { test_fake_bench_check, 1 },
				{ test_fake_plan_json, 1 }, { test_fake_autotune, 1 }) });
}
