/* Finding the fusable groups of a plan (cuda_fuse.h). Host logic over a tf_plan only.
 *
 * Why the byte-range check (moves_safely): plan buffers are addressed by (region, offset, bytes), and
 * two buffers whose live intervals do not intersect may share bytes. A fused launch at step L
 * writes a buffer the plan writes at step w != L and reads buffers the plan reads at step r != L.
 * Between L and w another step may use bytes that the moved write now clobbers (early) or read a
 * buffer that the moved write has not produced yet (late); between r and L another step may have
 * overwritten what the moved read needs. So every step strictly between, outside the group, is
 * checked against the byte ranges involved; any overlap drops the group (its steps launch as
 * compiled). Reads are counted by buffer id: a view (reshape) is produced by a step that reads its
 * source by id, so "read by nobody else" needs no alias walk; shape-only inputs are not reads. */
#define _POSIX_C_SOURCE 200809L
#include "backends/cuda/cuda_fuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ops.h"

static bool env_on(const char *name) {
  const char *value = getenv(name);
  return !value || value[0] == '\0' || strcmp(value, "0") != 0;
}

tf_status tf_cuda_gelu_epilogue_parse(const char *value, uint32_t *dtypes) {
  *dtypes = TF_CUDA_GELU_EPILOGUE_DEFAULT;
  if (!value || value[0] == '\0')
    return NULL;
  if (strcmp(value, "all") == 0) {
    *dtypes = 1u << TF_F32 | 1u << TF_BF16 | 1u << TF_F16;
    return NULL;
  }
  *dtypes = 0;
  if (strcmp(value, "0") == 0 || strcmp(value, "off") == 0)
    return NULL;
  for (const char *at = value; *at;) {
    const size_t length = strcspn(at, ",");
    const tf_dtype types[3] = {TF_F32, TF_BF16, TF_F16};
    bool known = false;
    for (int i = 0; i < 3 && !known; i++) {
      const char *name = tf_dtype_name(types[i]);
      if (strlen(name) == length && strncmp(at, name, length) == 0) {
        *dtypes |= 1u << types[i];
        known = true;
      }
    }
    if (!known)
      return tf_status_new(TF_ERR_INVALID_ARGUMENT,
                           "cuda backend: TIGHTFIT_CUDA_GELU_EPILOGUE='%s': expected all, off, or a comma list of f32, "
                           "bf16, f16",
                           value);
    at += length + (at[length] == ',');
  }
  return NULL;
}

tf_status tf_cuda_fusion_options_from_env(tf_cuda_fusion_options *options) {
  *options = (tf_cuda_fusion_options){.epilogues = env_on("TIGHTFIT_CUDA_EPILOGUES"),
                                      .multi_tensor = env_on("TIGHTFIT_CUDA_MULTI_TENSOR")};
  return tf_cuda_gelu_epilogue_parse(getenv("TIGHTFIT_CUDA_GELU_EPILOGUE"), &options->gelu_dtypes);
}

const char *tf_cuda_fusion_kind_name(tf_cuda_fusion_kind kind) {
  switch (kind) {
  case TF_CUDA_FUSION_BIAS: return "bias";
  case TF_CUDA_FUSION_BIAS_GELU: return "bias+gelu";
  case TF_CUDA_FUSION_BIAS_GELU_AUX: return "bias+gelu(aux)";
  case TF_CUDA_FUSION_BGRADB: return "bgradb";
  case TF_CUDA_FUSION_OPTIMIZER: return "optimizer";
  case TF_CUDA_FUSION_BGRADA: return "bgrada";
  }
  return "?";
}

void tf_cuda_fusion_describe(const tf_cuda_fusion *f, char *text, size_t size) {
  if (f->kind == TF_CUDA_FUSION_OPTIMIZER) {
    const int32_t tensors = (f->last - f->first + 1) / (f->zero_grads ? 2 : 1);
    snprintf(text, size, "optimizer steps %d..%d (%d tensors%s) at %d", f->first, f->last, tensors,
             f->zero_grads ? ", gradients zeroed" : "", f->launch_step);
    return;
  }
  int used = snprintf(text, size, "%s steps", tf_cuda_fusion_kind_name(f->kind));
  for (int32_t k = 0; k < f->n_members && used >= 0 && (size_t)used < size; k++)
    used += snprintf(text + used, size - (size_t)used, "%s%d", k ? "," : " ", f->members[k]);
  if (used >= 0 && (size_t)used < size)
    snprintf(text + used, size - (size_t)used, " at %d%s", f->launch_step, f->workspace ? "" : " (no workspace)");
}

/* ---- what the plan says about buffers and steps ---- */

typedef struct plan_index {
  const tf_plan *plan;
  int32_t *readers;  /* per buffer: how many steps read it (data reads, by id) */
  int32_t *producer; /* per buffer: the step writing it as an output, or -1 */
} plan_index;

static bool reads_data(const tf_plan_step *step, int32_t k) { return !tf_op_input_shape_only(step->op, k); }

static bool writes_input(const tf_plan_step *step, int32_t k) {
  const tf_op_info *info = tf_op_info_get(step->op);
  return info && k < 8 && (info->in_place >> k) & 1u;
}

static tf_status index_plan(const tf_plan *plan, plan_index *index) {
  index->plan = plan;
  const size_t n = (size_t)(plan->n_buffers > 0 ? plan->n_buffers : 1);
  index->readers = calloc(n, sizeof(int32_t));
  index->producer = malloc(n * sizeof(int32_t));
  if (!index->readers || !index->producer)
    return tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot index %d buffers for fusion", plan->n_buffers);
  for (int32_t b = 0; b < plan->n_buffers; b++)
    index->producer[b] = -1;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *step = &plan->steps[s];
    for (int32_t k = 0; k < step->n_inputs; k++)
      if (reads_data(step, k))
        index->readers[step->inputs[k]]++;
    for (int32_t k = 0; k < step->n_outputs; k++)
      if (index->producer[step->outputs[k]] < 0)
        index->producer[step->outputs[k]] = s;
  }
  /* an offloaded activation's copy to the host reads its source like a step: a fused launch must
   * write it (z beside a GELU as the aux output; no bias epilogue skipping an offloaded product) */
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const tf_plan_step *step = &plan->host_steps[h];
    for (int32_t k = 0; k < step->n_inputs; k++)
      if (reads_data(step, k))
        index->readers[step->inputs[k]]++;
  }
  return NULL;
}

static void index_free(plan_index *index) {
  free(index->readers);
  free(index->producer);
}

/* Whether step s reads buffer b (data, by id). */
static bool step_reads(const tf_plan_step *step, int32_t b) {
  for (int32_t k = 0; k < step->n_inputs; k++)
    if (step->inputs[k] == b && reads_data(step, k))
      return true;
  return false;
}

static bool bytes_overlap(const tf_plan *plan, int32_t a, int32_t b) {
  const tf_plan_buffer *x = &plan->buffers[a], *y = &plan->buffers[b];
  return x->region == y->region && x->offset < y->offset + y->bytes && y->offset < x->offset + x->bytes &&
         x->bytes > 0 && y->bytes > 0;
}

/* Whether `out` is a reshape's view of its input: the same bytes, which the step does not change. */
static bool is_view(const tf_plan *plan, const tf_plan_step *step, int32_t out) {
  const tf_plan_buffer *o = &plan->buffers[out];
  if (step->op != TF_OP_RESHAPE || step->n_inputs < 1 || o->alias_of != step->inputs[0])
    return false;
  const tf_plan_buffer *in = &plan->buffers[step->inputs[0]];
  return o->region == in->region && o->offset == in->offset && o->bytes == in->bytes;
}

/* Whether step s uses (writes_only: writes) any byte of buffer b. */
static bool step_touches(const tf_plan *plan, int32_t s, int32_t b, bool writes_only) {
  const tf_plan_step *step = &plan->steps[s];
  for (int32_t k = 0; k < step->n_inputs; k++)
    if ((writes_only ? writes_input(step, k) : reads_data(step, k)) && bytes_overlap(plan, step->inputs[k], b))
      return true;
  for (int32_t k = 0; k < step->n_outputs; k++)
    if (!(writes_only && is_view(plan, step, step->outputs[k])) && bytes_overlap(plan, step->outputs[k], b))
      return true;
  return step->workspace >= 0 && bytes_overlap(plan, step->workspace, b);
}

/* Whether host step h (a copy between the device and the host region, run before device step
 * host_at[h]) uses (writes_only: writes) any byte of buffer b. */
static bool host_step_touches(const tf_plan *plan, int32_t h, int32_t b, bool writes_only) {
  const tf_plan_step *step = &plan->host_steps[h];
  for (int32_t k = 0; k < step->n_inputs && !writes_only; k++)
    if (reads_data(step, k) && bytes_overlap(plan, step->inputs[k], b))
      return true;
  for (int32_t k = 0; k < step->n_outputs; k++)
    if (bytes_overlap(plan, step->outputs[k], b))
      return true;
  return false;
}

/* A buffer the fused launch writes or reads, and the step where the plan writes or reads it. */
typedef struct moved {
  int32_t buffer, planned_step;
} moved;

static bool is_member(const tf_cuda_fusion *f, int32_t s) {
  for (int32_t k = 0; k < f->n_members; k++)
    if (f->members[k] == s)
      return true;
  return false;
}

/* Whether moving m's write (a read: `read`) from its planned step to the launch step passes a step
 * outside the group, or a host step (an offloaded activation's copy), that uses its bytes (for a read:
 * writes them). Between launch step L and planned step P: device steps strictly between for a write,
 * from min(L, P) on for a read; a host step placed before device step p when min < p <= max. */
static bool move_passes_a_use(const tf_plan *plan, const tf_cuda_fusion *f, moved m, bool read) {
  const int32_t at = f->launch_step;
  const int32_t lo = at < m.planned_step ? at : m.planned_step, hi = at < m.planned_step ? m.planned_step : at;
  for (int32_t s = f->first + 1; s < f->last; s++)
    if (!is_member(f, s) && (read ? s >= lo : s > lo) && s < hi && step_touches(plan, s, m.buffer, read))
      return true;
  for (int32_t h = 0; h < plan->n_host_steps; h++) {
    const int32_t p = plan->host_at[h];
    if (p > f->first && p <= f->last && p > lo && p <= hi && host_step_touches(plan, h, m.buffer, read))
      return true;
  }
  return false;
}

/* Whether the GEMM's workspace (the matmul step's: scratch the plan keeps free at that step only)
 * is free at the launch step too: it overlaps nothing the launch writes or reads (an output the plan
 * makes later, z at the add, may lie on those bytes) and no buffer live there (the plan's live
 * ranges; other workspaces are scratch of steps whose kernels this launch replaces or that run
 * before or after it). */
static bool workspace_free(const tf_plan *plan, const tf_cuda_fusion *f, const moved *writes, int32_t n_writes,
                           const moved *reads, int32_t n_reads) {
  const int32_t workspace = plan->steps[f->matmul_step].workspace, at = f->launch_step;
  if (workspace < 0)
    return true;
  for (int32_t w = 0; w < n_writes; w++)
    if (bytes_overlap(plan, workspace, writes[w].buffer))
      return false;
  for (int32_t r = 0; r < n_reads; r++)
    if (bytes_overlap(plan, workspace, reads[r].buffer))
      return false;
  for (int32_t b = 0; b < plan->n_buffers && at != f->matmul_step; b++) {
    const tf_plan_buffer *x = &plan->buffers[b];
    if (b != workspace && x->role != TF_ROLE_WORKSPACE && x->first_step <= at && at <= x->last_step &&
        bytes_overlap(plan, workspace, b))
      return false;
  }
  return true;
}

/* See the file comment. Also: nothing written overlaps anything read (no in-place GEMM) or another
 * write; f->workspace says whether the launch may use the workspace (workspace_free). */
static bool moves_safely(const tf_plan *plan, tf_cuda_fusion *f, const moved *writes, int32_t n_writes,
                         const moved *reads, int32_t n_reads) {
  f->workspace = workspace_free(plan, f, writes, n_writes, reads, n_reads);
  for (int32_t w = 0; w < n_writes; w++) {
    for (int32_t r = 0; r < n_reads; r++)
      if (bytes_overlap(plan, writes[w].buffer, reads[r].buffer))
        return false;
    for (int32_t v = w + 1; v < n_writes; v++)
      if (bytes_overlap(plan, writes[w].buffer, writes[v].buffer))
        return false;
  }
  for (int32_t w = 0; w < n_writes; w++)
    if (move_passes_a_use(plan, f, writes[w], false))
      return false;
  for (int32_t r = 0; r < n_reads; r++)
    if (move_passes_a_use(plan, f, reads[r], true))
      return false;
  return true;
}

static bool floating(tf_dtype d) { return d == TF_F32 || d == TF_F16 || d == TF_BF16; }

static bool same_shape(const tf_plan_buffer *a, const tf_plan_buffer *b) {
  if (a->rank != b->rank)
    return false;
  for (int32_t i = 0; i < a->rank; i++)
    if (a->shape[i] != b->shape[i])
      return false;
  return true;
}

/* Whether buffer b is a bias vector of n elements: [n] or [1, n], of dtype `dtype`. */
static bool is_bias_vector(const tf_plan_buffer *b, int64_t n, tf_dtype dtype) {
  if (b->dtype != dtype)
    return false;
  return (b->rank == 1 && b->shape[0] == n) || (b->rank == 2 && b->shape[0] == 1 && b->shape[1] == n);
}

/* The only step reading buffer b (by id), or -1 when none or several do. */
static int32_t only_reader(const plan_index *index, int32_t b) {
  if (index->readers[b] != 1)
    return -1;
  for (int32_t s = 0; s < index->plan->n_steps; s++)
    if (step_reads(&index->plan->steps[s], b))
      return s;
  return -1;
}

/* ---- forward: matmul -> add(bias) [-> gelu] ---- */

static bool match_forward(const plan_index *index, int32_t m, uint32_t gelu_dtypes, tf_cuda_fusion *f) {
  const tf_plan *plan = index->plan;
  const tf_plan_step *mm = &plan->steps[m];
  if (mm->op != TF_OP_MATMUL || mm->n_inputs != 2 || mm->n_outputs != 1 || mm->attrs.u.matmul.transpose_a)
    return false;
  const tf_plan_buffer *a = &plan->buffers[mm->inputs[0]], *w = &plan->buffers[mm->inputs[1]];
  const int32_t y = mm->outputs[0];
  const tf_plan_buffer *yb = &plan->buffers[y];
  /* one 2-D GEMM over A's flattened rows (matmul.cu's first case) */
  if (w->rank != 2 || a->rank < 2 || yb->rank != a->rank || !floating(yb->dtype) || a->dtype != yb->dtype ||
      w->dtype != yb->dtype || yb->bytes == 0)
    return false;
  const int64_t n = yb->shape[yb->rank - 1];
  const int32_t add = only_reader(index, y);
  if (add < 0 || add <= m)
    return false;
  const tf_plan_step *as = &plan->steps[add];
  if (as->op != TF_OP_ADD || as->n_inputs != 2 || as->n_outputs != 1)
    return false;
  const int32_t bias = as->inputs[0] == y ? as->inputs[1] : as->inputs[0];
  const int32_t z = as->outputs[0];
  const tf_plan_buffer *bb = &plan->buffers[bias];
  const int32_t made = index->producer[bias];
  if (bias == y || !is_bias_vector(bb, n, yb->dtype) || made >= add || !same_shape(&plan->buffers[z], yb) ||
      plan->buffers[z].dtype != yb->dtype)
    return false;
  /* At the matmul when the bias exists by then; else at the add: autocast's cast of an f32 bias to
   * the product's half type runs between the two (the GEMM's reads then move to the add). */
  *f = (tf_cuda_fusion){.kind = TF_CUDA_FUSION_BIAS,
                        .launch_step = made < m ? m : add,
                        .first = m,
                        .last = add,
                        .matmul_step = m,
                        .n_members = 2,
                        .members = {m, add},
                        .bias = bias,
                        .output = z,
                        .aux = -1};
  /* gelu(z) with the tanh approximation, the form cuBLASLt's GELU epilogue computes */
  int32_t gelu = -1;
  for (int32_t s = add + 1; s < plan->n_steps && gelu < 0; s++) {
    const tf_plan_step *g = &plan->steps[s];
    if (g->op == TF_OP_GELU && g->n_inputs == 1 && g->inputs[0] == z && g->attrs.u.gelu.approximate &&
        g->n_outputs == 1 && same_shape(&plan->buffers[g->outputs[0]], yb) &&
        plan->buffers[g->outputs[0]].dtype == yb->dtype)
      gelu = s;
  }
  if (gelu >= 0 && (gelu_dtypes >> yb->dtype & 1u)) {
    const int32_t out = plan->steps[gelu].outputs[0];
    const bool z_read_elsewhere = index->readers[z] > 1;
    /* the aux output's leading dimension (n) must be a multiple of 8; z and the gelu output must not
     * share bytes when both are written */
    if (!z_read_elsewhere || (n % 8 == 0 && !bytes_overlap(plan, out, z))) {
      tf_cuda_fusion g = *f;
      g.kind = z_read_elsewhere ? TF_CUDA_FUSION_BIAS_GELU_AUX : TF_CUDA_FUSION_BIAS_GELU;
      g.last = gelu, g.n_members = 3, g.members[2] = gelu, g.output = out, g.aux = z_read_elsewhere ? z : -1;
      const moved writes[2] = {{out, gelu}, {z, add}};
      const moved reads[3] = {{mm->inputs[0], m}, {mm->inputs[1], m}, {bias, add}};
      if (moves_safely(plan, &g, writes, z_read_elsewhere ? 2 : 1, reads, 3)) {
        *f = g;
        return true;
      }
    }
  }
  const moved writes[1] = {{z, add}};
  const moved reads[3] = {{mm->inputs[0], m}, {mm->inputs[1], m}, {bias, add}};
  return moves_safely(plan, f, writes, 1, reads, 3);
}

/* ---- backward: sum_to(dz) -> db beside matmul(dzᵀ, x) -> dW ---- */

/* Whether buffer `a` holds dz's values as [rows, n]: dz itself or a reshape view of it. */
static bool is_dz_matrix(const plan_index *index, int32_t a, int32_t dz) {
  const tf_plan *plan = index->plan;
  const tf_plan_buffer *ab = &plan->buffers[a], *zb = &plan->buffers[dz];
  if (ab->rank != 2 || ab->shape[1] != zb->shape[zb->rank - 1] || ab->bytes != zb->bytes || ab->dtype != zb->dtype)
    return false;
  if (a == dz)
    return true;
  const int32_t p = index->producer[a];
  return p >= 0 && plan->steps[p].op == TF_OP_RESHAPE && plan->steps[p].inputs[0] == dz && ab->alias_of == dz &&
         ab->region == zb->region && ab->offset == zb->offset;
}

static bool match_bgradb(const plan_index *index, int32_t t, tf_cuda_fusion *f) {
  const tf_plan *plan = index->plan;
  const tf_plan_step *st = &plan->steps[t];
  if (st->op != TF_OP_SUM_TO || st->n_inputs != 2 || st->n_outputs != 1)
    return false;
  const int32_t dz = st->inputs[0], db = st->outputs[0];
  const tf_plan_buffer *zb = &plan->buffers[dz];
  if (zb->rank < 2 || !floating(zb->dtype) || zb->bytes == 0)
    return false;
  const int64_t n = zb->shape[zb->rank - 1];
  if (!is_bias_vector(&plan->buffers[db], n, zb->dtype))
    return false;
  for (int32_t s = 0; s < plan->n_steps; s++) {
    const tf_plan_step *mm = &plan->steps[s];
    const bool accumulate = mm->op == TF_OP_MATMUL_ACCUMULATE;
    if ((mm->op != TF_OP_MATMUL && !accumulate) || !mm->attrs.u.matmul.transpose_a || mm->attrs.u.matmul.transpose_b)
      continue;
    if (mm->n_inputs != (accumulate ? 3 : 2) || mm->n_outputs != (accumulate ? 0 : 1))
      continue;
    const int32_t first = mm->inputs[accumulate ? 1 : 0], second = mm->inputs[accumulate ? 2 : 1];
    const int32_t c = accumulate ? mm->inputs[0] : mm->outputs[0];
    /* dW = dzᵀ x (weights [out, in]: BGRADB) or xᵀ dz (weights [in, out]: BGRADA) */
    const bool dz_first = is_dz_matrix(index, first, dz);
    if (!dz_first && !is_dz_matrix(index, second, dz))
      continue;
    const int32_t a = dz_first ? first : second, x = dz_first ? second : first;
    const tf_plan_buffer *xb = &plan->buffers[x], *cb = &plan->buffers[c];
    if (xb->rank != 2 || xb->shape[0] != plan->buffers[a].shape[0] || xb->dtype != zb->dtype || cb->rank != 2 ||
        cb->shape[dz_first ? 0 : 1] != n || cb->shape[dz_first ? 1 : 0] != xb->shape[1] || cb->dtype != zb->dtype)
      continue;
    *f = (tf_cuda_fusion){.kind = dz_first ? TF_CUDA_FUSION_BGRADB : TF_CUDA_FUSION_BGRADA,
                          .launch_step = s,
                          .first = s < t ? s : t,
                          .last = s < t ? t : s,
                          .matmul_step = s,
                          .n_members = 2,
                          .members = {s < t ? s : t, s < t ? t : s},
                          .bias = db,
                          .output = c,
                          .aux = -1};
    const moved writes[2] = {{db, t}, {c, s}};
    const moved reads[3] = {{dz, t}, {a, s}, {x, s}};
    if (moves_safely(plan, f, writes, 2, reads, 3))
      return true;
    f->launch_step = t; /* else at the sum_to: e.g. an accumulate step reads db between the two */
    return moves_safely(plan, f, writes, 2, reads, 3);
  }
  return false;
}

/* ---- the optimizer: consecutive adamw / sgd steps alike ---- */

static bool same_update(const tf_plan *plan, int32_t s, int32_t t) {
  const tf_plan_step *a = &plan->steps[s], *b = &plan->steps[t];
  if (a->op != b->op || a->n_inputs != b->n_inputs || a->phase != b->phase)
    return false;
  const tf_optimizer_attrs *x = &a->attrs.u.optimizer, *y = &b->attrs.u.optimizer;
  if (x->learning_rate != y->learning_rate || x->momentum != y->momentum || x->beta1 != y->beta1 ||
      x->beta2 != y->beta2 || x->epsilon != y->epsilon || x->weight_decay != y->weight_decay ||
      x->clip_norm != y->clip_norm || x->grad_scale != y->grad_scale)
    return false;
  const int32_t states = a->op == TF_OP_ADAMW ? 4 : 3;
  return a->n_inputs == states || a->inputs[states] == b->inputs[states]; /* the same norm_sq */
}

static bool is_update(const tf_plan *plan, int32_t s) {
  const tf_plan_step *step = &plan->steps[s];
  if (step->op != TF_OP_ADAMW && step->op != TF_OP_SGD)
    return false;
  const int32_t states = step->op == TF_OP_ADAMW ? 4 : 3;
  if (step->n_inputs < states || step->workspace < 0)
    return false;
  for (int32_t k = 0; k < states; k++)
    if (plan->buffers[step->inputs[k]].dtype != TF_F32 || plan->buffers[step->inputs[k]].bytes == 0)
      return false;
  return true;
}

/* Whether step z is the zero step of update u's gradient. */
static bool zeroes_gradient(const tf_plan *plan, int32_t u, int32_t z) {
  if (z >= plan->n_steps)
    return false;
  const tf_plan_step *zero = &plan->steps[z];
  return zero->op == TF_OP_ZERO && zero->n_inputs == 1 && zero->n_outputs == 0 &&
         zero->inputs[0] == plan->steps[u].inputs[1] && zero->phase == plan->steps[u].phase;
}

/* ---- all groups ---- */

static bool spans_intersect(const tf_cuda_fusion *a, const tf_cuda_fusion *b) {
  return a->first <= b->last && b->first <= a->last;
}

tf_status tf_cuda_fusion_find(const tf_plan *plan, tf_cuda_fusion_options options, tf_cuda_fusion **out,
                              int32_t *count) {
  *out = NULL;
  *count = 0;
  if (!options.epilogues && !options.multi_tensor)
    return NULL;
  plan_index index = {0};
  tf_status status = index_plan(plan, &index);
  tf_cuda_fusion *groups = status ? NULL : malloc((size_t)(plan->n_steps > 0 ? plan->n_steps : 1) * sizeof(*groups));
  if (!status && !groups)
    status = tf_status_new(TF_ERR_OUT_OF_MEMORY, "cuda backend: cannot list fusion groups");
  /* run() replays [0, forward_end), [0, micro_steps) and [micro_steps, n_steps): no group crosses
   * the ends of those ranges */
  int32_t forward_end = 0;
  while (forward_end < plan->n_steps && plan->steps[forward_end].phase == TF_PHASE_FORWARD)
    forward_end++;
  int32_t n = 0;
  for (int32_t s = 0; !status && s < plan->n_steps; s++) {
    tf_cuda_fusion f;
    bool found = false;
    if (options.multi_tensor && is_update(plan, s)) {
      const bool zero_grads = zeroes_gradient(plan, s, s + 1);
      const int32_t stride = zero_grads ? 2 : 1;
      int32_t last = s;
      while (last + stride < plan->n_steps && is_update(plan, last + stride) && same_update(plan, s, last + stride) &&
             (!zero_grads || zeroes_gradient(plan, last + stride, last + stride + 1)))
        last += stride;
      if (last > s) {
        f = (tf_cuda_fusion){.kind = TF_CUDA_FUSION_OPTIMIZER,
                             .launch_step = s,
                             .first = s,
                             .last = last + stride - 1,
                             .matmul_step = -1,
                             .bias = -1,
                             .output = -1,
                             .aux = -1,
                             .zero_grads = zero_grads};
        found = true;
      }
    }
    if (!found && options.epilogues)
      found = match_forward(&index, s, options.gelu_dtypes, &f) || match_bgradb(&index, s, &f);
    if (!found)
      continue;
    bool clash = (f.first < forward_end && f.last >= forward_end) ||
                 (f.first < plan->micro_steps && f.last >= plan->micro_steps);
    for (int32_t g = 0; g < n && !clash; g++)
      clash = spans_intersect(&groups[g], &f);
    if (clash)
      continue;
    groups[n++] = f;
    if (f.kind == TF_CUDA_FUSION_OPTIMIZER)
      s = f.last;
  }
  index_free(&index);
  if (status || n == 0) {
    free(groups);
    return status;
  }
  /* in order of the first step (a bgradb group found at its sum_to may start at its matmul) */
  for (int32_t i = 1; i < n; i++)
    for (int32_t j = i; j > 0 && groups[j - 1].first > groups[j].first; j--) {
      const tf_cuda_fusion t = groups[j];
      groups[j] = groups[j - 1], groups[j - 1] = t;
    }
  *out = groups;
  *count = n;
  return NULL;
}
