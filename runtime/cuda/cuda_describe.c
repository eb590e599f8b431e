/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_describe.c: a CUDA plan as text and JSON: the kernel plan, its autotune line, JIT and kernel attributes. */
#include "cuda/cuda_plan.h"
#include "core/error.h"
#include "core/json.h"
#include "core/util.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void describe_kernel(char *buf, size_t len, size_t *off, const struct wsn__cu_kernel *k)
{
	wsn__cu_appendf(buf, len, off,
		"kernel %s: %d registers, %d bytes local (spills), %d bytes static shared, %u bytes dynamic shared, "
		"%u threads, %d CTAs/SM resident (PTX %d.%d, SASS sm_%d)\n",
		k->name, k->regs, k->local_bytes, k->static_smem, k->dyn_smem, k->block, k->ctas_per_sm,
		k->ptx_version / 10, k->ptx_version % 10, k->binary_version);
}

int wsn__cuda_plan_describe(void *ctx, const void *plan, char *buf, size_t len)
{
	const struct wsn__cu_plan *cp = plan;
	size_t off = 0;
	int n;

	char *text;

	(void)ctx;
	if (cp->tune[0])
		wsn__cu_appendf(buf, len, &off, "autotune:      %s\n", cp->tune);
	/* the planner's text, rendered apart so the length never depends on the caller's buffer */
	if ((n = wsn__describe_kernel_plan(&cp->kp, NULL, 0)) < 0)
		return n;
	if (!(text = malloc((size_t)n + 1)))
		return wsn__error(WSN_ENOMEM, "plan describe: out of memory");
	wsn__describe_kernel_plan(&cp->kp, text, (size_t)n + 1);
	wsn__cu_appendf(buf, len, &off, "%s%s", text, n > 0 && text[n - 1] != '\n' ? "\n" : "");
	free(text);
	wsn__cu_appendf(buf, len, &off, "JIT: %.1f ms wall", cp->mod.jit_ms);
	if (cp->mod.jit_driver_ms >= 0)
		wsn__cu_appendf(buf, len, &off, " (compiler: %.1f ms)", (double)cp->mod.jit_driver_ms);
	wsn__cu_appendf(buf, len, &off, ", %zu bytes of PTX\n", cp->mod.ptx_bytes);
	describe_kernel(buf, len, &off, &cp->main);
	if (cp->has_finish)
		describe_kernel(buf, len, &off, &cp->finish);
	if (cp->kp.block_grid)
		wsn__cu_appendf(buf, len, &off, "grid: one CTA per row block, %u resident at once (planner %u; %d CTAs/SM x %d SMs measured)\n",
			cp->kp.max_grid, cp->planned_grid, cp->main.ctas_per_sm, cp->sms);
	else
		wsn__cu_appendf(buf, len, &off, "grid: up to %u CTAs%s (planner %u; %d CTAs/SM x %d SMs measured%s)\n",
			cp->kp.max_grid, cp->kp.cluster > 1 ? " in clusters" : "", cp->planned_grid, cp->main.ctas_per_sm,
			cp->sms, cp->kp.cluster > 1 ? ", clusters as many as fit at once" : "");
	if (cp->partials_bytes)
		wsn__cu_appendf(buf, len, &off, "workspace: %zu bytes of f32 partial sums\n", cp->partials_bytes);
	return (int)off;
}

static json_t *kernel_json(const struct wsn__cu_kernel *k)
{
	char ptx[16], sass[16];

	snprintf(ptx, sizeof(ptx), "%d.%d", k->ptx_version / 10, k->ptx_version % 10);
	snprintf(sass, sizeof(sass), "sm_%d", k->binary_version);
	return json_pack("{s:s, s:i, s:i, s:i, s:I, s:I, s:i, s:s, s:s}", "name", k->name, "registers", k->regs,
			 "local_bytes", k->local_bytes, "static_shared", k->static_smem, "dynamic_shared",
			 (json_int_t)k->dyn_smem, "threads", (json_int_t)k->block, "ctas_per_sm", k->ctas_per_sm,
			 "ptx_version", ptx, "sass", sass);
}

int wsn__cuda_plan_json(void *ctx, const void *plan, void *obj)
{
	const struct wsn__cu_plan *cp = plan;
	json_t *o = obj, *grid, *compiled;
	int err;

	(void)ctx;
	if ((err = wsn__kernel_plan_json(&cp->kp, o)) < 0)
		return err;
	if (cp->tune[0]) {
		char rule[sizeof(cp->tune) + 16];

		snprintf(rule, sizeof(rule), "autotune: %s", cp->tune);
		if (strncmp(cp->tune, "ignored", 7) && json_object_set_new(o, "rule", wsn__json_text(rule)))
			goto nomem;
	}
	if (json_object_set_new(o, "autotune", cp->tune[0] ? wsn__json_text(cp->tune) : json_null()) ||
	    json_object_set_new(o, "workspace_bytes", json_integer((json_int_t)cp->partials_bytes)) ||
	    json_object_set_new(o, "jit_ms", json_real(cp->mod.jit_ms)) ||
	    json_object_set_new(o, "jit_compiler_ms",
				cp->mod.jit_driver_ms >= 0 ? json_real(cp->mod.jit_driver_ms) : json_null()) ||
	    json_object_set_new(o, "ptx_bytes", json_integer((json_int_t)cp->mod.ptx_bytes)))
		goto nomem;
	if (!(compiled = json_pack("{s:o, s:o}", "main", kernel_json(&cp->main), "finish",
				   cp->has_finish ? kernel_json(&cp->finish) : json_null())) ||
	    json_object_set_new(o, "compiled", compiled))
		goto nomem;
	if ((grid = json_object_get(o, "grid")) &&
	    (json_object_set_new(grid, "planned_ctas", json_integer(cp->planned_grid)) ||
	     json_object_set_new(grid, "sms", json_integer(cp->sms))))
		goto nomem;
	return 0;
nomem:
	return wsn__error(WSN_ENOMEM, "plan: out of memory describing %s as JSON", cp->kp.entry);
}
