/* SPDX-License-Identifier: MIT */
/* launcher/report.h: the `wsnorm run` report: the run's figures against its thresholds, as text or JSON. */
#ifndef WSN_REPORT_H
#define WSN_REPORT_H

#include "pipeline.h"

/* The options of `wsnorm run`; the report reads them too. */
struct run_opts {
	enum wsn_op op;
	int have_op;
	enum wsn_dtype dt;
	int have_dt;
	const char *device, *devices;
	const char *input;
	int json;
	int64_t raw_rows, raw_hidden; /* --shape for raw input */
	float eps;
	int have_eps;
	int have_batch_rows;
	double min_read_gbs, min_h2d_gbs, min_kernel_frac; /* 0: no threshold */
	/* wsnorm-mpi: --max-spread (0: none), --fault-rank (-1: every rank), --node-report */
	double max_spread;
	int fault_rank;
	const char *node_report;
	const char *html;  /* --html: the page's path (NULL: none) */
	json_t *kept;      /* with html: the report, kept by the run for the page */
	struct pl_config cfg;
};

/* A threshold and what was measured against it. */
struct threshold {
	const char *option, *unit;
	char what[96];
	double limit, value;
	int measured, pass;
};

/* Everything the report needs beyond the run itself. */
struct summary {
	const struct pl_dataset *ds;
	int status, interrupted_by, output_written, threshold_missed;
	struct threshold t[1 + 2 * PL_MAX_DEVICES];
	int nt;
	struct pl_stage agg[ST_N];
	double rates[ST_N];
	double wall, e2e_rows_s, ratio, copy_bps;
	int slowest;
	int64_t rows, batches, vb, vbad, vrows;
	struct pl_verdict v[8]; /* each tensor's worst over the devices */
	int nv;
	const char *first_mismatch;
	const char *error;
};

/* The stages of all devices together: bytes and rows summed, rates summed (the devices run side by side). */
void report_aggregate(const struct pl_run *run, struct pl_stage *agg, double *rates);
/* The end-to-end rate over the slowest stage measured alone (rows/s). */
double report_e2e_ratio(const struct run_opts *o, const struct pl_run *run, const struct pl_stage *agg, double e2e,
			int *slowest);
int report_check_thresholds(const struct run_opts *o, const struct pl_run *run, const double *rates,
			    struct threshold *t, int max);
/* Was any of a run's output checked: verification on and a batch verified (none is when a signal
 * stops the run inside its first batch)? Else a pass reads "done (not verified)" / "unverified". */
int report_checked(const struct run_opts *o, int64_t verified_batches);
/* Fold one device's verdicts into the run's: per tensor the error nearest its tolerance (with that tolerance),
 * the largest difference, the non-finite values summed, a pass only where every device passed. */
void report_merge_verdicts(struct summary *sm, const struct pl_devres *r);
/* The run as one JSON object. */
json_t *report_json(const struct run_opts *o, const struct pl_run *run, const struct summary *sm);
/* The run as text on stdout. */
void report_text(const struct run_opts *o, const struct pl_run *run, const struct summary *sm);
/* The name of a signal that stops a run (REPORT_FLEET_STOP: another rank of wsnorm-mpi stopped). */
#define REPORT_FLEET_STOP (-1)
const char *report_signal_name(int sig);

#endif
