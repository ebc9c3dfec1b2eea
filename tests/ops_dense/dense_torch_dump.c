/* Writes the dense kernels' float64 results for compare_dense_with_torch.py: for each case, its
 * inputs, the upstream gradient dy, the forward output and every gradient (computed the way the
 * compiler computes it, with the backward kernels or, for matmul and conv_transpose2d, forward
 * kernels) as .npy files, and a manifest.json naming them with the op's attributes.
 *
 * usage: dense_torch_dump OUTPUT_DIRECTORY */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dense_harness.h"

static dense_rng rng = {99};
static const char *directory;
static FILE *manifest;
static int cases;
static tf_test_counts counts = {0, 0};

/* A tiny .npy writer: format 1.0, little-endian '<f8' (floating) or '<i8' (ids), C order. */
static void write_npy(const char *name, const dense_tensor *t) {
  char path[4096], header[256], shape[200] = "";
  snprintf(path, sizeof(path), "%s/%s", directory, name);
  int used = 0;
  for (int32_t i = 0; i < t->rank; i++)
    used +=
        snprintf(shape + used, sizeof(shape) - (size_t)used, "%" PRId64 ",%s", t->shape[i], i + 1 < t->rank ? " " : "");
  if (t->rank > 1)
    shape[used - 1] = '\0'; // "(2, 3)" but "(5,)"
  bool ids = t->dtype == TF_I32 || t->dtype == TF_I64;
  int length = snprintf(header, sizeof(header), "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                        ids ? "<i8" : "<f8", shape);
  int total = (10 + length + 1 + 63) / 64 * 64; // magic, version, length, dict, '\n': a multiple of 64
  memset(header + length, ' ', (size_t)(total - 10 - length));
  header[total - 10 - 1] = '\n';
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
  unsigned char preamble[10] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)((total - 10) & 0xFF), (unsigned char)((total - 10) >> 8)};
  fwrite(preamble, 1, 10, f);
  fwrite(header, 1, (size_t)(total - 10), f);
  for (int64_t i = 0; i < t->count; i++) { // x86-64 is little-endian, as '<' says
    if (ids) {
      int64_t v = (int64_t)t->values[i];
      fwrite(&v, sizeof(v), 1, f);
    } else {
      fwrite(&t->values[i], sizeof(double), 1, f);
    }
  }
  fclose(f);
}

/* Starts a case: {"name": ..., "op": ..., "attrs": {attrs_json}, "tensors": { */
static void begin_case(const char *name, const char *op, const char *attrs_json) {
  fprintf(manifest, "%s\n  {\"name\": \"%s\", \"op\": \"%s\", \"attrs\": {%s}, \"tensors\": {", cases ? "," : "", name,
          op, attrs_json);
  cases++;
}

/* Writes tensor `role` of the current case ("x", "dx", ...) and lists it in the manifest. */
static void tensor(const char *role, const dense_tensor *t, bool *first) {
  char file[256];
  snprintf(file, sizeof(file), "case%d_%s.npy", cases, role);
  write_npy(file, t);
  fprintf(manifest, "%s\"%s\": \"%s\"", *first ? "" : ", ", role, file);
  *first = false;
}

static void end_case(void) { fprintf(manifest, "}}"); }

/* Runs `op` in f64 (2 threads) and returns output `index`; the rest are freed. */
static dense_tensor run(tf_op op, tf_attrs attrs, const dense_tensor *inputs, int32_t n, int32_t index) {
  dense_tensor out[TF_MAX_OUTPUTS];
  int32_t k = dense_call(&counts, op, &attrs, true, 2, inputs, n, out);
  if (k <= index) {
    fprintf(stderr, "%s: no output %d\n", tf_op_name(op), index);
    exit(1);
  }
  for (int32_t i = 0; i < k; i++)
    if (i != index)
      dense_free(&out[i]);
  return out[index];
}

static char *conv_json(tf_attrs a) {
  static char text[256];
  const tf_conv_attrs *c = &a.u.conv;
  snprintf(text, sizeof(text),
           "\"stride\": [%d, %d], \"padding\": [%d, %d], \"dilation\": [%d, %d], \"output_padding\": [%d, %d], "
           "\"groups\": %d",
           c->stride[0], c->stride[1], c->padding[0], c->padding[1], c->dilation[0], c->dilation[1],
           c->output_padding[0], c->output_padding[1], c->groups);
  return text;
}

static void conv_case(const char *name, bool is_1d, const int64_t *x_shape, const int64_t *w_shape, tf_attrs a,
                      bool bias) {
  int32_t rank = is_1d ? 3 : 4;
  dense_tensor in[3] = {dense_random(&rng, rank, x_shape, -1, 1), dense_random(&rng, rank, w_shape, -1, 1)};
  if (bias)
    in[2] = dense_random(&rng, 1, w_shape, -1, 1);
  dense_tensor y = run(is_1d ? TF_OP_CONV1D : TF_OP_CONV2D, a, in, bias ? 3 : 2, 0);
  dense_tensor dy = dense_random(&rng, y.rank, y.shape, -1, 1);
  dense_tensor gi[3] = {dy, in[1], in[0]}, gw[3] = {in[0], dy, in[1]};
  dense_tensor dx = run(is_1d ? TF_OP_CONV1D_GRAD_INPUT : TF_OP_CONV2D_GRAD_INPUT, a, gi, 3, 0);
  dense_tensor dw = run(is_1d ? TF_OP_CONV1D_GRAD_WEIGHT : TF_OP_CONV2D_GRAD_WEIGHT, a, gw, 3, 0);
  begin_case(name, is_1d ? "conv1d" : "conv2d", conv_json(a));
  bool first = true;
  tensor("x", &in[0], &first), tensor("w", &in[1], &first), tensor("dy", &dy, &first);
  if (bias)
    tensor("bias", &in[2], &first);
  tensor("y", &y, &first), tensor("dx", &dx, &first), tensor("dw", &dw, &first);
  end_case();
  dense_free_all(in, bias ? 3 : 2);
  dense_tensor *rest[] = {&y, &dy, &dx, &dw};
  for (int i = 0; i < 4; i++)
    dense_free(rest[i]);
}

/* conv_transpose2d's gradients as the compiler builds them: dx = conv2d(dy, w), dw =
 * conv2d_grad_weight(dy, x, w), both without output_padding. */
static void conv_transpose_case(const char *name, const int64_t *x_shape, const int64_t *w_shape, tf_attrs a) {
  dense_tensor in[3] = {dense_random(&rng, 4, x_shape, -1, 1), dense_random(&rng, 4, w_shape, -1, 1)};
  in[2] = dense_random(&rng, 1, (int64_t[]){w_shape[1] * a.u.conv.groups}, -1, 1);
  dense_tensor y = run(TF_OP_CONV_TRANSPOSE2D, a, in, 3, 0);
  dense_tensor dy = dense_random(&rng, y.rank, y.shape, -1, 1);
  tf_attrs conv = a;
  conv.u.conv.output_padding[0] = conv.u.conv.output_padding[1] = 0;
  dense_tensor gx[2] = {dy, in[1]}, gw[3] = {dy, in[0], in[1]};
  dense_tensor dx = run(TF_OP_CONV2D, conv, gx, 2, 0), dw = run(TF_OP_CONV2D_GRAD_WEIGHT, conv, gw, 3, 0);
  begin_case(name, "conv_transpose2d", conv_json(a));
  bool first = true;
  tensor("x", &in[0], &first), tensor("w", &in[1], &first), tensor("bias", &in[2], &first);
  tensor("dy", &dy, &first), tensor("y", &y, &first), tensor("dx", &dx, &first), tensor("dw", &dw, &first);
  end_case();
  dense_free_all(in, 3);
  dense_tensor *rest[] = {&y, &dy, &dx, &dw};
  for (int i = 0; i < 4; i++)
    dense_free(rest[i]);
}

/* ties: inputs from {-1, 0, 1}, so most windows hold several maxima (the first one gets dy). */
static void pool_case(const char *name, bool is_max, const int64_t *x_shape, tf_attrs a, bool ties) {
  dense_tensor x = dense_random(&rng, 4, x_shape, -1, 1);
  for (int64_t i = 0; ties && i < x.count; i++)
    x.values[i] = (double)(int)(x.values[i] * 1.5);
  dense_tensor y = run(is_max ? TF_OP_MAX_POOL2D : TF_OP_AVG_POOL2D, a, &x, 1, 0);
  dense_tensor dy = dense_random(&rng, y.rank, y.shape, -1, 1);
  dense_tensor max_args[2] = {x, dy}, avg_args[2] = {dy, x};
  dense_tensor dx = run(is_max ? TF_OP_MAX_POOL2D_GRAD : TF_OP_AVG_POOL2D_GRAD, a, is_max ? max_args : avg_args, 2, 0);
  char json[200];
  const tf_pool_attrs *p = &a.u.pool;
  snprintf(json, sizeof(json), "\"kernel\": [%d, %d], \"stride\": [%d, %d], \"padding\": [%d, %d]", p->kernel[0],
           p->kernel[1], p->stride[0], p->stride[1], p->padding[0], p->padding[1]);
  begin_case(name, is_max ? "max_pool2d" : "avg_pool2d", json);
  bool first = true;
  tensor("x", &x, &first), tensor("dy", &dy, &first), tensor("y", &y, &first), tensor("dx", &dx, &first);
  end_case();
  dense_tensor *all[] = {&x, &y, &dy, &dx};
  for (int i = 0; i < 4; i++)
    dense_free(all[i]);
}

static void attention_case(const char *name, int64_t batch, int64_t tq, int64_t tk, int32_t heads, int64_t depth,
                           bool causal, float scale) {
  int64_t width = heads * depth;
  dense_tensor in[4] = {dense_random(&rng, 3, (int64_t[]){batch, tq, width}, -2, 2),
                        dense_random(&rng, 3, (int64_t[]){batch, tk, width}, -2, 2),
                        dense_random(&rng, 3, (int64_t[]){batch, tk, width}, -1, 1),
                        dense_random(&rng, 3, (int64_t[]){batch, tq, width}, -1, 1)};
  tf_attrs a = dense_attention_attrs(heads, causal, scale);
  dense_tensor y = run(TF_OP_ATTENTION, a, in, 3, 0);
  dense_tensor dq = run(TF_OP_ATTENTION_GRAD, a, in, 4, 0), dk = run(TF_OP_ATTENTION_GRAD, a, in, 4, 1);
  dense_tensor dv = run(TF_OP_ATTENTION_GRAD, a, in, 4, 2);
  char json[200];
  // scale: the f32 attribute's exact value, which the f64 kernel uses (0: 1/sqrt(D)).
  snprintf(json, sizeof(json), "\"num_heads\": %d, \"causal\": %s, \"scale\": %.17g", heads, causal ? "true" : "false",
           (double)scale);
  begin_case(name, "attention", json);
  bool first = true;
  tensor("q", &in[0], &first), tensor("k", &in[1], &first), tensor("v", &in[2], &first);
  tensor("dy", &in[3], &first), tensor("y", &y, &first), tensor("dq", &dq, &first), tensor("dk", &dk, &first);
  tensor("dv", &dv, &first);
  end_case();
  dense_free_all(in, 4);
  dense_tensor *rest[] = {&y, &dq, &dk, &dv};
  for (int i = 0; i < 4; i++)
    dense_free(rest[i]);
}

static void embedding_case(const char *name, tf_dtype id_type, int32_t rank, const int64_t *ids_shape, int64_t rows,
                           int64_t depth) {
  dense_tensor in[2] = {dense_random_ids(&rng, id_type, rank, ids_shape, -2, rows + 2),
                        dense_random(&rng, 2, (int64_t[]){rows, depth}, -1, 1)};
  dense_tensor y = run(TF_OP_EMBEDDING, dense_no_attrs(), in, 2, 0);
  dense_tensor dy = dense_random(&rng, y.rank, y.shape, -1, 1);
  dense_tensor grad_args[3] = {in[0], dy, in[1]};
  dense_tensor dtable = run(TF_OP_EMBEDDING_GRAD, dense_no_attrs(), grad_args, 3, 0);
  begin_case(name, "embedding", "");
  bool first = true;
  tensor("ids", &in[0], &first), tensor("table", &in[1], &first), tensor("dy", &dy, &first);
  tensor("y", &y, &first), tensor("dtable", &dtable, &first);
  end_case();
  dense_free_all(in, 2);
  dense_free(&y), dense_free(&dy), dense_free(&dtable);
}

/* Sums g to like's shape over broadcast axes (the compiler's sum_to). */
static dense_tensor sum_to(const dense_tensor *g, const dense_tensor *like) {
  dense_tensor out = dense_zeros(like->dtype, like->rank, like->shape);
  for (int64_t e = 0; e < g->count; e++) {
    int64_t rest = e, target = 0, stride = 1;
    for (int32_t d = g->rank - 1; d >= 0; d--) {
      int64_t index = rest % g->shape[d];
      rest /= g->shape[d];
      int32_t ld = d - (g->rank - like->rank);
      if (ld >= 0) {
        target += (like->shape[ld] == 1 ? 0 : index) * stride;
        stride *= like->shape[ld];
      }
    }
    out.values[target] += g->values[e];
  }
  return out;
}

static dense_tensor mm(const dense_tensor *a, const dense_tensor *b, bool ta, bool tb) {
  dense_tensor in[2] = {*a, *b};
  return run(TF_OP_MATMUL, dense_matmul_attrs(ta, tb), in, 2, 0);
}

/* matmul and its gradients by compiler/autodiff_rules.c's formulas. */
static void matmul_case(const char *name, int32_t rank_a, const int64_t *a_shape, int32_t rank_b,
                        const int64_t *b_shape, bool ta, bool tb) {
  dense_tensor a = dense_random(&rng, rank_a, a_shape, -1, 1), b = dense_random(&rng, rank_b, b_shape, -1, 1);
  dense_tensor y = mm(&a, &b, ta, tb), dy = dense_random(&rng, y.rank, y.shape, -1, 1), db_full;
  dense_tensor da_full = !ta ? mm(&dy, &b, false, !tb) : tb ? mm(&b, &dy, true, true) : mm(&b, &dy, false, true);
  if (b.rank == 2 && a.rank > 2 && !ta) {
    dense_tensor a2 = dense_flat_rows(&a), dy2 = dense_flat_rows(&dy);
    db_full = tb ? mm(&dy2, &a2, true, false) : mm(&a2, &dy2, true, false);
  } else if (!ta) {
    db_full = tb ? mm(&dy, &a, true, false) : mm(&a, &dy, true, false);
  } else {
    db_full = tb ? mm(&dy, &a, true, true) : mm(&a, &dy, false, false);
  }
  dense_tensor da = sum_to(&da_full, &a), db = sum_to(&db_full, &b);
  char json[100];
  snprintf(json, sizeof(json), "\"transpose_a\": %s, \"transpose_b\": %s", ta ? "true" : "false",
           tb ? "true" : "false");
  begin_case(name, "matmul", json);
  bool first = true;
  tensor("a", &a, &first), tensor("b", &b, &first), tensor("dy", &dy, &first), tensor("y", &y, &first);
  tensor("da", &da, &first), tensor("db", &db, &first);
  end_case();
  dense_tensor *all[] = {&a, &b, &y, &dy, &da_full, &db_full, &da, &db};
  for (int i = 0; i < 8; i++)
    dense_free(all[i]);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUTPUT_DIRECTORY\n", argv[0]);
    return 2;
  }
  dense_setup();
  directory = argv[1];
  char path[4096];
  snprintf(path, sizeof(path), "%s/manifest.json", directory);
  manifest = fopen(path, "w");
  if (!manifest) {
    fprintf(stderr, "cannot write %s\n", path);
    return 2;
  }
  fprintf(manifest, "{\"cases\": [");
  for (int t = 0; t < 4; t++) {
    bool ta = t & 1, tb = t & 2;
    char name[64];
    snprintf(name, sizeof(name), "matmul broadcast %s%s", ta ? "A^T" : "A", tb ? "B^T" : "B");
    matmul_case(name, 4, ta ? (int64_t[]){3, 1, 7, 5} : (int64_t[]){3, 1, 5, 7}, 3,
                tb ? (int64_t[]){2, 6, 7} : (int64_t[]){2, 7, 6}, ta, tb);
    snprintf(name, sizeof(name), "matmul linear %s%s", ta ? "A^T" : "A", tb ? "B^T" : "B");
    matmul_case(name, 3, ta ? (int64_t[]){4, 9, 11} : (int64_t[]){4, 11, 9}, 2,
                tb ? (int64_t[]){13, 9} : (int64_t[]){9, 13}, ta, tb);
  }
  conv_case("conv2d s(2,3) p(2,1) d(2,1) g2 bias", false, (int64_t[]){2, 4, 9, 8}, (int64_t[]){6, 2, 3, 3},
            dense_conv_attrs(2, 3, 2, 1, 2, 1, 2, 0, 0), true);
  conv_case("conv2d depthwise", false, (int64_t[]){3, 6, 7, 5}, (int64_t[]){6, 1, 3, 3},
            dense_conv_attrs(1, 1, 1, 1, 1, 1, 6, 0, 0), false);
  // Stride 1 and the response as wide as the image: the conv kernels' shifted im2col/col2im, here
  // with a response shorter than the image, a dilated width and two groups.
  conv_case("conv2d s1 p(0,2) d(1,2) g2, as wide", false, (int64_t[]){2, 4, 7, 9}, (int64_t[]){6, 2, 3, 3},
            dense_conv_attrs(1, 1, 0, 2, 1, 2, 2, 0, 0), true);
  conv_case("conv1d s1 p1, as long", true, (int64_t[]){3, 4, 11}, (int64_t[]){5, 4, 3},
            dense_conv_attrs(1, 0, 1, 0, 1, 0, 1, 0, 0), false);
  conv_case("conv2d 1x1", false, (int64_t[]){2, 5, 4, 7}, (int64_t[]){3, 5, 1, 1},
            dense_conv_attrs(1, 1, 0, 0, 1, 1, 1, 0, 0), true);
  conv_case("conv2d 2 position blocks", false, (int64_t[]){2, 16, 63, 61}, (int64_t[]){3, 16, 3, 3},
            dense_conv_attrs(1, 1, 1, 1, 1, 1, 1, 0, 0), true);
  conv_case("conv1d s2 p1 d2 g2 bias", true, (int64_t[]){2, 4, 13}, (int64_t[]){6, 2, 3},
            dense_conv_attrs(2, 0, 1, 0, 2, 0, 2, 0, 0), true);
  conv_case("conv1d k1", true, (int64_t[]){3, 3, 7}, (int64_t[]){5, 3, 1}, dense_conv_attrs(1, 0, 0, 0, 1, 0, 1, 0, 0),
            false);
  conv_transpose_case("conv_transpose2d s(2,1) p(1,0) op(1,0)", (int64_t[]){2, 4, 3, 5}, (int64_t[]){4, 3, 3, 3},
                      dense_conv_attrs(2, 1, 1, 0, 1, 1, 1, 1, 0));
  conv_transpose_case("conv_transpose2d s(3,2) d(1,2) op(2,1) g3", (int64_t[]){2, 6, 4, 4}, (int64_t[]){6, 2, 2, 3},
                      dense_conv_attrs(3, 2, 0, 1, 1, 2, 3, 2, 1));
  for (int is_max = 1; is_max >= 0; is_max--) {
    pool_case(is_max ? "max_pool2d k(3,2) s2 p1" : "avg_pool2d k(3,2) s2 p1", is_max, (int64_t[]){2, 3, 7, 9},
              dense_pool_attrs(3, 2, 2, 2, 1, 1), false);
    pool_case(is_max ? "max_pool2d k5 s1 p2" : "avg_pool2d k5 s1 p2", is_max, (int64_t[]){1, 2, 6, 5},
              dense_pool_attrs(5, 5, 1, 1, 2, 2), false);
  }
  pool_case("max_pool2d k3 s1 p1 with ties", true, (int64_t[]){2, 3, 8, 7}, dense_pool_attrs(3, 3, 1, 1, 1, 1), true);
  pool_case("max_pool2d k(2,3) s(2,1) p(1,1) with ties", true, (int64_t[]){1, 2, 9, 6},
            dense_pool_attrs(2, 3, 2, 1, 1, 1), true);
  attention_case("attention Tq5 Tk7 H2", 2, 5, 7, 2, 3, false, 0);
  attention_case("attention causal Tq7 Tk5 H3", 1, 7, 5, 3, 2, true, 0);
  attention_case("attention causal Tq37 Tk41 scale 0.3", 2, 37, 41, 2, 4, true, 0.3f);
  attention_case("attention Tq40 Tk33 H4 D8", 1, 40, 33, 4, 8, false, 0);
  embedding_case("embedding i32 with out-of-range ids", TF_I32, 2, (int64_t[]){3, 5}, 7, 5);
  embedding_case("embedding i64", TF_I64, 1, (int64_t[]){23}, 4, 33);
  fprintf(manifest, "\n]}\n");
  fclose(manifest);
  printf("dense_torch_dump: wrote %d cases to %s (%d checks passed, %d failed)\n", cases, directory, counts.passed,
         counts.failed);
  return counts.failed ? 1 : 0;
}
