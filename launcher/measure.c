/* SPDX-License-Identifier: MIT */
/* launcher/measure.c: each stage measured alone, before the pipelined run. */
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

#define ALONE_SECONDS 0.2 /* how long a stage measured alone is repeated, at least */
#define ALONE_MIN_REPS 3
#define ALONE_MAX_REPS 1000000

static int reps_for(double t)
{
	double r = t > 0 ? ALONE_SECONDS / t : 1000; /* a step too short for the clock: many */
	return r < ALONE_MIN_REPS ? ALONE_MIN_REPS : r > ALONE_MAX_REPS ? ALONE_MAX_REPS : (int)r;
}

/* One step of a stage measured alone on slot 0, on stream s, timed with the slot's events. */
static int alone_step(struct pl_dev *d, int stage, int reps, double *seconds)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_slot *sl = &d->slots[0];
	int64_t rows = sl->b.rows;
	struct wsn_stream *s = stage == ST_H2D ? d->cs : stage == ST_D2H ? d->os : d->ks;
	struct wsn_args a;
	float ms = 0;
	int err;

	pl_slot_args(d, sl, &a);
	if ((err = wsn_event_record(sl->ev[E_K0], s)) < 0)
		return err;
	for (int r = 0; r < reps; r++) {
		if (stage == ST_H2D) {
			for (int i = 0; i < PL_NIN && !err; i++)
				if (sh->in[i])
					err = wsn_memcpy(d->dev, pl_dev_in(d, sl, i), pl_host_in(d, sl, i), pl_in_bytes(sh, i, rows),
							 WSN_COPY_H2D, s);
		} else if (stage == ST_D2H) {
			for (int i = 0; i < PL_NOUT && !err; i++)
				if (sh->out[i])
					err = wsn_memcpy(d->dev, sl->hout + d->out_off[i], pl_dev_out(d, sl, i),
							 pl_out_bytes(sh, i, rows), WSN_COPY_D2H, s);
		} else {
			for (int l = 0; l < d->run->cfg->kernel_loops && !err; l++)
				err = wsn_plan_execute(d->plan, &a, s);
		}
		if (err < 0)
			return err;
	}
	if ((err = wsn_event_record(sl->ev[E_K1], s)) < 0 || (err = wsn_event_sync(sl->ev[E_K1])) < 0 ||
	    (err = wsn_event_elapsed(sl->ev[E_K0], sl->ev[E_K1], &ms)) < 0)
		return err;
	*seconds = ms * 1e-3 / reps;
	return 0;
}

/* reps verifications of slot 0's batch on the CPU device cpu; *seconds per verification. */
static int verify_alone(struct pl_dev *d, struct wsn_device *cpu, int reps, double *seconds, char *msg, size_t len)
{
	double t0 = cli_now();
	int err = 0;

	for (int i = 0; i < reps && err >= 0; i++)
		err = pl_verify_batch(d, cpu, &d->slots[0], msg, len);
	*seconds = (cli_now() - t0) / reps;
	return err;
}

/*
 * Each device stage alone on the first batch (read into slot 0 by the reader): copies in, the
 * kernel (all its loops), copies out, and one verification; rates in rows/s of that batch.
 */
int pl_measure_alone(struct pl_dev *d, char *msg, size_t len)
{
	const struct pl_shape *sh = &d->run->ds->shape;
	struct pl_devres *res = d->res;
	struct pl_slot *sl = &d->slots[0];
	double rows = (double)sl->b.rows, in_b = 0, out_b = 0, t = 0;
	static const int stages[] = { ST_H2D, ST_KERNEL, ST_D2H };
	struct wsn_device *cpu = NULL;
	int err;

	if (sl->b.rows <= 0)
		return 0; /* nothing was read */
	for (int i = 0; i < PL_NIN; i++)
		in_b += (double)pl_in_bytes(sh, i, sl->b.rows);
	for (int i = 0; i < PL_NOUT; i++)
		out_b += (double)pl_out_bytes(sh, i, sl->b.rows);
	for (size_t k = 0; k < sizeof(stages) / sizeof(stages[0]); k++) {
		int st = stages[k];
		double bytes = st == ST_H2D ? in_b : st == ST_D2H ? out_b :
			       (double)wsn_op_min_bytes(sh->op, sl->b.rows, sh->hidden, sh->dt, sh->has_weight,
							sh->has_bias) * d->run->cfg->kernel_loops;

		if (d->host && st != ST_KERNEL)
			continue;
		if ((err = alone_step(d, st, 1, &t)) < 0 || (err = alone_step(d, st, reps_for(t), &t)) < 0) {
			pl_errf(msg, len, err, "run: %s alone on %s", pl_stage_names[st], res->spec);
			return err;
		}
		if (t > 0) {
			res->st[st].alone_rows_s = rows / t;
			res->st[st].alone_gbs = bytes / t / 1e9;
		}
	}
	sl->verify = 1;
	if (d->run->cfg->verify_rows > 0 && !d->run->cfg->inject_mismatch) {
		struct pl_devres save = *res; /* the pipeline's counts must not include these checks */

		/* once, then repeated for ALONE_SECONDS, as alone_step does for the other stages */
		if ((err = pl_verify_cpu(d, &cpu, msg, len)) < 0 || (err = verify_alone(d, cpu, 1, &t, msg, len)) < 0 ||
		    (err = verify_alone(d, cpu, reps_for(t), &t, msg, len)) < 0) {
			wsn_device_close(cpu);
			return err;
		}
		memcpy(res->v, save.v, sizeof(res->v));
		res->nv = save.nv;
		res->verified_batches = save.verified_batches;
		res->mismatched_batches = save.mismatched_batches;
		res->verified_rows = save.verified_rows;
		memcpy(res->first_mismatch, save.first_mismatch, sizeof(res->first_mismatch));
		if (t > 0)
			res->st[ST_VERIFY].alone_rows_s = rows * (double)d->run->cfg->verify_every / t;
		wsn_device_close(cpu);
	}
	return 0;
}

/* Whether WSNORM_RUN_COPIES asks a host-memory device to run the pipeline as a GPU would. */
