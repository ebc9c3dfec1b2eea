#version 450
// embedding and embedding_grad (kernels/cpu/embedding.c); ids are i32. An id outside [0, V)
// reads as a zero row and receives no gradient.
//
// The gradient scatter-adds without atomics: an invocation owns column d of a chunk of table rows,
// zeroes it, then walks every id in order and adds the dy rows whose id falls in its chunk. Each
// element is summed in id order, as on the CPU.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Ids { int ids[]; };
layout(std430, set = 0, binding = 1) readonly buffer Source { ELEMENT source[]; }; // table, or dy
layout(std430, set = 0, binding = 2) buffer Out { ELEMENT out_data[]; }; // y, or dtable (read back)

layout(push_constant) uniform Push {
  uint count;       // ids
  uint depth;       // D
  uint rows;        // V
  uint mode;        // 0 forward, 1 gradient, 2 gradient added to what out_data holds
  uint chunk_rows;  // gradient: table rows per chunk
  uint chunks;
  uint wide_ids;    // 1: the ids are i64, (low, high) pairs of ints
} pc;

// Id k, or -1 (no row: out of range) for an i64 id that does not fit in 32 bits.
int id_at(uint k) {
  if (pc.wide_ids == 0u)
    return ids[k];
  int low = ids[2u * k];
  return ids[2u * k + 1u] == (low < 0 ? -1 : 0) ? low : -1;
}

void main() {
  if (pc.mode == 0u) {
    uint total = pc.count * pc.depth;
    for (uint i = gl_GlobalInvocationID.x; i < total; i += grid_size()) {
      int id = id_at(i / pc.depth);
      // through f32 (exact), as cast up -> embedding -> cast down does it; no select on 16-bit values
      float value = id >= 0 && uint(id) < pc.rows ? TO_F32(source[uint(id) * pc.depth + i % pc.depth]) : 0.0;
      out_data[i] = FROM_F32(value);
    }
    return;
  }
  uint tasks = pc.chunks * pc.depth;
  for (uint task = gl_GlobalInvocationID.x; task < tasks; task += grid_size()) {
    uint column = task % pc.depth, first = (task / pc.depth) * pc.chunk_rows;
    uint last = min(first + pc.chunk_rows, pc.rows);
    for (uint r = first; r < last && pc.mode == 1u; r++)
      out_data[r * pc.depth + column] = FROM_F32(0.0);
    // Sums stay in the output: each element has one owner, which reads back only its own writes.
    for (uint i = 0u; i < pc.count; i++) {
      int id = id_at(i);
      if (id < int(first) || id >= int(last))
        continue;
      uint at = uint(id) * pc.depth + column;
      out_data[at] = FROM_F32(TO_F32(out_data[at]) + TO_F32(source[i * pc.depth + column]));
    }
  }
}
