/* SPDX-License-Identifier: MIT */
/* launcher/report.c: the `wsnorm run` report: rates, thresholds and verdicts, as text or JSON. */
#include "report.h"


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

const char *report_signal_name(int sig)
{
	return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" :
	       sig == REPORT_FLEET_STOP ? "another rank" : "a signal";
}

static double rate(double bytes, double s)
{
	return s > 0 ? bytes / s / 1e9 : 0;
}

/* The stages of all devices together: bytes and rows summed, rates summed (the devices run side by side). */
void report_aggregate(const struct pl_run *run, struct pl_stage *agg, double *rates)
{
	memset(agg, 0, sizeof(*agg) * ST_N);
	memset(rates, 0, sizeof(*rates) * ST_N);
	for (int i = 0; i < run->ndev; i++)
		for (int s = 0; s < ST_N; s++) {
			const struct pl_stage *st = &run->res[i].st[s];
			agg[s].bytes += st->bytes;
			if (st->busy > agg[s].busy)
				agg[s].busy = st->busy;
			agg[s].batches += st->batches;
			agg[s].rows += st->rows;
			pl_hist_merge(&agg[s].lat, &st->lat);
			agg[s].alone_rows_s += st->alone_rows_s;
			agg[s].alone_gbs += st->alone_gbs;
			rates[s] += rate(st->bytes, st->busy);
		}
}

/* Which stages a run has: no copies on a host-memory device, no device stages with --read-only. */
static int stage_active(const struct run_opts *o, const struct pl_devres *r, int s)
{
	switch (s) {
	case ST_H2D: case ST_D2H: return !r->host_mem && !o->cfg.read_only;
	case ST_KERNEL: return !o->cfg.read_only;
	case ST_VERIFY: return pl_verifies(&o->cfg);
	case ST_WRITE: return o->cfg.output != NULL && !o->cfg.read_only;
	default: return 1;
	}
}

/* The end-to-end rate over the slowest stage measured alone (rows/s). */
double report_e2e_ratio(const struct run_opts *o, const struct pl_run *run, const struct pl_stage *agg, double e2e,
			int *slowest)
{
	double best = 0;

	*slowest = -1;
	for (int s = 0; s < ST_N; s++) {
		if (!stage_active(o, &run->res[0], s) || agg[s].alone_rows_s <= 0)
			continue;
		if (*slowest < 0 || agg[s].alone_rows_s < best) {
			best = agg[s].alone_rows_s;
			*slowest = s;
		}
	}
	return best > 0 ? e2e / best : 0;
}

int report_check_thresholds(const struct run_opts *o, const struct pl_run *run, const double *rates,
			    struct threshold *t, int max)
{
	int n = 0;

	if (o->min_read_gbs > 0 && n < max) {
		struct threshold *x = &t[n++];
		x->option = "--min-read-gbs";
		x->unit = "GB/s";
		snprintf(x->what, sizeof(x->what), "read");
		x->limit = o->min_read_gbs;
		x->value = rates[ST_READ];
		x->measured = run->res[0].st[ST_READ].batches > 0 || run->ndev > 1;
		x->pass = x->measured && x->value >= x->limit;
	}
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		if (o->min_h2d_gbs > 0 && n < max) {
			struct threshold *x = &t[n++];
			x->option = "--min-h2d-gbs";
			x->unit = "GB/s";
			snprintf(x->what, sizeof(x->what), "h2d on %s", r->spec);
			x->limit = o->min_h2d_gbs;
			x->value = rate(r->st[ST_H2D].bytes, r->st[ST_H2D].busy);
			x->measured = r->st[ST_H2D].batches > 0;
			x->pass = x->measured && x->value >= x->limit;
		}
		if (o->min_kernel_frac > 0 && n < max) {
			struct threshold *x = &t[n++];
			x->option = "--min-kernel-frac";
			x->unit = "of the copy bandwidth";
			snprintf(x->what, sizeof(x->what), "kernel on %s", r->spec);
			x->limit = o->min_kernel_frac;
			x->value = r->copy_bps > 0 && r->st[ST_KERNEL].busy > 0 ?
					   r->st[ST_KERNEL].bytes / r->st[ST_KERNEL].busy / r->copy_bps : 0;
			x->measured = r->st[ST_KERNEL].batches > 0 && r->copy_bps > 0;
			x->pass = x->measured && x->value >= x->limit;
		}
	}
	return n;
}

/* ---- the report ---- */

/* Rows stage s counts per dataset row: the kernel's loops for compute (each launch counts), else 1. Its
 * rate alone, measured in dataset rows, is reported times this, in the rows its own rate counts. */
static int stage_rows_per_row(const struct run_opts *o, int s)
{
	return s == ST_KERNEL ? o->cfg.kernel_loops : 1;
}

/* A stage's numbers; per: stage_rows_per_row(). */
static json_t *stage_json(const struct pl_stage *st, double gbs, int per)
{
	json_t *o = json_object();

	json_object_set_new(o, "bytes", json_integer((json_int_t)st->bytes));
	json_object_set_new(o, "seconds", cli_json_real(st->busy));
	json_object_set_new(o, "gbs", cli_json_real(gbs));
	json_object_set_new(o, "batches", json_integer(st->batches));
	json_object_set_new(o, "rows", json_integer(st->rows));
	json_object_set_new(o, "rows_per_s", cli_json_real(st->busy > 0 ? (double)st->rows / st->busy : 0));
	json_object_set_new(o, "p50_ms", cli_json_real(pl_hist_quantile(&st->lat, 0.5) * 1e3));
	json_object_set_new(o, "p99_ms", cli_json_real(pl_hist_quantile(&st->lat, 0.99) * 1e3));
	if (st->alone_rows_s > 0) {
		json_object_set_new(o, "alone_rows_per_s", cli_json_real(st->alone_rows_s * per));
		json_object_set_new(o, "alone_gbs", cli_json_real(st->alone_gbs));
	}
	return o;
}

static json_t *stages_json(const struct run_opts *o, const struct pl_devres *r0, const struct pl_stage *st,
			   const double *rates, double copy_bps)
{
	json_t *j = json_object();

	for (int s = 0; s < ST_N; s++) {
		json_t *x = stage_json(&st[s], rates[s], stage_rows_per_row(o, s));
		if (s == ST_KERNEL) {
			double tbs = rates[s] / 1e3;
			json_object_set_new(x, "tbs", cli_json_real(tbs));
			json_object_set_new(x, "copy_tbs", cli_json_real(copy_bps / 1e12));
			json_object_set_new(x, "fraction_of_copy", cli_json_real(copy_bps > 0 ? tbs * 1e12 / copy_bps : 0));
		}
		json_object_set_new(x, "active", json_boolean(stage_active(o, r0, s)));
		json_object_set_new(j, pl_stage_names[s], x);
	}
	return j;
}

static json_t *verify_json(const struct run_opts *o, const struct pl_verdict *vd, int nv, int64_t batches,
			   int64_t bad, int64_t rows, const char *first)
{
	json_t *v = json_object(), *vt = json_object();

	json_object_set_new(v, "enabled", json_boolean(pl_verifies(&o->cfg)));
	json_object_set_new(v, "rows", json_integer(rows));
	json_object_set_new(v, "batches", json_integer(batches));
	json_object_set_new(v, "mismatched_batches", json_integer(bad));
	for (int i = 0; i < nv; i++) {
		json_t *t = json_object();
		json_object_set_new(t, "rel_l2", cli_json_real(vd[i].rel));
		json_object_set_new(t, "max_abs", cli_json_real(vd[i].max_abs));
		json_object_set_new(t, "tolerance", json_real(vd[i].tol));
		json_object_set_new(t, "nonfinite", json_integer(vd[i].nonfinite));
		json_object_set_new(t, "pass", json_boolean(vd[i].pass));
		json_object_set_new(vt, vd[i].name, t);
	}
	json_object_set_new(v, "tensors", vt);
	json_object_set_new(v, "pass", json_boolean(bad == 0));
	if (first && first[0])
		json_object_set_new(v, "first_mismatch", json_string(first));
	return v;
}

/* A reader's counters: one device's, or every device's summed. */
struct io_view {
	const char *ring_mode;
	struct wsn_read_stats rs;
	struct wsn_reader_buffer_stats bs;
};

static void io_of(const struct pl_devres *r, struct io_view *v)
{
	v->ring_mode = r->ring_mode;
	v->rs = r->rs;
	v->bs = r->bs;
}

static void io_sum(const struct pl_run *run, struct io_view *v)
{
	memset(v, 0, sizeof(*v));
	v->ring_mode = run->res[0].ring_mode;
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		if (!v->ring_mode[0])
			v->ring_mode = r->ring_mode;
		v->rs.bytes += r->rs.bytes;
		v->rs.reads += r->rs.reads;
		v->rs.short_reads += r->rs.short_reads;
		v->rs.direct_files += r->rs.direct_files;
		v->rs.buffered_files += r->rs.buffered_files;
		v->rs.seconds += r->rs.seconds;
		v->bs.registered += r->bs.registered;
		v->bs.fixed += r->bs.fixed;
		v->bs.straight_bytes += r->bs.straight_bytes;
		v->bs.bounce_bytes += r->bs.bounce_bytes;
	}
}

static json_t *io_json(const struct io_view *r)
{
	json_t *io = json_object();

	json_object_set_new(io, "ring_mode", json_string(r->ring_mode));
	json_object_set_new(io, "reads", json_integer((json_int_t)r->rs.reads));
	json_object_set_new(io, "short_reads", json_integer((json_int_t)r->rs.short_reads));
	json_object_set_new(io, "direct_files", json_integer((json_int_t)r->rs.direct_files));
	json_object_set_new(io, "buffered_files", json_integer((json_int_t)r->rs.buffered_files));
	json_object_set_new(io, "straight_bytes", json_integer((json_int_t)r->bs.straight_bytes));
	json_object_set_new(io, "bounce_bytes", json_integer((json_int_t)r->bs.bounce_bytes));
	json_object_set_new(io, "fixed_ring_buffers", json_integer(r->bs.fixed));
	return io;
}

/* Was any of a run's output checked: verification on and a batch verified (none is when a signal
 * stops the run inside its first batch)? Else a pass reads "done (not verified)" / "unverified". */
int report_checked(const struct run_opts *o, int64_t verified_batches)
{
	return pl_verifies(&o->cfg) && verified_batches > 0;
}

/* A run's JSON result: a wrong output outranks a missed threshold, as in the text report. */
static const char *status_name(int status, int verified, int threshold_missed, int64_t mismatched)
{
	return status == EXIT_PASS ? (verified ? "pass" : "unverified") : status == EXIT_RUNTIME ? "error" :
	       threshold_missed && !mismatched ? "threshold" : "mismatch";
}

/* Passes over the dataset begun: the whole ones and, when the cursor stopped inside one, that one. */
static unsigned long long passes_begun(const struct pl_dataset *ds)
{
	return (unsigned long long)ds->pass + (ds->cur > 0 || ds->cur_row > 0);
}

/* Fold one device's verdicts into the run's: per tensor the error nearest its tolerance (with that tolerance),
 * the largest difference, the non-finite values summed, a pass only where every device passed. */
void report_merge_verdicts(struct summary *sm, const struct pl_devres *r)
{
	for (int i = 0; i < r->nv; i++) {
		const struct pl_verdict *d = &r->v[i];
		struct pl_verdict *m = NULL;

		for (int k = 0; k < sm->nv && !m; k++)
			if (!strcmp(sm->v[k].name, d->name))
				m = &sm->v[k];
		if (!m) {
			if (sm->nv == (int)(sizeof(sm->v) / sizeof(sm->v[0])))
				continue;
			sm->v[sm->nv++] = *d;
			continue;
		}
		if (isnan(d->rel) || (!isnan(m->rel) && d->rel * m->tol > m->rel * d->tol)) { /* closer to its limit */
			m->rel = d->rel;
			m->tol = d->tol;
		}
		if (d->max_abs > m->max_abs || isnan(d->max_abs))
			m->max_abs = d->max_abs;
		m->nonfinite += d->nonfinite;
		m->pass = m->pass && d->pass;
	}
}

json_t *report_json(const struct run_opts *o, const struct pl_run *run, const struct summary *sm)
{
	const struct pl_dataset *ds = sm->ds;
	const struct pl_devres *r0 = &run->res[0];
	json_t *j = json_object(), *devs = json_array(), *th = json_array();
	char devlist[PL_MAX_DEVICES * 33] = "";
	struct io_view io;
	int64_t kr = 0;

	for (int i = 0; i < run->ndev; i++) {
		size_t n = strlen(devlist);
		snprintf(devlist + n, sizeof(devlist) - n, "%s%s", i ? "," : "", run->res[i].spec);
		kr += run->res[i].kernel_rows;
	}
	json_object_set_new(j, "op", json_string(wsn_op_name(ds->shape.op)));
	json_object_set_new(j, "dtype", json_string(wsn_dtype_name(ds->shape.dt)));
	json_object_set_new(j, "rows", json_integer(sm->rows));
	json_object_set_new(j, "hidden", json_integer(ds->shape.hidden));
	json_object_set_new(j, "shards", json_integer(ds->n));
	json_object_set_new(j, "device", json_string(devlist));
	json_object_set_new(j, "device_name", json_string(r0->name));
	json_object_set_new(j, "batches", json_integer(sm->batches));
	json_object_set_new(j, "batch_rows", json_integer(o->cfg.batch_rows));
	json_object_set_new(j, "ring", json_integer(o->cfg.ring));
	json_object_set_new(j, "kernel_loops", json_integer(o->cfg.kernel_loops));
	json_object_set_new(j, "kernel_rows", json_integer(kr));
	json_object_set_new(j, "passes", json_integer((json_int_t)passes_begun(ds)));
	json_object_set_new(j, "wall_seconds", cli_json_real(sm->wall));
	json_object_set_new(j, "rows_per_s", cli_json_real(sm->e2e_rows_s));
	json_object_set_new(j, "interrupted", json_boolean(sm->interrupted_by != 0));
	if (sm->interrupted_by)
		json_object_set_new(j, "signal", json_string(report_signal_name(sm->interrupted_by)));
	json_object_set_new(j, "stages", stages_json(o, r0, sm->agg, sm->rates, sm->copy_bps));
	io_sum(run, &io);
	json_object_set_new(j, "io", io_json(&io));
	json_object_set_new(j, "verify", verify_json(o, sm->v, sm->nv, sm->vb, sm->vbad, sm->vrows,
						     sm->first_mismatch));
	if (o->cfg.standalone) {
		json_t *e = json_object();
		json_object_set_new(e, "rows_per_s", cli_json_real(sm->e2e_rows_s));
		json_object_set_new(e, "slowest_stage", sm->slowest >= 0 ? json_string(pl_stage_names[sm->slowest]) :
									     json_null());
		json_object_set_new(e, "slowest_alone_rows_per_s",
				    cli_json_real(sm->slowest >= 0 ? sm->agg[sm->slowest].alone_rows_s : 0));
		json_object_set_new(e, "ratio", cli_json_real(sm->ratio));
		json_object_set_new(j, "end_to_end", e);
	}
	for (int i = 0; i < sm->nt; i++) {
		json_t *x = json_object();
		json_object_set_new(x, "option", json_string(sm->t[i].option));
		json_object_set_new(x, "what", json_string(sm->t[i].what));
		json_object_set_new(x, "limit", cli_json_real(sm->t[i].limit));
		json_object_set_new(x, "value", cli_json_real(sm->t[i].value));
		json_object_set_new(x, "measured", json_boolean(sm->t[i].measured));
		json_object_set_new(x, "pass", json_boolean(sm->t[i].pass));
		json_array_append_new(th, x);
	}
	json_object_set_new(j, "thresholds", th);
	if (o->cfg.output) {
		json_t *x = json_object();
		json_object_set_new(x, "path", cli_json_text(o->cfg.output));
		json_object_set_new(x, "written", json_boolean(sm->output_written));
		json_object_set_new(j, "output", x);
	}
	json_object_set_new(j, "plan", json_string(r0->plan));
	{ /* the samples' times; each device's rows/s between them below */
		json_t *ts = json_array();
		for (int k = 0; k < run->nsamples; k++)
			json_array_append_new(ts, cli_json_real(run->samples[(size_t)k * (size_t)(1 + run->ndev)]));
		json_object_set_new(j, "sample_seconds", ts);
	}
	for (int i = 0; i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		json_t *d = json_object();
		double rates[ST_N];

		for (int s = 0; s < ST_N; s++)
			rates[s] = rate(r->st[s].bytes, r->st[s].busy);
		json_object_set_new(d, "index", json_integer(r->index));
		json_object_set_new(d, "device", json_string(r->spec));
		json_object_set_new(d, "device_name", json_string(r->name));
		json_object_set_new(d, "result", json_string(status_name(r->status, report_checked(o, r->verified_batches), 0,
									 r->mismatched_batches)));
		if (r->status == EXIT_RUNTIME)
			json_object_set_new(d, "error", json_string(r->errmsg));
		json_object_set_new(d, "rows", json_integer(r->rows));
		json_object_set_new(d, "batches", json_integer(r->batches));
		json_object_set_new(d, "kernel_rows", json_integer(r->kernel_rows));
		json_object_set_new(d, "wall_seconds", cli_json_real(r->wall));
		json_object_set_new(d, "copy_tbs", cli_json_real(r->copy_bps / 1e12));
		json_object_set_new(d, "stages", stages_json(o, r, r->st, rates, r->copy_bps));
		io_of(r, &io);
		json_object_set_new(d, "io", io_json(&io));
		json_object_set_new(d, "verify", verify_json(o, r->v, r->nv, r->verified_batches, r->mismatched_batches,
							     r->verified_rows, r->first_mismatch));
		{
			json_t *ss = json_array();
			double t = 0, rows = 0;
			for (int k = 0; k < run->nsamples; k++) {
				const double *x = run->samples + (size_t)k * (size_t)(1 + run->ndev);
				json_array_append_new(ss, cli_json_real(x[0] > t ? (x[1 + i] - rows) / (x[0] - t) : 0));
				t = x[0];
				rows = x[1 + i];
			}
			json_object_set_new(d, "rows_per_s_samples", ss);
		}
		json_array_append_new(devs, d);
	}
	json_object_set_new(j, "devices", devs);
	if (sm->error)
		json_object_set_new(j, "error", json_string(sm->error));
	json_object_set_new(j, "result", json_string(status_name(sm->status, report_checked(o, sm->vb), sm->threshold_missed,
								 sm->vbad)));
	return j;
}

/* "  name  X MB in Y ms  Z GB/s  p50 .. p99 ..": one stage line. */
static void stage_line(const char *name, const struct pl_stage *st, double gbs, const char *tail)
{
	printf("  %-8s %10.1f MB in %9.3f ms  %7.2f GB/s  p50 %.3g ms  p99 %.3g ms%s%s\n", name, st->bytes / 1e6,
	       st->busy * 1e3, gbs, pl_hist_quantile(&st->lat, 0.5) * 1e3, pl_hist_quantile(&st->lat, 0.99) * 1e3,
	       tail ? "  " : "", tail ? tail : "");
}

static void alone_note(char *buf, size_t len, const struct pl_stage *st, int standalone, int per)
{
	size_t n = strlen(buf);
	if (standalone && st->alone_rows_s > 0)
		snprintf(buf + n, len - n, "%salone %.3g rows/s", n ? "; " : "", st->alone_rows_s * per);
}

static void stages_text(const struct run_opts *o, const struct pl_devres *r0, const struct io_view *io,
			const struct pl_stage *st, const double *rates, double copy_bps)
{
	char tail[512];

	for (int s = 0; s < ST_N; s++) {
		if (!stage_active(o, r0, s) && !(s == ST_VERIFY && !o->cfg.read_only))
			continue;
		tail[0] = '\0';
		switch (s) {
		case ST_READ:
			snprintf(tail, sizeof(tail), "(io_uring %s; %llu read%s; %s; %s)", io->ring_mode,
				 (unsigned long long)io->rs.reads, io->rs.reads == 1 ? "" : "s",
				 !io->rs.buffered_files ? "O_DIRECT" : !io->rs.direct_files ? "buffered" :
				 "O_DIRECT and buffered",
				 !io->bs.straight_bytes ? "through bounce buffers" :
				 io->bs.bounce_bytes ? "mostly straight into the ring" :
				 io->bs.fixed ? "straight into the ring's fixed buffers" : "straight into the ring");
			break;
		case ST_KERNEL:
			snprintf(tail, sizeof(tail), "%.3g rows/s  %.3f TB/s = %.2f of copy (%.3f TB/s)",
				 st[s].busy > 0 ? (double)st[s].rows / st[s].busy : 0.0, rates[s] / 1e3,
				 copy_bps > 0 ? rates[s] * 1e9 / copy_bps : 0.0, copy_bps / 1e12);
			break;
		case ST_VERIFY:
			if (o->cfg.verify_rows <= 0) {
				printf("  verify   skipped\n");
				continue;
			}
			break;
		default:
			break;
		}
		alone_note(tail, sizeof(tail), &st[s], o->cfg.standalone, stage_rows_per_row(o, s));
		if (s == ST_VERIFY) {
			printf("  verify   %lld batch%s, p50 %.3g ms  p99 %.3g ms%s%s\n", (long long)st[s].batches,
			       st[s].batches == 1 ? "" : "es",
			       pl_hist_quantile(&st[s].lat, 0.5) * 1e3, pl_hist_quantile(&st[s].lat, 0.99) * 1e3,
			       tail[0] ? "  " : "", tail);
			continue;
		}
		stage_line(pl_stage_names[s], &st[s], rates[s], tail[0] ? tail : NULL);
	}
}

/* label, s and tail on one line, s escaped as the messages are: a file name may hold control bytes. */
static void escaped_line(const char *label, const char *s, const char *tail)
{
	size_t cap = strlen(s) * 4 + 1;
	char *clean = malloc(cap);

	if (clean)
		wsn_text_escape(clean, cap, s);
	printf("%s%s%s\n", label, clean ? clean : "(out of memory)", tail);
	free(clean);
}

static void verify_text(const struct run_opts *o, const struct pl_verdict *vd, int nv, int64_t vb, int64_t bad,
			int64_t rows, const char *first)
{
	if (o->cfg.verify_rows <= 0 || o->cfg.read_only)
		return;
	printf("  checked  %lld batch%s verified, %lld mismatched, %lld sampled rows against the CPU reference",
	       (long long)vb, vb == 1 ? "" : "es", (long long)bad, (long long)rows);
	if (nv) {
		printf(":");
		for (int i = 0; i < nv; i++)
			printf(" %s %.2g%s", vd[i].name, vd[i].rel, vd[i].pass ? "" : " (FAIL)");
	}
	printf("\n");
	if (first && first[0])
		escaped_line("           first mismatch: ", first, "");
}

/* The plan's autotune line (cache hit, measured, ignored), when the plan has one. */
static void autotune_text(const struct pl_devres *r, int name_device)
{
	const char *a = strstr(r->plan, "\nautotune:");
	int n;

	if (!a)
		return;
	a += strlen("\nautotune:");
	a += strspn(a, " ");
	n = (int)strcspn(a, "\n");
	printf("  autotune %.*s%s%s\n", n, a, name_device ? " on " : "", name_device ? r->spec : "");
}

void report_text(const struct run_opts *o, const struct pl_run *run, const struct summary *sm)
{
	const struct pl_dataset *ds = sm->ds;
	const struct pl_devres *r0 = &run->res[0];
	struct io_view io;

	printf("%s %s: %lld rows x %lld, %d shard%s, on ", wsn_op_name(ds->shape.op), wsn_dtype_name(ds->shape.dt),
	       (long long)sm->rows, (long long)ds->shape.hidden, ds->n, ds->n == 1 ? "" : "s");
	if (run->ndev == 1)
		printf("%s (%s)\n", r0->spec, r0->name[0] ? r0->name : "not opened");
	else
		printf("%d devices\n", run->ndev);
	printf("  pipeline %lld batch%s of up to %lld rows, ring %d, %llu pass%s, kernel x%d, %.3f s, %.3g rows/s%s\n",
	       (long long)sm->batches, sm->batches == 1 ? "" : "es", (long long)o->cfg.batch_rows, o->cfg.ring,
	       passes_begun(ds), passes_begun(ds) == 1 ? "" : "es",
	       o->cfg.kernel_loops, sm->wall, sm->e2e_rows_s, sm->interrupted_by ? " (interrupted)" : "");
	if (cli_verbose > 0 && r0->plan[0])
		printf("%s", r0->plan);
	else if (o->cfg.autotune)
		for (int i = 0; i < run->ndev; i++)
			autotune_text(&run->res[i], run->ndev > 1);
	for (int i = 0; run->ndev > 1 && i < run->ndev; i++) {
		const struct pl_devres *r = &run->res[i];
		double rates[ST_N];

		for (int s = 0; s < ST_N; s++)
			rates[s] = rate(r->st[s].bytes, r->st[s].busy);
		printf(" device %d: %s (%s): %s, %lld rows in %lld batches\n", r->index, r->spec,
		       r->name[0] ? r->name : "not opened",
		       r->status == EXIT_RUNTIME ? "ERROR" : r->status == EXIT_MISMATCH ? "FAIL" : "ok", (long long)r->rows,
		       (long long)r->batches);
		if (r->status == EXIT_RUNTIME) {
			escaped_line("  error    ", r->errmsg, "");
			continue;
		}
		io_of(r, &io);
		stages_text(o, r, &io, r->st, rates, r->copy_bps);
		verify_text(o, r->v, r->nv, r->verified_batches, r->mismatched_batches, r->verified_rows, r->first_mismatch);
	}
	if (run->ndev > 1)
		printf(" all devices:\n");
	io_sum(run, &io);
	stages_text(o, r0, &io, sm->agg, sm->rates, sm->copy_bps);
	verify_text(o, sm->v, sm->nv, sm->vb, sm->vbad, sm->vrows, sm->first_mismatch);
	if (o->cfg.standalone && sm->slowest >= 0)
		printf("  overall  %.3g rows/s end to end = %.2f x the slowest stage alone (%s, %.3g rows/s)\n",
		       sm->e2e_rows_s, sm->ratio, pl_stage_names[sm->slowest], sm->agg[sm->slowest].alone_rows_s);
	for (int i = 0; i < sm->nt; i++)
		printf("  limit    %s %g: %s %.4g %s%s\n", sm->t[i].option, sm->t[i].limit, sm->t[i].what, sm->t[i].value,
		       sm->t[i].unit, sm->t[i].pass ? "" : sm->t[i].measured ? " (MISSED)" : " (not measured: MISSED)");
	if (o->cfg.output)
		escaped_line("  output   ", o->cfg.output, sm->output_written ? "" : " not written");
	if (run->ndev == 1 && r0->status == EXIT_RUNTIME)
		escaped_line("  error    ", r0->errmsg, "");
	else if (sm->error)
		escaped_line("  error    ", sm->error, "");
	printf("  result   %s%s\n",
	       sm->status == EXIT_PASS ? (report_checked(o, sm->vb) ? "PASS" : "done (not verified)") :
	       sm->status == EXIT_RUNTIME ? "ERROR" :
	       sm->vbad ? "FAIL: verification mismatch" : "FAIL: threshold missed",
	       sm->interrupted_by ? " (interrupted)" : "");
}

/* ---- one run ---- */

/* Run one dataset and report it (into collect when given, else printed); *interrupted says whether a
 * signal stopped it, and the batches it verified are added to *verified_batches (unless NULL). */
