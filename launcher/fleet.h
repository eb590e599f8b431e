/* SPDX-License-Identifier: MIT */
/* launcher/fleet.h: the fleet report of wsnorm-mpi: every rank's run report in, the slowest node and GPU per stage, the spread and the verdict out. */
#ifndef WSN_FLEET_H
#define WSN_FLEET_H

#include <stdio.h>

#include <jansson.h>

/* One rank as rank 0 sees it after the gather. */
struct fleet_rank {
	int rank, local_rank;
	const char *node;   /* the host's name */
	int status;         /* the rank's exit status (0, 1, 3) */
	json_t *report;     /* its `run --json` report; NULL when none came */
};

/* The fleet as a whole. */
struct fleet_info {
	const char *prog;           /* the program's name, for err */
	int ranks, nodes, per_node; /* per_node: the most ranks on one node */
	const char *library;        /* the MPI library's first line */
	double max_spread;          /* --max-spread (0: none) */
};

/* The stages compared across the fleet: GB/s for the first three, rows per second end to end. */
enum { FLEET_READ, FLEET_H2D, FLEET_KERNEL, FLEET_E2E, FLEET_N };
extern const char *const fleet_stage_names[FLEET_N];
extern const char *const fleet_stage_units[FLEET_N];

/* One GPU (a device of a rank's run) and its figures per stage; 0 where the stage did not run. */
struct fleet_gpu {
	int rank;
	const char *node, *device;
	double v[FLEET_N];
};
/* The GPUs of the ranks that are compared (malloc'd, *ng of them; NULL when none or out of memory). */
struct fleet_gpu *fleet_gpus(const struct fleet_rank *r, int n, int *ng);
/* The nodes of the GPUs with a figure in stage s, in first-seen order, and their GPUs' figures summed
 * (node and sum hold ng entries); returns how many nodes. */
int fleet_node_sums(const struct fleet_gpu *g, int ng, int s, const char **node, double *sum);
/* Why a rank is left out of the comparison ("error", "interrupted", "no report"), NULL when it is not. */
const char *fleet_excluded(const struct fleet_rank *r);

/*
 * One self-contained HTML page (inline SVG, nothing fetched) of a fleet report: per stage a bar per
 * GPU and a bar per node, the slowest marked, and each GPU's rows/s over the run. fleet: what
 * fleet_report wrote to *json. Written to a temporary file renamed to path when complete; on
 * failure nothing is left and msg says why. Returns 0 or -1.
 */
int fleet_html_write(const char *path, json_t *fleet, char *msg, size_t len);

/*
 * Compare the ranks' reports: per stage the slowest GPU (rank, node, device) and the median of the
 * other GPUs, the slowest node (its GPUs' sum) and the spread (fastest over slowest GPU). Ranks that
 * errored or were interrupted are named and left out. Writes the JSON to *json (when json is not
 * NULL), a table to text (when not NULL) and, when a spread passes fi->max_spread, the straggler to
 * err. Returns the fleet's exit status: the worst rank's (3 before 1 before 0), else 1 when a
 * spread is over the limit.
 */
int fleet_report(const struct fleet_info *fi, const struct fleet_rank *r, int n, json_t **json, FILE *text, FILE *err);

#ifdef WSN_MPI
/* ---- wsnorm-mpi's rank (fleet_mpi.c): `run` as one rank of an MPI job ---- */
struct run_opts;
struct pl_run;
/*
 * After the signals are blocked (MPI starts threads that must inherit the mask): MPI_Init_thread,
 * the guard against a launcher of another MPI, the node-local rank, --devices local, --fault-rank;
 * every rank agrees on a usage error. Returns 0, or the exit status to return (MPI finalized).
 */
int fleet_mpi_begin(struct run_opts *o, int demo);
/* The heartbeat, once per turn of the run's wait loop: this rank's state out, the fleet's in. */
enum { FLEET_WAIT, FLEET_GO, FLEET_STOP };
int fleet_mpi_tick(struct pl_run *run, int local_stop);
/*
 * The run is over on this rank (report: its JSON, NULL when none): wait for every rank, write
 * --node-report, gather the reports on rank 0, print the fleet report there, finalize. Returns the
 * fleet's exit status, the same on every rank.
 */
int fleet_mpi_end(const struct run_opts *o, json_t *report, int status);
/* MPI_Finalize after a command that ran on one rank alone (--demo). */
int fleet_mpi_done(int status);
#endif

#endif
