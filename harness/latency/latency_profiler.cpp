#include "harness/latency/latency_profiler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/cuda.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <stdexcept>

#include "harness/common/system_info.h"
#include "harness/latency/latency_predictor.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "models/qwen2/qwen2_checkpointing.h"
#include "models/qwen2/qwen2_hf_config.h"
#include "models/qwen2/qwen2_lora.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_precision.h"

namespace sb {
namespace {

// Whether the pattern takes a budget request (a profile's budget axis).
bool has_budget(const AttentionOptions& attention) { return attention.budget_axis() != BudgetAxis::kNone; }

namespace fs = std::filesystem;
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

// One decoder layer, a head and (when asked) the whole model on one device, trained as
// the request's training options say; each method returns the sampler of one grid point,
// holding its own inputs. With TP peers, the TP rank's share joined to them as the
// trainer joins it (PipelineStage::enable_tensor_parallelism): the layer takes this
// rank's rows of the residual stream and runs its sequence-parallel collectives, the
// attention sums its statistics over the head shards, the head takes this rank's
// vocabulary with the vocabulary-parallel loss, and the whole model is a TP stage.
class LayerBench {
 public:
  explicit LayerBench(const ProfileRequest& request)
      : config_(qwen2_tensor_parallel_rank_config(request.config, request.training.tensor_parallel)),
        full_config_(request.config),
        device_(request.device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU)),
        training_(request.training),
        peers_(request.tensor_parallel_peers),
        ring_(request.context_parallel_ring),
        cp_layout_(request.training.cp_layout) {
    at::manual_seed(request.seed);
    layer_ = Qwen2DecoderLayer(config_, 0);
    layer_->to(device_);
    norm_ = Qwen2RMSNorm(config_.hidden_size, config_.rms_norm_eps);
    norm_->to(device_);
    int64_t head_rows = config_.vocab_size;
    if (peers_) {
      layer_->set_sequence_parallel(peers_->sequence_parallel);
      head_rows = peers_->vocabulary_end - peers_->vocabulary_start;
    }
    head_ = torch::nn::Linear(torch::nn::LinearOptions(config_.hidden_size, head_rows).bias(false));
    head_->to(device_);
    if (training_.lora) train_as_lora(*training_.lora);
    attention_options_ = request.attention;
    attention_ = new_attention_backend();
    if (peers_) attention_->set_head_shard_sum(peers_->head_shard_sum);
  }

  TimedPoint layer(int64_t length, int64_t budget) { return packed_layer({length}, budget); }
  // One layer over several sequences packed into one micro-batch, as the trainer runs them.
  TimedPoint packed_layer(const std::vector<int64_t>& lengths, int64_t budget) {
    const std::vector<int64_t> per_sequence(lengths.size(), budget);
    // Under CP each point has its own ring backend, so the ring's geometry is built once
    // for the point's sharding (the trainer builds it once per micro-batch for all its
    // layers, which the whole-model point pays once per run), not in every timed run.
    std::shared_ptr<AttentionBackend> backend = attention_;
    if (ring_) {
      backend = new_attention_backend();
      if (peers_) backend->set_head_shard_sum(peers_->head_shard_sum);
    }
    return layer_sample(lengths, [this, per_sequence, backend](const std::shared_ptr<const CpSharding>& sharding) {
      if (has_budget(attention_options_)) backend->set_budget_request(AttentionBudgetRequest{per_sequence, 0.0, 0});
      if (sharding) backend->set_context_parallel_sharding(sharding);
      last_layer_backend_ = backend;
      return backend;
    });
  }
  // Kept-keys axis: the kept keys per query one layer at `budget` runs on these inputs
  // (the backend's statistic after one more run of the point): below what the pattern's
  // forced keys keep, more than asked.
  int64_t kept_keys(const TimedPoint& point) {
    point();
    const std::vector<AttentionLayerStats> stats = last_layer_backend_->take_layer_stats();
    return stats.empty() || stats.front().top_k.empty() ? 0 : stats.front().top_k.front();
  }

  TimedPoint rest(int64_t length) {
    return layer_sample({length}, [this](const std::shared_ptr<const CpSharding>&) { return pass_through_; });
  }

  // The whole model (embedding, every layer at `budget`, final norm, lm_head, loss) on one
  // sequence, as a single-stage pipeline runs a micro-batch.
  TimedPoint model(int64_t length, int64_t budget) {
    if (!model_) build_model();
    const auto options = at::TensorOptions().dtype(at::kLong).device(device_);
    const MicroBatchRows rows = rows_of({length});
    const int64_t held = rows.positions.size(0);  // every token, or this CP rank's (TP ranks take all)
    const at::Tensor tokens = at::randint(0, model_->config().vocab_size, {held}, options);
    const at::Tensor labels = at::randint(0, model_->config().vocab_size, {held}, options);
    const at::Tensor positions = rows.positions;
    const PackedSequences sequences = rows.sequences;
    return [this, budget, tokens, labels, positions, sequences, sharding = rows.sharding] {
      if (has_budget(attention_options_)) model_backend_->set_budget_request(AttentionBudgetRequest{{budget}, 0.0, 0});
      if (sharding) model_backend_->set_context_parallel_sharding(sharding);
      const double ms = run_once([&] {
        if (model_step_) {
          model_step_(tokens, positions, sequences, labels).backward();
        } else {
          model_->loss_sum(tokens, positions, sequences, labels).backward();
        }
        model_backend_->take_layer_stats();  // as the trainer drains them after each micro-batch
      });
      drain_ring_work(*model_backend_);
      return ms;
    };
  }

  TimedPoint head(int64_t length) {
    const MicroBatchRows rows = rows_of({length});
    const int64_t tokens = rows.positions.size(0);  // T, or this CP rank's share of it
    const at::Tensor x = hidden(rows.rows);
    // Token ids of the whole vocabulary with TP peers (the loss finds each label's rank),
    // else of the share's.
    const int64_t vocabulary = peers_ ? full_config_.vocab_size : config_.vocab_size;
    const at::Tensor labels = at::randint(0, vocabulary, {tokens}, at::TensorOptions().dtype(at::kLong).device(device_));
    return [this, x, labels, tokens] {
      return run_once([&] {
        Qwen2AutocastGuard autocast(device_.type(), training_.precision);
        if (peers_) {
          const at::Tensor normed = peers_->sequence_parallel->gather(norm_->forward(x), tokens);  // [T, H]
          HeadLossOptions vocabulary;
          vocabulary.vocabulary_start = peers_->vocabulary_start;
          vocabulary.reduce = peers_->vocabulary_reduce;
          head_cross_entropy_sum(normed, head_->weight, labels, vocabulary).backward();
        } else {
          head_cross_entropy_sum(norm_->forward(x), head_->weight, labels).backward();
        }
      });
    };
  }

  // What the timed layer is, read from the layer itself (the profile's context records
  // it): {"parameters", "trainable_parameters", "lora_targets": [projections with an
  // adapter], "activation_checkpointing": whether a forward through run_layer hangs its
  // output on the checkpoint's backward node}.
  nlohmann::json timed_layer() {
    const at::Tensor probe_positions = at::arange(2, at::TensorOptions().dtype(at::kLong).device(device_));
    const auto [cos, sin] = qwen2_rotary_tables(probe_positions, config_);
    const at::Tensor probe = run_layer(hidden(stream_rows(2)), cos, sin, PackedSequences::from_lengths({2}), pass_through_);
    const bool checkpointed = probe.grad_fn() != nullptr && probe.grad_fn()->name() == "Qwen2CheckpointedLayerBackward";
    int64_t parameters = 0, trainable = 0;
    for (const at::Tensor& p : layer_->parameters()) {
      parameters += p.numel();
      if (p.requires_grad()) trainable += p.numel();
    }
    nlohmann::json lora_targets = nlohmann::json::array();
    for (const auto& item : layer_->named_modules("", /*include_self=*/false)) {
      const auto* projection = item.value()->as<Qwen2Linear>();
      if (projection != nullptr && projection->has_lora()) lora_targets.push_back(leaf_name(item.key()));
    }
    return {{"parameters", parameters},
            {"trainable_parameters", trainable},
            {"lora_targets", lora_targets},
            {"activation_checkpointing", checkpointed}};
  }

 private:
  static std::string leaf_name(const std::string& module_path) {
    return module_path.substr(module_path.rfind('.') + 1);  // "self_attn.q_proj" -> "q_proj"
  }

  // As qwen2_apply_lora does to every layer of a model: everything frozen, adapters on
  // the target projections (the only trainable parameters). The final norm and the head
  // are frozen too, so the head point computes only the gradient of its input.
  void train_as_lora(const Qwen2LoraOptions& lora) {
    for (torch::nn::Module* module : {static_cast<torch::nn::Module*>(layer_.get()),
                                      static_cast<torch::nn::Module*>(norm_.get()),
                                      static_cast<torch::nn::Module*>(head_.get())}) {
      for (at::Tensor& p : module->parameters()) p.set_requires_grad(false);
    }
    size_t added = 0;
    for (const auto& item : layer_->named_modules("", /*include_self=*/false)) {
      auto* projection = item.value()->as<Qwen2Linear>();
      const auto& targets = lora.target_modules;
      if (projection == nullptr || std::find(targets.begin(), targets.end(), leaf_name(item.key())) == targets.end()) {
        continue;
      }
      projection->add_lora(lora.rank, lora.alpha, lora.dropout);
      // One TP rank's share: its row-parallel adapters draw the whole input's dropout mask,
      // as in training (Qwen2Linear::set_input_shard).
      const std::string leaf = leaf_name(item.key());
      if (training_.tensor_parallel > 1 && (leaf == "o_proj" || leaf == "down_proj")) {
        projection->set_input_shard(peers_ ? peers_->sequence_parallel->rank() : 0, training_.tensor_parallel);
      }
      ++added;
    }
    if (added != lora.target_modules.size()) {
      throw std::logic_error("LayerBench: found " + std::to_string(added) + " of the " +
                             std::to_string(lora.target_modules.size()) + " LoRA target projections in the layer");
    }
  }

  // The whole model as the trainer sets it up (harness/train/model_training_options.h):
  // with TP peers, a one-stage pipeline of this rank's shards joined to them; without,
  // the rank's share of the architecture on its own.
  void build_model() {
    model_backend_ = new_attention_backend();
    model_ = Qwen2ForCausalLM(peers_ ? full_config_ : config_, model_backend_);
    model_->set_precision(training_.precision);
    model_->set_activation_checkpointing(training_.activation_checkpointing);
    if (training_.lora) qwen2_apply_lora(model_, *training_.lora);
    if (peers_) {
      model_backend_->set_head_shard_sum(peers_->head_shard_sum);
      model_step_ = peers_->tensor_parallel_model(model_, model_backend_, device_);
    } else {
      model_->to(device_);
      model_->train();
    }
  }

  // Rows of a T-token residual stream this process holds: ceil(T / tp) of them under
  // sequence parallelism.
  int64_t stream_rows(int64_t tokens) const {
    return peers_ ? peers_->sequence_parallel->local_rows(tokens) : tokens;
  }

  at::Tensor hidden(int64_t length) {
    return at::randn({length, config_.hidden_size}, at::TensorOptions().device(device_)).requires_grad_(true);
  }

  // What this rank holds of a micro-batch of sequences of `lengths`: all of it, or under
  // context parallelism its CP share (the trainer's dealing, Trainer::shard_for_context_parallelism).
  struct MicroBatchRows {
    at::Tensor positions;       // [tokens this rank runs] int64: restarting at 0 per sequence
    PackedSequences sequences;  // how the layers see them (one run of the rank's tokens under CP)
    std::shared_ptr<const CpSharding> sharding;  // null without CP
    int64_t rows = 0;           // residual-stream rows (ceil(T / tp) under sequence parallelism)
  };
  MicroBatchRows rows_of(const std::vector<int64_t>& lengths) const {
    const auto index = at::TensorOptions().dtype(at::kLong).device(device_);
    MicroBatchRows out;
    out.sequences = PackedSequences::from_lengths(lengths);
    if (ring_) {
      out.sharding = std::make_shared<const CpSharding>(CpSharding::build(out.sequences, ring_->size(), cp_layout_));
      out.positions = at::tensor(out.sharding->positions_of(ring_->rank()), at::kLong).to(device_);
      const int64_t held = out.sharding->size_of(ring_->rank());
      out.sequences = PackedSequences::from_lengths({held});
      out.rows = stream_rows(held);  // beside TP, the CP share's sequence-parallel rows
      return out;
    }
    std::vector<at::Tensor> ranges;
    for (int64_t length : lengths) ranges.push_back(at::arange(length, index));
    out.positions = at::cat(ranges);
    out.rows = stream_rows(out.positions.size(0));
    return out;
  }

  // The method's attention: a ring over the CP ranks under context parallelism.
  std::shared_ptr<AttentionBackend> new_attention_backend() const {
    if (ring_) return make_context_parallel_backend(attention_options_, ring_);
    return std::shared_ptr<AttentionBackend>(attention_options_.make_backend());
  }

  // A ring backend keeps every micro-batch's work for the trainer's records; the profile
  // has no use for it, so it is dropped after each run instead of growing for the whole
  // measurement.
  static void drain_ring_work(AttentionBackend& backend) {
    if (auto* ring = dynamic_cast<RingAttentionBackend*>(&backend)) ring->take_work();
  }

  // `backend` is called before every run with the point's CP sharding (null without CP):
  // it sets the point's budget (and sharding) on a shared backend.
  TimedPoint layer_sample(const std::vector<int64_t>& lengths,
                          std::function<std::shared_ptr<AttentionBackend>(const std::shared_ptr<const CpSharding>&)> backend) {
    const MicroBatchRows micro_batch = rows_of(lengths);
    const int64_t rows = micro_batch.rows;
    const at::Tensor x = hidden(rows);
    const auto [cos, sin] = qwen2_rotary_tables(micro_batch.positions, config_);
    const PackedSequences sequences = micro_batch.sequences;
    const at::Tensor grad = at::randn({rows, config_.hidden_size}, x.options().requires_grad(false));
    return [this, backend = std::move(backend), x, cos = cos, sin = sin, sequences, grad,
            sharding = micro_batch.sharding] {
      const std::shared_ptr<AttentionBackend> attention = backend(sharding);
      const double ms = run_once([&] {
        Qwen2AutocastGuard autocast(device_.type(), training_.precision);
        run_layer(x, cos, sin, sequences, attention).to(at::kFloat).backward(grad);
      });
      drain_ring_work(*attention);
      return ms;
    };
  }

  // The layer's forward, checkpointed as Qwen2ForCausalLM::forward_layer runs a layer of
  // a run with activation checkpointing (its backward runs the forward again).
  at::Tensor run_layer(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
                       const PackedSequences& sequences, const std::shared_ptr<AttentionBackend>& attention) {
    if (training_.activation_checkpointing) {
      return qwen2_checkpointed_layer_forward(layer_.ptr(), x, cos, sin, sequences, attention);
    }
    return layer_->forward(x, cos, sin, sequences, *attention);
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

  Qwen2Config config_;       // the TP rank's share of the architecture
  Qwen2Config full_config_;  // the whole architecture
  c10::Device device_;
  LatencyProfileTraining training_;
  std::shared_ptr<const ProfileTensorParallelPeers> peers_;  // null: no TP peers
  std::shared_ptr<RingContext> ring_;  // null: no CP peers
  CpLayout cp_layout_;
  Qwen2DecoderLayer layer_{nullptr};
  Qwen2RMSNorm norm_{nullptr};
  torch::nn::Linear head_{nullptr};
  std::shared_ptr<AttentionBackend> attention_;
  std::shared_ptr<AttentionBackend> last_layer_backend_;  // the backend the last layer point ran with
  std::shared_ptr<AttentionBackend> pass_through_ = std::make_shared<PassThroughAttention>();
  AttentionOptions attention_options_;
  std::shared_ptr<AttentionBackend> model_backend_;
  Qwen2ForCausalLM model_{nullptr};
  ProfileTensorParallelPeers::ModelStep model_step_;  // with TP peers: model_ as this rank's TP stage
};

// Each repetition's slowest TP rank: the samples of every point, element by element, the
// maximum over the ranks (one all-reduce).
std::vector<LatencyStat> slowest_rank_stats(const std::vector<LatencyStat>& stats,
                                            const std::function<void(std::vector<double>&)>& max_over_ranks) {
  std::vector<double> flat;
  for (const LatencyStat& stat : stats) flat.insert(flat.end(), stat.samples.begin(), stat.samples.end());
  max_over_ranks(flat);
  auto next = flat.begin();
  std::vector<LatencyStat> out;
  for (const LatencyStat& stat : stats) {
    const auto end = next + static_cast<std::ptrdiff_t>(stat.samples.size());
    out.push_back(latency_stat_from_samples(std::vector<double>(next, end)));
    next = end;
  }
  return out;
}

// Times the points, every TP or CP rank together when the request has peers.
std::vector<LatencyStat> measure_points(const ProfileRequest& request, const std::vector<TimedPoint>& points,
                                        const ProgressFn& progress) {
  const std::vector<LatencyStat> stats =
      measure_interleaved(points, request.warmup, request.repetitions, request.seed, progress);
  std::vector<LatencyStat> out = stats;
  // Beside each other, the slowest of the TP group, then of the CP ring: of every rank.
  if (request.tensor_parallel_peers) out = slowest_rank_stats(out, request.tensor_parallel_peers->max_over_ranks);
  if (const std::shared_ptr<RingContext>& ring = request.context_parallel_ring) {
    // On the ranks' device: an NCCL ring takes device tensors only.
    const c10::Device device = request.device == "cuda" ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
    out = slowest_rank_stats(out, [&ring, device](std::vector<double>& values) {
      at::Tensor slowest = at::tensor(values, at::kDouble).to(device);
      ring->all_reduce(slowest, c10d::ReduceOp::MAX, "the profile's slowest samples", ring->next_call());
      slowest = slowest.cpu();
      std::copy(slowest.data_ptr<double>(), slowest.data_ptr<double>() + slowest.numel(), values.begin());
    });
  }
  return out;
}

void check_request(const ProfileRequest& r) {
  if (r.model.empty()) throw std::invalid_argument("--model: name a preset or a Hugging Face folder");
  if (r.config.hidden_size <= 0) {
    throw std::invalid_argument("the request's model config is unset (fill it with profile_model_config)");
  }
  if (r.device != "cpu" && r.device != "cuda") throw std::invalid_argument("--device must be cpu or cuda");
  if (r.device == "cuda" && !torch::cuda::is_available()) {
    throw std::invalid_argument(
        "--device cuda: no CUDA device is visible here (check nvidia-smi and CUDA_VISIBLE_DEVICES, or use --device cpu)");
  }
  if (has_budget(r.attention) && r.budgets.empty()) {
    throw std::invalid_argument("--budgets: " + r.attention.name() + " needs at least one budget");
  }
  if (r.warmup < 0 || r.repetitions < 1) throw std::invalid_argument("need warmup >= 0 and repetitions >= 1");
  if (r.training.lora) qwen2_validate_lora_options(*r.training.lora);
  const std::string& collectives = r.training.tensor_parallel_collectives;
  const auto& peers = r.tensor_parallel_peers;
  if (r.training.tensor_parallel == 1 && (peers || !collectives.empty())) {
    throw std::invalid_argument("TP collectives without tensor parallelism (tensor_parallel is 1)");
  }
  if (!collectives.empty() && !peers) {
    throw std::invalid_argument("timing with the " + collectives + " TP collectives needs the " +
                                std::to_string(r.training.tensor_parallel) +
                                " TP ranks together (`sparsebalance profile --tensor-parallel` starts them)");
  }
  const int64_t cp = r.training.context_parallel;
  if (cp > 1) {
    if (!r.context_parallel_ring) {
      throw std::invalid_argument("timing a CP micro-batch needs the " + std::to_string(cp) +
                                  " CP ranks together (`sparsebalance profile --context-parallel` starts them)");
    }
    // A flat ring (cp_inner 0) is one inner ring of every rank.
    const int64_t inner = r.training.cp_inner == 0 ? cp : r.training.cp_inner;
    if (r.context_parallel_ring->size() != cp || r.context_parallel_ring->inner() != inner) {
      throw std::invalid_argument("the CP ring has " + std::to_string(r.context_parallel_ring->size()) +
                                  " ranks (inner " + std::to_string(r.context_parallel_ring->inner()) +
                                  "), the request's context_parallel is " + std::to_string(cp) + " (inner " +
                                  std::to_string(r.training.cp_inner) + ")");
    }
  } else if (r.context_parallel_ring) {
    throw std::invalid_argument("a CP ring without context parallelism (context_parallel is 1)");
  }
  if (peers) {
    if (peers->sequence_parallel->size() != r.training.tensor_parallel) {
      throw std::invalid_argument("the tensor-parallel peers are " + std::to_string(peers->sequence_parallel->size()) +
                                  " ranks, the request's tensor_parallel is " +
                                  std::to_string(r.training.tensor_parallel));
    }
    if (collectives != peers->collectives) {
      throw std::invalid_argument("the request times " + (collectives.empty() ? "without TP collectives" : collectives) +
                                  ", but its peers' collectives are " + peers->collectives);
    }
  }
  for (int64_t length : r.seq_lens) {
    if (length > qwen2_position_limit(r.config)) {
      throw std::invalid_argument("--seq-lens: " + std::to_string(length) + " exceeds the model's positions");
    }
  }
}

}  // namespace

bool profile_model_is_folder(const std::string& model) {
  const std::vector<std::string> presets = qwen2_preset_names();
  return std::find(presets.begin(), presets.end(), model) == presets.end();
}

Qwen2Config profile_model_config(const std::string& model) {
  if (!profile_model_is_folder(model)) return qwen2_preset(model);
  const fs::path dir(model);
  if (!fs::is_directory(dir) || !fs::exists(dir / "config.json")) {
    std::string presets;
    for (const std::string& name : qwen2_preset_names()) presets += (presets.empty() ? "" : ", ") + name;
    throw std::invalid_argument("model \"" + model + "\" is neither a preset (" + presets + ") nor a " +
                                (fs::is_directory(dir) ? "folder with config.json" : "folder"));
  }
  Qwen2Config config = qwen2_config_from_hf_file(dir / "config.json");
  // Named as the manifest names a model read from a folder: after the folder.
  fs::path named = fs::absolute(dir).lexically_normal();
  if (named.filename().empty()) named = named.parent_path();
  config.name = named.filename().string();
  return config;
}

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
  LatencyProfile p;
  p.kind = "measured";
  p.model = latency_profile_model_json(request.config);
  // Where `profile --check` finds the model again; a preset is found by its name.
  if (profile_model_is_folder(request.model)) p.model["from"] = fs::absolute(request.model).lexically_normal().string();
  p.attention = request.attention.name();
  for (const auto& [field, value] : request.attention.pattern().profile_fields()) p.attention_fields[field] = value;
  p.device = request.device;
  p.training = request.training;
  p.warmup = request.warmup;
  p.repetitions = request.repetitions;
  p.seq_lens = request.seq_lens;
  p.budgets = has_budget(request.attention) ? request.budgets : std::vector<int64_t>{0};
  // The whole model runs at the method's default budget when it is on the grid, else at
  // the grid budget nearest below it (the validated profile names a grid budget); on the
  // kept-keys axis the default is the kept keys its estimators assume before any report.
  const int64_t default_budget = request.attention.pattern().default_budget();
  p.model_budget = p.budgets.front();
  for (int64_t k : p.budgets) {
    if (k <= std::max<int64_t>(default_budget, p.budgets.front())) p.model_budget = k;
  }
  p.context = collect_system_info();
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
  // After the points have drawn their inputs, so that the probe leaves them as they were.
  p.context["timed_layer"] = bench.timed_layer();
  const std::vector<LatencyStat> stats = measure_points(request, points, progress);
  p.packed_ms = stats.back();
  if (request.attention.budget_axis() == BudgetAxis::kKeptKeys) {
    // Per length, the points of its budgets lead its block of points (see above).
    const size_t per_length = p.budgets.size() + 3;
    nlohmann::json kept = nlohmann::json::array();
    for (size_t i = 0; i < p.seq_lens.size(); ++i) {
      nlohmann::json row = nlohmann::json::array();
      for (size_t j = 0; j < p.budgets.size(); ++j) row.push_back(bench.kept_keys(points[i * per_length + j]));
      kept.push_back(std::move(row));
    }
    p.context["kept_keys_per_query"] = std::move(kept);
  }
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

ProfileCheck check_latency_profile(const LatencyProfile& profile, const AttentionOptions& attention, int64_t warmup,
                                   int64_t repetitions, const ProgressFn& progress,
                                   std::shared_ptr<const ProfileTensorParallelPeers> tensor_parallel_peers,
                                   std::shared_ptr<RingContext> context_parallel_ring) {
  if (profile.kind != "measured") throw std::invalid_argument("only measured profiles can be re-measured");

  ProfileRequest request;
  const std::string name = profile.model.is_object() ? profile.model.value("preset", "") : "";
  request.model = profile.model.is_object() ? profile.model.value("from", name) : name;
  request.config = profile_model_config(request.model);
  const nlohmann::json measured_architecture = latency_profile_architecture(profile.model);
  const nlohmann::json architecture = latency_profile_architecture(latency_profile_model_json(request.config));
  if (architecture != measured_architecture) {
    throw std::invalid_argument("the profile's model " + measured_architecture.dump() + " is not the architecture of " +
                                request.model + " now (" + architecture.dump() + ")");
  }
  request.attention = attention;
  request.device = profile.device;
  request.training = profile.training;
  request.seq_lens = profile.seq_lens;
  request.budgets = profile.budgets;
  request.warmup = warmup;
  request.repetitions = repetitions;
  request.seed = profile.context.value("seed", uint64_t{0}) + 1;  // other inputs than the profile's
  request.tensor_parallel_peers = std::move(tensor_parallel_peers);
  request.context_parallel_ring = std::move(context_parallel_ring);
  check_request(request);
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
  const std::vector<LatencyStat> measured = measure_points(request, points, progress);
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
