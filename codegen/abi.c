/* SPDX-License-Identifier: MIT */
/* codegen/abi.c: the kernel ABI tables of abi.h as arrays the generators walk. */
#include "abi.h"

#define ABI_ENTRY(name, type, role, meaning) { #name, WSN_ABI_##type, WSN_ABI_##role, meaning },

static const struct wsn__abi_param forward[] = { WSN_ABI_FORWARD(ABI_ENTRY) };
static const struct wsn__abi_param backward[] = { WSN_ABI_BACKWARD(ABI_ENTRY) };
static const struct wsn__abi_param finish[] = { WSN_ABI_FINISH(ABI_ENTRY) };

_Static_assert(sizeof(forward) / sizeof(forward[0]) == WSN_ABI_FWD_COUNT, "forward ABI table");
_Static_assert(sizeof(backward) / sizeof(backward[0]) == WSN_ABI_BWD_COUNT, "backward ABI table");
_Static_assert(sizeof(finish) / sizeof(finish[0]) == WSN_ABI_FIN_COUNT, "finish ABI table");

const struct wsn__abi wsn__abi_forward = { forward, WSN_ABI_FWD_COUNT };
const struct wsn__abi wsn__abi_backward = { backward, WSN_ABI_BWD_COUNT };
const struct wsn__abi wsn__abi_finish = { finish, WSN_ABI_FIN_COUNT };
