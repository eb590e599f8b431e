/* SPDX-License-Identifier: MIT */
/* launcher/fleet_html.c: run --html: the fleet report as one self-contained page of inline SVG charts. */
#include "fleet.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CHART_W 760
#define BAR_H 18
#define LABEL_W 250
#define LINE_H 260

static const char *const palette[] = { "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7" };

/* text with &, <, >, " and ' escaped */
static void esc(FILE *f, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

static json_t *path2(json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

/* One horizontal bar chart: n bars of value v[i] labelled label[i] (escaped), bar `slow` marked. */
static void bars(FILE *f, const char *stage, const char *level, int n, const double *v, char (*label)[160],
		 char (*attrs)[200], int slow, const char *unit)
{
	double hi = 0;
	int h = n * (BAR_H + 6) + 10;

	for (int i = 0; i < n; i++)
		if (v[i] > hi)
			hi = v[i];
	fprintf(f, "<svg class=\"chart\" data-stage=\"%s\" data-level=\"%s\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" role=\"img\">\n", stage, level, CHART_W, h, CHART_W, h);
	for (int i = 0; i < n; i++) {
		int y = 5 + i * (BAR_H + 6);
		double w = hi > 0 ? v[i] / hi * (CHART_W - LABEL_W - 110) : 0;
		fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", LABEL_W - 6, y + BAR_H - 4);
		esc(f, label[i]);
		fprintf(f, "</text><rect class=\"bar %s%s\" %s x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>", level,
			i == slow ? " straggler" : "", attrs[i], LABEL_W, y, w, BAR_H);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.4g %s%s</text>\n", LABEL_W + w + 6, y + BAR_H - 4, v[i], unit,
			i == slow ? " \xe2\x80\x94 slowest" : "");
	}
	fputs("</svg>\n", f);
}

/* Each GPU's rows/s over the run: a polyline per GPU against the run's seconds. */
static void lines(FILE *f, const struct fleet_rank *r, int n)
{
	double tmax = 0, vmax = 0;
	int k = 0, any = 0;

	for (int i = 0; i < n; i++) {
		json_t *ts = json_object_get(r[i].report, "sample_seconds"), *d;
		size_t j;
		if (json_array_size(ts))
			tmax = json_number_value(json_array_get(ts, json_array_size(ts) - 1)) > tmax ?
				       json_number_value(json_array_get(ts, json_array_size(ts) - 1)) : tmax;
		json_array_foreach(json_object_get(r[i].report, "devices"), j, d) {
			json_t *x;
			size_t q;
			json_array_foreach(json_object_get(d, "rows_per_s_samples"), q, x) {
				any = 1;
				if (json_number_value(x) > vmax)
					vmax = json_number_value(x);
			}
		}
	}
	if (!any || tmax <= 0 || vmax <= 0) {
		fputs("<p>No samples: the run was shorter than a second.</p>\n", f);
		return;
	}
	fprintf(f, "<svg class=\"lines\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" role=\"img\">\n", CHART_W,
		LINE_H + 40, CHART_W, LINE_H + 40);
	fprintf(f, "<line class=\"axis\" x1=\"60\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/><line class=\"axis\" x1=\"60\" y1=\"10\" "
		"x2=\"60\" y2=\"%d\"/>\n", LINE_H, CHART_W - 10, LINE_H, LINE_H);
	fprintf(f, "<text x=\"56\" y=\"16\" text-anchor=\"end\">%.3g</text><text x=\"56\" y=\"%d\" text-anchor=\"end\">0"
		"</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.1f s</text>\n", vmax, LINE_H, CHART_W - 10, LINE_H + 16, tmax);
	for (int i = 0; i < n; i++) {
		json_t *ts = json_object_get(r[i].report, "sample_seconds"), *d;
		size_t j;
		json_array_foreach(json_object_get(r[i].report, "devices"), j, d) {
			json_t *ss = json_object_get(d, "rows_per_s_samples");
			const char *color = palette[k % (sizeof(palette) / sizeof(palette[0]))];
			fprintf(f, "<polyline class=\"line\" data-rank=\"%d\" data-device=\"", r[i].rank);
			esc(f, json_string_value(json_object_get(d, "device")));
			fprintf(f, "\" fill=\"none\" stroke=\"%s\" points=\"", color);
			for (size_t q = 0; q < json_array_size(ss) && q < json_array_size(ts); q++)
				fprintf(f, "%.1f,%.1f ", 60 + json_number_value(json_array_get(ts, q)) / tmax * (CHART_W - 80),
					LINE_H - json_number_value(json_array_get(ss, q)) / vmax * (LINE_H - 10));
			fprintf(f, "\"/><text x=\"%d\" y=\"%d\" fill=\"%s\">rank %d ", CHART_W - 200, 20 + 14 * k, color, r[i].rank);
			esc(f, json_string_value(json_object_get(d, "device")));
			fputs("</text>\n", f);
			k++;
		}
	}
	fputs("</svg>\n", f);
}

static int page(FILE *f, json_t *doc)
{
	json_t *fl = json_object_get(doc, "fleet"), *rs = json_object_get(doc, "ranks"), *first = NULL, *x;
	int n = (int)json_array_size(rs), ng = 0;
	struct fleet_rank *r = calloc((size_t)n + 1, sizeof(*r));
	struct fleet_gpu *g;
	size_t i;

	if (!r)
		return -1;
	json_array_foreach(rs, i, x) {
		r[i].rank = (int)json_integer_value(json_object_get(x, "rank"));
		r[i].local_rank = (int)json_integer_value(json_object_get(x, "local_rank"));
		r[i].node = json_string_value(json_object_get(x, "node"));
		r[i].status = (int)json_integer_value(json_object_get(x, "status"));
		r[i].report = json_is_object(json_object_get(x, "report")) ? json_object_get(x, "report") : NULL;
		if (!first && r[i].report)
			first = r[i].report;
	}
	g = fleet_gpus(r, n, &ng);
	fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>wsnorm run: ", f);
	fprintf(f, "%d rank%s on %d node%s</title>\n", n, n == 1 ? "" : "s", (int)json_integer_value(json_object_get(fl, "nodes")),
		json_integer_value(json_object_get(fl, "nodes")) == 1 ? "" : "s");
	fputs("<style>body{font:14px sans-serif;margin:24px;color:#222}h2{font-size:16px;margin:20px 0 6px}"
	      "text{font:12px sans-serif}.bar{fill:#4e79a7}.bar.straggler{fill:#e15759}.axis{stroke:#888}"
	      "table{border-collapse:collapse}td,th{padding:2px 10px;text-align:left}</style></head><body>\n", f);
	fputs("<h1>wsnorm run</h1>\n<table>", f);
	if (first) {
		fputs("<tr><th>op</th><td>", f);
		esc(f, json_string_value(json_object_get(first, "op")));
		fputs(" ", f);
		esc(f, json_string_value(json_object_get(first, "dtype")));
		fprintf(f, ", hidden %lld</td></tr>", (long long)json_integer_value(json_object_get(first, "hidden")));
	}
	fprintf(f, "<tr><th>ranks</th><td>%d on %lld node(s), at most %lld a node</td></tr><tr><th>MPI</th><td>", n,
		(long long)json_integer_value(json_object_get(fl, "nodes")),
		(long long)json_integer_value(json_object_get(fl, "ranks_per_node")));
	esc(f, json_string_value(json_object_get(fl, "mpi_library")));
	fputs("</td></tr><tr><th>result</th><td class=\"result\">", f);
	esc(f, json_string_value(json_object_get(fl, "result")));
	fprintf(f, "%s</td></tr></table>\n", json_is_true(json_object_get(fl, "interrupted")) ? " (interrupted)" : "");
	json_array_foreach(json_object_get(fl, "excluded"), i, x) {
		fprintf(f, "<p class=\"excluded\">Left out: rank %lld on ", (long long)json_integer_value(json_object_get(x, "rank")));
		esc(f, json_string_value(json_object_get(x, "node")));
		fputs(": ", f);
		esc(f, json_string_value(json_object_get(x, "why")));
		fputs("</p>\n", f);
	}
	for (int s = 0; s < FLEET_N && ng; s++) {
		json_t *st = path2(fl, "stages", fleet_stage_names[s]);
		double *v = calloc((size_t)ng, sizeof(*v));
		char (*label)[160] = calloc((size_t)ng, sizeof(*label)), (*attrs)[200] = calloc((size_t)ng, sizeof(*attrs));
		const char **nodes = calloc((size_t)ng, sizeof(*nodes));
		int m = 0, slow = -1, nn;

		if (!json_is_object(st) || !v || !label || !attrs || !nodes) {
			free(v);
			free(label);
			free(attrs);
			free(nodes);
			continue;
		}
		for (int k = 0; k < ng; k++) {
			if (g[k].v[s] <= 0)
				continue;
			v[m] = g[k].v[s];
			snprintf(label[m], sizeof(label[m]), "%.60s rank %d %.40s", g[k].node, g[k].rank, g[k].device);
			snprintf(attrs[m], sizeof(attrs[m]), "data-rank=\"%d\"", g[k].rank);
			if (g[k].rank == json_integer_value(path2(st, "slowest_gpu", "rank")) &&
			    !strcmp(g[k].device, json_string_value(path2(st, "slowest_gpu", "device")) ?
					json_string_value(path2(st, "slowest_gpu", "device")) : ""))
				slow = m;
			m++;
		}
		fprintf(f, "<h2>%s (%s): spread %.3g</h2>\n", fleet_stage_names[s], fleet_stage_units[s],
			json_number_value(json_object_get(st, "spread")));
		bars(f, fleet_stage_names[s], "gpu", m, v, label, attrs, slow, fleet_stage_units[s]);
		/* the nodes: their GPUs summed */
		nn = fleet_node_sums(g, ng, s, nodes, v);
		slow = -1;
		for (int q = 0; q < nn; q++) {
			snprintf(label[q], sizeof(label[q]), "node %.100s", nodes[q]);
			attrs[q][0] = 0;
			if (!strcmp(nodes[q], json_string_value(path2(st, "slowest_node", "node")) ?
					      json_string_value(path2(st, "slowest_node", "node")) : ""))
				slow = q;
		}
		bars(f, fleet_stage_names[s], "node", nn, v, label, attrs, slow, fleet_stage_units[s]);
		free(v);
		free(label);
		free(attrs);
		free(nodes);
	}
	fputs("<h2>rows/s over the run, each GPU</h2>\n", f);
	lines(f, r, n);
	fputs("</body></html>\n", f);
	free(g);
	free(r);
	return ferror(f) ? -1 : 0;
}

int fleet_html_write(const char *path, json_t *fleet, char *msg, size_t len)
{
	size_t n = strlen(path);
	char *tmp = malloc(n + 16);
	FILE *f;
	int fd, err = 0;

	if (!tmp) {
		snprintf(msg, len, "--html %s: out of memory", path);
		return -1;
	}
	snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
	if ((fd = mkstemp(tmp)) < 0 || !(f = fdopen(fd, "w"))) {
		snprintf(msg, len, "--html %s: %s", path, strerror(errno));
		if (fd >= 0) {
			close(fd);
			unlink(tmp);
		}
		free(tmp);
		return -1;
	}
	{ /* the page's mode from the umask, as any file wsnorm writes */
		mode_t um = umask(0);
		umask(um);
		if (fchmod(fd, 0666 & ~um))
			err = -1;
	}
	err = page(f, fleet) | err;
	if (fflush(f) || fsync(fileno(f)))
		err = -1;
	if (fclose(f))
		err = -1;
	if (err || rename(tmp, path)) {
		snprintf(msg, len, "--html %s: %s", path, errno ? strerror(errno) : "cannot write the page");
		unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}
