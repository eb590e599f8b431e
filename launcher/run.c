/* SPDX-License-Identifier: MIT */
/* launcher/run.c: the run's lifecycle: one thread per device, start, stop, join and free. */
#include "ring.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int emulate_copies(void)
{
	const char *e = getenv("WSNORM_RUN_COPIES");
	return e && *e && strcmp(e, "0");
}

/* The run starts: its clock and its deadline (under run->mu). */
static void start_run(struct pl_run *run)
{
	run->go = 1;
	run->t_start = cli_now();
	pthread_mutex_lock(&run->ds->lock);
	if (run->cfg->duration > 0)
		run->ds->deadline = run->t_start + run->cfg->duration;
	pthread_mutex_unlock(&run->ds->lock);
	pthread_cond_broadcast(&run->cv);
}

/* Every device is set up (or the deadline passed): start the run, or mark it ready when held (under run->mu). */
static void set_up(struct pl_run *run)
{
	if (run->hold)
		run->all_ready = 1;
	else
		start_run(run);
}

/*
 * Every device arrives once, set up or failed: when the last one has, the run starts (and its
 * deadline with it). A device still setting up SETUP_WAIT_S after the first arrived is not waited
 * for, so one stuck in its driver does not hold the others.
 */
#define SETUP_WAIT_S 60
static void arrive(struct pl_run *run, int wait)
{
	struct timespec ts;

	pthread_mutex_lock(&run->mu);
	if (++run->ready == 1) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		run->setup_deadline = ts;
		run->setup_deadline.tv_sec += SETUP_WAIT_S;
	}
	if (run->ready == run->ndev && !run->go)
		set_up(run);
	while (wait && !run->go) {
		if (run->all_ready) /* held: pl_run_go starts it */
			pthread_cond_wait(&run->cv, &run->mu);
		else if (pthread_cond_timedwait(&run->cv, &run->mu, &run->setup_deadline) == ETIMEDOUT && !run->go)
			set_up(run);
	}
	pthread_mutex_unlock(&run->mu);
}

int pl_run_sample(struct pl_run *run)
{
	int w = 1 + run->ndev;

	if (run->nsamples == run->sample_cap) {
		int cap = run->sample_cap ? 2 * run->sample_cap : 64;
		double *v = cap < (1 << 24) / w ? realloc(run->samples, (size_t)cap * (size_t)w * sizeof(*v)) : NULL;
		if (!v)
			return -1;
		run->samples = v;
		run->sample_cap = cap;
	}
	double *x = run->samples + (size_t)run->nsamples++ * (size_t)w;
	x[0] = cli_now() - run->t_start;
	for (int i = 0; i < run->ndev; i++)
		x[1 + i] = (double)atomic_load(&run->res[i].live_rows);
	return 0;
}

void pl_run_go(struct pl_run *run)
{
	pthread_mutex_lock(&run->mu);
	if (!run->go)
		start_run(run);
	pthread_mutex_unlock(&run->mu);
}

int pl_run_all_ready(struct pl_run *run)
{
	int r;

	pthread_mutex_lock(&run->mu);
	r = run->all_ready || run->go;
	pthread_mutex_unlock(&run->mu);
	return r;
}

static void *device_main(void *arg)
{
	struct pl_dev *d = arg;
	struct pl_run *run = d->run;
	const struct pl_config *cfg = run->cfg;
	const struct pl_shape *sh = &run->ds->shape;
	struct pl_devres *res = d->res;
	void *(*const mains[])(void *) = { pl_submit_main, pl_complete_main, pl_verify_main, pl_write_main };
	pthread_t reader, stages[4];
	int have_reader = 0, nstages = 0, arrived = 0, err;
	char msg[PL_ERRLEN];
	uint64_t one = 1;
	double t0;

	if ((err = wsn_device_open(res->spec, &d->dev)) < 0 ||
	    (cfg->threads > 0 && (err = wsn_device_set_threads(d->dev, cfg->threads)) < 0)) {
		char index[16] = ""; /* named by its index in --devices, when there is a list */

		if (d->run->ndev > 1)
			snprintf(index, sizeof(index), "%d ", res->index);
		pl_errf(msg, sizeof(msg), err, "run: cannot open device %s'%s'", index, res->spec);
		pl_dev_fail(d, msg);
		goto out;
	}
	wsn_device_info(d->dev, &d->di);
	snprintf(res->spec, sizeof(res->spec), "%s", d->di.spec);
	snprintf(res->name, sizeof(res->name), "%s", d->di.name);
	/* WSNORM_RUN_COPIES=1: a host-memory device runs the GPU path (own buffers, copies, events) */
	d->host = res->host_mem = d->di.exec_mem == WSN_MEM_HOST && !emulate_copies();
	d->fault_armed = cfg->inject_fault == res->index;
	if (!cfg->read_only) {
		struct wsn_plan_options po;

		wsn_plan_options_init(&po, sh->op);
		po.eps = sh->eps;
		po.has_weight = sh->has_weight;
		po.has_bias = sh->has_bias;
		po.approach = cfg->approach;
		po.autotune = cfg->autotune;
		po.threads = cfg->threads;
		if ((err = wsn_plan_create(d->dev, sh->op, cfg->batch_rows, sh->hidden, sh->dt, &po, &d->plan)) < 0) {
			pl_errf(msg, sizeof(msg), err, "run: cannot plan %s %s hidden %lld, %lld rows on %s (%s)",
			     wsn_op_name(sh->op), wsn_dtype_name(sh->dt), (long long)sh->hidden,
			     (long long)cfg->batch_rows, res->spec, res->name);
			pl_dev_fail(d, msg);
			goto out;
		}
		wsn_plan_describe(d->plan, res->plan, sizeof(res->plan));
	}
	if ((err = wsn_stream_create(d->dev, &d->cs)) < 0 || (err = wsn_stream_create(d->dev, &d->ks)) < 0 ||
	    (err = wsn_stream_create(d->dev, &d->os)) < 0) {
		pl_errf(msg, sizeof(msg), err, "run: streams on %s (%s)", res->spec, res->name);
		pl_dev_fail(d, msg);
		goto out;
	}
	if (!cfg->read_only) {
		/* the CPU's default also when WSNORM_RUN_COPIES makes it copy like a GPU */
		uint64_t cb = cfg->copy_bytes ? cfg->copy_bytes :
			      d->di.exec_mem == WSN_MEM_HOST ? PL_DEFAULT_COPY_CPU : PL_DEFAULT_COPY_GPU;
		if ((err = cli_copy_bandwidth(d->dev, d->ks, cb, PL_COPY_ITERS, &res->copy_bps)) < 0) {
			pl_errf(msg, sizeof(msg), err, "run: copy bandwidth of %s (%s)", res->spec, res->name);
			pl_dev_fail(d, msg);
			goto out;
		}
	}
	if ((err = pl_setup_slots(d, msg, sizeof(msg))) < 0) {
		pl_dev_fail(d, msg);
		goto out;
	}
	if (pthread_create(&reader, NULL, pl_reader_main, d)) {
		snprintf(msg, sizeof(msg), "run: %s: cannot start the reader thread", res->spec);
		pl_dev_fail(d, msg);
		goto out;
	}
	have_reader = 1;
	pthread_mutex_lock(&d->mu);
	while (!d->reader_ready && !d->abort)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	if (cfg->standalone && !cfg->read_only && !d->abort && !atomic_load(&run->ds->stop) &&
	    pl_measure_alone(d, msg, sizeof(msg)) < 0) {
		pl_dev_fail(d, msg);
		goto out;
	}
	for (int s = 0; s < d->ring; s++) /* what the stages measured alone left is not a batch */
		d->slots[s].k = -1;
	arrive(run, 1);
	arrived = 1;
	t0 = cli_now();
	for (size_t i = 0; i < sizeof(mains) / sizeof(mains[0]) && !d->abort; i++) {
		if (pthread_create(&stages[i], NULL, mains[i], d)) {
			snprintf(msg, sizeof(msg), "run: %s: cannot start a pipeline thread", res->spec);
			pl_dev_fail(d, msg);
			break;
		}
		nstages++;
	}
	pthread_mutex_lock(&d->mu);
	d->reader_go = 1;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	for (int i = 0; i < nstages; i++)
		pthread_join(stages[i], NULL);
	res->wall = cli_now() - t0;
	if (d->fault_armed && !d->abort && !atomic_load(&run->ds->interrupted)) { /* no batch came: fire all the same */
		snprintf(msg, sizeof(msg), "run: %s (%s): EDRIVER: injected fault (--inject-fault): the device got no "
			 "batch, so it fails at the end of its run", res->spec, res->name);
		pl_dev_fail(d, msg);
	}
out:
	if (!arrived)
		arrive(run, 0);
	if (have_reader) {
		pthread_mutex_lock(&d->mu);
		d->reader_go = 1;
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(reader, NULL);
	}
	if (d->dev && !d->host && d->abort)
		wsn_stream_sync(d->dev, NULL); /* no queued copy or kernel may touch what is freed next */
	pl_free_slots(d);
	wsn_stream_destroy(d->os);
	wsn_stream_destroy(d->ks);
	wsn_stream_destroy(d->cs);
	wsn_plan_destroy(d->plan);
	wsn_device_close(d->dev);
	d->dev = NULL;
	if (res->status != EXIT_RUNTIME)
		res->status = res->mismatched_batches ? EXIT_MISMATCH : EXIT_PASS;
	if (write(run->donefd, &one, sizeof(one)) < 0) {
		/* the main thread then finds the device done when it joins */
	}
	return NULL;
}

/* ---- the run ---- */

int pl_run_start(struct pl_run *run)
{
	pthread_condattr_t ca;

	if (!(run->devs = calloc((size_t)run->ndev, sizeof(*run->devs)))) {
		cli_error("run: out of memory");
		return EXIT_RUNTIME;
	}
	pthread_mutex_init(&run->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&run->cv, &ca);
	pthread_condattr_destroy(&ca);
	for (int i = 0; i < run->ndev; i++) {
		struct pl_dev *d = &run->devs[i];

		d->run = run;
		d->res = &run->res[i];
		d->ring = run->cfg->ring;
		pthread_mutex_init(&d->mu, NULL);
		pthread_cond_init(&d->cv, NULL);
	}
	run->donefd = eventfd(0, EFD_CLOEXEC);
	if (run->donefd < 0) {
		cli_error("run: eventfd: %s", strerror(errno));
		return EXIT_RUNTIME;
	}
	for (int i = 0; i < run->ndev; i++) {
		struct pl_dev *d = &run->devs[i];
		uint64_t one = 1;

		if (!pthread_create(&d->thread, NULL, device_main, d)) {
			d->started = 1;
			continue;
		}
		/* the devices started wait at the barrier for this one: it arrives as failed */
		snprintf(d->res->errmsg, sizeof(d->res->errmsg), "run: device %d '%s': cannot start its thread",
			 d->res->index, d->res->spec);
		d->res->status = EXIT_RUNTIME;
		arrive(run, 0);
		if (write(run->donefd, &one, sizeof(one)) < 0) {
			/* the main thread counts it when it joins */
		}
	}
	return 0;
}

void pl_run_join(struct pl_run *run)
{
	for (int i = 0; i < run->ndev; i++)
		if (run->devs[i].started) {
			pthread_join(run->devs[i].thread, NULL);
			run->devs[i].started = 0;
		}
	run->t_end = cli_now();
}

void pl_run_stop(struct pl_run *run, int interrupted)
{
	if (interrupted)
		atomic_store(&run->ds->interrupted, 1);
	atomic_store(&run->ds->stop, 1);
	for (int i = 0; run->devs && i < run->ndev; i++) {
		pthread_mutex_lock(&run->devs[i].mu);
		pthread_cond_broadcast(&run->devs[i].cv);
		pthread_mutex_unlock(&run->devs[i].mu);
	}
}

void pl_run_free(struct pl_run *run)
{
	for (int i = 0; run->devs && i < run->ndev; i++) {
		pthread_mutex_destroy(&run->devs[i].mu);
		pthread_cond_destroy(&run->devs[i].cv);
	}
	if (run->devs) {
		pthread_mutex_destroy(&run->mu);
		pthread_cond_destroy(&run->cv);
	}
	free(run->devs);
	run->devs = NULL;
	free(run->samples);
	run->samples = NULL;
	run->nsamples = run->sample_cap = 0;
	if (run->donefd >= 0)
		close(run->donefd);
	run->donefd = -1;
}
