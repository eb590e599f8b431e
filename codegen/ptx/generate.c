/* SPDX-License-Identifier: MIT */
/* codegen/ptx/generate.c: the PTX target's entry point: a kernel plan to the text of its PTX module. */
#include "rowkernel.h"

/*
 * The generator of the plan's family writes the module: the main kernel and, for a backward with
 * dweight or dbias, its finish kernel. Returns 0 with *ptx (malloc'd, the caller frees), or an error.
 */
int wsn__generate_ptx(const struct wsn__kernel_plan *kp, char **ptx)
{
	*ptx = NULL;
	switch (kp->approach) {
	case WSN_APPROACH_WS:
		return wsn__ws_generate(kp, ptx);
	case WSN_APPROACH_MULTIWAVE:
		return wsn__multiwave_generate(kp, ptx);
	default:
		return wsn__error(WSN_ENOTSUP, "codegen: %s kernels are not available (approach %s)", kp->entry,
				  wsn_approach_name(kp->approach));
	}
}
