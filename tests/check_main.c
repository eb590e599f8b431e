/* SPDX-License-Identifier: MIT */
/* tests/check_main.c: the runner that adds every subsystem's suite. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

Suite *suite_core_errors(void);
Suite *suite_core_dtype(void);
Suite *suite_core_device(void);
Suite *suite_core_plan(void);
Suite *suite_core_tunecache(void);
Suite *suite_core_overlap(void);
Suite *suite_cpu_ops(void);
Suite *suite_cpu_threads(void);
Suite *suite_cpu_reference(void);
Suite *suite_cpu_backend(void);
Suite *suite_io_safetensors(void);
Suite *suite_io_safetensors_bad(void);
Suite *suite_io_reader(void);
Suite *suite_io_raw(void);
Suite *suite_io_writer(void);
Suite *suite_cli_help(void);
Suite *suite_cli_plan(void);
Suite *suite_cli_values(void);
Suite *suite_cli_bench(void);
Suite *suite_cli_demo(void);
Suite *suite_cli_gen(void);
Suite *suite_cli_gen_limits(void);
Suite *suite_cli_run(void);
Suite *suite_cli_inputs_bad(void);
Suite *suite_cli_verify(void);
Suite *suite_cli_output(void);
Suite *suite_cli_json(void);
Suite *suite_codegen_emitter(void);
Suite *suite_codegen_planner(void);
Suite *suite_codegen_kernels(void);
Suite *suite_codegen_abi(void);
Suite *suite_codegen_ptxas(void);
Suite *suite_ws_planner(void);
Suite *suite_ws_rules(void);
Suite *suite_ws_ptxas(void);
Suite *suite_async_mma(void);
Suite *suite_async_store(void);
Suite *suite_async_kernels(void);
Suite *suite_run_reads(void);
Suite *suite_run_datasets(void);
Suite *suite_run_output(void);
Suite *suite_run_output_safety(void);
Suite *suite_run_signals(void);
Suite *suite_run_verify(void);
Suite *suite_run_options(void);
Suite *suite_run_gpu(void);
Suite *suite_run_limits(void);
Suite *suite_fleet(void);
#ifdef WSN_HAVE_CUDA
Suite *suite_cuda_host(void);
Suite *suite_cuda_fake(void);
#endif

int main(void)
{
	SRunner *sr = srunner_create(suite_core_errors());
	int failed;

	printf("wsnorm tests, WSNORM_SEED=0x%llx\n", (unsigned long long)tu_seed());
	srunner_add_suite(sr, suite_core_dtype());
	srunner_add_suite(sr, suite_core_device());
	srunner_add_suite(sr, suite_core_plan());
	srunner_add_suite(sr, suite_core_tunecache());
	srunner_add_suite(sr, suite_core_overlap());
	srunner_add_suite(sr, suite_cpu_ops());
	srunner_add_suite(sr, suite_cpu_threads());
	srunner_add_suite(sr, suite_cpu_reference());
	srunner_add_suite(sr, suite_cpu_backend());
	srunner_add_suite(sr, suite_io_safetensors());
	srunner_add_suite(sr, suite_io_safetensors_bad());
	srunner_add_suite(sr, suite_io_reader());
	srunner_add_suite(sr, suite_io_raw());
	srunner_add_suite(sr, suite_io_writer());
	srunner_add_suite(sr, suite_cli_help());
	srunner_add_suite(sr, suite_cli_plan());
	srunner_add_suite(sr, suite_cli_values());
	srunner_add_suite(sr, suite_cli_bench());
	srunner_add_suite(sr, suite_cli_demo());
	srunner_add_suite(sr, suite_cli_gen());
	srunner_add_suite(sr, suite_cli_gen_limits());
	srunner_add_suite(sr, suite_cli_run());
	srunner_add_suite(sr, suite_cli_inputs_bad());
	srunner_add_suite(sr, suite_cli_verify());
	srunner_add_suite(sr, suite_cli_output());
	srunner_add_suite(sr, suite_cli_json());
	srunner_add_suite(sr, suite_codegen_emitter());
	srunner_add_suite(sr, suite_codegen_planner());
	srunner_add_suite(sr, suite_codegen_kernels());
	srunner_add_suite(sr, suite_codegen_abi());
	srunner_add_suite(sr, suite_codegen_ptxas());
	srunner_add_suite(sr, suite_ws_planner());
	srunner_add_suite(sr, suite_ws_rules());
	srunner_add_suite(sr, suite_ws_ptxas());
	srunner_add_suite(sr, suite_async_mma());
	srunner_add_suite(sr, suite_async_store());
	srunner_add_suite(sr, suite_async_kernels());
	srunner_add_suite(sr, suite_run_reads());
	srunner_add_suite(sr, suite_run_datasets());
	srunner_add_suite(sr, suite_run_output());
	srunner_add_suite(sr, suite_run_output_safety());
	srunner_add_suite(sr, suite_run_signals());
	srunner_add_suite(sr, suite_run_verify());
	srunner_add_suite(sr, suite_run_options());
	srunner_add_suite(sr, suite_run_gpu());
	srunner_add_suite(sr, suite_run_limits());
	srunner_add_suite(sr, suite_fleet());
#ifdef WSN_HAVE_CUDA
	srunner_add_suite(sr, suite_cuda_host());
	srunner_add_suite(sr, suite_cuda_fake());
#endif
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
