#include "harness/records/record_checks.h"

#include <map>

namespace sb {

std::string record_sequence_problem(const std::vector<IterationRecord>& records,
                                    std::optional<int64_t> expected_iterations) {
  std::map<int64_t, size_t> first_record;  // iteration -> its first record (1-based)
  for (size_t i = 0; i < records.size(); ++i) {
    const int64_t iteration = records[i].iteration;
    const auto expected = static_cast<int64_t>(i);
    const std::string where = "record " + std::to_string(i + 1);
    if (const auto seen = first_record.find(iteration); seen != first_record.end()) {
      return "iteration " + std::to_string(iteration) + " is recorded twice (records " + std::to_string(seen->second) +
             " and " + std::to_string(i + 1) + ")";
    }
    if (iteration > expected) {
      const std::string missing = iteration - 1 > expected
                                      ? "iterations " + std::to_string(expected) + "-" + std::to_string(iteration - 1) + " are"
                                      : "iteration " + std::to_string(expected) + " is";
      return missing + " missing (" + where + " is iteration " + std::to_string(iteration) + ")";
    }
    if (iteration < expected) {
      return where + " is iteration " + std::to_string(iteration) + ", out of order";
    }
    first_record.emplace(iteration, i + 1);
  }
  if (expected_iterations && static_cast<int64_t>(records.size()) != *expected_iterations) {
    return "the run is marked complete with " + std::to_string(records.size()) + " of the " +
           std::to_string(*expected_iterations) + " iterations its manifest asks for";
  }
  return "";
}

}  // namespace sb
