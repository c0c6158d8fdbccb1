#pragma once
// Data sets as users download them: JSON lines (one object per line, blank lines
// skipped) or one JSON array of objects (LongBench v2's data.json). Objects keep their
// key order.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <vector>

namespace sb {

// ConfigError naming the file (and line) when it is missing or malformed.
std::vector<nlohmann::ordered_json> read_json_records(const std::filesystem::path& path);

}  // namespace sb
