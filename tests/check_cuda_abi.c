/* SPDX-License-Identifier: MIT */
/*
 * tests/check_cuda_abi.c: runtime/cuda/cuda_abi.h against a CUDA toolkit's cuda.h, in one translation
 * unit. cuda.h declares the driver API; cuda_abi.h is included with WSN_CU_ABI_TABLES_ONLY, so it
 * gives its tables and no declarations, and every entry is checked with _Static_assert: each value,
 * each type, each structure's size, alignment and member offsets (on copies laid out from
 * cuda_abi.h's member lists), and each entry point's parameters against cuda.h's prototype of the
 * variant its name stands for. A drift is a compile error naming the entry. Exits 77 when configure
 * found no cuda.h to compare with.
 */
#include <stdio.h>

#ifndef WSN_HAVE_CUDA_H
int main(void)
{
	printf("skip: no CUDA toolkit's cuda.h (12.8 or newer) at configure time, so cuda_abi.h is not compared with one "
	       "(./configure --with-cuda=DIR names a toolkit)\n");
	return 77;
}
#else

#include <cuda.h>
#include <stddef.h>

#define WSN_CU_ABI_TABLES_ONLY
#include "cuda/cuda_abi.h"

/* every value: enumerators of each enum type, and the flags */
#define CHECK_VALUE(name, value) _Static_assert((long long)(name) == (value), #name " is not " #value " in cuda.h");
#define CHECK_ENUM(type, values)                                                                    \
	_Static_assert(sizeof(type) == sizeof(int), #type " is not int-sized in cuda.h");           \
	_Static_assert((type)-1 > 0, #type " has negative values in cuda.h, none in cuda_abi.h");   \
	values(CHECK_VALUE)
WSN_CU_ENUMS(CHECK_ENUM)
WSN_CU_FLAG_VALUES(CHECK_VALUE)

/* every scalar and handle type */
#define CHECK_TYPE(name, type) _Static_assert(__builtin_types_compatible_p(name, type), #name " is not " #type " in cuda.h");
WSN_CU_TYPES(CHECK_TYPE)

/*
 * The structures as cuda_abi.h lays them out, under other names; a structure that holds another
 * one of cuda_abi.h holds this copy of it.
 */
struct abi_tensor_map { WSN_CU_TENSOR_MAP_MEMBERS };
union abi_launch_attribute_value { WSN_CU_LAUNCH_ATTRIBUTE_VALUE_MEMBERS };
#define CUlaunchAttributeValue union abi_launch_attribute_value
struct abi_launch_attribute { WSN_CU_LAUNCH_ATTRIBUTE_MEMBERS };
#undef CUlaunchAttributeValue
#define CUlaunchAttribute struct abi_launch_attribute
struct abi_launch_config { WSN_CU_LAUNCH_CONFIG_MEMBERS };
#undef CUlaunchAttribute

#define CHECK_LAYOUT(ours, theirs)                                                                    \
	_Static_assert(sizeof(ours) == sizeof(theirs), "sizeof " #theirs " differs from cuda.h");      \
	_Static_assert(_Alignof(ours) == _Alignof(theirs), "alignment of " #theirs " differs from cuda.h");
#define CHECK_MEMBER(ours, theirs, member)                                                            \
	_Static_assert(offsetof(ours, member) == offsetof(theirs, member),                              \
		       "offset of " #theirs "." #member " differs from cuda.h");                          \
	_Static_assert(sizeof(((ours *)0)->member) == sizeof(((theirs *)0)->member),                    \
		       "size of " #theirs "." #member " differs from cuda.h");

CHECK_LAYOUT(struct abi_tensor_map, CUtensorMap)
#define TENSOR_MAP_MEMBER(member) CHECK_MEMBER(struct abi_tensor_map, CUtensorMap, member)
WSN_CU_TENSOR_MAP_FIELDS(TENSOR_MAP_MEMBER)

CHECK_LAYOUT(union abi_launch_attribute_value, CUlaunchAttributeValue)
#define LAUNCH_ATTRIBUTE_VALUE_MEMBER(member) \
	CHECK_MEMBER(union abi_launch_attribute_value, CUlaunchAttributeValue, member)
WSN_CU_LAUNCH_ATTRIBUTE_VALUE_FIELDS(LAUNCH_ATTRIBUTE_VALUE_MEMBER)

CHECK_LAYOUT(struct abi_launch_attribute, CUlaunchAttribute)
#define LAUNCH_ATTRIBUTE_MEMBER(member) CHECK_MEMBER(struct abi_launch_attribute, CUlaunchAttribute, member)
WSN_CU_LAUNCH_ATTRIBUTE_FIELDS(LAUNCH_ATTRIBUTE_MEMBER)

CHECK_LAYOUT(struct abi_launch_config, CUlaunchConfig)
#define LAUNCH_CONFIG_MEMBER(member) CHECK_MEMBER(struct abi_launch_config, CUlaunchConfig, member)
WSN_CU_LAUNCH_CONFIG_FIELDS(LAUNCH_CONFIG_MEMBER)

/*
 * every entry point: cuda.h's macros turn the base name into the variant its own version resolves
 * (cuMemAlloc into cuMemAlloc_v2); that must be the variant cuda_abi.h's version resolves
 */
#define CHECK_FUNC(name, version, params)                                                             \
	_Static_assert(__builtin_types_compatible_p(CUresult(*) params, __typeof__(&name)),             \
		       #name " at CUDA " #version ": cuda_abi.h's parameters are not cuda.h's");         \
	_Static_assert((version) >= 12000 && (version) <= CUDA_VERSION, #name ": version " #version " out of range");
WSN_CU_FUNCS(CHECK_FUNC)
_Static_assert(__builtin_types_compatible_p(CUresult(*) WSN_CU_GET_PROC_ADDRESS_PARAMS, __typeof__(&cuGetProcAddress_v2)),
	       "cuGetProcAddress_v2: cuda_abi.h's parameters are not cuda.h's");

/* how many entries were checked, for the message */
#define COUNT_ONE(...) +1
#define COUNT_ENUM(type, values) values(COUNT_ONE)
enum {
	N_VALUES = 0 WSN_CU_ENUMS(COUNT_ENUM) WSN_CU_FLAG_VALUES(COUNT_ONE),
	N_TYPES = 0 WSN_CU_TYPES(COUNT_ONE) WSN_CU_ENUMS(COUNT_ONE),
	N_MEMBERS = 0 WSN_CU_TENSOR_MAP_FIELDS(COUNT_ONE) WSN_CU_LAUNCH_ATTRIBUTE_VALUE_FIELDS(COUNT_ONE)
		WSN_CU_LAUNCH_ATTRIBUTE_FIELDS(COUNT_ONE) WSN_CU_LAUNCH_CONFIG_FIELDS(COUNT_ONE),
	N_FUNCS = 1 WSN_CU_FUNCS(COUNT_ONE),
};

int main(void)
{
	printf("ok: cuda_abi.h agrees with cuda.h of CUDA %d.%d: %d values, %d types, 4 structures with %d members, "
	       "%d entry points\n", CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10, N_VALUES, N_TYPES, N_MEMBERS, N_FUNCS);
	return 0;
}

#endif /* WSN_HAVE_CUDA_H */
