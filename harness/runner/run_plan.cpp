#include "harness/runner/run_plan.h"

#include <algorithm>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/config/run_spec_json.h"

namespace sb {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The runs grouped by their point on the non-method sweep axes (seeds, data, ...), the
// groups in the order they first appear, each group in manifest method order. A speedup
// compares a run with the baseline at the same non-method point, so those runs execute
// back to back: on a machine whose speed drifts over minutes (seen here: 15-25 % within
// one invocation) the comparison is then made close in time.
std::string comparison_key(const RunSpec& run) {
  json key = json::object();
  for (const auto& [path, value] : run.sweep_point.items()) {
    if (path.rfind("methods.", 0) != 0) key[path] = value;
  }
  return key.dump();
}

std::vector<RunSpec> in_execution_order(std::vector<RunSpec> runs) {
  std::vector<std::string> keys;
  for (const RunSpec& run : runs) {
    const std::string key = comparison_key(run);
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  std::stable_sort(runs.begin(), runs.end(), [&](const RunSpec& a, const RunSpec& b) {
    return std::find(keys.begin(), keys.end(), comparison_key(a)) < std::find(keys.begin(), keys.end(), comparison_key(b));
  });
  return runs;
}

// One job has one set of ranks: a sweep over the layout is for `simulate`, or for one
// manifest per layout.
void check_same_ranks(const Manifest& manifest, const std::vector<RunSpec>& runs) {
  const ParallelismSection& job = manifest.parallelism;
  const auto layout_text = [](const ParallelismSection& p) {
    return "dp " + std::to_string(p.dp) + " x pp " + std::to_string(p.pp) + " x cp " + std::to_string(p.cp) +
           " x tp " + std::to_string(p.tp);
  };
  for (const RunSpec& run : runs) {
    const ParallelismSection& p = run.manifest.parallelism;
    if (p.dp == job.dp && p.pp == job.pp && p.cp == job.cp && p.tp == job.tp) continue;
    const std::string axis = p.dp != job.dp   ? "parallelism.dp"
                             : p.pp != job.pp ? "parallelism.pp"
                             : p.cp != job.cp ? "parallelism.cp"
                                              : "parallelism.tp";
    throw ConfigError(manifest.file, "$.sweep[\"" + axis + "\"]",
                      "changes the ranks of the job (run " + run.name + " has " + layout_text(p) + ", the manifest " +
                          layout_text(job) + "); `run` starts one set of ranks",
                      "write one manifest per layout, or sweep the layout with `sparsebalance simulate`");
  }
}

}  // namespace

std::vector<RunSpec> RunPlan::pending() const {
  std::vector<RunSpec> out;
  for (const PlannedRun& run : runs) {
    if (run.decision.disposition != Disposition::kSkip) out.push_back(run.spec);
  }
  return out;
}

std::vector<std::vector<size_t>> RunPlan::comparisons() const {
  std::vector<std::vector<size_t>> groups;
  std::string previous;
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string key = comparison_key(runs[i].spec);
    if (groups.empty() || key != previous) groups.emplace_back();
    groups.back().push_back(i);
    previous = key;
  }
  return groups;
}

std::vector<RunSpec> select_runs(const Manifest& manifest, const RunSelection& selection) {
  std::vector<RunSpec> runs = in_execution_order(expand_runs(manifest));
  if (!selection.only) return runs;
  std::vector<RunSpec> selected;
  std::string names;
  for (auto& run : runs) {
    names += (names.empty() ? "" : ", ") + run.name;
    if (run.name == *selection.only) selected.push_back(run);
  }
  if (selected.empty()) {
    throw ConfigError("--only", "",
                      "no run named \"" + *selection.only + "\" in " + selection.manifest_file.string(),
                      "use one of: " + names);
  }
  return selected;
}

RunPlan plan_runs(const Manifest& manifest, const RunSelection& selection) {
  RunPlan plan;
  plan.manifest_name = manifest.name;
  plan.manifest_file = selection.manifest_file.string();
  plan.manifest_dir = selection.results_root / manifest.name;
  plan.interleave_block_iterations = manifest.interleave_block_iterations;
  std::vector<RunSpec> runs = select_runs(manifest, selection);
  check_same_ranks(manifest, runs);
  for (RunSpec& run : runs) {
    RunDecision decision = decide_run(plan.manifest_dir / run.name, manifest_to_json(run.manifest), selection.force,
                                      plan.manifest_file);
    plan.runs.push_back({std::move(run), std::move(decision)});
  }
  return plan;
}

FolderLock lock_results_folder(const fs::path& manifest_dir, const std::string& command_line, std::ostream& log) {
  json previous;
  FolderLock lock = FolderLock::acquire(manifest_dir, command_line, &previous);
  if (!previous.is_null()) {
    log << "note: the previous writer of " << manifest_dir.string() << ", " << describe_lock_holder(previous)
        << ", ended without releasing it (killed or crashed); its incomplete runs resume or restart as usual\n";
  }
  return lock;
}

json run_plan_to_json(const RunPlan& plan) {
  json runs = json::array();
  for (const PlannedRun& run : plan.runs) {
    runs.push_back({{"run", run_spec_to_json(run.spec)}, {"decision", run_decision_to_json(run.decision)}});
  }
  return {{"manifest_name", plan.manifest_name},
          {"manifest_file", plan.manifest_file},
          {"manifest_dir", plan.manifest_dir.string()},
          {"interleave_block_iterations", plan.interleave_block_iterations},
          {"runs", runs}};
}

RunPlan run_plan_from_json(const json& j) {
  RunPlan plan;
  plan.manifest_name = j.at("manifest_name").get<std::string>();
  plan.manifest_file = j.at("manifest_file").get<std::string>();
  plan.manifest_dir = j.at("manifest_dir").get<std::string>();
  plan.interleave_block_iterations = j.at("interleave_block_iterations").get<int64_t>();
  for (const json& run : j.at("runs")) {
    plan.runs.push_back({run_spec_from_json(run.at("run")), run_decision_from_json(run.at("decision"))});
  }
  if (plan.runs.empty()) throw std::invalid_argument("a run plan without runs");
  return plan;
}

void write_run_plan(const fs::path& file, const RunPlan& plan) {
  write_file_atomic(file, run_plan_to_json(plan).dump());
}

RunPlan read_run_plan(const fs::path& file) {
  try {
    return run_plan_from_json(json::parse(read_file(file)));
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw ConfigError(file.string(), "", std::string("is not a run plan: ") + e.what(),
                      "run the manifest again with `sparsebalance run MANIFEST`, which writes a fresh plan");
  }
}

}  // namespace sb
