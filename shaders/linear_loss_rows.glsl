// What the fused loss head's two shaders share (linear_loss.comp on f32 data, linear_loss_half.comp on
// f16/bf16 data): the labels that count, and sums, maxima and counts over a workgroup of 256
// invocations in a fixed tree order. Included after the shader's bindings and push constants: it
// reads `labels` (i32, or i64 as (low, high) pairs of ints), `work` (the workspace, f32 words) and
// pc.classes, pc.rows, pc.ignore_low, pc.ignore_high, pc.wide_labels and pc.count_at.

shared float partial[256];
shared uint tally[256];

// The label of `row`, or -1 when it does not count (ignore_index, or outside [0, classes): an i64
// label that does not fit in 32 bits too).
int label_of(uint row) {
  int label = pc.wide_labels != 0u ? labels[2u * row] : labels[row];
  int sign = label < 0 ? -1 : 0, high = pc.wide_labels != 0u ? labels[2u * row + 1u] : sign;
  bool ignored = pc.ignore_low == label && pc.ignore_high == high;
  return ignored || high != sign || label < 0 || uint(label) >= pc.classes ? -1 : label;
}

// The sum of every invocation's value in a fixed tree order.
float tree_sum(float value) {
  uint t = gl_LocalInvocationID.x;
  barrier();
  partial[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] += partial[t + s];
    barrier();
  }
  return partial[0];
}

float tree_max(float value) {
  uint t = gl_LocalInvocationID.x;
  barrier();
  partial[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      partial[t] = max(partial[t], partial[t + s]);
    barrier();
  }
  return partial[0];
}

uint tree_count(uint value) {
  uint t = gl_LocalInvocationID.x;
  tally[t] = value;
  barrier();
  for (uint s = 128u; s > 0u; s >>= 1) {
    if (t < s)
      tally[t] += tally[t + s];
    barrier();
  }
  return tally[0];
}

// The count of the labels that count, as the COUNT mode wrote it.
uint counted() { return floatBitsToUint(work[pc.count_at]); }

// COUNT (one workgroup): the labels that count, as a u32 word at work[count_at].
void count_labels() {
  uint mine = 0u;
  for (uint row = gl_LocalInvocationID.x; row < pc.rows; row += 256u)
    mine += label_of(row) >= 0 ? 1u : 0u;
  uint n = tree_count(mine);
  if (gl_LocalInvocationID.x == 0u)
    work[pc.count_at] = uintBitsToFloat(n);
}
