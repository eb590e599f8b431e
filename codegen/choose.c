/* SPDX-License-Identifier: MIT */
/* codegen/choose.c: the dispatcher that picks the kernel family (forced, or auto between ws and multi-wave). */
#include "planner.h"

#include <stdio.h>
#include <string.h>

/* A backward multi-wave plan whose dweight or dbias sums live in global memory (rows too wide for the
 * shared memory): they are read and written back for every row a CTA takes after its first (so the
 * ws rule below needs more rows than CTAs). */
static int sums_in_global(const struct wsn__kernel_plan *kp)
{
	return wsn_op_is_backward(kp->op) && ((kp->has_weight && kp->dw_store == WSN_STORE_GLOBAL) ||
					      (kp->has_bias && kp->db_store == WSN_STORE_GLOBAL));
}

/* A planner message without its leading "plan: ", to quote inside another. */
static const char *strip_plan(const char *msg)
{
	return strncmp(msg, "plan: ", 6) ? msg : msg + 6;
}

/* Put "rule; " in front of kp->why (what is past the end is cut); kp->rule keeps the rule. */
static void why_prepend(struct wsn__kernel_plan *kp, const char *rule)
{
	size_t r = strlen(rule), w = strlen(kp->why), cap = sizeof(kp->why) - 1;

	snprintf(kp->rule, sizeof(kp->rule), "%s", rule);
	if (r + 2 >= cap)
		r = cap - 2;
	if (r + 2 + w > cap)
		w = cap - r - 2;
	memmove(kp->why + r + 2, kp->why, w);
	memcpy(kp->why, rule, r);
	kp->why[r] = ';';
	kp->why[r + 1] = ' ';
	kp->why[r + 2 + w] = '\0';
}

int wsn__plan_kernel(const struct wsn__gpu_props *g, const struct wsn__plan_params *p,
		     struct wsn__kernel_plan *kp)
{
	struct wsn__kernel_plan ws;
	char rule[384];
	int err;

	switch (p->opts.approach) {
	case WSN_APPROACH_WS:
	case WSN_APPROACH_MULTIWAVE:
		/* forced: never falls back; the ws plan says when the heuristic expects it to be slow */
		if ((err = p->opts.approach == WSN_APPROACH_WS ? wsn__ws_plan(g, p, kp) : wsn__multiwave_plan(g, p, kp)))
			return err;
		snprintf(kp->rule, sizeof(kp->rule), "forced: approach %s", wsn_approach_name(p->opts.approach));
		return 0;
	case WSN_APPROACH_AUTO:
		break;
	default:
		return wsn__error(WSN_EINVAL, "plan: unknown approach %d", (int)p->opts.approach);
	}
	err = wsn__ws_plan(g, p, &ws);
	if (err && (p->opts.stages > 1 || p->opts.unroll > 1 || p->opts.cluster > 1))
		return err; /* only ws has these: its error says what does not fit */
	if (!err && (p->opts.stages > 1 || p->opts.unroll > 1 || p->opts.cluster > 1)) {
		snprintf(rule, sizeof(rule), "auto: ws, stages/unroll/cluster were given and only ws kernels have them");
	} else if (!err && wsn__ws_auto_pick(g, &ws, rule, sizeof(rule))) {
		/* rule says why */
	} else {
		char wswhy[sizeof(rule)] = "";

		if (err) {
			snprintf(wswhy, sizeof(wswhy), "%s", wsn_last_error());
			snprintf(rule, sizeof(rule), "auto: multi-wave, no ws kernel fits (%.240s)", wswhy);
		}
		if ((err = wsn__multiwave_plan(g, p, kp))) {
			char mwwhy[sizeof(rule)];

			if (!wswhy[0])
				return err;
			/* neither fits: both reasons, each without its own "plan: " */
			snprintf(mwwhy, sizeof(mwwhy), "%s", wsn_last_error());
			return wsn__error(err, "plan: no kernel fits: %s; %s", strip_plan(mwwhy), strip_plan(wswhy));
		}
		if (!wswhy[0] && !ws.ws_good && sums_in_global(kp) && p->rows > (int64_t)kp->max_grid) {
			/* A ring of one stage still beats sums read and written for every row. */
			snprintf(rule, sizeof(rule), "auto: ws though its heuristic is not good (NOTES v24): multi-wave would "
				 "read and write its dweight/dbias sums in global memory for each of %lld rows over %u CTAs",
				 (long long)p->rows, kp->max_grid);
			*kp = ws;
		}
		why_prepend(kp, rule);
		return 0;
	}
	*kp = ws;
	why_prepend(kp, rule);
	return 0;
}
