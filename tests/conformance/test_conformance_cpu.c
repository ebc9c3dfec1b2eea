/* The conformance suite (conformance.h) on the CPU backend: every case of the table, every step
 * of its plans against the f64 reference kernels, and every op of the op table run at least once.
 * The CPU backend runs the f32 kernels, so this is where each op's f32 kernel meets its f64 twin
 * through whole compiled plans. The other backends of the build run the suite in their own tests,
 * which skip (exit 77) on a machine without their device. */
#include <stdio.h>

#include "backends/backend.h"
#include "conformance.h"

int main(void) {
  printf("backends in this build: cpu (this test)%s%s\n",
         tf_backend_find("vulkan") ? ", vulkan (test_vulkan_ops, test_vulkan_ops_no_subgroups)" : "",
         tf_backend_find("cuda") ? ", cuda (test_cuda_ops)" : "");
  tf_test_counts counts = {0, 0};
  static conf_coverage coverage;
  const conf_backend cpu = {.name = "cpu", .target = TF_TARGET_CPU, .claims = NULL, .refuses = 0};
  conf_run_table(&counts, &cpu, &coverage);
  conf_run_table_half(&counts, &cpu, &coverage, TF_BF16);
  conf_run_table_half(&counts, &cpu, &coverage, TF_F16);
  conf_check_half_coverage(&counts, &cpu, &coverage);
  conf_check_coverage(&counts, &cpu, &coverage);
  return tf_test_finish("conformance on cpu", &counts);
}
