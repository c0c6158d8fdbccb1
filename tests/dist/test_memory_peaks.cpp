// Peak memory of a real run (records.jsonl `peak_rss_mb`), at the shape that used to
// exhaust the last stage's memory first: Qwen2.5's vocabulary of 151,936 and an
// 8,192-token micro-batch. The whole-logits loss held [T, V] float32 logits, their
// softmax and their gradient, 5 GB each at this shape (about 15 GB of RSS); the head
// fused with the loss chunk by chunk (models/qwen2/qwen2_head_loss.h) keeps one chunk
// of about 256 MiB. The model is small in every other way (hidden 64, two layers), so
// the head dominates what the run needs. The estimate printed before the run starts is
// within 15 % of the measured peak. SB_KEEP_MEMORY_RUN=1 keeps the folder (model,
// manifest, results) to rerun it by hand, for example under /usr/bin/time -v.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "kernels/attention/patterns/dense/dense_pattern.h"
#include "models/qwen2/qwen2_config.h"
#include "models/qwen2/qwen2_hf_checkpoint.h"
#include "models/qwen2/qwen2_model.h"
#include "tests/dist/job_fixture.h"
#include "tests/support/run_command.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(MemoryPeaks, QwenVocabularyAt8192TokensPeaksUnder3GiBOfRss) {
  const fs::path dir = test::fresh_temp_dir("memory_peaks");
  Qwen2Config config = qwen2_preset("qwen2-tiny");
  config.name = "qwen2-vocab151936-h64";
  config.vocab_size = 151936;
  config.hidden_size = 64;
  config.intermediate_size = 128;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2;
  config.num_key_value_heads = 1;
  config.head_dim = 32;
  config.max_position_embeddings = 8192;
  at::manual_seed(0);
  Qwen2ForCausalLM model(config, std::shared_ptr<AttentionBackend>(dense_attention_options().make_backend()));
  qwen2_save_hf_checkpoint(model, dir / "model");

  const json m = {{"name", "memory"},
                  {"seed", 1},
                  {"model", {{"from", (dir / "model").string()}}},
                  {"data", {{"synthetic", {{"length_mixture", {{{"min_tokens", 8192}, {"max_tokens", 8192}}}}}}}},
                  {"train",
                   {{"iterations", 2},
                    {"warmup_iterations", 1},
                    {"global_batch_size", 1},
                    {"max_tokens_per_microbatch", 8192},
                    {"threads", 2}}},
                  {"checkpoint", {{"every_iterations", 0}}},
                  {"methods", {{{"name", "dense"}}}}};
  const fs::path manifest = test::write_manifest(dir, m);
  const test::Worker cli = test::start_cli(manifest, dir, dir / "out.log");
  ASSERT_EQ(test::wait_worker(cli, std::chrono::steady_clock::now() + std::chrono::seconds(600)), 0)
      << test::slurp(dir / "out.log");
  const auto records = test::read_records(dir / "memory" / "dense");
  ASSERT_EQ(records.size(), 2u);
  for (const json& r : records) {
    ASSERT_EQ(r["microbatch_tokens"], json::array({8192}));
    ASSERT_TRUE(r.contains("peak_rss_mb")) << r.dump();
    const double peak = r["peak_rss_mb"].at(0).get<double>();
    std::cout << "[memory] iteration " << r["iteration"] << " peak RSS " << peak << " MiB\n";
    EXPECT_LT(peak, 3072.0);
    // Above the weights and one logit chunk: the figure is the iteration's, not zero.
    EXPECT_GT(peak, 256.0);
  }
  // The estimate `run` printed before it started (harness/train/memory_estimate.h) is
  // within 15 % of the peak of iteration 1, the first with the optimizer's state.
  const std::string out = test::slurp(dir / "out.log");
  const std::string marker = "memory per rank (estimate, 8192-token micro-batch, cpu): ";
  const size_t at = out.find(marker);
  ASSERT_NE(at, std::string::npos) << out;
  const double estimate_mib = std::stod(out.substr(at + marker.size())) * 1024.0;
  const double measured_mib = records[1]["peak_rss_mb"].at(0).get<double>();
  std::cout << "[memory] estimate " << estimate_mib << " MiB, measured " << measured_mib << " MiB\n";
  EXPECT_NEAR(estimate_mib / measured_mib, 1.0, 0.15) << out;
  // The loss runs over the whole vocabulary: from weights of std 0.02 the logits are
  // near 0 and the first loss near ln(151,936) = 11.93.
  EXPECT_NEAR(records[0]["loss"].get<double>(), std::log(151936.0), 0.05);
  if (std::getenv("SB_KEEP_MEMORY_RUN") == nullptr) fs::remove_all(dir);
}

}  // namespace
}  // namespace sb
