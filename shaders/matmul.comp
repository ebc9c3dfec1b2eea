#version 450
// Tiled GEMM: matmul with transposes and broadcast batches (kernels/cpu/matmul.c), and, compiled
// with -DMODE=1/2/3, the convolutions as implicit GEMMs (kernels/cpu/conv.c) whose operand loads
// gather the im2col matrix on the fly, so no column matrix (no workspace) is ever stored:
//   MODE 0 matmul           C[m, n] = sum_k A[m, k] B[k, n], batch z; with flag bit 4
//          (matmul_accumulate) C[m, n] += that sum, C read by the invocation that writes it
//   MODE 1 conv forward     y[img, g*og + o, p]  = sum_r w[g*og + o, r] col_img[r, p] (+ bias), z = (img, g)
//   MODE 2 conv grad weight dw[g*og + o, r]      = sum_(img, p) dy[img, g*og + o, p] col_img[r, p], z = g
//   MODE 3 conv grad input  dx[img, g*cg + c, q] = sum_(o, tap) w[g*og + o, c, tap] dy[img, g*og + o, p(q, tap)]
//          (also conv_transpose2d, the same adjoint with x as dy, plus a bias per output channel)
//
// A workgroup of 16 x 16 invocations computes a 64 x 64 tile of C, each invocation a 4 x 4 block
// (rows 4 ty.., columns 4 tx..); K advances 16 at a time through shared memory, loaded with
// consecutive invocations on each operand's contiguous axis and read back as vec4 (one 16-byte read
// per operand and k: the float4 scheme of GPU SGEMMs, and no per-lane gathers on lavapipe). Edges
// are bounds-checked (zeros), so any size works. The subgroup variant is described below, the big-
// tile variant (-DBIG=1, MODE 0) beside its main; no VK_KHR_cooperative_matrix variant
// (shaders/README.md says why).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"

#ifndef MODE
#define MODE 0
#endif
#ifndef SUBGROUP
#define SUBGROUP 0
#endif
#ifndef BIG
#define BIG 0
#endif
#if BIG && (MODE != 0 || SUBGROUP)
#error "the big-tile variant is a matmul (MODE 0) without subgroups"
#endif
#if SUBGROUP
// The subgroup variant (compiled with -DSUBGROUP=1, chosen where the device has subgroup shuffles):
// no shared memory and no barriers. 64 invocations form 8 clusters of 8 consecutive subgroup lanes
// (so every cluster lies within one subgroup on a device whose subgroup size is a power of two >= 8:
// vk_device.c checks). Cluster c computes rows [8c, 8c + 8) of a 64 x 32 tile, lane l of it the
// 8 x 4 block at columns 4l..4l+3. K advances 8 at a time: lane l loads A[row, k0 + l] for its
// cluster's 8 rows (one coalesced load per row), then for each of the 8 k the cluster reads every row's value from the
// lane that loaded it (subgroupShuffle) and its own 4 columns of B.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#include "cluster.glsl"
#define ROWS 8u
#define BM 64
#define BN 32
layout(local_size_x = 64) in;
#elif BIG
// The big-tile variant: 16 x 16 invocations compute a 128 x 128 tile of C, each an 8 x 8 block (rows
// 4 ty.. and 64 + 4 ty.., columns 4 tx.. and 64 + 4 tx..: every read of shared memory is a vec4 that
// a half-warp shares or reads from consecutive banks), 64 multiply-adds per four vec4 reads. While
// it multiplies one K block from shared memory, its registers hold the next block's loads: two vec4
// quads of each operand where the host found them aligned (flag bits 5, 6), else eight elements.
#define BM 128
#define BN 128
#define BK 16
layout(local_size_x = 16, local_size_y = 16) in;
#else
#define BM 64
#define BN 64
#define BK 16
layout(local_size_x = 16, local_size_y = 16) in;
#endif
layout(std430, set = 0, binding = 0) readonly buffer A { ELEMENT a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { ELEMENT b[]; };
#if MODE == 0
layout(std430, set = 0, binding = 2) buffer C { ELEMENT c[]; }; // read too: matmul_accumulate
#else
layout(std430, set = 0, binding = 2) writeonly buffer C { ELEMENT c[]; };
#endif
layout(std430, set = 0, binding = 3) readonly buffer Bias { ELEMENT bias[]; };
#if BIG
// A and B again, as vec4: read so when the host sets flag bit 5 (A) or 6 (B): the operand's row
// stride, element offset and batch strides multiples of 4, so four elements along its contiguous
// axis starting at a multiple of 4 are one aligned vec4.
layout(std430, set = 0, binding = 0) readonly buffer A4 { ELEMENT4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { ELEMENT4 b4[]; };
#endif
#if SUBGROUP && MODE == 0
// B again, as vec4: read so when the host sets flag bit 3 (B not transposed, and n, ldb and every
// batch stride of B multiples of 4, so each lane's 4 columns are one aligned vec4).
layout(std430, set = 0, binding = 1) readonly buffer B4 { ELEMENT4 b4[]; };
#endif

#if MODE == 0
layout(push_constant) uniform Push {
  uint m, n, k;
  uint flags;          // bit 0: A transposed (stored [K, M]), bit 1: B transposed (stored [N, K]),
                       // bit 3: B read as vec4 (subgroup variant), bit 4: C += the product,
                       // bits 5 and 6: A and B read as vec4 (big-tile variant)
  uint lda, ldb;       // row strides as stored
  uint batch_rank;     // collapsed batch axes (<= 4)
  uint a_offset;       // element offsets of A, B and C in their bindings (a row block of a larger
  uint batch_shape[4]; // buffer: the fused loss heads' chunks); C's rows are n elements apart
  uint a_batch_stride[4];
  uint b_batch_stride[4];
  uint b_offset, c_offset;
} pc;
#else
layout(push_constant) uniform Push {
  uint m, n, k;
  uint flags;          // bit 2: bias (conv forward, conv_transpose2d), bit 3: the images folded
                       // into the columns (forward and grad input: n = images x positions, z = group)
  uint batch;          // images
  uint channels, height, width;            // the image
  uint out_channels, out_height, out_width; // the response
  uint kernel_h, kernel_w;
  uint stride_h, stride_w, pad_h, pad_w, dilation_h, dilation_w;
  uint groups;
} pc;
#endif

#if !SUBGROUP
// One padding vec4 per row spreads the transposing stores over the banks.
shared vec4 tile_a[BK][BM / 4 + 1];
shared vec4 tile_b[BK][BN / 4 + 1];
#endif

uint a_base, b_base, c_base; // MODE 0: element offsets of this batch entry
uint image, group_index;     // conv modes

#if MODE == 1 || MODE == 3
// The positions of one image in C's columns: the response's (forward) or the image's (grad input).
uint image_positions() {
#if MODE == 1
  return pc.out_height * pc.out_width;
#else
  return pc.height * pc.width;
#endif
}

// Column `col` of C as an image and a position in it: with the images folded in (flag bit 3, small
// images: one workgroup's tile spans several), else this workgroup's image.
void image_column(uint col, out uint img, out uint p) {
  if ((pc.flags & 8u) != 0u) {
    uint positions = image_positions();
    img = col / positions;
    p = col % positions;
  } else {
    img = image;
    p = col;
  }
}
#endif

#if MODE != 0
// The image element feeding column-matrix row r at response position p of `img`, or 0 (padding).
float image_tap(uint img, uint r, uint p) {
  uint taps = pc.kernel_h * pc.kernel_w;
  uint channel = r / taps, tap = r % taps;
  int ih = int((p / pc.out_width) * pc.stride_h + (tap / pc.kernel_w) * pc.dilation_h) - int(pc.pad_h);
  int iw = int((p % pc.out_width) * pc.stride_w + (tap % pc.kernel_w) * pc.dilation_w) - int(pc.pad_w);
  if (ih < 0 || iw < 0 || ih >= int(pc.height) || iw >= int(pc.width))
    return 0.0;
  uint cg = pc.channels / pc.groups;
  uint plane = ((img * pc.channels) + group_index * cg + channel) * pc.height * pc.width;
  return TO_F32(b[plane + uint(ih) * pc.width + uint(iw)]);
}
#endif

// A(row, kk) and B(kk, col), zero outside [0, m) x [0, k) and [0, k) x [0, n).
float load_a(uint row, uint kk) {
  if (row >= pc.m || kk >= pc.k)
    return 0.0;
#if MODE == 0
  return TO_F32(a[a_base + ((pc.flags & 1u) != 0u ? kk * pc.lda + row : row * pc.lda + kk)]);
#elif MODE == 1
  uint og = pc.out_channels / pc.groups;
  return TO_F32(a[(group_index * og + row) * pc.k + kk]);
#elif MODE == 2
  uint og = pc.out_channels / pc.groups, positions = pc.out_height * pc.out_width;
  uint img = kk / positions, p = kk % positions;
  return TO_F32(a[((img * pc.out_channels) + group_index * og + row) * positions + p]);
#else
  uint og = pc.out_channels / pc.groups, taps = pc.kernel_h * pc.kernel_w, cg = pc.channels / pc.groups;
  uint o = kk / taps, tap = kk % taps;
  return TO_F32(a[((group_index * og + o) * cg + row) * taps + tap]);
#endif
}

float load_b(uint kk, uint col) {
  if (kk >= pc.k || col >= pc.n)
    return 0.0;
#if MODE == 0
  return TO_F32(b[b_base + ((pc.flags & 2u) != 0u ? col * pc.ldb + kk : kk * pc.ldb + col)]);
#elif MODE == 1
  uint img, p;
  image_column(col, img, p);
  return image_tap(img, kk, p);
#elif MODE == 2
  uint positions = pc.out_height * pc.out_width;
  return image_tap(kk / positions, col, kk % positions);
#else
  // dy at the response position whose tap `tap` lands on image position `col`, if one does.
  uint og = pc.out_channels / pc.groups, taps = pc.kernel_h * pc.kernel_w;
  uint o = kk / taps, tap = kk % taps, img, q;
  image_column(col, img, q);
  int hh = int(q / pc.width) + int(pc.pad_h) - int((tap / pc.kernel_w) * pc.dilation_h);
  int ww = int(q % pc.width) + int(pc.pad_w) - int((tap % pc.kernel_w) * pc.dilation_w);
  if (hh < 0 || ww < 0 || hh % int(pc.stride_h) != 0 || ww % int(pc.stride_w) != 0)
    return 0.0;
  uint oh = uint(hh) / pc.stride_h, ow = uint(ww) / pc.stride_w;
  if (oh >= pc.out_height || ow >= pc.out_width)
    return 0.0;
  return TO_F32(b[((img * pc.out_channels) + group_index * og + o) * pc.out_height * pc.out_width +
                  oh * pc.out_width + ow]);
#endif
}

// Whether consecutive invocations should walk k (else m / n) when loading a tile.
bool a_walks_k() {
#if MODE == 0
  return (pc.flags & 1u) == 0u;
#else
  return true;
#endif
}

bool b_walks_k() {
#if MODE == 0
  return (pc.flags & 2u) != 0u;
#elif MODE == 2
  return true;
#else
  return false;
#endif
}

void store_c(uint row, uint col, float value) {
  if (row >= pc.m || col >= pc.n)
    return;
#if MODE == 0
  uint at = c_base + row * pc.n + col;
  // matmul_accumulate: each element of C has one owner, which reads it just before writing it.
  if ((pc.flags & 16u) != 0u)
    value += TO_F32(c[at]);
  c[at] = FROM_F32(value);
#elif MODE == 1
  uint og = pc.out_channels / pc.groups, channel = group_index * og + row, img, p;
  image_column(col, img, p);
  if ((pc.flags & 4u) != 0u)
    value += TO_F32(bias[channel]);
  c[(img * pc.out_channels + channel) * image_positions() + p] = FROM_F32(value);
#elif MODE == 2
  uint og = pc.out_channels / pc.groups;
  c[(group_index * og + row) * pc.n + col] = FROM_F32(value);
#else
  uint cg = pc.channels / pc.groups, channel = group_index * cg + row, img, q;
  image_column(col, img, q);
  if ((pc.flags & 4u) != 0u) // conv_transpose2d: a bias per image channel
    value += TO_F32(bias[channel]);
  c[(img * pc.channels + channel) * image_positions() + q] = FROM_F32(value);
#endif
}

// Sets the batch entry's bases (MODE 0) or the image and group (conv modes) of workgroup slice z.
void select_batch(uint z) {
#if MODE == 0
  a_base = pc.a_offset;
  b_base = pc.b_offset;
  uint rest = z;
  for (int d = int(pc.batch_rank) - 1; d >= 0; d--) {
    uint index = rest % pc.batch_shape[d];
    rest /= pc.batch_shape[d];
    a_base += index * pc.a_batch_stride[d];
    b_base += index * pc.b_batch_stride[d];
  }
  c_base = pc.c_offset + z * pc.m * pc.n;
#elif MODE == 2
  group_index = z;
#else
  bool folded = (pc.flags & 8u) != 0u;
  image = folded ? 0u : z / pc.groups;
  group_index = folded ? z : z % pc.groups;
#endif
}

#if SUBGROUP
// B(kk, col .. col + 3), zeros outside.
vec4 load_b4(uint kk, uint col) {
#if MODE == 0
  if ((pc.flags & 8u) != 0u)
    return kk < pc.k && col < pc.n ? TO_F32_4(b4[(b_base + kk * pc.ldb + col) >> 2]) : vec4(0.0);
#endif
  return vec4(load_b(kk, col), load_b(kk, col + 1u), load_b(kk, col + 2u), load_b(kk, col + 3u));
}

void main() {
  select_batch(gl_WorkGroupID.z);
  uint lane = cluster_lane();
  uint row0 = gl_WorkGroupID.y * BM + cluster_number() * ROWS;
  uint col0 = gl_WorkGroupID.x * BN + lane * 4u;
  vec4 acc[ROWS]; // acc[i][j]: C[row0 + i, col0 + j]
  [[unroll]] for (uint i = 0u; i < ROWS; i++)
    acc[i] = vec4(0.0);
  for (uint k0 = 0u; k0 < pc.k; k0 += 8u) {
    float mine[ROWS]; // A[row0 + i, k0 + lane]
    [[unroll]] for (uint i = 0u; i < ROWS; i++)
      mine[i] = load_a(row0 + i, k0 + lane);
    [[unroll]] for (uint kk = 0u; kk < 8u; kk++) {
      vec4 bv = load_b4(k0 + kk, col0);
      [[unroll]] for (uint i = 0u; i < ROWS; i++)
        acc[i] += cluster_read(mine[i], kk) * bv;
    }
  }
  [[unroll]] for (uint i = 0u; i < ROWS; i++)
    [[unroll]] for (uint j = 0u; j < 4u; j++)
      store_c(row0 + i, col0 + j, acc[i][j]);
}
#elif BIG
uint row0, col0; // the workgroup's tile of C

// Element e of a tile's load (BK x BM of A, BK x BN of B; 8 per invocation each): its k and m/n,
// consecutive invocations walking the operand's contiguous axis.
void tile_a_position(uint e, bool a_k, out uint kk, out uint mm) {
  kk = a_k ? e % BK : e / BM;
  mm = a_k ? e / BK : e % BM;
}

void tile_b_position(uint e, bool b_k, out uint kk, out uint nn) {
  kk = b_k ? e % BK : e / BN;
  nn = b_k ? e / BK : e % BN;
}

// Quad q of a tile's load (4 consecutive elements along the operand's contiguous axis; 2 per
// invocation each, flag bits 5 and 6): the k and m/n of its first element.
// `width`: the tile's m (A) or n (B) extent, BM or BN.
void quad_position(uint q, bool walks_k, uint width, out uint kk, out uint mn) {
  kk = walks_k ? q % (BK / 4u) * 4u : q / (width / 4u);
  mn = walks_k ? q / (BK / 4u) : q % (width / 4u) * 4u;
}

// A(row, kk .. kk + 3) (a_k) or A(row .. row + 3, kk): one vec4 where all four are inside, else
// element by element (zeros outside).
vec4 load_a4(uint row, uint kk, bool a_k) {
  if (a_k) {
    if (row < pc.m && kk + 3u < pc.k)
      return TO_F32_4(a4[(a_base + row * pc.lda + kk) >> 2]);
    return vec4(load_a(row, kk), load_a(row, kk + 1u), load_a(row, kk + 2u), load_a(row, kk + 3u));
  }
  if (kk < pc.k && row + 3u < pc.m)
    return TO_F32_4(a4[(a_base + kk * pc.lda + row) >> 2]);
  return vec4(load_a(row, kk), load_a(row + 1u, kk), load_a(row + 2u, kk), load_a(row + 3u, kk));
}

// B(kk .. kk + 3, col) (b_k) or B(kk, col .. col + 3), as load_a4.
vec4 load_b4(uint kk, uint col, bool b_k) {
  if (b_k) {
    if (col < pc.n && kk + 3u < pc.k)
      return TO_F32_4(b4[(b_base + col * pc.ldb + kk) >> 2]);
    return vec4(load_b(kk, col), load_b(kk + 1u, col), load_b(kk + 2u, col), load_b(kk + 3u, col));
  }
  if (kk < pc.k && col + 3u < pc.n)
    return TO_F32_4(b4[(b_base + kk * pc.ldb + col) >> 2]);
  return vec4(load_b(kk, col), load_b(kk, col + 1u), load_b(kk, col + 2u), load_b(kk, col + 3u));
}

// The invocation's share of the A and B tiles at k0 into registers: 2 quads or 8 elements of each.
void fetch(uint k0, uint tid, bool a_k, bool b_k, out vec4 next_a[2], out vec4 next_b[2]) {
  uint kk, mm, nn;
  if ((pc.flags & 32u) != 0u) {
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
      quad_position(tid + 256u * r, a_k, BM, kk, mm);
      next_a[r] = load_a4(row0 + mm, k0 + kk, a_k);
    }
  } else {
    [[unroll]] for (uint r = 0u; r < 8u; r++) {
      tile_a_position(tid + 256u * r, a_k, kk, mm);
      next_a[r / 4u][r % 4u] = load_a(row0 + mm, k0 + kk);
    }
  }
  if ((pc.flags & 64u) != 0u) {
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
      quad_position(tid + 256u * r, b_k, BN, kk, nn);
      next_b[r] = load_b4(k0 + kk, col0 + nn, b_k);
    }
  } else {
    [[unroll]] for (uint r = 0u; r < 8u; r++) {
      tile_b_position(tid + 256u * r, b_k, kk, nn);
      next_b[r / 4u][r % 4u] = load_b(k0 + kk, col0 + nn);
    }
  }
}

// fetch()'s registers into the shared tiles: a quad along m or n is one vec4 store, one along k
// four.
void store_tiles(uint tid, bool a_k, bool b_k, vec4 next_a[2], vec4 next_b[2]) {
  uint kk, mm, nn;
  if ((pc.flags & 32u) != 0u) {
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
      quad_position(tid + 256u * r, a_k, BM, kk, mm);
      if (a_k) {
        [[unroll]] for (uint i = 0u; i < 4u; i++)
          tile_a[kk + i][mm >> 2][mm & 3u] = next_a[r][i];
      } else {
        tile_a[kk][mm >> 2] = next_a[r];
      }
    }
  } else {
    [[unroll]] for (uint r = 0u; r < 8u; r++) {
      tile_a_position(tid + 256u * r, a_k, kk, mm);
      tile_a[kk][mm >> 2][mm & 3u] = next_a[r / 4u][r % 4u];
    }
  }
  if ((pc.flags & 64u) != 0u) {
    [[unroll]] for (uint r = 0u; r < 2u; r++) {
      quad_position(tid + 256u * r, b_k, BN, kk, nn);
      if (b_k) {
        [[unroll]] for (uint i = 0u; i < 4u; i++)
          tile_b[kk + i][nn >> 2][nn & 3u] = next_b[r][i];
      } else {
        tile_b[kk][nn >> 2] = next_b[r];
      }
    }
  } else {
    [[unroll]] for (uint r = 0u; r < 8u; r++) {
      tile_b_position(tid + 256u * r, b_k, kk, nn);
      tile_b[kk][nn >> 2][nn & 3u] = next_b[r / 4u][r % 4u];
    }
  }
}

void main() {
  select_batch(gl_WorkGroupID.z);
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  row0 = gl_WorkGroupID.y * BM;
  col0 = gl_WorkGroupID.x * BN;
  bool a_k = a_walks_k(), b_k = b_walks_k();
  // acc[(4 h + i) * 2 + g][j]: C[row0 + 64 h + 4 ty + i, col0 + 64 g + 4 tx + j]
  vec4 acc[16];
  [[unroll]] for (uint i = 0u; i < 16u; i++)
    acc[i] = vec4(0.0);
  vec4 next_a[2], next_b[2];
  fetch(0u, tid, a_k, b_k, next_a, next_b);
  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    store_tiles(tid, a_k, b_k, next_a, next_b);
    barrier();
    // The next block's loads (zeros past K) go out before this block's products.
    fetch(k0 + BK, tid, a_k, b_k, next_a, next_b);
    [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
      vec4 a0 = tile_a[kk][ty], a1 = tile_a[kk][ty + 16u];
      vec4 b0 = tile_b[kk][tx], b1 = tile_b[kk][tx + 16u];
      [[unroll]] for (uint i = 0u; i < 4u; i++) {
        acc[i * 2u] += a0[i] * b0;
        acc[i * 2u + 1u] += a0[i] * b1;
        acc[(4u + i) * 2u] += a1[i] * b0;
        acc[(4u + i) * 2u + 1u] += a1[i] * b1;
      }
    }
    barrier();
  }
  [[unroll]] for (uint h = 0u; h < 2u; h++)
    [[unroll]] for (uint i = 0u; i < 4u; i++)
      [[unroll]] for (uint g = 0u; g < 2u; g++)
        [[unroll]] for (uint j = 0u; j < 4u; j++)
          store_c(row0 + 64u * h + 4u * ty + i, col0 + 64u * g + 4u * tx + j, acc[(4u * h + i) * 2u + g][j]);
}
#else
void main() {
  select_batch(gl_WorkGroupID.z);
  uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y, tid = ty * 16u + tx;
  uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  vec4 acc[4] = vec4[4](vec4(0.0), vec4(0.0), vec4(0.0), vec4(0.0)); // acc[i][j]: C[4 ty + i, 4 tx + j]
  bool a_k = a_walks_k(), b_k = b_walks_k();
  for (uint k0 = 0u; k0 < pc.k; k0 += BK) {
    [[unroll]] for (uint r = 0u; r < 4u; r++) {
      uint e = tid + 256u * r;
      uint kk = a_k ? e % BK : e / BM, mm = a_k ? e / BK : e % BM;
      tile_a[kk][mm >> 2][mm & 3u] = load_a(row0 + mm, k0 + kk);
      kk = b_k ? e % BK : e / BN;
      uint nn = b_k ? e / BK : e % BN;
      tile_b[kk][nn >> 2][nn & 3u] = load_b(k0 + kk, col0 + nn);
    }
    barrier();
    [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
      vec4 av = tile_a[kk][ty], bv = tile_b[kk][tx];
      acc[0] += av.x * bv;
      acc[1] += av.y * bv;
      acc[2] += av.z * bv;
      acc[3] += av.w * bv;
    }
    barrier();
  }
  [[unroll]] for (uint i = 0u; i < 4u; i++)
    [[unroll]] for (uint j = 0u; j < 4u; j++)
      store_c(row0 + 4u * ty + i, col0 + 4u * tx + j, acc[i][j]);
}
#endif
