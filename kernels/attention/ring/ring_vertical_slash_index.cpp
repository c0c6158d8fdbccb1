#include "kernels/attention/ring/ring_vertical_slash_index.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <chrono>
#include <limits>

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// This rank's tokens of one sequence: their rows in the local tensors and positions.
struct LocalKeys {
  std::vector<int64_t> rows;
  std::vector<int64_t> positions;  // ascending
};

// Per sequence, from the rank's tiles (runs of consecutive global tokens).
std::vector<LocalKeys> local_keys_by_sequence(const RingShardTiles& mine, const PackedSequences& sequences) {
  std::vector<LocalKeys> out(static_cast<size_t>(sequences.num_sequences()));
  int64_t s = 0;
  for (const RingTile& tile : mine.tiles) {
    for (int64_t t = 0; t < tile.length; ++t) {
      const int64_t token = tile.global_start + t;
      while (token >= sequences.offsets[static_cast<size_t>(s + 1)]) ++s;
      out[static_cast<size_t>(s)].rows.push_back(tile.local_start + t);
      out[static_cast<size_t>(s)].positions.push_back(token - sequences.offsets[static_cast<size_t>(s)]);
    }
  }
  return out;
}

// Times the all-reduces apart from the local work.
class CollectiveClock {
 public:
  CollectiveClock(RingContext& context, int64_t call) : context_(context), call_(call) {}
  void all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const char* what) {
    const auto start = Clock::now();
    context_.all_reduce(tensor, op, what, call_);
    waited_ += Clock::now() - start;
  }
  Clock::duration waited() const { return waited_; }

 private:
  RingContext& context_;
  int64_t call_;
  Clock::duration waited_{};
};

}  // namespace

std::vector<std::vector<VerticalSlashHeadIndex>> ring_vertical_slash_index(
    const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry, const VerticalSlashParams& params,
    double scale, RingContext& context, int64_t call) {
  params.validate();
  const c10::NoGradGuard no_grad;
  const auto start = Clock::now();
  CollectiveClock collectives(context, call);
  const PackedSequences& sequences = geometry.sequences;
  const int64_t num_sequences = sequences.num_sequences(), heads = q.size(1), group = q.size(1) / k.size(1);
  const std::vector<LocalKeys> local = local_keys_by_sequence(geometry.shards[context.rank()], sequences);
  const at::Tensor q_local = q.detach(), k64 = k.detach().to(at::kDouble);

  // 1. The last queries of every sequence, rows first_row[s] .. of one [N, Hq, D] tensor.
  std::vector<int64_t> last(static_cast<size_t>(num_sequences)), first_row(static_cast<size_t>(num_sequences) + 1, 0);
  for (int64_t s = 0; s < num_sequences; ++s) {
    last[static_cast<size_t>(s)] = std::min(params.last_queries, sequences.length(s));
    first_row[static_cast<size_t>(s) + 1] = first_row[static_cast<size_t>(s)] + last[static_cast<size_t>(s)];
  }
  at::Tensor last_queries = at::zeros({first_row.back(), heads, q.size(2)}, at::kDouble);
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t length = sequences.length(s), n = last[static_cast<size_t>(s)];
    const LocalKeys& mine = local[static_cast<size_t>(s)];
    for (size_t a = 0; a < mine.rows.size(); ++a) {
      if (mine.positions[a] >= length - n) {
        last_queries[first_row[static_cast<size_t>(s)] + mine.positions[a] - (length - n)].copy_(q_local[mine.rows[a]]);
      }
    }
  }
  collectives.all_reduce(last_queries, c10d::ReduceOp::SUM, "vertical-slash's last queries");

  // 2. Scores against this rank's keys, [n, m] per (sequence, head); the softmax
  // denominators over the whole sequence.
  std::vector<std::vector<at::Tensor>> scores(static_cast<size_t>(num_sequences));
  at::Tensor row_max = at::full({first_row.back(), heads}, -std::numeric_limits<double>::infinity(), at::kDouble);
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t length = sequences.length(s), n = last[static_cast<size_t>(s)];
    const LocalKeys& mine = local[static_cast<size_t>(s)];
    if (n == 0) continue;
    const at::Tensor rows = at::tensor(mine.rows, at::kLong);
    const at::Tensor key_pos = at::tensor(mine.positions, at::kLong).unsqueeze(0);
    const at::Tensor query_pos = at::arange(length - n, length, at::kLong).unsqueeze(1);
    const at::Tensor future = key_pos > query_pos;  // [n, m]
    const at::Tensor sequence_keys = k64.index_select(0, rows);  // [m, Hkv, D]
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor keys = sequence_keys.select(1, h / group);  // [m, D]
      at::Tensor sh = at::matmul(last_queries.narrow(0, first_row[static_cast<size_t>(s)], n).select(1, h), keys.t())
                          .mul_(scale)
                          .masked_fill_(future, -std::numeric_limits<double>::infinity());
      if (sh.size(1) > 0) row_max.narrow(0, first_row[static_cast<size_t>(s)], n).select(1, h).copy_(std::get<0>(sh.max(1)));
      scores[static_cast<size_t>(s)].push_back(std::move(sh));
    }
  }
  collectives.all_reduce(row_max, c10d::ReduceOp::MAX, "vertical-slash's score maxima");
  at::Tensor row_sum = at::zeros_like(row_max);
  for (int64_t s = 0; s < num_sequences; ++s) {
    for (size_t h = 0; h < scores[static_cast<size_t>(s)].size(); ++h) {
      const at::Tensor top = row_max.narrow(0, first_row[static_cast<size_t>(s)], last[static_cast<size_t>(s)])
                                 .select(1, static_cast<int64_t>(h));
      at::Tensor& sh = scores[static_cast<size_t>(s)][h];
      sh.sub_(top.unsqueeze(1)).exp_();  // exp(score - max): the attention times the denominator
      row_sum.narrow(0, first_row[static_cast<size_t>(s)], last[static_cast<size_t>(s)])
          .select(1, static_cast<int64_t>(h))
          .copy_(sh.sum(1));
    }
  }
  collectives.all_reduce(row_sum, c10d::ReduceOp::SUM, "vertical-slash's softmax denominators");

  // 3. Column and diagonal sums, [Hq, 2, L] per sequence, completed over the group.
  std::vector<int64_t> score_offset(static_cast<size_t>(num_sequences) + 1, 0);
  for (int64_t s = 0; s < num_sequences; ++s) {
    score_offset[static_cast<size_t>(s) + 1] = score_offset[static_cast<size_t>(s)] + heads * 2 * sequences.length(s);
  }
  at::Tensor sums = at::zeros({score_offset.back()}, at::kDouble);
  double* sums_data = sums.mutable_data_ptr<double>();
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t length = sequences.length(s), n = last[static_cast<size_t>(s)];
    for (size_t h = 0; h < scores[static_cast<size_t>(s)].size(); ++h) {
      at::Tensor& sh = scores[static_cast<size_t>(s)][h];
      sh.div_(row_sum.narrow(0, first_row[static_cast<size_t>(s)], n).select(1, static_cast<int64_t>(h)).unsqueeze(1));
      sh = sh.contiguous();  // now the attention A [n, m]
      std::vector<double> vertical(static_cast<size_t>(length), 0.0), slash(vertical);
      vertical_slash_add_scores(sh.const_data_ptr<double>(), local[static_cast<size_t>(s)].positions, length, n,
                                vertical, slash);
      double* out = sums_data + score_offset[static_cast<size_t>(s)] + static_cast<int64_t>(h) * 2 * length;
      std::copy(vertical.begin(), vertical.end(), out);
      std::copy(slash.begin(), slash.end(), out + length);
    }
  }
  collectives.all_reduce(sums, c10d::ReduceOp::SUM, "vertical-slash's column and diagonal sums");

  // 4. The same selection on every rank; the coverage from every rank's kept mass.
  std::vector<std::vector<VerticalSlashHeadIndex>> index(static_cast<size_t>(num_sequences));
  at::Tensor kept_mass = at::zeros({num_sequences, heads}, at::kDouble);
  for (int64_t s = 0; s < num_sequences; ++s) {
    const int64_t length = sequences.length(s), n = last[static_cast<size_t>(s)];
    index[static_cast<size_t>(s)].resize(static_cast<size_t>(heads));
    if (length == 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      const double* in = sums_data + score_offset[static_cast<size_t>(s)] + h * 2 * length;
      VerticalSlashHeadIndex& head = index[static_cast<size_t>(s)][static_cast<size_t>(h)];
      head = vertical_slash_select(std::vector<double>(in, in + length), std::vector<double>(in + length, in + 2 * length),
                                   n, params);
      kept_mass[s][h] = vertical_slash_kept_mass(head, scores[static_cast<size_t>(s)][static_cast<size_t>(h)].const_data_ptr<double>(),
                                                 local[static_cast<size_t>(s)].positions, length, n);
    }
  }
  collectives.all_reduce(kept_mass, c10d::ReduceOp::SUM, "vertical-slash's kept attention mass");
  for (int64_t s = 0; s < num_sequences; ++s) {
    if (sequences.length(s) == 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      index[static_cast<size_t>(s)][static_cast<size_t>(h)].coverage =
          kept_mass[s][h].item<double>() / static_cast<double>(last[static_cast<size_t>(s)]);
    }
  }
  const auto end = Clock::now();
  RingStepEvent event{call, false, kRingBlockMeansStep, context.rank()};
  event.start_s = std::chrono::duration<double>(start.time_since_epoch()).count();
  event.wait_s = seconds(collectives.waited());
  event.compute_s = seconds(end - start) - event.wait_s;
  context.record(event);
  return index;
}

}  // namespace sb
