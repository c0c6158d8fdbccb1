#pragma once
// Predicts forward + backward latency from a latency profile (docs: sparsebalance.md
// 1.2; each rule below is [our rule] there and in its section 3):
//   - one layer, one sequence: bilinear interpolation on the (length, budget) grid;
//     outside the profiled lengths, linear extrapolation along the nearest grid segment
//     (never below 0); budgets outside the profiled range are clamped to it;
//   - latency never falls as the budget grows: each length's row is replaced by its
//     running maximum along the budget axis before interpolating (measurement noise
//     otherwise makes a larger budget look cheaper, which would mislead DST);
//   - a packed micro-batch costs, per layer, the sum of its sequences' attention terms
//     (layer - rest) plus the rest term of its total token count;
//   - a stage costs its layer count x the per-layer latency; with include_head the last
//     stage also pays the head term (final norm, lm_head, loss) of its tokens. The paper's
//     rule leaves the head out, so include_head is off by default.
//   - a micro-batch (summed over its stages) is calibrated to the whole-model time the
//     profile measured, when it has model_ms: overhead(L) = model_ms(L) -
//     layers x layer(L, model_budget) - (head(L) when include_head), interpolated in the
//     micro-batch's total tokens like the rest term (constant below the grid), is added
//     once per micro-batch, and the sum is never below 0. The overhead is signed. Positive,
//     it holds embedding, head and loss (unless counted above) and the framework's
//     per-micro-batch cost, which dominate short micro-batches. Negative, it corrects a
//     standalone layer timing that overstates the layer inside the model (seen on CPU at
//     long lengths, 6-9 % per layer), so at model_budget on the grid the prediction is
//     the whole-model measurement. Stage latencies (stage_ms) leave it out; the
//     simulator spreads it over the stages.

#include <cstdint>
#include <functional>
#include <vector>

#include "harness/latency/latency_profile.h"

namespace sb {

struct LatencyPredictorOptions {
  bool include_head = false;
};

class LatencyPredictor {
 public:
  // Throws std::invalid_argument if the profile does not validate.
  explicit LatencyPredictor(LatencyProfile profile, LatencyPredictorOptions options = {});

  // Where a length falls on the profile's grid of seq_lens: the segment [seq_lens[segment],
  // seq_lens[segment + 1]] holding it (or the nearest one outside) and the position t
  // along it (0 at the left end, 1 at the right; outside [0, 1] beyond the grid).
  // Located once, a length serves every budget (microbatch_latency_curves.h).
  struct LengthPoint {
    size_t segment = 0;
    double t = 0;
  };
  LengthPoint locate(int64_t length) const;

  // Where a budget falls on the profile's grid of budgets: the column at or below it and
  // the share u of the way to the next one (exact: it is a column, no interpolation).
  struct BudgetPoint {
    size_t column = 0;
    double u = 0;
    bool exact = true;
  };
  BudgetPoint locate_budget(int64_t budget) const;

  // One layer, one sequence (ms).
  double layer_ms(int64_t length, int64_t budget) const;
  double layer_ms(LengthPoint length, BudgetPoint budget) const;
  double rest_ms(int64_t tokens) const;
  double rest_ms(LengthPoint tokens) const;
  double head_ms(int64_t tokens) const;
  double head_ms(LengthPoint tokens) const;
  // layer_ms - rest_ms, never below 0.
  double attention_ms(int64_t length, int64_t budget) const;

  // [our rule] The attention of a packed micro-batch runs as one call over all its
  // sequences (varlen kernels). Part of a sequence's attention term can therefore be paid
  // once per micro-batch rather than once per sequence (on a GPU, the kernel launches of
  // the routing and gathering: about 2.5 ms of a 0.5B layer at any length up to 4K).
  // Given the sequences' own attention terms (attention_ms), the micro-batch's is their
  // sum less (n - 1) x attention_fixed_ms(), never below the largest term; one sequence
  // keeps its own term.
  double packed_attention_ms(const std::vector<double>& terms) const;
  // That shared part, from the profile's packed point (n sequences of the shortest length
  // at the smallest budget, LatencyProfile::packed_ms): (n a(L0) + rest(n L0) - measured)
  // / (n - 1), clamped to [0, a(L0)]. 0 without the point (analytic profiles, profiles
  // measured before it existed): then a packed micro-batch is the plain sum.
  double attention_fixed_ms() const { return attention_fixed_ms_; }

  // One layer over a packed micro-batch of these sequence lengths:
  // packed_attention_ms of the sequences' terms + rest_ms of the total tokens.
  double packed_layer_ms(const std::vector<int64_t>& lengths, int64_t budget) const;
  // The same with a budget per sequence (budgets[i] for lengths[i]; kept keys per query
  // differ between packed sequences). The overloads below likewise.
  double packed_layer_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets) const;
  // One pipeline stage holding `layers` decoder layers (the head term added when
  // last_stage and include_head).
  double stage_ms(const std::vector<int64_t>& lengths, int64_t budget, int64_t layers,
                  bool last_stage) const;
  double stage_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int64_t layers,
                  bool last_stage) const;
  // The micro-batch summed over all stages: total_layers layers, the head term and the
  // micro-batch overhead.
  double microbatch_ms(const std::vector<int64_t>& lengths, int64_t budget,
                       int64_t total_layers) const;
  double microbatch_ms(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets,
                       int64_t total_layers) const;
  // A multiplicative scale on microbatch_ms by the micro-batch's total tokens (the batch
  // planner's online calibration, harness/latency/latency_calibration.h); none by default.
  // stage_ms and the per-layer terms stay uncalibrated.
  void set_microbatch_scale(std::function<double(int64_t)> scale) { microbatch_scale_ = std::move(scale); }
  bool has_microbatch_scale() const { return static_cast<bool>(microbatch_scale_); }
  double microbatch_scale(int64_t tokens) const { return microbatch_scale_(tokens); }

  // The measured per-micro-batch overhead at this many tokens, signed (0 without model_ms).
  double microbatch_overhead_ms(int64_t tokens) const;
  // Stage `stage`'s share (of `stages`) of that overhead: the head term, when stage_ms
  // leaves it out, on the last stage (which runs final norm, lm_head and loss), the rest
  // evenly. The shares sum to microbatch_overhead_ms(tokens).
  double microbatch_overhead_share_ms(int64_t tokens, int64_t stage, int64_t stages) const;

  const LatencyProfile& profile() const { return profile_; }
  const LatencyPredictorOptions& options() const { return options_; }

 private:
  // Piecewise-linear value over seq_lens at `length` of a per-length series (latencies
  // clamped at 0; a signed series such as the overhead is not).
  double along_length(const std::vector<double>& series, int64_t length, bool clamp_at_zero = true) const;
  double along_length(const std::vector<double>& series, LengthPoint length, bool clamp_at_zero = true) const;
  // The public overloads' one computation: budgets[i] per sequence, or `budget` for every
  // sequence when budgets is null (no vector made: the planner calls these millions of
  // times per iteration at thousands of ranks).
  double packed_layer_ms(const std::vector<int64_t>& lengths, const int64_t* budgets, int64_t budget) const;
  double stage_ms(const std::vector<int64_t>& lengths, const int64_t* budgets, int64_t budget, int64_t layers,
                  bool last_stage) const;
  double microbatch_ms(const std::vector<int64_t>& lengths, const int64_t* budgets, int64_t budget,
                       int64_t total_layers) const;

  LatencyProfile profile_;
  LatencyPredictorOptions options_;
  std::vector<std::vector<double>> layer_monotone_;  // [budget][length], running max over budgets
  std::vector<double> rest_, head_;                  // [length] medians
  std::vector<double> overhead_;                     // [length], signed; empty without model_ms
  double attention_fixed_ms_ = 0;                    // shared attention cost (packed_ms), 0 without it
  std::function<double(int64_t)> microbatch_scale_;  // empty: no scale
};

}  // namespace sb
