// One rank of the multi-process ring attention tests, started by
// test_ring_attention_dist.cpp with torchrun's variables. Usage:
//   sb_ring_worker cases OUT_DIR   every case of ring_cases(world): forward and backward of
//       sum(out * grad_out) through ring_attention over Gloo; writes this rank's out, lse,
//       dq, dk, dv (and MoBA's selection) to OUT_DIR/<case>-rank<r>.safetensors
//   sb_ring_worker model OUT_DIR   qwen2-test on this rank's tokens of a packed batch with
//       RingAttentionBackend (dense, MoBA's two gates and vertical-slash, striped and zigzag, with and
//       without activation checkpointing; vertical-slash and MoBA's token gate also under a DST budget request): the loss and parameter gradients summed over the CP
//       group -> OUT_DIR/model-<variant>.safetensors (rank 0)
//   sb_ring_worker die OUT_DIR     the last rank exits before the ring starts; the others
//       must fail within SB_DIST_TIMEOUT_MS with an error naming it
// Exit 0 on success, 1 with the error on stderr.

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>

#include "harness/parallel/process_group.h"
#include "kernels/attention/ring/ring_attention.h"
#include "kernels/attention/ring/ring_attention_backend.h"
#include "models/safetensors/safetensors_writer.h"
#include "tests/support/qwen2_test_models.h"
#include "tests/support/ring_attention_cases.h"

namespace {

namespace fs = std::filesystem;

void run_case(const sb::test::RingCase& c, const c10::intrusive_ptr<c10d::Backend>& group, const sb::DistEnv& env,
              std::chrono::milliseconds timeout, const fs::path& out_dir) {
  auto context = std::make_shared<sb::RingContext>(group, env.rank, env.world_size, c.inner, timeout);
  const sb::test::RingInputs in = sb::test::ring_inputs(c.dtype, 7, c.lengths);
  const sb::CpSharding sharding =
      sb::CpSharding::build(sb::PackedSequences::from_lengths(c.lengths), env.world_size, c.layout);
  at::Tensor q = sharding.shard(in.q, env.rank).contiguous().requires_grad_(true);
  at::Tensor k = sharding.shard(in.k, env.rank).contiguous().requires_grad_(true);
  at::Tensor v = sharding.shard(in.v, env.rank).contiguous().requires_grad_(true);
  const std::shared_ptr<sb::RingPatternSelector> selector = sb::test::ring_selector(c);
  const sb::RingAttentionResult result = sb::ring_attention(q, k, v, sharding, *selector, sb::test::ring_request(c),
                                                            sb::test::ring_scale(), context);
  (result.out * sharding.shard(in.grad_out, env.rank)).sum().backward();
  std::vector<std::pair<std::string, at::Tensor>> tensors{
      {"out", result.out.detach()}, {"lse", result.lse}, {"dq", q.grad()}, {"dk", k.grad()}, {"dv", v.grad()}};
  if (c.moba && c.gate == sb::MobaGate::kBlock) {
    tensors.emplace_back("selected", result.blocks.selected);
    tensors.emplace_back("selected_count", result.blocks.count);
  }
  if (c.moba && c.gate == sb::MobaGate::kToken) {  // the statistics, which every rank must have alike
    const sb::AttentionLayerStats& stats = result.stats;
    tensors.emplace_back("top_k", at::tensor(stats.top_k, at::kLong));
    tensors.emplace_back("coverage", at::tensor(stats.coverage, at::kDouble));
    tensors.emplace_back("coverage_mean", at::tensor({stats.coverage_mean}, at::kDouble));
    tensors.emplace_back("k_floor", at::tensor({stats.k_floor}, at::kLong));
    tensors.emplace_back("coverage_curve", at::tensor(stats.coverage_curve, at::kDouble));
  }
  if (c.vertical_slash) {  // the index this rank built
    auto [lists, coverage] = sb::test::ring_index_tensors(sb::test::ring_last_index(*selector));
    tensors.emplace_back("vs_lists", lists);
    tensors.emplace_back("vs_coverage", coverage);
  }
  int64_t kept = 0, steps = 0;
  for (const sb::RingStepEvent& event : context->take_events()) {
    if (!event.backward) kept += event.kept_pairs;
    ++steps;
  }
  sb::write_safetensors(out_dir / (c.name + "-rank" + std::to_string(env.rank) + ".safetensors"), tensors,
                        {{"kept_pairs", std::to_string(kept)}, {"events", std::to_string(steps)}});
}

// The model test's variants: name, pattern, layout, activation checkpointing, and a DST
// budget request (vertical-slash: kept keys per query and a floor; none when empty).
struct ModelVariant {
  std::string name;
  std::string pattern;  // "dense" | "moba" | "moba_token" | "vertical_slash"
  sb::CpLayout layout;
  bool checkpointing;
  sb::AttentionBudgetRequest request{};
};

void run_model(const ModelVariant& variant, const c10::intrusive_ptr<c10d::Backend>& group, const sb::DistEnv& env,
               std::chrono::milliseconds timeout, const fs::path& out_dir) {
  auto context = std::make_shared<sb::RingContext>(group, env.rank, env.world_size, 0, timeout);
  // The pattern in the ring's blocks of kRingBlock (MoBA with k 2).
  std::shared_ptr<sb::RingPatternSelector> selector = std::make_shared<sb::DenseRingSelector>(sb::test::kRingBlock);
  if (variant.pattern == "moba") selector = std::make_shared<sb::MobaRingSelector>(sb::test::kRingBlock, 2);
  if (variant.pattern == "moba_token") {
    selector = std::make_shared<sb::MobaRingSelector>(sb::test::kRingBlock, 2, sb::MobaGate::kToken);
  }
  if (variant.pattern == "vertical_slash") {
    selector = std::make_shared<sb::VerticalSlashRingSelector>(sb::test::ring_vertical_slash_params());
  }
  auto backend = std::make_shared<sb::RingAttentionBackend>(selector, context);
  backend->set_budget_request(variant.request);
  sb::Qwen2ForCausalLM model = sb::test::make_test_model("qwen2-test", 5);
  model->set_attention_backend(backend);
  model->set_activation_checkpointing(variant.checkpointing);
  const sb::test::TestBatch batch =
      sb::test::make_test_batch(sb::test::ring_sequence_lengths(), model->config().vocab_size, 9);
  auto sharding = std::make_shared<const sb::CpSharding>(sb::CpSharding::build(batch.sequences, env.world_size, variant.layout));
  backend->set_context_parallel_sharding(sharding);
  const int64_t mine = sharding->size_of(env.rank);
  const at::Tensor logits = model->forward(sharding->shard(batch.tokens, env.rank), sharding->shard(batch.positions, env.rank),
                                           sb::PackedSequences::from_lengths({mine}));
  const at::Tensor loss =
      at::cross_entropy_loss(logits, sharding->shard(batch.targets, env.rank), {}, at::Reduction::Sum);
  loss.backward();
  // What the trainer's gradient reduction does over the CP group: sum the ranks' parts.
  std::vector<std::pair<std::string, at::Tensor>> tensors{{"loss", loss.detach().reshape({1})}};
  for (const auto& item : model->named_parameters()) tensors.emplace_back(item.key(), item.value().grad());
  for (auto& [name, tensor] : tensors) {
    std::vector<at::Tensor> one{tensor};
    group->allreduce(one)->wait(timeout);
  }
  const auto stats = backend->take_layer_stats();
  if (variant.pattern != "dense" && stats.size() != 2) {
    throw std::runtime_error("expected statistics for 2 layers, got " + std::to_string(stats.size()));
  }
  if (env.rank == 0) sb::write_safetensors(out_dir / ("model-" + variant.name + ".safetensors"), tensors);
}

std::vector<ModelVariant> model_variants() {
  return {{"dense_striped", "dense", {sb::CpLayoutKind::kStriped, 8}, false},
          {"moba_zigzag", "moba", {sb::CpLayoutKind::kZigzag, 0}, false},
          {"moba_striped_checkpointed", "moba", {sb::CpLayoutKind::kStriped, 24}, true},
          {"vs_striped_checkpointed", "vertical_slash", {sb::CpLayoutKind::kStriped, 24}, true},
          {"vs_dst_zigzag", "vertical_slash", {sb::CpLayoutKind::kZigzag, 0}, false,
           sb::test::ring_vertical_slash_dst_request()},
          {"moba_token_dst_striped_checkpointed", "moba_token", {sb::CpLayoutKind::kStriped, 24}, true,
           sb::test::ring_moba_dst_request(sb::test::ring_sequence_lengths().size())}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: sb_ring_worker cases|model|die OUT_DIR\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    const sb::DistEnv env = sb::DistEnv::from_environment();
    const char* timeout_text = std::getenv("SB_DIST_TIMEOUT_MS");
    const std::chrono::milliseconds timeout(timeout_text ? std::atoll(timeout_text) : 60000);
    auto group = sb::create_process_group(env, sb::CollectiveBackend::kGloo, timeout);
    if (mode == "die") {
      if (env.rank == env.world_size - 1) std::_Exit(3);
      run_case(sb::test::ring_cases(env.world_size).front(), group, env, timeout, argv[2]);
      std::cerr << "rank " << env.rank << " finished a ring without its last rank\n";
      return 1;
    }
    if (mode == "model") {
      for (const ModelVariant& variant : model_variants()) run_model(variant, group, env, timeout, argv[2]);
      std::cout << "rank " << env.rank << " ok\n";
      std::cout.flush();
      std::_Exit(0);
    }
    if (mode != "cases") {
      std::cerr << "unknown mode " << mode << "\n";
      return 2;
    }
    for (const sb::test::RingCase& c : sb::test::ring_cases(env.world_size)) run_case(c, group, env, timeout, argv[2]);
    std::cout << "rank " << env.rank << " ok\n";
    std::cout.flush();
    std::_Exit(0);  // no teardown handshake with ranks that may already be gone
  } catch (const std::exception& e) {
    std::cerr << "rank failed: " << e.what() << "\n";
    std::cerr.flush();
    std::_Exit(1);
  }
}
