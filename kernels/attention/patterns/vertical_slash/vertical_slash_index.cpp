#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "kernels/attention/patterns/vertical_slash/vertical_slash_blocks.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index_on_device.h"

namespace sb {

const OptionNames<VerticalSlashBudget>& vertical_slash_budget_options() {
  static const OptionNames<VerticalSlashBudget> names{
      "vertical-slash budget", {{"top_p", VerticalSlashBudget::kTopP}, {"top_k", VerticalSlashBudget::kTopK}}};
  return names;
}

bool operator==(const VerticalSlashParams& a, const VerticalSlashParams& b) {
  return a.budget == b.budget && a.p == b.p && a.vertical_count == b.vertical_count && a.slash_count == b.slash_count &&
         a.max_verticals == b.max_verticals && a.max_slashes == b.max_slashes && a.sink_tokens == b.sink_tokens &&
         a.local_window == b.local_window && a.last_queries == b.last_queries && a.block_size == b.block_size;
}

std::optional<VerticalSlashParamsProblem> VerticalSlashParams::first_problem() const {
  if (!(p > 0.0 && p <= 1.0)) return VerticalSlashParamsProblem{"p", "must be in (0, 1]", "e.g. 0.9 or 0.95 (MTraining)"};
  if (vertical_count < 0) return VerticalSlashParamsProblem{"vertical_count", "must be >= 0", "e.g. 1000"};
  if (slash_count < 0) return VerticalSlashParamsProblem{"slash_count", "must be >= 0", "e.g. 6096"};
  if (sink_tokens < 0) return VerticalSlashParamsProblem{"sink_tokens", "must be >= 0", "e.g. 30 (MTraining's code)"};
  if (local_window < 1) {
    return VerticalSlashParamsProblem{"local_window", "must be >= 1 (every query keeps itself)",
                                      "e.g. 100 (MTraining's code)"};
  }
  if (max_verticals < sink_tokens) return VerticalSlashParamsProblem{"max_verticals", "must be >= sink_tokens", "e.g. 4096"};
  if (max_slashes < local_window) return VerticalSlashParamsProblem{"max_slashes", "must be >= local_window", "e.g. 4096"};
  if (last_queries < 1) return VerticalSlashParamsProblem{"last_queries", "must be >= 1", "e.g. 64 (MTraining)"};
  if (block_size < 1) {
    return VerticalSlashParamsProblem{"block_size", "must be >= 1", "e.g. 64 (MTraining's kernels); 1 keeps exact diagonals"};
  }
  return std::nullopt;
}

void VerticalSlashParams::validate() const {
  if (const auto problem = first_problem()) {
    throw std::invalid_argument("vertical-slash: " + problem->field + " " + problem->message);
  }
}

namespace {

// The first `wanted` of the indices forced .. scores.size() - 1 by descending score, ties
// by index (a partial sort: a list's cap is usually far below the sequence length).
std::vector<int64_t> candidates_by_score(const std::vector<double>& scores, int64_t forced, int64_t wanted) {
  std::vector<int64_t> order(scores.size() - static_cast<size_t>(forced));
  std::iota(order.begin(), order.end(), forced);
  const auto keep = static_cast<int64_t>(std::clamp<int64_t>(wanted, 0, static_cast<int64_t>(order.size())));
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), [&](int64_t a, int64_t b) {
    return scores[a] > scores[b] || (scores[a] == scores[b] && a < b);
  });
  order.resize(static_cast<size_t>(keep));
  return order;
}

// The forced entries and the best candidates, by the budget rule; ascending.
std::vector<int64_t> select(const VerticalSlashLadder& ladder, int64_t count, double total,
                            const VerticalSlashParams& params) {
  const int64_t taken = params.budget == VerticalSlashBudget::kTopP
                            ? ladder.taken_below(params.p * total)
                            : std::min<int64_t>(count, static_cast<int64_t>(ladder.order.size()));
  return ladder.kept(taken);
}

// Key positions 0 .. length - 1: a one-rank caller holds every key of the sequence.
std::vector<int64_t> all_positions(int64_t length) {
  std::vector<int64_t> positions(static_cast<size_t>(length));
  std::iota(positions.begin(), positions.end(), 0);
  return positions;
}

}  // namespace

VerticalSlashLadder::VerticalSlashLadder(const std::vector<double>& scores, int64_t forced_entries, int64_t cap)
    : forced(std::min<int64_t>(forced_entries, static_cast<int64_t>(scores.size()))) {
  order = candidates_by_score(scores, forced, cap - forced);
  // The same sums in the same order as the list grows: forced entries, then each taken one.
  double mass = 0;
  for (int64_t j = 0; j < forced; ++j) mass += scores[static_cast<size_t>(j)];
  mass_before.reserve(order.size());
  for (const int64_t j : order) {
    mass_before.push_back(mass);
    mass += scores[static_cast<size_t>(j)];
  }
}

int64_t VerticalSlashLadder::taken_below(double mass) const {
  // A scan, not a binary search: the list stops at its first candidate whose mass before
  // reaches `mass`, whatever follows.
  const auto stop = std::find_if(mass_before.begin(), mass_before.end(), [&](double m) { return m >= mass; });
  return stop - mass_before.begin();
}

std::vector<int64_t> VerticalSlashLadder::kept(int64_t taken) const {
  std::vector<int64_t> out(static_cast<size_t>(forced));
  std::iota(out.begin(), out.end(), 0);
  out.insert(out.end(), order.begin(), order.begin() + taken);
  std::sort(out.begin(), out.end());
  return out;
}

VerticalSlashLadders::VerticalSlashLadders(const std::vector<double>& vertical_scores,
                                           const std::vector<double>& slash_scores, const VerticalSlashParams& params)
    : vertical(vertical_scores, params.sink_tokens, params.max_verticals),
      slash(slash_scores, params.local_window, params.max_slashes),
      block_size(params.block_size) {}

VerticalSlashHeadIndex VerticalSlashLadders::at(double mass) const {
  VerticalSlashHeadIndex out;
  out.verticals = vertical.kept(vertical.taken_below(mass));
  out.slashes = slash.kept(slash.taken_below(mass));
  out.block_size = block_size;
  return out;
}

void vertical_slash_check_inputs(const at::Tensor& q, const at::Tensor& k, const PackedSequences& sequences) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(2) == k.size(2), "vertical-slash: q [T, Hq, D], k [T, Hkv, D]");
  TORCH_CHECK(q.size(0) == sequences.total_tokens() && k.size(0) == sequences.total_tokens(),
              "vertical-slash: q and k must hold the packed sequences' ", sequences.total_tokens(), " tokens");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "vertical-slash: Hq must be a multiple of Hkv");
}

VerticalSlashSequenceInputs::VerticalSlashSequenceInputs(const at::Tensor& q, const at::Tensor& k,
                                                         const PackedSequences& sequences, int64_t s,
                                                         int64_t last_query_count)
    : length(sequences.length(s)), n(std::min(last_query_count, sequences.length(s))), group(q.size(1) / k.size(1)) {
  // Only the sequence's last queries and its keys, in float64.
  const int64_t offset = sequences.offsets[static_cast<size_t>(s)];
  last_queries = q.detach().narrow(0, offset + length - n, n).to(at::kDouble);
  keys = k.detach().narrow(0, offset, length).to(at::kDouble);
}

at::Tensor VerticalSlashSequenceInputs::attention(int64_t head, double scale) const {
  // The batched computation for one head (on a GPU it runs there and only [n, L] comes
  // back to the host, where the lists are chosen).
  return VerticalSlashHeadsAttention(*this, head, 1, scale).attention()[0].to(at::kCPU).contiguous();
}

VerticalSlashScores vertical_slash_scores(const at::Tensor& attention, int64_t length) {
  VerticalSlashScores out{std::vector<double>(static_cast<size_t>(length), 0.0),
                          std::vector<double>(static_cast<size_t>(length), 0.0)};
  vertical_slash_add_scores(attention.const_data_ptr<double>(), all_positions(length), length, attention.size(0),
                            out.vertical, out.slash);
  return out;
}

double vertical_slash_coverage(const VerticalSlashHeadIndex& index, const at::Tensor& attention, int64_t length) {
  // Summed per query block, as the budget search sums it, so a budget request that runs
  // the params' rule reports the same bits.
  const int64_t n = attention.size(0);
  const at::Tensor columns =
      vertical_slash_query_block_columns(attention.unsqueeze(0), length, n, index.block_size)[0].contiguous();
  return vertical_slash_block_columns_kept_mass(index, columns.const_data_ptr<double>(), length, n) /
         static_cast<double>(n);
}

void vertical_slash_add_scores(const double* attention, const std::vector<int64_t>& key_positions, int64_t length,
                               int64_t n, std::vector<double>& vertical, std::vector<double>& slash) {
  const auto m = static_cast<int64_t>(key_positions.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = length - n + i;
    const double* row = attention + i * m;
    for (int64_t a = 0; a < m && key_positions[static_cast<size_t>(a)] <= p; ++a) {
      const int64_t j = key_positions[static_cast<size_t>(a)];
      vertical[static_cast<size_t>(j)] += row[a];
      slash[static_cast<size_t>(p - j)] += row[a];
    }
  }
}

VerticalSlashHeadIndex vertical_slash_select(const std::vector<double>& vertical, const std::vector<double>& slash,
                                             int64_t n, const VerticalSlashParams& params) {
  return vertical_slash_select(VerticalSlashLadders(vertical, slash, params), n, params);
}

VerticalSlashHeadIndex vertical_slash_select(const VerticalSlashLadders& ladders, int64_t n,
                                             const VerticalSlashParams& params) {
  VerticalSlashHeadIndex out;
  const auto total = static_cast<double>(n);
  out.verticals = select(ladders.vertical, params.vertical_count, total, params);
  out.slashes = select(ladders.slash, params.slash_count, total, params);
  out.block_size = params.block_size;
  return out;
}

double vertical_slash_block_columns_kept_mass(const VerticalSlashHeadIndex& index, const double* block_columns,
                                              int64_t length, int64_t n) {
  const int64_t block = index.block_size, first_block = (length - n) / block;
  std::vector<int64_t> block_keys;
  double mass = 0;
  for (int64_t q_block = first_block; q_block * block < length; ++q_block) {
    vertical_slash_block_keys(index, q_block, length, block_keys);
    const double* row = block_columns + (q_block - first_block) * length;
    for (const int64_t j : block_keys) mass += row[j];
  }
  return mass;
}

std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_index(const at::Tensor& q, const at::Tensor& k,
                                                                      const PackedSequences& sequences,
                                                                      const VerticalSlashParams& params,
                                                                      double scale) {
  params.validate();
  vertical_slash_check_inputs(q, k, sequences);
  const c10::NoGradGuard no_grad;
  const int64_t heads = q.size(1);
  std::vector<std::vector<VerticalSlashHeadIndex>> out;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t length = sequences.length(s);
    std::vector<VerticalSlashHeadIndex> per_head;
    if (length == 0) {
      out.emplace_back(static_cast<size_t>(heads));
      continue;
    }
    const VerticalSlashSequenceInputs inputs(q, k, sequences, s, params.last_queries);
    if (!q.device().is_cpu()) {  // the attention, its sums and the coverage stay on the device
      out.push_back(vertical_slash_sequence_index_on_device(inputs, heads, params, scale));
      continue;
    }
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor attention = inputs.attention(h, scale);
      const VerticalSlashScores scores = vertical_slash_scores(attention, length);
      VerticalSlashHeadIndex head = vertical_slash_select(scores.vertical, scores.slash, inputs.n, params);
      head.coverage = vertical_slash_coverage(head, attention, length);
      per_head.push_back(std::move(head));
    }
    out.push_back(std::move(per_head));
  }
  return out;
}

bool vertical_slash_keeps(const VerticalSlashHeadIndex& index, int64_t length, int64_t i, int64_t j) {
  if (j > i || j < 0 || i >= length) return false;
  if (std::binary_search(index.verticals.begin(), index.verticals.end(), j)) return true;
  const int64_t query_block = i / index.block_size;
  return vertical_slash_slash_blocks(index, query_block, length)[static_cast<size_t>(j / index.block_size)] != 0;
}

}  // namespace sb
