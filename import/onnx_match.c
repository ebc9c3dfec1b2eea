/* The patterns' vocabulary: a value's producing node, an operator test, the constants a pattern
 * compares with (a Constant node's or an initializer's numbers, read without converting anything). */
#include <math.h>
#include <string.h>

#include "core/half_bits.h"
#include "import/onnx_patterns.h"

bool ox_is_op(const ox_node *node, const char *op_type) {
  return node && node->fused == OX_PLAIN && ox_default_domain(node->proto->domain) &&
         strcmp(node->proto->op_type, op_type) == 0;
}

/* The tensor of `p` when it is a Constant node (its "value" attribute), else NULL. */
static const Onnx__TensorProto *constant_value(const ox_node *p) {
  const Onnx__TensorProto *t = NULL;
  if (ox_is_op(p, "Constant"))
    for (size_t i = 0; i < p->proto->n_attribute; i++)
      if (p->proto->attribute[i]->name && strcmp(p->proto->attribute[i]->name, "value") == 0)
        t = p->proto->attribute[i]->t;
  return t;
}

bool ox_same_name(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }

bool ox_scalar_of(ox_import *im, const char *name, double *value, tf_dtype *dtype) {
  ox_node *p = ox_producer(im, name);
  const Onnx__TensorProto *t = constant_value(p);
  if (!p) {
    ox_value *v = name ? ox_value_find(im, name) : NULL;
    t = v ? v->initializer : NULL;
  }
  if (!t)
    return false;
  ox_known *k;
  tf_status status = ox_known_from_tensor(t, "pattern", &k);
  if (status) {
    tf_status_free(status);
    return false;
  }
  bool one = k->count == 1;
  if (one)
    *value = k->is_float ? k->reals[0] : (double)k->ints[0].size;
  if (dtype)
    *dtype = k->dtype;
  ox_known_free(k);
  return one;
}

/* `expected` as a constant of `dtype` holds it: rounded to nearest even for f16 and bf16. */
static double as_stored(double expected, tf_dtype dtype) {
  if (dtype != TF_F16 && dtype != TF_BF16)
    return expected;
  float f = (float)expected;
  uint32_t bits;
  memcpy(&bits, &f, 4);
  bits = dtype == TF_BF16 ? tf_f32_bits_from_bf16(tf_bf16_from_f32_bits(bits))
                          : tf_f32_bits_from_f16(tf_f16_from_f32_bits(bits));
  memcpy(&f, &bits, 4);
  return f;
}

bool ox_is_scalar(ox_import *im, const char *name, double expected, double tolerance) {
  double value;
  tf_dtype dtype;
  return ox_scalar_of(im, name, &value, &dtype) && fabs(value - as_stored(expected, dtype)) <= tolerance;
}

bool ox_perm_is(const ox_node *node, const int64_t *perm, int32_t n) {
  int64_t found[TF_MAX_RANK];
  return ox_attr_ints(node, "perm", found, TF_MAX_RANK) == n && memcmp(found, perm, (size_t)n * sizeof(int64_t)) == 0;
}

int32_t ox_ints_of(ox_import *im, const char *name, int64_t *out, int32_t max) {
  ox_node *p = ox_producer(im, name);
  const Onnx__TensorProto *t = constant_value(p);
  ox_known *k = NULL;
  const ox_known *known = NULL;
  if (t) {
    tf_status status = ox_known_from_tensor(t, "pattern", &k);
    tf_status_free(status);
    known = k;
  } else if (!p && name) {
    ox_value *v = ox_value_find(im, name);
    known = v ? v->known : NULL;
  }
  int32_t n = known && !known->is_float && known->count <= max ? (int32_t)known->count : -1;
  for (int32_t i = 0; i < n; i++)
    out[i] = known->ints[i].symbol < 0 ? known->ints[i].size : -1;
  ox_known_free(k);
  return n;
}
