/* SPDX-License-Identifier: MIT */
/* codegen/emit.c: wsn_emit_ptx, the public way to see a kernel's PTX and plan without a GPU. */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

WSN_API int wsn_emit_ptx(enum wsn_op op, enum wsn_dtype dt, int64_t hidden, int64_t rows,
			 const struct wsn_plan_options *opts, char **ptx, char **plan_text)
{
	struct wsn__plan_params p;
	struct wsn__gpu_props g;
	struct wsn__kernel_plan kp;
	int err, n;

	if (!ptx)
		return wsn__error(WSN_EINVAL, "emit: no output pointer");
	*ptx = NULL;
	if (plan_text)
		*plan_text = NULL;
	if (!wsn_op_name(op))
		return wsn__error(WSN_EINVAL, "emit: invalid op %d", (int)op);
	if (!wsn_dtype_name(dt) || !wsn_dtype_size(dt))
		return wsn__error(WSN_EDTYPE, "emit: invalid dtype %d", (int)dt);
	if (hidden < 1 || rows < 1)
		return wsn__error(WSN_ESHAPE, "emit: impossible shape %lld x %lld (rows and hidden must be >= 1)",
				  (long long)rows, (long long)hidden);
	memset(&p, 0, sizeof(p));
	p.op = op;
	p.rows = rows;
	p.hidden = hidden;
	p.dtype = dt;
	if (opts)
		p.opts = *opts;
	else
		wsn_plan_options_init(&p.opts, op);
	if (p.opts.arch == 100)
		wsn__gpu_props_b200(&g);
	else if (p.opts.arch == 0 || p.opts.arch == 90)
		wsn__gpu_props_h100(&g);
	else
		return wsn__error(WSN_EINVAL, "emit: unsupported arch %d (expected 90 or 100)", p.opts.arch);
	if ((err = wsn__plan_kernel(&g, &p, &kp)))
		return err;
	if ((err = wsn__generate_ptx(&kp, ptx)))
		return err;
	if (plan_text) {
		n = wsn__describe_kernel_plan(&kp, NULL, 0);
		if (n < 0 || !(*plan_text = malloc((size_t)n + 1))) {
			free(*ptx);
			*ptx = NULL;
			return wsn__error(WSN_ENOMEM, "emit: out of memory describing the plan of %s", kp.entry);
		}
		wsn__describe_kernel_plan(&kp, *plan_text, (size_t)n + 1);
	}
	return 0;
}
