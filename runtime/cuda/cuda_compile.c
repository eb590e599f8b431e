/* SPDX-License-Identifier: MIT */
/* runtime/cuda/cuda_compile.c: a kernel plan made a CUDA plan: generate its PTX, JIT it, size its grid, allocate its workspace. */
#include "cuda/cuda_plan.h"
#include "core/error.h"
#include "core/util.h"

#include <stdio.h>
#include <stdlib.h>

void wsn__cu_plan_free(struct wsn__cu_plan *cp)
{
	if (cp->partials)
		wsn__cu.cuMemFree(cp->partials);
	wsn__cu_module_unload(&cp->mod);
	free(cp);
}

int wsn__cu_plan_compile(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
			 const struct wsn__kernel_plan *kp, struct wsn__cu_plan **out)
{
	struct wsn__cu_plan *cp;
	char what[160], *ptx = NULL;
	unsigned cap;
	int err;

	*out = NULL;
	if (!(cp = calloc(1, sizeof(*cp))))
		return wsn__error(WSN_ENOMEM, "plan: out of memory");
	cp->p = *p;
	cp->sms = g->sms;
	cp->kp = *kp;
	if (!cp->kp.entry[0] || cp->kp.block_threads < 1 || cp->kp.max_grid < 1) {
		err = wsn__error(WSN_EINVAL, "the kernel plan has no entry, block size or grid");
		goto err;
	}
	cp->planned_grid = cp->kp.max_grid;
	if ((err = wsn__generate_ptx(&cp->kp, &ptx)) < 0)
		goto err;
	snprintf(what, sizeof(what), "the %s %s hidden=%lld module (%s)", wsn_op_name(p->op), wsn_dtype_name(p->dtype),
		 (long long)p->hidden, cp->kp.entry);
	err = wsn__cu_module_load(&cp->mod, ptx, what);
	free(ptx);
	ptx = NULL;
	if (err < 0)
		goto err;
	if ((err = wsn__cu_kernel_get(&cp->mod, cp->kp.entry, cp->kp.block_threads, cp->kp.smem_bytes, &cp->main)) < 0)
		goto err;
	if (cp->kp.finish_entry[0]) {
		if ((err = wsn__cu_kernel_get(&cp->mod, cp->kp.finish_entry, cp->kp.finish_threads, 0, &cp->finish)) < 0)
			goto err;
		cp->has_finish = 1;
	}
	/* every generated kernel waits for its predecessor's grid before touching memory */
	cp->main.pdl = cp->finish.pdl = wsn__cu_pdl_allowed();
	/* persistent grid: no more CTAs than the SMs hold at once with the registers the JIT really used */
	cap = (unsigned)cp->main.ctas_per_sm * (unsigned)(g->sms > 0 ? g->sms : 1);
	if (cp->kp.cluster > 1) {
		/* a cluster's CTAs share a GPC: as many clusters as the GPCs hold at once */
		int nc;
		if ((err = wsn__cu_max_clusters(&cp->main, cp->kp.cluster, &nc)) < 0)
			goto err;
		if (nc < 1) {
			err = wsn__error(WSN_ELAUNCH, "kernel %s: no cluster of %u CTAs (%u threads, %u bytes of shared memory "
					 "each) fits on this device at once", cp->kp.entry, cp->kp.cluster, cp->kp.block_threads,
					 cp->kp.smem_bytes);
			goto err;
		}
		if ((unsigned)nc * cp->kp.cluster < cap)
			cap = (unsigned)nc * cp->kp.cluster;
	}
	if (cp->kp.max_grid > cap)
		cp->kp.max_grid = cap;
	if (cp->kp.partials_bytes) {
		cp->partials_bytes = cp->kp.partials_bytes;
		if ((err = WSN_CU(cuMemAlloc, (&cp->partials, cp->partials_bytes), "allocating the %zu-byte backward workspace",
				  cp->partials_bytes)) < 0)
			goto err;
	}
	*out = cp;
	return 0;
err:
	free(ptx);
	wsn__cu_plan_free(cp);
	return err;
}
