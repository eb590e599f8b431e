/* SPDX-License-Identifier: MIT */
/* codegen/abi.h: the kernel ABI, written once: the named parameters of each kind of kernel. */
#ifndef WSN_CODEGEN_ABI_H
#define WSN_CODEGEN_ABI_H

/*
 * Each table lists a kernel's parameters in declaration order as X(name, type, role, meaning):
 * type is the parameter's width (u64, u32, f32), role says how a generator uses it (ptr: a device
 * pointer, 0 when absent; row_ld: a row stride in elements of the tensors' dtype; stats_ld: a row
 * stride in f32 elements; value: anything else). Row strides are in elements.
 */
#define WSN_ABI_FORWARD(X) \
	X(x, u64, ptr, "input rows") \
	X(weight, u64, ptr, "scale (gamma), 0 without a weight") \
	X(bias, u64, ptr, "shift (beta), 0 without a bias") \
	X(y, u64, ptr, "output rows") \
	X(mean, u64, ptr, "mean of each row (LayerNorm), not written when 0") \
	X(rstd, u64, ptr, "reciprocal standard deviation of each row, not written when 0") \
	X(rows, u64, value, "number of rows") \
	X(x_ld, u64, row_ld, "elements between rows of x") \
	X(y_ld, u64, row_ld, "elements between rows of y") \
	X(eps, f32, value, "added to the variance before the square root")

#define WSN_ABI_BACKWARD(X) \
	X(dy, u64, ptr, "gradient of the output rows") \
	X(x, u64, ptr, "input rows of the forward") \
	X(weight, u64, ptr, "scale (gamma), 0 without a weight") \
	X(mean, u64, ptr, "mean of each row (LayerNorm)") \
	X(rstd, u64, ptr, "reciprocal standard deviation of each row") \
	X(dx, u64, ptr, "gradient of the input rows") \
	X(partials, u64, ptr, "f32 partial sums: dweight [grid][hidden] then dbias [grid][hidden]") \
	X(rows, u64, value, "number of rows") \
	X(dy_ld, u64, row_ld, "elements between rows of dy") \
	X(x_ld, u64, row_ld, "elements between rows of x") \
	X(dx_ld, u64, row_ld, "elements between rows of dx") \
	X(stats_ld, u64, stats_ld, "elements between rows' mean/rstd (1 for [rows] and [rows, 1])") \
	X(flags, u32, value, "bit 0: start without waiting for the previous grid") \
	X(done, u64, value, "u64 an early start waits on until it holds wait_seq, 0 for none") \
	X(wait_seq, u64, value, "the value done must reach, 0 for no wait")

#define WSN_ABI_FINISH(X) \
	X(partials, u64, ptr, "f32 partial sums written by the backward") \
	X(dweight, u64, ptr, "gradient of the weight, 0 when not wanted") \
	X(dbias, u64, ptr, "gradient of the bias, 0 when not wanted") \
	X(nparts, u32, value, "partial rows to sum, in a fixed order") \
	X(done, u64, value, "u64 that receives seq once the sums are stored, 0 for none") \
	X(seq, u64, value, "the value stored into done")

/* Slots of each kernel's parameter list: params[WSN_ABI_FWD_eps] etc. */
#define WSN__ABI_SLOT_FWD(name, type, role, meaning) WSN_ABI_FWD_##name,
#define WSN__ABI_SLOT_BWD(name, type, role, meaning) WSN_ABI_BWD_##name,
#define WSN__ABI_SLOT_FIN(name, type, role, meaning) WSN_ABI_FIN_##name,
enum wsn__abi_forward_slot { WSN_ABI_FORWARD(WSN__ABI_SLOT_FWD) WSN_ABI_FWD_COUNT };
enum wsn__abi_backward_slot { WSN_ABI_BACKWARD(WSN__ABI_SLOT_BWD) WSN_ABI_BWD_COUNT };
enum wsn__abi_finish_slot { WSN_ABI_FINISH(WSN__ABI_SLOT_FIN) WSN_ABI_FIN_COUNT };
#undef WSN__ABI_SLOT_FWD
#undef WSN__ABI_SLOT_BWD
#undef WSN__ABI_SLOT_FIN

enum wsn__abi_type { WSN_ABI_u64, WSN_ABI_u32, WSN_ABI_f32 };
enum wsn__abi_role { WSN_ABI_ptr, WSN_ABI_row_ld, WSN_ABI_stats_ld, WSN_ABI_value };

/* One parameter of a kernel, as the tables above give it. */
struct wsn__abi_param {
	const char *name;
	enum wsn__abi_type type;
	enum wsn__abi_role role;
	const char *meaning;
};

/* A kernel's parameter list: count entries, indexed by its slot enum. */
struct wsn__abi {
	const struct wsn__abi_param *params;
	int count;
};

extern const struct wsn__abi wsn__abi_forward, wsn__abi_backward, wsn__abi_finish;

#endif
