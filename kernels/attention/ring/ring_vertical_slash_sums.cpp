#include "kernels/attention/ring/ring_vertical_slash_sums.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

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

}  // namespace

void RingVerticalSlashSums::all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const char* what) {
  const auto start = Clock::now();
  if (device_.is_cpu() || context_.size() == 1) {
    context_.all_reduce(tensor, op, what, call_);
  } else {
    at::Tensor on_device = tensor.to(device_);
    context_.all_reduce(on_device, op, what, call_);
    tensor.copy_(on_device);
  }
  waited_ += Clock::now() - start;
}

RingVerticalSlashSums::RingVerticalSlashSums(const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry,
                                             const VerticalSlashParams& params, double scale, RingContext& context,
                                             int64_t call)
    : context_(context), call_(call), device_(q.device()), start_(Clock::now()) {
  params.validate();
  const c10::NoGradGuard no_grad;
  const PackedSequences& packed = geometry.sequences;
  const int64_t num_sequences = packed.num_sequences(), heads = q.size(1), group = q.size(1) / k.size(1);
  const std::vector<LocalKeys> local = local_keys_by_sequence(geometry.shards[context.rank()], packed);
  // The keys in float64 on the host (from a GPU: copied in their own type, then widened).
  const at::Tensor k64 = k.detach().cpu().to(at::kDouble);
  sequences_.resize(static_cast<size_t>(num_sequences));

  // 1. The last queries of every sequence, rows first_row[s] .. of one [N, Hq, D] tensor.
  std::vector<int64_t> first_row(static_cast<size_t>(num_sequences) + 1, 0);
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    seq.length = packed.length(s);
    seq.n = std::min(params.last_queries, seq.length);
    seq.positions = local[static_cast<size_t>(s)].positions;
    first_row[static_cast<size_t>(s) + 1] = first_row[static_cast<size_t>(s)] + seq.n;
  }
  at::Tensor last_queries = at::zeros({first_row.back(), heads, q.size(2)}, at::kDouble);
  std::vector<int64_t> from_rows, to_rows;  // this rank's last queries: its rows, their rows in last_queries
  for (int64_t s = 0; s < num_sequences; ++s) {
    const RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    const LocalKeys& mine = local[static_cast<size_t>(s)];
    for (size_t a = 0; a < mine.rows.size(); ++a) {
      if (mine.positions[a] >= seq.length - seq.n) {
        from_rows.push_back(mine.rows[a]);
        to_rows.push_back(first_row[static_cast<size_t>(s)] + mine.positions[a] - (seq.length - seq.n));
      }
    }
  }
  if (!from_rows.empty()) {
    const at::Tensor rows = at::tensor(from_rows, at::kLong).to(q.device());
    last_queries.index_copy_(0, at::tensor(to_rows, at::kLong), q.detach().index_select(0, rows).cpu().to(at::kDouble));
  }
  all_reduce(last_queries, c10d::ReduceOp::SUM, "vertical-slash's last queries");

  // 2. Scores against this rank's keys, [n, m] per (sequence, head); the softmax
  // denominators over the whole sequence.
  at::Tensor row_max = at::full({first_row.back(), heads}, -std::numeric_limits<double>::infinity(), at::kDouble);
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    const LocalKeys& mine = local[static_cast<size_t>(s)];
    if (seq.n == 0) continue;
    const at::Tensor rows = at::tensor(mine.rows, at::kLong);
    const at::Tensor key_pos = at::tensor(mine.positions, at::kLong).unsqueeze(0);
    const at::Tensor query_pos = at::arange(seq.length - seq.n, seq.length, at::kLong).unsqueeze(1);
    const at::Tensor future = key_pos > query_pos;  // [n, m]
    const at::Tensor sequence_keys = k64.index_select(0, rows);  // [m, Hkv, D]
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor keys = sequence_keys.select(1, h / group);  // [m, D]
      at::Tensor sh = at::matmul(last_queries.narrow(0, first_row[static_cast<size_t>(s)], seq.n).select(1, h), keys.t())
                          .mul_(scale)
                          .masked_fill_(future, -std::numeric_limits<double>::infinity());
      if (sh.size(1) > 0) {
        row_max.narrow(0, first_row[static_cast<size_t>(s)], seq.n).select(1, h).copy_(std::get<0>(sh.max(1)));
      }
      seq.attention.push_back(std::move(sh));
    }
  }
  all_reduce(row_max, c10d::ReduceOp::MAX, "vertical-slash's score maxima");
  at::Tensor row_sum = at::zeros_like(row_max);
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    for (size_t h = 0; h < seq.attention.size(); ++h) {
      const at::Tensor top =
          row_max.narrow(0, first_row[static_cast<size_t>(s)], seq.n).select(1, static_cast<int64_t>(h));
      at::Tensor& sh = seq.attention[h];
      sh.sub_(top.unsqueeze(1)).exp_();  // exp(score - max): the attention times the denominator
      row_sum.narrow(0, first_row[static_cast<size_t>(s)], seq.n).select(1, static_cast<int64_t>(h)).copy_(sh.sum(1));
    }
  }
  all_reduce(row_sum, c10d::ReduceOp::SUM, "vertical-slash's softmax denominators");

  // 3. Column and diagonal sums, [Hq, 2, L] per sequence, completed over the group.
  std::vector<int64_t> score_offset(static_cast<size_t>(num_sequences) + 1, 0);
  for (int64_t s = 0; s < num_sequences; ++s) {
    score_offset[static_cast<size_t>(s) + 1] = score_offset[static_cast<size_t>(s)] + heads * 2 * packed.length(s);
  }
  at::Tensor sums = at::zeros({score_offset.back()}, at::kDouble);
  double* sums_data = sums.mutable_data_ptr<double>();
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    for (size_t h = 0; h < seq.attention.size(); ++h) {
      at::Tensor& sh = seq.attention[h];
      sh.div_(row_sum.narrow(0, first_row[static_cast<size_t>(s)], seq.n).select(1, static_cast<int64_t>(h)).unsqueeze(1));
      sh = sh.contiguous();  // now the attention A [n, m]
      std::vector<double> vertical(static_cast<size_t>(seq.length), 0.0), slash(vertical);
      vertical_slash_add_scores(sh.const_data_ptr<double>(), seq.positions, seq.length, seq.n, vertical, slash);
      double* out = sums_data + score_offset[static_cast<size_t>(s)] + static_cast<int64_t>(h) * 2 * seq.length;
      std::copy(vertical.begin(), vertical.end(), out);
      std::copy(slash.begin(), slash.end(), out + seq.length);
    }
  }
  all_reduce(sums, c10d::ReduceOp::SUM, "vertical-slash's column and diagonal sums");
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    if (seq.length == 0) continue;
    for (int64_t h = 0; h < heads; ++h) {
      const double* in = sums_data + score_offset[static_cast<size_t>(s)] + h * 2 * seq.length;
      seq.vertical.emplace_back(in, in + seq.length);
      seq.slash.emplace_back(in + seq.length, in + 2 * seq.length);
    }
  }
}

std::vector<double> RingVerticalSlashSums::kept_coverage(const std::vector<Item>& items, const char* what) {
  at::Tensor kept_mass = at::zeros({static_cast<int64_t>(items.size())}, at::kDouble);
  double* mass = kept_mass.mutable_data_ptr<double>();
  for (size_t i = 0; i < items.size(); ++i) {
    const RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(items[i].sequence)];
    mass[i] = vertical_slash_kept_mass(*items[i].lists,
                                       seq.attention[static_cast<size_t>(items[i].head)].const_data_ptr<double>(),
                                       seq.positions, seq.length, seq.n);
  }
  all_reduce(kept_mass, c10d::ReduceOp::SUM, what);
  std::vector<double> coverage(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    coverage[i] = mass[i] / static_cast<double>(sequences_[static_cast<size_t>(items[i].sequence)].n);
  }
  return coverage;
}

void RingVerticalSlashSums::record_event() const {
  const auto end = Clock::now();
  RingStepEvent event{call_, false, kRingBlockMeansStep, context_.rank()};
  event.start_s = std::chrono::duration<double>(start_.time_since_epoch()).count();
  event.wait_s = seconds(waited_);
  event.compute_s = seconds(end - start_) - event.wait_s;
  context_.record(event);
}

}  // namespace sb
