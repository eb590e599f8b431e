/* SPDX-License-Identifier: MIT */
/* codegen/describe.c: a kernel plan as text for a terminal and as JSON (wsnorm plan, wsn_emit_plan). */
#include "codegen.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

/* The kernel's ABI table: the backward's for the backward ops, else the forward's. */
static const struct wsn__abi *kernel_abi(const struct wsn__kernel_plan *kp)
{
	return wsn_op_is_backward(kp->op) ? &wsn__abi_backward : &wsn__abi_forward;
}

/* "x, weight, ..." from abi, like snprintf into buf (truncated to len). */
static void abi_names(const struct wsn__abi *abi, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int i = 0; i < abi->count && off < len; i++) {
		int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", abi->params[i].name);

		if (n < 0)
			break;
		off += (size_t)n;
	}
}

/* A ws plan as text, like snprintf. */
static int describe_ws(const struct wsn__kernel_plan *kp, char *buf, size_t len)
{
	int bwd = wsn_op_is_backward(kp->op);
	char split[160] = "", names[256];

	abi_names(kernel_abi(kp), names, sizeof(names));

	if (kp->cluster > 1)
		snprintf(split, sizeof(split), "cluster:       %u CTAs per row, %lld columns each; row sums traded through "
			 "distributed shared memory\n", kp->cluster, (long long)wsn__kernel_cols(kp));
	return snprintf(buf, len,
			"approach:      ws%s\n"
			"kernel:        %s (sm_%da)\n"
			"parameters:    %s\n"
			"finish kernel: %s\n"
			"op/dtype:      %s %s, hidden %lld, rows %lld, weight %s, bias %s\n"
			"block:         %u threads = producer %u + bdimy %u row groups x bdimx %u; %u vectors (%u elements) "
			"per thread per row, vec %u\n"
			"%s"
			"pipeline:      %u stage%s x %u row%s (unroll) of %u bytes per tensor%s; stage %s\n"
			"storage:       params %s, dweight %s, dbias %s\n"
			"budget:        registers %u at entry, producer %u, row groups %u (~%u needed); %u B dynamic shared "
			"memory; 1 CTA/SM\n"
			"grid:          persistent, up to %u CTAs; finish %u x %u threads; workspace %zu B\n"
			"why:           %s\n",
			kp->ws_forced ? (kp->ws_good ? " (forced)" : " (forced; the heuristic expects it to be slow)") : "",
			kp->entry, kp->arch, names, kp->finish_entry[0] ? kp->finish_entry : "(none)", wsn_op_name(kp->op),
			wsn_dtype_name(kp->dtype), (long long)kp->hidden, (long long)kp->rows, kp->has_weight ? "yes" : "no",
			kp->has_bias ? "yes" : "no", kp->block_threads, kp->producer_threads, kp->bdimy, kp->bdimx, kp->nvec,
			kp->per_thread, kp->vec, split, kp->stages, kp->stages > 1 ? "s" : "", kp->unroll,
			kp->unroll > 1 ? "s" : "", kp->row_bytes, kp->stats_ring ? " + the rows' statistics" : "",
			kp->cache_rows ? "copied into registers" : "read from shared memory",
			kp->param_store == WSN_STORE_REG ? "registers" : "shared memory",
			bwd && kp->has_weight ? (kp->dw_store == WSN_STORE_REG ? "registers" : "shared memory") : "-",
			bwd && kp->has_bias ? (kp->db_store == WSN_STORE_REG ? "registers" : "shared memory") : "-",
			kp->regs_entry, kp->regs_producer, kp->regs_compute, kp->est_regs, kp->smem_bytes, kp->max_grid,
			kp->finish_grid, kp->finish_threads, kp->partials_bytes, kp->why);
}

int wsn__describe_kernel_plan(const struct wsn__kernel_plan *kp, char *buf, size_t len)
{
	char names[256];
	int n;

	if (kp->approach == WSN_APPROACH_WS)
		return describe_ws(kp, buf, len);
	abi_names(kernel_abi(kp), names, sizeof(names));

	n = snprintf(buf, len,
		     "approach:      %s\n"
		     "kernel:        %s (sm_%da)\n"
		     "parameters:    %s\n"
		     "finish kernel: %s\n"
		     "op/dtype:      %s %s, hidden %lld, rows %lld, weight %s, bias %s\n"
		     "block:         %u threads = bdimx %u x bdimy %u; %u vectors (%u elements) per thread, vec %u\n"
		     "storage:       row %s, params %s, dweight %s, dbias %s\n"
		     "budget:        ~%u registers/thread, %u B dynamic shared memory, %u CTAs/SM\n"
		     "grid:          %s %u CTAs%s; finish %u x %u threads; workspace %zu B\n"
		     "why:           %s\n",
		     wsn_approach_name(kp->approach), kp->entry, kp->arch, names,
		     kp->finish_entry[0] ? kp->finish_entry : "(none)", wsn_op_name(kp->op),
		     wsn_dtype_name(kp->dtype), (long long)kp->hidden, (long long)kp->rows,
		     kp->has_weight ? "yes" : "no", kp->has_bias ? "yes" : "no", kp->block_threads, kp->bdimx,
		     kp->bdimy, kp->nvec, kp->per_thread, kp->vec, wsn__store_name(kp->row_store),
		     wsn__store_name(kp->param_store), wsn_op_is_backward(kp->op) && kp->has_weight
		     ? wsn__store_name(kp->dw_store) : "-", wsn_op_is_backward(kp->op) && kp->has_bias
		     ? wsn__store_name(kp->db_store) : "-", kp->est_regs, kp->smem_bytes, kp->ctas_per_sm,
		     kp->block_grid ? "one CTA per row block," : "persistent, up to", kp->max_grid,
		     kp->block_grid ? " resident at once" : "", kp->finish_grid, kp->finish_threads, kp->partials_bytes, kp->why);
	return n;
}

/* json_object_set_new that remembers a failure (a NULL value or a full object) in *bad. */
static void jset(json_t *o, const char *key, json_t *v, int *bad)
{
	if (!v || json_object_set_new(o, key, v))
		*bad = 1;
}

/* [{"name", "type", "meaning"}, ...] of abi, in launch order. */
static json_t *jabi(const struct wsn__abi *abi, int *bad)
{
	static const char *const types[] = { [WSN_ABI_u64] = "u64", [WSN_ABI_u32] = "u32", [WSN_ABI_f32] = "f32" };
	json_t *a = json_array();

	for (int i = 0; a && i < abi->count; i++) {
		json_t *p = json_object();

		if (p) {
			jset(p, "name", json_string(abi->params[i].name), bad);
			jset(p, "type", json_string(types[abi->params[i].type]), bad);
			jset(p, "meaning", json_string(abi->params[i].meaning), bad);
		}
		if (!p || json_array_append_new(a, p))
			*bad = 1;
	}
	return a;
}

static json_t *jstore(int applies, int store)
{
	return applies ? json_string(wsn__store_name(store)) : json_null();
}

int wsn__kernel_plan_json(const struct wsn__kernel_plan *kp, void *obj)
{
	json_t *o = obj, *st, *regs, *smem, *grid;
	int bwd = wsn_op_is_backward(kp->op), ws = kp->approach == WSN_APPROACH_WS, bad = 0;
	char arch[16];

	snprintf(arch, sizeof(arch), "sm_%da", kp->arch);
	jset(o, "approach", json_string(wsn_approach_name(kp->approach)), &bad);
	jset(o, "rule", wsn__json_text(kp->rule), &bad);
	jset(o, "arch", json_string(arch), &bad);
	jset(o, "kernel", json_string(kp->entry), &bad);
	jset(o, "parameters", jabi(kernel_abi(kp), &bad), &bad);
	jset(o, "finish_kernel", kp->finish_entry[0] ? json_string(kp->finish_entry) : json_null(), &bad);
	jset(o, "block_threads", json_integer(kp->block_threads), &bad);
	jset(o, "bdimx", json_integer(kp->bdimx), &bad);
	jset(o, "bdimy", json_integer(kp->bdimy), &bad);
	jset(o, "vec", json_integer(kp->vec), &bad);
	jset(o, "vectors_per_thread", json_integer(kp->nvec), &bad);
	jset(o, "elements_per_thread", json_integer(kp->per_thread), &bad);
	if (ws) {
		jset(o, "producer_threads", json_integer(kp->producer_threads), &bad);
		jset(o, "stages", json_integer(kp->stages), &bad);
		jset(o, "unroll", json_integer(kp->unroll), &bad);
		jset(o, "row_bytes", json_integer(kp->row_bytes), &bad);
		jset(o, "stage_bytes", json_integer(kp->stage_bytes), &bad);
		jset(o, "stage_in_registers", json_boolean(kp->cache_rows), &bad);
		if (wsn_op_is_backward(kp->op))
			jset(o, "statistics_in_stage", json_boolean(kp->stats_ring), &bad);
		jset(o, "cluster", json_integer(kp->cluster > 1 ? kp->cluster : 1), &bad);
		jset(o, "cluster_columns", json_integer(wsn__kernel_cols(kp)), &bad);
		jset(o, "forced", json_boolean(kp->ws_forced), &bad);
		jset(o, "heuristic_good", json_boolean(kp->ws_good), &bad);
	}
	if ((st = json_object())) {
		jset(st, "row", ws ? json_string("shared memory ring") : json_string(wsn__store_name(kp->row_store)), &bad);
		jset(st, "params", jstore(kp->has_weight || kp->has_bias, kp->param_store), &bad);
		jset(st, "dweight", jstore(bwd && kp->has_weight, kp->dw_store), &bad);
		jset(st, "dbias", jstore(bwd && kp->has_bias, kp->db_store), &bad);
	}
	jset(o, "storage", st, &bad);
	if ((regs = json_object())) {
		jset(regs, "estimate", json_integer(kp->est_regs), &bad);
		if (ws) {
			jset(regs, "entry", json_integer(kp->regs_entry), &bad);
			jset(regs, "producer", json_integer(kp->regs_producer), &bad);
			jset(regs, "row_groups", json_integer(kp->regs_compute), &bad);
		}
	}
	jset(o, "registers", regs, &bad);
	if ((smem = json_object())) {
		jset(smem, "bytes", json_integer(kp->smem_bytes), &bad);
		jset(smem, "limit", json_integer(kp->smem_limit), &bad);
		if (ws) {
			struct wsn__ws_layout l;

			wsn__ws_layout(kp, &l);
			jset(smem, "ring", json_integer((json_int_t)kp->stages * kp->stage_bytes), &bad);
			jset(smem, "barriers", json_integer(l.red - l.bars), &bad);
			jset(smem, "reduction", json_integer(l.w - l.red), &bad);
			jset(smem, "parameters", json_integer(l.dw - l.w), &bad);
			jset(smem, "sums", json_integer(l.stages - l.dw), &bad);
		}
	}
	jset(o, "shared_memory", smem, &bad);
	jset(o, "ctas_per_sm", json_integer(ws ? 1 : kp->ctas_per_sm), &bad);
	if ((grid = json_object())) {
		jset(grid, "kind", json_string(kp->block_grid ? "row blocks" : "persistent"), &bad);
		jset(grid, "ctas", json_integer(kp->max_grid), &bad);
	}
	jset(o, "grid", grid, &bad);
	if (kp->finish_entry[0]) {
		json_t *f = json_object();

		if (f) {
			jset(f, "grid", json_integer(kp->finish_grid), &bad);
			jset(f, "threads", json_integer(kp->finish_threads), &bad);
			jset(f, "parameters", jabi(&wsn__abi_finish, &bad), &bad);
		}
		jset(o, "finish", f, &bad);
	} else {
		jset(o, "finish", json_null(), &bad);
	}
	jset(o, "workspace_bytes", json_integer((json_int_t)kp->partials_bytes), &bad);
	jset(o, "why", wsn__json_text(kp->why), &bad);
	return bad ? wsn__error(WSN_ENOMEM, "plan: out of memory describing %s as JSON", kp->entry) : 0;
}
