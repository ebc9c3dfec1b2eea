/* Writes op_codes.glsl: "#define TF_OP_<ID> <number>u" for every row of the op table
 * (core/op_table.h), so that the shaders switch on the op numbers the lowering pushes
 * (backends/vulkan/vk_lower_elementwise.c) and no op code is typed twice. Run at build time by
 * backends/vulkan/CMakeLists.txt. Usage: gen_op_codes OUTPUT */
#include <stdio.h>

#include "core/op_table.h"

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_op_codes OUTPUT\n");
    return 2;
  }
  FILE *out = fopen(argv[1], "w");
  if (!out) {
    perror(argv[1]);
    return 1;
  }
  fprintf(out, "// Generated from core/op_table.h by shaders/gen_op_codes.c; do not edit.\n");
#define DEFINE_CODE(ID, name, number, ...) fprintf(out, "#define TF_OP_%s %du\n", #ID, number);
  TF_OP_TABLE(DEFINE_CODE)
#undef DEFINE_CODE
  if (fclose(out) != 0) {
    perror(argv[1]);
    return 1;
  }
  return 0;
}
