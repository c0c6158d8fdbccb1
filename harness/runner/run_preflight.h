#pragma once
// What `sparsebalance run` checks before it measures a profile or starts a rank, so that
// a mistake costs seconds, not a profile measurement and a world of ranks that then fail
// (the local launcher checks before it starts the ranks; a single process, or rank 0
// under torchrun or srun, before the profiles):
//   - every input file or folder the runs name exists: data.jsonl.path and .tokenizer,
//     data.synthetic.length_file, each method's profile (or, when missing, that it can be
//     measured and written there), and the eval block's data, config, haystack and jieba
//     folders;
//   - the local launcher can hold the world: at most one rank per visible GPU for a CUDA
//     run, at most kLocalRanksPerCore ranks per CPU core for a CPU run, unless the user
//     raised the limit (--max-local-ranks).
// Each failure is a ConfigError naming the manifest, the JSON path and the fix.

#include <cstdint>
#include <ostream>
#include <vector>

#include "harness/config/manifest.h"
#include "harness/runner/run_plan.h"

namespace sb {

// experiments/quickstart_dp2_pp2.json runs 2 ranks per core (DP2 x PP2 on 2 cores); at 4
// per core every rank waits for a core most of the time, and beyond that a mistyped dp
// would fork hundreds of processes.
constexpr int64_t kLocalRanksPerCore = 4;

// Throws ConfigError for the first input of `runs` that is missing.
void check_run_inputs(const std::vector<RunSpec>& runs);

// The most ranks the local launcher starts for `manifest` on this machine: the visible
// GPUs for a CUDA run, kLocalRanksPerCore x the CPU cores otherwise.
int64_t default_max_local_ranks(const Manifest& manifest);

// ConfigError when dp x pp exceeds max_local_ranks (naming the limit, where it comes from
// and --max-local-ranks). max_local_ranks <= 0: default_max_local_ranks.
void check_local_world_fits(const Manifest& manifest, int64_t max_local_ranks);

// Prints the per-rank memory estimate (harness/train/memory_estimate.h) of the pending
// run that needs the most, with this process's resident set as the CPU runtime.
// `simulated`: the runs are simulated on their manifest's cluster (no runtime term; the
// cluster's device named).
void print_memory_estimate(const std::vector<RunSpec>& runs, std::ostream& log, bool simulated = false);

// With "interleave": every pending run of a comparison is held at once (its trainer alive
// while the others train): one line naming the comparison whose held state (weights,
// gradients, optimizer, per rank's largest stage) adds the most to the estimate above
// (the activations are one run's at a time). Nothing without interleaving.
void print_interleave_memory(const RunPlan& plan, std::ostream& log);

}  // namespace sb
