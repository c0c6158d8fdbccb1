// Fused block-sparse attention on CUDA (docs/block_sparse_attention.md), in four layers:
//   PTX wrappers       ldmatrix, mma.sync m16n8k16 (bf16 / fp16 in, fp32 accumulate),
//                      cp.async with zero fill
//   tile products      warp-level products over shared-memory tiles, in the register
//                      layouts of mma.sync (PTX ISA, "Matrix Fragments for mma.m16n8k16")
//   kernels            forward (query tile x its listed key tiles, online softmax),
//                      dQ (the same walk), dK/dV (key tile x the inverted list), delta
//   launchers          checks, dispatch on dtype and head_dim, shared-memory opt-in
//
// Shapes: every thread block has 4 warps; a warp owns 16 rows of the thread block's 64
// (query rows in the forward and dQ, key rows in dK/dV). Keys (forward, dQ) and queries
// (dK/dV) stream through shared memory in tiles, double-buffered with cp.async: the next
// tile's copy is in flight while the current one is multiplied. Shared-memory rows are
// padded by 16 bytes so that the 8 rows an ldmatrix reads fall in different banks.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <vector>

#include "kernels/attention/core/cuda/block_sparse_attention_kernels.h"

namespace sb {
namespace {

constexpr int kTile = static_cast<int>(kBlockSparseTile);  // rows per thread block
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;  // elements (16 bytes) of padding per shared-memory row
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
static_assert(kTile == 16 * kWarps, "a warp owns 16 rows of a tile");

// ---- PTX wrappers -------------------------------------------------------------------

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// 16 bytes from global to shared memory; zeros when !valid (src is then not read).
__device__ __forceinline__ void copy_async_16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 16 : 0));
}

__device__ __forceinline__ void copy_async_4(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(valid ? 4 : 0));
}

__device__ __forceinline__ void copy_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `pending` of this thread's committed groups are still in flight.
template <int pending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
}

template <typename T>
struct MatrixOps;

template <>
struct MatrixOps<__nv_bfloat16> {
  // c (16 x 8, fp32) += a (16 x 16) * b (16 x 8)
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Two values in one register, `low` in the lower half (the lower column of a fragment).
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ static float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
};

template <>
struct MatrixOps<__half> {
  __device__ __forceinline__ static void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ static uint32_t pack(float low, float high) {
    const __half2 v = __floats2half2_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
  __device__ __forceinline__ static float to_float(__half x) { return __half2float(x); }
};

// ---- tile products ------------------------------------------------------------------
// Fragment coordinates of lane l: group = l / 4 (a row of A and C, a column of B),
// quad = l % 4. C element e of an n-tile sits at row group + 8 * (e / 2), column
// 2 * quad + e % 2.

// A operand (16 x 16) from rows r0.., columns c0.. of a row-major tile.
template <int kLd, typename T>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T* tile, int r0, int c0, int lane) {
  ldmatrix_x4(a, tile + (r0 + (lane & 15)) * kLd + c0 + (lane >> 4) * 8);
}

// B operands where the tile's rows are B's columns (B[k][n] = tile[n][k]): the n-tile of
// rows n0 .. n0 + 7 for two k-steps; r[0..1] for columns k0.., r[2..3] for k0 + 16...
template <int kLd, typename T>
__device__ __forceinline__ void load_b_from_rows(uint32_t (&r)[4], const T* tile, int n0, int k0,
                                                 int lane) {
  ldmatrix_x4(r, tile + (n0 + (lane & 7)) * kLd + k0 + (lane >> 3) * 8);
}

// B operands where the tile's rows are B's rows (B[k][n] = tile[k][n]): the k-step of
// rows k0 .. k0 + 15 for two n-tiles; r[0..1] for columns n0.., r[2..3] for n0 + 8...
template <int kLd, typename T>
__device__ __forceinline__ void load_b_from_columns(uint32_t (&r)[4], const T* tile, int k0, int n0,
                                                    int lane) {
  ldmatrix_x4_trans(r, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * kLd + n0 + (lane >> 4) * 8);
}

// acc [16 x 8 kN] += A (16 x kK, fragments in registers) * tile^T, tile [8 kN rows][kK].
template <int kN, int kK, int kLd, typename T>
__device__ __forceinline__ void product_registers_rows(float (&acc)[kN][4],
                                                       const uint32_t (&a)[kK / 16][4],
                                                       const T* tile, int lane) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; kk += 2) {
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      uint32_t r[4];
      load_b_from_rows<kLd>(r, tile, n * 8, kk * 16, lane);
      MatrixOps<T>::mma(acc[n], a[kk], r[0], r[1]);
      MatrixOps<T>::mma(acc[n], a[kk + 1], r[2], r[3]);
    }
  }
}

// acc [16 x 8 kN] += a_tile[a_row0 .. a_row0 + 15][0 .. kK) * b_tile^T, b_tile [8 kN rows][kK].
template <int kN, int kK, int kLdA, int kLdB, typename T>
__device__ __forceinline__ void product_rows_rows(float (&acc)[kN][4], const T* a_tile, int a_row0,
                                                  const T* b_tile, int lane) {
#pragma unroll
  for (int kk = 0; kk < kK / 16; kk += 2) {
    uint32_t a0[4], a1[4];
    load_a<kLdA>(a0, a_tile, a_row0, kk * 16, lane);
    load_a<kLdA>(a1, a_tile, a_row0, kk * 16 + 16, lane);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      uint32_t r[4];
      load_b_from_rows<kLdB>(r, b_tile, n * 8, kk * 16, lane);
      MatrixOps<T>::mma(acc[n], a0, r[0], r[1]);
      MatrixOps<T>::mma(acc[n], a1, r[2], r[3]);
    }
  }
}

// acc [16 x 8 kDN] += P (16 x 8 kKN, accumulator fragments rounded to T) * tile,
// tile [8 kKN rows][8 kDN].
template <int kDN, int kKN, int kLd, typename T>
__device__ __forceinline__ void product_fragments_columns(float (&acc)[kDN][4],
                                                          const float (&p)[kKN][4], const T* tile,
                                                          int lane) {
#pragma unroll
  for (int kk = 0; kk < kKN / 2; ++kk) {
    const uint32_t a[4] = {MatrixOps<T>::pack(p[2 * kk][0], p[2 * kk][1]),
                           MatrixOps<T>::pack(p[2 * kk][2], p[2 * kk][3]),
                           MatrixOps<T>::pack(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                           MatrixOps<T>::pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dn = 0; dn < kDN; dn += 2) {
      uint32_t r[4];
      load_b_from_columns<kLd>(r, tile, kk * 16, dn * 8, lane);
      MatrixOps<T>::mma(acc[dn], a, r[0], r[1]);
      MatrixOps<T>::mma(acc[dn + 1], a, r[2], r[3]);
    }
  }
}

// Copies rows [0, valid) of a [kRows x D] global tile (row stride in elements) into a
// shared tile with leading dimension D + kPad; rows past `valid` become zeros.
template <int kRows, int D, typename T>
__device__ __forceinline__ void load_rows_async(T* tile, const T* first_row, int64_t row_stride,
                                                int valid) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const bool in_range = r < valid;
    const T* src = in_range ? first_row + r * row_stride + c * 8 : first_row;
    copy_async_16(tile + r * (D + kPad) + c * 8, src, in_range);
  }
}

// Stores a warp's 16 x D accumulator rows (times `factor`) as float to rows [row0, row0 +
// 16) of a [rows, row_stride] float tensor, skipping rows >= valid.
template <int D>
__device__ __forceinline__ void store_rows_float(const float (&acc)[D / 8][4], float factor, float* first_row,
                                                 int64_t row_stride, int row0, int valid, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + (lane >> 2) + half * 8;
    if (row >= valid) continue;
    float* dst = first_row + row * row_stride + (lane & 3) * 2;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<float2*>(dst + dn * 8) =
          make_float2(acc[dn][2 * half] * factor, acc[dn][2 * half + 1] * factor);
    }
  }
}

// Stores a warp's 16 x D accumulator rows (times `factor`) to rows [row0, row0 + 16) of
// a [rows, row_stride] tensor, skipping rows >= valid.
template <int D, typename T>
__device__ __forceinline__ void store_rows(const float (&acc)[D / 8][4], float factor, T* first_row,
                                           int64_t row_stride, int row0, int valid, int lane) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + (lane >> 2) + half * 8;
    if (row >= valid) continue;
    T* dst = first_row + row * row_stride + (lane & 3) * 2;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      *reinterpret_cast<uint32_t*>(dst + dn * 8) =
          MatrixOps<T>::pack(acc[dn][2 * half] * factor, acc[dn][2 * half + 1] * factor);
    }
  }
}

// ---- kernels ------------------------------------------------------------------------

template <typename T>
struct KernelArgs {
  const T *q, *k, *v, *grad_out;
  T *out, *dq, *dk, *dv;
  float* lse;              // [Tq, Hq]; written by the forward, read by the backward
  const float* delta;      // [Tq, Hq]: rowsum(dO * O)
  const int32_t* table;    // [NB, kBsBlockFields]
  const int32_t* selected; // [Hq, NB, capacity]
  const int32_t* count;    // [Hq, NB]
  const int32_t* tiles;    // [n, 2]: query tiles (forward, dQ) or key tiles (dK/dV)
  const int32_t* inverse_offsets;  // [Hq * NB + 1]
  const int32_t* inverse_blocks;
  // dK/dV: query heads per thread block. The whole group: dk, dv written directly; one:
  // each query head's share written to dk_partial, dv_partial (float [Tk, Hq, D]) and
  // summed over the group afterwards.
  float *dk_partial, *dv_partial;
  int heads_per_block;
  int blocks, capacity, q_heads, kv_heads, group;
  float scale, scale_log2;
  bool causal;
};

// Moves (slot, offset) to the first key tile at or after it that holds a key some
// query of the tile may see: a causal diagonal block ends at the tile's last query.
__device__ __forceinline__ bool seek_key_tile(int& slot, int& offset, const int32_t* list, int listed,
                                              const int32_t* table, int query_block, bool causal,
                                              int last_query_pos) {
  while (slot < listed) {
    const int j = list[slot];
    const int keys = table[j * kBsBlockFields + kBsKeyLen];
    const int end = (causal && j == query_block) ? min(keys, last_query_pos + 1) : keys;
    if (offset < end) return true;
    ++slot;
    offset = 0;
  }
  return false;
}

// Where a query tile sits and what its routing row lists.
struct QueryTile {
  int block, start, rows, pos0;  // first query row in q, rows (<= kTile), in-block position
  const int32_t* list;
  int listed;
};

template <typename T>
__device__ __forceinline__ QueryTile query_tile(const KernelArgs<T>& a, int head) {
  QueryTile t;
  t.block = a.tiles[2 * blockIdx.x];
  const int row0 = a.tiles[2 * blockIdx.x + 1];
  const int32_t* block = a.table + t.block * kBsBlockFields;
  t.start = block[kBsQueryStart] + row0;
  t.rows = min(kTile, block[kBsQueryLen] - row0);
  t.pos0 = block[kBsQueryPos0] + row0;
  const int64_t route = static_cast<int64_t>(head) * a.blocks + t.block;
  t.list = a.selected + route * a.capacity;
  t.listed = a.count[route];
  return t;
}

// Starts copying the key tile at `offset` of the tile's listed block `slot` (key/value
// head g) into the shared tiles k_tile, v_tile ([kTile][D + kPad]); rows past the block's
// end become zeros.
template <typename T, int D>
__device__ __forceinline__ void load_key_tile_async(const KernelArgs<T>& a, const QueryTile& t, int slot,
                                                    int offset, int g, T* k_tile, T* v_tile) {
  const int64_t kv_stride = static_cast<int64_t>(a.kv_heads) * D;
  const int32_t* block = a.table + t.list[slot] * kBsBlockFields;
  const int rows = min(kTile, block[kBsKeyLen] - offset);
  const int64_t first = static_cast<int64_t>(block[kBsKeyStart] + offset) * kv_stride + g * D;
  load_rows_async<kTile, D>(k_tile, a.k + first, kv_stride, rows);
  load_rows_async<kTile, D>(v_tile, a.v + first, kv_stride, rows);
}

// Whether the key at in-block offset `key` is seen by the tile's row `row`.
__device__ __forceinline__ bool key_visible(int key, int keys, bool diagonal, int query_pos) {
  return key < keys && (!diagonal || key <= query_pos);
}

// grid (query tiles, Hq). out and lse of the tile's rows.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) block_sparse_forward_kernel(const KernelArgs<T> a) {
  constexpr int kLd = D + kPad;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* s_q = reinterpret_cast<T*>(shared_bytes);
  T* s_k = s_q + kTile * kLd;      // [2][kTile][kLd]
  T* s_v = s_k + 2 * kTile * kLd;  // [2][kTile][kLd]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, g = h / a.group;
  const QueryTile t = query_tile(a, h);
  const int64_t q_stride = static_cast<int64_t>(a.q_heads) * D;
  const int last_pos = t.pos0 + t.rows - 1;

  const auto issue_keys = [&](int stage, int slot, int offset) {
    load_key_tile_async<T, D>(a, t, slot, offset, g, s_k + stage * kTile * kLd, s_v + stage * kTile * kLd);
  };

  load_rows_async<kTile, D>(s_q, a.q + static_cast<int64_t>(t.start) * q_stride + h * D, q_stride, t.rows);
  copy_async_commit();
  int slot = 0, offset = 0;
  bool have = seek_key_tile(slot, offset, t.list, t.listed, a.table, t.block, a.causal, last_pos);
  if (have) issue_keys(0, slot, offset);
  copy_async_commit();
  copy_async_wait<1>();  // the queries (the keys may still be in flight)
  __syncthreads();
  uint32_t q_frag[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk) load_a<kLd>(q_frag[kk], s_q, warp * 16, kk * 16, lane);

  float acc[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) acc[dn][0] = acc[dn][1] = acc[dn][2] = acc[dn][3] = 0.f;
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};
  int stage = 0;
  while (have) {
    int next_slot = slot, next_offset = offset + kTile;
    const bool have_next =
        seek_key_tile(next_slot, next_offset, t.list, t.listed, a.table, t.block, a.causal, last_pos);
    if (have_next) issue_keys(stage ^ 1, next_slot, next_offset);
    copy_async_commit();
    copy_async_wait<1>();
    __syncthreads();

    const int j = t.list[slot];
    const int keys = a.table[j * kBsBlockFields + kBsKeyLen];
    const bool diagonal = a.causal && j == t.block;
    float s[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    product_registers_rows<kTile / 8, D, kLd>(s, q_frag, s_k + stage * kTile * kLd, lane);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = warp * 16 + (lane >> 2) + (e >> 1) * 8;
        const int key = offset + n * 8 + (lane & 3) * 2 + (e & 1);
        s[n][e] = key_visible(key, keys, diagonal, t.pos0 + row) ? s[n][e] * a.scale_log2 : -INFINITY;
      }
    }
    // Online softmax in base 2 over the thread's two rows; a row's four threads (one
    // quad) hold its 64 columns, so its maximum is completed by two shuffles.
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float tile_max = row_max[half];
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) tile_max = fmaxf(tile_max, fmaxf(s[n][2 * half], s[n][2 * half + 1]));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      const float base = tile_max == -INFINITY ? 0.f : tile_max;  // a row with nothing seen yet
      const float rescale = exp2f(row_max[half] - base);
      row_max[half] = tile_max;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < kTile / 8; ++n) {
        s[n][2 * half] = exp2f(s[n][2 * half] - base);
        s[n][2 * half + 1] = exp2f(s[n][2 * half + 1] - base);
        sum += s[n][2 * half] + s[n][2 * half + 1];
      }
      row_sum[half] = row_sum[half] * rescale + sum;
#pragma unroll
      for (int dn = 0; dn < D / 8; ++dn) {
        acc[dn][2 * half] *= rescale;
        acc[dn][2 * half + 1] *= rescale;
      }
    }
    product_fragments_columns<D / 8, kTile / 8, kLd>(acc, s, s_v + stage * kTile * kLd, lane);
    __syncthreads();  // the next iteration refills this stage
    stage ^= 1;
    slot = next_slot;
    offset = next_offset;
    have = have_next;
  }
  copy_async_wait<0>();

  T* out = a.out + static_cast<int64_t>(t.start) * q_stride + h * D;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    float sum = row_sum[half];
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    sum += __shfl_xor_sync(0xffffffffu, sum, 2);
    const int row = warp * 16 + (lane >> 2) + half * 8;
    const float inverse = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      acc[dn][2 * half] *= inverse;
      acc[dn][2 * half + 1] *= inverse;
    }
    if (row < t.rows && (lane & 3) == 0) {
      a.lse[static_cast<int64_t>(t.start + row) * a.q_heads + h] =
          sum > 0.f ? (row_max[half] + log2f(sum)) * kLn2 : -INFINITY;
    }
  }
  store_rows<D>(acc, 1.f, out, q_stride, warp * 16, t.rows, lane);
}

// delta[r] = sum_d dO[r][d] * O[r][d] over rows r of [Tq * Hq, D], one thread per row.
template <typename T, int D>
__global__ void block_sparse_delta_kernel(const T* grad_out, const T* out, float* delta, int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const uint4* go = reinterpret_cast<const uint4*>(grad_out + r * D);
  const uint4* o = reinterpret_cast<const uint4*>(out + r * D);
  float sum = 0.f;
#pragma unroll
  for (int c = 0; c < D / 8; ++c) {
    const uint4 x = go[c], y = o[c];
    const T* xs = reinterpret_cast<const T*>(&x);
    const T* ys = reinterpret_cast<const T*>(&y);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum += MatrixOps<T>::to_float(xs[i]) * MatrixOps<T>::to_float(ys[i]);
  }
  delta[r] = sum;
}

// grid (query tiles, Hq). dQ of the tile's rows, over the same key tiles as the forward:
// P = exp(S scale - lse), dP = dO V^T, dS = P (dP - delta), dQ = scale dS K.
template <typename T, int D>
__global__ void __launch_bounds__(kThreads) block_sparse_dq_kernel(const KernelArgs<T> a) {
  constexpr int kLd = D + kPad;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* s_q = reinterpret_cast<T*>(shared_bytes);
  T* s_do = s_q + kTile * kLd;
  T* s_k = s_do + kTile * kLd;     // [2][kTile][kLd]
  T* s_v = s_k + 2 * kTile * kLd;  // [2][kTile][kLd]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, g = h / a.group;
  const QueryTile t = query_tile(a, h);
  const int64_t q_stride = static_cast<int64_t>(a.q_heads) * D;
  const int last_pos = t.pos0 + t.rows - 1;

  const auto issue_keys = [&](int stage, int slot, int offset) {
    load_key_tile_async<T, D>(a, t, slot, offset, g, s_k + stage * kTile * kLd, s_v + stage * kTile * kLd);
  };

  const int64_t first_query = static_cast<int64_t>(t.start) * q_stride + h * D;
  load_rows_async<kTile, D>(s_q, a.q + first_query, q_stride, t.rows);
  load_rows_async<kTile, D>(s_do, a.grad_out + first_query, q_stride, t.rows);
  copy_async_commit();
  int slot = 0, offset = 0;
  bool have = seek_key_tile(slot, offset, t.list, t.listed, a.table, t.block, a.causal, last_pos);
  if (have) issue_keys(0, slot, offset);
  copy_async_commit();

  float lse_log2[2], delta[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = warp * 16 + (lane >> 2) + half * 8;
    const int64_t index = static_cast<int64_t>(t.start + row) * a.q_heads + h;
    lse_log2[half] = row < t.rows ? a.lse[index] * kLog2e : 0.f;
    delta[half] = row < t.rows ? a.delta[index] : 0.f;
  }
  float dq[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) dq[dn][0] = dq[dn][1] = dq[dn][2] = dq[dn][3] = 0.f;
  int stage = 0;
  while (have) {
    int next_slot = slot, next_offset = offset + kTile;
    const bool have_next =
        seek_key_tile(next_slot, next_offset, t.list, t.listed, a.table, t.block, a.causal, last_pos);
    if (have_next) issue_keys(stage ^ 1, next_slot, next_offset);
    copy_async_commit();
    copy_async_wait<1>();
    __syncthreads();

    const int j = t.list[slot];
    const int keys = a.table[j * kBsBlockFields + kBsKeyLen];
    const bool diagonal = a.causal && j == t.block;
    const T* k_tile = s_k + stage * kTile * kLd;
    float s[kTile / 8][4], dp[kTile / 8][4];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
    }
    product_rows_rows<kTile / 8, D, kLd, kLd>(s, s_q, warp * 16, k_tile, lane);
    product_rows_rows<kTile / 8, D, kLd, kLd>(dp, s_do, warp * 16, s_v + stage * kTile * kLd, lane);
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = warp * 16 + (lane >> 2) + (e >> 1) * 8;
        const int key = offset + n * 8 + (lane & 3) * 2 + (e & 1);
        const bool seen = row < t.rows && key_visible(key, keys, diagonal, t.pos0 + row);
        const float p = seen ? exp2f(s[n][e] * a.scale_log2 - lse_log2[e >> 1]) : 0.f;
        s[n][e] = p * (dp[n][e] - delta[e >> 1]);  // dS
      }
    }
    product_fragments_columns<D / 8, kTile / 8, kLd>(dq, s, k_tile, lane);
    __syncthreads();
    stage ^= 1;
    slot = next_slot;
    offset = next_offset;
    have = have_next;
  }
  copy_async_wait<0>();
  store_rows<D>(dq, a.scale, a.dq + first_query, q_stride, warp * 16, t.rows, lane);
}

// The next (head of the thread block's heads, inverted-list entry, query row) at or after
// the cursor whose query sub-tile of kQ rows sees some key of the key tile. entry < 0: the
// head's list from its start.
template <int kQ>
struct QueryCursor {
  int head_in_group = 0, entry = -1, row0 = 0;

  template <typename T>
  __device__ __forceinline__ bool seek(const KernelArgs<T>& a, int first_head, int key_block, int key_offset) {
    for (; head_in_group < a.heads_per_block; ++head_in_group, entry = -1, row0 = 0) {
      const int route = (first_head + head_in_group) * a.blocks + key_block;
      if (entry < 0) entry = a.inverse_offsets[route];
      for (; entry < a.inverse_offsets[route + 1]; ++entry, row0 = 0) {
        const int32_t* block = a.table + a.inverse_blocks[entry] * kBsBlockFields;
        const bool diagonal = a.causal && a.inverse_blocks[entry] == key_block;
        for (; row0 < block[kBsQueryLen]; row0 += kQ) {
          const int last_row = min(row0 + kQ, block[kBsQueryLen]) - 1;
          if (diagonal && block[kBsQueryPos0] + last_row < key_offset) continue;  // all before the keys
          return true;
        }
      }
    }
    return false;
  }
};

// grid (key tiles, Hq / heads_per_block). dK and dV of the tile's keys from its query
// heads (the whole KV group, or one head whose share is summed later): every query block
// that listed the key block (the inverted list, ascending), in sub-tiles of kQ queries. Per sub-tile: S^T = K Q^T, P^T, dP^T = V dO^T, dS^T = P^T (dP^T - delta),
// dV += P^T dO, dK += scale dS^T Q.
template <typename T, int D, int kQ>
__global__ void __launch_bounds__(kThreads) block_sparse_dkdv_kernel(const KernelArgs<T> a) {
  constexpr int kLd = D + kPad;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* s_k = reinterpret_cast<T*>(shared_bytes);
  T* s_v = s_k + kTile * kLd;
  T* s_q = s_v + kTile * kLd;      // [2][kQ][kLd]
  T* s_do = s_q + 2 * kQ * kLd;    // [2][kQ][kLd]
  float* s_lse = reinterpret_cast<float*>(s_do + 2 * kQ * kLd);  // [2][kQ]
  float* s_delta = s_lse + 2 * kQ;                                // [2][kQ]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int key_block = a.tiles[2 * blockIdx.x], key_offset = a.tiles[2 * blockIdx.x + 1];
  const int first_head = blockIdx.y * a.heads_per_block, g = first_head / a.group;
  const int32_t* kb = a.table + key_block * kBsBlockFields;
  const int key_rows = min(kTile, kb[kBsKeyLen] - key_offset);
  const int64_t q_stride = static_cast<int64_t>(a.q_heads) * D;
  const int64_t kv_stride = static_cast<int64_t>(a.kv_heads) * D;
  const int64_t first_key = static_cast<int64_t>(kb[kBsKeyStart] + key_offset) * kv_stride + g * D;

  const auto issue_queries = [&](int stage, const QueryCursor<kQ>& c) {
    const int h = first_head + c.head_in_group;
    const int32_t* block = a.table + a.inverse_blocks[c.entry] * kBsBlockFields;
    const int rows = min(kQ, block[kBsQueryLen] - c.row0);
    const int64_t first_row = block[kBsQueryStart] + c.row0;
    const int64_t first = first_row * q_stride + h * D;
    load_rows_async<kQ, D>(s_q + stage * kQ * kLd, a.q + first, q_stride, rows);
    load_rows_async<kQ, D>(s_do + stage * kQ * kLd, a.grad_out + first, q_stride, rows);
    for (int r = threadIdx.x; r < kQ; r += kThreads) {
      const int64_t index = (first_row + min(r, rows - 1)) * a.q_heads + h;
      copy_async_4(s_lse + stage * kQ + r, a.lse + index, r < rows);
      copy_async_4(s_delta + stage * kQ + r, a.delta + index, r < rows);
    }
  };

  load_rows_async<kTile, D>(s_k, a.k + first_key, kv_stride, key_rows);
  load_rows_async<kTile, D>(s_v, a.v + first_key, kv_stride, key_rows);
  copy_async_commit();
  QueryCursor<kQ> cursor;
  bool have = cursor.seek(a, first_head, key_block, key_offset);
  if (have) issue_queries(0, cursor);
  copy_async_commit();

  float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
    dk[dn][0] = dk[dn][1] = dk[dn][2] = dk[dn][3] = 0.f;
    dv[dn][0] = dv[dn][1] = dv[dn][2] = dv[dn][3] = 0.f;
  }
  int stage = 0;
  while (have) {
    QueryCursor<kQ> next = cursor;
    next.row0 += kQ;
    const bool have_next = next.seek(a, first_head, key_block, key_offset);
    if (have_next) issue_queries(stage ^ 1, next);
    copy_async_commit();
    copy_async_wait<1>();
    __syncthreads();

    const int query_block = a.inverse_blocks[cursor.entry];
    const int32_t* qb = a.table + query_block * kBsBlockFields;
    const int query_rows = min(kQ, qb[kBsQueryLen] - cursor.row0);
    const int pos0 = qb[kBsQueryPos0] + cursor.row0;
    const bool diagonal = a.causal && query_block == key_block;
    const T* q_tile = s_q + stage * kQ * kLd;
    const T* do_tile = s_do + stage * kQ * kLd;
    const float* lse = s_lse + stage * kQ;
    const float* delta = s_delta + stage * kQ;
    float s[kQ / 8][4], dp[kQ / 8][4];
#pragma unroll
    for (int n = 0; n < kQ / 8; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
      dp[n][0] = dp[n][1] = dp[n][2] = dp[n][3] = 0.f;
    }
    product_rows_rows<kQ / 8, D, kLd, kLd>(s, s_k, warp * 16, q_tile, lane);
    product_rows_rows<kQ / 8, D, kLd, kLd>(dp, s_v, warp * 16, do_tile, lane);
#pragma unroll
    for (int n = 0; n < kQ / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = warp * 16 + (lane >> 2) + (e >> 1) * 8;
        const int query = n * 8 + (lane & 3) * 2 + (e & 1);
        const bool seen = query < query_rows && key < key_rows &&
                          (!diagonal || key_offset + key <= pos0 + query);
        const float p = seen ? exp2f(s[n][e] * a.scale_log2 - lse[query] * kLog2e) : 0.f;
        s[n][e] = p;                             // P^T
        dp[n][e] = p * (dp[n][e] - delta[query]);  // dS^T
      }
    }
    product_fragments_columns<D / 8, kQ / 8, kLd>(dv, s, do_tile, lane);
    product_fragments_columns<D / 8, kQ / 8, kLd>(dk, dp, q_tile, lane);
    __syncthreads();
    stage ^= 1;
    cursor = next;
    have = have_next;
  }
  copy_async_wait<0>();
  if (a.heads_per_block == a.group) {
    store_rows<D>(dk, a.scale, a.dk + first_key, kv_stride, warp * 16, key_rows, lane);
    store_rows<D>(dv, 1.f, a.dv + first_key, kv_stride, warp * 16, key_rows, lane);
  } else {
    const int64_t first_partial = static_cast<int64_t>(kb[kBsKeyStart] + key_offset) * q_stride + first_head * D;
    store_rows_float<D>(dk, a.scale, a.dk_partial + first_partial, q_stride, warp * 16, key_rows, lane);
    store_rows_float<D>(dv, 1.f, a.dv_partial + first_partial, q_stride, warp * 16, key_rows, lane);
  }
}

// ---- launchers ----------------------------------------------------------------------

template <typename T>
KernelArgs<T> kernel_args(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const BlockSparseTables& tables) {
  KernelArgs<T> a{};
  a.q = reinterpret_cast<const T*>(q.const_data_ptr());
  a.k = reinterpret_cast<const T*>(k.const_data_ptr());
  a.v = reinterpret_cast<const T*>(v.const_data_ptr());
  a.table = tables.block_table.const_data_ptr<int32_t>();
  a.selected = tables.selected.const_data_ptr<int32_t>();
  a.count = tables.selected_count.const_data_ptr<int32_t>();
  a.blocks = static_cast<int>(tables.selected.size(1));
  a.capacity = static_cast<int>(tables.selected.size(2));
  a.q_heads = static_cast<int>(q.size(1));
  a.kv_heads = static_cast<int>(k.size(1));
  a.group = a.q_heads / a.kv_heads;
  a.scale = static_cast<float>(tables.scale);
  a.scale_log2 = static_cast<float>(tables.scale) * kLog2e;
  a.causal = tables.causal;
  return a;
}

// Launches `kernel` on (tiles, heads) thread blocks with `shared_bytes` of dynamic shared
// memory (opted into beyond the default 48 KiB).
template <typename T>
void launch_grid(void (*kernel)(KernelArgs<T>), const KernelArgs<T>& args, int64_t tiles, int64_t heads,
                 size_t shared_bytes) {
  if (tiles == 0 || heads == 0) return;
  TORCH_CHECK(tiles <= 0x7fffffff && heads <= 65535, "block-sparse attention: ", tiles, " tiles x ",
              heads, " heads exceed the launch grid");
  const auto* properties = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(shared_bytes <= properties->sharedMemPerBlockOptin, "block-sparse attention needs ",
              shared_bytes, " bytes of shared memory per block; this device allows ",
              properties->sharedMemPerBlockOptin);
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(shared_bytes)));
  const dim3 grid(static_cast<unsigned int>(tiles), static_cast<unsigned int>(heads));
  kernel<<<grid, kThreads, shared_bytes, at::cuda::getCurrentCUDAStream()>>>(args);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int D>
void forward_typed(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const BlockSparseTables& tables, at::Tensor& out, at::Tensor& lse) {
  KernelArgs<T> a = kernel_args<T>(q, k, v, tables);
  a.tiles = tables.query_tiles.const_data_ptr<int32_t>();
  a.out = reinterpret_cast<T*>(out.mutable_data_ptr());
  a.lse = lse.mutable_data_ptr<float>();
  const size_t shared = static_cast<size_t>(5 * kTile * (D + kPad)) * sizeof(T);
  launch_grid<T>(block_sparse_forward_kernel<T, D>, a, tables.query_tiles.size(0), q.size(1), shared);
}

template <typename T, int D>
void backward_typed(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                    const BlockSparseTables& tables, const BlockSparseInverse& inverse,
                    at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  const int64_t rows = q.size(0) * q.size(1);
  at::Tensor delta = at::empty({q.size(0), q.size(1)}, q.options().dtype(at::kFloat));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (rows > 0) {
    constexpr int kDeltaThreads = 256;
    const int64_t grid = (rows + kDeltaThreads - 1) / kDeltaThreads;
    block_sparse_delta_kernel<T, D><<<static_cast<unsigned int>(grid), kDeltaThreads, 0, stream>>>(
        reinterpret_cast<const T*>(grad_out.const_data_ptr()), reinterpret_cast<const T*>(out.const_data_ptr()),
        delta.mutable_data_ptr<float>(), rows);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  KernelArgs<T> a = kernel_args<T>(q, k, v, tables);
  a.grad_out = reinterpret_cast<const T*>(grad_out.const_data_ptr());
  a.lse = const_cast<float*>(lse.const_data_ptr<float>());
  a.delta = delta.const_data_ptr<float>();
  a.dq = reinterpret_cast<T*>(dq.mutable_data_ptr());
  a.dk = reinterpret_cast<T*>(dk.mutable_data_ptr());
  a.dv = reinterpret_cast<T*>(dv.mutable_data_ptr());
  a.inverse_offsets = inverse.offsets.const_data_ptr<int32_t>();
  a.inverse_blocks = inverse.blocks.const_data_ptr<int32_t>();

  a.tiles = tables.query_tiles.const_data_ptr<int32_t>();
  const size_t dq_shared = static_cast<size_t>(6 * kTile * (D + kPad)) * sizeof(T);
  launch_grid<T>(block_sparse_dq_kernel<T, D>, a, tables.query_tiles.size(0), q.size(1), dq_shared);

  // Query sub-tiles of 32 rows at head_dim 128 keep dK and dV (2 x 64 floats per
  // thread) and the two 16 x kQ score tiles within the register file.
  constexpr int kQ = D >= 128 ? 32 : 64;
  a.tiles = tables.key_tiles.const_data_ptr<int32_t>();
  const size_t dkdv_shared = static_cast<size_t>((2 * kTile + 4 * kQ) * (D + kPad)) * sizeof(T) +
                             static_cast<size_t>(4 * kQ) * sizeof(float);
  // A thread block per (key tile, query head) when several query heads share a KV head:
  // a group's heads in one thread block would run their lists one after another, with a
  // grid of only (key tiles x Hkv) thread blocks (measured side by side on an H100, 14/2
  // heads: the per-head layout 1.09-1.18x faster in fwd+bwd at 16K-64K tokens, equal
  // within 2 % at 64K-128K with blocks of 256). The shares are summed afterwards in head order (a
  // fixed-order reduction: the result repeats bit for bit).
  const int64_t group = q.size(1) / k.size(1);
  if (group == 1) {
    a.heads_per_block = static_cast<int>(group);
    launch_grid<T>(block_sparse_dkdv_kernel<T, D, kQ>, a, tables.key_tiles.size(0), k.size(1), dkdv_shared);
    return;
  }
  at::Tensor dk_partial = at::empty({k.size(0), q.size(1), D}, q.options().dtype(at::kFloat));
  at::Tensor dv_partial = at::empty_like(dk_partial);
  a.heads_per_block = 1;
  a.dk_partial = dk_partial.mutable_data_ptr<float>();
  a.dv_partial = dv_partial.mutable_data_ptr<float>();
  launch_grid<T>(block_sparse_dkdv_kernel<T, D, kQ>, a, tables.key_tiles.size(0), q.size(1), dkdv_shared);
  const std::vector<int64_t> grouped{k.size(0), k.size(1), group, D};
  dk.copy_(dk_partial.view(grouped).sum(2));
  dv.copy_(dv_partial.view(grouped).sum(2));
}

void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const BlockSparseTables& tables) {
  TORCH_CHECK(q.is_cuda() && k.device() == q.device() && v.device() == q.device(),
              "block-sparse attention: q, k, v must be on one CUDA device");
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && k.sizes() == v.sizes() && q.size(2) == k.size(2),
              "block-sparse attention: q [Tq, Hq, D], k and v [Tk, Hkv, D]; got ", q.sizes(), ", ",
              k.sizes(), ", ", v.sizes());
  TORCH_CHECK(block_sparse_cuda_supports(q.scalar_type(), q.size(2)),
              "block-sparse attention runs bfloat16 / float16 with head_dim 64 or 128; got ",
              q.scalar_type(), " head_dim ", q.size(2));
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "block-sparse attention: q, k, v must share one dtype");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "block-sparse attention: ", q.size(1),
              " query heads are not a multiple of ", k.size(1), " key/value heads");
  TORCH_CHECK(q.size(0) == tables.num_queries && k.size(0) == tables.num_keys,
              "block-sparse attention: the tables index ", tables.num_queries, " queries and ",
              tables.num_keys, " keys, got ", q.size(0), " and ", k.size(0));
  TORCH_CHECK(tables.selected.size(0) == q.size(1) && tables.selected.device() == q.device(),
              "block-sparse attention: the routing has ", tables.selected.size(0),
              " heads on ", tables.selected.device(), ", q has ", q.size(1), " on ", q.device());
  const at::Tensor* inputs[] = {&q, &k, &v};
  for (const at::Tensor* x : inputs) {
    TORCH_CHECK(x->is_contiguous() && reinterpret_cast<uintptr_t>(x->const_data_ptr()) % 16 == 0,
                "block-sparse attention: q, k, v must be contiguous and 16-byte aligned");
  }
}

}  // namespace

bool block_sparse_cuda_supports(at::ScalarType dtype, int64_t head_dim) {
  return (dtype == at::kBFloat16 || dtype == at::kHalf) && (head_dim == 64 || head_dim == 128);
}

void block_sparse_forward_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                               const BlockSparseTables& tables, at::Tensor& out, at::Tensor& lse) {
  check_inputs(q, k, v, tables);
  TORCH_CHECK(out.sizes() == q.sizes() && out.scalar_type() == q.scalar_type() && out.is_contiguous(),
              "block-sparse attention: out must be contiguous like q");
  TORCH_CHECK(lse.dim() == 2 && lse.size(0) == q.size(0) && lse.size(1) == q.size(1) &&
                  lse.scalar_type() == at::kFloat && lse.is_contiguous(),
              "block-sparse attention: lse must be float32 [Tq, Hq]");
  const c10::cuda::CUDAGuard guard(q.device());
  const bool bf16 = q.scalar_type() == at::kBFloat16;
  if (q.size(2) == 64) {
    bf16 ? forward_typed<__nv_bfloat16, 64>(q, k, v, tables, out, lse)
         : forward_typed<__half, 64>(q, k, v, tables, out, lse);
  } else {
    bf16 ? forward_typed<__nv_bfloat16, 128>(q, k, v, tables, out, lse)
         : forward_typed<__half, 128>(q, k, v, tables, out, lse);
  }
}

void block_sparse_backward_cuda(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                const BlockSparseTables& tables, const BlockSparseInverse& inverse,
                                at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  check_inputs(q, k, v, tables);
  const at::Tensor* like_q[] = {&grad_out, &out, &dq};
  for (const at::Tensor* x : like_q) {
    TORCH_CHECK(x->sizes() == q.sizes() && x->scalar_type() == q.scalar_type() && x->is_contiguous(),
                "block-sparse attention backward: grad_out, out and dq must be contiguous like q");
  }
  TORCH_CHECK(dk.sizes() == k.sizes() && dv.sizes() == v.sizes() && dk.is_contiguous() &&
                  dv.is_contiguous() && dk.scalar_type() == k.scalar_type() &&
                  dv.scalar_type() == v.scalar_type(),
              "block-sparse attention backward: dk, dv must be contiguous like k, v");
  TORCH_CHECK(inverse.offsets.numel() == tables.selected.size(0) * tables.selected.size(1) + 1,
              "block-sparse attention backward: the inverted lists belong to another routing");
  const c10::cuda::CUDAGuard guard(q.device());
  const bool bf16 = q.scalar_type() == at::kBFloat16;
  if (q.size(2) == 64) {
    bf16 ? backward_typed<__nv_bfloat16, 64>(grad_out, q, k, v, out, lse, tables, inverse, dq, dk, dv)
         : backward_typed<__half, 64>(grad_out, q, k, v, out, lse, tables, inverse, dq, dk, dv);
  } else {
    bf16 ? backward_typed<__nv_bfloat16, 128>(grad_out, q, k, v, out, lse, tables, inverse, dq, dk, dv)
         : backward_typed<__half, 128>(grad_out, q, k, v, out, lse, tables, inverse, dq, dk, dv);
  }
}

}  // namespace sb
