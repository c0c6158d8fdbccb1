#pragma once
// The latency profiles a manifest's methods predict with (methods[i].profile), found or
// measured before any run starts:
//   - the file exists: it is loaded and must describe this run's model architecture,
//     attention, device and training options (precision, activation checkpointing, LoRA
//     rank and targets): a profile of another setup would mislead every SAB and DST
//     decision;
//   - the file is missing and this process may measure (one process alone, or the local
//     launcher before it starts the ranks): it is measured now on a default grid (below)
//     and written there, so later runs and reruns reuse it;
//   - the file is missing under torchrun or srun: a ConfigError with the exact
//     `sparsebalance profile` command that measures it (ranks cannot wait minutes for
//     one of them to measure without tripping the rendezvous timeout).
//
// Default grid [our rule] (docs/sparsebalance.md section 3): lengths double from max(16, L/128) up to the
// first power of two >= L, where L is the data set's longest sample (at most 8 points;
// the predictor extrapolates linearly past the last); budgets are the pattern's
// (AttentionPattern::profile_budgets, with DST's k_max); 2 warm-up runs and 5
// timed repetitions per point; the intra-op threads a rank of this run will use.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/latency/latency_predictor.h"
#include "harness/latency/latency_profiler.h"

namespace sb {

// The grid `sparsebalance run` measures for a method whose profile file is missing, for
// the manifest's model (its `from` folder when pretrained, else its preset) trained as
// the manifest's train section says. longest_sample: the data set's longest sample in tokens.
ProfileRequest default_profile_request(const Manifest& manifest, const MethodSection& method,
                                       int64_t longest_sample);

// The `sparsebalance profile` flags that give `attention`'s pattern and parameters (the
// pattern's profile flags, harness/patterns: those always written, and the others whose
// value is not the default), as (flag, value).
std::vector<std::pair<std::string, std::string>> attention_profile_flags(const AttentionOptions& attention);

// The `sparsebalance profile` command line that measures `request` into `out` (with
// --threads when threads > 0: the intra-op threads the profile is measured with), its
// training options, TP degree and collectives and its model folder included.
std::string profile_command_line(const ProfileRequest& request, const std::filesystem::path& out,
                                 int64_t threads = 0);
// The same as arguments (without the executable; [0] is "profile").
std::vector<std::string> profile_command_arguments(const ProfileRequest& request, const std::filesystem::path& out,
                                                   int64_t threads = 0);

// ConfigError (naming the manifest, `json_path`, the profile file, both values and the
// fix) when the profile was not measured for the manifest model's architecture (the
// "model" fields other than its name: a folder's model may use a profile of the preset
// with its architecture), the method's attention (and MoBA block size), the run's device
// or the run's training options: precision, activation checkpointing, LoRA rank and
// target modules (alpha and dropout do not change the time), TP degree, the TP
// collectives when the profile was timed with them, and the CP ranks, layout and inner
// ring when it was timed on CP ranks.
void check_profile_matches(const LatencyProfile& profile, const Manifest& manifest, const MethodSection& method,
                           const std::string& json_path);

// A warning (empty when none) for a measured profile without the packed-micro-batch point
// (packed_ms: profiles measured before it existed) used by a run that packs several
// sequences per micro-batch: its predictor charges each sequence the attention's shared
// cost (the plain sum), which over-predicted packed micro-batches by up to 4x on a GPU.
std::string packed_point_warning(const LatencyProfile& profile, const Manifest& manifest, const std::string& file);

// A warning (empty when none) for a TP profile timed without the TP collectives (one
// rank's share alone, as sparsebalance measured them before it launched the TP ranks
// together): it under-predicts each micro-batch by its collectives' time.
std::string tensor_parallel_collectives_warning(const LatencyProfile& profile, const std::string& file);

// A warning (empty when none) for a profile without CP used by a CP run: it predicts each
// micro-batch as one rank (or TP group) running it whole, without the split or the ring.
std::string context_parallel_warning(const LatencyProfile& profile, const Manifest& manifest, const std::string& file);

// A warning (empty when none) for a measured profile whose longest timed sequence is
// shorter than the longest sequence the run's micro-batches hold (`longest_sequence`: the
// data's longest, at most max_tokens_per_microbatch): the predictor extrapolates there
// linearly, which under-predicts attention's quadratic growth.
std::string grid_coverage_warning(const LatencyProfile& profile, int64_t longest_sequence, const std::string& file);

// Makes sure every profile the runs name exists (measuring missing ones when
// may_measure) and matches its runs. Logs what it measured, and when `warn`
// packed_point_warning's, grid_coverage_warning's and the other warnings above (once per
// profile file). A TP or CP run's profile is measured on its TP or CP ranks together:
// launch_tp_ranks(ranks, the `sparsebalance profile` arguments, log) starts them and returns
// their exit code (harness/runner/profile_ranks.h, launch_profile_ranks); given, every
// missing profile is measured that way, a one-rank profile in one child process, which
// has exited (its memory freed) before the run's ranks start. Without it a missing TP or
// CP profile is a ConfigError with the command that measures it, and a one-rank profile
// is measured in this process.
using ProfileRanksLauncher =
    std::function<int(int64_t ranks, const std::vector<std::string>& arguments, std::ostream& log)>;
void ensure_method_profiles(const std::vector<RunSpec>& runs, bool may_measure, std::ostream& log, bool warn = true,
                            const ProfileRanksLauncher& launch_tp_ranks = {});

// The predictor of the run's method profile; null when the method names none.
std::shared_ptr<const LatencyPredictor> load_method_predictor(const RunSpec& run);

}  // namespace sb
