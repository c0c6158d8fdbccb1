#pragma once
// Flag validators whose messages name the bound a user must meet. CLI11's
// PositiveNumber prints "Value 0 not in range 0.000000 to 1.797...e308", which reads as
// if 0 were allowed.

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/errors.h"

namespace sb::cli {

// An integer or decimal number >= `least` ("must be 1 or more, got 0").
inline CLI::Validator at_least(int64_t least) {
  return CLI::Validator(
      [least](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "must be a number, got \"" + text + "\"";
        if (value < static_cast<double>(least)) return "must be " + std::to_string(least) + " or more, got " + text;
        return "";
      },
      ">=" + std::to_string(least));
}

// --results names a folder (created when missing), never a file.
inline void check_results_folder(const std::string& results) {
  std::error_code ignored;
  if (std::filesystem::exists(results, ignored) && !std::filesystem::is_directory(results, ignored)) {
    throw ConfigError("--results", "", results + " is a file, not a folder",
                      "pass a folder for the results (it is created when missing)");
  }
}

}  // namespace sb::cli
