/* Half slices on the CPU (cpu_half.h). Nothing is allocated: the f32 copies live in the step's
 * planned workspace, at the offsets tf_cpu_half_slices_get() gave the compiler. */
#include "backends/cpu/cpu_half.h"

#include <stddef.h>

/* `to` = `from` converted by the cast kernel (f16/bf16 <-> f32 on the floats' bits). */
static void convert(const tf_cpu_tensor *from, const tf_cpu_tensor *to, const tf_cpu_context *context) {
  tf_attrs attrs = {.kind = TF_ATTR_CAST};
  attrs.u.cast.to = to->dtype;
  const tf_cpu_args args = {.op = TF_OP_CAST,
                            .attrs = &attrs,
                            .n_inputs = 1,
                            .inputs = from,
                            .n_outputs = 1,
                            .outputs = to,
                            .context = context};
  tf_cpu_kernel_get(TF_OP_CAST, false)(&args);
}

/* Slice [first, first + rows) of every operand into stored[], and the kernel's view of it into
 * wide[]: the f32 copy for a widened operand (inputs converted into it), the slice itself else. */
static void open_slice(const tf_cpu_args *args, const tf_cpu_half_slices *s, int64_t first, int64_t rows,
                       tf_cpu_tensor *stored, tf_cpu_tensor *wide) {
  char *workspace = args->workspace;
  for (int32_t k = 0; k < args->n_inputs + args->n_outputs; k++) {
    const tf_cpu_tensor *t = k < args->n_inputs ? &args->inputs[k] : &args->outputs[k - args->n_inputs];
    stored[k] = tf_cpu_half_slice_of(t, (s->cut >> k) & 1u, first, rows);
    wide[k] = stored[k];
    if (!((s->widened >> k) & 1u))
      continue;
    wide[k].data = workspace + s->scratch_offset[k];
    wide[k].dtype = TF_F32;
    if (k < args->n_inputs)
      convert(&stored[k], &wide[k], args->context);
  }
}

/* A depth slice after the first: its product added into the whole result (matmul_accumulate, the
 * same tiles and depth order as the whole product, of `depth`). */
static void add_product(const tf_cpu_args *args, const tf_cpu_tensor *wide, int64_t depth) {
  const tf_cpu_tensor operands[3] = {wide[args->n_inputs], wide[0], wide[1]};
  tf_cpu_args accumulate = *args;
  accumulate.op = TF_OP_MATMUL_ACCUMULATE;
  accumulate.n_inputs = 3;
  accumulate.inputs = operands;
  accumulate.n_outputs = 0;
  accumulate.outputs = NULL;
  accumulate.whole_rows = depth;
  tf_cpu_kernel_get(TF_OP_MATMUL_ACCUMULATE, false)(&accumulate);
}

/* Rounds the half results of a slice into place: every widened output, or (`summed`) only the
 * whole ones summed over the slices, after the last. */
static void close_outputs(const tf_cpu_args *args, const tf_cpu_half_slices *s, const tf_cpu_tensor *stored,
                          const tf_cpu_tensor *wide, bool summed) {
  for (int32_t k = args->n_inputs; k < args->n_inputs + args->n_outputs; k++)
    if (((s->widened >> k) & 1u) && ((s->summed >> k) & 1u) == summed)
      convert(&wide[k], &stored[k], args->context);
}

void tf_cpu_half_run(tf_cpu_kernel kernel, const tf_cpu_args *args, const tf_cpu_half_slices *s) {
  tf_cpu_tensor stored[TF_CPU_HALF_MAX_OPERANDS], wide[TF_CPU_HALF_MAX_OPERANDS];
  const int64_t inner_bytes = args->workspace_bytes - s->inner_offset;
  for (int64_t first = 0; first < s->rows; first += s->slice_rows) {
    const int64_t rows = s->rows - first < s->slice_rows ? s->rows - first : s->slice_rows;
    open_slice(args, s, first, rows, stored, wide);
    if (s->summed && first > 0) {
      add_product(args, wide, s->rows);
      continue;
    }
    tf_cpu_args inner = *args;
    inner.inputs = wide;
    inner.outputs = wide + args->n_inputs;
    inner.workspace = inner_bytes > 0 ? (char *)args->workspace + s->inner_offset : NULL;
    inner.workspace_bytes = inner_bytes > 0 ? inner_bytes : 0;
    inner.whole_rows = s->cut ? s->rows : 0; /* the rows the cut is of */
    kernel(&inner);
    close_outputs(args, s, stored, wide, false);
  }
  if (s->summed)
    close_outputs(args, s, stored, wide, true);
}
