#include "kernels/attention/vertical_slash/vertical_slash_index_on_device.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "kernels/attention/vertical_slash/vertical_slash_blocks.h"

namespace sb {

VerticalSlashHeadsAttention::VerticalSlashHeadsAttention(const VerticalSlashSequenceInputs& inputs, int64_t first_head,
                                                         int64_t heads, double scale)
    : length_(inputs.length), n_(inputs.n) {
  const at::Tensor queries = inputs.last_queries.narrow(1, first_head, heads).permute({1, 0, 2});  // [H, n, D]
  const auto longs = inputs.keys.options().dtype(at::kLong);
  // Each query head's own key/value head (GQA).
  const at::Tensor kv = at::div(at::arange(first_head, first_head + heads, longs), inputs.group, "floor");
  const at::Tensor keys = inputs.keys.index_select(1, kv).permute({1, 2, 0});  // [H, D, L]
  at::Tensor scores = at::bmm(queries, keys).mul_(scale);                      // [H, n, L]
  const at::Tensor row_pos = at::arange(length_ - n_, length_, longs).unsqueeze(1);
  const at::Tensor col = at::arange(length_, longs).unsqueeze(0);
  scores.masked_fill_((col > row_pos).unsqueeze(0), -std::numeric_limits<double>::infinity());
  attention_ = at::softmax(scores, 2);
}

at::Tensor VerticalSlashHeadsAttention::sums() const {
  const int64_t heads = attention_.size(0);
  const auto longs = attention_.options().dtype(at::kLong);
  // slash[d] = sum over rows i of A[i, p_i - d], p_i = L - n + i: gather each row's
  // diagonal offsets (entries with d > p_i are 0).
  const at::Tensor key = at::arange(length_ - n_, length_, longs).unsqueeze(1) - at::arange(length_, longs).unsqueeze(0);
  const at::Tensor gathered = attention_.gather(2, key.clamp_min(0).unsqueeze(0).expand({heads, n_, length_}));
  const at::Tensor slash = (gathered * (key >= 0).unsqueeze(0)).sum(1);  // [H, L]
  return at::stack({attention_.sum(1), slash}, 1);
}

std::vector<VerticalSlashScores> VerticalSlashHeadsAttention::scores() const {
  const int64_t heads = attention_.size(0);
  const at::Tensor both = sums().to(at::kCPU).contiguous();  // [H, 2, L]
  std::vector<VerticalSlashScores> out(static_cast<size_t>(heads));
  const double* p = both.const_data_ptr<double>();
  for (auto& head : out) {
    head.vertical.assign(p, p + length_);
    head.slash.assign(p + length_, p + 2 * length_);
    p += 2 * length_;
  }
  return out;
}

std::vector<double> VerticalSlashHeadsAttention::coverage(const std::vector<VerticalSlashHeadIndex>& index) const {
  const auto heads = static_cast<int64_t>(index.size());
  TORCH_CHECK(heads == attention_.size(0), "vertical-slash coverage: one index per head expected");
  if (heads == 0) return {};
  // The last queries span query blocks m0 .. m1; per head and block, which keys the block
  // keeps (vertical_slash_block_keys, as a [L] row); each query takes its block's row.
  const int64_t block = index.front().block_size;
  const int64_t m0 = (length_ - n_) / block, m1 = (length_ - 1) / block, blocks = m1 - m0 + 1;
  at::Tensor keep = at::zeros({heads, blocks, length_}, at::kBool);
  bool* k = keep.mutable_data_ptr<bool>();
  std::vector<int64_t> keys;
  for (int64_t h = 0; h < heads; ++h) {
    TORCH_CHECK(index[static_cast<size_t>(h)].block_size == block, "vertical-slash coverage: one block size expected");
    for (int64_t m = m0; m <= m1; ++m) {
      vertical_slash_block_keys(index[static_cast<size_t>(h)], m, length_, keys);
      bool* row = k + (h * blocks + (m - m0)) * length_;
      for (const int64_t j : keys) row[j] = true;
    }
  }
  const auto longs = attention_.options().dtype(at::kLong);
  const at::Tensor row_block = at::div(at::arange(length_ - n_, length_, longs), block, "floor") - m0;  // [n]
  const at::Tensor kept = keep.to(attention_.device()).index_select(1, row_block);  // [H, n, L]
  const at::Tensor mass = (attention_ * kept).sum({1, 2}).to(at::kCPU).contiguous();
  std::vector<double> out(static_cast<size_t>(heads));
  std::memcpy(out.data(), mass.const_data_ptr<double>(), sizeof(double) * out.size());
  for (double& c : out) c /= static_cast<double>(n_);
  return out;
}

namespace {

// One list kind of every head, as VerticalSlashLadder and vertical_slash_select cut it:
// the forced entries 0 .. forced - 1, then the best candidates (descending score, ties by
// position; at most cap entries in all) while the list's mass before them is below
// p x n (top-p), or the first `count` (top-k). scores [H, L] on the device. Returns per
// head the kept entries, ascending.
std::vector<std::vector<int64_t>> cut_lists(const at::Tensor& scores, int64_t forced_entries, int64_t cap,
                                            int64_t count, int64_t n, const VerticalSlashParams& params) {
  const int64_t heads = scores.size(0), length = scores.size(1);
  const int64_t forced = std::min(forced_entries, length);
  const int64_t width = std::clamp<int64_t>(cap - forced, 0, length - forced);
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(heads));
  for (auto& list : out) {
    list.resize(static_cast<size_t>(forced));
    std::iota(list.begin(), list.end(), 0);
  }
  if (width == 0) return out;
  // A stable descending sort keeps equal scores in position order.
  auto [values, order] = at::sort(scores.narrow(1, forced, length - forced), /*stable=*/true, /*dim=*/1,
                                  /*descending=*/true);
  values = values.narrow(1, 0, width);
  order = order.narrow(1, 0, width) + forced;
  at::Tensor taken;
  if (params.budget == VerticalSlashBudget::kTopP) {
    // The list's mass before each candidate: its forced entries, then the candidates ahead.
    const at::Tensor ahead = at::cat({at::zeros({heads, 1}, values.options()), values.narrow(1, 0, width - 1)}, 1);
    const at::Tensor mass_before = scores.narrow(1, 0, forced).sum(1, /*keepdim=*/true) + ahead.cumsum(1);
    taken = mass_before.lt(params.p * static_cast<double>(n)).sum(1);
  } else {
    taken = at::full({heads}, std::min(count, width), order.options());
  }
  const at::Tensor host_order = order.to(at::kCPU).contiguous(), host_taken = taken.to(at::kCPU).contiguous();
  const int64_t* o = host_order.const_data_ptr<int64_t>();
  const int64_t* t = host_taken.const_data_ptr<int64_t>();
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<int64_t>& list = out[static_cast<size_t>(h)];
    list.insert(list.end(), o + h * width, o + h * width + t[h]);
    std::sort(list.begin(), list.end());
  }
  return out;
}

}  // namespace

std::vector<VerticalSlashHeadIndex> VerticalSlashHeadsAttention::select(const VerticalSlashParams& params) const {
  const at::Tensor both = sums();
  const auto verticals = cut_lists(both.select(1, 0), params.sink_tokens, params.max_verticals,
                                   params.vertical_count, n_, params);
  const auto slashes = cut_lists(both.select(1, 1), params.local_window, params.max_slashes,
                                 params.slash_count, n_, params);
  std::vector<VerticalSlashHeadIndex> out(verticals.size());
  for (size_t h = 0; h < out.size(); ++h) {
    out[h].verticals = verticals[h];
    out[h].slashes = slashes[h];
    out[h].block_size = params.block_size;
  }
  return out;
}

int64_t vertical_slash_heads_per_batch(const VerticalSlashSequenceInputs& inputs, int64_t q_heads) {
  // Per head at the peak: the scores, their softmax, the gathered diagonals and their
  // masked product (4 x n x L doubles), and the head's copy of its keys (L x D doubles).
  constexpr int64_t kBatchBytes = int64_t{256} << 20;
  const int64_t per_head = std::max<int64_t>(
      1, (4 * inputs.n + inputs.keys.size(2)) * inputs.length * static_cast<int64_t>(sizeof(double)));
  return std::clamp<int64_t>(kBatchBytes / per_head, 1, std::max<int64_t>(q_heads, 1));
}

std::vector<VerticalSlashHeadIndex> vertical_slash_sequence_index_on_device(const VerticalSlashSequenceInputs& inputs,
                                                                            int64_t q_heads,
                                                                            const VerticalSlashParams& params,
                                                                            double scale) {
  const int64_t chunk = vertical_slash_heads_per_batch(inputs, q_heads);
  std::vector<VerticalSlashHeadIndex> out;
  for (int64_t first = 0; first < q_heads; first += chunk) {
    const VerticalSlashHeadsAttention attention(inputs, first, std::min(chunk, q_heads - first), scale);
    std::vector<VerticalSlashHeadIndex> heads = attention.select(params);
    const std::vector<double> coverage = attention.coverage(heads);
    for (size_t h = 0; h < heads.size(); ++h) {
      heads[h].coverage = coverage[h];
      out.push_back(std::move(heads[h]));
    }
  }
  return out;
}

}  // namespace sb
