/* SPDX-License-Identifier: MIT */
/* launcher/bench_report.c: `wsnorm bench`'s report: the table's lines and the JSON document. */
#include "bench.h"
#include "pipeline.h" /* PL_DEFAULT_RING, reported with --h2d */

/* bytes as "1 GiB", "1000 KiB" or "4097 bytes": the largest unit that divides it exactly. */
const char *bench_size_text(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = { "bytes", "KiB", "MiB", "GiB" };
	int u = 0;

	while (u < 3 && bytes && !(bytes & 1023))
		bytes >>= 10, u++;
	snprintf(buf, len, "%llu %s", (unsigned long long)bytes, units[u]);
	return buf;
}

/* A device's name, or null where none is known (the device could not be opened). */
static json_t *name_json(const char *name)
{
	return name && name[0] ? cli_json_text(name) : json_null();
}

/* --h2d --json: the rates, or after an error (err_msg) nulls and the error. di->spec names the device
 * asked for, and di->name is empty when it could not be opened. */
void bench_h2d_json(const struct bench_opts *o, const struct wsn_device_info *di, double h2d, double d2h,
		    const char *err_msg)
{
	json_t *root = json_object();

	json_object_set_new(root, "device", json_string(di->spec));
	json_object_set_new(root, "device_name", name_json(di->name));
	json_object_set_new(root, "copy_bytes", json_integer((json_int_t)o->copy_bytes));
	json_object_set_new(root, "ring", json_integer(PL_DEFAULT_RING));
	json_object_set_new(root, "iters", json_integer(o->iters));
	json_object_set_new(root, "h2d_gbs", err_msg ? json_null() : cli_json_real(h2d / 1e9));
	json_object_set_new(root, "d2h_gbs", err_msg ? json_null() : cli_json_real(d2h / 1e9));
	if (di->pcie_gen)
		json_object_set_new(root, "pcie", json_sprintf("gen%d x%d", di->pcie_gen, di->pcie_width));
	if (err_msg)
		json_object_set_new(root, "error", json_string(err_msg));
	cli_json_print(root);
}

/*
 * bench --json without --h2d: the points measured (jres, taken); after a runtime error those before
 * it and the error's message. di->name is empty when the device could not be opened.
 */
void bench_table_json(const struct bench_opts *o, const struct wsn_device_info *di, double copy_bps, json_t *jres,
		      int ret)
{
	json_t *root = json_object();

	json_object_set_new(root, "device", json_string(di->spec));
	json_object_set_new(root, "device_name", name_json(di->name));
	json_object_set_new(root, "copy_tbs", copy_bps > 0 ? cli_json_real(copy_bps / 1e12) : json_null());
	json_object_set_new(root, "copy_bytes", json_integer((json_int_t)o->copy_bytes));
	json_object_set_new(root, "timing", json_string(o->timing == TIMING_BOTH ? "both"
							 : o->timing == TIMING_SINGLE ? "single" : "batch"));
	json_object_set_new(root, "iters", json_integer(o->iters));
	json_object_set_new(root, "calls", o->timing & TIMING_SINGLE ? json_integer(o->calls) : json_null());
	json_object_set_new(root, "results", jres);
	if (ret == EXIT_RUNTIME && cli_last_error()[0]) /* not after a shape with no plan alone */
		json_object_set_new(root, "error", json_string(cli_last_error()));
	cli_json_print(root);
}

/* A point as a JSON object. */
json_t *bench_point_json(const struct point *pt)
{
	json_t *p = json_object();

	json_object_set_new(p, "op", json_string(wsn_op_name(pt->op)));
	json_object_set_new(p, "dtype", json_string(wsn_dtype_name(pt->dt)));
	json_object_set_new(p, "hidden", json_integer(pt->hidden));
	json_object_set_new(p, "rows", json_integer(pt->rows));
	if (pt->noplan[0]) {
		json_object_set_new(p, "error", json_string(pt->noplan));
		return p;
	}
	json_object_set_new(p, "bytes", json_integer((json_int_t)pt->bytes));
	json_object_set_new(p, "time_us", pt->ms > 0 ? cli_json_real(pt->ms * 1e3) : json_null());
	json_object_set_new(p, "tbs", pt->tbs > 0 ? cli_json_real(pt->tbs) : json_null());
	json_object_set_new(p, "fraction_of_copy", pt->frac > 0 ? cli_json_real(pt->frac) : json_null());
	json_object_set_new(p, "single_time_us", pt->single_ms > 0 ? cli_json_real(pt->single_ms * 1e3) : json_null());
	json_object_set_new(p, "single_tbs", pt->single_tbs > 0 ? cli_json_real(pt->single_tbs) : json_null());
	json_object_set_new(p, "single_fraction_of_copy",
			    pt->single_frac > 0 ? cli_json_real(pt->single_frac) : json_null());
	json_object_set_new(p, "sets", json_integer(pt->sets));
	json_object_set_new(p, "l2_resident", json_boolean(pt->l2_resident));
	json_object_set_new(p, "batch", pt->batch ? json_integer(pt->batch) : json_null());
	json_object_set_new(p, "approach", json_string(pt->approach));
	json_object_set_new(p, "weight", json_boolean(pt->weight));
	json_object_set_new(p, "bias", json_boolean(pt->bias));
	json_object_set_new(p, "check", json_string(!pt->checked ? "off" : pt->pass ? "pass" : "mismatch"));
	json_object_set_new(p, "check_rel_l2", pt->checked ? cli_json_real(pt->worst) : json_null());
	if (pt->checked && !pt->pass)
		json_object_set_new(p, "check_error", json_string(pt->why));
	return p;
}

/* One timing's three columns (time in microseconds, TB/s, fraction of copy), "-" where not timed. */
static void timing_text(double ms, double tbs, double frac)
{
	char t[24] = "-", r[16] = "-", f[16] = "-";

	if (ms > 0)
		snprintf(t, sizeof(t), "%.2f", ms * 1e3);
	if (tbs > 0)
		snprintf(r, sizeof(r), "%.3f", tbs);
	if (frac > 0)
		snprintf(f, sizeof(f), "%.3f", frac);
	printf(" %10s %8s %7s", t, r, f);
}

/* A point as a line of the table (what it says on stderr is cmd_bench's). */
void bench_point_text(const struct point *pt)
{
	printf("%-14s %-5s %7lld %7lld", wsn_op_name(pt->op), wsn_dtype_name(pt->dt), (long long)pt->hidden,
	       (long long)pt->rows);
	if (pt->noplan[0]) {
		timing_text(0, 0, 0);
		timing_text(0, 0, 0);
		printf(" %5s %5s %-5s %s\n", "-", "-", "-", "no plan");
	} else {
		char batch[16] = "-";

		timing_text(pt->ms, pt->tbs, pt->frac);
		timing_text(pt->single_ms, pt->single_tbs, pt->single_frac);
		if (pt->batch)
			snprintf(batch, sizeof(batch), "%d", pt->batch);
		printf(" %5d %5s %-5s %s\n", pt->sets, batch, !pt->checked ? "off" : pt->pass ? "ok" : "FAIL",
		       pt->approach);
	}
	fflush(stdout);
}

void bench_table_head(void)
{
	printf("%-14s %-5s %7s %7s %10s %8s %7s %10s %8s %7s %5s %5s %-5s %s\n", "op", "dtype", "hidden", "rows",
	       "time_us", "TB/s", "of_copy", "1call_us", "1call_TB", "1c_copy", "sets", "batch", "check", "approach");
}
