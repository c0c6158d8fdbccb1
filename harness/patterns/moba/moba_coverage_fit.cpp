#include "harness/patterns/moba/moba_coverage_fit.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/records/iteration_record.h"
#include "kernels/attention/patterns/moba/moba_coverage_model.h"
#include "common/scalar_minimise.h"
#include "harness/records/measured_runs.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The backend's C of a packed micro-batch: every (head, query block) row weighs the same.
double pooled_coverage(const ZipfCoverageModel& model, const CoverageObservation& o, int64_t block_size) {
  double weighted = 0, rows = 0;
  for (int64_t length : o.lengths) {
    const auto blocks = static_cast<double>((length + block_size - 1) / block_size);
    weighted += blocks * model.coverage(length, o.budget);
    rows += blocks;
  }
  return weighted / rows;
}

double sum_squared_error(const std::vector<CoverageObservation>& observations, double exponent, int64_t block_size) {
  double sse = 0;
  const ZipfCoverageModel model(exponent, block_size);
  for (const CoverageObservation& o : observations) {
    const double e = pooled_coverage(model, o, block_size) - o.coverage;
    sse += e * e;
  }
  return sse;
}

// The run's MoBA block size from its resolved manifest, or -1 (not MoBA under `gate`,
// unreadable). A resolved MoBA attention without "gate" is the block gate's.
int64_t run_block_size(const fs::path& run_dir, MobaGate gate) {
  try {
    const json m = json::parse(read_file(run_dir / "manifest.resolved.json"));
    const json& attention = m.at("methods").at(0).at("attention");
    if (attention.value("name", "") != "moba") return -1;
    if (moba_gate_options().from_name(attention.value("gate", "block")) != gate) return -1;
    return attention.value("block_size", int64_t{-1});
  } catch (const std::exception&) {
    return -1;
  }
}

}  // namespace

std::vector<CoverageObservation> coverage_observations(const fs::path& records_file) {
  std::vector<CoverageObservation> out;
  for (const IterationRecord& r : read_iteration_records(records_file)) {
    if (r.warmup) continue;
    for (size_t k = 0; k < r.layer_coverage.size() && k < r.layer_budgets.size(); ++k) {
      std::vector<int64_t> lengths = k < r.microbatch_lengths.size() ? r.microbatch_lengths[k]
                                                                     : std::vector<int64_t>{r.microbatch_tokens.at(k)};
      for (size_t l = 0; l < r.layer_coverage[k].size() && l < r.layer_budgets[k].size(); ++l) {
        CoverageObservation o;
        o.lengths = lengths;
        o.budget = std::max<int64_t>(1, std::llround(r.layer_budgets[k][l]));
        o.coverage = r.layer_coverage[k][l];
        out.push_back(std::move(o));
      }
    }
  }
  return out;
}

double modelled_coverage(const CoverageObservation& o, double exponent, int64_t block_size) {
  return pooled_coverage(ZipfCoverageModel(exponent, block_size), o, block_size);
}

CoverageFit fit_coverage_exponent(const std::vector<CoverageObservation>& observations, int64_t block_size,
                                  double max_exponent) {
  if (observations.empty()) throw std::invalid_argument("coverage fit: no observations");
  if (!(max_exponent > 0)) throw std::invalid_argument("coverage fit: max_exponent must be > 0");
  const ScalarMinimum best = minimise_on_interval(
      [&](double s) { return sum_squared_error(observations, s, block_size); }, 0.0, max_exponent, 0.05, 1e-4);
  CoverageFit fit;
  fit.exponent = best.x;
  fit.rmse = std::sqrt(best.value / static_cast<double>(observations.size()));
  fit.points = static_cast<int64_t>(observations.size());
  return fit;
}

CoverageFit fit_coverage_from_results(const fs::path& results_dir, int64_t block_size, MobaGate gate,
                                      const std::string& manifest_file, const std::string& json_path) {
  MeasuredObservations<CoverageObservation> observed = observe_measured_runs<CoverageObservation>(
      results_dir, manifest_file, json_path, [&](const fs::path& dir) {
        return run_block_size(dir, gate) == block_size ? coverage_observations(dir / "records.jsonl")
                                                 : std::vector<CoverageObservation>{};
      });
  if (observed.all.empty()) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured MoBA run with block size " + std::to_string(block_size) + ", the " +
                          moba_gate_options().name_of(gate) + " gate and recorded layer coverage under " +
                          results_dir.string(),
                      "point it at the results of a `sparsebalance run` with the same attention block size and gate");
  }
  CoverageFit fit = fit_coverage_exponent(observed.all, block_size);
  fit.runs = std::move(observed.runs);
  return fit;
}

}  // namespace sb
