/* Pass 8, remat: activation recompute. The forward pass is cut into segments at its *cuts*: the
 * tensors through which all later forward computation flows (in a transformer, the residual stream
 * after each residual add). Dropping a segment means its saved activations (the ones the backward
 * pass reads) are not kept: each backward reader reads a recomputed copy instead, cloned from the
 * forward node on first use (recursively through dropped inputs) and scheduled just before that
 * use. Recomputed tensors are bit-identical: the same kernels on the same inputs, dropout keyed by
 * the same (seed, micro-step, node) counter.
 *
 * Modes: none; checkpoints (drop every segment but the last, the loss head, whose recompute would
 * free nothing: keep only the cuts); auto, which drops the first
 * t->options' remat count of segments in order of saved bytes per recomputed FLOP (the driver in
 * compile.c binary-searches that count against the budget with exact re-simulation). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/ops.h"

typedef struct segment {
  int32_t first, last; /* forward node range, inclusive */
  int64_t saved_bytes; /* saved activations inside, the cut excluded */
  double flops;        /* forward cost of recomputing it */
  int32_t index;
} segment;

/* Saved activations: forward outputs read by a backward node (not as shape only). */
static bool *find_saved(const tf_training *t) {
  const tf_graph *g = t->g;
  bool *saved = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(bool));
  if (!saved)
    return NULL;
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (t->phase[n] != TF_PHASE_BACKWARD)
      continue;
    const tf_ir_node *node = &g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++) {
      int32_t in = node->inputs[k];
      int32_t producer = g->tensors[in].producer;
      bool shape_only = tf_op_input_shape_only(node->op, k);
      if (!shape_only && producer >= 0 && producer < t->n_forward_nodes && in != t->loss)
        saved[in] = true;
    }
  }
  return saved;
}

/* Cut positions: forward node p is a cut when, right after it, its output is the only activation
 * that a later forward node still needs. A sweep over last forward uses finds them in O(n). */
static int32_t find_cuts(const tf_training *t, int32_t *cuts) {
  const tf_graph *g = t->g;
  int32_t n = t->n_forward_nodes;
  int32_t *last_use = malloc(sizeof(int32_t) * (size_t)(g->n_tensors ? g->n_tensors : 1));
  int32_t *ending = calloc((size_t)n + 1, sizeof(int32_t));
  int64_t *ending_ids = calloc((size_t)n + 1, sizeof(int64_t));
  int32_t count = 0;
  if (!last_use || !ending || !ending_ids)
    goto done;
  for (int32_t i = 0; i < g->n_tensors; i++)
    last_use[i] = -1;
  for (int32_t p = 0; p < n; p++)
    for (int32_t k = 0; k < g->nodes[p].n_inputs; k++)
      last_use[g->nodes[p].inputs[k]] = p;
  int32_t live = 0;
  int64_t id_sum = 0;
  for (int32_t p = 0; p < n; p++) {
    live -= ending[p];
    id_sum -= ending_ids[p];
    int32_t out = g->nodes[p].outputs[0];
    if (last_use[out] > p) {
      live++;
      id_sum += out;
      ending[last_use[out]]++;
      ending_ids[last_use[out]] += out;
    }
    if (live == 1 && id_sum == out)
      cuts[count++] = p;
  }
done:
  free(last_use);
  free(ending);
  free(ending_ids);
  return count;
}

/* Keeps every s-th cut, s chosen to minimise the modelled peak of checkpointing: the kept cuts'
 * bytes plus the largest merged segment's saved bytes (recomputed all at once during its backward).
 * Transformers keep every cut (the residual stream is small next to a layer's activations); a
 * chain of equal layers keeps about sqrt(n), the classic scheme. Which of the s phases is kept
 * (cut c when (c + 1 + phase) % s == 0) the model cannot tell apart: a transformer block
 * has two cuts (after attention, after the MLP), and whether a segment is attention + MLP or MLP +
 * next attention decides which block half's recomputed activations wait through the other half's
 * backward; compile.c compiles each phase and keeps the smaller plan. Sets *stride to s.
 * Returns the kept count. */
static int32_t keep_every_sth_cut(const tf_training *t, int32_t phase, const bool *saved, int32_t *cuts, int32_t n_cuts,
                                  int32_t *stride_out) {
  const tf_graph *g = t->g;
  *stride_out = 1;
  if (n_cuts < 2)
    return n_cuts;
  int64_t *inside = calloc((size_t)n_cuts + 1, sizeof(int64_t)); /* saved bytes strictly inside e_i */
  int64_t *cut_bytes = calloc((size_t)n_cuts, sizeof(int64_t));
  if (!inside || !cut_bytes) {
    free(inside);
    free(cut_bytes);
    return n_cuts;
  }
  for (int32_t c = 0, start = 0; c <= n_cuts; c++) {
    int32_t end = c < n_cuts ? cuts[c] : t->n_forward_nodes - 1;
    for (int32_t p = start; p <= end; p++) {
      int32_t out = g->nodes[p].outputs[0];
      if (!saved[out])
        continue;
      if (c < n_cuts && p == end)
        cut_bytes[c] = g->tensors[out].bytes;
      else
        inside[c] += g->tensors[out].bytes;
    }
    start = end + 1;
  }
  int32_t best_stride = 1;
  int64_t best_peak = INT64_MAX;
  for (int32_t stride = 1; stride <= n_cuts; stride++) {
    int64_t kept = 0, largest = 0, current = 0;
    for (int32_t c = 0; c <= n_cuts; c++) {
      current += inside[c];
      bool keep = c < n_cuts && (c + 1) % stride == 0;
      if (c == n_cuts || keep) {
        largest = current > largest ? current : largest;
        current = 0;
        if (keep)
          kept += cut_bytes[c];
      } else {
        current += cut_bytes[c];
      }
    }
    if (kept + largest < best_peak) {
      best_peak = kept + largest;
      best_stride = stride;
    }
  }
  int32_t n_kept = 0;
  *stride_out = best_stride;
  for (int32_t c = 0; c < n_cuts; c++)
    if ((c + 1 + phase) % best_stride == 0)
      cuts[n_kept++] = cuts[c];
  free(inside);
  free(cut_bytes);
  return n_kept;
}

static int by_ratio(const void *a, const void *b) {
  const segment *x = a, *y = b;
  double rx = (double)x->saved_bytes / (x->flops + 1.0), ry = (double)y->saved_bytes / (y->flops + 1.0);
  if (rx != ry)
    return rx > ry ? -1 : 1;
  return x->index - y->index;
}

static int64_t elements_of(const tf_ir_tensor *t) {
  int64_t n = 1;
  for (int32_t d = 0; d < t->rank; d++)
    n *= t->shape[d];
  return n;
}

typedef struct rewrite {
  tf_training *t;
  const bool *dropped;
  int32_t *memo; /* tensor -> its recomputed copy */
  int32_t recomputed;
  tf_status status;
} rewrite;

static int32_t recompute(rewrite *r, int32_t tensor) {
  if (r->status)
    return tensor;
  if (r->memo[tensor] >= 0)
    return r->memo[tensor];
  tf_graph *g = r->t->g;
  int32_t producer = g->tensors[tensor].producer;
  int32_t n_inputs = g->nodes[producer].n_inputs;
  int32_t inputs[TF_OP_VARIADIC];
  for (int32_t k = 0; k < n_inputs && k < TF_OP_VARIADIC; k++) {
    int32_t in = g->nodes[producer].inputs[k];
    inputs[k] = r->dropped[in] ? recompute(r, in) : in;
  }
  tf_attrs attrs = g->nodes[producer].attrs;
  tf_op op = g->nodes[producer].op;
  char name[512];
  snprintf(name, sizeof(name), "recompute/%s", g->nodes[producer].name);
  int32_t out[TF_MAX_OUTPUTS];
  r->status = tf_training_emit(r->t, op, inputs, n_inputs, &attrs, TF_PHASE_RECOMPUTE, name, out);
  if (r->status)
    return tensor;
  r->memo[tensor] = out[0];
  r->recomputed++;
  return out[0];
}

/* Points every backward reader of a dropped tensor at its recomputed copy. */
static tf_status rewrite_readers(tf_training *t, const bool *dropped, int32_t *recomputed) {
  tf_graph *g = t->g;
  rewrite r = {t, dropped, malloc(sizeof(int32_t) * (size_t)(g->n_tensors * 2 + 16)), 0, NULL};
  if (!r.memo)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory");
  for (int32_t i = 0; i < g->n_tensors * 2 + 16; i++)
    r.memo[i] = -1;
  int32_t n_nodes = g->n_nodes;
  for (int32_t n = 0; n < n_nodes && !r.status; n++) {
    if (t->phase[n] != TF_PHASE_BACKWARD)
      continue;
    for (int32_t k = 0; k < g->nodes[n].n_inputs && !r.status; k++) {
      int32_t in = g->nodes[n].inputs[k];
      bool shape_only = tf_op_input_shape_only(g->nodes[n].op, k);
      if (dropped[in] && !shape_only) {
        int32_t copy = recompute(&r, in);
        g->nodes[n].inputs[k] = copy; /* re-indexed: emit may have moved the node array */
      }
    }
  }
  *recomputed = r.recomputed;
  free(r.memo);
  return r.status;
}

static tf_status collect_saved(const tf_training *t, tf_remat_result *result) {
  bool *saved = find_saved(t);
  if (!saved)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory");
  result->saved_list = malloc(sizeof(int32_t) * (size_t)(t->g->n_tensors ? t->g->n_tensors : 1));
  result->n_saved = 0;
  for (int32_t n = 0; result->saved_list && n < t->n_forward_nodes; n++)
    if (saved[t->g->nodes[n].outputs[0]])
      result->saved_list[result->n_saved++] = t->g->nodes[n].outputs[0];
  free(saved);
  return result->saved_list ? NULL : tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory");
}

/* TF_REMAT_LIST: exactly the named saved activations. */
static tf_status remat_list(tf_training *t) {
  tf_graph *g = t->g;
  bool *dropped = calloc((size_t)(g->n_tensors * 2 + 16), sizeof(bool));
  if (!dropped)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory");
  tf_status status = NULL;
  for (int32_t i = 0; i < t->options.remat_list_count && !status; i++) {
    int32_t id = tf_strmap_get(&g->tensor_names, t->options.remat_list[i]);
    int32_t producer = id >= 0 ? g->tensors[id].producer : -1;
    if (producer < 0 || producer >= t->n_forward_nodes || id == t->loss)
      status = tf_status_new(TF_ERR_INVALID_ARGUMENT, "cannot recompute '%s': not an activation of the forward pass",
                             t->options.remat_list[i]);
    else
      dropped[id] = true;
  }
  int32_t recomputed = 0;
  if (!status)
    status = rewrite_readers(t, dropped, &recomputed);
  snprintf(t->remat_notes, sizeof(t->remat_notes), "recompute: %d listed activations, %d forward nodes recomputed",
           t->options.remat_list_count, recomputed);
  free(dropped);
  return status;
}

tf_status tf_remat(tf_training *t, const tf_remat_request *request, tf_remat_result *result) {
  tf_remat_mode mode = t->options.remat;
  memset(result, 0, sizeof(*result));
  result->stride = 1;
  snprintf(t->remat_notes, sizeof(t->remat_notes), "recompute: none (every saved activation is kept)");
  if (!t->options.training)
    return NULL;
  if (request->collect_saved)
    TF_RETURN_IF_ERROR(collect_saved(t, result));
  if (mode == TF_REMAT_NONE)
    return NULL;
  if (mode == TF_REMAT_LIST)
    return remat_list(t);
  tf_graph *g = t->g;
  int32_t n = t->n_forward_nodes;
  int32_t *cuts = malloc(sizeof(int32_t) * (size_t)(n ? n : 1));
  segment *segments = malloc(sizeof(segment) * (size_t)(n + 1));
  bool *saved = find_saved(t);
  bool *dropped = calloc((size_t)(g->n_tensors * 2 + 16), sizeof(bool));
  tf_status status = NULL;
  if (!cuts || !segments || !saved || !dropped) {
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "remat: out of memory");
    goto done;
  }
  int32_t n_cuts = find_cuts(t, cuts), n_segments = 0;
  const int32_t all_cuts = n_cuts;
  n_cuts = keep_every_sth_cut(t, request->phase, saved, cuts, n_cuts, &result->stride);
  for (int32_t c = 0, start = 0; c <= n_cuts; c++) {
    int32_t end = c < n_cuts ? cuts[c] : n - 1;
    if (end < start)
      continue;
    segment *s = &segments[n_segments];
    *s = (segment){start, end, 0, 0, n_segments};
    for (int32_t p = start; p <= end; p++) {
      int32_t out = g->nodes[p].outputs[0];
      bool is_cut = c < n_cuts && p == end;
      if (saved[out] && !is_cut)
        s->saved_bytes += g->tensors[out].bytes;
      s->flops += 2.0 * (double)elements_of(&g->tensors[out]);
    }
    n_segments++;
    start = end + 1;
  }
  /* The last segment (the loss head: final norm, logits, loss) is never dropped: its backward runs
   * right after its forward, with nothing in between, so recomputing it would put the same bytes
   * back at the same place for a second forward's FLOPs (the lm_head matmul, in a language model). */
  int32_t droppable = n_segments > 0 ? n_segments - 1 : 0;
  result->n_segments = droppable;
  int32_t drop = mode == TF_REMAT_CHECKPOINTS ? droppable : request->drop;
  if (drop > droppable)
    drop = droppable;
  qsort(segments, (size_t)droppable, sizeof(segment), by_ratio);
  int64_t dropped_bytes = 0;
  int32_t dropped_count = 0;
  for (int32_t i = 0; i < drop; i++) {
    const segment *s = &segments[i];
    for (int32_t p = s->first; p <= s->last; p++) {
      int32_t out = g->nodes[p].outputs[0];
      bool is_cut = false;
      for (int32_t c = 0; c < n_cuts && !is_cut; c++)
        is_cut = cuts[c] == p;
      /* Every intermediate of a dropped segment is dropped, saved or not: a recompute clone must
       * reach back to the segment's input cut, never keep a forward intermediate alive. */
      if (!is_cut && g->tensors[out].kind == TF_ACTIVATION) {
        dropped[out] = true;
        if (saved[out]) {
          dropped_bytes += g->tensors[out].bytes;
          dropped_count++;
        }
      }
    }
  }
  int32_t recomputed = 0;
  status = rewrite_readers(t, dropped, &recomputed);
  snprintf(t->remat_notes, sizeof(t->remat_notes),
           "recompute: %s, %d of %d segments (cut at %d layer boundaries: one in %d of %d cuts, from cut %d; the loss "
           "head is kept): %d activations (%.1f MiB) dropped, %d forward nodes recomputed",
           mode == TF_REMAT_CHECKPOINTS ? "checkpoints" : "auto", drop, droppable, n_cuts, result->stride, all_cuts,
           result->stride - request->phase % result->stride, dropped_count, (double)dropped_bytes / 1048576.0,
           recomputed);
done:
  free(cuts);
  free(segments);
  free(saved);
  free(dropped);
  return status;
}
