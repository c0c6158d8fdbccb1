#pragma once
// The top-level fields where two JSON objects differ, for messages that say what does
// not match: "hidden_size 896 vs 1536, rope_theta (absent) vs 10000.0", `a`'s value
// first; "" when they agree.

#include <nlohmann/json.hpp>

#include <string>

namespace sb {

std::string json_field_differences(const nlohmann::json& a, const nlohmann::json& b);

}  // namespace sb
