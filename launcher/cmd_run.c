/* SPDX-License-Identifier: MIT */
/* launcher/cmd_run.c: `wsnorm run`: options, the run's setup and signals, and pass/fail. */
#include "report.h"
#include "fleet.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

/* The signals that stop a run, read from a signalfd by the thread that waits for the devices. */
static int sig_fd = -1;
static sigset_t sig_set;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: %s run --input PATH [OPTIONS]\n"
		"       %s run --demo [--device SPEC] [--dtype DT] [--json]\n"
		"Stream a dataset through io_uring into a ring of pinned buffers, copy each batch to the\n"
		"device, run the op, verify sampled rows against the CPU reference, optionally write the\n"
		"outputs, and report each stage, with all stages overlapped.\n\n"
		"Input and op:\n"
		"  --input PATH      a safetensors file, a comma-separated list of files, a directory of\n"
		"                    *.safetensors shards, or raw files with --shape\n"
		"  --op OP           layernorm-fwd, layernorm-bwd, rmsnorm-fwd, rmsnorm-bwd (default: from\n"
		"                    the file's metadata)\n"
		"  --dtype DT        f32, f16, bf16: the dtype the input must have (default: the file's)\n"
		"  --shape RxH       each input is a raw file of R x H elements of --dtype, or a block\n"
		"                    device holding them first (forward ops)\n"
		"  --eps E           epsilon (default: the file's metadata, else %g)\n"
		"  --output PATH     write the outputs (y, mean, rstd / dx, dweight, dbias) as safetensors;\n"
		"                    a directory when the input has several files\n"
		"Devices:\n"
		"  --device SPEC     auto, cpu, cuda[:N] or amd[:N] (default auto: the first GPU, else the CPU)\n"
		"  --devices LIST    one pipeline per device: all, or a comma-separated list of GPU numbers\n"
		"                    and specs (e.g. 0,1 or cpu,cpu)\n"
		"  --approach A      GPU kernel family: auto, multiwave or ws (default auto)\n"
		"  --autotune        with approach auto: time multiwave and ws (the backward's ws in its\n"
		"                    shapes that fit) on each GPU once and cache the winner (see FILES in\n"
		"                    wsnorm(1)); nothing to tune on the CPU\n"
		"  --threads N       CPU threads (default: all)\n"
		"Pipeline:\n"
		"  --ring N          pinned buffers per device (default %d, at most %d)\n"
		"  --batch-rows N    rows per batch; larger shards are split (default: %llu MiB of x, at\n"
		"                    most the first shard's rows)\n"
		"  --qd N            io_uring queue depth (default %d)\n"
		"  --bs SIZE         io_uring read size (default %u; K/M suffixes)\n"
		"  --direct MODE     O_DIRECT: auto, on or off (default auto)\n"
		"  --sqpoll          ask for a kernel submission thread (IORING_SETUP_SQPOLL)\n"
		"  --read-only       the read stage alone: read the dataset into the ring and discard it\n"
		"Stress:\n"
		"  --iterations N    passes over the dataset (default 1; unlimited with --duration)\n"
		"  --duration T      run for T seconds (s, m, h suffixes: 90s, 5m, 1h)\n"
		"  --kernel-loops K  launches of the kernel on each device-resident batch (default %d)\n"
		"  --standalone      first measure each stage alone, to compare the pipeline with its\n"
		"                    slowest stage\n"
		"  --copy-size SIZE  device copy buffer for the roofline (default %lluM; %lluM on the CPU)\n"
		"Verification and pass/fail:\n"
		"  --verify-rows N   rows sampled per verified batch (default %d; 0 disables verification)\n"
		"  --no-verify       same as --verify-rows 0\n"
		"  --verify-every N  verify every Nth batch (default %d)\n"
		"  --min-read-gbs X  fail (exit 1) if the read stage is slower than X GB/s\n"
		"  --min-h2d-gbs X   fail if a device's host-to-device copies are slower than X GB/s\n"
		"  --min-kernel-frac F  fail if a device's kernel reaches less than F of its copy bandwidth\n"
		"  --inject-mismatch corrupt one output element of each verified batch (exit status 1)\n"
		"  --inject-fault I  make device I's first kernel launch fail (a self-test, exit status 3)\n"
		"  --inject-slow F   make each batch's device work F times as long (a straggler, F > 1)\n"
#ifdef WSN_MPI
		"Fleet (wsnorm-mpi; see FLEET RUNS in wsnorm(1)):\n"
		"  --devices local   one GPU a rank: the node-local rank's (start one rank a GPU)\n"
		"  --max-spread X    fail (exit 1) if a stage's fastest GPU is more than X times its slowest\n"
		"  --fault-rank R    apply --inject-fault and --inject-slow on rank R alone\n"
		"  --node-report DIR each rank writes its report to DIR/NODE.rank-R.json before the gather\n"
#endif

		"Other:\n"
		"  --demo            generate a small input set in a temporary directory, run all four\n"
		"                    ops on the best device present, report, and remove the files\n"
		"  --json            machine-readable report on stdout\n"
		"  --html FILE       also write the report as one page of charts (each GPU's and node's\n"
		"                    figures, the slowest marked, rows/s over the run)\n"
		"  -h, --help        show this help\n"
		"\nSIGINT, SIGTERM or SIGHUP stops the run with a partial report; outputs appear only when complete.\n"
		"Exit status: 0 pass, 1 verification mismatch or threshold missed, 2 usage error,\n"
		"3 runtime error.\n",
		cli_prog, cli_prog, (double)WSN_DEFAULT_EPS, PL_DEFAULT_RING, PL_MAX_RING,
		(unsigned long long)(PL_DEFAULT_BATCH_BYTES >> 20), WSN_READER_DEFAULT_QD, WSN_READER_DEFAULT_BS,
		PL_DEFAULT_KERNEL_LOOPS, (unsigned long long)(PL_DEFAULT_COPY_GPU >> 20),
		(unsigned long long)(PL_DEFAULT_COPY_CPU >> 20), CLI_DEFAULT_VERIFY_ROWS, PL_DEFAULT_VERIFY_EVERY);
}

/* ---- setup ---- */

/*
 * The outputs' places, checked before anything is read or written: one file, or, when the input is a
 * directory or several files, a directory (made if missing) of files named as their inputs.
 */
static int output_setup(struct run_opts *o, struct pl_dataset *ds)
{
	char msg[PL_ERRLEN];
	struct stat st;
	int err, exists;

	o->cfg.output_dir = ds->n > 1 || ds->from_dir;
	if (!o->cfg.output)
		return 0;
	exists = stat(o->cfg.output, &st) == 0;
	if (o->cfg.output_dir) {
		for (int i = 0; i < ds->n; i++) { /* each output takes its input's name: two alike would clash */
			const char *a = strrchr(ds->shards[i].path, '/');
			a = a ? a + 1 : ds->shards[i].path;
			for (int k = 0; k < i; k++) {
				const char *b = strrchr(ds->shards[k].path, '/');
				if (!strcmp(a, b ? b + 1 : ds->shards[k].path))
					return cli_error("run: inputs '%s' and '%s' would both write '%s/%s'",
							 ds->shards[k].path, ds->shards[i].path, o->cfg.output, a);
			}
		}
		if (exists && !S_ISDIR(st.st_mode))
			return cli_error("run: output '%s' must be a directory: the input is %s", o->cfg.output,
					 ds->from_dir ? "a directory" : "several files");
	}
	if ((err = pl_out_check(ds, &o->cfg, msg, sizeof(msg))) < 0)
		return cli_error("%s", msg);
	if (!o->cfg.output_dir || exists)
		return 0;
	if (mkdir(o->cfg.output, 0777) < 0)
		return cli_error("run: cannot create output directory '%s': %s", o->cfg.output, strerror(errno));
	ds->outdir_created = 1;
	ds->outdir_cleanup = cli_cleanup_add(o->cfg.output, 1) + 1;
	return 0;
}

/*
 * The most rows one batch can hold, by what the dataset's files hold: rows0 for the first file (and
 * for every raw file, all of that shape); for each other safetensors file, as many rows of x as its
 * size could hold, row_bytes each. 0 when a file's size is not known (it is not there yet, or is not
 * a regular file): then nothing bounds the batch but --batch-rows.
 */
static int64_t dataset_most_rows(const struct pl_dataset *ds, int64_t rows0, size_t row_bytes, int raw)
{
	int64_t most = rows0;
	struct stat st;

	if (rows0 <= 0)
		return 0;
	for (int i = 1; i < ds->n && !raw; i++) {
		int64_t rows;

		if (!row_bytes || stat(ds->shards[i].path, &st) < 0 || !S_ISREG(st.st_mode))
			return 0;
		rows = (int64_t)((uint64_t)st.st_size / row_bytes);
		if (rows > most)
			most = rows;
	}
	return most;
}

/*
 * List the dataset and open its first shard: it decides op, eps, dtype, hidden and the batch
 * rows; the others are opened when the pipeline reaches them. Prints its errors.
 */
static int dataset_setup(struct run_opts *o, struct pl_dataset *ds)
{
	struct pl_config *cfg = &o->cfg;
	struct pl_shard *sh;
	struct wsn_reader_options ro;
	struct wsn_reader *rd = NULL;
	char msg[PL_ERRLEN];
	int64_t rows0 = 1;
	size_t row_bytes = 0;
	int ret, err;

	if ((ret = pl_dataset_list(ds, o->input, o->raw_rows > 0)) || (ret = output_setup(o, ds)))
		return ret;
	ds->cfg = cfg;
	ds->shape.eps = o->have_eps ? o->eps : WSN_DEFAULT_EPS;
	ds->op_given = o->have_op;
	ds->eps_given = o->have_eps;
	sh = &ds->shards[0];
	if (o->raw_rows) { /* --op (forward) and --dtype come with --shape: the options check it */
		pl_shape_init(&ds->shape, o->op, o->dt, o->raw_hidden, 0, 0, ds->shape.eps);
		for (int i = 0; i < ds->n; i++)
			ds->shards[i].rows = o->raw_rows;
		rows0 = o->raw_rows;
		row_bytes = (size_t)o->raw_hidden * wsn_dtype_size(o->dt);
	} else {
		const struct wsn_st_entry *x;
		const char *meta_op;

		/* a small reader for the first header; the devices' readers open the rest */
		wsn_reader_options_init(&ro);
		ro.queue_depth = 2;
		ro.block_size = 64 << 10;
		ro.direct = 0;
		if ((err = wsn_reader_create(&ro, &rd)) < 0)
			return cli_fail(err, "run: cannot set up the io_uring reader");
		if (pl_shard_identify(sh, msg, sizeof(msg))) {
			wsn_reader_destroy(rd);
			cli_error("%s", msg);
			return EXIT_RUNTIME;
		}
		err = wsn_st_open(sh->path, rd, &sh->st);
		wsn_reader_destroy(rd); /* the file keeps no use for it: reads go through the devices' readers */
		if (err < 0)
			return cli_fail(err, "run: cannot read '%s'", sh->path);
		meta_op = wsn_st_metadata(sh->st, "wsnorm.op");
		if (o->have_op) {
			ds->shape.op = o->op;
		} else if (meta_op) {
			if (wsn_op_parse(meta_op, &ds->shape.op) < 0) {
				cli_error("run: %s: metadata names an unknown op '%s'", sh->path, meta_op);
				return EXIT_RUNTIME;
			}
		} else {
			cli_error("run: %s: the file does not say which op it is for: give --op", sh->path);
			return EXIT_RUNTIME;
		}
		if (!o->have_eps) {
			const char *e = wsn_st_metadata(sh->st, "wsnorm.eps");
			if (e && cli_parse_eps(e, &ds->shape.eps)) {
				cli_error("run: %s: metadata 'wsnorm.eps' is '%s', not a number with 0 < eps <= 1 (--eps "
					  "overrides it)", sh->path, e);
				return EXIT_RUNTIME;
			}
		}
		if ((x = wsn_st_find(sh->st, "x")) && x->ndim >= 1) {
			rows0 = pl_entry_rows(x);
			row_bytes = (size_t)x->shape[x->ndim - 1] * wsn_dtype_size(x->dtype);
		}
	}
	if (!o->have_batch_rows) {
		int64_t fit = row_bytes ? (int64_t)(PL_DEFAULT_BATCH_BYTES / row_bytes) : 1;
		if (fit < 1)
			fit = 1;
		cfg->batch_rows = rows0 > 0 && rows0 < fit ? rows0 : fit;
	} else {
		int64_t most = dataset_most_rows(ds, rows0, row_bytes, o->raw_rows > 0);

		if (most > 0 && cfg->batch_rows > most)
			cfg->batch_rows = most; /* no batch holds more rows than a file has: the ring needs no more */
	}
	if ((err = pl_shard_open(ds, 0, NULL, 1, msg, sizeof(msg)))) {
		cli_error("%s", msg);
		return EXIT_RUNTIME;
	}
	if (!o->raw_rows && o->have_dt && o->dt != ds->shape.dt) {
		cli_error("run: %s: tensor 'x' is %s, --dtype asks for %s", sh->path,
			wsn_dtype_name(ds->shape.dt), wsn_dtype_name(o->dt));
		return EXIT_RUNTIME;
	}
	return 0;
}

/* ---- signals ---- */

/* Block SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) in this thread and every thread
 * it starts; they are read from sig_fd. */
static void signals_block(void)
{
	if (sig_fd >= 0)
		return;
	sigemptyset(&sig_set);
	sigaddset(&sig_set, SIGINT);
	sigaddset(&sig_set, SIGTERM);
	sigaddset(&sig_set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sig_set, NULL);
	sig_fd = signalfd(-1, &sig_set, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* After the first signal: a second one ends the process at once, removing the temporary files first. */
static void signals_release(void)
{
	cli_cleanup_arm(SIGINT);
	cli_cleanup_arm(SIGTERM);
	cli_cleanup_arm(SIGHUP);
	pthread_sigmask(SIG_UNBLOCK, &sig_set, NULL);
}

/* Wait for every device, stopping them on a signal and drawing the progress line. */
static void wait_run(struct pl_run *run, int *interrupted_by)
{
	struct cli_progress prog;
	int done = 0, sampling = 1;
#ifdef WSN_MPI
	int fleet_stopped = 0;
#endif

	cli_progress_start(&prog);
	while (done < run->ndev) {
		struct pollfd p[2] = { { run->donefd, POLLIN, 0 }, { sig_fd, POLLIN, 0 } };
#ifdef WSN_MPI
		int r = poll(p, sig_fd >= 0 && !*interrupted_by ? 2 : 1, 50); /* the heartbeat's turn */
#else
		int r = poll(p, sig_fd >= 0 && !*interrupted_by ? 2 : 1, prog.active ? 500 : 1000);
#endif

		if (r < 0 && errno != EINTR)
			break;
		if (r > 0 && (p[0].revents & POLLIN)) {
			uint64_t v;
			if (read(run->donefd, &v, sizeof(v)) == sizeof(v))
				done += (int)v;
		}
		if (r > 0 && !*interrupted_by && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			if (read(sig_fd, &si, sizeof(si)) == sizeof(si)) {
				*interrupted_by = (int)si.ssi_signo;
				cli_progress_end(&prog);
				fprintf(stderr, "%s: run: %s: stopping after the batches in flight (again to quit at once)\n",
					cli_prog, report_signal_name((int)si.ssi_signo));
				pl_run_go(run);
				pl_run_stop(run, 1);
				signals_release();
			}
		}
#ifdef WSN_MPI
		if (!fleet_stopped) {
			int failed = *interrupted_by != 0;
			for (int i = 0; i < run->ndev; i++)
				failed |= __atomic_load_n(&run->res[i].status, __ATOMIC_RELAXED) == EXIT_RUNTIME;
			switch (fleet_mpi_tick(run, failed)) {
			case FLEET_GO:
				pl_run_go(run);
				break;
			case FLEET_STOP:
				fleet_stopped = 1;
				if (!*interrupted_by) {
					*interrupted_by = REPORT_FLEET_STOP;
					cli_progress_end(&prog);
					fprintf(stderr, "%s: run: another rank stopped: stopping after the batches in flight\n",
						cli_prog);
				}
				pl_run_go(run);
				pl_run_stop(run, 1);
				break;
			}
		}
#endif
		if (sampling) { /* a sample a second from the start, for the report's throughput over time */
			double now = cli_now(), t0 = 0;
			int go;
			pthread_mutex_lock(&run->mu);
			go = run->go;
			t0 = run->t_start;
			pthread_mutex_unlock(&run->mu);
			if (go && now - t0 >= run->nsamples + 1.0 && pl_run_sample(run) < 0)
				sampling = 0;
		}
		if (prog.active) {
			long long rows = 0, bytes = 0;
			double since = 0;

			for (int i = 0; i < run->ndev; i++) {
				rows += atomic_load(&run->res[i].live_rows);
				bytes += atomic_load(&run->res[i].live_read_bytes);
			}
			pthread_mutex_lock(&run->mu);
			if (run->go)
				since = cli_now() - run->t_start;
			pthread_mutex_unlock(&run->mu);
			cli_progress_update(&prog, "%.0f s: %lld rows, %.2f GB read", since, rows, (double)bytes / 1e9);
		}
	}
	cli_progress_end(&prog);
}

/* ---- measurements ---- */
static int run_one(struct run_opts *o, json_t *collect, int *interrupted, int64_t *verified_batches)
{
	struct pl_dataset ds;
	struct pl_run run;
	struct summary *sm = calloc(1, sizeof(*sm));
	char specs[PL_MAX_DEVICES][32], msg[PL_ERRLEN] = "";
	int ndev, ret, err, missed = 0, runtime = 0, reported = 0;

	memset(&ds, 0, sizeof(ds));
	memset(&run, 0, sizeof(run));
	run.donefd = -1;
	pthread_mutex_init(&ds.lock, NULL);
	if (!sm) {
		cli_error("run: out of memory");
		ret = EXIT_RUNTIME;
		goto out;
	}
	if (o->devices) { /* first: a misspelt list is a usage error whatever the input */
		if ((ndev = pl_devices_parse(o->devices, specs, PL_MAX_DEVICES)) < 0) {
			ret = -ndev;
			goto out;
		}
	} else {
		ndev = 1;
		if (strlen(o->device) >= sizeof(specs[0])) {
			ret = cli_usage_error("run", "bad --device '%s'", o->device);
			goto out;
		}
		snprintf(specs[0], sizeof(specs[0]), "%s", o->device);
	}
	if (o->cfg.inject_fault >= ndev) {
		ret = cli_usage_error("run", "--inject-fault %d: the devices are numbered 0..%d", o->cfg.inject_fault, ndev - 1);
		goto out;
	}
	if ((ret = dataset_setup(o, &ds)))
		goto out;
	run.cfg = &o->cfg;
	run.ds = &ds;
	run.ndev = ndev;
	if (!(run.res = calloc((size_t)ndev, sizeof(*run.res)))) {
		cli_error("run: out of memory");
		ret = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < ndev; i++) {
		run.res[i].index = i;
		snprintf(run.res[i].spec, sizeof(run.res[i].spec), "%.31s", specs[i]);
	}
#ifdef WSN_MPI
	run.hold = 1; /* every rank's window starts together (fleet_mpi_tick) */
#endif
	if ((ret = pl_run_start(&run)))
		goto out;
	wait_run(&run, &sm->interrupted_by);
	pl_run_join(&run);
	*interrupted = sm->interrupted_by;

	/* a single device that could not even be opened: an error, not a report */
	if (ndev == 1 && !run.res[0].name[0] && run.res[0].status == EXIT_RUNTIME) {
		pl_out_finish(&ds, 0, msg, sizeof(msg));
		cli_error("%s", run.res[0].errmsg);
		ret = EXIT_RUNTIME;
		goto out;
	}
	for (int i = 0; i < ndev; i++) {
		if (run.res[i].status == EXIT_RUNTIME) {
			cli_error("%s", run.res[i].errmsg);
			runtime = 1;
		}
		sm->rows += run.res[i].rows;
		sm->batches += run.res[i].batches;
		sm->vb += run.res[i].verified_batches;
		sm->vbad += run.res[i].mismatched_batches;
		sm->vrows += run.res[i].verified_rows;
		sm->copy_bps += run.res[i].copy_bps;
		if (!sm->first_mismatch && run.res[i].first_mismatch[0])
			sm->first_mismatch = run.res[i].first_mismatch;
		report_merge_verdicts(sm, &run.res[i]);
	}
	if (ds.err) {
		cli_error("%s", ds.errmsg);
		sm->error = ds.errmsg;
		runtime = 1;
	}
	/* outputs: all of them, complete, or none */
	if (o->cfg.output) {
		int commit = !runtime && pl_out_complete(&ds);
		if ((err = pl_out_finish(&ds, commit, msg, sizeof(msg))) < 0) {
			cli_error("%s", msg);
			wsn_text_escape(msg, sizeof(msg), cli_last_error()); /* as printed: escaped, whole characters */
			sm->error = msg;
			runtime = 1;
		} else {
			sm->output_written = commit;
			if (!commit && !runtime) /* a warning, not a note: -q does not hide it */
				cli_warn("run: output '%s' not written: the first pass over the dataset did not complete",
					 o->cfg.output);
		}
	}
	sm->ds = &ds;
	sm->wall = run.t_end - run.t_start;
	sm->e2e_rows_s = sm->wall > 0 ? (double)sm->rows / sm->wall : 0;
	report_aggregate(&run, sm->agg, sm->rates);
	sm->ratio = report_e2e_ratio(o, &run, sm->agg, sm->e2e_rows_s, &sm->slowest);
	sm->nt = report_check_thresholds(o, &run, sm->rates, sm->t, (int)(sizeof(sm->t) / sizeof(sm->t[0])));
	for (int i = 0; i < sm->nt; i++)
		if (!sm->t[i].pass) {
			missed = 1;
			if (sm->t[i].measured)
				fprintf(stderr, "%s: run: threshold missed: %s %g: %s %.4g %s\n", cli_prog, sm->t[i].option,
					sm->t[i].limit, sm->t[i].what, sm->t[i].value, sm->t[i].unit);
			else
				fprintf(stderr, "%s: run: threshold missed: %s %g: %s was not measured\n", cli_prog,
					sm->t[i].option, sm->t[i].limit, sm->t[i].what);
		}
	sm->threshold_missed = missed;
	sm->status = runtime ? EXIT_RUNTIME : (sm->vbad || missed) ? EXIT_MISMATCH : EXIT_PASS;
	if (verified_batches)
		*verified_batches += sm->vb;
	if (o->html && !collect)
		o->kept = report_json(o, &run, sm);
	if (collect)
		json_array_append_new(collect, report_json(o, &run, sm));
	else if (o->json)
		cli_json_print(report_json(o, &run, sm));
	else
		report_text(o, &run, sm);
	fflush(stdout);
	ret = sm->status;
	reported = 1;
out:
	if (ret == EXIT_RUNTIME && !reported && (collect || o->json)) {
		/* no report to carry the error: --json still gets an object, with the message printed on stderr */
		json_t *j = json_object();
		json_object_set_new(j, "input", o->input ? cli_json_text(o->input) : json_null());
		json_object_set_new(j, "result", json_string("error"));
		json_object_set_new(j, "error", json_string(cli_last_error()));
		if (collect)
			json_array_append_new(collect, j);
		else
			cli_json_print(j);
	}
	if (ds.n)
		pl_out_finish(&ds, 0, msg, sizeof(msg)); /* whatever is left was not committed */
	pl_run_free(&run);
	free(run.res);
	pl_dataset_free(&ds);
	pthread_mutex_destroy(&ds.lock);
	free(sm);
	return ret;
}

static int rm_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[4096];

	if (d) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) < (int)sizeof(p))
				unlink(p);
		}
		closedir(d);
	}
	return rmdir(dir);
}

/* The demo's --json object: the runs so far, and after a runtime error its message. Takes runs. */
static void demo_json(json_t *runs, int interrupted, int verified, int ran, int ret)
{
	const char *res = ret == EXIT_PASS ? (verified ? "pass" : "unverified") : ret == EXIT_MISMATCH ? "mismatch" : "error";
	json_t *root = json_object(), *r;
	size_t i;

	if (ret == EXIT_MISMATCH) { /* as the runs say: a threshold missed where no batch mismatched */
		res = "threshold";
		json_array_foreach(runs, i, r) {
			const char *one = json_string_value(json_object_get(r, "result"));
			if (one && !strcmp(one, "mismatch"))
				res = "mismatch";
		}
	}
	json_object_set_new(root, "demo", json_true());
	json_object_set_new(root, "runs", runs);
	json_object_set_new(root, "interrupted", json_boolean(interrupted));
	json_object_set_new(root, "verified", json_boolean(verified));
	json_object_set_new(root, "ops_completed", json_integer(ran));
	json_object_set_new(root, "result", json_string(res));
	if (ret == EXIT_RUNTIME && cli_last_error()[0])
		json_object_set_new(root, "error", json_string(cli_last_error()));
	cli_json_print(root);
}

/* The demo: all four ops on a small generated input set, on the best device present. */
static int run_demo(struct run_opts *o)
{
	const char *tmp = getenv("TMPDIR");
	struct wsn_device *dev = NULL;
	struct wsn_device_info di;
	char dir[4096], path[4200];
	json_t *runs = o->json ? json_array() : NULL;
	int64_t rows, hidden;
	int ret = EXIT_PASS, r, verbose = cli_verbose, interrupted = 0, ran = 0, verified;
	int64_t vb = 0;
	enum wsn_dtype dt = o->have_dt ? o->dt : WSN_BF16;
	int slots[WSN_OP_COUNT + 1], nslots = 0; /* what a second signal removes: the directory, the inputs */

	if ((r = cli_open_device("run", o->device, o->cfg.threads, &dev))) {
		if (o->json && r == EXIT_RUNTIME)
			demo_json(runs, 0, 0, 0, r);
		else
			json_decref(runs);
		return r;
	}
	wsn_device_info(dev, &di);
	wsn_device_close(dev);
	/* a GPU gets an input big enough to fill it; the CPU one that finishes in a moment */
	rows = di.exec_mem == WSN_MEM_HOST ? 2048 : 16384;
	hidden = di.exec_mem == WSN_MEM_HOST ? 1024 : 4096;
	snprintf(dir, sizeof(dir), "%s/wsnorm-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		cli_error("run --demo: cannot create a temporary directory in %s: %s", tmp && *tmp ? tmp : "/tmp",
			  strerror(errno));
		if (o->json)
			demo_json(runs, 0, 0, 0, EXIT_RUNTIME);
		return EXIT_RUNTIME;
	}
	slots[nslots++] = cli_cleanup_add(dir, 1);
	if (!o->json && cli_verbose >= 0) /* informational: -q leaves the results alone */
		printf("wsnorm demo: %lld x %lld %s inputs in %s, device %s (%s)\n\n", (long long)rows,
		       (long long)hidden, wsn_dtype_name(dt), dir, di.spec, di.name);
	for (int op = 0; op < WSN_OP_COUNT && !interrupted; op++) {
		struct run_opts one = *o;

		snprintf(path, sizeof(path), "%s/%s.safetensors", dir, wsn_op_name((enum wsn_op)op));
		slots[nslots++] = cli_cleanup_add(path, 0);
		cli_verbose = -1; /* the generator's notes are not the demo's business */
		r = cli_gen_file((enum wsn_op)op, dt, rows, hidden, CLI_DEFAULT_SEED + (uint64_t)op, path);
		cli_verbose = verbose;
		if (r) {
			ret = r;
			break;
		}
		one.input = path;
		one.op = (enum wsn_op)op;
		one.have_op = 1;
		one.have_dt = 0;
		r = run_one(&one, runs, &interrupted, &vb);
		ran += !interrupted && r != EXIT_RUNTIME; /* ran to its end, whatever it found */
		if (!o->json)
			printf("\n");
		if (r > ret)
			ret = r;
		if (r == EXIT_RUNTIME)
			break;
	}
	rm_tree(dir);
	while (nslots > 0)
		cli_cleanup_drop(slots[--nslots]);
	verified = report_checked(o, vb); /* a signal in the first op's first batch leaves nothing verified */
	if (o->json) {
		demo_json(runs, interrupted, verified, ran, ret);
	} else if (ret == EXIT_PASS && interrupted) {
		/* PASS would say the node is good: it says only that what ran did not fail */
		printf("demo result: INTERRUPTED after %d of %d ops (%s)\n", ran, WSN_OP_COUNT,
		       verified ? "no failure in those" : "not verified");
	} else if (ret == EXIT_PASS && !verified) {
		printf("demo result: done (not verified)\n");
	} else {
		printf("demo result: %s\n", ret == EXIT_PASS ? "PASS" : ret == EXIT_MISMATCH ? "FAIL" : "ERROR");
	}
	return ret;
}

/* ---- options ---- */

enum {
	OPT_INPUT = 256, OPT_OP, OPT_DTYPE, OPT_DEVICE, OPT_DEVICES, OPT_OUTPUT, OPT_JSON, OPT_THREADS,
	OPT_VERIFY_ROWS, OPT_NO_VERIFY, OPT_VERIFY_EVERY, OPT_QD, OPT_BS, OPT_DIRECT, OPT_SQPOLL, OPT_APPROACH,
	OPT_SHAPE, OPT_EPS, OPT_DEMO, OPT_INJECT_MISMATCH, OPT_INJECT_FAULT, OPT_RING, OPT_BATCH_ROWS,
	OPT_ITERATIONS, OPT_DURATION, OPT_KERNEL_LOOPS, OPT_MIN_READ, OPT_MIN_H2D, OPT_MIN_KFRAC, OPT_COPY_SIZE,
	OPT_STANDALONE, OPT_READ_ONLY, OPT_AUTOTUNE, OPT_MAX_SPREAD, OPT_FAULT_RANK, OPT_NODE_REPORT,
	OPT_INJECT_SLOW, OPT_HTML,
};

static int parse_threshold(const char *opt, const char *arg, double *out)
{
	float v;

	if (cli_parse_f32(arg, FLT_MAX, &v) || !(v > 0))
		return cli_usage_error("run", "bad %s '%s' (expected a positive number up to %g)", opt, arg, (double)FLT_MAX);
	*out = v;
	return 0;
}

int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "input", required_argument, NULL, OPT_INPUT },
		{ "op", required_argument, NULL, OPT_OP },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "devices", required_argument, NULL, OPT_DEVICES },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "threads", required_argument, NULL, OPT_THREADS },
		{ "verify-rows", required_argument, NULL, OPT_VERIFY_ROWS },
		{ "no-verify", no_argument, NULL, OPT_NO_VERIFY },
		{ "verify-every", required_argument, NULL, OPT_VERIFY_EVERY },
		{ "qd", required_argument, NULL, OPT_QD },
		{ "bs", required_argument, NULL, OPT_BS },
		{ "direct", required_argument, NULL, OPT_DIRECT },
		{ "sqpoll", no_argument, NULL, OPT_SQPOLL },
		{ "approach", required_argument, NULL, OPT_APPROACH },
		{ "autotune", no_argument, NULL, OPT_AUTOTUNE },
		{ "shape", required_argument, NULL, OPT_SHAPE },
		{ "eps", required_argument, NULL, OPT_EPS },
		{ "demo", no_argument, NULL, OPT_DEMO },
		{ "inject-mismatch", no_argument, NULL, OPT_INJECT_MISMATCH },
		{ "inject-fault", required_argument, NULL, OPT_INJECT_FAULT },
		{ "inject-slow", required_argument, NULL, OPT_INJECT_SLOW },
		{ "html", required_argument, NULL, OPT_HTML },
		{ "ring", required_argument, NULL, OPT_RING },
		{ "batch-rows", required_argument, NULL, OPT_BATCH_ROWS },
		{ "iterations", required_argument, NULL, OPT_ITERATIONS },
		{ "duration", required_argument, NULL, OPT_DURATION },
		{ "kernel-loops", required_argument, NULL, OPT_KERNEL_LOOPS },
		{ "min-read-gbs", required_argument, NULL, OPT_MIN_READ },
		{ "min-h2d-gbs", required_argument, NULL, OPT_MIN_H2D },
		{ "min-kernel-frac", required_argument, NULL, OPT_MIN_KFRAC },
		{ "copy-size", required_argument, NULL, OPT_COPY_SIZE },
#ifdef WSN_MPI
		{ "max-spread", required_argument, NULL, OPT_MAX_SPREAD },
		{ "fault-rank", required_argument, NULL, OPT_FAULT_RANK },
		{ "node-report", required_argument, NULL, OPT_NODE_REPORT },
#endif
		{ "standalone", no_argument, NULL, OPT_STANDALONE },
		{ "read-only", no_argument, NULL, OPT_READ_ONLY },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_opts o;
	int demo = 0, have_device = 0, c, ret, interrupted = 0;
	const char *device_opt = NULL; /* the last option that only a device stage uses */
	int64_t v;
	uint64_t u;

	memset(&o, 0, sizeof(o));
	o.device = "auto";
	o.cfg.verify_rows = CLI_DEFAULT_VERIFY_ROWS;
	o.cfg.verify_every = PL_DEFAULT_VERIFY_EVERY;
	o.cfg.ring = PL_DEFAULT_RING;
	o.cfg.kernel_loops = PL_DEFAULT_KERNEL_LOOPS;
	o.cfg.inject_fault = -1;
	o.fault_rank = -1;
	wsn_reader_options_init(&o.cfg.rd);
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		switch (c) {
		case OPT_INPUT:
			if (!*optarg)
				return cli_usage_error("run", "--input needs a path (got an empty one)");
			if (o.input) /* the last would win, and the files before it would silently not run */
				return cli_usage_error("run", "--input given twice ('%s', '%s'): name several files as "
						       "one comma-separated list", o.input, optarg);
			o.input = optarg;
			break;
		case OPT_OP:
			if (wsn_op_parse(optarg, &o.op) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_op = 1;
			break;
		case OPT_DTYPE:
			if (wsn_dtype_parse(optarg, &o.dt) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			o.have_dt = 1;
			break;
		case OPT_DEVICE:
			if (wsn_device_spec_parse(optarg, NULL, NULL) < 0)
				return cli_usage_error("run", "bad --device '%s' (expected auto, cpu, cuda[:N] or amd[:N])",
						       optarg);
			o.device = optarg;
			have_device = 1;
			break;
		case OPT_DEVICES:
			if (o.devices)
				return cli_usage_error("run", "--devices given twice ('%s', '%s'): name them as one "
						       "comma-separated list", o.devices, optarg);
			o.devices = optarg;
			break;
		case OPT_OUTPUT:
			if (!*optarg)
				return cli_usage_error("run", "--output needs a path (got an empty one)");
			o.cfg.output = optarg;
			break;
		case OPT_JSON: o.json = 1; break;
		case OPT_THREADS:
			if (cli_parse_count(optarg, 1, CLI_MAX_THREADS, &v))
				return cli_usage_error("run", "bad --threads '%s' (expected 1..%d)", optarg, CLI_MAX_THREADS);
			o.cfg.threads = (int)v;
			break;
		case OPT_VERIFY_ROWS:
			if (cli_parse_i64(optarg, 0, 1 << 20, &o.cfg.verify_rows))
				return cli_usage_error("run", "bad --verify-rows '%s' (expected 0..%d)", optarg, 1 << 20);
			device_opt = "--verify-rows";
			break;
		case OPT_NO_VERIFY:
			o.cfg.verify_rows = 0;
			device_opt = "--no-verify";
			break;
		case OPT_VERIFY_EVERY:
			if (cli_parse_count(optarg, 1, INT64_MAX, &o.cfg.verify_every))
				return cli_usage_error("run", "bad --verify-every '%s' (expected a positive count)", optarg);
			device_opt = "--verify-every";
			break;
		case OPT_QD:
			if (cli_parse_count(optarg, 1, 4096, &v))
				return cli_usage_error("run", "bad --qd '%s' (expected 1..4096)", optarg);
			o.cfg.rd.queue_depth = (unsigned)v;
			break;
		case OPT_BS:
			if (cli_parse_size(optarg, &u) || u < 4096 || u > (64u << 20) || u % 4096)
				return cli_usage_error("run", "bad --bs '%s' (expected 4K..64M, a multiple of 4K)", optarg);
			o.cfg.rd.block_size = (size_t)u;
			break;
		case OPT_DIRECT:
			if (!strcmp(optarg, "auto"))
				o.cfg.rd.direct = -1;
			else if (!strcmp(optarg, "on"))
				o.cfg.rd.direct = 1;
			else if (!strcmp(optarg, "off"))
				o.cfg.rd.direct = 0;
			else
				return cli_usage_error("run", "bad --direct '%s' (expected auto, on or off)", optarg);
			break;
		case OPT_SQPOLL: o.cfg.rd.sqpoll = 1; break;
		case OPT_APPROACH:
			if (wsn_approach_parse(optarg, &o.cfg.approach) < 0)
				return cli_usage_error("run", "%s", wsn_last_error());
			device_opt = "--approach";
			break;
		case OPT_AUTOTUNE:
			o.cfg.autotune = 1;
			device_opt = "--autotune";
			break;
		case OPT_SHAPE: {
			char *xp = strchr(optarg, 'x');
			if (!xp)
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN)", optarg);
			*xp = '\0';
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o.raw_rows) ||
			    cli_parse_i64(xp + 1, 1, CLI_MAX_HIDDEN, &o.raw_hidden)) {
				*xp = 'x';
				return cli_usage_error("run", "bad --shape '%s' (expected ROWSxHIDDEN: rows 1..2^40, hidden "
						       "1..%d)", optarg, CLI_MAX_HIDDEN);
			}
			*xp = 'x';
			break;
		}
		case OPT_EPS:
			if (cli_parse_eps(optarg, &o.eps))
				return cli_usage_error("run", "bad --eps '%s' (expected 0 < eps <= 1, from 1.4e-45, the least positive float)", optarg);
			o.have_eps = 1;
			break;
		case OPT_DEMO: demo = 1; break;
		case OPT_INJECT_MISMATCH: o.cfg.inject_mismatch = 1; break;
		case OPT_INJECT_FAULT:
			if (cli_parse_count(optarg, 0, PL_MAX_DEVICES - 1, &v))
				return cli_usage_error("run", "bad --inject-fault '%s' (expected a device index)", optarg);
			o.cfg.inject_fault = (int)v;
			break;
		case OPT_RING:
			if (cli_parse_count(optarg, 1, PL_MAX_RING, &v))
				return cli_usage_error("run", "bad --ring '%s' (expected 1..%d)", optarg, PL_MAX_RING);
			o.cfg.ring = (int)v;
			break;
		case OPT_BATCH_ROWS:
			if (cli_parse_i64(optarg, 1, CLI_MAX_ROWS, &o.cfg.batch_rows))
				return cli_usage_error("run", "bad --batch-rows '%s' (expected 1..%lld)", optarg,
						       (long long)CLI_MAX_ROWS);
			o.have_batch_rows = 1;
			break;
		case OPT_ITERATIONS:
			if (cli_parse_count(optarg, 1, INT64_MAX, &v))
				return cli_usage_error("run", "bad --iterations '%s' (expected a positive count)", optarg);
			o.cfg.iterations = (uint64_t)v;
			break;
		case OPT_DURATION:
			if (cli_parse_duration(optarg, &o.cfg.duration))
				return cli_usage_error("run", "bad --duration '%s' (expected e.g. 90, 90s, 5m or 1h)", optarg);
			break;
		case OPT_KERNEL_LOOPS:
			if (cli_parse_count(optarg, 1, 1000000, &v))
				return cli_usage_error("run", "bad --kernel-loops '%s' (expected 1..1000000)", optarg);
			o.cfg.kernel_loops = (int)v;
			device_opt = "--kernel-loops";
			break;
		case OPT_MIN_READ:
			if ((ret = parse_threshold("--min-read-gbs", optarg, &o.min_read_gbs)))
				return ret;
			break;
		case OPT_MIN_H2D:
			if ((ret = parse_threshold("--min-h2d-gbs", optarg, &o.min_h2d_gbs)))
				return ret;
			break;
		case OPT_MIN_KFRAC: {
			float f;
			/* above 1 (90 meant as a percentage) could never pass */
			if (cli_parse_f32(optarg, FLT_MAX, &f) || !(f > 0) || f > 1)
				return cli_usage_error("run", "bad --min-kernel-frac '%s' (expected a fraction of the copy "
						       "bandwidth, 0 < f <= 1: 0.9 for 90 %%)", optarg);
			o.min_kernel_frac = f;
			break;
		}
		case OPT_COPY_SIZE:
			if (cli_parse_size(optarg, &o.cfg.copy_bytes) || o.cfg.copy_bytes < 4096)
				return cli_usage_error("run", "bad --copy-size '%s' (expected at least 4K)", optarg);
			break;
		case OPT_HTML:
			if (!*optarg)
				return cli_usage_error("run", "--html needs a path (got an empty one)");
			o.html = optarg;
			break;
		case OPT_INJECT_SLOW: {
			float f;
			if (cli_parse_f32(optarg, 1000, &f) || !(f > 1))
				return cli_usage_error("run", "bad --inject-slow '%s' (expected a factor, 1 < F <= 1000)", optarg);
			o.cfg.inject_slow = f;
			break;
		}
		case OPT_MAX_SPREAD: {
			float f;
			if (cli_parse_f32(optarg, FLT_MAX, &f) || !(f >= 1))
				return cli_usage_error("run", "bad --max-spread '%s' (expected a ratio of at least 1: 1.2 lets "
						       "the fastest GPU be 20 %% ahead of the slowest)", optarg);
			o.max_spread = f;
			break;
		}
		case OPT_FAULT_RANK:
			if (cli_parse_u64(optarg, &u) || u > INT32_MAX)
				return cli_usage_error("run", "bad --fault-rank '%s' (expected a rank)", optarg);
			o.fault_rank = (int)u;
			break;
		case OPT_NODE_REPORT:
			if (!*optarg)
				return cli_usage_error("run", "--node-report needs a directory (got an empty one)");
			o.node_report = optarg;
			break;
		case OPT_STANDALONE: o.cfg.standalone = 1; break;
		case OPT_READ_ONLY: o.cfg.read_only = 1; break;
		case 'h': usage(stdout); return EXIT_PASS;
		case ':':
		default: return cli_option_error("run", c, argv, opts);
		}
	}
	if (optind < argc)
		return cli_usage_error("run", "unexpected argument '%s'", argv[optind]);
	if (o.devices && have_device)
		return cli_usage_error("run", "--device and --devices exclude each other");
	if (demo && (o.input || o.cfg.output || o.raw_rows || o.devices || o.html))
		return cli_usage_error("run", "--demo makes its own input: drop --input, --output, --shape, --devices "
				       "and --html");
	if (o.raw_rows && (!o.have_op || wsn_op_is_backward(o.op)))
		return cli_usage_error("run", "--shape reads raw files that hold only x: give a forward --op");
	if (o.raw_rows && !o.have_dt)
		return cli_usage_error("run", "--shape needs --dtype");
	if (o.cfg.read_only && (o.cfg.output || o.cfg.inject_mismatch || o.cfg.inject_fault >= 0 ||
				o.cfg.inject_slow > 1 || o.min_h2d_gbs > 0 || o.min_kernel_frac > 0 || device_opt))
		return cli_usage_error("run", "--read-only runs no device stage: drop %s", device_opt ? device_opt :
				       "--output, --inject-*, --min-h2d-gbs and --min-kernel-frac");
	if (o.cfg.duration == 0 && o.cfg.iterations == 0)
		o.cfg.iterations = 1;
	if (o.fault_rank >= 0 && o.cfg.inject_fault < 0 && !(o.cfg.inject_slow > 1))
		return cli_usage_error("run", "--fault-rank picks the rank of --inject-fault or --inject-slow: give one");
	if (demo && o.have_op)
		return cli_usage_error("run", "--demo runs each of the four ops: drop --op");
	if (!demo && !o.input)
		return cli_usage_error("run", "--input is required (or --demo)");
	signals_block(); /* first: threads started from here on, MPI's among them, inherit the mask */
#ifdef WSN_MPI
	if ((ret = fleet_mpi_begin(&o, demo)))
		return ret;
	if (demo)
		return fleet_mpi_done(run_demo(&o));
	{
		json_t *reports = json_array();
		ret = run_one(&o, reports, &interrupted, NULL);
		ret = fleet_mpi_end(&o, json_array_get(reports, 0), ret);
		json_decref(reports);
	}
	return ret;
#else
	if (demo)
		return run_demo(&o);
	ret = run_one(&o, NULL, &interrupted, NULL);
	if (o.kept) { /* the page: this node as a fleet of one */
		char host[256] = "localhost", msg[512];
		struct fleet_info fi = { .prog = cli_prog, .ranks = 1, .nodes = 1, .per_node = 1, .library = "none (wsnorm)" };
		struct fleet_rank r = { .node = host, .status = ret, .report = o.kept };
		json_t *doc = NULL;

		gethostname(host, sizeof(host) - 1);
		fleet_report(&fi, &r, 1, &doc, NULL, NULL);
		if (fleet_html_write(o.html, doc, msg, sizeof(msg)) < 0)
			ret = cli_error("run: %s", msg);
		json_decref(doc);
		json_decref(o.kept);
	}
	return ret;
#endif
}
