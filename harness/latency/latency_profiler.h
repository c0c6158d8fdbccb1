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
// check_latency_profile re-measures held-out points (the midpoints between neighbouring
// grid lengths, and between neighbouring budgets) and compares them with the predictor.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/latency/latency_profile.h"
#include "kernels/attention/attention_backend.h"

namespace sb {

// What to measure. The model and the training options are those of the run the profile
// is for: the timed layer trains as that run trains it (LatencyProfileTraining).
struct ProfileRequest {
  // A preset name (models/qwen2/qwen2_config.h) or a Hugging Face Qwen2 folder with
  // config.json, as an absolute path (the profile records it for re-measuring, and the
  // command line that reproduces the profile names it).
  std::string model;
  Qwen2Config config;               // model's architecture (profile_model_config(model))
  AttentionOptions attention;       // "moba" (block_size used) or "dense"
  std::string device = "cpu";       // "cpu" | "cuda"
  LatencyProfileTraining training;  // precision, activation checkpointing, LoRA
  std::vector<int64_t> seq_lens;    // ascending, >= 2
  std::vector<int64_t> budgets;     // ascending (ignored for dense)
  int64_t warmup = 2;
  int64_t repetitions = 5;
  uint64_t seed = 0;                // inputs and weights
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
ProfileCheck check_latency_profile(const LatencyProfile& profile, int64_t warmup, int64_t repetitions,
                                   const ProgressFn& progress = {});

}  // namespace sb
