#include "kernels/attention/patterns/vertical_slash/vertical_slash_index_on_device.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"

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
  return vertical_slash_score_sums(attention_, length_, n_, at::arange(length_, attention_.options().dtype(at::kLong)));
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
  TORCH_CHECK(static_cast<int64_t>(index.size()) == attention_.size(0),
              "vertical-slash coverage: one index per head expected");
  if (index.empty()) return {};
  std::vector<const VerticalSlashHeadIndex*> lists;
  for (const VerticalSlashHeadIndex& head : index) lists.push_back(&head);
  std::vector<int64_t> every_key(static_cast<size_t>(length_));
  std::iota(every_key.begin(), every_key.end(), 0);
  const int64_t block = index.front().block_size;
  const at::Tensor columns = vertical_slash_query_block_columns(attention_, length_, n_, block);
  const at::Tensor mass = vertical_slash_kept_masses(columns, block, lists, length_, n_, every_key).to(at::kCPU).contiguous();
  std::vector<double> out(index.size());
  std::memcpy(out.data(), mass.const_data_ptr<double>(), sizeof(double) * out.size());
  for (double& c : out) c /= static_cast<double>(n_);
  return out;
}

namespace {

// slash[h, d] = sum over rows i of A[h, i, p_i - d], p_i = length - n + i, for attention
// [H, n, m] over the keys at key_positions (0 past each query). Two ways, both
// deterministic:

// On a GPU: row i holds its keys reversed (key j at column length - 1 - j) in a zero row
// of length + n, so its offset d sits at column (length - 1 - p_i) + d = n - 1 - i + d; a
// view with row stride length + n - 1 puts every row's offset d in column d, and the
// padding holds the zeros of offsets past p_i. A copy and a strided sum, no atomics.
at::Tensor slash_sums_by_offset_view(const at::Tensor& attention, int64_t length, int64_t n,
                                     const at::Tensor& key_positions) {
  const int64_t heads = attention.size(0), width = length + n;
  at::Tensor reversed = at::zeros({heads, n, width}, attention.options());
  reversed.index_copy_(2, (length - 1) - key_positions, attention);
  return reversed.as_strided({heads, n, length}, {n * width, width - 1, 1}, n - 1).sum(1);
}

// On the CPU: both sums by vertical_slash_add_scores, head by head (a loop over the n x m
// entries, in a fixed order): cheaper there than zeroing and passing over the
// [H, n, length + n] buffer, whose cost the GPU hides.
at::Tensor score_sums_by_loop(const at::Tensor& attention, int64_t length, int64_t n, const at::Tensor& key_positions) {
  TORCH_CHECK(attention.is_cpu() && attention.scalar_type() == at::kDouble,
              "vertical-slash score sums: the loop runs on float64 CPU attention");
  const int64_t heads = attention.size(0);
  const at::Tensor rows = attention.contiguous();
  const at::Tensor positions_tensor = key_positions.contiguous();
  const std::vector<int64_t> positions(positions_tensor.const_data_ptr<int64_t>(),
                                       positions_tensor.const_data_ptr<int64_t>() + positions_tensor.numel());
  at::Tensor out = at::empty({heads, 2, length}, attention.options());
  std::vector<double> vertical, slash;
  for (int64_t h = 0; h < heads; ++h) {
    vertical.assign(static_cast<size_t>(length), 0.0);
    slash.assign(static_cast<size_t>(length), 0.0);
    vertical_slash_add_scores(rows.const_data_ptr<double>() + h * n * rows.size(2), positions, length, n, vertical,
                              slash);
    double* o = out.mutable_data_ptr<double>() + h * 2 * length;
    std::copy(vertical.begin(), vertical.end(), o);
    std::copy(slash.begin(), slash.end(), o + length);
  }
  return out;
}

}  // namespace

at::Tensor vertical_slash_score_sums(const at::Tensor& attention, int64_t length, int64_t n,
                                     const at::Tensor& key_positions, VerticalSlashSlashSums way) {
  const int64_t heads = attention.size(0), m = attention.size(2);
  TORCH_CHECK(attention.size(1) == n && key_positions.numel() == m,
              "vertical-slash score sums: attention [H, n, key positions] expected");
  if (way == VerticalSlashSlashSums::kByDevice) {
    way = attention.is_cpu() ? VerticalSlashSlashSums::kLoop : VerticalSlashSlashSums::kOffsetView;
  }
  if (way == VerticalSlashSlashSums::kLoop) return score_sums_by_loop(attention, length, n, key_positions);
  const at::Tensor vertical = at::zeros({heads, length}, attention.options()).index_copy_(1, key_positions, attention.sum(1));
  return at::stack({vertical, slash_sums_by_offset_view(attention, length, n, key_positions)}, 1);
}

namespace {

// The query blocks the last n queries of a sequence of `length` tokens span: m0 .. m1.
std::pair<int64_t, int64_t> last_query_blocks(int64_t length, int64_t n, int64_t block) {
  return {(length - n) / block, (length - 1) / block};
}

}  // namespace

at::Tensor vertical_slash_query_block_columns(const at::Tensor& attention, int64_t length, int64_t n, int64_t block) {
  TORCH_CHECK(attention.dim() == 3 && attention.size(1) == n && n >= 1 && n <= length && block >= 1,
              "vertical-slash query block columns: attention [H, n, m] of the last n queries expected");
  const auto [m0, m1] = last_query_blocks(length, n, block);
  std::vector<at::Tensor> rows;  // one sum per block, in a fixed order (no atomics)
  for (int64_t b = m0; b <= m1; ++b) {
    const int64_t first = std::max(b * block, length - n), last = std::min((b + 1) * block, length);
    rows.push_back(attention.narrow(1, first - (length - n), last - first).sum(1));
  }
  return at::stack(rows, 1);
}

at::Tensor vertical_slash_kept_masses(const at::Tensor& block_columns, int64_t block,
                                      const std::vector<const VerticalSlashHeadIndex*>& lists, int64_t length, int64_t n,
                                      const std::vector<int64_t>& key_positions) {
  const auto heads = static_cast<int64_t>(lists.size());
  const auto m = static_cast<int64_t>(key_positions.size());
  TORCH_CHECK(block_columns.dim() == 3 && heads == block_columns.size(0) && m == block_columns.size(2),
              "vertical-slash kept mass: query block columns [lists, blocks, key positions] expected");
  if (heads == 0 || n == 0 || m == 0) return at::zeros({heads}, block_columns.options());
  const auto [m0, m1] = last_query_blocks(length, n, block);
  const int64_t blocks = m1 - m0 + 1;
  TORCH_CHECK(block_columns.size(1) == blocks, "vertical-slash kept mass: the columns' blocks are not the lists'");
  std::vector<int64_t> column(static_cast<size_t>(length), -1);  // a key position's column (-1: not held)
  for (int64_t a = 0; a < m; ++a) column[static_cast<size_t>(key_positions[static_cast<size_t>(a)])] = a;
  at::Tensor keep = at::zeros({heads, blocks, m}, at::kBool);
  bool* k = keep.mutable_data_ptr<bool>();
  std::vector<int64_t> keys;
  for (int64_t h = 0; h < heads; ++h) {
    TORCH_CHECK(lists[static_cast<size_t>(h)]->block_size == block,
                "vertical-slash kept mass: the lists' block size is not the columns'");
    for (int64_t q_block = m0; q_block <= m1; ++q_block) {
      vertical_slash_block_keys(*lists[static_cast<size_t>(h)], q_block, length, keys);
      bool* row = k + (h * blocks + (q_block - m0)) * m;
      for (const int64_t j : keys) {
        const int64_t a = column[static_cast<size_t>(j)];
        if (a >= 0) row[a] = true;
      }
    }
  }
  return (block_columns * keep.to(block_columns.device())).sum({1, 2});
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
  // Per head at the peak: the scores and their softmax (2 x n x L doubles), the
  // slash sums' reversed rows (n x (L + n), vertical_slash_score_sums), and the head's
  // copy of its keys (L x D doubles); 4 x n x L bounds the first three while n <= L.
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
