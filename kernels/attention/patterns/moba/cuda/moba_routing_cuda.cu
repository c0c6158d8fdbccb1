// MoBA routing on CUDA in four layers (device functions, kernels, launchers, entry):
//   moba_block_means_kernel   one thread block per (block, head): float64 means
//   moba_route_rows_kernel    one thread block per (query head, query block): gate
//                             scores, softmax statistics, bitonic sort of the earlier
//                             blocks by (score desc, block index asc) in shared memory
//   moba_select_kernel        the diagonal plus the first (k - 1) sorted blocks, written
//                             ascending; the row's coverage
// The DST floor between the last two uses ATen reductions on the sorted weights.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

#include "kernels/attention/patterns/moba/cuda/moba_routing_cuda.h"

namespace sb {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;

// ---- device functions ---------------------------------------------------------------

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = fmax(v, __shfl_xor_sync(0xffffffffu, v, offset));
  }
  return v;
}

// Reduction over the thread block (blockDim.x == kThreads), returned to every thread.
template <bool kMax>
__device__ double block_reduce(double v) {
  __shared__ double partial[kThreads / kWarp];
  __shared__ double total;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = kMax ? warp_max(v) : warp_sum(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / kWarp ? partial[lane] : (kMax ? -INFINITY : 0.0);
    v = kMax ? warp_max(v) : warp_sum(v);
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

// The tie rule: a higher score first; equal scores -> the lower block index first.
__device__ __forceinline__ bool ranks_before(double score_a, int32_t id_a, double score_b,
                                             int32_t id_b) {
  return score_a > score_b || (score_a == score_b && id_a < id_b);
}

// ---- kernels ------------------------------------------------------------------------

template <typename scalar_t>
__global__ void moba_block_means_kernel(const scalar_t* x, const int64_t* table, int64_t heads,
                                        int64_t dim, int64_t blocks, int start_field,
                                        int len_field, double* means) {
  const int64_t b = blockIdx.x, h = blockIdx.y;
  const int64_t start = table[b * kBlockFields + start_field];
  const int64_t len = table[b * kBlockFields + len_field];
  double* mean = means + (h * blocks + b) * dim;
  for (int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    double sum = 0.0;
    for (int64_t t = start; t < start + len; ++t) sum += static_cast<double>(x[(t * heads + h) * dim + d]);
    mean[d] = len > 0 ? sum / static_cast<double>(len) : 0.0;
  }
}

struct RouteRowsParams {
  const double* query_means;  // [Hq, NB, D]
  const double* key_means;    // [Hkv, NB, D]
  const int64_t* table;       // [NB, kBlockFields]
  const int64_t* eligible;    // [NB, 2]: first, end (global block ids)
  int64_t blocks, group, dim;
  int64_t keep;    // sorted entries kept per row
  int64_t padded;  // power of two >= the most eligible blocks of any row
  int32_t* sorted_ids;   // [rows, keep], -1 padding
  double* sorted_pi;     // [rows, keep], 0 padding
  double* pi_diagonal;   // [rows]
  int32_t* candidates;   // [rows]: eligible blocks other than the diagonal
};

__global__ void moba_route_rows_kernel(RouteRowsParams p) {
  extern __shared__ double shared[];
  double* score = shared;                                        // [padded]
  int32_t* id = reinterpret_cast<int32_t*>(shared + p.padded);  // [padded]
  const int64_t row = blockIdx.x;
  const int64_t h = row / p.blocks, b = row % p.blocks, g = h / p.group;
  if (p.table[b * kBlockFields + kBlockQueryLen] == 0) {
    for (int64_t i = threadIdx.x; i < p.keep; i += blockDim.x) {
      p.sorted_ids[row * p.keep + i] = -1;
      p.sorted_pi[row * p.keep + i] = 0.0;
    }
    if (threadIdx.x == 0) {
      p.pi_diagonal[row] = 0.0;
      p.candidates[row] = 0;
    }
    return;
  }
  const int64_t first = p.eligible[2 * b], n = p.eligible[2 * b + 1] - first;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const double* qm = p.query_means + (h * p.blocks + b) * p.dim;
  for (int64_t j = warp; j < n; j += blockDim.x / kWarp) {
    const double* km = p.key_means + (g * p.blocks + first + j) * p.dim;
    double dot = 0.0;
    for (int64_t d = lane; d < p.dim; d += kWarp) dot += qm[d] * km[d];
    dot = warp_sum(dot);
    if (lane == 0) score[j] = dot;
  }
  __syncthreads();
  double local = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) local = fmax(local, score[j]);
  const double max_score = block_reduce<true>(local);
  local = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) local += exp(score[j] - max_score);
  const double denominator = block_reduce<false>(local);
  const double diagonal_score = score[b - first];
  __syncthreads();

  // Candidates: the diagonal and the padding become sentinels that sort last.
  for (int64_t i = threadIdx.x; i < p.padded; i += blockDim.x) {
    if (i < n && first + i != b) {
      id[i] = static_cast<int32_t>(first + i);
    } else {
      score[i] = -INFINITY;
      id[i] = INT_MAX;
    }
  }
  __syncthreads();
  for (int64_t size = 2; size <= p.padded; size <<= 1) {
    for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (int64_t i = threadIdx.x; i < p.padded; i += blockDim.x) {
        const int64_t partner = i ^ stride;
        if (partner <= i) continue;
        const bool forward = (i & size) == 0;
        const bool swap = forward ? ranks_before(score[partner], id[partner], score[i], id[i])
                                  : ranks_before(score[i], id[i], score[partner], id[partner]);
        if (swap) {
          const double s = score[i];
          score[i] = score[partner];
          score[partner] = s;
          const int32_t t = id[i];
          id[i] = id[partner];
          id[partner] = t;
        }
      }
      __syncthreads();
    }
  }
  for (int64_t i = threadIdx.x; i < p.keep; i += blockDim.x) {
    const bool real = i < n - 1;
    p.sorted_ids[row * p.keep + i] = real ? id[i] : -1;
    p.sorted_pi[row * p.keep + i] = real ? exp(score[i] - max_score) / denominator : 0.0;
  }
  if (threadIdx.x == 0) {
    p.pi_diagonal[row] = exp(diagonal_score - max_score) / denominator;
    p.candidates[row] = static_cast<int32_t>(n - 1);
  }
}

struct SelectParams {
  const int32_t* sorted_ids;   // [rows, keep]
  const double* sorted_pi;     // [rows, keep]
  const double* pi_diagonal;   // [rows]
  const int32_t* candidates;   // [rows]
  const int64_t* table;        // [NB, kBlockFields]
  const int64_t* eligible;     // [NB, 2]
  const int64_t* block_budget; // [NB]: the effective k of the block's sequence
  int64_t blocks, keep, capacity;
  int32_t* selected;      // [rows, capacity]
  int32_t* count;         // [rows]
  double* row_coverage;   // [rows]
};

__global__ void moba_select_kernel(SelectParams p) {
  extern __shared__ unsigned char chosen[];  // [eligible blocks of the row]
  const int64_t row = blockIdx.x, b = row % p.blocks;
  int32_t* out = p.selected + row * p.capacity;
  if (p.table[b * kBlockFields + kBlockQueryLen] == 0) {
    for (int64_t i = threadIdx.x; i < p.capacity; i += blockDim.x) out[i] = -1;
    if (threadIdx.x == 0) {
      p.count[row] = 0;
      p.row_coverage[row] = 0.0;
    }
    return;
  }
  const int64_t first = p.eligible[2 * b], n = p.eligible[2 * b + 1] - first;
  const int64_t take = min(p.block_budget[b] - 1, static_cast<int64_t>(p.candidates[row]));
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) chosen[i] = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < take; i += blockDim.x) chosen[p.sorted_ids[row * p.keep + i] - first] = 1;
  if (threadIdx.x == 0) chosen[b - first] = 1;
  __syncthreads();
  if (threadIdx.x < kWarp) {  // warp 0 compacts the chosen blocks in ascending order
    const int lane = threadIdx.x;
    int64_t written = 0;
    for (int64_t base = 0; base < n; base += kWarp) {
      const bool flag = base + lane < n && chosen[base + lane] != 0;
      const unsigned mask = __ballot_sync(0xffffffffu, flag);
      if (flag) out[written + __popc(mask & ((1u << lane) - 1u))] = static_cast<int32_t>(first + base + lane);
      written += __popc(mask);
    }
    for (int64_t i = written + lane; i < p.capacity; i += kWarp) out[i] = -1;
  }
  if (threadIdx.x == 0) {
    double coverage = p.pi_diagonal[row];
    for (int64_t i = 0; i < take; ++i) coverage += p.sorted_pi[row * p.keep + i];
    p.row_coverage[row] = coverage;
    p.count[row] = static_cast<int32_t>(take + 1);
  }
}

// ---- launchers ----------------------------------------------------------------------

at::Tensor block_means(const at::Tensor& x, const at::Tensor& table, int64_t blocks,
                       bool of_queries, cudaStream_t stream) {
  const int64_t heads = x.size(1), dim = x.size(2);
  at::Tensor means = at::empty({heads, blocks, dim}, x.options().dtype(at::kDouble));
  TORCH_CHECK(heads <= 65535, "MoBA CUDA routing: at most 65535 heads");
  const dim3 grid(static_cast<unsigned int>(blocks), static_cast<unsigned int>(heads));
  const int threads = static_cast<int>(std::min<int64_t>(((dim + kWarp - 1) / kWarp) * kWarp, 256));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "moba_block_means", [&] {
    moba_block_means_kernel<scalar_t><<<grid, threads, 0, stream>>>(
        x.const_data_ptr<scalar_t>(), table.const_data_ptr<int64_t>(), heads, dim, blocks,
        of_queries ? kBlockQueryStart : kBlockKeyStart, of_queries ? kBlockQueryLen : kBlockKeyLen,
        means.mutable_data_ptr<double>());
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return means;
}

// Opts a kernel into more dynamic shared memory than the default 48 KiB when needed.
template <typename Kernel>
void reserve_shared_memory(Kernel kernel, size_t bytes, const char* what) {
  const int device = at::cuda::current_device();
  const auto* properties = at::cuda::getDeviceProperties(device);
  TORCH_CHECK(bytes <= properties->sharedMemPerBlockOptin, "MoBA CUDA routing: ", what, " needs ",
              bytes, " bytes of shared memory, the device allows ",
              properties->sharedMemPerBlockOptin,
              " (too many blocks per sequence: use a larger block_size)");
  if (bytes > 48 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  }
}

}  // namespace

// ---- entry point --------------------------------------------------------------------

MobaRouting moba_route_cuda(const at::Tensor& q, const at::Tensor& k, const BlockLayout& layout,
                            const MobaParams& params) {
  TORCH_CHECK(q.is_cuda() && k.device() == q.device(), "moba_route_cuda: q and k must be on one CUDA device");
  const c10::cuda::CUDAGuard guard(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t q_heads = q.size(1), group = q_heads / k.size(1), blocks = layout.num_blocks();
  const int64_t rows = q_heads * blocks, sequences = layout.num_sequences();
  const std::vector<int64_t> budgets = moba_budgets_per_sequence(params, sequences);
  const auto on_device = [&](const std::vector<int64_t>& v) {
    return at::tensor(v, at::kLong).to(q.device());
  };

  // Host facts of the layout: eligible ranges, the sequence of each block.
  std::vector<int64_t> eligible(2 * blocks), block_sequence(blocks);
  std::vector<double> active(rows, 0.0);
  int64_t most_eligible = 0, active_rows = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    eligible[2 * b] = layout.eligible_first(b);
    eligible[2 * b + 1] = layout.eligible_end(b);
    block_sequence[b] = layout.blocks[b].sequence;
    if (layout.blocks[b].query_len == 0) continue;
    most_eligible = std::max(most_eligible, eligible[2 * b + 1] - eligible[2 * b]);
    for (int64_t h = 0; h < q_heads; ++h) active[h * blocks + b] = 1.0;
    active_rows += q_heads;
  }

  MobaRouting routing;
  const int64_t curve_extent = moba_call_coverage_extent(params, most_eligible);
  const int64_t largest_budget = *std::max_element(budgets.begin(), budgets.end());
  const int64_t keep = std::max<int64_t>(
      1, std::min(std::max(largest_budget, curve_extent), std::max<int64_t>(most_eligible, 1)) - 1);
  const auto f64 = q.options().dtype(at::kDouble);
  const auto i32 = q.options().dtype(at::kInt);
  at::Tensor sorted_ids = at::empty({rows, keep}, i32);
  at::Tensor sorted_pi = at::zeros({rows, keep}, f64);
  at::Tensor pi_diagonal = at::zeros({rows}, f64);
  at::Tensor candidates = at::zeros({rows}, i32);
  const at::Tensor table = block_layout_table(layout).to(q.device());
  const at::Tensor eligible_d = on_device(eligible);

  if (rows > 0) {
    const at::Tensor query_means = block_means(q.contiguous(), table, blocks, true, stream);
    const at::Tensor key_means = block_means(k.contiguous(), table, blocks, false, stream);
    int64_t padded = 1;
    while (padded < most_eligible) padded <<= 1;
    const size_t shared = static_cast<size_t>(padded) * (sizeof(double) + sizeof(int32_t));
    reserve_shared_memory(moba_route_rows_kernel, shared, "sorting the eligible blocks");
    RouteRowsParams p{query_means.const_data_ptr<double>(), key_means.const_data_ptr<double>(),
                      table.const_data_ptr<int64_t>(), eligible_d.const_data_ptr<int64_t>(),
                      blocks, group, q.size(2), keep, padded,
                      sorted_ids.mutable_data_ptr<int32_t>(), sorted_pi.mutable_data_ptr<double>(),
                      pi_diagonal.mutable_data_ptr<double>(), candidates.mutable_data_ptr<int32_t>()};
    TORCH_CHECK(rows <= 0x7fffffff, "MoBA CUDA routing: too many rows");
    moba_route_rows_kernel<<<static_cast<unsigned int>(rows), kThreads, shared, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  // C(k) over the call for k = 1 .. curve_extent: the floor's input and the curve.
  std::vector<double> call;
  if (curve_extent > 0 && active_rows > 0) {
    const at::Tensor diagonal = pi_diagonal.unsqueeze(1);  // [rows, 1]
    const at::Tensor prefix =
        at::cat({diagonal, diagonal + sorted_pi.narrow(1, 0, curve_extent - 1).cumsum(1)}, 1);
    const at::Tensor mask = at::tensor(active, at::kDouble).to(q.device()).unsqueeze(1);
    const at::Tensor sums = (prefix * mask).sum(0).cpu();
    call.assign(sums.const_data_ptr<double>(), sums.const_data_ptr<double>() + sums.numel());
    double call_rows = static_cast<double>(active_rows);
    if (params.sum_over_head_shards) {  // under TP: every rank's heads (MobaParams)
      call.push_back(call_rows);
      params.sum_over_head_shards(call);
      call_rows = call.back();
      call.pop_back();
    }
    for (double& c : call) c /= call_rows;
  }
  if (params.coverage_floor_ratio > 0.0) {
    routing.k_floor = moba_coverage_floor_k(call, params.coverage_floor_ratio,
                                            params.coverage_reference_k);
  }
  if (params.coverage_curve_up_to > 0) {
    routing.coverage_curve.assign(call.begin(),
                                  call.begin() + std::min<int64_t>(call.size(), params.coverage_curve_up_to));
  }
  routing.top_k = budgets;
  for (int64_t& kk : routing.top_k) kk = std::max(kk, routing.k_floor);

  int64_t capacity = 1;
  std::vector<int64_t> block_budget(blocks);
  for (int64_t b = 0; b < blocks; ++b) {
    block_budget[b] = routing.top_k[block_sequence[b]];
    if (layout.blocks[b].query_len > 0) {
      capacity = std::max(capacity, std::min(block_budget[b], eligible[2 * b + 1] - eligible[2 * b]));
    }
  }
  routing.selected = at::empty({q_heads, blocks, capacity}, i32);
  routing.selected_count = at::empty({q_heads, blocks}, i32);
  at::Tensor row_coverage = at::empty({rows}, f64);
  if (rows > 0) {
    const at::Tensor block_budget_d = on_device(block_budget);
    const size_t shared = static_cast<size_t>(std::max<int64_t>(most_eligible, 1));
    reserve_shared_memory(moba_select_kernel, shared, "marking the selected blocks");
    SelectParams p{sorted_ids.const_data_ptr<int32_t>(), sorted_pi.const_data_ptr<double>(),
                   pi_diagonal.const_data_ptr<double>(), candidates.const_data_ptr<int32_t>(),
                   table.const_data_ptr<int64_t>(), eligible_d.const_data_ptr<int64_t>(),
                   block_budget_d.const_data_ptr<int64_t>(), blocks, keep, capacity,
                   routing.selected.mutable_data_ptr<int32_t>(),
                   routing.selected_count.mutable_data_ptr<int32_t>(),
                   row_coverage.mutable_data_ptr<double>()};
    moba_select_kernel<<<static_cast<unsigned int>(rows), kThreads, shared, stream>>>(p);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  // Coverage per sequence and over the call, summed on the host in row order (as on the CPU).
  const at::Tensor coverage_host = row_coverage.cpu();
  const double* coverage = coverage_host.const_data_ptr<double>();
  std::vector<double> sequence_sum(sequences, 0.0);
  std::vector<int64_t> sequence_rows(sequences, 0);
  double call_sum = 0.0;
  for (int64_t row = 0; row < rows; ++row) {
    if (active[row] == 0.0) continue;
    const int64_t s = block_sequence[row % blocks];
    sequence_sum[s] += coverage[row];
    sequence_rows[s] += 1;
    call_sum += coverage[row];
  }
  routing.coverage.resize(sequences);
  for (int64_t s = 0; s < sequences; ++s) {
    routing.coverage[s] =
        sequence_rows[s] > 0 ? sequence_sum[s] / static_cast<double>(sequence_rows[s]) : 1.0;
  }
  routing.coverage_mean = active_rows > 0 ? call_sum / static_cast<double>(active_rows) : 1.0;
  return routing;
}

}  // namespace sb
