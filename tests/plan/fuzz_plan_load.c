/* libFuzzer target for the plan loader: any byte string must give a verified plan or a clean
 * error, never a crash, leak or undefined behaviour. Built with clang -fsanitize=fuzzer,address,
 * undefined when TIGHTFIT_FUZZ=ON; seeds: a plan saved by make_plan or `tightfit compile`. Both readers
 * get an exact-size heap copy of the input, so ASan sees any read past its end (docs/fuzzing.md). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "schema/plan_fb.h"
#include "tests/fuzz/fuzz_support.h"
#include "tightfit/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  unsigned char *input = fuzz_heap_copy(data, size);
  char *json = NULL;
  tf_status_free(tf_plan_fb_to_json(input, size, &json));
  free(json);
  tf_plan *plan = NULL;
  tf_status status = tf_plan_parse(input, size, "fuzz.tfplan", &plan);
  if (!status) {
    /* A plan that loads passed every check: it must serialise again and total its regions. */
    void *bytes = NULL;
    size_t n = 0;
    tf_status_free(tf_plan_serialize(plan, &bytes, &n));
    free(bytes);
    (void)tf_plan_total_bytes(plan);
  }
  tf_status_free(status);
  tf_plan_destroy(plan);
  free(input);
  return 0;
}
