#include "kernels/attention/patterns/vertical_slash/vertical_slash_ring_sums.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>

#include "kernels/attention/core/device_completion.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_index_on_device.h"

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

// Query heads per batch of one sequence's steps. A batch's [count, n, m] attention lives
// until step 3 (all of them together: Hq x n x the rank's tokens, float64), so the batch
// bounds the size of each allocation, and on a GPU also step 3's [count, n, length + n]
// float64 layout by offset (vertical_slash_score_sums): up to about 256 MiB there; about
// 16 MiB on the CPU, where the heap serves such blocks (larger ones are mapped afresh,
// and their page faults cost more than the arithmetic).
int64_t heads_per_batch(const c10::Device& device, int64_t heads, int64_t n, int64_t length) {
  const int64_t budget = device.is_cpu() ? int64_t{16} << 20 : int64_t{256} << 20;
  const int64_t per_head = std::max<int64_t>(1, 2 * n * length * static_cast<int64_t>(sizeof(double)));
  return std::clamp<int64_t>(budget / per_head, 1, std::max<int64_t>(heads, 1));
}

}  // namespace

void VerticalSlashRingSums::all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const char* what) {
  wait_for_device_work(tensor.device());  // the work before it is compute, not wait
  const auto start = Clock::now();
  context_.all_reduce(tensor, op, what, call_);
  waited_ += Clock::now() - start;
}

VerticalSlashRingSums::VerticalSlashRingSums(const at::Tensor& q, const at::Tensor& k, const RingGeometry& geometry,
                                             const VerticalSlashParams& params, double scale, RingContext& context,
                                             int64_t call)
    : context_(context), call_(call), device_(q.device()), block_size_(params.block_size), start_(Clock::now()) {
  params.validate();
  const c10::NoGradGuard no_grad;
  const PackedSequences& packed = geometry.sequences;
  const int64_t num_sequences = packed.num_sequences(), heads = q.size(1), group = q.size(1) / k.size(1);
  const auto doubles = q.options().dtype(at::kDouble);
  const auto longs = q.options().dtype(at::kLong);
  const auto on_device = [&](const std::vector<int64_t>& values) { return at::tensor(values, at::kLong).to(device_); };
  const std::vector<LocalKeys> local = local_keys_by_sequence(geometry.shards[context.rank()], packed);
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
  at::Tensor last_queries = at::zeros({first_row.back(), heads, q.size(2)}, doubles);
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
    last_queries.index_copy_(0, on_device(to_rows), q.detach().index_select(0, on_device(from_rows)).to(at::kDouble));
  }
  all_reduce(last_queries, c10d::ReduceOp::SUM, "vertical-slash's last queries");

  // 2. Scores against this rank's keys, [Hq, n, m] per sequence (every head at once, each
  // query head against its key/value head); the softmax denominators over the whole
  // sequence, [Hq, N].
  const at::Tensor kv_of_head = at::div(at::arange(heads, longs), group, "floor");
  const at::Tensor k64 = k.detach().to(at::kDouble);
  at::Tensor row_max = at::full({heads, first_row.back()}, -std::numeric_limits<double>::infinity(), doubles);
  std::vector<at::Tensor> key_positions(static_cast<size_t>(num_sequences));  // on the device
  // Per sequence, its heads in batches: [count, n, m] each, heads first .. first + count - 1.
  std::vector<std::vector<at::Tensor>> attention(static_cast<size_t>(num_sequences));
  std::vector<int64_t> batch_heads(static_cast<size_t>(num_sequences), 1);
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    if (seq.n == 0) continue;
    const LocalKeys& mine = local[static_cast<size_t>(s)];
    const at::Tensor& key_pos = key_positions[static_cast<size_t>(s)] = on_device(mine.positions);
    const at::Tensor future = key_pos.unsqueeze(0) > at::arange(seq.length - seq.n, seq.length, longs).unsqueeze(1);
    const at::Tensor sequence_keys = k64.index_select(0, on_device(mine.rows));  // [m, Hkv, D]
    const int64_t batch = batch_heads[static_cast<size_t>(s)] = heads_per_batch(device_, heads, seq.n, seq.length);
    for (int64_t h = 0; h < heads; h += batch) {
      const int64_t count = std::min(batch, heads - h);
      const at::Tensor keys = sequence_keys.index_select(1, kv_of_head.narrow(0, h, count)).permute({1, 2, 0});
      const at::Tensor queries =
          last_queries.narrow(0, first_row[static_cast<size_t>(s)], seq.n).narrow(1, h, count).permute({1, 0, 2});
      at::Tensor scores = at::bmm(queries, keys)  // [count, n, m]
                              .mul_(scale)
                              .masked_fill_(future.unsqueeze(0), -std::numeric_limits<double>::infinity());
      if (!mine.positions.empty()) {
        row_max.narrow(0, h, count).narrow(1, first_row[static_cast<size_t>(s)], seq.n).copy_(scores.amax(2));
      }
      attention[static_cast<size_t>(s)].push_back(std::move(scores));
    }
  }
  all_reduce(row_max, c10d::ReduceOp::MAX, "vertical-slash's score maxima");
  at::Tensor row_sum = at::zeros_like(row_max);
  for (int64_t s = 0; s < num_sequences; ++s) {
    const RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    const int64_t batch = batch_heads[static_cast<size_t>(s)];
    for (size_t b = 0; b < attention[static_cast<size_t>(s)].size(); ++b) {
      const int64_t h = static_cast<int64_t>(b) * batch;
      at::Tensor& a = attention[static_cast<size_t>(s)][b];
      // exp(score - max): the attention times its denominator (every query sees itself on
      // some rank, so each row's maximum is finite; future keys give exactly 0).
      a.sub_(row_max.narrow(0, h, a.size(0)).narrow(1, first_row[static_cast<size_t>(s)], seq.n).unsqueeze(2)).exp_();
      row_sum.narrow(0, h, a.size(0)).narrow(1, first_row[static_cast<size_t>(s)], seq.n).copy_(a.sum(2));
    }
  }
  all_reduce(row_sum, c10d::ReduceOp::SUM, "vertical-slash's softmax denominators");

  // 3. Column and diagonal sums, [Hq, 2, L] per sequence: this rank's keys' share (0 at
  // other ranks' keys), completed over the group. The coverage needs only each query
  // block's sums of the attention (vertical_slash_query_block_columns).
  std::vector<int64_t> score_offset(static_cast<size_t>(num_sequences) + 1, 0);
  for (int64_t s = 0; s < num_sequences; ++s) {
    score_offset[static_cast<size_t>(s) + 1] = score_offset[static_cast<size_t>(s)] + heads * 2 * packed.length(s);
  }
  at::Tensor sums = at::zeros({score_offset.back()}, doubles);
  for (int64_t s = 0; s < num_sequences; ++s) {
    RingVerticalSlashSequence& seq = sequences_[static_cast<size_t>(s)];
    if (seq.n == 0) continue;
    const at::Tensor out = sums.narrow(0, score_offset[static_cast<size_t>(s)], heads * 2 * seq.length)
                               .view({heads, 2, seq.length});
    const int64_t batch = batch_heads[static_cast<size_t>(s)];
    std::vector<at::Tensor> block_columns;
    for (size_t b = 0; b < attention[static_cast<size_t>(s)].size(); ++b) {
      const int64_t h = static_cast<int64_t>(b) * batch;
      at::Tensor& a = attention[static_cast<size_t>(s)][b];
      a.div_(row_sum.narrow(0, h, a.size(0)).narrow(1, first_row[static_cast<size_t>(s)], seq.n).unsqueeze(2));  // A
      out.narrow(0, h, a.size(0))
          .copy_(vertical_slash_score_sums(a, seq.length, seq.n, key_positions[static_cast<size_t>(s)]));
      block_columns.push_back(vertical_slash_query_block_columns(a, seq.length, seq.n, block_size_));
      a = at::Tensor();
    }
    seq.block_columns = at::cat(block_columns, 0);
  }
  all_reduce(sums, c10d::ReduceOp::SUM, "vertical-slash's column and diagonal sums");
  const at::Tensor host = sums.to(at::kCPU).contiguous();
  const double* sums_data = host.const_data_ptr<double>();
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

std::vector<double> VerticalSlashRingSums::kept_coverage(const std::vector<Item>& items, const char* what) {
  // The kept masses of each sequence's items in one batch on the device.
  std::vector<std::vector<size_t>> items_of(sequences_.size());
  for (size_t i = 0; i < items.size(); ++i) items_of[static_cast<size_t>(items[i].sequence)].push_back(i);
  at::Tensor kept_mass = at::zeros({static_cast<int64_t>(items.size())}, at::TensorOptions(device_).dtype(at::kDouble));
  for (size_t s = 0; s < sequences_.size(); ++s) {
    const RingVerticalSlashSequence& seq = sequences_[s];
    if (items_of[s].empty() || seq.n == 0) continue;
    std::vector<const VerticalSlashHeadIndex*> lists;
    std::vector<int64_t> heads, slots;
    for (const size_t i : items_of[s]) {
      lists.push_back(items[i].lists);
      heads.push_back(items[i].head);
      slots.push_back(static_cast<int64_t>(i));
    }
    const at::Tensor columns = seq.block_columns.index_select(0, at::tensor(heads, at::kLong).to(device_));
    kept_mass.index_copy_(0, at::tensor(slots, at::kLong).to(device_),
                          vertical_slash_kept_masses(columns, block_size_, lists, seq.length, seq.n, seq.positions));
  }
  all_reduce(kept_mass, c10d::ReduceOp::SUM, what);
  const at::Tensor host = kept_mass.to(at::kCPU).contiguous();
  std::vector<double> coverage(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    coverage[i] = host.const_data_ptr<double>()[i] /
                  static_cast<double>(sequences_[static_cast<size_t>(items[i].sequence)].n);
  }
  return coverage;
}

void VerticalSlashRingSums::record_event() const {
  const auto end = Clock::now();
  RingStepEvent event{call_, false, kRingSelectionStep, context_.rank()};
  event.start_s = std::chrono::duration<double>(start_.time_since_epoch()).count();
  event.wait_s = seconds(waited_);
  event.compute_s = seconds(end - start_) - event.wait_s;
  context_.record(event);
}

}  // namespace sb
