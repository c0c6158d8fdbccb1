#include "harness/records/iteration_record.h"

#include <cmath>
#include <string>
#include <limits>
#include <numeric>

#include "harness/common/json_numbers.h"
#include "harness/common/jsonl_file.h"
#include "harness/trace/iteration_metrics.h"

namespace sb {

void IterationRecord::set_pipeline_metrics(const PipelineMetrics& metrics) {
  iter_ms = metrics.iter_ms;
  per_stage_busy_ms = metrics.busy_ms;
  per_stage_idle_ms = metrics.idle_ms;
  bubble_fraction = metrics.bubble_fraction;
  bubble_fraction_max = metrics.bubble_fraction_max;
  microbatch_ms = metrics.microbatch_ms;
  microbatch_dp_rank = metrics.microbatch_dp_rank;
  imbalance = metrics.imbalance;
  dp_imbalance = metrics.dp_imbalance;
  slot_imbalance = metrics.slot_imbalance;
}

void IterationRecord::derive_single_stage_metrics() {
  PipelineMetrics m;
  derive_bubbles({std::accumulate(microbatch_ms.begin(), microbatch_ms.end(), 0.0)}, iter_ms, m);
  imbalance = max_over_mean(microbatch_ms);
  dp_imbalance = 1;  // one DP rank
  slot_imbalance = 1;
  per_stage_busy_ms = m.busy_ms;
  per_stage_idle_ms = m.idle_ms;
  bubble_fraction = m.bubble_fraction;
  bubble_fraction_max = m.bubble_fraction_max;
}

nlohmann::json iteration_record_to_json(const IterationRecord& r) {
  nlohmann::json j{
      {"iteration", r.iteration},
      {"warmup", r.warmup},
      {"loss_tokens", r.loss_tokens},
      {"tokens", r.tokens},
      {"sequences", r.sequences},
      {"lr", r.lr},
      {"iter_ms", r.iter_ms},
      {"microbatch_ms", r.microbatch_ms},
      {"microbatch_tokens", r.microbatch_tokens},
      {"microbatch_dp_rank", r.microbatch_dp_rank},
      {"imbalance", r.imbalance},
      {"per_stage_busy_ms", r.per_stage_busy_ms},
      {"per_stage_idle_ms", r.per_stage_idle_ms},
      {"bubble_fraction", r.bubble_fraction},
      {"bubble_fraction_max", r.bubble_fraction_max},
      {"balance_overhead_ms", r.balance_overhead_ms},
      {"plan_exchange_ms", r.plan_exchange_ms},
      {"allreduce_ms", r.allreduce_ms},
  };
  // NaN (nothing was trained: a simulated iteration) is left out, never written as a number.
  if (std::isfinite(r.loss)) j["loss"] = r.loss;
  if (std::isfinite(r.grad_norm)) j["grad_norm"] = r.grad_norm;
  if (std::isfinite(r.dp_imbalance)) j["dp_imbalance"] = r.dp_imbalance;
  if (std::isfinite(r.slot_imbalance)) j["slot_imbalance"] = r.slot_imbalance;
  if (r.skipped_step) j["skipped_step"] = true;
  if (r.interleave_block >= 0) {
    j["interleave_block"] = r.interleave_block;
    j["interleave_position"] = r.interleave_position;
  }
  if (!r.microbatch_pred_ms.empty()) j["microbatch_pred_ms"] = r.microbatch_pred_ms;
  if (!r.budgets.empty()) j["budgets"] = r.budgets;
  if (!r.coverage.empty()) j["coverage"] = r.coverage;
  if (!r.layer_budgets.empty()) j["layer_budgets"] = r.layer_budgets;
  if (!r.layer_coverage.empty()) j["layer_coverage"] = r.layer_coverage;
  if (!r.layer_floors.empty()) j["layer_floors"] = r.layer_floors;
  if (!r.layer_reference_budgets.empty()) j["layer_reference_budgets"] = r.layer_reference_budgets;
  if (!r.sequence_budgets.empty()) j["sequence_budgets"] = r.sequence_budgets;
  if (!r.sequence_reference_budgets.empty()) j["sequence_reference_budgets"] = r.sequence_reference_budgets;
  if (!r.microbatch_lengths.empty()) j["microbatch_lengths"] = r.microbatch_lengths;
  if (!r.runqueue_wait_ms.empty()) j["runqueue_wait_ms"] = r.runqueue_wait_ms;
  if (!r.peak_rss_mb.empty()) j["peak_rss_mb"] = r.peak_rss_mb;
  if (!r.peak_gpu_allocated_mb.empty()) j["peak_gpu_allocated_mb"] = r.peak_gpu_allocated_mb;
  if (!r.peak_gpu_reserved_mb.empty()) j["peak_gpu_reserved_mb"] = r.peak_gpu_reserved_mb;
  if (!r.cp_attention_ms.empty()) j["cp_attention_ms"] = r.cp_attention_ms;
  if (!r.tp_comm_ms.empty()) j["tp_comm_ms"] = r.tp_comm_ms;
  if (!r.cp_kept_pairs.empty()) j["cp_kept_pairs"] = r.cp_kept_pairs;
  if (!r.cp_worker_imbalance.empty()) j["cp_worker_imbalance"] = r.cp_worker_imbalance;
  if (!r.cp_work_imbalance.empty()) j["cp_work_imbalance"] = r.cp_work_imbalance;
  return j;
}

IterationRecord iteration_record_from_json(const nlohmann::json& j) {
  IterationRecord r;
  r.iteration = j.at("iteration").get<int64_t>();
  r.warmup = j.at("warmup").get<bool>();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.loss = j.contains("loss") ? json_number_or_nan(j["loss"]) : nan;
  r.loss_tokens = j.at("loss_tokens").get<int64_t>();
  r.tokens = j.at("tokens").get<int64_t>();
  r.sequences = j.at("sequences").get<int64_t>();
  r.lr = j.at("lr").get<double>();
  r.grad_norm = j.contains("grad_norm") ? json_number_or_nan(j["grad_norm"]) : nan;
  r.skipped_step = j.value("skipped_step", false);
  r.interleave_block = j.value("interleave_block", int64_t{-1});
  r.interleave_position = j.value("interleave_position", int64_t{-1});
  r.iter_ms = json_number_or_nan(j.at("iter_ms"));
  r.microbatch_ms = json_numbers_or_nan(j.at("microbatch_ms"));
  r.microbatch_tokens = j.at("microbatch_tokens").get<std::vector<int64_t>>();
  r.microbatch_dp_rank = j.value("microbatch_dp_rank", std::vector<int64_t>{});
  r.imbalance = json_number_or_nan(j.at("imbalance"));
  // Records written before the rank-level imbalances existed have neither.
  r.dp_imbalance = j.contains("dp_imbalance") && j["dp_imbalance"].is_number() ? j["dp_imbalance"].get<double>() : nan;
  r.slot_imbalance =
      j.contains("slot_imbalance") && j["slot_imbalance"].is_number() ? j["slot_imbalance"].get<double>() : nan;
  r.per_stage_busy_ms = json_numbers_or_nan(j.at("per_stage_busy_ms"));
  r.per_stage_idle_ms = json_numbers_or_nan(j.at("per_stage_idle_ms"));
  r.bubble_fraction = json_number_or_nan(j.at("bubble_fraction"));
  r.bubble_fraction_max = json_number_or_nan(j.at("bubble_fraction_max"));
  r.balance_overhead_ms = json_number_or_nan(j.at("balance_overhead_ms"));
  r.allreduce_ms = j.value("allreduce_ms", 0.0);
  r.plan_exchange_ms = j.value("plan_exchange_ms", 0.0);
  r.microbatch_pred_ms = json_numbers_at(j, "microbatch_pred_ms");
  r.budgets = j.value("budgets", std::vector<int64_t>{});
  r.coverage = json_numbers_at(j, "coverage");
  r.layer_budgets = json_number_rows_at(j, "layer_budgets");
  r.layer_coverage = json_number_rows_at(j, "layer_coverage");
  r.layer_floors = j.value("layer_floors", std::vector<std::vector<int64_t>>{});
  r.layer_reference_budgets = json_number_rows_at(j, "layer_reference_budgets");
  r.sequence_budgets = json_number_rows_at(j, "sequence_budgets");
  r.sequence_reference_budgets = json_number_rows_at(j, "sequence_reference_budgets");
  r.microbatch_lengths = j.value("microbatch_lengths", std::vector<std::vector<int64_t>>{});
  r.runqueue_wait_ms = json_numbers_at(j, "runqueue_wait_ms");
  r.peak_rss_mb = json_numbers_at(j, "peak_rss_mb");
  r.peak_gpu_allocated_mb = json_numbers_at(j, "peak_gpu_allocated_mb");
  r.peak_gpu_reserved_mb = json_numbers_at(j, "peak_gpu_reserved_mb");
  r.cp_attention_ms = json_number_rows_at(j, "cp_attention_ms");
  r.tp_comm_ms = json_number_rows_at(j, "tp_comm_ms");
  r.cp_kept_pairs = j.value("cp_kept_pairs", std::vector<std::vector<int64_t>>{});
  r.cp_worker_imbalance = json_numbers_at(j, "cp_worker_imbalance");
  r.cp_work_imbalance = json_numbers_at(j, "cp_work_imbalance");
  return r;
}

std::vector<IterationRecord> read_iteration_records(const std::filesystem::path& file) {
  std::vector<IterationRecord> records;
  // A last line without its newline was cut off by a killed writer: not a record (a
  // resume drops and redoes it).
  for_each_jsonl_value(
      file, "a valid iteration record", [&](const nlohmann::json& j) { records.push_back(iteration_record_from_json(j)); },
      /*unterminated_last_line=*/false);
  return records;
}

}  // namespace sb
