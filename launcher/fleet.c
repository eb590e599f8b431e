/* SPDX-License-Identifier: MIT */
/* launcher/fleet.c: the fleet report of wsnorm-mpi: the slowest node and GPU per stage, the spread and the verdict (no MPI here). */
#include "fleet.h"
#include "cli.h"

#include <stdlib.h>
#include <string.h>

const char *const fleet_stage_names[FLEET_N] = { "read", "h2d", "kernel", "end_to_end" };
const char *const fleet_stage_units[FLEET_N] = { "GB/s", "GB/s", "GB/s", "rows/s" };
/* where a run report keeps each stage (pl_stage_names) */
static const char *const report_keys[FLEET_E2E] = { "read", "h2d", "compute" };

/* A stage compared over the GPUs and the nodes. */
struct stage_cmp {
	int n;                     /* GPUs with a figure */
	int slow;                  /* index of the slowest GPU */
	double median, spread;     /* the others' median, fastest over slowest */
	const char *slow_node;     /* the node whose GPUs sum lowest */
	double node_value, node_median, node_spread;
};

static double num(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_number(v) ? json_number_value(v) : 0;
}

static const char *str(json_t *o, const char *k, const char *dflt)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

const char *fleet_excluded(const struct fleet_rank *r)
{
	const char *res;

	if (!r->report)
		return "no report";
	res = str(r->report, "result", "");
	if (!strcmp(res, "error") || r->status == EXIT_RUNTIME)
		return "error";
	if (json_is_true(json_object_get(r->report, "interrupted")))
		return "interrupted";
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of v[0..n) (sorted in place); 0 when n is 0. */
static double median(double *v, int n)
{
	if (!n)
		return 0;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int fleet_node_sums(const struct fleet_gpu *g, int ng, int s, const char **node, double *sum)
{
	int nn = 0;

	for (int i = 0; i < ng; i++) {
		int k;
		if (g[i].v[s] <= 0)
			continue;
		for (k = 0; k < nn && strcmp(node[k], g[i].node); k++)
			;
		if (k == nn) {
			node[nn++] = g[i].node;
			sum[k] = 0;
		}
		sum[k] += g[i].v[s];
	}
	return nn;
}

static void compare(const struct fleet_gpu *g, int ng, int s, struct stage_cmp *c)
{
	double *v = calloc((size_t)ng + 1, sizeof(*v)), *sum = calloc((size_t)ng + 1, sizeof(*sum));
	const char **node = calloc((size_t)ng + 1, sizeof(*node));
	double hi = 0;
	int m = 0, nn, slow_node = -1;

	memset(c, 0, sizeof(*c));
	c->slow = -1;
	if (!v || !sum || !node)
		goto out;
	for (int i = 0; i < ng; i++) {
		if (g[i].v[s] <= 0)
			continue;
		c->n++;
		if (c->slow < 0 || g[i].v[s] < g[c->slow].v[s])
			c->slow = i;
		if (g[i].v[s] > hi)
			hi = g[i].v[s];
	}
	if (!c->n)
		goto out;
	for (int i = 0; i < ng; i++)
		if (g[i].v[s] > 0 && i != c->slow)
			v[m++] = g[i].v[s];
	c->median = median(v, m);
	c->spread = hi / g[c->slow].v[s];
	nn = fleet_node_sums(g, ng, s, node, sum);
	hi = 0;
	for (int k = 0; k < nn; k++) {
		if (slow_node < 0 || sum[k] < sum[slow_node])
			slow_node = k;
		if (sum[k] > hi)
			hi = sum[k];
	}
	m = 0;
	for (int k = 0; k < nn; k++)
		if (k != slow_node)
			v[m++] = sum[k];
	c->slow_node = node[slow_node];
	c->node_value = sum[slow_node];
	c->node_median = median(v, m);
	c->node_spread = hi / sum[slow_node];
out:
	free(v);
	free(sum);
	free(node);
}

struct fleet_gpu *fleet_gpus(const struct fleet_rank *r, int n, int *ng)
{
	struct fleet_gpu *g = NULL;
	int cap = 0;

	*ng = 0;
	for (int i = 0; i < n; i++) {
		json_t *devs, *d;
		size_t k;

		if (fleet_excluded(&r[i]))
			continue;
		devs = json_object_get(r[i].report, "devices");
		json_array_foreach(devs, k, d) {
			json_t *st = json_object_get(d, "stages");
			double wall = num(d, "wall_seconds");
			if (*ng == cap) {
				struct fleet_gpu *t = realloc(g, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*g));
				if (!t) {
					free(g);
					*ng = 0;
					return NULL;
				}
				g = t;
			}
			struct fleet_gpu *x = &g[(*ng)++];
			memset(x, 0, sizeof(*x));
			x->rank = r[i].rank;
			x->node = r[i].node;
			x->device = str(d, "device", "?");
			for (int s = 0; s < FLEET_E2E; s++) {
				json_t *o = json_object_get(st, report_keys[s]);
				if (json_is_true(json_object_get(o, "active")))
					x->v[s] = num(o, "gbs");
			}
			x->v[FLEET_E2E] = wall > 0 ? num(d, "rows") / wall : 0;
		}
	}
	return g;
}

/* The worse of two exit statuses: a runtime error before a failure before a pass. */
static int worse(int a, int b)
{
	int ra = a == EXIT_RUNTIME ? 3 : a == EXIT_PASS ? 0 : a == EXIT_MISMATCH ? 1 : 2;
	int rb = b == EXIT_RUNTIME ? 3 : b == EXIT_PASS ? 0 : b == EXIT_MISMATCH ? 1 : 2;
	return ra >= rb ? a : b;
}

static const char *result_name(int status)
{
	return status == EXIT_PASS ? "pass" : status == EXIT_MISMATCH ? "fail" : "error";
}

int fleet_report(const struct fleet_info *fi, const struct fleet_rank *r, int n, json_t **json, FILE *text, FILE *err)
{
	struct stage_cmp c[FLEET_N];
	struct fleet_gpu *g;
	int ng, status = EXIT_PASS, over = -1, interrupted = 0;
	json_t *j = json_object(), *fl = json_object(), *stages = json_object(), *ranks = json_array(), *ex = json_array();

	for (int i = 0; i < n; i++) {
		status = worse(status, r[i].status);
		if (r[i].report && json_is_true(json_object_get(r[i].report, "interrupted")))
			interrupted = 1;
	}
	g = fleet_gpus(r, n, &ng);
	for (int s = 0; s < FLEET_N; s++) {
		compare(g, ng, s, &c[s]);
		if (fi->max_spread > 0 && c[s].n > 1 && c[s].spread > fi->max_spread &&
		    (over < 0 || c[s].spread > c[over].spread))
			over = s;
	}
	if (over >= 0)
		status = worse(status, EXIT_MISMATCH);

	/* JSON */
	json_object_set_new(fl, "ranks", json_integer(fi->ranks));
	json_object_set_new(fl, "nodes", json_integer(fi->nodes));
	json_object_set_new(fl, "ranks_per_node", json_integer(fi->per_node));
	json_object_set_new(fl, "mpi_library", json_string(fi->library ? fi->library : ""));
	json_object_set_new(fl, "gpus", json_integer(ng));
	json_object_set_new(fl, "max_spread", fi->max_spread > 0 ? cli_json_real(fi->max_spread) : json_null());
	for (int s = 0; s < FLEET_N; s++) {
		json_t *o;
		if (!c[s].n) {
			json_object_set_new(stages, fleet_stage_names[s], json_null());
			continue;
		}
		const struct fleet_gpu *x = &g[c[s].slow];
		json_t *sg = json_object(), *sn = json_object();
		o = json_object();
		json_object_set_new(o, "unit", json_string(fleet_stage_units[s]));
		json_object_set_new(o, "gpus", json_integer(c[s].n));
		json_object_set_new(sg, "rank", json_integer(x->rank));
		json_object_set_new(sg, "node", json_string(x->node));
		json_object_set_new(sg, "device", json_string(x->device));
		json_object_set_new(sg, "value", cli_json_real(x->v[s]));
		json_object_set_new(o, "slowest_gpu", sg);
		json_object_set_new(o, "median_of_others", c[s].n > 1 ? cli_json_real(c[s].median) : json_null());
		json_object_set_new(o, "spread", cli_json_real(c[s].spread));
		json_object_set_new(sn, "node", json_string(c[s].slow_node));
		json_object_set_new(sn, "value", cli_json_real(c[s].node_value));
		json_object_set_new(o, "slowest_node", sn);
		json_object_set_new(o, "node_median_of_others", fi->nodes > 1 ? cli_json_real(c[s].node_median) : json_null());
		json_object_set_new(o, "node_spread", cli_json_real(c[s].node_spread));
		json_object_set_new(o, "over_max_spread", json_boolean(s == over));
		json_object_set_new(stages, fleet_stage_names[s], o);
	}
	json_object_set_new(fl, "stages", stages);
	for (int i = 0; i < n; i++) {
		const char *why = fleet_excluded(&r[i]);
		json_t *o = json_object();
		json_object_set_new(o, "rank", json_integer(r[i].rank));
		json_object_set_new(o, "node", json_string(r[i].node));
		json_object_set_new(o, "local_rank", json_integer(r[i].local_rank));
		json_object_set_new(o, "status", json_integer(r[i].status));
		json_object_set_new(o, "report", r[i].report ? json_incref(r[i].report) : json_null());
		json_array_append_new(ranks, o);
		if (why) {
			json_t *e = json_object();
			json_object_set_new(e, "rank", json_integer(r[i].rank));
			json_object_set_new(e, "node", json_string(r[i].node));
			json_object_set_new(e, "why", json_string(why));
			if (r[i].report && json_is_string(json_object_get(r[i].report, "error")))
				json_object_set(e, "error", json_object_get(r[i].report, "error"));
			json_array_append_new(ex, e);
		}
	}
	json_object_set_new(fl, "excluded", ex);
	json_object_set_new(fl, "interrupted", json_boolean(interrupted));
	json_object_set_new(fl, "result", json_string(result_name(status)));
	json_object_set_new(j, "fleet", fl);
	json_object_set_new(j, "ranks", ranks);

	/* text */
	if (text) {
		fprintf(text, "fleet: %d rank%s on %d node%s (at most %d a node); %s\n", fi->ranks, fi->ranks == 1 ? "" : "s",
			fi->nodes, fi->nodes == 1 ? "" : "s", fi->per_node, fi->library ? fi->library : "");
		fprintf(text, "  %4s  %-16s %-10s %-11s %10s %10s %11s %12s\n", "rank", "node", "device", "result",
			"read GB/s", "h2d GB/s", "kernel GB/s", "rows/s");
		for (int i = 0; i < n; i++) {
			const char *why = fleet_excluded(&r[i]);
			int shown = 0;
			for (int k = 0; k < ng; k++) {
				if (g[k].rank != r[i].rank)
					continue;
				fprintf(text, "  %4d  %-16.16s %-10.10s %-11s", r[i].rank, r[i].node, g[k].device,
					result_name(r[i].status));
				for (int s = 0; s < FLEET_N; s++) {
					int w = s == FLEET_E2E ? 12 : s == FLEET_KERNEL ? 11 : 10;
					if (g[k].v[s] > 0)
						fprintf(text, " %*.4g", w, g[k].v[s]);
					else
						fprintf(text, " %*s", w, "-");
				}
				fputc('\n', text);
				shown = 1;
			}
			if (!shown)
				fprintf(text, "  %4d  %-16.16s %-10s %-11s (left out: %s)\n", r[i].rank, r[i].node, "-",
					why ? why : result_name(r[i].status), why ? why : "no devices");
		}
		fprintf(text, "  %-11s %-36s %18s %16s %7s  %s\n", "stage", "slowest GPU", "value", "others' median",
			"spread", "slowest node");
		for (int s = 0; s < FLEET_N; s++) {
			char who[96];
			if (!c[s].n)
				continue;
			snprintf(who, sizeof(who), "rank %d on %.40s (%.20s)", g[c[s].slow].rank, g[c[s].slow].node,
				 g[c[s].slow].device);
			char med[32] = "-";
			if (c[s].n > 1)
				snprintf(med, sizeof(med), "%.4g %s", c[s].median, fleet_stage_units[s]);
			fprintf(text, "  %-11s %-36s %11.4g %-6s %16s %7.2f  %s%s\n", fleet_stage_names[s], who,
				g[c[s].slow].v[s], fleet_stage_units[s], med, c[s].spread, c[s].slow_node,
				s == over ? "  <- over --max-spread" : "");
		}
		for (int i = 0; i < n; i++) {
			const char *why = fleet_excluded(&r[i]);
			if (why)
				fprintf(text, "  left out: rank %d on %s: %s%s%s\n", r[i].rank, r[i].node, why,
					r[i].report && json_is_string(json_object_get(r[i].report, "error")) ? ": " : "",
					r[i].report ? str(r[i].report, "error", "") : "");
		}
		fprintf(text, "  result   %s%s\n", status == EXIT_PASS ? "PASS" : status == EXIT_MISMATCH ? "FAIL" : "ERROR",
			interrupted ? " (interrupted)" : "");
	}
	if (over >= 0 && err)
		fprintf(err, "%s: run: spread %.2f in %s is over --max-spread %g: the slowest GPU is rank %d on %s (%s) at "
			"%.4g %s, the others' median %.4g\n", fi->prog ? fi->prog : "wsnorm-mpi", c[over].spread,
			fleet_stage_names[over], fi->max_spread, g[c[over].slow].rank, g[c[over].slow].node,
			g[c[over].slow].device, g[c[over].slow].v[over], fleet_stage_units[over], c[over].median);
	free(g);
	if (json)
		*json = j;
	else
		json_decref(j);
	return status;
}
