#version 450
// Fused attention and its gradient in tiles through shared memory (flash-attention): the values of
// attention.comp (same push constants, bindings, passes and kept statistics; kernels/cpu/attention.c
// for the semantics), but a workgroup of 64 invocations works on a block of 16 query rows (16 key
// rows in the KV pass) of one (n, head), and each K and V row it reads from memory serves all 16 of
// them from shared memory (attention.comp reads every key once per query row). Heads of width
// D <= 128; the lowering (backends/vulkan/vk_lower_attention.c) picks this shader for heads of 8 to
// 128 where the device's shared memory holds the tiles, and TIGHTFIT_VULKAN_TILED_ATTENTION=0 keeps
// attention.comp.
//
// Tiles: BLOCK rows of one head of q, k, v or dy widened to f32, held as vec4s (tiles4) with a row
// stride of an odd number of vec4s (the 8 rows a score product reads at once start in distinct
// banks; columns past D zero), rows past the tensor's end zero; the score products read vec4s.
// Thread t is (ty, tx) = (t / 8, t % 8). In a BLOCK x BLOCK score tile it holds rows ROWS ty + r and
// columns tx + 8c (r, c < ROWS = BLOCK / 8); in a [BLOCK, D] result (O, dq, dk, dv) rows ROWS ty + r
// and columns 4 tx + 32 (e / 4) + e % 4 (e < PARTS = MAX_DEPTH / 8: vec4 groups of a tile row), in
// registers: the loops over r, c and e have constant bounds and are unrolled. 32-row blocks do
// twice the products per shared-memory read of 16-row ones (64 from 8 vec4 reads per four depth
// steps, against 16 from 4) and twice the work per tile load and barrier.
//
// Passes (pc.mode): FORWARD, a workgroup per query block: per key tile S = scale Q K^T, the rows'
// online softmax (each of the 8 invocations of a row writes the maximum of its own pairs of the row
// and reads the row's 8, so all compute the same maximum; each the p of its own pairs, shared
// through memory; all 8 sum a row's p in the same order) and O += P V. STATS: the same walk, then
// (max, sum, delta) of each query row into the first three f32s (STAT_ELEMENTS each) of the
// row's head slice of dq, as attention.comp keeps them (no workspace). KV, a workgroup per key
// block: dv = sum_i P_ij dO_i and dk = scale sum_i dS_ij q_i over the query tiles that see it.
// QUERY, a workgroup per query block: dq = scale sum_j dS_ij k_j, overwriting the statistics, which
// the block read into shared memory first (no other block reads its rows').
//
// Exact zeros: every score and every dO . v_j is one invocation's `precise` chain of fma() over d
// in order (products(): one rounding a step, the same in every pass, where a contraction left to the
// compiler could differ between them), and delta is dO . O summed the same way
// (attention.comp sums P dP instead; the two are equal in exact arithmetic). A query that sees one
// key gets p = exp(0) / 1 = 1 and O = v_j bit for bit, so delta is that key's dO . v_j and
// dS = p (dP - delta) is exactly 0, as on the CPU (docs/cuda.md). Masked pairs get p = dS = 0.
//
// Shared memory: three tiles of BLOCK x (MAX_DEPTH + 4) f32 (four with FOUR_TILES), two
// BLOCK x (BLOCK + 1) score tiles and 3 x BLOCK row statistics: 27,712 bytes for BLOCK 16, MAX_DEPTH
// 128 (vk_lower_attention.c). Forward and STATS hold Q, K, V; QUERY Q, dO and one tile for V then K;
// KV holds K and V and one tile for the query side, which it loads three times per query tile (Q,
// dO, Q again) to stay within lavapipe's 32 KiB, or (FOUR_TILES, the 32-row variants) Q and dO in
// two tiles, each loaded once; QUERY with FOUR_TILES holds V and K side by side.
// -DELEMENT_F16 / -DELEMENT_BF16 and -DINPUT_F16 / -DINPUT_BF16 (common.glsl) as in attention.comp:
// tiles, registers and statistics are f32, each result rounded once.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

// The variants (backends/vulkan/CMakeLists.txt): attention_tiled BLOCK 16, MAX_DEPTH 128;
// attention_tiled_d64 BLOCK 32, MAX_DEPTH 64, FOUR_TILES (GPUs: 43,648 bytes of shared memory);
// attention_tiled_d32 BLOCK 32, MAX_DEPTH 32, FOUR_TILES (27,264 bytes: within lavapipe's 32 KiB, so
// the tests run the 32-row code).
#ifndef BLOCK
#define BLOCK 16u // query rows of a block, key rows of a tile
#endif
#ifndef MAX_DEPTH
#define MAX_DEPTH 128u
#endif
#define LANES 8u                         // invocations sharing a row
#define ROWS (BLOCK / LANES)             // rows (and score columns) per invocation
#define SCORES (ROWS * ROWS)             // score pairs per invocation
#define PARTS (MAX_DEPTH / LANES)        // a row's columns per invocation
#define TILE_FLOATS (BLOCK * (MAX_DEPTH + 4u))
#define SCORE_STRIDE (BLOCK + 1u)

layout(local_size_x = 64) in;
layout(std430, set = 0, binding = 0) readonly buffer Q { IN_ELEMENT q[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { IN_ELEMENT k[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { IN_ELEMENT v[]; };
layout(std430, set = 0, binding = 3) readonly buffer DO { ELEMENT d_out[]; };
layout(std430, set = 0, binding = 4) buffer Out { ELEMENT out_data[]; };      // y, or dq
layout(std430, set = 0, binding = 5) writeonly buffer DK { ELEMENT dk[]; };
layout(std430, set = 0, binding = 6) writeonly buffer DV { ELEMENT dv[]; };

#define FORWARD 0u
#define STATS 1u
#define KV 2u
#define QUERY 3u

layout(push_constant) uniform Push {
  uint batch, queries, keys, heads, depth, width;
  float scale;
  uint causal;
  uint mode;
  uint keep; // always 1 for the gradient here (the lowering keeps depth >= 8)
} pc;

#if FOUR_TILES // the 32-row variants: the KV pass keeps Q and dO side by side (no second load of Q)
shared vec4 tiles4[TILE_FLOATS]; // four tiles of TILE_FLOATS / 4 vec4
#else
shared vec4 tiles4[3u * TILE_FLOATS / 4u];
#endif
shared float score_tile[BLOCK * SCORE_STRIDE];    // the invocations' row maxima (forward, STATS), P (KV)
shared float gradient_tile[BLOCK * SCORE_STRIDE]; // P (forward, STATS), dS (KV, QUERY)
shared float row_stats[3u * BLOCK];               // max, sum, delta of the tile's query rows

#define AT_0 0u
#define AT_1 TILE_FLOATS
#define AT_2 (2u * TILE_FLOATS)
#define AT_3 (3u * TILE_FLOATS)

// A tile row's floats: the head's columns rounded up to a whole vec4, then to an odd number of vec4
// (rows tx + 8c start in distinct banks for products()' vec4 reads); the columns past D hold zeros.
uint quads() { return (pc.depth + 3u) / 4u; }
uint stride() { return 4u * (quads() | 1u); }
// Element i of the tiles (a float index; tiles4 holds them four to a vec4).
float tile(uint i) { return tiles4[i >> 2][i & 3u]; }
void set_tile(uint i, float value) { tiles4[i >> 2][i & 3u] = value; }
uint tx() { return gl_LocalInvocationID.x % LANES; }
uint ty() { return gl_LocalInvocationID.x / LANES; }
// A [BLOCK, D] result (O, dq, dk, dv) in registers: element e of a row is column result_column(e),
// four consecutive columns a group, groups 32 apart, so that a row of the tile it is summed from is
// read as GROUPS vec4s (tile_group).
#define GROUPS (PARTS / 4u)
uint result_column(uint e) { return 4u * tx() + 4u * LANES * (e / 4u) + e % 4u; }
// Whether group g of the invocation's columns holds any of the head's (its vec4 inside a tile row).
bool group_inside(uint g) { return tx() + LANES * g < quads(); }
// Group g of the invocation's columns in row `row` of the tile at `at` (group_inside(g)).
vec4 tile_group(uint at, uint row, uint g) { return tiles4[(at + row * stride()) / 4u + tx() + LANES * g]; }
// Element index of row 0 of head h of batch entry n in a [N, rows, width] tensor.
uint head_at(uint n, uint rows, uint h) { return n * rows * pc.width + h * pc.depth; }
bool visible(uint i, uint j) { return i < pc.queries && j < pc.keys && (pc.causal == 0u || j <= i); }

// Rows [first, first + BLOCK) of the head at `base` of `source` (rows `limit`), widened to f32, into
// registers (fetch_*; rows past `limit` zero), then into the tile at `at` (store_tile; load_* does
// both). Invocation t holds columns t % 32 + 32 m of rows t / 32 + 2 i (a warp reads 32 consecutive
// elements of a row): the loops have constant bounds, so all of a tile's loads are in flight at
// once (a loop walking the elements one by one waited out one memory latency per element), and a
// pass fetches its next tile while it computes on the current one.
#define LOAD_ROWS (BLOCK / 2u)
#define LOAD_COLUMNS ((MAX_DEPTH + 31u) / 32u)
#define TILE_VALUES (LOAD_ROWS * LOAD_COLUMNS)
#define DEFINE_FETCH(name, source, widen)                                                                              \
  void name(uint base, uint first, uint limit, out float value[TILE_VALUES]) {                                        \
    uint lane = gl_LocalInvocationID.x % 32u, half_rows = gl_LocalInvocationID.x / 32u;                               \
    [[unroll]] for (uint i = 0u; i < LOAD_ROWS; i++) {                                                                 \
      uint r = half_rows + 2u * i;                                                                                     \
      [[unroll]] for (uint m = 0u; m < LOAD_COLUMNS; m++) {                                                            \
        uint d = lane + 32u * m;                                                                                       \
        value[i * LOAD_COLUMNS + m] =                                                                                  \
            first + r < limit && d < pc.depth ? widen(source[base + (first + r) * pc.width + d]) : 0.0;                \
      }                                                                                                                \
    }                                                                                                                  \
  }
DEFINE_FETCH(fetch_q, q, IN_TO_F32)
DEFINE_FETCH(fetch_k, k, IN_TO_F32)
DEFINE_FETCH(fetch_v, v, IN_TO_F32)
DEFINE_FETCH(fetch_d_out, d_out, TO_F32)

void store_tile(uint at, float value[TILE_VALUES]) {
  uint s = stride(), lane = gl_LocalInvocationID.x % 32u, half_rows = gl_LocalInvocationID.x / 32u;
  [[unroll]] for (uint i = 0u; i < LOAD_ROWS; i++)
    [[unroll]] for (uint m = 0u; m < LOAD_COLUMNS; m++)
      if (lane + 32u * m < 4u * quads()) // the columns past D too: zeros
        set_tile(at + (half_rows + 2u * i) * s + lane + 32u * m, value[i * LOAD_COLUMNS + m]);
}

#define DEFINE_LOAD(name, fetch)                                                                                       \
  void name(uint at, uint base, uint first, uint limit) {                                                              \
    float value[TILE_VALUES];                                                                                          \
    fetch(base, first, limit, value);                                                                                  \
    store_tile(at, value);                                                                                             \
  }
DEFINE_LOAD(load_q, fetch_q)
DEFINE_LOAD(load_k, fetch_k)
DEFINE_LOAD(load_v, fetch_v)
DEFINE_LOAD(load_d_out, fetch_d_out)

// The kept statistics of query rows [first, first + BLOCK) into row_stats ((0, 1, 0) past the last
// query, whose pairs are all masked).
void load_stats(uint base, uint first) {
  uint t = gl_LocalInvocationID.x, i = first + t;
  if (t >= BLOCK)
    return;
  vec3 s = vec3(0.0, 1.0, 0.0);
  if (i < pc.queries) {
    uint at = base + i * pc.width;
    s = vec3(LOAD_STAT(out_data, at), LOAD_STAT(out_data, at + STAT_ELEMENTS),
             LOAD_STAT(out_data, at + 2u * STAT_ELEMENTS));
  }
  row_stats[t] = s.x;
  row_stats[BLOCK + t] = s.y;
  row_stats[2u * BLOCK + t] = s.z;
}

// Rows ROWS ty + r of the tile at `a` dotted with rows tx + 8c of the tile at `b`, each over d in
// order as a chain of fma() (the zero columns past D last): pair r ROWS + c. Reads are vec4s, four
// depth steps of ROWS rows of each tile: 2 ROWS reads feed 4 SCORES multiply-adds.
float[SCORES] products(uint a, uint b) {
  uint s4 = stride() / 4u, ra = a / 4u + ROWS * ty() * s4, rb = b / 4u + tx() * s4;
  precise float sum[SCORES];
  [[unroll]] for (uint k = 0u; k < SCORES; k++)
    sum[k] = 0.0;
  for (uint d = 0u; d < quads(); d++) {
    vec4 x[ROWS], y[ROWS];
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      x[r] = tiles4[ra + r * s4 + d];
      y[r] = tiles4[rb + r * LANES * s4 + d];
    }
    [[unroll]] for (uint c = 0u; c < 4u; c++)
      [[unroll]] for (uint k = 0u; k < SCORES; k++)
        sum[k] = fma(x[k / ROWS][c], y[k % ROWS][c], sum[k]);
  }
  return sum;
}

float[SCORES] scaled(float s[SCORES]) {
  precise float product[SCORES];
  [[unroll]] for (uint k = 0u; k < SCORES; k++)
    product[k] = pc.scale * s[k];
  return product;
}

// How many of the BLOCK keys of the tile at j0 query i sees (0 past the last query): the walks over a
// tile's keys stop there (the pairs past it have p = dS = 0).
uint visible_in_tile(uint i, uint j0) {
  uint last = pc.causal != 0u ? min(pc.keys, i + 1u) : pc.keys;
  return i < pc.queries && last > j0 ? min(BLOCK, last - j0) : 0u;
}

uint score_row(uint c) { return ROWS * ty() + c / ROWS; }
uint score_column(uint c) { return tx() + LANES * (c % ROWS); }

// (p, dS) of the thread's pairs of query block i0 and key tile j0 from their scaled scores and
// dO . v, with the query rows' statistics in row_stats: p = exp(s - max) / sum, as attention.comp.
void probabilities(uint i0, uint j0, float s[SCORES], float g[SCORES], out float p[SCORES], out float ds[SCORES]) {
  [[unroll]] for (uint c = 0u; c < SCORES; c++) {
    uint row = score_row(c), column = score_column(c);
    p[c] = 0.0;
    ds[c] = 0.0;
    if (visible(i0 + row, j0 + column)) {
      p[c] = exp(s[c] - row_stats[row]) / row_stats[BLOCK + row];
      ds[c] = p[c] * (g[c] - row_stats[2u * BLOCK + row]);
    }
  }
}

// FORWARD (y) and STATS (the kept statistics) of the query block at row i0 of head h.
void forward_block(uint n, uint h, uint i0) {
  uint s = stride(), qb = head_at(n, pc.queries, h), kb = head_at(n, pc.keys, h);
  load_q(AT_0, qb, i0, pc.queries);
  float best[ROWS], total[ROWS];
  float o[ROWS][PARTS];
  [[unroll]] for (uint r = 0u; r < ROWS; r++) {
    best[r] = -1.0 / 0.0;
    total[r] = 0.0;
    [[unroll]] for (uint e = 0u; e < PARTS; e++)
      o[r][e] = 0.0;
  }
  uint keys_end = pc.causal != 0u ? min(pc.keys, i0 + BLOCK) : pc.keys;
  float next_k[TILE_VALUES], next_v[TILE_VALUES];
  fetch_k(kb, 0u, pc.keys, next_k);
  fetch_v(kb, 0u, pc.keys, next_v);
  for (uint j0 = 0u; j0 < keys_end; j0 += BLOCK) {
    barrier(); // the last tile's K, V and scores are read
    store_tile(AT_1, next_k);
    store_tile(AT_2, next_v);
    barrier();
    if (j0 + BLOCK < keys_end) { // the next tile's loads go out before this one's work
      fetch_k(kb, j0 + BLOCK, pc.keys, next_k);
      fetch_v(kb, j0 + BLOCK, pc.keys, next_v);
    }
    float scores[SCORES] = scaled(products(AT_0, AT_1));
    // A row's maximum over the tile: each invocation's over its visible pairs of the row into
    // score_tile (column tx), then the row's LANES of them (max is exact in any order).
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      float mine = -1.0 / 0.0;
      [[unroll]] for (uint c = 0u; c < ROWS; c++)
        if (visible(i0 + ROWS * ty() + r, j0 + tx() + LANES * c))
          mine = max(mine, scores[r * ROWS + c]);
      score_tile[(ROWS * ty() + r) * SCORE_STRIDE + tx()] = mine;
    }
    barrier();
    // The walks over the tile's keys hold the loops over the thread's ROWS rows, so that those
    // unroll (o stays in registers) and each V element read serves every row.
    uint seen[ROWS];
    float top[ROWS];
    uint walk = 0u;
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      seen[r] = visible_in_tile(i0 + ROWS * ty() + r, j0);
      top[r] = -1.0 / 0.0;
      walk = max(walk, seen[r]);
      [[unroll]] for (uint lane = 0u; lane < LANES; lane++)
        top[r] = max(top[r], score_tile[(ROWS * ty() + r) * SCORE_STRIDE + lane]);
    }
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      float next = max(best[r], top[r]);
      if (next == -1.0 / 0.0)
        continue; // nothing visible yet (seen[r] is 0)
      float correction = exp(best[r] - next); // 0 while best is -inf
      total[r] *= correction;
      [[unroll]] for (uint e = 0u; e < PARTS; e++)
        o[r][e] *= correction;
      best[r] = next;
    }
    // Each invocation's own pairs: p = exp(s - max) into gradient_tile (which the forward does not
    // use otherwise), one exponential a pair instead of one per pair and lane of its row.
    [[unroll]] for (uint c = 0u; c < SCORES; c++) {
      uint row = score_row(c), column = score_column(c);
      gradient_tile[row * SCORE_STRIDE + column] =
          visible(i0 + row, j0 + column) ? exp(scores[c] - best[c / ROWS]) : 0.0;
    }
    barrier();
    for (uint j = 0u; j < walk; j++) {
      float p[ROWS];
      [[unroll]] for (uint r = 0u; r < ROWS; r++) {
        p[r] = 0.0;
        if (j < seen[r]) {
          p[r] = gradient_tile[(ROWS * ty() + r) * SCORE_STRIDE + j];
          total[r] += p[r];
        }
      }
      [[unroll]] for (uint g = 0u; g < GROUPS; g++) {
        if (group_inside(g)) {
          vec4 value = tile_group(AT_2, j, g);
          [[unroll]] for (uint c = 0u; c < 4u; c++)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
              if (j < seen[r])
                o[r][4u * g + c] += p[r] * value[c];
        }
      }
    }
  }
  float inverse[ROWS];
  [[unroll]] for (uint r = 0u; r < ROWS; r++)
    inverse[r] = total[r] > 0.0 ? 1.0 / total[r] : 0.0;
  if (pc.mode == FORWARD) {
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      uint i = i0 + ROWS * ty() + r;
      [[unroll]] for (uint e = 0u; e < PARTS; e++) {
        uint column = result_column(e);
        if (i < pc.queries && column < pc.depth)
          out_data[qb + i * pc.width + column] = FROM_F32(o[r][e] * inverse[r]);
      }
    }
    return;
  }
  // STATS: O over the Q tile, then delta = dO . O summed over d in order, as products() sums dO . v.
  barrier();
  [[unroll]] for (uint r = 0u; r < ROWS; r++)
    [[unroll]] for (uint e = 0u; e < PARTS; e++) {
      uint column = result_column(e);
      if (column < pc.depth)
        set_tile(AT_0 + (ROWS * ty() + r) * s + column, o[r][e] * inverse[r]);
    }
  barrier();
  if (tx() != 0u)
    return;
  [[unroll]] for (uint r = 0u; r < ROWS; r++) {
    uint row = ROWS * ty() + r, i = i0 + row;
    if (i >= pc.queries)
      continue;
    uint at = qb + i * pc.width;
    precise float delta = 0.0;
    for (uint d = 0u; d < pc.depth; d++)
      delta = fma(TO_F32(d_out[at + d]), tile(AT_0 + row * s + d), delta);
    STORE_STAT(out_data, at, best[r]);
    STORE_STAT(out_data, at + STAT_ELEMENTS, total[r]);
    STORE_STAT(out_data, at + 2u * STAT_ELEMENTS, delta);
  }
}

// QUERY: dq of the query block at row i0 of head h. Tiles: Q, dO, then V and K in turn (FOUR_TILES:
// side by side, loaded together).
void query_block(uint n, uint h, uint i0) {
  uint qb = head_at(n, pc.queries, h), kb = head_at(n, pc.keys, h);
  load_q(AT_0, qb, i0, pc.queries);
  load_d_out(AT_1, qb, i0, pc.queries);
  load_stats(qb, i0);
  float acc[ROWS][PARTS];
  [[unroll]] for (uint r = 0u; r < ROWS; r++)
    [[unroll]] for (uint e = 0u; e < PARTS; e++)
      acc[r][e] = 0.0;
  uint keys_end = pc.causal != 0u ? min(pc.keys, i0 + BLOCK) : pc.keys;
  float next_k[TILE_VALUES], next_v[TILE_VALUES];
  fetch_v(kb, 0u, pc.keys, next_v);
  fetch_k(kb, 0u, pc.keys, next_k);
  for (uint j0 = 0u; j0 < keys_end; j0 += BLOCK) {
    barrier(); // the last tile's K and dS are read
    store_tile(AT_2, next_v);
#if FOUR_TILES
    store_tile(AT_3, next_k);
    barrier();
    if (j0 + BLOCK < keys_end) { // the next tile's loads go out before this one's work
      fetch_v(kb, j0 + BLOCK, pc.keys, next_v);
      fetch_k(kb, j0 + BLOCK, pc.keys, next_k);
    }
    float g[SCORES] = products(AT_1, AT_2);
#define K_TILE AT_3
#else
    barrier();
    if (j0 + BLOCK < keys_end)
      fetch_v(kb, j0 + BLOCK, pc.keys, next_v);
    float g[SCORES] = products(AT_1, AT_2);
    barrier(); // V is read
    store_tile(AT_2, next_k);
    barrier();
    if (j0 + BLOCK < keys_end)
      fetch_k(kb, j0 + BLOCK, pc.keys, next_k);
#define K_TILE AT_2
#endif
    float p[SCORES], ds[SCORES];
    probabilities(i0, j0, scaled(products(AT_0, K_TILE)), g, p, ds);
    [[unroll]] for (uint c = 0u; c < SCORES; c++)
      gradient_tile[score_row(c) * SCORE_STRIDE + score_column(c)] = ds[c];
    barrier();
    uint seen[ROWS], walk = 0u;
    [[unroll]] for (uint r = 0u; r < ROWS; r++) {
      seen[r] = visible_in_tile(i0 + ROWS * ty() + r, j0);
      walk = max(walk, seen[r]);
    }
    for (uint j = 0u; j < walk; j++) {
      float gradient[ROWS];
      [[unroll]] for (uint r = 0u; r < ROWS; r++)
        gradient[r] = gradient_tile[(ROWS * ty() + r) * SCORE_STRIDE + j];
      [[unroll]] for (uint g = 0u; g < GROUPS; g++) {
        if (group_inside(g)) {
          vec4 value = tile_group(K_TILE, j, g);
          [[unroll]] for (uint c = 0u; c < 4u; c++)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
              if (j < seen[r])
                acc[r][4u * g + c] += gradient[r] * value[c];
        }
      }
    }
  }
  memoryBarrierBuffer(); // they are in dq, a buffer: barrier() alone orders shared memory only
  barrier();             // the statistics are read before the rows holding them are overwritten
  [[unroll]] for (uint r = 0u; r < ROWS; r++) {
    uint i = i0 + ROWS * ty() + r;
    [[unroll]] for (uint e = 0u; e < PARTS; e++) {
      uint column = result_column(e);
      if (i < pc.queries && column < pc.depth)
        out_data[qb + i * pc.width + column] = FROM_F32(pc.scale * acc[r][e]);
    }
  }
}

// KV: dk and dv of the key block at row j0 of head h. Tiles: K, V, and Q, dO, Q in turn (FOUR_TILES:
// Q and dO, each loaded once).
void key_block(uint n, uint h, uint j0) {
  uint qb = head_at(n, pc.queries, h), kb = head_at(n, pc.keys, h);
  load_k(AT_0, kb, j0, pc.keys);
  load_v(AT_1, kb, j0, pc.keys);
  float gk[ROWS][PARTS], gv[ROWS][PARTS];
  [[unroll]] for (uint r = 0u; r < ROWS; r++)
    [[unroll]] for (uint e = 0u; e < PARTS; e++)
      gk[r][e] = gv[r][e] = 0.0;
  // causal: query i sees key j when j <= i, so the query blocks before j0 see none of this block
  uint queries_from = pc.causal != 0u ? j0 : 0u;
#if FOUR_TILES
  float next_q[TILE_VALUES], next_d_out[TILE_VALUES];
  fetch_q(qb, queries_from, pc.queries, next_q);
  fetch_d_out(qb, queries_from, pc.queries, next_d_out);
#endif
  for (uint i0 = queries_from; i0 < pc.queries; i0 += BLOCK) {
    barrier(); // the last tile's Q, P and dS are read
    load_stats(qb, i0);
#if FOUR_TILES
    store_tile(AT_2, next_q);
    store_tile(AT_3, next_d_out);
    barrier();
    if (i0 + BLOCK < pc.queries) { // the next tile's loads go out before this one's work
      fetch_q(qb, i0 + BLOCK, pc.queries, next_q);
      fetch_d_out(qb, i0 + BLOCK, pc.queries, next_d_out);
    }
    float scores[SCORES] = scaled(products(AT_2, AT_0)); // rows: queries, columns: keys
    float p[SCORES], ds[SCORES];
    probabilities(i0, j0, scores, products(AT_3, AT_1), p, ds);
#define D_OUT_TILE AT_3
#else
    load_q(AT_2, qb, i0, pc.queries);
    barrier();
    float scores[SCORES] = scaled(products(AT_2, AT_0)); // rows: queries, columns: keys
    barrier(); // Q is read
    load_d_out(AT_2, qb, i0, pc.queries);
    barrier();
    float p[SCORES], ds[SCORES];
    probabilities(i0, j0, scores, products(AT_2, AT_1), p, ds);
#define D_OUT_TILE AT_2
#endif
    [[unroll]] for (uint c = 0u; c < SCORES; c++) {
      score_tile[score_row(c) * SCORE_STRIDE + score_column(c)] = p[c];
      gradient_tile[score_row(c) * SCORE_STRIDE + score_column(c)] = ds[c];
    }
    barrier();
    // now rows are keys ROWS ty + r and columns features, summed over the tile's queries
    uint tile_queries = min(BLOCK, pc.queries - i0);
    for (uint i = 0u; i < tile_queries; i++) {
      float weight[ROWS];
      [[unroll]] for (uint r = 0u; r < ROWS; r++)
        weight[r] = score_tile[i * SCORE_STRIDE + ROWS * ty() + r];
      [[unroll]] for (uint g = 0u; g < GROUPS; g++) {
        if (group_inside(g)) {
          vec4 value = tile_group(D_OUT_TILE, i, g);
          [[unroll]] for (uint c = 0u; c < 4u; c++)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
              gv[r][4u * g + c] += weight[r] * value[c];
        }
      }
    }
#if !FOUR_TILES
    barrier(); // dO is read
    load_q(AT_2, qb, i0, pc.queries);
    barrier();
#endif
    for (uint i = 0u; i < tile_queries; i++) {
      float weight[ROWS];
      [[unroll]] for (uint r = 0u; r < ROWS; r++)
        weight[r] = gradient_tile[i * SCORE_STRIDE + ROWS * ty() + r];
      [[unroll]] for (uint g = 0u; g < GROUPS; g++) {
        if (group_inside(g)) {
          vec4 value = tile_group(AT_2, i, g);
          [[unroll]] for (uint c = 0u; c < 4u; c++)
            [[unroll]] for (uint r = 0u; r < ROWS; r++)
              gk[r][4u * g + c] += weight[r] * value[c];
        }
      }
    }
  }
  [[unroll]] for (uint r = 0u; r < ROWS; r++) {
    uint j = j0 + ROWS * ty() + r;
    [[unroll]] for (uint e = 0u; e < PARTS; e++) {
      uint column = result_column(e);
      if (j < pc.keys && column < pc.depth) {
        dk[kb + j * pc.width + column] = FROM_F32(pc.scale * gk[r][e]);
        dv[kb + j * pc.width + column] = FROM_F32(gv[r][e]);
      }
    }
  }
}

void main() {
  uint rows = pc.mode == KV ? pc.keys : pc.queries;
  uint blocks_per_head = (rows + BLOCK - 1u) / BLOCK;
  uint blocks = pc.batch * pc.heads * blocks_per_head;
  // Workgroup-uniform: every barrier is reached by the whole workgroup.
  for (uint block = gl_WorkGroupID.x; block < blocks; block += gl_NumWorkGroups.x) {
    uint first = block % blocks_per_head * BLOCK, h = block / blocks_per_head % pc.heads;
    uint n = block / (blocks_per_head * pc.heads);
    barrier(); // the last block's shared memory is read
    if (pc.mode == KV)
      key_block(n, h, first);
    else if (pc.mode == QUERY)
      query_block(n, h, first);
    else
      forward_block(n, h, first);
  }
}
