#include "harness/sim/sim_runner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <list>
#include <memory>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <tuple>

#include "common/errors.h"
#include "harness/runner/run_preflight.h"
#include "harness/common/atomic_file.h"
#include "harness/common/system_info.h"
#include "harness/records/iteration_record.h"
#include "harness/report/report.h"
#include "harness/report/run_summary.h"
#include "harness/runner/run_folder.h"
#include "harness/runner/run_plan.h"
#include "harness/patterns/attention_patterns.h"
#include "harness/sim/fit/allreduce_fit.h"
#include "harness/sim/fit/iteration_overhead_fit.h"
#include "harness/sim/fit/latency_noise_fit.h"
#include "harness/sim/fit/ring_compute_fit.h"
#include "harness/sim/run_simulator.h"
#include "models/qwen2/qwen2_config.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A measured run's folder is never a simulation's to replace.
void refuse_measured_folder(const fs::path& run_dir) {
  const fs::path context = run_dir / "context.json";
  if (!fs::exists(context)) return;
  json j;
  try {
    j = json::parse(read_file(context));
  } catch (const std::exception&) {
    return;
  }
  const json experiment = j.value("experiment", json::object());
  if (!experiment.value("simulated", false)) {
    throw ConfigError(run_dir.string(), "", "holds a measured run (context.json experiment.simulated is false)",
                      "simulate into another folder: --results results/simulated");
  }
}

// The fits a run's simulation uses; null where its value was given, not fitted.
struct RunFits {
  const FittedCoverage* coverage = nullptr;  // the attention pattern's coverage model
  const LatencyNoiseFit* noise = nullptr;
  const IterationOverheadFit* overhead = nullptr;
  const AllreduceFit* allreduce = nullptr;
  const RingComputeFit* ring = nullptr;
};

// fits[key], made (and reported) by `fit` the first time the key is asked for.
template <class Key, class Fit, class MakeFit>
const Fit& fitted_once(std::map<Key, Fit>& fits, const Key& key, MakeFit fit) {
  auto it = fits.find(key);
  if (it == fits.end()) it = fits.emplace(key, fit()).first;
  return it->second;
}

json simulation_context(const RunSpec& run, const SimulateOptions& options, const RunSimulator& sim,
                        const RunFits& fits) {
  const LatencyNoiseFit* noise_fit = fits.noise;
  const Manifest& m = run.manifest;
  json context = collect_system_info();  // the machine that simulated, not the simulated one
  context["seed"] = m.seed;
  context["run"] = run.name;
  context["manifest_name"] = m.name;
  context["manifest_file"] = options.run.manifest_file.string();
  context["command_line"] = options.run.command_line;
  context["started_at_utc"] = utc_timestamp("%Y-%m-%dT%H:%M:%SZ");
  context["experiment"] = {{"method", run.method},
                           {"baseline", run.baseline_method},
                           {"is_baseline", run.is_baseline},
                           {"sweep_point", run.sweep_point},
                           {"simulated", true}};
  const ParallelismSection& p = m.parallelism;
  const ClusterSection& cluster = sim.cluster().cluster();
  context["world"] = {{"world_size", p.dp * p.pp * p.tp * p.cp},
                      {"dp", p.dp},
                      {"pp", p.pp},
                      {"tp", p.tp},
                      {"cp", p.cp},
                      {"stage_layers", p.stage_layers},
                      {"device", cluster.device},
                      {"nodes", sim.cluster().node_count()},
                      {"collective_backend", "simulated"},
                      {"rank_placement", "TP innermost, then CP, then PP, then DP: rank = ((dp_rank * pp + stage) * cp + "
                                         "cp_rank) * tp + tp_rank"}};
  if (p.cp > 1) {
    context["world"]["cp_layout"] = p.cp_layout.name();
    if (p.cp_layout.kind == CpLayoutKind::kStriped) context["world"]["cp_stripe_tokens"] = p.cp_layout.stripe_tokens;
    context["world"]["cp_inner"] = p.cp_inner > 0 ? p.cp_inner : p.cp;
    const RingComputeSection& ring = sim.simulation().ring_compute;
    context["ring_compute"] = {
        {"factor", ring.factor},
        {"step_ms_per_token", ring.step_ms_per_token},
        {"definition", "a ring step's compute = factor x the profile's attention term of the micro-batch x the "
                       "step's share of its kept (query, key) pairs + step_ms_per_token x the rank's tokens "
                       "(harness/sim/cp_stage_compute.h)"}};
    if (fits.ring != nullptr) {
      context["ring_compute"]["from"] = {
          {"kind", "fitted: least squares of each CP rank's measured micro-batch compute (forward and backward "
                   "less ring waits) minus the model's terms outside attention, in the pair and step terms "
                   "(harness/sim/fit/ring_compute_fit.h)"},
          {"results", ring.fit_from},
          {"runs", fits.ring->runs},
          {"observations", fits.ring->samples},
          {"rmse_pct", fits.ring->rmse_pct}};
    } else {
      context["ring_compute"]["from"] = {{"kind", "assumed (simulation.ring_compute.factor)"}};
    }
  }
  context["profile"] = sim.profile().describe();
  context["cluster"] = cluster_section_to_json(cluster);
  context["cluster"]["from"] = m.cluster ? "manifest" : "default (preset h200)";
  if (fits.allreduce != nullptr) {
    context["cluster"]["intra_node_bandwidth_from"] = {
        {"kind", "fitted: the measured collectives' total payload over their total time less their latency hops x "
                 "alpha: DP all-reduces (2 (n - 1) / n x bytes, from the last rank's entry to the last exit) and TP "
                 "micro-batches (the trainer's collectives, mean tp_comm_ms over the TP ranks) "
                 "(harness/sim/fit/allreduce_fit.h)"},
        {"results", cluster.intra_node.fit_from},
        {"runs", fits.allreduce->runs},
        {"samples", fits.allreduce->samples},
        {"tensor_parallel_samples", fits.allreduce->tensor_parallel_samples},
        {"mean_measured_ms", fits.allreduce->mean_ms}};
  }
  const SimulationSection& s = sim.simulation();
  context["coverage_model"] = sim.attention().context(fits.coverage);
  const LatencyNoiseSection& noise = s.latency_noise;
  context["latency_noise"] = {
      {"sigma", noise.sigma},
      {"rank_sigma", noise.rank_sigma},
      {"definition", "micro-batch m of DP rank d in iteration i computes for its prediction x exp(sigma z_idm + "
                     "rank_sigma z_id) on every stage, z standard normal keyed by (seed, i, d, m) and (seed, i, d) "
                     "(harness/sim/latency_noise.h)"}};
  if (noise_fit != nullptr) {
    const LatencyNoiseSums& sums = noise_fit->sums;
    context["latency_noise"]["sigma_from"] = {
        {"kind", noise_fit->components.separable
                     ? "fitted: mean absolute differences of log(measured / predicted) micro-batch time "
                       "between micro-batches of one DP rank and iteration (sigma) and between the rank means "
                       "of one iteration (rank_sigma), matched to the model's (harness/sim/fit/latency_noise_fit.h)"
                     : "fitted: mean absolute differences between the rank means of one iteration, all of it to "
                       "sigma (no DP rank ran 2 micro-batches in one iteration, so the rank term cannot be told "
                       "apart) (harness/sim/fit/latency_noise_fit.h)"},
        {"results", noise.fit_from},
        {"runs", noise_fit->runs},
        {"microbatches", sums.microbatches},
        {"iterations", sums.iterations},
        {"microbatch_pairs_within_ranks", sums.within_pairs},
        {"rank_pairs", sums.rank_pairs()}};
  } else {
    context["latency_noise"]["sigma_from"] = {
        {"kind", noise.enabled() ? "assumed (simulation.latency_noise)"
                                 : "none: every micro-batch takes exactly its prediction"}};
  }
  json optimizer = s.optimizer_ms >= 0
                       ? json("constant " + std::to_string(s.optimizer_ms) + " ms (simulation.optimizer_ms)")
                       : json("28 bytes per trained parameter of the rank / memory_bandwidth_gbps");
  if (s.iteration_overhead.enabled()) {
    optimizer = {{"iteration_overhead_ms", s.iteration_overhead.ms},
                 {"definition", "per rank and iteration, after its all-reduce: drawing and packing the batch, the "
                                "gradient norm and the optimizer step (simulation.iteration_overhead)"}};
    if (fits.overhead != nullptr) {
      optimizer["from"] = {{"kind", "fitted: mean over measured (iteration, DP rank) of the time outside compute, "
                                    "communication and planning, the least of the rank's pipeline stages "
                                    "(harness/sim/fit/iteration_overhead_fit.h)"},
                           {"results", s.iteration_overhead.fit_from},
                           {"runs", fits.overhead->runs},
                           {"samples", fits.overhead->samples}};
    } else {
      optimizer["from"] = {{"kind", "assumed (simulation.iteration_overhead.ms)"}};
    }
  }
  context["simulator"] = {
      {"forward_fraction", s.forward_fraction},
      {"optimizer", optimizer},
      {"include_head", sim.profile().predictor->options().include_head},
      {"loss", "not simulated: loss and grad_norm are omitted from records.jsonl"},
      {"balance_overhead", options.fixed_plan_ms >= 0 ? "fixed " + std::to_string(options.fixed_plan_ms) + " ms"
                                                      : "measured wall time of the BatchPlanner call"}};
  return context;
}

// Fitting to a run whose ranks waited for a core (runqueue_wait_pct above the report's
// threshold) fits the machine's contention along with the method: say so, once per run.
void warn_if_contended(const std::vector<std::string>& runs, std::set<std::string>& warned, std::ostream& log) {
  for (const std::string& run : runs) {
    if (!warned.insert(run).second) continue;
    // The fit has read these records already (a bad line would have stopped it).
    const std::optional<double> pct =
        runqueue_wait_pct(read_iteration_records(std::filesystem::path(run) / "records.jsonl"));
    if (pct && *pct > kContendedRunqueueWaitPct) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.1f%%", *pct);
      log << "WARNING: fitting to " << run << ", whose ranks waited " << text
          << " of their time for a free CPU core (runqueue_wait_pct): the fit takes in that contention\n";
    }
  }
}

// The runs of a manifest with the models fitted to measured runs (simulation.*.fit_from)
// written into their manifests, each fitted once per source (coverage: results folder and
// block size; latency noise and iteration overhead: results folder). Done before any
// decision, so that the resolved manifests carry the values the runs use. The fits live
// in the maps; of_run points into them (std::map nodes stay put when the struct moves).
struct FittedRuns {
  std::vector<RunSpec> runs;
  // (results folder, pattern, spread) -> the coverage fit; patterns that keep the same
  // keys share one (AttentionPattern::same_selection).
  struct CoverageFitEntry {
    std::string from;
    AttentionOptions attention;
    double spread = 0;
    FittedCoverage fit;
  };
  std::list<CoverageFitEntry> coverage;
  std::map<std::string, LatencyNoiseFit> noise;
  std::map<std::string, IterationOverheadFit> overhead;
  std::map<std::pair<std::string, double>, AllreduceFit> allreduce;
  // (results folder, attention object, coverage spread, profile) -> the fit
  std::map<std::tuple<std::string, std::string, double, std::string>, RingComputeFit> ring;
  std::map<std::string, RunFits> of_run;
  std::set<std::string> warned_contended;  // runs warn_if_contended has looked at
};

FittedRuns fit_runs(const Manifest& manifest, const RunManifestOptions& options,
                    const std::optional<std::string>& profile_override, std::ostream& log) {
  FittedRuns out;
  out.runs = select_runs(manifest, options);
  const std::string manifest_file = options.manifest_file.string();
  for (RunSpec& run : out.runs) {
    if (!run.manifest.simulation) continue;
    SimulationSection& simulation = *run.manifest.simulation;
    RunFits& fits = out.of_run[run.name];
    const AttentionOptions& attention = run.manifest.methods.at(0).attention;
    if (!simulation.coverage.fit_from.empty()) {
      const std::string& from = simulation.coverage.fit_from;
      CoverageSection& c = simulation.coverage;
      const SimulationCoverage given{c.model, c.exponent, c.rule_keys, c.spread, c.fit_from};
      auto entry = std::find_if(out.coverage.begin(), out.coverage.end(), [&](const FittedRuns::CoverageFitEntry& e) {
        return e.from == from && e.spread == c.spread && e.attention.pattern().same_selection(attention.pattern());
      });
      if (entry == out.coverage.end()) {
        FittedCoverage fit = attention_plugin(attention).fit_coverage(attention.pattern(), given, from, manifest_file,
                                                                     "$.simulation.coverage.fit_from", log);
        entry = out.coverage.insert(out.coverage.end(), {from, attention, c.spread, std::move(fit)});
      }
      fits.coverage = &entry->fit;
      c.exponent = entry->fit.coverage.exponent;
      c.rule_keys = entry->fit.coverage.rule_keys;
      c.spread = entry->fit.coverage.spread;
      warn_if_contended(entry->fit.runs, out.warned_contended, log);
    }
    if (!simulation.latency_noise.fit_from.empty()) {
      const std::string& from = simulation.latency_noise.fit_from;
      fits.noise = &fitted_once(out.noise, from, [&] {
        LatencyNoiseFit fit = fit_latency_noise_from_results(from, manifest_file, "$.simulation.latency_noise.fit_from");
        log << "latency noise fitted to " << fit.sums.microbatches << " micro-batches in " << fit.sums.iterations
            << " iterations of " << fit.runs.size() << " measured runs under " << from
            << ": sigma = " << fit.components.sigma << " per micro-batch, rank_sigma = " << fit.components.rank_sigma
            << " per DP rank and iteration"
            << (fit.components.separable ? "" : " (not separable: one micro-batch per rank)") << "\n";
        return fit;
      });
      simulation.latency_noise.sigma = fits.noise->components.sigma;
      simulation.latency_noise.rank_sigma = fits.noise->components.rank_sigma;
      warn_if_contended(fits.noise->runs, out.warned_contended, log);
    }
    if (!simulation.iteration_overhead.fit_from.empty()) {
      const std::string& from = simulation.iteration_overhead.fit_from;
      fits.overhead = &fitted_once(out.overhead, from, [&] {
        IterationOverheadFit fit =
            fit_iteration_overhead_from_results(from, manifest_file, "$.simulation.iteration_overhead.fit_from");
        log << "iteration overhead fitted to " << fit.samples << " (iteration, DP rank) timelines of " << fit.runs.size()
            << " measured runs under " << from << ": " << fit.ms << " ms\n";
        return fit;
      });
      simulation.iteration_overhead.ms = fits.overhead->ms;
      warn_if_contended(fits.overhead->runs, out.warned_contended, log);
    }
    if (run.manifest.cluster && !run.manifest.cluster->intra_node.fit_from.empty()) {
      LinkSection& link = run.manifest.cluster->intra_node;
      fits.allreduce = &fitted_once(out.allreduce, std::make_pair(link.fit_from, link.alpha_us), [&] {
        AllreduceFit fit =
            fit_allreduce_from_results(link.fit_from, link.alpha_us, manifest_file, "$.cluster.intra_node.fit_from");
        const int64_t data_parallel = fit.samples - fit.tensor_parallel_samples;
        log << "intra-node bandwidth fitted to ";
        if (data_parallel > 0) log << data_parallel << " DP all-reduces" << (fit.tensor_parallel_samples > 0 ? " and " : "");
        if (fit.tensor_parallel_samples > 0) log << fit.tensor_parallel_samples << " TP micro-batches' collectives";
        log << " (mean " << fit.mean_ms << " ms) of " << fit.runs.size() << " measured runs under " << link.fit_from << ": "
            << fit.bandwidth_gbps << " Gbit/s with alpha " << link.alpha_us << " us\n";
        return fit;
      });
      link.bandwidth_gbps = fits.allreduce->bandwidth_gbps;
      warn_if_contended(fits.allreduce->runs, out.warned_contended, log);
    }
    if (!simulation.ring_compute.fit_from.empty() && run.manifest.parallelism.cp > 1) {
      // Fitted against the profile the run simulates with.
      const Manifest& m = run.manifest;
      const SimProfile profile =
          load_sim_profile(m, make_dataset(m.data, m.seed, dataset_limits(m))->max_length(), profile_override);
      const std::string& from = simulation.ring_compute.fit_from;
      // The attention object (its pattern and parameters) and the coverage settings (the
      // ring work's) tell the fits apart.
      const CoverageSection& c = simulation.coverage;
      const auto key = std::make_tuple(from, method_to_json(m.methods.at(0)).at("attention").dump(), c.spread,
                                       profile.describe().dump());
      fits.ring = &fitted_once(out.ring, key, [&] {
        const std::unique_ptr<AttentionSimulation> model = attention_plugin(attention).simulation(
            attention.pattern(), SimulationCoverage{c.model, c.exponent, c.rule_keys, c.spread, c.fit_from}, m.file);
        RingComputeFit fit = fit_ring_compute_from_results(from, *profile.predictor, attention, *model, manifest_file,
                                                           "$.simulation.ring_compute.fit_from");
        log << "ring compute (" << attention.name() << ") fitted to " << fit.samples
            << " (micro-batch, CP rank) computes of " << fit.runs.size() << " measured CP runs under " << from
            << ": factor " << fit.factor << " on the profile's attention, " << fit.step_ms_per_token
            << " ms per ring step and query token (RMSE " << fit.rmse_pct << " %)\n";
        return fit;
      });
      simulation.ring_compute.factor = fits.ring->factor;
      simulation.ring_compute.step_ms_per_token = fits.ring->step_ms_per_token;
      warn_if_contended(fits.ring->runs, out.warned_contended, log);
    }
  }
  return out;
}

}  // namespace

ClusterSection simulation_cluster(const Manifest& m) { return m.cluster ? *m.cluster : cluster_preset("h200"); }

std::vector<RunSpec> simulated_runs(const Manifest& manifest, const RunManifestOptions& options,
                                    const std::optional<std::string>& profile, std::ostream& log) {
  return fit_runs(manifest, options, profile, log).runs;
}

RunManifestResult simulate_manifest(const Manifest& manifest, const SimulateOptions& options, std::ostream& log) {
  RunManifestResult result;
  result.manifest_dir = options.run.results_root / manifest.name;
  result.lock = std::make_shared<const FolderLock>(
      lock_results_folder(result.manifest_dir, options.run.command_line, log));
  FittedRuns fitted = fit_runs(manifest, options.run, options.profile, log);
  std::vector<RunSpec>& runs = fitted.runs;
  print_memory_estimate(runs, log, /*simulated=*/true);
  // Decide every run first, so that a conflict stops the command before anything runs.
  std::vector<RunDecision> decisions;
  for (const RunSpec& run : runs) {
    const fs::path run_dir = result.manifest_dir / run.name;
    refuse_measured_folder(run_dir);
    decisions.push_back(decide_run(run_dir, manifest_to_json(run.manifest), options.run.force,
                                   options.run.manifest_file.string()));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunSpec& run = runs[i];
    RunDecision decision = decisions[i];
    const fs::path run_dir = result.manifest_dir / run.name;
    if (decision.disposition == Disposition::kSkip) {
      log << "skipping " << run_dir.string() << ": already complete (pass --force to rerun)\n";
      result.skipped.push_back(run.name);
      continue;
    }
    if (decision.disposition == Disposition::kResume) {
      // Simulations write no checkpoints; any left over are not theirs to resume.
      decision.disposition = Disposition::kRestartIncomplete;
      decision.reason = "incomplete simulation: restarted from iteration 0";
    }
    const Manifest& m = run.manifest;
    const Qwen2Config& config = m.model.config;
    const int64_t longest = make_dataset(m.data, m.seed, dataset_limits(m))->max_length();
    RunSimulatorOptions sim_options;
    sim_options.fixed_plan_ms = options.fixed_plan_ms;
    RunSimulator sim(m, load_sim_profile(m, longest, options.profile), simulation_cluster(m), sim_options);
    prepare_run_folder(run_dir, decision, manifest_to_json(m),
                       simulation_context(run, options, sim, fitted.of_run[run.name]), log);
    RunFolderWriter writer(run_dir);
    const auto wall_start = std::chrono::steady_clock::now();
    for (int64_t it = 0; it < m.train.iterations; ++it) {
      SimulatedIteration step = sim.simulate_iteration(it);
      writer.append(step.record, step.timeline);
      if (it == 0 || (it + 1) % options.run.progress_every == 0 || it + 1 == m.train.iterations) {
        char line[256];
        std::snprintf(line, sizeof(line), "[%s/%s] simulated iteration %lld/%lld  %.1f ms  bubble %.3f  imbalance %.2f\n",
                      m.name.c_str(), run.name.c_str(), static_cast<long long>(it + 1),
                      static_cast<long long>(m.train.iterations), step.record.iter_ms, step.record.bubble_fraction,
                      step.record.imbalance);
        log << line << std::flush;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    writer.finish(m.train.iterations, seconds, false);
    result.ran.push_back(run.name);
  }
  write_report(result.manifest_dir);
  return result;
}

}  // namespace sb
