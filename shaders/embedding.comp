#version 450
// embedding and embedding_grad (kernels/cpu/embedding.c); ids are i32. An id outside [0, V)
// reads as a zero row and receives no gradient.
//
// The gradient scatter-adds without atomics: an invocation owns column d of a chunk of table rows,
// zeroes it, then walks every id in order and adds the dy rows whose id falls in its chunk. Each
// element is summed in id order, as on the CPU.
//
// On f16/bf16 data that would round each partial sum, so the half variants' gradient sums in f32
// registers and writes each element once, in three dispatches (backends/vulkan/vk_lower_model.c):
// mode 5 zeroes dtable; mode 3 links the positions of the ids, two words each in the workspace
// (links[2i]: the next position after i with the same id, or -1; links[2i + 1]: 1 when i is its
// id's first position); mode 4 gives each (first position, column) its chain of dy rows summed in
// f32 in position order from 0, rounded once into its row: the f32 sums above, then the cast.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(std430, set = 0, binding = 0) readonly buffer Ids { int ids[]; };
layout(std430, set = 0, binding = 1) readonly buffer Source { ELEMENT source[]; }; // table, or dy
layout(std430, set = 0, binding = 2) buffer Out { ELEMENT out_data[]; }; // y, or dtable (read back)
#if defined(ELEMENT_F16) || defined(ELEMENT_BF16)
#define HALF_GRADIENT 1
// Modes 3 and 4 only; the f32 variant declares no binding 3 (the validation layer would count the
// dummy bound there as written by every dispatch).
layout(std430, set = 0, binding = 3) buffer Links { int links[]; };
#endif

layout(push_constant) uniform Push {
  uint count;       // ids
  uint depth;       // D
  uint rows;        // V
  uint mode;        // 0 forward, 1 gradient, 2 gradient added to what out_data holds;
                    // on half data: 3 link the ids, 4 sum the chains, 5 zero dtable
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

#ifdef HALF_GRADIENT
bool valid(int id) { return id >= 0 && uint(id) < pc.rows; }

// Mode 3: each position's next position with the same id and whether it is the first; a position
// holding no row (out of range) starts no chain.
void link_ids() {
  for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += grid_size()) {
    int id = id_at(i), next = -1, first = valid(id) ? 1 : 0;
    for (uint j = i + 1u; j < pc.count && first == 1 && next < 0; j++)
      if (id_at(j) == id)
        next = int(j);
    for (uint j = i; j > 0u && first == 1; j--)
      if (id_at(j - 1u) == id)
        first = 0;
    links[2u * i] = next;
    links[2u * i + 1u] = first;
  }
}

// Mode 4: the chain of each first position, one column per invocation.
void sum_chains() {
  uint tasks = pc.count * pc.depth;
  for (uint task = gl_GlobalInvocationID.x; task < tasks; task += grid_size()) {
    uint i = task / pc.depth, column = task % pc.depth;
    if (links[2u * i + 1u] == 0)
      continue;
    float sum = 0.0;
    for (int j = int(i); j >= 0; j = links[2u * uint(j)])
      sum += TO_F32(source[uint(j) * pc.depth + column]);
    out_data[uint(id_at(i)) * pc.depth + column] = FROM_F32(sum);
  }
}

#endif

void main() {
#ifdef HALF_GRADIENT
  if (pc.mode == 3u) {
    link_ids();
    return;
  }
  if (pc.mode == 4u) {
    sum_chains();
    return;
  }
  if (pc.mode == 5u) {
    for (uint e = gl_GlobalInvocationID.x; e < pc.rows * pc.depth; e += grid_size())
      out_data[e] = FROM_F32(0.0);
    return;
  }
#endif
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
