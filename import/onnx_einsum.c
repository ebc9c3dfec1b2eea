/* Einsum (torch.einsum: XLNet's and Funnel's attention, "bhqd,bhkd->bhqk" in research code) as the
 * ops tightfit has: each operand's labels that nothing else reads summed out first (reduce sum),
 * then the operands contracted left to right, two at a time, as one batched matmul between
 * transposes and reshapes: [batch..., free of A, summed] x [batch..., summed, free of B], the batch
 * labels (in both and still needed) kept as axes, which the matmul broadcasts (an ellipsis's axes of
 * size 1). The result is transposed to the output's order. Operands all known when importing fold
 * (fold_einsum). A label repeated in one operand takes its diagonal first (diagonals: "bii->bi", a
 * trace "ii->"). Refused: such a label over axes of symbolic or other sizes, a label repeated in the
 * output, and flattening two symbolic sizes into one axis. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import/onnx_converters.h"
#include "import/onnx_fold.h"

enum { EINSUM_MAX_OPERANDS = 8, EINSUM_LABELS = 64 };

/* An operand (or a partial result) with one label per axis. */
typedef struct einsum_term {
  tf_tensor_id x;
  const ox_known *known; /* an operand known when importing (NULL: data) */
  int32_t rank;
  char labels[TF_MAX_RANK];
} einsum_term;

/* The most products a fold of known operands computes (XLNet's sinusoid table, "i,d->id"). */
#define EINSUM_FOLD_LIMIT ((int64_t)1 << 24)

/* Labels are letters; an ellipsis's axes take '0'..'7' (leading axes, right-aligned as numpy does). */
static bool is_label(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static int32_t find(const char *labels, int32_t n, char c) {
  for (int32_t i = 0; i < n; i++)
    if (labels[i] == c)
      return i;
  return -1;
}

/* Parses one term of `text` (up to `end`) for an operand of `rank` axes (rank < 0: the output,
 * whose ellipsis takes `ellipsis` axes). */
static tf_status parse_term(ox_import *im, const ox_node *node, const char *text, const char *end, int32_t rank,
                            int32_t *ellipsis, char *labels, int32_t *n) {
  int32_t letters = 0;
  bool dots = false;
  for (const char *p = text; p < end; p++) {
    if (is_label(*p))
      letters++;
    else if (*p == '.' && end - p >= 3 && p[1] == '.' && p[2] == '.' && !dots)
      dots = true, p += 2;
    else if (*p != ' ')
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "equation: '%c' is not a label", *p);
  }
  int32_t extra = 0;
  if (rank >= 0) {
    extra = dots ? rank - letters : 0;
    if (extra < 0 || (!dots && letters != rank))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "equation: %" PRId32 " labels for an operand of rank %" PRId32,
                     letters, rank);
    if (dots)
      *ellipsis = *ellipsis > extra ? *ellipsis : extra;
  } else {
    extra = dots ? *ellipsis : 0;
  }
  if (letters + extra > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "equation: a term of over %d axes", TF_MAX_RANK);
  *n = 0;
  for (const char *p = text; p < end; p++) {
    if (*p == '.') {
      for (int32_t i = 0; i < extra; i++) /* right-aligned: the last axis is '7' */
        labels[(*n)++] = (char)('0' + 8 - extra + i);
      p += 2;
    } else if (is_label(*p)) {
      if (rank < 0 && find(labels, *n, *p) >= 0)
        return ox_fail(im, node, TF_ERR_INVALID_INPUT, "equation: label '%c' twice in the output", *p);
      labels[(*n)++] = *p; /* twice in an operand: its diagonal (diagonals) */
    }
  }
  return NULL;
}

/* The product of two sizes as one size: false for two symbolic ones. */
/* The operand's diagonals, a label repeated in it at axes p < q ("bii->bi", torch.einsum's trace and
 * diagonal): x times an identity over axes p and q, summed over q, until no label repeats. The two axes
 * must be of one fixed size. */
static tf_status diagonals(ox_import *im, const ox_node *node, einsum_term *t) {
  for (int32_t q = 1; q < t->rank; q++) {
    const int32_t p = find(t->labels, q, t->labels[q]);
    if (p < 0)
      continue;
    int32_t rank;
    tf_dim dims[TF_MAX_RANK];
    ox_tensor_dims(im, t->x, &rank, dims);
    if (dims[p].symbol >= 0 || dims[q].symbol >= 0 || dims[p].size != dims[q].size)
      return ox_fail(im, node, TF_ERR_UNSUPPORTED,
                     "equation: label '%c' twice in one term over axes of other or symbolic sizes", t->labels[q]);
    int64_t shape[TF_MAX_RANK];
    for (int32_t d = 0; d < rank; d++)
      shape[d] = d == p || d == q ? dims[d].size : 1;
    ox_known *eye = ox_known_new(true, TF_F32, rank, shape);
    if (!eye)
      return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
    const int64_t n = dims[p].size;
    for (int64_t i = 0; i < n; i++) /* the (i, i) element: strides n (axis p) and 1 (axis q) */
      eye->reals[i * n + i] = 1.0;
    tf_tensor_id mask;
    TF_RETURN_IF_ERROR(ox_known_constant(im, node, "einsum_diagonal", eye, &mask));
    if (ox_dtype_of(im, t->x) != TF_F32)
      mask = tf_cast(im->graph, mask, ox_dtype_of(im, t->x));
    t->x = tf_reduce(im->graph, TF_OP_SUM, tf_mul(im->graph, t->x, mask), &q, 1, false);
    memmove(t->labels + q, t->labels + q + 1, (size_t)(t->rank - q - 1));
    t->rank--;
    q = 0; /* again from the start: another label may repeat */
  }
  return ox_graph_error(im, node);
}

static bool times(tf_dim a, tf_dim b, tf_dim *out) {
  if (a.symbol >= 0 && b.symbol >= 0)
    return false;
  const int64_t size = a.size * b.size; /* sizes of real tensors: no overflow */
  *out = a.symbol >= 0 ? tf_sym_times(a.symbol, size) : b.symbol >= 0 ? tf_sym_times(b.symbol, size) : tf_fixed(size);
  return true;
}

/* t transposed so that its labels read `order` (a permutation of them). */
static void transpose_to(ox_import *im, einsum_term *t, const char *order) {
  int32_t perm[TF_MAX_RANK];
  bool identity = true;
  for (int32_t i = 0; i < t->rank; i++) {
    perm[i] = find(t->labels, t->rank, order[i]);
    identity = identity && perm[i] == i;
  }
  if (!identity)
    t->x = tf_transpose(im->graph, t->x, perm, t->rank);
  memcpy(t->labels, order, (size_t)t->rank);
}

/* Sums t over its labels that `keep` (n_keep labels) does not hold. */
static void sum_out(ox_import *im, einsum_term *t, const char *keep, int32_t n_keep) {
  int32_t axes[TF_MAX_RANK], n = 0, kept = 0;
  char labels[TF_MAX_RANK];
  for (int32_t i = 0; i < t->rank; i++) {
    if (find(keep, n_keep, t->labels[i]) < 0)
      axes[n++] = i;
    else
      labels[kept++] = t->labels[i];
  }
  if (!n)
    return;
  t->x = tf_reduce(im->graph, TF_OP_SUM, t->x, axes, n, false);
  t->rank = kept;
  memcpy(t->labels, labels, (size_t)kept);
}

/* t reshaped to [its first `lead` axes, then each group of `sizes` axes flattened into one]. */
static tf_status flatten_groups(ox_import *im, const ox_node *node, einsum_term *t, int32_t lead, const int32_t *sizes,
                                int32_t groups) {
  int32_t rank;
  tf_dim dims[TF_MAX_RANK], out[TF_MAX_RANK];
  ox_tensor_dims(im, t->x, &rank, dims);
  int32_t at = lead;
  memcpy(out, dims, sizeof(tf_dim) * (size_t)lead);
  for (int32_t g = 0; g < groups; g++) {
    tf_dim d = tf_fixed(1);
    for (int32_t i = 0; i < sizes[g]; i++)
      if (!times(d, dims[at++], &d))
        return ox_fail(im, node, TF_ERR_UNSUPPORTED, "flattening two symbolic sizes into one axis");
    out[lead + g] = d;
  }
  t->x = tf_reshape(im->graph, t->x, tf_shape_from(out, lead + groups));
  return NULL;
}

/* a and b contracted into a term of the labels in `needed` (n_needed; the output's and the later
 * operands'), in the order batch, free of a, free of b. */
static tf_status contract(ox_import *im, const ox_node *node, einsum_term *a, einsum_term *b, const char *needed,
                          int32_t n_needed, einsum_term *out) {
  char batch[TF_MAX_RANK], free_a[TF_MAX_RANK], free_b[TF_MAX_RANK], summed[TF_MAX_RANK];
  int32_t nb = 0, na = 0, nf = 0, ns = 0;
  for (int32_t i = 0; i < a->rank; i++) {
    const char c = a->labels[i];
    const bool in_b = find(b->labels, b->rank, c) >= 0, kept = find(needed, n_needed, c) >= 0;
    if (in_b && kept)
      batch[nb++] = c;
    else if (in_b)
      summed[ns++] = c;
    else
      free_a[na++] = c;
  }
  for (int32_t i = 0; i < b->rank; i++)
    if (find(a->labels, a->rank, b->labels[i]) < 0)
      free_b[nf++] = b->labels[i];
  if (nb + na + nf > TF_MAX_RANK || nb + 2 > TF_MAX_RANK)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "a partial product of over %d axes", TF_MAX_RANK);
  char order[TF_MAX_RANK];
  memcpy(order, batch, (size_t)nb), memcpy(order + nb, free_a, (size_t)na), memcpy(order + nb + na, summed, (size_t)ns);
  transpose_to(im, a, order);
  memcpy(order + nb, summed, (size_t)ns), memcpy(order + nb + ns, free_b, (size_t)nf);
  transpose_to(im, b, order);
  int32_t a_rank, b_rank;
  tf_dim a_dims[TF_MAX_RANK], b_dims[TF_MAX_RANK];
  ox_tensor_dims(im, a->x, &a_rank, a_dims);
  ox_tensor_dims(im, b->x, &b_rank, b_dims);
  TF_RETURN_IF_ERROR(flatten_groups(im, node, a, nb, (const int32_t[]){na, ns}, 2));
  TF_RETURN_IF_ERROR(flatten_groups(im, node, b, nb, (const int32_t[]){ns, nf}, 2));
  tf_tensor_id y = tf_matmul(im->graph, a->x, b->x, false, false);
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  int32_t y_rank;
  tf_dim y_dims[TF_MAX_RANK], dims[TF_MAX_RANK];
  ox_tensor_dims(im, y, &y_rank, y_dims);
  memcpy(dims, y_dims, sizeof(tf_dim) * (size_t)nb); /* the batch axes as the matmul broadcast them */
  memcpy(dims + nb, a_dims + nb, sizeof(tf_dim) * (size_t)na);
  memcpy(dims + nb + na, b_dims + nb + ns, sizeof(tf_dim) * (size_t)nf);
  out->rank = nb + na + nf;
  out->x = tf_reshape(im->graph, y, tf_shape_from(dims, out->rank));
  memcpy(out->labels, batch, (size_t)nb), memcpy(out->labels + nb, free_a, (size_t)na);
  memcpy(out->labels + nb + na, free_b, (size_t)nf);
  return ox_graph_error(im, node);
}

/* Each label's size over known operands (1 broadcasts); false when they disagree or too many
 * products. Fills labels/sizes (n) with every label once. */
static bool fold_sizes(const einsum_term *terms, int32_t n_terms, char *labels, int64_t *sizes, int32_t *n) {
  *n = 0;
  int64_t total = 1;
  for (int32_t t = 0; t < n_terms; t++)
    for (int32_t i = 0; i < terms[t].rank; i++) {
      const int64_t size = terms[t].known->shape[i];
      int32_t at = find(labels, *n, terms[t].labels[i]);
      if (at < 0) {
        labels[*n] = terms[t].labels[i];
        sizes[(*n)++] = size;
      } else if (sizes[at] == 1) {
        sizes[at] = size;
      } else if (size != 1 && size != sizes[at]) {
        return false;
      }
    }
  for (int32_t i = 0; i < *n; i++)
    if (sizes[i] > 0 && total > EINSUM_FOLD_LIMIT / sizes[i])
      return false;
    else
      total *= sizes[i];
  return true;
}

/* The flat index into operand t of the labels' current values (`at`; a size-1 axis reads 0). */
static int64_t fold_offset(const einsum_term *t, const char *labels, int32_t n, const int64_t *at) {
  int64_t offset = 0;
  for (int32_t i = 0; i < t->rank; i++) {
    const int64_t size = t->known->shape[i];
    offset = offset * size + (size == 1 ? 0 : at[find(labels, n, t->labels[i])]);
  }
  return offset;
}

/* Einsum of known operands, summed in double and stored as f32 (floats) or exact integers: false
 * in *done when it cannot fold (symbolic sizes, disagreeing sizes, too many products). */
static tf_status fold_einsum(ox_import *im, const ox_node *node, const einsum_term *terms, int32_t n_terms,
                             const char *output, int32_t n_output, bool *done) {
  *done = false;
  char labels[EINSUM_LABELS];
  int64_t sizes[EINSUM_LABELS], at[EINSUM_LABELS] = {0}, shape[TF_MAX_RANK];
  int32_t n;
  bool is_float = false;
  for (int32_t t = 0; t < n_terms; t++) {
    if (!terms[t].known->is_float && ox_known_has_symbol(terms[t].known))
      return NULL;
    is_float = is_float || terms[t].known->is_float;
  }
  if (!fold_sizes(terms, n_terms, labels, sizes, &n))
    return NULL;
  for (int32_t i = 0; i < n_output; i++)
    shape[i] = sizes[find(labels, n, output[i])];
  ox_known *k;
  TF_RETURN_IF_ERROR(ox_at(im, node,
                           ox_known_within(is_float, is_float ? TF_F32 : terms[0].known->dtype, n_output, shape,
                                           ox_fold_room(im), "an Einsum", &k)));
  double *sums = calloc((size_t)(k->count ? k->count : 1), sizeof(double));
  if (!sums) {
    ox_known_free(k);
    return ox_fail(im, node, TF_ERR_OUT_OF_MEMORY, "no memory");
  }
  einsum_term out = {.rank = n_output, .known = k};
  memcpy(out.labels, output, (size_t)n_output);
  for (bool more = k->count > 0; more;) {
    double product = 1;
    for (int32_t t = 0; t < n_terms; t++) {
      const ox_known *x = terms[t].known;
      const int64_t o = fold_offset(&terms[t], labels, n, at);
      product *= x->is_float ? x->reals[o] : (double)x->ints[o].size;
    }
    sums[fold_offset(&out, labels, n, at)] += product;
    more = false;
    for (int32_t i = n - 1; i >= 0 && !more; i--) /* the next multi-index, the last label fastest */
      more = ++at[i] < sizes[i] || (at[i] = 0, false);
  }
  bool exact = true;
  for (int64_t i = 0; i < k->count; i++) {
    if (is_float)
      k->reals[i] = (double)(float)sums[i];
    else if ((exact = exact && fabs(sums[i]) <= 0x1p53))
      k->ints[i] = tf_fixed((int64_t)sums[i]);
  }
  free(sums);
  if (!exact) {
    ox_known_free(k);
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "an integer Einsum of known values past 2^53");
  }
  *done = true;
  return ox_set_known(im, node, 0, k);
}

/* The labels the output and the operands after `k` read. */
static int32_t needed_after(const einsum_term *terms, int32_t n, int32_t k, const char *output, int32_t n_output,
                            char *needed) {
  int32_t count = 0;
  for (int32_t i = 0; i < n_output; i++)
    needed[count++] = output[i];
  for (int32_t t = k + 1; t < n; t++)
    for (int32_t i = 0; i < terms[t].rank; i++)
      if (find(needed, count, terms[t].labels[i]) < 0 && count < EINSUM_LABELS)
        needed[count++] = terms[t].labels[i];
  return count;
}

/* The implicit output (no "->"): the ellipsis's axes, then the letters used once, in alphabetical order. */
static int32_t implicit_output(const einsum_term *terms, int32_t n, char *output) {
  int32_t count = 0;
  for (char c = '0'; c <= '7'; c++)
    for (int32_t t = 0; t < n && find(output, count, c) < 0; t++)
      if (find(terms[t].labels, terms[t].rank, c) >= 0)
        output[count++] = c;
  for (char c = 'A'; c <= 'z'; c++) {
    int32_t uses = 0; /* occurrences: "ii" (a trace) has none in its output */
    for (int32_t t = 0; t < n; t++)
      for (int32_t i = 0; i < terms[t].rank; i++)
        uses += terms[t].labels[i] == c;
    if (is_label(c) && uses == 1 && count < TF_MAX_RANK)
      output[count++] = c;
  }
  return count;
}

tf_status ox_convert_einsum(ox_import *im, const ox_node *node) {
  const Onnx__AttributeProto *a = ox_attr(node, "equation");
  if (!a || !a->has_s)
    return ox_fail(im, node, TF_ERR_INVALID_INPUT, "no equation");
  char equation[256];
  if (a->s.len >= sizeof(equation))
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "an equation of %zu characters (at most %zu)", a->s.len,
                   sizeof(equation) - 1);
  memcpy(equation, a->s.data, a->s.len);
  equation[a->s.len] = '\0';
  const int32_t n = node->n_inputs;
  if (n < 1 || n > EINSUM_MAX_OPERANDS)
    return ox_fail(im, node, TF_ERR_UNSUPPORTED, "%" PRId32 " operands (1 to %d)", n, EINSUM_MAX_OPERANDS);
  einsum_term terms[EINSUM_MAX_OPERANDS];
  const char *arrow = strstr(equation, "->"), *end = arrow ? arrow : equation + strlen(equation), *p = equation;
  int32_t ellipsis = 0;
  bool all_known = true;
  for (int32_t k = 0; k < n; k++) {
    TF_RETURN_IF_ERROR(ox_need_input(im, node, k));
    terms[k].known = ox_foldable(im, node, k);
    terms[k].x = TF_NO_TENSOR;
    if (!terms[k].known)
      TF_RETURN_IF_ERROR(ox_tensor_of(im, node, k, &terms[k].x));
    all_known = all_known && terms[k].known;
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *stop = comma ? comma : end;
    if ((k < n - 1) != (comma != NULL))
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "equation '%s' has not one term per input (%" PRId32 ")", equation,
                     n);
    const int32_t rank = terms[k].known ? terms[k].known->rank : ox_rank_of(im, terms[k].x);
    TF_RETURN_IF_ERROR(parse_term(im, node, p, stop, rank, &ellipsis, terms[k].labels, &terms[k].rank));
    p = stop + 1;
  }
  char output[TF_MAX_RANK];
  int32_t n_output = 0;
  if (arrow)
    TF_RETURN_IF_ERROR(parse_term(im, node, arrow + 2, equation + strlen(equation), -1, &ellipsis, output, &n_output));
  else
    n_output = implicit_output(terms, n, output);
  for (int32_t i = 0; i < n_output; i++) {
    bool found = false;
    for (int32_t k = 0; k < n && !found; k++)
      found = find(terms[k].labels, terms[k].rank, output[i]) >= 0;
    if (!found)
      return ox_fail(im, node, TF_ERR_INVALID_INPUT, "equation: output label '%c' is in no operand", output[i]);
  }
  for (int32_t k = 0; k < n; k++) { /* (after the implicit output, which counts a repeated label twice) */
    bool repeats = false;
    for (int32_t i = 1; i < terms[k].rank; i++)
      repeats = repeats || find(terms[k].labels, i, terms[k].labels[i]) >= 0;
    if (repeats) { /* its diagonal, as data (a known operand as a constant) */
      if (terms[k].x == TF_NO_TENSOR)
        TF_RETURN_IF_ERROR(ox_tensor_of(im, node, k, &terms[k].x));
      terms[k].known = NULL;
      all_known = false;
      TF_RETURN_IF_ERROR(diagonals(im, node, &terms[k]));
    }
  }
  if (all_known) {
    bool folded;
    TF_RETURN_IF_ERROR(fold_einsum(im, node, terms, n, output, n_output, &folded));
    if (folded)
      return NULL;
  }
  for (int32_t k = 0; k < n; k++) /* data from here on: the known operands as constants */
    if (terms[k].x == TF_NO_TENSOR)
      TF_RETURN_IF_ERROR(ox_tensor_of(im, node, k, &terms[k].x));
  char needed[EINSUM_LABELS], keep[2 * EINSUM_LABELS];
  einsum_term acc = terms[0];
  sum_out(im, &acc, needed, needed_after(terms, n, 0, output, n_output, needed));
  for (int32_t k = 1; k < n; k++) {
    /* each side's labels that neither the other side nor anything after operand k reads: summed out */
    const int32_t n_needed = needed_after(terms, n, k, output, n_output, needed);
    einsum_term next = terms[k];
    memcpy(keep, needed, (size_t)n_needed);
    memcpy(keep + n_needed, next.labels, (size_t)next.rank);
    sum_out(im, &acc, keep, n_needed + next.rank);
    memcpy(keep + n_needed, acc.labels, (size_t)acc.rank);
    sum_out(im, &next, keep, n_needed + acc.rank);
    TF_RETURN_IF_ERROR(contract(im, node, &acc, &next, needed, n_needed, &acc));
  }
  TF_RETURN_IF_ERROR(ox_graph_error(im, node));
  transpose_to(im, &acc, output);
  return ox_set_tensor(im, node, 0, acc.x);
}
