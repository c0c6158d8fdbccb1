#include "harness/records/measured_runs.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "common/errors.h"
#include "harness/common/atomic_file.h"
#include "harness/records/iteration_record.h"

namespace sb {
namespace {

namespace fs = std::filesystem;

bool is_simulated(const fs::path& run_dir) {
  try {
    const nlohmann::json c = nlohmann::json::parse(read_file(run_dir / "context.json"));
    return c.value("experiment", nlohmann::json::object()).value("simulated", false);
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::vector<fs::path> measured_run_dirs(const fs::path& results_dir, const std::string& manifest_file,
                                        const std::string& json_path) {
  if (!fs::is_directory(results_dir)) {
    throw ConfigError(manifest_file, json_path, "names " + results_dir.string() + ", which is not a folder",
                      "run the measured experiment first (sparsebalance run ...), or give the value instead");
  }
  std::vector<fs::path> dirs;
  if (fs::exists(results_dir / "records.jsonl")) dirs.push_back(results_dir);
  for (const auto& entry : fs::directory_iterator(results_dir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "records.jsonl")) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  dirs.erase(std::remove_if(dirs.begin(), dirs.end(), is_simulated), dirs.end());
  return dirs;
}

std::vector<TimelineIteration> measured_timeline_iterations(const fs::path& run_dir) {
  if (!fs::exists(run_dir / "timeline_events.jsonl")) return {};
  std::map<int64_t, bool> warmup;
  for (const IterationRecord& r : read_iteration_records(run_dir / "records.jsonl")) warmup[r.iteration] = r.warmup;
  std::vector<TimelineIteration> measured;
  for (TimelineIteration& iteration : read_timeline_events(run_dir / "timeline_events.jsonl")) {
    const auto flag = warmup.find(iteration.iteration);
    if (flag != warmup.end() && !flag->second) measured.push_back(std::move(iteration));
  }
  return measured;
}

MeasuredRunLayout measured_run_layout(const nlohmann::json& resolved, const std::string& file) {
  MeasuredRunLayout out;
  const auto fail = [&file](const std::string& key) {
    throw ConfigError(file, "$.parallelism." + key, "is not what a resolved manifest holds",
                      "point fit_from at the results of `sparsebalance run`");
  };
  if (!resolved.is_object() || !resolved.contains("parallelism")) return out;
  const nlohmann::json& p = resolved["parallelism"];
  if (!p.is_object()) fail("");
  if (p.contains("cp")) {
    if (!p["cp"].is_number_integer() || p["cp"].get<int64_t>() < 1) fail("cp");
    out.cp = p["cp"].get<int64_t>();
  }
  if (out.cp <= 1) return out;
  try {
    if (p.contains("cp_layout")) out.cp_layout.kind = cp_layout_options().from_name(p.at("cp_layout").get<std::string>());
  } catch (const std::exception&) {
    fail("cp_layout");
  }
  if (p.contains("cp_stripe_tokens")) {
    if (!p["cp_stripe_tokens"].is_number_integer() || p["cp_stripe_tokens"].get<int64_t>() < 1) fail("cp_stripe_tokens");
    out.cp_layout.stripe_tokens = p["cp_stripe_tokens"].get<int64_t>();
  }
  return out;
}

}  // namespace sb
