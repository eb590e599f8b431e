/* SPDX-License-Identifier: MIT */
/* tests/check_main.c: the runner that adds every subsystem's suite. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

Suite *suite_core(void);
Suite *suite_cpu(void);
Suite *suite_io(void);
Suite *suite_io_writer(void);
Suite *suite_cli(void);
Suite *suite_codegen(void);
Suite *suite_ws(void);
Suite *suite_async(void);
Suite *suite_pipeline(void);
#ifdef WSN_HAVE_CUDA
Suite *suite_cuda_host(void);
Suite *suite_cuda_fake(void);
#endif

int main(void)
{
	SRunner *sr = srunner_create(suite_core());
	int failed;

	printf("wsnorm tests, WSNORM_SEED=0x%llx\n", (unsigned long long)tu_seed());
	srunner_add_suite(sr, suite_cpu());
	srunner_add_suite(sr, suite_io());
	srunner_add_suite(sr, suite_io_writer());
	srunner_add_suite(sr, suite_cli());
	srunner_add_suite(sr, suite_codegen());
	srunner_add_suite(sr, suite_ws());
	srunner_add_suite(sr, suite_async());
	srunner_add_suite(sr, suite_pipeline());
#ifdef WSN_HAVE_CUDA
	srunner_add_suite(sr, suite_cuda_host());
	srunner_add_suite(sr, suite_cuda_fake());
#endif
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
