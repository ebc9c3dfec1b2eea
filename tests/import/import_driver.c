/* Runs an imported graph for tests/import/compare_torch.py:
 *   import_driver DIR BINDINGS
 * loads DIR/model.tfg (weights from DIR), feeds every input and label from DIR/<name>.npy, and
 * writes DIR/tf_<output>.npy (an inference plan's forward pass), DIR/tf_loss.npy and
 * DIR/tf_grads.safetensors (a training plan's one micro-step: each parameter's gradient, by its
 * name), both on the CPU backend. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/npy.h"
#include "runtime/safetensors.h"
#include "tightfit/compiler.h"
#include "tightfit/runtime.h"

static int fail(tf_status status) {
  fprintf(stderr, "import_driver: %s\n", tf_status_message(status));
  tf_status_free(status);
  return 1;
}

static tf_status feed(tf_session *session, const tf_plan *plan, const char *dir) {
  for (int32_t i = 0; i < plan->n_buffers; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if ((b->role != TF_ROLE_INPUT && b->role != TF_ROLE_LABEL) || (b->io_twin >= 0 && b->io_twin < i))
      continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s.npy", dir, b->name);
    tf_npy *file;
    TF_RETURN_IF_ERROR(tf_npy_open(path, &file));
    tf_status status = tf_npy_count(file) * tf_dtype_size(tf_npy_dtype(file)) == b->bytes
                           ? tf_session_write(session, b->name, tf_npy_data(file), b->bytes)
                           : tf_status_new(TF_ERR_INVALID_INPUT, "%s: wrong size for '%s'", path, b->name);
    tf_npy_close(file);
    TF_RETURN_IF_ERROR(status);
  }
  return NULL;
}

static tf_status open_session(const tf_graph *g, const char *dir, const char *bindings, bool training, tf_plan **plan,
                              tf_session **session) {
  tf_compile_options options = tf_compile_options_default(TF_TARGET_CPU);
  options.bindings = bindings;
  options.training = training;
  options.optimizer = TF_OPTIMIZER_SGD;
  options.learning_rate = 0.1;
  options.accumulate = 1;
  options.clip_norm = 0;
  TF_RETURN_IF_ERROR(tf_compile(g, &options, plan));
  tf_session_options session_options = tf_session_options_default();
  session_options.weights_dir = dir;
  session_options.threads = 1;
  TF_RETURN_IF_ERROR(tf_session_create(*plan, &session_options, session));
  return feed(*session, *plan, dir);
}

static tf_status forward(const tf_graph *g, const char *dir, const char *bindings) {
  tf_plan *plan;
  tf_session *session = NULL;
  tf_status status = open_session(g, dir, bindings, false, &plan, &session);
  double loss;
  if (!status)
    status = tf_session_forward(session, &loss);
  for (int32_t o = 0; o < tf_graph_output_count(g) && !status; o++) {
    tf_tensor_info info;
    tf_graph_tensor(g, tf_graph_output_at(g, o), &info);
    for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
      const tf_plan_buffer *b = &plan->buffers[i];
      if (strcmp(b->name, info.name) != 0)
        continue;
      void *data = malloc((size_t)b->bytes);
      status = tf_session_read(session, b->name, data, b->bytes);
      char path[4096];
      snprintf(path, sizeof(path), "%s/tf_%s.npy", dir, b->name);
      if (!status)
        status = tf_npy_write(path, b->dtype, b->rank, b->shape, data);
      free(data);
      printf("forward: output %s written to %s\n", b->name, path);
    }
  }
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status;
}

static tf_status gradients(const tf_graph *g, const char *dir, const char *bindings) {
  tf_plan *plan;
  tf_session *session = NULL;
  tf_status status = open_session(g, dir, bindings, true, &plan, &session);
  double loss = 0;
  if (!status)
    status = tf_session_micro_step(session, &loss);
  tf_safetensors_writer *writer = NULL;
  if (!status)
    status = tf_safetensors_writer_create(&writer);
  void **copies = calloc((size_t)plan->n_buffers, sizeof(void *));
  int32_t n = 0;
  for (int32_t i = 0; i < plan->n_buffers && !status; i++) {
    const tf_plan_buffer *b = &plan->buffers[i];
    if (b->role != TF_ROLE_GRADIENT || b->owner < 0)
      continue;
    copies[i] = malloc((size_t)b->bytes);
    status = tf_session_read_range(session, i, 0, copies[i], b->bytes);
    if (!status)
      status = tf_safetensors_writer_add(writer, plan->buffers[b->owner].name, b->dtype, b->rank, b->shape, copies[i]);
    n++;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/tf_grads.safetensors", dir);
  if (!status)
    status = tf_safetensors_writer_write(writer, path);
  snprintf(path, sizeof(path), "%s/tf_loss.npy", dir);
  int64_t one = 1;
  if (!status)
    status = tf_npy_write(path, TF_FILE_F64, 1, &one, &loss);
  printf("training: loss %.8f, %" PRId32 " gradients\n", loss, n);
  for (int32_t i = 0; i < plan->n_buffers; i++)
    free(copies[i]);
  free(copies);
  tf_safetensors_writer_destroy(writer);
  tf_session_destroy(session);
  tf_plan_destroy(plan);
  return status;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: import_driver DIR BINDINGS\n");
    return 2;
  }
  char path[4096];
  snprintf(path, sizeof(path), "%s/model.tfg", argv[1]);
  tf_graph *g;
  tf_status status = tf_graph_load(path, &g);
  if (!status)
    status = forward(g, argv[1], argv[2]);
  if (!status)
    status = gradients(g, argv[1], argv[2]);
  tf_graph_destroy(g);
  return status ? fail(status) : 0;
}
