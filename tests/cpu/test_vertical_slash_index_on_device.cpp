// The index's steps as batched ATen ops (vertical_slash_index_on_device.h, what a GPU runs)
// against the host steps of vertical_slash_index.h on the CPU: the last queries' attention
// (both against a softmax written out query by query),
// the vertical and slash scores, each index's coverage, and the lists chosen from them,
// for top-p and top-k, GQA 7:1 and 4:2, blocks of 1, 5, 16 and 64, sequences shorter than
// the last-query window, and a slice of heads that starts inside a GQA group; and the
// shares a context-parallel rank computes from some of the keys (the scores and the kept
// masses of vertical_slash_ring_sums.h) against the host steps on the same keys.

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/attention/core/packed_sequences.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index_on_device.h"
#include "tests/cpu/vertical_slash_index_cases.h"

namespace sb {
namespace {

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// Query head h's last n queries' attention to every key of the sequence, written out
// plainly: softmax over the keys at or before each query of scale x q . k, GQA head h / group.
at::Tensor plain_attention(const at::Tensor& q, const at::Tensor& k, int64_t offset, int64_t length, int64_t n,
                           int64_t h, double scale) {
  const int64_t group = q.size(1) / k.size(1);
  at::Tensor out = at::zeros({n, length}, at::kDouble);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t p = length - n + i;
    const at::Tensor scores =
        at::mv(k.narrow(0, offset, p + 1).select(1, h / group), q[offset + p][h]).mul(scale);  // keys 0 .. p
    out[i].narrow(0, 0, p + 1).copy_(at::softmax(scores, 0));
  }
  return out;
}

TEST(VerticalSlashIndexOnDevice, BatchedStepsEqualTheHostSteps) {
  at::manual_seed(17);
  const std::vector<int64_t> lengths{70, 5, 0, 1, 33, 129};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const double scale = 0.35;
  int64_t compared_lists = 0;
  for (const auto& [hq, hkv, block] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {7, 1, 1}, {4, 2, 5}, {7, 1, 16}, {4, 2, 64}}) {
    const at::Tensor q = at::randn({sequences.total_tokens(), hq, 8}, at::kDouble) * 2;
    const at::Tensor k = at::randn({sequences.total_tokens(), hkv, 8}, at::kDouble);
    for (const auto& [name, index] : test::vertical_slash_index_cases(q, k, sequences, block, scale)) {
      SCOPED_TRACE(name + " GQA " + std::to_string(hq) + ":" + std::to_string(hkv) + " block " + std::to_string(block));
      VerticalSlashParams params = test::small_vertical_slash_params(block);
      params.budget = name == "top-k" ? VerticalSlashBudget::kTopK : VerticalSlashBudget::kTopP;
      for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
        const int64_t length = sequences.length(s);
        if (length == 0) continue;
        const VerticalSlashSequenceInputs inputs(q, k, sequences, s, params.last_queries);
        const VerticalSlashHeadsAttention all(inputs, 0, hq, scale);
        const std::vector<VerticalSlashScores> scores = all.scores();
        const auto& heads = index[static_cast<size_t>(s)];
        const std::vector<double> coverage = all.coverage(heads);
        for (int64_t h = 0; h < hq; ++h) {
          const at::Tensor host = inputs.attention(h, scale);
          const at::Tensor expected_attention =
              plain_attention(q, k, sequences.offsets[static_cast<size_t>(s)], length, inputs.n, h, scale);
          EXPECT_LT((all.attention()[h] - expected_attention).abs().max().item<double>(), 1e-13) << "head " << h;
          EXPECT_LT((host - expected_attention).abs().max().item<double>(), 1e-13) << "head " << h;
          const VerticalSlashScores expected = vertical_slash_scores(host, length);
          EXPECT_LT(max_diff(scores[static_cast<size_t>(h)].vertical, expected.vertical), 1e-12) << "head " << h;
          EXPECT_LT(max_diff(scores[static_cast<size_t>(h)].slash, expected.slash), 1e-12) << "head " << h;
          EXPECT_NEAR(coverage[static_cast<size_t>(h)],
                      vertical_slash_coverage(heads[static_cast<size_t>(h)], host, length), 1e-12)
              << "head " << h;
        }
        // Heads 1 .. 2 alone: the slice's query heads map to their own key/value heads.
        const VerticalSlashHeadsAttention slice(inputs, 1, 2, scale);
        for (int64_t h = 1; h < 3; ++h) {
          const at::Tensor expected_attention =
              plain_attention(q, k, sequences.offsets[static_cast<size_t>(s)], length, inputs.n, h, scale);
          EXPECT_LT((slice.attention()[h - 1] - expected_attention).abs().max().item<double>(), 1e-13);
        }
        if (name == "fixed") continue;
        // The lists chosen from the batched scores are the host path's.
        const std::vector<VerticalSlashHeadIndex> chosen =
            vertical_slash_sequence_index_on_device(inputs, hq, params, scale);
        ASSERT_EQ(chosen.size(), heads.size());
        for (size_t h = 0; h < heads.size(); ++h) {
          EXPECT_EQ(chosen[h].verticals, heads[h].verticals) << "sequence " << s << " head " << h;
          EXPECT_EQ(chosen[h].slashes, heads[h].slashes) << "sequence " << s << " head " << h;
          EXPECT_NEAR(chosen[h].coverage, heads[h].coverage, 1e-12);
          ++compared_lists;
        }
      }
    }
  }
  EXPECT_GT(compared_lists, 0);
}

// The attention mass on the kept entries, pair by pair by the mask's rule: rows [n, m]
// the last queries' attention to the keys at positions.
double kept_mass_pair_by_pair(const VerticalSlashHeadIndex& index, const at::Tensor& rows,
                              const std::vector<int64_t>& positions, int64_t length) {
  const int64_t n = rows.size(0);
  double mass = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (size_t a = 0; a < positions.size(); ++a) {
      if (vertical_slash_keeps(index, length, length - n + i, positions[a])) {
        mass += rows[i][static_cast<int64_t>(a)].item<double>();
      }
    }
  }
  return mass;
}

// The column and diagonal sums of rows [n, m] (the last queries' attention to the keys at
// positions), output by output: vertical[j] sums key j's column, slash[d] the entries of
// each row i at key p_i - d, where held (the index code adds input by input instead).
std::pair<std::vector<double>, std::vector<double>> sums_output_by_output(const at::Tensor& rows,
                                                                        const std::vector<int64_t>& positions,
                                                                        int64_t length) {
  const int64_t n = rows.size(0);
  std::vector<int64_t> column(static_cast<size_t>(length), -1);
  for (size_t a = 0; a < positions.size(); ++a) column[static_cast<size_t>(positions[a])] = static_cast<int64_t>(a);
  std::vector<double> vertical(static_cast<size_t>(length), 0.0), slash(vertical);
  const auto entry = [&](int64_t i, int64_t key) {  // 0 where the key is not held
    const int64_t a = column[static_cast<size_t>(key)];
    return a >= 0 ? rows[i][a].item<double>() : 0.0;
  };
  for (int64_t j = 0; j < length; ++j) {
    for (int64_t i = 0; i < n; ++i) {
      vertical[static_cast<size_t>(j)] += entry(i, j);
      const int64_t key = length - n + i - j;  // row i's key at offset j
      if (key >= 0) slash[static_cast<size_t>(j)] += entry(i, key);
    }
  }
  return {vertical, slash};
}

// A rank holding some of a sequence's keys: its scores (both ways of summing) and kept
// masses from those columns of the attention equal sums written out output by output and
// the mask's rule pair by pair, and the shares of two complementary key sets sum to the
// whole sequence's.
TEST(VerticalSlashIndexOnDevice, AShareOfTheKeysGivesTheHostStepsShare) {
  at::manual_seed(23);
  const std::vector<int64_t> lengths{70, 5, 1, 33, 129};
  const PackedSequences sequences = PackedSequences::from_lengths(lengths);
  const double scale = 0.35;
  const int64_t hq = 4, hkv = 2;
  const at::Tensor q = at::randn({sequences.total_tokens(), hq, 8}, at::kDouble) * 2;
  const at::Tensor k = at::randn({sequences.total_tokens(), hkv, 8}, at::kDouble);
  int64_t compared = 0;
  for (const int64_t block : {1, 5, 16, 64}) {
    for (const auto& [name, index] : test::vertical_slash_index_cases(q, k, sequences, block, scale)) {
      SCOPED_TRACE(name + " block " + std::to_string(block));
      const VerticalSlashParams params = test::small_vertical_slash_params(block);
      for (int64_t s = 0; s < sequences.num_sequences(); ++s) {
        const int64_t length = sequences.length(s);
        const VerticalSlashSequenceInputs inputs(q, k, sequences, s, params.last_queries);
        const at::Tensor attention = VerticalSlashHeadsAttention(inputs, 0, hq, scale).attention();  // [H, n, L]
        // Stripes of 3 tokens dealt to two ranks, and a rank holding nothing.
        std::vector<std::vector<int64_t>> shares(3);
        for (int64_t j = 0; j < length; ++j) shares[static_cast<size_t>((j / 3) % 2)].push_back(j);
        std::vector<double> whole_vertical(static_cast<size_t>(hq * length), 0.0), whole_slash(whole_vertical);
        for (const std::vector<int64_t>& positions : shares) {
          const at::Tensor key_positions = at::tensor(positions, at::kLong);
          const at::Tensor columns = attention.index_select(2, key_positions).contiguous();  // [H, n, m]
          const at::Tensor sums = vertical_slash_score_sums(columns, length, inputs.n, key_positions);  // [H, 2, L]
          // The GPU's way on the CPU: the same sums (another order of the same additions).
          const at::Tensor by_view = vertical_slash_score_sums(columns, length, inputs.n, key_positions,
                                                               VerticalSlashSlashSums::kOffsetView);
          EXPECT_LT((by_view - sums).abs().max().item<double>(), 1e-13) << "sequence " << s;
          std::vector<const VerticalSlashHeadIndex*> lists;
          for (const VerticalSlashHeadIndex& head : index[static_cast<size_t>(s)]) lists.push_back(&head);
          const at::Tensor masses = vertical_slash_kept_masses(
              vertical_slash_query_block_columns(columns, length, inputs.n, block), block, lists, length, inputs.n,
              positions);
          for (int64_t h = 0; h < hq; ++h) {
            const at::Tensor rows = columns[h].contiguous();
            const auto [vertical, slash] = sums_output_by_output(rows, positions, length);
            const std::vector<double> got_vertical(sums[h][0].data_ptr<double>(), sums[h][0].data_ptr<double>() + length);
            const std::vector<double> got_slash(sums[h][1].data_ptr<double>(), sums[h][1].data_ptr<double>() + length);
            EXPECT_LT(max_diff(got_vertical, vertical), 1e-13) << "sequence " << s << " head " << h;
            EXPECT_LT(max_diff(got_slash, slash), 1e-13) << "sequence " << s << " head " << h;
            const at::Tensor view_slash = by_view[h][1].contiguous();
            EXPECT_LT(max_diff(std::vector<double>(view_slash.const_data_ptr<double>(),
                                                   view_slash.const_data_ptr<double>() + length),
                               slash),
                      1e-13)
                << "sequence " << s << " head " << h;
            EXPECT_NEAR(masses[h].item<double>(),
                        kept_mass_pair_by_pair(*lists[static_cast<size_t>(h)], rows, positions, length), 1e-13)
                << "sequence " << s << " head " << h;
            for (int64_t j = 0; j < length; ++j) {
              whole_vertical[static_cast<size_t>(h * length + j)] += got_vertical[static_cast<size_t>(j)];
              whole_slash[static_cast<size_t>(h * length + j)] += got_slash[static_cast<size_t>(j)];
            }
            ++compared;
          }
        }
        const std::vector<VerticalSlashScores> whole = VerticalSlashHeadsAttention(inputs, 0, hq, scale).scores();
        for (int64_t h = 0; h < hq; ++h) {
          const auto at = [&](const std::vector<double>& v) {
            return std::vector<double>(v.begin() + h * length, v.begin() + (h + 1) * length);
          };
          EXPECT_LT(max_diff(at(whole_vertical), whole[static_cast<size_t>(h)].vertical), 1e-12);
          EXPECT_LT(max_diff(at(whole_slash), whole[static_cast<size_t>(h)].slash), 1e-12);
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
}

}  // namespace
}  // namespace sb
