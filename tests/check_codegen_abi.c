/* SPDX-License-Identifier: MIT */
/* tests/check_codegen_abi.c: the kernel ABI table: emitted .param lists and the plan's JSON agree. */
#define _GNU_SOURCE
#include "testutil.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * Check that entry's .param list in ptx, in order, has the names and types of params (a JSON array of
 * {"name", "type"}): both come from the ABI table, one through the generators, one through the describer.
 */
static void check_entry(const char *ptx, const char *entry, json_t *params)
{
	char *head, *end, *p;
	size_t i = 0;

	ck_assert_msg(json_array_size(params) > 0, "%s: no parameters in the plan JSON", entry);
	ck_assert(asprintf(&head, ".visible .entry %s(", entry) > 0);
	p = strstr(ptx, head);
	ck_assert_msg(p != NULL, "%s not in the PTX", head);
	p += strlen(head);
	end = strchr(p, ')');
	ck_assert_ptr_nonnull(end);
	while ((p = strstr(p, ".param ")) && p < end) {
		char type[16], name[64];
		json_t *want = json_array_get(params, i);

		ck_assert_int_eq(sscanf(p, ".param .%15s %63[A-Za-z0-9_]", type, name), 2);
		ck_assert_msg(want != NULL, "%s: PTX parameter %zu (%s) beyond the plan's %zu", entry, i, name,
			      json_array_size(params));
		ck_assert_str_eq(name, json_string_value(json_object_get(want, "name")));
		ck_assert_str_eq(type, json_string_value(json_object_get(want, "type")));
		ck_assert_msg(json_string_length(json_object_get(want, "meaning")) > 0, "%s: %s has no meaning",
			      entry, name);
		i++;
		p++;
	}
	ck_assert_msg(i == json_array_size(params), "%s: %zu PTX parameters, the plan names %zu", entry, i,
		      json_array_size(params));
	free(head);
}

START_TEST(test_abi_params_agree)
{
	static const enum wsn_op ops[] = { WSN_LAYERNORM_FWD, WSN_LAYERNORM_BWD, WSN_RMSNORM_FWD, WSN_RMSNORM_BWD };
	static const enum wsn_approach approaches[] = { WSN_APPROACH_MULTIWAVE, WSN_APPROACH_WS };
	static const int64_t hiddens[] = { 1000, 4096 };

	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t a = 0; a < sizeof(approaches) / sizeof(approaches[0]); a++)
			for (size_t h = 0; h < sizeof(hiddens) / sizeof(hiddens[0]); h++) {
				struct wsn_plan_options opt;
				char *ptx = NULL, *json = NULL;
				json_error_t je;
				json_t *j, *fin;

				wsn_plan_options_init(&opt, ops[o]);
				opt.approach = approaches[a];
				ck_assert_int_eq(wsn_emit_ptx(ops[o], WSN_BF16, hiddens[h], 16384, &opt, &ptx, NULL), 0);
				ck_assert_int_eq(wsn_emit_plan(ops[o], WSN_BF16, hiddens[h], 16384, &opt, NULL, &json), 0);
				ck_assert_msg((j = json_loads(json, 0, &je)) != NULL, "%s", je.text);
				check_entry(ptx, json_string_value(json_object_get(j, "kernel")),
					    json_object_get(j, "parameters"));
				fin = json_object_get(j, "finish");
				ck_assert_int_eq(json_is_object(fin), wsn_op_is_backward(ops[o]));
				if (json_is_object(fin))
					check_entry(ptx, json_string_value(json_object_get(j, "finish_kernel")),
						    json_object_get(fin, "parameters"));
				json_decref(j);
				free(json);
				free(ptx);
			}
}
END_TEST

Suite *suite_codegen_abi(void)
{
	return TU_SUITE("codegen", { "params", 60, NULL, NULL, TU_TESTS({ test_abi_params_agree, 1 }) });
}
