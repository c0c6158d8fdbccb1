#include "harness/latency/latency_profiler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <stdexcept>

#include "harness/common/system_info.h"
#include "harness/latency/latency_predictor.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {
namespace {

using Clock = std::chrono::steady_clock;

// [our rule] Sequences in the profile's packed point (LatencyProfile::packed_ms).
constexpr int64_t kPackedCount = 4;

// The attention of a layer replaced by its input q (same shape as the output): what is
// left of the layer is what the attention pattern does not change.
class PassThroughAttention : public AttentionBackend {
 public:
  std::string name() const override { return "pass-through"; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& /*k*/, const at::Tensor& /*v*/,
                     const PackedSequences& /*sequences*/, double /*scale*/, int64_t /*layer*/) override {
    return q.clone();
  }
  at::Tensor forward_cached(const at::Tensor& q, const at::Tensor&, const at::Tensor&, double) override {
    return q.clone();
  }
};

// One decoder layer, a head and (when asked) the whole model on one device; each method
// returns the sampler of one grid point, holding its own inputs.
class LayerBench {
 public:
  LayerBench(const ProfileRequest& request)
      : config_(qwen2_preset(request.preset)),
        device_(request.device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU)),
        precision_(qwen2_precision_from_name(request.precision)) {
    at::manual_seed(request.seed);
    layer_ = Qwen2DecoderLayer(config_, 0);
    layer_->to(device_);
    norm_ = Qwen2RMSNorm(config_.hidden_size, config_.rms_norm_eps);
    norm_->to(device_);
    head_ = torch::nn::Linear(torch::nn::LinearOptions(config_.hidden_size, config_.vocab_size).bias(false));
    head_->to(device_);
    attention_ = make_attention_backend(request.attention);
    attention_options_ = request.attention;
  }

  TimedPoint layer(int64_t length, int64_t budget) { return packed_layer({length}, budget); }
  // One layer over several sequences packed into one micro-batch, as the trainer runs them.
  TimedPoint packed_layer(const std::vector<int64_t>& lengths, int64_t budget) {
    const std::vector<int64_t> per_sequence(lengths.size(), budget);
    return layer_sample(lengths, [this, per_sequence]() -> AttentionBackend& {
      if (attention_->name() == "moba") attention_->set_budget_request(AttentionBudgetRequest{per_sequence, 0.0, 0});
      return *attention_;
    });
  }
  TimedPoint rest(int64_t length) {
    return layer_sample({length}, [this]() -> AttentionBackend& { return pass_through_; });
  }

  // The whole model (embedding, every layer at `budget`, final norm, lm_head, loss) on one
  // sequence, as a single-stage pipeline runs a micro-batch.
  TimedPoint model(int64_t length, int64_t budget) {
    if (!model_) {
      model_backend_ = std::shared_ptr<AttentionBackend>(make_attention_backend(attention_options_));
      model_ = Qwen2ForCausalLM(config_, model_backend_);
      model_->to(device_);
      model_->set_precision(precision_);
      model_->train();
    }
    const auto options = at::TensorOptions().dtype(at::kLong).device(device_);
    const at::Tensor tokens = at::randint(0, config_.vocab_size, {length}, options);
    const at::Tensor labels = at::randint(0, config_.vocab_size, {length}, options);
    const at::Tensor positions = at::arange(length, options);
    const PackedSequences sequences = PackedSequences::from_lengths({length});
    return [this, budget, tokens, labels, positions, sequences] {
      if (model_backend_->name() == "moba") model_backend_->set_budget_request(AttentionBudgetRequest{{budget}, 0.0, 0});
      return run_once([&] {
        const at::Tensor logits = model_->forward(tokens, positions, sequences);
        at::cross_entropy_loss(logits, labels).backward();
        model_backend_->take_layer_stats();  // as the trainer drains them after each micro-batch
      });
    };
  }

  TimedPoint head(int64_t length) {
    const at::Tensor x = hidden(length);
    const at::Tensor labels = at::randint(0, config_.vocab_size, {length}, at::TensorOptions().dtype(at::kLong).device(device_));
    return [this, x, labels] {
      return run_once([&] {
        Qwen2AutocastGuard autocast(device_.type(), precision_);
        const at::Tensor logits = head_->forward(norm_->forward(x)).to(at::kFloat);
        at::cross_entropy_loss(logits, labels).backward();
      });
    };
  }

 private:
  at::Tensor hidden(int64_t length) {
    return at::randn({length, config_.hidden_size}, at::TensorOptions().device(device_)).requires_grad_(true);
  }

  // `backend` is called before every run: it sets the point's budget on a shared backend.
  // Positions restart at 0 in every packed sequence.
  TimedPoint layer_sample(const std::vector<int64_t>& lengths, std::function<AttentionBackend&()> backend) {
    const auto index = at::TensorOptions().dtype(at::kLong).device(device_);
    std::vector<at::Tensor> ranges;
    for (int64_t length : lengths) ranges.push_back(at::arange(length, index));
    const at::Tensor positions = at::cat(ranges);
    const int64_t total = positions.size(0);
    const at::Tensor x = hidden(total);
    const auto [cos, sin] = qwen2_rotary_tables(positions, config_);
    const PackedSequences sequences = PackedSequences::from_lengths(lengths);
    const at::Tensor grad = at::randn({total, config_.hidden_size}, x.options().requires_grad(false));
    return [this, backend = std::move(backend), x, cos = cos, sin = sin, sequences, grad] {
      AttentionBackend& attention = backend();
      return run_once([&] {
        Qwen2AutocastGuard autocast(device_.type(), precision_);
        const at::Tensor y = layer_->forward(x, cos, sin, sequences, attention);
        y.to(at::kFloat).backward(grad);
      });
    };
  }

  template <typename Step>
  double run_once(Step&& step) {
    layer_->zero_grad();
    head_->zero_grad();
    norm_->zero_grad();
    if (model_) model_->zero_grad();
    if (device_.is_cuda()) torch::cuda::synchronize();
    const auto start = Clock::now();
    step();
    if (device_.is_cuda()) torch::cuda::synchronize();
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  }

  Qwen2Config config_;
  c10::Device device_;
  Qwen2Precision precision_;
  Qwen2DecoderLayer layer_{nullptr};
  Qwen2RMSNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
  std::unique_ptr<AttentionBackend> attention_;
  PassThroughAttention pass_through_;
  AttentionOptions attention_options_;
  std::shared_ptr<AttentionBackend> model_backend_;
  Qwen2ForCausalLM model_{nullptr};
};

void check_request(const ProfileRequest& r) {
  qwen2_preset(r.preset);  // throws with the known names
  if (r.device != "cpu" && r.device != "cuda") throw std::invalid_argument("--device must be cpu or cuda");
  if (r.device == "cuda" && !torch::cuda::is_available()) {
    throw std::invalid_argument("--device cuda: no CUDA device is available here");
  }
  if (r.attention.is_moba() && r.budgets.empty()) throw std::invalid_argument("--budgets: MoBA needs at least one budget");
  if (r.warmup < 0 || r.repetitions < 1) throw std::invalid_argument("need warmup >= 0 and repetitions >= 1");
  for (int64_t length : r.seq_lens) {
    if (length > qwen2_preset(r.preset).max_position_embeddings) {
      throw std::invalid_argument("--seq-lens: " + std::to_string(length) + " exceeds the model's positions");
    }
  }
}

}  // namespace

std::vector<LatencyStat> measure_interleaved(const std::vector<TimedPoint>& points, int64_t warmup,
                                             int64_t repetitions, uint64_t seed, const ProgressFn& progress) {
  if (warmup < 0 || repetitions < 1) {
    throw std::invalid_argument("measure_interleaved: need warmup >= 0 and repetitions >= 1 (got " +
                                std::to_string(warmup) + ", " + std::to_string(repetitions) + ")");
  }
  std::mt19937_64 rng(seed);
  std::vector<size_t> order(points.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<std::vector<double>> samples(points.size());
  for (int64_t round = 0; round < warmup + repetitions; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      const double ms = points[i]();
      if (round >= warmup) samples[i].push_back(ms);
    }
    if (round >= warmup && progress) {
      progress("round " + std::to_string(round - warmup + 1) + "/" + std::to_string(repetitions) + " of " +
               std::to_string(points.size()) + " points timed");
    }
  }
  std::vector<LatencyStat> stats;
  for (std::vector<double>& point : samples) stats.push_back(latency_stat_from_samples(std::move(point)));
  return stats;
}

LatencyProfile measure_latency_profile(const ProfileRequest& request, const ProgressFn& progress) {
  check_request(request);
  const Qwen2Config& config = qwen2_preset(request.preset);
  LatencyProfile p;
  p.kind = "measured";
  p.model = latency_profile_model_json(config);
  p.attention = request.attention.name();
  p.block_size = request.attention.is_moba() ? request.attention.block_size : 0;
  p.device = request.device;
  p.warmup = request.warmup;
  p.repetitions = request.repetitions;
  p.seq_lens = request.seq_lens;
  p.budgets = request.attention.is_moba() ? request.budgets : std::vector<int64_t>{0};
  // The whole model runs at the method's default budget when it is on the grid, else at
  // the grid budget nearest below it (the validated profile names a grid budget).
  p.model_budget = p.budgets.front();
  for (int64_t k : p.budgets) {
    if (k <= std::max<int64_t>(request.attention.top_k, p.budgets.front())) p.model_budget = k;
  }
  p.context = collect_system_info();
  p.context["precision"] = request.precision;
  p.context["seed"] = request.seed;

  LayerBench bench(request);
  // Per length: the layer at every budget, then rest, head and the whole model; last, one
  // layer over kPackedCount packed sequences of the shortest length at the smallest budget.
  std::vector<TimedPoint> points;
  for (int64_t length : p.seq_lens) {
    for (int64_t k : p.budgets) points.push_back(bench.layer(length, k));
    points.push_back(bench.rest(length));
    points.push_back(bench.head(length));
    points.push_back(bench.model(length, p.model_budget));
  }
  p.packed_count = kPackedCount;
  points.push_back(bench.packed_layer(std::vector<int64_t>(kPackedCount, p.seq_lens.front()), p.budgets.front()));
  const std::vector<LatencyStat> stats =
      measure_interleaved(points, request.warmup, request.repetitions, request.seed, progress);
  p.packed_ms = stats.back();
  auto next = stats.begin();
  for (int64_t length : p.seq_lens) {
    std::vector<LatencyStat> row(next, next + static_cast<std::ptrdiff_t>(p.budgets.size()));
    next += static_cast<std::ptrdiff_t>(p.budgets.size());
    p.layer_ms.push_back(std::move(row));
    p.rest_ms.push_back(*next++);
    p.head_ms.push_back(*next++);
    p.model_ms.push_back(*next++);
    if (progress) {
      std::string line = "L=" + std::to_string(length) + ": layer";
      for (size_t j = 0; j < p.budgets.size(); ++j) {
        line += " k=" + std::to_string(p.budgets[j]) + " " + std::to_string(p.layer_ms.back()[j].median);
      }
      progress(line + " ms, rest " + std::to_string(p.rest_ms.back().median) + " ms, head " +
               std::to_string(p.head_ms.back().median) + " ms, whole model " +
               std::to_string(p.model_ms.back().median) + " ms");
    }
  }
  if (progress) {
    progress("packed: " + std::to_string(kPackedCount) + " x " + std::to_string(p.seq_lens.front()) +
             " tokens at k=" + std::to_string(p.budgets.front()) + ": layer " + std::to_string(p.packed_ms->median) +
             " ms");
  }
  p.validate();
  return p;
}

std::string packed_lengths_text(const ProfileCheckPoint& point) {
  std::string text;
  for (int64_t length : point.packed_lengths) text += (text.empty() ? "" : "+") + std::to_string(length);
  return text;
}

ProfileCheck check_latency_profile(const LatencyProfile& profile, int64_t warmup, int64_t repetitions,
                                   const ProgressFn& progress) {
  if (profile.kind != "measured") throw std::invalid_argument("only measured profiles can be re-measured");
  ProfileRequest request;
  request.preset = profile.model.at("preset").get<std::string>();
  request.attention = AttentionOptions{attention_kind_options().from_name(profile.attention), profile.block_size > 0 ? profile.block_size : 256, 32};
  request.device = profile.device;
  request.precision = profile.context.value("precision", "fp32");
  request.warmup = warmup;
  request.repetitions = repetitions;
  request.seed = profile.context.value("seed", uint64_t{0}) + 1;  // other inputs than the profile's
  check_request(ProfileRequest{request.preset, request.attention, request.device, request.precision,
                               profile.seq_lens, profile.budgets, warmup, repetitions, request.seed});
  // Held out: midpoints between neighbouring lengths x between neighbouring budgets.
  std::vector<int64_t> lengths, budgets;
  for (size_t i = 0; i + 1 < profile.seq_lens.size(); ++i) {
    lengths.push_back((profile.seq_lens[i] + profile.seq_lens[i + 1]) / 2);
  }
  for (size_t j = 0; j + 1 < profile.budgets.size(); ++j) {
    budgets.push_back((profile.budgets[j] + profile.budgets[j + 1]) / 2);
  }
  if (budgets.empty()) budgets = profile.budgets;
  const LatencyPredictor predictor(profile);
  LayerBench bench(request);
  // Single sequences at every (length, budget) midpoint; then, at each length midpoint and
  // the middle held-out budget, that many tokens packed as three sequences (1/2, 1/4, 1/4),
  // which tests the packing rule (LatencyPredictor::packed_layer_ms).
  std::vector<ProfileCheckPoint> planned;
  for (int64_t length : lengths) {
    for (int64_t k : budgets) planned.push_back({length, k, predictor.layer_ms(length, k), {}, 0, {}});
  }
  const int64_t packed_k = budgets[budgets.size() / 2];
  for (int64_t length : lengths) {
    const int64_t quarter = length / 4;
    if (quarter < 1) continue;
    const std::vector<int64_t> parts{length - 2 * quarter, quarter, quarter};
    planned.push_back({length, packed_k, predictor.packed_layer_ms(parts, packed_k), {}, 0, parts});
  }
  std::vector<TimedPoint> points;
  for (const ProfileCheckPoint& p : planned) {
    points.push_back(
        bench.packed_layer(p.packed_lengths.empty() ? std::vector<int64_t>{p.seq_len} : p.packed_lengths, p.budget));
  }
  const std::vector<LatencyStat> measured =
      measure_interleaved(points, warmup, repetitions, request.seed, progress);
  ProfileCheck check;
  for (size_t i = 0; i < planned.size(); ++i) {
    ProfileCheckPoint point = std::move(planned[i]);
    point.measured = measured[i];
    point.abs_pct_error = 100.0 * std::abs(point.predicted_ms - point.measured.median) / point.measured.median;
    if (progress) {
      std::string what = "L=" + std::to_string(point.seq_len);
      if (!point.packed_lengths.empty()) what += " packed as " + packed_lengths_text(point);
      progress(what + " k=" + std::to_string(point.budget) + ": predicted " + std::to_string(point.predicted_ms) +
               " ms, measured " + std::to_string(point.measured.median) + " ms (" +
               std::to_string(point.abs_pct_error) + "%)");
    }
    (point.packed_lengths.empty() ? check.points : check.packed_points).push_back(std::move(point));
  }
  const auto mape = [](const std::vector<ProfileCheckPoint>& points) {
    double sum = 0;
    for (const ProfileCheckPoint& p : points) sum += p.abs_pct_error;
    return points.empty() ? 0.0 : sum / static_cast<double>(points.size());
  };
  check.mape = mape(check.points);
  check.packed_mape = mape(check.packed_points);
  return check;
}

}  // namespace sb
