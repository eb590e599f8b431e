/* SPDX-License-Identifier: MIT */
/* codegen/emit.c: wsn_emit_ptx and wsn_emit_plan, the public way to see a kernel's PTX and plan without a GPU. */
#include "codegen.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Plan (op, dt, hidden, rows) for the modelled device opts->arch names (H100 by default). */
static int model_plan(const char *what, enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
		      const struct wsn_plan_options *opts, struct wsn__kernel_plan *kp)
{
	struct wsn__plan_params p;
	struct wsn__gpu_props g;
	int err;

	memset(&p, 0, sizeof(p));
	p.op = op;
	p.rows = rows;
	p.hidden = hidden;
	p.dtype = dt;
	if (opts)
		p.opts = *opts;
	else
		wsn_plan_options_init(&p.opts, op);
	if ((err = wsn__plan_check(what, &p)) < 0)
		return err;
	if (p.opts.arch == 100)
		wsn__gpu_props_b200(&g);
	else if (p.opts.arch == 0 || p.opts.arch == 90)
		wsn__gpu_props_h100(&g);
	else
		return wsn__error(WSN_EINVAL, "%s: unsupported arch %d (expected 90 or 100)", what, p.opts.arch);
	return wsn__plan_kernel(&g, &p, kp);
}

/* *text: kp described (malloc'd). */
static int describe(const struct wsn__kernel_plan *kp, char **text)
{
	int n = wsn__describe_kernel_plan(kp, NULL, 0);

	if (n < 0 || !(*text = malloc((size_t)n + 1)))
		return wsn__error(WSN_ENOMEM, "plan: out of memory describing the plan of %s", kp->entry);
	wsn__describe_kernel_plan(kp, *text, (size_t)n + 1);
	return 0;
}

WSN_API int wsn_emit_ptx(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
			 const struct wsn_plan_options *opts, char **ptx, char **plan_text)
{
	struct wsn__kernel_plan kp;
	int err;

	if (!ptx)
		return wsn__error(WSN_EINVAL, "emit: no output pointer");
	*ptx = NULL;
	if (plan_text)
		*plan_text = NULL;
	if ((err = model_plan("emit", op, dt, hidden, rows, opts, &kp)))
		return err;
	if ((err = wsn__generate_ptx(&kp, ptx)))
		return err;
	if (plan_text && (err = describe(&kp, plan_text))) {
		free(*ptx);
		*ptx = NULL;
		return err;
	}
	return 0;
}

WSN_API int wsn_emit_plan(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
			  const struct wsn_plan_options *opts, char **text, char **json)
{
	struct wsn__kernel_plan kp;
	json_t *o = NULL;
	int err;

	if (!text && !json)
		return wsn__error(WSN_EINVAL, "plan: no output pointer");
	if (text)
		*text = NULL;
	if (json)
		*json = NULL;
	if ((err = model_plan("plan", op, dt, hidden, rows, opts, &kp)))
		return err;
	if (json) {
		int b200 = kp.arch == 100;

		if (!(o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:b, s:b, s:s, s:s, s:s}", "op", wsn_op_name(op), "dtype",
				    wsn_dtype_name(dt), "rows", (json_int_t)rows, "hidden", (json_int_t)hidden, "eps",
				    (double)(opts ? opts->eps : WSN_DEFAULT_EPS), "weight", kp.has_weight, "bias",
				    kp.has_bias, "device", b200 ? "model:b200" : "model:h100", "device_name",
				    b200 ? "B200-like sm_100 (modelled: 148 SMs, 227 KB shared memory per block)"
					 : "H100 SXM (modelled: 132 SMs, 227 KB shared memory per block)",
				    "backend", "model")))
			return wsn__error(WSN_ENOMEM, "plan: out of memory");
		if (!(err = wsn__kernel_plan_json(&kp, o)) &&
		    !(*json = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER)))
			err = wsn__error(WSN_ENOMEM, "plan: out of memory describing %s as JSON", kp.entry);
		json_decref(o);
		if (err)
			return err;
	}
	if (text && (err = describe(&kp, text))) {
		if (json) {
			free(*json);
			*json = NULL;
		}
		return err;
	}
	return 0;
}
