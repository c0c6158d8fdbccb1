#include "kernels/attention/vertical_slash/vertical_slash_index.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "kernels/attention/vertical_slash/vertical_slash_blocks.h"

namespace sb {

const OptionNames<VerticalSlashBudget>& vertical_slash_budget_options() {
  static const OptionNames<VerticalSlashBudget> names{
      "vertical-slash budget", {{"top_p", VerticalSlashBudget::kTopP}, {"top_k", VerticalSlashBudget::kTopK}}};
  return names;
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

// Indices 0..scores.size()-1 not in [0, forced), by descending score, ties by index.
std::vector<int64_t> candidates_by_score(const std::vector<double>& scores, int64_t forced) {
  std::vector<int64_t> order(scores.size() - static_cast<size_t>(forced));
  std::iota(order.begin(), order.end(), forced);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  return order;
}

// The forced entries [0, forced) and the best candidates, by the budget rule; ascending.
std::vector<int64_t> select(const std::vector<double>& scores, int64_t forced, int64_t count, int64_t cap,
                            double total, const VerticalSlashParams& params) {
  forced = std::min<int64_t>(forced, static_cast<int64_t>(scores.size()));
  std::vector<int64_t> kept(static_cast<size_t>(forced));
  std::iota(kept.begin(), kept.end(), 0);
  double mass = 0;
  for (int64_t j = 0; j < forced; ++j) mass += scores[static_cast<size_t>(j)];
  int64_t added = 0;
  for (int64_t j : candidates_by_score(scores, forced)) {
    if (static_cast<int64_t>(kept.size()) >= cap) break;
    if (params.budget == VerticalSlashBudget::kTopP ? mass >= params.p * total : added >= count) break;
    kept.push_back(j);
    mass += scores[static_cast<size_t>(j)];
    ++added;
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

VerticalSlashHeadIndex head_index(const at::Tensor& queries, const at::Tensor& keys, int64_t length,
                                  const VerticalSlashParams& params, double scale) {
  const int64_t n = queries.size(0);  // the last n positions: length - n .. length - 1
  at::Tensor scores = at::matmul(queries, keys.t()).mul_(scale);  // [n, L]
  const at::Tensor row_pos = at::arange(length - n, length, at::kLong).unsqueeze(1);
  const at::Tensor col = at::arange(length, at::kLong).unsqueeze(0);
  scores.masked_fill_(col > row_pos, -std::numeric_limits<double>::infinity());
  const at::Tensor attention = at::softmax(scores, 1).contiguous();  // [n, L]
  std::vector<int64_t> positions(static_cast<size_t>(length));
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<double> vertical(static_cast<size_t>(length), 0.0), slash(vertical);
  vertical_slash_add_scores(attention.const_data_ptr<double>(), positions, length, n, vertical, slash);
  VerticalSlashHeadIndex out = vertical_slash_select(vertical, slash, n, params);
  out.coverage = vertical_slash_kept_mass(out, attention.const_data_ptr<double>(), positions, length, n) /
                 static_cast<double>(n);
  return out;
}

}  // namespace

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
  VerticalSlashHeadIndex out;
  const auto total = static_cast<double>(n);
  out.verticals = select(vertical, params.sink_tokens, params.vertical_count, params.max_verticals, total, params);
  out.slashes = select(slash, params.local_window, params.slash_count, params.max_slashes, total, params);
  out.block_size = params.block_size;
  return out;
}

double vertical_slash_kept_mass(const VerticalSlashHeadIndex& index, const double* attention,
                                const std::vector<int64_t>& key_positions, int64_t length, int64_t n) {
  const auto m = static_cast<int64_t>(key_positions.size());
  const int64_t block = index.block_size;
  std::vector<char> kept(static_cast<size_t>(length));
  std::vector<int64_t> block_keys;
  double mass = 0;
  for (int64_t q_block = (length - n) / block; q_block * block < length; ++q_block) {
    vertical_slash_block_keys(index, q_block, length, block_keys);
    std::fill(kept.begin(), kept.end(), char{0});
    for (const int64_t j : block_keys) kept[static_cast<size_t>(j)] = 1;
    const int64_t first = std::max(q_block * block, length - n), last = std::min((q_block + 1) * block, length) - 1;
    for (int64_t p = first; p <= last; ++p) {
      const double* row = attention + (p - (length - n)) * m;
      for (int64_t a = 0; a < m && key_positions[static_cast<size_t>(a)] <= p; ++a) {
        if (kept[static_cast<size_t>(key_positions[static_cast<size_t>(a)])]) mass += row[a];
      }
    }
  }
  return mass;
}

std::vector<std::vector<VerticalSlashHeadIndex>> vertical_slash_index(const at::Tensor& q, const at::Tensor& k,
                                                                      const PackedSequences& sequences,
                                                                      const VerticalSlashParams& params,
                                                                      double scale) {
  params.validate();
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && q.size(2) == k.size(2), "vertical-slash: q [T, Hq, D], k [T, Hkv, D]");
  TORCH_CHECK(q.size(0) == sequences.total_tokens() && k.size(0) == sequences.total_tokens(),
              "vertical-slash: q and k must hold the packed sequences' ", sequences.total_tokens(), " tokens");
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "vertical-slash: Hq must be a multiple of Hkv");
  const c10::NoGradGuard no_grad;
  const int64_t heads = q.size(1), group = q.size(1) / k.size(1);
  std::vector<std::vector<VerticalSlashHeadIndex>> out;
  for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
    const int64_t offset = sequences.offsets[static_cast<size_t>(s)], length = sequences.length(s);
    std::vector<VerticalSlashHeadIndex> per_head;
    if (length == 0) {
      out.emplace_back(static_cast<size_t>(heads));
      continue;
    }
    // Only the sequence's last queries and its keys, in float64.
    const int64_t n = std::min(params.last_queries, length);
    const at::Tensor last_queries = q.detach().narrow(0, offset + length - n, n).to(at::kDouble);
    const at::Tensor sequence_keys = k.detach().narrow(0, offset, length).to(at::kDouble);
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor queries = last_queries.select(1, h);
      const at::Tensor keys = sequence_keys.select(1, h / group);
      per_head.push_back(head_index(queries, keys, length, params, scale));
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
