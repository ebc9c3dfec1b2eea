/* A node as the converters and patterns read it: its inputs (after rewriting), its attributes, its
 * label in messages, and errors that name it. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "import/onnx_decode.h"

const char *ox_input(const ox_node *node, int32_t i) {
  return node && i < node->n_inputs && node->inputs[i] && *node->inputs[i] ? node->inputs[i] : NULL;
}

const Onnx__AttributeProto *ox_attr(const ox_node *node, const char *name) {
  for (size_t i = 0; i < node->proto->n_attribute; i++)
    if (node->proto->attribute[i]->name && strcmp(node->proto->attribute[i]->name, name) == 0)
      return node->proto->attribute[i];
  return NULL;
}

bool ox_attr_is(const ox_node *node, const char *name, const char *fallback, const char *expected) {
  const Onnx__AttributeProto *a = ox_attr(node, name);
  if (!a || !a->has_s)
    return strcmp(fallback, expected) == 0;
  return a->s.len == strlen(expected) && memcmp(a->s.data, expected, a->s.len) == 0;
}

int64_t ox_attr_int(const ox_node *node, const char *name, int64_t fallback) {
  const Onnx__AttributeProto *a = ox_attr(node, name);
  return a && a->has_i ? a->i : fallback;
}

double ox_attr_float(const ox_node *node, const char *name, double fallback) {
  const Onnx__AttributeProto *a = ox_attr(node, name);
  return a && a->has_f ? a->f : fallback;
}

int32_t ox_attr_ints(const ox_node *node, const char *name, int64_t *out, int32_t max) {
  const Onnx__AttributeProto *a = ox_attr(node, name);
  if (!a)
    return -1;
  int32_t n = (int32_t)(a->n_ints < (size_t)max ? a->n_ints : (size_t)max);
  for (int32_t i = 0; i < n; i++)
    out[i] = a->ints[i];
  return a->n_ints > (size_t)max ? max + 1 : n;
}

bool ox_default_domain(const char *domain) { return !domain || !*domain || strcmp(domain, "ai.onnx") == 0; }

const char *ox_node_label(const ox_node *node, char *buf, size_t size) {
  if (!node) {
    snprintf(buf, size, "the graph");
    return buf;
  }
  const char *name = node->proto->name && *node->proto->name ? node->proto->name
                     : node->proto->n_output                 ? node->proto->output[0]
                                                             : "?";
  snprintf(buf, size, "node '%s' (%s)", name, node->proto->op_type);
  return buf;
}

tf_status ox_fail(ox_import *im, const ox_node *node, tf_code code, const char *fmt, ...) {
  char reason[512], label[256];
  va_list args;
  va_start(args, fmt);
  vsnprintf(reason, sizeof(reason), fmt, args);
  va_end(args);
  return tf_status_new(code, "%s: %s: %s", im->source, ox_node_label(node, label, sizeof(label)), reason);
}

tf_status ox_at(const ox_import *im, const ox_node *node, tf_status status) {
  char label[256];
  return status ? tf_status_prefix(status, "%s: %s", im->source, ox_node_label(node, label, sizeof(label))) : NULL;
}

ox_node *ox_producer(ox_import *im, const char *name) {
  int32_t index = name ? tf_strmap_get(&im->producers, name) : -1;
  return index < 0 ? NULL : &im->nodes[index];
}

tf_status ox_need_input(ox_import *im, const ox_node *node, int32_t i) {
  return ox_input(node, i) ? NULL : ox_fail(im, node, TF_ERR_INVALID_INPUT, "input %" PRId32 " is missing", i);
}
