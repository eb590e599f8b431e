/* SPDX-License-Identifier: MIT */
/* launcher/cmd_bench.c: `wsnorm bench`: kernel time on device-resident data against the copy bandwidth. */
#include "bench.h"

#include <stdlib.h>
#include <string.h>

int cmd_bench(int argc, char **argv)
{
	struct bench_opts o;
	struct wsn_device_info di;
	struct wsn_device *cpu = NULL;
	struct timer t = { 0 };
	int ret, err, noplan = 0, mismatch = 0, any_bias = 0;
	double copy_bps = 0;
	json_t *jres = NULL;
	char sz[32];

	if ((ret = bench_parse_options(argc, argv, &o)) >= 0)
		return ret;
	if ((ret = cli_open_device("bench", o.device, 0, &t.dev))) {
		if (o.json && ret == EXIT_RUNTIME) { /* the document still comes, the same keys, no device */
			memset(&di, 0, sizeof(di));
			snprintf(di.spec, sizeof(di.spec), "%s", o.device);
			if (o.h2d && !o.have_copy)
				o.copy_bytes = H2D_DEFAULT_BYTES; /* what a GPU would have been given */
			if (o.h2d)
				bench_h2d_json(&o, &di, 0, 0, cli_last_error());
			else
				bench_table_json(&o, &di, 0, json_array(), ret);
		}
		return ret;
	}
	wsn_device_info(t.dev, &di);
	/* with --json, the document is printed at the end, also after a runtime error */
	if (o.json && !o.h2d)
		jres = json_array();
	if ((ret = cli_kparam_gpu_only("bench", o.device, &di, o.force, 0))) {
		json_decref(jres); /* a usage error: no document */
		jres = NULL;
		goto out;
	}
	if (di.exec_mem == WSN_MEM_HOST) {
		if (!o.have_rows)
			o.rows = CPU_DEFAULT_ROWS;
		if (!o.have_iters)
			o.iters = CPU_DEFAULT_ITERS;
		if (!o.have_calls)
			o.calls = CPU_SINGLE_CALLS;
		if (!o.have_copy)
			o.copy_bytes = 256u << 20;
	}
	if (o.h2d && !o.have_copy)
		o.copy_bytes = di.exec_mem == WSN_MEM_HOST ? H2D_CPU_BYTES : H2D_DEFAULT_BYTES;
	if ((err = wsn_stream_create(t.dev, &t.s)) < 0 || (err = wsn_event_create(t.dev, &t.e0)) < 0 ||
	    (err = wsn_event_create(t.dev, &t.e1)) < 0) {
		ret = cli_fail(err, "bench: streams and events on %s", di.spec);
		if (o.json && o.h2d)
			bench_h2d_json(&o, &di, 0, 0, cli_last_error());
		goto out;
	}
	if (o.h2d) {
		ret = bench_h2d(&o, &t, &di);
		goto out;
	}
	if ((err = bench_timer_single(&t, &o, &di)) < 0) {
		ret = cli_fail(err, "bench: events and an L2 flush buffer of %zu bytes for single calls on %s",
			       t.flush_bytes, di.spec);
		goto out;
	}
	if (o.verify && (ret = cli_open_device("bench", "cpu", 0, &cpu)))
		goto out;
	if ((err = cli_copy_bandwidth(t.dev, t.s, o.copy_bytes, 10, &copy_bps)) < 0) {
		ret = cli_fail(err, "bench: copy bandwidth on %s", di.spec);
		goto out;
	}
	for (int i = 0; i < o.nops; i++)
		any_bias |= wsn_op_is_layernorm(o.ops[i]);
	if (!o.json) {
		printf("device %s (%s); device-to-device copy %.3f TB/s (read + write, %s)%s%s\n", di.spec, di.name,
		       copy_bps / 1e12, bench_size_text(o.copy_bytes, sz, sizeof(sz)), o.weight ? "" : "; no weight",
		       o.bias || !any_bias ? "" : "; no bias");
		bench_table_head();
	}
	for (int i = 0; i < o.nops; i++) {
		for (int d = 0; d < o.ndts; d++) {
			for (int h = 0; h < o.nhidden; h++) {
				struct point pt = { .op = (enum wsn_op)o.ops[i], .dt = (enum wsn_dtype)o.dts[d],
						    .hidden = o.hidden[h], .rows = o.rows, .weight = o.weight };
				const char *name = wsn_op_name(pt.op), *dtn = wsn_dtype_name(pt.dt);

				pt.bias = o.bias && wsn_op_is_layernorm(pt.op);
				if ((ret = bench_point(&o, &t, &di, cpu, copy_bps, &pt)))
					goto out;
				if (pt.noplan[0]) {
					fprintf(stderr, "%s: bench: %s %s hidden %lld: no plan: %s\n", cli_prog, name, dtn,
						(long long)pt.hidden, pt.noplan);
					noplan++;
				}
				if (pt.checked && !pt.pass) {
					fprintf(stderr, "%s: bench: %s %s hidden %lld: the outputs differ from the CPU reference: %s\n",
						cli_prog, name, dtn, (long long)pt.hidden, pt.why);
					mismatch++;
				}
				if (pt.l2_resident)
					cli_note("%s: bench: note: %s %s hidden %lld: all %d input sets fit twice in the L2 "
						 "cache, so the time includes L2 hits\n", cli_prog, name, dtn, (long long)pt.hidden,
						 pt.sets);
				if (o.json)
					json_array_append_new(jres, bench_point_json(&pt));
				else
					bench_point_text(&pt);
			}
		}
	}
	if (noplan)
		ret = EXIT_RUNTIME; /* the table is whole, but not every point ran */
	else if (mismatch)
		ret = EXIT_MISMATCH;
out:
	if (jres)
		bench_table_json(&o, &di, copy_bps, jres, ret);
	wsn_device_close(cpu);
	bench_timer_single_free(&t);
	wsn_event_destroy(t.e0);
	wsn_event_destroy(t.e1);
	wsn_stream_destroy(t.s);
	wsn_device_close(t.dev);
	return ret;
}
