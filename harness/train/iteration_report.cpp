#include "harness/train/iteration_report.h"


#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "harness/common/json_numbers.h"
#include "harness/trace/iteration_metrics.h"

namespace sb {
namespace {

using nlohmann::json;

json layer_stats_to_json(const AttentionLayerStats& s) {
  return {{"layer", s.layer}, {"top_k", s.top_k}, {"coverage", s.coverage}, {"coverage_mean", s.coverage_mean},
          {"k_floor", s.k_floor}, {"reference_top_k", s.reference_top_k}};
}

AttentionLayerStats layer_stats_from_json(const json& j) {
  AttentionLayerStats s;
  s.layer = j.at("layer").get<int64_t>();
  s.top_k = j.at("top_k").get<std::vector<int64_t>>();
  s.coverage = json_numbers_or_nan(j.at("coverage"));
  s.coverage_mean = json_number_or_nan(j.at("coverage_mean"));
  s.k_floor = j.value("k_floor", int64_t{0});
  s.reference_top_k = j.value("reference_top_k", std::vector<int64_t>{});
  return s;
}

double mean_of(const std::vector<int64_t>& values) {
  if (values.empty()) return 0;
  return static_cast<double>(std::accumulate(values.begin(), values.end(), int64_t{0})) /
         static_cast<double>(values.size());
}

}  // namespace

std::string rank_iteration_report_to_json(const RankIterationReport& r) {
  json stats = json::array();
  for (const auto& mb : r.layer_stats) {
    json layers = json::array();
    for (const auto& s : mb) layers.push_back(layer_stats_to_json(s));
    stats.push_back(layers);
  }
  return json{{"timeline", rank_timeline_to_json(r.timeline)},
              {"loss_sum", r.loss_sum},
              {"grad_norm_squared", r.grad_norm_squared},
              {"balance_ms", r.balance_ms},
              {"plan_exchange_ms", r.plan_exchange_ms},
              {"allreduce_ms", r.allreduce_ms},
              {"runqueue_wait_ms", r.runqueue_wait_ms},
              {"peak_memory_mb",
               {r.peak_memory.host_rss_mb, r.peak_memory.device_allocated_mb, r.peak_memory.device_reserved_mb}},
              {"layer_stats", stats},
              {"cp_attention_ms", r.cp_attention_ms},
              {"tp_comm_ms", r.tp_comm_ms},
              {"cp_kept_pairs", r.cp_kept_pairs}}
      .dump();
}

RankIterationReport rank_iteration_report_from_json(const std::string& text) {
  const json j = json::parse(text);
  RankIterationReport r;
  r.timeline = rank_timeline_from_json(j.at("timeline"));
  r.loss_sum = json_number_or_nan(j.at("loss_sum"));
  r.grad_norm_squared = json_number_or_nan(j.at("grad_norm_squared"));
  r.balance_ms = j.at("balance_ms").get<double>();
  r.plan_exchange_ms = j.at("plan_exchange_ms").get<double>();
  r.allreduce_ms = j.at("allreduce_ms").get<double>();
  r.runqueue_wait_ms = j.at("runqueue_wait_ms").get<double>();
  const auto peak = j.at("peak_memory_mb").get<std::vector<double>>();  // host, allocated, reserved
  r.peak_memory = PeakMemory{peak.at(0), peak.at(1), peak.at(2)};
  r.cp_attention_ms = json_numbers_or_nan(j.at("cp_attention_ms"));
  r.tp_comm_ms = json_numbers_or_nan(j.at("tp_comm_ms"));
  r.cp_kept_pairs = j.at("cp_kept_pairs").get<std::vector<int64_t>>();
  for (const auto& mb : j.at("layer_stats")) {
    std::vector<AttentionLayerStats> layers;
    for (const auto& s : mb) layers.push_back(layer_stats_from_json(s));
    r.layer_stats.push_back(std::move(layers));
  }
  return r;
}

namespace {

// A layer's coverage over all its heads: the mean of its TP ranks' coverage (each over an
// equal share of the heads, or, for a pattern that sums its statistics over the head
// shards, the whole layer's on every rank, so the mean is that). `first` is TP rank 0's
// statistics of the layer.
double tp_mean_coverage(const std::vector<RankIterationReport>& reports, const ParallelLayout& layout, int64_t d,
                        int64_t s, size_t j, const AttentionLayerStats& first) {
  double sum = first.coverage_mean;
  for (int64_t t = 1; t < layout.tp(); ++t) {
    const auto& stats = reports[static_cast<size_t>(layout.rank_of(d, s, 0, t))].layer_stats;
    bool found = false;
    for (const AttentionLayerStats& layer : j < stats.size() ? stats[j] : std::vector<AttentionLayerStats>{}) {
      if (layer.layer != first.layer) continue;
      sum += layer.coverage_mean;
      found = true;
    }
    if (!found) {
      throw std::invalid_argument("iteration record: TP rank " + std::to_string(t) + " reported no statistics for layer " +
                                  std::to_string(first.layer) + " where TP rank 0 did");
    }
  }
  return sum / static_cast<double>(layout.tp());
}

}  // namespace

void assemble_iteration_record(const std::vector<RankIterationReport>& reports,
                               const GlobalBatchPlan& plan, const ParallelLayout& layout,
                               int64_t num_layers, IterationRecord& record) {
  if (static_cast<int64_t>(reports.size()) != layout.world_size() || plan.dp() != layout.dp()) {
    throw std::invalid_argument("iteration record: " + std::to_string(reports.size()) +
                                " rank reports and a plan for " + std::to_string(plan.dp()) +
                                " DP ranks do not fit dp x pp x cp x tp = " + std::to_string(layout.dp()) + " x " +
                                std::to_string(layout.pp()) + " x " + std::to_string(layout.cp()) + " x " +
                                std::to_string(layout.tp()));
  }
  std::vector<RankTimeline> timelines;
  std::vector<int64_t> counts;
  double loss_sum = 0;
  record.balance_overhead_ms = 0;
  record.allreduce_ms = 0;
  record.plan_exchange_ms = reports.empty() ? 0.0 : reports[0].plan_exchange_ms;
  for (size_t r = 0; r < reports.size(); ++r) {
    // One lane per (dp rank, stage): the CP and TP ranks of a stage run its micro-batches
    // together. Every TP rank of a last stage holds the same loss; CP ranks their shares.
    const bool lane = layout.cp_rank_of(static_cast<int64_t>(r)) == 0 && layout.tp_rank_of(static_cast<int64_t>(r)) == 0;
    if (lane) timelines.push_back(reports[r].timeline);
    if (layout.is_last_stage(static_cast<int64_t>(r)) && layout.tp_rank_of(static_cast<int64_t>(r)) == 0) {
      loss_sum += reports[r].loss_sum;
    }
    record.balance_overhead_ms = std::max(record.balance_overhead_ms, reports[r].balance_ms);
    record.allreduce_ms = std::max(record.allreduce_ms, reports[r].allreduce_ms);
    record.plan_exchange_ms = std::min(record.plan_exchange_ms, reports[r].plan_exchange_ms);
  }
  record.balance_overhead_ms += record.plan_exchange_ms;
  // Per world rank, kept only when every rank could read it (negative: unknown).
  const auto per_rank = [&](std::vector<double>& out, const auto& field) {
    out.clear();
    for (const RankIterationReport& r : reports) out.push_back(field(r));
    if (std::any_of(out.begin(), out.end(), [](double v) { return v < 0; })) out.clear();
  };
  per_rank(record.runqueue_wait_ms, [](const RankIterationReport& r) { return r.runqueue_wait_ms; });
  per_rank(record.peak_rss_mb, [](const RankIterationReport& r) { return r.peak_memory.host_rss_mb; });
  per_rank(record.peak_gpu_allocated_mb, [](const RankIterationReport& r) { return r.peak_memory.device_allocated_mb; });
  per_rank(record.peak_gpu_reserved_mb, [](const RankIterationReport& r) { return r.peak_memory.device_reserved_mb; });
  for (const auto& rank : plan.ranks) counts.push_back(static_cast<int64_t>(rank.size()));
  record.loss = record.loss_tokens > 0 ? loss_sum / static_cast<double>(record.loss_tokens) : 0.0;

  const PipelineMetrics m = compute_pipeline_metrics(timelines, layout.dp(), layout.pp(), counts);
  record.set_pipeline_metrics(m);

  record.microbatch_tokens.clear();
  record.microbatch_pred_ms.clear();
  bool all_predicted = true;
  for (const auto& rank : plan.ranks) {
    for (const PlannedMicroBatch& mb : rank) {
      record.microbatch_tokens.push_back(mb.tokens);
      record.microbatch_pred_ms.push_back(mb.predicted_ms);
      all_predicted = all_predicted && mb.predicted_ms >= 0;
    }
  }
  if (!all_predicted) record.microbatch_pred_ms.clear();

  // Worker imbalance under CP: per global micro-batch, each CP rank's ring compute summed
  // over the stages, then max / mean over the CP ranks. Under TP as well, a CP rank is its
  // TP ranks' rings together: its compute the slowest TP rank's (each summed over the
  // stages), its kept pairs their sum (every query head).
  record.cp_attention_ms.clear();
  record.cp_kept_pairs.clear();
  record.cp_worker_imbalance.clear();
  record.cp_work_imbalance.clear();
  if (layout.cp() > 1) {
    for (int64_t d = 0; d < layout.dp(); ++d) {
      for (size_t j = 0; j < plan.ranks[static_cast<size_t>(d)].size(); ++j) {
        std::vector<double> ms_per_cp_rank(static_cast<size_t>(layout.cp()), 0.0);
        std::vector<int64_t> pairs_per_cp_rank(ms_per_cp_rank.size(), 0);
        for (int64_t c = 0; c < layout.cp(); ++c) {
          for (int64_t t = 0; t < layout.tp(); ++t) {
            double ms = 0.0;
            for (int64_t s = 0; s < layout.pp(); ++s) {
              const RankIterationReport& report = reports[static_cast<size_t>(layout.rank_of(d, s, c, t))];
              if (j < report.cp_attention_ms.size()) ms += report.cp_attention_ms[j];
              if (j < report.cp_kept_pairs.size()) pairs_per_cp_rank[static_cast<size_t>(c)] += report.cp_kept_pairs[j];
            }
            ms_per_cp_rank[static_cast<size_t>(c)] = std::max(ms_per_cp_rank[static_cast<size_t>(c)], ms);
          }
        }
        record.cp_worker_imbalance.push_back(max_over_mean(ms_per_cp_rank));
        record.cp_work_imbalance.push_back(
            max_over_mean(std::vector<double>(pairs_per_cp_rank.begin(), pairs_per_cp_rank.end())));
        record.cp_attention_ms.push_back(std::move(ms_per_cp_rank));
        record.cp_kept_pairs.push_back(std::move(pairs_per_cp_rank));
      }
    }
  }

  // TP communication: per global micro-batch, each TP rank's collectives summed over the
  // stages; under CP as well, the mean over the CP ranks' TP groups.
  record.tp_comm_ms.clear();
  if (layout.tp() > 1) {
    for (int64_t d = 0; d < layout.dp(); ++d) {
      for (size_t j = 0; j < plan.ranks[static_cast<size_t>(d)].size(); ++j) {
        std::vector<double> per_tp_rank(static_cast<size_t>(layout.tp()), 0.0);
        for (int64_t t = 0; t < layout.tp(); ++t) {
          for (int64_t c = 0; c < layout.cp(); ++c) {
            for (int64_t s = 0; s < layout.pp(); ++s) {
              const RankIterationReport& report = reports[static_cast<size_t>(layout.rank_of(d, s, c, t))];
              if (j < report.tp_comm_ms.size()) per_tp_rank[static_cast<size_t>(t)] += report.tp_comm_ms[j];
            }
          }
          per_tp_rank[static_cast<size_t>(t)] /= static_cast<double>(layout.cp());
        }
        record.tp_comm_ms.push_back(std::move(per_tp_rank));
      }
    }
  }

  // Attention statistics: per global micro-batch, the layers of every stage of its pipeline.
  record.budgets.clear();
  record.coverage.clear();
  record.layer_budgets.clear();
  record.layer_coverage.clear();
  record.layer_floors.clear();
  record.layer_reference_budgets.clear();
  record.sequence_budgets.clear();
  record.sequence_reference_budgets.clear();
  bool any_floor = false;
  bool any_reference = false;
  bool any_stats = false;
  for (const auto& report : reports) {
    for (const auto& mb : report.layer_stats) any_stats = any_stats || !mb.empty();
  }
  if (!any_stats) return;
  for (int64_t d = 0; d < layout.dp(); ++d) {
    for (size_t j = 0; j < plan.ranks[static_cast<size_t>(d)].size(); ++j) {
      std::vector<double> budgets(static_cast<size_t>(num_layers), -1.0), coverage(budgets.size(), -1.0);
      std::vector<int64_t> floors(budgets.size(), 0);
      std::vector<double> references(budgets.size(), 0.0);
      const size_t sequences = plan.ranks[static_cast<size_t>(d)][j].samples.size();
      std::vector<double> sequence_sum(sequences, 0.0), sequence_reference_sum(sequences, 0.0);
      for (int64_t s = 0; s < layout.pp(); ++s) {
        const auto& stats = reports[static_cast<size_t>(layout.rank_of(d, s))].layer_stats;
        if (j >= stats.size()) continue;
        for (const AttentionLayerStats& layer : stats[j]) {
          if (layer.layer < 0 || layer.layer >= num_layers) {
            throw std::invalid_argument("iteration record: statistics of layer " + std::to_string(layer.layer) +
                                        " in a model of " + std::to_string(num_layers) + " layers");
          }
          budgets[static_cast<size_t>(layer.layer)] = mean_of(layer.top_k);
          coverage[static_cast<size_t>(layer.layer)] = tp_mean_coverage(reports, layout, d, s, j, layer);
          floors[static_cast<size_t>(layer.layer)] = layer.k_floor;
          any_floor = any_floor || layer.k_floor > 0;
          if (!layer.reference_top_k.empty()) {
            references[static_cast<size_t>(layer.layer)] = mean_of(layer.reference_top_k);
            any_reference = true;
            if (layer.reference_top_k.size() != sequences || layer.top_k.size() != sequences) {
              throw std::invalid_argument("iteration record: layer " + std::to_string(layer.layer) + " reported " +
                                          std::to_string(layer.top_k.size()) + " sequences for a micro-batch of " +
                                          std::to_string(sequences));
            }
            for (size_t i = 0; i < sequences; ++i) {
              sequence_sum[i] += static_cast<double>(layer.top_k[i]);
              sequence_reference_sum[i] += static_cast<double>(layer.reference_top_k[i]);
            }
          }
        }
      }
      for (int64_t l = 0; l < num_layers; ++l) {
        if (coverage[static_cast<size_t>(l)] < 0) {
          throw std::invalid_argument("iteration record: the attention backend reported no statistics for layer " +
                                      std::to_string(l) + " of micro-batch " + std::to_string(j) +
                                      " of DP rank " + std::to_string(d) + " but did for others");
        }
      }
      record.budgets.push_back(plan.ranks[static_cast<size_t>(d)][j].budget);
      record.coverage.push_back(std::accumulate(coverage.begin(), coverage.end(), 0.0) /
                                static_cast<double>(num_layers));
      record.layer_budgets.push_back(std::move(budgets));
      record.layer_coverage.push_back(std::move(coverage));
      record.layer_floors.push_back(std::move(floors));
      record.layer_reference_budgets.push_back(std::move(references));
      for (double& sum : sequence_sum) sum /= static_cast<double>(num_layers);
      for (double& sum : sequence_reference_sum) sum /= static_cast<double>(num_layers);
      record.sequence_budgets.push_back(std::move(sequence_sum));
      record.sequence_reference_budgets.push_back(std::move(sequence_reference_sum));
    }
  }
  if (!any_floor) record.layer_floors.clear();
  if (!any_reference) {
    record.layer_reference_budgets.clear();
    record.sequence_budgets.clear();
    record.sequence_reference_budgets.clear();
  }
}

}  // namespace sb
