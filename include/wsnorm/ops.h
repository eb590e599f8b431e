/* SPDX-License-Identifier: MIT */
/* wsnorm/ops.h: the four normalization ops and the plan/execute split. */
#ifndef WSNORM_OPS_H
#define WSNORM_OPS_H

#include "common.h"
#include "device.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

enum wsn_op {
	WSN_LAYERNORM_FWD = 0, /* x, [weight], [bias] -> y, mean, rstd */
	WSN_LAYERNORM_BWD = 1, /* dy, x, [weight], mean, rstd -> dx, [dweight], [dbias] */
	WSN_RMSNORM_FWD = 2,   /* x, [weight] -> y, rstd */
	WSN_RMSNORM_BWD = 3,   /* dy, x, [weight], rstd -> dx, [dweight] */
	WSN_OP_COUNT
};

/* "layernorm-fwd", ...; NULL for an invalid op. */
WSN_API const char *wsn_op_name(enum wsn_op op);
/* Parse an op name. 0 or WSN_EINVAL. */
WSN_API int wsn_op_parse(const char *s, enum wsn_op *out);
/* Non-zero for the two backward ops. */
WSN_API int wsn_op_is_backward(enum wsn_op op);
/* Non-zero for the two LayerNorm ops (they center the row and have a bias). */
WSN_API int wsn_op_is_layernorm(enum wsn_op op);

/* Kernel family a GPU plan uses. */
enum wsn_approach {
	WSN_APPROACH_AUTO = 0,
	WSN_APPROACH_MULTIWAVE = 1,
	WSN_APPROACH_WS = 2,
};
WSN_API const char *wsn_approach_name(enum wsn_approach a);
WSN_API int wsn_approach_parse(const char *s, enum wsn_approach *out);

#define WSN_DEFAULT_EPS 1e-5f

/* Plan options. Initialise with wsn_plan_options_init(). */
struct wsn_plan_options {
	float eps;          /* added to the variance; default WSN_DEFAULT_EPS */
	int has_weight;     /* affine weight (gamma); default 1 */
	int has_bias;       /* affine bias (beta), LayerNorm only; default 1 for LayerNorm */
	enum wsn_approach approach; /* GPU kernel family; default auto */
	int threads;        /* CPU backend threads; 0 = the device's setting */
	/* Forced GPU kernel parameters; 0 = chosen by the planner. */
	int block_threads;  /* threads per CTA row group (bdimx) */
	int groups;         /* bdimy */
	int unroll;         /* rows per iteration (iter_unroll) */
	int stages;         /* circular-buffer stages (ws) */
	int cluster;        /* CTAs sharing each row (ws backward: 1, 2, 4, 8) */
	int arch;           /* 90, 100: target for codegen; 0 = the device's */
	int autotune;       /* GPU, approach auto, nothing forced: time the kernel families once on the device
			     * and cache the winner under $XDG_CACHE_HOME/wsnorm/tune; default 0 */
};
WSN_API void wsn_plan_options_init(struct wsn_plan_options *o, enum wsn_op op);

struct wsn_plan;

/*
 * Create a plan: everything that does not depend on the data (kernel generation and compilation,
 * workspace). rows is the largest row count the plan will execute. Returns 0, WSN_EINVAL,
 * WSN_ESHAPE (rows or hidden < 1 or too large), WSN_EDTYPE, WSN_EJIT, or a driver error.
 */
WSN_API int wsn_plan_create(struct wsn_device *dev, enum wsn_op op, int64_t rows, int64_t hidden,
			    enum wsn_dtype dt, const struct wsn_plan_options *opts,
			    struct wsn_plan **out);
WSN_API void wsn_plan_destroy(struct wsn_plan *p);
/*
 * Write a human-readable description of the plan (approach, parameters, budgets, and why)
 * into buf, like snprintf: returns the length it needed (excluding the NUL) or a negative error.
 */
WSN_API int wsn_plan_describe(const struct wsn_plan *p, char *buf, size_t len);
/*
 * The same description as one JSON object on one line (no newline), one key per parameter, written
 * like snprintf. Returns the length it needed (excluding the NUL) or a negative error.
 */
WSN_API int wsn_plan_describe_json(const struct wsn_plan *p, char *buf, size_t len);

/*
 * Tensors of one execution. Which are read and written depends on the op (see enum wsn_op).
 * x, dy, y, dx: [rows, hidden] (or more leading dims flattened) in the plan's dtype, last dim
 * contiguous; weight, bias, dweight, dbias: [hidden] in the plan's dtype;
 * mean, rstd: f32, [rows] or [rows, 1]. Absent tensors have data == NULL.
 */
struct wsn_args {
	struct wsn_tensor x, dy, weight, bias;
	struct wsn_tensor y, dx, dweight, dbias;
	struct wsn_tensor mean, rstd;
};

/*
 * Execute the plan on the rows of args->x (at most the plan's rows). On GPUs this is ordered on
 * stream (NULL: the default stream) and may return before the work finishes; on the CPU it is
 * synchronous. Returns 0, WSN_ESHAPE/WSN_EDTYPE/WSN_EINVAL naming the offending tensor, or a
 * driver/launch error.
 */
WSN_API int wsn_plan_execute(struct wsn_plan *p, const struct wsn_args *args, struct wsn_stream *stream);

/* Bytes the op must move at least for rows x hidden (each input read once, each output written once). */
WSN_API int64_t wsn_op_min_bytes(enum wsn_op op, int64_t rows, int64_t hidden, enum wsn_dtype dt,
				 int has_weight, int has_bias);

#ifdef __cplusplus
}
#endif
#endif
