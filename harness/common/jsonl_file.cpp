#include "harness/common/jsonl_file.h"

#include <sstream>

#include "harness/common/atomic_file.h"
#include "harness/common/errors.h"

namespace sb {

void for_each_jsonl_value(const std::filesystem::path& file, const std::string& what,
                          const std::function<void(const nlohmann::json&)>& each) {
  std::istringstream in(read_file(file));
  std::string line;
  int64_t line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    if (line.empty()) continue;
    try {
      each(nlohmann::json::parse(line));
    } catch (const std::exception& e) {
      throw ConfigError(file.string() + ":" + std::to_string(line_number), "",
                        "is not " + what + ": " + e.what(),
                        "delete the broken line (a run killed mid-write may leave it cut off) and rerun");
    }
  }
}

}  // namespace sb
