// Model FLOPs and MFU (harness/report/training_flops.h, docs/metrics.md "Throughput"):
// the projection term against the model's own projection weights, the attention term
// against causal pairs counted one by one, the GPU table, and the report's TFLOP/s and
// MFU on a kept H100 run recomputed here from its records.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "harness/records/iteration_record.h"
#include "harness/report/report.h"
#include "harness/report/training_flops.h"
#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "models/qwen2/qwen2_model.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

// The oracle's view of a model: its projection weights counted from the parameters a
// built model holds (q, k, v, o, gate, up, down of every layer).
struct CountedModel {
  Qwen2Config config;
  double projection_weights = 0;
};

CountedModel counted_model(const std::string& preset) {
  CountedModel m{qwen2_preset(preset)};
  Qwen2ForCausalLM model(m.config, std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
  for (const auto& p : model->named_parameters()) {
    const std::string& name = p.key();
    if (name.rfind("layers.", 0) == 0 && name.size() > 12 && name.compare(name.size() - 12, 12, "_proj.weight") == 0) {
      m.projection_weights += static_cast<double>(p.value().numel());
    }
  }
  return m;
}

// 3 x the forward: 2 FLOPs per weight and token for every projection weight, 4 x
// head_dim per causal pair and query head in every layer, 2 x H x V per token. The pairs
// are counted one by one, or by n (n + 1) / 2 for long sequences.
double oracle_flops(const CountedModel& m, const std::vector<int64_t>& lengths, bool count_pairs) {
  const Qwen2Config& c = m.config;
  double tokens = 0, pairs = 0;
  for (int64_t n : lengths) {
    tokens += static_cast<double>(n);
    if (!count_pairs) {
      pairs += static_cast<double>(n) * static_cast<double>(n + 1) / 2;
      continue;
    }
    for (int64_t q = 0; q < n; ++q) {
      for (int64_t k = 0; k <= q; ++k) pairs += 1;
    }
  }
  const double forward = 2 * tokens * m.projection_weights +
                         4.0 * static_cast<double>(c.head_dim * c.num_attention_heads * c.num_hidden_layers) * pairs +
                         2 * tokens * static_cast<double>(c.hidden_size * c.vocab_size);
  return 3 * forward;
}

TEST(TrainingFlops, EqualTheModelsWeightsAndTheCausalPairsCountedOneByOne) {
  for (const std::string preset : {"qwen2-tiny", "qwen2-test"}) {
    const CountedModel counted = counted_model(preset);
    for (const std::vector<int64_t>& lengths : std::vector<std::vector<int64_t>>{{1}, {5, 9}, {300, 17, 64}}) {
      const double expected = oracle_flops(counted, lengths, /*count_pairs=*/true);
      EXPECT_NEAR(training_model_flops(qwen2_preset(preset), lengths), expected, 1e-12 * expected) << preset;
    }
  }
  EXPECT_EQ(training_model_flops(qwen2_preset("qwen2-tiny"), {}), 0.0);
}

TEST(TrainingFlops, KnownGpusByTheDriversNames) {
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA H100 80GB HBM3"), 989.0);
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA H100 PCIe"), 756.0);
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA H200"), 989.0);
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA H20"), 148.0);
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA A100-SXM4-80GB"), 312.0);
  EXPECT_EQ(known_gpu_peak_tflops("NVIDIA B200"), 2250.0);
  EXPECT_FALSE(known_gpu_peak_tflops("NVIDIA GeForce RTX 4090").has_value());
  EXPECT_FALSE(known_gpu_peak_tflops("").has_value());
}

// The kept H100 run of experiments/measured/h100/table1-gpu1-fused (Qwen2.5-0.5B, one
// GPU): the report's TFLOP/s per GPU is its measured iterations' model FLOPs over their
// time, the MFU that over the H100's 989; --peak-tflops replaces the peak.
TEST(TrainingFlops, ReportRecomputesTheKeptH100RunsMfu) {
  const fs::path kept = fs::path(SB_SOURCE_DIR) / "experiments/measured/h100/table1-gpu1-fused";
  const fs::path dir = test::fresh_temp_dir("training_flops") / "table1-gpu1-fused";
  fs::create_directories(dir);
  fs::copy(kept / "baseline", dir / "baseline", fs::copy_options::recursive);
  const CountedModel counted = counted_model("qwen2.5-0.5b");
  double flops = 0, ms = 0;
  for (const IterationRecord& r : read_iteration_records(dir / "baseline" / "records.jsonl")) {
    if (r.warmup) continue;
    std::vector<int64_t> lengths;
    for (const auto& mb : r.microbatch_lengths) lengths.insert(lengths.end(), mb.begin(), mb.end());
    flops += oracle_flops(counted, lengths, /*count_pairs=*/false);
    ms += r.iter_ms;
  }
  const double tflops = flops / (ms / 1000.0) / 1e12;  // one rank
  const Report report = build_report(dir);
  ASSERT_EQ(report.runs.size(), 1u);
  const RunSummary& run = report.runs[0];
  ASSERT_TRUE(run.model_tflops_per_gpu && run.peak_tflops && run.mfu);
  EXPECT_NEAR(*run.model_tflops_per_gpu, tflops, 1e-9 * tflops);
  EXPECT_EQ(*run.peak_tflops, 989.0);
  EXPECT_NEAR(*run.mfu, tflops / 989.0, 1e-12);
  std::cout << "[mfu] table1-gpu1-fused baseline: " << tflops << " TFLOP/s, MFU " << 100 * tflops / 989.0 << " %\n";
  const Report overridden = build_report(dir, 500.0);
  EXPECT_NEAR(*overridden.runs[0].mfu, tflops / 500.0, 1e-12);
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace sb
