/* Writes the hand-built small plan of plan_fixture.c to argv[1], for the command-line tests. */
#include <stdio.h>

#include "plan_fixture.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: make_plan OUT.tfplan\n");
    return 2;
  }
  tf_plan *plan = plan_fixture_small();
  tf_status status = tf_plan_save(plan, argv[1]);
  tf_plan_destroy(plan);
  if (status) {
    fprintf(stderr, "make_plan: %s\n", tf_status_message(status));
    tf_status_free(status);
    return 1;
  }
  printf("wrote %s (%d bytes of regions)\n", argv[1], SMALL_TOTAL_BYTES);
  return 0;
}
