/* SPDX-License-Identifier: MIT */
/* launcher/fleet_mpi.c: wsnorm-mpi: `run` as one rank of an MPI job: set-up, the heartbeat, the gather of the reports on rank 0. */
#include "cli.h"
#include "fleet.h"
#include "pipeline.h"
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <mpi.h>

/* The heartbeat: one non-blocking allreduce (MAX) in flight of this rank's stop, not-done and
 * not-ready flags; every rank sees each round's result, so they start and stop on the same round. */
enum { HB_STOP, HB_NOTDONE, HB_NOTREADY, HB_N };
static MPI_Request hb_req = MPI_REQUEST_NULL;
static int hb_in[HB_N], hb_out[HB_N];
static int my_rank, world, local_rank;
static int stop_sent; /* this rank asked the fleet to stop: every later round says so too */
static char prog_buf[64], dev_buf[32];

/* Post a round with this state when none is in flight; 1 with the fleet's in res when one completed. */
static int heartbeat(int stop, int notdone, int notready, int res[HB_N])
{
	int done = 0;

	stop_sent |= stop;
	if (hb_req == MPI_REQUEST_NULL) {
		hb_in[HB_STOP] = stop_sent;
		hb_in[HB_NOTDONE] = notdone;
		hb_in[HB_NOTREADY] = notready;
		MPI_Iallreduce(hb_in, hb_out, HB_N, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &hb_req);
	}
	MPI_Test(&hb_req, &done, MPI_STATUS_IGNORE);
	if (done)
		memcpy(res, hb_out, sizeof(hb_out));
	return done;
}

/* The MPI library's name and version in one line: its first part, tabs as spaces ("MPICH Version: 4.0.2"). */
static void library_name(char *lib, size_t len)
{
	int n = 0;
	char *w = lib;

	MPI_Get_library_version(lib, &n);
	if (n <= 0 || (size_t)n >= len)
		n = (int)len - 1;
	lib[n] = 0;
	lib[strcspn(lib, ",\n")] = 0;
	for (char *r = lib; *r; r++) {
		char c = *r == '\t' ? ' ' : *r;
		if (c != ' ' || (w > lib && w[-1] != ' '))
			*w++ = c;
	}
	*w = 0;
}

/* This rank's node in the report: $WSNORM_NODE_NAME when set (nodes that share a host name, tests),
 * else MPI's processor name (the host name). */
static void node_name(char *node, size_t len)
{
	const char *e = getenv("WSNORM_NODE_NAME");
	int n = 0;

	if (e && *e) {
		snprintf(node, len, "%s", e);
		return;
	}
	MPI_Get_processor_name(node, &n);
	node[n >= 0 && (size_t)n < len ? (size_t)n : len - 1] = 0;
}

/* Launcher variables that give the number of tasks it started (a singleton that sees more is a mismatch). */
static const char *const launch_vars[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS" };

static int guard_launcher(void)
{
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];

	if (world != 1)
		return 0;
	library_name(lib, sizeof(lib));
	for (size_t i = 0; i < sizeof(launch_vars) / sizeof(launch_vars[0]); i++) {
		const char *v = getenv(launch_vars[i]);
		char *end;
		long n;

		if (!v || !*v)
			continue;
		errno = 0;
		n = strtol(v, &end, 10);
		if (errno || *end || n <= 1)
			continue;
		return cli_error("run: the launcher started %ld tasks (%s=%s) but %s sees this rank alone: the launcher "
				 "belongs to another MPI library (start wsnorm-mpi with the mpirun of the MPI it was built "
				 "with, or under srun --mpi=pmix, or rebuild it --with-mpi for the launcher's MPI)", n,
				 launch_vars[i], v, lib);
	}
	return 0;
}

int fleet_mpi_begin(struct run_opts *o, int demo)
{
	MPI_Comm local;
	int prov = 0, local_size = 1, err = 0, worst = 0;

	if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &prov) != MPI_SUCCESS)
		return cli_error("run: MPI_Init_thread failed"), EXIT_RUNTIME;
	MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &world);
	if (world > 1) { /* messages name their rank */
		snprintf(prog_buf, sizeof(prog_buf), "%s[%d]", cli_prog, my_rank);
		cli_prog = prog_buf;
	}
	MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, my_rank, MPI_INFO_NULL, &local);
	MPI_Comm_rank(local, &local_rank);
	MPI_Comm_size(local, &local_size);
	MPI_Comm_free(&local);

	if (guard_launcher())
		err = EXIT_RUNTIME;
	else if (demo && world > 1)
		err = cli_usage_error("run", "--demo is a check of one node: run it without mpirun, or give --input");
	else if (o->fault_rank >= world)
		err = cli_usage_error("run", "--fault-rank %d: the ranks are numbered 0..%d", o->fault_rank, world - 1);
	else if (o->devices && !strcmp(o->devices, "local")) {
		char specs[PL_MAX_DEVICES][32];
		char node[MPI_MAX_PROCESSOR_NAME + 1];
		int n = pl_devices_parse("all", specs, PL_MAX_DEVICES);

		node_name(node, sizeof(node));
		if (n < 0)
			err = -n;
		else if (strcmp(specs[0], "cpu") && local_size > n)
			err = cli_usage_error("run", "--devices local: %d ranks on node %s share %d GPU%s (one GPU a rank: "
					      "start at most %d ranks a node)", local_size, node, n, n == 1 ? "" : "s", n);
		else
			snprintf(dev_buf, sizeof(dev_buf), "%s", strcmp(specs[0], "cpu") ? specs[local_rank] : "cpu");
	}
	/* one verdict for all: a rank alone with an error would leave the others waiting */
	MPI_Allreduce(&err, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (worst) {
		MPI_Finalize();
		return worst;
	}
	if (o->devices && !strcmp(o->devices, "local"))
		o->devices = dev_buf;
	if (o->fault_rank >= 0 && o->fault_rank != my_rank) {
		o->cfg.inject_fault = -1;
		o->cfg.inject_slow = 0;
	}
	return 0;
}

int fleet_mpi_tick(struct pl_run *run, int local_stop)
{
	int res[HB_N];

	if (!heartbeat(local_stop, 1, !pl_run_all_ready(run), res))
		return FLEET_WAIT;
	if (res[HB_STOP])
		return FLEET_STOP;
	return res[HB_NOTREADY] ? FLEET_WAIT : FLEET_GO;
}

/* Write this rank's report into DIR/NODE.rank-R.json (DIR made when missing); errors are warnings. */
static void node_report(const char *dir, const char *node, const char *text)
{
	char path[4096];
	FILE *f;

	if (mkdir(dir, 0777) < 0 && errno != EEXIST) {
		cli_warn("run: --node-report %s: %s", dir, strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/%s.rank-%d.json", dir, node, my_rank);
	if (!(f = fopen(path, "w"))) {
		cli_warn("run: --node-report: %s: %s", path, strerror(errno));
		return;
	}
	fputs(text, f);
	fputc('\n', f);
	if (fclose(f))
		cli_warn("run: --node-report: %s: %s", path, strerror(errno));
}

int fleet_mpi_end(const struct run_opts *o, json_t *report, int status)
{
	char node[MPI_MAX_PROCESSOR_NAME + 1] = "", *text = report ? json_dumps(report, JSON_COMPACT) : NULL, *all = NULL;
	int res[HB_N], hdr[4], *hdrs = NULL, *counts = NULL, *displs = NULL, nlen = 0, final = status;
	struct timespec nap = { 0, 5 * 1000 * 1000 };
	size_t tlen = text ? strlen(text) : 0;
	char *mine;

	/* the heartbeat until every rank is done: this rank's error, mismatch or missed threshold (the
	 * fleet has failed) stops the others */
	for (;;) {
		if (heartbeat(status != EXIT_PASS, 0, 0, res) && !res[HB_NOTDONE])
			break;
		nanosleep(&nap, NULL);
	}
	node_name(node, sizeof(node));
	nlen = (int)strlen(node);
	if (o->node_report && text)
		node_report(o->node_report, node, text);

	/* lengths, then the texts: the node's name and the report, one after the other */
	if (tlen > (size_t)(1 << 30)) {
		free(text);
		text = NULL;
		tlen = 0;
	}
	hdr[0] = status;
	hdr[1] = local_rank;
	hdr[2] = nlen;
	hdr[3] = (int)tlen;
	if (!(mine = malloc((size_t)nlen + tlen + 1))) {
		cli_error("run: out of memory for this rank's report");
		MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
	}
	memcpy(mine, node, (size_t)nlen);
	if (tlen)
		memcpy(mine + nlen, text, tlen);
	if (!my_rank && !(hdrs = calloc((size_t)world, sizeof(hdr)))) {
		cli_error("run: out of memory for %d ranks' reports", world);
		MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
	}
	MPI_Gather(hdr, 4, MPI_INT, hdrs, 4, MPI_INT, 0, MPI_COMM_WORLD);
	if (!my_rank) {
		long long total = 0;
		counts = calloc((size_t)world, sizeof(int));
		displs = calloc((size_t)world, sizeof(int));
		for (int i = 0; i < world && counts && displs; i++) {
			counts[i] = hdrs[4 * i + 2] + hdrs[4 * i + 3];
			displs[i] = (int)total;
			total += counts[i];
		}
		if (!counts || !displs || total > (1LL << 31) - 1 || !(all = malloc((size_t)total + 1))) {
			cli_error("run: cannot hold %lld bytes of the ranks' reports", total);
			MPI_Abort(MPI_COMM_WORLD, EXIT_RUNTIME);
		}
	}
	MPI_Gatherv(mine, nlen + (int)tlen, MPI_CHAR, all, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
	if (!my_rank) {
		struct fleet_rank *fr = calloc((size_t)world, sizeof(*fr));
		char **names = fr ? calloc((size_t)world, sizeof(char *)) : NULL;
		char lib[MPI_MAX_LIBRARY_VERSION_STRING];
		int nodes = 0, per_node = 0;

		library_name(lib, sizeof(lib));
		if (fr && names) {
			struct fleet_info fi = { .prog = cli_prog, .ranks = world, .library = lib, .max_spread = o->max_spread };
			json_t *j = NULL;

			for (int i = 0; i < world; i++) {
				const char *p = all + displs[i];
				int nl = hdrs[4 * i + 2], rl = hdrs[4 * i + 3], same = 0;
				json_error_t je;

				names[i] = strndup(p, (size_t)nl);
				fr[i].rank = i;
				fr[i].local_rank = hdrs[4 * i + 1];
				fr[i].status = hdrs[4 * i];
				fr[i].node = names[i] ? names[i] : "?";
				fr[i].report = rl ? json_loadb(p + nl, (size_t)rl, 0, &je) : NULL;
				for (int k = 0; k < i; k++)
					if (!strcmp(fr[k].node, fr[i].node))
						same++;
				if (!same)
					nodes++;
				if (same + 1 > per_node)
					per_node = same + 1;
			}
			fi.nodes = nodes;
			fi.per_node = per_node;
			final = fleet_report(&fi, fr, world, o->json || o->html ? &j : NULL, o->json ? NULL : stdout, stderr);
			if (o->html) {
				char msg[512];
				if (fleet_html_write(o->html, j, msg, sizeof(msg)) < 0)
					final = cli_error("run: %s", msg);
			}
			if (j && o->json)
				cli_json_print(j);
			else
				json_decref(j);
			fflush(stdout);
			for (int i = 0; i < world; i++) {
				json_decref(fr[i].report);
				free(names[i]);
			}
		} else {
			final = EXIT_RUNTIME;
		}
		free(fr);
		free(names);
	}
	MPI_Bcast(&final, 1, MPI_INT, 0, MPI_COMM_WORLD);
	free(mine);
	free(all);
	free(hdrs);
	free(counts);
	free(displs);
	free(text);
	MPI_Finalize();
	return final;
}

int fleet_mpi_done(int status)
{
	MPI_Finalize();
	return status;
}
