#pragma once
// A run folder as the simulator's fits read it (harness/records/measured_runs.h): context.json
// with experiment.simulated, records.jsonl, and manifest.resolved.json when given.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <vector>

#include "harness/records/iteration_record.h"

namespace sb::test {

inline void write_measured_run_folder(const std::filesystem::path& dir, bool simulated,
                                      const std::vector<IterationRecord>& records,
                                      const nlohmann::json& resolved_manifest = nullptr) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "context.json") << nlohmann::json{{"experiment", {{"simulated", simulated}}}}.dump();
  if (!resolved_manifest.is_null()) std::ofstream(dir / "manifest.resolved.json") << resolved_manifest.dump();
  std::ofstream out(dir / "records.jsonl");
  for (const IterationRecord& r : records) out << iteration_record_to_json(r).dump() << "\n";
}

}  // namespace sb::test
