/* Pass 5, precision (config.precision bf16 or f16, or a node's override): the activations kept for
 * the backward pass are stored in half precision. Every kernel still computes in f32 from f32
 * operands, as the CPU kernels do for every op, so the numbers change only where a saved
 * activation is rounded to the half type: the forward pass runs exactly as in f32 (its readers
 * read the f32 tensor), and each backward or recompute reader reads an f32 copy cast back from the
 * stored half, made just before its first reader. Weights, gradients, optimizer state and the loss
 * stay f32; gradients never pass through a half type. An activation beyond f16's range (65504)
 * becomes infinite in its stored copy and makes the gradients non-finite: plans that store f16
 * check every step's gradients and skip such an update (dynamic loss scaling, compiler/optimizer.c).
 *
 * A node's precision override (Node.precision, tf_graph_set_node_precision) decides the storage of
 * the saved activations that node produces, whatever the policy: f32 keeps them f32 under a half
 * policy (a numerically sensitive node), bf16/f16 stores them in that type under f32 or the other
 * half policy. An override asking half for the loss or the loss op's inputs is ignored, with a
 * note, not refused: those stay f32 for the memory reason given at classify(), and whether a node
 * feeds the loss can depend on the compile options (the fused loss head moves the loss input).
 *
 * Runs after remat, so it stores what recompute keeps (checkpoints included); the cast down is
 * placed right after the activation's producer (t->follows), the cast back as a recompute node.
 * A recomputed activation that the backward pass reads is stored the same way (a recompute cast
 * down right after its recompute, read back just before its backward reader), so it does not wait
 * in f32 through the rest of its segment's backward (gpt2-small's q, k, v of the last block across
 * its MLP's backward); the rest of the recompute reads the f32 tensor, as the forward pass does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/training.h"
#include "core/linear_loss.h"
#include "core/ops.h"

static tf_dtype half_type(tf_precision precision) { return precision == TF_PRECISION_F16 ? TF_F16 : TF_BF16; }

static bool reads_input(const tf_ir_node *node, int32_t k) { return !tf_op_input_shape_only(node->op, k); }

/* What the pass may do with each tensor: SAVED, an f32 forward activation that a backward or
 * recompute node reads; FEEDS_LOSS, such an activation that is the loss or an input of the loss
 * expression's nodes (the logits of each head of a summed loss: mark_loss_inputs), which stays f32 whatever the policy
 * or an override says: its backward reader is the first backward step, so a half copy would live beside its f32 copy at
 * the moment the peak is reached, costing bytes instead of saving them. */
enum { NOT_SAVED = 0, SAVED, FEEDS_LOSS, RECOMPUTED };

/* The loss expression: the loss node and, through its scalar inputs, every forward node whose
 * scalar output it combines (a sum of losses: xtts's text + audio cross entropies). Marks in
 * feeds[] the loss and every input of those nodes (each head's logits and labels). */
static tf_status mark_loss_inputs(const tf_training *t, bool *feeds) {
  const tf_graph *g = t->g;
  if (t->loss < 0)
    return NULL;
  feeds[t->loss] = true;
  int32_t *stack = malloc(sizeof(int32_t) * (size_t)(g->n_nodes ? g->n_nodes : 1));
  bool *seen = calloc((size_t)(g->n_nodes ? g->n_nodes : 1), sizeof(bool));
  if (!stack || !seen) {
    free(stack);
    free(seen);
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "precision: out of memory");
  }
  int32_t depth = 0;
  const int32_t loss_node = g->tensors[t->loss].producer;
  if (loss_node >= 0) {
    stack[depth++] = loss_node;
    seen[loss_node] = true;
  }
  while (depth > 0) {
    const tf_ir_node *node = &g->nodes[stack[--depth]];
    for (int32_t k = 0; k < node->n_inputs; k++) {
      const int32_t in = node->inputs[k], producer = g->tensors[in].producer;
      feeds[in] = true;
      const tf_ir_tensor *x = &g->tensors[in];
      const bool scalar = x->dtype == TF_F32 && x->bytes == 4;
      if (scalar && producer >= 0 && !seen[producer] && t->phase[producer] == TF_PHASE_FORWARD) {
        seen[producer] = true;
        stack[depth++] = producer;
      }
    }
  }
  free(stack);
  free(seen);
  return NULL;
}

static unsigned char *classify(const tf_training *t) {
  const tf_graph *g = t->g;
  unsigned char *kept = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), 1);
  bool *feeds = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof(bool));
  tf_status status = kept && feeds ? mark_loss_inputs(t, feeds) : NULL;
  if (!kept || !feeds || status) {
    tf_status_free(status);
    free(kept);
    free(feeds);
    return NULL;
  }
  for (int32_t n = 0; n < g->n_nodes; n++) {
    if (t->phase[n] != TF_PHASE_BACKWARD && t->phase[n] != TF_PHASE_RECOMPUTE)
      continue;
    const tf_ir_node *node = &g->nodes[n];
    for (int32_t k = 0; k < node->n_inputs; k++) {
      int32_t in = node->inputs[k];
      int32_t producer = g->tensors[in].producer;
      /* the gradients the fused head's single pass makes in the forward pass (outputs after the
       * loss) are gradients: never stored in half */
      const bool gradient =
          producer >= 0 && tf_linear_loss_is_train(g->nodes[producer].op) && g->nodes[producer].outputs[0] != in;
      if (gradient || !reads_input(node, k) || producer < 0 || g->tensors[in].kind != TF_ACTIVATION ||
          g->tensors[in].dtype != TF_F32 || t->role[in] != TF_ROLE_ACTIVATION)
        continue;
      if (t->phase[producer] == TF_PHASE_FORWARD)
        kept[in] = feeds[in] ? FEEDS_LOSS : SAVED;
      else if (t->phase[producer] == TF_PHASE_RECOMPUTE && t->phase[n] == TF_PHASE_BACKWARD &&
               g->nodes[producer].op != TF_OP_CAST && kept[in] == NOT_SAVED)
        kept[in] = RECOMPUTED;
    }
  }
  free(feeds);
  return kept;
}

/* The half tensor that activation `x` is an exact f32 copy of (a forward cast up from f16/bf16: an
 * op on half data, half_ops.c) or that keeps x rounded (the f32 result of such an op, rounded to
 * its declared half type: a backward reader then reads what a half kernel would have written), or
 * -1. */
static int32_t half_source(const tf_training *t, int32_t x) {
  const tf_graph *g = t->g;
  for (int32_t i = 0; i < t->n_narrowed; i++)
    if (t->narrowed[2 * i] == x)
      return t->narrowed[2 * i + 1];
  const int32_t p = g->tensors[x].producer;
  if (p < 0 || g->nodes[p].op != TF_OP_CAST || t->phase[p] != TF_PHASE_FORWARD)
    return -1;
  const int32_t source = g->nodes[p].inputs[0];
  const tf_dtype dtype = g->tensors[source].dtype;
  return dtype == TF_F16 || dtype == TF_BF16 ? source : -1;
}

/* A cast of the stored half tensor back to f32, for the readers of activation x (restore_for). */
typedef struct restore {
  int32_t x, stored;
  const char *suffix;
} restore;

static tf_status make_restore(tf_training *t, const void *context, int32_t *restored) {
  const restore *r = context;
  char name[600];
  snprintf(name, sizeof(name), "%s/restored_f32%s", t->g->tensors[r->x].name, r->suffix);
  return tf_training_emit_cast(t, r->stored, TF_F32, TF_PHASE_RECOMPUTE, name, restored);
}

/* The readers of x among nodes [0, n_nodes) of a phase in `phases` read a new cast of half tensor
 * `stored` back to f32 instead (placed just before the first of them); nothing when none reads x. */
static tf_status restore_for(tf_training *t, int32_t x, int32_t stored, int32_t n_nodes, uint32_t phases,
                             const char *suffix) {
  const restore r = {x, stored, suffix};
  int32_t restored;
  return tf_training_reroute_reads(t, x, n_nodes, phases, make_restore, &r, &restored);
}

/* The backward readers of activation `x` (nodes [0, n_nodes)) read a cast of half tensor `stored`
 * back to f32, made just before the first of them; with `recompute_readers`, the recompute readers
 * read another, made just before theirs. Two copies, not one: a checkpoint's recompute runs at the
 * start of its segment's backward and its own backward reader (a norm's gradient) at the end, and
 * one f32 copy for both would live through the whole segment. */
static tf_status restore_from(tf_training *t, int32_t x, int32_t stored, int32_t n_nodes, bool recompute_readers) {
  TF_RETURN_IF_ERROR(restore_for(t, x, stored, n_nodes, 1u << TF_PHASE_BACKWARD, ""));
  return recompute_readers ? restore_for(t, x, stored, n_nodes, 1u << TF_PHASE_RECOMPUTE, "_for_recompute") : NULL;
}

/* Stores activation `x` as `half`: a cast down after its producer, a cast back for its later readers
 * (nodes [0, n_nodes) that are backward or recompute). Adds the bytes saved to *saved. */
static tf_status store_in_half(tf_training *t, int32_t x, tf_dtype half, int32_t n_nodes, int64_t *saved) {
  tf_graph *g = t->g;
  char name[600];
  snprintf(name, sizeof(name), "%s/stored_%s", g->tensors[x].name, tf_dtype_name(half));
  int32_t stored;
  /* a recomputed activation: its cast down is recompute work too, and its recompute readers (the
   * rest of the recomputed forward) read the f32 tensor; only the backward reads the half copy */
  const bool recomputed = t->phase[g->tensors[x].producer] == TF_PHASE_RECOMPUTE;
  TF_RETURN_IF_ERROR(
      tf_training_emit_cast(t, x, half, recomputed ? TF_PHASE_RECOMPUTE : TF_PHASE_FORWARD, name, &stored));
  t->follows[g->tensors[stored].producer] = g->tensors[x].producer;
  TF_RETURN_IF_ERROR(restore_from(t, x, stored, n_nodes, !recomputed));
  *saved += g->tensors[x].bytes - g->tensors[stored].bytes;
  return NULL;
}

/* The cast back to f32 of a stored half tensor that produces x, when this pass made it (a node from
 * `first` on), else -1. */
static int32_t restore_cast_of(const tf_training *t, int32_t x, int32_t first) {
  const tf_graph *g = t->g;
  const int32_t p = x >= 0 ? g->tensors[x].producer : -1;
  if (p < first || g->nodes[p].op != TF_OP_CAST || t->phase[p] != TF_PHASE_RECOMPUTE || g->tensors[x].dtype != TF_F32)
    return -1;
  const tf_dtype from = g->tensors[g->nodes[p].inputs[0]].dtype;
  return from == TF_F16 || from == TF_BF16 ? p : -1;
}

/* A backward node among [0, first) whose target half kernel takes the stored half tensors that its
 * f32 inputs were cast back from, all at once beside its other operands (attention's gradient reading
 * bf16 q, k, v beside an f32 dy: tf_training_half_kernel_takes), reads them instead: the kernel widens
 * them exactly, so it computes the same bits without the f32 copies. The casts back that nothing reads
 * any more go. *direct: how many nodes read stored tensors so. */
static tf_status read_stored_directly(tf_training *t, int32_t first, int32_t *direct) {
  tf_graph *g = t->g;
  int32_t inputs[TF_OP_VARIADIC_INTERNAL];
  *direct = 0;
  for (int32_t n = 0; n < first; n++) {
    tf_ir_node *node = &g->nodes[n];
    if (t->phase[n] != TF_PHASE_BACKWARD || node->n_inputs > TF_OP_VARIADIC_INTERNAL)
      continue;
    bool restored = false;
    for (int32_t k = 0; k < node->n_inputs; k++) {
      const int32_t cast = reads_input(node, k) ? restore_cast_of(t, node->inputs[k], first) : -1;
      inputs[k] = cast >= 0 ? g->nodes[cast].inputs[0] : node->inputs[k];
      restored = restored || cast >= 0;
    }
    if (!restored || !tf_training_half_kernel_takes(t, n, inputs))
      continue;
    memcpy(node->inputs, inputs, sizeof(int32_t) * (size_t)node->n_inputs);
    (*direct)++;
  }
  if (*direct == 0)
    return NULL;
  int32_t *unread = malloc(sizeof(int32_t) * (size_t)(g->n_nodes - first + 1));
  if (!unread)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "precision: out of memory");
  int32_t n_unread = 0;
  for (int32_t c = first; c < g->n_nodes; c++) {
    const int32_t out = g->nodes[c].outputs[0];
    if (restore_cast_of(t, out, first) == c && tf_training_readers(g, out) == 0) {
      g->tensors[out].producer = -1;
      unread[n_unread++] = c;
    }
  }
  tf_status status = tf_training_remove_nodes(t, unread, n_unread);
  free(unread);
  return status;
}

/* The storage type of a saved activation: its producer's override, else the policy. */
static tf_dtype storage_type(tf_precision policy, tf_precision override) {
  tf_precision chosen = override == TF_PRECISION_INHERIT ? policy : override;
  return chosen == TF_PRECISION_F32 ? TF_F32 : half_type(chosen);
}

static bool asks_half(tf_precision override) { return override == TF_PRECISION_BF16 || override == TF_PRECISION_F16; }

/* What the overrides did, for the note: nodes whose override decided a saved activation's type,
 * nodes whose half override was ignored (their output feeds the loss), nodes that save nothing. */
typedef struct override_counts {
  int32_t nodes, applied, ignored, nothing_saved;
} override_counts;

static override_counts count_overrides(const tf_training *t, const unsigned char *kept, int32_t n_nodes) {
  override_counts c = {0, 0, 0, 0};
  const tf_graph *g = t->g;
  for (int32_t n = 0; n < n_nodes; n++) {
    const tf_ir_node *node = &g->nodes[n];
    if (node->precision == TF_PRECISION_INHERIT)
      continue;
    bool saved = false, feeds_loss = false;
    for (int32_t i = 0; i < node->n_outputs; i++) {
      saved = saved || kept[node->outputs[i]] == SAVED;
      feeds_loss = feeds_loss || kept[node->outputs[i]] == FEEDS_LOSS;
    }
    c.nodes++;
    if (saved)
      c.applied++;
    else if (feeds_loss && asks_half(node->precision))
      c.ignored++;
    else
      c.nothing_saved++;
  }
  return c;
}

/* Appends what half_ops.c did (nodes on half data) to the note. */
static void note_half_nodes(tf_training *t, int32_t from_source, int64_t source_saved) {
  size_t used = strlen(t->precision_notes);
  if (t->autocast_nodes > 0)
    used += (size_t)snprintf(t->precision_notes + used, sizeof(t->precision_notes) - used,
                             "; autocast %s: %d forward nodes write %s, %d casts inserted",
                             tf_dtype_name(t->options.autocast), t->autocast_nodes, tf_dtype_name(t->options.autocast),
                             t->autocast_casts);
  if (t->half_kernel_nodes > 0 && used < sizeof(t->precision_notes))
    used += (size_t)snprintf(t->precision_notes + used, sizeof(t->precision_notes) - used,
                             "; %d nodes on f16/bf16 data run the target's half kernels", t->half_kernel_nodes);
  if (t->half_nodes > 0 && used < sizeof(t->precision_notes))
    snprintf(t->precision_notes + used, sizeof(t->precision_notes) - used,
             "; %d nodes on f16/bf16 data computed in f32 between casts, %d saved values read back from their half "
             "tensors (%.1f MiB less than f32 copies)",
             t->half_nodes, from_source, (double)source_saved / 1048576.0);
}

tf_status tf_precision_pass(tf_training *t, bool recomputed_f32) {
  tf_precision policy = t->config.precision;
  if (!t->options.training) {
    snprintf(t->precision_notes, sizeof(t->precision_notes), "precision: f32");
    note_half_nodes(t, 0, 0);
    return NULL;
  }
  unsigned char *kept = classify(t);
  if (!kept)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "precision: out of memory");
  int32_t n_tensors = t->g->n_tensors, n_nodes = t->g->n_nodes;
  override_counts overrides = count_overrides(t, kept, n_nodes);
  int32_t stored[TF_DTYPE_COUNT] = {0}; /* saved activations by storage type */
  int64_t saved = 0;
  tf_status status = NULL;
  int32_t from_source = 0; /* saved f32 copies of half tensors (half_ops.c), restored from those */
  int64_t source_saved = 0;
  int32_t recomputed = 0;
  for (int32_t x = 0; x < n_tensors && !status; x++) {
    if (kept[x] == RECOMPUTED) {
      tf_dtype type = recomputed_f32 ? TF_F32 : storage_type(policy, t->g->nodes[t->g->tensors[x].producer].precision);
      recomputed += type != TF_F32;
      if (type != TF_F32)
        status = store_in_half(t, x, type, n_nodes, &saved);
      continue;
    }
    if (kept[x] != SAVED)
      continue;
    const int32_t source = half_source(t, x);
    if (source >= 0) {
      from_source++;
      source_saved += t->g->tensors[x].bytes - t->g->tensors[source].bytes;
      status = restore_from(t, x, source, n_nodes, true);
      continue;
    }
    tf_dtype type = storage_type(policy, t->g->nodes[t->g->tensors[x].producer].precision);
    stored[type]++;
    if (type != TF_F32)
      status = store_in_half(t, x, type, n_nodes, &saved);
  }
  free(kept);
  int32_t direct = 0;
  if (!status)
    status = read_stored_directly(t, n_nodes, &direct);
  t->recomputed_half = recomputed;
  if (overrides.nodes > 0)
    snprintf(t->precision_notes, sizeof(t->precision_notes),
             "precision: policy %s; node overrides applied on %d nodes, ignored on %d (feeds the loss: stays f32), "
             "%d with nothing saved; stored %d bf16, %d f16, kept %d f32 (%.1f MiB less than f32); arithmetic in f32",
             tf_precision_name(policy), overrides.applied, overrides.ignored, overrides.nothing_saved, stored[TF_BF16],
             stored[TF_F16], stored[TF_F32], (double)saved / 1048576.0);
  else if (policy == TF_PRECISION_F32)
    snprintf(t->precision_notes, sizeof(t->precision_notes), "precision: f32");
  else
    snprintf(t->precision_notes, sizeof(t->precision_notes),
             "precision: %s storage for the %d activations kept for the backward pass and %d recomputed ones it "
             "reads (%.1f MiB less than f32); weights, gradients, optimizer state and every kernel's arithmetic in f32",
             tf_dtype_name(half_type(policy)), stored[half_type(policy)], recomputed, (double)saved / 1048576.0);
  if (direct > 0) {
    const size_t used = strlen(t->precision_notes);
    snprintf(t->precision_notes + used, sizeof(t->precision_notes) - used,
             "; %d backward steps read the stored half tensors directly (no f32 copies)", direct);
  }
  note_half_nodes(t, from_source, source_saved);
  return status;
}
