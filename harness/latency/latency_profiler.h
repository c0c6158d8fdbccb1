#pragma once
// Measures a latency profile (latency_profile.h) on this machine: one decoder layer of a
// model (a preset or a Hugging Face folder), forward + backward, trained as the request's
// training options say (LoRA adapters on the target projections with the base frozen,
// activation checkpointing, precision), on one sequence of each length at each budget, after
// warm-up, as the median and interquartile range of `repetitions` timings (raw samples
// kept). Also measures, per length:
//   rest   the same layer with a pass-through attention (its output is q): norms,
//          projections, rotary, MLP, everything the attention pattern does not change;
//   head   the final norm, the lm_head and the cross-entropy loss;
//   model  the whole model (embedding, every layer at model_budget, head, loss).
// The timings are interleaved: warm-up and repetitions run in rounds, each round timing
// every grid point once, so a slow phase of a shared machine cannot bias a few points.
// On CUDA every timing is bracketed by device synchronisation.
//
// Context parallelism (training.context_parallel > 1) with its ring: the CP ranks time
// each point together, its micro-batch dealt to them as the trainer deals it
// (training.cp_layout) and attention a ring over them, so a point is one CP micro-batch;
// each repetition keeps the slowest rank's time, as below. With TP peers as well (tp x cp
// ranks), each CP rank's share runs through its TP group as in training.
//
// Tensor parallelism (training.tensor_parallel > 1) with its peers: every TP rank of the
// group measures the same request at once, each timing its share of every point with
// the collectives that share runs in training (the residual stream's sequence-parallel
// gathers and scatters, the attention's head-shard sums, the vocabulary-parallel loss),
// so each timing includes the waits for its peers. Each repetition keeps the slowest
// rank's time (the ranks agree by an all-reduce), and every rank returns the same profile.
//
// check_latency_profile re-measures held-out points (the midpoints between neighbouring
// grid lengths, and between neighbouring budgets) and compares them with the predictor.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "harness/latency/latency_profile.h"
#include "kernels/attention/patterns/attention_pattern.h"
#include "kernels/attention/ring/ring_attention.h"
#include "models/qwen2/qwen2_head_loss.h"
#include "models/qwen2/qwen2_model.h"
#include "models/qwen2/qwen2_sequence_parallel.h"

namespace sb {

// What one TP rank's profile asks of its TP peers, as the trainer's TP stage runs it.
// Built over a c10d group by tensor_parallel_profile_peers
// (harness/latency/run_profiles/tensor_parallel_profile_peers.h); every member acts on
// all ranks of the group together.
struct ProfileTensorParallelPeers {
  std::string collectives;  // "gloo" | "nccl": what the members run over
  // The layer's gathers and scatters of the residual stream (size(), rank()).
  std::shared_ptr<Qwen2SequenceParallel> sequence_parallel;
  // Token ids [vocabulary_start, vocabulary_end) are this rank's rows of the head.
  int64_t vocabulary_start = 0, vocabulary_end = 0;
  // The attention's statistics summed over the head shards (AttentionBackend::set_head_shard_sum).
  std::function<void(std::vector<double>&)> head_shard_sum;
  // The vocabulary-parallel loss's all-reduce of row statistics (qwen2_head_loss.h).
  VocabularyAllReduce vocabulary_reduce;
  // The whole model (built from the full config, training options applied, on the CPU)
  // made this rank's TP stage on `device`: its parameters cut to this rank's shards in
  // place. Returns one training step's loss: (tokens [T], positions [T], sequences,
  // labels [T]) -> scalar, differentiable.
  using ModelStep = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const PackedSequences&, const at::Tensor&)>;
  std::function<ModelStep(Qwen2ForCausalLM, std::shared_ptr<AttentionBackend>, c10::Device)> tensor_parallel_model;
  // The elementwise maximum over the ranks, in place.
  std::function<void(std::vector<double>&)> max_over_ranks;
};

// What to measure. The model and the training options are those of the run the profile
// is for: the timed layer trains as that run trains it (LatencyProfileTraining).
struct ProfileRequest {
  // A preset name (models/qwen2/qwen2_config.h) or a Hugging Face Qwen2 folder with
  // config.json, as an absolute path (the profile records it for re-measuring, and the
  // command line that reproduces the profile names it).
  std::string model;
  Qwen2Config config;               // model's architecture (profile_model_config(model))
  AttentionOptions attention;       // the pattern and its parameters
  std::string device = "cpu";       // "cpu" | "cuda"
  LatencyProfileTraining training;  // precision, activation checkpointing, LoRA
  std::vector<int64_t> seq_lens;    // ascending, >= 2
  std::vector<int64_t> budgets;     // ascending (ignored for dense)
  int64_t warmup = 2;
  int64_t repetitions = 5;
  uint64_t seed = 0;                // inputs and weights
  // training.tensor_parallel > 1 with training.tensor_parallel_collectives: this process
  // is one of that many TP ranks, which all measure this request together (see above).
  // Null (and no collectives): one rank's share timed alone, a lower estimate.
  std::shared_ptr<const ProfileTensorParallelPeers> tensor_parallel_peers;
  // training.context_parallel > 1: this process is CP rank ring->rank() of that many,
  // which all measure this request together; each point's micro-batch is dealt to them
  // by training.cp_layout and attention is a ring over them (CPU only). Null otherwise.
  std::shared_ptr<RingContext> context_parallel_ring;
};

// The architecture `model` names: a preset's, or for a folder its config.json's, named
// after the folder. Throws std::invalid_argument for anything else, listing the presets.
Qwen2Config profile_model_config(const std::string& model);

// Whether `model` (ProfileRequest::model) names a folder rather than a preset.
bool profile_model_is_folder(const std::string& model);

using ProgressFn = std::function<void(const std::string&)>;

// One timed run of one grid point: it sets what it needs (e.g. the budget), runs once and
// returns the milliseconds.
using TimedPoint = std::function<double()>;

// Times every point `repetitions` times after `warmup` untimed runs, in rounds: each round
// runs every point once. On a shared machine a slow phase then spreads over all points
// instead of biasing the few timed back to back during it, which would distort the
// latency ratios between lengths and budgets that the balancing acts on. Each round
// visits the points in its own order, shuffled by `seed` (the same seed, the same
// orders): a point that runs slower after a particular other one (on a GPU, the first
// small layer after a whole-model run was 15-30 % slower, round after round) then pays
// that in a few rounds, which the median drops, not in all of them. Returns one
// LatencyStat per point, in the points' order; progress (if set) hears of each timed round.
std::vector<LatencyStat> measure_interleaved(const std::vector<TimedPoint>& points, int64_t warmup,
                                             int64_t repetitions, uint64_t seed, const ProgressFn& progress = {});

// Throws std::invalid_argument for an inconsistent request. The profile's context.
// "timed_layer" says what the timed layer was: its parameters, those that trained, and
// the projections that carried LoRA adapters.
LatencyProfile measure_latency_profile(const ProfileRequest& request, const ProgressFn& progress = {});

struct ProfileCheckPoint {
  int64_t seq_len = 0;  // tokens (the sum of packed_lengths when packed)
  int64_t budget = 0;
  double predicted_ms = 0;
  LatencyStat measured;
  double abs_pct_error = 0;  // 100 |predicted - measured| / measured
  std::vector<int64_t> packed_lengths;  // empty: one sequence of seq_len tokens
};

// "384+192+192" for a packed point, "" for a single sequence.
std::string packed_lengths_text(const ProfileCheckPoint& point);

struct ProfileCheck {
  std::vector<ProfileCheckPoint> points;         // one sequence each
  std::vector<ProfileCheckPoint> packed_points;  // several sequences in one micro-batch
  double mape = 0;         // mean of points' abs_pct_error, in percent
  double packed_mape = 0;  // the same over packed_points
};

// The profile's own model (its "model.from" folder, else its preset), attention, device
// and training options, re-measured now: one layer at the midpoints between grid lengths x between
// grid budgets, and at each length midpoint a packed micro-batch of that many tokens.
// A profile timed with its TP collectives needs `tensor_parallel_peers` (of the
// profile's tp ranks, every rank calling this together) and is re-measured with them;
// one timed on CP ranks needs `context_parallel_ring` in the same way.
// `attention`: the pattern the profile recorded (its name and fields, the rest at their
// defaults; harness/patterns' plug-in reads it from the profile).
ProfileCheck check_latency_profile(const LatencyProfile& profile, const AttentionOptions& attention, int64_t warmup,
                                   int64_t repetitions, const ProgressFn& progress = {},
                                   std::shared_ptr<const ProfileTensorParallelPeers> tensor_parallel_peers = nullptr,
                                   std::shared_ptr<RingContext> context_parallel_ring = nullptr);

}  // namespace sb
