/* Prints the parameters of zoo configurations in the format of torch_reference.py, for
 * compare_with_torch.py. Each argument is one configuration: "preset knob=value ...".
 *
 *   config gpt layers=2
 *   count 12345
 *   param wte.weight [128,128]
 *   ...
 *   end
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tightfit/zoo.h"

#define MAX_WORDS 32

static int dump(const char *config) {
  char words[1024];
  snprintf(words, sizeof(words), "%s", config);
  const char *argv[MAX_WORDS];
  int32_t n = 0;
  for (char *word = strtok(words, " "); word && n < MAX_WORDS; word = strtok(NULL, " "))
    argv[n++] = word;
  printf("config %s\n", config);
  if (n == 0) {
    printf("error empty configuration\nend\n");
    return 1;
  }
  tf_graph *g = NULL;
  tf_status status = tf_zoo_build(argv[0], argv + 1, n - 1, &g);
  if (status) {
    printf("error %s\nend\n", tf_status_message(status));
    tf_status_free(status);
    return 1;
  }
  printf("count %" PRId64 "\n", tf_graph_parameter_count(g));
  for (int32_t id = 0; id < tf_graph_tensor_count(g); id++) {
    tf_tensor_info info;
    if (!tf_graph_tensor(g, id, &info) || info.kind != TF_PARAMETER)
      continue;
    printf("param %s [", info.name);
    for (int32_t i = 0; i < info.declared.rank; i++)
      printf("%s%" PRId64, i ? "," : "", info.declared.dims[i].size);
    printf("]\n");
  }
  printf("end\n");
  tf_graph_destroy(g);
  return 0;
}

int main(int argc, char **argv) {
  int failed = 0;
  for (int i = 1; i < argc; i++)
    failed |= dump(argv[i]);
  return failed;
}
