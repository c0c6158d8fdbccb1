// Ring attention over real processes (Gloo): for CP 2 and 4, every layout, dense, MoBA
// and vertical-slash, float64 and float32, and the hierarchical ring (cp 4, cp_inner 2), the ranks'
// outputs, log-sum-exp and q/k/v gradients put back together equal the one-rank float64
// oracle (1e-10 in float64, 1e-5 in float32); MoBA's routing is the one-rank routing on
// every rank, and so is vertical-slash's index (lists equal, coverage within 1e-12);
// the hierarchical ring equals the flat one. A rank that dies before the
// ring makes the others fail within their timeout, naming it.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <chrono>
#include <filesystem>

#include "kernels/attention/patterns/moba/moba_attention.h"
#include "kernels/attention/patterns/moba/moba_attention_backend.h"
#include "kernels/attention/patterns/moba/moba_token_routing.h"
#include "kernels/attention/patterns/vertical_slash/vertical_slash_backend.h"
#include "models/safetensors/safetensors_file.h"
#include "tests/support/free_tcp_port.h"
#include "tests/support/qwen2_test_models.h"
#include "tests/support/ring_attention_cases.h"
#include "tests/support/run_command.h"
#include "tests/support/worker_processes.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::vector<test::Worker> spawn_ring(const std::string& mode, int world, const fs::path& dir, const std::string& timeout_ms) {
  const int port = test::free_tcp_port();
  std::vector<test::Worker> workers;
  for (int rank = 0; rank < world; ++rank) {
    auto env = test::rank_env(rank, world, port);
    env["SB_DIST_TIMEOUT_MS"] = timeout_ms;
    workers.push_back(test::spawn_worker({SB_BINARY_DIR "/tests/sb_ring_worker", mode, dir.string()}, env,
                                         dir / ("rank" + std::to_string(rank) + ".log")));
  }
  return workers;
}

double max_diff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

// The ranks' tensor `name` of a case, put back into micro-batch order.
at::Tensor gathered(const fs::path& dir, const test::RingCase& c, int world, const std::string& name) {
  const CpSharding sharding =
      CpSharding::build(PackedSequences::from_lengths(c.lengths), world, c.layout);
  std::vector<at::Tensor> parts;
  for (int r = 0; r < world; ++r) {
    parts.push_back(SafetensorsFile::open(dir / (c.name + "-rank" + std::to_string(r) + ".safetensors")).tensor(name).clone());
  }
  return sharding.unshard(parts);
}

class RingAttentionDist : public ::testing::TestWithParam<int> {};

TEST_P(RingAttentionDist, EveryCaseEqualsTheOneRankOracle) {
  const int world = GetParam();
  const fs::path dir = test::fresh_temp_dir("ring_dist_" + std::to_string(world));
  std::vector<test::Worker> workers = spawn_ring("cases", world, dir, "60000");
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_EQ(test::wait_worker(workers[rank], deadline), 0) << "rank " << rank << ":\n" << test::slurp(workers[rank].log);
  }
  for (const test::RingCase& c : test::ring_cases(world)) {
    const PackedSequences sequences = PackedSequences::from_lengths(c.lengths);
    const BlockLayout layout = BlockLayout::build(sequences, sequences, test::kRingBlock, true);
    const test::RingInputs in = test::ring_inputs(c.dtype, 7, c.lengths);
    const test::RingOracle oracle = test::ring_oracle(in, c);
    const double tol = test::ring_tolerance(c.dtype);
    EXPECT_LT(max_diff(gathered(dir, c, world, "out"), oracle.out), tol) << c.name;
    EXPECT_LT(max_diff(gathered(dir, c, world, "lse"), oracle.lse), tol) << c.name;
    EXPECT_LT(max_diff(gathered(dir, c, world, "dq"), oracle.dq), tol) << c.name;
    EXPECT_LT(max_diff(gathered(dir, c, world, "dk"), oracle.dk), tol) << c.name;
    EXPECT_LT(max_diff(gathered(dir, c, world, "dv"), oracle.dv), tol) << c.name;
    for (int r = 0; r < world; ++r) {
      const SafetensorsFile file = SafetensorsFile::open(dir / (c.name + "-rank" + std::to_string(r) + ".safetensors"));
      // A step per rank, each way, and with MoBA the block means (step -1), with
      // vertical-slash its index.
      EXPECT_EQ(file.metadata().at("events"), std::to_string(2 * world + (c.moba || c.vertical_slash ? 1 : 0))) << c.name;
      if (c.vertical_slash) {  // every rank built the one-rank index
        const auto [lists, coverage] = test::ring_index_tensors(test::ring_vertical_slash_index_oracle(in));
        EXPECT_TRUE(at::equal(file.tensor("vs_lists"), lists)) << c.name << " rank " << r;
        EXPECT_LT(max_diff(file.tensor("vs_coverage"), coverage), 1e-12) << c.name;
      }
      if (c.moba && c.gate == MobaGate::kToken) {  // every rank has the one-rank routing's statistics
        const MobaRouting one_rank = moba_route_tokens(in.q, in.k, layout, test::ring_moba_params(c));
        EXPECT_TRUE(at::equal(file.tensor("top_k"), at::tensor(one_rank.top_k, at::kLong))) << c.name << " rank " << r;
        EXPECT_EQ(file.tensor("k_floor").item<int64_t>(), one_rank.k_floor) << c.name << " rank " << r;
        EXPECT_LT(max_diff(file.tensor("coverage"), at::tensor(one_rank.coverage, at::kDouble)), 1e-12) << c.name;
        EXPECT_NEAR(file.tensor("coverage_mean").item<double>(), one_rank.coverage_mean, 1e-12) << c.name;
        if (c.dst) {
          EXPECT_GT(one_rank.k_floor, 1) << c.name;  // the floor raised a budget: the summed curve decided it
          EXPECT_LT(max_diff(file.tensor("coverage_curve"), at::tensor(one_rank.coverage_curve, at::kDouble)), 1e-12)
              << c.name;
        }
        continue;
      }
      if (!c.moba) continue;
      const MobaRouting one_rank = moba_route_cpu(in.q, in.k, layout, test::ring_moba_params());
      EXPECT_TRUE(at::equal(file.tensor("selected"), one_rank.selected)) << c.name << " rank " << r;
      EXPECT_TRUE(at::equal(file.tensor("selected_count"), one_rank.selected_count)) << c.name << " rank " << r;
    }
    if (c.inner > 0) {  // the hierarchical ring against its flat twin, same layout and pattern
      test::RingCase flat = c;
      flat.name = c.name.substr(0, c.name.size() - std::string("_inner2").size());
      for (const char* name : {"out", "dq", "dk", "dv"}) {
        EXPECT_LT(max_diff(gathered(dir, c, world, name), gathered(dir, flat, world, name)), 1e-12) << c.name << " " << name;
      }
    }
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Cp, RingAttentionDist, ::testing::Values(2, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return "cp" + std::to_string(info.param); });

// The model on CP ranks: qwen2-test (float32) with the ring backend on each rank's
// tokens (global rotary positions), gradients summed over the ranks, against the same
// model on the whole packed batch in this process with the one-rank backend.
TEST(RingAttentionDistModel, Cp4ModelLossAndGradientsEqualOneProcess) {
  const int world = 4;
  const fs::path dir = test::fresh_temp_dir("ring_dist_model");
  std::vector<test::Worker> workers = spawn_ring("model", world, dir, "60000");
  const auto deadline = Clock::now() + std::chrono::seconds(240);
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_EQ(test::wait_worker(workers[rank], deadline), 0) << "rank " << rank << ":\n" << test::slurp(workers[rank].log);
  }
  for (const auto& [variant, pattern] : std::vector<std::pair<std::string, std::string>>{
           {"dense_striped", "dense"},
           {"moba_zigzag", "moba"},
           {"moba_striped_checkpointed", "moba"},
           {"vs_striped_checkpointed", "vertical_slash"},
           {"vs_dst_zigzag", "vertical_slash"},
           {"moba_token_dst_striped_checkpointed", "moba_token"}}) {
    Qwen2ForCausalLM model = test::make_test_model("qwen2-test", 5);
    if (pattern == "moba") model->set_attention_backend(std::make_shared<MobaAttention>(test::kRingBlock, 2));
    if (pattern == "moba_token") {  // DST's budgets and floor: the ranks' summed curve equals this one
      auto backend = std::make_shared<MobaAttention>(test::kRingBlock, 2, MobaCudaKernel::kAuto, MobaGate::kToken);
      backend->set_budget_request(test::ring_moba_dst_request(test::ring_sequence_lengths().size()));
      model->set_attention_backend(backend);
    }
    if (pattern == "vertical_slash") {
      auto backend = std::make_shared<VerticalSlashAttention>(test::ring_vertical_slash_params());
      // DST's request under CP: the ranks' budget search equals this one-rank search.
      if (variant == "vs_dst_zigzag") backend->set_budget_request(test::ring_vertical_slash_dst_request());
      model->set_attention_backend(backend);
    }
    const test::TestBatch batch = test::make_test_batch(test::ring_sequence_lengths(), model->config().vocab_size, 9);
    const at::Tensor loss = test::summed_loss(model, batch);
    loss.backward();
    const SafetensorsFile file = SafetensorsFile::open(dir / ("model-" + variant + ".safetensors"));
    EXPECT_NEAR(file.tensor("loss").item<double>(), loss.item<double>(), 1e-5 * std::abs(loss.item<double>())) << variant;
    int64_t compared = 0;
    for (const auto& item : model->named_parameters()) {
      EXPECT_LT(max_diff(file.tensor(item.key()), item.value().grad()), 1e-5) << variant << " " << item.key();
      ++compared;
    }
    EXPECT_GT(compared, 10);
  }
  fs::remove_all(dir);
}

TEST(RingAttentionDistFaults, ARankThatDiesEndsTheRingWithinTheTimeout) {
  const int world = 4;
  const fs::path dir = test::fresh_temp_dir("ring_dist_die");
  const auto start = Clock::now();
  std::vector<test::Worker> workers = spawn_ring("die", world, dir, "5000");
  const auto deadline = start + std::chrono::seconds(60);
  std::string logs;
  EXPECT_EQ(test::wait_worker(workers[world - 1], deadline), 3);
  for (int rank = 0; rank + 1 < world; ++rank) {
    const int code = test::wait_worker(workers[rank], deadline);
    const std::string log = test::slurp(workers[rank].log);
    EXPECT_EQ(code, 1) << "rank " << rank << ":\n" << log;
    logs += log;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(45));
  EXPECT_NE(logs.find("cp rank 3"), std::string::npos) << logs;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
