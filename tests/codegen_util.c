/* SPDX-License-Identifier: MIT */
/* tests/codegen_util.c: what the check_codegen_*.c tests share: shapes, ops, dtypes and plan parameters. */
#define _GNU_SOURCE
#include "testutil.h"

#include "codegen.h"
#include "ptx/emitter.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen_util.h"

void codegen_params_init(struct wsn__plan_params *p, enum wsn_op op, enum wsn_dtype dt, int64_t hidden)
{
	memset(p, 0, sizeof(*p));
	p->op = op;
	p->dtype = dt;
	p->hidden = hidden;
	p->rows = 16384;
	wsn_plan_options_init(&p->opts, op);
	p->opts.approach = WSN_APPROACH_MULTIWAVE; /* the warp-specialised plans are check_ws_*.c's */
}
