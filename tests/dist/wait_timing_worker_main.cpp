// One rank of the wait-timing tests (test_wait_timing.cpp), started with torchrun's
// variables. Its data groups complete as NCCL's do (DeferredCompletionBackend: wait()
// does not block the host), and one rank may be a slow peer. Usage:
//   sb_wait_timing_worker MANIFEST OUT_DIR
// Environment: SB_TEST_DELAY_RANK (the slow rank, default none), SB_TEST_DELAY_MS (its
// delay before posting each delayed call), SB_TEST_DELAY_OPS (the delayed calls, comma
// separated: send, recv, allreduce, allgather, reduce_scatter, broadcast), SB_TEST_COALESCE
// (1: the groups coalesce as NCCL's, so exchanges take NCCL's grouped path).
// Trains the manifest's iterations; rank 0 writes every iteration's timeline (all
// ranks) to OUT_DIR/timeline.jsonl and its record to OUT_DIR/records.jsonl.
// Exit 0 on success, 1 with a message on stderr.

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <string>

#include "harness/config/manifest.h"
#include "harness/parallel/process_group.h"
#include "harness/parallel/rank_context.h"
#include "harness/records/iteration_record.h"
#include "harness/trace/timeline.h"
#include "harness/train/trainer.h"
#include "tests/support/deferred_completion_backend.h"

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : fallback;
}

std::set<std::string> split_commas(const std::string& text) {
  std::set<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (!item.empty()) items.insert(item);
  }
  return items;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: sb_wait_timing_worker MANIFEST OUT_DIR\n";
    return 2;
  }
  const std::filesystem::path out = argv[2];
  try {
    const sb::Manifest manifest = sb::load_manifest(argv[1]);
    const sb::RunSpec run = sb::expand_runs(manifest).at(0);
    const sb::DistEnv env = sb::DistEnv::from_environment();
    const std::chrono::milliseconds timeout(60000);
    const sb::Qwen2Config& config = sb::qwen2_preset(manifest.model.preset);
    sb::RankContext context =
        sb::RankContext::connect(env, sb::parallel_layout_of(manifest), sb::create_rendezvous_store(env, timeout),
                                 "test/", c10::kCPU, config.tie_word_embeddings, timeout);
    const bool slow = std::to_string(env.rank) == env_or("SB_TEST_DELAY_RANK", "");
    const std::chrono::milliseconds delay(slow ? std::stoll(env_or("SB_TEST_DELAY_MS", "0")) : 0);
    const std::set<std::string> delayed = split_commas(env_or("SB_TEST_DELAY_OPS", ""));
    for (auto* group : {&context.pipeline, &context.data_parallel, &context.context_parallel,
                        &context.tensor_parallel, &context.embedding}) {
      if (*group) {
        *group = c10::make_intrusive<sb::test::DeferredCompletionBackend>(*group, delay, delayed,
                                                                          env_or("SB_TEST_COALESCE", "0") == "1");
      }
    }
    sb::test::DeferredCompletionBackend::install_emulated_stream();
    sb::Trainer trainer(run, context);
    std::ofstream timeline, records;
    if (env.rank == 0) {
      timeline.open(out / "timeline.jsonl");
      records.open(out / "records.jsonl");
    }
    for (int64_t it = 0; it < manifest.train.iterations; ++it) {
      const std::optional<sb::IterationOutcome> outcome = trainer.train_iteration(it);
      if (!outcome) continue;
      timeline << sb::timeline_iteration_to_json(outcome->timeline).dump() << "\n";
      records << sb::iteration_record_to_json(outcome->record).dump() << "\n";
    }
    context.barrier();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "rank failed: " << e.what() << "\n";
    return 1;
  }
}
